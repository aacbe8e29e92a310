// Orders in which eviction candidates are taken (docs/reference_semantics.md, "Eviction"). Smaller
// priority is evicted first; ties are broken by node id (creation order), so the order is total.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "io/name_table.h"

namespace kvlanes {

enum class EvictionOrder { kLru, kLfu, kFifo, kSlru };

inline constexpr NameTable<EvictionOrder, 4> kEvictionOrderNames{{{{EvictionOrder::kLru, "lru"},
                                                                   {EvictionOrder::kLfu, "lfu"},
                                                                   {EvictionOrder::kFifo, "fifo"},
                                                                   {EvictionOrder::kSlru, "slru"}}},
                                                                 "eviction order"};

// A candidate's position in eviction order: compared lexicographically (a, b, id).
struct EvictionPriority {
  uint64_t a = 0;
  uint64_t b = 0;
  uint32_t id = 0;
  friend auto operator<=>(const EvictionPriority&, const EvictionPriority&) = default;
};

}  // namespace kvlanes

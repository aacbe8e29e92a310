// Orders in which eviction candidates are taken (DOMAIN.md section 3). Smaller priority is
// evicted first; ties are broken by node id (creation order), so the order is total.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvlanes {

enum class EvictionOrder { kLru, kLfu, kFifo, kSlru };

// Throws InputError listing the valid names ("lru", "lfu", "fifo", "slru").
EvictionOrder ParseEvictionOrder(std::string_view name, const std::string& where = "cache.eviction");
const char* EvictionOrderName(EvictionOrder order);

// A candidate's position in eviction order: compared lexicographically (a, b, id).
struct EvictionPriority {
  uint64_t a = 0;
  uint64_t b = 0;
  uint32_t id = 0;
  friend auto operator<=>(const EvictionPriority&, const EvictionPriority&) = default;
};

}  // namespace kvlanes

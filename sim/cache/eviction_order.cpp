#include "sim/cache/eviction_order.h"

#include "traces/input_error.h"

namespace kvlanes {

EvictionOrder ParseEvictionOrder(std::string_view name, const std::string& where) {
  if (name == "lru") return EvictionOrder::kLru;
  if (name == "lfu") return EvictionOrder::kLfu;
  if (name == "fifo") return EvictionOrder::kFifo;
  if (name == "slru") return EvictionOrder::kSlru;
  throw InputError("", 0, where,
                   "unknown eviction order '" + std::string(name) + "' (valid: lru, lfu, fifo, slru)");
}

const char* EvictionOrderName(EvictionOrder order) {
  switch (order) {
    case EvictionOrder::kLru: return "lru";
    case EvictionOrder::kLfu: return "lfu";
    case EvictionOrder::kFifo: return "fifo";
    case EvictionOrder::kSlru: return "slru";
  }
  return "?";
}

}  // namespace kvlanes

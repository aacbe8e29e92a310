// `lru`: the lanes planner evicting least recently used first: (last_access, node id).
#include "policies/ordered_lanes_policy.h"
#include "policies/registry.h"

namespace kvlanes {

std::unique_ptr<CachePolicy> MakeLruPolicy(const PolicyInputs& in) {
  return std::make_unique<OrderedLanesPolicy>(in, "lru", EvictionOrder::kLru);
}

}  // namespace kvlanes

// `lfu`: the lanes planner evicting least frequently used first: (hit_count, last_access, node id).
#include "policies/ordered_lanes_policy.h"
#include "policies/registry.h"

namespace kvlanes {

std::unique_ptr<CachePolicy> MakeLfuPolicy(const PolicyInputs& in) {
  return std::make_unique<OrderedLanesPolicy>(in, "lfu", EvictionOrder::kLfu);
}

}  // namespace kvlanes

// `lfu`: the lanes planner evicting least frequently used first: (hit_count, last_access, node id).
#include "policies/ordered_lanes_policy.h"
#include "policies/registry.h"

namespace kvlanes {

std::unique_ptr<CachePolicy> MakeLfuPolicy(const ReplayConfig& cfg, const Trace&) {
  return std::make_unique<OrderedLanesPolicy>(cfg, "lfu", EvictionOrder::kLfu);
}

}  // namespace kvlanes

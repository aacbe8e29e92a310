// `slru`: the lanes planner evicting segmented LRU: nodes hit once before nodes hit twice or more,
// LRU inside each: (hit_count >= 2, last_access, node id).
#include "policies/ordered_lanes_policy.h"
#include "policies/registry.h"

namespace kvlanes {

std::unique_ptr<CachePolicy> MakeSlruPolicy(const PolicyInputs& in) {
  return std::make_unique<OrderedLanesPolicy>(in, "slru", EvictionOrder::kSlru);
}

}  // namespace kvlanes

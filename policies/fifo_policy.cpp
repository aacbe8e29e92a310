// `fifo`: the lanes planner evicting oldest node first: creation order (node id); a split head is a
// new node.
#include "policies/ordered_lanes_policy.h"
#include "policies/registry.h"

namespace kvlanes {

std::unique_ptr<CachePolicy> MakeFifoPolicy(const PolicyInputs& in) {
  return std::make_unique<OrderedLanesPolicy>(in, "fifo", EvictionOrder::kFifo);
}

}  // namespace kvlanes

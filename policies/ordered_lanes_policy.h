// The eviction-order policies (lru, lfu, fifo, slru): the `lanes` planner with the candidate
// order fixed by the policy's name instead of cache.eviction. The name is what users compare
// and what golden files pin, so `--policies lru,lfu` cannot be silently changed by a config's
// cache.eviction; the report's `eviction_order` records the order used. One factory file each.
#pragma once

#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"

namespace kvlanes {

class OrderedLanesPolicy final : public ConfiguredPolicy {
 public:
  OrderedLanesPolicy(const PolicyInputs& in, const char* name, EvictionOrder order)
      : ConfiguredPolicy(in), name_(name) {
    FixOrder(order);
  }
  std::string_view Name() const override { return name_; }
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    return PlanCascadeEviction(view, demand, PlanScope::kLanes);
  }

 private:
  const char* name_;
};

}  // namespace kvlanes

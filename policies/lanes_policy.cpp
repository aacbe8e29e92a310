// `lanes`: owner-lane aware eviction. Plans victims per deficit lane, including ancestors that
// the cascade unlocks, so a lane deficit is met whenever the unlocked pages on that lane
// suffice. With cp_size 1 it is exactly the reference semantics.
#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

class LanesPolicy final : public ConfiguredPolicy {
 public:
  using ConfiguredPolicy::ConfiguredPolicy;
  std::string_view Name() const override { return "lanes"; }
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    return PlanCascadeEviction(view, demand, PlanScope::kLanes);
  }
};

}  // namespace

std::unique_ptr<CachePolicy> MakeLanesPolicy(const PolicyInputs& in) {
  return std::make_unique<LanesPolicy>(in);
}

}  // namespace kvlanes

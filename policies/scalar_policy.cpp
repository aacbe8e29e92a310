// `scalar`: the baseline that ignores lanes. It counts capacity as one rank-wide total and
// evicts in eviction order until the total suffices; when a lane is still short the engine
// drops the request's new pages (or its load-back) and counts a lane deficit failure. It exists
// to show what goes wrong; with cp_size 1 it equals the reference semantics.
#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

class ScalarPolicy final : public ConfiguredPolicy {
 public:
  using ConfiguredPolicy::ConfiguredPolicy;
  std::string_view Name() const override { return "scalar"; }
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    return PlanCascadeEviction(view, demand, PlanScope::kScalar);
  }
};

}  // namespace

std::unique_ptr<CachePolicy> MakeScalarPolicy(const PolicyInputs& in) {
  return std::make_unique<ScalarPolicy>(in);
}

}  // namespace kvlanes

// `bypass-long`: the lanes planner (order cache.eviction), but a request's new extent is cached
// on device only up to kMaxNewPages pages; the rest is computed and not kept (bypass), so one
// long one-off prompt cannot flush the reused prefixes. Everything else is the config's.
#include <algorithm>

#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "policies/registry.h"

namespace {

constexpr int64_t kMaxNewPages = 256;

class BypassLongPolicy final : public kvlanes::ConfiguredPolicy {
 public:
  using ConfiguredPolicy::ConfiguredPolicy;
  std::string_view Name() const override { return "bypass-long"; }
  kvlanes::EvictionPlan PlanEviction(const kvlanes::CacheView& view,
                                     const kvlanes::LaneDemand& demand) const override {
    return kvlanes::PlanCascadeEviction(view, demand, kvlanes::PlanScope::kLanes);
  }
  int64_t AdmitDevicePages(const kvlanes::CacheView&,
                           const kvlanes::DeviceOffer& offer) const override {
    return std::min(offer.pages, kMaxNewPages);
  }
};

const kvlanes::PolicyRegistrar kRegistrar{
    "bypass-long", "lanes, caching at most 256 new pages of a request (the rest bypassed)",
    [](const kvlanes::PolicyInputs& in) {
      return std::unique_ptr<kvlanes::CachePolicy>(std::make_unique<BypassLongPolicy>(in));
    }};

}  // namespace

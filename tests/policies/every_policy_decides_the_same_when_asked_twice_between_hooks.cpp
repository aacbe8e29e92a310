// The policy seam's contract (sim/cache/policy.h): decisions are const and a policy's own state
// changes only in the hooks the engine calls. So a decision asked again, with no hook between,
// gives the same answer. A probe wraps each registered policy and, in the hook that follows each
// eviction plan and each admission, asks the wrapped policy again and compares.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "policies/forwarding_policy.h"
#include "policies/registry.h"
#include "sim/engine/replay_engine.h"
#include "tests/policies/replay_cases.h"

namespace kvlanes::test {
namespace {

class AskTwice final : public ForwardingPolicy {
 public:
  AskTwice(std::string name, std::unique_ptr<CachePolicy> base)
      : ForwardingPolicy(std::move(name), std::move(base)) {}

  void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) override {
    const EvictionPlan again = base().PlanEviction(view, demand);
    ++plans;
    if (again.victims != plan.victims || again.tail_pages != plan.tail_pages ||
        again.cascade_victims != plan.cascade_victims)
      ++plans_differing;
    ForwardingPolicy::OnEvict(view, demand, plan);
  }
  void OnAdmit(const CacheView& view, const DeviceOffer& offer, int64_t admitted) override {
    ++offers;
    if (base().AdmitDevicePages(view, offer) != admitted) ++offers_differing;
    ForwardingPolicy::OnAdmit(view, offer, admitted);
  }

  int64_t plans = 0, plans_differing = 0, offers = 0, offers_differing = 0;
};

}  // namespace

TEST_CASE("every registered policy plans and admits the same when asked twice between hooks") {
  // Device-only, host tier and several lanes: the queue policies' moves, the composites'
  // histories and the oracle's index are all exercised.
  const std::vector<ReplayCase> cases = ReplayCases();
  std::map<std::string, int64_t> plans;  // per policy, over the cases
  for (size_t ci : {size_t{0}, size_t{1}, size_t{2}}) {
    const ReplayCase& c = cases[ci];
    for (const PolicyInfo& info : RegisteredPolicies()) {
      CAPTURE(c.name);
      CAPTURE(info.name);
      const ReplayConfig cfg = CaseConfig(c, info.name);
      const Trace trace = CaseTrace(c, cfg);
      AskTwice probe(info.name, MakePolicy(info.name, cfg, trace));
      ReplayEngine engine(cfg, probe, trace.block_tokens);
      for (const Request& r : trace.requests) engine.Process(r);
      CHECK(probe.offers > 0);
      CHECK(probe.offers_differing == 0);
      CHECK(probe.plans_differing == 0);
      plans[info.name] += probe.plans;
    }
  }
  for (const auto& [name, n] : plans) {
    CAPTURE(name);
    CHECK(n > 0);  // the check above saw plans
  }
}

}  // namespace kvlanes::test

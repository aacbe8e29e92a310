// `lane-balance`: the lanes planner with the lane-balance placement, whatever cache.placement
// says. It evens out free pages across lanes instead of following a fixed split, at the price
// of the zigzag causal balance (a lane-balanced extent never qualifies for the zigzag gather).
#include <queue>
#include <utility>
#include <vector>

#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "policies/lane_balance.h"
#include "policies/registry.h"

namespace kvlanes {

void AssignLaneBalance(const Ledger& ledger, std::span<uint16_t> owners) {
  const int lanes = ledger.lanes();
  // Max-heap on (free pages left, -rank): the freest lane, lowest rank on ties.
  std::priority_queue<std::pair<int64_t, int>> heap;
  for (int r = 0; r < lanes; ++r) heap.push({ledger.at(Tier::kDevice, r).free(), -r});
  std::vector<int64_t> count(static_cast<size_t>(lanes), 0);
  for (size_t i = 0; i < owners.size(); ++i) {
    auto [f, neg_r] = heap.top();
    heap.pop();
    ++count[static_cast<size_t>(-neg_r)];
    heap.push({f - 1, neg_r});
  }
  size_t i = 0;
  for (int r = 0; r < lanes; ++r)
    for (int64_t k = 0; k < count[static_cast<size_t>(r)]; ++k)
      owners[i++] = static_cast<uint16_t>(r);
}

namespace {

class LaneBalancePolicy final : public ConfiguredPolicy {
 public:
  explicit LaneBalancePolicy(const PolicyInputs& in) : ConfiguredPolicy(in) {
    FixPlacement("lane-balance");
  }
  std::string_view Name() const override { return "lane-balance"; }
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    return PlanCascadeEviction(view, demand, PlanScope::kLanes);
  }
};

}  // namespace

std::unique_ptr<CachePolicy> MakeLaneBalancePolicy(const PolicyInputs& in) {
  return std::make_unique<LaneBalancePolicy>(in);
}

}  // namespace kvlanes

// `admit-owner`: the lanes planner with owner-lane aware host write admission. Writing a node to
// host needs free host pages on each of its pages' owner lanes. When an owner lane is short,
// the default policies evict host pages there blindly; this one first plans that eviction and
// refuses the write (counted in host_writes.refused) when
//   - the plan cannot free enough on some owner lane (its host lane is full of locked pages), or
//   - the plan would evict a page that ranks after the node in eviction order (a newer, or under
//     LFU/SLRU more used, page than the one being written).
// It matters most under write_back, where the node written is the one leaving the device, often
// older than what the host lane holds.
#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

class AdmitOwnerPolicy final : public ConfiguredPolicy {
 public:
  using ConfiguredPolicy::ConfiguredPolicy;
  std::string_view Name() const override { return "admit-owner"; }
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    return PlanCascadeEviction(view, demand, PlanScope::kLanes);
  }
  bool AdmitHostWrite(const CacheView& view, NodeId id) const override {
    const Node& n = view.tree.node(id);
    LaneDemand d{Tier::kHost, std::vector<int64_t>(static_cast<size_t>(view.ledger.lanes()), 0), 0};
    for (const PageInfo& p : n.pages) ++d.target[p.owner];
    if (d.MetBy(view.ledger)) return true;
    const EvictionPlan plan = PlanCascadeEviction(view, d, PlanScope::kLanes);
    const EvictionPriority mine = view.tree.Priority(n);
    std::vector<int64_t> freed(d.target.size(), 0);
    for (NodeId v : plan.victims) {
      const Node& vn = view.tree.node(v);
      if (view.tree.Priority(vn) > mine) return false;
      for (const PageInfo& p : vn.pages) ++freed[p.owner];
    }
    for (size_t r = 0; r < d.target.size(); ++r)
      if (view.ledger.at(Tier::kHost, static_cast<int>(r)).free() + freed[r] < d.target[r])
        return false;
    return true;
  }
};

}  // namespace

std::unique_ptr<CachePolicy> MakeAdmitOwnerPolicy(const PolicyInputs& in) {
  return std::make_unique<AdmitOwnerPolicy>(in);
}

}  // namespace kvlanes

// `admit-hits`: the lanes planner with host write admission by hit count. A node is written to
// host only once its hit count reaches admission.host_write_min_hits (default 2), so pages seen
// once do not push reused ones out of the host tier. The engine asks at the write policy's own
// moments (write_through: every time the node is on a request's path with hit count >= 1;
// write_back: when it leaves the device), so under write_through a refused node is asked again
// on its next hit. With write_through_selective and threshold 2 it equals `lanes`.
#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "policies/registry.h"

namespace kvlanes {
namespace {

constexpr PolicyKey kHostWriteMinHits{
    .key = "admission.host_write_min_hits",
    .help = "policy admit-hits: hit count at which a node may be written to host",
    .default_integer = 2,
    .min_integer = 1,
    .always_listed = true};

class AdmitHitsPolicy final : public ConfiguredPolicy {
 public:
  explicit AdmitHitsPolicy(const PolicyInputs& in)
      : ConfiguredPolicy(in), min_hits_(static_cast<uint64_t>(kHostWriteMinHits.Integer(in.cfg))) {}
  std::string_view Name() const override { return "admit-hits"; }
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    return PlanCascadeEviction(view, demand, PlanScope::kLanes);
  }
  bool AdmitHostWrite(const CacheView& view, NodeId id) const override {
    return view.tree.node(id).hit_count >= min_hits_;
  }

 private:
  uint64_t min_hits_;
};

}  // namespace

std::vector<PolicyKey> AdmitHitsPolicyKeys() { return {kHostWriteMinHits}; }

std::unique_ptr<CachePolicy> MakeAdmitHitsPolicy(const PolicyInputs& in) {
  return std::make_unique<AdmitHitsPolicy>(in);
}

}  // namespace kvlanes

#include "sim/predict/plan_pricing.h"

#include <utility>
#include <vector>

#include "io/input_error.h"
#include "sim/predict/content_hash.h"
#include "sim/predict/cost_model.h"

namespace kvlanes {
namespace {

// The compute terms when a plan has no hardware profile: the assumed DeepSeek-V3.2-like figures
// of config/profiles/h200.yaml (docs/executor.md), so a plan runs the same with or without one.
HardwareProfile DefaultSpinProfile() {
  HardwareProfile hw;
  hw.name = "exec-default (h200.yaml compute terms, assumed)";
  hw.layer_base_s = 2.0e-5;
  hw.layer_token_s = 3.0e-6;
  hw.layer_attn_pair_s = 2.05e-10;
  return hw;
}

}  // namespace

std::optional<PlanProfile> ResolvePlanProfile(const PlanHeader& header, const std::string& given,
                                              const std::string& file) {
  if (!given.empty()) return PlanProfile{given, LoadHardwareProfile(given)};
  if (!header.hardware_profile) return std::nullopt;
  const PlanStoredProfile& s = *header.hardware_profile;
  if (Fnv1a64Hex(s.yaml) != s.fnv1a64)
    throw InputError(
        file, 1, "hardware_profile.fnv1a64",
        "is " + s.fnv1a64 + ", the stored yaml hashes to " + Fnv1a64Hex(s.yaml) + " (edited?)");
  return PlanProfile{
      s.path, ParseHardwareProfile(s.yaml, file + " (hardware_profile from " + s.path + ")")};
}

SpinPricer::SpinPricer(const HardwareProfile* profile, const std::string& path, int64_t ranks,
                       int64_t page_tokens)
    : hw_(profile ? *profile : DefaultSpinProfile()),
      ranks_(static_cast<double>(static_cast<int>(ranks))),
      page_tokens_(page_tokens),
      source_{path.empty() ? "(none)" : path, hw_.name, hw_.layer_base_s, hw_.layer_token_s,
              hw_.layer_attn_pair_s} {
  hw_.compute_extra_layer_s = 0;  // the modelled layer, not the spin's own overhead
}

double SpinPricer::ChunkLayerS(int64_t tokens, int64_t context) const {
  return hw_.ComputeLayerS(static_cast<double>(tokens), static_cast<double>(context), ranks_);
}

void SpinPricer::PricePass(PlanPass& pass) const {
  std::vector<int64_t> tokens;
  for (PlanPassChunk& c : pass.chunks) {
    c.layer_spin_s = ChunkLayerS(c.tokens, c.context);
    tokens.push_back(c.tokens);
  }
  // The batched-pass GEMMs (HardwareProfile::PassBatchLayerS) are in the pass's spin alone:
  // `exec` spins it with the pass's first part (its chunks' spins leave it out).
  pass.layer_spin_s =
      PassLayerS(pass.chunks, hw_.layer_base_s) + hw_.PassBatchLayerS(tokens, ranks_);
}

double SpinPricer::LayerS(const RequestPlan& p) const {
  return hw_.ComputeLayerS(static_cast<double>(p.computed_tokens),
                           static_cast<double>(p.prefix_pages * page_tokens_), ranks_);
}

void PricePlanSpin(PlanFile& plan, const std::optional<PlanProfile>& profile) {
  const PlanHeader& h = plan.header;
  const std::string path = profile ? profile->path : "";
  HardwareProfile hw = profile ? profile->profile : HardwareProfile{};
  if (profile) {
    // The cost model's checks of a profile against the model (measured compute terms name their
    // preset and layer count). Only the compute terms are used, so a profile without a
    // collective model for this rank count is accepted (an empty model satisfies the check).
    if (h.cp_size > 1 && !hw.Collectives(static_cast<int>(h.cp_size)))
      hw.collectives.push_back(CollectiveModel{static_cast<int>(h.cp_size), {}, {}, {}, 0});
    ReplayConfig cfg = PlanModelConfig(h, "plan");
    if (!h.model_preset.empty()) cfg.model.preset = h.model_preset;
    cfg.cache.cp_size = h.cp_size;
    cfg.cache.page_tokens = h.page_tokens;
    cfg.model.layers = h.layers;
    cfg.model.pools = h.pools;
    (void)CostModel(hw, cfg, path);
    FitComputeToModel(hw, cfg.model, path);  // the depth's mix of layer kinds, as CostModel does
  }
  const SpinPricer pricer(profile ? &hw : nullptr, path, h.cp_size, h.page_tokens);
  for (RequestPlan& r : plan.requests) r.layer_spin_s = pricer.LayerS(r);
  for (PlanPass& p : plan.passes) pricer.PricePass(p);
  plan.header.forward_spin = pricer.Source();
}

}  // namespace kvlanes

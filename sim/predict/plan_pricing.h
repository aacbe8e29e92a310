// The predicting side of the plan contract: the profile a plan is priced with and the seconds its
// synthetic forward pass spins. The engine's plan writer prices each request as it writes it
// (plan version 4); the command that runs an older plan, or one with another `--profile`, prices
// it here before the executor, which reads only the plan (docs/plan.md, "Forward spin").
#pragma once

#include <optional>
#include <string>

#include "sim/predict/hardware_profile.h"
#include "sim/predict/plan.h"

namespace kvlanes {

// The hardware profile a plan is priced with: `given` (a --profile path) when not empty, else the
// one the plan stores (its text checked against its hash), else nullopt. `file` names the plan in
// errors. Used by `kvlanes exec` and `kvlanes check`, which pick it the same way.
struct PlanProfile {
  std::string path;  // the given path, or where the stored one was read when the plan was written
  HardwareProfile profile;
};
std::optional<PlanProfile> ResolvePlanProfile(const PlanHeader& header, const std::string& given,
                                              const std::string& file);

// Prices the synthetic forward pass: per layer of a request, ComputeLayerS(computed tokens,
// prefix tokens) of the profile (the documented default terms, config/profiles/h200.yaml's, when
// there is none).
class SpinPricer {
 public:
  // `path`: the profile's path ("" for none); `ranks`, `page_tokens`: the plan's geometry.
  SpinPricer(const HardwareProfile* profile, const std::string& path, int64_t ranks,
             int64_t page_tokens);
  double LayerS(const RequestPlan& p) const;
  // The same for `tokens` new tokens after `context` tokens (a serving pass's chunk).
  double ChunkLayerS(int64_t tokens, int64_t context) const;
  // Prices a serving pass: each chunk's ChunkLayerS and the pass's PassLayerS (plan_passes.h).
  void PricePass(PlanPass& pass) const;
  // The header's forward_spin record of these terms.
  const PlanSpinSource& Source() const { return source_; }

 private:
  HardwareProfile hw_;
  double ranks_;
  int64_t page_tokens_;
  PlanSpinSource source_;
};

// Prices every request and pass of `plan` (layer_spin_s) and its header's forward_spin with
// `profile` (nullopt: the default terms), checking the profile against the plan's model as the cost
// model does (a profile with measured compute terms names its model preset and layer count). For
// plans of versions 2 and 3, which carry no spin, and for `kvlanes exec --profile`. Throws
// InputError.
void PricePlanSpin(PlanFile& plan, const std::optional<PlanProfile>& profile);

}  // namespace kvlanes

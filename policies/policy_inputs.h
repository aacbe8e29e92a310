// What a policy is built from: the validated config, the trace to be replayed and the cost model
// the caller built once for the run. A policy never reads a file itself.
#pragma once

#include <memory>

#include "sim/config.h"
#include "sim/predict/cost_model.h"
#include "traces/trace.h"

namespace kvlanes {

struct PolicyInputs {
  const ReplayConfig& cfg;
  // Only offline policies (oracle) read the trace, and they keep what they need from it (it need
  // not outlive them), but they require the engine to replay exactly that trace in order.
  const Trace& trace;
  // The predictions of hardware.profile, shared by every policy of the run (PolicyCostModel);
  // null when neither gather.method nor backup.schedule is `cost`.
  std::shared_ptr<const CostModel> cost;
};

// The cost model the policies of a run with `cfg` need: hardware.profile read once, or null
// when neither gather.method nor backup.schedule is `cost`.
std::shared_ptr<const CostModel> PolicyCostModel(const ReplayConfig& cfg);

}  // namespace kvlanes

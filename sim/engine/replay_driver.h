// The replay driver: runs a whole trace through the engine (sequential mode, or serving mode's
// replicas, docs/serving.md) and, with a hardware profile, the predictor; streams the plan and
// the timeline; returns the report (sim/report/report.h writes it). The hardware profile is read
// once per replay (ReadProfileFile) and handed to the cost model and the plan writer.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "sim/cache/policy.h"
#include "sim/config.h"
#include "sim/engine/replay_engine.h"
#include "sim/predict/hardware_profile.h"
#include "sim/predict/plan.h"
#include "traces/trace.h"

namespace kvlanes {

class CostModel;

struct RequestCost;
struct ServingResult;

// Optional outputs of a replay.
struct ReplaySinks {
  // The hardware profile of cfg.hardware.profile when the caller has read it already
  // (ReadProfileFile; e.g. to hand the same one to a cost-choosing policy), so one run reads the
  // file once; null: RunReplay reads it.
  const ProfileFile* profile = nullptr;
  // The cost model of cfg and that profile when the caller has built it already (the policies'
  // PolicyCostModel): RunReplay prices its predictions with it, so that a request's cost-chosen
  // decisions and its prediction share the model's memo of recent evaluations instead of
  // evaluating the request twice; null: RunReplay builds its own.
  std::shared_ptr<const CostModel> cost;
  std::ostream* plan = nullptr;            // the plan stream (docs/plan.md), trailer included
  std::string plan_name = "plan";          // its name in errors (the file's path)
  std::ostream* timeline = nullptr;        // predicted Chrome trace events (needs a profile)
  std::string timeline_name = "timeline";  // its name in errors (the file's path)
  bool timeline_layers = false;  // the timeline also has every op of each request schedule
  // Called after each request with its plan and, with a profile, its predicted cost (its totals;
  // the schedule's ops and times only with a timeline).
  std::function<void(const RequestPlan&, const RequestCost*)> on_request;
  // In serving mode, the plan of each request at its admission (plan.replica set), with no
  // cost. Serving mode calls this instead of on_request.
  std::function<void(const RequestPlan&)> on_admit;
  // Serving mode: the same with the request's index in the trace; then, once the trace is
  // served, what happened to every request (admission, first token, replica).
  std::function<void(size_t, const RequestPlan&)> on_admit_at;
  std::function<void(const ServingResult&)> on_served;
  // Serving mode: each forward pass as it starts, as the plan's pass line holds it (its chunks'
  // requests numbered within the replica; spins not priced).
  std::function<void(const PlanPass&)> on_pass;
  // Serving mode with serving.replicas > 1: makes the policy of each further replica (the one
  // passed to RunReplay serves replica 0). Policies keep state per cache, so each replica has
  // its own.
  std::function<std::unique_ptr<CachePolicy>()> replica_policy;
};

// Replays the whole trace and returns the JSON report (deterministic; no wall-clock fields).
// With cfg.hardware.profile set, the report holds `predicted` (cost_model.h, predictor.h).
// progress(done, total) is called now and then for long traces (may be empty).
nlohmann::ordered_json RunReplay(const ReplayConfig& cfg, CachePolicy& policy, const Trace& trace,
                                 EngineOptions opts,
                                 const std::function<void(size_t, size_t)>& progress,
                                 const ReplaySinks& sinks = {});

// Serving mode (cfg.serving.mode "serving"; docs/serving.md) is run by RunReplay: the report
// then holds the totals of every replica at the top level, each replica's lanes, and the
// `serving` block (ServingToJson) instead of `predicted`. Throws InputError when serving mode
// cannot run (no profile, a policy that needs the sequential order, replicas without
// sinks.replica_policy).

}  // namespace kvlanes

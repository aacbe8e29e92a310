#include "sim/engine/replay_driver.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "sim/check.h"
#include "sim/engine/scheduler.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/hardware_profile.h"
#include "sim/predict/predictor.h"
#include "sim/predict/timeline.h"
#include "sim/report/report.h"
#include "sim/report/serving_timeline.h"

namespace kvlanes {

namespace {

// The plan writer's queue in a replay: 64 plans, so that the two threads meet once per 16
// requests (a quarter of the queue) rather than every few; a plan of the shipped traces' requests
// holds tens of KiB at most.
constexpr size_t kReplayPlanQueue = 64;

// The caller's cost model (sinks.cost), or one built from the profile.
std::shared_ptr<const CostModel> ModelOf(const ReplayConfig& cfg, const ProfileFile& profile,
                                         const ReplaySinks& sinks) {
  if (!sinks.cost)
    return std::make_shared<const CostModel>(profile.profile, cfg, cfg.hardware.profile);
  KV_CHECK(sinks.cost->ranks() == cfg.cache.cp_size && sinks.cost->layers() == cfg.model.layers,
           "ReplaySinks::cost is not the cost model of this config");
  return sinks.cost;
}

nlohmann::ordered_json RunServing(const ReplayConfig& cfg, CachePolicy& policy, const Trace& trace,
                                  EngineOptions opts,
                                  const std::function<void(size_t, size_t)>& progress,
                                  const ReplaySinks& sinks) {
  if (cfg.hardware.profile.empty())
    throw InputError("", 0, "serving.mode",
                     "'serving' needs a hardware profile (hardware.profile)");
  if (policy.Name() == "oracle")
    throw InputError("", 0, "policy",
                     "'oracle' needs the order in which each cache will see the requests before "
                     "the replay, and in serving mode that order follows from the cache's own "
                     "decisions (docs/serving.md, \"The oracle\"); use serving.mode sequential");
  std::vector<std::unique_ptr<CachePolicy>> owned;
  std::vector<CachePolicy*> policies{&policy};
  for (int64_t r = 1; r < cfg.serving.replicas; ++r) {
    if (!sinks.replica_policy)
      throw InputError("", 0, "serving.replicas",
                       "more than one replica needs a policy per replica (internal: no factory)");
    owned.push_back(sinks.replica_policy());
    policies.push_back(owned.back().get());
  }
  std::optional<ProfileFile> read;
  if (!sinks.profile) read = ReadProfileFile(cfg.hardware.profile);
  const ProfileFile& profile = sinks.profile ? *sinks.profile : *read;
  const bool measured = profile.profile.measured;
  const std::shared_ptr<const CostModel> cost = ModelOf(cfg, profile, sinks);
  const CostModelForward forward(*cost);
  ServingReplay serving(cfg, policies, trace.block_tokens, forward, opts);
  // The same streamed writer as sequential mode, so the plan ends with its trailer and readers
  // can tell it is whole.
  std::unique_ptr<PlanWriter> plan_writer;
  if (sinks.plan) {
    PlanWriterOptions po;
    po.name = sinks.plan_name;
    po.queue_plans = kReplayPlanQueue;
    plan_writer = std::make_unique<PlanWriter>(*sinks.plan, cfg, &profile, po);
  }
  std::unique_ptr<ServingTimelineWriter> timeline;
  if (sinks.timeline)
    timeline = std::make_unique<ServingTimelineWriter>(
        *sinks.timeline, static_cast<int>(cfg.serving.replicas), trace.requests.size());
  // The plan's pass lines name each chunk's request by its number within the replica.
  const bool passes_out = plan_writer || sinks.on_pass;
  std::vector<int64_t> replica_request(passes_out ? trace.requests.size() : 0, -1);
  std::vector<int64_t> passes(static_cast<size_t>(cfg.serving.replicas), 0);
  if (timeline || passes_out)
    serving.set_pass_observer(
        [&](size_t r, int64_t t0, int64_t dur, const std::vector<PassChunk>& chunks) {
          if (timeline) timeline->Pass(r, t0, dur, chunks, serving.result());
          if (!passes_out) return;
          PlanPass pass{static_cast<int64_t>(r), passes[r]++, t0, dur, 0, {}};
          for (const PassChunk& c : chunks)
            pass.chunks.push_back({replica_request[c.request], c.tokens, c.context, 0});
          if (sinks.on_pass) sinks.on_pass(pass);
          if (plan_writer) plan_writer->AddPass(std::move(pass));
        });
  std::function<void(const RequestPlan&, int, size_t)> on_admit;
  if (sinks.plan || sinks.on_admit || sinks.on_admit_at || timeline || passes_out)
    on_admit = [&](const RequestPlan& p, int, size_t i) {
      if (timeline) timeline->Admit(i, p.request);
      if (passes_out) replica_request[i] = p.request;
      if (plan_writer) plan_writer->Add(p);
      if (sinks.on_admit) sinks.on_admit(p);
      if (sinks.on_admit_at) sinks.on_admit_at(i, p);
    };
  const ServingResult& res = serving.Run(trace, on_admit, progress);
  if (plan_writer) plan_writer->Finish();
  if (timeline) timeline->Finish(res);
  if (sinks.on_served) sinks.on_served(res);
  return ServingReportToJson(cfg, policy, trace, serving, measured);
}

}  // namespace

nlohmann::ordered_json RunReplay(const ReplayConfig& cfg, CachePolicy& policy, const Trace& trace,
                                 EngineOptions opts,
                                 const std::function<void(size_t, size_t)>& progress,
                                 const ReplaySinks& sinks) {
  if (cfg.serving.Enabled()) return RunServing(cfg, policy, trace, opts, progress, sinks);
  ReplayEngine engine(cfg, policy, trace.block_tokens, opts);
  std::shared_ptr<const CostModel> cost;
  std::unique_ptr<Predictor> predictor;
  std::unique_ptr<TimelineWriter> timeline;
  std::optional<ProfileFile> read;
  const ProfileFile* profile = nullptr;
  if (!cfg.hardware.profile.empty()) {
    if (!sinks.profile) read = ReadProfileFile(cfg.hardware.profile);
    profile = sinks.profile ? sinks.profile : &*read;
    cost = ModelOf(cfg, *profile, sinks);
    if (sinks.timeline) {
      TimelineWriterOptions to;
      to.name = sinks.timeline_name;
      timeline = std::make_unique<TimelineWriter>(*sinks.timeline, cost->ranks(), to);
    }
    predictor = std::make_unique<Predictor>(*cost, timeline.get(), sinks.timeline_layers);
  }
  const bool record = sinks.plan || predictor || sinks.on_request;
  std::unique_ptr<PlanWriter> plan_writer;
  if (sinks.plan) {
    PlanWriterOptions po;
    po.name = sinks.plan_name;
    po.queue_plans = kReplayPlanQueue;
    plan_writer = std::make_unique<PlanWriter>(*sinks.plan, cfg, profile, po);
  }
  RequestPlan plan;
  const size_t n = trace.requests.size();
  const size_t step = std::max<size_t>(1, n / 100);
  const Ledger& ledger = engine.ledger();
  for (size_t i = 0; i < n; ++i) {
    engine.Process(trace.requests[i], record ? &plan : nullptr);
    const RequestCost* c = predictor ? &predictor->Add(plan) : nullptr;
    if (timeline) {
      // Occupancy after the request's cache decisions, from the time its work starts.
      for (int r = 0; r < ledger.lanes(); ++r)
        timeline->Counter(r, "pages used", predictor->last_start_s(),
                          {TimelineWriter::Int("device", ledger.at(Tier::kDevice, r).used()),
                           TimelineWriter::Int("host", ledger.at(Tier::kHost, r).used())});
    }
    if (sinks.on_request) sinks.on_request(plan, c);
    // Last: the writer takes the plan's contents (the engine resets what it hands back).
    if (plan_writer) plan_writer->Add(std::move(plan));
    if (progress && ((i + 1) % step == 0 || i + 1 == n)) progress(i + 1, n);
  }
  if (plan_writer) plan_writer->Finish();
  if (timeline) timeline->Finish();
  nlohmann::ordered_json report = ReportToJson(cfg, policy, trace, engine);
  if (predictor) {
    report["predicted"] = predictor->Summary();
  }
  return report;
}

}  // namespace kvlanes

#include "sim/report/report.h"

#include <algorithm>
#include <memory>
#include <string>

#include "sim/cache/eviction_order.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/hardware_profile.h"
#include "sim/predict/predictor.h"
#include "sim/predict/timeline.h"
#include "sim/report/provenance.h"

namespace kvlanes {

nlohmann::ordered_json ReportToJson(const ReplayConfig& cfg, const CachePolicy& policy,
                                    const Trace& trace, const ReplayEngine& engine) {
  using J = nlohmann::ordered_json;
  const ReplayCounters& c = engine.counters();
  J j;
  j["report_version"] = 1;
  j["context"] = ReplayContext(cfg, trace.sources);
  j["policy"] = std::string(policy.Name());
  j["eviction_order"] = kEvictionOrderNames.CName(engine.tree().order());
  j["placement"] = policy.Placement().name;
  J tr;
  tr["sources"] = trace.sources;
  tr["block_tokens"] = trace.block_tokens;
  j["trace"] = tr;
  j["config"] = ConfigToJson(cfg);
  j["requests"] = c.requests;
  j["input_tokens"] = c.input_tokens;
  j["device_hit_tokens"] = c.device_hit_tokens;
  j["host_hit_tokens"] = c.host_hit_tokens;
  j["host_match_tokens"] = c.host_match_tokens;
  j["computed_tokens"] = c.computed_tokens;
  const double in = c.input_tokens > 0 ? static_cast<double>(c.input_tokens) : 1.0;
  j["token_hit_ratio"] = static_cast<double>(c.device_hit_tokens + c.host_hit_tokens) / in;
  j["device_hit_ratio"] = static_cast<double>(c.device_hit_tokens) / in;
  j["uncached_requests"] = c.uncached_requests;
  j["lane_deficit_failures"] = c.lane_deficit_failures;
  j["ancestor_unlocks"] = c.ancestor_unlocks;
  j["evicted_pages"] = J{{"device", c.evicted_device_pages}, {"host", c.evicted_host_pages}};
  j["load_back"] = J{{"pages", c.load_back_pages},
                     {"bytes", c.load_back_bytes},
                     {"count", c.load_back_count},
                     {"skipped", c.load_back_skipped},
                     {"failed", c.load_back_failed}};
  j["host_writes"] = J{{"pages", c.host_write_pages},
                       {"bytes", c.host_write_bytes},
                       {"refused", c.host_write_refused}};
  j["bypassed_pages"] = c.bypassed_pages;
  j["tail_evictions"] = c.tail_evictions;
  j["inserted_pages"] = c.inserted_pages;
  j["duplicate_pages"] = c.duplicate_pages;
  J counts = J::object();
  for (const auto& [name, n] : c.gather_method_counts) counts[name] = n;
  j["gather"] = J{{"method_counts", counts},
                  {"prefix_pages", c.gather_prefix_pages},
                  {"prefix_runs", c.gather_runs},
                  {"bytes", c.gather_prefix_pages * cfg.model.PageBytes(cfg.cache.page_tokens)}};
  J schedules = J::object();
  for (const auto& [name, n] : c.backup_schedule_counts) schedules[name] = n;
  j["backup"] = J{{"schedule_counts", schedules}};
  J lanes = J::array();
  const Ledger& l = engine.ledger();
  for (int r = 0; r < l.lanes(); ++r) {
    const LaneAccount& d = l.at(Tier::kDevice, r);
    const LaneAccount& h = l.at(Tier::kHost, r);
    lanes.push_back(J{{"rank", r},
                      {"device_capacity_pages", d.capacity},
                      {"device_used_pages", d.used()},
                      {"device_peak_pages", d.peak},
                      {"device_evictable_pages", d.evictable()},
                      {"device_protected_pages", d.protected_pages()},
                      {"host_capacity_pages", h.capacity},
                      {"host_used_pages", h.used()},
                      {"host_peak_pages", h.peak},
                      {"host_evictable_pages", h.evictable()},
                      {"host_protected_pages", h.protected_pages()}});
  }
  j["lanes"] = lanes;
  // Every page has one slot in each pool: a lane's bytes in pool k are its pages times these.
  J pools = J::array();
  for (size_t k = 0; k < cfg.model.pools.size(); ++k)
    pools.push_back(J{{"name", cfg.model.pools[k].name},
                      {"page_bytes", cfg.model.PoolPageBytes(k, cfg.cache.page_tokens)}});
  j["pools"] = pools;
  return j;
}

nlohmann::ordered_json RunReplay(const ReplayConfig& cfg, const CachePolicy& policy,
                                 const Trace& trace, EngineOptions opts,
                                 const std::function<void(size_t, size_t)>& progress,
                                 const ReplaySinks& sinks) {
  ReplayEngine engine(cfg, policy, trace.block_tokens, opts);
  std::unique_ptr<CostModel> cost;
  std::unique_ptr<Predictor> predictor;
  std::unique_ptr<TimelineWriter> timeline;
  if (!cfg.hardware.profile.empty()) {
    cost = std::make_unique<CostModel>(LoadHardwareProfile(cfg.hardware.profile), cfg,
                                       cfg.hardware.profile);
    if (sinks.timeline) timeline = std::make_unique<TimelineWriter>(*sinks.timeline, cost->ranks());
    predictor = std::make_unique<Predictor>(*cost, timeline.get());
  }
  const bool record = sinks.plan || predictor || sinks.on_request;
  std::unique_ptr<PlanWriter> plan_writer;
  if (sinks.plan) plan_writer = std::make_unique<PlanWriter>(*sinks.plan, cfg);
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
    if (plan_writer) plan_writer->Add(plan);
    if (sinks.on_request) sinks.on_request(plan, c);
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

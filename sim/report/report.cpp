#include "sim/report/report.h"

#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "base/percentile.h"
#include "io/input_error.h"
#include "io/input_file.h"
#include "sim/cache/eviction_order.h"
#include "sim/cache/placement.h"
#include "sim/engine/scheduler.h"
#include "sim/predict/gather_scratch.h"
#include "sim/report/provenance.h"

namespace kvlanes {

namespace {

using J = nlohmann::ordered_json;

// The report's body from counters and the lanes of every ledger (one per replica; `replica`
// fields only when there are several engines, i.e. in serving mode).
// The report's `lanes`: every lane of every replica (`replica` only in serving mode).
J LanesJson(const std::vector<const Ledger*>& ledgers, bool serving) {
  J lanes = J::array();
  for (size_t rep = 0; rep < ledgers.size(); ++rep) {
    const Ledger& l = *ledgers[rep];
    for (int r = 0; r < l.lanes(); ++r) {
      const LaneAccount& d = l.at(Tier::kDevice, r);
      const LaneAccount& h = l.at(Tier::kHost, r);
      J lane;
      if (serving) lane["replica"] = rep;
      lane["rank"] = r;
      lane.update(J{{"device_capacity_pages", d.capacity},
                    {"device_used_pages", d.used()},
                    {"device_peak_pages", d.peak},
                    {"device_evictable_pages", d.evictable()},
                    {"device_protected_pages", d.protected_pages()},
                    {"host_capacity_pages", h.capacity},
                    {"host_used_pages", h.used()},
                    {"host_peak_pages", h.peak},
                    {"host_evictable_pages", h.evictable()},
                    {"host_protected_pages", h.protected_pages()}});
      lanes.push_back(std::move(lane));
    }
  }
  return lanes;
}

// The report's `layer_split` (placement by layer), per replica and rank.
J LayerSplitJson(const ReplayConfig& cfg, const std::vector<const Ledger*>& ledgers, bool serving) {
  // layer_split: lane 0 keeps the account of every page; rank r stores them for its layers.
  J split = J::array();
  const int ranks = static_cast<int>(cfg.cache.cp_size);
  for (size_t rep = 0; rep < ledgers.size(); ++rep)
    for (int r = 0; r < ranks; ++r) {
      int64_t b, e;
      LayerBlock(cfg.model.layers, ranks, r, &b, &e);
      const LaneAccount& d = ledgers[rep]->at(Tier::kDevice, 0);
      const LaneAccount& h = ledgers[rep]->at(Tier::kHost, 0);
      J x;
      if (serving) x["replica"] = rep;
      x.update(
          J{{"rank", r},
            {"layers", J::array({b, e})},
            {"device_used_page_layers", d.used() * (e - b)},
            {"device_capacity_page_layers", cfg.cache.device_pages_per_lane * cfg.model.layers},
            {"host_used_page_layers", h.used() * (e - b)},
            {"host_capacity_page_layers", cfg.cache.host_pages_per_lane * cfg.model.layers}});
      split.push_back(std::move(x));
    }
  return split;
}

J ReportBody(const ReplayConfig& cfg, const CachePolicy& policy, const Trace& trace,
             const ReplayCounters& c, EvictionOrder order,
             const std::vector<const Ledger*>& ledgers, bool serving) {
  J j;
  j["report_version"] = 1;
  j["context"] = ReplayContext(cfg, trace.sources);
  j["policy"] = std::string(policy.Name());
  j["eviction_order"] = kEvictionOrderNames.CName(order);
  j["placement"] = policy.Placement().name;
  J tr;
  tr["sources"] = JsonSafeTexts(trace.sources);
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
  if (cfg.cache.cp_hit_agreement != ReplayConfig{}.cache.cp_hit_agreement)
    j["hit_agreement"] = J{{"rule", cfg.cache.cp_hit_agreement},
                           {"allreduces", c.hit_agreement_allreduces},
                           {"lost_pages", c.hit_agreement_lost_pages},
                           {"lost_tokens", c.hit_agreement_lost_pages * cfg.cache.page_tokens}};
  j["bypassed_pages"] = c.bypassed_pages;
  j["tail_evictions"] = c.tail_evictions;
  j["inserted_pages"] = c.inserted_pages;
  j["duplicate_pages"] = c.duplicate_pages;
  J counts = J::object();
  for (const auto& [name, n] : c.gather_method_counts) counts[name] = n;
  j["gather"] = J{{"method_counts", counts},
                  {"prefix_pages", c.gather_prefix_pages},
                  {"prefix_runs", c.gather_runs},
                  {"merged_prefix_pages", c.gather_merged_prefix_pages},
                  {"bytes", (c.gather_prefix_pages - c.gather_merged_prefix_pages) *
                                    cfg.model.PageBytes(cfg.cache.page_tokens) +
                                PartialMergeBytes(cfg, c.gather_merged_new_tokens)}};
  if (const GatherScratch gs = GatherScratchOf(cfg, policy.Placement().by_layer); gs.counted)
    j["gather"]["scratch"] = GatherScratchJson(gs, cfg.cache.device_pages_per_lane);
  J schedules = J::object();
  for (const auto& [name, n] : c.backup_schedule_counts) schedules[name] = n;
  j["backup"] = J{{"schedule_counts", schedules}};
  j["lanes"] = LanesJson(ledgers, serving);
  if (policy.Placement().by_layer) j["layer_split"] = LayerSplitJson(cfg, ledgers, serving);
  if (cfg.cache.interleave_tokens > 0) {
    // Token interleave: hits, inserts and evictions count in units of one page on every lane.
    const int64_t unit = cfg.cache.UnitPages();
    j["token_interleave"] = J{{"interleave_tokens", cfg.cache.interleave_tokens},
                              {"unit_pages", unit},
                              {"unit_tokens", unit * cfg.cache.page_tokens}};
  }
  // Every page has one slot in each pool: a lane's bytes in pool k are its pages times these.
  J pools = J::array();
  for (size_t k = 0; k < cfg.model.pools.size(); ++k)
    pools.push_back(J{{"name", cfg.model.pools[k].name},
                      {"page_bytes", cfg.model.PoolPageBytes(k, cfg.cache.page_tokens)}});
  j["pools"] = pools;
  return j;
}

}  // namespace

nlohmann::ordered_json ReportToJson(const ReplayConfig& cfg, const CachePolicy& policy,
                                    const Trace& trace, const ReplayEngine& engine) {
  return ReportBody(cfg, policy, trace, engine.counters(), engine.tree().order(),
                    {&engine.ledger()}, false);
}

namespace {

// The counters of several engines added up.
ReplayCounters SumCounters(const ServingReplay& s) {
  ReplayCounters t;
  for (size_t r = 0; r < s.replicas(); ++r) {
    const ReplayCounters& c = s.engine(r).counters();
    t.requests += c.requests;
    t.input_tokens += c.input_tokens;
    t.device_hit_tokens += c.device_hit_tokens;
    t.host_hit_tokens += c.host_hit_tokens;
    t.host_match_tokens += c.host_match_tokens;
    t.computed_tokens += c.computed_tokens;
    t.uncached_requests += c.uncached_requests;
    t.lane_deficit_failures += c.lane_deficit_failures;
    t.ancestor_unlocks += c.ancestor_unlocks;
    t.evicted_device_pages += c.evicted_device_pages;
    t.evicted_host_pages += c.evicted_host_pages;
    t.load_back_pages += c.load_back_pages;
    t.load_back_bytes += c.load_back_bytes;
    t.load_back_count += c.load_back_count;
    t.load_back_skipped += c.load_back_skipped;
    t.load_back_failed += c.load_back_failed;
    t.host_write_pages += c.host_write_pages;
    t.host_write_bytes += c.host_write_bytes;
    t.host_write_refused += c.host_write_refused;
    t.allocated_pages += c.allocated_pages;
    t.bypassed_pages += c.bypassed_pages;
    t.tail_evictions += c.tail_evictions;
    t.inserted_pages += c.inserted_pages;
    t.duplicate_pages += c.duplicate_pages;
    for (const auto& [k, v] : c.gather_method_counts) t.gather_method_counts[k] += v;
    for (const auto& [k, v] : c.backup_schedule_counts) t.backup_schedule_counts[k] += v;
    t.gather_prefix_pages += c.gather_prefix_pages;
    t.gather_runs += c.gather_runs;
    t.gather_merged_prefix_pages += c.gather_merged_prefix_pages;
    t.gather_merged_new_tokens += c.gather_merged_new_tokens;
    t.hit_agreement_allreduces += c.hit_agreement_allreduces;
    t.hit_agreement_lost_pages += c.hit_agreement_lost_pages;
  }
  return t;
}

// What RequestMetrics reads of a set of served requests (the counted ones only), gathered in one
// pass over the records: the sums, the queue times' sum in request order, and each request's TTFT
// and queue time (in any order: the percentiles depend on the values alone).
struct MetricsInput {
  int64_t requests = 0, in = 0, hit = 0, computed = 0;
  double qsum = 0;
  std::vector<double> ttft, queue;

  // The sums alone (the total's: its values are the replicas', TakeReplicaValues).
  void AddSums(const ServedRequest& q, double queue_s) {
    ++requests;
    in += q.input_tokens;
    hit += q.hit_tokens;
    computed += q.computed_tokens;
    qsum += queue_s;
  }
  void Add(const ServedRequest& q, double ttft_s, double queue_s) {
    AddSums(q, queue_s);
    ttft.push_back(ttft_s);
    queue.push_back(queue_s);
  }
};

// Metrics of a set of served requests (docs/serving.md#metrics). Reorders m's values.
J RequestMetrics(MetricsInput& m) {
  J j;
  j["requests"] = m.requests;
  j["input_tokens"] = m.in;
  j["hit_tokens"] = m.hit;
  j["computed_tokens"] = m.computed;
  j["token_hit_ratio"] = m.in > 0 ? static_cast<double>(m.hit) / static_cast<double>(m.in) : 0.0;
  // The percentiles by selection, not a full sort (the same values: base/percentile.h).
  const std::array<double, 3> t =
      m.ttft.empty() ? std::array<double, 3>{} : PercentilesOf(m.ttft, std::array{0.5, 0.9, 0.99});
  const std::array<double, 1> qp =
      m.queue.empty() ? std::array<double, 1>{} : PercentilesOf(m.queue, std::array{0.99});
  j["ttft_p50_s"] = t[0];
  j["ttft_p90_s"] = t[1];
  j["ttft_p99_s"] = t[2];
  j["queue_mean_s"] = m.queue.empty() ? 0.0 : m.qsum / static_cast<double>(m.queue.size());
  j["queue_p99_s"] = qp[0];
  return j;
}

// Where the counted requests' time to first token went, summed over them in request order
// (seconds; docs/serving.md#the-ttft-breakdown): queueing before the first pass, the passes they
// ran in (their own compute, the passes' fixed cost, their extras, their batch mates' work), and
// waits between their passes. The extra's kinds are each priced alone and may overlap.
struct Breakdown {
  double queue = 0, compute = 0, base = 0, extra = 0, mates = 0, between = 0, ttft = 0;
  RequestExtra parts;

  void Add(const ServedRequest& q, double t, double wait) {
    ttft += t;
    queue += wait;
    compute += q.compute_s;
    base += q.pass_base_s;
    extra += q.extra.total_s;
    mates += BatchMatesS(q);
    between += std::max(0.0, t - wait - static_cast<double>(q.in_passes_ns) / 1e9);
    parts.gather_s += q.extra.gather_s;
    parts.load_back_stall_s += q.extra.load_back_stall_s;
    parts.backup_exposed_s += q.extra.backup_exposed_s;
    parts.write_back_s += q.extra.write_back_s;
    parts.hit_agreement_s += q.extra.hit_agreement_s;
    parts.hit_saved_s += q.extra.hit_saved_s;
  }

  J ToJson() const {
    J j;
    j["ttft_s"] = ttft;
    j["queue_s"] = queue;
    j["compute_s"] = compute;
    j["pass_base_s"] = base;
    j["batch_mates_s"] = mates;
    j["extra_s"] = extra;
    j["gather_s"] = parts.gather_s;
    j["load_back_stall_s"] = parts.load_back_stall_s;
    j["backup_exposed_s"] = parts.backup_exposed_s;
    j["write_back_s"] = parts.write_back_s;
    j["hit_agreement_s"] = parts.hit_agreement_s;
    j["between_passes_s"] = between;
    j["hit_saved_s"] = parts.hit_saved_s;
    return j;
  }
};

// The counted requests (arrived at or after warm_from) of a serving run, read in one pass over
// the records: per replica, in total, and the total's breakdown.
struct CountedRequests {
  std::vector<MetricsInput> per;
  MetricsInput all;  // its sums; its values are the replicas' (TakeReplicaValues)
  Breakdown breakdown;
  int64_t warmup = 0;

  CountedRequests(const ServingResult& res, int64_t warm_from) : per(res.replicas.size()) {
    if (per.size() == 1) {
      per[0].ttft.reserve(res.requests.size());
      per[0].queue.reserve(res.requests.size());
    }
    for (const ServedRequest& q : res.requests) {
      if (q.arrival_ns < warm_from) {
        ++warmup;
        continue;
      }
      const double t = static_cast<double>(q.first_token_ns - q.arrival_ns) / 1e9;
      const double wait = static_cast<double>(q.admit_ns - q.arrival_ns) / 1e9;
      per[static_cast<size_t>(q.replica)].Add(q, t, wait);
      all.AddSums(q, wait);
      breakdown.Add(q, t, wait);
    }
  }

  // The total's TTFT and queue values, moved from the replicas' (after their RequestMetrics).
  void TakeReplicaValues() {
    if (per.size() == 1) {
      all.ttft = std::move(per[0].ttft);
      all.queue = std::move(per[0].queue);
      return;
    }
    all.ttft.reserve(static_cast<size_t>(all.requests));
    all.queue.reserve(static_cast<size_t>(all.requests));
    for (MetricsInput& m : per) {
      all.ttft.insert(all.ttft.end(), m.ttft.begin(), m.ttft.end());
      all.queue.insert(all.queue.end(), m.queue.begin(), m.queue.end());
      std::vector<double>().swap(m.ttft);
      std::vector<double>().swap(m.queue);
    }
  }
};

}  // namespace

nlohmann::ordered_json ServingToJson(const ReplayConfig& cfg, const ServingResult& res,
                                     bool profile_measured) {
  const ServingConfig& sc = cfg.serving;
  const int64_t warm_from = res.first_arrival_ns + std::llround(sc.warmup_s * 1e9);
  const int64_t span_ns = res.last_arrival_ns - res.first_arrival_ns;
  const double span_s = static_cast<double>(span_ns) / 1e9;
  CountedRequests counted(res, warm_from);
  J j;
  j["mode"] = sc.mode;
  j["replicas"] = sc.replicas;
  j["router"] = sc.router;
  j["schedule"] = sc.schedule;
  j["max_batch_tokens"] = sc.max_batch_tokens;
  j["chunk_tokens"] = sc.chunk_tokens;
  j["decode_tokens_per_s"] = sc.decode_tokens_per_s;
  j["rate_scale"] = cfg.trace.rate_scale;
  j["profile"] = JsonSafeText(cfg.hardware.profile);
  j["compute_assumed"] = !profile_measured;
  j["warmup_s"] = sc.warmup_s;
  j["warmup_requests"] = counted.warmup;
  j["span_s"] = span_s;
  j["end_s"] = static_cast<double>(res.end_ns - res.first_arrival_ns) / 1e9;
  int64_t busy_ns = 0, passes = 0, pass_tokens = 0, page_waits = 0;
  double peak_load = 0;
  size_t peak_replica = 0;
  J reps = J::array();
  for (size_t r = 0; r < res.replicas.size(); ++r) {
    const ReplicaStats& st = res.replicas[r];
    busy_ns += st.busy_ns;
    passes += st.passes;
    pass_tokens += st.pass_tokens;
    page_waits += st.page_waits;
    J x;
    x["replica"] = static_cast<int64_t>(r);
    x.update(RequestMetrics(counted.per[r]));
    x["busy_s"] = static_cast<double>(st.busy_ns) / 1e9;
    const double load = span_ns > 0 ? static_cast<double>(st.busy_ns) / span_ns : 0.0;
    x["offered_load"] = load;
    x["passes"] = st.passes;
    x["mean_pass_tokens"] =
        st.passes > 0 ? static_cast<double>(st.pass_tokens) / static_cast<double>(st.passes) : 0.0;
    x["peak_queue"] = st.peak_queue;
    x["page_waits"] = st.page_waits;
    if (load > peak_load || r == 0) {
      peak_load = load;
      peak_replica = r;
    }
    reps.push_back(std::move(x));
  }
  counted.TakeReplicaValues();
  J total = RequestMetrics(counted.all);
  total["busy_s"] = static_cast<double>(busy_ns) / 1e9;
  const double offered =
      span_ns > 0 ? static_cast<double>(busy_ns) / (static_cast<double>(span_ns) * sc.replicas)
                  : 0.0;
  total["offered_load"] = offered;
  total["passes"] = passes;
  total["mean_pass_tokens"] =
      passes > 0 ? static_cast<double>(pass_tokens) / static_cast<double>(passes) : 0.0;
  total["page_waits"] = page_waits;
  total["predicted"] = counted.breakdown.ToJson();
  j["total"] = total;
  j["per_replica"] = reps;
  // Overloaded when a replica is busy longer than the trace lasts: its queue grows without
  // bound and TTFT measures the backlog, not the engine. The replica count that would serve it
  // is the total busy time over the span, rounded up (perfect balance: a lower bound).
  if (peak_load > 1.0) {
    const int64_t need = static_cast<int64_t>(std::ceil(static_cast<double>(busy_ns) / span_ns));
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "overloaded: replica %zu is offered %.2fx its capacity (busy %.1f s over a "
                  "%.1f s trace span); at least %lld replicas would serve this load",
                  peak_replica, peak_load,
                  static_cast<double>(res.replicas[peak_replica].busy_ns) / 1e9, span_s,
                  static_cast<long long>(need));
    j["warning"] = buf;
  } else {
    j["warning"] = nullptr;
  }
  return j;
}

nlohmann::ordered_json ServingReportToJson(const ReplayConfig& cfg, const CachePolicy& policy,
                                           const Trace& trace, const ServingReplay& serving,
                                           bool profile_measured) {
  std::vector<const Ledger*> ledgers;
  for (size_t r = 0; r < serving.replicas(); ++r) ledgers.push_back(&serving.engine(r).ledger());
  J report = ReportBody(cfg, policy, trace, SumCounters(serving), serving.engine(0).tree().order(),
                        ledgers, true);
  report["serving"] = ServingToJson(cfg, serving.result(), profile_measured);
  return report;
}

}  // namespace kvlanes

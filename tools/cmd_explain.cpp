// kvlanes explain: replays a trace up to one request and prints, for that request, each
// decision, the alternatives considered and their predicted costs.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "io/input_error.h"
#include "io/output_file.h"
#include "policies/registry.h"
#include "sim/cache/placement.h"
#include "sim/engine/replay_engine.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/gather_scratch.h"
#include "sim/predict/predictor.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/config_help.h"
#include "tools/explain_serving.h"
#include "tools/replay_setup.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

using J = nlohmann::ordered_json;

std::string PerLane(const J& v) {
  std::string s;
  for (size_t r = 0; r < v.size(); ++r) s += (r ? " " : "") + std::to_string(v[r].get<int64_t>());
  return "[" + s + "]";
}

// The plan's evidence that the prefix is owner-major: every run's descriptor, then the owners.
bool OwnerMajorProven(const RequestPlan& p, int ranks) {
  for (const Extent& e : p.run_extents)
    if (!ExtentIsOwnerMajor(e, ranks)) return false;
  std::vector<uint16_t> owners;
  for (const PrefixPage& q : p.prefix) owners.push_back(q.owner);
  return OwnersCyclic(owners, ranks);
}

// What the prefix's layout proves about its gather, in words (explain's gather.layout.proof). KV
// interleaved by token: no page holds contiguous tokens, so no gather order is proven; the owners
// are cache units of N pages, merged. Otherwise the placement of every run's extent names the
// proof of the order a gather may rely on.
std::string LayoutProof(const ReplayConfig& cfg, const RequestPlan& p, int ranks, bool owner_major,
                        bool layer_split) {
  const std::string n = std::to_string(ranks);
  if (cfg.cache.interleave_tokens > 0)
    return "KV interleaved every " + std::to_string(cfg.cache.interleave_tokens) +
           " token(s) in cache units of " + n + " pages (page p on rank p mod " + n +
           "): no page holds contiguous tokens, so no gather order is proven; partial attention "
           "is merged";
  if (layer_split)
    return "split by layer: every page on lane 0, each rank holding its layer block; broadcast";
  std::vector<std::string> rules;
  for (const Extent& e : p.run_extents)
    if (std::find(rules.begin(), rules.end(), e.placement) == rules.end())
      rules.push_back(e.placement);
  std::string names;
  for (const std::string& r : rules) names += (names.empty() ? "" : ", ") + r;
  if (owner_major)
    return "owner-major proven by the run descriptors (" + names + ": page i of each extent on " +
           "rank i mod " + n + ") and the owners checked cyclic";
  if (p.proven_zigzag) return "one whole zigzag extent from page 0, proven by its descriptor";
  return "no gather order proven (placement " + (names.empty() ? std::string("none") : names) +
         "): the gather packs by owner and unpacks, or reads peers";
}

// One request's decisions, alternatives and (with a profile) predicted costs: the document
// `--json` writes and the text view prints (fields: docs/cost_model.md "explain").
// One entry per schedule rank (lanes with the same copies share one), each with its streams'
// ops, into sched["ranks"]; sched["critical_rank"] is the one whose last op ends last.
void ScheduleRanksJson(const RequestCost& c, J& sched) {
  sched["ranks"] = J::array();
  int64_t critical = 0;
  double latest = -1;
  const int R =
      c.lane_rank.empty() ? 1 : *std::max_element(c.lane_rank.begin(), c.lane_rank.end()) + 1;
  for (int q = 0; q < R; ++q) {
    J lanes = J::array();
    for (size_t r = 0; r < c.lane_rank.size(); ++r)
      if (c.lane_rank[r] == q) lanes.push_back(r);
    J streams = J::array();
    double rank_end = 0;
    for (int st = 0; st < kNumSchedStreams; ++st) {
      J ops = J::array();
      double busy = 0, alone = 0;
      for (size_t i = 0; i < c.ops.size(); ++i) {
        const SchedOp& o = c.ops[i];
        if (o.rank != q || static_cast<int>(o.stream) != st) continue;
        const ScheduledOp& t = c.times[i];
        busy += t.end_s - t.start_s;
        alone += o.work_s;
        rank_end = std::max(rank_end, t.end_s);
        ops.push_back(J{{"op", o.name},
                        {"layer", o.layer},
                        {"start_s", t.start_s},
                        {"end_s", t.end_s},
                        {"alone_s", o.work_s}});
      }
      streams.push_back(J{{"stream", SchedStreamName(static_cast<SchedStream>(st))},
                          {"busy_s", busy},
                          {"alone_s", alone},
                          {"ops", ops}});
    }
    if (rank_end > latest) latest = rank_end, critical = q;
    sched["ranks"].push_back(J{{"lanes", lanes}, {"end_s", rank_end}, {"streams", streams}});
  }
  sched["critical_rank"] = critical;
}

// Gather method m for this request: why it is not allowed, or its predicted cost and the
// request's service time with it.
J GatherAlternativeJson(GatherMethod m, const RequestPlan& p, const CostModel& cost,
                        ForwardShape& f, bool token_interleave, bool layer_split,
                        bool owner_major) {
  J a{{"method", kGatherMethodNames.CName(m)}};
  // Token interleave: no rank holds a page of contiguous tokens; only the merge applies.
  if (token_interleave != (m == GatherMethod::kPartialMerge)) {
    a["allowed"] = false;
    a["why_not"] = token_interleave
                       ? "KV is interleaved by token (cache.interleave_tokens): the layout "
                         "merges partial attention"
                       : "only KV interleaved by token (cache.interleave_tokens) merges";
    return a;
  }
  // layer_split: every rank holds its layers of every page; only broadcast applies.
  if (layer_split != (m == GatherMethod::kBroadcast)) {
    a["allowed"] = false;
    a["why_not"] = layer_split ? "the cache is split by layer: the layout broadcasts"
                               : "only a cache split by layer (layer_split) broadcasts";
    return a;
  }
  if (m == GatherMethod::kZigzag && !p.proven_zigzag) {
    a["allowed"] = false;
    a["why_not"] = "no descriptor proves a single zigzag run";
    return a;
  }
  if (m == GatherMethod::kOwnerMajor && !owner_major) {
    a["allowed"] = false;
    a["why_not"] = "the prefix is not proven owner-major";
    return a;
  }
  const GatherCost gc = m == GatherMethod::kPartialMerge
                            ? cost.PartialMerge(p.computed_tokens)
                            : cost.Gather(m, p.shard_pages, p.prefix_pages);
  f.gather = m;
  a["allowed"] = true;
  a["per_layer_s"] = gc.per_layer_s;
  if (gc.first_layer_s != gc.per_layer_s) a["first_layer_s"] = gc.first_layer_s;
  a["total_s"] = gc.total_s;
  a["fabric_bytes_per_rank"] = gc.bytes_per_rank;
  a["service_s"] = cost.Evaluate(f).service_s;
  return a;
}

// A layer-split cache's layer blocks per rank, and the prefix's runs of extents, into g.
void GatherBlocksAndRunsJson(const ReplayConfig& cfg, const RequestPlan& p, bool layer_split,
                             J& g) {
  if (layer_split) {
    J blocks = J::array();
    for (int r = 0; r < static_cast<int>(cfg.cache.cp_size); ++r) {
      int64_t b, e;
      LayerBlock(cfg.model.layers, static_cast<int>(cfg.cache.cp_size), r, &b, &e);
      blocks.push_back(J::array({b, e}));
    }
    g["layer_blocks"] = blocks;
  }
  g["runs"] = J::array();
  for (size_t i = 0; i < p.runs.size(); ++i)
    g["runs"].push_back(J{{"first_page", p.runs[i].first_page},
                          {"pages", p.runs[i].pages},
                          {"extent_request", p.run_extents[i].request},
                          {"extent_placement", p.run_extents[i].placement},
                          {"extent_pages", p.run_extents[i].pages}});
}

// The service time each prefetch depth (0..2) would give this request, and the cache pages it
// would leave (gather.scratch: counted; the replay itself ran with the configured depth, so the
// request's plan is that run's).
J PrefetchAlternativesJson(const ReplayConfig& cfg, const RequestPlan& p, const CostModel& cost,
                           ForwardShape& f) {
  J alternatives = J::array();
  if (p.prefix_pages > 0)
    for (int64_t k = 0; k <= 2; ++k) {
      f.prefetch_layers = k;
      ReplayConfig ck = cfg;
      ck.gather.prefetch_layers = k;
      // The cache pages that depth would leave (gather.scratch: counted; the replay itself
      // ran with the configured depth, so the request's plan is that run's).
      alternatives.push_back(J{{"prefetch_layers", k},
                               {"service_s", cost.Evaluate(f).service_s},
                               {"cache_pages_per_lane", GatherScratchOf(ck).cache_pages}});
    }
  return alternatives;
}

// Each backup schedule's predicted cost for this request.
J BackupAlternativesJson(const CostModel& cost, ForwardShape& f) {
  J out = J::array();
  for (BackupSchedule sc : {BackupSchedule::kPerLayer, BackupSchedule::kTail}) {
    f.backup = sc;
    const RequestCost rc = cost.Evaluate(f);
    out.push_back(J{{"schedule", kBackupScheduleNames.CName(sc)},
                    {"total_s", rc.backup.total_s},
                    {"beyond_forward_s", rc.backup.beyond_forward_s},
                    {"submit_s", rc.backup.submit_s}});
  }
  return out;
}

// The request's evictions per tier, with the pages each lane gave.
J EvictionsJson(const RequestPlan& p, int ranks) {
  J out = J::array();
  for (const SlotFree& e : p.evictions) {
    std::vector<int64_t> per(ranks, 0);
    for (const auto& sl : e.slots) ++per[sl[0]];
    out.push_back(J{{"tier", e.tier == Tier::kDevice ? "device" : "host"},
                    {"pages", e.slots.size()},
                    {"pages_per_lane", per}});
  }
  return out;
}

// The config an explanation is of, and the mode it replays: serving.mode's (sequential: one
// cache in arrival order; serving: the replicas, router and passes, tools/explain_serving.h).
void AddConfigAndMode(const ReplayConfig& cfg, J& j) {
  j["explain_version"] = 1;
  j["policy"] = cfg.policy;
  j["cp_size"] = cfg.cache.cp_size;
  j["gather_config"] = cfg.gather.method;
  // The device pages the gather's buffers take from the cache (gather.scratch).
  j["gather_scratch"] = GatherScratchJson(GatherScratchOf(cfg), cfg.cache.device_pages_per_lane);
  j["backup_config"] = cfg.backup.schedule;
  j["mode"] = cfg.serving.Enabled() ? "serving" : "sequential";
  if (cfg.serving.Enabled())
    j["mode_note"] = std::to_string(cfg.serving.replicas) + " replica(s), router " +
                     cfg.serving.router + ", schedule " + cfg.serving.schedule +
                     ": the request as serving mode admitted it";
}

J ExplainJson(const ReplayConfig& cfg, const RequestPlan& p, const CostModel* cost,
              const RequestCost* c) {
  const int ranks = static_cast<int>(cfg.cache.cp_size);
  const int64_t P = cfg.cache.page_tokens;
  J j;
  AddConfigAndMode(cfg, j);
  j["request"] = p.request;
  j["arrival_s"] = static_cast<double>(p.arrival_ns) * 1e-9;
  j["input_tokens"] = p.input_tokens;
  j["input_pages"] = (p.input_tokens + P - 1) / P;
  j["match"] = J{{"device_pages", p.device_hit_pages}, {"host_only_pages", p.host_match_pages}};
  j["load_back"] = J{{"loaded", p.loaded_pages > 0},
                     {"pages", p.loaded_pages},
                     {"pages_per_lane", PagesPerLane(p.load_back, ranks)}};
  if (cfg.cache.cp_hit_agreement != ReplayConfig{}.cache.cp_hit_agreement) {
    // min: the group agrees on the host hit by one all-reduce before the load-back.
    const bool allreduce = p.host_match_pages > 0 && ranks > 1;
    j["hit_agreement"] = J{{"rule", cfg.cache.cp_hit_agreement}, {"allreduce", allreduce}};
    if (cost) j["hit_agreement"]["allreduce_s"] = cost->HitAgreementS(p.host_match_pages);
  }
  j["evictions"] = EvictionsJson(p, ranks);
  j["write_back_pages_per_lane"] = PagesPerLane(p.write_back, ranks);
  std::vector<int64_t> placed(ranks, 0);
  for (const NewPage& q : p.new_pages) ++placed[q.owner];
  j["compute"] = J{{"new_tokens", p.computed_tokens},
                   {"prefix_tokens", p.prefix_pages * P},
                   {"cached", p.cached},
                   {"cached_pages_per_lane", placed}};
  J g;
  g["prefix_pages"] = p.prefix_pages;
  g["shard_pages"] = p.shard_pages;
  g["proven_zigzag"] = p.proven_zigzag;
  // The engine broadcasts exactly the prefixes of a cache split by layer.
  const bool layer_split = p.prefix_pages > 0 && p.gather_method == GatherMethod::kBroadcast;
  // ...and merges partial attention over exactly the prefixes of KV interleaved by token.
  const bool token_interleave =
      p.prefix_pages > 0 && p.gather_method == GatherMethod::kPartialMerge;
  // Cyclic owners of KV interleaved by token are cache units, not an owner-major gather order.
  const bool owner_major = cfg.cache.interleave_tokens == 0 && OwnerMajorProven(p, ranks);
  g["proven_owner_major"] = owner_major;
  g["layout"] = J{{"placement", cfg.cache.placement},
                  {"interleave_tokens", cfg.cache.interleave_tokens},
                  {"proof", LayoutProof(cfg, p, ranks, owner_major, layer_split)}};
  GatherBlocksAndRunsJson(cfg, p, layer_split, g);
  g["chosen"] = kGatherMethodNames.CName(p.gather_method);
  g["alternatives"] = J::array();
  J b;
  b["pages_per_lane"] = J::array();
  b["chosen"] = p.backup.empty() ? "none" : kBackupScheduleNames.CName(p.backup_schedule);
  b["alternatives"] = J::array();
  if (cost) {
    PlanShape plan_shape(p, ranks, P, cost->prefetch_layers());
    ForwardShape& f = plan_shape.shape;
    if (p.prefix_pages > 0) {
      for (GatherMethod m : {GatherMethod::kZigzag, GatherMethod::kOwnerMajor,
                             GatherMethod::kPacked, GatherMethod::kDense, GatherMethod::kP2p,
                             GatherMethod::kBroadcast, GatherMethod::kPartialMerge}) {
        g["alternatives"].push_back(
            GatherAlternativeJson(m, p, *cost, f, token_interleave, layer_split, owner_major));
      }
    }
    if (p.prefix_pages > 0 && !token_interleave) {
      // partial_merge: what the merge would cost had the KV been interleaved by token.
      const GatherCost pm = cost->PartialMerge(p.computed_tokens);
      g["partial_merge_predicted"] = J{{"per_layer_s", pm.per_layer_s},
                                       {"total_s", pm.total_s},
                                       {"fabric_bytes_per_rank", pm.bytes_per_rank}};
    }
    f.gather = p.gather_method;
    if (!p.backup.empty()) {
      b["pages_per_lane"] = plan_shape.backup_pages;
      b["alternatives"] = BackupAlternativesJson(*cost, f);
    }
    j["predicted"] = J{
        {"profile", cost->hw().name},      {"compute_s", c->compute_s},
        {"gather_s", c->gather_s},         {"load_back_stall_s", c->load_back_exposed_s},
        {"write_back_s", c->write_back_s}, {"backup_beyond_forward_s", c->backup.beyond_forward_s},
        {"service_s", c->service_s}};
    // The request schedule (docs/cost_model.md "The request schedule"): its ops per stream, and
    // the service time each prefetch depth would give this request.
    f.backup = p.backup_schedule;
    J sched;
    sched["prefetch_layers"] = cost->prefetch_layers();
    sched["overlap_shares"] = static_cast<int64_t>(cost->hw().overlap.size());
    sched["prefetch_alternatives"] = PrefetchAlternativesJson(cfg, p, *cost, f);
    ScheduleRanksJson(*c, sched);
    j["schedule"] = sched;
  } else if (!p.backup.empty()) {
    b["pages_per_lane"] = PagesPerLane(p.backup, ranks);
  }
  j["gather"] = g;
  j["backup"] = b;
  return j;
}

// The gathered prefix: its runs of extents and the layout that decides the method.
void PrintGatherPrefix(const J& g) {
  auto i = [](const J& v) { return static_cast<long long>(v.get<int64_t>()); };
  if (g["prefix_pages"].get<int64_t>() > 0) {
    std::printf("gather     prefix %lld pages in %zu extent run(s), shards per rank %s\n",
                i(g["prefix_pages"]), g["runs"].size(), PerLane(g["shard_pages"]).c_str());
    std::printf("           layout %s: %s\n", g["layout"]["placement"].get<std::string>().c_str(),
                g["layout"]["proof"].get<std::string>().c_str());
    if (g.contains("layer_blocks")) {
      std::string blocks;
      for (size_t r = 0; r < g["layer_blocks"].size(); ++r)
        blocks += (r ? ", " : "") + std::string("rank ") + std::to_string(r) + " [" +
                  std::to_string(i(g["layer_blocks"][r][0])) + ", " +
                  std::to_string(i(g["layer_blocks"][r][1])) + ")";
      std::printf("           layer_split: every rank holds every page for its layers: %s\n",
                  blocks.c_str());
    }
    for (size_t r = 0; r < g["runs"].size() && r < 8; ++r) {
      const J& run = g["runs"][r];
      std::printf(
          "             run %zu: pages [%lld, %lld) from request %lld's %s extent of %lld pages\n",
          r, i(run["first_page"]), i(run["first_page"]) + i(run["pages"]), i(run["extent_request"]),
          run["extent_placement"].get<std::string>().c_str(), i(run["extent_pages"]));
    }
    if (g["runs"].size() > 8) std::printf("             ... %zu more runs\n", g["runs"].size() - 8);
  }
}

// The gather methods and backup schedules priced for this request, the chosen ones marked.
void PrintAlternatives(const J& j) {
  const J& g = j["gather"];
  if (!g["alternatives"].empty())
    std::printf("           %-11s %12s %12s %14s %14s\n", "method", "per layer", "all layers",
                "fabric B/rank", "service");
  for (const J& a : g["alternatives"]) {
    const std::string m = a["method"].get<std::string>();
    if (!a["allowed"].get<bool>()) {
      std::printf("           %-11s %12s (not allowed: %s)\n", m.c_str(), "-",
                  a["why_not"].get<std::string>().c_str());
      continue;
    }
    std::printf("           %-11s %10.1f us %10.3f ms %14.0f %11.3f ms%s\n", m.c_str(),
                a["per_layer_s"].get<double>() * 1e6, a["total_s"].get<double>() * 1e3,
                a["fabric_bytes_per_rank"].get<double>(), a["service_s"].get<double>() * 1e3,
                m == g["chosen"].get<std::string>() ? "  <- chosen" : "");
  }
  if (g.contains("partial_merge_predicted")) {
    const J& pm = g["partial_merge_predicted"];
    std::printf(
        "           %-11s %10.1f us %10.3f ms %14.0f (were KV interleaved by token: "
        "cache.interleave_tokens; queries and partial outputs move, not the prefix)\n",
        "partial_merge", pm["per_layer_s"].get<double>() * 1e6, pm["total_s"].get<double>() * 1e3,
        pm["fabric_bytes_per_rank"].get<double>());
  }
  const J& b = j["backup"];
  if (!b["alternatives"].empty()) {
    std::printf("backup     %s pages per lane to host\n", PerLane(b["pages_per_lane"]).c_str());
    for (const J& a : b["alternatives"]) {
      const std::string sc = a["schedule"].get<std::string>();
      std::printf("           %-9s total %.3f ms, beyond forward %.3f ms, submit %.3f ms%s\n",
                  sc.c_str(), a["total_s"].get<double>() * 1e3,
                  a["beyond_forward_s"].get<double>() * 1e3, a["submit_s"].get<double>() * 1e3,
                  sc == b["chosen"].get<std::string>() ? "  <- chosen" : "");
    }
  }
}

// The request's schedule per rank and stream, and the prefetch depths it was weighed against.
void PrintSchedule(const J& sc) {
  auto i = [](const J& v) { return static_cast<long long>(v.get<int64_t>()); };
  std::printf(
      "schedule   prefetch_layers %lld, %lld overlap share(s) in the profile; from the "
      "forward start, per schedule rank (lanes with the same copies share one) and stream:\n",
      i(sc["prefetch_layers"]), i(sc["overlap_shares"]));
  for (const J& rk : sc["ranks"]) {
    std::string lanes;
    for (const J& l : rk["lanes"]) lanes += (lanes.empty() ? "" : " ") + std::to_string(i(l));
    std::printf("           lanes [%s]: ends at %.3f ms%s\n", lanes.c_str(),
                rk["end_s"].get<double>() * 1e3,
                &rk == &sc["ranks"][static_cast<size_t>(i(sc["critical_rank"]))]
                    ? " (the last: the request's span)"
                    : "");
    for (const J& st : rk["streams"]) {
      const J& ops = st["ops"];
      if (ops.empty()) continue;
      std::printf("           %-10s %3zu ops, %8.3f .. %8.3f ms, busy %.3f ms (alone %.3f ms)\n",
                  st["stream"].get<std::string>().c_str(), ops.size(),
                  ops.front()["start_s"].get<double>() * 1e3,
                  ops.back()["end_s"].get<double>() * 1e3, st["busy_s"].get<double>() * 1e3,
                  st["alone_s"].get<double>() * 1e3);
      // The first layers' ops show how the streams interleave.
      std::string first;
      int shown = 0;
      for (const J& o : ops) {
        if (o["layer"].get<int64_t>() > 1) break;
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s%s l%lld %.1f-%.1f us", shown++ ? ", " : "",
                      o["op"].get<std::string>().c_str(), i(o["layer"]),
                      o["start_s"].get<double>() * 1e6, o["end_s"].get<double>() * 1e6);
        first += buf;
      }
      if (!first.empty()) std::printf("             %s\n", first.c_str());
    }
  }
  for (const J& a : sc["prefetch_alternatives"])
    std::printf("           prefetch_layers %lld: service %.3f ms, cache %lld pages per lane%s\n",
                i(a["prefetch_layers"]), a["service_s"].get<double>() * 1e3,
                i(a["cache_pages_per_lane"]),
                i(a["prefetch_layers"]) == i(sc["prefetch_layers"]) ? "  <- configured" : "");
}

void PrintExplain(const J& j) {
  auto i = [](const J& v) { return static_cast<long long>(v.get<int64_t>()); };
  std::printf("policy %s, cp_size %lld, gather.method %s, backup.schedule %s\n",
              j["policy"].get<std::string>().c_str(), i(j["cp_size"]),
              j["gather_config"].get<std::string>().c_str(),
              j["backup_config"].get<std::string>().c_str());
  std::printf("mode       %s%s\n", j["mode"].get<std::string>().c_str(),
              j.contains("mode_note") ? (": " + j["mode_note"].get<std::string>()).c_str() : "");
  std::printf("request %lld: arrival %.6f s, %lld input tokens (%lld pages)\n", i(j["request"]),
              j["arrival_s"].get<double>(), i(j["input_tokens"]), i(j["input_pages"]));
  if (const J& gs = j["gather_scratch"]; gs["scratch"].get<std::string>() == "counted")
    std::printf(
        "capacity   gather.scratch counted: a ring of %lld layer(s) of the largest prefix (%lld "
        "pages)%s takes %lld of %lld device pages per lane (%lld B); the cache keeps %lld\n",
        i(gs["ring_layers"]), i(gs["largest_prefix_pages"]),
        gs["pack_buffers"].get<bool>() ? " and the pack buffers" : "",
        i(gs["device_pages_lost_per_lane"]), i(gs["device_pages_per_lane"]),
        i(gs["bytes_per_lane"]), i(gs["cache_pages_per_lane"]));
  std::printf("match      device %lld pages, host-only %lld pages\n", i(j["match"]["device_pages"]),
              i(j["match"]["host_only_pages"]));
  if (j["match"]["host_only_pages"].get<int64_t>() > 0)
    std::printf("load-back  %s: %lld pages per lane %s\n",
                j["load_back"]["loaded"].get<bool>() ? "loaded" : "not loaded (recomputed)",
                i(j["load_back"]["pages"]), PerLane(j["load_back"]["pages_per_lane"]).c_str());
  if (j.contains("hit_agreement")) {
    const J& h = j["hit_agreement"];
    std::printf("agreement %s: %s", h["rule"].get<std::string>().c_str(),
                h["allreduce"].get<bool>() ? "one all-reduce (minimum) of the host hit"
                                           : "no collective (no host match or one rank)");
    if (h.contains("allreduce_s")) std::printf(", %.1f us", h["allreduce_s"].get<double>() * 1e6);
    std::printf("\n");
  }
  for (const J& e : j["evictions"])
    std::printf("evict      %s: %lld pages, per lane %s\n", e["tier"].get<std::string>().c_str(),
                i(e["pages"]), PerLane(e["pages_per_lane"]).c_str());
  bool any_write_back = false;
  for (const J& v : j["write_back_pages_per_lane"]) any_write_back |= v.get<int64_t>() > 0;
  if (any_write_back)
    std::printf("write-back %s pages per lane at eviction\n",
                PerLane(j["write_back_pages_per_lane"]).c_str());
  const J& cm = j["compute"];
  std::printf("compute    %lld new tokens over a %lld-token prefix; %s; cached pages per lane %s\n",
              i(cm["new_tokens"]), i(cm["prefix_tokens"]),
              cm["cached"].get<bool>() ? "new pages cached" : "NOT cached (no room on a lane)",
              PerLane(cm["cached_pages_per_lane"]).c_str());
  const J& g = j["gather"];
  PrintGatherPrefix(g);
  if (!j.contains("predicted")) {
    std::printf("gather     chosen %s (no hardware profile: no predicted costs)\n",
                g["chosen"].get<std::string>().c_str());
    return;
  }
  PrintAlternatives(j);
  PrintSchedule(j["schedule"]);
  const J& pr = j["predicted"];
  std::printf(
      "predicted  compute %.3f ms, gather %.3f ms, load-back stall %.3f ms, write-back %.3f ms, "
      "backup beyond forward %.3f ms: service %.3f ms\n",
      pr["compute_s"].get<double>() * 1e3, pr["gather_s"].get<double>() * 1e3,
      pr["load_back_stall_s"].get<double>() * 1e3, pr["write_back_s"].get<double>() * 1e3,
      pr["backup_beyond_forward_s"].get<double>() * 1e3, pr["service_s"].get<double>() * 1e3);
}

// Serving mode: the request as the schedule admitted it, its decisions priced alone.
int ExplainServed(const po::variables_map& vm, const ReplayInputs& in, int64_t target) {
  if (in.config.hardware.profile.empty())
    throw InputError("", 0, "serving.mode",
                     "'serving' needs a hardware profile (hardware.profile) to schedule passes");
  const CostModel cost(LoadHardwareProfile(in.config.hardware.profile), in.config,
                       in.config.hardware.profile);
  const ServingAdmission a = ExplainServing(in.config, in.trace, target, cost);
  const RequestCost c = cost.Request(a.plan, true);
  J doc = ExplainJson(in.config, a.plan, &cost, &c);
  doc["request"] = target;  // the trace index (the plan counts within its replica)
  doc["serving"] = a.block;
  const std::string out = vm.count("json") ? vm["json"].as<std::string>() : "";
  if (!out.empty()) WriteFileAtomically(out, doc.dump(2) + "\n");
  if (out != "-") {
    PrintExplain(doc);
    PrintServingAdmission(doc["serving"]);
  }
  return 0;
}

}  // namespace

int CmdExplain(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc);
  desc.add_options()("request", po::value<int64_t>(),
                     "index of the request to explain (0-based, replay order)")(
      "json", po::value<std::string>(),
      "write the explanation as JSON to this file ('-' = standard output, then no text)")(
      "help,h", "this help");
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, nullptr, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(std::cout, std::string(argv[0]) + " --trace FILE --request N [options]",
              "Replays requests 0..N-1, then prints request N's decisions with the alternatives\n"
              "and, with a hardware profile, their predicted costs.",
              desc,
              {"kvlanes explain --trace traces/mooncake_excerpt.jsonl --config config/default.yaml "
               "--request 120",
               "kvlanes explain --trace traces/mooncake_excerpt.jsonl --config config/default.yaml "
               "--request 120 --json - | python3 -m json.tool"},
              "config keys (YAML or --set):\n" + ConfigHelp());
    return 0;
  }
  try {
    if (!vm.count("request")) throw InputError("", 0, "--request", "which request? (--request N)");
    CheckOutputOptions(vm, {"json"}, {"trace", "config", "profile"});
    ReplayInputs in = LoadReplayInputs(vm, {"json"});
    const int64_t target = vm["request"].as<int64_t>();
    const int64_t n = static_cast<int64_t>(in.trace.requests.size());
    if (target < 0 || target >= n)
      throw InputError("", 0, "--request",
                       "must be in 0.." + std::to_string(n - 1) + " for this trace");
    if (in.config.serving.Enabled()) return ExplainServed(vm, in, target);
    auto policy = MakePolicy(in.config.policy, in.config, in.trace);
    ReplayEngine engine(in.config, *policy, in.trace.block_tokens);
    std::unique_ptr<CostModel> cost;
    std::unique_ptr<Predictor> predictor;
    if (!in.config.hardware.profile.empty()) {
      cost = std::make_unique<CostModel>(LoadHardwareProfile(in.config.hardware.profile), in.config,
                                         in.config.hardware.profile);
      predictor = std::make_unique<Predictor>(*cost, nullptr);
    }
    RequestPlan plan;
    for (int64_t i = 0; i <= target; ++i) {
      engine.Process(in.trace.requests[static_cast<size_t>(i)],
                     (predictor || i == target) ? &plan : nullptr);
      // The target's cost with its schedule's ops (the explanation lists them).
      const RequestCost* c = predictor ? &predictor->Add(plan, i == target) : nullptr;
      if (i == target) {
        const J doc = ExplainJson(in.config, plan, cost.get(), c);
        const std::string out = vm.count("json") ? vm["json"].as<std::string>() : "";
        if (!out.empty()) WriteFileAtomically(out, doc.dump(2) + "\n");
        if (out != "-") PrintExplain(doc);
      }
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

// Shared helpers of the executor tests: plans replayed in memory from the shipped traces with
// small configs (few layers, tiny pools), run through the executor, and the report read back.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "exec/exec_run.h"
#include "exec/executor.h"
#include "policies/registry.h"
#include "sim/config.h"
#include "sim/predict/plan.h"
#include "sim/predict/plan_pricing.h"
#include "sim/report/report.h"
#include "traces/trace_reader.h"

namespace kvlanes::exec::testing {

inline std::string SourcePath(const std::string& rel) {
  return std::string(KVLANES_SOURCE_DIR) + "/" + rel;
}

// A fresh directory under the build's temp space, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "kvlanes-exec-test-XXXXXX").string();
    path_ = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The config every CI case starts from: 2 layers, two pools of 8 and 4 bytes per token, pages of
// 64 tokens, small lanes and a host tier so that evictions, load-backs and backups all happen.
inline ReplayConfig SmallConfig(int cp_size, const std::vector<std::string>& sets) {
  ReplayConfig cfg;
  for (const std::string& s :
       {std::string("cache.cp_size=") + std::to_string(cp_size), std::string("model.layers=2"),
        std::string("model.pools=[{name: kv, bytes_per_token_layer: 8}, {name: indexer, "
                    "bytes_per_token_layer: 4}]"),
        std::string("cache.page_tokens=64")})
    ApplyConfigSetting(s, cfg);
  for (const std::string& s : sets) ApplyConfigSetting(s, cfg);
  ValidateConfig(cfg);
  return cfg;
}

// Replays `trace` (a path under the source tree) and returns the plan as the file would hold it:
// header and requests round-tripped through the plan's JSON form (docs/plan.md).
inline PlanFile ReplayTrace(const Trace& t, const ReplayConfig& cfg) {
  auto policy = MakePolicy(cfg.policy, cfg, t);
  PlanFile pf;
  std::optional<ProfileFile> profile;
  if (!cfg.hardware.profile.empty()) profile = ReadProfileFile(cfg.hardware.profile);
  pf.header = PlanHeaderOf(cfg, profile ? &*profile : nullptr);
  // Each request priced as the plan writer prices it (layer_spin_s).
  const SpinPricer spin(profile ? &profile->profile : nullptr, cfg.hardware.profile,
                        cfg.cache.cp_size, cfg.cache.page_tokens);
  ReplaySinks sinks;
  int64_t line = 2;
  sinks.on_request = [&](const RequestPlan& p, const RequestCost*) {
    RequestPlan priced = p;
    priced.layer_spin_s = spin.LayerS(p);
    pf.requests.push_back(
        PlanFromJson(nlohmann::json::parse(PlanToJson(priced, cfg).dump()), "(memory)", line++));
  };
  RunReplay(cfg, *policy, t, EngineOptions{}, {}, sinks);
  return pf;
}

// A serving-mode config's plan with its pass lines (docs/plan.md), written and read back as a
// file: the first `max_requests` requests of `trace`.
inline PlanFile ServingPlanOf(const std::string& trace, const ReplayConfig& cfg,
                              size_t max_requests) {
  TraceOptions opt;
  opt.page_tokens = cfg.cache.page_tokens;
  Trace t = LoadTrace({SourcePath(trace)}, std::nullopt, opt);
  if (t.requests.size() > max_requests) t.requests.resize(max_requests);
  auto policy = MakePolicy(cfg.policy, cfg, t);
  TempDir dir;
  const std::string path = dir.File("plan.jsonl");
  {
    std::ofstream out(path);
    ReplaySinks sinks;
    sinks.plan = &out;
    RunReplay(cfg, *policy, t, EngineOptions{}, {}, sinks);
  }
  return ReadPlanFile(path);
}

inline PlanFile ReplayPlan(const std::string& trace, const ReplayConfig& cfg, size_t max_requests) {
  TraceOptions opt;
  opt.page_tokens = cfg.cache.page_tokens;
  Trace t = LoadTrace({SourcePath(trace)}, std::nullopt, opt);
  if (t.requests.size() > max_requests) t.requests.resize(max_requests);
  return ReplayTrace(t, cfg);
}

// A base request of whole blocks (no unaligned tail page), then requests that extend it with
// their own suffixes: each later prefix is exactly the base's zigzag extent, so a run
// descriptor proves it and zigzag-gated chooses the zigzag gather. The shipped traces rarely
// have page-aligned requests.
inline Trace AlignedPrefixTrace(int followers) {
  Trace t;
  t.block_tokens = 512;
  t.sources = {"(synthetic)"};
  Request base;
  base.input_tokens = 8 * 512;
  for (uint64_t b = 1; b <= 8; ++b) base.block_ids.push_back(b);
  t.requests.push_back(base);
  for (int i = 0; i < followers; ++i) {
    Request r = base;
    r.arrival_ns = (i + 1) * 1000000;
    r.input_tokens = 8 * 512 + 300 + 64 * i;
    r.block_ids.push_back(1000 + static_cast<uint64_t>(i));
    t.requests.push_back(r);
  }
  return t;
}

// Every (op id, rank) pair the plan asks for, read from the plan's JSON form: copies by their
// lane's rank, evictions by every rank owning a freed slot, compute and gather by every rank.
inline std::set<std::pair<std::string, int>> ExpectedOps(const PlanFile& pf,
                                                         const ReplayConfig& cfg) {
  std::set<std::pair<std::string, int>> want;
  const int N = static_cast<int>(cfg.cache.cp_size);
  for (const RequestPlan& p : pf.requests) {
    // cache.cp_hit_agreement min: every rank's all-reduce of its reported hit.
    if (!p.hit_reports.empty())
      for (int r = 0; r < N; ++r) want.insert({std::to_string(p.request) + "/hit_agreement", r});
    const nlohmann::ordered_json j = PlanToJson(p, cfg);
    for (const auto& op : j["ops"]) {
      const std::string kind = op["kind"], id = op["id"];
      if (kind == "evict") {
        // Runs [lane, slot, count]: the lane is fixed within a run (docs/plan.md).
        for (const auto& s : op["slot_runs"]) want.insert({id, s[0].get<int>()});
      } else if (kind == "compute" || kind == "gather") {
        for (int r = 0; r < N; ++r) want.insert({id, r});
      } else {
        want.insert({id, op["lane"].get<int>()});
      }
    }
  }
  return want;
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A host-backend run writing measured.json into `dir`, quiet, no warm-up rounds.
inline RunOptions HostOptions(const TempDir& dir, double timeout_s) {
  RunOptions o;
  o.backend = "host";
  o.out = dir.File("measured.json");
  o.timeout_s = timeout_s;
  o.quiet = true;
  o.exec.warmup = 0;
  return o;
}

// True when this process has no child left, running or zombie.
inline bool NoChildrenLeft() { return waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

}  // namespace kvlanes::exec::testing

#include "driver/mrc.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "driver/run_grid.h"
#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/engine/replay_driver.h"
#include "sim/mrc/lru_curve.h"

namespace kvlanes::driver {

const char* MrcSourceName(MrcSource s) {
  switch (s) {
    case MrcSource::kOnePassExact:
      return "one-pass exact";
    case MrcSource::kOnePassEstimate:
      return "one-pass estimate";
    case MrcSource::kReplayed:
      return "replayed";
  }
  return "replayed";
}

double HitRatio(int64_t hit, int64_t input) {
  const double in = input > 0 ? static_cast<double>(input) : 1.0;
  return static_cast<double>(hit) / in;
}

std::vector<int64_t> MrcCapacities(const std::string& vary) {
  const VaryAxis a = ParseVary(vary);
  if (a.key != "cache.device_pages_per_lane")
    throw InputError("", 0, "--vary " + a.key,
                     "varies cache.device_pages_per_lane only (kvlanes sweep varies any key)");
  std::vector<int64_t> out;
  for (const std::string& v : a.values) {
    size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != v.size() || x < 1)
      throw InputError("", 0, "--vary " + a.key + "=" + v, "not an integer >= 1");
    out.push_back(x);
  }
  return out;
}

ReplayConfig MrcPointConfig(const ReplayConfig& base, const std::string& policy, int64_t pages) {
  Grid grid;
  grid.policies = {policy};
  grid.axes.push_back(VaryAxis{"cache.device_pages_per_lane", {std::to_string(pages)}});
  return GridRunConfig(base, grid, 0);
}

MrcPoint ReplayPoint(const ReplayConfig& cfg, const std::string& policy, const Trace& trace) {
  const PolicyInputs in{cfg, trace, PolicyCostModel(cfg)};
  auto p = MakePolicy(policy, in);
  MrcPoint point;
  point.pages_per_lane = cfg.cache.device_pages_per_lane;
  point.lane_hit_tokens.assign(static_cast<size_t>(cfg.cache.cp_size), 0);
  // A request's prefix (device hit plus pages loaded back) per owner lane, from its plan.
  const auto add = [&](const RequestPlan& plan) {
    for (size_t r = 0; r < plan.shard_pages.size(); ++r)
      point.lane_hit_tokens[r] += plan.shard_pages[r] * cfg.cache.page_tokens;
  };
  ReplaySinks sinks;
  sinks.replica_policy = [&] { return MakePolicy(policy, in); };
  sinks.cost = in.cost;
  sinks.on_request = [&](const RequestPlan& plan, const RequestCost*) { add(plan); };
  sinks.on_admit = add;
  const nlohmann::ordered_json report = RunReplay(cfg, *p, trace, {}, nullptr, sinks);
  point.hit_tokens =
      report["device_hit_tokens"].get<int64_t>() + report["host_hit_tokens"].get<int64_t>();
  return point;
}

namespace {

// Replays the points `todo` (indices into curve.points) on up to `threads` threads.
void ReplayPoints(MrcCurve& curve, const std::vector<ReplayConfig>& configs,
                  const std::string& policy, const Trace& trace, const std::vector<size_t>& todo,
                  int threads) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr first_error;
  const auto worker = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      try {
        MrcPoint p = ReplayPoint(configs[todo[i]], policy, trace);
        curve.points[todo[i]] = std::move(p);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error) first_error = std::current_exception();
        next = todo.size();
      }
    }
  };
  const size_t n =
      std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), std::max<size_t>(todo.size(), 1));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace

MrcCurve CapacityCurve(const ReplayConfig& base, const std::string& policy, const Trace& trace,
                       const std::vector<int64_t>& pages, bool estimate, int threads) {
  MrcCurve curve;
  curve.lanes = static_cast<int>(base.cache.cp_size);
  for (const Request& r : trace.requests) curve.input_tokens += r.input_tokens;
  std::vector<ReplayConfig> configs;
  for (int64_t p : pages) configs.push_back(MrcPointConfig(base, policy, p));
  curve.points.resize(pages.size());
  curve.one_pass_unsupported = OnePassUnsupported(configs.front(), policy);
  std::vector<size_t> todo;
  if (curve.one_pass_unsupported.empty()) {
    const LruCurve one = OnePassLruCurve(configs.front(), trace, pages);
    for (size_t k = 0; k < pages.size(); ++k) {
      const CurvePoint& c = one.points[k];
      curve.points[k] = MrcPoint{c.pages_per_lane, c.hit_tokens, c.lane_hit_tokens,
                                 c.exact ? MrcSource::kOnePassExact : MrcSource::kOnePassEstimate};
      if (!c.exact && !estimate) todo.push_back(k);
    }
  } else {
    for (size_t k = 0; k < pages.size(); ++k) todo.push_back(k);
  }
  ReplayPoints(curve, configs, policy, trace, todo, threads);
  return curve;
}

}  // namespace kvlanes::driver

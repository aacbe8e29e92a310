// kvlanes bench policies: the replay speed of several policies against lru, measured in one run.
// Every round replays the trace once with each policy, lru included, in an order rotated by one
// policy per round, so that a slow phase of a shared machine falls on every policy alike. Each
// replay is timed as `bench replay` times its engine loop: the thread's CPU time of building the
// engine and processing every request (the policy's own construction left out). A policy's
// ratio is its median over the rounds divided by lru's; the min and max ratios are over the
// rounds, each round's time divided by lru's time in the same round (docs/policies.md,
// "Replay speed against lru").
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/percentile.h"
#include "driver/run_grid.h"
#include "io/input_error.h"
#include "io/output_file.h"
#include "policies/registry.h"
#include "sim/config.h"
#include "sim/engine/replay_engine.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"
#include "tools/scaled_trace.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

struct Replayed {
  double seconds = 0;
  double hit_ratio = 0;  // the report's token_hit_ratio: (device + host hit tokens) / input
};

Replayed ReplayOnce(const std::string& policy_name, const ReplayConfig& cfg, const Trace& trace) {
  auto policy = MakePolicy(policy_name, cfg, trace);
  const double a = ThreadCpuSeconds();
  ReplayEngine engine(cfg, *policy, trace.block_tokens);
  for (const Request& r : trace.requests) engine.Process(r);
  const double s = ThreadCpuSeconds() - a;
  const auto& c = engine.counters();
  const double in = static_cast<double>(c.input_tokens);
  return {s, in > 0 ? static_cast<double>(c.device_hit_tokens + c.host_hit_tokens) / in : 0.0};
}

// lru first (the ratios' base), then --policies, else every registered policy.
std::vector<std::string> TimedPolicies(const po::variables_map& vm) {
  std::vector<std::string> names{"lru"};
  if (vm.count("policies")) {
    for (const std::string& n : driver::SplitList(vm["policies"].as<std::string>(), "--policies")) {
      CheckPolicyName(n, "--policies");
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  } else {
    for (const PolicyInfo& p : RegisteredPolicies())
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.emplace_back(p.name);
  }
  return names;
}

void PrintBenchPoliciesHelp(const char* command, const po::options_description& desc) {
  PrintHelp(std::cout, std::string(command) + " --trace FILE [--policies a,b,c] [options]",
            "Replays the trace with each policy and with lru, interleaved over rounds, and\n"
            "prints each policy's median engine-loop time (thread CPU time) and its ratio to\n"
            "lru's median, with the smallest and largest per-round ratio (docs/policies.md).",
            desc,
            {"kvlanes bench policies --trace traces/mooncake/synthetic_trace.jsonl --set "
             "cache.cp_size=1 --set cache.host_pages_per_lane=0 --set "
             "cache.device_pages_per_lane=15625",
             "kvlanes bench policies --trace traces/mooncake_excerpt.jsonl --policies "
             "seen_lru,seen_rate --rounds 5"},
            "policies:\n" + PoliciesHelp());
}

}  // namespace

int CmdBenchPolicies(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc, false);
  desc.add_options()("policies", po::value<std::string>(),
                     "policies to time, comma-separated (default: every registered one); lru is "
                     "always timed")("rounds", po::value<int>()->default_value(15),
                                     "timed rounds, each replaying every policy once")(
      "warmup", po::value<int>()->default_value(1), "untimed rounds first")(
      "scale", po::value<int>()->default_value(1),
      "replay K concatenated copies of the trace (ids and arrivals offset per copy)")(
      "json", po::value<std::string>(), "write the results as JSON")("help,h", "this help");
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, &pos, vm)) return 2;
  if (vm.count("help")) {
    PrintBenchPoliciesHelp(argv[0], desc);
    return 0;
  }
  try {
    const int scale = vm["scale"].as<int>();
    if (scale < 1 || scale > 4096) throw InputError("", 0, "--scale", "must be in [1, 4096]");
    const int rounds = vm["rounds"].as<int>();
    if (rounds < 1 || rounds > 100000)
      throw InputError("", 0, "--rounds", "must be in 1..100000, got " + std::to_string(rounds));
    const int warmup = vm["warmup"].as<int>();
    if (warmup < 0 || warmup > 1000)
      throw InputError("", 0, "--warmup", "must be in 0..1000, got " + std::to_string(warmup));
    const std::vector<std::string> names = TimedPolicies(vm);
    CheckOutputOptions(vm, {"json"}, {"trace", "config", "profile"});
    ReplayInputs in = LoadReplayInputs(vm, {"json"});
    in.trace = ScaleTrace(in.trace, scale);
    const Trace& trace = in.trace;
    const ReplayConfig& cfg = in.config;

    const size_t np = names.size();
    std::vector<std::vector<double>> times(np);  // [policy][round]
    std::vector<double> hit(np, 0.0);
    for (int round = -warmup; round < rounds; ++round) {
      // Round r starts at policy r mod np (the warm-up rounds too).
      const size_t first = static_cast<size_t>(round + warmup) % np;
      for (size_t k = 0; k < np; ++k) {
        const size_t i = (first + k) % np;
        const Replayed r = ReplayOnce(names[i], cfg, trace);
        if (round >= 0) times[i].push_back(r.seconds);
        hit[i] = r.hit_ratio;
      }
    }

    const double lru = Median(times[0]);
    std::printf(
        "kvlanes bench policies: %zu requests (scale %d), cp_size %lld, %lld device pages per "
        "lane, %lld host pages per lane, %d rounds (+%d warm-up), engine loop in thread CPU "
        "time\n",
        trace.requests.size(), scale, static_cast<long long>(cfg.cache.cp_size),
        static_cast<long long>(cfg.cache.device_pages_per_lane),
        static_cast<long long>(cfg.cache.host_pages_per_lane), rounds, warmup);
    std::printf("%-26s %12s %10s %10s %10s %10s\n", "policy", "median s", "x lru", "min x", "max x",
                "hit ratio");
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (size_t i = 0; i < np; ++i) {
      const double med = Median(times[i]);
      double lo = 0, hi = 0;
      for (size_t r = 0; r < times[i].size(); ++r) {
        const double x = times[0][r] > 0 ? times[i][r] / times[0][r] : 0.0;
        lo = r == 0 ? x : std::min(lo, x);
        hi = r == 0 ? x : std::max(hi, x);
      }
      const double ratio = lru > 0 ? med / lru : 0.0;
      std::printf("%-26s %12.4f %10.2f %10.2f %10.2f %10.4f\n", names[i].c_str(), med, ratio, lo,
                  hi, hit[i]);
      rows.push_back({{"policy", names[i]},
                      {"median_s", med},
                      {"ratio_to_lru", ratio},
                      {"min_round_ratio", lo},
                      {"max_round_ratio", hi},
                      {"token_hit_ratio", hit[i]},
                      {"seconds", times[i]}});
    }
    if (vm.count("json")) {
      nlohmann::ordered_json j;
      j["requests"] = trace.requests.size();
      j["scale"] = scale;
      j["config"] = ConfigToJson(cfg);
      j["rounds"] = rounds;
      j["warmup"] = warmup;
      j["clock"] = "thread_cpu";
      j["policies"] = rows;
      WriteFileAtomically(vm["json"].as<std::string>(), j.dump(2) + "\n");
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

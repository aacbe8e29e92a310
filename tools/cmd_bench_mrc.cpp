// kvlanes bench mrc: the one-pass capacity curve (sim/mrc/lru_curve.h) against the replays it
// stands for, in one run: one replay per point (the ceiling: the target is the whole curve in at
// most 2x one replay), all of them, and the one pass; then how far each estimate lies from its
// replay. Times are process CPU (user + system) and wall, medians over --reps.
#include <time.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "driver/mrc.h"
#include "driver/run_grid.h"
#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/engine/replay_driver.h"
#include "sim/mrc/lru_curve.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

struct MrcClocks {
  double cpu = 0, wall = 0;
};

MrcClocks MrcNow() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return {static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec), wall};
}

template <class F>
MrcClocks MrcTime(F&& f) {
  const MrcClocks a = MrcNow();
  f();
  const MrcClocks b = MrcNow();
  return {b.cpu - a.cpu, b.wall - a.wall};
}

double MrcMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A plain replay (no outputs, as `kvlanes replay` runs it): its hit tokens.
int64_t MrcPlainReplay(const ReplayConfig& cfg, const Trace& trace) {
  auto p = MakePolicy(cfg.policy, cfg, trace);
  const nlohmann::ordered_json r = RunReplay(cfg, *p, trace, {}, nullptr);
  return r["device_hit_tokens"].get<int64_t>() + r["host_hit_tokens"].get<int64_t>();
}

struct MrcBenchTimes {
  std::vector<double> one_cpu, one_wall, all_cpu, all_wall, pass_cpu, pass_wall;
};

void PrintMrcAccuracy(const std::vector<int64_t>& pages, const LruCurve& one,
                      const std::vector<int64_t>& replayed, int64_t input) {
  double worst = 0;
  int64_t worst_at = 0, within = 0, exact = 0, exact_equal = 0;
  for (size_t k = 0; k < pages.size(); ++k) {
    const double d = std::fabs(driver::HitRatio(one.points[k].hit_tokens, input) -
                               driver::HitRatio(replayed[k], input));
    if (d > worst) worst = d, worst_at = pages[k];
    within += d <= 0.001;
    exact += one.points[k].exact;
    exact_equal += one.points[k].exact && one.points[k].hit_tokens == replayed[k];
  }
  std::printf(
      "accuracy: %zu points, %lld one-pass exact (%lld of them equal to their replays), "
      "%lld within 0.001 of their replays, max |one pass - replay| %.3g",
      pages.size(), static_cast<long long>(exact), static_cast<long long>(exact_equal),
      static_cast<long long>(within), worst);
  if (worst > 0) std::printf(" (at %lld pages per lane)", static_cast<long long>(worst_at));
  std::printf("\n");
}

}  // namespace

int CmdBenchMrc(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc, true);
  desc.add_options()("vary", po::value<std::string>(),
                     "cache.device_pages_per_lane=LIST: the curve's capacities")(
      "reps", po::value<int>()->default_value(3), "repetitions (medians)")("help,h", "this help");
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, &pos, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(std::cout,
              std::string(argv[0]) + " --trace FILE [--policy lru] --vary " +
                  "cache.device_pages_per_lane=LIST [--reps N]",
              "Times the one-pass capacity curve against one replay per point (the ceiling)\n"
              "and all of them, in one run, and prints how far each one-pass point lies from\n"
              "its replay (docs/policies.md, \"Capacity curves in one pass\").",
              desc,
              {"kvlanes bench mrc --trace traces/mooncake_excerpt.jsonl --policy lru "
               "--vary cache.device_pages_per_lane=1000:1000000:x1.25"});
    return 0;
  }
  try {
    if (!vm.count("vary")) throw InputError("", 0, "--vary", "required");
    const std::vector<int64_t> capacities = driver::MrcCapacities(vm["vary"].as<std::string>());
    const int reps = vm["reps"].as<int>();
    if (reps < 1) throw InputError("", 0, "--reps", "must be >= 1");
    ReplayInputs in = LoadReplayInputs(vm);
    const std::string policy = in.config.policy;
    std::vector<int64_t> pages;
    std::vector<ReplayConfig> configs;
    for (int64_t p : capacities) {
      configs.push_back(driver::MrcPointConfig(in.config, policy, p));
      pages.push_back(configs.back().cache.device_pages_per_lane);
    }
    const std::string why = OnePassUnsupported(configs.front(), policy);
    if (!why.empty()) throw InputError("", 0, "--policy", "the one pass does not apply: " + why);
    MrcBenchTimes t;
    std::vector<int64_t> replayed(pages.size());
    LruCurve one;
    for (int rep = 0; rep < reps; ++rep) {
      std::vector<double> cpu, wall;
      const MrcClocks all = MrcTime([&] {
        for (size_t k = 0; k < pages.size(); ++k) {
          const MrcClocks c = MrcTime([&] { replayed[k] = MrcPlainReplay(configs[k], in.trace); });
          cpu.push_back(c.cpu);
          wall.push_back(c.wall);
        }
      });
      const MrcClocks pass =
          MrcTime([&] { one = OnePassLruCurve(configs.front(), in.trace, pages); });
      t.one_cpu.push_back(MrcMedian(cpu));
      t.one_wall.push_back(MrcMedian(wall));
      t.all_cpu.push_back(all.cpu);
      t.all_wall.push_back(all.wall);
      t.pass_cpu.push_back(pass.cpu);
      t.pass_wall.push_back(pass.wall);
    }
    const double ceiling = MrcMedian(t.one_cpu);
    std::printf(
        "bench mrc: %s, %zu requests, policy %s, cp_size %lld, %zu points; process CPU "
        "(user + system) and wall, medians of %d\n",
        in.trace.sources.front().c_str(), in.trace.requests.size(), policy.c_str(),
        static_cast<long long>(in.config.cache.cp_size), pages.size(), reps);
    std::printf("%-34s %10s %10s %14s\n", "stage", "cpu_s", "wall_s", "cpu / 1 replay");
    const auto row = [&](const char* what, const std::vector<double>& c,
                         const std::vector<double>& w) {
      std::printf("%-34s %10.4f %10.4f %14.2f\n", what, MrcMedian(c), MrcMedian(w),
                  ceiling > 0 ? MrcMedian(c) / ceiling : 0.0);
    };
    row("one replay (median point): ceiling", t.one_cpu, t.one_wall);
    row("one pass, every point", t.pass_cpu, t.pass_wall);
    row("a replay per point", t.all_cpu, t.all_wall);
    int64_t input = 0;
    for (const Request& r : in.trace.requests) input += r.input_tokens;
    PrintMrcAccuracy(pages, one, replayed, input);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

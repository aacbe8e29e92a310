// kvlanes bench replay: replay speed on a real trace, with a floor measured in the same run.
// The floor is the key build: expanding every request's block ids into its page keys, the first
// step of every replay (no replay can take less time). Formulas: docs/replay.md.
#include <sys/resource.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "policies/registry.h"
#include "sim/engine/replay_engine.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"
#include "traces/input_error.h"
#include "traces/output_file.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int CmdBenchReplay(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc);
  desc.add_options()("repeat", po::value<int>()->default_value(5),
                     "timed repetitions (median reported)")(
      "json", po::value<std::string>(), "write the results as JSON")("help,h", "this help");
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, &pos, vm)) return 2;
  if (vm.count("help")) {
    std::cout
        << "usage: " << argv[0] << " --trace FILE [options]\n\n"
        << "Times trace loading, the page-key build (the floor, same run) and the replay itself;\n"
        << "prints requests/s, page operations/s and peak resident memory.\n\n"
        << desc;
    return 0;
  }
  try {
    const auto t0 = Clock::now();
    ReplayInputs in = LoadReplayInputs(vm);
    const double load_s = Seconds(t0, Clock::now());
    const Trace& trace = in.trace;
    const int repeat = vm["repeat"].as<int>();
    if (repeat < 1 || repeat > 1000000)
      throw InputError("", 0, "--repeat", "must be in 1..1000000, got " + std::to_string(repeat));
    const int64_t P = in.config.cache.page_tokens;
    const int64_t ppb = trace.block_tokens / P;

    std::vector<double> scan_s, replay_s;
    int64_t keys = 0, page_ops = 0, nodes = 0;
    for (int rep = 0; rep < repeat; ++rep) {
      const auto a = Clock::now();
      std::vector<PageKey> buf;
      keys = 0;
      uint64_t sink = 0;
      for (const Request& r : trace.requests) {
        const int64_t n = KeyedPages(r, r.input_tokens, P, trace.block_tokens);
        buf.clear();
        for (int64_t i = 0; i < n; ++i) buf.push_back(PageKeyAt(r, i, ppb));
        keys += n;
        sink += buf.empty() ? 0 : buf.back().block;
      }
      volatile uint64_t keep = sink;  // the compiler must build the keys
      (void)keep;
      scan_s.push_back(Seconds(a, Clock::now()));

      auto policy = MakePolicy(in.config.policy, in.config, in.trace);
      const auto b = Clock::now();
      ReplayEngine engine(in.config, *policy, trace.block_tokens);
      for (const Request& r : trace.requests) engine.Process(r);
      replay_s.push_back(Seconds(b, Clock::now()));
      page_ops = engine.counters().PageOps(P);
      nodes = static_cast<int64_t>(engine.tree().alive_nodes());
    }
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double peak_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
    const double n = static_cast<double>(trace.requests.size());
    const double scan = Median(scan_s), replay = Median(replay_s);
    std::printf(
        "kvlanes bench replay: %zu requests, policy %s, cp_size %lld, page_tokens %lld, %d reps\n",
        trace.requests.size(), in.config.policy.c_str(),
        static_cast<long long>(in.config.cache.cp_size), static_cast<long long>(P), repeat);
    std::printf("%-22s %10s %14s %16s %12s\n", "stage", "seconds", "requests/s", "pages/s",
                "x key build");
    std::printf("%-22s %10.4f %14.0f %16s %12s\n", "trace load", load_s, n / load_s, "-", "-");
    std::printf("%-22s %10.4f %14.0f %16.0f %12s\n", "key build (floor)", scan, n / scan,
                keys / scan, "1.0");
    std::printf("%-22s %10.4f %14.0f %16.0f %12.1f\n", "replay (page ops)", replay, n / replay,
                page_ops / replay, replay / scan);
    std::printf(
        "page ops %lld, page keys %lld, tree nodes at end %lld, peak resident memory %.1f MiB\n",
        static_cast<long long>(page_ops), static_cast<long long>(keys),
        static_cast<long long>(nodes), peak_mib);
    if (vm.count("json")) {
      nlohmann::ordered_json j;
      j["requests"] = trace.requests.size();
      j["policy"] = in.config.policy;
      j["config"] = ConfigToJson(in.config);
      j["repeat"] = repeat;
      j["trace_load_s"] = load_s;
      j["key_build_s"] = scan;
      j["page_keys"] = keys;
      j["replay_s"] = replay;
      j["page_ops"] = page_ops;
      j["requests_per_s"] = n / replay;
      j["page_ops_per_s"] = page_ops / replay;
      j["key_build_pages_per_s"] = keys / scan;
      j["peak_rss_mib"] = peak_mib;
      WriteFileAtomically(vm["json"].as<std::string>(), j.dump(2) + "\n");
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

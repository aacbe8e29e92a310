// kvlanes compare: one trace through several policies (in parallel threads; results identical
// to sequential runs), one table, and the reports as JSON (`runs`) and CSV.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <thread>

#include "driver/run_grid.h"
#include "io/input_error.h"
#include "io/input_file.h"
#include "io/output_file.h"
#include "policies/registry.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/config_help.h"
#include "tools/replay_setup.h"
#include "tools/run_progress.h"

namespace po = boost::program_options;

namespace kvlanes::cli {

namespace {

// The line above the table: the trace, the cache and the mode the runs replayed.
void PrintCompareHeader(FILE* console, const ReplayInputs& in) {
  std::fprintf(
      console,
      "%zu requests, cp_size %lld, %lld device + %lld host pages per lane, page %lld tokens; "
      "%s\n",
      in.trace.requests.size(), static_cast<long long>(in.config.cache.cp_size),
      static_cast<long long>(in.config.cache.device_pages_per_lane),
      static_cast<long long>(in.config.cache.host_pages_per_lane),
      static_cast<long long>(in.config.cache.page_tokens),
      in.config.serving.Enabled()
          ? ("serving mode, " + std::to_string(in.config.serving.replicas) + " replica(s)").c_str()
          : "sequential mode");
}

}  // namespace

int CmdCompare(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc, false);
  desc.add_options()("policies", po::value<std::string>(),
                     "policies to compare, comma-separated (e.g. lru,lfu,oracle)")(
      "json", po::value<std::string>(),
      "write {context, runs: [one replay report per policy]} to this file")(
      "csv", po::value<std::string>(), "write one CSV row per policy to this file")(
      "jobs,j", po::value<int>(), "threads (default: hardware threads, at most one per policy)")(
      "quiet,q", po::bool_switch(), "no progress, no table")("help,h", "this help");
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  try {
    po::options_description hidden;  // --policy only to point at --policies
    hidden.add_options()("policy", po::value<std::string>(), "");
    po::options_description all;
    all.add(desc).add(hidden);
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    ReportUsageError(argv[0], e, desc);
    return 2;
  }
  if (vm.count("help")) {
    PrintHelp(std::cout,
              std::string(argv[0]) + " --trace FILE [--config FILE] --policies a,b,c [options]",
              "Replays one trace through several policies with the same config and prints one\n"
              "table: token hit ratio by tier, evicted pages, lane deficit failures, uncached\n"
              "requests, load-back and host write volume. Policies run in parallel threads; every\n"
              "run is independent, so the results equal sequential runs. Column formulas:\n"
              "docs/policies.md.",
              desc,
              {"kvlanes compare --trace traces/mooncake_excerpt.jsonl --config config/default.yaml "
               "--policies lanes,lru,lfu",
               "kvlanes compare --trace traces/mooncake_excerpt.jsonl --config config/default.yaml "
               "--set serving.mode=sequential --policies lru,oracle --csv compare.csv"},
              "policies:\n" + PoliciesHelp() + "\nconfig keys (YAML or --set):\n" + ConfigHelp());
    return 0;
  }
  try {
    CheckOutputOptions(vm, {"json", "csv"}, {"trace", "config", "profile"});
    if (vm.count("policy"))
      throw InputError("", 0, "--policy", "compare takes --policies a,b,c (comma-separated)");
    if (!vm.count("policies"))
      throw InputError("", 0, "--policies", "required (e.g. --policies lru,lfu,oracle)");
    const std::vector<std::string> names =
        driver::SplitList(vm["policies"].as<std::string>(), "--policies");
    for (const auto& n : names) CheckPolicyName(n, "--policies");
    const ReplayInputs in = LoadReplayInputs(vm, {"json", "csv"});
    std::vector<driver::ReplayJob> jobs;
    for (const auto& n : names) {
      ReplayConfig cfg = in.config;
      cfg.policy = n;
      jobs.push_back(driver::ReplayJob{n, cfg, &in.trace});
    }
    const int threads = vm.count("jobs") ? vm["jobs"].as<int>()
                                         : static_cast<int>(std::thread::hardware_concurrency());
    if (threads < 1) throw InputError("", 0, "--jobs", "must be >= 1");
    const bool quiet = vm["quiet"].as<bool>();
    const std::string warning = HostTierWarning(in.config);
    if (!warning.empty()) std::fprintf(stderr, "%s: %s\n", argv[0], warning.c_str());
    RunProgress progress("compare", jobs.size(), !quiet);
    const auto reports =
        driver::RunReplayJobs(jobs, threads, [&](size_t i, const nlohmann::ordered_json& r) {
          char ratio[64];
          std::snprintf(ratio, sizeof ratio, " done, token hit ratio %.4f",
                        r["token_hit_ratio"].get<double>());
          progress.Done(jobs[i].policy + ratio);
        });
    nlohmann::ordered_json out;
    out["compare_version"] = 1;
    out["context"] = {{"trace", JsonSafeTexts(in.trace.sources)},
                      {"requests", in.trace.requests.size()},
                      {"config", ConfigToJson(in.config)}};
    out["runs"] = nlohmann::ordered_json::array();
    for (const auto& r : reports) out["runs"].push_back(r);
    if (vm.count("json")) WriteFileAtomically(vm["json"].as<std::string>(), out.dump(2) + "\n");
    if (vm.count("csv")) driver::WriteRunsCsv(vm["csv"].as<std::string>(), out["runs"], {});
    if (!quiet) {
      FILE* console = SummaryStream(vm, {"json", "csv"});
      PrintCompareHeader(console, in);
      driver::PrintRunsTable(console, out["runs"], {});
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

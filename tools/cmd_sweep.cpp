// kvlanes sweep: a grid of replays (policies x --vary values), optionally one shard of it, as
// JSON and CSV, with a plot; kvlanes sweep merge: joins shard files into the unsharded output.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <thread>
#include <tuple>

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

extern char** environ;

namespace po = boost::program_options;
using J = nlohmann::ordered_json;

namespace kvlanes::cli {
namespace {

std::vector<std::string> VaryKeys(const J& grid) {
  std::vector<std::string> keys;
  for (const auto& a : grid["vary"]) keys.push_back(a["key"].get<std::string>());
  return keys;
}

// The plotting script: $KVLANES_PLOT_SCRIPT, else plot_sweep.py beside the executable (the build
// copies it there), else the source tree's tools/plot_sweep.py.
std::string SweepPlotScript() {
  if (const char* env = std::getenv("KVLANES_PLOT_SCRIPT")) return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = exe.parent_path() / "plot_sweep.py";
    if (std::filesystem::exists(beside)) return beside.string();
  }
  return KVLANES_SOURCE_DIR "/tools/plot_sweep.py";
}

// The interpreter: $KVLANES_PYTHON, else the system's /usr/bin/python3 (python3-matplotlib from
// Debian, as tools/setup.sh installs it, lives there, not in a pyenv or venv python3 first on
// PATH), else python3 from PATH.
std::string Python() {
  if (const char* env = std::getenv("KVLANES_PYTHON")) return env;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

// Draws `sweep_json` (a file) into `plot` with python3 + matplotlib. Throws InputError.
void Plot(const std::string& sweep_json, const std::string& plot) {
  const std::string script = SweepPlotScript(), python = Python();
  std::vector<std::string> args = {python, script, sweep_json, plot};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
    throw InputError(plot, 0, "--plot",
                     "cannot start " + python + " (needed for plots; tools/setup.sh installs it)");
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw InputError(plot, 0, "--plot",
                     script + " failed (message above; it needs python3-matplotlib)");
}

// One warning on stderr for the runs whose host tier is smaller than their device tier
// (HostTierWarning), naming the first of them: a capacity sweep's curve goes flat there.
void WarnSmallHostTier(const std::vector<driver::ReplayJob>& jobs, const std::vector<size_t>& mine,
                       const driver::Grid& grid) {
  size_t count = 0;
  std::string first;
  std::string warning;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const std::string w = HostTierWarning(jobs[j].config);
    if (w.empty()) continue;
    if (count++ == 0) {
      warning = w;
      first = jobs[j].policy;
      for (const auto& [k, v] : grid.Run(mine[j]).second) first += " " + k + "=" + v;
    }
  }
  if (count > 0)
    std::fprintf(stderr, "sweep: %zu of %zu runs (the first: %s): %s\n", count, jobs.size(),
                 first.c_str(), warning.c_str());
}

// The image formats matplotlib writes (its savefig formats), checked before any work so that a
// misspelt --plot does not fail only after the whole sweep has run.
void CheckPlotName(const po::variables_map& vm) {
  if (!vm.count("plot")) return;
  const std::string plot = vm["plot"].as<std::string>();
  const auto dot = plot.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : plot.substr(dot + 1);
  static const std::set<std::string> kFormats = {"eps",  "jpeg", "jpg",  "pdf",  "pgf",
                                                 "png",  "ps",   "raw",  "rgba", "svg",
                                                 "svgz", "tif",  "tiff", "webp"};
  if (!kFormats.count(ext))
    throw InputError(plot, 0, "--plot",
                     "the format comes from the extension: one of .png, .svg, .pdf, .eps, .jpg, "
                     ".tif, .webp, .ps, .pgf, .raw, .rgba, .svgz");
}

// Writes the outputs shared by sweep and sweep merge.
void WriteOutputs(const J& doc, const po::variables_map& vm, bool quiet) {
  const std::vector<std::string> keys = VaryKeys(doc["grid"]);
  if (vm.count("json")) WriteFileAtomically(vm["json"].as<std::string>(), doc.dump(2) + "\n");
  if (vm.count("csv")) driver::WriteRunsCsv(vm["csv"].as<std::string>(), doc["runs"], keys);
  if (vm.count("plot")) {
    std::string src;
    std::string tmp;
    if (vm.count("json") && !WritesToStdout(vm, "json")) {
      src = vm["json"].as<std::string>();
    } else {
      char name[] = "/tmp/kvlanes_sweep_XXXXXX";
      const int fd = mkstemp(name);
      if (fd < 0) throw InputError(name, 0, "--plot", "cannot create a temporary file");
      close(fd);
      tmp = src = name;
      WriteFileAtomically(src, doc.dump() + "\n");
    }
    try {
      Plot(src, vm["plot"].as<std::string>());
    } catch (...) {
      if (!tmp.empty()) std::remove(tmp.c_str());
      throw;
    }
    if (!tmp.empty()) std::remove(tmp.c_str());
  }
  if (!quiet) driver::PrintRunsTable(SummaryStream(vm, {"json", "csv"}), doc["runs"], keys);
}

void AddOutputOptions(po::options_description& desc) {
  desc.add_options()("json", po::value<std::string>(),
                     "write the grid and its runs (replay reports) as JSON")(
      "csv", po::value<std::string>(), "write one CSV row per run")(
      "plot", po::value<std::string>(),
      "draw token hit ratio against the capacity (or first --vary key), "
      "one line per policy; format from the extension (.png, .pdf, .svg); "
      "runs tools/plot_sweep.py with $KVLANES_PYTHON or /usr/bin/python3")(
      "quiet,q", po::bool_switch(), "no progress, no table")("help,h", "this help");
}

bool ParseSweep(int argc, const char* const* argv, const po::options_description& desc,
                const po::positional_options_description& pos, po::variables_map& vm) {
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
    po::notify(vm);
    return true;
  } catch (const po::error& e) {
    ReportUsageError(argv[0], e, desc);
    return false;
  }
}

void PrintSweepCommandHelp(const char* command, const po::options_description& desc) {
  PrintHelp(
      std::cout,
      std::string(command) +
          " --trace FILE [--config FILE] --policies a,b \\\n"
          "         --vary cache.device_pages_per_lane=1000,4000,16000 [--vary KEY=LIST] "
          "[options]\n"
          "       kvlanes sweep merge SHARD.json... [--json F] [--csv F] [--plot F]",
      "Replays the trace for every policy and every combination of --vary values (run i is\n"
      "policy-major, the first --vary outermost), on parallel threads, with progress on\n"
      "stderr. A --vary LIST is a,b,c, a range a:b:step or a geometric range a:b:xF.\n"
      "Large grids: run shard I of N on each machine (--shard I/N --json part.I.json,\n"
      "e.g. from a Slurm job array or mpirun; recipe in docs/policies.md), then\n"
      "`kvlanes sweep merge part.*.json --json all.json` gives what one unsharded run "
      "gives.",
      desc,
      {"kvlanes sweep --trace traces/mooncake/synthetic_trace.jsonl --set cache.cp_size=1 "
       "--policies lru,oracle --vary cache.device_pages_per_lane=15625:156250:x2 "
       "--csv sweep.csv --plot sweep.png",
       "kvlanes sweep --trace traces/mooncake_excerpt.jsonl --config config/default.yaml "
       "--vary serving.replicas=1,2,4 --vary serving.router=round_robin,prefix"},
      "policies:\n" + PoliciesHelp() + "\nconfig keys (YAML, --set or --vary):\n" + ConfigHelp());
}

}  // namespace

int CmdSweep(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc, false);
  desc.add_options()("policies", po::value<std::string>(),
                     "policies, comma-separated (default: the config's policy)")(
      "vary", po::value<std::vector<std::string>>()->composing(),
      "KEY=V1,V2,...: a config key and its values (repeatable; the grid is every combination); "
      "an item may be a range START:END:STEP or START:END:xFACTOR (END included)")(
      "shard", po::value<std::string>(),
      "I/N: run only grid runs i with i mod N == I (0 <= I < N); "
      "join the N JSON files with `kvlanes sweep merge`")("jobs,j", po::value<int>(),
                                                          "threads (default: hardware threads)");
  AddOutputOptions(desc);
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  po::options_description hidden;  // --policy only to point at --policies
  hidden.add_options()("policy", po::value<std::string>(), "");
  po::options_description all;
  all.add(desc).add(hidden);
  if (!ParseSweep(argc, argv, all, pos, vm)) return 2;
  if (vm.count("help")) {
    PrintSweepCommandHelp(argv[0], desc);
    return 0;
  }
  try {
    CheckOutputOptions(vm, {"json", "csv", "plot"}, {"trace", "config", "profile"});
    CheckPlotName(vm);
    if (vm.count("policy"))
      throw InputError("", 0, "--policy", "sweep takes --policies a,b,c (comma-separated)");
    ReplayInputs in = LoadReplayInputs(vm, {"json", "csv", "plot"});
    driver::Grid grid;
    grid.policies = driver::SplitList(
        vm.count("policies") ? vm["policies"].as<std::string>() : in.config.policy, "--policies");
    for (const auto& p : grid.policies) CheckPolicyName(p, "--policies");
    if (vm.count("vary")) {
      for (const auto& v : vm["vary"].as<std::vector<std::string>>()) {
        driver::VaryAxis a = driver::ParseVary(v);
        for (const auto& b : grid.axes)
          if (b.key == a.key) throw InputError("", 0, "--vary " + a.key, "given twice");
        grid.axes.push_back(std::move(a));
      }
    }
    driver::CheckGridSize(grid, "--vary");
    auto [shard, shards] = vm.count("shard") ? driver::ParseShard(vm["shard"].as<std::string>())
                                             : std::pair<size_t, size_t>{0, 1};
    const int threads = vm.count("jobs") ? vm["jobs"].as<int>()
                                         : static_cast<int>(std::thread::hardware_concurrency());
    if (threads < 1) throw InputError("", 0, "--jobs", "must be >= 1");

    // Every run's config is built and validated before anything runs, so a bad value fails
    // at once. Runs that change how the trace is read (page or block size, format) get the
    // trace read their way, once per distinct way.
    std::vector<size_t> mine;
    std::vector<driver::ReplayJob> jobs;
    std::map<std::tuple<int64_t, int64_t, std::string>, Trace> traces;
    traces.emplace(std::make_tuple(in.config.cache.page_tokens, in.config.trace.block_tokens,
                                   in.config.trace.format),
                   std::move(in.trace));
    for (size_t i = 0; i < grid.size(); ++i) {
      ReplayConfig cfg = driver::GridRunConfig(in.config, grid, i);
      if (i % shards != shard) continue;
      const auto key =
          std::make_tuple(cfg.cache.page_tokens, cfg.trace.block_tokens, cfg.trace.format);
      auto it = traces.find(key);
      if (it == traces.end()) it = traces.emplace(key, LoadTraceFor(cfg, vm)).first;
      mine.push_back(i);
      jobs.push_back(driver::ReplayJob{cfg.policy, cfg, &it->second});
    }
    const bool quiet = vm["quiet"].as<bool>();
    if (!quiet)
      std::fprintf(stderr, "sweep: %zu runs%s on %d threads\n", jobs.size(),
                   shards > 1 ? (" (shard " + std::to_string(shard) + "/" + std::to_string(shards) +
                                 " of a " + std::to_string(grid.size()) + "-run grid)")
                                    .c_str()
                              : "",
                   std::min<int>(threads, static_cast<int>(std::max<size_t>(1, jobs.size()))));
    WarnSmallHostTier(jobs, mine, grid);
    RunProgress progress("sweep", jobs.size(), !quiet);
    const auto reports = driver::RunReplayJobs(jobs, threads, [&](size_t j, const J& r) {
      std::string what = jobs[j].policy;
      for (const auto& [k, v] : grid.Run(mine[j]).second) what += " " + k + "=" + v;
      char ratio[64];
      std::snprintf(ratio, sizeof ratio, ": token hit ratio %.4f",
                    r["token_hit_ratio"].get<double>());
      progress.Done(what + ratio);
    });

    const J doc = driver::SweepDoc(in.config, grid, traces.begin()->second.sources, mine, reports,
                                   std::make_pair(shard, shards));
    WriteOutputs(doc, vm, quiet);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

int CmdSweepMerge(int argc, const char* const* argv) {
  po::options_description desc("options");
  desc.add_options()("shards", po::value<std::vector<std::string>>()->composing(),
                     "shard JSON files written by kvlanes sweep --shard I/N --json FILE");
  AddOutputOptions(desc);
  po::positional_options_description pos;
  pos.add("shards", -1);
  po::variables_map vm;
  if (!ParseSweep(argc, argv, desc, pos, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(
        std::cout, std::string(argv[0]) + " SHARD.json... [--json FILE] [--csv FILE] [--plot FILE]",
        "Joins the JSON files of all N shards of one sweep into what the unsharded sweep\n"
        "writes. Refuses files of different grids, a shard given twice and missing shards.",
        desc,
        {"kvlanes sweep merge part.*.json --json sweep.json --csv sweep.csv --plot sweep.png"});
    return 0;
  }
  try {
    CheckOutputOptions(vm, {"json", "csv", "plot"}, {"shards"});
    CheckPlotName(vm);
    const J doc =
        driver::MergeSweepFiles(vm.count("shards") ? vm["shards"].as<std::vector<std::string>>()
                                                   : std::vector<std::string>{});
    WriteOutputs(doc, vm, vm["quiet"].as<bool>());
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

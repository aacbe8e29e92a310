// kvlanes mrc: the token hit ratio against the device capacity (a capacity or miss-ratio curve),
// in total and per owner lane, from one pass over the trace where that is exact, else from
// replays (or, with --estimate, the one pass's estimates); each point says which.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "driver/mrc.h"
#include "driver/run_grid.h"
#include "io/input_error.h"
#include "io/output_file.h"
#include "policies/registry.h"
#include "sim/report/provenance.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/config_help.h"
#include "tools/replay_setup.h"

namespace po = boost::program_options;
using J = nlohmann::ordered_json;

namespace kvlanes::cli {
namespace {

constexpr const char* kMrcKey = "cache.device_pages_per_lane";

// A ratio as the replay report writes it (JSON's shortest round-trip form of the double).
std::string RatioText(int64_t hit, int64_t input) { return J(driver::HitRatio(hit, input)).dump(); }

void PrintCurve(FILE* to, const driver::MrcCurve& c) {
  std::fprintf(to, "%14s %-22s", "pages_per_lane", "token_hit_ratio");
  for (int r = 0; r < c.lanes && c.lanes > 1; ++r) std::fprintf(to, " lane%-17d", r);
  std::fprintf(to, " source\n");
  for (const driver::MrcPoint& p : c.points) {
    std::fprintf(to, "%14lld %-22s", static_cast<long long>(p.pages_per_lane),
                 RatioText(p.hit_tokens, c.input_tokens).c_str());
    for (int r = 0; r < c.lanes && c.lanes > 1; ++r)
      std::fprintf(to, " %-21s",
                   RatioText(p.lane_hit_tokens[static_cast<size_t>(r)], c.input_tokens).c_str());
    std::fprintf(to, " %s\n", driver::MrcSourceName(p.source));
  }
}

J CurveJson(const driver::MrcCurve& c, const ReplayConfig& cfg, const std::vector<std::string>& tr,
            const std::string& policy) {
  J doc;
  doc["context"] = ReplayContext(cfg, tr);
  doc["policy"] = policy;
  doc["cp_size"] = c.lanes;
  doc["input_tokens"] = c.input_tokens;
  doc["one_pass"] = c.one_pass_unsupported.empty() ? J("applies") : J(c.one_pass_unsupported);
  J points = J::array();
  for (const driver::MrcPoint& p : c.points) {
    J lanes = J::array();
    for (int64_t h : p.lane_hit_tokens) lanes.push_back(driver::HitRatio(h, c.input_tokens));
    points.push_back(J{{"device_pages_per_lane", p.pages_per_lane},
                       {"hit_tokens", p.hit_tokens},
                       {"token_hit_ratio", driver::HitRatio(p.hit_tokens, c.input_tokens)},
                       {"lane_token_hit_ratio", std::move(lanes)},
                       {"source", driver::MrcSourceName(p.source)}});
  }
  doc["points"] = std::move(points);
  return doc;
}

void PrintMrcHelp(const char* command, const po::options_description& desc) {
  PrintHelp(std::cout,
            std::string(command) + " --trace FILE [--config FILE] [--policy NAME] --vary " +
                kMrcKey + "=LIST [options]",
            "The token hit ratio at every device capacity of LIST (a,b,c, START:END:STEP or\n"
            "START:END:xFACTOR, as in kvlanes sweep), in total and per owner lane. For lru\n"
            "without a host tier in sequential mode the curve comes from one pass over the\n"
            "trace; the points that pass proves equal to a replay are `one-pass exact`, the\n"
            "others are replayed (`replayed`), or with --estimate given as the one pass's\n"
            "`one-pass estimate`. Other configs are replayed point by point. Times, TTFT and\n"
            "every other report field need kvlanes sweep (docs/policies.md, \"Capacity curves\n"
            "in one pass\").",
            desc,
            {"kvlanes mrc --trace traces/mooncake_excerpt.jsonl --policy lru "
             "--vary cache.device_pages_per_lane=2000:64000:x2",
             "kvlanes mrc --trace traces/mooncake_excerpt.jsonl --policy lru --set "
             "cache.cp_size=4 --vary cache.device_pages_per_lane=500:16000:x2 --estimate"},
            "policies:\n" + PoliciesHelp() + "\nconfig keys (YAML or --set):\n" + ConfigHelp());
}

}  // namespace

int CmdMrc(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc, true);
  desc.add_options()("vary", po::value<std::string>(),
                     "cache.device_pages_per_lane=LIST: the capacities (pages per lane)")(
      "estimate", po::bool_switch(),
      "points the one pass does not prove exact: its estimate instead of a replay")(
      "json", po::value<std::string>(), "write the curve as JSON (with the replay context)")(
      "jobs,j", po::value<int>(), "replay threads (default: hardware threads)")(
      "quiet,q", po::bool_switch(), "no table")("help,h", "this help");
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, &pos, vm)) return 2;
  if (vm.count("help")) {
    PrintMrcHelp(argv[0], desc);
    return 0;
  }
  try {
    CheckOutputOptions(vm, {"json"}, {"trace", "config", "profile"});
    if (!vm.count("vary"))
      throw InputError("", 0, "--vary", std::string("required: ") + kMrcKey + "=LIST");
    const std::vector<int64_t> pages = driver::MrcCapacities(vm["vary"].as<std::string>());
    const int threads = vm.count("jobs") ? vm["jobs"].as<int>()
                                         : static_cast<int>(std::thread::hardware_concurrency());
    if (threads < 1) throw InputError("", 0, "--jobs", "must be >= 1");
    ReplayInputs in = LoadReplayInputs(vm, {"json"});
    const std::string policy = in.config.policy;
    const driver::MrcCurve curve = driver::CapacityCurve(in.config, policy, in.trace, pages,
                                                         vm["estimate"].as<bool>(), threads);
    if (!curve.one_pass_unsupported.empty() && !vm["quiet"].as<bool>())
      std::fprintf(stderr, "mrc: every point replayed: the one pass does not apply to %s\n",
                   curve.one_pass_unsupported.c_str());
    if (vm.count("json"))
      WriteFileAtomically(vm["json"].as<std::string>(),
                          CurveJson(curve, in.config, in.trace.sources, policy).dump(2) + "\n");
    if (!vm["quiet"].as<bool>()) PrintCurve(SummaryStream(vm, {"json"}), curve);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

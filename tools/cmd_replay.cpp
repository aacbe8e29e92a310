// kvlanes replay: one trace through one policy; console summary and a JSON report.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "policies/registry.h"
#include "sim/predict/cost_model.h"
#include "sim/report/report.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"
#include "traces/input_error.h"
#include "traces/output_file.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

void PrintSummary(const nlohmann::ordered_json& r) {
  auto i = [&](const char* k) { return r[k].get<int64_t>(); };
  const double in = static_cast<double>(std::max<int64_t>(1, i("input_tokens")));
  std::printf("policy %s on %zu lanes, %lld requests, %lld input tokens\n",
              r["policy"].get<std::string>().c_str(), r["lanes"].size(),
              static_cast<long long>(i("requests")), static_cast<long long>(i("input_tokens")));
  std::printf("  token hit ratio        %.4f  (device %.4f, host %.4f)\n",
              r["token_hit_ratio"].get<double>(), i("device_hit_tokens") / in,
              i("host_hit_tokens") / in);
  std::printf("  computed tokens        %lld\n", static_cast<long long>(i("computed_tokens")));
  std::printf("  uncached requests      %lld  (lane deficit failures %lld)\n",
              static_cast<long long>(i("uncached_requests")),
              static_cast<long long>(i("lane_deficit_failures")));
  std::printf("  evicted pages          device %lld, host %lld  (ancestor unlocks %lld)\n",
              static_cast<long long>(r["evicted_pages"]["device"].get<int64_t>()),
              static_cast<long long>(r["evicted_pages"]["host"].get<int64_t>()),
              static_cast<long long>(i("ancestor_unlocks")));
  std::printf(
      "  load-back              %lld pages, %.3f GB in %lld loads (%lld skipped, %lld failed)\n",
      static_cast<long long>(r["load_back"]["pages"].get<int64_t>()),
      r["load_back"]["bytes"].get<int64_t>() / 1e9,
      static_cast<long long>(r["load_back"]["count"].get<int64_t>()),
      static_cast<long long>(r["load_back"]["skipped"].get<int64_t>()),
      static_cast<long long>(r["load_back"]["failed"].get<int64_t>()));
  std::printf("  host writes            %lld pages, %.3f GB (%lld refused)\n",
              static_cast<long long>(r["host_writes"]["pages"].get<int64_t>()),
              r["host_writes"]["bytes"].get<int64_t>() / 1e9,
              static_cast<long long>(r["host_writes"]["refused"].get<int64_t>()));
  std::printf("  gather methods        ");
  for (const auto& [k, v] : r["gather"]["method_counts"].items())
    std::printf(" %s %lld", k.c_str(), static_cast<long long>(v.get<int64_t>()));
  if (r.contains("predicted")) {
    const auto& p = r["predicted"];
    std::printf("\n  predicted (%s%s)\n", p["profile"].get<std::string>().c_str(),
                p["profile_measured"].get<bool>() ? "" : ", not measured");
    std::printf(
        "    busy %.3f s = compute %.3f + gather %.3f + load-back stalls %.3f + backup beyond "
        "forward %.3f + write-back %.3f\n",
        p["total_s"].get<double>(), p["compute_s"].get<double>(), p["gather_s"].get<double>(),
        p["load_back_s"].get<double>(), p["backup_exposed_s"].get<double>(),
        p["write_back_s"].get<double>());
    std::printf("    TTFT p50 %.3f s, p99 %.3f s (queueing %.1f s in total)",
                p["ttft_p50_s"].get<double>(), p["ttft_p99_s"].get<double>(),
                p["queue_s"].get<double>());
  }
  std::printf("\n  lanes (pages)          rank  device cap/peak      host cap/peak\n");
  for (const auto& l : r["lanes"])
    std::printf("                         %4lld  %8lld/%-8lld  %8lld/%-8lld\n",
                static_cast<long long>(l["rank"].get<int64_t>()),
                static_cast<long long>(l["device_capacity_pages"].get<int64_t>()),
                static_cast<long long>(l["device_peak_pages"].get<int64_t>()),
                static_cast<long long>(l["host_capacity_pages"].get<int64_t>()),
                static_cast<long long>(l["host_peak_pages"].get<int64_t>()));
}

}  // namespace

int CmdReplay(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc);
  desc.add_options()("json", po::value<std::string>(), "write the JSON report to this file")(
      "plan", po::value<std::string>(),
      "write the plan stream (JSON Lines, docs/plan.md) to this file")(
      "timeline", po::value<std::string>(),
      "write the predicted schedule as Chrome trace-event JSON (open in Perfetto); needs a "
      "profile")("check-invariants", po::bool_switch(),
                 "recompute ledger and tree after every request; abort on a mismatch")(
      "quiet,q", po::bool_switch(), "no progress, no console summary")("help,h", "this help");
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, &pos, vm)) return 2;
  if (vm.count("help")) {
    std::cout
        << "usage: " << argv[0] << " --trace FILE [options]\n\n"
        << "Replays a request trace in order through the radix KV cache of a context-parallel\n"
        << "group and reports hits, evictions, lane deficits, load-backs and host writes.\n\n"
        << desc << "\npolicies:\n"
        << PoliciesHelp() << "\nconfig keys (YAML or --set):\n"
        << ConfigKeysHelp();
    return 0;
  }
  try {
    ReplayInputs in = LoadReplayInputs(vm);
    auto policy = MakePolicy(in.config.policy, in.config, in.trace);
    const bool quiet = vm["quiet"].as<bool>();
    Progress progress("replay", in.trace.requests.size(), !quiet);
    EngineOptions opts;
    opts.check_invariants = vm["check-invariants"].as<bool>();
    if (vm.count("timeline") && in.config.hardware.profile.empty())
      throw InputError("", 0, "--timeline",
                       "needs a hardware profile (--profile or hardware.profile)");
    ReplaySinks sinks;
    std::unique_ptr<StreamingFile> plan_file;
    if (vm.count("plan")) {
      plan_file = std::make_unique<StreamingFile>(vm["plan"].as<std::string>());
      sinks.plan = &plan_file->stream();
    }
    std::unique_ptr<StreamingFile> timeline_file;
    if (vm.count("timeline")) {
      timeline_file = std::make_unique<StreamingFile>(vm["timeline"].as<std::string>());
      sinks.timeline = &timeline_file->stream();
    }
    nlohmann::ordered_json report = RunReplay(
        in.config, *policy, in.trace, opts, [&](size_t d, size_t) { progress.Update(d); }, sinks);
    progress.Finish();
    if (plan_file) plan_file->Commit();
    if (timeline_file) timeline_file->Commit();
    if (vm.count("json")) WriteFileAtomically(vm["json"].as<std::string>(), report.dump(2) + "\n");
    if (!quiet) PrintSummary(report);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

// kvlanes replay: one trace through one policy; console summary and a JSON report.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "io/input_error.h"
#include "io/output_file.h"
#include "policies/registry.h"
#include "sim/predict/cost_model.h"
#include "sim/report/report.h"
#include "sim/report/request_table.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/config_help.h"
#include "tools/replay_setup.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

// The mean request's time to first token by what filled it (docs/serving.md#the-ttft-breakdown).
void PrintServingBreakdown(FILE* out, const nlohmann::ordered_json& total) {
  const auto& p = total["predicted"];
  const double n = static_cast<double>(std::max<int64_t>(1, total["requests"].get<int64_t>()));
  const auto ms = [&](const char* k) { return p[k].get<double>() / n * 1e3; };
  std::fprintf(out,
               "    TTFT mean %.1f ms = queue %.1f + own compute %.1f + pass base %.1f + batch "
               "mates %.1f + extra %.1f + between passes %.1f\n"
               "      extra, each priced alone: gather %.1f, load-back stalls %.1f, backups "
               "exposed %.1f, write-back %.1f, hit agreement %.1f ms\n",
               ms("ttft_s"), ms("queue_s"), ms("compute_s"), ms("pass_base_s"), ms("batch_mates_s"),
               ms("extra_s"), ms("between_passes_s"), ms("gather_s"), ms("load_back_stall_s"),
               ms("backup_exposed_s"), ms("write_back_s"), ms("hit_agreement_s"));
  std::fprintf(out, "    hits saved %.3f s of compute (gather and load-back stalls deducted)\n",
               p["hit_saved_s"].get<double>());
}

// Serving mode's lines (docs/serving.md#metrics): load, TTFT in seconds, per replica.
void PrintServing(FILE* out, const nlohmann::ordered_json& s) {
  const auto& t = s["total"];
  std::fprintf(out,
               "\n  serving                %lld replica(s), router %s, schedule %s, batch %lld "
               "tokens, chunk %lld, decode %g tok/s\n",
               static_cast<long long>(s["replicas"].get<int64_t>()),
               s["router"].get<std::string>().c_str(), s["schedule"].get<std::string>().c_str(),
               static_cast<long long>(s["max_batch_tokens"].get<int64_t>()),
               static_cast<long long>(s["chunk_tokens"].get<int64_t>()),
               s["decode_tokens_per_s"].get<double>());
  std::fprintf(
      out, "    compute terms %s (profile %s)\n",
      s["compute_assumed"].get<bool>() ? "ASSUMED: the profile is not measured" : "measured",
      s["profile"].get<std::string>().c_str());
  std::fprintf(
      out, "    load %.2f of capacity: busy %.1f s over a %.1f s trace span x %lld replica(s)\n",
      t["offered_load"].get<double>(), t["busy_s"].get<double>(), s["span_s"].get<double>(),
      static_cast<long long>(s["replicas"].get<int64_t>()));
  std::fprintf(out,
               "    TTFT p50 %.3f s, p90 %.3f s, p99 %.3f s; queueing mean %.3f s, p99 %.3f s "
               "(%lld requests, %lld in warm-up)\n",
               t["ttft_p50_s"].get<double>(), t["ttft_p90_s"].get<double>(),
               t["ttft_p99_s"].get<double>(), t["queue_mean_s"].get<double>(),
               t["queue_p99_s"].get<double>(), static_cast<long long>(t["requests"].get<int64_t>()),
               static_cast<long long>(s["warmup_requests"].get<int64_t>()));
  PrintServingBreakdown(out, t);
  std::fprintf(out, "    replica  requests  hit ratio  load   TTFT p50 s  p99 s     peak queue\n");
  for (const auto& x : s["per_replica"])
    std::fprintf(out, "    %7lld  %8lld  %9.4f  %5.2f  %10.3f  %8.3f  %10lld\n",
                 static_cast<long long>(x["replica"].get<int64_t>()),
                 static_cast<long long>(x["requests"].get<int64_t>()),
                 x["token_hit_ratio"].get<double>(), x["offered_load"].get<double>(),
                 x["ttft_p50_s"].get<double>(), x["ttft_p99_s"].get<double>(),
                 static_cast<long long>(x["peak_queue"].get<int64_t>()));
  if (!s["warning"].is_null())
    std::fprintf(out, "  WARNING: %s\n", s["warning"].get<std::string>().c_str());
}

void PrintSummary(FILE* out, const nlohmann::ordered_json& r) {
  auto i = [&](const char* k) { return r[k].get<int64_t>(); };
  const double in = static_cast<double>(std::max<int64_t>(1, i("input_tokens")));
  // The mode replayed (docs/serving.md): serving mode's replicas, or one cache in arrival order.
  const std::string mode = r.contains("serving")
                               ? "serving mode, " +
                                     std::to_string(r["serving"]["replicas"].get<int64_t>()) +
                                     " replica(s)"
                               : std::string("sequential mode, one cache in arrival order");
  std::fprintf(out, "policy %s on %zu lanes, %lld requests, %lld input tokens; %s\n",
               r["policy"].get<std::string>().c_str(), r["lanes"].size(),
               static_cast<long long>(i("requests")), static_cast<long long>(i("input_tokens")),
               mode.c_str());
  std::fprintf(out, "  token hit ratio        %.4f  (device %.4f, host %.4f)\n",
               r["token_hit_ratio"].get<double>(), i("device_hit_tokens") / in,
               i("host_hit_tokens") / in);
  std::fprintf(out, "  computed tokens        %lld\n",
               static_cast<long long>(i("computed_tokens")));
  std::fprintf(out, "  uncached requests      %lld  (lane deficit failures %lld)\n",
               static_cast<long long>(i("uncached_requests")),
               static_cast<long long>(i("lane_deficit_failures")));
  std::fprintf(out, "  evicted pages          device %lld, host %lld  (ancestor unlocks %lld)\n",
               static_cast<long long>(r["evicted_pages"]["device"].get<int64_t>()),
               static_cast<long long>(r["evicted_pages"]["host"].get<int64_t>()),
               static_cast<long long>(i("ancestor_unlocks")));
  std::fprintf(
      out,
      "  load-back              %lld pages, %.3f GB in %lld loads (%lld skipped, %lld failed)\n",
      static_cast<long long>(r["load_back"]["pages"].get<int64_t>()),
      r["load_back"]["bytes"].get<int64_t>() / 1e9,
      static_cast<long long>(r["load_back"]["count"].get<int64_t>()),
      static_cast<long long>(r["load_back"]["skipped"].get<int64_t>()),
      static_cast<long long>(r["load_back"]["failed"].get<int64_t>()));
  std::fprintf(out, "  host writes            %lld pages, %.3f GB (%lld refused)\n",
               static_cast<long long>(r["host_writes"]["pages"].get<int64_t>()),
               r["host_writes"]["bytes"].get<int64_t>() / 1e9,
               static_cast<long long>(r["host_writes"]["refused"].get<int64_t>()));
  std::fprintf(out, "  gather methods        ");
  for (const auto& [k, v] : r["gather"]["method_counts"].items())
    std::fprintf(out, " %s %lld", k.c_str(), static_cast<long long>(v.get<int64_t>()));
  if (r.contains("predicted")) {
    const auto& p = r["predicted"];
    std::fprintf(out, "\n  predicted (%s%s)\n", p["profile"].get<std::string>().c_str(),
                 p["profile_measured"].get<bool>() ? "" : ", not measured");
    std::fprintf(
        out,
        "    busy %.3f s = compute %.3f + gather %.3f + load-back stalls %.3f + backup beyond "
        "forward %.3f + write-back %.3f\n",
        p["total_s"].get<double>(), p["compute_s"].get<double>(), p["gather_s"].get<double>(),
        p["load_back_s"].get<double>(), p["backup_exposed_s"].get<double>(),
        p["write_back_s"].get<double>());
    std::fprintf(out, "    hits saved %.3f s of compute (gather and load-back stalls deducted)\n",
                 p["hit_saved_s"].get<double>());
    std::fprintf(out, "    TTFT p50 %.3f s, p99 %.3f s (queueing %.1f s in total)",
                 p["ttft_p50_s"].get<double>(), p["ttft_p99_s"].get<double>(),
                 p["queue_s"].get<double>());
    if (!r.contains("serving") && p.contains("offered_load")) {  // one instance, arrival order
      std::fprintf(out, "\n    load %.2f of one instance: busy %.1f s over a %.1f s trace span",
                   p["offered_load"].get<double>(), p["total_s"].get<double>(),
                   p["span_s"].get<double>());
      if (!p["warning"].is_null())
        std::fprintf(out, "\n  WARNING: %s", p["warning"].get<std::string>().c_str());
    }
  }
  if (r.contains("serving")) PrintServing(out, r["serving"]);
  // Replica/rank in both modes (sequential mode is replica 0), so the tables line up.
  std::fprintf(out, "\n  lanes (pages)  replica/rank  device cap/peak      host cap/peak\n");
  for (const auto& l : r["lanes"])
    std::fprintf(out, "                 %12s  %8lld/%-8lld  %8lld/%-8lld\n",
                 ((l.contains("replica") ? std::to_string(l["replica"].get<int64_t>()) : "0") +
                  "/" + std::to_string(l["rank"].get<int64_t>()))
                     .c_str(),
                 static_cast<long long>(l["device_capacity_pages"].get<int64_t>()),
                 static_cast<long long>(l["device_peak_pages"].get<int64_t>()),
                 static_cast<long long>(l["host_capacity_pages"].get<int64_t>()),
                 static_cast<long long>(l["host_peak_pages"].get<int64_t>()));
}

// The options of `kvlanes replay`: the replay options, then the outputs and switches.
po::options_description ReplayCommandOptions() {
  po::options_description desc("options");
  AddReplayOptions(desc);
  desc.add_options()("json", po::value<std::string>(), "write the JSON report to this file")(
      "plan", po::value<std::string>(),
      "write the plan stream (JSON Lines, docs/plan.md) to this file")(
      "timeline", po::value<std::string>(),
      "write the predicted schedule as Chrome trace-event JSON (open in Perfetto); needs a "
      "profile")("timeline-layers", po::bool_switch(),
                 "with --timeline: every op of each request's schedule (each layer's load-back, "
                 "gather, forward and backup) as a slice inside its request's span")(
      "requests-csv", po::value<std::string>(),
      "write one CSV row per request: hits per tier, evictions, load-back, gather "
      "method; with a profile also service, queue and TTFT seconds (docs/replay.md)")(
      "check-invariants", po::bool_switch(),
      "recompute ledger and tree after every request; abort on a mismatch")(
      "quiet,q", po::bool_switch(), "no progress, no console summary")(
      "warmup-s", po::value<double>(),
      "serving mode: leave requests arriving in the first SECONDS out of the serving metrics "
      "(the same as --set serving.warmup_s=SECONDS)")("help,h", "this help");
  return desc;
}

}  // namespace

int CmdReplay(int argc, const char* const* argv) {
  const po::options_description desc = ReplayCommandOptions();
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, &pos, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(std::cout, std::string(argv[0]) + " --trace FILE [options]",
              "Replays a request trace through the radix KV cache of a context-parallel group\n"
              "(in trace order, or served by replicas: docs/serving.md) and reports hits,\n"
              "evictions, lane deficits, load-backs, host writes and, with a profile, times.",
              desc,
              {"kvlanes replay --trace traces/mooncake_excerpt.jsonl --config config/default.yaml",
               "kvlanes replay --trace traces/mooncake_excerpt.jsonl --config config/default.yaml "
               "--set serving.replicas=2 --plan plan.jsonl --timeline timeline.json",
               "kvlanes replay --trace traces/mooncake_excerpt.jsonl --set serving.mode=sequential "
               "--policy lru --set cache.device_tokens_per_lane=64000 --json - -q"},
              "policies:\n" + PoliciesHelp() + "\nconfig keys (YAML or --set):\n" + ConfigHelp());
    return 0;
  }
  try {
    CheckOutputOptions(vm, {"json", "plan", "timeline", "requests-csv"},
                       {"trace", "config", "profile"});
    ReplayInputs in = LoadReplayInputs(vm, {"json", "plan", "timeline", "requests-csv"});
    if (vm.count("warmup-s")) {
      const double w = vm["warmup-s"].as<double>();
      if (!std::isfinite(w) || w < 0)
        throw InputError("", 0, "--warmup-s", "must be a finite number >= 0");
      in.config.serving.warmup_s = w;
    }
    const std::string warning = HostTierWarning(in.config);
    if (!warning.empty()) std::fprintf(stderr, "%s: %s\n", argv[0], warning.c_str());
    // One cost model for the run's policies (a replica each in serving mode).
    const PolicyInputs policy_in{in.config, in.trace, PolicyCostModel(in.config)};
    auto policy = MakePolicy(in.config.policy, policy_in);
    const bool quiet = vm["quiet"].as<bool>();
    Progress progress("replay", in.trace.requests.size(), !quiet);
    EngineOptions opts;
    opts.check_invariants = vm["check-invariants"].as<bool>();
    if (vm.count("timeline") && in.config.hardware.profile.empty())
      throw InputError("", 0, "--timeline",
                       "needs a hardware profile (--profile or hardware.profile)");
    ReplaySinks sinks;
    sinks.replica_policy = [&] { return MakePolicy(in.config.policy, policy_in); };
    sinks.cost = policy_in.cost;
    std::unique_ptr<StreamingFile> plan_file;
    if (vm.count("plan")) {
      plan_file = std::make_unique<StreamingFile>(vm["plan"].as<std::string>());
      sinks.plan = &plan_file->stream();
      sinks.plan_name = vm["plan"].as<std::string>();
    }
    std::unique_ptr<StreamingFile> timeline_file;
    if (vm.count("timeline")) {
      timeline_file = std::make_unique<StreamingFile>(vm["timeline"].as<std::string>());
      sinks.timeline = &timeline_file->stream();
      sinks.timeline_name = vm["timeline"].as<std::string>();
      sinks.timeline_layers = vm["timeline-layers"].as<bool>();
    }
    std::unique_ptr<RequestTable> requests;
    if (vm.count("requests-csv")) {
      requests = std::make_unique<RequestTable>(in.config);
      requests->Attach(sinks);
    }
    nlohmann::ordered_json report = RunReplay(
        in.config, *policy, in.trace, opts, [&](size_t d, size_t) { progress.Update(d); }, sinks);
    progress.Finish();
    if (plan_file) plan_file->Commit();
    if (timeline_file) timeline_file->Commit();
    if (requests) WriteFileAtomically(vm["requests-csv"].as<std::string>(), requests->ToCsv());
    if (vm.count("json")) WriteFileAtomically(vm["json"].as<std::string>(), report.dump(2) + "\n");
    if (!quiet) {
      FILE* out = SummaryStream(vm, {"json", "plan", "timeline", "requests-csv"});
      PrintSummary(out, report);
      if (opts.check_invariants)
        std::fprintf(out,
                     "  invariants             ledger and tree recomputed after each of the %zu "
                     "requests: consistent\n",
                     in.trace.requests.size());
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

// kvlanes exec: repeats a plan's decisions on real memory (GPUs with NCCL, CUDA IPC and
// host<->device copies, or host memory for CI), checks every byte and measures every operation.
// docs/executor.md has the design; docs/README_executor_section.md the quick start.
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "exec/exec_error.h"
#include "exec/exec_run.h"
#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/predict/plan_pricing.h"
#include "sim/report/report.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

void AddExecOptions(po::options_description& desc) {
  desc.add_options()("plan", po::value<std::string>(),
                     "plan file (JSON Lines, docs/plan.md); or give --trace to make it in memory")(
      "out", po::value<std::string>(), "measured JSON (required; written by rank 0)")(
      "backend", po::value<std::string>()->default_value("cuda"),
      "cuda | host (host memory, CPU reference copies)")(
      "launch", po::value<std::string>()->default_value("local"),
      "local: fork one process per rank here | env: this process is one rank of an external "
      "launcher")(
      "rendezvous", po::value<std::string>(),
      "--launch env: file:DIR (shared directory, fresh per run) or tcp:HOST:PORT (rank 0 listens)")(
      "timeline", po::value<std::string>(), "write the measured schedule as Chrome trace events")(
      "span-trace", po::value<std::string>(),
      "write every timed span (each layer's load-back, gather and its phases, forward and backup "
      "copy, "
      "write-backs, evictions) of every rank as Chrome trace events (Perfetto, chrome://tracing)")(
      "max-requests", po::value<int64_t>()->default_value(-1),
      "execute only the plan's first N requests")(
      "replica", po::value<int64_t>(),
      "serving-mode plan: execute only replica N's requests (one CP group's plan, "
      "docs/serving.md)")("timeout-s", po::value<double>()->default_value(300),
                          "longest any wait may take (collective, barrier, GPU)")(
      "run-timeout-s", po::value<double>()->default_value(0),
      "--launch local: kill every rank after this (0 = never)")(
      "warmup", po::value<int>()->default_value(2),
      "untimed rounds of every primitive before timing")(
      "rounds", po::value<int>()->default_value(1),
      "timed rounds of the whole plan, each from an empty cache and verified; each op's and "
      "request's seconds are their median over the rounds (round_seconds: every round's)")(
      "forward", po::value<std::string>(),
      "the forward pass: model (the proxy of the plan's model shape: attention over the gathered "
      "prefix, cuBLAS GEMMs; default on --backend cuda) | synthetic (on cuda a spin kernel of the "
      "profile's compute time; the only one on --backend host, where it writes the new pages and "
      "waits no predicted time)")(
      "compute-scale", po::value<double>()->default_value(1.0),
      "multiply the forward pass's modelled per-layer duration (0: measure data movement only)")(
      "devices", po::value<std::string>(),
      "--launch local: GPU per rank, e.g. 0,1,2,3 (default: rank modulo GPUs)")(
      "tier-copy", po::value<std::string>()->default_value("kernel"),
      "cuda tier copies: kernel (SM copy kernel) | memcpy (cudaMemcpy2DAsync) | batch "
      "(cudaMemcpyBatchAsync)")("tier-max-ctas", po::value<int>(),
                                "--tier-copy kernel: at most N CTAs per tier copy instead of the "
                                "tuned cap (0: no cap); for experiments")(
      "gate", po::value<std::string>()->default_value("layer0"),
      "on: the device starts each request once the host has enqueued all of it (ops are device "
      "time, as "
      "predicted) | off: work starts as it is enqueued (a short forward pass leaves the host "
      "behind; a request's first ops include host time) | layer0: held until the first layer is "
      "enqueued, which keeps the host ahead while that layer computes")(
      "gate-timeout-s", po::value<double>()->default_value(1.0),
      "a request gate opens by itself after this")(
      "forward-warm", po::value<std::string>()->default_value("on"),
      "--forward model: on: run each request's layer shapes once, untimed, before its timed "
      "work (cuBLAS picks its kernels for a new shape there) | off: the first layer of each "
      "request pays for that choice")(
      "cache-evict", po::value<std::string>()->default_value("auto"),
      "before each request, untimed, write a buffer of twice the GPU's L2 so the request's ops "
      "meet cold caches, as after a model's forward layer: on | off | auto (on for --backend "
      "cuda with the synthetic forward pass, whose spin leaves the last request's pages in L2)")(
      "fault", po::value<std::vector<std::string>>()->composing(),
      "test hook: KIND:RANK:OPID with KIND corrupt|die|hang (repeatable)")(
      "quiet,q", po::bool_switch(), "no console summary")("help,h", "this help");
}

// The options that are not about the plan: outputs, launch, timing, gates and hooks. Checked before
// the plan is read or replayed.
struct ExecArgs {
  exec::RunOptions run;
  std::string launch;
  int64_t max_requests = -1;
  double scale = 1;
  std::string evict;
};

void TimingOptions(const po::variables_map& vm, ExecArgs& a) {
  exec::RunOptions& o = a.run;
  o.timeout_s = TimeoutOption(vm, "timeout-s");
  a.max_requests = vm["max-requests"].as<int64_t>();
  if (a.max_requests < -1 || a.max_requests == 0)
    throw InputError("", 0, "--max-requests",
                     "must be -1 (every request) or >= 1, got " + std::to_string(a.max_requests) +
                         (a.max_requests == 0 ? " (a run of no request measures nothing)" : ""));
  a.scale = ScaleOption(vm, "compute-scale");
  o.run_timeout_s = TimeoutOption(vm, "run-timeout-s", /*zero_means_never=*/true);
  o.exec.warmup = vm["warmup"].as<int>();
  if (o.exec.warmup < 0) throw InputError("", 0, "--warmup", "must be >= 0");
  o.exec.rounds = vm["rounds"].as<int>();
  if (o.exec.rounds < 1) throw InputError("", 0, "--rounds", "must be >= 1");
}

void DeviceOptions(const po::variables_map& vm, ExecArgs& a) {
  exec::RunOptions& o = a.run;
  if (vm.count("devices")) o.devices = ParseDevices(vm["devices"].as<std::string>());
  const std::string tc = vm["tier-copy"].as<std::string>();
  exec::kTierCopyModeNames.Parse(tc, "--tier-copy");
  o.tier_copy = tc;
  if (vm.count("tier-max-ctas")) {
    o.tier_max_ctas = vm["tier-max-ctas"].as<int>();
    if (o.tier_max_ctas < 0) throw InputError("", 0, "--tier-max-ctas", "must be >= 0");
  }
  const std::string gate = vm["gate"].as<std::string>();
  if (gate != "on" && gate != "off" && gate != "layer0")
    throw InputError("", 0, "--gate", "expected on, off or layer0, got '" + gate + "'");
  o.exec.gate = gate != "off";
  o.exec.gate_first_layer = gate == "layer0";
  o.exec.gate_timeout_s = TimeoutOption(vm, "gate-timeout-s");
  const std::string warm = vm["forward-warm"].as<std::string>();
  if (warm != "on" && warm != "off")
    throw InputError("", 0, "--forward-warm", "expected on or off, got '" + warm + "'");
  o.exec.forward_warm = warm == "on";
  a.evict = vm["cache-evict"].as<std::string>();
  if (a.evict != "auto" && a.evict != "on" && a.evict != "off")
    throw InputError("", 0, "--cache-evict", "expected auto, on or off, got '" + a.evict + "'");
}

ExecArgs ExecArgsFrom(const po::variables_map& vm) {
  if (!vm.count("out")) throw InputError("", 0, "--out", "required (the measured JSON)");
  CheckOutputOptions(vm, {"out", "timeline", "span-trace"}, {"plan", "trace", "config", "profile"});
  if (vm.count("plan") == vm.count("trace"))
    throw InputError("", 0, "--plan", "give exactly one of --plan FILE or --trace FILE");
  ExecArgs a;
  exec::RunOptions& o = a.run;
  o.backend = vm["backend"].as<std::string>();
  exec::CheckBackendAvailable(o.backend);
  a.launch = vm["launch"].as<std::string>();
  exec::kLaunchNames.Parse(a.launch, "--launch");
  o.out = vm["out"].as<std::string>();
  if (vm.count("timeline")) o.timeline = vm["timeline"].as<std::string>();
  if (vm.count("span-trace")) o.span_trace = vm["span-trace"].as<std::string>();
  if (a.launch == "local")
    exec::CheckOutputPaths(o);  // before the plan is read or replayed (env: rank 0 checks)
  if (vm.count("rendezvous")) {
    if (a.launch == "local")
      throw InputError("", 0, "--rendezvous", "only for --launch env (local runs make their own)");
    o.rendezvous = exec::ParseRendezvous(vm["rendezvous"].as<std::string>());
  }
  TimingOptions(vm, a);
  DeviceOptions(vm, a);
  if (vm.count("fault"))
    for (const auto& f : vm["fault"].as<std::vector<std::string>>())
      o.exec.faults.push_back(exec::ParseFault(f));
  o.quiet = vm["quiet"].as<bool>();
  if (!o.quiet) {  // a line per timed round on stderr, so a long run shows how far it got
    const auto start = std::chrono::steady_clock::now();
    o.exec.round_done = [start](int done, int rounds) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr,
                   "kvlanes exec: round %d of %d done, %.1f s since the start, about %.0f s left\n",
                   done, rounds, s, s / done * (rounds - done));
    };
  }
  return a;
}

// The plan to run: read from --plan, or replayed in memory from --trace. `source` names it.
PlanFile LoadPlan(const po::variables_map& vm, std::string& source) {
  PlanFile pf;
  if (vm.count("plan")) {
    source = vm["plan"].as<std::string>();
    return ReadPlanFile(source);
  }
  ReplayInputs in = LoadReplayInputs(vm, {"out", "timeline", "span-trace"});
  // One cost model for the run, shared by the policy of every replica.
  const PolicyInputs policy_in{in.config, in.trace, PolicyCostModel(in.config)};
  auto policy = MakePolicy(in.config.policy, policy_in);
  std::optional<ProfileFile> read;  // read once: the replay and the plan's header use it
  if (!in.config.hardware.profile.empty()) read = ReadProfileFile(in.config.hardware.profile);
  ReplaySinks sinks;
  sinks.profile = read ? &*read : nullptr;
  sinks.on_request = [&](const RequestPlan& p, const RequestCost*) { pf.requests.push_back(p); };
  sinks.on_admit = [&](const RequestPlan& p) { pf.requests.push_back(p); };
  sinks.on_pass = [&](const PlanPass& p) { pf.passes.push_back(p); };  // priced by MakePlan
  sinks.replica_policy = [&] { return MakePolicy(in.config.policy, policy_in); };
  sinks.cost = policy_in.cost;
  RunReplay(in.config, *policy, in.trace, EngineOptions{}, {}, sinks);
  source = "(in memory, replayed from";
  for (const auto& t : vm["trace"].as<std::vector<std::string>>()) source += " " + t;
  source += ")";
  pf.header = PlanHeaderOf(in.config, sinks.profile);
  return pf;
}

// The plan ready to execute: its replica, its forward spin (priced here when the plan carries
// none, as version 2 and 3 plans and one replayed in memory do, or with another --profile: the
// executor reads no profile), and the forward pass.
exec::ExecPlan MakePlan(const po::variables_map& vm, const ExecArgs& a) {
  std::string source;
  PlanFile pf = LoadPlan(vm, source);
  if (vm.count("replica")) {
    SelectReplica(pf, vm["replica"].as<int64_t>(), source);
  } else if (const std::vector<int64_t> r = PlanReplicas(pf.requests); r.size() > 1) {
    throw InputError(source, 0, "--replica",
                     "the plan holds " + std::to_string(r.size()) +
                         " replicas (serving mode), each its own CP group with its own slots: "
                         "run one at a time with --replica N (0.." +
                         std::to_string(r.back()) + ")");
  }
  const std::string profile = vm.count("profile") ? vm["profile"].as<std::string>() : "";
  if (!profile.empty() || !pf.header.forward_spin || !vm.count("plan"))
    PricePlanSpin(pf, ResolvePlanProfile(pf.header, profile, source));
  exec::ExecPlan plan = exec::MakeExecPlan(std::move(pf), source, a.max_requests);
  const std::string forward = vm.count("forward")
                                  ? vm["forward"].as<std::string>()
                                  : (a.run.backend == "cuda" ? "model" : "synthetic");
  if (exec::kForwardModeNames.Parse(forward, "--forward") == exec::ForwardMode::kModel) {
    if (a.run.backend != "cuda")
      throw InputError("", 0, "--forward", "model needs --backend cuda (use synthetic)");
    // A request prefilled over several passes runs each chunk's queries in its pass; a merged
    // prefix (KV interleaved by token) stages its keys once, with its first chunk.
    std::map<int64_t, int64_t> first_pass;
    if (plan.geo.interleave_tokens > 0)
      for (const PlanPass& p : plan.passes)
        for (const PlanPassChunk& c : p.chunks)
          if (const auto [it, fresh] = first_pass.emplace(c.request, p.index); !fresh)
            throw InputError(
                source, 0, "--forward",
                "model: request " + std::to_string(c.request) + " is prefilled over passes " +
                    std::to_string(it->second) + " and " + std::to_string(p.index) +
                    ", and the proxy merges a token-interleaved prefix in one pass "
                    "(replay with serving.chunk_tokens 0, or use --forward synthetic)");
    if (vm["compute-scale"].as<double>() != 1.0)
      throw InputError("", 0, "--compute-scale",
                       "scales the synthetic forward pass only (add --forward synthetic)");
    exec::UseModelForward(plan);
  } else {
    exec::ScaleCompute(plan, a.scale);
  }
  return plan;
}

}  // namespace

int CmdExec(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddExecOptions(desc);
  AddReplayOptions(desc);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, nullptr, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(
        std::cout,
        std::string(argv[0]) +
            " (--plan FILE | --trace FILE [replay options]) --out FILE [options]",
        "Repeats a replay's decisions on real hardware: device pools, pinned host pools, NCCL\n"
        "collectives, CUDA IPC peer reads, host<->device copies and a forward pass;\n"
        "checks every gathered and loaded byte against a deterministic page pattern; measures\n"
        "every op. A serving-mode plan runs one replica (--replica N) as serving mode's forward\n"
        "passes, its requests arriving open loop at their trace times (trace.rate_scale\n"
        "applied): each pass and each request's queue and time to first token are measured\n"
        "(docs/executor.md, \"Serving passes\"; compare with `kvlanes check --replica N`).",
        desc,
        {"kvlanes exec --plan plan.jsonl --out measured.json --timeline measured_timeline.json",
         "kvlanes exec --plan small_plan.jsonl --backend host --max-requests 200 --out "
         "host_measured.json",
         "kvlanes exec --plan serving_plan.jsonl --replica 1 --out measured_r1.json",
         "kvlanes exec --plan plan.jsonl --tier-copy batch --rounds 5 --out measured.json   # "
         "each op's median of 5 timed rounds, for kvlanes check"});
    return 0;
  }
  try {
    ExecArgs a = ExecArgsFrom(vm);
    const exec::ExecPlan plan = MakePlan(vm, a);
    a.run.exec.evict_caches = a.evict == "on" || (a.evict == "auto" && a.run.backend == "cuda" &&
                                                  plan.forward == exec::ForwardMode::kSynthetic);
    if (a.launch == "env")
      return exec::RunEnvRank(plan, a.run, [](const char* k) { return std::getenv(k); });
    const exec::RunOutcome out = exec::RunLocal(plan, a.run);
    if (out.exit_code != 0) std::fprintf(stderr, "%s: %s\n", argv[0], out.message.c_str());
    return out.exit_code;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  } catch (const exec::ExecError& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
}

}  // namespace kvlanes::cli

// kvlanes explain: replays a trace up to one request and prints, for that request, each
// decision, the alternatives considered and their predicted costs.
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "policies/registry.h"
#include "sim/engine/replay_engine.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/predictor.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"
#include "traces/input_error.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

std::string PerLane(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t r = 0; r < v.size(); ++r) s += (r ? " " : "") + std::to_string(v[r]);
  return "[" + s + "]";
}

void Explain(const ReplayConfig& cfg, const RequestPlan& p, const CostModel* cost,
             const RequestCost* c) {
  const int ranks = static_cast<int>(cfg.cache.cp_size);
  const int64_t P = cfg.cache.page_tokens;
  std::printf("request %lld: arrival %.6f s, %lld input tokens (%lld pages)\n",
              static_cast<long long>(p.request), p.arrival_ns * 1e-9,
              static_cast<long long>(p.input_tokens),
              static_cast<long long>((p.input_tokens + P - 1) / P));
  std::printf("match      device %lld pages, host-only %lld pages\n",
              static_cast<long long>(p.device_hit_pages),
              static_cast<long long>(p.host_match_pages));
  if (p.host_match_pages > 0)
    std::printf("load-back  %s: %lld pages per lane %s\n",
                p.loaded_pages > 0 ? "loaded" : "not loaded (recomputed)",
                static_cast<long long>(p.loaded_pages),
                PerLane(PagesPerLane(p.load_back, ranks)).c_str());
  for (const SlotFree& e : p.evictions) {
    std::vector<int64_t> per(ranks, 0);
    for (const auto& s : e.slots) ++per[s[0]];
    std::printf("evict      %s: %zu pages, per lane %s\n",
                e.tier == Tier::kDevice ? "device" : "host", e.slots.size(), PerLane(per).c_str());
  }
  if (!p.write_back.empty())
    std::printf("write-back %s pages per lane at eviction\n",
                PerLane(PagesPerLane(p.write_back, ranks)).c_str());
  std::vector<int64_t> placed(ranks, 0);
  for (const NewPage& q : p.new_pages) ++placed[q.owner];
  std::printf("compute    %lld new tokens over a %lld-token prefix; %s; cached pages per lane %s\n",
              static_cast<long long>(p.computed_tokens), static_cast<long long>(p.prefix_pages * P),
              p.cached ? "new pages cached" : "NOT cached (no room on a lane)",
              PerLane(placed).c_str());
  if (p.prefix_pages > 0) {
    std::printf(
        "gather     prefix %lld pages in %zu extent run(s), shards per rank %s, zigzag %s\n",
        static_cast<long long>(p.prefix_pages), p.runs.size(), PerLane(p.shard_pages).c_str(),
        p.proven_zigzag ? "proven by the run descriptor" : "not proven");
    for (size_t i = 0; i < p.runs.size() && i < 8; ++i)
      std::printf(
          "             run %zu: pages [%lld, %lld) from request %lld's %s extent of %lld pages\n",
          i, static_cast<long long>(p.runs[i].first_page),
          static_cast<long long>(p.runs[i].first_page + p.runs[i].pages),
          static_cast<long long>(p.run_extents[i].request), p.run_extents[i].placement,
          static_cast<long long>(p.run_extents[i].pages));
    if (p.runs.size() > 8) std::printf("             ... %zu more runs\n", p.runs.size() - 8);
  }
  if (!cost) {
    std::printf("gather     chosen %s (no hardware profile: no predicted costs)\n",
                kGatherMethodNames.CName(p.gather_method));
    return;
  }
  PlanShape plan_shape(p, ranks, P);
  ForwardShape& f = plan_shape.shape;
  if (p.prefix_pages > 0) {
    std::printf("           %-8s %12s %12s %14s %14s\n", "method", "per layer", "all layers",
                "fabric B/rank", "service");
    for (GatherMethod m :
         {GatherMethod::kZigzag, GatherMethod::kPacked, GatherMethod::kDense, GatherMethod::kP2p}) {
      if (m == GatherMethod::kZigzag && !p.proven_zigzag) {
        std::printf(
            "           %-8s %12s (not allowed: no descriptor proves a single zigzag run)\n",
            "zigzag", "-");
        continue;
      }
      const GatherCost g = cost->Gather(m, p.shard_pages, p.prefix_pages);
      f.gather = m;
      std::printf("           %-8s %10.1f us %10.3f ms %14.0f %11.3f ms%s\n",
                  kGatherMethodNames.CName(m), g.per_layer_s * 1e6, g.total_s * 1e3,
                  g.bytes_per_rank, cost->Evaluate(f).service_s * 1e3,
                  m == p.gather_method ? "  <- chosen" : "");
    }
  }
  f.gather = p.gather_method;
  if (!p.backup.empty()) {
    std::printf("backup     %s pages per lane to host\n", PerLane(plan_shape.backup_pages).c_str());
    for (BackupSchedule s : {BackupSchedule::kPerLayer, BackupSchedule::kTail}) {
      f.backup = s;
      const RequestCost rc = cost->Evaluate(f);
      std::printf("           %-9s total %.3f ms, beyond forward %.3f ms, submit %.3f ms%s\n",
                  kBackupScheduleNames.CName(s), rc.backup.total_s * 1e3,
                  rc.backup.beyond_forward_s * 1e3, rc.backup.submit_s * 1e3,
                  s == p.backup_schedule ? "  <- chosen" : "");
    }
  }
  std::printf(
      "predicted  compute %.3f ms, gather %.3f ms, load-back stall %.3f ms, write-back %.3f ms, "
      "backup beyond forward %.3f ms: service %.3f ms\n",
      c->compute_s * 1e3, c->gather_s * 1e3, c->load_back_exposed_s * 1e3, c->write_back_s * 1e3,
      c->backup.beyond_forward_s * 1e3, c->service_s * 1e3);
}

}  // namespace

int CmdExplain(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddReplayOptions(desc);
  desc.add_options()("request", po::value<int64_t>(),
                     "index of the request to explain (0-based, replay order)")("help,h",
                                                                                "this help");
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, nullptr, vm)) return 2;
  if (vm.count("help")) {
    std::cout
        << "usage: " << argv[0] << " --trace FILE --request N [options]\n\n"
        << "Replays requests 0..N-1, then prints request N's decisions with the alternatives\n"
        << "and, with a hardware profile, their predicted costs.\n\n"
        << desc;
    return 0;
  }
  try {
    if (!vm.count("request")) throw InputError("", 0, "--request", "which request? (--request N)");
    ReplayInputs in = LoadReplayInputs(vm);
    const int64_t target = vm["request"].as<int64_t>();
    const int64_t n = static_cast<int64_t>(in.trace.requests.size());
    if (target < 0 || target >= n)
      throw InputError("", 0, "--request",
                       "must be in 0.." + std::to_string(n - 1) + " for this trace");
    auto policy = MakePolicy(in.config.policy, in.config, in.trace);
    ReplayEngine engine(in.config, *policy, in.trace.block_tokens);
    std::unique_ptr<CostModel> cost;
    std::unique_ptr<Predictor> predictor;
    if (!in.config.hardware.profile.empty()) {
      cost = std::make_unique<CostModel>(LoadHardwareProfile(in.config.hardware.profile), in.config,
                                         in.config.hardware.profile);
      predictor = std::make_unique<Predictor>(*cost, nullptr);
    }
    RequestPlan plan;
    for (int64_t i = 0; i <= target; ++i) {
      engine.Process(in.trace.requests[static_cast<size_t>(i)],
                     (predictor || i == target) ? &plan : nullptr);
      const RequestCost* c = predictor ? &predictor->Add(plan) : nullptr;
      if (i == target) {
        std::printf("policy %s, cp_size %lld, gather.method %s, backup.schedule %s\n",
                    in.config.policy.c_str(), static_cast<long long>(in.config.cache.cp_size),
                    in.config.gather.method.c_str(), in.config.backup.schedule.c_str());
        Explain(in.config, plan, cost.get(), c);
      }
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

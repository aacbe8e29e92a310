#include "tools/explain_serving.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/engine/scheduler.h"

namespace kvlanes::cli {
namespace {

using J = nlohmann::ordered_json;

double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

// One pass the target ran in: when, how long, its own chunk and its batch mates' chunks.
J PassJson(size_t replica, int64_t t0, int64_t dur, const std::vector<PassChunk>& chunks,
           size_t target, int64_t origin) {
  J p;
  p["start_s"] = Seconds(t0 - origin);
  p["duration_s"] = Seconds(dur);
  J mates = J::array();
  for (const PassChunk& c : chunks) {
    if (c.request == target) {
      p["tokens"] = c.tokens;
      p["context_tokens"] = c.context;
    } else {
      mates.push_back(J{{"request", c.request}, {"tokens", c.tokens}});
    }
  }
  p["replica"] = replica;
  p["batch_mates"] = mates;
  return p;
}

J BlockOf(const ServedRequest& s, const J& passes, int64_t origin) {
  J b;
  b["replica"] = s.replica;
  b["arrival_s"] = Seconds(s.arrival_ns - origin);
  b["admitted_s"] = Seconds(s.admit_ns - origin);
  b["queue_s"] = Seconds(s.admit_ns - s.arrival_ns);
  b["waited_for_pages"] = s.waited_for_pages;
  b["passes"] = passes;
  b["first_token_s"] = Seconds(s.first_token_ns - origin);
  b["ttft_s"] = Seconds(s.first_token_ns - s.arrival_ns);
  b["locks_released_s"] = s.release_ns >= 0 ? J(Seconds(s.release_ns - origin)) : J(nullptr);
  b["breakdown"] = J{{"queue_s", Seconds(s.admit_ns - s.arrival_ns)},
                     {"compute_s", s.compute_s},
                     {"pass_base_s", s.pass_base_s},
                     {"extra_s", s.extra.total_s},
                     {"batch_mates_s", BatchMatesS(s)}};
  return b;
}

}  // namespace

ServingAdmission ExplainServing(const ReplayConfig& cfg, const Trace& trace, int64_t target,
                                const CostModel& cost) {
  if (cfg.policy == "oracle")
    throw InputError("", 0, "policy",
                     "'oracle' cannot be served (docs/serving.md, \"The oracle\"); explain it with "
                     "--set serving.mode=sequential");
  std::vector<std::unique_ptr<CachePolicy>> owned;
  std::vector<CachePolicy*> policies;
  for (int64_t r = 0; r < cfg.serving.replicas; ++r) {
    owned.push_back(MakePolicy(cfg.policy, cfg, trace));
    policies.push_back(owned.back().get());
  }
  const CostModelForward forward(cost);
  ServingReplay sim(cfg, policies, trace.block_tokens, forward);
  const size_t want = static_cast<size_t>(target);
  const int64_t origin = trace.requests.empty() ? 0 : trace.requests.front().arrival_ns;
  J passes = J::array();
  sim.set_pass_observer(
      [&](size_t r, int64_t t0, int64_t dur, const std::vector<PassChunk>& chunks) {
        for (const PassChunk& c : chunks)
          if (c.request == want) {
            passes.push_back(PassJson(r, t0, dur, chunks, want, origin));
            break;
          }
      });
  ServingAdmission out;
  bool admitted = false;
  const ServingResult& res = sim.Run(
      trace,
      [&](const RequestPlan& p, int, size_t i) {
        if (i != want) return;
        out.plan = p;
        admitted = true;
      },
      nullptr);
  if (!admitted)
    throw InputError("", 0, "--request",
                     "request " + std::to_string(target) + " was never admitted by serving mode");
  out.block = BlockOf(res.requests[want], passes, origin);
  out.block["request_in_replica"] = out.plan.request;
  return out;
}

void PrintServingAdmission(const J& b) {
  auto i = [](const J& v) { return static_cast<long long>(v.get<int64_t>()); };
  std::printf(
      "serving    replica %lld (its request %lld): arrived %.6f s, admitted %.6f s after a "
      "queue of %.3f ms%s\n",
      i(b["replica"]), i(b["request_in_replica"]), b["arrival_s"].get<double>(),
      b["admitted_s"].get<double>(), b["queue_s"].get<double>() * 1e3,
      b["waited_for_pages"].get<bool>() ? " (it waited for pages held by requests in flight)" : "");
  for (const J& p : b["passes"]) {
    std::string mates;
    for (const J& m : p["batch_mates"])
      mates += (mates.empty() ? "" : ", ") + std::to_string(m["request"].get<int64_t>()) + " (" +
               std::to_string(m["tokens"].get<int64_t>()) + ")";
    std::printf("pass       at %.6f s for %.3f ms: %lld of its tokens after %lld; batch mates %s\n",
                p["start_s"].get<double>(), p["duration_s"].get<double>() * 1e3, i(p["tokens"]),
                i(p["context_tokens"]), mates.empty() ? "none" : mates.c_str());
  }
  const J& d = b["breakdown"];
  std::printf(
      "ttft       %.3f ms = queue %.3f + own compute %.3f + pass base %.3f + extra %.3f + batch "
      "mates %.3f ms; first token at %.6f s",
      b["ttft_s"].get<double>() * 1e3, d["queue_s"].get<double>() * 1e3,
      d["compute_s"].get<double>() * 1e3, d["pass_base_s"].get<double>() * 1e3,
      d["extra_s"].get<double>() * 1e3, d["batch_mates_s"].get<double>() * 1e3,
      b["first_token_s"].get<double>());
  if (!b["locks_released_s"].is_null())
    std::printf(", pages locked until %.6f s (decode)", b["locks_released_s"].get<double>());
  std::printf("\n");
}

}  // namespace kvlanes::cli

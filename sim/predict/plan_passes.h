// Serving mode's forward passes in the plan stream (format version 5; docs/plan.md, "Pass
// lines"): after the request lines, one line per pass of every replica, in the order the passes
// started, so that `kvlanes exec` runs a replica's requests as the passes serving mode formed
// and `kvlanes check` compares each pass and each request's time to first token.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvlanes {

struct RequestPlan;

// A request's arrival in serving mode's clock: its trace time divided by trace.rate_scale,
// rounded to the nanosecond (request lines carry the trace time; pass lines serving mode's).
inline int64_t ServedArrivalNs(int64_t trace_ns, double rate_scale) {
  return rate_scale == 1.0
             ? trace_ns
             : static_cast<int64_t>(std::llround(static_cast<double>(trace_ns) / rate_scale));
}

// One request's share of a pass: `request` is its number within the replica (the request line's
// `request`), `tokens` computed in this pass, `context` the request's tokens before the chunk
// (cached prefix + earlier chunks), `layer_spin_s` what a request of that many tokens after that
// context would spin per layer (the pass's layer_spin_s is made of them: PassLayerS).
struct PlanPassChunk {
  int64_t request = 0;
  int64_t tokens = 0;
  int64_t context = 0;
  double layer_spin_s = 0;
  friend bool operator==(const PlanPassChunk&, const PlanPassChunk&) = default;
};

// One forward pass: its replica, its number among the replica's passes (0, 1, ...), its
// predicted start (ns from the trace's time origin, after trace.rate_scale) and duration, the
// seconds per layer the synthetic forward pass spins for it (its chunks' compute, one layer base
// for the pass: PassLayerS) and its chunks in pass order (each [request, tokens, context,
// layer_spin_s] in the line). A request's first chunk is in the pass
// that admitted it.
struct PlanPass {
  int64_t replica = 0;
  int64_t index = 0;
  int64_t start_ns = 0;
  int64_t predicted_ns = 0;
  double layer_spin_s = 0;
  std::vector<PlanPassChunk> chunks;
  friend bool operator==(const PlanPass&, const PlanPass&) = default;
};

// The spin of one pass per layer from its chunks' spins: their sum less the layer base of every
// chunk but one, so a pass of one whole request spins exactly that request's layer_spin_s. Never
// below the base.
double PassLayerS(const std::vector<PlanPassChunk>& chunks, double layer_base_s);

// Appends the pass's line ({"pass": {...}} and "\n") to `out`.
void AppendPassLine(const PlanPass& p, std::string& out);

// Whether a plan line is a pass line.
bool IsPassLine(const nlohmann::json& j);

// Inverse of AppendPassLine's object. Throws InputError(file, line, field).
PlanPass PassFromJson(const nlohmann::json& j, const std::string& file, int64_t line);

// The passes' chunks of `requests` alone (a run of a plan's first requests): a pass left empty
// goes, the others are numbered again from 0; a pass that lost chunks has its spin summed again
// (PassLayerS: without the batched-pass GEMM term, which needs the profile), the others keep
// theirs.
void KeepPassesOf(std::vector<PlanPass>& passes, const std::vector<RequestPlan>& requests,
                  double layer_base_s);

// Checks the passes of a whole plan against its requests: a replica's passes are numbered 0, 1,
// ... and start in that order, no earlier than the previous one ends; every chunk names a request
// of its replica, whose first chunk starts no earlier than it arrives (ServedArrivalNs) and whose
// chunks follow one another (each one's context is the previous one's plus its tokens) and add up
// to its computed_tokens; with passes, every request has its chunks. `lines[k]` is pass k's line.
// Throws InputError naming the file, the pass's line and the field.
void CheckPlanPasses(const std::vector<RequestPlan>& requests, const std::vector<PlanPass>& passes,
                     const std::vector<int64_t>& lines, double rate_scale, const std::string& file);

}  // namespace kvlanes

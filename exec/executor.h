// The executor's logic, the same for every backend: one rank walks the plan in order, keeps the
// slot bookkeeping of its lane (which content every device and host slot holds), builds the
// gather indices, enqueues every operation on the backend with marks around it, checks every
// byte that a gather or load-back produced against the page pattern, and returns one measured
// record per plan operation it performed. docs/executor.md describes the order of operations,
// what each measured number is, and how a failure is reported.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "exec/backend.h"
#include "exec/forward_model.h"
#include "sim/predict/plan.h"

namespace kvlanes::exec {

// A plan ready to execute: the requests, the memory shape and the synthetic forward pass's
// per-layer duration of each request.
struct ExecPlan {
  PlanHeader header;
  std::vector<RequestPlan> requests;
  ExecGeometry geo;
  std::vector<double> layer_busy_s;  // per request: its layer_spin_s (plan version 4)
  // Serving plans (version 5): the replica's passes, run in turn (docs/executor.md, "Serving
  // passes"), and the layer base their chunks' spins share (forward_spin's, scaled as they are).
  std::vector<PlanPass> passes;
  double spin_layer_base_s = 0;
  std::string source;                    // plan file, or the trace it was replayed from
  std::string config_hash;               // FNV-1a 64 of the header's config, hex
  nlohmann::ordered_json compute_model;  // where layer_busy_s comes from (forward_spin)
  // --forward model: the proxy's shape and sizes (UseModelForward), else unused.
  ForwardMode forward = ForwardMode::kSynthetic;
  ForwardPlan forward_plan;
  // The header's config gather.prefetch_layers (0 when absent): layer l + k's gather may run on
  // the collective stream while layer l computes, into a ring of k + 1 gather buffer layers.
  int64_t prefetch_layers = 0;
};

// Sizes the memory from the parsed header and takes each request's layer_spin_s (a plan without
// them, of version 2 or 3, is priced first by the command: PricePlanSpin, plan_pricing.h; the
// executor reads no hardware profile). max_requests < 0: all; with passes, the passes keep the
// chunks of the requests kept (a pass left empty goes) and their spins are summed again.
// Throws InputError naming file, line and field.
ExecPlan MakeExecPlan(PlanFile plan, const std::string& source, int64_t max_requests);

// Makes the plan's forward pass the proxy (exec/forward_model.h) of the header's model shape;
// compute_model then names it. Throws InputError when the shape does not fit the pools.
void UseModelForward(ExecPlan& plan);

// Multiplies every layer_busy_s (and pass and chunk spin) by `scale` (>= 0) and records it in
// compute_model.scale.
void ScaleCompute(ExecPlan& plan, double scale);

// Test hooks (--fault KIND:RANK:OPID), applied on RANK just before it runs op OPID:
//   corrupt  flip one byte of what the op reads (load_back: the first host page; gather: the
//            first prefix page this rank owns) so verification must report it
//   die      the rank exits at once with status 3
//   hang     the rank stops answering (sleeps) until it is killed
struct Fault {
  enum class Kind { kCorrupt, kDie, kHang };
  Kind kind = Kind::kCorrupt;
  int rank = 0;
  std::string op_id;
};
inline constexpr NameTable<Fault::Kind, 3> kFaultKindNames{{{{Fault::Kind::kCorrupt, "corrupt"},
                                                             {Fault::Kind::kDie, "die"},
                                                             {Fault::Kind::kHang, "hang"}}},
                                                           "kind"};
// Throws InputError(field "--fault").
Fault ParseFault(std::string_view text);

struct ExecOptions {
  int warmup = 2;  // untimed rounds of every primitive the plan uses before the epoch
  std::vector<Fault> faults;
  // The request gate (docs/executor.md): the device starts a request's work once the host has
  // enqueued all of it; it opens by itself after gate_timeout_s.
  bool gate = false;
  // With gate: open it once the request's first layer is enqueued (not its whole work), so the
  // device starts with the host that layer's compute ahead; only a first layer larger than the
  // launch queue still meets its limit behind the held gate (`--gate layer0`).
  bool gate_first_layer = false;
  double gate_timeout_s = 1.0;
  // Keep every timed span (RankResult::spans) for the span trace (--span-trace), with the phases
  // of every gather layer (the backend then marks each phase's end).
  bool keep_spans = false;
  // --forward model: run each request's layer shapes once, untimed, before its timed work
  // (docs/executor.md, "Forward warm-up").
  bool forward_warm = true;
  // Before each request (untimed, every stream waiting for it): EvictCaches, so the request's ops
  // meet the caches as after a model's forward layer, which streams its weights through them. The
  // spin of --forward synthetic moves no memory, so without this a request's gathers read the
  // pages the request before left in L2 (6-12% faster at up to 256 pages a layer on the H200,
  // one plan run thrice on one GPU), where the profiles are timed cold.
  // `--cache-evict`: auto (the default) = on for the cuda backend with the synthetic forward pass.
  bool evict_caches = false;
  // Timed rounds of the whole plan (`--rounds`): the plan's requests run this many times after
  // one warm-up, each round from a fresh slot state (the plan starts from an empty cache), every
  // round verified. The measured file gives each op's and request's median over the rounds
  // (docs/executor.md, "Timed rounds").
  int rounds = 1;
  // Rank 0 calls this after each timed round with the rounds done and the rounds in all (progress
  // on the console; empty: nothing).
  std::function<void(int done, int rounds)> round_done;
};

// One plan operation as performed by one rank. Times in seconds from the rank's epoch.
struct MeasuredOp {
  std::string id;
  std::string kind;
  int rank = 0;
  double seconds = 0;  // the operation's own time (docs/executor.md: per kind)
  double start_s = 0;
  double end_s = 0;
  std::string stream;
  int64_t bytes = 0;
  int64_t pages = 0;
  int round = 0;  // the timed round it ran in (ExecOptions::rounds)
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

// One timed span of a measured op on this rank: a copy, gather layer, forward layer, ... between
// two marks, or a host-timed op (an eviction) as a whole. An op's seconds are the sum of its
// spans' lengths and its start_s/end_s their first start and last end (the same numbers), phase
// spans excepted: a phase span is one phase of a gather layer (GatherPhases), lying inside that
// layer's span, and the phases of a layer tile it (the first starts with it, each next one where
// the previous one ends, the last ends with it).
struct MeasuredSpan {
  size_t op = 0;       // index into RankResult::ops
  double start_s = 0;  // seconds from the rank's epoch, as MeasuredOp's
  double end_s = 0;
  int64_t layer = -1;      // the layer it covers when it is one layer's part of the op, else -1
  int64_t request = 0;     // the plan's request number (the op id's prefix)
  std::string phase = "";  // a gather phase ("pack", "all-gather", ...); "" for the op's own spans
};

// Per request and rank: host-side facts the ops do not carry.
struct RequestHostTime {
  int64_t request = 0;
  double enqueue_s = 0;  // host time from the request's start to its gate opening (or to its Sync)
  // A second gate inside the request (p2p gathers hold the streams again after the ranks'
  // barrier): from the compute stream's idle point to the gate opening, on the rank's clock.
  // pause_end_s < pause_begin_s: none.
  double pause_begin_s = 0, pause_end_s = -1;
  int round = 0;
};

struct RankResult {
  int rank = 0;
  std::vector<MeasuredOp> ops;      // every round's, round by round, each in the plan's order
  std::vector<MeasuredSpan> spans;  // only with ExecOptions::keep_spans (round 0); as recorded
  std::vector<RequestHostTime> requests;
  int64_t gates_expired = 0;
  int64_t gates_opened_early = 0;
  int64_t verified_bytes = 0;
  nlohmann::ordered_json context;
};

nlohmann::ordered_json RankResultToJson(const RankResult& r);
RankResult RankResultFromJson(const nlohmann::json& j);

// Runs the whole plan on this rank. Throws ExecError on a verification mismatch (naming op,
// rank and page) or a backend failure, InputError when the plan contradicts itself.
RankResult ExecuteRank(const ExecPlan& plan, RankBackend& backend, const ExecOptions& opts);

}  // namespace kvlanes::exec

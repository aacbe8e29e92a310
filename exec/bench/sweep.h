// `kvlanes bench sweep`: times every primitive the executor performs, over a grid of sizes, on
// the executor's own backend (so a fitted profile describes exactly the copies, kernels and
// collectives `kvlanes exec` runs). Output: the measurement file of docs/calibration.md.
//
// One rank (this process, --ranks 1). What is measured, per sample the median of `repeats` timed
// runs after `warmup` untimed ones, each run on a fresh random set of slots (the pools are several
// times larger than the largest copy, so repeats do not read what L2 still holds):
//   host_copy    one TierCopy call (one pool; one layer or all layers; h2d and d2h), stream time
//   copy_submit  host time of enqueueing `copies` TierCopy calls without waiting
//   device_copy  one layer of a packed gather (pack + unpack kernels; no collective at one rank)
// With --ranks N > 1 the sweep forks N rank processes and measures, every rank taking part, the
// bare NCCL all-gather and all-reduce the gathers use and peer reads (the p2p gather with every
// page on a peer), one layer of 1..max_pages pages; the tier and device copies come from a
// --ranks 1 sweep (calibrate --base takes that profile).
// With forward "model" (the executor's proxy, exec/forward_model.h; cuda) the sweep also times
//   forward      one layer of the proxy per layer kind over a grid of (new tokens, prefix tokens),
//                one sample per point: the per-layer time of the model's mix of layer kinds, with
//                its FLOPs, HBM bytes, TFLOP/s and GB/s (and each kind's own); with
//                forward_pass_requests also passes of k requests (pass_requests k); with
//                sustain_new_tokens the same layers timed after running back to back (sustained)
// and with either forward pass the pairs (docs/calibration.md, "Overlap"):
//   overlap      two ops on separate streams released together by the request gate, each also
//                timed alone: h2d or d2h copies (one layer, every pool) beside a packed gather
//                layer, beside a forward layer, beside a copy of the other direction and of the
//                same one (on another stream); a gather layer beside a forward layer. One sample
//                per op of the pair (victim), with both ops' times in the pair run.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/backend.h"
#include "exec/forward_model.h"
#include "sim/model/model_shapes.h"

namespace kvlanes::exec {

struct SweepOptions {
  std::string backend = "cuda";  // cuda | host
  int device = 0;                // cuda, one rank: the GPU
  // Ranks > 1: one process per rank (rank r on devices[r], else GPU r modulo the visible ones);
  // only the collectives and peer reads are measured (all_gather, all_reduce, peer_read).
  int ranks = 1;
  std::vector<int> devices;
  std::string tier_copy = "kernel";  // tier copies: kernel (SM copy kernel on mapped pinned memory)
                                     // | memcpy (cudaMemcpy2DAsync) | batch (cudaMemcpyBatchAsync)
  int tier_max_ctas =
      -1;  // kernel tier copies: grid cap instead of tuning.h's (0: no cap, -1: tuning.h's)
  double timeout_s = 300;
  // Geometry (from the replay config): page size, layers, pools, host layout.
  int64_t page_tokens = 64;
  int64_t layers = 61;
  std::vector<std::string> pool_names = {"kv", "indexer"};
  std::vector<int64_t> elem_bytes = {656, 132};
  kernels::HostLayout host_layout = kernels::HostLayout::kLayerFirst;
  // Page counts: 1, 2, 4, ... up to max_pages (and max_pages itself), for one-layer copies and
  // gathers; all-layer copies stop at max_all_layer_pages.
  int64_t max_pages = 2048;
  int64_t max_all_layer_pages = 256;
  int warmup = 3;
  int repeats = 11;
  std::vector<int> submit_batches = {1, 4, 16, 64};
  // Host copies' slots: for each value R, the copy grid again with slots in runs of R pages
  // adjacent on both sides (1: every page on its own random slot). Plans' copies form runs (the
  // slot allocator hands out neighbours), which batch copies turn into fewer, larger entries.
  std::vector<int64_t> slot_runs = {1};
  // Backups over a forward pass (per-layer and tail, beside a gather): `backup` samples.
  bool backups = true;
  // Their slots, for each value R: runs of R adjacent pages on both sides. With one value the
  // entries grow with the bytes and calibrate fits no separate cost per entry; plans' backups of
  // fresh pages are mostly one run.
  std::vector<int64_t> backup_runs = {4};
  std::vector<int64_t> backup_gather_pages = {
      0, 1024, 2048};       // gather beside the forward pass (capped at max_pages)
  bool backup_gate = true;  // enqueue each pass behind the request gate (false: as the host goes,
                            // as `exec --gate off`)
  // With forward "model" the backups follow layers of the proxy (as `exec --forward model`), each
  // of n pages backed up after n * page_tokens new tokens, at most this many (the proxy's time
  // grows with the tokens; the state it leaves the GPU in does not past a few hundred, on one
  // H200). With "synthetic" a spin of 50 us, as before.
  int64_t backup_forward_tokens = 1024;
  // The schedules sampled: per-layer and tail (the recipe's step at the model's depth times the
  // tail copies alone, the ones whose time per entry grows with the layers they span).
  bool backup_per_layer = true, backup_tail = true;
  // Diagnostics of the backup samples (defaults: as above). backup_fresh_host: host slots taken
  // in order from a cursor over the host pool (wrapping), as the executor's backups of new pages
  // land on slots not written for a while, instead of random run-aligned blocks.
  // backup_pools_reversed: each pass copies the pools last to first (the executor copies them in
  // pool order, each after the one before on the same stream).
  bool backup_fresh_host = false;
  bool backup_pools_reversed = false;
  // Load-backs over a forward pass (`load_back` samples, descriptive): per layer one layer ahead
  // of the forward layer that reads it, or every layer before the first (SweepPassLoadBacks).
  // Slots in runs of backup_runs; no gather beside them. Not in the default groups.
  bool load_backs = false;
  // The groups of the one-rank sweep: tier copies, copy submission and packed gathers (`copies`),
  // backups (above), the forward grid (forward "model" only) and the pairs.
  bool copies = true;
  bool forward_grid = true;
  bool pairs = true;
  // The forward pass of the forward grid and the pairs: "synthetic" (the spin kernel) or "model"
  // (the proxy of model_shape; the cuda backend, or a backend given to RunSweep that has one).
  std::string forward = "synthetic";
  ModelShape model_shape;
  std::string model_preset;  // the config's model.preset (what calibrate writes into the profile)
  // Forward grid: every new-token count beside every prefix (rounded down to whole pages; prefixes
  // above the dense buffer, max_pages pages, are left out).
  std::vector<int64_t> forward_new_tokens = {128, 512, 2048, 8192};
  std::vector<int64_t> forward_prefix_tokens = {0, 8192, 32768};
  // Forward grid, passes of several requests (docs/calibration.md, "Batched passes"): for each
  // count k here and each new-token count n of the grid, a pass of k requests of n new tokens
  // over no prefix, as `exec` runs a serving pass with the proxy (one set of GEMMs per layer over
  // the pass's k n tokens, each request's attention on its own). Empty: none.
  std::vector<int64_t> forward_pass_requests;
  // Sustained samples (docs/calibration.md, "Passes run back to back"; forward "model"): for each
  // (new tokens, prefix tokens) here, each layer kind's layer run back to back for sustain_s
  // seconds, then timed as the grid times it, so the GPU is at the clock it holds under load.
  // Calibrate divides by the forward grid's sample of the same point. Empty tokens: none.
  std::vector<int64_t> sustain_new_tokens, sustain_prefix_tokens = {0};
  double sustain_s = 0.5;
  // Pairs: the copies' and gathers' page counts (one layer, capped at max_pages), and the forward
  // layer beside them: synthetic spins of these seconds, or proxy layers of these (new tokens,
  // prefix tokens).
  std::vector<int64_t> pair_pages = {16, 256, 2048};
  std::vector<double> pair_forward_s = {1e-4, 1e-3};
  std::vector<std::pair<int64_t, int64_t>> pair_forward_shapes = {{512, 0}, {2048, 16384}};
  // Pairs: the page counts of the first_gather samples (a gather layer after a forward layer, then
  // the next layer), which set the gather's after-forward ratios between their points; empty: the
  // pair pages. A denser grid here costs little beside the whole pair grid.
  std::vector<int64_t> first_gather_pages;
  // Before every timed run (and pair, and backup pass), EvictCaches: the run starts with caches
  // full of unrelated written data, as an op of the executor that follows a forward layer does,
  // not with what the previous repeat left in L2.
  bool cache_evict = true;
  uint64_t seed = 1;
  // Progress: one line per step ("[k/N] what (s spent, about s left)"), and result lines within a
  // step (indented); may be empty.
  std::function<void(const std::string&)> progress;
};

// The forward grid's samples of a measurement document as a table (a line per layer kind and
// the mean per shape: ms per layer, achieved TFLOP/s and HBM GB/s against the H200's peaks);
// passes and sustained samples are left out (they carry no FLOPs). "" without grid samples.
std::string ForwardTable(const nlohmann::ordered_json& doc);

// The page counts the sweep visits up to `max` (powers of two, then `max`).
std::vector<int64_t> SweepPageCounts(int64_t max);

// The geometry the sweep allocates: pools four times the largest one-layer copy (so random slot
// sets rarely repeat), host slots twice.
ExecGeometry SweepGeometry(const SweepOptions& o);

// Runs the sweep on `backend` (built on SweepGeometry(o)) and returns the measurement document
// {"kvlanes_measurements": 1, "context": ..., "samples": [...]}. Throws ExecError on a backend
// failure.
nlohmann::ordered_json RunSweep(const SweepOptions& o, RankBackend& backend);

// forward "model": the proxy's plan the backend needs (shape, kv pool, the largest sizes the grid
// and the pairs use). Throws ExecError when the geometry has no pool named kv.
ForwardPlan SweepForwardPlan(const SweepOptions& o);

// Makes the backend o.backend names and runs the sweep on it.
nlohmann::ordered_json RunSweep(const SweepOptions& o);

// The result file rank 0 of a multi-rank sweep writes, as the parent reads it back: through
// ReadInputFile (bounded; InputError naming the file when it is too long, binary or a device).
// Throws ExecError when it is missing or is not JSON.
nlohmann::ordered_json ReadSweepRankResult(const std::string& path);

}  // namespace kvlanes::exec

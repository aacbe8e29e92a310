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
// --ranks 1 sweep (calibrate --base takes that profile). Never measured: the forward pass (the
// executor's forward pass is synthetic, so its time calibrates nothing; compute terms come from the
// base profile).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/backend.h"

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
  std::vector<int64_t> backup_gather_pages = {
      0, 1024, 2048};       // gather beside the forward pass (capped at max_pages)
  bool backup_gate = true;  // enqueue each pass behind the request gate (false: as the host goes,
                            // as `exec --gate off`)
  uint64_t seed = 1;
  std::function<void(const std::string&)> progress;  // one line per group (may be empty)
};

// The page counts the sweep visits up to `max` (powers of two, then `max`).
std::vector<int64_t> SweepPageCounts(int64_t max);

// The geometry the sweep allocates: pools four times the largest one-layer copy (so random slot
// sets rarely repeat), host slots twice.
ExecGeometry SweepGeometry(const SweepOptions& o);

// Runs the sweep on `backend` (built on SweepGeometry(o)) and returns the measurement document
// {"kvlanes_measurements": 1, "context": ..., "samples": [...]}. Throws ExecError on a backend
// failure.
nlohmann::ordered_json RunSweep(const SweepOptions& o, RankBackend& backend);

// Makes the backend o.backend names and runs the sweep on it.
nlohmann::ordered_json RunSweep(const SweepOptions& o);

}  // namespace kvlanes::exec

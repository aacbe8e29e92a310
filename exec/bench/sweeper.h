// The sweep's internals (exec/bench/sweep.h is its interface), laid out as nccl-tests lays out
// its collectives: one driver (sweep.cpp: the options' checks, the ranks, Sweeper::Run and the
// timing loop Time, which warms up, gates, repeats and keeps the median) and a small file per
// primitive that only describes its work:
//   sweep_copies.cpp       tier copies and the host time of submitting them
//   sweep_gather.cpp       one layer of a packed gather, and gather layers after a forward layer
//   sweep_backups.cpp      backups over a forward pass (per-layer and tail, beside a gather)
//   sweep_load_backs.cpp   load-backs over a forward pass (per layer, all layers first)
//   sweep_forward.cpp      the forward-pass proxy over a grid of new x prefix tokens
//   sweep_pairs.cpp        pairs of ops on separate streams (overlap)
//   sweep_collectives.cpp  several ranks: all-gather, all-reduce and peer reads
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/percentile.h"
#include "exec/bench/sweep.h"
#include "exec/exec_error.h"
#include "exec/gather.h"

namespace kvlanes::exec::sweep {

using kernels::LayerRange;
using kernels::TierDirection;
using Clock = std::chrono::steady_clock;
inline constexpr double kGateSeconds = 200e-6;
// The gate's longest wait. A call whose enqueue takes longer than this is one the host cannot get
// ahead of anyway (a forward layer of thousands of kernels fills the launch queue, so the host
// waits on the device): a longer gate only adds idle device time (twice a multi-second enqueue per
// run at 55,001 new tokens), it does not change the timed span.
inline constexpr double kMaxGateSeconds = 50e-3;
// The backup group (RunSweep): slot runs like the development plan's (4.0 pages per load-back
// run, 2.4-7.1 per backup run; docs/calibration.md), a forward layer of 50 us (the held-out plans
// at --compute-scale 0.01 have 10-600 us) that writes the pages backed up, and beside it a packed
// gather of each of SweepOptions::backup_gather_pages pages per layer (0: none).
inline constexpr double kBackupForwardS = 50e-6;
inline constexpr int64_t kBackupMaxPages = 512;

inline std::string TodayUtc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

// n distinct random slots of a pool of `pool` slots.
inline std::vector<int32_t> RandomSlots(std::mt19937_64& rng, int64_t pool, int64_t n) {
  std::vector<int32_t> all(static_cast<size_t>(pool));
  std::iota(all.begin(), all.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(pool - i));
    std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(j)]);
  }
  all.resize(static_cast<size_t>(n));
  return all;
}

inline nlohmann::ordered_json Stats(const char* kind, const std::vector<double>& t) {
  nlohmann::ordered_json x;
  x["kind"] = kind;
  x["median_s"] = Percentile(t, 0.5);
  x["min_s"] = *std::min_element(t.begin(), t.end());
  x["max_s"] = *std::max_element(t.begin(), t.end());
  x["repeats"] = t.size();
  return x;
}

// The packed gather of `slots` at one rank, unpacked in slot order (the sweep's gathers).
inline GatherIndex PackedIdentityIndex(std::vector<int32_t> slots) {
  GatherIndex g;
  g.method = GatherMethod::kPacked;
  g.prefix_pages = static_cast<int64_t>(slots.size());
  g.tags.assign(slots.size(), PageTag{});
  g.shard_pages = g.prefix_pages;
  g.unpack_index.resize(slots.size());
  std::iota(g.unpack_index.begin(), g.unpack_index.end(), 0);
  g.pack_slots = std::move(slots);
  return g;
}

inline nlohmann::ordered_json GeometryJson(const ExecGeometry& g, const std::string& layout,
                                           const std::string& mode) {
  return {{"page_tokens", g.page_tokens},   {"layers", g.layers},
          {"pools", g.pool_names},          {"bytes_per_token_layer", g.elem_bytes},
          {"device_slots", g.device_slots}, {"host_slots", g.host_slots},
          {"host_layout", layout},          {"tier_copy", mode}};
}

inline constexpr const char* kForwardNotMeasured =
    "forward: the sweep's forward pass is synthetic (--forward model times the proxy); compute "
    "terms come from the base profile";
// Pairs: the request gate holds the streams while both ops are enqueued; it opens by itself after
// this long (a pair whose enqueue takes longer would start early: counted in the context).
inline constexpr double kPairGateTimeoutS = 2.0;

// One op of a pair (PairSamples): its overlap kind, the stream it runs on, its bytes (copies and
// gathers; 0 for forward layers), a description, and what prepares one run (untimed) and returns
// what enqueues it.
struct PairOp {
  std::string kind;
  Stream stream = Stream::kCompute;
  double bytes = 0;
  std::string what;
  std::function<std::function<void()>()> make;
  double busy_s = 0;  // a synthetic forward layer: its busy time (the spin's target)
};

// Per repeat of a pair run: each op's span and the time both ran at once.
struct PairTimes {
  std::vector<double> a, b, both;
};

// The sweep's progress, one line per step through SweepOptions::progress: the step's number of
// the steps planned, the time spent and the time left (the mean time of the steps done times the
// steps still to run: an estimate, as steps differ in length).
class StepProgress {
 public:
  void Plan(size_t total) {
    total_ = total;
    done_ = 0;
    start_ = Clock::now();
  }
  void Start(const std::function<void(const std::string&)>& out, const std::string& what) {
    ++done_;
    if (!out) return;
    const double spent = std::chrono::duration<double>(Clock::now() - start_).count();
    char times[96];
    if (done_ > 1) {
      const double left = spent / static_cast<double>(done_ - 1) *
                          static_cast<double>(total_ + 1 - std::min(done_, total_ + 1));
      std::snprintf(times, sizeof times, " (%.1f s spent, about %.0f s left)", spent, left);
    } else {
      times[0] = 0;
    }
    out("[" + std::to_string(done_) + "/" + std::to_string(total_) + "] " + what + times);
  }

 private:
  size_t total_ = 0, done_ = 0;
  Clock::time_point start_ = Clock::now();
};

// The measurement file: the backend's context, what every sweep records (date, tool, backend,
// warm-up, repeats), then `ctx`'s entries, and the samples.
inline nlohmann::ordered_json MeasurementDocument(const RankBackend& b, const SweepOptions& o,
                                                  nlohmann::ordered_json ctx,
                                                  nlohmann::ordered_json samples) {
  nlohmann::ordered_json c = b.Context();
  c["date"] = TodayUtc();
  c["tool"] = "kvlanes bench sweep";
  c["backend"] = o.backend;
  c["warmup"] = o.warmup;
  c["repeats"] = o.repeats;
  c["cache_evict"] = o.cache_evict;
  for (auto& [k, v] : ctx.items()) c[k] = std::move(v);
  nlohmann::ordered_json doc;
  doc["kvlanes_measurements"] = 1;
  doc["context"] = std::move(c);
  doc["samples"] = std::move(samples);
  return doc;
}

class Sweeper {
 public:
  Sweeper(const SweepOptions& o, RankBackend& b)
      : o_(o), b_(b), geo_(SweepGeometry(o)), rng_(o.seed) {}

  nlohmann::ordered_json Run();

 private:
  // Before any sample: the pools, the host pool and the dense buffer hold the pattern.
  void FillWithPattern();

  // Tier copies: one pool per call, as the executor issues them.
  void TierCopySamples(const std::string& layout, const std::string& mode);

  // Submission: host time of enqueueing a batch of one-layer copies of 8 pages.
  void SubmitSamples(const std::string& layout, const std::string& mode);

  // One layer of a packed gather at one rank: pack the owned pages, unpack them into order.
  void PackedGatherSamples();
  // At cp_size 1, a p2p and a dense layer (one kernel each) of the same n pages.
  void OneKernelGatherSample(int64_t n);

  // Backups over a forward pass, as the executor runs them (docs/calibration.md): per layer a
  // packed gather layer of each size in backup_gather_pages (one set of samples per size) on the
  // collective stream, then a forward layer of kBackupForwardS that writes the pages backed up
  // on the compute stream; per-layer: after each forward layer the d2h stream
  // copies that layer of n pages of every pool; tail: after the last layer one all-layer copy per
  // pool. The whole pass is enqueued behind the request gate, as the executor with --gate on
  // (SweepOptions::backup_gate false: as the host goes, as with --gate off).
  void BackupPassSamples(const std::string& layout, const std::string& mode);
  // Load-backs over a forward pass, as the executor runs them: per-layer, the h2d stream copies
  // layer l of n pages of every pool and forward layer l waits for it (so layer l + 1's copy runs
  // beside forward layer l); all-layers, one all-layer copy per pool before the first forward
  // layer (the executor's load-back before a gather that reads peers). Behind the request gate.
  void LoadBackPassSamples(const std::string& layout, const std::string& mode);

  // The layer kinds of the geometry's layers under the model shape: kind, first layer, count.
  struct KindLayers {
    LayerKind kind;
    int64_t first = 0, count = 0;
  };
  std::vector<KindLayers> ModelLayerKinds() const;

  // The proxy's work of one request at one rank: every new token, over a prefix of whole pages.
  ForwardWork& Work(int64_t new_tokens, int64_t prefix_tokens);

  // The largest prefix the dense buffer holds (tokens).
  int64_t MaxPrefixTokens() const { return geo_.max_prefix_pages * geo_.page_tokens; }

  // forward "model": one layer of the proxy per layer kind, on the compute stream, per (new
  // tokens, prefix) of the grid. The sample's time is the per-layer mean over the model's layers
  // (each kind's median weighted by its layer count, per repeat), so `layers` is 1.
  void ForwardGridSamples();
  void ForwardPassSamples();
  void ForwardSustainSamples();
  void Sustain(int64_t n, int64_t p, int64_t layer);
  // `asked` prefix tokens rounded down to whole pages, or -1 (recorded in skipped_ as `what`'s)
  // when above the dense buffer.
  int64_t WholePagePrefix(int64_t asked, const char* what);
  // A forward sample of the proxy's mean layer over (n, p) from its repeats `mix`: the keys every
  // model sample has (one rank, one layer).
  nlohmann::ordered_json ModelLayerSample(const std::vector<double>& mix, int64_t n,
                                          int64_t p) const;
  // Time() of one proxy layer over (n, p).
  std::vector<double> TimeModelLayer(int64_t n, int64_t p, int64_t layer);

  // The ops of the pairs.
  PairOp CopyOp(TierDirection dir, Stream s, int64_t n);
  PairOp GatherOp(int64_t n);
  PairOp SyntheticForwardOp(double busy_s);
  PairOp ModelForwardOp(int64_t n, int64_t p, const KindLayers& k);

  // Runs `ops` (one or two) released together by the request gate, warm-up runs first: per
  // repeat the first op's span, the second's and the time both ran at once.
  PairTimes TimeTogether(const std::vector<const PairOp*>& ops);

  // One pair: each op alone, then both; one overlap sample per op (victim).
  void Pair(const PairOp& a, const PairOp& b);

  // The pairs over sizes: copies beside a gather, beside a forward layer, beside a copy of the
  // other direction and of the same one (another stream: one copy engine per direction), and a
  // gather beside a forward layer.
  void PairSamples();

  // As the executor runs a request (prefetch 0): a forward layer, then gather layer l of n fresh
  // random slots (the first layer to read them since that forward layer), then another forward
  // layer, then layer l + 1 of the same slots. Times both gather layers; behind the request gate.
  void FirstGatherSample(const PairOp& fwd, const nlohmann::ordered_json& shape, int64_t n);

  // A step of the sweep begins: false while Run counts the steps (the caller skips the step's
  // work), else prints the step's progress line and returns true.
  bool Step(const std::string& what);
  // A line of results within a step (printed as it is).
  void Note(const std::string& line);

  // Runs of pages adjacent on both sides (what a memcpy plan merges into one copy).
  static int64_t Runs(const std::vector<int32_t>& d, const std::vector<int32_t>& h);

  int64_t RandomLayer();

  // n distinct random device slots and n distinct random host slots.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> Slots(int64_t n);

  // One `backup` sample per pool: n pages in runs of `run`, `gather_pages` gathered per layer
  // beside the forward pass (0: none).
  void BackupSamples(int64_t n, int64_t run, int64_t gather_pages, bool tail,
                     const std::string& layout, const std::string& mode);
  // After a backup or load-back pass enqueued behind the gate: opens it, waits, and (rep >= 0)
  // appends each pool's copy spans summed to t[pool].
  void EndPoolCopyPass(const std::vector<std::vector<std::pair<int, int>>>& spans, int rep,
                       std::vector<std::vector<double>>& t);
  // The fields a backup and a load-back sample share: `kind`, the schedule's name, the pool's
  // bytes over L layers, its copies (1 when `one_copy`, else L), pages, slots' runs, the forward
  // pass (the proxy's tokens or the spin's time), layout and mode.
  nlohmann::ordered_json PoolCopySample(const char* kind, const std::vector<double>& t, int k,
                                        const char* schedule, bool one_copy, int64_t n, int64_t run,
                                        int64_t tokens, const std::string& layout,
                                        const std::string& mode);
  // One `load_back` sample per pool: n pages in runs of `run`, all layers first or per layer.
  void LoadBackSamples(int64_t n, int64_t run, bool all_layers, const std::string& layout,
                       const std::string& mode);

  // n host slots in order from the cursor (SweepOptions::backup_fresh_host), from slot 0 again
  // where they would pass the pool's end.
  std::vector<int32_t> FreshHostSlots(int64_t n);

  // n slots on each side in runs of `run` adjacent slots (the last one shorter): random distinct
  // run-aligned blocks of the device and of the host pool.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> RunSlots(int64_t n, int64_t run);

  // Untimed: with cache_evict, evicts the caches and waits for it, before work on several streams.
  void EvictCachesNow();

  // Stream time of one call, warm-up runs first; `make()` prepares a run (untimed) and returns
  // what enqueues it.
  template <class Make>
  std::vector<double> Time(Stream s, Make make) {
    std::vector<double> t;
    double last_enqueue_s = 0;
    for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
      auto run = make();
      // Gate: a short busy kernel first, so the whole call is enqueued before the timed span
      // starts and the span is device time only, as in the executor, whose host thread runs ahead
      // of the device (the host's share is measured by copy_submit).
      // The gate lasts at least twice the host time of the last call, so calls whose host work
      // is long (a large cudaMemcpyBatchAsync) are fully enqueued before the span starts too.
      if (o_.cache_evict) b_.EvictCaches(s);  // same stream: done before the gate and the span
      b_.ForwardLayer(s, 0, {}, std::clamp(2 * last_enqueue_s, kGateSeconds, kMaxGateSeconds));
      const int m0 = b_.Mark(s);
      const auto e0 = Clock::now();
      run();
      last_enqueue_s = std::chrono::duration<double>(Clock::now() - e0).count();
      const int m1 = b_.Mark(s);
      b_.Sync();
      const double dt = b_.MarkInterval(m0, m1);
      b_.ReleaseMarks();
      if (rep >= 0) t.push_back(std::max(dt, 1e-9));
    }
    return t;
  }

  const SweepOptions& o_;
  RankBackend& b_;
  ExecGeometry geo_;
  GatherIndex fill_index_;  // FillWithPattern's gather (a backend may keep a reference to it)
  std::mt19937_64 rng_;
  int64_t runs_ = 0;         // of the slots drawn for the current host copy
  int64_t host_cursor_ = 0;  // FreshHostSlots' next slot
  nlohmann::ordered_json samples_ = nlohmann::ordered_json::array();
  // The proxy's work (the backend keeps a pointer until the next Sync): a few in turn.
  std::array<ForwardWork, 4> work_;
  size_t work_next_ = 0;
  std::vector<std::string> skipped_;  // grid points left out, with why
  bool counting_ = false;             // Run's first pass: count the steps, run none
  size_t planned_ = 0;
  StepProgress progress_;
};

// Several ranks (o.ranks > 1): the collectives and peer reads, every rank taking part
// (sweep_collectives.cpp).
nlohmann::ordered_json SweepCollectives(const SweepOptions& o, RankBackend& b);

}  // namespace kvlanes::exec::sweep

#include "exec/bench/sweep.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "exec/exec_error.h"
#include "exec/exec_run.h"
#include "exec/gather.h"
#include "exec/host_backend.h"
#include "exec/launch.h"
#include "traces/input_file.h"
#include "traces/percentile.h"
#if KVLANES_WITH_CUDA
#include "exec/cuda_backend.h"
#endif

namespace kvlanes::exec {
namespace {

using kernels::LayerRange;
using kernels::TierDirection;
using Clock = std::chrono::steady_clock;
constexpr double kGateSeconds = 200e-6;
// The gate's longest wait. A call whose enqueue takes longer than this is one the host cannot get
// ahead of anyway (a forward layer of thousands of kernels fills the launch queue, so the host
// waits on the device): a longer gate only adds idle device time (twice a multi-second enqueue per
// run at 55,001 new tokens), it does not change the timed span.
constexpr double kMaxGateSeconds = 50e-3;
// The backup group (RunSweep): slot runs like the development plan's (4.0 pages per load-back
// run, 2.4-7.1 per backup run; docs/calibration.md), a forward layer of 50 us (the held-out plans
// at --compute-scale 0.01 have 10-600 us) that writes the pages backed up, and beside it a packed
// gather of each of SweepOptions::backup_gather_pages pages per layer (0: none).
constexpr double kBackupForwardS = 50e-6;
constexpr int64_t kBackupMaxPages = 512;

std::string TodayUtc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

// n distinct random slots of a pool of `pool` slots.
std::vector<int32_t> RandomSlots(std::mt19937_64& rng, int64_t pool, int64_t n) {
  std::vector<int32_t> all(static_cast<size_t>(pool));
  std::iota(all.begin(), all.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(pool - i));
    std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(j)]);
  }
  all.resize(static_cast<size_t>(n));
  return all;
}

nlohmann::ordered_json Stats(const char* kind, const std::vector<double>& t) {
  nlohmann::ordered_json x;
  x["kind"] = kind;
  x["median_s"] = Percentile(t, 0.5);
  x["min_s"] = *std::min_element(t.begin(), t.end());
  x["max_s"] = *std::max_element(t.begin(), t.end());
  x["repeats"] = t.size();
  return x;
}

// The packed gather of `slots` at one rank, unpacked in slot order (the sweep's gathers).
GatherIndex PackedIdentityIndex(std::vector<int32_t> slots) {
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

nlohmann::ordered_json GeometryJson(const ExecGeometry& g, const std::string& layout,
                                    const std::string& mode) {
  return {{"page_tokens", g.page_tokens},   {"layers", g.layers},
          {"pools", g.pool_names},          {"bytes_per_token_layer", g.elem_bytes},
          {"device_slots", g.device_slots}, {"host_slots", g.host_slots},
          {"host_layout", layout},          {"tier_copy", mode}};
}

constexpr const char* kForwardNotMeasured =
    "forward: the sweep's forward pass is synthetic (--forward model times the proxy); compute "
    "terms come from the base profile";
// Pairs: the request gate holds the streams while both ops are enqueued; it opens by itself after
// this long (a pair whose enqueue takes longer would start early: counted in the context).
constexpr double kPairGateTimeoutS = 2.0;

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

// The measurement file: the backend's context, what every sweep records (date, tool, backend,
// warm-up, repeats), then `ctx`'s entries, and the samples.
nlohmann::ordered_json MeasurementDocument(const RankBackend& b, const SweepOptions& o,
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

  nlohmann::ordered_json Run() {
    b_.StartEpoch();
    const std::string mode =
        o_.backend == "host" ? "memcpy" : (o_.tier_copy == "memcpy" ? "memcpy2d" : o_.tier_copy);
    const std::string layout(kernels::HostLayoutName(geo_.host_layout));
    if (o_.copies) {
      TierCopySamples(layout, mode);
      SubmitSamples(layout, mode);
      PackedGatherSamples();
    }
    if (o_.backups) BackupPassSamples(layout, mode);
    const bool model = o_.forward == "model";
    if (model && o_.forward_grid) ForwardGridSamples();
    const int64_t expired0 = b_.GatesExpired();
    if (o_.pairs) PairSamples();

    nlohmann::ordered_json ctx;
    ctx["geometry"] = GeometryJson(geo_, layout, mode);
    ctx["buffer_bytes"] = geo_.device_pool_bytes();
    ctx["forward"] = o_.forward;
    if (model) ctx["model_preset"] = o_.model_preset;
    if (o_.pairs) ctx["pair_gates_expired"] = b_.GatesExpired() - expired0;
    if (!skipped_.empty()) ctx["left_out"] = skipped_;
    nlohmann::ordered_json not_measured = {
        "collectives and peer reads: run the sweep with --ranks N"};
    if (!model) not_measured.push_back(kForwardNotMeasured);
    ctx["not_measured"] = std::move(not_measured);
    return MeasurementDocument(b_, o_, std::move(ctx), std::move(samples_));
  }

 private:
  // Tier copies: one pool per call, as the executor issues them.
  void TierCopySamples(const std::string& layout, const std::string& mode) {
    const std::vector<int64_t> counts = SweepPageCounts(o_.max_pages);
    const std::vector<int64_t> all_counts =
        SweepPageCounts(std::min(o_.max_pages, o_.max_all_layer_pages));
    for (const TierDirection dir : {TierDirection::kHostToDevice, TierDirection::kDeviceToHost}) {
      const bool h2d = dir == TierDirection::kHostToDevice;
      const Stream s = h2d ? Stream::kH2D : Stream::kD2H;
      for (const int64_t run : o_.slot_runs)  // the copy grid once per slot run length
        for (int k = 0; k < geo_.num_pools(); ++k)
          for (const bool all : {false, true}) {
            Progress(std::string("host_copy ") + (h2d ? "h2d" : "d2h") + " pool " +
                     geo_.pool_names[static_cast<size_t>(k)] +
                     (all ? ", all layers" : ", one layer") +
                     (run > 1 ? ", runs of " + std::to_string(run) + " pages" : ""));
            for (const int64_t n : all ? all_counts : counts) {
              const int64_t nl = all ? geo_.layers : 1;
              const std::vector<double> t = Time(s, [&] {
                // Named members, not a structured binding: clang 14 cannot capture one.
                const auto slots = run > 1 ? RunSlots(n, run) : Slots(n);
                const std::vector<int32_t>& d = slots.first;
                const std::vector<int32_t>& h = slots.second;
                runs_ = Runs(d, h);
                const int64_t l0 = all ? 0 : RandomLayer();
                return [this, s, k, dir, d, h, l0, nl] {
                  b_.TierCopy(s, k, dir, d, h, LayerRange{l0, l0 + nl});
                };
              });
              nlohmann::ordered_json x = Stats("host_copy", t);
              x["direction"] = h2d ? "h2d" : "d2h";
              x["bytes"] = n * nl * geo_.chunk_bytes(k);
              // batch: one copy engine entry per run of adjacent pages (both sides), per layer.
              x["copies"] = o_.tier_copy == "batch" && o_.backend == "cuda" ? runs_ * nl : 1;
              x["chunk_bytes"] = geo_.chunk_bytes(k);
              x["layout"] = layout;
              x["mode"] = mode;
              x["run_pages"] = run;
              x["label"] = "pool " + geo_.pool_names[static_cast<size_t>(k)] + ", " +
                           std::to_string(n) + " pages, " + std::to_string(nl) + " layer(s)" +
                           (run > 1 ? ", runs of " + std::to_string(run) : "");
              samples_.push_back(std::move(x));
            }
          }
    }
  }

  // Submission: host time of enqueueing a batch of one-layer copies of 8 pages.
  void SubmitSamples(const std::string& layout, const std::string& mode) {
    Progress("copy_submit");
    for (const TierDirection dir : {TierDirection::kHostToDevice, TierDirection::kDeviceToHost}) {
      const bool h2d = dir == TierDirection::kHostToDevice;
      const Stream s = h2d ? Stream::kH2D : Stream::kD2H;
      for (const int c : o_.submit_batches) {
        std::vector<double> t;
        for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
          std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> sets;
          for (int i = 0; i < c; ++i) sets.push_back(Slots(std::min<int64_t>(8, o_.max_pages)));
          const auto t0 = Clock::now();
          for (int i = 0; i < c; ++i)
            b_.TierCopy(s, i % geo_.num_pools(), dir, sets[static_cast<size_t>(i)].first,
                        sets[static_cast<size_t>(i)].second, LayerRange{0, 1});
          const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
          b_.Sync();
          b_.ReleaseMarks();
          if (rep >= 0) t.push_back(std::max(dt, 1e-9));
        }
        nlohmann::ordered_json x = Stats("copy_submit", t);
        x["copies"] = c;
        x["direction"] = h2d ? "h2d" : "d2h";
        x["layout"] = layout;
        x["mode"] = mode;
        x["label"] = std::to_string(c) + " one-layer copies of 8 pages";
        samples_.push_back(std::move(x));
      }
    }
  }

  // One layer of a packed gather at one rank: pack the owned pages, unpack them into order.
  void PackedGatherSamples() {
    const std::vector<int64_t> counts = SweepPageCounts(o_.max_pages);
    Progress("device_copy (packed gather layer)");
    for (const int64_t n : counts) {
      const std::vector<double> t = Time(Stream::kComm, [&] {
        const auto [d, h] = Slots(n);
        (void)h;
        // The index upload is the gather's once-per-request part: enqueued before the timed span.
        auto keep = std::make_shared<GatherIndex>(PackedIdentityIndex(d));
        b_.PrepareGather(*keep);
        const int64_t l = RandomLayer();
        return [this, keep, l] { GatherLayer(b_, *keep, Stream::kComm, l); };
      });
      nlohmann::ordered_json x = Stats("device_copy", t);
      x["bytes"] = 2 * n * geo_.page_layer_bytes();
      x["op"] = "copy";
      x["kernels"] = 2;
      x["variant"] = "gather_packed";
      x["label"] = "pack + unpack of " + std::to_string(n) + " pages, one layer, all pools";
      samples_.push_back(std::move(x));
    }
  }

  // Backups over a forward pass, as the executor runs them (docs/calibration.md): per layer a
  // packed gather layer of each size in backup_gather_pages (one set of samples per size) on the
  // collective stream, then a forward layer of kBackupForwardS that writes the pages backed up
  // on the compute stream; per-layer: after each forward layer the d2h stream
  // copies that layer of n pages of every pool; tail: after the last layer one all-layer copy per
  // pool. The whole pass is enqueued behind the request gate, as the executor with --gate on
  // (SweepOptions::backup_gate false: as the host goes, as with --gate off).
  void BackupPassSamples(const std::string& layout, const std::string& mode) {
    std::set<int64_t> gathers;
    for (const int64_t g : o_.backup_gather_pages)
      gathers.insert(std::min<int64_t>(g, o_.max_pages));
    for (const int64_t gp : gathers)
      for (const bool tail : {false, true}) {
        Progress(std::string("backup over a forward pass, ") + (tail ? "tail" : "per-layer") +
                 ", gather of " + std::to_string(gp) + " pages beside it");
        for (const int64_t run : o_.backup_runs)
          for (const int64_t n : SweepPageCounts(std::min<int64_t>(o_.max_pages, kBackupMaxPages)))
            BackupSamples(n, run, gp, tail, layout, mode);
      }
  }

  // The layer kinds of the geometry's layers under the model shape: kind, first layer, count.
  struct KindLayers {
    LayerKind kind;
    int64_t first = 0, count = 0;
  };
  std::vector<KindLayers> ModelLayerKinds() const {
    std::vector<KindLayers> k;
    for (int64_t l = 0; l < geo_.layers; ++l) {
      const LayerKind lk = LayerKindOf(o_.model_shape, l);
      auto it = std::find_if(k.begin(), k.end(), [&](const KindLayers& x) { return x.kind == lk; });
      if (it == k.end()) {
        k.push_back({lk, l, 1});
      } else {
        ++it->count;
      }
    }
    return k;
  }

  // The proxy's work of one request at one rank: every new token, over a prefix of whole pages.
  ForwardWork& Work(int64_t new_tokens, int64_t prefix_tokens) {
    ForwardWork& w = work_[work_next_++ % work_.size()];
    w.prefix_pages = prefix_tokens / geo_.page_tokens;
    w.new_tokens = new_tokens;
    w.positions.resize(static_cast<size_t>(new_tokens));
    const int64_t first = w.prefix_pages * geo_.page_tokens;
    std::iota(w.positions.begin(), w.positions.end(), static_cast<int32_t>(first));
    return w;
  }

  // The largest prefix the dense buffer holds (tokens).
  int64_t MaxPrefixTokens() const { return geo_.max_prefix_pages * geo_.page_tokens; }

  // forward "model": one layer of the proxy per layer kind, on the compute stream, per (new
  // tokens, prefix) of the grid. The sample's time is the per-layer mean over the model's layers
  // (each kind's median weighted by its layer count, per repeat), so `layers` is 1.
  void ForwardGridSamples() {
    Progress("forward (the model proxy, per layer)");
    const ModelShape& ms = o_.model_shape;
    const std::vector<KindLayers> kinds = ModelLayerKinds();
    int64_t kv_bytes = 0;  // all pools of one layer, per token
    for (const int64_t e : geo_.elem_bytes) kv_bytes += e;
    for (const int64_t n : o_.forward_new_tokens)
      for (const int64_t p_asked : o_.forward_prefix_tokens) {
        if (p_asked > MaxPrefixTokens()) {
          skipped_.push_back("forward prefix " + std::to_string(p_asked) +
                             " tokens: above the dense buffer's " +
                             std::to_string(MaxPrefixTokens()) + " (raise --max-pages)");
          continue;
        }
        const int64_t p = p_asked / geo_.page_tokens * geo_.page_tokens;
        std::vector<double> mix(static_cast<size_t>(o_.repeats), 0.0);
        double flops = 0, bytes = 0;
        nlohmann::ordered_json per_kind = nlohmann::ordered_json::array();
        for (const KindLayers& k : kinds) {
          const std::vector<double> t = Time(Stream::kCompute, [&] {
            b_.PrepareForward(Work(n, p));
            const int64_t l = k.first;
            return [this, l] { b_.ModelForwardLayer(Stream::kCompute, l, {}); };
          });
          const double w = static_cast<double>(k.count) / static_cast<double>(geo_.layers);
          for (size_t i = 0; i < t.size(); ++i) mix[i] += w * t[i];
          const double kf = LayerFlops(ms, k.kind, n, p),
                       kb = LayerBytes(ms, k.kind, n, p, kv_bytes);
          flops += w * kf;
          bytes += w * kb;
          nlohmann::ordered_json x = Stats("forward", t);
          x.erase("kind");
          x["layer_kind"] = k.kind == LayerKind::kMoe ? "moe" : "dense";
          x["layers"] = k.count;
          x["flops"] = kf;
          x["hbm_bytes"] = kb;
          x["tflops"] = kf / x["median_s"].get<double>() / 1e12;
          x["gbps"] = kb / x["median_s"].get<double>() / 1e9;
          per_kind.push_back(std::move(x));
        }
        nlohmann::ordered_json x = Stats("forward", mix);
        x["forward"] = "model";
        x["preset"] = o_.model_preset;
        x["new_tokens"] = n;
        x["prefix_tokens"] = p;
        x["ranks"] = 1;
        x["layers"] = 1;
        x["flops"] = flops;
        x["hbm_bytes"] = bytes;
        x["tflops"] = flops / x["median_s"].get<double>() / 1e12;
        x["gbps"] = bytes / x["median_s"].get<double>() / 1e9;
        x["per_kind"] = std::move(per_kind);
        x["label"] = "proxy layer (mean over the model's layers), " + std::to_string(n) +
                     " new tokens over " + std::to_string(p) + " prefix tokens";
        char line[160];  // one line per shape, so a run cut short still shows how far it got
        std::snprintf(line, sizeof line,
                      "forward %lld new over %lld prefix: %.3f ms a layer, %.0f TFLOP/s",
                      static_cast<long long>(n), static_cast<long long>(p),
                      1e3 * x["median_s"].get<double>(), x["tflops"].get<double>());
        Progress(line);
        samples_.push_back(std::move(x));
      }
  }

  // The ops of the pairs.
  PairOp CopyOp(TierDirection dir, Stream s, int64_t n) {
    const bool h2d = dir == TierDirection::kHostToDevice;
    PairOp op{h2d ? "h2d" : "d2h",
              s,
              static_cast<double>(n * geo_.page_layer_bytes()),
              std::string(h2d ? "h2d" : "d2h") + " copy of " + std::to_string(n) +
                  " pages, one layer, every pool",
              {}};
    op.make = [this, dir, s, n]() -> std::function<void()> {
      const auto slots = Slots(n);  // not a structured binding: clang 14 cannot capture one
      const std::vector<int32_t>& d = slots.first;
      const std::vector<int32_t>& h = slots.second;
      const int64_t l = RandomLayer();
      return [this, dir, s, d, h, l] {
        for (int k = 0; k < geo_.num_pools(); ++k)
          b_.TierCopy(s, k, dir, d, h, LayerRange{l, l + 1});
      };
    };
    return op;
  }
  PairOp GatherOp(int64_t n) {
    PairOp op{"gather",
              Stream::kComm,
              static_cast<double>(2 * n * geo_.page_layer_bytes()),
              "packed gather layer of " + std::to_string(n) + " pages",
              {}};
    op.make = [this, n]() -> std::function<void()> {
      const auto [d, h] = Slots(n);
      (void)h;
      auto g = std::make_shared<GatherIndex>(PackedIdentityIndex(d));
      b_.PrepareGather(*g);
      const int64_t l = RandomLayer();
      return [this, g, l] { GatherLayer(b_, *g, Stream::kComm, l); };
    };
    return op;
  }
  PairOp SyntheticForwardOp(double busy_s) {
    char what[64];
    std::snprintf(what, sizeof what, "synthetic forward layer of %g s", busy_s);
    PairOp op{"forward", Stream::kCompute, 0, what, {}};
    op.busy_s = busy_s;
    op.make = [this, busy_s]() -> std::function<void()> {
      const int64_t l = RandomLayer();
      return [this, l, busy_s] { b_.ForwardLayer(Stream::kCompute, l, {}, busy_s); };
    };
    return op;
  }
  PairOp ModelForwardOp(int64_t n, int64_t p, const KindLayers& k) {
    PairOp op{"forward",
              Stream::kCompute,
              0,
              std::string("proxy ") + (k.kind == LayerKind::kMoe ? "moe" : "dense") + " layer, " +
                  std::to_string(n) + " new tokens over " + std::to_string(p) + " prefix tokens",
              {}};
    op.make = [this, n, p, k]() -> std::function<void()> {
      b_.PrepareForward(Work(n, p));
      const int64_t l = k.first;
      return [this, l] { b_.ModelForwardLayer(Stream::kCompute, l, {}); };
    };
    return op;
  }

  // Runs `ops` (one or two) released together by the request gate, warm-up runs first: per
  // repeat the first op's span, the second's and the time both ran at once.
  PairTimes TimeTogether(const std::vector<const PairOp*>& ops) {
    PairTimes t;
    for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
      std::vector<std::function<void()>> runs;
      for (const PairOp* op : ops) runs.push_back(op->make());
      EvictCachesNow();
      b_.HoldStreams(kPairGateTimeoutS);
      std::vector<std::pair<int, int>> marks;
      for (size_t i = 0; i < ops.size(); ++i) {
        const int m0 = b_.Mark(ops[i]->stream);
        runs[i]();
        marks.push_back({m0, b_.Mark(ops[i]->stream)});
      }
      b_.OpenGate();
      b_.Sync();
      // Each op's span from the first op's start: full resolution for lengths and overlaps.
      std::vector<std::pair<double, double>> span;
      for (const auto& [m0, m1] : marks)
        span.push_back({b_.MarkInterval(marks[0].first, m0), b_.MarkInterval(marks[0].first, m1)});
      b_.ReleaseMarks();
      if (rep < 0) continue;
      t.a.push_back(std::max(span[0].second - span[0].first, 1e-9));
      if (ops.size() > 1) {
        t.b.push_back(std::max(span[1].second - span[1].first, 1e-9));
        t.both.push_back(std::max(0.0, std::min(span[0].second, span[1].second) -
                                           std::max(span[0].first, span[1].first)));
      }
    }
    return t;
  }

  // One pair: each op alone, then both; one overlap sample per op (victim).
  void Pair(const PairOp& a, const PairOp& b) {
    const PairTimes alone_a = TimeTogether({&a});
    const PairTimes alone_b = TimeTogether({&b});
    const PairTimes both = TimeTogether({&a, &b});
    const std::string pair = a.what + " | " + b.what;
    for (const bool first : {true, false}) {
      const PairOp& v = first ? a : b;
      const PairOp& w = first ? b : a;
      nlohmann::ordered_json x = Stats("overlap", first ? both.a : both.b);
      x["victim"] = v.kind;
      x["beside"] = w.kind;
      x["alone_s"] = Percentile(first ? alone_a.a : alone_b.a, 0.5);
      x["overlap_s"] = Percentile(both.both, 0.5);
      x["beside_s"] = Percentile(first ? both.b : both.a, 0.5);
      x["beside_alone_s"] = Percentile(first ? alone_b.a : alone_a.a, 0.5);
      x["victim_bytes"] = v.bytes;
      x["beside_bytes"] = w.bytes;
      x["victim_stream"] = kStreamNames.CName(v.stream);
      x["beside_stream"] = kStreamNames.CName(w.stream);
      x["forward"] = o_.forward;
      if (v.busy_s > 0) x["forward_busy_s"] = v.busy_s;
      x["pair"] = pair;
      x["label"] = v.what + ", beside " + w.what;
      samples_.push_back(std::move(x));
    }
  }

  // The pairs over sizes: copies beside a gather, beside a forward layer, beside a copy of the
  // other direction and of the same one (another stream: one copy engine per direction), and a
  // gather beside a forward layer.
  void PairSamples() {
    std::set<int64_t> pages;
    for (const int64_t n : o_.pair_pages) pages.insert(std::min<int64_t>(n, o_.max_pages));
    const TierDirection h2d = TierDirection::kHostToDevice, d2h = TierDirection::kDeviceToHost;
    Progress("overlap: copies beside a gather and beside copies");
    for (const int64_t n : pages) {
      Pair(CopyOp(h2d, Stream::kH2D, n), GatherOp(n));
      Pair(CopyOp(d2h, Stream::kD2H, n), GatherOp(n));
      Pair(CopyOp(h2d, Stream::kH2D, n), CopyOp(d2h, Stream::kD2H, n));
      Pair(CopyOp(h2d, Stream::kH2D, n), CopyOp(h2d, Stream::kD2H, n));
      Pair(CopyOp(d2h, Stream::kD2H, n), CopyOp(d2h, Stream::kH2D, n));
    }
    Progress("overlap: copies and gathers beside a " + o_.forward + " forward layer");
    std::vector<PairOp> forwards;
    std::vector<nlohmann::ordered_json> shapes;  // what each forward layer is, for first_gather
    if (o_.forward == "model") {
      std::vector<KindLayers> kinds = ModelLayerKinds();
      const KindLayers k = kinds.back();  // the most common kind last in the presets (MoE)
      for (const auto& [n, p] : o_.pair_forward_shapes) {
        if (p > MaxPrefixTokens()) {
          skipped_.push_back("pair forward prefix " + std::to_string(p) +
                             " tokens: above the dense buffer's " +
                             std::to_string(MaxPrefixTokens()) + " (raise --max-pages)");
          continue;
        }
        const int64_t pp = p / geo_.page_tokens * geo_.page_tokens;
        forwards.push_back(ModelForwardOp(n, pp, k));
        shapes.push_back({{"new_tokens", n}, {"prefix_tokens", pp}});
      }
    } else {
      for (const double f : o_.pair_forward_s) {
        forwards.push_back(SyntheticForwardOp(f));
        shapes.push_back({{"forward_s", f}});
      }
    }
    for (const PairOp& f : forwards)
      for (const int64_t n : pages) {
        Pair(CopyOp(h2d, Stream::kH2D, n), f);
        Pair(CopyOp(d2h, Stream::kD2H, n), f);
        Pair(GatherOp(n), f);
      }
    Progress("first_gather: a gather layer after a " + o_.forward +
             " forward layer, then the next layer of its slots");
    std::set<int64_t> first_pages = pages;
    if (!o_.first_gather_pages.empty()) {
      first_pages.clear();
      for (const int64_t n : o_.first_gather_pages)
        first_pages.insert(std::min<int64_t>(n, o_.max_pages));
    }
    for (size_t i = 0; i < forwards.size(); ++i)
      for (const int64_t n : first_pages) FirstGatherSample(forwards[i], shapes[i], n);
  }

  // As the executor runs a request (prefetch 0): a forward layer, then gather layer l of n fresh
  // random slots (the first layer to read them since that forward layer), then another forward
  // layer, then layer l + 1 of the same slots. Times both gather layers; behind the request gate.
  void FirstGatherSample(const PairOp& fwd, const nlohmann::ordered_json& shape, int64_t n) {
    std::vector<double> first, next;
    for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
      const auto f0 = fwd.make();
      const auto f1 = fwd.make();
      const GatherIndex g = PackedIdentityIndex(RandomSlots(rng_, geo_.device_slots, n));
      b_.PrepareGather(g);
      const int64_t l = geo_.layers > 1 ? RandomLayer() % (geo_.layers - 1) : 0;
      const int64_t l1 = geo_.layers > 1 ? l + 1 : l;
      EvictCachesNow();
      b_.HoldStreams(kPairGateTimeoutS);
      f0();
      b_.Wait(Stream::kComm, b_.Mark(Stream::kCompute));
      const int m0 = b_.Mark(Stream::kComm);
      GatherLayer(b_, g, Stream::kComm, l);
      const int m1 = b_.Mark(Stream::kComm);
      b_.Wait(Stream::kCompute, m1);
      f1();
      b_.Wait(Stream::kComm, b_.Mark(Stream::kCompute));
      const int m2 = b_.Mark(Stream::kComm);
      GatherLayer(b_, g, Stream::kComm, l1);
      const int m3 = b_.Mark(Stream::kComm);
      b_.OpenGate();
      b_.Sync();
      if (rep >= 0) {
        first.push_back(std::max(b_.MarkInterval(m0, m1), 1e-9));
        next.push_back(std::max(b_.MarkInterval(m2, m3), 1e-9));
      }
      b_.ReleaseMarks();
    }
    nlohmann::ordered_json x = Stats("first_gather", first);
    x["next_s"] = Percentile(next, 0.5);
    x["bytes"] = n * geo_.page_layer_bytes();
    x["pages"] = n;
    x["forward"] = o_.forward;
    for (const auto& [k, v] : shape.items()) x[k] = v;
    x["variant"] = "gather_packed";
    x["label"] = "packed gather layer of " + std::to_string(n) + " pages after " + fwd.what +
                 ", then the next layer";
    samples_.push_back(std::move(x));
  }

  void Progress(const std::string& what) {
    if (o_.progress) o_.progress(what);
  }

  // Runs of pages adjacent on both sides (what a memcpy plan merges into one copy).
  static int64_t Runs(const std::vector<int32_t>& d, const std::vector<int32_t>& h) {
    int64_t r = d.empty() ? 0 : 1;
    for (size_t i = 1; i < d.size(); ++i)
      if (d[i] != d[i - 1] + 1 || h[i] != h[i - 1] + 1) ++r;
    return r;
  }

  int64_t RandomLayer() {
    return static_cast<int64_t>(rng_() % static_cast<uint64_t>(geo_.layers));
  }

  // n distinct random device slots and n distinct random host slots.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> Slots(int64_t n) {
    std::vector<int32_t> d = RandomSlots(rng_, geo_.device_slots, n);
    return {std::move(d), RandomSlots(rng_, geo_.host_slots, n)};
  }

  // One `backup` sample per pool: n pages in runs of `run`, `gather_pages` gathered per layer
  // beside the forward pass (0: none).
  void BackupSamples(int64_t n, int64_t run, int64_t gather_pages, bool tail,
                     const std::string& layout, const std::string& mode) {
    const int pools = geo_.num_pools();
    std::vector<std::vector<double>> t(static_cast<size_t>(pools));
    const int64_t L = geo_.layers;
    const bool model = o_.forward == "model";
    const int64_t tokens = std::min(n * geo_.page_tokens, o_.backup_forward_tokens);
    // The order the pools are copied in, each after the one before on the copy stream.
    std::vector<int> order(static_cast<size_t>(pools));
    for (int k = 0; k < pools; ++k)
      order[static_cast<size_t>(k)] = o_.backup_pools_reversed ? pools - 1 - k : k;
    for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
      auto [d, h] = RunSlots(n, run);
      if (o_.backup_fresh_host) h = FreshHostSlots(n);
      const GatherIndex g = PackedIdentityIndex(RandomSlots(rng_, geo_.device_slots, gather_pages));
      if (gather_pages > 0) b_.PrepareGather(g);
      std::vector<PageWrite> writes;
      for (size_t i = 0; i < d.size(); ++i)
        writes.push_back(PageWrite{d[i], PageTag{1, 0, static_cast<int64_t>(i)}});
      // Set up before the gate, as the executor does (its forward layers' spans open after).
      if (model) b_.PrepareForward(Work(tokens, 0));
      b_.StageForwardWrites(Stream::kCompute, writes);
      EvictCachesNow();
      if (o_.backup_gate) b_.HoldStreams(1.0);
      std::vector<std::vector<std::pair<int, int>>> spans(static_cast<size_t>(pools));
      int fwd = -1;
      for (int64_t l = 0; l < L; ++l) {
        int ready = -1;
        if (gather_pages > 0) {
          if (fwd >= 0) b_.Wait(Stream::kComm, fwd);
          GatherLayer(b_, g, Stream::kComm, l);
          ready = b_.Mark(Stream::kComm);
          b_.Wait(Stream::kCompute, ready);
        }
        // Writes the pages backed up, as the executor: the proxy's layer, then the pages' pattern;
        // or the spin, which writes it.
        if (model)
          b_.ModelForwardLayer(Stream::kCompute, l, writes);
        else
          b_.ForwardLayer(Stream::kCompute, l, writes, kBackupForwardS);
        fwd = b_.Mark(Stream::kCompute);
        if (!tail) {
          b_.Wait(Stream::kD2H, fwd);
          for (const int k : order) {
            const int m0 = b_.Mark(Stream::kD2H);
            b_.TierCopy(Stream::kD2H, k, TierDirection::kDeviceToHost, d, h, LayerRange{l, l + 1});
            spans[static_cast<size_t>(k)].push_back({m0, b_.Mark(Stream::kD2H)});
          }
        }
      }
      if (tail) {
        b_.Wait(Stream::kD2H, fwd);
        for (const int k : order) {
          const int m0 = b_.Mark(Stream::kD2H);
          b_.TierCopy(Stream::kD2H, k, TierDirection::kDeviceToHost, d, h, LayerRange{0, L});
          spans[static_cast<size_t>(k)].push_back({m0, b_.Mark(Stream::kD2H)});
        }
      }
      b_.OpenGate();
      b_.Sync();
      for (int k = 0; k < pools; ++k) {
        double sum = 0;
        for (const auto& [a, e] : spans[static_cast<size_t>(k)]) sum += b_.MarkInterval(a, e);
        if (rep >= 0) t[static_cast<size_t>(k)].push_back(std::max(sum, 1e-9));
      }
      b_.ReleaseMarks();
    }
    const int64_t runs = (n + run - 1) / run;
    for (int k = 0; k < pools; ++k) {
      nlohmann::ordered_json x = Stats("backup", t[static_cast<size_t>(k)]);
      x["schedule"] = tail ? "tail" : "per-layer";
      x["bytes"] = n * L * geo_.chunk_bytes(k);
      x["copies"] = tail ? 1 : L;
      x["pages"] = n;
      x["layers"] = L;
      x["pool"] = geo_.pool_names[static_cast<size_t>(k)];
      x["run_pages"] = run;
      x["gather_pages"] = gather_pages;
      x["forward"] = model ? "model" : "synthetic";
      if (model)
        x["forward_tokens"] = tokens;
      else
        x["forward_s"] = kBackupForwardS;
      x["gate"] = o_.backup_gate;
      if (o_.backup_fresh_host) x["host_slots"] = "fresh";
      if (o_.backup_pools_reversed) x["pool_order"] = "reversed";
      x["layout"] = layout;
      x["mode"] = mode;
      x["label"] =
          std::string(tail ? "tail" : "per-layer") + " backup of " + std::to_string(n) +
          " pages (" + std::to_string(runs) + " runs), pool " +
          geo_.pool_names[static_cast<size_t>(k)] + ", beside a forward pass (" +
          (model ? "proxy layers of " + std::to_string(tokens) + " new tokens"
                 : std::string("spin")) +
          ")" + (gather_pages > 0 ? " and a " + std::to_string(gather_pages) + "-page gather" : "");
      samples_.push_back(std::move(x));
    }
  }

  // n host slots in order from the cursor (SweepOptions::backup_fresh_host), from slot 0 again
  // where they would pass the pool's end.
  std::vector<int32_t> FreshHostSlots(int64_t n) {
    if (host_cursor_ + n > geo_.host_slots) host_cursor_ = 0;
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[static_cast<size_t>(i)] = static_cast<int32_t>(host_cursor_ + i);
    host_cursor_ += n;
    return v;
  }

  // n slots on each side in runs of `run` adjacent slots (the last one shorter): random distinct
  // run-aligned blocks of the device and of the host pool.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> RunSlots(int64_t n, int64_t run) {
    const int64_t runs = (n + run - 1) / run;
    auto side = [&](int64_t slots) {
      const int64_t blocks = slots / run;
      if (blocks < runs)
        throw ExecError("sweep: " + std::to_string(runs) + " runs of " + std::to_string(run) +
                        " pages do not fit a pool of " + std::to_string(slots) + " slots");
      std::vector<int32_t> v;
      for (const int32_t b : RandomSlots(rng_, blocks, runs))
        for (int64_t i = 0; i < run && static_cast<int64_t>(v.size()) < n; ++i)
          v.push_back(static_cast<int32_t>(b * run + i));
      return v;
    };
    std::vector<int32_t> d = side(geo_.device_slots);
    return {std::move(d), side(geo_.host_slots)};
  }

  // Untimed: with cache_evict, evicts the caches and waits for it, before work on several streams.
  void EvictCachesNow() {
    if (!o_.cache_evict) return;
    b_.EvictCaches(Stream::kCompute);
    b_.Sync();
  }

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
  std::mt19937_64 rng_;
  int64_t runs_ = 0;         // of the slots drawn for the current host copy
  int64_t host_cursor_ = 0;  // FreshHostSlots' next slot
  nlohmann::ordered_json samples_ = nlohmann::ordered_json::array();
  // The proxy's work (the backend keeps a pointer until the next Sync): a few in turn.
  std::array<ForwardWork, 4> work_;
  size_t work_next_ = 0;
  std::vector<std::string> skipped_;  // grid points left out, with why
};

// Several ranks: the bare collectives and peer reads of the gathers, every rank taking part.
// Per repeat every rank times the op on its collective stream after a barrier and a gate; the
// repeat's time is the smallest of the ranks' spans (the rank that reached the collective last
// waited for nobody; the others' spans include waiting for it), and the sample is the median of
// those. Only rank 0's document is kept.
class CollectiveSweeper {
 public:
  CollectiveSweeper(const SweepOptions& o, RankBackend& b)
      : o_(o), b_(b), geo_(SweepGeometry(o)), rng_(o.seed + static_cast<uint64_t>(b.rank())) {}

  nlohmann::ordered_json Run() {
    b_.StartEpoch();
    const int N = geo_.ranks;
    const int64_t record = geo_.page_layer_bytes();
    const std::vector<int64_t> counts = SweepPageCounts(o_.max_pages);
    Progress("all_gather, " + std::to_string(N) + " ranks");
    for (const int64_t n : counts) {
      const int64_t shard = (n + N - 1) / N;
      const std::vector<double> t = Time(
          [&] { return [this, shard, record] { b_.AllGather(Stream::kComm, shard * record); }; });
      Add(Stats("all_gather", t), N * shard * record,
          "all-gather of " + std::to_string(n) + " pages, one layer, all pools (" +
              std::to_string(shard) + " per rank)");
    }
    Progress("all_reduce, " + std::to_string(N) + " ranks");
    for (const int64_t n : counts) {
      const std::vector<double> t =
          Time([&] { return [this, n, record] { b_.AllReduce(Stream::kComm, 0, n * record); }; });
      Add(Stats("all_reduce", t), n * record,
          "all-reduce of " + std::to_string(n) + " pages, one layer, all pools");
    }
    Progress("peer_read, " + std::to_string(N) + " ranks");
    for (const int64_t n : counts) {
      int64_t peers = 0;
      const std::vector<double> t = Time([&] {
        // Every page from a peer (round robin over them), random slots there: the p2p gather's
        // remote part, one layer, all pools.
        GatherIndex g;
        g.method = GatherMethod::kP2p;
        g.prefix_pages = n;
        g.tags.assign(static_cast<size_t>(n), PageTag{});
        g.src_slot = RandomSlots(rng_, geo_.device_slots, n);
        for (int64_t i = 0; i < n; ++i)
          g.src_rank.push_back(static_cast<int32_t>((b_.rank() + 1 + i % (N - 1)) % N));
        peers = std::min<int64_t>(n, N - 1);
        auto keep = std::make_shared<GatherIndex>(std::move(g));
        b_.PrepareGather(*keep);
        const int64_t l = static_cast<int64_t>(rng_() % static_cast<uint64_t>(geo_.layers));
        return [this, keep, l] { GatherLayer(b_, *keep, Stream::kComm, l); };
      });
      nlohmann::ordered_json x = Stats("peer_read", t);
      x["peers"] = peers;
      Add(std::move(x), n * record,
          "peer reads of " + std::to_string(n) + " pages, one layer, all pools");
    }

    nlohmann::ordered_json ctx;
    ctx["ranks"] = N;
    ctx["geometry"] =
        GeometryJson(geo_, std::string(kernels::HostLayoutName(geo_.host_layout)), "none");
    ctx["timing"] =
        "per repeat the smallest rank span (after a barrier and a gate kernel), median over "
        "repeats";
    ctx["not_measured"] = {
        "tier copies, device copies, copy submission: run the sweep with --ranks 1",
        kForwardNotMeasured};
    return MeasurementDocument(b_, o_, std::move(ctx), std::move(samples_));
  }

 private:
  void Progress(const std::string& what) {
    if (o_.progress && b_.rank() == 0) o_.progress(what);
  }

  void Add(nlohmann::ordered_json x, int64_t bytes, const std::string& label) {
    x["ranks"] = geo_.ranks;
    x["bytes"] = bytes;
    x["label"] = label;
    samples_.push_back(std::move(x));
  }

  // Every rank runs the same number of repeats; returns, per repeat, the smallest rank's span.
  template <class Make>
  std::vector<double> Time(Make make) {
    std::vector<double> mine;
    for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
      auto run = make();
      if (o_.cache_evict) b_.EvictCaches(Stream::kComm);
      b_.Barrier();
      b_.ForwardLayer(Stream::kComm, 0, {}, kGateSeconds);
      const int m0 = b_.Mark(Stream::kComm);
      run();
      const int m1 = b_.Mark(Stream::kComm);
      b_.Sync();
      const double dt = b_.MarkInterval(m0, m1);
      b_.ReleaseMarks();
      if (rep >= 0) mine.push_back(std::max(dt, 1e-9));
    }
    std::string bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
    const std::vector<std::string> all = b_.AllGatherBytes(bytes);
    std::vector<double> t(mine.size(), 0);
    for (size_t i = 0; i < t.size(); ++i) {
      double best = mine[i];
      for (const std::string& a : all) {
        if (a.size() != bytes.size())
          throw ExecError("sweep: ranks timed different numbers of repeats");
        double v;
        std::memcpy(&v, a.data() + i * sizeof(double), sizeof(double));
        best = std::min(best, v);
      }
      t[i] = best;
    }
    return t;
  }

  const SweepOptions& o_;
  RankBackend& b_;
  ExecGeometry geo_;
  std::mt19937_64 rng_;
  nlohmann::ordered_json samples_ = nlohmann::ordered_json::array();
};

}  // namespace

std::vector<int64_t> SweepPageCounts(int64_t max) {
  std::vector<int64_t> c;
  for (int64_t n = 1; n < max; n *= 2) c.push_back(n);
  if (max >= 1) c.push_back(max);
  return c;
}

ExecGeometry SweepGeometry(const SweepOptions& o) {
  ExecGeometry g;
  g.ranks = o.ranks;
  g.page_tokens = o.page_tokens;
  g.layers = o.layers;
  g.elem_bytes = o.elem_bytes;
  g.pool_names = o.pool_names;
  g.device_slots = 4 * std::max<int64_t>(o.max_pages, 8);
  g.host_slots = 2 * std::max<int64_t>(o.max_pages, 8);
  g.host_layout = o.host_layout;
  g.max_prefix_pages = o.max_pages;
  g.max_shard_pages = o.max_pages;
  if (o.ranks > 1) {  // collectives only: no host tier, pools twice the largest peer read
    g.device_slots = 2 * std::max<int64_t>(o.max_pages, 8);
    g.host_slots = 0;
    g.max_shard_pages = (o.max_pages + o.ranks - 1) / o.ranks;
  }
  return g;
}

namespace {
void Validate(const SweepOptions& o) {
  if (o.ranks < 1 || o.ranks > 64) throw ExecError("sweep: ranks must be in 1..64");
  if (!o.devices.empty() && static_cast<int>(o.devices.size()) != o.ranks)
    throw ExecError("sweep: " + std::to_string(o.devices.size()) + " devices for " +
                    std::to_string(o.ranks) + " ranks");
  if (o.repeats < 1 || o.warmup < 0 || o.max_pages < 1 || o.max_all_layer_pages < 1 ||
      o.layers < 1 || o.page_tokens < 1 || o.elem_bytes.empty() ||
      o.elem_bytes.size() != o.pool_names.size() || o.submit_batches.empty())
    throw ExecError(
        "sweep: repeats >= 1, warmup >= 0, max pages >= 1, layers >= 1, page tokens >= 1, one name "
        "per pool, "
        "at least one pool and one submit batch are required");
  if (o.backup_forward_tokens < 1) throw ExecError("sweep: backup forward tokens must be >= 1");
  for (const int64_t g : o.backup_gather_pages)
    if (g < 0) throw ExecError("sweep: backup gather page counts must be >= 0");
}

void ValidateForward(const SweepOptions& o) {
  if (o.forward != "synthetic" && o.forward != "model")
    throw ExecError("sweep: forward must be synthetic or model, got '" + o.forward + "'");
  for (const int64_t n : o.forward_new_tokens)
    if (n < 1) throw ExecError("sweep: forward new tokens must be >= 1");
  for (const int64_t p : o.forward_prefix_tokens)
    if (p < 0) throw ExecError("sweep: forward prefix tokens must be >= 0");
  for (const int64_t n : o.pair_pages)
    if (n < 1) throw ExecError("sweep: pair page counts must be >= 1");
  for (const int64_t n : o.first_gather_pages)
    if (n < 1) throw ExecError("sweep: first gather page counts must be >= 1");
  for (const double f : o.pair_forward_s)
    if (!(f > 0 && f < 10)) throw ExecError("sweep: pair forward seconds must be in (0, 10)");
  for (const auto& [n, p] : o.pair_forward_shapes)
    if (n < 1 || p < 0)
      throw ExecError("sweep: pair forward shapes need new tokens >= 1, prefix >= 0");
}
}  // namespace

ForwardPlan SweepForwardPlan(const SweepOptions& o) {
  const ExecGeometry geo = SweepGeometry(o);
  ForwardPlan f;
  f.shape = o.model_shape;
  f.preset = o.model_preset;
  const auto kv = std::find(o.pool_names.begin(), o.pool_names.end(), "kv");
  if (kv == o.pool_names.end())
    throw ExecError("sweep: --forward model reads the pool named 'kv'; the geometry has none");
  f.kv_pool = static_cast<int>(kv - o.pool_names.begin());
  f.kv_row_bytes = o.elem_bytes[static_cast<size_t>(f.kv_pool)];
  const int64_t cap = geo.max_prefix_pages * geo.page_tokens;
  auto fit = [&](int64_t n, int64_t p) {
    if (p > cap) return;
    f.max_tokens = std::max(f.max_tokens, n);
    f.max_keys = std::max(f.max_keys, p / geo.page_tokens * geo.page_tokens + n);
  };
  if (o.forward_grid)
    for (const int64_t n : o.forward_new_tokens)
      for (const int64_t p : o.forward_prefix_tokens) fit(n, p);
  if (o.pairs)
    for (const auto& [n, p] : o.pair_forward_shapes) fit(n, p);
  if (o.backups) fit(std::min(kBackupMaxPages * geo.page_tokens, o.backup_forward_tokens), 0);
  f.max_tokens = std::max<int64_t>(f.max_tokens, 1);
  f.max_keys = std::max<int64_t>(f.max_keys, 1);
  return f;
}

nlohmann::ordered_json RunSweep(const SweepOptions& o, RankBackend& backend) {
  Validate(o);
  ValidateForward(o);
  if (backend.ranks() != o.ranks)
    throw ExecError("sweep: the backend has " + std::to_string(backend.ranks()) +
                    " ranks, the options " + std::to_string(o.ranks));
  if (o.ranks > 1) return CollectiveSweeper(o, backend).Run();
  return Sweeper(o, backend).Run();
}

namespace {
// Several ranks: one process each (SuperviseRanks), rank 0 writes its document into the run's
// directory, from which this (supervising) process reads it.
nlohmann::ordered_json RunRanks(const SweepOptions& o) {
  const ExecGeometry geo = SweepGeometry(o);
  const std::string dir = MakeRendezvousDir("kvlanes-sweep");
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};
  std::unique_ptr<HostSegment> seg;
  if (o.backend == "host") {
    seg = HostSegment::CreateAnonymous(geo);
  } else if (!kBackendNames.Find(o.backend)) {
    throw ExecError("sweep: unknown backend '" + o.backend + "' (valid: " + kBackendNames.List() +
                    ")");
  }
#if !KVLANES_WITH_CUDA
  if (o.backend == "cuda") throw ExecError("sweep: this build has no CUDA (use --backend host)");
#endif
  const std::string result = dir + "/rank0.json";
  const RunOutcome out =
      SuperviseRanks(o.ranks, seg.get(), o.timeout_s, 0, [&](int r, std::string* error) {
        std::unique_ptr<Rendezvous> rv;
        std::unique_ptr<RankBackend> b;
        try {
          if (seg) {
            b = MakeHostBackend(geo, *seg, r, o.timeout_s);
          } else {
#if KVLANES_WITH_CUDA
            rv = OpenRendezvous(ParseRendezvous("file:" + dir), r, o.ranks, o.timeout_s);
            CudaBackendOptions c;
            c.device = o.devices.empty() ? -1 : o.devices[static_cast<size_t>(r)];
            c.tier_copy = o.tier_copy;
            c.tier_max_ctas = o.tier_max_ctas;
            c.tier_max_ctas = o.tier_max_ctas;
            c.timeout_s = o.timeout_s;
            c.needs_nccl = true;
            c.needs_p2p = true;
            b = MakeCudaBackend(geo, r, r, *rv, c);
#endif
          }
          const nlohmann::ordered_json doc = RunSweep(o, *b);
          if (r == 0) {
            std::ofstream f(result + ".tmp");
            f << doc.dump(1) << "\n";
            f.close();
            if (!f || std::rename((result + ".tmp").c_str(), result.c_str()) != 0)
              throw ExecError("cannot write " + result);
          }
          b->Barrier();
          return 0;
        } catch (const std::exception& e) {
          const std::string w = e.what();
          *error = w.rfind("rank ", 0) == 0 ? w : "rank " + std::to_string(r) + ": " + w;
          if (b) {
            b->Abort(*error);
          } else if (seg) {
            seg->MarkFailed(r, *error);
          }
          return 1;
        }
      });
  if (out.exit_code != 0) throw ExecError("sweep: " + out.message);
  return ReadSweepRankResult(result);
}
}  // namespace

nlohmann::ordered_json ReadSweepRankResult(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw ExecError("sweep: rank 0 wrote no result (" + path + ")");
  // Bounded by kMaxInputFileBytes; /dev/zero or binary data in its place stops at the first chunk.
  const std::string text = ReadInputFile(path, "sweep result");
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ExecError("sweep: rank 0's result " + path + " is not JSON: " + e.what());
  }
}

nlohmann::ordered_json RunSweep(const SweepOptions& o) {
  Validate(o);
  ValidateForward(o);
  if (o.forward == "model" && (o.backend != "cuda" || o.ranks > 1))
    throw ExecError(
        "sweep: --forward model runs the proxy on one GPU: it needs --backend cuda and --ranks 1 "
        "(the host backend has no model forward pass; use --forward synthetic)");
  if (o.ranks > 1) return RunRanks(o);
  const ExecGeometry geo = SweepGeometry(o);
  if (o.backend == "host") {
    std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(geo);
    std::unique_ptr<RankBackend> b = MakeHostBackend(geo, *seg, 0, o.timeout_s);
    return RunSweep(o, *b);
  }
  if (o.backend != "cuda")
    throw ExecError("sweep: unknown backend '" + o.backend + "' (valid: " + kBackendNames.List() +
                    ")");
#if KVLANES_WITH_CUDA
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/kvlanes-sweep-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if (!dir) throw ExecError("sweep: cannot create a rendezvous directory under /tmp");
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  std::unique_ptr<Rendezvous> rv =
      OpenRendezvous(ParseRendezvous(std::string("file:") + dir), 0, 1, o.timeout_s);
  CudaBackendOptions c;
  c.device = o.device;
  c.tier_copy = o.tier_copy;
  c.tier_max_ctas = o.tier_max_ctas;
  c.timeout_s = o.timeout_s;
  c.needs_nccl = false;  // one rank: no collective runs
  c.needs_p2p = false;
  ForwardPlan fplan;
  if (o.forward == "model") {
    fplan = SweepForwardPlan(o);
    c.forward = &fplan;
  }
  std::unique_ptr<RankBackend> b = MakeCudaBackend(geo, 0, 0, *rv, c);
  return RunSweep(o, *b);
#else
  throw ExecError("sweep: this build has no CUDA (use --backend host)");
#endif
}

}  // namespace kvlanes::exec

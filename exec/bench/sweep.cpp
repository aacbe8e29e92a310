#include "exec/bench/sweep.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>

#include "exec/bench/sweeper.h"
#include "exec/exec_run.h"
#include "exec/host_backend.h"
#include "exec/launch.h"
#include "io/input_file.h"
#if KVLANES_WITH_CUDA
#include "exec/cuda_backend.h"
#endif

namespace kvlanes::exec {
namespace sweep {

// Every byte the sweep's ops read holds the pattern, as in the executor (exec/pattern.h): the
// device pools (each slot written as a page of its own), the host pool (a copy of the first
// device slots) and the dense buffer (a gather of the first slots into each of its layers). A
// fresh allocation reads as zeros, and a tensor core multiplying zeros draws less power: the
// proxy's attention over a zero prefix could run at a clock that the executor's, over gathered
// pages, does not reach (docs/calibration.md, "Data").
void Sweeper::FillWithPattern() {
  std::vector<PageWrite> pages(static_cast<size_t>(geo_.device_slots));
  for (int32_t i = 0; i < static_cast<int32_t>(pages.size()); ++i)
    pages[static_cast<size_t>(i)] = PageWrite{i, PageTag{1, 0, i}};
  for (int64_t l = 0; l < geo_.layers; ++l) b_.ForwardLayer(Stream::kCompute, l, pages, 0.0);
  b_.Sync();
  const int64_t host = std::min(geo_.host_slots, geo_.device_slots);
  if (host > 0) {
    std::vector<int32_t> slots(static_cast<size_t>(host));
    std::iota(slots.begin(), slots.end(), 0);
    for (int k = 0; k < geo_.num_pools(); ++k)
      b_.TierCopy(Stream::kD2H, k, kernels::TierDirection::kDeviceToHost, slots, slots,
                  kernels::LayerRange{0, geo_.layers});
  }
  const int64_t dense = std::min(geo_.max_prefix_pages, geo_.device_slots);
  if (dense > 0) {
    std::vector<int32_t> slots(static_cast<size_t>(dense));
    std::iota(slots.begin(), slots.end(), 0);
    fill_index_ = PackedIdentityIndex(std::move(slots));
    for (int32_t i = 0; i < static_cast<int32_t>(dense); ++i)
      fill_index_.tags[static_cast<size_t>(i)] = PageTag{1, 0, i};  // what slot i holds
    b_.PrepareGather(fill_index_);
    for (int64_t l = 0; l < std::min(geo_.dense_layers, geo_.layers); ++l)
      GatherLayer(b_, fill_index_, Stream::kComm, l);
  }
  b_.Sync();
}

nlohmann::ordered_json Sweeper::Run() {
  b_.StartEpoch();
  FillWithPattern();
  const std::string mode =
      o_.backend == "host" ? "memcpy" : (o_.tier_copy == "memcpy" ? "memcpy2d" : o_.tier_copy);
  const std::string layout(kernels::HostLayoutName(geo_.host_layout));
  const bool model = o_.forward == "model";
  // Two passes over the groups: the first counts their steps (Step answers false, so no step
  // does any work), the second runs them with the count known for the progress lines.
  int64_t expired0 = 0;
  for (const bool counting : {true, false}) {
    counting_ = counting;
    skipped_.clear();
    if (!counting) progress_.Plan(planned_);
    if (o_.copies) {
      TierCopySamples(layout, mode);
      SubmitSamples(layout, mode);
      PackedGatherSamples();
    }
    if (o_.backups) BackupPassSamples(layout, mode);
    if (o_.load_backs) LoadBackPassSamples(layout, mode);
    if (model && o_.forward_grid) ForwardGridSamples();
    if (model && o_.forward_grid) ForwardPassSamples();
    if (model && !o_.sustain_new_tokens.empty()) ForwardSustainSamples();
    expired0 = b_.GatesExpired();
    if (o_.pairs) PairSamples();
  }

  nlohmann::ordered_json ctx;
  ctx["geometry"] = GeometryJson(geo_, layout, mode);
  ctx["buffer_bytes"] = geo_.device_pool_bytes();
  ctx["forward"] = o_.forward;
  ctx["buffers"] = "pattern";  // FillWithPattern ran (calibrate notes files without it)
  if (model) ctx["model_preset"] = o_.model_preset;
  if (o_.pairs) ctx["pair_gates_expired"] = b_.GatesExpired() - expired0;
  if (!skipped_.empty()) ctx["left_out"] = skipped_;
  nlohmann::ordered_json not_measured = {
      "collectives and peer reads: run the sweep with --ranks N"};
  if (!model) not_measured.push_back(kForwardNotMeasured);
  ctx["not_measured"] = std::move(not_measured);
  return MeasurementDocument(b_, o_, std::move(ctx), std::move(samples_));
}

bool Sweeper::Step(const std::string& what) {
  if (counting_) {
    ++planned_;
    return false;
  }
  progress_.Start(o_.progress, what);
  return true;
}

void Sweeper::Note(const std::string& line) {
  if (o_.progress && !counting_) o_.progress("  " + line);
}

// Runs of pages adjacent on both sides (what a memcpy plan merges into one copy).
int64_t Sweeper::Runs(const std::vector<int32_t>& d, const std::vector<int32_t>& h) {
  int64_t r = d.empty() ? 0 : 1;
  for (size_t i = 1; i < d.size(); ++i)
    if (d[i] != d[i - 1] + 1 || h[i] != h[i - 1] + 1) ++r;
  return r;
}

int64_t Sweeper::RandomLayer() {
  return static_cast<int64_t>(rng_() % static_cast<uint64_t>(geo_.layers));
}

// n distinct random device slots and n distinct random host slots.
std::pair<std::vector<int32_t>, std::vector<int32_t>> Sweeper::Slots(int64_t n) {
  std::vector<int32_t> d = RandomSlots(rng_, geo_.device_slots, n);
  return {std::move(d), RandomSlots(rng_, geo_.host_slots, n)};
}

// n host slots in order from the cursor (SweepOptions::backup_fresh_host), from slot 0 again
// where they would pass the pool's end.
std::vector<int32_t> Sweeper::FreshHostSlots(int64_t n) {
  if (host_cursor_ + n > geo_.host_slots) host_cursor_ = 0;
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<int32_t>(host_cursor_ + i);
  host_cursor_ += n;
  return v;
}

// n slots on each side in runs of `run` adjacent slots (the last one shorter): random distinct
// run-aligned blocks of the device and of the host pool.
std::pair<std::vector<int32_t>, std::vector<int32_t>> Sweeper::RunSlots(int64_t n, int64_t run) {
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
void Sweeper::EvictCachesNow() {
  if (!o_.cache_evict) return;
  b_.EvictCaches(Stream::kCompute);
  b_.Sync();
}

}  // namespace sweep

std::string ForwardTable(const nlohmann::ordered_json& doc) {
  constexpr double kPeakTflops = 989, kPeakGbps = 4800;  // one H200 SXM
  std::string out;
  char line[200];
  for (const auto& s : doc["samples"]) {
    if (s["kind"] != "forward" || s.contains("pass_requests") || s.contains("load")) continue;
    if (out.empty()) {
      std::snprintf(line, sizeof line, "%-14s %-6s %8s %8s %10s %9s %6s %9s %6s\n", "preset",
                    "layer", "new", "prefix", "ms/layer", "TFLOP/s", "%peak", "GB/s", "%peak");
      out += line;
    }
    auto row = [&](const std::string& kind, const nlohmann::ordered_json& x) {
      const double t = x.value("median_s", 0.0);
      const double tf = x.value("tflops", 0.0), gb = x.value("gbps", 0.0);
      std::snprintf(line, sizeof line,
                    "%-14s %-6s %8lld %8lld %10.4f %9.1f %5.1f%% %9.0f %5.1f%%\n",
                    s.value("preset", std::string()).c_str(), kind.c_str(),
                    static_cast<long long>(s.value("new_tokens", int64_t{0})),
                    static_cast<long long>(s.value("prefix_tokens", int64_t{0})), 1e3 * t, tf,
                    100 * tf / kPeakTflops, gb, 100 * gb / kPeakGbps);
      out += line;
    };
    const nlohmann::ordered_json kinds = s.value("per_kind", nlohmann::ordered_json::array());
    for (const auto& k : kinds) row(k.value("layer_kind", std::string("?")), k);
    if (kinds.size() > 1) row("mean", s);
  }
  if (!out.empty()) {
    std::snprintf(line, sizeof line,
                  "(peaks: %.0f TFLOP/s dense bf16, %.1f TB/s HBM3e; one H200 SXM)\n", kPeakTflops,
                  kPeakGbps / 1000);
    out += line;
  }
  return out;
}

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
  for (const int64_t k : o.forward_pass_requests)
    if (k < 2 || k > 64) throw ExecError("sweep: forward pass requests must be in [2, 64]");
  for (const int64_t n : o.sustain_new_tokens)
    if (n < 1) throw ExecError("sweep: sustained new tokens must be >= 1");
  for (const int64_t p : o.sustain_prefix_tokens)
    if (p < 0) throw ExecError("sweep: sustained prefix tokens must be >= 0");
  if (!o.sustain_new_tokens.empty() && o.sustain_prefix_tokens.empty())
    throw ExecError("sweep: sustained samples need at least one prefix");
  if (!(o.sustain_s >= 0 && o.sustain_s <= 60))
    throw ExecError("sweep: sustain seconds must be in [0, 60]");
  if (!o.sustain_new_tokens.empty() && o.forward != "model")
    throw ExecError("sweep: sustained samples time the model proxy: they need forward model");
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
    for (const int64_t n : o.forward_new_tokens) {
      for (const int64_t p : o.forward_prefix_tokens) fit(n, p);
      for (const int64_t k : o.forward_pass_requests) fit(k * n, 0);  // the pass's GEMM tokens
    }
  for (const int64_t n : o.sustain_new_tokens)
    for (const int64_t p : o.sustain_prefix_tokens) fit(n, p);
  if (o.pairs)
    for (const auto& [n, p] : o.pair_forward_shapes) fit(n, p);
  if (o.backups || o.load_backs)
    fit(std::min(sweep::kBackupMaxPages * geo.page_tokens, o.backup_forward_tokens), 0);
  f.max_tokens = std::max<int64_t>(f.max_tokens, 1);
  f.max_keys = std::max<int64_t>(f.max_keys, 1);
  f.chunk_tokens = ForwardChunkTokens(f.max_tokens);
  return f;
}

nlohmann::ordered_json RunSweep(const SweepOptions& o, RankBackend& backend) {
  Validate(o);
  ValidateForward(o);
  if (backend.ranks() != o.ranks)
    throw ExecError("sweep: the backend has " + std::to_string(backend.ranks()) +
                    " ranks, the options " + std::to_string(o.ranks));
  if (o.ranks > 1) return sweep::SweepCollectives(o, backend);
  return sweep::Sweeper(o, backend).Run();
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
  c.needs_p2p = true;    // its own pools, for the one-kernel (p2p) gather layer's samples
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

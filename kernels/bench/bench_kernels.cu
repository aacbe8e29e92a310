// The kernels benchmark (bench_kernels.h): every copy of kernels/ timed with CUDA events against
// the ceiling measured in the same run. Formulas: docs/kernels.md, "Benchmark".
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bench/bench_kernels.h"
#include "kernels/bench/scatter_variants_cuda.h"
#include "kernels/materialize_cuda.h"
#include "kernels/tier_copy_cuda.h"

namespace kvlanes::kernels {
namespace {

struct CudaFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void Check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) {
    throw CudaFailure(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(int64_t bytes) : bytes_(std::max<int64_t>(bytes, 8)) {
    Check(cudaMalloc(&ptr_, static_cast<size_t>(bytes_)),
          "cudaMalloc(" + std::to_string(bytes_) + " B)");
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  int64_t bytes_;
};

class PinnedBuffer {
 public:
  explicit PinnedBuffer(int64_t bytes) : bytes_(std::max<int64_t>(bytes, 8)) {
    Check(cudaHostAlloc(&ptr_, static_cast<size_t>(bytes_),
                        cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc(" + std::to_string(bytes_) + " B)");
  }
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  int64_t bytes_;
};

// Random bytes (splitmix64 of the word index): benchmarks never run on zeros.
__global__ void FillRandomKernel(uint64_t* p, uint64_t words, uint64_t seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = z ^ (z >> 31);
  }
}

void FillRandom(void* p, int64_t bytes, uint64_t seed, cudaStream_t s) {
  FillRandomKernel<<<1024, 256, 0, s>>>(static_cast<uint64_t*>(p), bytes / 8, seed);
  Check(cudaGetLastError(), "FillRandomKernel");
}

// Pinned host memory filled through a device staging buffer (fast, random).
void FillRandomHost(void* host, int64_t bytes, uint64_t seed, cudaStream_t s) {
  const int64_t stage = std::min<int64_t>(bytes, 256ll << 20);
  DeviceBuffer tmp(stage);
  for (int64_t off = 0; off < bytes; off += stage) {
    const int64_t n = std::min(stage, bytes - off);
    FillRandom(tmp.get(), n, seed + static_cast<uint64_t>(off), s);
    Check(cudaMemcpyAsync(static_cast<char*>(host) + off, tmp.get(), static_cast<size_t>(n),
                          cudaMemcpyDeviceToHost, s),
          "fill host pool");
  }
  Check(cudaStreamSynchronize(s), "fill host pool");
}

using Buffers = std::vector<std::unique_ptr<DeviceBuffer>>;

// Copies an index array to a new device buffer appended to *keep.
void ToDevice(const std::vector<int32_t>& v, Buffers* keep, cudaStream_t s) {
  keep->push_back(std::make_unique<DeviceBuffer>(static_cast<int64_t>(v.size() * sizeof(int32_t))));
  Check(cudaMemcpyAsync(keep->back()->get(), v.data(), v.size() * sizeof(int32_t),
                        cudaMemcpyHostToDevice, s),
        "copy index to device");
  Check(cudaStreamSynchronize(s), "copy index to device");
}

const int32_t* DevPtr(const Buffers& keep, size_t i) {
  return static_cast<const int32_t*>(keep[i]->get());
}

// Untimed passes run until at least `warmup` of them and kMinWarmupMs of wall time have passed:
// on the H200 a 0.6 ms kernel timed right after its set-up with 3 warm-up passes ran 10% slower
// than the same kernel timed later (presumably the clocks drop while the host sets up).
constexpr double kMinWarmupMs = 100.0;

// Median of `repeats` timed passes after the warm-up; pass i calls body(i).
double MedianMs(cudaStream_t s, int warmup, int repeats, const std::function<void(int)>& body) {
  const auto t0 = std::chrono::steady_clock::now();
  int i = 0;
  for (;; ++i) {
    if (i >= warmup) {
      Check(cudaStreamSynchronize(s), "warm-up");
      const std::chrono::duration<double, std::milli> spent = std::chrono::steady_clock::now() - t0;
      if (spent.count() >= kMinWarmupMs) break;
    }
    body(i);
  }
  std::vector<cudaEvent_t> start(repeats), stop(repeats);
  for (int r = 0; r < repeats; ++r) {
    Check(cudaEventCreate(&start[r]), "cudaEventCreate");
    Check(cudaEventCreate(&stop[r]), "cudaEventCreate");
  }
  for (int r = 0; r < repeats; ++r) {
    Check(cudaEventRecord(start[r], s), "cudaEventRecord");
    body(i + r);
    Check(cudaEventRecord(stop[r], s), "cudaEventRecord");
  }
  Check(cudaStreamSynchronize(s), "timed passes");
  std::vector<double> ms(repeats);
  for (int r = 0; r < repeats; ++r) {
    float t = 0;
    Check(cudaEventElapsedTime(&t, start[r], stop[r]), "cudaEventElapsedTime");
    ms[r] = t;
    cudaEventDestroy(start[r]);
    cudaEventDestroy(stop[r]);
  }
  std::sort(ms.begin(), ms.end());
  return repeats % 2 ? ms[repeats / 2] : 0.5 * (ms[repeats / 2 - 1] + ms[repeats / 2]);
}

double Gbps(int64_t bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0; }

// n distinct values of [0, range) in random order.
std::vector<int32_t> DistinctRandom(int64_t n, int64_t range, std::mt19937_64& rng) {
  std::vector<int32_t> all(static_cast<size_t>(range));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(n));
  return all;
}

int RotationSets(const KernelBenchOptions& o, int64_t bytes_per_pass) {
  const int64_t sets =
      (o.rotate_min_bytes + bytes_per_pass - 1) / std::max<int64_t>(bytes_per_pass, 1);
  return static_cast<int>(std::clamp<int64_t>(sets, 1, 64));
}

std::string TodayUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

BenchContext ReadContext(int device) {
  BenchContext c;
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  c.device_name = prop.name;
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) == cudaSuccess) c.pci_bus_id = bus;
  c.sm_count = prop.multiProcessorCount;
  c.l2_bytes = prop.l2CacheSize;
  c.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  cudaDriverGetVersion(&c.driver_version);
  cudaRuntimeGetVersion(&c.runtime_version);
  c.date_utc = TodayUtc();
  return c;
}

// ----- Materialization kernels ----------------------------------------------------------------

struct MatShape {
  std::vector<int64_t> chunk;  // per pool
  int64_t record = 0;          // layers * sum(chunk)
  int64_t pages = 0;
  int64_t payload = 0;
};

MatShape ShapeFor(const KernelBenchOptions& o, int64_t size) {
  MatShape m;
  for (int64_t e : o.pool_elem_bytes) m.chunk.push_back(e * o.page_tokens);
  m.record = o.num_layers * std::accumulate(m.chunk.begin(), m.chunk.end(), int64_t{0});
  m.pages = std::max<int64_t>(1, size / m.record);
  m.payload = m.pages * m.record;
  return m;
}

// Pools of `slots` slots each (one per elem size), random content.
Buffers MakePools(const KernelBenchOptions& o, const MatShape& m, int64_t slots,
                  std::vector<PoolRef>* refs, uint64_t seed, cudaStream_t s) {
  Buffers bufs;
  for (size_t k = 0; k < m.chunk.size(); ++k) {
    PoolGeometry g{.num_layers = o.num_layers,
                   .num_slots = slots,
                   .page_tokens = o.page_tokens,
                   .elem_bytes = o.pool_elem_bytes[k]};
    bufs.push_back(std::make_unique<DeviceBuffer>(g.total_bytes()));
    FillRandom(bufs.back()->get(), g.total_bytes(), seed + k, s);
    refs->push_back({.data = bufs.back()->get(), .geo = g});
  }
  return bufs;
}

// `sets` dense outputs (one buffer per pool per set) of m.pages pages.
std::vector<std::vector<DenseRef>> MakeDense(const KernelBenchOptions& o, const MatShape& m,
                                             int sets, Buffers* keep) {
  std::vector<std::vector<DenseRef>> out(sets);
  for (int r = 0; r < sets; ++r) {
    for (size_t k = 0; k < m.chunk.size(); ++k) {
      keep->push_back(std::make_unique<DeviceBuffer>(o.num_layers * m.pages * m.chunk[k]));
      out[r].push_back({.data = keep->back()->get(),
                        .page_tokens = o.page_tokens,
                        .elem_bytes = o.pool_elem_bytes[k],
                        .num_pages = m.pages});
    }
  }
  return out;
}

double MemcpyMs(const KernelBenchOptions& o, int64_t bytes, cudaStream_t s) {
  const int sets = RotationSets(o, 2 * bytes);
  Buffers src, dst;
  for (int r = 0; r < sets; ++r) {
    src.push_back(std::make_unique<DeviceBuffer>(bytes));
    dst.push_back(std::make_unique<DeviceBuffer>(bytes));
    FillRandom(src.back()->get(), bytes, 1000 + r, s);
  }
  return MedianMs(s, o.warmup, o.repeats, [&](int i) {
    Check(cudaMemcpyAsync(dst[i % sets]->get(), src[i % sets]->get(), static_cast<size_t>(bytes),
                          cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync D2D");
  });
}

double MemsetMs(const KernelBenchOptions& o, int64_t bytes, cudaStream_t s) {
  const int sets = RotationSets(o, bytes);
  Buffers dst;
  for (int r = 0; r < sets; ++r) dst.push_back(std::make_unique<DeviceBuffer>(bytes));
  return MedianMs(s, o.warmup, o.repeats, [&](int i) {
    Check(cudaMemsetAsync(dst[i % sets]->get(), 0, static_cast<size_t>(bytes), s),
          "cudaMemsetAsync");
  });
}

KernelBenchRow MakeRow(const std::string& kernel, int64_t pages, int64_t payload, int64_t moved,
                       double kernel_ms, double memcpy_ms) {
  KernelBenchRow row;
  row.kernel = kernel;
  row.pages = pages;
  row.payload_bytes = payload;
  row.moved_bytes = moved;
  row.kernel_ms = kernel_ms;
  row.memcpy_ms = memcpy_ms;
  row.kernel_gbps = Gbps(moved, kernel_ms);
  row.memcpy_gbps = Gbps(2 * payload, memcpy_ms);
  row.fraction = row.memcpy_gbps > 0 ? row.kernel_gbps / row.memcpy_gbps : 0;
  return row;
}

// Each Time* function times one kernel at one size with `tuning`; returns the median ms and sets
// *moved to the bytes read + written per pass.
using TimedKernel = std::function<double(const LaunchTuning&, int64_t* moved)>;

TimedKernel PackBench(const KernelBenchOptions& o, const MatShape& m, cudaStream_t s,
                      std::mt19937_64& rng, Buffers* keep, Buffers* idx) {
  auto refs = std::make_shared<std::vector<PoolRef>>();
  const int64_t slots = 4 * m.pages;  // owned pages scattered over a pool 4x their size
  for (auto& b : MakePools(o, m, slots, refs.get(), 11, s)) keep->push_back(std::move(b));
  const int sets = RotationSets(o, 2 * m.payload);
  auto sends = std::make_shared<std::vector<void*>>();
  const size_t first_idx = idx->size();
  for (int r = 0; r < sets; ++r) {
    keep->push_back(std::make_unique<DeviceBuffer>(m.payload));
    sends->push_back(keep->back()->get());
    ToDevice(DistinctRandom(m.pages, slots, rng), idx, s);
  }
  const auto args = [=, &o](int set) {
    return PackArgs{.pools = *refs,
                    .layers = {0, o.num_layers},
                    .slots = DevPtr(*idx, first_idx + set),
                    .num_pages = m.pages,
                    .send = (*sends)[set]};
  };
  return [=, &o](const LaunchTuning& t, int64_t* moved) {
    *moved = 2 * m.payload;
    return MedianMs(s, o.warmup, o.repeats,
                    [&](int i) { Check(PackPages(args(i % sets), s, t), "PackPages"); });
  };
}

TimedKernel UnpackBench(const KernelBenchOptions& o, const MatShape& m, cudaStream_t s,
                        std::mt19937_64& rng, Buffers* keep, Buffers* idx) {
  // Each page owned by a uniformly random rank: shards unbalanced, padded to the largest.
  std::vector<std::vector<int64_t>> shards(static_cast<size_t>(o.num_ranks));
  std::uniform_int_distribution<int64_t> owner(0, o.num_ranks - 1);
  for (int64_t p = 0; p < m.pages; ++p) shards[owner(rng)].push_back(p);
  for (auto& sh : shards) std::shuffle(sh.begin(), sh.end(), rng);
  int64_t shard_pages = 0;
  for (auto& sh : shards) shard_pages = std::max<int64_t>(shard_pages, sh.size());
  const int64_t records = o.num_ranks * shard_pages;
  const int sets = RotationSets(o, 2 * m.payload);
  auto dense = std::make_shared<std::vector<std::vector<DenseRef>>>(MakeDense(o, m, sets, keep));
  auto recvs = std::make_shared<std::vector<void*>>();
  for (int r = 0; r < sets; ++r) {
    keep->push_back(std::make_unique<DeviceBuffer>(records * m.record));
    FillRandom(keep->back()->get(), records * m.record, 21 + r, s);
    recvs->push_back(keep->back()->get());
  }
  const size_t index_at = idx->size();
  ToDevice(BuildUnpackIndex(shards, shard_pages, m.pages), idx, s);
  return [=, &o](const LaunchTuning& t, int64_t* moved) {
    *moved = 2 * m.payload;
    return MedianMs(s, o.warmup, o.repeats, [&](int i) {
      UnpackArgs a{.dense = (*dense)[i % sets],
                   .num_layers = o.num_layers,
                   .recv = (*recvs)[i % sets],
                   .num_records = records,
                   .recv_index = DevPtr(*idx, index_at),
                   .num_dense_pages = m.pages};
      Check(UnpackPages(a, s, t), "UnpackPages");
    });
  };
}

TimedKernel ZigzagBench(const KernelBenchOptions& o, const MatShape& m, cudaStream_t s,
                        Buffers* keep) {
  const ZigzagRun run{.num_pages = m.pages, .num_ranks = o.num_ranks};
  const int64_t shard_pages = run.MaxShardPages();
  const int64_t records = o.num_ranks * shard_pages;
  const int sets = RotationSets(o, 2 * m.payload);
  auto dense = std::make_shared<std::vector<std::vector<DenseRef>>>(MakeDense(o, m, sets, keep));
  auto recvs = std::make_shared<std::vector<void*>>();
  for (int r = 0; r < sets; ++r) {
    keep->push_back(std::make_unique<DeviceBuffer>(records * m.record));
    FillRandom(keep->back()->get(), records * m.record, 31 + r, s);
    recvs->push_back(keep->back()->get());
  }
  return [=, &o](const LaunchTuning& t, int64_t* moved) {
    *moved = 2 * m.payload;
    return MedianMs(s, o.warmup, o.repeats, [&](int i) {
      ZigzagArgs a{.dense = (*dense)[i % sets],
                   .num_layers = o.num_layers,
                   .recv = (*recvs)[i % sets],
                   .run = run,
                   .shard_pages = shard_pages,
                   .dense_first_page = 0};
      Check(ZigzagReorder(a, s, t), "ZigzagReorder");
    });
  };
}

// owned_share: probability that this rank owns a page (1/N in the dense-allreduce method).
// zero_fill kNone: cudaMemsetAsync of the dense buffers first, then scatter_dense.
TimedKernel ScatterBench(const KernelBenchOptions& o, const MatShape& m, cudaStream_t s,
                         std::mt19937_64& rng, Buffers* keep, Buffers* idx, double owned_share,
                         ZeroFill zero_fill, PiecesZeroPass zero_pass,
                         ScatterVariant variant = ScatterVariant::kPieces) {
  auto refs = std::make_shared<std::vector<PoolRef>>();
  const int64_t slots = 4 * m.pages;
  for (auto& b : MakePools(o, m, slots, refs.get(), 41, s)) keep->push_back(std::move(b));
  // This rank owns round(owned_share x pages) random pages (the same count in every scatter row
  // of a size, so rows compare like with like), each at a random slot; the rest is zeros.
  std::vector<int32_t> owner(static_cast<size_t>(m.pages), -1);
  const std::vector<int32_t> slot_pick = DistinctRandom(m.pages, slots, rng);
  const int64_t owned = std::llround(owned_share * static_cast<double>(m.pages));
  for (const int32_t p : DistinctRandom(owned, m.pages, rng)) owner[p] = slot_pick[p];
  const int sets = RotationSets(o, m.payload + owned * m.record);
  auto dense = std::make_shared<std::vector<std::vector<DenseRef>>>(MakeDense(o, m, sets, keep));
  const size_t index_at = idx->size();
  ToDevice(owner, idx, s);
  // The variants that take the owned-page list get it, as the executor gives it.
  std::vector<int32_t> owned_pages, owned_slots;
  ListOwnedPages(owner, &owned_pages, &owned_slots);
  const bool list = ScatterTakesOwnedList(variant);
  if (list) {
    ToDevice(owned_pages, idx, s);
    ToDevice(owned_slots, idx, s);
  }
  return [=, &o](const LaunchTuning& t, int64_t* moved) {
    *moved = m.payload + owned * m.record;
    return MedianMs(s, o.warmup, o.repeats, [&](int i) {
      ScatterDenseArgs a{.pools = *refs,
                         .layers = {0, o.num_layers},
                         .owner_slot = DevPtr(*idx, index_at),
                         .num_dense_pages = m.pages,
                         .dense = (*dense)[i % sets],
                         .zero_fill = zero_fill,
                         .owned_pages = list ? DevPtr(*idx, index_at + 1) : nullptr,
                         .owned_slots = list ? DevPtr(*idx, index_at + 2) : nullptr,
                         .num_owned = list ? owned : -1};
      if (zero_fill == ZeroFill::kNone) {
        for (const DenseRef& d : a.dense) {
          Check(cudaMemsetAsync(d.data, 0,
                                static_cast<size_t>(o.num_layers * m.pages * d.chunk_bytes()), s),
                "cudaMemsetAsync");
        }
      }
      Check(ScatterDenseVariant(a, variant, s, t, zero_pass), "ScatterDenseVariant");
    });
  };
}

TimedKernel PeerBench(const KernelBenchOptions& o, const MatShape& m, cudaStream_t s,
                      std::mt19937_64& rng, Buffers* keep, Buffers* idx) {
  // N pools of the same device stand in for the peers' IPC-mapped pools: this measures the
  // kernel's local gather, not NVLink.
  const int64_t ranks = std::min<int64_t>(o.num_ranks, kMaxPeerRanks);
  const int64_t slots = m.pages;
  auto peers = std::make_shared<std::vector<PoolRef>>(m.chunk.size() * ranks);
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<PoolRef> refs;
    for (auto& b : MakePools(o, m, slots, &refs, 51 + 10 * r, s)) keep->push_back(std::move(b));
    for (size_t k = 0; k < refs.size(); ++k) (*peers)[k * ranks + r] = refs[k];
  }
  std::vector<int32_t> src_rank(m.pages), src_slot(m.pages);
  std::uniform_int_distribution<int32_t> pick_rank(0, static_cast<int32_t>(ranks - 1));
  std::uniform_int_distribution<int32_t> pick_slot(0, static_cast<int32_t>(slots - 1));
  for (int64_t p = 0; p < m.pages; ++p) {
    src_rank[p] = pick_rank(rng);
    src_slot[p] = pick_slot(rng);
  }
  const int sets = RotationSets(o, 2 * m.payload);
  auto dense = std::make_shared<std::vector<std::vector<DenseRef>>>(MakeDense(o, m, sets, keep));
  const size_t index_at = idx->size();
  ToDevice(src_rank, idx, s);
  ToDevice(src_slot, idx, s);
  return [=, &o](const LaunchTuning& t, int64_t* moved) {
    *moved = 2 * m.payload;
    return MedianMs(s, o.warmup, o.repeats, [&](int i) {
      PeerGatherArgs a{.peer_pools = *peers,
                       .num_ranks = ranks,
                       .layers = {0, o.num_layers},
                       .src_rank = DevPtr(*idx, index_at),
                       .src_slot = DevPtr(*idx, index_at + 1),
                       .num_dense_pages = m.pages,
                       .dense = (*dense)[i % sets]};
      Check(PeerGather(a, s, t), "PeerGather");
    });
  };
}

// The shared copy kernel's rows: pack, unpack, zigzag_reorder, peer_gather and scatter_dense (the
// pieces variant, the rows' scatter_dense) at their default tuning (kDeviceCopyTuning), and each
// again as NAME + OtherCopySuffix(): the same copy by the path the default does not take, bulk
// copies ("(bulk)") while the default is the warp kernel, the warp kernel ("(warps)") once the
// default is bulk copies.
std::string OtherCopySuffix() { return kDeviceCopyTuning.bulk.enabled ? "(warps)" : "(bulk)"; }

bool OtherCopyRow(const std::string& name) {
  const std::string suffix = OtherCopySuffix();
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string BaseRow(const std::string& name) {
  return OtherCopyRow(name) ? name.substr(0, name.size() - OtherCopySuffix().size()) : name;
}

LaunchTuning OtherCopyTuning() {
  LaunchTuning t = kDeviceCopyTuning;
  t.bulk.enabled = !t.bulk.enabled;
  return t;
}

// The materialization rows: scatter_dense by the kPieces variant at the dense-allreduce method's
// owned share (1/N of the pages), with each way of writing the zeros, then with a memset first,
// then the extremes of the owned share; then each requested scatter_dense variant at the owned
// share 1/N and at 0% owned (`variant_rows`: such a row's name and variant).
std::vector<std::string> MaterializeRowNames(
    const KernelBenchOptions& o,
    std::vector<std::pair<std::string, ScatterVariant>>* variant_rows) {
  const std::string other = OtherCopySuffix();
  std::vector<std::string> names = {"pack",
                                    "pack" + other,
                                    "unpack",
                                    "unpack" + other,
                                    "zigzag_reorder",
                                    "zigzag_reorder" + other,
                                    "scatter_dense",
                                    "scatter_dense" + other,
                                    "peer_gather",
                                    "peer_gather" + other,
                                    "scatter_dense(same pass)",
                                    "scatter_dense(two passes)",
                                    "scatter_dense(memset+copy)",
                                    "scatter_dense(0% owned)",
                                    "scatter_dense(100% owned)"};
  for (ScatterVariant v : o.scatter_variants) {
    const std::string base = "scatter_dense[" + std::string(kScatterVariantNames.Name(v)) + "]";
    variant_rows->push_back({base, v});
    variant_rows->push_back({base + "(0% owned)", v});
    names.push_back(base);
    names.push_back(base + "(0% owned)");
  }
  return names;
}

// Sets up the row `name` (its buffers in keep and idx) and returns its timed kernel; *tuning is
// the launch shape its kernel gets by default (DefaultScatterTuning for the variant rows). A
// NAME(bulk) or NAME(warps) row is set up by NAME's code from `rng`, which the caller gives
// NAME's draws.
TimedKernel SetUpMaterializeRow(
    const KernelBenchOptions& o, const MatShape& m, cudaStream_t s, std::mt19937_64& rng,
    Buffers* keep, Buffers* idx, const std::string& row_name,
    const std::vector<std::pair<std::string, ScatterVariant>>& variant_rows, LaunchTuning* tuning) {
  const bool other = OtherCopyRow(row_name);
  const std::string name = BaseRow(row_name);
  TimedKernel timed;
  if (name == "pack") timed = PackBench(o, m, s, rng, keep, idx);
  if (name == "unpack") timed = UnpackBench(o, m, s, rng, keep, idx);
  if (name == "zigzag_reorder") timed = ZigzagBench(o, m, s, keep);
  const double share = 1.0 / static_cast<double>(o.num_ranks);
  const ZeroFill write = ZeroFill::kWrite;
  const PiecesZeroPass two = PiecesZeroPass::kSeparatePass;
  if (name == "scatter_dense") {
    timed = ScatterBench(o, m, s, rng, keep, idx, share, write, PiecesZeroPass::kAuto);
  }
  if (name == "scatter_dense(same pass)") {
    timed = ScatterBench(o, m, s, rng, keep, idx, share, write, PiecesZeroPass::kSamePass);
  }
  if (name == "scatter_dense(two passes)") {
    timed = ScatterBench(o, m, s, rng, keep, idx, share, write, two);
  }
  if (name == "scatter_dense(memset+copy)") {
    timed = ScatterBench(o, m, s, rng, keep, idx, share, ZeroFill::kNone, PiecesZeroPass::kAuto);
  }
  if (name == "scatter_dense(0% owned)") {
    timed = ScatterBench(o, m, s, rng, keep, idx, 0.0, write, two);
  }
  if (name == "scatter_dense(100% owned)") {
    timed = ScatterBench(o, m, s, rng, keep, idx, 1.0, write, two);
  }
  if (name == "peer_gather") timed = PeerBench(o, m, s, rng, keep, idx);
  *tuning = other ? OtherCopyTuning() : kDeviceCopyTuning;
  for (const auto& [row_name, v] : variant_rows) {
    if (name != row_name) continue;
    *tuning = DefaultScatterTuning(v);
    const bool none_owned = name.find("(0% owned)") != std::string::npos;
    timed = ScatterBench(o, m, s, rng, keep, idx, none_owned ? 0.0 : share, ZeroFill::kWrite,
                         PiecesZeroPass::kAuto, v);
  }
  return timed;
}

// --tune for the shared copy kernel's rows: every launch shape of the grid.
void TuneCopyKernel(const std::string& name, const MatShape& m, const TimedKernel& timed,
                    KernelBenchReport* rep) {
  int64_t moved = 0;
  for (bool layer_major : {false, true}) {
    for (int unroll : {4, 8}) {
      for (int threads : {128, 256, 512}) {
        for (int piece : {8192, 32768, 131072}) {
          for (int ctas : {2, 4, 8}) {
            if (threads * ctas > 2048) continue;
            const LaunchTuning t{.threads_per_block = threads,
                                 .piece_bytes = piece,
                                 .ctas_per_sm = ctas,
                                 .unroll = unroll,
                                 .layer_major = layer_major};
            const double tms = timed(t, &moved);
            rep->tune.push_back({.what = name + " " + std::to_string(m.payload) + " B",
                                 .threads_per_block = threads,
                                 .piece_bytes = piece,
                                 .ctas_per_sm = ctas,
                                 .unroll = unroll,
                                 .layer_major = layer_major,
                                 .ms = tms,
                                 .gbps = Gbps(moved, tms)});
          }
        }
      }
    }
  }
}

// --tune for a bulk-copy row: bulk copies of 8-32 KiB, 2-8 stages, 1-8 CTAs per SM, where the
// CTAs' shared memory fits an SM (228 KiB on the H100/H200, 1 KiB of it reserved per CTA). The
// table's threads_per_block column is 32 (one warp a CTA), its unroll column holds the stages.
void TuneBulkCopy(const std::string& name, const MatShape& m, const TimedKernel& timed,
                  KernelBenchReport* rep) {
  int64_t moved = 0;
  for (int piece : {8192, 16384, 32768}) {
    for (int stages : {2, 3, 4, 6, 8}) {
      for (int ctas : {1, 2, 3, 4, 8}) {
        if (ctas * (stages * piece + 1024) > 228 * 1024) continue;
        LaunchTuning t = kDeviceCopyTuning;
        t.bulk = {.enabled = true, .piece_bytes = piece, .stages = stages, .ctas_per_sm = ctas};
        const double tms = timed(t, &moved);
        rep->tune.push_back(
            {.what = name + " " + std::to_string(m.payload) + " B (bulk; unroll=stages)",
             .threads_per_block = 32,
             .piece_bytes = piece,
             .ctas_per_sm = ctas,
             .unroll = stages,
             .layer_major = false,
             .ms = tms,
             .gbps = Gbps(moved, tms)});
      }
    }
  }
}

// --tune for a scatter_dense variant's row: its tiles are threads x unroll vectors (piece_bytes
// and order do not apply).
void TuneTileVariant(const std::string& name, const MatShape& m, const TimedKernel& timed,
                     KernelBenchReport* rep) {
  int64_t moved = 0;
  for (int unroll : {4, 8}) {
    for (int threads : {128, 256, 384, 512, 640, 768, 1024}) {
      for (int ctas : {1, 2, 3, 4, 8, 16}) {
        if (threads * ctas > 2048) continue;
        const LaunchTuning t{.threads_per_block = threads, .ctas_per_sm = ctas, .unroll = unroll};
        double tms = 0;
        try {
          tms = timed(t, &moved);
        } catch (const CudaFailure& e) {
          // A CTA that does not fit an SM (the launcher refuses it before launching, so no
          // error is left behind): skipped.
          if (std::string(e.what()).find("cudaErrorInvalidConfiguration") == std::string::npos)
            throw;
          continue;
        }
        rep->tune.push_back({.what = name + " " + std::to_string(m.payload) + " B",
                             .threads_per_block = threads,
                             .piece_bytes = 0,
                             .ctas_per_sm = ctas,
                             .unroll = unroll,
                             .layer_major = false,
                             .ms = tms,
                             .gbps = Gbps(moved, tms)});
      }
    }
  }
}

// The rows timed through the shared copy kernel (the pieces variant is the rows' scatter_dense;
// the other scatter_dense rows are its owned shares and the output-centric variants).
bool IsCopyKernelRow(const std::string& name) {
  for (const char* base : {"pack", "unpack", "zigzag_reorder", "peer_gather", "scatter_dense"}) {
    if (BaseRow(name) == base) return true;
  }
  return false;
}

void BenchMaterialize(const KernelBenchOptions& o, cudaStream_t s, KernelBenchReport* rep) {
  std::mt19937_64 rng(o.seed);
  // The benchmark's chunks (elem_bytes x 64 tokens) and cudaMalloc'd bases are multiples of 16
  // bytes: where the device allows, the rows whose tuning enables them run by bulk copies.
  const std::string bulk = BulkCopiesUnavailable();
  rep->bulk_copies = bulk.empty() ? "available" : "unavailable: " + bulk;
  std::fprintf(stderr, "bench: bulk copies (TMA) %s\n", rep->bulk_copies.c_str());
  for (int64_t size : o.sizes_bytes) {
    const MatShape m = ShapeFor(o, size);
    std::fprintf(stderr, "bench: materialization, %lld pages, %lld B\n",
                 static_cast<long long>(m.pages), static_cast<long long>(m.payload));
    const double memcpy_ms = MemcpyMs(o, m.payload, s);
    const double memset_ms = MemsetMs(o, m.payload, s);
    std::vector<std::pair<std::string, ScatterVariant>> variant_rows;  // name, variant
    const std::vector<std::string> names = MaterializeRowNames(o, &variant_rows);
    const bool tune_size = o.tune && (size == o.sizes_bytes.back() || size == 64ll << 20);
    // A NAME(bulk) or NAME(warps) row draws what NAME drew (the same pools, contents and pages).
    std::map<std::string, std::mt19937_64> drawn_from;
    for (const std::string& name : names) {
      Buffers keep;
      Buffers idx;
      LaunchTuning row_tuning;
      const bool other = OtherCopyRow(name);
      std::mt19937_64 again;
      if (other) again = drawn_from.at(BaseRow(name));
      drawn_from[name] = rng;
      const TimedKernel timed = SetUpMaterializeRow(o, m, s, other ? again : rng, &keep, &idx, name,
                                                    variant_rows, &row_tuning);
      Check(cudaStreamSynchronize(s), "set-up of " + name);
      int64_t moved = 0;
      const double ms = timed(row_tuning, &moved);
      KernelBenchRow row = MakeRow(name, m.pages, m.payload, moved, ms, memcpy_ms);
      row.memset_ms = memset_ms;
      if (name.rfind("scatter_dense", 0) == 0) {
        // Copy the owned share at memcpy speed, zero the rest at memset speed.
        const double owned = static_cast<double>(moved - m.payload) / m.payload;
        row.alt_ceiling_ms = owned * memcpy_ms + (1 - owned) * memset_ms;
        row.alt_fraction = row.alt_ceiling_ms / ms;
      }
      const bool by_bulk = IsCopyKernelRow(name) && row_tuning.bulk.enabled && bulk.empty();
      if (IsCopyKernelRow(name)) row.copy = by_bulk ? "bulk" : "warps";
      rep->kernels.push_back(row);
      const std::string base = BaseRow(name);
      if (tune_size && !by_bulk && (base == "pack" || base == "unpack" || name == "scatter_dense"))
        TuneCopyKernel(name, m, timed, rep);
      if (tune_size && by_bulk && base == "pack") TuneBulkCopy(name, m, timed, rep);
      const bool variant_row =
          name.rfind("scatter_dense[", 0) == 0 && name.find("(0% owned)") == std::string::npos;
      if (tune_size && variant_row) TuneTileVariant(name, m, timed, rep);
    }
  }
}

// ----- Tier copies ----------------------------------------------------------------------------

// `runs` distinct run-aligned runs of `run` adjacent slots of `slots`, at random.
std::vector<int32_t> RunSlots(int64_t runs, int64_t run, int64_t slots, std::mt19937_64& rng) {
  const std::vector<int32_t> starts = DistinctRandom(runs, slots / run, rng);
  std::vector<int32_t> out;
  for (int64_t r = 0; r < runs; ++r) {
    for (int64_t j = 0; j < run; ++j) out.push_back(static_cast<int32_t>(starts[r] * run + j));
  }
  return out;
}

// --tune for the tier-copy kernel: every launch shape of the grid.
void TuneTierKernel(const KernelBenchOptions& o, cudaStream_t s, const TierCopyArgs& dev_args,
                    const std::string& what, int64_t payload, KernelBenchReport* rep) {
  for (int unroll : {4, 8}) {
    for (int threads : {128, 256, 512}) {
      for (int ctas : {1, 2, 4, 8}) {
        const LaunchTuning t{.threads_per_block = threads,
                             .piece_bytes = 8192,
                             .ctas_per_sm = ctas,
                             .unroll = unroll};
        const double tms = MedianMs(s, o.warmup, o.tier_repeats, [&](int) {
          Check(TierCopyKernel(dev_args, s, t), "TierCopyKernel");
        });
        rep->tune.push_back({.what = what,
                             .threads_per_block = threads,
                             .piece_bytes = 8192,
                             .ctas_per_sm = ctas,
                             .unroll = unroll,
                             .ms = tms,
                             .gbps = Gbps(payload, tms)});
      }
    }
  }
}

void BenchTiers(const KernelBenchOptions& o, cudaStream_t s, KernelBenchReport* rep) {
  std::mt19937_64 rng(o.seed + 7);
  std::fprintf(stderr, "bench: tier copies, pinning %lld B of host memory\n",
               static_cast<long long>(o.host_pool_bytes));
  PinnedBuffer host(o.host_pool_bytes);
  FillRandomHost(host.get(), o.host_pool_bytes, 77, s);
  const int64_t dev_bytes = 2 * o.tier_bytes;
  DeviceBuffer dev(dev_bytes);
  FillRandom(dev.get(), dev_bytes, 78, s);
  Check(cudaStreamSynchronize(s), "tier set-up");

  for (const auto& [elem, page_tokens] : o.tier_shapes) {
    const PoolGeometry shape{
        .num_layers = o.num_layers, .num_slots = 0, .page_tokens = page_tokens, .elem_bytes = elem};
    const int64_t page_bytes = o.num_layers * shape.chunk_bytes();
    const int64_t run = std::max<int64_t>(1, o.tier_run_pages);
    const int64_t runs = std::max<int64_t>(1, o.tier_bytes / (page_bytes * run));
    const int64_t pages = runs * run;
    const int64_t dev_slots = dev_bytes / page_bytes;
    const int64_t host_slots = o.host_pool_bytes / page_bytes;
    if (pages > dev_slots || pages > host_slots) {
      throw CudaFailure("tier shape " + std::to_string(elem) + "x" + std::to_string(page_tokens) +
                        ": pools too small for the page list");
    }
    const int64_t payload = pages * page_bytes;
    // Runs of `run` adjacent pages at random run-aligned places in both pools.
    std::vector<int32_t> dslots = RunSlots(runs, run, dev_slots, rng);
    std::vector<int32_t> hslots = RunSlots(runs, run, host_slots, rng);
    Buffers idx;
    ToDevice(dslots, &idx, s);
    ToDevice(hslots, &idx, s);
    std::fprintf(stderr, "bench: tier %lldx%lld (chunk %lld B), %lld pages\n",
                 static_cast<long long>(elem), static_cast<long long>(page_tokens),
                 static_cast<long long>(shape.chunk_bytes()), static_cast<long long>(pages));

    for (TierDirection dir : {TierDirection::kHostToDevice, TierDirection::kDeviceToHost}) {
      const bool to_host = dir == TierDirection::kDeviceToHost;
      const double contiguous_ms = MedianMs(s, o.warmup, o.tier_repeats, [&](int) {
        Check(cudaMemcpyAsync(to_host ? host.get() : dev.get(), to_host ? dev.get() : host.get(),
                              static_cast<size_t>(payload),
                              to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice, s),
              "contiguous pinned copy");
      });
      const double contiguous_gbps = Gbps(payload, contiguous_ms);
      for (HostLayout layout :
           {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect}) {
        PoolGeometry g = shape;
        g.num_slots = dev_slots;
        const TierPoolPair pair{
            .device = {.data = dev.get(), .geo = g},
            .host = {.data = host.get(), .num_slots = host_slots, .layout = layout}};
        TierCopyArgs dev_args{.pools = {&pair, 1},
                              .layers = {0, o.num_layers},
                              .device_slots = DevPtr(idx, 0),
                              .host_slots = DevPtr(idx, 1),
                              .num_pages = pages,
                              .direction = dir};
        TierCopyArgs host_args = dev_args;
        host_args.device_slots = dslots.data();
        host_args.host_slots = hslots.data();
        auto add_row = [&](const std::string& variant, int64_t copies, double ms) {
          TierBenchRow row;
          row.layout = std::string(HostLayoutName(layout));
          row.direction = std::string(TierDirectionName(dir));
          row.variant = variant;
          row.elem_bytes = elem;
          row.page_tokens = page_tokens;
          row.chunk_bytes = shape.chunk_bytes();
          row.pages = pages;
          row.payload_bytes = payload;
          row.copies = copies;
          row.ms = ms;
          row.gbps = Gbps(payload, ms);
          row.contiguous_gbps = contiguous_gbps;
          row.fraction = contiguous_gbps > 0 ? row.gbps / contiguous_gbps : 0;
          rep->tiers.push_back(row);
        };
        add_row("kernel", 1, MedianMs(s, o.warmup, o.tier_repeats, [&](int) {
                  Check(TierCopyKernel(dev_args, s), "TierCopyKernel");
                }));
        for (MemcpyShape ms_shape : {MemcpyShape::k2D, MemcpyShape::k1D}) {
          // page_first in 1D is one copy per token-layer element: minutes per pass, skipped.
          if (ms_shape == MemcpyShape::k1D && layout == HostLayout::kPageFirst) continue;
          const int64_t copies = static_cast<int64_t>(PlanTierMemcpys(host_args, ms_shape).size());
          add_row(ms_shape == MemcpyShape::k2D ? "memcpy2d" : "memcpy1d", copies,
                  MedianMs(s, 1, o.tier_repeats, [&](int) {
                    Check(TierCopyMemcpy(host_args, s, ms_shape), "TierCopyMemcpy");
                  }));
        }
        if (o.tune && layout != HostLayout::kPageFirstDirect && page_tokens == 64) {
          const std::string what = "tier kernel " + std::string(HostLayoutName(layout)) + " " +
                                   std::string(TierDirectionName(dir)) + " " +
                                   std::to_string(elem) + "x" + std::to_string(page_tokens);
          TuneTierKernel(o, s, dev_args, what, payload, rep);
        }
      }
    }
  }
}

void FindCrossovers(KernelBenchReport* rep) {
  for (const std::string layout : {"layer_first", "page_first", "page_first_direct"}) {
    for (const std::string dir : {"h2d", "d2h"}) {
      for (const std::string variant : {"memcpy2d", "memcpy1d"}) {
        std::vector<std::pair<int64_t, bool>> wins;  // chunk bytes, memcpy >= kernel
        for (const TierBenchRow& m : rep->tiers) {
          if (m.layout != layout || m.direction != dir || m.variant != variant) continue;
          for (const TierBenchRow& k : rep->tiers) {
            if (k.layout == layout && k.direction == dir && k.variant == "kernel" &&
                k.elem_bytes == m.elem_bytes && k.page_tokens == m.page_tokens) {
              wins.push_back({m.chunk_bytes, m.gbps >= k.gbps});
            }
          }
        }
        if (wins.empty()) continue;
        std::sort(wins.begin(), wins.end());
        TierCrossover c{.layout = layout,
                        .direction = dir,
                        .memcpy_variant = variant,
                        .first_chunk_bytes_memcpy_wins = -1,
                        .note = ""};
        for (const auto& [chunk, memcpy_wins] : wins) {
          if (memcpy_wins) {
            c.first_chunk_bytes_memcpy_wins = chunk;
            break;
          }
        }
        c.note = c.first_chunk_bytes_memcpy_wins < 0
                     ? "kernel faster at every measured chunk size (" +
                           std::to_string(wins.front().first) + ".." +
                           std::to_string(wins.back().first) + " B)"
                     : "memcpy first as fast at " +
                           std::to_string(c.first_chunk_bytes_memcpy_wins) + " B chunks";
        rep->crossovers.push_back(c);
      }
    }
  }
}

}  // namespace

std::string RunKernelBenchmarks(const KernelBenchOptions& o, KernelBenchReport* rep) {
  rep->options = o;
  if (o.repeats < 1 || o.tier_repeats < 1 || o.warmup < 0 || o.num_layers < 1 ||
      o.page_tokens < 1 || o.num_ranks < 1 || o.pool_elem_bytes.empty() ||
      o.pool_elem_bytes.size() > static_cast<size_t>(kMaxPools) || o.tier_bytes < 1 ||
      o.host_pool_bytes < o.tier_bytes) {
    return "bad options: need repeats >= 1, layers, page tokens and ranks >= 1, 1.." +
           std::to_string(kMaxPools) + " pools, and host pool bytes >= tier bytes";
  }
  cudaStream_t s = nullptr;
  try {
    Check(cudaSetDevice(o.device), "cudaSetDevice(" + std::to_string(o.device) + ")");
    rep->context = ReadContext(o.device);
    Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (o.run_materialize) BenchMaterialize(o, s, rep);
    if (o.run_tier) BenchTiers(o, s, rep);
    FindCrossovers(rep);
    Check(cudaStreamSynchronize(s), "end of benchmark");
    cudaStreamDestroy(s);
  } catch (const CudaFailure& e) {
    if (s != nullptr) cudaStreamDestroy(s);
    return e.what();
  }
  return "";
}

}  // namespace kvlanes::kernels

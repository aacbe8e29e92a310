#include "exec/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>

#include "exec/exec_error.h"
#include "exec/exec_kernels_cuda.h"
#include "exec/forward_model_cuda.h"
#include "kernels/materialize_cuda.h"
#include "kernels/tier_copy_cuda.h"
#include "methods/gather_method.h"

namespace kvlanes::exec {
namespace {

using Clock = std::chrono::steady_clock;

std::string GiB(double bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return b;
}

// What each rank tells the others before any communicator exists.
struct DeviceId {
  char host[128];
  char uuid[16];
  int device;
  int pid;
  cudaIpcMemHandle_t pools;
  int has_pools;
};

// Memory handed out in chunks until the next Reset (after a Sync). Two kinds:
//  kPinned  pinned, device-mapped host memory: index arrays staged for upload and the ones the
//           kernels read once, and verification results;
//  kDevice  device memory for index arrays the kernels read many times (gather indices, the
//           forward pass's page list), filled by an async copy from the pinned arena on the stream
//           that uses them. Kernels reading a mapped host array instead would send every index
//           read over PCIe, where it queues behind the tier copies' traffic.
class ChunkArena {
 public:
  enum class Kind { kPinned, kDevice };
  explicit ChunkArena(Kind kind) : kind_(kind) {}
  ChunkArena(const ChunkArena&) = delete;
  ChunkArena& operator=(const ChunkArena&) = delete;
  ~ChunkArena() {
    for (auto& c : chunks_) kind_ == Kind::kPinned ? cudaFreeHost(c.data) : cudaFree(c.data);
  }
  // Pinned only: a copy of `bytes` of `src`.
  void* Put(const void* src, size_t bytes) {
    void* p = Take(bytes);
    if (bytes) std::memcpy(p, src, bytes);
    return p;
  }
  void* Take(size_t bytes) {
    const size_t align = kind_ == Kind::kPinned ? 16 : 256;
    bytes = (bytes + align - 1) / align * align;
    while (cur_ < chunks_.size() && chunks_[cur_].used + bytes > chunks_[cur_].size) ++cur_;
    if (cur_ == chunks_.size()) {
      Chunk c;
      c.size = std::max<size_t>(bytes, kind_ == Kind::kPinned ? 8u << 20 : 16u << 20);
      const cudaError_t e =
          kind_ == Kind::kPinned
              ? cudaHostAlloc(&c.data, c.size, cudaHostAllocMapped | cudaHostAllocPortable)
              : cudaMalloc(&c.data, c.size);
      if (e != cudaSuccess)
        throw ExecError("cannot allocate " + GiB(static_cast<double>(c.size)) + " of " +
                        (kind_ == Kind::kPinned ? "pinned host" : "device") +
                        " memory for index arrays: " + cudaGetErrorString(e));
      chunks_.push_back(c);
    }
    Chunk& c = chunks_[cur_];
    void* p = static_cast<char*>(c.data) + c.used;
    c.used += bytes;
    return p;
  }
  void Reset() {
    for (auto& c : chunks_) c.used = 0;
    cur_ = 0;
  }

 private:
  struct Chunk {
    void* data = nullptr;
    size_t size = 0, used = 0;
  };
  Kind kind_;
  std::vector<Chunk> chunks_;
  size_t cur_ = 0;
};

// The CUDA backend, in four layers, each a class over the one below: CudaRank (the device, its
// memory, streams and communicator, made and freed; the request gate and the abort, which
// construction and destruction use), CudaClock (marks, the gate, tier copies: StreamClock and
// TierMemory), CudaExchange (GatherKernels, PeerAccess, Collectives) and CudaBackend (the
// context, ForwardPass, ModelForward and Verification).
class CudaRank : public RankBackend {
 public:
  CudaRank(const ExecGeometry& geo, int rank, int local_rank, Rendezvous& rv,
           const CudaBackendOptions& o)
      : geo_(geo), rank_(rank), rv_(rv), o_(o) {
    // Before CUDA starts in this process: more hardware work queues than the default 8, so our
    // four streams and NCCL's need not share one. On the H200 run of 2026-11-29 (kvtester
    // 0073+0169, cp 1) it made no measurable difference (gather 3.06 s with 32, 3.02 s with 8);
    // it is kept as a precaution for more streams. A value set by the user is kept.
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
      throw ExecError("rank " + std::to_string(rank_) + ": no CUDA device (" +
                      cudaGetErrorString(e) + ")");
    device_ = o.device >= 0 ? o.device : (local_rank >= 0 ? local_rank : rank) % count;
    if (device_ >= count)
      throw ExecError("rank " + std::to_string(rank_) + ": GPU " + std::to_string(device_) +
                      " requested, " + std::to_string(count) + " visible");
    Check(cudaSetDevice(device_), "cudaSetDevice");
    Check(cudaGetDeviceProperties(&prop_, device_), "cudaGetDeviceProperties");
    kernels::BulkCopiesUnavailable();  // the launchers' device facts, cached before any timing

    // Who runs where: refuse two ranks on one GPU when NCCL is needed, before any allocation.
    DeviceId me{};
    gethostname(me.host, sizeof(me.host) - 1);
    std::memcpy(me.uuid, prop_.uuid.bytes, 16);
    me.device = device_;
    me.pid = static_cast<int>(getpid());
    const std::vector<DeviceId> ids = Exchange(me);
    nccl_ = o.needs_nccl;
    for (int a = 0; a < geo_.ranks; ++a)
      for (int b = a + 1; b < geo_.ranks; ++b)
        if (std::strcmp(ids[a].host, ids[b].host) == 0 &&
            std::memcmp(ids[a].uuid, ids[b].uuid, 16) == 0) {
          if (o.needs_nccl)
            throw ExecError(
                "ranks " + std::to_string(a) + " and " + std::to_string(b) + " both use GPU " +
                std::to_string(ids[a].device) + " on " + ids[a].host +
                ": NCCL needs one GPU per rank and this plan gathers with NCCL (dense, packed or "
                "zigzag); give each rank its own GPU (--devices) or use a p2p-only plan");
          nccl_ = false;  // p2p only: IPC between processes on one GPU works without NCCL
        }

    Allocate();
    if (o.forward) {
      // The merge's exchange between GPUs (queries, partials) is not built: one rank only.
      if (geo_.interleave_tokens > 0 && geo_.ranks > 1)
        throw ExecError(
            "--forward model with partial_merge (KV interleaved by token) runs at cp_size 1 on "
            "the CUDA backend; this plan has cp_size " +
            std::to_string(geo_.ranks) +
            " (run it with --forward synthetic, where the merge is checked on the host)");
      forward_ = std::make_unique<ForwardModelCuda>(
          o.forward->shape, geo_.layers, o.forward->kv_row_bytes, o.forward->max_tokens,
          o.forward->max_keys, 1, kScoreChunkElems, o.forward->chunk_tokens);
      if (geo_.interleave_tokens > 0) forward_->ReservePartialMerge();
    }
    for (int s = 0; s < kNumStreams; ++s)
      Check(cudaStreamCreateWithFlags(&streams_[s], cudaStreamNonBlocking), "cudaStreamCreate");
    Check(cudaEventCreate(&epoch_), "cudaEventCreate");
    Check(cudaMalloc(&barrier_buf_, 64), "cudaMalloc (barrier word)");
    Check(
        cudaHostAlloc(reinterpret_cast<void**>(&gate_), 2 * sizeof(uint32_t), cudaHostAllocMapped),
        "cudaHostAlloc (gate words)");
    gate_[0] = gate_[1] = 0;
    Check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&gate_dev_), gate_, 0),
          "cudaHostGetDevicePointer (gate words)");
    // Per request: one check per gathered layer and one per pool of this lane's load-back.
    verify_capacity_ = static_cast<size_t>(geo_.layers + 16 * geo_.num_pools() + 8);
    Check(cudaMalloc(&verify_dev_, verify_capacity_ * sizeof(VerifyOut)),
          "cudaMalloc (verify counters)");
    if (nccl_) InitNccl();
    if (o.needs_p2p) OpenPeers();
    Check(cudaEventRecord(epoch_, streams_[0]), "cudaEventRecord");
  }

  ~CudaRank() override {
    cudaSetDevice(device_);
    for (size_t r = 0; r < peer_base_.size(); ++r)
      if (peer_base_[r] && static_cast<int>(r) != rank_) cudaIpcCloseMemHandle(peer_base_[r]);
    if (comm_) {
      if (aborted_) {
      } else {
        ncclCommFinalize(comm_);
        WaitNccl("ncclCommFinalize", false);
        ncclCommDestroy(comm_);
      }
    }
    for (cudaEvent_t ev : events_) cudaEventDestroy(ev);
    cudaEventDestroy(epoch_);
    for (auto s : streams_)
      if (s) cudaStreamDestroy(s);
    for (void* p :
         {static_cast<void*>(pools_), static_cast<void*>(dense_), static_cast<void*>(send_),
          static_cast<void*>(recv_), barrier_buf_, static_cast<void*>(verify_dev_), evict_buf_})
      if (p) cudaFree(p);
    if (host_) cudaFreeHost(host_);
    if (gate_) {
      OpenGate();  // a failure while held: the gate kernel ends before its words are freed
      cudaFreeHost(gate_);
    }
  }

  std::string_view Name() const override { return "cuda"; }

  int rank() const override { return rank_; }

  int ranks() const override { return geo_.ranks; }

  const ExecGeometry& geometry() const override { return geo_; }

  void OpenGate() override {
    if (!gate_held_) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // everything enqueued before the release
    *static_cast<volatile uint32_t*>(gate_) = gate_ticket_;
    gate_held_ = false;
  }

  void Abort(const std::string&) noexcept override {
    OpenGate();
    if (comm_ && !aborted_) {
      aborted_ = true;
      ncclCommAbort(comm_);
    }
  }

 protected:
  static std::string VersionString(int v) {
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
  }

  static std::string NcclVersionString(int v) {
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
           std::to_string(v % 100);
  }

  cudaStream_t S(Stream s) const { return streams_[static_cast<int>(s)]; }

  [[noreturn]] void Fail(const std::string& what) {
    Abort(what);
    throw ExecError("rank " + std::to_string(rank_) + " (GPU " + std::to_string(device_) +
                    "): " + what);
  }

  void Check(cudaError_t e, const char* what) {
    if (e != cudaSuccess)
      Fail(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }

  void CheckNcclAsync() {
    if (!comm_ || aborted_) return;
    ncclResult_t r = ncclSuccess;
    ncclCommGetAsyncError(comm_, &r);
    if (r != ncclSuccess && r != ncclInProgress)
      Fail(std::string("NCCL: ") + ncclGetErrorString(r) + " (" + ncclGetLastError(comm_) + ")");
  }

  // Non-blocking communicator: a call may answer ncclInProgress; wait (bounded) until it is done.
  // The first milliseconds are a busy poll: a collective is usually enqueued within microseconds,
  // and a sleep here would leave the GPU idle between the gather's kernels (on two H200s a 50 us
  // sleep per call cost ~150 us per gather layer, docs/multi_gpu.md). Then 50 us sleeps.
  void WaitNccl(const char* what, bool throw_on_error = true) {
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration<double>(o_.timeout_s);
    const auto spin_until = start + std::chrono::milliseconds(5);
    while (true) {
      ncclResult_t r = ncclSuccess;
      ncclCommGetAsyncError(comm_, &r);
      if (r == ncclSuccess) return;
      if (r != ncclInProgress) {
        if (!throw_on_error) return;
        Fail(std::string(what) + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(comm_) +
             ")");
      }
      if (Clock::now() > deadline) {
        if (!throw_on_error) return;
        Fail(std::string(what) + ": timed out after " + std::to_string(o_.timeout_s) +
             " s (a peer rank hung or died?)");
      }
      if (Clock::now() < spin_until) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  void Nccl(ncclResult_t r, const char* what) {
    if (r == ncclInProgress) {
      WaitNccl(what);
      return;
    }
    if (r != ncclSuccess)
      Fail(std::string(what) + ": " + ncclGetErrorString(r) + " (" + ncclGetLastError(comm_) + ")");
  }

  // `bytes` of `src` in device memory, copied on `stream` (through the pinned arena, which keeps
  // the source alive until the next ReleaseMarks, after a Sync).
  void* ToDevice(const void* src, size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return nullptr;
    const void* host = arena_.Put(src, bytes);
    void* dev = dev_arena_.Take(bytes);
    Check(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync (index upload)");
    return dev;
  }

  std::vector<DeviceId> Exchange(const DeviceId& mine) {
    const std::vector<std::string> all =
        rv_.AllGather(std::string(reinterpret_cast<const char*>(&mine), sizeof(mine)));
    std::vector<DeviceId> ids(all.size());
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].size() != sizeof(DeviceId))
        throw ExecError("rendezvous: rank " + std::to_string(r) +
                        " sent a malformed device record");
      std::memcpy(&ids[r], all[r].data(), sizeof(DeviceId));
    }
    return ids;
  }

  void Allocate() {
    const double pools = static_cast<double>(geo_.device_pool_bytes());
    const double dense = static_cast<double>(geo_.dense_bytes()),
                 send = static_cast<double>(geo_.send_bytes()),
                 recv = static_cast<double>(geo_.recv_bytes());
    size_t free_b = 0, total_b = 0;
    Check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    const double need = pools + dense + send + recv;
    const std::string sizes =
        "device pools " + GiB(pools) + " (" + std::to_string(geo_.device_slots) + " slots x " +
        std::to_string(geo_.layers) + " layers x " + std::to_string(geo_.page_layer_bytes()) +
        " B per page-layer, all pools), dense buffer " + GiB(dense) + " (" +
        std::to_string(geo_.max_prefix_pages) + " prefix pages, " +
        std::to_string(geo_.dense_layers) + " layer(s)), all-gather send " + GiB(send) +
        " and receive " + GiB(recv);
    if (need > static_cast<double>(free_b))
      Fail("out of device memory: the plan needs " + GiB(need) + " = " + sizes + "; GPU " +
           std::to_string(device_) + " (" + prop_.name + ") has " +
           GiB(static_cast<double>(free_b)) + " free of " + GiB(static_cast<double>(total_b)));
    auto dev_alloc = [&](char** p, double bytes, const char* what) {
      if (bytes <= 0) return;
      const cudaError_t e = cudaMalloc(p, static_cast<size_t>(bytes));
      if (e != cudaSuccess)
        Fail(std::string("out of device memory allocating the ") + what + " (" + GiB(bytes) +
             "); the plan needs " + GiB(need) + " = " + sizes);
    };
    dev_alloc(&pools_, pools, "device pools");
    dev_alloc(&dense_, dense, "dense buffer");
    dev_alloc(&send_, send, "all-gather send buffer");
    dev_alloc(&recv_, recv, "all-gather receive buffer");
    const double host = static_cast<double>(geo_.host_pool_bytes());
    if (host > 0) {
      const cudaError_t e = cudaHostAlloc(&host_, static_cast<size_t>(host),
                                          cudaHostAllocMapped | cudaHostAllocPortable);
      if (e != cudaSuccess)
        Fail("cannot allocate the pinned host pool: " + GiB(host) + " (" +
             std::to_string(geo_.host_slots) + " slots x " + std::to_string(geo_.layers) +
             " layers x " + std::to_string(geo_.page_layer_bytes()) + " B, layout " +
             std::string(kernels::HostLayoutName(geo_.host_layout)) +
             "): " + cudaGetErrorString(e));
    }
  }

  void InitNccl() {
    ncclUniqueId id{};
    if (rank_ == 0 && ncclGetUniqueId(&id) != ncclSuccess) Fail("ncclGetUniqueId failed");
    const std::vector<std::string> all = rv_.AllGather(
        rank_ == 0 ? std::string(reinterpret_cast<const char*>(&id), sizeof(id)) : "");
    if (all[0].size() != sizeof(id)) throw ExecError("rendezvous: rank 0 sent no NCCL unique id");
    std::memcpy(&id, all[0].data(), sizeof(id));
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;  // every wait is ours, bounded by the timeout; a hang aborts the communicator
    const ncclResult_t r = ncclCommInitRankConfig(&comm_, geo_.ranks, id, rank_, &cfg);
    if (r != ncclSuccess && r != ncclInProgress)
      Fail(std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r));
    WaitNccl("ncclCommInitRankConfig");
  }

  void OpenPeers() {
    DeviceId me{};
    gethostname(me.host, sizeof(me.host) - 1);
    me.device = device_;
    me.has_pools = pools_ != nullptr;
    if (pools_) Check(cudaIpcGetMemHandle(&me.pools, pools_), "cudaIpcGetMemHandle");
    const std::vector<DeviceId> ids = Exchange(me);
    peer_base_.assign(static_cast<size_t>(geo_.ranks), nullptr);
    for (int r = 0; r < geo_.ranks; ++r) {
      if (r == rank_) {
        peer_base_[static_cast<size_t>(r)] = pools_;
        continue;
      }
      if (std::strcmp(ids[static_cast<size_t>(r)].host, me.host) != 0 ||
          !ids[static_cast<size_t>(r)].has_pools)
        continue;
      void* p = nullptr;
      const cudaError_t e = cudaIpcOpenMemHandle(&p, ids[static_cast<size_t>(r)].pools,
                                                 cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess)
        Fail("cudaIpcOpenMemHandle of rank " + std::to_string(r) + "'s pools (GPU " +
             std::to_string(ids[static_cast<size_t>(r)].device) + "): " + cudaGetErrorString(e));
      peer_base_[static_cast<size_t>(r)] = p;
    }
  }

  // The current gather's dense regions of `layer`, one per pool, and where its records are.
  std::vector<kernels::DenseRef> DenseRefs(int64_t layer) const {
    return geo_.dense_refs(dense_, layer, gi_->prefix_pages);
  }

  const char* Records(RecordBuffer from) const {
    return from == RecordBuffer::kRecv ? recv_ : send_;
  }

  std::vector<kernels::PoolRef> Pools() const {
    std::vector<kernels::PoolRef> pools;
    for (int k = 0; k < geo_.num_pools(); ++k) pools.push_back(Pool(k));
    return pools;
  }

  kernels::PoolRef Pool(int k) const { return PoolAt(pools_, k); }

  kernels::PoolRef PoolAt(void* base, int k) const {
    int64_t off = 0;
    for (int j = 0; j < k; ++j) off += geo_.pool_geometry(j).total_bytes();
    return kernels::PoolRef{static_cast<char*>(base) + off, geo_.pool_geometry(k)};
  }

  kernels::HostPoolRef HostPool(int k) const {
    int64_t off = 0;
    for (int j = 0; j < k; ++j)
      off += kernels::HostPoolBytes(geo_.pool_geometry(j), geo_.host_slots);
    return kernels::HostPoolRef{static_cast<char*>(host_) + off, geo_.host_slots, geo_.host_layout};
  }

  ChunkSet PoolChunks() const {
    ChunkSet set;
    for (int k = 0; k < geo_.num_pools(); ++k) {
      const kernels::PoolRef p = Pool(k);
      set.seg[k] = ChunkSegment{static_cast<char*>(p.data), p.geo.layer_stride_bytes(),
                                p.geo.chunk_bytes(), k};
    }
    set.num_segments = geo_.num_pools();
    return set;
  }

  ExecGeometry geo_;
  int rank_;
  Rendezvous& rv_;
  CudaBackendOptions o_;
  int device_ = 0;
  cudaDeviceProp prop_{};
  bool nccl_ = true;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  // The request gate (HoldStreams): mapped pinned words {ticket the host opened, expiries}.
  uint32_t* gate_ = nullptr;
  uint32_t* gate_dev_ = nullptr;
  uint32_t gate_ticket_ = 0;
  bool gate_held_ = false;
  int64_t gates_opened_early_ = 0;
  // ModelForwardLayer opens a held gate before a layer of more query chunks than this (each chunk
  // launches two GEMMs and a softmax). On one H200 a request's first layer of about 60 chunks
  // left the host 0.05 s of enqueue, one of about 160 chunks blocked it for 0.5 s (a request
  // gate of 1 s).
  static constexpr int64_t kGateMaxAttentionChunks = 64;
  cudaStream_t streams_[kNumStreams] = {};
  cudaEvent_t epoch_ = nullptr;
  std::vector<cudaEvent_t> events_;
  size_t next_event_ = 0;
  char* pools_ = nullptr;
  char* dense_ = nullptr;
  char* send_ = nullptr;
  char* recv_ = nullptr;
  void* host_ = nullptr;
  void* barrier_buf_ = nullptr;
  void* evict_buf_ = nullptr;  // EvictCaches: twice the L2, allocated on first use
  size_t evict_bytes_ = 0;
  unsigned evict_count_ = 0;
  VerifyOut* verify_dev_ = nullptr;
  size_t verify_capacity_ = 0;
  std::vector<void*> peer_base_;
  ChunkArena arena_{ChunkArena::Kind::kPinned};
  std::vector<std::pair<VerifyOut*, int64_t>> results_;
  std::vector<const int64_t*> reduced_;  // AllReduceMin results (pinned), until ReleaseMarks
  const GatherIndex* gi_ = nullptr;
  const int32_t *d_owner_slot_ = nullptr, *d_pack_slots_ = nullptr, *d_unpack_ = nullptr,
                *d_page_records_ = nullptr, *d_src_rank_ = nullptr, *d_src_slot_ = nullptr,
                *d_owned_pages_ = nullptr, *d_owned_slots_ = nullptr;
  std::vector<int32_t> owned_pages_, owned_slots_;  // dense gathers: this rank's pages and slots
  int64_t num_owned_ = 0;
  const PageTag* d_tags_ = nullptr;
  ChunkArena dev_arena_{ChunkArena::Kind::kDevice};
  std::pair<const void*, size_t> forward_key_{nullptr, 0};
  const PageTag* forward_tags_ = nullptr;
  const int32_t* forward_slots_ = nullptr;
  std::unique_ptr<ForwardModelCuda> forward_;
  const ForwardWork* forward_work_ = nullptr;
  const int32_t* forward_shard_slots_ = nullptr;  // device copy of forward_work_->shard_slots
};

class CudaClock : public CudaRank {
 public:
  using CudaRank::CudaRank;

  int Mark(Stream s) override {
    if (next_event_ == events_.size()) {
      cudaEvent_t ev;
      Check(cudaEventCreate(&ev), "cudaEventCreate");
      events_.push_back(ev);
    }
    Check(cudaEventRecord(events_[next_event_], S(s)), "cudaEventRecord");
    return static_cast<int>(next_event_++);
  }

  void Wait(Stream waiter, int mark) override {
    Check(cudaStreamWaitEvent(S(waiter), events_[static_cast<size_t>(mark)], 0),
          "cudaStreamWaitEvent");
  }

  void Sync() override {
    OpenGate();
    const auto deadline = Clock::now() + std::chrono::duration<double>(o_.timeout_s);
    for (int s = 0; s < kNumStreams; ++s) {
      while (true) {
        const cudaError_t e = cudaStreamQuery(streams_[s]);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady)
          Fail(std::string("stream error: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
        CheckNcclAsync();
        if (Clock::now() > deadline)
          Fail("timed out after " + std::to_string(o_.timeout_s) +
               " s waiting for the GPU (a peer rank hung or died?)");
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }
  }

  int HoldStreams(double timeout_s) override {
    OpenGate();
    const uint64_t ns = static_cast<uint64_t>(std::max(0.0, timeout_s) * 1e9);
    Check(GateStream(gate_dev_, ++gate_ticket_, ns, gate_dev_ + 1, S(Stream::kCompute)),
          "gate kernel");
    const int open = Mark(Stream::kCompute);
    for (Stream s : {Stream::kComm, Stream::kH2D, Stream::kD2H}) Wait(s, open);
    gate_held_ = true;
    return open;
  }

  int64_t GatesExpired() override { return *static_cast<volatile uint32_t*>(gate_ + 1); }

  int64_t GatesOpenedEarly() override { return gates_opened_early_; }

  void StartEpoch() override {
    Check(cudaEventRecord(epoch_, streams_[0]), "cudaEventRecord");
    Sync();
  }

  double MarkSeconds(int mark) const override {
    return ElapsedSeconds(epoch_, events_[static_cast<size_t>(mark)]);
  }

  // Directly between the two events: cudaEventElapsedTime's float milliseconds keep about 0.5 us
  // for a pair microseconds apart, but only 1.95 us steps for each of two marks 20 s from the
  // epoch.
  double MarkInterval(int from, int to) const override {
    return ElapsedSeconds(events_[static_cast<size_t>(from)], events_[static_cast<size_t>(to)]);
  }

  void ReleaseMarks() override {
    next_event_ = 0;
    arena_.Reset();
    dev_arena_.Reset();
    forward_key_ = {nullptr, 0};
    results_.clear();
    reduced_.clear();
  }

  void EvictCaches(Stream s) override {
    if (!evict_buf_) {
      evict_bytes_ = 2 * static_cast<size_t>(std::max(prop_.l2CacheSize, 1 << 20));
      Check(cudaMalloc(&evict_buf_, evict_bytes_), "cudaMalloc (cache eviction buffer)");
    }
    // A new value each time, so no write is a no-op a cache could skip.
    Check(cudaMemsetAsync(evict_buf_, static_cast<int>(++evict_count_ & 0xff), evict_bytes_, S(s)),
          "cudaMemsetAsync (cache eviction)");
  }

  void TierCopy(Stream s, int pool, kernels::TierDirection dir, std::span<const int32_t> dev,
                std::span<const int32_t> host, kernels::LayerRange layers) override {
    if (dev.empty()) return;
    const kernels::TierPoolPair pair{Pool(pool), HostPool(pool)};
    kernels::TierCopyArgs a;
    a.pools = std::span<const kernels::TierPoolPair>(&pair, 1);
    a.layers = layers;
    a.num_pages = static_cast<int64_t>(dev.size());
    a.direction = dir;
    if (o_.tier_copy == "kernel") {
      a.device_slots = static_cast<const int32_t*>(arena_.Put(dev.data(), dev.size_bytes()));
      a.host_slots = static_cast<const int32_t*>(arena_.Put(host.data(), host.size_bytes()));
      kernels::LaunchTuning t = kernels::DefaultTierTuning(dir);
      if (o_.tier_max_ctas >= 0) t.max_ctas = o_.tier_max_ctas;
      Check(kernels::TierCopyKernel(a, S(s), t), "TierCopyKernel");
    } else {
      a.device_slots = dev.data();
      a.host_slots = host.data();
      if (o_.tier_copy == "batch") {
        Check(kernels::TierCopyBatch(a, S(s)), "TierCopyBatch (cudaMemcpyBatchAsync)");
      } else {
        Check(kernels::TierCopyMemcpy(a, S(s)), "TierCopyMemcpy");
      }
    }
  }

  void CorruptDevicePage(int pool, int32_t slot, int64_t layer) override {
    OpenGate();  // a synchronous copy next (test hook)
    const kernels::PoolRef p = Pool(pool);
    char* at = static_cast<char*>(p.data) + (layer * p.geo.num_slots + slot) * p.geo.chunk_bytes();
    unsigned char v = 0;
    Check(cudaMemcpy(&v, at, 1, cudaMemcpyDeviceToHost), "cudaMemcpy");
    v ^= 0x5a;
    Check(cudaMemcpy(at, &v, 1, cudaMemcpyHostToDevice), "cudaMemcpy");
    Check(cudaStreamSynchronize(nullptr),
          "cudaStreamSynchronize");  // landed before later stream work
  }

  void CorruptHostPage(int pool, int32_t slot, int64_t layer) override {
    const kernels::HostPoolRef h = HostPool(pool);
    static_cast<unsigned char*>(h.data)[kernels::HostElementOffset(
        geo_.host_layout, geo_.pool_geometry(pool), geo_.host_slots, slot, layer, 0)] ^= 0x5a;
  }

 protected:
  double ElapsedSeconds(cudaEvent_t a, cudaEvent_t b) const {
    float ms = 0;
    const cudaError_t e = cudaEventElapsedTime(&ms, a, b);
    if (e != cudaSuccess)
      throw ExecError("rank " + std::to_string(rank_) +
                      ": cudaEventElapsedTime: " + cudaGetErrorString(e));
    return static_cast<double>(ms) * 1e-3;
  }
};

class CudaExchange : public CudaClock {
 public:
  using CudaClock::CudaClock;

  void PrepareGather(const GatherIndex& g) override {
    gi_ = &g;
    // The kernels read these every layer: keep them in device memory (uploaded on the comm stream,
    // where every gather layer runs).
    auto put = [&](const std::vector<int32_t>& v) {
      return static_cast<const int32_t*>(
          ToDevice(v.data(), v.size() * sizeof(int32_t), streams_[1]));
    };
    d_owner_slot_ = put(g.owner_slot);
    num_owned_ = 0;
    if (!g.owner_slot.empty()) {  // dense: the owned pages as a list, scatter_dense copies them
      kernels::ListOwnedPages(g.owner_slot, &owned_pages_, &owned_slots_);
      num_owned_ = static_cast<int64_t>(owned_pages_.size());
      d_owned_pages_ = put(owned_pages_);
      d_owned_slots_ = put(owned_slots_);
    }
    d_pack_slots_ = put(g.pack_slots);
    d_unpack_ = put(g.unpack_index);
    d_page_records_ = put(g.page_records);
    d_src_rank_ = put(g.src_rank);
    d_src_slot_ = put(g.src_slot);
    d_tags_ =
        static_cast<const PageTag*>(arena_.Put(g.tags.data(), g.tags.size() * sizeof(PageTag)));
    const GatherMethodImpl& method = GatherMethodOf(g.method);
    if (method.UsesCollectives() && geo_.ranks > 1 && !comm_)
      throw ExecError("rank " + std::to_string(rank_) + ": a " + method.Name() +
                      " gather needs NCCL, which this run has not");
    if (method.ReadsPeers())
      for (int r = 0; r < geo_.ranks; ++r)
        if (!peer_base_.empty() && !peer_base_[static_cast<size_t>(r)])
          throw ExecError("rank " + std::to_string(rank_) + ": p2p gather needs rank " +
                          std::to_string(r) +
                          "'s pools, which are on another node (CUDA IPC works within a node)");
  }

  void ScatterDense(Stream s, int64_t layer) override {
    const std::vector<kernels::PoolRef> pools = Pools();
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    kernels::ScatterDenseArgs a;
    a.pools = pools;
    a.layers = kernels::LayerRange{layer, layer + 1};
    a.owner_slot = d_owner_slot_;
    a.num_dense_pages = gi_->prefix_pages;
    a.dense = dense;
    a.owned_pages = d_owned_pages_;
    a.owned_slots = d_owned_slots_;
    a.num_owned = num_owned_;
    Check(kernels::ScatterDense(a, S(s)), "ScatterDense");
  }

  void PackShard(Stream s, int64_t layer) override {
    const std::vector<kernels::PoolRef> pools = Pools();
    kernels::PackArgs p;
    p.pools = pools;
    p.layers = kernels::LayerRange{layer, layer + 1};
    p.slots = d_pack_slots_;
    p.num_pages = static_cast<int64_t>(gi_->pack_slots.size());
    p.send = send_;
    Check(kernels::PackPages(p, S(s)), "PackPages");
  }

  void Unpack(Stream s, int64_t layer, RecordBuffer from) override {
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    kernels::UnpackArgs u;
    u.dense = dense;
    u.num_layers = 1;
    u.recv = Records(from);
    u.num_records = gi_->shard_pages * geo_.ranks;
    u.recv_index = d_unpack_;
    u.num_dense_pages = gi_->prefix_pages;
    Check(kernels::UnpackPages(u, S(s)), "UnpackPages");
  }

  void ZigzagReorder(Stream s, int64_t layer, RecordBuffer from) override {
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    kernels::ZigzagArgs z;
    z.dense = dense;
    z.num_layers = 1;
    z.recv = Records(from);
    z.run = gi_->zigzag;
    z.shard_pages = gi_->shard_pages;
    Check(kernels::ZigzagReorder(z, S(s)), "ZigzagReorder");
  }

  void PeerGather(Stream s, int64_t layer) override {
    std::vector<kernels::PoolRef> peers;
    for (int k = 0; k < geo_.num_pools(); ++k)
      for (int r = 0; r < geo_.ranks; ++r) peers.push_back(PeerPool(r, k));
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    kernels::PeerGatherArgs a;
    a.peer_pools = peers;
    a.num_ranks = geo_.ranks;
    a.layers = kernels::LayerRange{layer, layer + 1};
    a.src_rank = d_src_rank_;
    a.src_slot = d_src_slot_;
    a.num_dense_pages = gi_->prefix_pages;
    a.dense = dense;
    Check(kernels::PeerGather(a, S(s)), "PeerGather");
  }

  // Several ranks always have a communicator when they gather by a collective (PrepareGather
  // checks); the calibration sweep's bare collectives are checked here.
  void AllGather(Stream s, int64_t bytes) override {
    RequireCollective();
    if (bytes > geo_.send_bytes())
      throw ExecError("all-gather of " + std::to_string(bytes) +
                      " bytes per rank exceeds the send buffer");
    Nccl(ncclAllGather(send_, recv_, static_cast<size_t>(bytes), ncclUint8, comm_, S(s)),
         "ncclAllGather");
  }

  void Broadcast(Stream s, int root, int64_t bytes) override {
    RequireCollective();
    if (bytes > geo_.send_bytes())
      throw ExecError("broadcast of " + std::to_string(bytes) + " bytes exceeds the send buffer");
    Nccl(ncclBroadcast(send_, recv_, static_cast<size_t>(bytes), ncclUint8, root, comm_, S(s)),
         "ncclBroadcast");
  }

  int AllReduceMin(Stream s, int64_t mine) override {
    RequireCollective();
    auto* dev = static_cast<int64_t*>(ToDevice(&mine, sizeof(mine), S(s)));
    Nccl(ncclAllReduce(dev, dev, 1, ncclInt64, ncclMin, comm_, S(s)), "ncclAllReduce (min)");
    auto* host = static_cast<int64_t*>(arena_.Take(sizeof(int64_t)));  // pinned, until ReleaseMarks
    Check(cudaMemcpyAsync(host, dev, sizeof(int64_t), cudaMemcpyDeviceToHost, S(s)),
          "cudaMemcpyAsync (all-reduce result)");
    reduced_.push_back(host);
    return static_cast<int>(reduced_.size()) - 1;
  }

  int64_t AllReduceMinResult(int handle) const override {
    return *reduced_.at(static_cast<size_t>(handle));
  }

  void AllReduce(Stream s, int64_t offset, int64_t bytes) override {
    RequireCollective();
    if (offset < 0 || offset + bytes > geo_.dense_bytes())
      throw ExecError("all-reduce of " + std::to_string(bytes) + " bytes at " +
                      std::to_string(offset) + " exceeds the dense buffer");
    char* const at = dense_ + offset;
    Nccl(ncclAllReduce(at, at, static_cast<size_t>(bytes), ncclUint8, ncclSum, comm_, S(s)),
         "ncclAllReduce");
  }

  void Barrier() override {
    if (!comm_) {
      rv_.AllGather("");
      return;
    }
    Nccl(ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt32, ncclSum, comm_, streams_[1]),
         "ncclAllReduce (barrier)");
    Sync();
  }

  std::vector<std::string> AllGatherBytes(const std::string& mine) override {
    OpenGate();
    if (!comm_) return rv_.AllGather(mine);
    const int N = geo_.ranks;
    uint64_t* sizes_d = nullptr;
    Check(cudaMalloc(&sizes_d, sizeof(uint64_t) * (N + 1)), "cudaMalloc");
    const uint64_t n = mine.size();
    // The host-to-device copies go on the all-gather's stream: a plain cudaMemcpy from pageable
    // memory may return before its DMA lands, and the non-blocking stream would not wait for it
    // (a 1-rank run read a half-copied result: a NUL in its JSON).
    Check(cudaMemcpyAsync(sizes_d + N, &n, sizeof(n), cudaMemcpyHostToDevice, streams_[1]),
          "cudaMemcpyAsync");
    Nccl(ncclAllGather(sizes_d + N, sizes_d, 1, ncclUint64, comm_, streams_[1]),
         "ncclAllGather (sizes)");
    Sync();
    std::vector<uint64_t> sizes(static_cast<size_t>(N));
    Check(cudaMemcpy(sizes.data(), sizes_d, sizeof(uint64_t) * N, cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    cudaFree(sizes_d);
    const uint64_t longest = std::max<uint64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
    char* buf = nullptr;
    Check(cudaMalloc(&buf, longest * (N + 1)), "cudaMalloc (result exchange)");
    Check(cudaMemcpyAsync(buf + longest * N, mine.data(), n, cudaMemcpyHostToDevice, streams_[1]),
          "cudaMemcpyAsync");
    Nccl(ncclAllGather(buf + longest * N, buf, longest, ncclUint8, comm_, streams_[1]),
         "ncclAllGather (results)");
    Sync();
    std::vector<std::string> all(static_cast<size_t>(N));
    for (int r = 0; r < N; ++r) {
      all[static_cast<size_t>(r)].resize(sizes[static_cast<size_t>(r)]);
      Check(cudaMemcpy(all[static_cast<size_t>(r)].data(), buf + longest * r,
                       sizes[static_cast<size_t>(r)], cudaMemcpyDeviceToHost),
            "cudaMemcpy");
    }
    cudaFree(buf);
    return all;
  }

 protected:
  void RequireCollective() const {
    if (geo_.ranks < 2 || !comm_)
      throw ExecError("rank " + std::to_string(rank_) +
                      ": a collective needs several ranks and NCCL");
  }
  kernels::PoolRef PeerPool(int r, int k) const {
    return PoolAt(peer_base_[static_cast<size_t>(r)], k);
  }
};

class CudaBackend final : public CudaExchange, public ModelForward {
 public:
  using CudaExchange::CudaExchange;

  ModelForward* model_forward() override { return forward_ ? this : nullptr; }

  nlohmann::ordered_json Context() const override {
    int driver = 0, runtime = 0, nccl = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    ncclGetVersion(&nccl);
    char host[256] = {}, bus[32] = {};
    gethostname(host, sizeof(host) - 1);
    cudaDeviceGetPCIBusId(bus, sizeof(bus), device_);
    char uuid[64];
    const unsigned char* u = reinterpret_cast<const unsigned char*>(prop_.uuid.bytes);
    std::snprintf(uuid, sizeof(uuid),
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                  u[14], u[15]);
    const std::string bulk = kernels::BulkCopiesUnavailable();
    return {
        {"host", host},
        {"gpu", prop_.name},
        {"gpu_index", device_},
        {"gpu_uuid", uuid},
        {"pci_bus_id", bus},
        {"sm_count", prop_.multiProcessorCount},
        {"gpu_memory_bytes", prop_.totalGlobalMem},
        {"driver_version", VersionString(driver)},
        {"cuda_runtime_version", VersionString(runtime)},
        {"nccl_version",
         nccl_ ? NcclVersionString(nccl) : "not used (" + NcclVersionString(nccl) + " available)"},
        {"tier_copy", o_.tier_copy == "kernel"  ? "kernel (mapped pinned memory)"
                      : o_.tier_copy == "batch" ? "cudaMemcpyBatchAsync"
                                                : "cudaMemcpy2DAsync"},
        {"p2p", o_.needs_p2p ? "CUDA IPC" : "not used"},
        {"device_copies", !kernels::kDeviceCopyTuning.bulk.enabled ? "warp kernels"
                          : bulk.empty() ? "bulk copies (TMA) where aligned, scatter_dense by warps"
                                         : "warp kernels (no bulk copies: " + bulk + ")"},
        {"cuda_device_max_connections", std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")
                                            ? std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")
                                            : ""}};
  }

  void StageForwardWrites(Stream s, std::span<const PageWrite> pages) override {
    // Every layer of a request writes the same pages: upload their list to the device once.
    if (forward_key_.first == pages.data() && forward_key_.second == pages.size()) return;
    std::vector<PageTag> tags;
    std::vector<int32_t> slots;
    for (const PageWrite& w : pages) {
      tags.push_back(w.tag);
      slots.push_back(w.slot);
    }
    forward_tags_ =
        static_cast<const PageTag*>(ToDevice(tags.data(), tags.size() * sizeof(PageTag), S(s)));
    forward_slots_ =
        static_cast<const int32_t*>(ToDevice(slots.data(), slots.size() * sizeof(int32_t), S(s)));
    forward_key_ = {pages.data(), pages.size()};
  }

  void ForwardLayer(Stream s, int64_t layer, std::span<const PageWrite> pages,
                    double busy_s) override {
    ChunkSet set = PoolChunks();
    StageForwardWrites(s, pages);
    set.tags = forward_tags_;
    set.pages = forward_slots_;
    set.num_items = static_cast<int64_t>(pages.size());
    set.layer_begin = layer;
    set.layer_end = layer + 1;
    Check(SyntheticForward(set, static_cast<uint64_t>(std::max(0.0, busy_s) * 1e9),
                           prop_.multiProcessorCount, S(s)),
          "synthetic forward launch");
  }

  void PrepareForward(const ForwardWork& w) override {
    if (!forward_) throw ExecError("rank " + std::to_string(rank_) + ": no model forward pass");
    forward_work_ = &w;
    forward_->SetRequest(w.prefix_pages * geo_.page_tokens, w.new_tokens, w.positions,
                         S(Stream::kCompute), w.gemm_tokens);
    if (w.merge) {
      // The rank's pages and the new tokens it computed (at cp_size 1: every new token).
      forward_shard_slots_ = static_cast<const int32_t*>(ToDevice(
          w.shard_slots.data(), w.shard_slots.size() * sizeof(int32_t), S(Stream::kCompute)));
      forward_->SetPartialKeys(w.shard_pos, w.positions, S(Stream::kCompute));
    }
  }

  MergeCheck ModelMergeCheck() override {
    if (!forward_ || !forward_work_ || !forward_work_->merge)
      throw ExecError("rank " + std::to_string(rank_) + ": ModelMergeCheck without a merge");
    // At cp_size 1 the rank's pages, in position order, are the whole prefix: the full attention
    // reads them through the page table with the causal mask alone.
    MergeCheck c;
    if (forward_->merged_outputs() == 0) return c;  // the rank computed no token: no query
    c.max_abs_diff = forward_->MergedDifference(ShardRows(geo_.layers - 1), S(Stream::kCompute));
    c.outputs = forward_->merged_outputs();
    return c;
  }

  void ModelForwardLayer(Stream s, int64_t layer, std::span<const PageWrite> pages) override {
    if (!forward_ || !forward_work_)
      throw ExecError("rank " + std::to_string(rank_) +
                      ": ModelForwardLayer before PrepareForward");
    if (forward_work_->merge) {
      forward_->MergeLayer(layer, ShardRows(layer), S(s));
      ForwardLayer(s, layer, pages, 0.0);
      return;
    }
    // A layer of more attention chunks than the launch queue holds behind a held gate would block
    // the host until the gate's timeout (docs/executor.md, "The request gate"): open it first.
    if (gate_held_ && forward_->AttentionChunks() > kGateMaxAttentionChunks) {
      OpenGate();
      ++gates_opened_early_;
    }
    const std::vector<kernels::DenseRef> refs =
        geo_.dense_refs(dense_, layer, forward_work_->prefix_pages);
    forward_->Layer(layer, refs[static_cast<size_t>(o_.forward->kv_pool)].data, S(s));
    ForwardLayer(s, layer, pages, 0.0);  // the new pages' pattern (what later ops verify)
  }

  int VerifyDense(Stream s, int64_t layer) override {
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    ChunkSet set;
    for (int k = 0; k < geo_.num_pools(); ++k)
      set.seg[k] = ChunkSegment{static_cast<char*>(dense[static_cast<size_t>(k)].data), 0,
                                geo_.chunk_bytes(k), k};
    set.num_segments = geo_.num_pools();
    set.tags = d_tags_;
    set.num_items = gi_->prefix_pages;
    set.layer_begin = layer;
    set.layer_end = layer + 1;
    set.layer_offset = layer;
    return Verify(s, set, gi_->prefix_pages * geo_.page_layer_bytes());
  }

  int VerifyRecords(Stream s, int64_t layer, RecordBuffer from) override {
    if (static_cast<int64_t>(gi_->page_records.size()) != gi_->prefix_pages)
      throw ExecError("owner_major verification without a record per page");
    ChunkSet set;
    int64_t off = 0;
    for (int k = 0; k < geo_.num_pools(); ++k) {
      set.seg[k] = ChunkSegment{const_cast<char*>(Records(from)) + off, 0, geo_.chunk_bytes(k), k,
                                geo_.page_layer_bytes()};
      off += geo_.chunk_bytes(k);
    }
    set.num_segments = geo_.num_pools();
    set.tags = d_tags_;
    set.pages = d_page_records_;
    set.num_items = gi_->prefix_pages;
    set.layer_begin = layer;
    set.layer_end = layer + 1;
    set.layer_offset = layer;
    return Verify(s, set, gi_->prefix_pages * geo_.page_layer_bytes());
  }

  int VerifyPages(Stream s, int pool, std::span<const int32_t> slots,
                  std::span<const PageTag> tags) override {
    ChunkSet set;
    const kernels::PoolRef p = Pool(pool);
    set.seg[0] = ChunkSegment{static_cast<char*>(p.data), p.geo.layer_stride_bytes(),
                              p.geo.chunk_bytes(), pool};
    set.num_segments = 1;
    set.tags = static_cast<const PageTag*>(arena_.Put(tags.data(), tags.size_bytes()));
    set.pages = static_cast<const int32_t*>(arena_.Put(slots.data(), slots.size_bytes()));
    set.num_items = static_cast<int64_t>(slots.size());
    set.layer_begin = 0;
    set.layer_end = geo_.layers;
    return Verify(s, set, static_cast<int64_t>(slots.size()) * geo_.layers * p.geo.chunk_bytes());
  }

  VerifyResult VerifyResultOf(int handle) const override {
    const auto& [out, checked] = results_.at(static_cast<size_t>(handle));
    VerifyResult r;
    r.checked_bytes = checked;
    r.bad_bytes = static_cast<int64_t>(out->bad_bytes);
    r.first_bad_item =
        out->first_bad_item == ~0ull ? -1 : static_cast<int64_t>(out->first_bad_item);
    return r;
  }

 private:
  // Rows of the kv pool's layer `layer` through the rank's prefix pages (the merged prefix).
  KvRows ShardRows(int64_t layer) const {
    const kernels::PoolRef p = Pool(o_.forward->kv_pool);
    return KvRows{static_cast<const char*>(p.data) + layer * p.geo.layer_stride_bytes(),
                  forward_shard_slots_, geo_.page_tokens, p.geo.chunk_bytes()};
  }
  // The kernel's counters live in device memory (atomics to mapped host memory are not portable
  // over PCIe); they are initialised and read back by copies on the same stream.
  int Verify(Stream s, const ChunkSet& set, int64_t checked) {
    const size_t i = results_.size();
    if (i >= verify_capacity_)
      throw ExecError("rank " + std::to_string(rank_) + ": more than " +
                      std::to_string(verify_capacity_) +
                      " verifications in one request (internal limit)");
    auto* host = static_cast<VerifyOut*>(arena_.Take(sizeof(VerifyOut)));
    host->bad_bytes = 0;
    host->first_bad_item = ~0ull;
    VerifyOut* dev = verify_dev_ + i;
    Check(cudaMemcpyAsync(dev, host, sizeof(VerifyOut), cudaMemcpyHostToDevice, S(s)),
          "cudaMemcpyAsync (verify init)");
    Check(VerifyPattern(set, dev, prop_.multiProcessorCount * 4, S(s)), "verify launch");
    Check(cudaMemcpyAsync(host, dev, sizeof(VerifyOut), cudaMemcpyDeviceToHost, S(s)),
          "cudaMemcpyAsync (verify result)");
    results_.emplace_back(host, checked);
    return static_cast<int>(i);
  }
};

}  // namespace

int VisibleCudaDevices(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    *why = e != cudaSuccess ? cudaGetErrorString(e) : "no device";
    return 0;
  }
  return count;
}

std::unique_ptr<RankBackend> MakeCudaBackend(const ExecGeometry& geo, int rank, int local_rank,
                                             Rendezvous& rendezvous,
                                             const CudaBackendOptions& opts) {
  return std::make_unique<CudaBackend>(geo, rank, local_rank, rendezvous, opts);
}

}  // namespace kvlanes::exec

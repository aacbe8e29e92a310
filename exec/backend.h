// The seam between the executor's logic (exec/executor.h: walks the plan, keeps the slot
// bookkeeping, builds indices, checks every byte, records timings) and the memory it runs on.
// Two implementations share it, as LevelDB's Env has a real and an in-memory one:
//   cuda  (exec/cuda_backend.cu)  device pools, pinned host pools, NCCL, CUDA IPC, CUDA events
//   host  (exec/host_backend.cpp) the same pools in host memory shared between the rank
//                                 processes, memcpy and the kernels' CPU references, steady clock
// One backend object per rank process; every call is about this rank only, except the
// collectives, which every rank must call in the same order.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "exec/exec_error.h"
#include "exec/pattern.h"
#include "io/name_table.h"
#include "kernels/materialize.h"
#include "kernels/page_layout.h"
#include "kernels/tier_copy.h"
#include "kernels/zigzag.h"
#include "sim/cache/policy.h"

namespace kvlanes::exec {

// The backends (`--backend`) and the CUDA backend's ways of copying between the tiers
// (`--tier-copy`): kernel (SM copy kernel on mapped pinned memory), memcpy (cudaMemcpy2DAsync),
// batch (cudaMemcpyBatchAsync). The options carry the names; these tables check them.
enum class BackendKind { kCuda, kHost };
inline constexpr NameTable<BackendKind, 2> kBackendNames{
    {{{BackendKind::kCuda, "cuda"}, {BackendKind::kHost, "host"}}}, "backend"};
enum class TierCopyMode { kKernel, kMemcpy, kBatch };
inline constexpr NameTable<TierCopyMode, 3> kTierCopyModeNames{{{{TierCopyMode::kKernel, "kernel"},
                                                                 {TierCopyMode::kMemcpy, "memcpy"},
                                                                 {TierCopyMode::kBatch, "batch"}}},
                                                               "tier-copy mode"};

// Largest dense buffer holding every layer of the plan's longest gather (else it holds one).
inline constexpr int64_t kDenseAllLayersMaxBytes = 8ll << 30;

// Shape of every rank's memory, from the plan header (and the plan's largest gather).
struct ExecGeometry {
  int ranks = 1;
  int64_t page_tokens = 0;
  int64_t layers = 0;
  std::vector<int64_t> elem_bytes;  // per pool: bytes per token per layer
  std::vector<std::string> pool_names;
  int64_t device_slots = 0;  // per lane, every pool
  int64_t host_slots = 0;    // per lane, every pool (0 = no host tier)
  kernels::HostLayout host_layout = kernels::HostLayout::kLayerFirst;
  int64_t max_prefix_pages = 0;  // largest gather of the plan
  int64_t max_shard_pages = 0;   // largest padded shard of a packed/zigzag gather
  // layer_split plans (config cache.placement): lane 0 keeps every page; the executor stores
  // lane 0's pages on every rank, every layer, and each layer's owner broadcasts that layer of
  // the prefix (the layout's memory saving is not reproduced, its data movement is). The slot
  // counts are then the layout's (LayerSplitCapacityPages).
  bool layer_split = false;
  // Plans of KV interleaved by token (config cache.interleave_tokens > 0): every prefix is merged
  // (partial_merge), not gathered; logical page p of the prefix is on rank p mod ranks.
  int64_t interleave_tokens = 0;
  // Layers the dense buffer holds: every layer (each gather layer keeps its own region, checked
  // after the request's timed work) or a ring of gather.prefetch_layers + 1 (layer l in region
  // l mod dense_layers, checked inline).
  int64_t dense_layers = 1;

  int num_pools() const { return static_cast<int>(elem_bytes.size()); }
  int64_t chunk_bytes(int pool) const {
    return page_tokens * elem_bytes[static_cast<size_t>(pool)];
  }
  // One page, one layer, all pools: a packed record of one layer.
  int64_t page_layer_bytes() const {
    int64_t b = 0;
    for (int k = 0; k < num_pools(); ++k) b += chunk_bytes(k);
    return b;
  }
  kernels::PoolGeometry pool_geometry(int pool) const {
    return {layers, device_slots, page_tokens, elem_bytes[static_cast<size_t>(pool)]};
  }
  int64_t device_pool_bytes() const {  // all pools of one rank
    int64_t b = 0;
    for (int k = 0; k < num_pools(); ++k) b += pool_geometry(k).total_bytes();
    return b;
  }
  int64_t host_pool_bytes() const {
    int64_t b = 0;
    for (int k = 0; k < num_pools(); ++k) b += kernels::HostPoolBytes(pool_geometry(k), host_slots);
    return b;
  }
  // The per-layer collective buffers: dense (all-reduce) and the packed send/receive buffers.
  int64_t dense_layer_bytes() const { return max_prefix_pages * page_layer_bytes(); }
  int64_t dense_bytes() const { return dense_layer_bytes() * dense_layers; }
  // Where the region of `layer` of a gather of `prefix_pages` pages starts in the dense buffer.
  int64_t dense_layer_offset(int64_t layer, int64_t prefix_pages) const {
    return (layer % dense_layers) * prefix_pages * page_layer_bytes();
  }
  // The dense regions (one per pool) of `layer` of a gather of `prefix_pages` pages, in the dense
  // buffer at `base`: each layer has its own region when the buffer holds every layer.
  std::vector<kernels::DenseRef> dense_refs(void* base, int64_t layer, int64_t prefix_pages) const {
    std::vector<kernels::DenseRef> refs;
    int64_t off = dense_layer_offset(layer, prefix_pages);
    for (int k = 0; k < num_pools(); ++k) {
      refs.push_back(kernels::DenseRef{static_cast<char*>(base) + off, page_tokens,
                                       elem_bytes[static_cast<size_t>(k)], prefix_pages});
      off += prefix_pages * chunk_bytes(k);
    }
    return refs;
  }
  int64_t send_bytes() const { return max_shard_pages * page_layer_bytes(); }
  int64_t recv_bytes() const { return ranks * send_bytes(); }
};

// The streams an operation runs on. The host backend runs everything in order on the calling
// thread; the CUDA backend has one CUDA stream each, ordered by marks (events).
enum class Stream { kCompute = 0, kComm = 1, kH2D = 2, kD2H = 3 };
inline constexpr int kNumStreams = 4;
// The streams' names in the measured report's ops.
inline constexpr NameTable<Stream, kNumStreams> kStreamNames{{{{Stream::kCompute, "compute"},
                                                               {Stream::kComm, "collective"},
                                                               {Stream::kH2D, "copy h2d"},
                                                               {Stream::kD2H, "copy d2h"}}},
                                                             "stream"};

// Everything one rank needs to materialize one request's prefix, one layer at a time. Built by
// the executor from the plan (exec/executor.cpp), uploaded once per request by the backend.
struct GatherIndex {
  GatherMethod method = GatherMethod::kPacked;
  int64_t prefix_pages = 0;
  std::vector<PageTag> tags;  // per logical page: the content every rank must end with
  // dense: per logical page, this rank's slot when it owns the page, else -1
  std::vector<int32_t> owner_slot;
  // packed / zigzag: this rank's slots in pack order (<= shard_pages), shard_pages = records per
  // rank in the all-gather (the largest shard, padded)
  std::vector<int32_t> pack_slots;
  int64_t shard_pages = 0;
  std::vector<int32_t> unpack_index;  // packed: per logical page, its record in the output
  kernels::ZigzagRun zigzag;          // zigzag: the proven run
  // owner_major and broadcast: per logical page p, its record in the all-gather output, (p mod N) *
  // shard_pages + p / N: the page table attention reads through. No kernel of the gather reads
  // it (there is no reorder); only the verification does.
  std::vector<int32_t> page_records;
  // p2p: per logical page, the owner rank and its slot there
  std::vector<int32_t> src_rank;
  std::vector<int32_t> src_slot;
};

// A page the synthetic forward pass writes: device slot and content.
struct PageWrite {
  int32_t slot = 0;
  PageTag tag;
};

// The forward-pass proxy's work of one request on this rank (--forward model,
// exec/forward_model.h): the gathered prefix, the group's new tokens and this rank's query
// positions (absolute, ascending).
struct ForwardWork {
  int64_t prefix_pages = 0;
  int64_t new_tokens = 0;
  std::vector<int32_t> positions;
  // A serving pass of several requests (docs/forward_pass.md, "A pass of several requests"): the
  // GEMMs of each layer run once, over the pass's tokens, in the layers of its first request
  // (gemm_tokens: the rank's tokens of the whole pass), and the later requests' layers run their
  // attention alone (gemm_tokens 0). -1: the request's own tokens (a request on its own).
  int64_t gemm_tokens = -1;
  // partial_merge (KV interleaved by token): the prefix is not gathered; each layer's attention is
  // the rank's partial attention over its own prefix pages and its new tokens, merged
  // (docs/executor.md, "partial_merge"). shard_slots: this rank's prefix pages' device slots in
  // position order; shard_pos: the absolute position of each of their tokens, ascending.
  bool merge = false;
  std::vector<int32_t> shard_slots;
  std::vector<int32_t> shard_pos;
};

// The check of a merged request (ModelMergeCheck): the largest |merged - full attention| over
// the outputs of the request's last layer, and how many outputs it compared.
struct MergeCheck {
  double max_abs_diff = 0;
  int64_t outputs = 0;
};

// A verification enqueued now and read after Sync(): bytes compared, bytes wrong and the first
// wrong page (index into the list that was checked).
struct VerifyResult {
  int64_t checked_bytes = 0;
  int64_t bad_bytes = 0;
  int64_t first_bad_item = -1;
};

// Where the records a gather reorders into the dense buffer are: the send buffer (one rank, whose
// packed shard is the whole all-gather output) or the all-gather's receive buffer.
enum class RecordBuffer { kSend, kRecv };

// The phases of one gather layer as GatherLayer (exec/gather.h) reports them for the span
// trace: per phase, in order, its name and the mark made on the gather's stream right after its
// work was enqueued. The phases follow one another on that stream: the first starts where the call
// starts, each next one at the previous one's mark. Names per method (all-gather / all-reduce only
// when the plan has several ranks):
//   packed  pack, all-gather, unpack      zigzag  pack, all-gather, zigzag
//   dense   scatter, all-reduce           p2p     peer_gather
//   owner_major  pack, all-gather          broadcast  pack (the layer's owner), broadcast
using GatherPhases = std::vector<std::pair<std::string, int>>;

// The backend's capabilities, one interface each; the executor, the gather recipes
// (methods/) and the calibration sweep ask for the one they use. Every backend has all of them
// but the model forward pass (RankBackend::model_forward), which only the CUDA backend has.

// Time. A mark is a point on a stream; its time is known after Sync().
class StreamClock {
 public:
  virtual ~StreamClock() = default;
  virtual int Mark(Stream s) = 0;
  // `waiter` does not run past this point before `mark` is reached.
  virtual void Wait(Stream waiter, int mark) = 0;
  // Waits for every stream (bounded by the backend's timeout); throws ExecError on failure.
  virtual void Sync() = 0;
  // Sets time zero for MarkSeconds (called once, after warm-up and a barrier).
  virtual void StartEpoch() = 0;
  // Seconds from the epoch to `mark`. REQUIRES: Sync() since the mark was made. Its resolution
  // falls as the run goes on (CUDA reports float milliseconds: 1.95 us steps 16-32 s after the
  // epoch), so durations come from MarkInterval.
  virtual double MarkSeconds(int mark) const = 0;
  // Seconds from mark `from` to mark `to` (negative when `to` comes first), at the clock's full
  // resolution wherever the two lie. REQUIRES: Sync() since both were made.
  virtual double MarkInterval(int from, int to) const = 0;
  // Forgets all marks and verification results (after Sync, between requests).
  virtual void ReleaseMarks() = 0;
  // Holds every stream behind a gate until OpenGate(): work enqueued meanwhile starts only once
  // the host has enqueued all of it, so the device runs it back to back as in an engine whose
  // host runs ahead of the device (docs/executor.md, "The request gate"). Returns the mark
  // where the streams are released. The gate opens by itself after `timeout_s` (counted in
  // GatesExpired); Sync() opens it first. Backends without asynchronous streams do nothing.
  virtual int HoldStreams(double timeout_s) = 0;
  virtual void OpenGate() = 0;
  virtual int64_t GatesExpired() = 0;  // gates that opened by their timeout so far
  // Gates the backend opened itself before work that would not fit the launch queue behind a held
  // gate (the host would block until the timeout); their requests' later ops include host time.
  virtual int64_t GatesOpenedEarly() { return 0; }
};

// Memory: the tiers, copies between them, and the test hooks that damage them. Index spans must
// stay valid until the next Sync().
class TierMemory {
 public:
  virtual ~TierMemory() = default;
  // Leaves the caches the next op reads through full of unrelated written data, as after a
  // forward layer: the CUDA backend writes a scratch buffer of twice the GPU's L2 on `s`; the host
  // backend writes 64 MiB of host memory (larger than the last-level caches of common CPUs).
  // Untimed set-up for `kvlanes bench sweep --cache-evict on`.
  virtual void EvictCaches(Stream s) = 0;
  // Tier copy of one pool, layers [layers.begin, layers.end).
  virtual void TierCopy(Stream s, int pool, kernels::TierDirection dir,
                        std::span<const int32_t> device_slots, std::span<const int32_t> host_slots,
                        kernels::LayerRange layers) = 0;
  // Test hooks (the --fault option): flip one byte of a device page / host page.
  virtual void CorruptDevicePage(int pool, int32_t slot, int64_t layer) = 0;
  virtual void CorruptHostPage(int pool, int32_t slot, int64_t layer) = 0;
};

// The gather's local primitives (composed per method by GatherLayer, exec/gather.h). Each is
// about one layer of the current gather and this rank's buffers, all pools.
class GatherKernels {
 public:
  virtual ~GatherKernels() = default;
  // Makes `index` the current gather (copies it where the device can read it).
  virtual void PrepareGather(const GatherIndex& index) = 0;
  // scatter_dense: the layer's dense region <- this rank's owned pages, zeros elsewhere.
  virtual void ScatterDense(Stream s, int64_t layer) = 0;
  // pack: the send buffer's first records <- this rank's pack_slots (padding records untouched).
  virtual void PackShard(Stream s, int64_t layer) = 0;
  // The dense region <- the records of `from` by the unpack index / the zigzag formula.
  virtual void Unpack(Stream s, int64_t layer, RecordBuffer from) = 0;
  virtual void ZigzagReorder(Stream s, int64_t layer, RecordBuffer from) = 0;
};

// Reads of other ranks' pools (CUDA IPC; the host backend's shared segments).
class PeerAccess {
 public:
  virtual ~PeerAccess() = default;
  // p2p: the dense region <- each page of the current gather read from its owner's pool.
  virtual void PeerGather(Stream s, int64_t layer) = 0;
};

// Between ranks. The collectives run on this backend's own buffers (no gather needed; the
// calibration sweep times them bare); every rank calls them with the same arguments, in the same
// order. REQUIRES: ranks() > 1, bytes within the geometry's send_bytes() / dense_bytes().
class Collectives {
 public:
  virtual ~Collectives() = default;
  // `bytes` per rank from the send buffer, rank-major into the receive buffer.
  virtual void AllGather(Stream s, int64_t bytes) = 0;
  // uint8 sum, in place, of dense buffer bytes [offset, offset + bytes).
  virtual void AllReduce(Stream s, int64_t offset, int64_t bytes) = 0;
  // `bytes` from rank `root`'s send buffer into every rank's receive buffer (the root's too), at
  // its start.
  virtual void Broadcast(Stream s, int root, int64_t bytes) = 0;
  // The host-hit agreement of cache.cp_hit_agreement min: the minimum of every rank's `mine`
  // (one int64 all-reduce, NCCL's ncclMin on the CUDA backend), enqueued on `s`; read its result
  // with AllReduceMinResult(handle) after Sync().
  virtual int AllReduceMin(Stream s, int64_t mine) = 0;
  virtual int64_t AllReduceMinResult(int handle) const = 0;
  // Synchronous, bounded by the timeout.
  virtual void Barrier() = 0;
  // Every rank's `mine`, in rank order, on every rank. Any size.
  virtual std::vector<std::string> AllGatherBytes(const std::string& mine) = 0;
  // This rank failed: stop the other ranks' waits (NCCL: abort the communicator). noexcept: it
  // runs on the way out of a failure.
  virtual void Abort(const std::string& reason) noexcept = 0;
};

// The synthetic forward pass: writes each layer's new pages and keeps the device busy.
class ForwardPass {
 public:
  virtual ~ForwardPass() = default;
  // Synthetic forward pass of one layer: writes the pattern of `pages` (this layer, every pool)
  // and keeps the device busy for at least busy_s (the host backend only writes).
  virtual void ForwardLayer(Stream s, int64_t layer, std::span<const PageWrite> pages,
                            double busy_s) = 0;
  // Stages the list of `pages` that the pattern writes of ForwardLayer and ModelForwardLayer use
  // (an upload on `s`, once per list), so that the executor can place it before the span it
  // times: the list is verification bookkeeping, not forward-pass work. ForwardLayer stages a
  // list it has not seen itself. Default: nothing to stage.
  virtual void StageForwardWrites(Stream s, std::span<const PageWrite> pages) {
    (void)s;
    (void)pages;
  }
};

// The forward-pass proxy (--forward model, exec/forward_model.h): PrepareForward once per
// request, then ModelForwardLayer per layer instead of ForwardLayer.
class ModelForward {
 public:
  virtual ~ModelForward() = default;
  virtual void PrepareForward(const ForwardWork& work) = 0;
  // The proxy's layer over the layer's kv region of the dense buffer (a gather of
  // work.prefix_pages pages), then the pattern of `pages` as ForwardLayer writes it. `work` stays
  // valid until the next Sync().
  virtual void ModelForwardLayer(Stream s, int64_t layer, std::span<const PageWrite> pages) = 0;
  // After a merged request's Sync (work.merge): the full attention of its last layer's queries
  // over the whole prefix, compared with the merged output that layer used. Synchronous.
  virtual MergeCheck ModelMergeCheck() = 0;
};

// Every byte checked against the pattern (exec/pattern.h).
class Verification {
 public:
  virtual ~Verification() = default;
  // Compares the dense buffer (current gather, one layer) with the pattern of index.tags.
  // Items are logical pages. Returns a handle for VerifyResultOf().
  virtual int VerifyDense(Stream s, int64_t layer) = 0;
  // owner_major: compares the records of `from` (the all-gather output of one layer, which is
  // the gather's result) with the pattern: logical page p must be record index.page_records[p].
  // Items are logical pages; padding records are not compared.
  virtual int VerifyRecords(Stream s, int64_t layer, RecordBuffer from) = 0;
  // Compares device pages `slots` of one pool, every layer, with the pattern of `tags`.
  virtual int VerifyPages(Stream s, int pool, std::span<const int32_t> slots,
                          std::span<const PageTag> tags) = 0;
  virtual VerifyResult VerifyResultOf(int handle) const = 0;
};

// One rank's backend: every capability above, and the model forward pass where it has one.
class RankBackend : public StreamClock,
                    public TierMemory,
                    public GatherKernels,
                    public PeerAccess,
                    public Collectives,
                    public ForwardPass,
                    public Verification {
 public:
  ~RankBackend() override = default;
  virtual std::string_view Name() const = 0;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  virtual const ExecGeometry& geometry() const = 0;
  // Machine, versions and device of this rank (the measured report's context block).
  virtual nlohmann::ordered_json Context() const = 0;
  // The forward-pass proxy, or null where the backend has none (the host backend).
  virtual ModelForward* model_forward() { return nullptr; }
  // The proxy, or an ExecError naming the backend that has none.
  ModelForward& RequireModelForward() {
    if (ModelForward* m = model_forward()) return *m;
    throw ExecError("backend " + std::string(Name()) + " has no model forward pass");
  }
};

}  // namespace kvlanes::exec

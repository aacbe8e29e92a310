#include "exec/host_backend.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "exec/exec_error.h"
#include "exec/pattern_fill.h"
#include "kernels/materialize.h"
#include "kernels/tier_copy.h"
#include "sim/check.h"

namespace kvlanes::exec {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMagic = 0x6b766c616e657331ull;  // "kvlanes1"
constexpr size_t kAlign = 4096;
constexpr int64_t kMinExchangeBytes = 1 << 16;  // for AllGatherBytes chunks

size_t AlignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

std::string GB(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GB", bytes / 1e9);
  return b;
}

// MemAvailable of /proc/meminfo in bytes; -1 where it cannot be read (then nothing is checked).
double AvailableHostBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  return -1;
}

// Refuses, before anything is mapped, a plan whose ranks together need more memory than the
// host has available, naming the parts and the settings that shrink them.
void CheckHostMemory(const ExecGeometry& geo, size_t segment_bytes) {
  const double ranks = geo.ranks;
  const double device = static_cast<double>(geo.device_pool_bytes()) * ranks;
  const double host = static_cast<double>(geo.host_pool_bytes()) * ranks;
  const double buffers =
      static_cast<double>(geo.dense_bytes() + geo.send_bytes() + geo.recv_bytes()) * ranks;
  // The shared segment holds every rank's device pools and exchange area.
  const double need = static_cast<double>(segment_bytes) + host + buffers;
  const double avail = AvailableHostBytes();
  if (avail < 0 || need <= avail) return;
  throw ExecError(
      "host backend: the plan needs " + GB(need) + " of host memory for " +
      std::to_string(geo.ranks) + " rank(s): device pools " + GB(device) + " (" +
      std::to_string(geo.device_slots) + " slots x " + std::to_string(geo.layers) + " layers x " +
      std::to_string(geo.page_layer_bytes()) + " B per page-layer per rank), host pools " +
      GB(host) + " (" + std::to_string(geo.host_slots) + " slots per rank), gather buffers " +
      GB(buffers) + "; this machine has " + GB(avail) +
      " available (MemAvailable). Replay the plan smaller: cache.device_pages_per_lane and "
      "cache.host_pages_per_lane (slots), model.layers, or fewer requests with long prefixes "
      "(the gather buffers hold the longest prefix)");
}

}  // namespace

// ---------------------------------------------------------------- segment

HostSegment::HostSegment(const ExecGeometry& geo) {
  if (geo.ranks > kMaxHostRanks)
    throw ExecError("the host backend runs at most " + std::to_string(kMaxHostRanks) +
                    " ranks, the plan has " + std::to_string(geo.ranks));
  exchange_bytes_ = std::max({geo.dense_layer_bytes(), geo.send_bytes(), kMinExchangeBytes});
  pools_offset_ = AlignUp(sizeof(SharedControl));
  exchange_offset_ = AlignUp(static_cast<size_t>(geo.device_pool_bytes()));
  rank_stride_ = exchange_offset_ + AlignUp(static_cast<size_t>(exchange_bytes_));
  bytes_ = pools_offset_ + rank_stride_ * static_cast<size_t>(geo.ranks);
  CheckHostMemory(geo, bytes_);
}

HostSegment::~HostSegment() {
  if (base_) munmap(base_, bytes_);
}

void HostSegment::Map(int fd) {
  void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                 fd < 0 ? (MAP_SHARED | MAP_ANONYMOUS) : MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    throw ExecError("host backend: cannot map " + std::to_string(bytes_) +
                    " bytes of shared memory (pools and "
                    "exchange areas of every rank): " +
                    std::strerror(errno));
  base_ = static_cast<uint8_t*>(p);
}

std::unique_ptr<HostSegment> HostSegment::CreateAnonymous(const ExecGeometry& geo) {
  std::unique_ptr<HostSegment> s(new HostSegment(geo));
  s->Map(-1);
  SharedControl* c = new (s->base_) SharedControl{};
  c->failed_rank.store(-1);
  c->magic.store(kMagic);
  return s;
}

std::unique_ptr<HostSegment> HostSegment::OpenFile(const std::string& path, const ExecGeometry& geo,
                                                   int rank, double timeout_s) {
  std::unique_ptr<HostSegment> s(new HostSegment(geo));
  s->path_ = path;
  if (rank == 0) {
    const std::string tmp = path + ".tmp";
    const int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(s->bytes_)) != 0)
      throw ExecError("rank 0: cannot create the host backend's shared file " + tmp + ": " +
                      std::strerror(errno));
    s->Map(fd);
    close(fd);
    SharedControl* c = new (s->base_) SharedControl{};
    c->failed_rank.store(-1);
    c->magic.store(kMagic);
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw ExecError("rank 0: cannot rename " + tmp + ": " + std::strerror(errno));
    return s;
  }
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const int fd = open(path.c_str(), O_RDWR);
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == s->bytes_) {
      s->Map(fd);
      close(fd);
      if (s->control()->magic.load() == kMagic) return s;
      throw ExecError("rank " + std::to_string(rank) + ": " + path +
                      " is not a kvlanes host segment");
    }
    if (fd >= 0) close(fd);
    if (Clock::now() > deadline)
      throw ExecError("rank " + std::to_string(rank) + ": rank 0 did not create the host segment " +
                      path + " within " + std::to_string(timeout_s) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void HostSegment::MarkFailed(int rank, const std::string& reason) {
  SharedControl* c = control();
  int32_t none = -1;
  if (c->failed_rank.compare_exchange_strong(none, rank)) {
    const size_t n = std::min(reason.size(), sizeof(c->reason) - 1);
    std::memcpy(c->reason, reason.data(), n);
    c->reason[n] = '\0';
  }
}

void HostSegment::Unlink() {
  if (!path_.empty()) unlink(path_.c_str());
}

// ---------------------------------------------------------------- backend

namespace {

class HostBackend : public RankBackend {
 public:
  HostBackend(const ExecGeometry& geo, HostSegment& seg, int rank, double timeout_s)
      : geo_(geo), seg_(seg), rank_(rank), timeout_s_(timeout_s) {
    for (int k = 0; k < geo_.num_pools(); ++k) {
      const kernels::PoolGeometry g = geo_.pool_geometry(k);
      for (int r = 0; r < geo_.ranks; ++r) {
        int64_t offset = 0;
        for (int j = 0; j < k; ++j) offset += geo_.pool_geometry(j).total_bytes();
        all_pools_.push_back(kernels::PoolRef{seg_.pools(r) + offset, g});  // [k * ranks + r]
      }
      pools_.push_back(all_pools_[static_cast<size_t>(k * geo_.ranks + rank_)]);
    }
    host_.assign(static_cast<size_t>(geo_.host_pool_bytes()), 0);
    int64_t off = 0;
    for (int k = 0; k < geo_.num_pools(); ++k) {
      host_pools_.push_back(
          kernels::HostPoolRef{host_.data() + off, geo_.host_slots, geo_.host_layout});
      off += kernels::HostPoolBytes(geo_.pool_geometry(k), geo_.host_slots);
    }
    dense_.assign(static_cast<size_t>(geo_.dense_bytes()), 0);
    send_.assign(static_cast<size_t>(geo_.send_bytes()), 0);
    recv_.assign(static_cast<size_t>(geo_.recv_bytes()), 0);
    epoch_ = Clock::now();
  }

  std::string_view Name() const override { return "host"; }
  int rank() const override { return rank_; }
  int ranks() const override { return geo_.ranks; }
  const ExecGeometry& geometry() const override { return geo_; }

  nlohmann::ordered_json Context() const override {
    nlohmann::ordered_json j;
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    j["host"] = host;
    std::ifstream cpu("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpu, line))
      if (line.rfind("model name", 0) == 0) {
        j["cpu"] = line.substr(line.find(':') + 2);
        break;
      }
    j["online_cpus"] = sysconf(_SC_NPROCESSORS_ONLN);
    j["memory"] = "host (shared segment for pools and collectives)";
    return j;
  }

  int Mark(Stream) override {
    marks_.push_back(Clock::now());
    return static_cast<int>(marks_.size()) - 1;
  }
  void Wait(Stream, int) override {}  // everything runs in order on this thread
  void Sync() override {}  // nothing is asynchronous here; peers are checked in every wait
  // Work runs when it is enqueued: there is nothing to hold.
  int HoldStreams(double) override { return Mark(Stream::kCompute); }
  void OpenGate() override {}
  int64_t GatesExpired() override { return 0; }
  void StartEpoch() override { epoch_ = Clock::now(); }
  double MarkSeconds(int mark) const override {
    return std::chrono::duration<double>(marks_.at(static_cast<size_t>(mark)) - epoch_).count();
  }
  double MarkInterval(int from, int to) const override {
    return std::chrono::duration<double>(marks_.at(static_cast<size_t>(to)) -
                                         marks_.at(static_cast<size_t>(from)))
        .count();
  }
  void ReleaseMarks() override {
    marks_.clear();
    results_.clear();
    reduced_.clear();
  }

  void ForwardLayer(Stream, int64_t layer, std::span<const PageWrite> pages, double) override {
    // The host backend writes what the forward pass writes, nothing more: it never borrows a
    // predicted duration (busy_s is a device-side notion).
    for (const PageWrite& w : pages)
      for (int k = 0; k < geo_.num_pools(); ++k) {
        const int64_t c = geo_.chunk_bytes(k);
        FillPattern(PoolChunk(k, layer, w.slot), c,
                    PatternSeed(w.tag.extent, w.tag.page, k, layer));
      }
  }

  void EvictCaches(Stream) override {
    evict_buf_.resize(size_t{64} << 20);
    std::memset(evict_buf_.data(), static_cast<int>(++evict_count_ & 0xff), evict_buf_.size());
  }

  void TierCopy(Stream, int pool, kernels::TierDirection dir, std::span<const int32_t> dev,
                std::span<const int32_t> host, kernels::LayerRange layers) override {
    const kernels::TierPoolPair pair{pools_[static_cast<size_t>(pool)],
                                     host_pools_[static_cast<size_t>(pool)]};
    kernels::TierCopyArgs a;
    a.pools = std::span<const kernels::TierPoolPair>(&pair, 1);
    a.layers = layers;
    a.device_slots = dev.data();
    a.host_slots = host.data();
    a.num_pages = static_cast<int64_t>(dev.size());
    a.direction = dir;
    kernels::TierCopyCpu(a);
  }

  void PrepareGather(const GatherIndex& index) override { gi_ = &index; }

  void ScatterDense(Stream, int64_t layer) override {
    kernels::ScatterDenseArgs a;
    a.pools = pools_;
    a.layers = kernels::LayerRange{layer, layer + 1};
    a.owner_slot = gi_->owner_slot.data();
    a.num_dense_pages = gi_->prefix_pages;
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    a.dense = dense;
    kernels::ScatterDenseCpu(a);
  }

  void PackShard(Stream, int64_t layer) override {
    kernels::PackArgs p;
    p.pools = pools_;
    p.layers = kernels::LayerRange{layer, layer + 1};
    p.slots = gi_->pack_slots.data();
    p.num_pages = static_cast<int64_t>(gi_->pack_slots.size());
    p.send = send_.data();
    kernels::PackPagesCpu(p);
  }

  void Unpack(Stream, int64_t layer, RecordBuffer from) override {
    kernels::UnpackArgs u;
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    u.dense = dense;
    u.num_layers = 1;
    u.recv = Records(from);
    u.num_records = gi_->shard_pages * geo_.ranks;
    u.recv_index = gi_->unpack_index.data();
    u.num_dense_pages = gi_->prefix_pages;
    kernels::UnpackPagesCpu(u);
  }

  void ZigzagReorder(Stream, int64_t layer, RecordBuffer from) override {
    kernels::ZigzagArgs z;
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    z.dense = dense;
    z.num_layers = 1;
    z.recv = Records(from);
    z.run = gi_->zigzag;
    z.shard_pages = gi_->shard_pages;
    kernels::ZigzagReorderCpu(z);
  }

  void PeerGather(Stream, int64_t layer) override {
    kernels::PeerGatherArgs a;
    a.peer_pools = all_pools_;
    a.num_ranks = geo_.ranks;
    a.layers = kernels::LayerRange{layer, layer + 1};
    a.src_rank = gi_->src_rank.data();
    a.src_slot = gi_->src_slot.data();
    a.num_dense_pages = gi_->prefix_pages;
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    a.dense = dense;
    kernels::PeerGatherCpu(a);
  }

  void AllGather(Stream, int64_t bytes) override {
    KV_CHECK(geo_.ranks > 1, "an all-gather needs several ranks");
    KV_CHECK(bytes <= geo_.send_bytes(),
             "all-gather of " << bytes << " bytes per rank exceeds the send buffer");
    AllGatherRaw(send_.data(), bytes, recv_.data());
  }

  void AllReduce(Stream, int64_t offset, int64_t bytes) override {
    KV_CHECK(geo_.ranks > 1, "an all-reduce needs several ranks");
    KV_CHECK(offset >= 0 && offset + bytes <= geo_.dense_bytes(),
             "all-reduce of " << bytes << " bytes at " << offset << " exceeds the dense buffer");
    AllReduceSumBytes(dense_.data() + offset, bytes);
  }

  int AllReduceMin(Stream, int64_t mine) override {
    KV_CHECK(geo_.ranks > 1, "an all-reduce needs several ranks");
    std::vector<int64_t> all(static_cast<size_t>(geo_.ranks));
    AllGatherRaw(&mine, sizeof(mine), all.data());
    reduced_.push_back(*std::min_element(all.begin(), all.end()));
    return static_cast<int>(reduced_.size()) - 1;
  }
  int64_t AllReduceMinResult(int handle) const override {
    return reduced_.at(static_cast<size_t>(handle));
  }

  void Broadcast(Stream, int root, int64_t bytes) override {
    KV_CHECK(geo_.ranks > 1, "a broadcast needs several ranks");
    KV_CHECK(root >= 0 && root < geo_.ranks, "broadcast from rank " << root);
    KV_CHECK(bytes <= geo_.send_bytes() && bytes <= seg_.exchange_bytes(),
             "broadcast of " << bytes << " bytes exceeds the send buffer");
    if (rank_ == root) std::memcpy(seg_.exchange(rank_), send_.data(), static_cast<size_t>(bytes));
    Barrier();
    std::memcpy(recv_.data(), seg_.exchange(root), static_cast<size_t>(bytes));
    Barrier();
  }

  int VerifyDense(Stream, int64_t layer) override {
    const std::vector<kernels::DenseRef> dense = DenseRefs(layer);
    VerifyResult r;
    for (int64_t p = 0; p < gi_->prefix_pages; ++p) {
      const PageTag& t = gi_->tags[static_cast<size_t>(p)];
      for (int k = 0; k < geo_.num_pools(); ++k) {
        const kernels::DenseRef& d = dense[static_cast<size_t>(k)];
        const int64_t c = d.chunk_bytes();
        const int64_t bad = CountPatternMismatches(static_cast<const uint8_t*>(d.data) + p * c, c,
                                                   PatternSeed(t.extent, t.page, k, layer));
        Account(r, p, c, bad);
      }
    }
    results_.push_back(r);
    return static_cast<int>(results_.size()) - 1;
  }

  int VerifyRecords(Stream, int64_t layer, RecordBuffer from) override {
    const uint8_t* records = Records(from);
    const int64_t rec_bytes = geo_.page_layer_bytes();
    const int64_t num_records = gi_->shard_pages * (from == RecordBuffer::kRecv ? geo_.ranks : 1);
    KV_CHECK(static_cast<int64_t>(gi_->page_records.size()) == gi_->prefix_pages,
             "owner_major verification without a record per page");
    VerifyResult r;
    for (int64_t p = 0; p < gi_->prefix_pages; ++p) {
      const int64_t rec = gi_->page_records[static_cast<size_t>(p)];
      KV_CHECK(rec >= 0 && rec < num_records, "page " << p << " maps to record " << rec);
      const PageTag& t = gi_->tags[static_cast<size_t>(p)];
      int64_t off = rec * rec_bytes;
      for (int k = 0; k < geo_.num_pools(); ++k) {
        const int64_t c = geo_.chunk_bytes(k);
        const int64_t bad =
            CountPatternMismatches(records + off, c, PatternSeed(t.extent, t.page, k, layer));
        Account(r, p, c, bad);
        off += c;
      }
    }
    results_.push_back(r);
    return static_cast<int>(results_.size()) - 1;
  }

  int VerifyPages(Stream, int pool, std::span<const int32_t> slots,
                  std::span<const PageTag> tags) override {
    VerifyResult r;
    const int64_t c = geo_.chunk_bytes(pool);
    for (size_t i = 0; i < slots.size(); ++i)
      for (int64_t l = 0; l < geo_.layers; ++l) {
        const int64_t bad = CountPatternMismatches(
            PoolChunk(pool, l, slots[i]), c, PatternSeed(tags[i].extent, tags[i].page, pool, l));
        Account(r, static_cast<int64_t>(i), c, bad);
      }
    results_.push_back(r);
    return static_cast<int>(results_.size()) - 1;
  }

  VerifyResult VerifyResultOf(int handle) const override {
    return results_.at(static_cast<size_t>(handle));
  }

  void Barrier() override {
    SharedControl* c = seg_.control();
    const uint64_t gen = c->generation.load(std::memory_order_acquire);
    const uint64_t mine = ++barriers_;
    c->reached[rank_].store(mine, std::memory_order_release);
    if (c->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
        static_cast<uint32_t>(geo_.ranks)) {
      c->arrived.store(0, std::memory_order_relaxed);
      c->generation.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    for (int spin = 0; c->generation.load(std::memory_order_acquire) == gen; ++spin) {
      CheckPeers();
      if (Clock::now() > deadline) {
        std::string missing;
        for (int r = 0; r < geo_.ranks; ++r)
          if (c->reached[r].load() < mine)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        const std::string msg = "rank " + std::to_string(rank_) + ": timed out after " +
                                std::to_string(timeout_s_) + " s waiting for rank(s) " + missing +
                                " (hung?)";
        seg_.MarkFailed(rank_, msg);
        throw ExecError(msg);
      }
      if (spin < 64) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  std::vector<std::string> AllGatherBytes(const std::string& mine) override {
    // Sizes first, then the bytes in rounds of the exchange area's size.
    std::vector<uint64_t> sizes(static_cast<size_t>(geo_.ranks));
    const uint64_t n = mine.size();
    AllGatherRaw(&n, sizeof(n), sizes.data());
    std::vector<std::string> all(static_cast<size_t>(geo_.ranks));
    uint64_t longest = 0;
    for (size_t r = 0; r < sizes.size(); ++r) {
      all[r].resize(sizes[r]);
      longest = std::max(longest, sizes[r]);
    }
    const uint64_t step = static_cast<uint64_t>(seg_.exchange_bytes());
    for (uint64_t done = 0; done < longest; done += step) {
      if (done < n) std::memcpy(seg_.exchange(rank_), mine.data() + done, std::min(step, n - done));
      Barrier();
      for (size_t r = 0; r < sizes.size(); ++r)
        if (done < sizes[r])
          std::memcpy(all[r].data() + done, seg_.exchange(static_cast<int>(r)),
                      std::min(step, sizes[r] - done));
      Barrier();
    }
    return all;
  }

  void Abort(const std::string& reason) noexcept override { seg_.MarkFailed(rank_, reason); }

  void CorruptDevicePage(int pool, int32_t slot, int64_t layer) override {
    PoolChunk(pool, layer, slot)[0] ^= 0x5a;
  }
  void CorruptHostPage(int pool, int32_t slot, int64_t layer) override {
    const int64_t off = kernels::HostElementOffset(geo_.host_layout, geo_.pool_geometry(pool),
                                                   geo_.host_slots, slot, layer, 0);
    static_cast<uint8_t*>(host_pools_[static_cast<size_t>(pool)].data)[off] ^= 0x5a;
  }

 private:
  // The current gather's dense regions of `layer`, one per pool.
  std::vector<kernels::DenseRef> DenseRefs(int64_t layer) {
    return geo_.dense_refs(dense_.data(), layer, gi_->prefix_pages);
  }
  const uint8_t* Records(RecordBuffer from) const {
    return from == RecordBuffer::kRecv ? recv_.data() : send_.data();
  }

  uint8_t* PoolChunk(int pool, int64_t layer, int64_t slot) const {
    const kernels::PoolRef& p = pools_[static_cast<size_t>(pool)];
    KV_CHECK(slot >= 0 && slot < p.geo.num_slots && layer >= 0 && layer < p.geo.num_layers,
             "page (layer " << layer << ", slot " << slot << ") outside the pool");
    return static_cast<uint8_t*>(p.data) + (layer * p.geo.num_slots + slot) * p.geo.chunk_bytes();
  }

  static void Account(VerifyResult& r, int64_t item, int64_t bytes, int64_t bad) {
    r.checked_bytes += bytes;
    r.bad_bytes += bad;
    if (bad > 0 && (r.first_bad_item < 0 || item < r.first_bad_item)) r.first_bad_item = item;
  }

  // Stops waiting as soon as another rank (or the supervising parent) reported a failure.
  void CheckPeers() const {
    const SharedControl* c = seg_.control();
    const int32_t f = c->failed_rank.load(std::memory_order_acquire);
    if (f >= 0 && f != rank_)
      throw ExecError("rank " + std::to_string(rank_) + ": stopping because rank " +
                      std::to_string(f) + " failed: " + std::string(c->reason));
  }

  // Rank-major all-gather of `bytes` from every rank through the exchange areas.
  void AllGatherRaw(const void* send, int64_t bytes, void* recv) {
    KV_CHECK(bytes <= seg_.exchange_bytes(),
             "all-gather of " << bytes << " bytes exceeds the exchange area");
    std::memcpy(seg_.exchange(rank_), send, static_cast<size_t>(bytes));
    Barrier();
    for (int r = 0; r < geo_.ranks; ++r)
      std::memcpy(static_cast<uint8_t*>(recv) + r * bytes, seg_.exchange(r),
                  static_cast<size_t>(bytes));
    Barrier();
  }

  // In-place all-reduce (sum of uint8, wrapping, as ncclUint8 + ncclSum).
  void AllReduceSumBytes(uint8_t* buf, int64_t bytes) {
    KV_CHECK(bytes <= seg_.exchange_bytes(),
             "all-reduce of " << bytes << " bytes exceeds the exchange area");
    std::memcpy(seg_.exchange(rank_), buf, static_cast<size_t>(bytes));
    Barrier();
    std::memset(buf, 0, static_cast<size_t>(bytes));
    for (int r = 0; r < geo_.ranks; ++r) {
      const uint8_t* src = seg_.exchange(r);
      for (int64_t i = 0; i < bytes; ++i) buf[i] = static_cast<uint8_t>(buf[i] + src[i]);
    }
    Barrier();
  }

  ExecGeometry geo_;
  HostSegment& seg_;
  int rank_;
  double timeout_s_;
  std::vector<kernels::PoolRef> pools_;      // this rank's, per pool
  std::vector<kernels::PoolRef> all_pools_;  // [pool * ranks + rank]
  std::vector<uint8_t> host_;
  std::vector<uint8_t> evict_buf_;  // EvictCaches, allocated on first use
  unsigned evict_count_ = 0;
  std::vector<kernels::HostPoolRef> host_pools_;
  std::vector<uint8_t> dense_, send_, recv_;
  const GatherIndex* gi_ = nullptr;
  std::vector<Clock::time_point> marks_;
  std::vector<VerifyResult> results_;
  std::vector<int64_t> reduced_;  // AllReduceMin results, by handle (until ReleaseMarks)
  Clock::time_point epoch_;
  uint64_t barriers_ = 0;
};

}  // namespace

std::unique_ptr<RankBackend> MakeHostBackend(const ExecGeometry& geo, HostSegment& segment,
                                             int rank, double timeout_s) {
  return std::make_unique<HostBackend>(geo, segment, rank, timeout_s);
}

}  // namespace kvlanes::exec

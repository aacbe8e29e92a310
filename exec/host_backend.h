// The host backend: the executor's logic on host memory, so CI runs it end to end without a GPU.
// Rank processes (forked by --launch local, or started by a launcher with --launch env and a
// file rendezvous on one node) share one memory segment: every rank's "device" pools live in it
// (so p2p reads a peer's pool as CUDA IPC would), plus one exchange area per rank through which
// the collectives really move bytes (all-gather: each rank writes its shard, everyone copies all
// shards; all-reduce: each writes its buffer, everyone sums all). Host (CPU tier) pools are
// private per rank. Copies use memcpy and the kernels' CPU references; time is a steady clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "exec/backend.h"

namespace kvlanes::exec {

inline constexpr int kMaxHostRanks = 64;

// The shared segment's control block: barrier state and the first failure, which every rank
// polls while it waits so that one rank's failure stops the others at once.
struct SharedControl {
  std::atomic<uint64_t> magic;
  std::atomic<int32_t> failed_rank;  // -1 while none
  std::atomic<uint32_t> arrived;
  std::atomic<uint64_t> generation;
  std::atomic<uint64_t> reached[kMaxHostRanks];  // barriers entered per rank
  char reason[1024];
};

class HostSegment {
 public:
  ~HostSegment();
  // Anonymous shared memory, created before forking the rank processes.
  static std::unique_ptr<HostSegment> CreateAnonymous(const ExecGeometry& geo);
  // A file on one node (--launch env): rank 0 creates it, the others wait for it (timeout_s).
  static std::unique_ptr<HostSegment> OpenFile(const std::string& path, const ExecGeometry& geo,
                                               int rank, double timeout_s);

  SharedControl* control() const { return reinterpret_cast<SharedControl*>(base_); }
  uint8_t* pools(int rank) const {
    return base_ + pools_offset_ + static_cast<size_t>(rank) * rank_stride_;
  }
  uint8_t* exchange(int rank) const { return pools(rank) + exchange_offset_; }
  int64_t exchange_bytes() const { return exchange_bytes_; }
  // Records the first failure (later ones are ignored). Safe from any process mapping it.
  void MarkFailed(int rank, const std::string& reason);
  // Removes the backing file, if any (rank 0 at the end of a --launch env run).
  void Unlink();

 private:
  HostSegment(const ExecGeometry& geo);
  void Map(int fd);
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  size_t pools_offset_ = 0, rank_stride_ = 0, exchange_offset_ = 0;
  int64_t exchange_bytes_ = 0;
  std::string path_;
};

// REQUIRES: segment outlives the backend; geo.ranks <= kMaxHostRanks.
std::unique_ptr<RankBackend> MakeHostBackend(const ExecGeometry& geo, HostSegment& segment,
                                             int rank, double timeout_s);

}  // namespace kvlanes::exec

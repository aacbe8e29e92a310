// Argument validation and index builders shared by the CPU reference and the CUDA launchers.
#include "kernels/materialize.h"

#include <string>

#include "kernels/check.h"

namespace kvlanes::kernels {

int64_t PackedRecordBytes(std::span<const DenseRef> dense, int64_t num_layers) {
  int64_t bytes = 0;
  for (const DenseRef& d : dense) bytes += num_layers * d.chunk_bytes();
  return bytes;
}

int64_t PackedRecordPoolOffset(std::span<const DenseRef> dense, int64_t num_layers, int k) {
  KVLANES_KERNELS_CHECK(k >= 0 && k < static_cast<int>(dense.size()), "pool index out of range");
  int64_t offset = 0;
  for (int j = 0; j < k; ++j) offset += num_layers * dense[j].chunk_bytes();
  return offset;
}

namespace {

std::string Num(int64_t v) { return std::to_string(v); }

std::string CheckGeometry(const PoolGeometry& g, const std::string& what) {
  if (g.num_layers < 0 || g.num_slots < 0) return what + ": negative num_layers or num_slots";
  if (g.page_tokens < 1) return what + ": page_tokens must be >= 1, got " + Num(g.page_tokens);
  if (g.elem_bytes < 1) return what + ": elem_bytes must be >= 1, got " + Num(g.elem_bytes);
  return "";
}

std::string CheckPools(std::span<const PoolRef> pools, LayerRange layers, bool moves_bytes) {
  if (pools.empty() || pools.size() > static_cast<size_t>(kMaxPools)) {
    return "pools: need 1.." + Num(kMaxPools) + " pools, got " + Num(pools.size());
  }
  if (layers.begin < 0 || layers.end < layers.begin) {
    return "layers: bad range [" + Num(layers.begin) + ", " + Num(layers.end) + ")";
  }
  for (size_t k = 0; k < pools.size(); ++k) {
    const std::string what = "pools[" + Num(k) + "]";
    if (std::string e = CheckGeometry(pools[k].geo, what); !e.empty()) return e;
    if (layers.end > pools[k].geo.num_layers) {
      return what + ": layers end " + Num(layers.end) + " > num_layers " +
             Num(pools[k].geo.num_layers);
    }
    if (moves_bytes && pools[k].data == nullptr) return what + ": data is null";
  }
  return "";
}

std::string CheckDense(std::span<const DenseRef> dense, int64_t pages_needed, bool moves_bytes) {
  if (dense.empty() || dense.size() > static_cast<size_t>(kMaxPools)) {
    return "dense: need 1.." + Num(kMaxPools) + " buffers, got " + Num(dense.size());
  }
  for (size_t k = 0; k < dense.size(); ++k) {
    const std::string what = "dense[" + Num(k) + "]";
    if (dense[k].page_tokens < 1 || dense[k].elem_bytes < 1) {
      return what + ": page_tokens and elem_bytes must be >= 1";
    }
    if (dense[k].num_pages < pages_needed) {
      return what + ": num_pages " + Num(dense[k].num_pages) + " < pages written " +
             Num(pages_needed);
    }
    if (moves_bytes && dense[k].data == nullptr) return what + ": data is null";
  }
  return "";
}

std::string CheckDenseMatchesPools(std::span<const DenseRef> dense, std::span<const PoolRef> pools,
                                   size_t pools_per_kind) {
  if (dense.size() * pools_per_kind != pools.size()) {
    return "dense: " + Num(dense.size()) + " buffers for " + Num(pools.size() / pools_per_kind) +
           " pool kinds";
  }
  for (size_t k = 0; k < dense.size(); ++k) {
    const PoolGeometry& g = pools[k * pools_per_kind].geo;
    if (dense[k].page_tokens != g.page_tokens || dense[k].elem_bytes != g.elem_bytes) {
      return "dense[" + Num(k) + "]: page_tokens/elem_bytes differ from its pool's";
    }
  }
  return "";
}

}  // namespace

std::string ValidateArgs(const PackArgs& a) {
  if (a.num_pages < 0) return "num_pages is negative";
  const bool moves = a.num_pages > 0 && a.layers.size() > 0;
  if (std::string e = CheckPools(a.pools, a.layers, moves); !e.empty()) return e;
  if (a.num_pages > 0 && a.slots == nullptr) return "slots is null";
  if (moves && a.send == nullptr) return "send is null";
  return "";
}

std::string ValidateArgs(const UnpackArgs& a) {
  if (a.num_dense_pages < 0 || a.num_records < 0 || a.num_layers < 0) {
    return "num_dense_pages, num_records and num_layers must be >= 0";
  }
  const bool moves = a.num_dense_pages > 0 && a.num_layers > 0;
  if (std::string e = CheckDense(a.dense, a.num_dense_pages, moves); !e.empty()) return e;
  if (a.num_dense_pages > 0 && a.recv_index == nullptr) return "recv_index is null";
  if (moves && a.num_records > 0 && a.recv == nullptr) return "recv is null";
  return "";
}

std::string ValidateArgs(const ZigzagArgs& a) {
  if (a.run.num_ranks < 1) return "run.num_ranks must be >= 1, got " + Num(a.run.num_ranks);
  if (a.run.num_pages < 0) return "run.num_pages is negative";
  if (a.num_layers < 0) return "num_layers is negative";
  if (a.dense_first_page < 0) return "dense_first_page is negative";
  if (a.shard_pages < a.run.MaxShardPages()) {
    return "shard_pages " + Num(a.shard_pages) + " < largest zigzag shard " +
           Num(a.run.MaxShardPages());
  }
  const bool moves = a.run.num_pages > 0 && a.num_layers > 0;
  if (std::string e = CheckDense(a.dense, a.dense_first_page + a.run.num_pages, moves);
      !e.empty()) {
    return e;
  }
  if (moves && a.recv == nullptr) return "recv is null";
  return "";
}

std::string ValidateArgs(const ScatterDenseArgs& a) {
  if (a.num_dense_pages < 0) return "num_dense_pages is negative";
  const bool moves = a.num_dense_pages > 0 && a.layers.size() > 0;
  if (std::string e = CheckPools(a.pools, a.layers, moves); !e.empty()) return e;
  if (std::string e = CheckDense(a.dense, a.num_dense_pages, moves); !e.empty()) return e;
  if (std::string e = CheckDenseMatchesPools(a.dense, a.pools, 1); !e.empty()) return e;
  if (a.num_dense_pages > 0 && a.owner_slot == nullptr) return "owner_slot is null";
  if (a.num_owned > a.num_dense_pages) return "num_owned exceeds num_dense_pages";
  if (a.num_owned > 0 && (a.owned_pages == nullptr || a.owned_slots == nullptr)) {
    return "owned_pages or owned_slots is null";
  }
  return "";
}

void ListOwnedPages(std::span<const int32_t> owner_slot, std::vector<int32_t>* pages,
                    std::vector<int32_t>* slots) {
  pages->clear();
  slots->clear();
  for (size_t p = 0; p < owner_slot.size(); ++p) {
    if (owner_slot[p] >= 0) {
      pages->push_back(static_cast<int32_t>(p));
      slots->push_back(owner_slot[p]);
    }
  }
}

std::string ValidateArgs(const PeerGatherArgs& a) {
  if (a.num_ranks < 1 || a.num_ranks > kMaxPeerRanks) {
    return "num_ranks must be in 1.." + Num(kMaxPeerRanks) + ", got " + Num(a.num_ranks);
  }
  if (a.num_dense_pages < 0) return "num_dense_pages is negative";
  if (a.peer_pools.empty() || a.peer_pools.size() % a.num_ranks != 0 ||
      a.peer_pools.size() / a.num_ranks > static_cast<size_t>(kMaxPools)) {
    return "peer_pools: need num_pools * num_ranks entries (num_pools 1.." + Num(kMaxPools) +
           "), got " + Num(a.peer_pools.size()) + " for " + Num(a.num_ranks) + " ranks";
  }
  const bool moves = a.num_dense_pages > 0 && a.layers.size() > 0;
  // CheckPools bounds the count by kMaxPools; check each kind's group separately.
  const size_t ranks = static_cast<size_t>(a.num_ranks);
  for (size_t k = 0; k < a.peer_pools.size() / ranks; ++k) {
    std::span<const PoolRef> group = a.peer_pools.subspan(k * ranks, ranks);
    for (size_t r = 0; r < ranks; ++r) {
      if (std::string e = CheckPools(group.subspan(r, 1), a.layers, moves); !e.empty()) {
        return "peer_pools[" + Num(k * ranks + r) + "]: " + e;
      }
      const PoolGeometry& g0 = group[0].geo;
      const PoolGeometry& g = group[r].geo;
      if (g.num_layers != g0.num_layers || g.num_slots != g0.num_slots ||
          g.page_tokens != g0.page_tokens || g.elem_bytes != g0.elem_bytes) {
        return "peer_pools[" + Num(k * ranks + r) + "]: geometry differs from rank 0's";
      }
    }
  }
  if (std::string e = CheckDense(a.dense, a.num_dense_pages, moves); !e.empty()) return e;
  if (std::string e = CheckDenseMatchesPools(a.dense, a.peer_pools, ranks); !e.empty()) return e;
  if (a.num_dense_pages > 0 && (a.src_rank == nullptr || a.src_slot == nullptr)) {
    return "src_rank or src_slot is null";
  }
  return "";
}

std::vector<int32_t> BuildUnpackIndex(std::span<const std::vector<int64_t>> shard_logical_pages,
                                      int64_t shard_pages, int64_t num_dense_pages) {
  KVLANES_KERNELS_CHECK(num_dense_pages >= 0 && shard_pages >= 0, "negative size");
  KVLANES_KERNELS_CHECK(static_cast<int64_t>(shard_logical_pages.size()) * shard_pages <= INT32_MAX,
                        "record indices exceed int32");
  std::vector<int32_t> index(static_cast<size_t>(num_dense_pages), -1);
  for (size_t r = 0; r < shard_logical_pages.size(); ++r) {
    const std::vector<int64_t>& shard = shard_logical_pages[r];
    KVLANES_KERNELS_CHECK(static_cast<int64_t>(shard.size()) <= shard_pages,
                          "rank " + Num(r) + " holds " + Num(shard.size()) +
                              " pages, more than shard_pages " + Num(shard_pages));
    for (size_t k = 0; k < shard.size(); ++k) {
      const int64_t page = shard[k];
      KVLANES_KERNELS_CHECK(
          page >= 0 && page < num_dense_pages,
          "logical page " + Num(page) + " outside [0, " + Num(num_dense_pages) + ")");
      KVLANES_KERNELS_CHECK(index[page] == -1, "logical page " + Num(page) + " held by two shards");
      index[page] =
          static_cast<int32_t>(static_cast<int64_t>(r) * shard_pages + static_cast<int64_t>(k));
    }
  }
  return index;
}

std::vector<int64_t> ZigzagShardLogicalPages(const ZigzagRun& run, int64_t rank) {
  KVLANES_KERNELS_CHECK(rank >= 0 && rank < run.num_ranks, "rank out of range");
  std::vector<int64_t> pages;
  pages.reserve(static_cast<size_t>(run.ShardPages(rank)));
  for (int64_t j : {rank, run.num_chunks() - 1 - rank}) {
    for (int64_t i = 0; i < run.ChunkSize(j); ++i) pages.push_back(run.ChunkStart(j) + i);
  }
  return pages;
}

}  // namespace kvlanes::kernels

// CPU reference implementations of kernels/materialize.h: one memcpy per page-layer chunk,
// addresses written out from the layouts in page_layout.h. Deliberately simple; the kernels are
// checked against these byte for byte.
#include <cstring>
#include <string>

#include "kernels/check.h"
#include "kernels/materialize.h"

namespace kvlanes::kernels {
namespace {

using Byte = unsigned char;

Byte* At(void* base, int64_t offset) { return static_cast<Byte*>(base) + offset; }
const Byte* At(const void* base, int64_t offset) { return static_cast<const Byte*>(base) + offset; }

// Chunk (layer, slot) of a layer-first device pool.
const Byte* PoolChunk(const PoolRef& pool, int64_t layer, int64_t slot) {
  return At(pool.data, (layer * pool.geo.num_slots + slot) * pool.geo.chunk_bytes());
}

// Chunk (layer index within the buffer, page) of a logical-dense buffer.
Byte* DenseChunk(const DenseRef& dense, int64_t layer_index, int64_t page) {
  return At(dense.data, (layer_index * dense.num_pages + page) * dense.chunk_bytes());
}

void RequireValid(const std::string& error, const char* op) {
  KVLANES_KERNELS_CHECK(error.empty(), std::string(op) + ": " + error);
}

void RequireIndex(int64_t value, int64_t lo, int64_t hi, const char* what, int64_t i) {
  KVLANES_KERNELS_CHECK(value >= lo && value < hi, std::string(what) + "[" + std::to_string(i) +
                                                       "] = " + std::to_string(value) +
                                                       " outside [" + std::to_string(lo) + ", " +
                                                       std::to_string(hi) + ")");
}

}  // namespace

void PackPagesCpu(const PackArgs& a) {
  RequireValid(ValidateArgs(a), "PackPagesCpu");
  const int64_t record = PackedRecordBytes(a.pools, a.layers);
  for (int64_t i = 0; i < a.num_pages; ++i) {
    const int64_t slot = a.slots[i];
    int64_t offset = i * record;
    for (const PoolRef& pool : a.pools) {
      RequireIndex(slot, 0, pool.geo.num_slots, "slots", i);
      const int64_t c = pool.geo.chunk_bytes();
      for (int64_t l = a.layers.begin; l < a.layers.end; ++l) {
        std::memcpy(At(a.send, offset), PoolChunk(pool, l, slot), c);
        offset += c;
      }
    }
  }
}

void UnpackPagesCpu(const UnpackArgs& a) {
  RequireValid(ValidateArgs(a), "UnpackPagesCpu");
  const int64_t record = PackedRecordBytes(a.dense, a.num_layers);
  for (int64_t p = 0; p < a.num_dense_pages; ++p) {
    const int64_t r = a.recv_index[p];
    if (r == -1) continue;
    RequireIndex(r, 0, a.num_records, "recv_index", p);
    int64_t offset = r * record;
    for (const DenseRef& dense : a.dense) {
      const int64_t c = dense.chunk_bytes();
      for (int64_t li = 0; li < a.num_layers; ++li) {
        std::memcpy(DenseChunk(dense, li, p), At(a.recv, offset), c);
        offset += c;
      }
    }
  }
}

void ZigzagReorderCpu(const ZigzagArgs& a) {
  RequireValid(ValidateArgs(a), "ZigzagReorderCpu");
  const int64_t record = PackedRecordBytes(a.dense, a.num_layers);
  for (int64_t p = 0; p < a.run.num_pages; ++p) {
    int64_t offset = a.run.RecvRecord(p, a.shard_pages) * record;
    for (const DenseRef& dense : a.dense) {
      const int64_t c = dense.chunk_bytes();
      for (int64_t li = 0; li < a.num_layers; ++li) {
        std::memcpy(DenseChunk(dense, li, a.dense_first_page + p), At(a.recv, offset), c);
        offset += c;
      }
    }
  }
}

void ScatterDenseCpu(const ScatterDenseArgs& a) {
  RequireValid(ValidateArgs(a), "ScatterDenseCpu");
  for (int64_t p = 0; p < a.num_dense_pages; ++p) {
    const int64_t slot = a.owner_slot[p];
    for (size_t k = 0; k < a.pools.size(); ++k) {
      const PoolRef& pool = a.pools[k];
      if (slot != -1) RequireIndex(slot, 0, pool.geo.num_slots, "owner_slot", p);
      const int64_t c = pool.geo.chunk_bytes();
      for (int64_t l = a.layers.begin; l < a.layers.end; ++l) {
        Byte* dst = DenseChunk(a.dense[k], l - a.layers.begin, p);
        if (slot == -1) {
          if (a.zero_fill != ZeroFill::kNone) std::memset(dst, 0, c);
        } else {
          std::memcpy(dst, PoolChunk(pool, l, slot), c);
        }
      }
    }
  }
}

void PeerGatherCpu(const PeerGatherArgs& a) {
  RequireValid(ValidateArgs(a), "PeerGatherCpu");
  const size_t ranks = static_cast<size_t>(a.num_ranks);
  for (int64_t p = 0; p < a.num_dense_pages; ++p) {
    const int64_t rank = a.src_rank[p];
    const int64_t slot = a.src_slot[p];
    RequireIndex(rank, 0, a.num_ranks, "src_rank", p);
    for (size_t k = 0; k < a.dense.size(); ++k) {
      const PoolRef& pool = a.peer_pools[k * ranks + static_cast<size_t>(rank)];
      RequireIndex(slot, 0, pool.geo.num_slots, "src_slot", p);
      const int64_t c = pool.geo.chunk_bytes();
      for (int64_t l = a.layers.begin; l < a.layers.end; ++l) {
        std::memcpy(DenseChunk(a.dense[k], l - a.layers.begin, p), PoolChunk(pool, l, slot), c);
      }
    }
  }
}

}  // namespace kvlanes::kernels

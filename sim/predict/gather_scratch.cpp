#include "sim/predict/gather_scratch.h"

#include <algorithm>
#include <string>

#include "io/input_error.h"
#include "sim/cache/placement.h"
#include "sim/check.h"

namespace kvlanes {
namespace {

// Which buffers the gather methods the config may choose use.
struct Buffers {
  bool dense_ring = false;  // a ring of dense layer buffers (dense, packed, zigzag, p2p, broadcast)
  bool pack = false;        // a send buffer and one receive buffer (packed, zigzag)
  bool recv_ring = false;   // a send buffer and a ring of receive buffers (owner_major)
};

Buffers BuffersOf(const ReplayConfig& cfg, bool by_layer) {
  Buffers b;
  // Token interleave materializes nothing: partial_merge moves queries and partial outputs,
  // whose buffers are not kept in pages.
  if (cfg.cache.interleave_tokens > 0) return b;
  if (by_layer) {  // layer_split: broadcast into the dense layer buffer
    b.dense_ring = true;
    return b;
  }
  const std::optional<GatherChoice> m = kGatherChoiceNames.Find(cfg.gather.method);
  switch (m.value_or(GatherChoice::kCost)) {
    case GatherChoice::kDense:
    case GatherChoice::kP2p:
      b.dense_ring = true;
      break;
    case GatherChoice::kPacked:
    case GatherChoice::kZigzagGated:
      b.dense_ring = b.pack = true;
      break;
    case GatherChoice::kOwnerMajor:  // owner_major where proven, else packed
      b.dense_ring = b.pack = b.recv_ring = true;
      break;
    case GatherChoice::kCost:
      b.dense_ring = b.pack = b.recv_ring = true;
      break;
  }
  return b;
}

}  // namespace

int64_t GatherScratchPageLayers(const ReplayConfig& cfg, bool by_layer, int64_t cache_pages) {
  const Buffers b = BuffersOf(cfg, by_layer);
  const int64_t ring = cfg.gather.prefetch_layers + 1, N = cfg.cache.cp_size;
  const int64_t prefix =
      by_layer ? LayerSplitCapacityPages(cache_pages, cfg.model.layers, static_cast<int>(N))
               : N * cache_pages;
  const int64_t shard = cache_pages;
  int64_t u = 0;
  if (b.dense_ring) u += ring * prefix;
  if (b.pack || b.recv_ring) u += shard;                                 // send
  if (b.pack || b.recv_ring) u += (b.recv_ring ? ring : 1) * N * shard;  // receive
  return u;
}

GatherScratch GatherScratchOf(const ReplayConfig& cfg, bool by_layer) {
  GatherScratch s;
  s.counted = cfg.gather.scratch == kGatherScratchNames.CName(GatherScratchBudget::kCounted);
  s.ring_layers = cfg.gather.prefetch_layers + 1;
  const Buffers b = BuffersOf(cfg, by_layer);
  s.packs = b.pack || b.recv_ring;
  const int64_t C = cfg.cache.device_pages_per_lane, L = cfg.model.layers;
  KV_CHECK(C > 0 && L > 0, "gather scratch of " << C << " pages x " << L << " layers");
  // The cache keeps c pages per lane, the scratch for a prefix as large as c pages allow takes
  // ceil(u(c) / L) more: the largest c with c + ceil(u(c) / L) <= C (u grows with c).
  const auto lost = [&](int64_t c) {
    return (GatherScratchPageLayers(cfg, by_layer, c) + L - 1) / L;
  };
  int64_t c = C;
  if (s.counted) {
    int64_t lo = 0, hi = C;  // lo fits (0 + 0 <= C); find the largest that fits
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (mid + lost(mid) <= C)
        lo = mid;
      else
        hi = mid - 1;
    }
    c = lo;
    if (c < 1) {
      const auto it = cfg.origins.find("gather.scratch");
      const std::string msg =
          "the gather buffers (a ring of " + std::to_string(s.ring_layers) +
          " layer(s) of the largest prefix" + (s.packs ? ", and the pack buffers" : "") +
          ") leave no device page of cache.device_pages_per_lane " + std::to_string(C) +
          " to the cache (one page takes " + std::to_string(lost(1)) +
          " page(s) of scratch); raise the capacity, lower gather.prefetch_layers or set "
          "gather.scratch: outside";
      if (it == cfg.origins.end()) throw InputError("", 0, "gather.scratch", msg);
      throw InputError(it->second.file, it->second.line, it->second.field, msg);
    }
  }
  s.cache_pages = c;
  s.page_layers = GatherScratchPageLayers(cfg, by_layer, c);
  s.bytes_per_lane = s.page_layers * (cfg.model.PageBytes(cfg.cache.page_tokens) / L);
  s.pages_lost = s.counted ? C - c : 0;
  s.max_prefix_pages = by_layer ? LayerSplitCapacityPages(c, L, static_cast<int>(cfg.cache.cp_size))
                                : cfg.cache.cp_size * c;
  s.max_shard_pages = by_layer ? 0 : c;
  return s;
}

nlohmann::ordered_json GatherScratchJson(const GatherScratch& s, int64_t device_pages_per_lane) {
  return nlohmann::ordered_json{
      {"scratch", kGatherScratchNames.CName(s.counted ? GatherScratchBudget::kCounted
                                                      : GatherScratchBudget::kOutside)},
      {"ring_layers", s.ring_layers},
      {"largest_prefix_pages", s.max_prefix_pages},
      {"largest_shard_pages", s.max_shard_pages},
      {"pack_buffers", s.packs},
      {"page_layers_per_lane", s.page_layers},
      {"bytes_per_lane", s.bytes_per_lane},
      {"device_pages_per_lane", device_pages_per_lane},
      {"device_pages_lost_per_lane", s.pages_lost},
      {"cache_pages_per_lane", s.cache_pages}};
}

GatherScratch GatherScratchOf(const ReplayConfig& cfg) {
  const PlacementRule* r = FindPlacementRule(cfg.cache.placement);
  return GatherScratchOf(cfg, r != nullptr && r->by_layer);
}

}  // namespace kvlanes

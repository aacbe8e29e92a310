// The gather's scratch buffers and the device pages they take from the cache. Every gather
// method writes a layer of the prefix into a buffer the forward pass reads; with
// gather.prefetch_layers k the executor keeps a ring of k + 1 such layers, and the methods that
// pack each rank's shard first (packed, zigzag, owner_major) keep a send and a receive buffer
// beside it. With gather.scratch: counted those bytes come out of cache.device_pages_per_lane,
// as a serving engine allocates its scratch from the memory budget before sizing the KV pool.
// The formulas are written in docs/cost_model.md ("Gather scratch and device capacity").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "sim/config.h"

namespace kvlanes {

struct GatherScratch {
  bool counted = false;          // gather.scratch is counted (else every number below but
                                 // cache_pages is still computed, and nothing is lost)
  int64_t ring_layers = 1;       // gather.prefetch_layers + 1
  int64_t max_prefix_pages = 0;  // the largest prefix the remaining cache can hold: the bound
  int64_t max_shard_pages = 0;   // the largest shard one lane can hold (its cache pages)
  bool packs = false;            // a method the config may choose packs shards (send/receive)
  int64_t page_layers = 0;       // scratch per lane, in page-layers (one page, one layer)
  int64_t bytes_per_lane = 0;    // page_layers x the bytes of a page-layer, all pools
  int64_t pages_lost = 0;        // ceil(page_layers / layers): device pages per lane it takes
  int64_t cache_pages = 0;       // cache.device_pages_per_lane - pages_lost
};

// The scratch of `cfg` on a cache whose placement is by layer (`by_layer`, layer_split) or not.
// Throws InputError at gather.scratch when the ring leaves the cache no device page.
// REQUIRES: a validated config apart from this check.
GatherScratch GatherScratchOf(const ReplayConfig& cfg, bool by_layer);
// The same with the placement named by cache.placement (an unknown name counts as not by layer:
// the config check reports it).
GatherScratch GatherScratchOf(const ReplayConfig& cfg);

// The report's and explain's view of `s` (the budget was `device_pages_per_lane`): scratch,
// ring_layers, largest_prefix_pages, largest_shard_pages, pack_buffers, page_layers_per_lane,
// bytes_per_lane, device_pages_per_lane, device_pages_lost_per_lane, cache_pages_per_lane.
nlohmann::ordered_json GatherScratchJson(const GatherScratch& s, int64_t device_pages_per_lane);

// Scratch page-layers per lane for `cache_pages` device pages per lane of cache (no fit check):
// the ring of the dense layer buffer (ring x largest prefix) and, when a packing method may be
// chosen, the send (largest shard) and receive (ranks x largest shard) buffers; owner_major's
// result is its receive buffer, so its ring is of receive buffers. Exposed for the tests.
int64_t GatherScratchPageLayers(const ReplayConfig& cfg, bool by_layer, int64_t cache_pages);

}  // namespace kvlanes

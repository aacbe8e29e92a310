// A trace made K times as long for the replay benchmarks (`bench replay`, `bench policies`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "sim/check.h"
#include "traces/trace.h"

namespace kvlanes::cli {

// K copies of `t` one after another: copy c has every block id + c * (max id + 1) and every
// arrival + c * (last arrival + 1 ns), so copies share no prefix and arrivals stay sorted.
inline Trace ScaleTrace(const Trace& t, int k) {
  if (k == 1) return t;
  uint64_t max_id = 0;
  int64_t last_ns = 0;
  for (const Request& r : t.requests) {
    for (uint64_t b : r.block_ids) max_id = std::max(max_id, b);
    last_ns = std::max(last_ns, r.arrival_ns);
  }
  KV_CHECK(max_id < ~uint64_t{0} / static_cast<uint64_t>(k), "block ids too large to offset");
  Trace out;
  out.format = t.format;
  out.block_tokens = t.block_tokens;
  out.sources = t.sources;
  out.requests.reserve(t.requests.size() * static_cast<size_t>(k));
  // Every copy's ids in one store, as the readers keep them: filled first, then pointed into.
  auto store = std::make_shared<BlockIds::Store>();
  size_t ids = 0;
  for (const Request& r : t.requests) ids += r.block_ids.size();
  store->reserve(ids * static_cast<size_t>(k));
  for (int c = 0; c < k; ++c) {
    const uint64_t id_off = static_cast<uint64_t>(c) * (max_id + 1);
    for (const Request& r : t.requests)
      for (uint64_t b : r.block_ids) store->push_back(b + id_off);
  }
  size_t first = 0;
  for (int c = 0; c < k; ++c) {
    const int64_t ns_off = static_cast<int64_t>(c) * (last_ns + 1);
    for (const Request& r : t.requests) {
      Request s = r;
      s.block_ids = BlockIds(store, first, r.block_ids.size());
      first += r.block_ids.size();
      s.arrival_ns += ns_off;
      out.requests.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace kvlanes::cli

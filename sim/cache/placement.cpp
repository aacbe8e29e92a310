#include "sim/cache/placement.h"

#include <algorithm>
#include <vector>

#include "io/name_table.h"
#include "sim/check.h"
#include "sim/checked_math.h"

namespace kvlanes {

void ZigzagChunk(int64_t n, int ranks, int chunk, int64_t* begin, int64_t* end) {
  const int64_t chunks = 2 * static_cast<int64_t>(ranks);
  const int64_t q = n / chunks, rem = n % chunks;
  *begin = chunk * q + (chunk < rem ? chunk : rem);
  *end = *begin + q + (chunk < rem ? 1 : 0);
}

void AssignZigzag(int ranks, std::span<uint16_t> owners) {
  const int64_t n = static_cast<int64_t>(owners.size());
  for (int c = 0; c < 2 * ranks; ++c) {
    int64_t b, e;
    ZigzagChunk(n, ranks, c, &b, &e);
    const uint16_t r = static_cast<uint16_t>(c < ranks ? c : 2 * ranks - 1 - c);
    for (int64_t i = b; i < e; ++i) owners[static_cast<size_t>(i)] = r;
  }
}

void AssignInterleave(int ranks, std::span<uint16_t> owners) {
  for (size_t i = 0; i < owners.size(); ++i)
    owners[i] = static_cast<uint16_t>(i % static_cast<size_t>(ranks));
}

void AssignOwnerMajor(int ranks, int64_t first_page, std::span<uint16_t> owners) {
  KV_CHECK(ranks > 0 && first_page >= 0, "owner_major on " << ranks << " ranks at " << first_page);
  const int64_t n = ranks;
  for (size_t i = 0; i < owners.size(); ++i)
    owners[i] = static_cast<uint16_t>((first_page + static_cast<int64_t>(i)) % n);
}

bool OwnersCyclic(std::span<const uint16_t> owners, int ranks) {
  for (size_t p = 0; p < owners.size(); ++p)
    if (owners[p] != p % static_cast<size_t>(ranks)) return false;
  return true;
}

int64_t OwnerMajorShardPages(int64_t pages, int ranks, int rank) {
  return pages / ranks + (rank < pages % ranks ? 1 : 0);
}

void LayerBlock(int64_t layers, int ranks, int rank, int64_t* begin, int64_t* end) {
  KV_CHECK(ranks > 0 && rank >= 0 && rank < ranks && layers >= 0,
           "layer block " << rank << " of " << ranks << " over " << layers << " layers");
  const int64_t q = layers / ranks, rem = layers % ranks;
  *begin = rank * q + std::min<int64_t>(rank, rem);
  *end = *begin + q + (rank < rem ? 1 : 0);
}

int LayerOwner(int64_t layers, int ranks, int64_t layer) {
  KV_CHECK(layer >= 0 && layer < layers, "layer " << layer << " of " << layers);
  for (int r = 0; r < ranks; ++r) {
    int64_t b, e;
    LayerBlock(layers, ranks, r, &b, &e);
    if (layer < e) return r;
  }
  KV_CHECK(false, "layer " << layer << " in no block");
  return 0;
}

int64_t LayerSplitCapacityPages(int64_t pages_per_lane, int64_t layers, int ranks) {
  KV_CHECK(layers > 0 && ranks > 0 && pages_per_lane >= 0,
           "layer_split capacity of " << pages_per_lane << " pages, " << layers << " layers, "
                                      << ranks << " ranks");
  const int64_t largest = (layers + ranks - 1) / ranks;
  // pages_per_lane x layers fits: ValidateConfig bounds every lane's bytes.
  return ProductOrDie({pages_per_lane, layers}, "device_pages_per_lane x layers") / largest;
}

int64_t OwnerTruthHitPages(std::span<const uint8_t> held) {
  for (size_t p = 0; p < held.size(); ++p)
    if (!held[p]) return static_cast<int64_t>(p);
  return static_cast<int64_t>(held.size());
}

void LaneHitReports(std::span<const uint16_t> owners, std::span<const uint8_t> held,
                    std::span<int64_t> reports) {
  KV_CHECK(owners.size() == held.size(),
           "hit reports: " << owners.size() << " owners for " << held.size() << " pages");
  for (int64_t& r : reports) r = static_cast<int64_t>(owners.size());
  for (size_t p = owners.size(); p-- > 0;) {
    KV_CHECK(owners[p] < reports.size(),
             "hit reports: owner " << owners[p] << " of " << reports.size() << " ranks");
    if (!held[p]) reports[owners[p]] = static_cast<int64_t>(p);
  }
}

int64_t MinAgreedHitPages(std::span<const int64_t> reports) {
  if (reports.empty()) return 0;
  int64_t m = reports[0];
  for (int64_t r : reports) m = std::min(m, r);
  return m;
}

namespace {
void ZigzagRule(int ranks, int64_t, std::span<uint16_t> owners) { AssignZigzag(ranks, owners); }
void InterleaveRule(int ranks, int64_t, std::span<uint16_t> owners) {
  AssignInterleave(ranks, owners);
}

// layer_split: every page is on every lane (for its layers); the lane of record is 0.
void LayerSplitRule(int, int64_t, std::span<uint16_t> owners) {
  for (uint16_t& o : owners) o = 0;
}

const PlacementRule kRules[] = {
    {"zigzag", "2N balanced chunks, rank r owns chunks r and 2N-1-r (causal balance)", false,
     &ZigzagRule, false},
    {"interleave",
     "page i of an extent goes to rank i mod N; with cache.interleave_tokens k, runs of k tokens "
     "go round robin (decode CP) in cache units of one page per rank",
     false, &InterleaveRule, false},
    {"owner_major",
     "logical page p goes to rank p mod N: new pages continue the owner cycle of the cached path "
     "(SGLang KV-cache sharding), so every prefix is owner-major",
     false, &AssignOwnerMajor, false},
    {"layer_split",
     "rank r stores every page for its block of layers (SGLang LayerSplit); the prefix is "
     "broadcast layer by layer by the layer's owner",
     false, &LayerSplitRule, true},
    {"slot-modulo", "owner = physical page slot mod N (ownership follows the allocator)", true,
     nullptr, false},
    {"lane-balance",
     "new pages to the lanes with the most free device pages, one contiguous run per rank", false,
     nullptr, false},
};
}  // namespace

const PlacementRule* FindPlacementRule(std::string_view name) {
  for (const auto& r : kRules)
    if (name == r.name) return &r;
  return nullptr;
}

const PlacementRule& ParsePlacementRule(std::string_view name, const std::string& where,
                                        const std::string& file, int64_t line) {
  if (const PlacementRule* r = FindPlacementRule(name)) return *r;
  std::vector<std::string_view> names;
  for (const auto& r : kRules) names.push_back(r.name);
  ThrowUnknownName("placement", name, names, where, file, line);
}

std::string PlacementRuleNames() {
  std::string s;
  for (const auto& r : kRules) {
    s += s.empty() ? "" : ", ";
    s += r.name;
  }
  return s;
}

}  // namespace kvlanes

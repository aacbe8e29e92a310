#include "sim/cache/placement.h"

#include <vector>

#include "sim/check.h"
#include "traces/name_table.h"

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

namespace {
void ZigzagRule(int ranks, int64_t, std::span<uint16_t> owners) { AssignZigzag(ranks, owners); }
void InterleaveRule(int ranks, int64_t, std::span<uint16_t> owners) {
  AssignInterleave(ranks, owners);
}

const PlacementRule kRules[] = {
    {"zigzag", "2N balanced chunks, rank r owns chunks r and 2N-1-r (causal balance)", false,
     &ZigzagRule},
    {"interleave", "page i of an extent goes to rank i mod N", false, &InterleaveRule},
    {"owner_major",
     "logical page p goes to rank p mod N: new pages continue the owner cycle of the cached path "
     "(SGLang KV-cache sharding), so every prefix is owner-major",
     false, &AssignOwnerMajor},
    {"slot-modulo", "owner = physical page slot mod N (ownership follows the allocator)", true,
     nullptr},
    {"lane-balance",
     "new pages to the lanes with the most free device pages, one contiguous run per rank", false,
     nullptr},
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

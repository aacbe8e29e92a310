// Placement rules: which rank owns each page of a new extent (docs/reference_semantics.md).
// Registered by name in one table; the config, CLI, reports and docs use the same names.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace kvlanes {

struct PlacementRule {
  const char* name;
  const char* help;
  // True when owners follow the physical slots the allocator hands out (slot-modulo): the
  // engine then frees capacity by total page count and takes owners from the free list.
  bool from_allocator;
  // Fills owners[i] for page i of an extent of owners.size() pages on `ranks` ranks whose first
  // page is logical page first_page of the request. nullptr when from_allocator, or when the
  // rule needs the cache state (lane-balance): the policy then implements it in PlaceExtent
  // (policies/lane_balance.h).
  void (*assign)(int ranks, int64_t first_page, std::span<uint16_t> owners);
};

const PlacementRule* FindPlacementRule(std::string_view name);  // nullptr if unknown
// The rule named `name`; else throws InputError naming `where` (and file/line when given) with
// the valid names and the closest one.
const PlacementRule& ParsePlacementRule(std::string_view name, const std::string& where,
                                        const std::string& file = "", int64_t line = 0);
std::string PlacementRuleNames();  // "zigzag, interleave, ..."

// zigzag: 2N chunks, sizes as equal as possible with earlier chunks one page larger; rank r
// owns chunks r and 2N-1-r.
void AssignZigzag(int ranks, std::span<uint16_t> owners);
// interleave: page i goes to rank i mod N (each request's extent starts at rank 0).
void AssignInterleave(int ranks, std::span<uint16_t> owners);
// owner_major: logical page p goes to rank p mod N, whatever extent it is in: each new page
// continues the owner cycle of the cached path it extends (the rotation of an owner-classed
// allocator, upstream SGLang KV-cache sharding; docs/reference_semantics.md, "Placement rules").
void AssignOwnerMajor(int ranks, int64_t first_page, std::span<uint16_t> owners);

// The owner-major invariant of a prefix: owners[p] == p mod ranks for every logical page p.
// It implies per-rank page counts ceil(P/N) for ranks r < P mod N and floor(P/N) after.
bool OwnersCyclic(std::span<const uint16_t> owners, int ranks);
// Rank r's page count in an owner-major prefix of `pages` pages.
int64_t OwnerMajorShardPages(int64_t pages, int ranks, int rank);
// Page range [begin, end) of zigzag chunk c for an extent of n pages on N ranks.
void ZigzagChunk(int64_t n, int ranks, int chunk, int64_t* begin, int64_t* end);

}  // namespace kvlanes

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
  // True when ownership is by layer block, not by page (layer_split): every rank stores every
  // page for its block of layers, so the lanes hold the same pages and the engine keeps them on
  // one lane of record, lane 0, with the capacity of the rank holding the most layers
  // (LayerSplitCapacityPages); the prefix is materialized by broadcast.
  bool by_layer = false;
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
// layer_split: rank r owns layers [begin, end) of block r of `layers` layers cut into `ranks`
// contiguous blocks whose sizes differ by at most one (earlier blocks take the extra layers).
void LayerBlock(int64_t layers, int ranks, int rank, int64_t* begin, int64_t* end);
// The rank whose layer block holds layer `layer`.
int LayerOwner(int64_t layers, int ranks, int64_t layer);
// Pages a layer_split group can hold when each lane has `pages_per_lane` page slots of all
// `layers` layers: a page takes its block's layers on every lane, so the lane with the largest
// block, ceil(layers / ranks), binds: floor(pages_per_lane x layers / ceil(layers / ranks)).
int64_t LayerSplitCapacityPages(int64_t pages_per_lane, int64_t layers, int ranks);

// Host-hit agreement over a request's host chain (the host-only pages below its device match, in
// logical order): owners[p] is chain page p's owner lane and held[p] whether that lane holds its
// host copy (docs/reference_semantics.md, "Host-hit agreement").
// Owner-lane truth: the chain pages before the first one its owner does not hold.
int64_t OwnerTruthHitPages(std::span<const uint8_t> held);
// What each rank reports when the backup writer of a page is its owner (a rank holds and checks
// only the pages it owns): lane r's report is the chain pages before the first page r owns and
// does not hold (all of them when there is none). reports.size() is the number of ranks.
void LaneHitReports(std::span<const uint16_t> owners, std::span<const uint8_t> held,
                    std::span<int64_t> reports);
// The agreed host hit of the minimum all-reduce: the smallest report (0 without ranks).
int64_t MinAgreedHitPages(std::span<const int64_t> reports);

// Page range [begin, end) of zigzag chunk c for an extent of n pages on N ranks.
void ZigzagChunk(int64_t n, int ranks, int chunk, int64_t* begin, int64_t* end);

}  // namespace kvlanes

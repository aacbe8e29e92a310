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
  // Fills owners[i] for page i of an extent of owners.size() pages on `ranks` ranks.
  // nullptr when from_allocator, or when the rule needs the cache state (lane-balance): the
  // policy then implements it in PlaceExtent (policies/lane_balance.h).
  void (*assign)(int ranks, std::span<uint16_t> owners);
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
// Page range [begin, end) of zigzag chunk c for an extent of n pages on N ranks.
void ZigzagChunk(int64_t n, int ranks, int chunk, int64_t* begin, int64_t* end);

}  // namespace kvlanes

// The `lane-balance` placement rule (docs/reference_semantics.md, "Placement rules": policies may
// add their own): it needs the ledger, so it lives with the policies rather than in
// sim/cache/placement.cpp, whose table only names it (assign == nullptr).
#pragma once

#include <cstdint>
#include <span>

#include "sim/cache/ledger.h"

namespace kvlanes {

// Owners for a new extent of owners.size() pages: page counts per lane by water-filling the
// lanes' free device pages (each page goes to the lane with the most free pages left after the
// pages already given, ties to the lower rank; so when all lanes are full the split is even),
// then one contiguous, page-aligned run per lane in rank order.
void AssignLaneBalance(const Ledger& ledger, std::span<uint16_t> owners);

}  // namespace kvlanes

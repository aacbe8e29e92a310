// The fixed steps of the plan's page runs (docs/plan.md, "Page runs"), shared by the plan's
// line writer (plan.cpp) and its reader (plan_reader.cpp). Internal to those two files.
#pragma once

#include <array>
#include <cstdint>

namespace kvlanes::plan_runs {

// A list of tuples is written as maximal runs [first tuple..., count], tuple i of a run being
// first + i x the kind's fixed step.
using Step2 = std::array<int64_t, 2>;
using Step4 = std::array<int64_t, 4>;
inline constexpr Step2 kSlotStep{0, 1};           // evict `slot_runs`: {lane, slot}
inline constexpr Step2 kCopyStep{1, 1};           // copies: {device slot, host slot}
inline constexpr Step4 kComputeStep{1, 0, 1, 0};  // compute: {page, owner, device slot, extent}
inline constexpr Step2 kGatherStep{0, 1};         // gather: {owner, device slot}, per page

}  // namespace kvlanes::plan_runs

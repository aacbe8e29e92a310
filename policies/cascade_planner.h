// Eviction planning shared by the policies: walks a tier's candidates in eviction order the
// way the engine will evict them, including the cascade (a parent becomes a candidate once its
// last resident child is planned away), and picks victims until the demand is met.
#pragma once

#include "sim/cache/policy.h"

namespace kvlanes {

enum class PlanScope {
  // Owner-lane aware: only victims that free pages on a lane still short, or that lead (through
  // the cascade) to an unlocked ancestor holding such pages. Meets every lane's deficit whenever
  // the unlocked pages on that lane suffice.
  kLanes,
  // Rank-wide scalar: every candidate counts, stop when the total free pages suffice; a lane
  // may still be short afterwards.
  kScalar,
};

// True when `p` becomes an eviction candidate of `tier` once `removed` of its resident
// children are gone (the cascade: evicting children unlocks the ancestor).
bool CandidateAfterRemoving(const Node& p, Tier tier, uint32_t removed);

EvictionPlan PlanCascadeEviction(const CacheView& view, const LaneDemand& demand, PlanScope scope);

}  // namespace kvlanes

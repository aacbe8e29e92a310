// One gather layer through its method's component (methods/gather_method.h): each method's
// recipe is written once over the backend's primitives (exec/backend.h) in its own file, so
// that the host backend runs exactly the sequence of operations the CUDA backend runs. The
// collectives run only when the plan has several ranks: with one, the packed shard is the whole
// all-gather output and the dense buffer is already the sum (as the cost model has it).
#pragma once

#include <cstdint>

#include "exec/backend.h"

namespace kvlanes::exec {

// One layer of `g` (the backend's current gather, PrepareGather(g)) into this rank's dense
// buffer, all pools, enqueued on `s`. Collective for the methods that use collectives: every
// rank calls it for the same layers in the same order. With `phases` (span trace only) it
// appends each phase's end mark (GatherPhases); without, it makes no marks of its own.
void GatherLayer(RankBackend& b, const GatherIndex& g, Stream s, int64_t layer,
                 GatherPhases* phases = nullptr);

}  // namespace kvlanes::exec

// The gather recipes: how one layer of a request's prefix reaches every rank's dense buffer, per
// method, written once over the backend's primitives (exec/backend.h) so that the host backend
// runs exactly the sequence of operations the CUDA backend runs.
//   dense   scatter (the owned pages, zeros elsewhere), all-reduce
//   packed  pack, all-gather, unpack
//   zigzag  pack, all-gather, zigzag reorder
//   p2p     peer gather (reads of the owners' pools)
//   owner_major  pack, all-gather: the rank-major output of an owner-major prefix is already in
//           owner-major order, which attention reads through its page table (no reorder)
//   broadcast  pack (by the layer's owner, layer_split), broadcast: the records in logical order
// The collectives run only when the plan has several ranks: with one, the packed shard is the
// whole all-gather output and the dense buffer is already the sum (as the cost model has it).
#pragma once

#include <cstdint>

#include "exec/backend.h"

namespace kvlanes::exec {

// One layer of `g` (the backend's current gather, PrepareGather(g)) into this rank's dense
// buffer, all pools, enqueued on `s`. Collective for dense/packed/zigzag: every rank calls it for
// the same layers in the same order. With `phases` (span trace only) it appends each phase's end
// mark (GatherPhases); without, it makes no marks of its own.
void GatherLayer(RankBackend& b, const GatherIndex& g, Stream s, int64_t layer,
                 GatherPhases* phases = nullptr);

}  // namespace kvlanes::exec

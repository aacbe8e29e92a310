#include "exec/gather.h"

#include "sim/cache/placement.h"
#include "sim/check.h"

namespace kvlanes::exec {
namespace {

// Span trace only: a mark after a phase's work, which ends the phase (none otherwise).
void EndPhase(RankBackend& b, Stream s, GatherPhases* phases, const char* name) {
  if (phases) phases->emplace_back(name, b.Mark(s));
}

void GatherDense(RankBackend& b, const GatherIndex& g, Stream s, int64_t layer,
                 GatherPhases* phases) {
  const ExecGeometry& geo = b.geometry();
  b.ScatterDense(s, layer);
  EndPhase(b, s, phases, "scatter");
  if (b.ranks() > 1) {
    b.AllReduce(s, geo.dense_layer_offset(layer, g.prefix_pages),
                g.prefix_pages * geo.page_layer_bytes());
    EndPhase(b, s, phases, "all-reduce");
  }
}

// Packed, zigzag and owner_major: the same shard exchange, then packed and zigzag reorder into the
// dense buffer, each its own way; owner_major does not reorder.
void GatherShards(RankBackend& b, const GatherIndex& g, Stream s, int64_t layer,
                  GatherPhases* phases) {
  b.PackShard(s, layer);
  EndPhase(b, s, phases, "pack");
  RecordBuffer records = RecordBuffer::kSend;
  if (b.ranks() > 1) {
    b.AllGather(s, g.shard_pages * b.geometry().page_layer_bytes());
    EndPhase(b, s, phases, "all-gather");
    records = RecordBuffer::kRecv;
  }
  if (g.method == GatherMethod::kOwnerMajor) return;  // the records are the result
  if (g.method == GatherMethod::kPacked) {
    b.Unpack(s, layer, records);
    EndPhase(b, s, phases, "unpack");
  } else {
    b.ZigzagReorder(s, layer, records);
    EndPhase(b, s, phases, "zigzag");
  }
}

}  // namespace

void GatherLayer(RankBackend& b, const GatherIndex& g, Stream s, int64_t layer,
                 GatherPhases* phases) {
  switch (g.method) {
    case GatherMethod::kDense:
      GatherDense(b, g, s, layer, phases);
      break;
    case GatherMethod::kPacked:
    case GatherMethod::kZigzag:
    case GatherMethod::kOwnerMajor:
      GatherShards(b, g, s, layer, phases);
      break;
    case GatherMethod::kP2p:
      b.PeerGather(s, layer);
      EndPhase(b, s, phases, "peer_gather");
      break;
    case GatherMethod::kPartialMerge:
      KV_CHECK(false, "partial_merge gathers nothing: the plan check refuses it here");
      break;
    case GatherMethod::kBroadcast: {
      // layer_split: the layer's owner packs the layer of the prefix and broadcasts it; the
      // records, in logical order, are the result (as owner_major's, verified in place).
      const int root = LayerOwner(b.geometry().layers, b.ranks(), layer);
      if (b.rank() == root) b.PackShard(s, layer);
      EndPhase(b, s, phases, "pack");
      if (b.ranks() > 1) {
        b.Broadcast(s, root, g.prefix_pages * b.geometry().page_layer_bytes());
        EndPhase(b, s, phases, "broadcast");
      }
      break;
    }
  }
}

}  // namespace kvlanes::exec

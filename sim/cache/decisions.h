// The decisions a policy makes about a request's data movement (CachePolicy::ChooseGather and
// ChooseBackup), with their one name table each. Plans, reports and golden files carry these
// names, so they are part of the file formats (docs/plan.md).
#pragma once

#include "traces/name_table.h"

namespace kvlanes {

// How every rank materializes the prefix for attention. kOwnerMajor: padded all-gather whose
// rank-major output is the owner-major order attention reads through its page table, with no
// reorder pass; only where the prefix is proven owner-major (GatherContext::proven_owner_major).
// kBroadcast: per layer, the rank owning the layer (layer_split) packs that layer of the prefix
// and broadcasts it into every rank's scratch; the only method of a layer_split cache, which the
// layout decides, not the policy. kPartialMerge: nothing is gathered; queries are all-gathered,
// every rank attends over its own KV and the partial outputs are merged exactly by their
// log-sum-exp; the only method of KV interleaved by token (cache.interleave_tokens), which the
// layout decides.
enum class GatherMethod { kDense, kPacked, kP2p, kZigzag, kOwnerMajor, kBroadcast, kPartialMerge };

inline constexpr NameTable<GatherMethod, 7> kGatherMethodNames{
    {{{GatherMethod::kDense, "dense"},
      {GatherMethod::kPacked, "packed"},
      {GatherMethod::kP2p, "p2p"},
      {GatherMethod::kZigzag, "zigzag"},
      {GatherMethod::kOwnerMajor, "owner_major"},
      {GatherMethod::kBroadcast, "broadcast"},
      {GatherMethod::kPartialMerge, "partial_merge"}}},
    "gather method"};

// When a request's host backups are copied: layer by layer during the forward pass, or after it.
enum class BackupSchedule { kPerLayer, kTail };

inline constexpr NameTable<BackupSchedule, 2> kBackupScheduleNames{
    {{{BackupSchedule::kPerLayer, "per-layer"}, {BackupSchedule::kTail, "tail"}}},
    "backup schedule"};

}  // namespace kvlanes

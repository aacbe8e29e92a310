// The decisions a policy makes about a request's data movement (CachePolicy::ChooseGather and
// ChooseBackup), with their one name table each. Plans, reports and golden files carry these
// names, so they are part of the file formats (docs/plan.md).
#pragma once

#include "traces/name_table.h"

namespace kvlanes {

// How every rank materializes the prefix for attention.
enum class GatherMethod { kDense, kPacked, kP2p, kZigzag };

inline constexpr NameTable<GatherMethod, 4> kGatherMethodNames{
    {{{GatherMethod::kDense, "dense"},
      {GatherMethod::kPacked, "packed"},
      {GatherMethod::kP2p, "p2p"},
      {GatherMethod::kZigzag, "zigzag"}}},
    "gather method"};

// When a request's host backups are copied: layer by layer during the forward pass, or after it.
enum class BackupSchedule { kPerLayer, kTail };

inline constexpr NameTable<BackupSchedule, 2> kBackupScheduleNames{
    {{{BackupSchedule::kPerLayer, "per-layer"}, {BackupSchedule::kTail, "tail"}}},
    "backup schedule"};

}  // namespace kvlanes

// The decisions a policy makes about a request's data movement (CachePolicy::ChooseGather and
// ChooseBackup), with their one name table each. Plans, reports and golden files carry these
// names, so they are part of the file formats (docs/plan.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/name_table.h"

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
//
// A method's id is its place in the table of registered methods (methods/registry.cpp): the
// shipped ones in methods/shipped.h's order, then those registered at run time
// (RegisterGatherMethod). The constants below name the shipped methods that the engine and the
// policies choose by name; a method no code names needs none.
enum class GatherMethod { kDense, kPacked, kP2p, kZigzag, kOwnerMajor, kBroadcast, kPartialMerge };

// The names of the registered gather methods, as a NameTable gives them: the shipped ones from
// their components (methods/shipped.h), then the registered ones (sim/cache/decisions.cpp).
struct GatherMethodNameTable {
  std::string_view what = "gather method";
  // The name of `m`; aborts for an id no method is registered with (a bug).
  std::string_view Name(GatherMethod m) const;
  const char* CName(GatherMethod m) const { return Name(m).data(); }
  std::optional<GatherMethod> Find(std::string_view name) const;
  // Throws InputError naming `where` (and file/line when given), the valid names and the closest.
  GatherMethod Parse(std::string_view name, const std::string& where, const std::string& file = "",
                     int64_t line = 0) const;
  std::vector<std::string_view> Names() const;
  std::string List() const { return JoinNames(Names()); }
};
inline constexpr GatherMethodNameTable kGatherMethodNames{};

// Gives `name` the next id (methods/registry.cpp's RegisterGatherMethod calls it).
// REQUIRES: no method of that name is registered yet; called before any replay or run starts.
GatherMethod AddGatherMethodName(const char* name);

// When a request's host backups are copied: layer by layer during the forward pass, or after it.
enum class BackupSchedule { kPerLayer, kTail };

inline constexpr NameTable<BackupSchedule, 2> kBackupScheduleNames{
    {{{BackupSchedule::kPerLayer, "per-layer"}, {BackupSchedule::kTail, "tail"}}},
    "backup schedule"};

}  // namespace kvlanes

// The decisions every shipped policy takes from the config: placement by cache.placement,
// host writes and load-backs always admitted (capacity permitting), gather by gather.method
// (zigzag only when a run descriptor proves it), backup by backup.schedule. Policies derive
// from it and override what they decide differently.
#pragma once

#include "sim/placement.h"
#include "sim/policy.h"

namespace kvlanes {

class ConfiguredPolicy : public CachePolicy {
 public:
  explicit ConfiguredPolicy(const ReplayConfig& cfg);

  void PlaceExtent(const CacheView& view, int64_t first_page, std::span<uint16_t> owners) const override;
  bool AdmitHostWrite(const CacheView& view, NodeId id) const override;
  bool AdmitLoadBack(const CacheView& view, int64_t pages) const override;
  GatherMethod ChooseGather(const CacheView& view, const GatherContext& ctx) const override;
  BackupSchedule ChooseBackup(const CacheView& view, int64_t new_pages) const override;

 protected:
  const PlacementRule* placement_;
  int ranks_;
  std::string gather_;
  BackupSchedule backup_;
};

}  // namespace kvlanes

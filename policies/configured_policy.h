// The decisions every shipped policy takes from the config: placement by cache.placement,
// host writes and load-backs always admitted (capacity permitting), gather by gather.method
// (zigzag only when a run descriptor proves it), backup by backup.schedule. `cost` for either
// picks the option with the smallest predicted service time of the request (gather given the
// backup setting, jointly when both are `cost`), using hardware.profile. Policies derive from it
// and override what they decide differently.
#pragma once

#include <memory>

#include "sim/cost_model.h"
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
  BackupSchedule ChooseBackup(const CacheView& view, const GatherContext& ctx,
                              GatherMethod gather) const override;

  // Predicted service time of a request decided with (gather, backup). REQUIRES: cost model.
  double PredictedServiceS(const GatherContext& ctx, GatherMethod gather, BackupSchedule backup) const;

 protected:
  const PlacementRule* placement_;
  int ranks_;
  std::string gather_;
  std::string backup_;
  std::unique_ptr<CostModel> cost_;  // only when gather or backup is `cost`
};

}  // namespace kvlanes

// The decisions every shipped policy takes from the config: eviction order by cache.eviction,
// placement by cache.placement, host writes and load-backs always admitted (capacity
// permitting), every new page cached, gather by gather.method (zigzag only when a run
// descriptor proves it), backup by backup.schedule. `cost` for either picks the option with the
// smallest predicted service time of the request (gather given the backup setting, jointly when
// both are `cost`), by the cost model the caller hands in (PolicyInputs::cost). Policies derive
// from it and override what they decide differently.
#pragma once

#include <memory>

#include "policies/policy_inputs.h"
#include "sim/cache/placement.h"
#include "sim/cache/policy.h"
#include "sim/predict/cost_model.h"

namespace kvlanes {

class ConfiguredPolicy : public CachePolicy {
 public:
  // `cost`: REQUIRES non-null when gather.method or backup.schedule is `cost`.
  ConfiguredPolicy(const ReplayConfig& cfg, std::shared_ptr<const CostModel> cost);
  explicit ConfiguredPolicy(const PolicyInputs& in) : ConfiguredPolicy(in.cfg, in.cost) {}

  EvictionOrder Order() const override { return order_; }
  const PlacementRule& Placement() const override { return *placement_; }
  void PlaceExtent(const CacheView& view, int64_t first_page,
                   std::span<uint16_t> owners) const override;
  bool AdmitHostWrite(const CacheView& view, NodeId id) const override;
  bool AdmitLoadBack(const CacheView& view, int64_t pages) const override;
  GatherMethod ChooseGather(const CacheView& view, const GatherContext& ctx) const override;
  BackupSchedule ChooseBackup(const CacheView& view, const GatherContext& ctx,
                              GatherMethod gather) const override;

  // Predicted service time of a request decided with (gather, backup). REQUIRES: cost model.
  double PredictedServiceS(const GatherContext& ctx, GatherMethod gather,
                           BackupSchedule backup) const;

 protected:
  // For policies named for an order or a placement: replaces the configured one.
  void FixOrder(EvictionOrder order) { order_ = order; }
  void FixPlacement(const char* rule);

  EvictionOrder order_;
  const PlacementRule* placement_;
  int ranks_;
  GatherChoice gather_;
  BackupChoice backup_;
  std::shared_ptr<const CostModel> cost_;  // only when gather or backup is `cost`
};

}  // namespace kvlanes

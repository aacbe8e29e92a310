// The decisions every shipped policy takes from the config: eviction order by cache.eviction,
// placement by cache.placement, host writes and load-backs always admitted (capacity
// permitting), every new page cached, gather by gather.method (zigzag only when a run
// descriptor proves it), backup by backup.schedule. Policies derive from it and override what
// they decide differently.
#pragma once

#include "sim/placement.h"
#include "sim/policy.h"

namespace kvlanes {

class ConfiguredPolicy : public CachePolicy {
 public:
  explicit ConfiguredPolicy(const ReplayConfig& cfg);

  EvictionOrder Order() const override { return order_; }
  const PlacementRule& Placement() const override { return *placement_; }
  void PlaceExtent(const CacheView& view, int64_t first_page, std::span<uint16_t> owners) const override;
  bool AdmitHostWrite(const CacheView& view, NodeId id) const override;
  bool AdmitLoadBack(const CacheView& view, int64_t pages) const override;
  GatherMethod ChooseGather(const CacheView& view, const GatherContext& ctx) const override;
  BackupSchedule ChooseBackup(const CacheView& view, int64_t new_pages) const override;

 protected:
  // For policies named for an order or a placement: replaces the configured one.
  void FixOrder(EvictionOrder order) { order_ = order; }
  void FixPlacement(const char* rule);

  EvictionOrder order_;
  const PlacementRule* placement_;
  int ranks_;
  std::string gather_;
  BackupSchedule backup_;
};

}  // namespace kvlanes

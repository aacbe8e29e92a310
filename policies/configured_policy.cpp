#include "policies/configured_policy.h"

#include "sim/check.h"

namespace kvlanes {

ConfiguredPolicy::ConfiguredPolicy(const ReplayConfig& cfg)
    : placement_(FindPlacementRule(cfg.cache.placement)),
      ranks_(static_cast<int>(cfg.cache.cp_size)),
      gather_(cfg.gather.method),
      backup_(cfg.backup.schedule == "tail" ? BackupSchedule::kTail : BackupSchedule::kPerLayer) {
  KV_CHECK(placement_ != nullptr, "unknown placement " << cfg.cache.placement);
}

void ConfiguredPolicy::PlaceExtent(const CacheView&, int64_t, std::span<uint16_t> owners) const {
  KV_CHECK(placement_->assign != nullptr, "placement " << placement_->name << " has no assign rule");
  placement_->assign(ranks_, owners);
}

bool ConfiguredPolicy::AdmitHostWrite(const CacheView&, NodeId) const { return true; }

bool ConfiguredPolicy::AdmitLoadBack(const CacheView&, int64_t) const { return true; }

GatherMethod ConfiguredPolicy::ChooseGather(const CacheView&, const GatherContext& ctx) const {
  if (gather_ == "dense") return GatherMethod::kDense;
  if (gather_ == "p2p") return GatherMethod::kP2p;
  if (gather_ == "zigzag-gated" && ctx.proven_zigzag) return GatherMethod::kZigzag;
  return GatherMethod::kPacked;
}

BackupSchedule ConfiguredPolicy::ChooseBackup(const CacheView&, int64_t) const { return backup_; }

}  // namespace kvlanes

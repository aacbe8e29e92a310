#include "policies/configured_policy.h"

#include "policies/lane_balance.h"
#include "sim/check.h"

namespace kvlanes {

ConfiguredPolicy::ConfiguredPolicy(const ReplayConfig& cfg)
    : order_(ParseEvictionOrder(cfg.cache.eviction)),
      placement_(FindPlacementRule(cfg.cache.placement)),
      ranks_(static_cast<int>(cfg.cache.cp_size)),
      gather_(cfg.gather.method),
      backup_(cfg.backup.schedule == "tail" ? BackupSchedule::kTail : BackupSchedule::kPerLayer) {
  KV_CHECK(placement_ != nullptr, "unknown placement " << cfg.cache.placement);
}

void ConfiguredPolicy::FixPlacement(const char* rule) {
  placement_ = FindPlacementRule(rule);
  KV_CHECK(placement_ != nullptr, "unknown placement " << rule);
}

void ConfiguredPolicy::PlaceExtent(const CacheView& view, int64_t, std::span<uint16_t> owners) const {
  if (placement_->assign != nullptr) {
    placement_->assign(ranks_, owners);
    return;
  }
  // The one rule that needs the cache state.
  KV_CHECK(std::string_view(placement_->name) == "lane-balance",
           "placement " << placement_->name << " has no assign rule");
  AssignLaneBalance(view.ledger, owners);
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

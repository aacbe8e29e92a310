#include "policies/configured_policy.h"

#include "policies/lane_balance.h"
#include "sim/check.h"

namespace kvlanes {

std::shared_ptr<const CostModel> PolicyCostModel(const ReplayConfig& cfg) {
  if (kGatherChoiceNames.Parse(cfg.gather.method, "gather.method") != GatherChoice::kCost &&
      kBackupChoiceNames.Parse(cfg.backup.schedule, "backup.schedule") != BackupChoice::kCost)
    return nullptr;
  return std::make_shared<const CostModel>(LoadHardwareProfile(cfg.hardware.profile), cfg,
                                           cfg.hardware.profile);
}

ConfiguredPolicy::ConfiguredPolicy(const ReplayConfig& cfg, std::shared_ptr<const CostModel> cost)
    : order_(kEvictionOrderNames.Parse(cfg.cache.eviction, "cache.eviction")),
      placement_(FindPlacementRule(cfg.cache.placement)),
      ranks_(static_cast<int>(cfg.cache.cp_size)),
      gather_(kGatherChoiceNames.Parse(cfg.gather.method, "gather.method")),
      backup_(kBackupChoiceNames.Parse(cfg.backup.schedule, "backup.schedule")) {
  KV_CHECK(placement_ != nullptr, "unknown placement " << cfg.cache.placement);
  if (gather_ == GatherChoice::kCost || backup_ == BackupChoice::kCost) {
    KV_CHECK(cost != nullptr, "gather.method or backup.schedule 'cost' without a cost model");
    cost_ = std::move(cost);
  }
}

double ConfiguredPolicy::PredictedServiceS(const GatherContext& ctx, GatherMethod gather,
                                           BackupSchedule backup) const {
  return cost_->Evaluate(ShapeOf(ctx, gather, backup)).service_s;
}

void ConfiguredPolicy::FixPlacement(const char* rule) {
  placement_ = FindPlacementRule(rule);
  KV_CHECK(placement_ != nullptr, "unknown placement " << rule);
}

void ConfiguredPolicy::PlaceExtent(const CacheView& view, int64_t first_page,
                                   std::span<uint16_t> owners) const {
  if (placement_->assign != nullptr) {
    placement_->assign(ranks_, first_page, owners);
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
  switch (gather_) {
    case GatherChoice::kDense:
      return GatherMethod::kDense;
    case GatherChoice::kPacked:
      return GatherMethod::kPacked;
    case GatherChoice::kP2p:
      return GatherMethod::kP2p;
    case GatherChoice::kZigzagGated:
      return ctx.proven_zigzag ? GatherMethod::kZigzag : GatherMethod::kPacked;
    case GatherChoice::kOwnerMajor:
      return ctx.proven_owner_major ? GatherMethod::kOwnerMajor : GatherMethod::kPacked;
    case GatherChoice::kCost:
      break;
  }
  KV_CHECK(cost_, "gather.method 'cost' without a cost model");
  // Cheapest predicted service time; the backup schedule is the configured one, or the best
  // for each method when it is `cost` too. Ties keep the earlier method of this list.
  GatherMethod best = GatherMethod::kPacked;
  double best_s = 0;
  bool first = true;
  for (GatherMethod m : {GatherMethod::kZigzag, GatherMethod::kOwnerMajor, GatherMethod::kPacked,
                         GatherMethod::kDense, GatherMethod::kP2p}) {
    if (m == GatherMethod::kZigzag && !ctx.proven_zigzag) continue;
    if (m == GatherMethod::kOwnerMajor && !ctx.proven_owner_major) continue;
    double t;
    if (backup_ == BackupChoice::kCost) {
      t = std::min(PredictedServiceS(ctx, m, BackupSchedule::kPerLayer),
                   PredictedServiceS(ctx, m, BackupSchedule::kTail));
    } else {
      t = PredictedServiceS(
          ctx, m,
          backup_ == BackupChoice::kTail ? BackupSchedule::kTail : BackupSchedule::kPerLayer);
    }
    if (first || t < best_s) {
      best = m;
      best_s = t;
      first = false;
    }
  }
  return best;
}

BackupSchedule ConfiguredPolicy::ChooseBackup(const CacheView&, const GatherContext& ctx,
                                              GatherMethod gather) const {
  switch (backup_) {
    case BackupChoice::kTail:
      return BackupSchedule::kTail;
    case BackupChoice::kPerLayer:
      return BackupSchedule::kPerLayer;
    case BackupChoice::kCost:
      break;
  }
  KV_CHECK(cost_, "backup.schedule 'cost' without a cost model");
  const double per_layer = PredictedServiceS(ctx, gather, BackupSchedule::kPerLayer);
  const double tail = PredictedServiceS(ctx, gather, BackupSchedule::kTail);
  return tail < per_layer ? BackupSchedule::kTail : BackupSchedule::kPerLayer;
}

}  // namespace kvlanes

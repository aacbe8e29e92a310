// per-layer: layer l's backup is copied right after forward layer l, one copy per pool each, so
// the copies overlap the rest of the forward pass; each copy pays its own submission.
#pragma once

#include <algorithm>

#include "methods/method_costs.h"

namespace kvlanes::methods {

class PerLayer final : public BackupScheduleImpl {
 public:
  BackupSchedule Id() const override { return BackupSchedule::kPerLayer; }
  const char* Name() const override { return "per-layer"; }
  bool CopiesEachLayer() const override { return true; }

  const HardwareProfile::CopyCost& Terms(const HardwareProfile& hw) const {
    return hw.backup_per_layer;
  }

  // layer l's copy starts when layer l's forward ends and the previous copy is done.
  void ClosedForm(const CostModel& m, std::span<const int64_t>, std::span<const double> layer_end_s,
                  double layer_copy, const std::function<double(size_t)>&, int64_t pools,
                  BackupCost& c) const {
    double copy_end = 0;
    for (double end : layer_end_s) copy_end = std::max(copy_end, end) + layer_copy;
    c.submit_s = static_cast<double>(m.layers() * pools) * m.hw().copy_submit_s;
    c.total_s = std::max(c.forward_s, copy_end) + c.submit_s;
  }

  void ScheduledTotal(const CostModel& m, double copies_end, int64_t pools, BackupCost& b) const {
    b.submit_s = static_cast<double>(m.layers() * pools) * m.hw().copy_submit_s;
    b.total_s = std::max(b.forward_s, copies_end) + b.submit_s;
  }
};

}  // namespace kvlanes::methods

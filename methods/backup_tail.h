// tail: one copy per pool of every layer after the forward pass, submitted when it ends: fewer,
// larger copies that do not overlap the forward pass.
#pragma once

#include <algorithm>

#include "methods/method_costs.h"

namespace kvlanes::methods {

class Tail final : public BackupScheduleImpl {
 public:
  BackupSchedule Id() const override { return BackupSchedule::kTail; }
  const char* Name() const override { return "tail"; }
  bool CopiesEachLayer() const override { return false; }

  const HardwareProfile::CopyCost& Terms(const HardwareProfile& hw) const { return hw.backup_tail; }

  // one copy per pool of all layers after the forward pass, on the slowest lane.
  void ClosedForm(const CostModel& m, std::span<const int64_t> pages_per_lane,
                  std::span<const double>, double, const std::function<double(size_t)>& runs,
                  int64_t pools, BackupCost& c) const {
    c.submit_s = static_cast<double>(pools) * m.hw().copy_submit_s;
    double worst = 0;
    for (size_t lane = 0; lane < pages_per_lane.size(); ++lane) {
      const int64_t pages = pages_per_lane[lane];
      const double bytes =
          static_cast<double>(pages) * m.page_layer_bytes() * static_cast<double>(m.layers());
      if (pages > 0)
        worst = std::max(worst, m.BackupCopiesS(Id(), pages, m.layers(), bytes, runs(lane)));
    }
    c.total_s = c.forward_s + c.submit_s + worst;
  }

  void ScheduledTotal(const CostModel& m, double copies_end, int64_t pools, BackupCost& b) const {
    b.submit_s = static_cast<double>(pools) * m.hw().copy_submit_s;
    b.total_s = std::max(b.forward_s, copies_end);
  }
};

}  // namespace kvlanes::methods

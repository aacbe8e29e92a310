// A backup schedule as one component (methods/gather_method.h has the gather methods'): when a
// request's host backups are copied and what that costs, in its own file
// (methods/backup_*.cpp), found by its BackupSchedule through methods/registry.cpp.
//   recipe        when the copies run: after each forward layer (that layer) or once after the
//                 forward pass (every layer); the executor enqueues them so on either backend,
//                 and the request schedule (CostModel::Evaluate) places its ops so
//   cost formula  the profile terms that price its copies, the closed form of the backups' end
//                 (CostModel::Backup) and the total from the scheduled copies' end
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sim/cache/decisions.h"
#include "sim/predict/cost_model.h"

namespace kvlanes {

class BackupScheduleImpl {
 public:
  virtual ~BackupScheduleImpl() = default;
  virtual BackupSchedule Id() const = 0;
  // The plan's, config's and report's name (kBackupScheduleNames).
  virtual const char* Name() const = 0;

  // ---- recipe: true: layer l's copy right after forward layer l (one layer per copy); false:
  // one copy of every layer after the forward pass.
  virtual bool CopiesEachLayer() const = 0;

  // ---- cost formula (docs/cost_model.md, "Backups").
  // The profile's measured terms of one copy of `pool` ("" : the terms of every pool).
  virtual const HardwareProfile::CopyCost& Terms(const HardwareProfile& hw,
                                                 const std::string& pool) const = 0;
  // The closed form: c.forward_s set, fills c.submit_s and c.total_s for `pages_per_lane`
  // backed up, given each layer's forward end, `layer_copy` (one layer's copy on the slowest
  // lane), the runs of adjacent slots per lane and `pools` (one copy per pool).
  virtual void ClosedForm(const CostModel& m, std::span<const int64_t> pages_per_lane,
                          std::span<const double> layer_end_s, double layer_copy,
                          const std::function<double(size_t)>& runs, int64_t pools,
                          BackupCost& c) const = 0;
  // The request schedule's total: b.forward_s set, `copies_end` the last scheduled copy's end;
  // fills b.submit_s and b.total_s.
  virtual void ScheduledTotal(const CostModel& m, double copies_end, int64_t pools,
                              BackupCost& b) const = 0;
};

// The registered backup schedules, in the table's order (methods/registry.cpp).
const std::vector<const BackupScheduleImpl*>& RegisteredBackupSchedules();
// The component of `s`; aborts for a schedule no component is registered for.
const BackupScheduleImpl& BackupScheduleOf(BackupSchedule s);

}  // namespace kvlanes

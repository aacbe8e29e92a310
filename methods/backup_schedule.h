// A backup schedule as one component (methods/gather_method.h has the gather methods'): when a
// request's host backups are copied and what that costs, in its own file
// (methods/backup_*.h), found by its BackupSchedule through methods/registry.cpp. As a gather
// method's, its cost formula is non-virtual and compiled into the simulator only
// (methods/method_costs.h); this interface is the executor's.
//   recipe        when the copies run: after each forward layer (that layer) or once after the
//                 forward pass (every layer); the executor enqueues them so on either backend,
//                 and the request schedule (CostModel::Evaluate) places its ops so
//   cost formula  the profile terms that price its copies, the closed form of the backups' end
//                 (CostModel::Backup) and the total from the scheduled copies' end
#pragma once

#include <vector>

#include "sim/cache/decisions.h"

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
};

// The registered backup schedules, in the table's order (methods/registry.cpp).
const std::vector<const BackupScheduleImpl*>& RegisteredBackupSchedules();
// The component of `s`; aborts for a schedule no component is registered for.
const BackupScheduleImpl& BackupScheduleOf(BackupSchedule s);

}  // namespace kvlanes

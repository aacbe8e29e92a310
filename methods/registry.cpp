// The tables of gather methods (methods/gather_method.h) and backup schedules
// (methods/backup_schedule.h): one line per component, in their name tables' order. Adding one:
// its file, its line here, its source in methods/CMakeLists.txt.
#include <algorithm>
#include <cstring>

#include "methods/backup_schedule.h"
#include "methods/gather_method.h"
#include "sim/check.h"

namespace kvlanes {

const GatherMethodImpl& DenseGatherMethod();
const GatherMethodImpl& PackedGatherMethod();
const GatherMethodImpl& P2pGatherMethod();
const GatherMethodImpl& ZigzagGatherMethod();
const GatherMethodImpl& OwnerMajorGatherMethod();
const GatherMethodImpl& BroadcastGatherMethod();
const GatherMethodImpl& PartialMergeGatherMethod();
const BackupScheduleImpl& PerLayerBackupSchedule();
const BackupScheduleImpl& TailBackupSchedule();

namespace {

std::vector<const GatherMethodImpl*>& GatherTable() {
  static std::vector<const GatherMethodImpl*> table = {
      &DenseGatherMethod(),       &PackedGatherMethod(),     &P2pGatherMethod(),
      &ZigzagGatherMethod(),      &OwnerMajorGatherMethod(), &BroadcastGatherMethod(),
      &PartialMergeGatherMethod()};
  return table;
}

const std::vector<const BackupScheduleImpl*>& BackupTable() {
  static const std::vector<const BackupScheduleImpl*> table = {&PerLayerBackupSchedule(),
                                                               &TailBackupSchedule()};
  return table;
}

}  // namespace

const std::vector<const GatherMethodImpl*>& RegisteredGatherMethods() { return GatherTable(); }

const GatherMethodImpl& GatherMethodOf(GatherMethod m) {
  for (const GatherMethodImpl* g : GatherTable())
    if (g->Id() == m) return *g;
  KV_CHECK(false, "no gather method component for method " << static_cast<int>(m));
}

void RegisterGatherMethod(const GatherMethodImpl* method) {
  KV_CHECK(method != nullptr, "null gather method");
  for (const GatherMethodImpl* g : GatherTable())
    KV_CHECK(g->Id() != method->Id() && std::strcmp(g->Name(), method->Name()) != 0,
             "gather method " << method->Name() << " registered twice");
  GatherTable().push_back(method);
}

const std::vector<const BackupScheduleImpl*>& RegisteredBackupSchedules() { return BackupTable(); }

const BackupScheduleImpl& BackupScheduleOf(BackupSchedule s) {
  for (const BackupScheduleImpl* b : BackupTable())
    if (b->Id() == s) return *b;
  KV_CHECK(false, "no backup schedule component for schedule " << static_cast<int>(s));
}

}  // namespace kvlanes

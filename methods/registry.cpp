// The executor's tables of gather methods (methods/gather_method.h) and backup schedules
// (methods/backup_schedule.h), built from the shipped lists (methods/shipped.h). Only the
// components' index builds and recipes are compiled here: their cost formulas are inline
// members that this unit never calls (the cost model's table: sim/predict/method_costs.cpp).
#include <algorithm>

#include "methods/shipped.h"
#include "sim/check.h"

namespace kvlanes {

namespace {

template <class Base, class... M>
std::vector<const Base*> Instances(ComponentList<M...>) {
  return {&ShippedInstance<M>()...};
}

std::vector<const GatherMethodImpl*>& GatherTable() {
  static std::vector<const GatherMethodImpl*> table =
      Instances<GatherMethodImpl>(ShippedGatherMethods{});
  return table;
}

const std::vector<const BackupScheduleImpl*>& BackupTable() {
  static const std::vector<const BackupScheduleImpl*> table =
      Instances<BackupScheduleImpl>(ShippedBackupSchedules{});
  return table;
}

}  // namespace

const std::vector<const GatherMethodImpl*>& RegisteredGatherMethods() { return GatherTable(); }

GatherMethod GatherMethodImpl::Id() const {
  const std::vector<const GatherMethodImpl*>& table = GatherTable();
  const auto it = std::find(table.begin(), table.end(), this);
  KV_CHECK(it != table.end(), "gather method " << Name() << " is not registered");
  return static_cast<GatherMethod>(it - table.begin());
}

const GatherMethodImpl& GatherMethodOf(GatherMethod m) {
  const size_t i = static_cast<size_t>(m);
  KV_CHECK(i < GatherTable().size(), "no gather method component for method " << i);
  return *GatherTable()[i];
}

GatherMethod RegisterGatherMethod(const GatherMethodImpl* method) {
  KV_CHECK(method != nullptr, "null gather method");
  GatherTable();  // the shipped ones first, under their ids
  const GatherMethod id = AddGatherMethodName(method->Name());
  GatherTable().push_back(method);
  KV_CHECK(static_cast<size_t>(id) + 1 == GatherTable().size(),
           "gather method " << method->Name() << ": names and components out of step");
  return id;
}

const std::vector<const BackupScheduleImpl*>& RegisteredBackupSchedules() { return BackupTable(); }

const BackupScheduleImpl& BackupScheduleOf(BackupSchedule s) {
  for (const BackupScheduleImpl* b : BackupTable())
    if (b->Id() == s) return *b;
  KV_CHECK(false, "no backup schedule component for schedule " << static_cast<int>(s));
}

}  // namespace kvlanes

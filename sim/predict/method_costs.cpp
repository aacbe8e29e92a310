// The cost model's table of the components' cost formulas (methods/method_costs.h), built from the
// same shipped lists as the executor's table (methods/shipped.h). This unit is where the inline
// cost formulas of the component files are compiled, in the simulator and nowhere else.
#include "methods/method_costs.h"

#include <memory>
#include <vector>

#include "methods/shipped.h"
#include "sim/check.h"

namespace kvlanes {
namespace {

template <class... M>
std::vector<std::unique_ptr<const GatherMethodCost>> GatherCostsOf(ComponentList<M...>) {
  std::vector<std::unique_ptr<const GatherMethodCost>> table;
  (table.push_back(std::make_unique<const GatherCostOf<M>>(
       ShippedInstance<M>(), static_cast<GatherMethod>(table.size()))),
   ...);
  return table;
}

template <class... M>
std::vector<std::unique_ptr<const BackupScheduleCost>> BackupCostsOf(ComponentList<M...>) {
  std::vector<std::unique_ptr<const BackupScheduleCost>> table;
  (table.push_back(std::make_unique<const BackupCostOf<M>>(ShippedInstance<M>())), ...);
  return table;
}

// Indexed by GatherMethod, as the executor's table.
std::vector<std::unique_ptr<const GatherMethodCost>>& GatherCosts() {
  static std::vector<std::unique_ptr<const GatherMethodCost>> table =
      GatherCostsOf(ShippedGatherMethods{});
  return table;
}

const std::vector<std::unique_ptr<const BackupScheduleCost>>& BackupCosts() {
  static const std::vector<std::unique_ptr<const BackupScheduleCost>> table =
      BackupCostsOf(ShippedBackupSchedules{});
  return table;
}

}  // namespace

const GatherMethodCost& GatherCostFor(GatherMethod m) {
  const size_t i = static_cast<size_t>(m);
  KV_CHECK(i < GatherCosts().size() && GatherCosts()[i], "no cost formula for gather method " << i);
  return *GatherCosts()[i];
}

const BackupScheduleCost& BackupCostFor(BackupSchedule s) {
  for (const auto& c : BackupCosts())
    if (c->Id() == s) return *c;
  KV_CHECK(false, "no cost formula for backup schedule " << static_cast<int>(s));
}

void RegisterGatherMethodCost(std::unique_ptr<const GatherMethodCost> cost) {
  KV_CHECK(cost != nullptr, "null gather method cost");
  const size_t i = static_cast<size_t>(cost->Id());
  std::vector<std::unique_ptr<const GatherMethodCost>>& table = GatherCosts();
  if (table.size() <= i) table.resize(i + 1);
  KV_CHECK(!table[i], "gather method cost " << i << " registered twice");
  table[i] = std::move(cost);
}

}  // namespace kvlanes

// The shipped gather methods and backup schedules, one line each, in their name tables' order.
// Both tables are built from these lists: the executor's (methods/registry.cpp: index build,
// device and host recipes) and the cost model's (sim/predict/method_costs.cpp: cost formulas).
// Adding a component: its file (methods/gather_*.h or backup_*.h) and its line here.
#pragma once

#include "methods/backup_per_layer.h"
#include "methods/backup_tail.h"
#include "methods/gather_broadcast.h"
#include "methods/gather_dense.h"
#include "methods/gather_owner_major.h"
#include "methods/gather_p2p.h"
#include "methods/gather_packed.h"
#include "methods/gather_partial_merge.h"
#include "methods/gather_zigzag.h"

namespace kvlanes {

template <class... M>
struct ComponentList {};

using ShippedGatherMethods =
    ComponentList<methods::Dense, methods::Packed, methods::P2p, methods::Zigzag,
                  methods::OwnerMajor, methods::Broadcast, methods::PartialMergeMethod>;
using ShippedBackupSchedules = ComponentList<methods::PerLayer, methods::Tail>;

// The one instance of shipped component M, shared by both tables.
template <class M>
const M& ShippedInstance() {
  static const M component;
  return component;
}

}  // namespace kvlanes

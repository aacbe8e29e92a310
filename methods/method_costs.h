// The cost side of the method components (methods/gather_method.h, methods/backup_schedule.h):
// the interfaces through which the cost model prices a gather method or a backup schedule, and
// the adapters that turn a component's inline cost formula into them. A component's class holds
// its formula as a non-virtual member (LayerCost, RequestCost; Terms, ClosedForm,
// ScheduledTotal), so a translation unit that only registers the component for the executor
// (methods/registry.cpp) never emits it; the table of formulas is built in the simulator
// (sim/predict/method_costs.cpp), the one library that links the cost model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "methods/backup_schedule.h"
#include "methods/gather_method.h"
#include "sim/predict/cost_model.h"

namespace kvlanes {

// What a gather layer's cost formula reads: the cost model's terms and the gather's shape.
struct GatherLayerShape {
  std::span<const int64_t> shard_pages;       // per rank: the pages it owns
  double prefix_pages = 0;                    // P
  double max_shard_pages = 0;                 // S, the largest shard
  double page_layer_bytes = 0;                // b, one page of one layer, all pools
  double ranks = 1;                           // N
  double kernel_ratio = 1;                    // k: the gather's kernels after a forward layer
  HardwareProfile::KernelExtra kernel_extra;  // the method's one kernel beyond KernelCopyS
  // One layer of a one-kernel method moving `payload` bytes (read and written), after a forward
  // layer: k (KernelCopyS(payload) + the method's extra at payload), never below 0
  // (HardwareProfile::gather_kernel_extra).
  double OneKernelS(const CostModel& m, double payload) const {
    return kernel_ratio * std::max(m.KernelCopyS(payload) + kernel_extra.At(payload), 0.0);
  }
};

class GatherMethodCost {
 public:
  virtual ~GatherMethodCost() = default;
  virtual GatherMethod Id() const = 0;
  // Cost formula (docs/cost_model.md, "Gather"). Fills per_layer_s, bytes_per_rank and once_s of
  // `c` for one layer; CostModel::GatherLayer sets the first layer and the total.
  // REQUIRES: the arithmetic is the documented formula's, term for term in its order.
  virtual void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const = 0;
  // The request's cost when the method prices itself from something else than the prefix
  // (partial_merge: the new tokens' queries); false: LayerCost.
  virtual bool RequestCost(const CostModel& m, const ForwardShape& f, GatherCost& c) const = 0;
};

class BackupScheduleCost {
 public:
  virtual ~BackupScheduleCost() = default;
  virtual BackupSchedule Id() const = 0;
  // Cost formula (docs/cost_model.md, "Backups"). The profile's measured terms of one copy.
  virtual const HardwareProfile::CopyCost& Terms(const HardwareProfile& hw) const = 0;
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

// The cost formula of component M (a GatherMethodImpl with a LayerCost member and, where it
// prices itself from the request, a RequestCost member).
template <class M>
class GatherCostOf final : public GatherMethodCost {
 public:
  GatherCostOf(const M& method, GatherMethod id) : method_(method), id_(id) {}
  GatherMethod Id() const override { return id_; }
  void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const override {
    method_.LayerCost(m, s, c);
  }
  bool RequestCost(const CostModel& m, const ForwardShape& f, GatherCost& c) const override {
    if constexpr (requires { method_.RequestCost(m, f, c); })
      return method_.RequestCost(m, f, c);
    else
      return false;
  }

 private:
  M method_;
  GatherMethod id_;
};

template <class S>
class BackupCostOf final : public BackupScheduleCost {
 public:
  explicit BackupCostOf(const S& schedule) : schedule_(schedule) {}
  BackupSchedule Id() const override { return schedule_.Id(); }
  const HardwareProfile::CopyCost& Terms(const HardwareProfile& hw) const override {
    return schedule_.Terms(hw);
  }
  void ClosedForm(const CostModel& m, std::span<const int64_t> pages_per_lane,
                  std::span<const double> layer_end_s, double layer_copy,
                  const std::function<double(size_t)>& runs, int64_t pools,
                  BackupCost& c) const override {
    schedule_.ClosedForm(m, pages_per_lane, layer_end_s, layer_copy, runs, pools, c);
  }
  void ScheduledTotal(const CostModel& m, double copies_end, int64_t pools,
                      BackupCost& b) const override {
    schedule_.ScheduledTotal(m, copies_end, pools, b);
  }

 private:
  S schedule_;
};

// The cost formula of `m` / `s` (sim/predict/method_costs.cpp); aborts where none is registered.
const GatherMethodCost& GatherCostFor(GatherMethod m);
const BackupScheduleCost& BackupCostFor(BackupSchedule s);
// Adds the cost formula of a component registered with RegisterGatherMethod (under cost->Id()).
void RegisterGatherMethodCost(std::unique_ptr<const GatherMethodCost> cost);

// Registers a component kept outside the tree (or in a test) on both sides, the executor's table
// and the cost model's, and returns its id. REQUIRES: `method` outlives every replay and run.
template <class M>
GatherMethod RegisterGatherComponent(const M& method) {
  const GatherMethod id = RegisterGatherMethod(&method);
  RegisterGatherMethodCost(std::make_unique<const GatherCostOf<M>>(method, id));
  return id;
}

}  // namespace kvlanes

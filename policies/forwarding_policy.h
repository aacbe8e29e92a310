// The base of composite policies (`NAME+tinylfu`, `NAME+bypass`): every decision and hook goes
// to the wrapped policy, so a composite overrides only what it changes (and calls the base's
// hook from its own where it adds to one).
#pragma once

#include <memory>
#include <string>

#include "sim/cache/policy.h"

namespace kvlanes {

class ForwardingPolicy : public CachePolicy {
 public:
  ForwardingPolicy(std::string name, std::unique_ptr<CachePolicy> base)
      : name_(std::move(name)), base_(std::move(base)) {}

  std::string_view Name() const override { return name_; }
  EvictionOrder Order() const override { return base_->Order(); }
  const PlacementRule& Placement() const override { return base_->Placement(); }
  void PlaceExtent(const CacheView& view, int64_t first_page,
                   std::span<uint16_t> owners) const override {
    base_->PlaceExtent(view, first_page, owners);
  }
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    return base_->PlanEviction(view, demand);
  }
  int64_t AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const override {
    return base_->AdmitDevicePages(view, offer);
  }
  bool AdmitHostWrite(const CacheView& view, NodeId id) const override {
    return base_->AdmitHostWrite(view, id);
  }
  bool AdmitLoadBack(const CacheView& view, int64_t pages) const override {
    return base_->AdmitLoadBack(view, pages);
  }
  GatherMethod ChooseGather(const CacheView& view, const GatherContext& ctx) const override {
    return base_->ChooseGather(view, ctx);
  }
  BackupSchedule ChooseBackup(const CacheView& view, const GatherContext& ctx,
                              GatherMethod gather) const override {
    return base_->ChooseBackup(view, ctx, gather);
  }

  void OnOffer(const CacheView& view, const DeviceOffer& offer) override {
    base_->OnOffer(view, offer);
  }
  void OnAdmit(const CacheView& view, const DeviceOffer& offer, int64_t admitted) override {
    base_->OnAdmit(view, offer, admitted);
  }
  void OnPlanning(const CacheView& view, const LaneDemand& demand) override {
    base_->OnPlanning(view, demand);
  }
  void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) override {
    base_->OnEvict(view, demand, plan);
  }
  CandidateObserver* Observer() override { return base_->Observer(); }

 protected:
  const CachePolicy& base() const { return *base_; }
  CachePolicy& base() { return *base_; }

 private:
  std::string name_;
  std::unique_ptr<CachePolicy> base_;
};

}  // namespace kvlanes

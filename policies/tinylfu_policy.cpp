// `NAME+tinylfu`: the eviction (and every other decision) of policy NAME with TinyLFU device
// admission. Each request records its keyed pages in a count-min sketch (aged: counters halved
// every 10 x capacity additions). Its new pages are offered in order: a page that fits in free
// pages (keeping the page per receiving lane the engine reserves when it evicts) is cached;
// any other page is cached only if its estimated frequency is at least that of the page it
// would displace (ties admit: on the Mooncake synthetic trace, refusing ties froze stale pages
// in the cache and measured lower), the victims of NAME's own plan for the extent taken whole node
// by whole node, each from its last (least shared) page up. Pages after the first refused one are
// not cached.
#include <algorithm>
#include <string>

#include "policies/count_min_sketch.h"
#include "policies/queue_policy.h"
#include "policies/registry.h"
#include "sim/check.h"

namespace kvlanes {
namespace {

// Sketch width and aging period, in multiples of the device capacity in pages (TinyLFU's
// sample of about ten times the cache).
constexpr int64_t kSketchPerPage = 10;
// Offer pages beyond the first that must displace another that the first preview plans for.
constexpr int64_t kPreviewPages = 32;

class TinyLfuComposite final : public CachePolicy {
 public:
  TinyLfuComposite(std::string name, std::unique_ptr<CachePolicy> base, const ReplayConfig& cfg)
      : name_(std::move(name)),
        base_(std::move(base)),
        preview_(dynamic_cast<const QueuePolicy*>(base_.get())),
        sketch_(
            static_cast<uint64_t>(kSketchPerPage * std::max<int64_t>(1, DeviceCapacityPages(cfg))),
            static_cast<uint64_t>(kSketchPerPage *
                                  std::max<int64_t>(1, DeviceCapacityPages(cfg)))) {}

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
  int64_t AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const override;
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
  CandidateObserver* Observer() const override { return base_->Observer(); }

 private:
  // TinyLFU's own admission of the offer (the base's is taken with it).
  int64_t SketchAdmits(const CacheView& view, const DeviceOffer& offer) const;
  // The base policy's device plan for `demand`, without committing a stateful policy's moves.
  EvictionPlan Preview(const CacheView& view, const LaneDemand& demand) const {
    return preview_ != nullptr ? preview_->PreviewEviction(view, demand)
                               : base_->PlanEviction(view, demand);
  }
  // The nodes the base policy would evict to cache the offer's first `pages` pages, in the
  // order they would be displaced, into victim_nodes_.
  void VictimNodes(const CacheView& view, const DeviceOffer& offer, int64_t pages) const;

  std::string name_;
  std::unique_ptr<CachePolicy> base_;
  const QueuePolicy* preview_;
  mutable CountMinSketch sketch_;
  // Scratch of one offer, kept to reuse its memory.
  mutable LaneDemand want_;
  mutable std::vector<NodeId> victim_nodes_;
  mutable std::vector<int64_t> room_;
};

void TinyLfuComposite::VictimNodes(const CacheView& view, const DeviceOffer& offer,
                                   int64_t pages) const {
  // The engine's demand if pages [0, pages) were admitted, reserve included.
  LaneDemand& want = want_;
  want.tier = offer.committed->tier;
  want.target.assign(offer.committed->target.begin(), offer.committed->target.end());
  want.any_lane = offer.committed->any_lane;
  if (offer.owners.empty()) {
    want.any_lane = pages + 1;
  } else {
    if (want.target.size() == 1) {
      want.target[0] += pages;  // one lane: every owner is 0 (checked at placement)
    } else {
      for (int64_t i = 0; i < pages; ++i) ++want.target[offer.owners[static_cast<size_t>(i)]];
    }
    for (int64_t& t : want.target)
      if (t > 0) ++t;
  }
  victim_nodes_ = Preview(view, want).victims;
}

int64_t TinyLfuComposite::AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const {
  // The base is asked too (a base that learns from the offers, such as seen_lru, sees every
  // request); the shorter admitted prefix wins.
  const int64_t base_admits = base_->AdmitDevicePages(view, offer);
  return std::min(base_admits, SketchAdmits(view, offer));
}

int64_t TinyLfuComposite::SketchAdmits(const CacheView& view, const DeviceOffer& offer) const {
  sketch_.AddAll(offer.keys);
  const int64_t keyed_new = std::clamp<int64_t>(
      static_cast<int64_t>(offer.keys.size()) - offer.first_page, 0, offer.pages);
  // Room per lane without evicting, after the pages the request needs anyway and the page the
  // engine reserves on a receiving lane; one pooled room when the allocator places.
  const int lanes = view.ledger.lanes();
  const bool pooled = offer.owners.empty();
  std::vector<int64_t>& room = room_;
  room.assign(static_cast<size_t>(pooled ? 1 : lanes), 0);
  for (int r = 0; r < lanes; ++r)
    room[pooled ? 0 : static_cast<size_t>(r)] +=
        view.ledger.at(Tier::kDevice, r).free() - offer.committed->target[static_cast<size_t>(r)];
  for (int64_t& x : room) --x;
  for (int64_t j = keyed_new; j < offer.pages; ++j)  // the unkeyed tail page is allocated too
    --room[pooled ? 0 : offer.owners[static_cast<size_t>(j)]];
  // The victims are planned once some page has to displace another. With one lane the first
  // plan is for the pages up to kPreviewPages beyond it (the first refusal usually comes soon),
  // then, if the offer gets past them, for the whole offer; the k-th page displaced is the k-th
  // page of the latest plan's victims. On one lane a planner's walk does not depend on how much
  // it must free, so the shorter plan is the start of the longer one and the decisions are those
  // of a plan for the whole offer (the outputs are byte-identical on the Mooncake synthetic
  // trace); with several lanes the victims serve the lanes short of pages, which depend on the
  // demand, so the plan is for the whole offer at once. Each victim is read from its last page
  // up (the sketch does not change meanwhile).
  int64_t planned = 0;   // offer pages the victims were planned for (0: none planned yet)
  size_t displaced = 0;  // victim pages compared so far
  size_t victim = 0;     // victim_nodes_[victim] is the node being displaced
  size_t left = 0;       // its pages not yet displaced
  CountMinSketch::Cursor my_group, their_group;
  const auto seek = [&](size_t skip) {  // to the victim page after the first `skip`
    victim = 0;
    left = 0;
    for (; victim < victim_nodes_.size(); ++victim) {
      const size_t n = view.tree.node(victim_nodes_[victim]).keys.size();
      if (skip < n) {
        left = n - skip;
        return;
      }
      skip -= n;
    }
  };
  int64_t j = 0;
  if (room.size() == 1 && room[0] > 0) {  // one room: the pages that fit, in one step
    j = std::min(room[0], keyed_new);
    room[0] -= j;
  }
  for (; j < keyed_new; ++j) {
    int64_t& r = room[pooled ? 0 : offer.owners[static_cast<size_t>(j)]];
    if (r > 0) {
      --r;
      continue;
    }
    if (planned == 0) {
      planned = lanes == 1 ? std::min(offer.pages, j + 1 + kPreviewPages) : offer.pages;
      VictimNodes(view, offer, planned);
      seek(0);
    }
    while (left == 0 && victim < victim_nodes_.size())
      if (++victim < victim_nodes_.size()) left = view.tree.node(victim_nodes_[victim]).keys.size();
    if (victim >= victim_nodes_.size()) {
      if (planned == offer.pages) return j;
      planned = offer.pages;
      VictimNodes(view, offer, planned);
      seek(displaced);
      if (victim >= victim_nodes_.size()) return j;
    }
    const std::vector<PageKey>& vk = view.tree.node(victim_nodes_[victim]).keys;
    if (left == vk.size() && victim + 1 < victim_nodes_.size())  // the next victim's last page
      sketch_.Prefetch(view.tree.node(victim_nodes_[victim + 1]).keys.back());
    const uint32_t theirs = sketch_.Estimate(vk[--left], their_group);
    ++displaced;
    const uint32_t mine =
        sketch_.Estimate(offer.keys[static_cast<size_t>(offer.first_page + j)], my_group);
    if (mine < theirs) return j;
  }
  return offer.pages;
}

}  // namespace

std::unique_ptr<CachePolicy> MakeTinyLfuComposite(const std::string& base, const ReplayConfig& cfg,
                                                  const Trace& trace) {
  return std::make_unique<TinyLfuComposite>(base + "+tinylfu", MakePolicy(base, cfg, trace), cfg);
}

}  // namespace kvlanes

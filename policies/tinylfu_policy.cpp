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
#include "policies/forwarding_policy.h"
#include "policies/offer_room.h"
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

class TinyLfuComposite final : public ForwardingPolicy {
 public:
  TinyLfuComposite(std::string name, std::unique_ptr<CachePolicy> base, const ReplayConfig& cfg)
      : ForwardingPolicy(std::move(name), std::move(base)),
        sketch_(
            static_cast<uint64_t>(kSketchPerPage * std::max<int64_t>(1, DeviceCapacityPages(cfg))),
            static_cast<uint64_t>(kSketchPerPage *
                                  std::max<int64_t>(1, DeviceCapacityPages(cfg)))) {}

  // The base is asked too (a base that learns from the offers, such as seen_lru, sees every
  // request); the shorter admitted prefix wins.
  int64_t AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const override {
    const int64_t base_admits = base().AdmitDevicePages(view, offer);
    return std::min(base_admits, SketchAdmits(view, offer));
  }
  // Counts the offer's keys; when some new page will have to displace another, brings the base
  // up to date for the plan that SketchAdmits previews.
  void OnOffer(const CacheView& view, const DeviceOffer& offer) override {
    ForwardingPolicy::OnOffer(view, offer);
    sketch_.AddAll(offer.keys);
    if (MustDisplace(view, offer)) base().OnPlanning(view, *offer.committed);
  }

 private:
  // TinyLFU's own admission of the offer (the base's is taken with it).
  int64_t SketchAdmits(const CacheView& view, const DeviceOffer& offer) const;
  // Whether some keyed new page of the offer finds no room (SketchAdmits then previews).
  static bool MustDisplace(const CacheView& view, const DeviceOffer& offer);
  // The nodes the base policy would evict to cache the offer's first `pages` pages, in the
  // order they would be displaced.
  std::vector<NodeId> VictimNodes(const CacheView& view, const DeviceOffer& offer,
                                  int64_t pages) const;

  CountMinSketch sketch_;
};

bool TinyLfuComposite::MustDisplace(const CacheView& view, const DeviceOffer& offer) {
  const int64_t keyed_new = KeyedNewPages(offer);
  std::vector<int64_t> room = OfferRoom(view, offer, keyed_new);
  if (room.size() == 1) return keyed_new > std::max<int64_t>(0, room[0]);
  for (int64_t j = 0; j < keyed_new; ++j)
    if (room[offer.owners[static_cast<size_t>(j)]]-- <= 0) return true;
  return false;
}

std::vector<NodeId> TinyLfuComposite::VictimNodes(const CacheView& view, const DeviceOffer& offer,
                                                  int64_t pages) const {
  // The engine's demand if pages [0, pages) were admitted, reserve included.
  LaneDemand want;
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
  // The base's plan, which the engine does not apply: its moves are dropped.
  return base().PlanEviction(view, want).victims;
}

int64_t TinyLfuComposite::SketchAdmits(const CacheView& view, const DeviceOffer& offer) const {
  // The offer's keys were counted in OnOffer. Room per lane without evicting (OfferRoom).
  const int64_t keyed_new = KeyedNewPages(offer);
  const int lanes = view.ledger.lanes();
  const bool pooled = offer.owners.empty();
  std::vector<int64_t> room = OfferRoom(view, offer, keyed_new);
  std::vector<NodeId> victim_nodes;
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
  size_t victim = 0;     // victim_nodes[victim] is the node being displaced
  size_t left = 0;       // its pages not yet displaced
  CountMinSketch::Cursor my_group, their_group;
  const auto seek = [&](size_t skip) {  // to the victim page after the first `skip`
    victim = 0;
    left = 0;
    for (; victim < victim_nodes.size(); ++victim) {
      const size_t n = view.tree.node(victim_nodes[victim]).keys.size();
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
      victim_nodes = VictimNodes(view, offer, planned);
      seek(0);
    }
    while (left == 0 && victim < victim_nodes.size())
      if (++victim < victim_nodes.size()) left = view.tree.node(victim_nodes[victim]).keys.size();
    if (victim >= victim_nodes.size()) {
      if (planned == offer.pages) return j;
      planned = offer.pages;
      victim_nodes = VictimNodes(view, offer, planned);
      seek(displaced);
      if (victim >= victim_nodes.size()) return j;
    }
    const std::vector<PageKey>& vk = view.tree.node(victim_nodes[victim]).keys;
    if (left == vk.size() && victim + 1 < victim_nodes.size())  // the next victim's last page
      sketch_.Prefetch(view.tree.node(victim_nodes[victim + 1]).keys.back());
    const uint32_t theirs = sketch_.Estimate(vk[--left], their_group);
    ++displaced;
    const uint32_t mine =
        sketch_.Estimate(offer.keys[static_cast<size_t>(offer.first_page + j)], my_group);
    if (mine < theirs) return j;
  }
  return offer.pages;
}

}  // namespace

std::unique_ptr<CachePolicy> MakeTinyLfuComposite(const std::string& base, const PolicyInputs& in) {
  return std::make_unique<TinyLfuComposite>(base + "+tinylfu", MakePolicy(base, in), in.cfg);
}

}  // namespace kvlanes

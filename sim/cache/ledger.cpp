#include "sim/cache/ledger.h"

#include <algorithm>
#include <sstream>

#include "sim/check.h"

namespace kvlanes {

Ledger::Ledger(int lanes, int64_t device_pages_per_lane, int64_t host_pages_per_lane)
    : device_(lanes), host_(lanes) {
  for (auto& a : device_) a.capacity = device_pages_per_lane;
  for (auto& a : host_) a.capacity = host_pages_per_lane;
}

void Ledger::Bump(LaneAccount& a, int64_t tree_delta, int64_t locked_delta) {
  a.tree += tree_delta;
  a.locked += locked_delta;
  KV_CHECK(a.tree >= 0 && a.locked >= 0 && a.locked <= a.tree, "ledger count out of range");
  KV_CHECK(a.used() <= a.capacity, "lane over capacity: used " << a.used() << " > " << a.capacity);
  if (a.used() > a.peak) a.peak = a.used();
}

// The per-node updates count the node's pages per owner lane first and move each lane once: all
// pages of one update move a lane's counts the same way, so the checks and the peak see the
// same final state (and the same maximum) as page-by-page updates would.
std::span<const uint32_t> Ledger::PagesPerLane(const RadixTree& tree, const Node& n) {
  KV_CHECK(tree.lanes() == lanes(),
           "a tree of " << tree.lanes() << " lanes, a ledger of " << lanes());
  if (tree.counts_lanes()) return tree.LanePages(n.id);
  lane_pages_.resize(device_.size());
  std::fill(lane_pages_.begin(), lane_pages_.end(), 0u);
  for (const PageInfo& p : n.pages) ++lane_pages_[p.owner];
  return lane_pages_;
}

void Ledger::OnResidency(const RadixTree& tree, const Node& n, Tier tier, int sign) {
  if (device_.size() == 1) {  // one lane: every page is its own
    if (n.pages.empty()) return;
    const int64_t d = sign * static_cast<int64_t>(n.pages.size());
    Bump(mut(tier, 0), d, n.lock > 0 ? d : 0);
    return;
  }
  const std::span<const uint32_t> per_lane = PagesPerLane(tree, n);
  for (size_t r = 0; r < per_lane.size(); ++r) {
    if (per_lane[r] == 0) continue;
    const int64_t d = sign * int64_t{per_lane[r]};
    Bump(mut(tier, static_cast<int>(r)), d, n.lock > 0 ? d : 0);
  }
}

void Ledger::OnLock(const RadixTree& tree, const Node& n, bool locked) {
  if (!n.on_device() && !n.on_host()) return;
  if (device_.size() == 1) {  // one lane: every page is its own
    if (n.pages.empty()) return;
    const int64_t d =
        locked ? static_cast<int64_t>(n.pages.size()) : -static_cast<int64_t>(n.pages.size());
    if (n.on_device()) Bump(device_[0], 0, d);
    if (n.on_host()) Bump(host_[0], 0, d);
    return;
  }
  const std::span<const uint32_t> per_lane = PagesPerLane(tree, n);
  for (size_t r = 0; r < per_lane.size(); ++r) {
    if (per_lane[r] == 0) continue;
    const int64_t d = locked ? int64_t{per_lane[r]} : -int64_t{per_lane[r]};
    if (n.on_device()) Bump(device_[r], 0, d);
    if (n.on_host()) Bump(host_[r], 0, d);
  }
}

void Ledger::AddInFlight(Tier tier, int lane, int64_t pages) {
  LaneAccount& a = mut(tier, lane);
  a.in_flight += pages;
  KV_CHECK(a.in_flight >= 0, "negative in-flight pages");
  KV_CHECK(a.used() <= a.capacity, "lane " << lane << " over capacity after allocation");
  if (a.used() > a.peak) a.peak = a.used();
}

void Ledger::CheckAgainst(const RadixTree& tree, const std::vector<int64_t>& device_free_slots,
                          const std::vector<int64_t>& host_free_slots) const {
  Ledger fresh(lanes(), device_.empty() ? 0 : device_[0].capacity,
               host_.empty() ? 0 : host_[0].capacity);
  for (NodeId id = 1; id < tree.node_slots(); ++id) {
    const Node& n = tree.node(id);
    if (!n.alive) continue;
    for (const PageInfo& p : n.pages) {
      KV_CHECK(p.owner < lanes(), "page owner " << p.owner << " out of range in node " << id);
      if (n.on_device()) {
        ++fresh.device_[p.owner].tree;
        if (n.lock > 0) ++fresh.device_[p.owner].locked;
      }
      if (n.on_host()) {
        ++fresh.host_[p.owner].tree;
        if (n.lock > 0) ++fresh.host_[p.owner].locked;
      }
    }
  }
  std::ostringstream diff;
  for (int r = 0; r < lanes(); ++r) {
    for (Tier t : {Tier::kDevice, Tier::kHost}) {
      const LaneAccount& have = at(t, r);
      const LaneAccount& want = fresh.at(t, r);
      const char* tn = t == Tier::kDevice ? "device" : "host";
      if (!(have == want))
        diff << " lane " << r << " " << tn << ": ledger tree/locked/in_flight " << have.tree << "/"
             << have.locked << "/" << have.in_flight << " vs tree " << want.tree << "/"
             << want.locked << "/0;";
      const auto& free_slots = t == Tier::kDevice ? device_free_slots : host_free_slots;
      if (have.free() != free_slots[r])
        diff << " lane " << r << " " << tn << ": ledger free " << have.free() << " vs allocator "
             << free_slots[r] << ";";
    }
  }
  KV_CHECK(diff.str().empty(), "ledger does not match the tree:" << diff.str());
}

}  // namespace kvlanes

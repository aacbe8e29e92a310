// `NAME+bypass`: every decision of policy NAME, with an online bypass rule of the oracle's kind
// for device admission: do not cache a page that will be displaced before its next use.
//
// Both sides of that comparison are estimated from what the replay has shown so far:
// - the displacement horizon: how long a page survives in the cache without a hit, taken as the
//   mean age (epoch minus last access) of the pages NAME's plans evict from the last tier a page
//   passes (the host tier when there is one, else the device), a moving average over about that
//   tier's capacity of evicted pages (the characteristic time of Che's approximation);
// - the next use: a block seen before is predicted to return (on the Mooncake traces a block
//   seen before is reused far more often than a new one, and its last interval says little
//   about the next: docs/policies.md); a block never seen (or forgotten by the history) is
//   predicted to return within the horizon only while at least kAdmitUnseenWithin of the recent
//   reuse intervals (all blocks, one per sighting with a previous one, in requests) are within
//   the horizon.
// The new extent's pages are offered in order: those fitting in free pages (less the page the
// engine reserves on a receiving lane and the extent's unkeyed tail page) are cached; each
// further page is cached only if it is predicted to return within the horizon; the first refused
// page and every page after it are bypassed. Before that tier's first eviction every page is
// cached.
//
// Sightings are per block (the trace's hash unit; its pages arrive together), kept in a 4-way
// set-associative table of (block, last sighting) entries: a new block replaces the least
// recently seen entry of its set, so the history is a bounded ghost. (Direct-mapped, two blocks
// of one conversation that shared an entry evicted each other on every turn, and the one lost
// stopped the admission of the whole extent behind it.) Every request that offers a new extent
// records all its blocks (prefix included) after its own decision. The interval histogram has log2
// buckets and is halved whenever it holds more than 4 x capacity (pages) intervals, so it follows
// the recent trace.
//
// With a base that has its own admission (`NAME+tinylfu+bypass`) both run and the shorter
// admitted prefix wins.
#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "policies/block_runs.h"
#include "policies/forwarding_policy.h"
#include "policies/line_aligned.h"
#include "policies/offer_room.h"
#include "policies/queue_policy.h"
#include "policies/registry.h"
#include "sim/check.h"

namespace kvlanes {
namespace {

// History entries per page of capacity (rounded up to a power of two), and at least kMinHistory
// (16 MiB): a cache smaller than its requests still needs the blocks of the last few requests
// (on a kv-cache-tester trace at 1e5 tokens, 4096 entries forgot the previous turn's blocks).
constexpr int64_t kHistoryPerPage = 4;
constexpr uint64_t kMinHistory = uint64_t{1} << 20;
constexpr size_t kWays = 4;  // entries per set of the history
// Unseen blocks are admitted while at least this fraction of recent reuse intervals is within
// the horizon. On the Mooncake synthetic trace at cp_size 1, 0.3 and 0.5 measured lower at 1e6
// and 3e6 cached tokens than 0.7; never admitting unseen blocks lost 0.023 to lru at 1e7.
constexpr double kAdmitUnseenWithin = 0.7;

class BypassComposite final : public ForwardingPolicy {
 public:
  BypassComposite(std::string name, std::unique_ptr<CachePolicy> base, const ReplayConfig& cfg)
      : ForwardingPolicy(std::move(name), std::move(base)),
        horizon_tier_(cfg.cache.host_pages_per_lane > 0 ? Tier::kHost : Tier::kDevice),
        capacity_(std::max<int64_t>(
            1, horizon_tier_ == Tier::kHost
                   ? cfg.cache.host_pages_per_lane * static_cast<int64_t>(cfg.cache.cp_size)
                   : DeviceCapacityPages(cfg))) {
    uint64_t w = kMinHistory;
    while (w < static_cast<uint64_t>(kHistoryPerPage * capacity_)) w <<= 1;
    history_.assign(static_cast<size_t>(w), Entry{});
    mask_ = w / kWays - 1;
  }

  int64_t AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const override;
  // The request's distinct blocks (consecutive pages of one block count once), their sets
  // prefetched before the base's admission and this one look any up: the history is larger than
  // the caches, and one miss after another was most of the admission's time.
  void OnOffer(const CacheView& view, const DeviceOffer& offer) override {
    blocks_.clear();
    for (size_t i = 0; i < offer.keys.size(); i = BlockRunEnd(offer.keys, i)) {
      const size_t set = Set(offer.keys[i].block);
      blocks_.push_back({offer.keys[i].block, set});
      __builtin_prefetch(&history_[set], 1);
    }
    ForwardingPolicy::OnOffer(view, offer);
  }
  // Every request that offers a new extent records its blocks, after its own decision.
  void OnAdmit(const CacheView& view, const DeviceOffer& offer, int64_t admitted) override {
    ForwardingPolicy::OnAdmit(view, offer, admitted);
    for (const Sighted& b : blocks_) Record(b.block, b.set, view.epoch);
  }
  void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) override {
    ForwardingPolicy::OnEvict(view, demand, plan);
    if (demand.tier == horizon_tier_) LearnHorizon(view, plan);
  }

 private:
  struct Entry {
    uint64_t block = 0;
    uint64_t last = 0;  // epoch of the latest sighting; 0 = empty
  };

  static_assert(sizeof(Entry) * kWays == 64, "a set is one cache line");
  // The first entry of the block's set of kWays entries.
  size_t Set(uint64_t block) const {
    uint64_t x = block;
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return static_cast<size_t>(x & mask_) * kWays;
  }
  // The block's entry, or nullptr when the history does not hold it; `set` = Set(block).
  size_t Find(uint64_t block, size_t set) const {
    for (size_t i = set; i < set + kWays; ++i)
      if (history_[i].last != 0 && history_[i].block == block) return i;
    return kNotFound;
  }
  static constexpr size_t kNotFound = ~size_t{0};
  bool Seen(uint64_t block) const { return Find(block, Set(block)) != kNotFound; }
  void Record(uint64_t block, size_t set, uint64_t epoch) {
    if (const size_t i = Find(block, set); i != kNotFound) {
      Entry* e = &history_[i];
      if (epoch > e->last) {
        const uint64_t interval = epoch - e->last;
        // Bucket b holds intervals in [2^b, 2^(b+1)); the last, 62, everything from 2^62.
        const int b = std::min(62, static_cast<int>(std::bit_width(interval)) - 1);
        hist_[b] += 1;
        hist_total_ += 1;
        if (hist_total_ > 4.0 * static_cast<double>(capacity_)) {
          for (double& x : hist_) x *= 0.5;
          hist_total_ *= 0.5;
        }
      }
      e->last = epoch;
      return;
    }
    // A new block replaces the set's least recently seen entry (an empty one first; ties: the
    // first).
    size_t victim = set;
    for (size_t i = set + 1; i < set + kWays; ++i)
      if (history_[i].last < history_[victim].last) victim = i;
    history_[victim] = Entry{block, epoch};
  }
  // Fraction of recent reuse intervals within the horizon (whole buckets: a bucket counts when
  // its largest interval is).
  double WithinHorizon() const {
    double in = 0;
    for (int b = 0; b < 63; ++b)
      if (static_cast<double>((uint64_t{2} << b) - 1) <= horizon_) in += hist_[b];
    return hist_total_ > 0 ? in / hist_total_ : 0;
  }
  // Folds the ages of a plan's victims (of the horizon's tier) into its moving average.
  void LearnHorizon(const CacheView& view, const EvictionPlan& plan) {
    for (size_t i = 0; i < plan.victims.size(); ++i) {
      const Node& n = view.tree.node(plan.victims[i]);
      const int64_t whole = static_cast<int64_t>(n.pages.size());
      const int64_t pages =
          plan.tail_pages.empty() || plan.tail_pages[i] == 0 ? whole : plan.tail_pages[i];
      const double age = static_cast<double>(view.epoch - std::min(view.epoch, n.last_access));
      const double w = std::min(1.0, static_cast<double>(pages) / static_cast<double>(capacity_));
      horizon_ = horizon_ < 0 ? age : horizon_ + w * (age - horizon_);
    }
  }

  // The tier whose evictions end a page's stay in the cache: the host tier when there is one
  // (a page the device evicts stays there, written through or written back), else the device.
  Tier horizon_tier_;
  int64_t capacity_;  // pages of that tier in the group
  uint64_t mask_ = 0;
  // One set of kWays entries per cache line.
  std::vector<Entry, LineAlignedAllocator<Entry>> history_;
  struct Sighted {
    uint64_t block;
    size_t set;  // Set(block)
  };
  std::vector<Sighted> blocks_;  // the offered request's blocks, from OnOffer to OnAdmit
  double horizon_ = -1;          // requests; < 0 until the tier's first eviction
  double hist_[64] = {};
  double hist_total_ = 0;
};

int64_t BypassComposite::AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const {
  const int64_t base_admits = base().AdmitDevicePages(view, offer);
  const int64_t keyed_new = KeyedNewPages(offer);
  int64_t admit = base_admits;
  if (horizon_ >= 0) {
    // Room per lane without evicting, as TinyLFU computes it (OfferRoom).
    const bool pooled = offer.owners.empty();
    std::vector<int64_t> room = OfferRoom(view, offer, keyed_new);
    uint64_t block = 0;
    bool in_horizon = true;
    bool looked = false;
    // Whether unseen blocks are admitted, worked out once a page has to displace another (the
    // histogram does not change before the blocks are recorded below).
    int admit_unseen = -1;
    const int64_t offered = std::min(keyed_new, admit);
    int64_t j = 0;
    if (room.size() == 1 && room[0] > 0) {  // one room: its pages first, in one step
      j = std::min(room[0], offered);
      room[0] -= j;
    }
    for (; j < offered; ++j) {
      int64_t& r = room[pooled ? 0 : offer.owners[static_cast<size_t>(j)]];
      if (r > 0) {
        --r;
        continue;
      }
      const PageKey& k = offer.keys[static_cast<size_t>(offer.first_page + j)];
      if (!looked || k.block != block) {
        block = k.block;
        looked = true;
        in_horizon = Seen(block);
        if (!in_horizon) {
          if (admit_unseen < 0) admit_unseen = WithinHorizon() >= kAdmitUnseenWithin;
          in_horizon = admit_unseen != 0;
        }
      }
      if (!in_horizon) {
        admit = j;
        break;
      }
    }
  }
  return admit;
}

}  // namespace

std::unique_ptr<CachePolicy> MakeBypassComposite(const std::string& base, const PolicyInputs& in) {
  return std::make_unique<BypassComposite>(base + "+bypass", MakePolicy(base, in), in.cfg);
}

}  // namespace kvlanes

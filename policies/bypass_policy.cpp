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
// Sightings are per block (the trace's hash unit; its pages arrive together), kept in a
// SightingsHistory of its own size, a 4-way set-associative table of (block, last sighting)
// entries: a new block replaces the least recently seen entry of its set, so the history is a
// bounded ghost. (Direct-mapped, two blocks of one conversation that shared an entry evicted each
// other on every turn, and the one lost stopped the admission of the whole extent behind it.)
// Every request that offers a new extent records all its blocks (prefix included) after its own
// decision, the blocks a recent request with the same first block began with too found at their
// entries without a search (an agent's calls re-send a prefix of a thousand blocks); the
// sightings of blocks held report their intervals, in runs of one interval, to the interval
// histogram (policies/reuse_histogram.h), which has log2 buckets and is halved whenever it holds
// more than 4 x capacity (pages) intervals, so it follows the recent trace. (The history's epochs
// are 32-bit and saturate: intervals are exact for the first 2^32 - 1 requests of a replay.)
//
// With a base that has its own admission (`NAME+tinylfu+bypass`) both run and the shorter
// admitted prefix wins.
#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "policies/block_runs.h"
#include "policies/forwarding_policy.h"
#include "policies/offer_room.h"
#include "policies/queue_policy.h"
#include "policies/registry.h"
#include "policies/reuse_histogram.h"
#include "policies/sightings_history.h"
#include "sim/check.h"

namespace kvlanes {
namespace {

// History entries per page of capacity (rounded up to a power of two), and at least kMinHistory
// (16 MiB): a cache smaller than its requests still needs the blocks of the last few requests
// (on a kv-cache-tester trace at 1e5 tokens, 4096 entries forgot the previous turn's blocks).
constexpr int64_t kHistoryPerPage = 4;
constexpr uint64_t kMinHistory = uint64_t{1} << 20;
// Unseen blocks are admitted while at least this fraction of recent reuse intervals is within
// the horizon. On the Mooncake synthetic trace at cp_size 1, 0.3 and 0.5 measured lower at 1e6
// and 3e6 cached tokens than 0.7; never admitting unseen blocks lost 0.023 to lru at 1e7.
constexpr double kAdmitUnseenWithin = 0.7;
// Blocks whose history sets the admission prefetches ahead of the one it looks up, once it has
// looked up more than the history prefetched when the request was offered.
constexpr size_t kLookAhead = 16;

class BypassComposite final : public ForwardingPolicy {
 public:
  BypassComposite(std::string name, std::unique_ptr<CachePolicy> base, const ReplayConfig& cfg)
      : ForwardingPolicy(std::move(name), std::move(base)),
        horizon_tier_(cfg.cache.host_pages_per_lane > 0 ? Tier::kHost : Tier::kDevice),
        capacity_(std::max<int64_t>(
            1, horizon_tier_ == Tier::kHost
                   ? cfg.cache.host_pages_per_lane * static_cast<int64_t>(cfg.cache.cp_size)
                   : DeviceCapacityPages(cfg))),
        history_(HistoryEntries(capacity_)),
        intervals_(4.0 * static_cast<double>(capacity_)) {}

  int64_t AdmitDevicePages(const CacheView& view, const DeviceOffer& offer) const override;
  // Every request that offers a new extent records its blocks, after its own decision: the
  // history prepares them when offered (the blocks a recent request's list holds found, the
  // others hashed; the entries or sets of the first blocks and of the new extent's first blocks,
  // where the admission's lookups begin, prefetched while the admissions run) and records them
  // when admitted.
  void OnOffer(const CacheView& view, const DeviceOffer& offer) override {
    history_.PrepareRequest(offer.keys, static_cast<size_t>(offer.first_page));
    ForwardingPolicy::OnOffer(view, offer);
  }
  void OnAdmit(const CacheView& view, const DeviceOffer& offer, int64_t admitted) override {
    ForwardingPolicy::OnAdmit(view, offer, admitted);
    history_.CommitRequest(view.epoch, [this](uint32_t interval, uint64_t count) {
      intervals_.Add(ReuseHistogram::Bucket(interval), count);
    });
  }
  void OnEvict(const CacheView& view, const LaneDemand& demand, const EvictionPlan& plan) override {
    ForwardingPolicy::OnEvict(view, demand, plan);
    if (demand.tier == horizon_tier_) LearnHorizon(view, plan);
  }

 private:
  static uint64_t HistoryEntries(int64_t capacity) {
    uint64_t w = kMinHistory;
    while (w < static_cast<uint64_t>(kHistoryPerPage * capacity)) w <<= 1;
    return w;
  }
  bool Seen(uint64_t block) const { return history_.Holds(block); }
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
  SightingsHistory history_;
  ReuseHistogram intervals_;  // of all blocks, halved above 4 x capacity intervals
  double horizon_ = -1;       // requests; < 0 until the tier's first eviction
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
    // The history prefetched the sets of the extent's first kPrepareAhead blocks when the request
    // was offered (most admissions stop within a few lookups); from the (kPrepareAhead -
    // kLookAhead)-th lookup on, those of the kLookAhead blocks from the one looked up are
    // prefetched: keys before `ahead` were, `fetched` of them at or after the block looked up
    // last.
    const size_t end = static_cast<size_t>(offer.first_page + offered);
    size_t ahead = 0;
    size_t fetched = 0;
    size_t lookups = 0;
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
        const size_t at = static_cast<size_t>(offer.first_page + j);
        if (++lookups >= SightingsHistory::kPrepareAhead - kLookAhead) {
          if (ahead <= at) {
            ahead = at;
            fetched = 0;
          } else if (fetched > 0) {
            --fetched;
          }
          for (; fetched < kLookAhead && ahead < end;
               ++fetched, ahead = BlockRunEnd(offer.keys, ahead))
            history_.Prefetch(offer.keys[ahead].block);
        }
        in_horizon = Seen(block);
        if (!in_horizon) {
          if (admit_unseen < 0)
            admit_unseen = intervals_.FractionWithin(horizon_) >= kAdmitUnseenWithin;
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

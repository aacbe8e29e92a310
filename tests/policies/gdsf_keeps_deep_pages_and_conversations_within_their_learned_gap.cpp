// gdsf and gdsf_conv by hand. Deep scenarios use pages and blocks of 1024 tokens, where a page's
// depth weighs in its value (1 + (p + n / 2) / K, K = 3.0e-6 / 2.05e-10 = 14,634 tokens when
// the run has no cost model); conversation scenarios use one token per page (HandRun), where
// every value is about its sightings. A document is its keyed pages plus one unkeyed tail token;
// a request that must evict asks for one page more than it needs (the reserved page).
#include <doctest/doctest.h>

#include "policies/conversation_gaps.h"
#include "tests/policies/hand_cases.h"

namespace kvlanes::test {
namespace {

constexpr int64_t kDeepTokens = 1024;

// Owns a policy and an engine with pages and blocks of kDeepTokens tokens on `cp` lanes.
struct DeepRun {
  DeepRun(const std::string& policy, int cp, int64_t pages_per_lane)
      : cfg(Config(cp, pages_per_lane)),
        trace(Blocks()),
        p(MakePolicy(policy, cfg, trace)),
        engine(cfg, *p, kDeepTokens) {}
  static ReplayConfig Config(int cp, int64_t pages_per_lane) {
    ReplayConfig c = TinyConfig(cp, pages_per_lane);
    c.cache.page_tokens = kDeepTokens;
    return c;
  }
  static Trace Blocks() {
    Trace t;
    t.block_tokens = kDeepTokens;
    return t;
  }
  void Run(std::vector<uint64_t> ids) {
    Request r;
    r.input_tokens = static_cast<int64_t>(ids.size()) * kDeepTokens + 1;
    r.block_ids = std::move(ids);
    engine.Process(r);
    engine.CheckInvariants();
  }
  // True when the pages keyed `path` (one per block) are all cached on device.
  bool CachedPath(const std::vector<uint64_t>& path) const {
    const RadixTree& t = engine.tree();
    NodeId at = kRootId;
    size_t i = 0;
    while (i < path.size()) {
      at = t.Child(at, PageKey{path[i], 0});
      if (at == kNoNode || !t.node(at).on_device()) return false;
      i += t.node(at).keys.size();
    }
    return true;
  }
  DeepRun(const DeepRun&) = delete;
  DeepRun& operator=(const DeepRun&) = delete;

  ReplayConfig cfg;
  Trace trace;
  std::unique_ptr<CachePolicy> p;
  ReplayEngine engine;
};

std::vector<uint64_t> Range(uint64_t first, uint64_t n) {
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// [1..16] then [1..16 17 18]: node [17 18] sits 16 pages deep (value 1 + 17 x 1024 / 14634 =
// 2.19); then the shallow [50 51] (value 1 + 1024 / 14634 = 1.07), newer. The last request needs
// 3 pages, its tail page and the reserved one: one page must go.
void RunDeepScenario(DeepRun& r) {
  r.Run(Range(1, 16));
  std::vector<uint64_t> deep = Range(1, 18);
  r.Run(deep);
  r.Run({50, 51});
  r.Run({60, 61, 62});
}

}  // namespace

TEST_CASE("gdsf keeps the deep node a hit saves most compute on where lru evicts it") {
  DeepRun g("gdsf", 1, 24), l("lru", 1, 24);
  RunDeepScenario(g);
  RunDeepScenario(l);
  CHECK(g.CachedPath(Range(1, 18)));
  CHECK_FALSE(g.CachedPath({50, 51}));
  CHECK_FALSE(l.CachedPath(Range(1, 18)));  // least recently used: [17 18] (epoch 2)
  CHECK(l.CachedPath({50, 51}));
  CHECK(g.engine.counters().evicted_device_pages == 2);
  CHECK(l.engine.counters().evicted_device_pages == 2);
}

TEST_CASE("gdsf serves both lanes and keeps the deep node on two lanes") {
  // The same requests on two lanes of 12 pages (zigzag placement): each lane must receive its
  // share of [60 61 62] plus the tail and a reserved page, so both lanes are short and the
  // victims must free pages on each. The shallow [50 51] (one page per lane) goes first.
  DeepRun g("gdsf", 2, 12), l("lru", 2, 12);
  RunDeepScenario(g);
  RunDeepScenario(l);
  CHECK(g.CachedPath(Range(1, 18)));
  CHECK_FALSE(g.CachedPath({50, 51}));
  CHECK_FALSE(l.CachedPath(Range(1, 18)));
  CHECK(g.engine.counters().lane_deficit_failures == 0);
}

TEST_CASE("conversation gaps give a keep time from the gaps' percentile once eight are seen") {
  ConversationGaps gaps;
  uint64_t epoch = 0;
  // Conversation c: [c] at one epoch, [c c+1000] two epochs later: a gap of 2 each.
  for (uint64_t c = 1; c <= 8; ++c) {
    CHECK(gaps.Ttl() == 0);  // fewer than 8 gaps
    gaps.RecordBlocks(std::vector<uint64_t>{c}, ++epoch);
    gaps.RecordBlocks(std::vector<uint64_t>{c + 100}, ++epoch);
    gaps.RecordBlocks(std::vector<uint64_t>{c, c + 1000}, ++epoch);
  }
  CHECK(gaps.gaps() == 8);
  // 2 lies in bucket floor(8 log2 2) = 8, whose upper edge is ceil(2^(9/8)) = 3.
  CHECK(gaps.Ttl() == 3);
  CHECK(gaps.KeptUntil(epoch) == epoch + 3);  // a second turn is kept
  CHECK(gaps.KeptUntil(epoch - 1) == 0);      // a first turn is not
  CHECK(gaps.KeptUntil(epoch + 1) == 0);      // not recorded
}

namespace {

// True when the pages keyed `path` (one per page) are all cached on device.
bool CachedPath(const HandRun& r, const std::vector<uint64_t>& path) {
  NodeId at = kRootId;
  for (size_t i = 0; i < path.size();) {
    at = r.tree().Child(at, PageKey{path[i], 0});
    if (at == kNoNode || !r.tree().node(at).on_device()) return false;
    i += r.tree().node(at).keys.size();
  }
  return true;
}

// Eight two-turn conversations, each turn two requests apart ([c], a spacer [c+100 .. c+400],
// [c c+1000 c+2000]): the keep time is 3 epochs (test above); 56 pages cached, nothing evicted
// (capacity 72). Then a conversation [500] (epoch 25) and its second turn [500 501] (epoch 26,
// a gap of 1; the keep time stays 3), and at epoch 27 a 15-page request that needs 17 free pages
// of the 14 left: pages must go. Values f x c (f = 0.3 for a block seen once, 1.3 twice): the
// leaf [501] 0.3 (1 + 1.5 / K) is the lowest; the spacers and the leaves [c+1000 c+2000] are
// 0.3 (1 + 2 / K); the nodes [c] and [500] (seen twice) 1.3 (1 + 0.5 / K).
void RunConversationScenario(HandRun& r) {
  for (uint64_t c = 1; c <= 8; ++c) {
    r.Run({c});
    r.Run({c + 100, c + 200, c + 300, c + 400});
    r.Run({c, c + 1000, c + 2000});
  }
  r.Run({500});
  r.Run({500, 501});
  r.Run(Range(600, 15));
}

}  // namespace

TEST_CASE("gdsf_conv keeps a conversation's prefix within its keep time and not past it") {
  HandRun conv("gdsf_conv", 72), base("gdsf", 72);
  RunConversationScenario(conv);
  RunConversationScenario(base);
  // gdsf evicts [501] first; gdsf_conv keeps it until epoch 26 + 3 = 29 and evicts the oldest
  // spacer (4 pages) instead.
  CHECK_FALSE(CachedPath(base, {500, 501}));
  CHECK(CachedPath(conv, {500, 501}));
  CHECK(conv.engine.counters().evicted_device_pages == 4);
  conv.Run({700});  // epoch 28 (a third turn now would hit): 3 pages free, nothing evicted
  CHECK(CachedPath(conv, {500, 501}));
  CHECK(conv.engine.counters().evicted_device_pages == 4);
  // Epoch 29: the keep time ends; [501] falls back to its value, now the lowest (the clock rose
  // to the spacer's), and goes.
  conv.Run({701});
  CHECK_FALSE(CachedPath(conv, {500, 501}));
  CHECK(CachedPath(conv, {500}));
}

}  // namespace kvlanes::test

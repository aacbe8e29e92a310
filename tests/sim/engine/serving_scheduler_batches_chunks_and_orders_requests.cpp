// Serving mode on hand-made traces (one token per page and per block): token budgets, chunked
// prefill, lpm order, in-flight locks, router choices, the overload warning, determinism.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "policies/registry.h"
#include "sim/engine/router.h"
#include "sim/engine/scheduler.h"
#include "sim/report/report.h"
#include "tests/approx.h"
#include "tests/sim/harness.h"
#include "traces/trace_reader.h"

namespace kvlanes {
namespace {

// 1 ms per pass, 1 us per token, a per-request extra of extra_s (0 unless set: a gather); records
// every chunk it times.
class LinearCost final : public ForwardCost {
 public:
  double PassBaseS() const override { return 1e-3; }
  double ChunkS(int64_t n, int64_t ctx) const override {
    chunks.emplace_back(n, ctx);
    return 1e-6 * static_cast<double>(n);
  }
  RequestExtra RequestExtraS(const RequestPlan&) const override {
    RequestExtra e;
    e.total_s = e.gather_s = extra_s;
    return e;
  }
  bool NeedsPlan() const override { return extra_s > 0; }
  // Back to back (within gap_s of the last pass's end) a pass's compute takes `sustained` times
  // as long; gap_s < 0: not modelled.
  double SustainedRatio(const std::vector<PricedChunk>&) const override { return sustained; }
  double SustainedGapS() const override { return gap_s; }
  double extra_s = 0, sustained = 1, gap_s = -1;
  mutable std::vector<std::pair<int64_t, int64_t>> chunks;
};

constexpr int64_t kMs = 1000000;

Request At(int64_t t_ns, std::vector<uint64_t> ids, int64_t out = 0) {
  Request r = test::Tokens(std::move(ids));
  r.arrival_ns = t_ns;
  r.output_tokens = out;
  return r;
}

std::vector<uint64_t> ServingIds(uint64_t from, int64_t n) {
  std::vector<uint64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(from + static_cast<uint64_t>(i));
  return v;
}

Trace TraceOf(std::vector<Request> reqs) {
  Trace t;
  t.format = TraceFormat::kTokens;
  t.block_tokens = 1;
  t.sources = {"hand-made"};
  t.requests = std::move(reqs);
  return t;
}

struct Served {
  ReplayConfig cfg;
  std::vector<std::unique_ptr<CachePolicy>> policies;
  LinearCost cost;
  std::unique_ptr<ServingReplay> sim;
  ServingResult res;
  Served(ReplayConfig c, const Trace& t, double extra_s = 0, double sustained = 1,
         double gap_s = -1)
      : cfg(std::move(c)) {
    cost.extra_s = extra_s;
    cost.sustained = sustained;
    cost.gap_s = gap_s;
    cfg.serving.mode = "serving";
    std::vector<CachePolicy*> ps;
    for (int64_t r = 0; r < cfg.serving.replicas; ++r) {
      policies.push_back(MakePolicy("lanes", cfg, t));
      ps.push_back(policies.back().get());
    }
    sim = std::make_unique<ServingReplay>(cfg, ps, 1, cost, EngineOptions{true});
    res = sim->Run(t, nullptr, nullptr);
  }
};

ReplayConfig Tiny(int64_t pages) { return test::TinyConfig(1, pages); }

}  // namespace

TEST_CASE("a pass takes requests whole until the next would exceed the token budget") {
  ReplayConfig cfg = Tiny(1000);
  cfg.serving.max_batch_tokens = 250;
  Served s(cfg, TraceOf({At(0, ServingIds(100, 100)), At(0, ServingIds(300, 100)),
                         At(0, ServingIds(500, 100))}));
  CHECK(s.res.replicas[0].passes == 2);
  const int64_t first = kMs + 200 * 1000;  // base + 200 tokens
  CHECK(s.res.requests[0].first_token_ns == first);
  CHECK(s.res.requests[1].first_token_ns == first);
  CHECK(s.res.requests[2].admit_ns == first);
  CHECK(s.res.requests[2].first_token_ns == first + kMs + 100 * 1000);
}

TEST_CASE("batching off serves one whole request per pass") {
  ReplayConfig cfg = Tiny(1000);
  Served s(cfg, TraceOf({At(0, ServingIds(100, 100)), At(0, ServingIds(300, 100))}));
  CHECK(s.res.replicas[0].passes == 2);
  CHECK(s.res.requests[1].admit_ns == s.res.requests[0].first_token_ns);
}

TEST_CASE("a pass run back to back is priced at the sustained clock, one after an idle gap not") {
  // Passes of 1 ms + 100 us of compute and a 0.5 ms extra each: A and B arrive together and run
  // back to back, C arrives 100 ms later, after the replica has been idle.
  const Trace t = TraceOf({At(0, ServingIds(100, 100)), At(0, ServingIds(300, 100)),
                           At(100 * kMs, ServingIds(500, 100))});
  const Served s(Tiny(1000), t, 0.5e-3, 1.25, 0.01);
  const int64_t fresh = 1600000, back_to_back = 1875000;  // ns: 1.1 ms x 1.25 + the extra
  CHECK(s.res.requests[0].first_token_ns == fresh);
  CHECK(s.res.requests[1].first_token_ns == fresh + back_to_back);
  CHECK(s.res.requests[2].first_token_ns == 100 * kMs + fresh);
  // Its own compute and the pass base are charged at the clock it ran at; the extra is not.
  CHECK(s.res.requests[1].compute_s == kvlanes::test::RelApprox(1.25 * 100e-6));
  CHECK(s.res.requests[1].pass_base_s == kvlanes::test::RelApprox(1.25e-3));
  CHECK(s.res.requests[2].compute_s == kvlanes::test::RelApprox(100e-6));
  // Without the term (gap < 0) every pass is priced after a gap.
  const Served plain(Tiny(1000), t, 0.5e-3, 1.25, -1);
  CHECK(plain.res.requests[1].first_token_ns == 2 * fresh);
  // With a 0.2 s threshold C's gap of 96.5 ms counts as back to back.
  const Served wide(Tiny(1000), t, 0.5e-3, 1.25, 0.2);
  CHECK(wide.res.requests[2].first_token_ns == 100 * kMs + back_to_back);
}

TEST_CASE("chunked prefill splits a long request and counts earlier chunks as context") {
  ReplayConfig cfg = Tiny(1000);
  cfg.serving.max_batch_tokens = 100;
  cfg.serving.chunk_tokens = 100;
  Served s(cfg, TraceOf({At(0, ServingIds(100, 250))}));
  CHECK(s.res.replicas[0].passes == 3);
  CHECK(s.cost.chunks == std::vector<std::pair<int64_t, int64_t>>{{100, 0}, {100, 100}, {50, 200}});
  CHECK(s.res.requests[0].first_token_ns == 3 * kMs + 250 * 1000);
}

TEST_CASE("a partly prefilled request goes first and new ones fill the rest of the budget") {
  ReplayConfig cfg = Tiny(1000);
  cfg.serving.max_batch_tokens = 150;
  cfg.serving.chunk_tokens = 100;
  Served s(cfg, TraceOf({At(0, ServingIds(100, 250)), At(0, ServingIds(400, 50)),
                         At(0, ServingIds(600, 80))}));
  // pass 1: r0 100 + r1 50; pass 2: r0 100 + r2 50; pass 3: r0 50 + r2 30.
  CHECK(s.res.replicas[0].passes == 3);
  CHECK(s.res.requests[1].first_token_ns == kMs + 150 * 1000);
  CHECK(s.res.requests[2].admit_ns == s.res.requests[1].first_token_ns);
  CHECK(s.res.requests[0].first_token_ns == s.res.requests[2].first_token_ns);
  CHECK(s.res.replicas[0].pass_tokens == 380);
}

TEST_CASE(
    "a request's time to first token splits into queue, own compute, passes' base, extra "
    "and batch mates") {
  ReplayConfig cfg = Tiny(1000);
  cfg.serving.max_batch_tokens = 150;
  cfg.serving.chunk_tokens = 100;
  const double e = 2e-4, us = 1e-6, base = 1e-3;
  Served s(cfg,
           TraceOf({At(0, ServingIds(100, 250)), At(0, ServingIds(400, 50)),
                    At(0, ServingIds(600, 80))}),
           e);
  // pass 1: r0 100 + r1 50 (+ both extras); pass 2: r0 100 + r2 50 (+ r2's); pass 3: r0 50 + r2 30.
  const double p1 = base + 150 * us + 2 * e, p2 = base + 150 * us + e, p3 = base + 80 * us;
  struct Want {
    double queue, compute, bases, mates, ttft;
  };
  const Want want[3] = {{0, 250 * us, 3 * base, 50 * us + e + 80 * us + e, p1 + p2 + p3},
                        {0, 50 * us, base, 100 * us + e, p1},
                        {p1, 80 * us, 2 * base, 150 * us, p1 + p2 + p3}};
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    const ServedRequest& q = s.res.requests[i];
    const double ttft = static_cast<double>(q.first_token_ns - q.arrival_ns) * 1e-9;
    const double queue = static_cast<double>(q.admit_ns - q.arrival_ns) * 1e-9;
    CHECK(ttft == kvlanes::test::RelApprox(want[i].ttft).epsilon(1e-9));
    CHECK(queue == kvlanes::test::RelApprox(want[i].queue).epsilon(1e-9));
    CHECK(q.compute_s == kvlanes::test::RelApprox(want[i].compute).epsilon(1e-12));
    CHECK(q.pass_base_s == kvlanes::test::RelApprox(want[i].bases).epsilon(1e-12));
    CHECK(q.extra.total_s == e);
    CHECK(q.extra.gather_s == e);
    CHECK(BatchMatesS(q) == kvlanes::test::RelApprox(want[i].mates).epsilon(1e-6));
    // Nothing is left over: queue + its passes = TTFT (no wait between its passes here).
    CHECK(queue + static_cast<double>(q.in_passes_ns) * 1e-9 == kvlanes::test::RelApprox(ttft));
  }
}

TEST_CASE("lpm admits the waiting request with the longest cached prefix first; fcfs by arrival") {
  // r0 caches 1..20 and keeps the replica busy; r1 (no shared prefix) and r2 (shares 1..20)
  // wait behind it.
  const Trace t = TraceOf({At(0, ServingIds(1, 20)), At(1000, ServingIds(100, 5)), At(2000, [] {
                             auto v = ServingIds(1, 20);
                             v.push_back(999);
                             return v;
                           }())});
  ReplayConfig cfg = Tiny(1000);
  cfg.serving.schedule = "lpm";
  Served lpm(cfg, t);
  CHECK(lpm.res.requests[2].admit_ns < lpm.res.requests[1].admit_ns);
  CHECK(lpm.res.requests[2].hit_tokens == 20);
  cfg.serving.schedule = "fcfs";
  Served fcfs(cfg, t);
  CHECK(fcfs.res.requests[1].admit_ns < fcfs.res.requests[2].admit_ns);
}

TEST_CASE("a request in decode keeps its pages locked, so eviction takes another node") {
  // Capacity 7: A (held 1000 s by its decode) and B fill 6; C needs 3 + 1 reserved page.
  // Sequential order evicts the LRU node, A; serving must evict B because A is locked.
  const Trace t2 =
      TraceOf({At(0, {1, 2, 3}, 1000), At(1000 * kMs, {4, 5, 6}), At(2000 * kMs, {7, 8, 9})});
  ReplayConfig cfg = Tiny(7);
  cfg.serving.decode_tokens_per_s = 0.5;  // A holds for 2000 s
  Served held(cfg, t2);
  const ReplayEngine& h = held.sim->engine(0);
  CHECK(h.Peek(test::Tokens({1, 2, 3, 0})).device_pages == 3);  // A kept
  CHECK(h.Peek(test::Tokens({4, 5, 6, 0})).device_pages == 0);  // B evicted
  CHECK(h.Peek(test::Tokens({7, 8, 9, 0})).device_pages == 3);
  CHECK(h.counters().uncached_requests == 0);
  // The sequential engine on the same requests evicts A instead.
  auto pol = MakePolicy("lanes", cfg, t2);
  ReplayEngine seq(cfg, *pol, 1);
  for (const Request& r : t2.requests) seq.Process(r);
  CHECK(seq.Peek(test::Tokens({1, 2, 3, 0})).device_pages == 0);
  CHECK(seq.Peek(test::Tokens({4, 5, 6, 0})).device_pages == 3);
}

TEST_CASE("a request that cannot find pages while others hold theirs waits for their release") {
  // Capacity 5: A holds 3 pages for 1000 s; C needs 3 + 1 and only 2 are free or unlocked.
  ReplayConfig cfg = Tiny(5);
  cfg.serving.decode_tokens_per_s = 1;
  Served s(cfg, TraceOf({At(0, {1, 2, 3}, 1000), At(10 * kMs, {7, 8, 9})}));
  const ServedRequest& a = s.res.requests[0];
  const ServedRequest& c = s.res.requests[1];
  CHECK(c.waited_for_pages);
  CHECK(s.res.replicas[0].page_waits == 1);
  CHECK(c.admit_ns == a.release_ns);
  CHECK(c.cached);
  CHECK(a.release_ns == a.first_token_ns + 1000 * 1000 * kMs);
}

TEST_CASE("the page check counts the device match only when not every page of the request fits") {
  // Capacity 5: A keeps 3 pages locked (admitted, not released), so 2 are free and none is
  // unlocked. The check must equal its definition, pages - device match + 1 <= free + unlocked,
  // whether or not it needs the match to decide.
  ReplayConfig cfg = Tiny(5);
  auto pol = MakePolicy("lanes", cfg, TraceOf({}));
  ReplayEngine eng(cfg, *pol, 1);
  const Admission a = eng.Admit(test::Tokens({1, 2, 3}));
  const auto defined = [&](const Request& r) {
    const LaneAccount& d = eng.ledger().at(Tier::kDevice, 0);
    return r.input_tokens - eng.Peek(r).device_pages + 1 <= d.free() + d.evictable();
  };
  const Request extends = test::Tokens({1, 2, 3, 4});    // 4 pages, 3 matched: needs 2
  const Request longer = test::Tokens({1, 2, 3, 4, 5});  // needs 3
  const Request fresh = test::Tokens({7, 8});            // needs 3, matches nothing
  const Request one = test::Tokens({9});                 // needs 2 without a match
  CHECK(eng.CouldAllocate(extends));                     // only through its match
  CHECK(!eng.CouldAllocate(longer));
  CHECK(!eng.CouldAllocate(fresh));
  CHECK(eng.CouldAllocate(one));  // fits whatever it matches
  for (const Request& r : {extends, longer, fresh, one}) CHECK(eng.CouldAllocate(r) == defined(r));
  // Released, A's pages are unlocked (room 5): everything fits, the longest (6 pages with the
  // reserved one) only through its match.
  eng.Release(a);
  for (const Request& r : {extends, longer, fresh, one}) {
    CHECK(eng.CouldAllocate(r));
    CHECK(eng.CouldAllocate(r) == defined(r));
  }
}

TEST_CASE("routers choose by turn, by load and by the longest cached prefix") {
  ReplayConfig cfg = Tiny(100);
  const Trace t = TraceOf({});
  auto p0 = MakePolicy("lanes", cfg, t), p1 = MakePolicy("lanes", cfg, t);
  ReplayEngine e0(cfg, *p0, 1), e1(cfg, *p1, 1);
  e0.Process(test::Tokens({1, 2, 3, 4}));
  e1.Process(test::Tokens({10, 11, 12, 13}));
  std::vector<ReplicaView> v{{&e0, 5}, {&e1, 3}};
  ServingConfig sc;
  sc.router = "prefix";
  auto prefix = MakeRouter(sc);
  CHECK(prefix->Route(test::Tokens({10, 11, 12, 99}), v) == 1);
  CHECK(prefix->Route(test::Tokens({1, 2, 5}), v) == 0);
  CHECK(prefix->Route(test::Tokens({77, 78}), v) == 1);  // no prefix anywhere: least loaded
  v[1].load_tokens = 9;
  CHECK(prefix->Route(test::Tokens({77, 78}), v) == 0);
  sc.router = "least_load";
  auto least = MakeRouter(sc);
  CHECK(least->Route(test::Tokens({10, 11, 12, 99}), v) == 0);
  v[0].load_tokens = 9;
  CHECK(least->Route(test::Tokens({1}), v) == 0);  // tie: lowest index
  sc.router = "round_robin";
  auto rr = MakeRouter(sc);
  CHECK(rr->Route(test::Tokens({1}), v) == 0);
  CHECK(rr->Route(test::Tokens({1}), v) == 1);
  CHECK(rr->Route(test::Tokens({1}), v) == 0);
}

TEST_CASE("prefix routing keeps conversations on one replica and hits more than round robin") {
  // Three conversations take turns on two replicas; each turn extends its previous input.
  // Round robin moves a conversation to the other replica every turn.
  std::vector<Request> reqs;
  std::vector<std::vector<uint64_t>> conv{ServingIds(1, 10), ServingIds(1000, 10),
                                          ServingIds(5000, 10)};
  for (int turn = 0; turn < 6; ++turn) {
    for (auto& c : conv) {
      c.push_back(c[0] * 100 + static_cast<uint64_t>(turn));
      reqs.push_back(At(static_cast<int64_t>(reqs.size()) * 100 * kMs, c));
    }
  }
  const Trace t = TraceOf(reqs);
  ReplayConfig cfg = Tiny(1000);
  cfg.serving.replicas = 2;
  cfg.serving.router = "prefix";
  Served pre(cfg, t);
  cfg.serving.router = "round_robin";
  Served rr(cfg, t);
  int64_t hit_pre = 0, hit_rr = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    hit_pre += pre.res.requests[i].hit_tokens;
    hit_rr += rr.res.requests[i].hit_tokens;
  }
  CHECK(hit_pre > hit_rr);
  for (size_t i = 3; i < reqs.size(); ++i)
    CHECK(pre.res.requests[i].replica == pre.res.requests[i - 3].replica);
  CHECK(rr.res.requests[3].replica != rr.res.requests[0].replica);
  // Every turn after the first hits its whole previous input on the prefix router: 11..15
  // tokens for turns 1..5 of each conversation (the match cap, input - 1, is the previous input).
  CHECK(hit_pre == 3 * (11 + 12 + 13 + 14 + 15));
}

TEST_CASE("the report warns when a replica is offered more than its capacity") {
  // 20 requests of 1000 tokens, 1 ms apart: 2 ms of work per ms of trace.
  std::vector<Request> reqs;
  for (int i = 0; i < 20; ++i) reqs.push_back(At(i * kMs, ServingIds(10000 * (i + 1), 1000)));
  ReplayConfig cfg = Tiny(100000);
  Served s(cfg, TraceOf(reqs));
  const auto j = ServingToJson(s.cfg, s.res, false);
  REQUIRE(j["warning"].is_string());
  const std::string w = j["warning"].get<std::string>();
  CHECK(w.find("overloaded: replica 0") != std::string::npos);
  // busy 20 x 2 ms = 40 ms over a 19 ms span: at least ceil(40/19) = 3 replicas.
  CHECK(j["total"]["busy_s"].get<double>() == kvlanes::test::RelApprox(0.040));
  CHECK(w.find("at least 3 replicas") != std::string::npos);
  CHECK(j["compute_assumed"].get<bool>());
  cfg.serving.replicas = 3;  // round robin: 7, 7 and 6 requests, at most 14 ms of 19
  cfg.serving.router = "round_robin";
  Served three(cfg, TraceOf(reqs));
  CHECK(ServingToJson(three.cfg, three.res, false)["warning"].is_null());
}

TEST_CASE("warm-up requests are left out of the serving metrics") {
  std::vector<Request> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back(At(i * 10 * kMs, ServingIds(100 * (i + 1), 10)));
  ReplayConfig cfg = Tiny(1000);
  cfg.serving.warmup_s = 0.035;  // requests at 0, 10, 20, 30 ms
  Served s(cfg, TraceOf(reqs));
  const auto j = ServingToJson(s.cfg, s.res, true);
  CHECK(j["warmup_requests"].get<int64_t>() == 4);
  CHECK(j["total"]["requests"].get<int64_t>() == 6);
  CHECK(j["total"]["input_tokens"].get<int64_t>() == 60);
}

TEST_CASE("serving replays are deterministic and sequential reports keep no serving keys") {
  ReplayConfig cfg;
  cfg.cache.cp_size = 4;
  cfg.cache.device_pages_per_lane = 2000;
  cfg.cache.host_pages_per_lane = 4000;
  cfg.hardware.profile =
      std::string(KVLANES_SOURCE_DIR) + "/config/profiles/8xh200_nccl_model.yaml";
  const Trace t = LoadTrace({std::string(KVLANES_SOURCE_DIR) + "/traces/mooncake_excerpt.jsonl"},
                            std::nullopt, TraceOptions{});
  const std::string seq = ConfigToJson(cfg).dump();
  CHECK(seq.find("\"serving.") == std::string::npos);
  CHECK(seq.find("rate_scale") == std::string::npos);
  cfg.serving.mode = "serving";
  cfg.serving.replicas = 2;
  cfg.serving.router = "prefix";
  cfg.serving.max_batch_tokens = 16384;
  cfg.serving.chunk_tokens = 8192;
  cfg.serving.decode_tokens_per_s = 50;
  ReplaySinks sinks;
  sinks.replica_policy = [&] { return MakePolicy("lanes", cfg, t); };
  auto p1 = MakePolicy("lanes", cfg, t), p2 = MakePolicy("lanes", cfg, t);
  const std::string a = RunReplay(cfg, *p1, t, {}, nullptr, sinks).dump();
  const std::string b = RunReplay(cfg, *p2, t, {}, nullptr, sinks).dump();
  CHECK(a == b);
  CHECK(a.find("\"per_replica\"") != std::string::npos);
}

}  // namespace kvlanes

namespace kvlanes {

// The target of docs/serving.md: with one replica, batching off and no decode hold, serving
// mode admits requests one at a time in trace order and releases each before the next, so its
// cache does exactly what sequential mode's does, on the public Mooncake conversation trace.
TEST_CASE("one replica without batching matches sequential hits on the Mooncake conversations") {
  ReplayConfig cfg;
  cfg.cache.cp_size = 4;
  cfg.cache.device_pages_per_lane = 4000;
  cfg.cache.host_pages_per_lane = 8000;
  cfg.hardware.profile =
      std::string(KVLANES_SOURCE_DIR) + "/config/profiles/8xh200_nccl_model.yaml";
  const Trace t =
      LoadTrace({std::string(KVLANES_SOURCE_DIR) + "/traces/mooncake/conversation_trace.jsonl"},
                std::nullopt, TraceOptions{});
  auto p1 = MakePolicy("lanes", cfg, t);
  const auto seq = RunReplay(cfg, *p1, t, {}, nullptr);
  cfg.serving.mode = "serving";
  auto p2 = MakePolicy("lanes", cfg, t);
  const auto srv = RunReplay(cfg, *p2, t, {}, nullptr);
  REQUIRE(seq["evicted_pages"]["device"].get<int64_t>() > 0);  // the cache is under pressure
  for (const char* k : {"device_hit_tokens", "host_hit_tokens", "computed_tokens",
                        "uncached_requests", "inserted_pages", "duplicate_pages"})
    CHECK_MESSAGE(seq[k] == srv[k], k);
  CHECK(seq["evicted_pages"] == srv["evicted_pages"]);
  CHECK(seq["load_back"] == srv["load_back"]);
  CHECK(seq["host_writes"] == srv["host_writes"]);
  // One request per pass: the busy time is the predictor's sum of service times.
  CHECK(srv["serving"]["total"]["busy_s"].get<double>() ==
        kvlanes::test::RelApprox(seq["predicted"]["total_s"].get<double>()).epsilon(1e-6));
}

}  // namespace kvlanes

namespace kvlanes {

TEST_CASE("plan records carry the replica in serving mode only, and read back") {
  ReplayConfig cfg = test::TinyConfig(1, 10);
  RequestPlan p;
  p.request = 4;
  p.input_tokens = 3;
  p.computed_tokens = 3;
  CHECK_FALSE(PlanToJson(p, cfg).contains("replica"));
  p.replica = 2;
  const auto j = PlanToJson(p, cfg);
  REQUIRE(j.contains("replica"));
  CHECK(j["replica"].get<int64_t>() == 2);
  CHECK(PlanFromJson(nlohmann::json::parse(j.dump()), "p.jsonl", 2) == p);
}

}  // namespace kvlanes

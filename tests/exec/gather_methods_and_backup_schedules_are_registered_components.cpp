// Gather methods and backup schedules are components (methods/gather_method.h,
// methods/backup_schedule.h): every registered one has a cost formula, a device recipe (run here
// on a backend that records the primitives it calls) and a host recipe (its data movement on
// plain values, which must give back the prefix in logical order). And a method defined in this
// file alone, registered through RegisterGatherMethod, runs through the cost model and the
// executor on the host backend, its result verified byte by byte: adding a method touches its
// own file and the registry's table, nothing else. Components register on both sides
// (RegisterGatherComponent): the executor's table of recipes and the cost model's of formulas.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "exec/host_backend.h"
#include "exec_cases.h"
#include "forwarding_backend.h"
#include "methods/backup_schedule.h"
#include "methods/gather_method.h"
#include "methods/method_costs.h"
#include "methods/shard_exchange.h"
#include "policies/forwarding_policy.h"
#include "sim/predict/hardware_profile.h"

namespace kvlanes::exec::testing {
namespace {

constexpr int kRanks = 2;
constexpr int64_t kPages = 8;

CostModel TwoRankModel() {
  const ReplayConfig cfg = SmallConfig(kRanks, {});
  return CostModel(LoadHardwareProfile(SourcePath("config/profiles/8xh200_nccl_model.yaml")), cfg);
}

ExecGeometry SmallGeometry() {
  ExecGeometry g;
  g.ranks = kRanks;
  g.page_tokens = 4;
  g.layers = 2;
  g.elem_bytes = {8};
  g.pool_names = {"kv"};
  g.device_slots = 16;
  g.max_prefix_pages = kPages;
  g.max_shard_pages = kPages;
  return g;
}

// A backend that records the gather primitives a recipe calls (rank 0 of kRanks) and runs none.
class RecordingBackend : public ForwardingBackend {
 public:
  explicit RecordingBackend(std::unique_ptr<RankBackend> b)
      : ForwardingBackend(std::move(b)), geo_(SmallGeometry()) {}
  int rank() const override { return 0; }
  int ranks() const override { return kRanks; }
  const ExecGeometry& geometry() const override { return geo_; }
  int Mark(Stream) override { return next_mark_++; }
  void ScatterDense(Stream, int64_t) override { calls.push_back("scatter"); }
  void PackShard(Stream, int64_t) override { calls.push_back("pack"); }
  void Unpack(Stream, int64_t, RecordBuffer) override { calls.push_back("unpack"); }
  void ZigzagReorder(Stream, int64_t, RecordBuffer) override { calls.push_back("zigzag"); }
  void PeerGather(Stream, int64_t) override { calls.push_back("peer_gather"); }
  void AllGather(Stream, int64_t) override { calls.push_back("all-gather"); }
  void AllReduce(Stream, int64_t, int64_t) override { calls.push_back("all-reduce"); }
  void Broadcast(Stream, int, int64_t) override { calls.push_back("broadcast"); }
  std::vector<std::string> calls;

 private:
  ExecGeometry geo_;
  int next_mark_ = 0;
};

// A prefix the method can gather: owners its own (lane 0 for a layer_split method), each
// rank's pages in slots 0, 1, ... in logical order; every page tagged with its position.
std::vector<PrefixPage> PrefixFor(const GatherMethodImpl& m) {
  std::vector<PrefixPage> prefix;
  std::vector<uint32_t> next(kRanks, 0);
  for (int64_t p = 0; p < kPages; ++p) {
    const int owner =
        m.Layout() == GatherLayout::kLayerSplit ? 0 : m.ScratchOwner(p, kPages, kRanks);
    prefix.push_back(PrefixPage{static_cast<uint16_t>(owner), next[static_cast<size_t>(owner)]++});
  }
  return prefix;
}

std::vector<GatherIndex> IndicesFor(const GatherMethodImpl& m,
                                    const std::vector<PrefixPage>& prefix, GatherMethod id) {
  std::vector<GatherIndex> per_rank(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    GatherIndex& g = per_rank[static_cast<size_t>(r)];
    g.method = id;
    g.prefix_pages = kPages;
    for (int64_t p = 0; p < kPages; ++p) g.tags.push_back(PageTag{1, 0, p});
    m.BuildIndex(r, kRanks, prefix, g);
  }
  return per_rank;
}

std::vector<PageTag> Tags() {
  std::vector<PageTag> t;
  for (int64_t p = 0; p < kPages; ++p) t.push_back(PageTag{1, 0, p});
  return t;
}

// What (rank, slot) holds: the tag of the logical page placed there (layer_split: lane 0's
// pages are on every rank).
GatherMethodImpl::SlotReader Pools(const std::vector<PrefixPage>& prefix, bool every_rank) {
  std::map<std::pair<int, int32_t>, PageTag> at;
  for (int64_t p = 0; p < kPages; ++p)
    for (int r = 0; r < kRanks; ++r)
      if (r == prefix[static_cast<size_t>(p)].owner || every_rank)
        at[{r, static_cast<int32_t>(prefix[static_cast<size_t>(p)].device_slot)}] =
            PageTag{1, 0, p};
  return [at](int r, int32_t s) {
    const auto it = at.find({r, s});
    return it == at.end() ? PageTag{} : it->second;
  };
}

TEST_CASE("every registered gather method has a cost formula, a device recipe and a host recipe") {
  const CostModel cm = TwoRankModel();
  const std::map<std::string, std::vector<std::string>> recipes = {
      {"dense", {"scatter", "all-reduce"}},
      {"packed", {"pack", "all-gather", "unpack"}},
      {"zigzag", {"pack", "all-gather", "zigzag"}},
      {"owner_major", {"pack", "all-gather"}},
      {"p2p", {"peer_gather"}},
      {"broadcast", {"pack", "broadcast"}}};
  // The ids the engine and the policies name are the shipped components of those names, and
  // every name the plans may carry has its component under the id it parses to.
  const std::vector<std::pair<GatherMethod, std::string>> named = {
      {GatherMethod::kDense, "dense"},
      {GatherMethod::kPacked, "packed"},
      {GatherMethod::kP2p, "p2p"},
      {GatherMethod::kZigzag, "zigzag"},
      {GatherMethod::kOwnerMajor, "owner_major"},
      {GatherMethod::kBroadcast, "broadcast"},
      {GatherMethod::kPartialMerge, "partial_merge"}};
  for (const auto& [id, name] : named) {
    CAPTURE(name);
    CHECK(std::string(GatherMethodOf(id).Name()) == name);
    CHECK(kGatherMethodNames.Parse(name, "method") == id);
  }
  for (std::string_view n : kGatherMethodNames.Names())
    CHECK(std::string(GatherMethodOf(kGatherMethodNames.Parse(n, "method")).Name()) == n);
  for (const GatherMethodImpl* m : RegisteredGatherMethods()) {
    CAPTURE(m->Name());
    // The shipped methods (a test may have registered examples of its own).
    if (std::none_of(named.begin(), named.end(), [&](const auto& e) { return e.first == m->Id(); }))
      continue;
    CHECK(&GatherMethodOf(m->Id()) == m);
    CHECK(GatherCostFor(m->Id()).Id() == m->Id());
    const std::vector<PrefixPage> prefix = PrefixFor(*m);
    const std::vector<GatherIndex> per_rank = IndicesFor(*m, prefix, m->Id());
    std::vector<int64_t> shards(kRanks, 0);
    for (const PrefixPage& q : prefix) ++shards[q.owner];
    if (!m->Gathers()) {
      // Priced from the new tokens (queries and partial outputs), not the prefix.
      ForwardShape f;
      f.prefix_pages = kPages;
      f.new_tokens = 64;
      GatherCost c;
      REQUIRE(GatherCostFor(m->Id()).RequestCost(cm, f, c));
      CHECK(c.per_layer_s > 0);
      CHECK(m->HostGather(per_rank, Pools(prefix, false)).empty());
      continue;
    }
    const GatherCost c = cm.Gather(m->Id(), shards, kPages);
    CHECK(c.per_layer_s > 0);
    CHECK(c.total_s >= c.per_layer_s);
    // Host recipe: the prefix in logical order, and not when a page is elsewhere.
    const bool every_rank = m->Layout() == GatherLayout::kLayerSplit;
    CHECK(m->HostGather(per_rank, Pools(prefix, every_rank)) == Tags());
    std::vector<PrefixPage> moved = prefix;
    std::swap(moved[1].device_slot, moved[3].device_slot);
    std::swap(moved[1].owner, moved[3].owner);
    CHECK(m->HostGather(per_rank, Pools(moved, every_rank)) != Tags());
    // Device recipe: the primitives of one layer, with the phases it reports.
    const ExecGeometry geo = SmallGeometry();
    ExecGeometry one = geo;
    one.ranks = 1;
    const std::unique_ptr<HostSegment> seg = HostSegment::CreateAnonymous(one);
    RecordingBackend b(MakeHostBackend(one, *seg, 0, 10));
    GatherPhases phases;
    m->Layer(b, per_rank[0], Stream::kComm, 0, &phases);
    REQUIRE(recipes.count(m->Name()) == 1);
    CHECK(b.calls == recipes.at(m->Name()));
    std::vector<std::string> phase_names;
    for (const auto& ph : phases) phase_names.push_back(ph.first);
    CHECK(phase_names == b.calls);
  }
}

TEST_CASE("every registered backup schedule has a cost formula and a recipe") {
  const CostModel cm = TwoRankModel();
  for (const auto& [id, n] : kBackupScheduleNames.entries) {
    const std::string name(n);
    CAPTURE(name);
    CHECK(std::string(BackupScheduleOf(id).Name()) == name);
  }
  std::map<bool, int> recipes;
  for (const BackupScheduleImpl* s : RegisteredBackupSchedules()) {
    CAPTURE(s->Name());
    CHECK(&BackupScheduleOf(s->Id()) == s);
    CHECK(BackupCostFor(s->Id()).Id() == s->Id());
    ++recipes[s->CopiesEachLayer()];
    const std::vector<int64_t> pages = {8, 4};
    const std::vector<double> ends = {1e-3, 2e-3};
    const BackupCost c = cm.Backup(s->Id(), pages, ends);
    CHECK(c.forward_s == 2e-3);
    CHECK(c.total_s > c.forward_s);
    CHECK(c.submit_s > 0);
    CHECK(cm.BackupCopiesS(s->Id(), 8, 1, 8 * cm.page_layer_bytes()) > 0);
  }
  CHECK(recipes[true] == 1);   // per-layer
  CHECK(recipes[false] == 1);  // tail
}

// ---- A method that exists only in this file: each rank packs the pages it owns in logical
// order, the ranks all-gather the shards, and the result is the records, read through a page
// table (no reorder pass). `broken` reads the records backwards, which verification must catch.
class RankMajorRecords final : public GatherMethodImpl {
 public:
  RankMajorRecords(const char* name, bool broken) : name_(name), broken_(broken) {}
  const char* Name() const override { return name_; }
  GatherResult Result() const override { return GatherResult::kRecords; }
  void LayerCost(const CostModel& m, const GatherLayerShape& s, GatherCost& c) const {
    c.per_layer_s = s.kernel_ratio * m.KernelCopyS(s.max_shard_pages * s.page_layer_bytes) +
                    m.AllGatherS(s.ranks * s.max_shard_pages * s.page_layer_bytes);
  }
  void BuildIndex(int me, int ranks, std::span<const PrefixPage> prefix,
                  GatherIndex& g) const override {
    std::vector<std::vector<int64_t>> shards(static_cast<size_t>(ranks));
    for (size_t p = 0; p < prefix.size(); ++p)
      shards[prefix[p].owner].push_back(static_cast<int64_t>(p));
    for (const auto& s : shards)
      g.shard_pages = std::max<int64_t>(g.shard_pages, static_cast<int64_t>(s.size()));
    PackSlots(prefix, shards[static_cast<size_t>(me)], g);
    g.page_records.assign(prefix.size(), 0);
    for (size_t r = 0; r < shards.size(); ++r)
      for (size_t i = 0; i < shards[r].size(); ++i)
        g.page_records[static_cast<size_t>(shards[r][i])] =
            static_cast<int32_t>(static_cast<int64_t>(r) * g.shard_pages + static_cast<int64_t>(i));
    if (broken_) std::reverse(g.page_records.begin(), g.page_records.end());
  }
  void Layer(RankBackend& b, const GatherIndex& g, Stream s, int64_t layer,
             GatherPhases* phases) const override {
    ExchangeShards(b, g, s, layer, phases);
  }
  std::vector<PageTag> HostGather(std::span<const GatherIndex> per_rank,
                                  const SlotReader& slot) const override {
    return ReadRecords(HostExchangeShards(per_rank, slot), per_rank[0].page_records);
  }

 private:
  const char* name_;
  bool broken_;
};

// Registered once, before the first test that needs them runs; the ids come from the registry.
struct Examples {
  GatherMethod good, broken;
};

const Examples& RegisterExamples() {
  static const RankMajorRecords good("rank_major", false);
  static const RankMajorRecords broken("rank_major_broken", true);
  static const Examples ids{RegisterGatherComponent(good), RegisterGatherComponent(broken)};
  return ids;
}

ExecPlan PlanWith(GatherMethod m) {
  const ReplayConfig cfg =
      SmallConfig(kRanks, {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000",
                           "gather.method=packed"});
  ExecPlan plan =
      MakeExecPlan(ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 60), "(memory)", -1);
  for (RequestPlan& r : plan.requests) r.gather_method = m;
  return plan;
}

TEST_CASE("a gather method defined in a test alone runs through the cost model and the executor") {
  const GatherMethod kRankMajor = RegisterExamples().good;
  const GatherMethodImpl& m = GatherMethodOf(kRankMajor);
  CHECK(std::string(m.Name()) == "rank_major");
  // Its cost formula, through the cost model (first layer and total set around it).
  const CostModel cm = TwoRankModel();
  const std::vector<int64_t> shards = {5, 3};
  const GatherCost c = cm.GatherLayer(kRankMajor, shards, 8, 1.0);
  const double b = cm.page_layer_bytes();
  CHECK(c.per_layer_s == cm.KernelCopyS(5 * b) + cm.AllGatherS(2 * 5 * b));
  CHECK(c.total_s == static_cast<double>(cm.layers()) * c.per_layer_s);
  // Its host recipe.
  const std::vector<PrefixPage> prefix = PrefixFor(m);
  CHECK(m.HostGather(IndicesFor(m, prefix, kRankMajor), Pools(prefix, false)) == Tags());

  // The executor runs it on the host backend and verifies every layer's records.
  const ExecPlan plan = PlanWith(kRankMajor);
  int64_t gathers = 0;
  for (const RequestPlan& r : plan.requests) gathers += r.prefix_pages > 0 ? 1 : 0;
  REQUIRE(gathers > 0);
  TempDir dir;
  const RunOptions o = HostOptions(dir, 60);
  const RunOutcome out = RunLocal(plan, o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  const nlohmann::json measured = ReadJson(o.out);
  int64_t ops = 0;
  for (const auto& op : measured["ops"])
    if (op["kind"] == "gather") {
      CHECK(op["method"] == "rank_major");
      ++ops;
    }
  CHECK(ops == gathers * kRanks);
  CHECK(measured["verified_bytes"].get<int64_t>() > 0);

  // The same method with a wrong page table is caught by the executor's verification.
  TempDir dir2;
  const RunOutcome bad = RunLocal(PlanWith(RegisterExamples().broken), HostOptions(dir2, 60));
  CHECK(bad.exit_code != 0);
}

// ---- The same method chosen by a replay: a policy defined here (lanes' decisions, but every
// gathered prefix by rank_major) is replayed, each request's plan goes through the plan's JSON
// form (the method by its registered name), and the executor runs the plan on the host backend.
class ChoosesRankMajor final : public ForwardingPolicy {
 public:
  using ForwardingPolicy::ForwardingPolicy;
  GatherMethod ChooseGather(const CacheView&, const GatherContext&) const override {
    return RegisterExamples().good;
  }
};

std::unique_ptr<CachePolicy> MakeChoosesRankMajor(const PolicyInputs& in) {
  return std::make_unique<ChoosesRankMajor>("rank_major_chooser", MakePolicy("lanes", in));
}

TEST_CASE("a gather method defined in a test is chosen by a replay and run from its plan") {
  const GatherMethod id = RegisterExamples().good;
  static const bool registered = [] {
    RegisterPolicy(PolicyInfo{"rank_major_chooser", "test: lanes, gathering by rank_major",
                              &MakeChoosesRankMajor});
    return true;
  }();
  REQUIRE(registered);
  ReplayConfig cfg =
      SmallConfig(kRanks, {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000"});
  cfg.policy = "rank_major_chooser";
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 60);
  int64_t gathers = 0;
  for (const RequestPlan& r : pf.requests)
    if (r.prefix_pages > 0) {
      CHECK(r.gather_method == id);
      CHECK(nlohmann::json::parse(PlanToJson(r, cfg).dump()).dump().find("\"rank_major\"") !=
            std::string::npos);
      ++gathers;
    }
  REQUIRE(gathers > 0);
  const ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  TempDir dir;
  const RunOptions o = HostOptions(dir, 60);
  const RunOutcome out = RunLocal(plan, o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  const nlohmann::json measured = ReadJson(o.out);
  int64_t ops = 0;
  for (const auto& op : measured["ops"])
    if (op["kind"] == "gather") {
      CHECK(op["method"] == "rank_major");
      ++ops;
    }
  CHECK(ops == gathers * kRanks);
}

}  // namespace
}  // namespace kvlanes::exec::testing

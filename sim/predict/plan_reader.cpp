// The plan reader (plan.h): request lines back into RequestPlan (PlanFromJson) and whole plan
// files (ReadPlanFile), every field checked and located. It needs nothing of the predicting side,
// so the executor's library links it without the cost model (docs/architecture.md).
#include <cmath>
#include <istream>
#include <map>
#include <optional>
#include <utility>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/json_strict.h"
#include "kernels/page_layout.h"
#include "sim/cache/placement.h"
#include "sim/checked_math.h"
#include "sim/predict/plan.h"
#include "sim/predict/plan_runs.h"

namespace kvlanes {

bool operator==(const RequestPlan& a, const RequestPlan& b) {
  return a.request == b.request && a.replica == b.replica && a.arrival_ns == b.arrival_ns &&
         a.input_tokens == b.input_tokens && a.device_hit_pages == b.device_hit_pages &&
         a.host_match_pages == b.host_match_pages && a.loaded_pages == b.loaded_pages &&
         a.prefix_pages == b.prefix_pages && a.computed_tokens == b.computed_tokens &&
         a.cached == b.cached && a.evictions == b.evictions && a.write_back == b.write_back &&
         a.load_back == b.load_back && a.new_pages == b.new_pages &&
         a.gather_method == b.gather_method && a.proven_zigzag == b.proven_zigzag &&
         a.runs == b.runs && a.run_extents == b.run_extents && a.prefix == b.prefix &&
         a.shard_pages == b.shard_pages && a.backup_schedule == b.backup_schedule &&
         a.backup == b.backup && a.hit_reports == b.hit_reports &&
         a.agreed_hit_pages == b.agreed_hit_pages;
}

namespace {

using namespace plan_runs;

struct Field {
  const std::string& file;
  int64_t line;
  [[noreturn]] void Fail(const std::string& field, const std::string& msg) const {
    throw InputError(file, line, field, msg);
  }
  const nlohmann::json& At(const nlohmann::json& j, const char* key) const {
    if (!j.is_object() || !j.contains(key)) Fail(key, "missing");
    return j.at(key);
  }
  int64_t Int(const nlohmann::json& j, const char* key) const {
    const auto& v = At(j, key);
    if (!v.is_number_integer()) Fail(key, "expected an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      Fail(key, v.dump() + " beyond 2^63-1");
    return v.get<int64_t>();
  }
  // Int, refused outside lo..hi (both named in the message).
  int64_t IntIn(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi) const {
    const int64_t v = Int(j, key);
    if (v < lo || v > hi)
      Fail(key, std::to_string(v) + " outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return v;
  }
  std::string Str(const nlohmann::json& j, const char* key) const {
    const auto& v = At(j, key);
    if (!v.is_string()) Fail(key, "expected a string");
    return v.get<std::string>();
  }
  std::vector<std::array<uint32_t, 2>> PairList(const nlohmann::json& j, const char* key) const {
    const auto& v = At(j, key);
    if (!v.is_array()) Fail(key, "expected a list of pairs");
    std::vector<std::array<uint32_t, 2>> out;
    out.reserve(v.size());
    for (const auto& p : v) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_unsigned() ||
          !p[1].is_number_unsigned() || p[0].get<uint64_t>() > UINT32_MAX ||
          p[1].get<uint64_t>() > UINT32_MAX)
        Fail(key, "expected [a, b] pairs of integers in 0..2^32-1");
      out.push_back({p[0].get<uint32_t>(), p[1].get<uint32_t>()});
    }
    return out;
  }
  // A version-3 run list under `key`: [[first..., count], ...], tuple i of a run being first + i x
  // `step`, expanded into emit(tuple). `names` names the tuple's values, `hi` their largest
  // values (the last tuple of a run too); a count is 1 or more, and the line's runs together
  // expand to at most kMaxPlanLinePages tuples (`budget`: how many the line may still add).
  template <size_t N, typename Emit>
  void RunList(const nlohmann::json& j, const char* key, const std::array<int64_t, N>& step,
               const std::array<const char*, N>& names, const std::array<uint64_t, N>& hi,
               int64_t& budget, Emit emit) const {
    std::string shape = "[";
    for (const char* n : names) shape.append(n).append(", ");
    shape += "count]";
    const auto& v = At(j, key);
    if (!v.is_array()) Fail(key, "expected a list of runs " + shape);
    for (size_t r = 0; r < v.size(); ++r) {
      const auto& run = v[r];
      const std::string at = "run " + std::to_string(r) + ": ";
      if (!run.is_array() || run.size() != N + 1 || !run[N].is_number_integer()) {
        Fail(key, std::string(at).append("expected ").append(shape).append(" of integers"));
      }
      std::array<uint64_t, N> first{};
      for (size_t k = 0; k < N; ++k) {
        const auto& x = run[k];
        if (!x.is_number_integer() || (!x.is_number_unsigned() && x.get<int64_t>() < 0)) {
          Fail(key, std::string(at)
                        .append("expected ")
                        .append(shape)
                        .append(" of integers, ")
                        .append(names[k])
                        .append(" >= 0"));
        }
        first[k] = x.get<uint64_t>();
        if (first[k] > hi[k]) {
          Fail(key,
               at + names[k] + " " + std::to_string(first[k]) + " beyond " + std::to_string(hi[k]));
        }
      }
      const auto& c = run[N];
      if (!c.is_number_unsigned() || c.get<uint64_t>() == 0)
        Fail(key, at + "count " + c.dump() + ", expected 1 or more");
      if (c.get<uint64_t>() > static_cast<uint64_t>(budget)) {
        Fail(key, at + "count " + c.dump() + ": the line's runs would hold more than " +
                      std::to_string(kMaxPlanLinePages) + " tuples (kMaxPlanLinePages)");
      }
      const auto count = static_cast<int64_t>(c.get<uint64_t>());
      for (size_t k = 0; k < N; ++k) {
        // first <= 2^32 and count <= 2^24: no overflow in 64 bits.
        const uint64_t last = first[k] + static_cast<uint64_t>(step[k] * (count - 1));
        if (last > hi[k]) {
          Fail(key, at + names[k] + " runs from " + std::to_string(first[k]) + " past " +
                        std::to_string(hi[k]) + " (count " + std::to_string(count) +
                        ", last would be " + std::to_string(last) + ")");
        }
      }
      budget -= count;
      std::array<uint64_t, N> t = first;
      for (int64_t i = 0; i < count; ++i) {
        emit(t);
        for (size_t k = 0; k < N; ++k) t[k] += static_cast<uint64_t>(step[k]);
      }
    }
  }
};

// A copy op moves one of the header's pools in the header's host layout; the executor has no other.
void CheckCopyPoolAndLayout(const Field& f, const nlohmann::json& op, const std::string& pool,
                            const PlanHeader& h) {
  bool known = false;
  std::string names;
  for (const PoolSpec& q : h.pools) {
    known = known || q.name == pool;
    names += (names.empty() ? "" : ", ") + q.name;
  }
  if (!known) f.Fail("pool", "'" + pool + "' is not a pool of the plan header (" + names + ")");
  const std::string layout = f.Str(op, "layout");
  if (layout != h.host_layout_name)
    f.Fail("layout", "'" + layout + "' differs from the plan header's host_layout '" +
                         h.host_layout_name + "'");
}

constexpr uint64_t kU32 = UINT32_MAX;
constexpr uint64_t kOwnerMax = 65535;

// A copy op of a pool other than the first: the same lane and pages as the first pool's op of
// that kind and lane, which must come before it.
void CheckRepeatedPoolOp(const Field& f, const std::vector<LaneCopy>& first_pool_ops,
                         const LaneCopy& c, const std::string& kind, const std::string& pool,
                         const std::string& first_pool, const char* pages_key) {
  for (const LaneCopy& have : first_pool_ops) {
    if (have.lane != c.lane) continue;
    if (have.pages != c.pages)
      f.Fail(pages_key, kind + " op of pool '" + pool + "' on lane " + std::to_string(c.lane) +
                            " lists other pages than pool '" + first_pool + "'s op");
    return;
  }
  f.Fail("pool", kind + " op of pool '" + pool + "' on lane " + std::to_string(c.lane) +
                     " has no op of pool '" + first_pool + "' before it");
}

}  // namespace

namespace {

// The request-level fields of a request line (everything but its ops).
// Counts of a request line: tokens and pages up to 2^40 (what a trace may hold), request numbers
// and arrival times not negative, a forward spin of at most an hour per layer (as a profile's
// seconds terms), so that nothing derived from them wraps or runs for ever.
constexpr int64_t kMaxPlanCount = int64_t{1} << 40;
constexpr double kMaxLayerSpinSeconds = 3600;

void ReadRequestFields(const Field& f, const nlohmann::json& j, int version, RequestPlan& p) {
  p.request = f.IntIn(j, "request", 0, kMaxPlanCount);
  if (j.contains("replica")) {
    p.replica = f.Int(j, "replica");
    if (p.replica < 0) f.Fail("replica", "must be >= 0");
  }
  if (j.contains("trace_request")) {
    p.trace_request = f.Int(j, "trace_request");
    if (p.trace_request < 0) f.Fail("trace_request", "must be >= 0");
  }
  p.arrival_ns = f.IntIn(j, "arrival_ns", 0, INT64_MAX);
  p.input_tokens = f.IntIn(j, "input_tokens", 1, kMaxPlanCount);
  p.device_hit_pages = f.IntIn(j, "device_hit_pages", 0, kMaxPlanCount);
  p.host_match_pages = f.IntIn(j, "host_match_pages", 0, kMaxPlanCount);
  p.loaded_pages = f.IntIn(j, "loaded_pages", 0, kMaxPlanCount);
  p.prefix_pages = f.IntIn(j, "prefix_pages", 0, kMaxPlanCount);
  p.computed_tokens = f.IntIn(j, "computed_tokens", 0, p.input_tokens);
  if (!f.At(j, "cached").is_boolean()) f.Fail("cached", "expected true or false");
  p.cached = j["cached"].get<bool>();
  if (j.contains("hit_agreement")) {
    const auto& h = j["hit_agreement"];
    if (!h.is_object()) f.Fail("hit_agreement", "expected {reports, agreed_pages}");
    const auto& reports = f.At(h, "reports");
    if (!reports.is_array() || reports.empty())
      f.Fail("hit_agreement.reports", "expected a non-empty list");
    for (const auto& r : reports) {
      if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > p.host_match_pages)
        f.Fail("hit_agreement.reports", "expected integers in 0..host_match_pages (" +
                                            std::to_string(p.host_match_pages) + ")");
      p.hit_reports.push_back(r.get<int64_t>());
    }
    p.agreed_hit_pages = f.Int(h, "agreed_pages");
    if (p.agreed_hit_pages < 0 || p.agreed_hit_pages > p.host_match_pages)
      f.Fail("hit_agreement.agreed_pages",
             "expected 0..host_match_pages (" + std::to_string(p.host_match_pages) + ")");
  }
  if (version >= 4 && j.contains("layer_spin_s")) {  // ReadPlanFile requires it in a file
    const auto& spin = j["layer_spin_s"];
    if (!spin.is_number() || !(spin.get<double>() >= 0) ||
        !(spin.get<double>() <= kMaxLayerSpinSeconds))
      f.Fail("layer_spin_s", "expected seconds in 0..3600, got " + spin.dump());
    p.layer_spin_s = spin.get<double>();
  }
}

// The ops of one request line, read into `p`. Version 3 lists pages as runs (`page_runs`,
// `slot_runs`), version 2 one tuple each.
struct OpReader {
  const Field& f;
  RequestPlan& p;
  const PlanHeader* header;
  bool runs;
  const char* pages_key;
  int64_t budget = kMaxPlanLinePages;  // tuples the line's runs may still expand to
  std::string first_pool;

  // The largest lane (owner rank), device slot and host slot the header allows (without a
  // header, what the tuples' types hold): a page beyond them is refused where it is read.
  uint64_t MaxLane() const {
    return header ? static_cast<uint64_t>(header->cp_size - 1) : kOwnerMax;
  }
  uint64_t MaxDeviceSlot() const {
    return header ? static_cast<uint64_t>(header->device_pages_per_lane - 1) : kU32;
  }
  uint64_t MaxHostSlot() const {
    return header && header->host_pages_per_lane > 0
               ? static_cast<uint64_t>(header->host_pages_per_lane - 1)
               : kU32;
  }

  // The fields the executor does not read but the writer derives from what this reader has read
  // (AppendPlanLine, plan.cpp): an op's id, a copy's and a gather's bytes, a compute op's token
  // counts. Where present, each must be what the writer would have written, so an edited value
  // is refused instead of being carried along unread.
  void ExpectId(const nlohmann::json& op, const std::string& want) const {
    if (!op.contains("id")) return;
    const auto& v = op["id"];
    if (!v.is_string() || v.get<std::string>() != want) {
      std::string got = v.dump();
      if (got.size() > 80) got = got.substr(0, 80) + "...";
      f.Fail("id", got + ", but the writer names this op \"" + want + "\"");
    }
  }
  // `key` where present: the writer's value, want() (`formula` says how it is derived), or,
  // where this reader cannot derive it (want() is nullopt: no header, a partial_merge gather), an
  // integer >= 0. want() is called only for a present key.
  template <typename Want>
  void ExpectInt(const nlohmann::json& op, const char* key, Want want,
                 const std::string& formula) const {
    if (!op.contains(key)) return;
    const int64_t v = f.Int(op, key);
    const std::optional<int64_t> w = want();
    if (w && v != *w)
      f.Fail(key, std::to_string(v) + ", but " + formula + " = " + std::to_string(*w));
    if (v < 0) f.Fail(key, std::to_string(v) + ", expected an integer >= 0");
  }
  // The bytes of `pages` pages of the header's pool `k`, or of all its pools (k = npos), as the
  // writer computes them (PoolBytes, GatherOpBytes; plan.cpp); nullopt without a header.
  std::optional<int64_t> PagesBytes(size_t k, int64_t pages) const {
    if (!header) return std::nullopt;
    int64_t sum = 0;
    for (size_t i = 0; i < header->pools.size(); ++i) {
      if (k != std::string::npos && i != k) continue;
      const auto b = CheckedProduct(
          {header->pools[i].bytes_per_token_layer, header->page_tokens, header->layers, pages});
      if (!b || __builtin_add_overflow(sum, *b, &sum))
        f.Fail("bytes", "the pages' bytes overflow 64 bits: no value is right");
    }
    return sum;
  }
  size_t PoolIndex(const std::string& pool) const {
    if (header)
      for (size_t i = 0; i < header->pools.size(); ++i)
        if (header->pools[i].name == pool) return i;
    return 0;  // unused without a header (PagesBytes is nullopt)
  }
  std::string Pre() const { return std::to_string(p.request) + "/"; }

  void Evict(const nlohmann::json& op) {
    ExpectId(op, Pre() + "evict/" + std::to_string(p.evictions.size()));
    const std::string tier = f.Str(op, "tier");
    if (tier != "device" && tier != "host") f.Fail("tier", "expected device or host");
    SlotFree e{tier == "device" ? Tier::kDevice : Tier::kHost, {}};
    if (runs) {
      f.RunList<2>(op, "slot_runs", kSlotStep, {"lane", "slot"},
                   {MaxLane(), e.tier == Tier::kDevice ? MaxDeviceSlot() : MaxHostSlot()}, budget,
                   [&](const std::array<uint64_t, 2>& t) {
                     e.slots.push_back({static_cast<uint32_t>(t[0]), static_cast<uint32_t>(t[1])});
                   });
    } else {
      e.slots = f.PairList(op, "slots");
    }
    p.evictions.push_back(std::move(e));
  }

  // Ops repeat per pool; the first pool's op carries the lane's pages, and every other pool's
  // op must repeat them (the executor moves every pool by the first one's list).
  void Copy(const nlohmann::json& op, const std::string& kind) {
    const std::string pool = f.Str(op, "pool");
    if (header) CheckCopyPoolAndLayout(f, op, pool, *header);
    // The kind decides the direction; a written direction that disagrees was edited by hand.
    const char* direction = kind == "load_back" ? "h2d" : "d2h";
    if (op.contains("direction") && op["direction"] != direction)
      f.Fail("direction", op["direction"].dump() + ", but a " + kind + " copies " + direction);
    if (first_pool.empty()) first_pool = pool;
    const int64_t lane = f.IntIn(op, "lane", 0, static_cast<int64_t>(MaxLane()));
    ExpectId(op, Pre() + kind + "/l" + std::to_string(lane) + "/" + pool);
    LaneCopy c{static_cast<uint16_t>(lane), {}};
    if (runs) {
      f.RunList<2>(op, "page_runs", kCopyStep, {"device_slot", "host_slot"},
                   {MaxDeviceSlot(), MaxHostSlot()}, budget, [&](const std::array<uint64_t, 2>& t) {
                     c.pages.push_back({static_cast<uint32_t>(t[0]), static_cast<uint32_t>(t[1])});
                   });
    } else {
      c.pages = f.PairList(op, "pages");
    }
    ExpectInt(
        op, "bytes",
        [&] { return PagesBytes(PoolIndex(pool), static_cast<int64_t>(c.pages.size())); },
        "pages x bytes_per_token_layer x page_tokens x layers of pool '" + pool + "'");
    std::vector<LaneCopy>& list = kind == "write_back"  ? p.write_back
                                  : kind == "load_back" ? p.load_back
                                                        : p.backup;
    if (pool != first_pool) {
      CheckRepeatedPoolOp(f, list, c, kind, pool, first_pool, pages_key);
      return;
    }
    if (kind == "backup")
      p.backup_schedule =
          kBackupScheduleNames.Parse(f.Str(op, "schedule"), "schedule", f.file, f.line);
    list.push_back(std::move(c));
  }

  void Compute(const nlohmann::json& op) {
    ExpectId(op, Pre() + "compute");
    ExpectInt(
        op, "new_tokens", [&] { return std::optional<int64_t>(p.computed_tokens); },
        "the request's computed_tokens");
    ExpectInt(
        op, "prefix_tokens",
        [&]() -> std::optional<int64_t> {
          if (!header) return std::nullopt;
          const auto t = CheckedProduct({p.prefix_pages, header->page_tokens});
          if (!t) f.Fail("prefix_tokens", "prefix_pages x page_tokens overflows 64 bits");
          return t;
        },
        "prefix_pages x the header's page_tokens");
    if (runs) {
      f.RunList<4>(op, "page_runs", kComputeStep, {"pos", "owner", "slot", "extent"},
                   {kU32, MaxLane(), MaxDeviceSlot(), kU32}, budget,
                   [&](const std::array<uint64_t, 4>& t) {
                     p.new_pages.push_back(
                         NewPage{static_cast<int64_t>(t[0]), static_cast<uint16_t>(t[1]),
                                 static_cast<uint32_t>(t[2]), static_cast<uint32_t>(t[3])});
                   });
      return;
    }
    const auto& pages = f.At(op, "pages");
    if (!pages.is_array()) f.Fail("pages", "expected a list");
    for (const auto& q : pages) {
      if (!q.is_array() || q.size() != 4)
        f.Fail("pages", "expected [pos, owner, slot, extent] entries");
      for (const auto& x : q)
        if (!x.is_number_unsigned() || x.get<uint64_t>() > UINT32_MAX)
          f.Fail("pages", "expected integers in 0..2^32-1");
      if (q[1].get<uint64_t>() > 65535) f.Fail("pages", "owner rank beyond 65535");
      p.new_pages.push_back(NewPage{q[0].get<int64_t>(), q[1].get<uint16_t>(), q[2].get<uint32_t>(),
                                    q[3].get<uint32_t>()});
    }
  }

  void GatherPages(const nlohmann::json& op) {
    if (runs) {
      f.RunList<2>(op, "page_runs", kGatherStep, {"owner", "slot"}, {MaxLane(), MaxDeviceSlot()},
                   budget, [&](const std::array<uint64_t, 2>& t) {
                     p.prefix.push_back(
                         PrefixPage{static_cast<uint16_t>(t[0]), static_cast<uint32_t>(t[1])});
                   });
    } else {
      for (const auto& [owner, slot] : f.PairList(op, "pages")) {
        if (owner > 65535) f.Fail("pages", "owner rank beyond 65535");
        p.prefix.push_back(PrefixPage{static_cast<uint16_t>(owner), slot});
      }
    }
    if (static_cast<int64_t>(p.prefix.size()) != p.prefix_pages)
      f.Fail(pages_key, (runs ? "the runs hold " : "holds ") + std::to_string(p.prefix.size()) +
                            " pages, prefix_pages says " + std::to_string(p.prefix_pages));
  }

  void Gather(const nlohmann::json& op) {
    ExpectId(op, Pre() + "gather");
    p.gather_method = kGatherMethodNames.Parse(f.Str(op, "method"), "method", f.file, f.line);
    ExpectInt(
        op, "prefix_pages", [&] { return std::optional<int64_t>(p.prefix_pages); },
        "the request's prefix_pages");
    // A partial_merge gather's bytes (queries and partials, PartialMergeBytes) come from the
    // model's shape, which the cost model prices and this reader does not: only their type.
    ExpectInt(
        op, "bytes",
        [&]() -> std::optional<int64_t> {
          if (p.gather_method == GatherMethod::kPartialMerge) return std::nullopt;
          return PagesBytes(std::string::npos, p.prefix_pages);
        },
        "prefix_pages x the page bytes of every pool");
    if (!f.At(op, "proven_zigzag").is_boolean()) f.Fail("proven_zigzag", "expected true or false");
    p.proven_zigzag = op["proven_zigzag"].get<bool>();
    for (const auto& r : f.At(op, "runs")) {
      PrefixRun run{static_cast<uint32_t>(f.Int(r, "extent")), f.Int(r, "first_page"),
                    f.Int(r, "pages")};
      const PlacementRule& rule =
          ParsePlacementRule(f.Str(r, "placement"), "placement", f.file, f.line);
      Extent e{f.Int(r, "extent_request"), f.Int(r, "extent_first_page"), f.Int(r, "extent_pages"),
               rule.name, static_cast<int>(f.Int(r, "ranks"))};
      p.runs.push_back(run);
      p.run_extents.push_back(e);
    }
    for (const auto& s : f.At(op, "shard_pages")) {
      if (!s.is_number_integer()) f.Fail("shard_pages", "expected integers");
      p.shard_pages.push_back(s.get<int64_t>());
    }
    GatherPages(op);
  }

  void Op(const nlohmann::json& op) {
    const std::string kind = f.Str(op, "kind");
    if (kind == "evict") {
      Evict(op);
    } else if (kind == "write_back" || kind == "load_back" || kind == "backup") {
      Copy(op, kind);
    } else if (kind == "compute") {
      Compute(op);
    } else if (kind == "gather") {
      Gather(op);
    } else {
      f.Fail("kind", "unknown op kind '" + kind + "'");
    }
  }
};

}  // namespace

RequestPlan PlanFromJson(const nlohmann::json& j, const std::string& file, int64_t line,
                         int version, const PlanHeader* header) {
  const Field f{file, line};
  RequestPlan p;
  ReadRequestFields(f, j, version, p);
  const auto& ops = f.At(j, "ops");
  if (!ops.is_array()) f.Fail("ops", "expected a list");
  if (ops.empty()) f.Fail("ops", "empty (every request has at least its compute op)");
  if (header && p.prefix_pages > header->cp_size * header->device_pages_per_lane)
    f.Fail("prefix_pages",
           std::to_string(p.prefix_pages) + " beyond cp_size x device_pages_per_lane (" +
               std::to_string(header->cp_size * header->device_pages_per_lane) + ")");
  const bool runs = version >= 3;
  OpReader reader{f, p, header, runs, runs ? "page_runs" : "pages", kMaxPlanLinePages, {}};
  for (const auto& op : ops) reader.Op(op);
  return p;
}

namespace {

// The longest plan line ReadPlanFile reads (64 MiB, as for a trace line): a longer one is refused
// as soon as that many bytes are read.
constexpr int64_t kMaxPlanLineBytes = int64_t{64} << 20;

// std::getline, but a line longer than kMaxPlanLineBytes is refused as soon as that many bytes are
// read: a path that never ends a line (/dev/zero) stops there instead of filling memory.
bool GetPlanLine(std::istream& in, std::string& line, const std::string& path, int64_t n) {
  line.clear();
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (int c = sb->sbumpc(); c != std::char_traits<char>::eof(); c = sb->sbumpc()) {
    any = true;
    if (c == '\n') return true;
    if (line.size() >= static_cast<size_t>(kMaxPlanLineBytes))
      throw InputError(path, n, "",
                       "line longer than " + std::to_string(kMaxPlanLineBytes) +
                           " bytes (kMaxPlanLineBytes): not a plan line");
    line.push_back(static_cast<char>(c));
  }
  return any;
}

}  // namespace

namespace {

// Line 1: the version, then the header (ParsePlanHeader).
PlanHeader ReadHeaderLine(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("kvlanes_plan"))
    throw InputError(path, 1, "kvlanes_plan", "not a kvlanes plan (header missing)");
  const nlohmann::json& v = j["kvlanes_plan"];
  if (!v.is_number_integer() || v.get<int64_t>() < kOldestPlanVersion ||
      v.get<int64_t>() > kPlanVersion)
    throw InputError(
        path, 1, "kvlanes_plan",
        "plan version " + v.dump() + ", this build reads versions " +
            std::to_string(kOldestPlanVersion) + ".." + std::to_string(kPlanVersion) +
            (v == 1 ? " (version 1 plans carry no trailer: replay the trace again)" : ""));
  PlanHeader h = ParsePlanHeader(j, path);
  if (h.version >= 4 && !h.forward_spin)
    throw InputError(path, 1, "forward_spin",
                     "missing from a version " + std::to_string(h.version) + " plan header");
  return h;
}

// The trailer's counts against what was read.
void CheckTrailer(const nlohmann::json& j, const Field& f, size_t requests, int64_t ops,
                  size_t passes) {
  const nlohmann::json& t = j["kvlanes_plan_end"];
  const int64_t want_requests = f.Int(t, "requests"), want_ops = f.Int(t, "ops");
  const int64_t want_passes = t.is_object() && t.contains("passes") ? f.Int(t, "passes") : 0;
  if (want_passes != static_cast<int64_t>(passes))
    f.Fail("kvlanes_plan_end.passes", "the trailer counts " + std::to_string(want_passes) +
                                          " passes, the plan holds " + std::to_string(passes));
  if (want_requests != static_cast<int64_t>(requests))
    f.Fail("kvlanes_plan_end.requests", "the trailer counts " + std::to_string(want_requests) +
                                            " requests, the plan holds " +
                                            std::to_string(requests));
  if (want_ops != ops)
    f.Fail("kvlanes_plan_end.ops", "the trailer counts " + std::to_string(want_ops) +
                                       " ops, the plan holds " + std::to_string(ops));
}

}  // namespace

PlanFile ReadPlanFile(const std::string& path) {
  // Opened without blocking, each read bounded in time (a FIFO with no writer is refused).
  InputStreambuf buf(path, "plan file");
  std::istream in(&buf);
  PlanFile out;
  std::string line;
  int64_t n = 0, ops = 0, trailer_line = 0;
  std::vector<int64_t> pass_lines;
  // Request numbers count within a replica (serving mode); each (replica, request) once.
  std::map<std::pair<int64_t, int64_t>, int64_t> seen;
  while (GetPlanLine(in, line, path, n + 1)) {
    ++n;
    if (line.empty()) continue;
    if (trailer_line > 0)
      throw InputError(path, n, "",
                       "a line after the trailer (line " + std::to_string(trailer_line) + ")");
    nlohmann::json j = ParseJsonStrict(line, path, n);
    if (n == 1) {
      out.header = ReadHeaderLine(j, path);
      continue;
    }
    if (j.is_object() && j.contains("kvlanes_plan_end")) {
      CheckTrailer(j, Field{path, n}, out.requests.size(), ops, out.passes.size());
      trailer_line = n;
      continue;
    }
    if (IsPassLine(j)) {  // version 5: serving mode's passes, after every request line
      if (out.header.version < 5)
        throw InputError(path, n, "pass",
                         "a pass line in a version " + std::to_string(out.header.version) +
                             " plan (pass lines are version 5's)");
      out.passes.push_back(PassFromJson(j, path, n));
      pass_lines.push_back(n);
      continue;
    }
    if (!pass_lines.empty())
      throw InputError(path, n, "request",
                       "a request line after the pass lines (line " +
                           std::to_string(pass_lines.front()) + "): requests come first");
    RequestPlan& r =
        out.requests.emplace_back(PlanFromJson(j, path, n, out.header.version, &out.header));
    if (out.header.version >= 4 && r.layer_spin_s < 0)
      throw InputError(
          path, n, "layer_spin_s",
          "missing from a version " + std::to_string(out.header.version) + " request line");
    const auto [it, fresh] = seen.emplace(std::pair{r.replica, r.request}, n);
    if (!fresh)
      throw InputError(path, n, "request",
                       "request " + std::to_string(r.request) +
                           (r.replica >= 0 ? " of replica " + std::to_string(r.replica) : "") +
                           " appears twice (first at line " + std::to_string(it->second) + ")");
    // The writer numbers each replica's requests in the order it writes them: a line that goes
    // back (lines swapped or moved by hand) would run the requests in another order than planned.
    if (auto next = std::next(it); next != seen.end() && next->first.first == r.replica)
      throw InputError(path, n, "request",
                       "request " + std::to_string(r.request) + " after request " +
                           std::to_string(next->first.second) + " (line " +
                           std::to_string(next->second) + "): a plan's requests ascend");
    ops += static_cast<int64_t>(j["ops"].size());
  }
  if (in.bad()) throw InputError(path, n, "", "read error");
  if (n == 0) throw InputError(path, 0, "", "empty plan file");
  if (trailer_line == 0)
    throw InputError(path, n, "kvlanes_plan_end",
                     "the plan ends at line " + std::to_string(n) +
                         " without its trailer: it was cut short (or is still being written)");
  if (out.requests.empty())
    throw InputError(path, n, "", "the plan holds a header and no requests (cut short?)");
  CheckPlanPasses(out.requests, out.passes, pass_lines, out.header.rate_scale, path);
  return out;
}

}  // namespace kvlanes

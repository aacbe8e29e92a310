#include "sim/predict/plan.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <ostream>
#include <utility>

#include "io/input_error.h"
#include "io/input_file.h"
#include "kernels/page_layout.h"
#include "sim/checked_math.h"
#include "sim/predict/content_hash.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/json_append.h"
#include "sim/predict/plan_pricing.h"
#include "sim/predict/plan_runs.h"

namespace kvlanes {
namespace {

using J = nlohmann::ordered_json;
using namespace plan_runs;

const char* TierName(Tier t) { return t == Tier::kDevice ? "device" : "host"; }

// ---- page runs (docs/plan.md, "Page runs"): plan_runs.h

// A list entry as its tuple of values.
struct PairOf {
  std::array<int64_t, 2> operator()(const std::array<uint32_t, 2>& x) const { return {x[0], x[1]}; }
};
struct NewPageTuple {
  std::array<int64_t, 4> operator()(const NewPage& q) const {
    return {q.pos, q.owner, q.device_slot, q.extent};
  }
};
struct PrefixTuple {
  std::array<int64_t, 2> operator()(const PrefixPage& q) const { return {q.owner, q.device_slot}; }
};

// Calls emit(first, count) for each maximal run of `v` (greedy: a run takes every following
// tuple that continues it, each tuple being the one before it plus `Step`). The sums are in
// unsigned arithmetic (they wrap, never overflow); the step is a constant, so a field of step 0
// costs one comparison and the comparisons of a tuple need no branch between them.
template <auto Step, typename T, typename Get, typename Emit>
void ForEachRun(const std::vector<T>& v, Get get, Emit emit) {
  constexpr size_t N = Step.size();
  const size_t size = v.size();
  size_t i = 0;
  while (i < size) {
    const std::array<int64_t, N> first = get(v[i]);
    std::array<int64_t, N> prev = first;
    size_t j = i + 1;
    for (; j < size; ++j) {
      const std::array<int64_t, N> t = get(v[j]);
      const bool continues = [&]<size_t... K>(std::index_sequence<K...>) {
        return ((static_cast<uint64_t>(t[K]) ==
                 static_cast<uint64_t>(prev[K]) + static_cast<uint64_t>(Step[K])) &
                ...);
      }
      (std::make_index_sequence<N>{});
      if (!continues) break;
      prev = t;
    }
    emit(first, static_cast<int64_t>(j - i));
    i = j;
  }
}

template <auto Step, typename T, typename Get>
J RunsJson(const std::vector<T>& v, Get get) {
  constexpr size_t N = Step.size();
  J a = J::array();
  ForEachRun<Step>(v, get, [&](const std::array<int64_t, N>& first, int64_t n) {
    J r = J::array();
    for (int64_t x : first) r.push_back(x);
    r.push_back(n);
    a.push_back(std::move(r));
  });
  return a;
}

int64_t PoolBytes(const ReplayConfig& cfg, size_t pool, size_t pages) {
  return ProductOrDie(
      {cfg.model.PoolPageBytes(pool, cfg.cache.page_tokens), static_cast<int64_t>(pages)},
      "pool page bytes x pages");
}

// The gather op's bytes: a gathered prefix's KV pages; a merged one (partial_merge) the queries
// and partials that replace them, as the report's gather.bytes counts them (PartialMergeBytes).
int64_t GatherOpBytes(const RequestPlan& p, const ReplayConfig& cfg) {
  if (p.gather_method == GatherMethod::kPartialMerge)
    return PartialMergeBytes(cfg, p.computed_tokens);
  return p.prefix_pages * cfg.model.PageBytes(cfg.cache.page_tokens);
}

// One op per lane and pool: pools share slots, so the page list repeats per pool.
void CopyOps(J& ops, const std::vector<LaneCopy>& copies, const ReplayConfig& cfg,
             const std::string& prefix, const char* kind, const char* direction,
             const char* extra_key, const char* extra_value) {
  for (const LaneCopy& c : copies) {
    for (size_t k = 0; k < cfg.model.pools.size(); ++k) {
      J op;
      op["id"] = prefix + kind + "/l" + std::to_string(c.lane) + "/" + cfg.model.pools[k].name;
      op["kind"] = kind;
      op["direction"] = direction;
      if (extra_key) op[extra_key] = extra_value;
      op["lane"] = c.lane;
      op["pool"] = cfg.model.pools[k].name;
      op["layout"] = cfg.cache.host_layout;
      op["bytes"] = PoolBytes(cfg, k, c.pages.size());
      op["page_runs"] = RunsJson<kCopyStep>(c.pages, PairOf{});  // {device slot, host slot}
      ops.push_back(std::move(op));
    }
  }
}

}  // namespace

nlohmann::ordered_json PlanHeaderJson(const ReplayConfig& cfg, const ProfileFile* profile) {
  J h;
  h["kvlanes_plan"] = kPlanVersion;
  h["cp_size"] = cfg.cache.cp_size;
  h["page_tokens"] = cfg.cache.page_tokens;
  h["layers"] = cfg.model.layers;
  J pools = J::array();
  for (const auto& p : cfg.model.pools)
    pools.push_back({{"name", p.name}, {"bytes_per_token_layer", p.bytes_per_token_layer}});
  h["pools"] = pools;
  h["device_pages_per_lane"] = cfg.cache.device_pages_per_lane;
  h["host_pages_per_lane"] = cfg.cache.host_pages_per_lane;
  h["host_layout"] = cfg.cache.host_layout;
  h["config"] = ConfigToJson(cfg);
  if (profile) {
    J prof;
    prof["path"] = JsonSafeText(profile->path);
    prof["name"] = profile->profile.name;
    prof["fnv1a64"] = Fnv1a64Hex(profile->yaml);
    prof["yaml"] = profile->yaml;
    h["hardware_profile"] = std::move(prof);
  }
  const SpinPricer spin(profile ? &profile->profile : nullptr, profile ? profile->path : "",
                        cfg.cache.cp_size, cfg.cache.page_tokens);
  const PlanSpinSource& s = spin.Source();
  h["forward_spin"] = J{{"profile", JsonSafeText(s.profile)},
                        {"name", s.name},
                        {"layer_base_s", s.layer_base_s},
                        {"layer_token_s", s.layer_token_s},
                        {"layer_attn_pair_s", s.layer_attn_pair_s}};
  return h;
}

PlanHeader PlanHeaderOf(const ReplayConfig& cfg, const ProfileFile* profile) {
  return ParsePlanHeader(nlohmann::json::parse(PlanHeaderJson(cfg, profile).dump()), "(memory)");
}

nlohmann::ordered_json PlanTrailer(int64_t requests, int64_t ops, int64_t passes) {
  J t;
  t["kvlanes_plan_end"] = J{{"requests", requests}, {"ops", ops}};
  if (passes > 0) t["kvlanes_plan_end"]["passes"] = passes;
  return t;
}

namespace {

namespace ja = json_append;

// Lists of small integer tuples are most of a plan's bytes. They are formatted into a buffer on
// the stack, appended to the line whenever it could not hold one more tuple: no room is reserved
// in the line (and zero-filled) for the longest spelling of every value.
constexpr char kDigitPairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// `v` in decimal at `p` (at most 20 characters); returns the end. The digits as std::to_chars
// writes them. Values below a million (the slots, positions and counts of most plans) take a
// chain of comparisons and at most three digit pairs; larger ones the general loop.
inline char* WriteUnsigned(char* p, uint64_t v) {
  const auto pair = [](char* q, uint64_t x) { std::memcpy(q, kDigitPairs + 2 * x, 2); };
  if (v < 100) {
    if (v < 10) {
      *p = static_cast<char>('0' + v);
      return p + 1;
    }
    pair(p, v);
    return p + 2;
  }
  if (v < 10000) {
    if (v < 1000) {
      *p = static_cast<char>('0' + v / 100);
      pair(p + 1, v % 100);
      return p + 3;
    }
    pair(p, v / 100);
    pair(p + 2, v % 100);
    return p + 4;
  }
  if (v < 1000000) {
    const uint64_t hi = v / 10000, lo = v % 10000;
    if (v < 100000) {
      *p = static_cast<char>('0' + hi);
      pair(p + 1, lo / 100);
      pair(p + 3, lo % 100);
      return p + 5;
    }
    pair(p, hi);
    pair(p + 2, lo / 100);
    pair(p + 4, lo % 100);
    return p + 6;
  }
  int n = 7;
  for (uint64_t t = v / 10000000; t != 0; t /= 10) ++n;
  char* const end = p + n;
  char* q = end;
  while (v >= 100) {
    q -= 2;
    pair(q, v % 100);
    v /= 100;
  }
  if (v >= 10) {
    pair(q - 2, v);
  } else {
    q[-1] = static_cast<char>('0' + v);
  }
  return end;
}

// `v` as its maximal runs (ForEachRun): [[first..., count],...].
template <auto Step, typename Tuple, typename Get>
void AppendRuns(std::string& o, const std::vector<Tuple>& v, Get get) {
  constexpr size_t N = Step.size();
  constexpr size_t kRunMax = (N + 1) * 21 + 3;  // ',' '[' values and count with commas ']'
  char buf[8192];
  char* p = buf;
  char* const room_end = buf + sizeof(buf) - kRunMax - 1;  // one more for the closing ']'
  *p++ = '[';
  bool first_run = true;
  ForEachRun<Step>(v, get, [&](const std::array<int64_t, N>& first, int64_t count) {
    if (p > room_end) {
      o.append(buf, static_cast<size_t>(p - buf));
      p = buf;
    }
    if (!first_run) *p++ = ',';
    first_run = false;
    *p++ = '[';
    for (size_t k = 0; k < N; ++k) {
      p = first[k] >= 0 ? WriteUnsigned(p, static_cast<uint64_t>(first[k]))
                        : std::to_chars(p, p + 21, first[k]).ptr;
      *p++ = ',';
    }
    p = WriteUnsigned(p, static_cast<uint64_t>(count));
    *p++ = ']';
  });
  *p++ = ']';
  o.append(buf, static_cast<size_t>(p - buf));
}

// As CopyOps, appended; returns the ops written.
size_t AppendCopyOps(std::string& o, bool& first, const std::vector<LaneCopy>& copies,
                     const ReplayConfig& cfg, const std::string& prefix, const char* kind,
                     const char* direction, const char* extra_key, const char* extra_value) {
  size_t n = 0;
  for (const LaneCopy& c : copies) {
    for (size_t k = 0; k < cfg.model.pools.size(); ++k) {
      const std::string& pool = cfg.model.pools[k].name;
      if (!first) o.push_back(',');
      first = false;
      o.append("{\"id\":");
      ja::Str(o, prefix + kind + "/l" + std::to_string(c.lane) + "/" + pool);
      o.push_back(',');
      ja::Key(o, "kind");
      ja::Str(o, kind);
      o.push_back(',');
      ja::Key(o, "direction");
      ja::Str(o, direction);
      if (extra_key) {
        o.push_back(',');
        ja::Key(o, extra_key);
        ja::Str(o, extra_value);
      }
      o.push_back(',');
      ja::Key(o, "lane");
      ja::Int(o, c.lane);
      o.push_back(',');
      ja::Key(o, "pool");
      ja::Str(o, pool);
      o.push_back(',');
      ja::Key(o, "layout");
      ja::Str(o, cfg.cache.host_layout);
      o.push_back(',');
      ja::Key(o, "bytes");
      ja::Int(o, PoolBytes(cfg, k, c.pages.size()));
      o.push_back(',');
      ja::Key(o, "page_runs");
      AppendRuns<kCopyStep>(o, c.pages, PairOf{});
      o.push_back('}');
      ++n;
    }
  }
  return n;
}

}  // namespace

namespace {

// A request line's fields before its ops.
void AppendRequestFields(const RequestPlan& p, std::string& o) {
  o.append("{\"request\":");
  ja::Int(o, p.request);
  if (p.replica >= 0) {  // serving mode only, as PlanToJson writes them
    o.append(",\"replica\":");
    ja::Int(o, p.replica);
  }
  if (p.trace_request >= 0) {
    o.append(",\"trace_request\":");
    ja::Int(o, p.trace_request);
  }
  o.append(",\"arrival_ns\":");
  ja::Int(o, p.arrival_ns);
  o.append(",\"input_tokens\":");
  ja::Int(o, p.input_tokens);
  o.append(",\"device_hit_pages\":");
  ja::Int(o, p.device_hit_pages);
  o.append(",\"host_match_pages\":");
  ja::Int(o, p.host_match_pages);
  o.append(",\"loaded_pages\":");
  ja::Int(o, p.loaded_pages);
  o.append(",\"prefix_pages\":");
  ja::Int(o, p.prefix_pages);
  o.append(",\"computed_tokens\":");
  ja::Int(o, p.computed_tokens);
  o.append(",\"cached\":");
  ja::Bool(o, p.cached);
  if (!p.hit_reports.empty()) {  // cache.cp_hit_agreement min only, as PlanToJson writes it
    o.append(",\"hit_agreement\":{\"reports\":[");
    for (size_t i = 0; i < p.hit_reports.size(); ++i) {
      if (i) o.push_back(',');
      ja::Int(o, p.hit_reports[i]);
    }
    o.append("],\"agreed_pages\":");
    ja::Int(o, p.agreed_hit_pages);
    o.push_back('}');
  }
  if (p.layer_spin_s >= 0) {  // version 4, as PlanToJson writes it (nlohmann's double spelling)
    o.append(",\"layer_spin_s\":");
    o.append(nlohmann::json(p.layer_spin_s).dump());
  }
}

// The evict ops; returns how many.
size_t AppendEvictOps(const RequestPlan& p, const std::string& pre, bool& first, std::string& o) {
  size_t ops = 0;
  for (size_t i = 0; i < p.evictions.size(); ++i) {
    const SlotFree& e = p.evictions[i];
    if (!first) o.push_back(',');
    first = false;
    o.append("{\"id\":");
    ja::Str(o, pre + "evict/" + std::to_string(i));
    o.append(",\"kind\":\"evict\",\"tier\":");
    ja::Str(o, TierName(e.tier));
    o.append(",\"slot_runs\":");
    AppendRuns<kSlotStep>(o, e.slots, PairOf{});
    o.push_back('}');
    ++ops;
  }
  return ops;
}

// The gather op (a request with a prefix only).
void AppendGatherOp(const RequestPlan& p, const ReplayConfig& cfg, const std::string& pre,
                    std::string& o) {
  o.append(",{\"id\":");
  ja::Str(o, pre + "gather");
  o.append(",\"kind\":\"gather\",\"method\":");
  ja::Str(o, kGatherMethodNames.CName(p.gather_method));
  o.append(",\"proven_zigzag\":");
  ja::Bool(o, p.proven_zigzag);
  o.append(",\"prefix_pages\":");
  ja::Int(o, p.prefix_pages);
  o.append(",\"bytes\":");
  ja::Int(o, GatherOpBytes(p, cfg));
  o.append(",\"runs\":[");
  for (size_t i = 0; i < p.runs.size(); ++i) {
    const PrefixRun& r = p.runs[i];
    const Extent& e = p.run_extents[i];
    if (i) o.push_back(',');
    o.append("{\"extent\":");
    ja::Int(o, r.extent);
    o.append(",\"first_page\":");
    ja::Int(o, r.first_page);
    o.append(",\"pages\":");
    ja::Int(o, r.pages);
    o.append(",\"extent_request\":");
    ja::Int(o, e.request);
    o.append(",\"extent_first_page\":");
    ja::Int(o, e.first_page);
    o.append(",\"extent_pages\":");
    ja::Int(o, e.pages);
    o.append(",\"placement\":");
    ja::Str(o, e.placement);
    o.append(",\"ranks\":");
    ja::Int(o, e.ranks);
    o.push_back('}');
  }
  o.append("],\"shard_pages\":[");
  for (size_t i = 0; i < p.shard_pages.size(); ++i) {
    if (i) o.push_back(',');
    ja::Int(o, p.shard_pages[i]);
  }
  o.append("],\"page_runs\":");
  AppendRuns<kGatherStep>(o, p.prefix, PrefixTuple{});
  o.push_back('}');
}

}  // namespace

size_t AppendPlanLine(const RequestPlan& p, const ReplayConfig& cfg, std::string& o) {
  AppendRequestFields(p, o);
  o.append(",\"ops\":[");
  const std::string pre = std::to_string(p.request) + "/";
  bool first = true;
  size_t ops = 0;
  ops += AppendEvictOps(p, pre, first, o);
  ops += AppendCopyOps(o, first, p.write_back, cfg, pre, "write_back", "d2h", nullptr, nullptr);
  ops += AppendCopyOps(o, first, p.load_back, cfg, pre, "load_back", "h2d", nullptr, nullptr);
  if (!first) o.push_back(',');
  o.append("{\"id\":");
  ja::Str(o, pre + "compute");
  o.append(",\"kind\":\"compute\",\"new_tokens\":");
  ja::Int(o, p.computed_tokens);
  o.append(",\"prefix_tokens\":");
  ja::Int(o, p.prefix_pages * cfg.cache.page_tokens);
  o.append(",\"page_runs\":");
  AppendRuns<kComputeStep>(o, p.new_pages, NewPageTuple{});
  o.push_back('}');
  first = false;
  ++ops;
  if (p.prefix_pages > 0) {
    AppendGatherOp(p, cfg, pre, o);
    ++ops;
  }
  ops += AppendCopyOps(o, first, p.backup, cfg, pre, "backup", "d2h", "schedule",
                       kBackupScheduleNames.CName(p.backup_schedule));
  o.append("]}\n");
  return ops;
}

nlohmann::ordered_json PlanToJson(const RequestPlan& p, const ReplayConfig& cfg) {
  J j;
  j["request"] = p.request;
  if (p.replica >= 0) j["replica"] = p.replica;  // serving mode only: sequential plans unchanged
  if (p.trace_request >= 0) j["trace_request"] = p.trace_request;
  j["arrival_ns"] = p.arrival_ns;
  j["input_tokens"] = p.input_tokens;
  j["device_hit_pages"] = p.device_hit_pages;
  j["host_match_pages"] = p.host_match_pages;
  j["loaded_pages"] = p.loaded_pages;
  j["prefix_pages"] = p.prefix_pages;
  j["computed_tokens"] = p.computed_tokens;
  j["cached"] = p.cached;
  if (!p.hit_reports.empty())  // cache.cp_hit_agreement min only: other plans unchanged
    j["hit_agreement"] = {{"reports", p.hit_reports}, {"agreed_pages", p.agreed_hit_pages}};
  if (p.layer_spin_s >= 0) j["layer_spin_s"] = p.layer_spin_s;
  const std::string pre = std::to_string(p.request) + "/";
  J ops = J::array();
  for (size_t i = 0; i < p.evictions.size(); ++i) {
    const SlotFree& e = p.evictions[i];
    ops.push_back({{"id", pre + "evict/" + std::to_string(i)},
                   {"kind", "evict"},
                   {"tier", TierName(e.tier)},
                   {"slot_runs", RunsJson<kSlotStep>(e.slots, PairOf{})}});  // {lane, slot}
  }
  CopyOps(ops, p.write_back, cfg, pre, "write_back", "d2h", nullptr, nullptr);
  CopyOps(ops, p.load_back, cfg, pre, "load_back", "h2d", nullptr, nullptr);
  ops.push_back({{"id", pre + "compute"},
                 {"kind", "compute"},
                 {"new_tokens", p.computed_tokens},
                 {"prefix_tokens", p.prefix_pages * cfg.cache.page_tokens},
                 // {logical page, owner rank, device slot, extent}
                 {"page_runs", RunsJson<kComputeStep>(p.new_pages, NewPageTuple{})}});
  if (p.prefix_pages > 0) {
    J g;
    g["id"] = pre + "gather";
    g["kind"] = "gather";
    g["method"] = kGatherMethodNames.CName(p.gather_method);
    g["proven_zigzag"] = p.proven_zigzag;
    g["prefix_pages"] = p.prefix_pages;
    g["bytes"] = GatherOpBytes(p, cfg);
    J runs = J::array();
    for (size_t i = 0; i < p.runs.size(); ++i) {
      const PrefixRun& r = p.runs[i];
      const Extent& e = p.run_extents[i];
      runs.push_back({{"extent", r.extent},
                      {"first_page", r.first_page},
                      {"pages", r.pages},
                      {"extent_request", e.request},
                      {"extent_first_page", e.first_page},
                      {"extent_pages", e.pages},
                      {"placement", e.placement},
                      {"ranks", e.ranks}});
    }
    g["runs"] = runs;
    g["shard_pages"] = p.shard_pages;
    // Tuple i = logical page i; {owner rank, device slot on the owner}.
    g["page_runs"] = RunsJson<kGatherStep>(p.prefix, PrefixTuple{});
    ops.push_back(std::move(g));
  }
  CopyOps(ops, p.backup, cfg, pre, "backup", "d2h", "schedule",
          kBackupScheduleNames.CName(p.backup_schedule));
  j["ops"] = ops;
  return j;
}

}  // namespace kvlanes

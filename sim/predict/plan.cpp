#include "sim/predict/plan.h"

#include <charconv>
#include <cstring>
#include <istream>
#include <ostream>
#include <utility>

#include "kernels/page_layout.h"
#include "sim/cache/placement.h"
#include "sim/checked_math.h"
#include "sim/predict/content_hash.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/json_append.h"
#include "traces/input_error.h"
#include "traces/input_file.h"
#include "traces/json_strict.h"

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

using J = nlohmann::ordered_json;

const char* TierName(Tier t) { return t == Tier::kDevice ? "device" : "host"; }

// ---- page runs (docs/plan.md, "Page runs"): a list of tuples written as maximal runs
// [first tuple..., count], tuple i of a run being first + i x the kind's fixed step.
using Step2 = std::array<int64_t, 2>;
using Step4 = std::array<int64_t, 4>;
constexpr Step2 kSlotStep{0, 1};           // evict `slot_runs`: {lane, slot}
constexpr Step2 kCopyStep{1, 1};           // copies: {device slot, host slot}
constexpr Step4 kComputeStep{1, 0, 1, 0};  // compute: {logical page, owner, device slot, extent}
constexpr Step2 kGatherStep{0, 1};         // gather: {owner, device slot}, per logical page

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
    return v.get<int64_t>();
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

// ---- header validation: every field the executor sizes its buffers from, before anything is
// allocated. Limits: docs/input_limits.md.

int64_t HeaderInt(const nlohmann::json& h, const std::string& file, const char* key, int64_t lo,
                  int64_t hi) {
  if (!h.contains(key)) throw InputError(file, 1, key, "missing from the plan header");
  const nlohmann::json& v = h[key];
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)))
    throw InputError(file, 1, key,
                     "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                         ", got " + v.dump());
  return v.get<int64_t>();
}

// Pools: 1..kMaxPools entries {name, bytes_per_token_layer}, names unique (op ids carry them).
std::vector<PoolSpec> HeaderPools(const nlohmann::json& h, const std::string& file) {
  if (!h.contains("pools")) throw InputError(file, 1, "pools", "missing from the plan header");
  const nlohmann::json& pools = h["pools"];
  if (!pools.is_array() || pools.empty() || pools.size() > size_t{kernels::kMaxPools})
    throw InputError(file, 1, "pools",
                     "expected a list of 1.." + std::to_string(kernels::kMaxPools) + " pools");
  std::vector<PoolSpec> out;
  for (size_t i = 0; i < pools.size(); ++i) {
    const std::string field = "pools[" + std::to_string(i) + "]";
    const nlohmann::json& p = pools[i];
    if (!p.is_object() || !p.contains("name") || !p["name"].is_string() ||
        p["name"].get<std::string>().empty())
      throw InputError(file, 1, field + ".name", "expected a non-empty string");
    const std::string name = p["name"].get<std::string>();
    for (const PoolSpec& q : out)
      if (q.name == name)
        throw InputError(file, 1, field + ".name", "two pools named '" + name + "'");
    const int64_t b = HeaderInt(p, file, "bytes_per_token_layer", 1, kMaxPoolBytes);
    out.push_back(PoolSpec{name, b});
  }
  return out;
}

// Each pool of each tier, pages x layers x tokens x bytes, fits in kMaxPoolBytes.
void CheckHeaderSizes(const ReplayConfig& g, const std::string& file) {
  for (const PoolSpec& p : g.model.pools) {
    for (const auto& [key, pages] :
         {std::pair{"device_pages_per_lane", g.cache.device_pages_per_lane},
          std::pair{"host_pages_per_lane", g.cache.host_pages_per_lane}}) {
      const std::optional<int64_t> bytes =
          CheckedProduct({p.bytes_per_token_layer, g.cache.page_tokens, g.model.layers, pages});
      if (!bytes || *bytes > kMaxPoolBytes)
        throw InputError(
            file, 1, std::string("pools.") + p.name,
            "bytes_per_token_layer " + std::to_string(p.bytes_per_token_layer) + " x page_tokens " +
                std::to_string(g.cache.page_tokens) + " x layers " +
                std::to_string(g.model.layers) + " x " + key + " " + std::to_string(pages) +
                (bytes ? " = " + std::to_string(*bytes) + " bytes" : " overflows 64 bits") +
                ", more than the 2^48 bytes one pool may hold");
    }
  }
}

// The header's config block repeats the sizing fields; a plan whose two copies disagree was
// edited by hand or damaged, and which one the executor would use is not obvious.
void CheckHeaderConfigAgrees(const nlohmann::json& h, const std::string& file) {
  if (!h.contains("config")) return;
  const nlohmann::json& c = h["config"];
  if (!c.is_object()) throw InputError(file, 1, "config", "expected an object");
  for (const auto& [field, key] :
       {std::pair{"cp_size", "cache.cp_size"}, std::pair{"page_tokens", "cache.page_tokens"},
        std::pair{"layers", "model.layers"},
        std::pair{"device_pages_per_lane", "cache.device_pages_per_lane"},
        std::pair{"host_pages_per_lane", "cache.host_pages_per_lane"},
        std::pair{"host_layout", "cache.host_layout"}, std::pair{"pools", "model.pools"}}) {
    if (c.contains(key) && c[key] != h[field])
      throw InputError(
          file, 1, std::string("config.") + key,
          c[key].dump() + " disagrees with the header's " + field + " " + h[field].dump());
  }
}

}  // namespace

void ValidatePlanHeader(const nlohmann::json& h, const std::string& file) {
  if (!h.is_object()) throw InputError(file, 1, "", "the plan header is not a JSON object");
  ReplayConfig g;
  g.cache.cp_size = HeaderInt(h, file, "cp_size", 1, 4096);
  g.cache.page_tokens = HeaderInt(h, file, "page_tokens", 1, kMaxPoolBytes);
  g.model.layers = HeaderInt(h, file, "layers", 1, kMaxPoolBytes);
  g.cache.device_pages_per_lane = HeaderInt(h, file, "device_pages_per_lane", 1, int64_t{1} << 31);
  g.cache.host_pages_per_lane = HeaderInt(h, file, "host_pages_per_lane", 0, int64_t{1} << 31);
  g.model.pools = HeaderPools(h, file);
  if (!h.contains("host_layout") || !h["host_layout"].is_string() ||
      !kernels::ParseHostLayout(h["host_layout"].get<std::string>()))
    throw InputError(file, 1, "host_layout", "expected one of " + kernels::HostLayoutNames());
  CheckHeaderSizes(g, file);
  CheckHeaderConfigAgrees(h, file);
}

nlohmann::ordered_json PlanHeader(const ReplayConfig& cfg) {
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
  if (!cfg.hardware.profile.empty()) {
    const std::string& path = cfg.hardware.profile;
    std::string yaml = ReadHardwareProfileText(path);
    const HardwareProfile hw = ParseHardwareProfile(yaml, path);
    J prof;
    prof["path"] = JsonSafeText(path);
    prof["name"] = hw.name;
    prof["fnv1a64"] = Fnv1a64Hex(yaml);
    prof["yaml"] = std::move(yaml);
    h["hardware_profile"] = std::move(prof);
  }
  return h;
}

nlohmann::ordered_json PlanTrailer(int64_t requests, int64_t ops) {
  J t;
  t["kvlanes_plan_end"] = J{{"requests", requests}, {"ops", ops}};
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

size_t AppendPlanLine(const RequestPlan& p, const ReplayConfig& cfg, std::string& o) {
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
  o.append(",\"ops\":[");
  const std::string pre = std::to_string(p.request) + "/";
  bool first = true;
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

RequestPlan PlanFromJson(const nlohmann::json& j, const std::string& file, int64_t line,
                         int version) {
  const Field f{file, line};
  // Version 3 lists pages as runs (`page_runs`, `slot_runs`), version 2 one tuple each.
  const bool runs = version >= 3;
  const char* const pages_key = runs ? "page_runs" : "pages";
  int64_t budget = kMaxPlanLinePages;  // tuples the line's runs may still expand to
  RequestPlan p;
  p.request = f.Int(j, "request");
  if (j.contains("replica")) {
    p.replica = f.Int(j, "replica");
    if (p.replica < 0) f.Fail("replica", "must be >= 0");
  }
  if (j.contains("trace_request")) {
    p.trace_request = f.Int(j, "trace_request");
    if (p.trace_request < 0) f.Fail("trace_request", "must be >= 0");
  }
  p.arrival_ns = f.Int(j, "arrival_ns");
  p.input_tokens = f.Int(j, "input_tokens");
  p.device_hit_pages = f.Int(j, "device_hit_pages");
  p.host_match_pages = f.Int(j, "host_match_pages");
  p.loaded_pages = f.Int(j, "loaded_pages");
  p.prefix_pages = f.Int(j, "prefix_pages");
  p.computed_tokens = f.Int(j, "computed_tokens");
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
  const auto& ops = f.At(j, "ops");
  if (!ops.is_array()) f.Fail("ops", "expected a list");
  if (ops.empty()) f.Fail("ops", "empty (every request has at least its compute op)");
  std::string first_pool;
  for (const auto& op : ops) {
    const std::string kind = f.Str(op, "kind");
    if (kind == "evict") {
      const std::string tier = f.Str(op, "tier");
      if (tier != "device" && tier != "host") f.Fail("tier", "expected device or host");
      SlotFree e{tier == "device" ? Tier::kDevice : Tier::kHost, {}};
      if (runs) {
        f.RunList<2>(
            op, "slot_runs", kSlotStep, {"lane", "slot"}, {kU32, kU32}, budget,
            [&](const std::array<uint64_t, 2>& t) {
              e.slots.push_back({static_cast<uint32_t>(t[0]), static_cast<uint32_t>(t[1])});
            });
      } else {
        e.slots = f.PairList(op, "slots");
      }
      p.evictions.push_back(std::move(e));
    } else if (kind == "write_back" || kind == "load_back" || kind == "backup") {
      // Ops repeat per pool; the first pool's op carries the lane's pages, and every other
      // pool's op must repeat them (the executor moves every pool by the first one's list).
      const std::string pool = f.Str(op, "pool");
      if (first_pool.empty()) first_pool = pool;
      const int64_t lane = f.Int(op, "lane");
      if (lane < 0 || lane > 65535) f.Fail("lane", "out of range");
      LaneCopy c{static_cast<uint16_t>(lane), {}};
      if (runs) {
        f.RunList<2>(
            op, "page_runs", kCopyStep, {"device_slot", "host_slot"}, {kU32, kU32}, budget,
            [&](const std::array<uint64_t, 2>& t) {
              c.pages.push_back({static_cast<uint32_t>(t[0]), static_cast<uint32_t>(t[1])});
            });
      } else {
        c.pages = f.PairList(op, "pages");
      }
      std::vector<LaneCopy>& list = kind == "write_back"  ? p.write_back
                                    : kind == "load_back" ? p.load_back
                                                          : p.backup;
      if (pool != first_pool) {
        CheckRepeatedPoolOp(f, list, c, kind, pool, first_pool, pages_key);
        continue;
      }
      if (kind == "write_back") p.write_back.push_back(std::move(c));
      if (kind == "load_back") p.load_back.push_back(std::move(c));
      if (kind == "backup") {
        p.backup_schedule =
            kBackupScheduleNames.Parse(f.Str(op, "schedule"), "schedule", f.file, f.line);
        p.backup.push_back(std::move(c));
      }
    } else if (kind == "compute" && runs) {
      f.RunList<4>(op, "page_runs", kComputeStep, {"pos", "owner", "slot", "extent"},
                   {kU32, kOwnerMax, kU32, kU32}, budget, [&](const std::array<uint64_t, 4>& t) {
                     p.new_pages.push_back(
                         NewPage{static_cast<int64_t>(t[0]), static_cast<uint16_t>(t[1]),
                                 static_cast<uint32_t>(t[2]), static_cast<uint32_t>(t[3])});
                   });
    } else if (kind == "compute") {
      const auto& pages = f.At(op, "pages");
      if (!pages.is_array()) f.Fail("pages", "expected a list");
      for (const auto& q : pages) {
        if (!q.is_array() || q.size() != 4)
          f.Fail("pages", "expected [pos, owner, slot, extent] entries");
        for (const auto& x : q)
          if (!x.is_number_unsigned() || x.get<uint64_t>() > UINT32_MAX)
            f.Fail("pages", "expected integers in 0..2^32-1");
        if (q[1].get<uint64_t>() > 65535) f.Fail("pages", "owner rank beyond 65535");
        p.new_pages.push_back(NewPage{q[0].get<int64_t>(), q[1].get<uint16_t>(),
                                      q[2].get<uint32_t>(), q[3].get<uint32_t>()});
      }
    } else if (kind == "gather") {
      p.gather_method = kGatherMethodNames.Parse(f.Str(op, "method"), "method", f.file, f.line);
      if (!f.At(op, "proven_zigzag").is_boolean())
        f.Fail("proven_zigzag", "expected true or false");
      p.proven_zigzag = op["proven_zigzag"].get<bool>();
      for (const auto& r : f.At(op, "runs")) {
        PrefixRun run{static_cast<uint32_t>(f.Int(r, "extent")), f.Int(r, "first_page"),
                      f.Int(r, "pages")};
        const PlacementRule& rule =
            ParsePlacementRule(f.Str(r, "placement"), "placement", f.file, f.line);
        Extent e{f.Int(r, "extent_request"), f.Int(r, "extent_first_page"),
                 f.Int(r, "extent_pages"), rule.name, static_cast<int>(f.Int(r, "ranks"))};
        p.runs.push_back(run);
        p.run_extents.push_back(e);
      }
      for (const auto& s : f.At(op, "shard_pages")) {
        if (!s.is_number_integer()) f.Fail("shard_pages", "expected integers");
        p.shard_pages.push_back(s.get<int64_t>());
      }
      if (runs) {
        f.RunList<2>(op, "page_runs", kGatherStep, {"owner", "slot"}, {kOwnerMax, kU32}, budget,
                     [&](const std::array<uint64_t, 2>& t) {
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
    } else {
      f.Fail("kind", "unknown op kind '" + kind + "'");
    }
  }
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

PlanFile ReadPlanFile(const std::string& path) {
  // Opened without blocking, each read bounded in time (a FIFO with no writer is refused).
  InputStreambuf buf(path, "plan file");
  std::istream in(&buf);
  PlanFile out;
  std::string line;
  int64_t n = 0, ops = 0, trailer_line = 0;
  int version = kPlanVersion;
  while (GetPlanLine(in, line, path, n + 1)) {
    ++n;
    if (line.empty()) continue;
    if (trailer_line > 0)
      throw InputError(path, n, "",
                       "a line after the trailer (line " + std::to_string(trailer_line) + ")");
    nlohmann::json j = ParseJsonStrict(line, path, n);
    if (n == 1) {
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
      version = static_cast<int>(v.get<int64_t>());
      ValidatePlanHeader(j, path);
      out.header = std::move(j);
      continue;
    }
    if (j.is_object() && j.contains("kvlanes_plan_end")) {
      const Field f{path, n};
      const nlohmann::json& t = j["kvlanes_plan_end"];
      const int64_t want_requests = f.Int(t, "requests"), want_ops = f.Int(t, "ops");
      if (want_requests != static_cast<int64_t>(out.requests.size()))
        f.Fail("kvlanes_plan_end.requests", "the trailer counts " + std::to_string(want_requests) +
                                                " requests, the plan holds " +
                                                std::to_string(out.requests.size()));
      if (want_ops != ops)
        f.Fail("kvlanes_plan_end.ops", "the trailer counts " + std::to_string(want_ops) +
                                           " ops, the plan holds " + std::to_string(ops));
      trailer_line = n;
      continue;
    }
    out.requests.push_back(PlanFromJson(j, path, n, version));
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
  return out;
}

std::optional<PlanProfile> PlanHeaderProfile(const nlohmann::json& header,
                                             const std::string& file) {
  if (!header.is_object() || !header.contains("hardware_profile")) return std::nullopt;
  const Field f{file, 1};
  const nlohmann::json& h = header["hardware_profile"];
  PlanProfile out;
  out.path = f.Str(h, "path");
  const std::string yaml = f.Str(h, "yaml");
  const std::string hash = f.Str(h, "fnv1a64");
  if (Fnv1a64Hex(yaml) != hash)
    f.Fail("hardware_profile.fnv1a64",
           "is " + hash + ", the stored yaml hashes to " + Fnv1a64Hex(yaml) + " (edited?)");
  out.profile = ParseHardwareProfile(yaml, file + " (hardware_profile from " + out.path + ")");
  return out;
}

}  // namespace kvlanes

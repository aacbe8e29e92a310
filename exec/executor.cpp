#include "exec/executor.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "exec/exec_error.h"
#include "exec/gather.h"
#include "exec/partial_merge_check.h"
#include "io/input_error.h"
#include "io/input_file.h"
#include "kernels/materialize.h"
#include "methods/backup_schedule.h"
#include "methods/gather_method.h"
#include "sim/cache/placement.h"
#include "sim/check.h"

namespace kvlanes::exec {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::LayerRange;
using kernels::TierDirection;

// The request fields the executor sizes buffers and compute times from: a prefix lives in the
// ranks' device pools, so it holds at most ranks x device_slots pages, and each rank's shard at
// most device_slots. Checked before any buffer is sized from them. (Slots and owners are
// checked where they are used.)
void CheckRequestSizes(const RequestPlan& r, const ExecGeometry& g, const std::string& source) {
  const auto fail = [&](const char* field, const std::string& msg) {
    throw InputError(source, 0, field, "request " + std::to_string(r.request) + ": " + msg);
  };
  const int64_t max_prefix = g.ranks * g.device_slots;
  if (r.prefix_pages < 0 || r.prefix_pages > max_prefix)
    fail("prefix_pages", std::to_string(r.prefix_pages) + " is outside 0.." +
                             std::to_string(max_prefix) + " (ranks x device_pages_per_lane)");
  for (int64_t s : r.shard_pages)
    if (s < 0 || s > g.device_slots)
      fail("shard_pages", std::to_string(s) + " is outside 0.." + std::to_string(g.device_slots));
  // Tokens: far beyond any context length, small enough for the compute model's products.
  constexpr int64_t kMaxTokens = int64_t{1} << 40;
  if (r.computed_tokens < 0 || r.computed_tokens > kMaxTokens)
    fail("computed_tokens", std::to_string(r.computed_tokens) + " is outside 0..2^40");
  if (r.input_tokens < 0 || r.input_tokens > kMaxTokens)
    fail("input_tokens", std::to_string(r.input_tokens) + " is outside 0..2^40");
}

}  // namespace

// ------------------------------------------------------------------ plan

namespace {

// The memory shape from the header; the requests' largest prefix and shard come later.
ExecGeometry GeometryOf(const PlanHeader& h) {
  ExecGeometry g;
  g.ranks = static_cast<int>(h.cp_size);
  g.page_tokens = h.page_tokens;
  g.layers = h.layers;
  g.device_slots = h.device_pages_per_lane;
  g.host_slots = h.host_pages_per_lane;
  if (h.layer_split) {
    // Lane 0 holds the pages of a layer block on every rank: the layout's slot counts.
    g.layer_split = true;
    g.device_slots = LayerSplitCapacityPages(g.device_slots, g.layers, g.ranks);
    g.host_slots = LayerSplitCapacityPages(g.host_slots, g.layers, g.ranks);
  }
  g.interleave_tokens = h.interleave_tokens;
  for (const PoolSpec& p : h.pools) {
    g.pool_names.push_back(p.name);
    g.elem_bytes.push_back(p.bytes_per_token_layer);
  }
  g.host_layout = h.host_layout;
  return g;
}

// The synthetic forward pass: each request's layer_spin_s, priced when the plan was written (or
// by the command, for an older plan: plan_pricing.h). A plan without them is refused.
void TakeSpin(ExecPlan& e, const PlanHeader& h, const std::string& source) {
  if (!h.forward_spin)
    throw InputError(source, 1, "forward_spin",
                     "missing: a plan of version " + std::to_string(h.version) +
                         " carries no forward-pass seconds; `kvlanes exec` prices it itself, "
                         "or replay the trace again with `kvlanes replay --plan`");
  for (const RequestPlan& r : e.requests) {
    if (r.layer_spin_s < 0)
      throw InputError(source, 0, "layer_spin_s",
                       "request " + std::to_string(r.request) + ": missing (not priced)");
    e.layer_busy_s.push_back(r.layer_spin_s);
  }
  const PlanSpinSource& s = *h.forward_spin;
  e.compute_model = {{"forward", "synthetic"},
                     {"profile", JsonSafeText(s.profile)},
                     {"name", s.name},
                     {"layer_base_s", s.layer_base_s},
                     {"layer_token_s", s.layer_token_s},
                     {"layer_attn_pair_s", s.layer_attn_pair_s},
                     {"scale", 1.0}};
}

}  // namespace

ExecPlan MakeExecPlan(PlanFile plan, const std::string& source, int64_t max_requests) {
  ExecPlan e;
  e.source = source;
  ExecGeometry& g = e.geo;
  g = GeometryOf(plan.header);
  if (max_requests >= 0 && static_cast<int64_t>(plan.requests.size()) > max_requests) {
    plan.requests.resize(static_cast<size_t>(max_requests));
    KeepPassesOf(plan.passes, plan.requests,
                 plan.header.forward_spin ? plan.header.forward_spin->layer_base_s : 0);
  }
  e.requests = std::move(plan.requests);
  e.passes = std::move(plan.passes);
  if (plan.header.forward_spin) e.spin_layer_base_s = plan.header.forward_spin->layer_base_s;
  for (const RequestPlan& r : e.requests) CheckRequestSizes(r, g, source);
  for (const RequestPlan& r : e.requests) {
    if (r.prefix_pages == 0) continue;
    g.max_prefix_pages = std::max(g.max_prefix_pages, r.prefix_pages);
    for (int64_t s : r.shard_pages) g.max_shard_pages = std::max(g.max_shard_pages, s);
    const kernels::ZigzagRun z{r.prefix_pages, g.ranks};
    g.max_shard_pages = std::max(g.max_shard_pages, z.MaxShardPages());
  }
  // Layers gathered ahead (the plan's config records it; absent = 0).
  e.prefetch_layers = plan.header.prefetch_layers;
  // Every gather layer keeps its own dense region when all layers fit in kDenseAllLayersMaxBytes,
  // so the dense result is checked after the request's timed work instead of between layers;
  // else a ring of prefetch_layers + 1 layers (one layer without prefetch), checked inline.
  if (g.dense_layer_bytes() * g.layers <= kDenseAllLayersMaxBytes)
    g.dense_layers = g.layers;
  else
    g.dense_layers = std::min<int64_t>(g.layers, e.prefetch_layers + 1);
  TakeSpin(e, plan.header, source);
  e.config_hash = plan.header.config_hash;
  e.header = std::move(plan.header);
  return e;
}

void UseModelForward(ExecPlan& plan) {
  plan.forward_plan =
      MakeForwardPlan(plan.header, plan.requests, plan.geo.page_tokens, plan.geo.pool_names,
                      plan.geo.elem_bytes, plan.source, plan.passes);
  plan.forward = ForwardMode::kModel;
  plan.compute_model = {{"forward", "model"},
                        {"model_preset", plan.forward_plan.preset},
                        {"max_tokens", plan.forward_plan.max_tokens},
                        {"max_keys", plan.forward_plan.max_keys},
                        {"chunk_tokens", plan.forward_plan.chunk_tokens}};
}

void ScaleCompute(ExecPlan& plan, double scale) {
  for (double& s : plan.layer_busy_s) s *= scale;
  for (PlanPass& p : plan.passes) {
    p.layer_spin_s *= scale;
    for (PlanPassChunk& c : p.chunks) c.layer_spin_s *= scale;
  }
  plan.spin_layer_base_s *= scale;
  plan.compute_model["scale"] = scale;
}

Fault ParseFault(std::string_view text) {
  const std::string t(text);
  const size_t a = t.find(':');
  const size_t b = a == std::string::npos ? a : t.find(':', a + 1);
  if (b == std::string::npos || b + 1 >= t.size())
    throw InputError("", 0, "--fault",
                     "'" + t + "': expected KIND:RANK:OPID (KIND " + kFaultKindNames.List() + ")");
  Fault f;
  const std::string kind = t.substr(0, a), rank = t.substr(a + 1, b - a - 1);
  f.kind = kFaultKindNames.Parse(kind, "--fault");
  if (rank.empty() || rank.find_first_not_of("0123456789") != std::string::npos)
    throw InputError("", 0, "--fault", "rank '" + rank + "' is not a number");
  f.rank = std::stoi(rank);
  f.op_id = t.substr(b + 1);
  return f;
}

// ------------------------------------------------------------------ results

nlohmann::ordered_json RankResultToJson(const RankResult& r) {
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const MeasuredOp& o : r.ops)
    ops.push_back({{"id", o.id},
                   {"kind", o.kind},
                   {"rank", o.rank},
                   {"seconds", o.seconds},
                   {"start_s", o.start_s},
                   {"end_s", o.end_s},
                   {"stream", o.stream},
                   {"bytes", o.bytes},
                   {"pages", o.pages},
                   {"round", o.round},
                   {"extra", o.extra}});
  nlohmann::ordered_json reqs = nlohmann::ordered_json::array();
  for (const RequestHostTime& q : r.requests)
    reqs.push_back({{"request", q.request},
                    {"enqueue_s", q.enqueue_s},
                    {"pause_begin_s", q.pause_begin_s},
                    {"pause_end_s", q.pause_end_s},
                    {"round", q.round}});
  // Spans as [op, start_s, end_s, layer, request(, phase)]: there are many (a few per layer and
  // op); a gather phase's span has its phase as a sixth element.
  nlohmann::ordered_json spans = nlohmann::ordered_json::array();
  for (const MeasuredSpan& s : r.spans) {
    nlohmann::ordered_json a = {s.op, s.start_s, s.end_s, s.layer, s.request};
    if (!s.phase.empty()) a.push_back(s.phase);
    spans.push_back(std::move(a));
  }
  return {{"rank", r.rank},
          {"verified_bytes", r.verified_bytes},
          {"context", r.context},
          {"ops", ops},
          {"spans", spans},
          {"requests", reqs},
          {"gates_expired", r.gates_expired},
          {"gates_opened_early", r.gates_opened_early}};
}

RankResult RankResultFromJson(const nlohmann::json& j) {
  RankResult r;
  r.rank = j.at("rank").get<int>();
  r.verified_bytes = j.at("verified_bytes").get<int64_t>();
  r.context = j.at("context");
  for (const auto& o : j.at("ops")) {
    MeasuredOp m;
    m.id = o.at("id").get<std::string>();
    m.kind = o.at("kind").get<std::string>();
    m.rank = o.at("rank").get<int>();
    m.seconds = o.at("seconds").get<double>();
    m.start_s = o.at("start_s").get<double>();
    m.end_s = o.at("end_s").get<double>();
    m.stream = o.at("stream").get<std::string>();
    m.bytes = o.at("bytes").get<int64_t>();
    m.pages = o.at("pages").get<int64_t>();
    m.round = o.at("round").get<int>();
    m.extra = o.at("extra");
    r.ops.push_back(std::move(m));
  }
  for (const auto& s : j.at("spans"))
    r.spans.push_back(MeasuredSpan{
        s.at(0).get<size_t>(), s.at(1).get<double>(), s.at(2).get<double>(), s.at(3).get<int64_t>(),
        s.at(4).get<int64_t>(), s.size() > 5 ? s.at(5).get<std::string>() : std::string()});
  for (const auto& q : j.at("requests"))
    r.requests.push_back(
        RequestHostTime{q.at("request").get<int64_t>(), q.at("enqueue_s").get<double>(),
                        q.at("pause_begin_s").get<double>(), q.at("pause_end_s").get<double>(),
                        q.at("round").get<int>()});
  r.gates_expired = j.at("gates_expired").get<int64_t>();
  r.gates_opened_early = j.value("gates_opened_early", int64_t{0});
  return r;
}

// ------------------------------------------------------------------ the rank's walk

namespace {

// What a slot holds, as far as the plan says.
struct SlotState {
  PageTag tag;
  bool used = false;     // allocated (not freed by an eviction)
  bool written = false;  // holds some page's data (kept after a free: write-back reads it)
};

// A span of one op on one stream, resolved to times after Sync.
// A load-back or backup op of this rank, copied layer by layer: its op, pool and slot arrays
// (device d, host h, n pages; owned by the request's slot store).
struct LayerCopyOp {
  size_t op;
  int pool;
  const int32_t* d;
  const int32_t* h;
  size_t n;
};

struct PendingSpan {
  size_t op;  // index into ops_
  int begin, end;
  int64_t layer = -1;      // the layer it covers when it is one layer's part of the op
  std::string phase = "";  // a gather phase (span trace only): not part of the op's own time
};

// A verification to read after Sync, and how to name its items.
struct PendingVerify {
  int handle;
  std::string op_id;
  std::string what;  // "layer 3" / "pool kv"
  // A load-back's pages (device slot, host slot, content), named only if one of them fails; all
  // null for a gathered layer. They live until the request's bookkeeping is cleared.
  const int32_t* dev = nullptr;
  const int32_t* host = nullptr;
  const PageTag* tags = nullptr;
};

// A load-back whose pages are checked once the request's timed work is enqueued.
struct PendingCheck {
  std::string op_id;
  std::string what;
  int pool;
  const int32_t* dev;
  const int32_t* host;
  const PageTag* tags;
  size_t n;
};

// One request on its way through RankRun's phases: what the plan asks of this rank and the
// marks and ops the phases hand on to each other.
struct RequestRun {
  size_t ri = 0;  // index into the plan's requests
  const RequestPlan* p = nullptr;
  std::string pre;  // op id prefix "<request>/"
  Clock::time_point host_t0;
  int start_mark = -1;
  size_t first_op = 0;
  std::vector<size_t> host_timed;  // ops timed on the host clock (evictions)
  std::vector<LayerCopyOp> loads, backups;
  bool gathers = false, p2p = false;
  int all_loaded = -1;  // p2p: the mark after every layer's load-back
  size_t gop = 0;       // the gather op
  const GatherIndex* gather = nullptr;
  size_t cop = 0;  // the compute op
  const std::vector<PageWrite>* writes = nullptr;
  ForwardWork forward;    // --forward model: this rank's share of the request
  size_t merge_op = 0;    // --forward model, partial_merge: the merge's op (checked in Finish)
  size_t agree_op = 0;    // cache.cp_hit_agreement min: the all-reduce's op
  int agree_handle = -1;  // and its result's handle (checked in Finish)
  int last_mark = -1;     // the latest forward layer's end
  std::vector<int> layer_marks;  // each forward layer's end, as they are enqueued
};

// One rank's run of a plan, in five layers, each a class over the one below: RankState (the
// plan, the slot bookkeeping and the measured ops), RankCopies (evictions, write-backs,
// load-backs and backups), RankGathers (gathers, merges, the host-hit agreement and their
// checks), RankRun (warm-up, each request's phases, timing and verification) and RankServe (the
// timed rounds, of requests one at a time or of a serving plan's passes).
class RankState {
 public:
  RankState(const ExecPlan& plan, RankBackend& b, const ExecOptions& opts)
      : plan_(plan),
        geo_(plan.geo),
        b_(b),
        model_(plan.forward == ForwardMode::kModel ? &b.RequireModelForward() : nullptr),
        opts_(opts),
        me_(b.rank()) {
    dev_.resize(static_cast<size_t>(geo_.device_slots));
    host_.resize(static_cast<size_t>(geo_.host_slots));
  }

 protected:
  // ---- plan consistency: the plan contradicts itself (or the executor's reading of it).
  // Whether this rank holds the pages of `lane`: its own lane, or under layer_split lane 0 (every
  // rank holds every page; ExecGeometry::layer_split).
  bool MyLane(uint32_t lane) const {
    return geo_.layer_split ? lane == 0 : lane == static_cast<uint32_t>(me_);
  }

  [[noreturn]] void PlanFail(size_t req, const std::string& op_id, const std::string& msg) const {
    throw InputError(plan_.source, static_cast<int64_t>(req) + 2, op_id,
                     "rank " + std::to_string(me_) + ": " + msg);
  }

  // Each gather layer has its own dense region (checked after the timed work), not a ring.
  bool DenseHoldsEveryLayer() const {
    return geo_.dense_layers > 1 && geo_.dense_layers == geo_.layers;
  }

  SlotState& Dev(size_t req, const std::string& id, uint32_t slot) {
    if (slot >= dev_.size())
      PlanFail(req, id, "device slot " + std::to_string(slot) + " >= device_pages_per_lane");
    return dev_[slot];
  }

  SlotState& Host(size_t req, const std::string& id, uint32_t slot) {
    if (slot >= host_.size())
      PlanFail(req, id, "host slot " + std::to_string(slot) + " >= host_pages_per_lane");
    return host_[slot];
  }

  size_t AddOp(const std::string& id, const char* kind, Stream s, int64_t bytes, int64_t pages) {
    MeasuredOp o;
    o.id = id;
    o.kind = kind;
    o.rank = me_;
    o.stream = kStreamNames.CName(s);
    o.bytes = bytes;
    o.pages = pages;
    o.round = round_;
    ops_.push_back(std::move(o));
    return ops_.size() - 1;
  }

  void ApplyFaults(const std::string& op_id, const std::function<void()>& corrupt) {
    for (const Fault& f : opts_.faults) {
      if (f.rank != me_ || f.op_id != op_id) continue;
      switch (f.kind) {
        case Fault::Kind::kDie:
          std::fprintf(stderr, "kvlanes exec: rank %d: fault hook: dying before op %s\n", me_,
                       op_id.c_str());
          std::fflush(nullptr);
          _exit(3);
        case Fault::Kind::kHang:
          std::fprintf(stderr, "kvlanes exec: rank %d: fault hook: hanging before op %s\n", me_,
                       op_id.c_str());
          std::fflush(nullptr);
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        case Fault::Kind::kCorrupt:
          if (!corrupt)
            throw InputError("", 0, "--fault",
                             "op " + op_id + " reads nothing the hook can corrupt");
          corrupt();
          break;
      }
    }
  }

  int32_t* Stash(std::vector<int32_t> v) {
    index_store_.push_back(std::move(v));
    return index_store_.back().data();
  }

  const ExecPlan& plan_;
  const ExecGeometry& geo_;
  RankBackend& b_;
  ModelForward* model_;  // --forward model: the backend's proxy
  const ExecOptions& opts_;
  int me_;
  int round_ = 0;  // the timed round being run
  std::vector<SlotState> dev_, host_;
  std::vector<MeasuredOp> ops_, done_;
  std::vector<RequestHostTime> host_times_;
  std::pair<int, int> pause_{-1, -1};  // marks around this request's second gate (p2p)
  std::vector<PendingSpan> spans_;
  std::vector<MeasuredSpan> done_spans_;  // keep_spans: every resolved span (op: index into done_)
  std::vector<PendingVerify> verifies_;
  std::vector<PendingCheck> load_checks_;
  std::vector<const RequestPlan*> dense_verify_prefix_;
  std::deque<std::vector<int32_t>> index_store_;
  std::deque<std::vector<PageTag>> tag_store_;
  std::deque<std::vector<PageWrite>> write_store_;
  std::deque<GatherIndex> gathers_;
  int64_t verified_bytes_ = 0;
  Clock::time_point host_epoch_;
};

class RankCopies : public RankState {
 public:
  using RankState::RankState;

 protected:
  // Evictions: free-list bookkeeping only; slots keep their data (a write-back reads it).
  void Evict(RequestRun& q) {
    for (size_t i = 0; i < q.p->evictions.size(); ++i) {
      const SlotFree& e = q.p->evictions[i];
      const std::string id = q.pre + "evict/" + std::to_string(i);
      const auto t0 = Clock::now();
      int64_t mine = 0;
      for (const auto& [lane, slot] : e.slots) {
        if (!MyLane(lane)) continue;
        SlotState& s = e.tier == Tier::kDevice ? Dev(q.ri, id, slot) : Host(q.ri, id, slot);
        if (!s.used)
          PlanFail(q.ri, id,
                   std::string(e.tier == Tier::kDevice ? "device" : "host") + " slot " +
                       std::to_string(slot) + " freed but not in use");
        s.used = false;
        ++mine;
      }
      if (mine == 0) continue;
      const size_t op = AddOp(id, "evict", Stream::kCompute, 0, mine);
      ops_[op].stream = "host";
      ops_[op].seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      ops_[op].extra["tier"] = e.tier == Tier::kDevice ? "device" : "host";
      q.host_timed.push_back(op);
    }
  }

  // Write-backs (device -> host at device eviction), before the forward pass. Returns the d2h
  // stream's mark after them.
  int WriteBack(RequestRun& q) {
    const int64_t L = geo_.layers;
    for (const LaneCopy& c : q.p->write_back) {
      if (!MyLane(c.lane)) continue;
      std::vector<int32_t> d, h;
      for (const auto& [ds, hs] : c.pages) {
        const std::string id = q.pre + "write_back/l" + std::to_string(c.lane);
        SlotState& dev = Dev(q.ri, id, ds);
        SlotState& host = Host(q.ri, id, hs);
        if (!dev.written)
          PlanFail(q.ri, id,
                   "writes back device slot " + std::to_string(ds) + ", which holds no page");
        if (host.used)
          PlanFail(q.ri, id,
                   "writes back into host slot " + std::to_string(hs) + ", which is in use");
        host = SlotState{dev.tag, true, true};
        d.push_back(static_cast<int32_t>(ds));
        h.push_back(static_cast<int32_t>(hs));
      }
      const int32_t* dp = Stash(std::move(d));
      const int32_t* hp = Stash(std::move(h));
      const size_t n = c.pages.size();
      for (int k = 0; k < geo_.num_pools(); ++k) {
        const std::string id = q.pre + "write_back/l" + std::to_string(c.lane) + "/" +
                               geo_.pool_names[static_cast<size_t>(k)];
        ApplyFaults(id, nullptr);
        const size_t op =
            AddOp(id, "write_back", Stream::kD2H, static_cast<int64_t>(n) * L * geo_.chunk_bytes(k),
                  static_cast<int64_t>(n));
        const int m0 = b_.Mark(Stream::kD2H);
        b_.TierCopy(Stream::kD2H, k, TierDirection::kDeviceToHost, {dp, n}, {hp, n},
                    LayerRange{0, L});
        spans_.push_back({op, m0, b_.Mark(Stream::kD2H)});
      }
    }
    return b_.Mark(Stream::kD2H);
  }

  // Load-back ops of this rank (one per pool), their slots and the shadow update. The copies
  // run layer by layer (LoadLayers: layer l loads while earlier layers compute, as the cost
  // model's schedule has it); every loaded page is checked after the request's timed work.
  void PlanLoadBacks(RequestRun& q) {
    const int64_t L = geo_.layers;
    for (const LaneCopy& c : q.p->load_back) {
      if (!MyLane(c.lane)) continue;
      std::vector<int32_t> d, h;
      std::vector<PageTag> tags;
      const std::string lane_id = q.pre + "load_back/l" + std::to_string(c.lane);
      for (const auto& [ds, hs] : c.pages) {
        SlotState& dev = Dev(q.ri, lane_id, ds);
        SlotState& host = Host(q.ri, lane_id, hs);
        if (!host.used || !host.written)
          PlanFail(q.ri, lane_id,
                   "loads host slot " + std::to_string(hs) + ", which holds no page");
        if (dev.used)
          PlanFail(q.ri, lane_id,
                   "loads into device slot " + std::to_string(ds) + ", which is in use");
        dev = SlotState{host.tag, true, true};
        d.push_back(static_cast<int32_t>(ds));
        h.push_back(static_cast<int32_t>(hs));
        tags.push_back(host.tag);
      }
      const int32_t* dp = Stash(std::move(d));
      const int32_t* hp = Stash(std::move(h));
      tag_store_.push_back(std::move(tags));
      const PageTag* tp = tag_store_.back().data();
      const size_t n = c.pages.size();
      for (int k = 0; k < geo_.num_pools(); ++k) {
        const std::string id = lane_id + "/" + geo_.pool_names[static_cast<size_t>(k)];
        ApplyFaults(id, [&] { b_.CorruptHostPage(k, hp[0], 0); });
        const size_t op =
            AddOp(id, "load_back", Stream::kH2D, static_cast<int64_t>(n) * L * geo_.chunk_bytes(k),
                  static_cast<int64_t>(n));
        q.loads.push_back({op, k, dp, hp, n});
        load_checks_.push_back(
            PendingCheck{id, "pool " + geo_.pool_names[static_cast<size_t>(k)], k, dp, hp, tp, n});
      }
    }
  }

  // Copies layers `r` of every load-back (layer: r's one layer, or -1); returns the h2d mark
  // after them.
  int LoadLayers(const RequestRun& q, LayerRange r, int64_t layer) {
    for (const LayerCopyOp& lo : q.loads) {
      const int c0 = b_.Mark(Stream::kH2D);
      b_.TierCopy(Stream::kH2D, lo.pool, TierDirection::kHostToDevice, {lo.d, lo.n}, {lo.h, lo.n},
                  r);
      spans_.push_back({lo.op, c0, b_.Mark(Stream::kH2D), layer});
    }
    return b_.Mark(Stream::kH2D);
  }

  // Backup ops of this rank (one per pool), their slots and the shadow update.
  void PlanBackups(RequestRun& q) {
    const int64_t L = geo_.layers;
    for (const LaneCopy& c : q.p->backup) {
      if (!MyLane(c.lane)) continue;
      const std::string lane_id = q.pre + "backup/l" + std::to_string(c.lane);
      std::vector<int32_t> d, h;
      for (const auto& [ds, hs] : c.pages) {
        SlotState& dev = Dev(q.ri, lane_id, ds);
        SlotState& host = Host(q.ri, lane_id, hs);
        if (!dev.used || !dev.written)
          PlanFail(q.ri, lane_id,
                   "backs up device slot " + std::to_string(ds) + ", which holds no page");
        if (host.used)
          PlanFail(q.ri, lane_id,
                   "backs up into host slot " + std::to_string(hs) + ", which is in use");
        host = SlotState{dev.tag, true, true};
        d.push_back(static_cast<int32_t>(ds));
        h.push_back(static_cast<int32_t>(hs));
      }
      const int32_t* dp = Stash(std::move(d));
      const int32_t* hp = Stash(std::move(h));
      for (int k = 0; k < geo_.num_pools(); ++k) {
        const std::string id = lane_id + "/" + geo_.pool_names[static_cast<size_t>(k)];
        ApplyFaults(id, nullptr);
        const size_t op = AddOp(id, "backup", Stream::kD2H,
                                static_cast<int64_t>(c.pages.size()) * L * geo_.chunk_bytes(k),
                                static_cast<int64_t>(c.pages.size()));
        ops_[op].extra = {{"schedule", BackupScheduleOf(q.p->backup_schedule).Name()}};
        q.backups.push_back({op, k, dp, hp, c.pages.size()});
      }
    }
  }

  // Backs up layers `r` of every backup op after the last forward layer (layer: r's one layer,
  // or -1 for the whole op at once).
  void BackUp(const RequestRun& q, LayerRange r, int64_t layer) {
    if (q.backups.empty()) return;
    b_.Wait(Stream::kD2H, q.last_mark);
    for (const LayerCopyOp& bo : q.backups) {
      const int c0 = b_.Mark(Stream::kD2H);
      b_.TierCopy(Stream::kD2H, bo.pool, TierDirection::kDeviceToHost, {bo.d, bo.n}, {bo.h, bo.n},
                  r);
      spans_.push_back({bo.op, c0, b_.Mark(Stream::kD2H), layer});
    }
  }
};

class RankGathers : public RankCopies {
 public:
  using RankCopies::RankCopies;

 protected:
  // A gather over scratch pages (owners round-robin or zigzag, slots from 0), data irrelevant.
  GatherIndex ScratchGather(GatherMethod m) const {
    const int N = geo_.ranks;
    const int64_t P = std::min<int64_t>(geo_.max_prefix_pages, geo_.device_slots);
    std::vector<PrefixPage> prefix(static_cast<size_t>(P));
    std::vector<int64_t> count(static_cast<size_t>(N), 0);
    const GatherMethodImpl& method = GatherMethodOf(m);
    for (int64_t p = 0; p < P; ++p) {
      const int owner = method.ScratchOwner(p, P, N);
      prefix[static_cast<size_t>(p)] = PrefixPage{
          static_cast<uint16_t>(owner), static_cast<uint32_t>(count[static_cast<size_t>(owner)]++)};
    }
    std::vector<PageTag> tags(static_cast<size_t>(P));
    return BuildGather(m, prefix, tags);
  }

  GatherIndex BuildGather(GatherMethod m, const std::vector<PrefixPage>& prefix,
                          std::vector<PageTag> tags) const {
    GatherIndex g;
    g.method = m;
    g.prefix_pages = static_cast<int64_t>(prefix.size());
    g.tags = std::move(tags);
    GatherMethodOf(m).BuildIndex(me_, geo_.ranks, prefix, g);
    return g;
  }

  // One gather layer after its load-back (`loaded`) and the forward layer that last read the
  // buffer it fills: layer l - 1 (the gather and the forward pass take turns), or with
  // prefetch_layers k layer l - 1 - k, so the gather of the next layers runs beside this
  // layer's forward pass. Returns the mark where it is done.
  int GatherOneLayer(RequestRun& q, int64_t l, int loaded) {
    b_.Wait(Stream::kComm, loaded);
    const int64_t reuse = l - 1 - plan_.prefetch_layers;
    if (reuse >= 0) b_.Wait(Stream::kComm, q.layer_marks[static_cast<size_t>(reuse)]);
    const int g0 = b_.Mark(Stream::kComm);
    // Span trace: the recipe marks the end of each phase of the layer; the last phase's mark is
    // the layer's end (nothing is enqueued between them), so the phases tile it.
    GatherPhases phases;
    GatherLayer(b_, *q.gather, Stream::kComm, l, opts_.keep_spans ? &phases : nullptr);
    const int ready = phases.empty() ? b_.Mark(Stream::kComm) : phases.back().second;
    spans_.push_back({q.gop, g0, ready, l});
    int phase_begin = g0;
    for (auto& [name, end] : phases) {
      spans_.push_back({q.gop, phase_begin, end, l, std::move(name)});
      phase_begin = end;
    }
    if (GatherMethodOf(q.gather->method).Result() == GatherResult::kRecords) {
      // The result is the all-gather's output, which the next layer overwrites: check it now.
      verifies_.push_back(PendingVerify{
          b_.VerifyRecords(Stream::kComm, l,
                           geo_.ranks > 1 ? RecordBuffer::kRecv : RecordBuffer::kSend),
          q.pre + "gather", "layer " + std::to_string(l) + " (owner-major records)"});
      dense_verify_prefix_.push_back(q.p);
    } else if (!DenseHoldsEveryLayer()) {  // a later layer reuses the buffer: check it now
      verifies_.push_back(PendingVerify{b_.VerifyDense(Stream::kComm, l), q.pre + "gather",
                                        "layer " + std::to_string(l)});
      dense_verify_prefix_.push_back(q.p);
    }
    return ready;
  }

  // cache.cp_hit_agreement min: the group's minimum all-reduce of the hits the ranks report (the
  // plan's hit_agreement.reports, this rank's entry), on the collective stream before the
  // load-backs, which wait for it. Its result is checked after the request's Sync against the hit
  // the simulator agreed on (CheckHitAgreement).
  void AgreeOnHit(RequestRun& q) {
    const RequestPlan& p = *q.p;
    const std::string id = q.pre + "hit_agreement";
    if (static_cast<int>(p.hit_reports.size()) != geo_.ranks || geo_.ranks < 2)
      PlanFail(q.ri, id,
               "hit_agreement.reports holds " + std::to_string(p.hit_reports.size()) +
                   " reports for cp_size " + std::to_string(geo_.ranks) +
                   " (one per rank, and only with several ranks)");
    if (p.agreed_hit_pages < p.host_match_pages && p.loaded_pages > 0)
      PlanFail(q.ri, id,
               "loads " + std::to_string(p.loaded_pages) + " pages back, but the group agreed on " +
                   std::to_string(p.agreed_hit_pages) + " of a " +
                   std::to_string(p.host_match_pages) + "-page host match (all or nothing)");
    ApplyFaults(id, nullptr);
    const int64_t mine = p.hit_reports[static_cast<size_t>(me_)];
    q.agree_op = AddOp(id, "hit_agreement", Stream::kComm, sizeof(int64_t), 0);
    ops_[q.agree_op].extra = {{"reported_pages", mine}, {"agreed_pages", p.agreed_hit_pages}};
    const int m0 = b_.Mark(Stream::kComm);
    q.agree_handle = b_.AllReduceMin(Stream::kComm, mine);
    const int m1 = b_.Mark(Stream::kComm);
    spans_.push_back({q.agree_op, m0, m1});
    b_.Wait(Stream::kH2D, m1);
  }

  void CheckHitAgreement(const RequestRun& q) {
    const int64_t got = b_.AllReduceMinResult(q.agree_handle);
    MeasuredOp& o = ops_[q.agree_op];
    o.extra["reduced_pages"] = got;
    if (got != q.p->agreed_hit_pages)
      throw ExecError("verification failed in request " + std::to_string(q.p->request) + ": op " +
                      o.id + ", rank " + std::to_string(me_) +
                      ": the all-reduce (min) of the ranks' reported hits gave " +
                      std::to_string(got) + " pages, the simulator agreed on " +
                      std::to_string(q.p->agreed_hit_pages));
  }

  // partial_merge with the proxy (--forward model): every layer's attention is this rank's
  // partial attention over its own prefix pages and new tokens, merged by the log-sum-exp rule,
  // on the device (exec/forward_model_cuda.h MergeLayer); nothing is gathered. Here: the prefix
  // checked against the plan and the slots, the rank's pages and their tokens' positions for the
  // proxy, the pages' bytes checked after the timed work, and the merge's op (its check after
  // the request's Sync, CheckModelMerge). Returns the op's index.
  size_t BeginModelMerge(RequestRun& q) {
    const RequestPlan& p = *q.p;
    const std::string id = q.pre + "gather";
    const std::vector<PageTag> tags = CheckPrefix(q.ri, p, id);
    const PartialMergeShape shape = PartialMergeShape::For(geo_, p);
    std::vector<int32_t> slots;
    std::vector<PageTag> mine;
    q.forward.merge = true;
    q.forward.shard_pos.clear();
    for (int64_t pg = me_; pg < p.prefix_pages; pg += geo_.ranks) {
      slots.push_back(static_cast<int32_t>(p.prefix[static_cast<size_t>(pg)].device_slot));
      mine.push_back(tags[static_cast<size_t>(pg)]);
      for (int64_t j = 0; j < geo_.page_tokens; ++j)
        q.forward.shard_pos.push_back(static_cast<int32_t>(shape.TokenPosition(pg, j, geo_.ranks)));
    }
    q.forward.shard_slots = slots;
    if (!slots.empty()) {
      const size_t n = slots.size();
      const int pool = plan_.forward_plan.kv_pool;
      const int32_t* dp = Stash(std::move(slots));
      const int32_t* hp = Stash(std::vector<int32_t>(n, -1));
      tag_store_.push_back(std::move(mine));
      load_checks_.push_back(
          PendingCheck{id, "prefix pages of pool " + geo_.pool_names[static_cast<size_t>(pool)],
                       pool, dp, hp, tag_store_.back().data(), n});
    }
    // Nothing leaves the GPU at cp_size 1 (the only size the device merge runs at): the op
    // carries no time of its own; the partial attention and the merge are in the compute op.
    const size_t op = AddOp(id, "gather", Stream::kCompute, 0, p.prefix_pages);
    ops_[op].stream = "compute";
    ops_[op].seconds = 0;
    ops_[op].extra = {{"method", "partial_merge"},
                      {"merged_on", "device"},
                      {"prefix_tokens", p.prefix_pages * geo_.page_tokens}};
    return op;
  }

  // After the request's Sync: the full attention of its last layer over the whole prefix against
  // the merged output that layer used, within kPartialAttentionTolerance; the outputs compared
  // count in the verified bytes (4 bytes each).
  void CheckModelMerge(const RequestRun& q) {
    const MergeCheck c = model_->ModelMergeCheck();
    MeasuredOp& o = ops_[q.merge_op];
    o.extra["checked_layer"] = geo_.layers - 1;
    o.extra["outputs_checked"] = c.outputs;
    o.extra["max_abs_difference"] = c.max_abs_diff;
    o.extra["tolerance"] = kPartialAttentionTolerance;
    verified_bytes_ += c.outputs * static_cast<int64_t>(sizeof(float));
    if (!(c.max_abs_diff <= kPartialAttentionTolerance))
      throw ExecError("verification failed in request " + std::to_string(q.p->request) + ": op " +
                      o.id + ", rank " + std::to_string(me_) +
                      ": the merged partial attention of " + "layer " +
                      std::to_string(geo_.layers - 1) + " differs from the attention " +
                      "over the whole prefix by " + std::to_string(c.max_abs_diff) + " (> " +
                      std::to_string(kPartialAttentionTolerance) + ", " +
                      std::to_string(c.outputs) + " outputs)");
  }

  // partial_merge on the host, over the values this rank's pages hold (exec/partial_merge_check.h):
  // the query rows are all-gathered, this rank attends over its own tokens of the prefix, the
  // partials are all-gathered and merged, and the result is compared with the attention over the
  // whole prefix. The pages' bytes are verified against their pattern after the timed work, so
  // the values attended over are the ones the pool holds. Returns the op's index.
  size_t PartialMerge(const RequestPlan& p, const std::vector<PageTag>& tags,
                      const std::string& id) {
    const auto t0 = Clock::now();
    const PartialMergeShape shape = PartialMergeShape::For(geo_, p);
    std::vector<int32_t> slots;
    std::vector<PageTag> mine;
    for (int64_t q = 0; q < p.prefix_pages; ++q)
      if (p.prefix[static_cast<size_t>(q)].owner == me_) {
        slots.push_back(static_cast<int32_t>(p.prefix[static_cast<size_t>(q)].device_slot));
        mine.push_back(tags[static_cast<size_t>(q)]);
      }
    // Query rows: rank r makes rows r, r + N, ...; the all-gather gives every rank all of them.
    const std::vector<float> q_mine = shape.QueryRows(p.request, me_, geo_.ranks);
    std::vector<std::string> got = b_.AllGatherBytes(
        std::string(reinterpret_cast<const char*>(q_mine.data()), q_mine.size() * sizeof(float)));
    const std::vector<float> queries = shape.AssembleQueries(got, geo_.ranks);
    const kernels::PartialOutput part = shape.RankPartial(queries, tags, me_, geo_.ranks);
    got = b_.AllGatherBytes(SerializePartial(part));
    std::vector<kernels::PartialOutput> parts;
    for (const std::string& g : got) parts.push_back(DeserializePartial(g, shape));
    const kernels::PartialOutput merged =
        kernels::MergePartials(parts, shape.rows, shape.value_dim);
    const kernels::PartialOutput full = shape.FullAttention(queries, tags, geo_.ranks);
    const MergeError e = CompareMerged(merged, full);
    if (!(e.max_rel <= kPartialMergeTolerance))
      throw ExecError("verification failed in request " + std::to_string(p.request) + ": op " + id +
                      ", rank " + std::to_string(me_) + ": merged partial attention differs from " +
                      "the attention over the whole prefix at row " + std::to_string(e.row) +
                      " (relative difference " + std::to_string(e.max_rel) + " > " +
                      std::to_string(kPartialMergeTolerance) + ")");
    if (!slots.empty()) {
      const size_t n = slots.size();
      const int32_t* dp = Stash(std::move(slots));
      const int32_t* hp = Stash(std::vector<int32_t>(n, -1));
      tag_store_.push_back(std::move(mine));
      load_checks_.push_back(PendingCheck{id, "prefix pages of pool " + geo_.pool_names[0], 0, dp,
                                          hp, tag_store_.back().data(), n});
    }
    const size_t op = AddOp(id, "gather", Stream::kCompute,
                            static_cast<int64_t>(queries.size() * sizeof(float)) +
                                static_cast<int64_t>(geo_.ranks) * PartialBytes(shape),
                            p.prefix_pages);
    ops_[op].stream = "host";
    ops_[op].seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    ops_[op].extra = {{"method", "partial_merge"},
                      {"rows", shape.rows},
                      {"prefix_tokens", p.prefix_pages * geo_.page_tokens},
                      {"max_relative_difference", e.max_rel}};
    return op;
  }

  // Checks the plan's gather against the slot bookkeeping, builds and uploads its index, and
  // adds the op. Returns the op's index; the layers run in Request().
  // The plan's prefix checked against the method, the layout and this rank's device slots;
  // returns the expected content (extent, position) of every logical page.
  std::vector<PageTag> CheckPrefix(size_t ri, const RequestPlan& p, const std::string& id) {
    const int N = geo_.ranks;
    const int64_t P = p.prefix_pages;
    if (static_cast<int64_t>(p.prefix.size()) != P)
      PlanFail(ri, id, "prefix list size differs from prefix_pages");
    // Expected content of every logical page: its run's extent and its position.
    std::vector<PageTag> tags(static_cast<size_t>(P));
    std::vector<bool> covered(static_cast<size_t>(P), false);
    for (const PrefixRun& r : p.runs)
      for (int64_t q = r.first_page; q < r.first_page + r.pages; ++q) {
        if (q < 0 || q >= P || covered[static_cast<size_t>(q)])
          PlanFail(ri, id, "runs do not tile the prefix at page " + std::to_string(q));
        covered[static_cast<size_t>(q)] = true;
        tags[static_cast<size_t>(q)] = PageTag{r.extent, 0, q};
      }
    const GatherMethodImpl& method = GatherMethodOf(p.gather_method);
    if ((method.Layout() == GatherLayout::kInterleaved) != (geo_.interleave_tokens > 0))
      PlanFail(ri, id,
               geo_.interleave_tokens > 0
                   ? "KV interleaved by token (cache.interleave_tokens) is merged, not gathered "
                     "by " +
                         std::string(method.Name())
                   : std::string(method.Name()) +
                         " needs KV interleaved by token (config cache.interleave_tokens)");
    const GatherPrefixView view{N, &p, [&](const std::string& why) { PlanFail(ri, id, why); }};
    method.CheckOwners(view);
    if ((method.Layout() == GatherLayout::kLayerSplit) != geo_.layer_split)
      PlanFail(
          ri, id,
          geo_.layer_split
              ? "a layer_split plan materializes by broadcast, not " + std::string(method.Name())
              : std::string(method.Name()) + " needs a layer_split plan (cache.placement)");
    if (geo_.layer_split)
      for (int64_t q = 0; q < P; ++q)
        if (p.prefix[static_cast<size_t>(q)].owner != 0)
          PlanFail(ri, id,
                   "layer_split: logical page " + std::to_string(q) + " is on lane " +
                       std::to_string(p.prefix[static_cast<size_t>(q)].owner) +
                       ", every page is on lane 0");
    std::vector<int64_t> shard(static_cast<size_t>(N), 0);
    for (int64_t q = 0; q < P; ++q) {
      if (!covered[static_cast<size_t>(q)])
        PlanFail(ri, id, "logical page " + std::to_string(q) + " is in no run");
      const PrefixPage& pp = p.prefix[static_cast<size_t>(q)];
      if (pp.owner >= N)
        PlanFail(ri, id,
                 "logical page " + std::to_string(q) + " has owner " + std::to_string(pp.owner) +
                     " >= cp_size");
      if (pp.device_slot >= geo_.device_slots)
        PlanFail(ri, id, "logical page " + std::to_string(q) + ": slot out of range");
      ++shard[pp.owner];
      if (!MyLane(pp.owner)) continue;
      const SlotState& s = dev_[pp.device_slot];
      if (!s.used || !(s.tag == tags[static_cast<size_t>(q)]))
        PlanFail(ri, id,
                 "logical page " + std::to_string(q) + " (extent " +
                     std::to_string(tags[static_cast<size_t>(q)].extent) +
                     ") should be in device slot " + std::to_string(pp.device_slot) + ", which " +
                     (s.used ? "holds logical page " + std::to_string(s.tag.page) + " of extent " +
                                   std::to_string(s.tag.extent)
                             : std::string("is free")));
    }
    if (!p.shard_pages.empty() && p.shard_pages != shard)
      PlanFail(ri, id, "shard_pages disagrees with the owners of the prefix pages");
    return tags;
  }

  size_t BeginGather(size_t ri, const RequestPlan& p, const std::string& pre) {
    const std::string id = pre + "gather";
    const int N = geo_.ranks;
    const int64_t P = p.prefix_pages;
    const std::vector<PageTag> tags = CheckPrefix(ri, p, id);
    const GatherMethodImpl& method = GatherMethodOf(p.gather_method);
    if (!method.Gathers()) return PartialMerge(p, tags, id);
    method.CheckIndexable(
        GatherPrefixView{N, &p, [&](const std::string& why) { PlanFail(ri, id, why); }});

    gathers_.push_back(BuildGather(p.gather_method, p.prefix, tags));
    const GatherIndex& g = gathers_.back();
    ApplyFaults(id, [&] {
      for (int64_t q = 0; q < P; ++q)
        if (MyLane(p.prefix[static_cast<size_t>(q)].owner)) {
          b_.CorruptDevicePage(
              0, static_cast<int32_t>(p.prefix[static_cast<size_t>(q)].device_slot), 0);
          return;
        }
      throw InputError("", 0, "--fault", "rank " + std::to_string(me_) + " owns no page of " + id);
    });
    b_.PrepareGather(g);
    if (method.ReadsPeers()) {
      // Peers' pages (loaded back in this request, too) must be in place before they are read.
      b_.Sync();
      b_.Barrier();
      if (opts_.gate) {  // hold the rest of the request too; the held time is not the request's
        const int idle = b_.Mark(Stream::kCompute);
        pause_ = {idle, b_.HoldStreams(opts_.gate_timeout_s)};
      }
    }
    const size_t op =
        AddOp(id, "gather", Stream::kComm, P * geo_.layers * geo_.page_layer_bytes(), P);
    ops_[op].extra = {{"method", method.Name()},
                      {"layers", geo_.layers},
                      {"runs", p.runs.size()},
                      {"shard_pages", g.shard_pages}};
    return op;
  }
};

class RankRun : public RankGathers {
 public:
  using RankGathers::RankGathers;

 protected:
  double spin_ = 0;  // the current request's synthetic spin per layer
  // --forward model: the current request's ForwardWork::gemm_tokens (-1: its own tokens) and
  // the serving chunk it computes in its first pass (every computed token outside serving plans)
  int64_t gemm_tokens_ = -1;
  TokenRange chunk_;
  // A serving plan's shapes were warmed before the round's arrival clock (RankServe::RunPasses):
  // no request warms its own inside the timed passes.
  bool warmed_ahead_ = false;

  // ---- warm-up: every primitive the plan uses, on scratch pages, untimed.
  void WarmUp() {
    bool has_host = geo_.host_slots > 0;
    std::vector<GatherMethod> methods;
    for (const RequestPlan& r : plan_.requests)
      if (r.prefix_pages > 0 && GatherMethodOf(r.gather_method).Gathers() &&
          std::find(methods.begin(), methods.end(), r.gather_method) == methods.end())
        methods.push_back(r.gather_method);
    const int64_t n =
        std::min<int64_t>({geo_.device_slots, std::max<int64_t>(geo_.host_slots, 1), 8});
    std::vector<int32_t> slots(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    // The proxy: one small request's first and last layer (both layer kinds), so cuBLAS has
    // picked its kernels before the epoch.
    ForwardWork warm;
    if (plan_.forward == ForwardMode::kModel) {
      warm.new_tokens = std::min<int64_t>(64, std::max<int64_t>(plan_.forward_plan.max_tokens, 1));
      for (int32_t t = 0; t < warm.new_tokens; ++t) warm.positions.push_back(t);
    }
    // Merged prefixes (KV interleaved by token): the partial attention's fp32-output GEMMs too,
    // over the new tokens alone.
    ForwardWork warm_merge = warm;
    warm_merge.merge = true;
    const bool merges = plan_.forward == ForwardMode::kModel && geo_.interleave_tokens > 0;
    for (int it = 0; it < opts_.warmup; ++it) {
      if (plan_.forward == ForwardMode::kModel) {
        WarmForward(warm);
        if (merges) WarmForward(warm_merge);
      }
      b_.ForwardLayer(Stream::kCompute, 0, {}, 1e-5);
      if (has_host)
        for (int k = 0; k < geo_.num_pools(); ++k) {
          b_.TierCopy(Stream::kD2H, k, TierDirection::kDeviceToHost, slots, slots,
                      LayerRange{0, geo_.layers});
          b_.TierCopy(Stream::kH2D, k, TierDirection::kHostToDevice, slots, slots,
                      LayerRange{0, geo_.layers});
          b_.TierCopy(Stream::kH2D, k, TierDirection::kHostToDevice, slots, slots,
                      LayerRange{0, 1});
          b_.TierCopy(Stream::kD2H, k, TierDirection::kDeviceToHost, slots, slots,
                      LayerRange{0, 1});
        }
      b_.Sync();
      for (GatherMethod m : methods) {
        GatherIndex g = ScratchGather(m);
        b_.PrepareGather(g);
        b_.Barrier();
        GatherLayer(b_, g, Stream::kComm, 0);
        b_.Sync();
        b_.Barrier();
      }
      b_.ReleaseMarks();
    }
  }

  // The proxy's first and last layer (both layer kinds) at `w`'s shapes, untimed, reading the
  // dense buffer as it is and writing no page: cuBLAS makes its per-shape choices here, not in a
  // timed layer. Waits for the device.
  void WarmForward(const ForwardWork& w) {
    model_->PrepareForward(w);
    model_->ModelForwardLayer(Stream::kCompute, 0, {});
    if (geo_.layers > 1) model_->ModelForwardLayer(Stream::kCompute, geo_.layers - 1, {});
    b_.Sync();
  }

  // ---- one request, in phases; its state goes through them in a RequestRun. `spin` >= 0: the
  // synthetic forward pass spins that per layer instead of the request's layer_spin_s (its
  // share of a serving pass). `gemm_tokens`: the proxy's GEMM tokens in a pass of several
  // requests (ForwardWork::gemm_tokens). `chunk`: with the proxy, the tokens of the request's
  // first serving chunk, which its forward computes here (a later chunk's run in ChunkForward).
  void Request(size_t ri, double spin = -1, int64_t gemm_tokens = -1, TokenRange chunk = {}) {
    spin_ = spin >= 0 ? spin : plan_.layer_busy_s[ri];
    gemm_tokens_ = gemm_tokens;
    chunk_ = chunk;
    RequestRun q;
    q.ri = ri;
    q.p = &plan_.requests[ri];
    q.pre = std::to_string(q.p->request) + "/";
    // A real engine runs a batch shape it has run before (CUDA graphs, tuned GEMMs); the proxy
    // meets each request's shapes for the first time, and cuBLAS's host-side choice for a new
    // shape (milliseconds per GEMM) would be timed in the request's first layer.
    // A merged prefix (partial_merge) reads no dense buffer and is not warmed: its shapes
    // depend on the rank's shard, which BeginModelMerge sets up after the barrier.
    if (plan_.forward == ForwardMode::kModel && opts_.forward_warm && !MergesPrefix(*q.p) &&
        !warmed_ahead_) {
      const ForwardWork w = ForwardWorkOf(*q.p, gemm_tokens_, chunk_);
      WarmForward(w);
    }
    if (opts_.evict_caches) {
      b_.EvictCaches(Stream::kCompute);
      const int evicted = b_.Mark(Stream::kCompute);
      for (const Stream s : {Stream::kComm, Stream::kH2D, Stream::kD2H}) b_.Wait(s, evicted);
    }
    b_.Barrier();  // ranks start each request together: a collective's time is not a peer's lag
    q.host_t0 = Clock::now();
    pause_ = {-1, -1};
    if (opts_.gate) b_.HoldStreams(opts_.gate_timeout_s);
    q.start_mark = b_.Mark(Stream::kCompute);
    q.first_op = ops_.size();
    Evict(q);
    const int wb_done = WriteBack(q);
    // The load-backs run after the write-backs (which may free the host slots they fill) and
    // after the group agreed on the hit (cache.cp_hit_agreement min).
    b_.Wait(Stream::kH2D, wb_done);
    if (!q.p->hit_reports.empty()) AgreeOnHit(q);
    PlanLoadBacks(q);
    // Gather set-up. A p2p gather reads peers' pools, which no event orders: every rank loads
    // all layers first, then the ranks synchronise (so peers' pages are in place).
    // partial_merge gathers nothing: BeginGather checks the prefix and merges (PartialMerge).
    const GatherMethodImpl& method = GatherMethodOf(q.p->gather_method);
    const bool merges = q.p->prefix_pages > 0 && !method.Gathers();
    q.gathers = q.p->prefix_pages > 0 && !merges;
    q.p2p = q.gathers && method.ReadsPeers();
    if (q.p2p) q.all_loaded = LoadLayers(q, LayerRange{0, geo_.layers}, -1);
    // With the proxy the merge runs in the layers' attention on the device (BeginModelMerge);
    // else on the host, over values derived from the pages (PartialMerge).
    if (merges && plan_.forward == ForwardMode::kModel) {
      q.merge_op = BeginModelMerge(q);
      q.host_timed.push_back(q.merge_op);
    } else if (merges) {
      q.host_timed.push_back(BeginGather(ri, *q.p, q.pre));
    }
    if (q.gathers) {
      q.gop = BeginGather(ri, *q.p, q.pre);
      q.gather = &gathers_.back();
    }
    PlanCompute(q);
    PlanBackups(q);
    for (int64_t l = 0; l < geo_.layers; ++l) {
      RunLayer(q, l);
      if (l == 0 && opts_.gate && opts_.gate_first_layer) b_.OpenGate();
    }
    if (!BackupScheduleOf(q.p->backup_schedule).CopiesEachLayer())
      BackUp(q, LayerRange{0, geo_.layers}, -1);
    EnqueueChecks(q);
    Finish(q);
  }

  // What this rank's proxy computes for `p`: the prefix it attends over, its token positions (of
  // `chunk` only: a serving chunk's queries attend over the prefix and the request's tokens before
  // them, ForwardModelCuda::SetRequest), and `gemm_tokens` (ForwardWork::gemm_tokens).
  ForwardWork ForwardWorkOf(const RequestPlan& p, int64_t gemm_tokens, TokenRange chunk) const {
    ForwardWork w;
    w.prefix_pages = p.prefix_pages;
    w.new_tokens = p.computed_tokens;
    w.positions = RankTokenPositions(p, geo_.page_tokens, geo_.ranks, me_, chunk);
    w.gemm_tokens = gemm_tokens;
    return w;
  }

  // A prefix merged by partial attention (partial_merge) rather than gathered: the proxy reads no
  // dense buffer, and its shapes depend on the rank's shard (not warmed ahead).
  static bool MergesPrefix(const RequestPlan& p) {
    return p.prefix_pages > 0 && !GatherMethodOf(p.gather_method).Gathers();
  }

  // The synthetic forward pass: the pages it writes and its op.
  void PlanCompute(RequestRun& q) {
    const RequestPlan& p = *q.p;
    const std::string cid = q.pre + "compute";
    ApplyFaults(cid, nullptr);
    std::vector<PageWrite> writes;
    for (const NewPage& n : p.new_pages) {
      if (!MyLane(n.owner)) continue;
      SlotState& s = Dev(q.ri, cid, n.device_slot);
      if (s.used)
        PlanFail(q.ri, cid,
                 "writes device slot " + std::to_string(n.device_slot) + ", which is in use");
      s = SlotState{PageTag{n.extent, 0, n.pos}, true, true};
      writes.push_back(PageWrite{static_cast<int32_t>(n.device_slot), s.tag});
    }
    write_store_.push_back(std::move(writes));
    q.writes = &write_store_.back();
    const int64_t L = geo_.layers;
    q.cop = AddOp(cid, "compute", Stream::kCompute,
                  static_cast<int64_t>(q.writes->size()) * L * geo_.page_layer_bytes(),
                  static_cast<int64_t>(q.writes->size()));
    ops_[q.cop].extra = {{"new_tokens", p.computed_tokens},
                         {"prefix_tokens", p.prefix_pages * geo_.page_tokens},
                         {"layers", L}};
    if (plan_.forward == ForwardMode::kModel) {
      // Field by field: BeginModelMerge has set the merge's fields already.
      const ForwardWork w = ForwardWorkOf(p, gemm_tokens_, chunk_);
      q.forward.prefix_pages = w.prefix_pages;
      q.forward.new_tokens = w.new_tokens;
      q.forward.positions = w.positions;
      q.forward.gemm_tokens = w.gemm_tokens;
      ops_[q.cop].extra["forward"] = "model";
      if (w.gemm_tokens >= 0) ops_[q.cop].extra["pass_gemm_tokens"] = w.gemm_tokens;
      if (chunk_.end >= 0) ops_[q.cop].extra["chunk_tokens"] = chunk_.end - chunk_.begin;
      ops_[q.cop].extra["rank_tokens"] = q.forward.positions.size();
    } else {
      ops_[q.cop].extra["target_layer_s"] = spin_;
    }
  }

  // Layer l: load it (h2d), gather it (comm, after layer l-1's forward: the gather and the
  // forward pass take turns), forward it (compute), back it up (d2h, per-layer schedule).
  void RunLayer(RequestRun& q, int64_t l) {
    const int loaded = q.p2p ? q.all_loaded : LoadLayers(q, LayerRange{l, l + 1}, l);
    const int ready = q.gathers ? GatherOneLayer(q, l, loaded) : loaded;
    b_.Wait(Stream::kCompute, ready);
    // Set-up outside the timed span, as `bench sweep` times a forward layer: the proxy's request
    // (once per request) and the pattern's page list (uploaded once per request).
    if (plan_.forward == ForwardMode::kModel && l == 0) model_->PrepareForward(q.forward);
    b_.StageForwardWrites(Stream::kCompute, *q.writes);
    const int m0 = b_.Mark(Stream::kCompute);
    if (plan_.forward == ForwardMode::kModel) {
      model_->ModelForwardLayer(Stream::kCompute, l, *q.writes);
    } else {
      b_.ForwardLayer(Stream::kCompute, l, *q.writes, spin_);
    }
    q.last_mark = b_.Mark(Stream::kCompute);
    q.layer_marks.push_back(q.last_mark);
    spans_.push_back({q.cop, m0, q.last_mark, l});
    if (BackupScheduleOf(q.p->backup_schedule).CopiesEachLayer())
      BackUp(q, LayerRange{l, l + 1}, l);
  }

  // Checks after the timed work: one stream waits for every stream's last op, then compares
  // the loaded pages and (when the dense buffer holds every layer) the gathered layers.
  void EnqueueChecks(const RequestRun& q) {
    const int ends[] = {b_.Mark(Stream::kCompute), b_.Mark(Stream::kH2D), b_.Mark(Stream::kD2H)};
    for (int e : ends) b_.Wait(Stream::kComm, e);
    for (const PendingCheck& chk : load_checks_)
      verifies_.push_back(PendingVerify{
          b_.VerifyPages(Stream::kComm, chk.pool, {chk.dev, chk.n}, {chk.tags, chk.n}), chk.op_id,
          chk.what, chk.dev, chk.host, chk.tags});
    load_checks_.clear();
    if (q.gathers && DenseHoldsEveryLayer() &&
        GatherMethodOf(q.gather->method).Result() == GatherResult::kDense)
      for (int64_t l = 0; l < geo_.layers; ++l) {
        verifies_.push_back(PendingVerify{b_.VerifyDense(Stream::kComm, l), q.pre + "gather",
                                          "layer " + std::to_string(l)});
        dense_verify_prefix_.push_back(q.p);
      }
  }

  // Releases the streams, waits for them, resolves the request's times and checks, and forgets
  // its bookkeeping.
  void Finish(const RequestRun& q) {
    b_.OpenGate();
    RequestHostTime ht;
    ht.request = q.p->request;
    ht.round = round_;
    ht.enqueue_s = std::chrono::duration<double>(Clock::now() - q.host_t0).count();
    b_.Sync();
    if (q.p2p) b_.Barrier();  // nobody reuses a slot a peer may still be reading
    if (pause_.first >= 0) {
      ht.pause_begin_s = b_.MarkSeconds(pause_.first);
      ht.pause_end_s = b_.MarkSeconds(pause_.second);
    }
    host_times_.push_back(ht);
    if (q.forward.merge) CheckModelMerge(q);
    if (q.agree_handle >= 0) CheckHitAgreement(q);
    Resolve(q.start_mark, q.host_timed, q.first_op, q.p->request);
    CheckVerifications(*q.p);
    b_.ReleaseMarks();
    index_store_.clear();
    tag_store_.clear();
    write_store_.clear();
    gathers_.clear();
  }

  // Turns marks into times: each span's start and end; an op's seconds = the sum of its spans'
  // lengths, start/end = the first start and last end (gather phase spans, which lie inside the
  // op's gather layer spans, do not count). A host-timed op starts with the request and is one
  // span of its own seconds. With keep_spans the spans are kept as resolved here, so the span
  // trace holds exactly the numbers the ops were made of.
  void Resolve(int start_mark, const std::vector<size_t>& host_timed, size_t first_op,
               int64_t request) {
    const double req_start = b_.MarkSeconds(start_mark);
    std::vector<MeasuredSpan> spans;  // op: index into ops_ until they move to done_
    // A mark is placed from the request's start (one mark, one place, so spans sharing a mark
    // meet exactly); a span's length is measured between its own two marks, so it keeps the
    // clock's resolution however far the request lies from the epoch.
    auto place = [&](int mark) { return req_start + b_.MarkInterval(start_mark, mark); };
    std::vector<double> lengths;
    for (PendingSpan& s : spans_) {
      spans.push_back(
          MeasuredSpan{s.op, place(s.begin), place(s.end), s.layer, request, std::move(s.phase)});
      lengths.push_back(b_.MarkInterval(s.begin, s.end));
    }
    std::vector<bool> seen(ops_.size(), false);
    for (size_t k = 0; k < spans.size(); ++k) {
      const MeasuredSpan& s = spans[k];
      if (!s.phase.empty()) continue;
      MeasuredOp& o = ops_[s.op];
      if (!seen[s.op]) {
        o.start_s = s.start_s;
        o.end_s = s.end_s;
        o.seconds = 0;
        seen[s.op] = true;
      }
      o.start_s = std::min(o.start_s, s.start_s);
      o.end_s = std::max(o.end_s, s.end_s);
      o.seconds += lengths[k];
    }
    for (size_t op : host_timed) {
      ops_[op].start_s = req_start;
      ops_[op].end_s = req_start + ops_[op].seconds;
      spans.push_back(MeasuredSpan{op, ops_[op].start_s, ops_[op].end_s, -1, request});
    }
    spans_.clear();
    if (opts_.keep_spans && round_ == 0)
      for (MeasuredSpan& s : spans) {
        s.op = done_.size() + (s.op - first_op);
        done_spans_.push_back(s);
      }
    for (size_t i = first_op; i < ops_.size(); ++i) done_.push_back(ops_[i]);
    ops_.clear();
  }

  void CheckVerifications(const RequestPlan& p) {
    std::ostringstream err;
    int failures = 0;
    size_t dense_i = 0;
    for (const PendingVerify& v : verifies_) {
      const VerifyResult r = b_.VerifyResultOf(v.handle);
      verified_bytes_ += r.checked_bytes;
      const bool dense = v.dev == nullptr;
      const RequestPlan* dp = dense ? dense_verify_prefix_[dense_i++] : nullptr;
      if (r.bad_bytes == 0) continue;
      if (failures++ < 4) {
        err << (failures > 1 ? "; " : "") << "op " << v.op_id << ", rank " << me_ << ", " << v.what
            << ": ";
        if (dense) {
          const int64_t q = r.first_bad_item;
          const PrefixPage& pp = dp->prefix[static_cast<size_t>(q)];
          err << "logical page " << q << " (owner rank " << pp.owner << ", device slot "
              << pp.device_slot << ")";
        } else {
          const size_t i = static_cast<size_t>(r.first_bad_item);
          err << "loaded page " << i << " (device slot " << v.dev[i] << ", host slot " << v.host[i]
              << ", logical page " << v.tags[i].page << " of extent " << v.tags[i].extent << ")";
        }
        err << " differs from its pattern (" << r.bad_bytes << " wrong bytes of " << r.checked_bytes
            << " checked)";
      }
    }
    verifies_.clear();
    dense_verify_prefix_.clear();
    if (failures > 0)
      throw ExecError("verification failed in request " + std::to_string(p.request) + " (" +
                      std::to_string(failures) + " check(s)): " + err.str());
  }
};

// The run: its timed rounds, each of the requests one at a time or of a serving plan's passes.
class RankServe : public RankRun {
 public:
  using RankRun::RankRun;

  RankResult Run() {
    WarmUp();
    b_.Barrier();
    b_.StartEpoch();
    host_epoch_ = Clock::now();
    // The epoch on the wall clock (StartEpoch waited for it), to line the run's marks up with
    // logs that carry wall time, e.g. `nvidia-smi` samples of clocks and power.
    epoch_unix_s_ =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    for (round_ = 0; round_ < std::max(opts_.rounds, 1); ++round_) {
      if (round_ > 0) {  // the plan starts from an empty cache: so does each round
        dev_.assign(dev_.size(), SlotState{});
        host_.assign(host_.size(), SlotState{});
      }
      if (plan_.passes.empty()) {
        for (size_t i = 0; i < plan_.requests.size(); ++i) Request(i);
      } else {
        RunPasses();
      }
      if (opts_.round_done && me_ == 0) opts_.round_done(round_ + 1, std::max(opts_.rounds, 1));
    }
    RankResult r;
    r.rank = me_;
    r.ops = std::move(done_);
    r.spans = std::move(done_spans_);
    r.requests = std::move(host_times_);
    r.gates_expired = b_.GatesExpired();
    r.gates_opened_early = b_.GatesOpenedEarly();
    r.verified_bytes = verified_bytes_;
    r.context = b_.Context();
    r.context["epoch_unix_s"] = epoch_unix_s_;
    return r;
  }

 private:
  double epoch_unix_s_ = 0;
  // ---- serving plans: the replica's passes in turn, arrivals open loop (docs/executor.md,
  // "Serving passes"). A request's ops run in the pass of its first chunk, which spins that
  // chunk's share of the pass; a later chunk spins its share alone (ChunkSpin), or with the proxy
  // runs its queries' forward (ChunkForward). The pass's layer base is spun once, by its first
  // part.
  struct PassTimes {
    size_t ri = 0;
    double arrival_s = 0, admit_s = 0, first_token_s = -1;  // host seconds from the epoch
  };
  ForwardWork chunk_work_;  // ChunkForward's (the proxy keeps a pointer to it)

  void RunPasses() {
    std::map<int64_t, size_t> ri_of;
    std::vector<int64_t> arrival;  // serving mode's clock (trace.rate_scale applied)
    for (size_t i = 0; i < plan_.requests.size(); ++i) {
      ri_of[plan_.requests[i].request] = i;
      arrival.push_back(ServedArrivalNs(plan_.requests[i].arrival_ns, plan_.header.rate_scale));
    }
    const int64_t origin = *std::min_element(arrival.begin(), arrival.end());
    std::vector<int> chunks_left(plan_.requests.size(), 0);
    for (const PlanPass& p : plan_.passes)
      for (const PlanPassChunk& c : p.chunks) ++chunks_left[ri_of.at(c.request)];
    std::vector<bool> started(plan_.requests.size(), false);
    std::vector<PassTimes> times(plan_.requests.size());  // per request, in admission order
    const std::vector<std::vector<TokenRange>> ranges = ChunkRanges(ri_of);
    std::vector<int64_t> pass_gemm;  // per pass: its first part's GEMM tokens (PassGemmTokens)
    for (size_t k = 0; k < plan_.passes.size(); ++k)
      pass_gemm.push_back(PassGemmTokens(plan_.passes[k], ranges[k], ri_of));
    WarmPassShapes(ri_of, ranges, pass_gemm);
    const double t0 = HostSeconds();  // the round's arrival clock starts with its first pass
    for (const PlanPass& pass : plan_.passes) {
      std::vector<size_t> admitted;
      int64_t due_ns = 0;
      for (const PlanPassChunk& c : pass.chunks)
        if (const size_t ri = ri_of.at(c.request); !started[ri]) {
          admitted.push_back(ri);
          due_ns = std::max(due_ns, arrival[ri] - origin);
        }
      WaitUntilHost(t0 + static_cast<double>(due_ns) * 1e-9);
      const double host_start = HostSeconds();
      // The pass's first part spins the layer base and what the profile's batched-pass GEMMs add
      // (pass.layer_spin_s beyond the base formula, HardwareProfile::PassBatchLayerS).
      double device_s = 0, base = plan_.spin_layer_base_s + pass.layer_spin_s -
                                  PassLayerS(pass.chunks, plan_.spin_layer_base_s);
      const size_t k = static_cast<size_t>(&pass - plan_.passes.data());
      int64_t gemm = pass_gemm[k];
      std::vector<size_t> finished;
      for (size_t j = 0; j < pass.chunks.size(); ++j) {
        const PlanPassChunk& c = pass.chunks[j];
        const size_t ri = ri_of.at(c.request);
        const double spin = std::max(0.0, c.layer_spin_s - plan_.spin_layer_base_s + base);
        base = 0;
        const size_t before = done_.size();
        // With the proxy, the chunk's forward; in a pass of several chunks the first part runs
        // the pass's GEMMs, the others their attention alone.
        if (!started[ri]) {
          started[ri] = true;
          Request(ri, spin, gemm, ranges[k][j]);
        } else if (plan_.forward == ForwardMode::kModel) {
          ChunkForward(ri, pass.index, ranges[k][j], gemm);
        } else {
          ChunkSpin(ri, pass.index, spin);
        }
        if (gemm >= 0) gemm = 0;
        device_s += DeviceSpan(before);
        if (--chunks_left[ri] == 0) finished.push_back(ri);
      }
      const double host_end = HostSeconds();
      RecordPass(pass, device_s, host_start, host_end);
      for (size_t ri : admitted)
        times[ri] = {ri, t0 + static_cast<double>(arrival[ri] - origin) * 1e-9, host_start, -1};
      for (size_t ri : finished) times[ri].first_token_s = host_end;
    }
    for (const PassTimes& t : times) RecordFirstToken(t);
  }

  // --forward model with --forward-warm on: every chunk's shapes, as its pass runs them (the
  // first of a pass of several with the pass's GEMM tokens), once, untimed, before the round's
  // arrival clock starts: warming each request inside its pass would delay the passes after it
  // on the host clock, which the times to first token are measured on.
  void WarmPassShapes(const std::map<int64_t, size_t>& ri_of,
                      const std::vector<std::vector<TokenRange>>& ranges,
                      const std::vector<int64_t>& pass_gemm) {
    if (plan_.forward != ForwardMode::kModel || !opts_.forward_warm || warmed_ahead_) return;
    for (size_t k = 0; k < plan_.passes.size(); ++k) {
      int64_t gemm = pass_gemm[k];
      for (size_t j = 0; j < plan_.passes[k].chunks.size(); ++j) {
        const RequestPlan& p = plan_.requests[ri_of.at(plan_.passes[k].chunks[j].request)];
        if (!MergesPrefix(p)) WarmForward(ForwardWorkOf(p, gemm, ranges[k][j]));
        if (gemm >= 0) gemm = 0;
      }
    }
    warmed_ahead_ = true;
  }

  // Per pass, per chunk: the chunk's tokens among its request's computed tokens (the plan's
  // chunks of a request follow one another and add up to its computed tokens, PlanFile's
  // reader checks); a request in one chunk computes them all (TokenRange's end -1).
  std::vector<std::vector<TokenRange>> ChunkRanges(const std::map<int64_t, size_t>& ri_of) const {
    std::vector<int64_t> done(plan_.requests.size(), 0);
    std::vector<std::vector<TokenRange>> out;
    for (const PlanPass& pass : plan_.passes) {
      std::vector<TokenRange>& r = out.emplace_back();
      for (const PlanPassChunk& c : pass.chunks) {
        const size_t ri = ri_of.at(c.request);
        const bool whole = done[ri] == 0 && c.tokens == plan_.requests[ri].computed_tokens;
        r.push_back(whole ? TokenRange{} : TokenRange{done[ri], done[ri] + c.tokens});
        done[ri] += c.tokens;
      }
    }
    return out;
  }

  // The proxy's GEMM tokens of a pass's first part (ForwardWork::gemm_tokens): with the proxy
  // and several chunks in the pass, this rank's tokens of all of them; else -1.
  int64_t PassGemmTokens(const PlanPass& pass, const std::vector<TokenRange>& ranges,
                         const std::map<int64_t, size_t>& ri_of) const {
    if (plan_.forward != ForwardMode::kModel || pass.chunks.size() < 2) return -1;
    int64_t tokens = 0;
    for (size_t j = 0; j < pass.chunks.size(); ++j)
      tokens +=
          static_cast<int64_t>(RankTokenPositions(plan_.requests[ri_of.at(pass.chunks[j].request)],
                                                  geo_.page_tokens, geo_.ranks, me_, ranges[j])
                                   .size());
    return tokens;
  }

  double HostSeconds() const {
    return std::chrono::duration<double>(Clock::now() - host_epoch_).count();
  }
  // Sleeps until `s` host seconds from the epoch (at once when past).
  void WaitUntilHost(double s) const {
    const double left = s - HostSeconds();
    if (left > 0) std::this_thread::sleep_for(std::chrono::duration<double>(left));
  }
  // The device time of the ops done_ gained from `first` on: their last end less first start.
  double DeviceSpan(size_t first) const {
    if (first >= done_.size()) return 0;
    double a = done_[first].start_s, b = done_[first].end_s;
    for (size_t i = first; i < done_.size(); ++i) {
      a = std::min(a, done_[i].start_s);
      b = std::max(b, done_[i].end_s);
    }
    return b - a;
  }

  // A later chunk of a request whose ops ran with its first: its share of the pass's compute,
  // every layer, as op "<request>/chunk/p<pass>".
  void ChunkSpin(size_t ri, int64_t pass, double spin) {
    LaterChunk(
        ri, pass, {{"target_layer_s", spin}, {"layers", geo_.layers}}, [] {},
        [&](int64_t l) { b_.ForwardLayer(Stream::kCompute, l, {}, spin); });
  }

  // With the proxy, a later chunk of a request whose ops ran with its first: the proxy's layers
  // over the chunk's queries (`gemm`: ForwardWork::gemm_tokens), as op "<request>/chunk/p<pass>".
  // Their attention reads the request's prefix rows where the dense buffer holds them now (the
  // latest gather's bytes: the same reads; docs/executor.md, "Serving passes").
  void ChunkForward(size_t ri, int64_t pass, TokenRange chunk, int64_t gemm) {
    const RequestPlan& p = plan_.requests[ri];
    chunk_work_ = ForwardWorkOf(p, gemm, chunk);
    decltype(MeasuredOp::extra) extra = {
        {"forward", "model"},
        {"new_tokens", chunk.end - chunk.begin},
        {"prefix_tokens", p.prefix_pages * geo_.page_tokens + chunk.begin},
        {"rank_tokens", chunk_work_.positions.size()},
        {"layers", geo_.layers}};
    if (gemm >= 0) extra["pass_gemm_tokens"] = gemm;
    LaterChunk(
        ri, pass, std::move(extra), [&] { model_->PrepareForward(chunk_work_); },
        [&](int64_t l) { model_->ModelForwardLayer(Stream::kCompute, l, {}); });
  }

  // The op "<request>/chunk/p<pass>" of a later chunk, with `extra`: after the ranks' barrier,
  // `prepare()` then `layer(l)` for every layer on the compute stream, each layer a timed span.
  template <class Prepare, class Layer>
  void LaterChunk(size_t ri, int64_t pass, decltype(MeasuredOp::extra) extra, Prepare prepare,
                  Layer layer) {
    const RequestPlan& p = plan_.requests[ri];
    b_.Barrier();
    const int start = b_.Mark(Stream::kCompute);
    const size_t first = ops_.size();
    const size_t op = AddOp(std::to_string(p.request) + "/chunk/p" + std::to_string(pass), "chunk",
                            Stream::kCompute, 0, 0);
    ops_[op].extra = std::move(extra);
    prepare();
    for (int64_t l = 0; l < geo_.layers; ++l) {
      const int m0 = b_.Mark(Stream::kCompute);
      layer(l);
      spans_.push_back({op, m0, b_.Mark(Stream::kCompute), l});
    }
    b_.Sync();
    Resolve(start, {}, first, p.request);
    b_.ReleaseMarks();
  }

  // The pass as one measured record "pass/<index>": seconds = its parts' device time (the host's
  // enqueueing between them left out), start and end on the host clock.
  void RecordPass(const PlanPass& pass, double device_s, double host_start, double host_end) {
    MeasuredOp o;
    o.id = "pass/" + std::to_string(pass.index);
    o.kind = "pass";
    o.rank = me_;
    o.seconds = device_s;
    o.start_s = host_start;
    o.end_s = host_end;
    o.stream = "host";
    o.round = round_;
    int64_t tokens = 0;
    for (const PlanPassChunk& c : pass.chunks) tokens += c.tokens;
    o.extra = {{"pass", pass.index},
               {"chunks", pass.chunks.size()},
               {"tokens", tokens},
               {"host_s", host_end - host_start},
               {"target_layer_s", pass.layer_spin_s}};
    done_.push_back(std::move(o));
  }

  // A request's time to first token: "<request>/ttft", seconds = the end of the pass of its last
  // chunk less its arrival, on the host clock; queue_s = its pass's start less its arrival.
  void RecordFirstToken(const PassTimes& t) {
    MeasuredOp o;
    o.id = std::to_string(plan_.requests[t.ri].request) + "/ttft";
    o.kind = "ttft";
    o.rank = me_;
    o.seconds = t.first_token_s - t.arrival_s;
    o.start_s = t.arrival_s;
    o.end_s = t.first_token_s;
    o.stream = "host";
    o.round = round_;
    o.extra = {{"queue_s", std::max(0.0, t.admit_s - t.arrival_s)}};
    done_.push_back(std::move(o));
  }
};

}  // namespace

RankResult ExecuteRank(const ExecPlan& plan, RankBackend& backend, const ExecOptions& opts) {
  KV_CHECK(backend.ranks() == plan.geo.ranks,
           "backend has " << backend.ranks() << " ranks, plan " << plan.geo.ranks);
  RankServe run(plan, backend, opts);
  return run.Run();
}

}  // namespace kvlanes::exec

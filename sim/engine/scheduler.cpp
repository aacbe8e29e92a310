#include "sim/engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#include "base/huge_pages.h"
#include "io/input_error.h"
#include "sim/check.h"

namespace kvlanes {

double CostModelForward::PassBaseS() const {
  return m_.hw().layer_base_s * static_cast<double>(m_.layers());
}

double CostModelForward::ChunkS(int64_t new_tokens, int64_t context_tokens) const {
  return (m_.ComputeLayerS(new_tokens, context_tokens) - m_.hw().layer_base_s) *
         static_cast<double>(m_.layers());
}

double CostModelForward::PassBatchS(const std::vector<int64_t>& chunk_tokens) const {
  return m_.hw().PassBatchLayerS(chunk_tokens, static_cast<double>(m_.ranks())) *
         static_cast<double>(m_.layers());
}

double CostModelForward::SustainedRatio(const std::vector<PricedChunk>& chunks) const {
  if (!m_.hw().HasSustained()) return 1;
  double fresh = 0, sustained = 0;
  for (const PricedChunk& c : chunks) {
    fresh += c.chunk_s;
    sustained += c.chunk_s * m_.hw().SustainedRatio(static_cast<double>(c.tokens),
                                                    static_cast<double>(c.context),
                                                    static_cast<double>(m_.ranks()));
  }
  return fresh > 0 ? sustained / fresh : 1;
}

double CostModelForward::SustainedGapS() const {
  return m_.hw().HasSustained() ? m_.hw().sustained_gap_s : -1;
}

RequestExtra CostModelForward::RequestExtraS(const RequestPlan& plan) const {
  const RequestCost c = m_.Request(plan, false);
  RequestExtra e;
  e.total_s = std::max(0.0, c.service_s - c.compute_s);
  e.gather_s = c.gather_s;
  e.load_back_stall_s = c.load_back_exposed_s;
  e.backup_exposed_s = c.backup.beyond_forward_s;
  e.write_back_s = c.write_back_s;
  e.hit_agreement_s = c.hit_agreement_s;
  e.hit_saved_s = m_.HitSavedS(plan, c);
  return e;
}

namespace {

constexpr int kRelease = 0;  // at one time: locks go first, so a pass formed then sees them gone
constexpr int kPassEnd = 1;
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

// SGLang's scheduler computes the longest-prefix order only for short queues and falls back
// to first come first served above 128 waiting requests (its cost grows with the queue); so do
// we, which also bounds the replay's cost.
constexpr size_t kLpmMaxQueue = 128;

int64_t ScaledNs(int64_t ns, double scale) { return ServedArrivalNs(ns, scale); }

// The longest one pass or one decode hold may take (116 days): beyond it the inputs (a profile's
// compute terms, a decode rate) describe no machine, and the nanosecond clock could overflow.
constexpr double kMaxStepS = 1e7;

int64_t StepNs(double s, const std::string& file, const char* field, const char* what) {
  if (!(s >= 0 && s <= kMaxStepS))
    throw InputError(file, 0, field,
                     std::string(what) + " of " + std::to_string(s) + " s is beyond " +
                         std::to_string(static_cast<int64_t>(kMaxStepS)) +
                         " s: the inputs describe no real machine");
  return std::llround(s * 1e9);
}

// now + step on the replay's clock; refuses a clock past 2^63 ns (292 years).
int64_t ClockAdd(int64_t now, int64_t step, const char* field) {
  int64_t t = 0;
  if (__builtin_add_overflow(now, step, &t))
    throw InputError("", 0, field, "the replay's clock would pass 2^63 ns (292 years)");
  return t;
}

}  // namespace

// An admitted request whose prefill has not finished.
struct ServingReplay::Running {
  size_t request = 0;
  Locks locks;            // what its admission holds until its release
  int64_t remaining = 0;  // tokens still to compute
  int64_t context = 0;    // tokens before its next chunk
  RequestExtra extra;     // RequestExtraS, charged with its first chunk
  bool started = false;
};

struct ServingReplay::Replica {
  CachePolicy* policy = nullptr;
  std::unique_ptr<ReplayEngine> engine;
  std::deque<size_t> waiting;                    // routed here, not admitted; arrival order
  std::vector<Running> running;                  // admission order
  std::vector<std::pair<size_t, int64_t>> pass;  // (request, tokens) of the pass under way
  bool busy = false;
  int64_t last_end_ns = -1;  // when its previous pass ended (-1: none yet)
  int64_t load_tokens = 0;   // waiting inputs + running remainders
  int64_t in_flight = 0;     // admitted, not released
  ReplicaStats stats;
};

ServingReplay::ServingReplay(const ReplayConfig& cfg, std::vector<CachePolicy*> policies,
                             int64_t block_tokens, const ForwardCost& cost, EngineOptions opts)
    : cfg_(cfg), cost_(cost), router_(MakeRouter(cfg.serving)) {
  KV_CHECK(static_cast<int64_t>(policies.size()) == cfg.serving.replicas,
           policies.size() << " policies for " << cfg.serving.replicas << " replicas");
  for (CachePolicy* p : policies) {
    auto r = std::make_unique<Replica>();
    r->policy = p;
    r->engine = std::make_unique<ReplayEngine>(cfg, *p, block_tokens, opts);
    replicas_.push_back(std::move(r));
  }
}

ServingReplay::~ServingReplay() = default;

const ReplayEngine& ServingReplay::engine(size_t r) const { return *replicas_[r]->engine; }

void ServingReplay::Push(int64_t t, int kind, size_t replica, size_t request, Locks locks) {
  heap_.push_back(Event{t, seq_++, request, static_cast<uint32_t>(replica), kind, locks});
  std::push_heap(heap_.begin(), heap_.end(), [](const Event& a, const Event& b) {
    return std::tie(a.t, a.kind, a.seq) > std::tie(b.t, b.kind, b.seq);
  });
}

const ServingResult& ServingReplay::Run(
    const Trace& trace, const std::function<void(const RequestPlan&, int, size_t)>& on_admit,
    const std::function<void(size_t, size_t)>& progress) {
  trace_ = &trace;
  on_admit_ = on_admit;
  const size_t n = trace.requests.size();
  result_ = ServingResult{};
  result_.replicas.assign(replicas_.size(), ReplicaStats{});
  heap_.clear();
  admitted_ = 0;
  scale_ = cfg_.trace.rate_scale;
  // The records are made as their requests are admitted (Record), not all first: a record is
  // then written while it is in cache, where a pass over all of them first (conv x16: 27 MiB)
  // would take every one from memory twice. The storage is reserved (untouched) up front.
  result_.requests.reserve(n);
  // Huge pages where the kernel allows them: a fault per 2 MiB instead of per 4 KiB (conv x16:
  // 27 MiB of records, 21,000 faults of the replay -> 15,400).
  reader::AdviseHugePages(result_.requests.data(), n * sizeof(ServedRequest));
  if (n > 0) {
    result_.first_arrival_ns = ScaledNs(trace.requests.front().arrival_ns, scale_);
    result_.last_arrival_ns = ScaledNs(trace.requests.back().arrival_ns, scale_);
  }
  const auto later = [](const Event& a, const Event& b) {
    return std::tie(a.t, a.kind, a.seq) > std::tie(b.t, b.kind, b.seq);
  };
  const size_t step = std::max<size_t>(1, n / 100);
  size_t next = 0, reported = 0;
  std::vector<char> dirty(replicas_.size(), 0);
  int64_t next_ns = n > 0 ? result_.first_arrival_ns : kUnlimited;  // arrival of `next`
  while (next < n || !heap_.empty()) {
    int64_t now = next_ns;
    if (!heap_.empty()) now = std::min(now, heap_.front().t);
    // Every event of this instant first, then the arrivals, then the idle replicas schedule:
    // requests arriving together can share a pass.
    while (!heap_.empty() && heap_.front().t == now) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      const Event e = heap_.back();
      heap_.pop_back();
      if (e.kind == kRelease) {
        ReleaseRequest(e.replica, e.request, e.locks, now);
      } else {
        EndPass(e.replica, now);
      }
      dirty[e.replica] = 1;
    }
    while (next < n && next_ns == now) {
      dirty[Arrive(next)] = 1;
      ++next;
      next_ns = next < n ? ScaledNs(trace.requests[next].arrival_ns, scale_) : kUnlimited;
    }
    for (size_t r = 0; r < replicas_.size(); ++r) {
      if (!dirty[r]) continue;
      dirty[r] = 0;
      TrySchedule(r, now);
    }
    result_.end_ns = now;
    if (progress && admitted_ / step != reported) {
      reported = admitted_ / step;
      progress(admitted_, n);
    }
  }
  if (n > 0) Record(n - 1);
  for (size_t r = 0; r < replicas_.size(); ++r) {
    const Replica& rep = *replicas_[r];
    KV_CHECK(rep.waiting.empty() && rep.running.empty() && rep.in_flight == 0 && !rep.busy,
             "replica " << r << " left work after the last event");
    result_.replicas[r] = rep.stats;
  }
  if (progress) progress(n, n);
  return result_;
}

ServedRequest& ServingReplay::Record(size_t i) {
  std::vector<ServedRequest>& recs = result_.requests;
  while (recs.size() <= i) {
    const Request& req = trace_->requests[recs.size()];
    ServedRequest& s = recs.emplace_back();
    s.arrival_ns = ScaledNs(req.arrival_ns, scale_);
    s.input_tokens = req.input_tokens;
  }
  return recs[i];
}

size_t ServingReplay::Arrive(size_t i) {
  std::vector<ReplicaView>& views = views_;
  views.clear();
  for (const auto& r : replicas_) views.push_back(ReplicaView{r->engine.get(), r->load_tokens});
  const Request& req = trace_->requests[i];
  const size_t r = replicas_.size() == 1 ? 0 : router_->Route(req, views);
  KV_CHECK(r < replicas_.size(), "router '" << router_->Name() << "' chose replica " << r);
  Replica& rep = *replicas_[r];
  rep.waiting.push_back(i);
  rep.load_tokens += req.input_tokens;
  rep.stats.peak_queue = std::max<int64_t>(rep.stats.peak_queue, rep.waiting.size());
  return r;
}

namespace {

// Whether the schedule reorders the waiting requests now: lpm, for queues of 2 to kLpmMaxQueue.
bool Reorders(const std::deque<size_t>& waiting, const std::string& schedule) {
  return schedule == "lpm" && waiting.size() > 1 && waiting.size() <= kLpmMaxQueue;
}

// The waiting requests in the order lpm takes them: the longest cached prefix first, ties by
// arrival. (Otherwise the order is the queue's own, arrival order, read in place.)
std::vector<size_t> LpmOrder(const std::deque<size_t>& waiting, const ReplayEngine& engine,
                             const Trace& trace) {
  std::vector<std::pair<int64_t, size_t>> keyed;
  keyed.reserve(waiting.size());
  for (size_t k = 0; k < waiting.size(); ++k) {
    const MatchPeek m = engine.Peek(trace.requests[waiting[k]]);
    keyed.emplace_back(-(m.device_pages + m.host_pages), k);
  }
  std::stable_sort(keyed.begin(), keyed.end());  // longest first; ties by arrival
  std::vector<size_t> sorted;
  sorted.reserve(keyed.size());
  for (const auto& [neg, k] : keyed) sorted.push_back(waiting[k]);
  return sorted;
}

}  // namespace

void ServingReplay::TrySchedule(size_t r, int64_t now) {
  Replica& rep = *replicas_[r];
  if (rep.busy) return;
  const ServingConfig& sc = cfg_.serving;
  const bool batching = sc.max_batch_tokens > 0;
  const int64_t budget = batching ? sc.max_batch_tokens : kUnlimited;
  const int64_t chunk = sc.chunk_tokens > 0 ? sc.chunk_tokens : kUnlimited;
  const int64_t P = cfg_.cache.page_tokens;
  int64_t left = budget;
  rep.pass.clear();
  // A request partly prefilled goes on first (SGLang schedules its chunked request before new
  // ones), so a chunked prefill is never starved.
  for (const Running& run : rep.running) {
    if (left <= 0) break;
    const int64_t take = std::min({run.remaining, chunk, left});
    rep.pass.emplace_back(run.request, take);
    left -= take;
  }
  // Then new requests, in the schedule's order: lpm's, or the queue's own (read in place, so a
  // long queue costs nothing per pass; those taken are then its first ones).
  const bool reorder = Reorders(rep.waiting, sc.schedule);
  const std::vector<size_t> lpm =
      reorder ? LpmOrder(rep.waiting, *rep.engine, *trace_) : std::vector<size_t>();
  std::vector<size_t>& taken = taken_;
  taken.clear();
  const size_t waiting = rep.waiting.size();
  for (size_t k = 0; k < waiting; ++k) {
    const size_t i = reorder ? lpm[k] : rep.waiting[k];
    if (left <= 0) break;
    if (!batching && !rep.pass.empty()) break;
    const Request& req = trace_->requests[i];
    if (batching && sc.chunk_tokens == 0 && !rep.pass.empty()) {
      // Without chunking a request goes whole: it must fit what is left of the budget (its
      // tokens less the cached prefix it would match now), unless it is alone in the pass.
      const MatchPeek m = rep.engine->Peek(req);
      if (req.input_tokens - (m.device_pages + m.host_pages) * P > left) break;
    }
    // A request that cannot find its pages while others hold theirs waits for them, as SGLang's
    // scheduler stops adding requests when its allocator runs out; with nothing in flight it
    // goes on and, if its pages still cannot be found, is computed uncached (docs/serving.md).
    if (rep.in_flight > 0 && !rep.engine->CouldAllocate(req)) {
      ServedRequest& s = Record(i);
      if (!s.waited_for_pages) ++rep.stats.page_waits;
      s.waited_for_pages = true;
      break;
    }
    const bool record = on_admit_ || cost_.NeedsPlan();
    const Admission a = rep.engine->Admit(req, record ? &plan_ : nullptr);
    ++admitted_;
    ++rep.in_flight;
    ServedRequest& s = Record(i);
    s.replica = static_cast<int32_t>(r);
    s.admit_ns = now;
    s.hit_tokens = a.hit_tokens;
    s.computed_tokens = a.computed_tokens;
    s.cached = a.cached;
    if (record) {
      plan_.replica = static_cast<int64_t>(r);
      plan_.trace_request = static_cast<int64_t>(i);
    }
    if (on_admit_) on_admit_(plan_, static_cast<int>(r), i);
    Running run{i,
                {a.match_node, a.held_node},
                a.computed_tokens,
                a.prefix_tokens,
                cost_.NeedsPlan() ? cost_.RequestExtraS(plan_) : RequestExtra{},
                false};
    rep.load_tokens += a.computed_tokens - req.input_tokens;
    const int64_t take =
        batching && sc.chunk_tokens > 0 ? std::min({run.remaining, chunk, left}) : run.remaining;
    rep.pass.emplace_back(i, take);
    left -= take;
    rep.running.push_back(run);
    taken.push_back(i);
  }
  if (reorder) {
    for (size_t i : taken) rep.waiting.erase(std::find(rep.waiting.begin(), rep.waiting.end(), i));
  } else {
    rep.waiting.erase(rep.waiting.begin(),
                      rep.waiting.begin() + static_cast<std::ptrdiff_t>(taken.size()));
  }
  if (!rep.pass.empty()) StartPass(r, now);
}

void ServingReplay::StartPass(size_t r, int64_t now) {
  Replica& rep = *replicas_[r];
  chunks_.clear();
  pass_tokens_.clear();
  priced_.clear();
  pass_runs_.clear();
  for (const auto& [req, take] : rep.pass) {
    const size_t i = req;  // a plain copy: KV_CHECK's lambda cannot capture a binding in clang 14
    Running& run = *std::find_if(rep.running.begin(), rep.running.end(),
                                 [i](const Running& x) { return x.request == i; });
    pass_runs_.push_back(&run);
    pass_tokens_.push_back(take);
    priced_.push_back({take, run.context, cost_.ChunkS(take, run.context)});
  }
  // Its compute at the sustained clock when it starts within the gap of the last pass's end.
  const double gap_s = cost_.SustainedGapS();
  const bool back_to_back = gap_s >= 0 && rep.last_end_ns >= 0 &&
                            static_cast<double>(now - rep.last_end_ns) * 1e-9 < gap_s;
  const double f = back_to_back ? cost_.SustainedRatio(priced_) : 1;
  const double base_s = f * cost_.PassBaseS();
  double pass_s = base_s;
  int64_t tokens = 0;
  const double batch_s = f * cost_.PassBatchS(pass_tokens_);  // 0 for one chunk
  pass_s += batch_s;
  for (size_t c = 0; c < rep.pass.size(); ++c) {
    const size_t i = rep.pass[c].first;
    const int64_t take = rep.pass[c].second;
    Running& run = *pass_runs_[c];
    if (on_pass_) chunks_.push_back(PassChunk{i, take, run.context});
    const double chunk_s = f * priced_[c].chunk_s;
    pass_s += chunk_s;
    ServedRequest& s = result_.requests[i];
    s.compute_s += chunk_s;
    s.pass_base_s += base_s + batch_s;
    if (!run.started) {
      pass_s += run.extra.total_s;
      s.extra = run.extra;
    }
    run.started = true;
    tokens += take;
  }
  const int64_t pass_ns =
      std::max<int64_t>(1, StepNs(pass_s, cfg_.hardware.profile, "compute",
                                  "a prefill pass priced by the profile's compute terms"));
  for (const auto& chunk : rep.pass)
    result_.requests[chunk.first].in_passes_ns =
        ClockAdd(result_.requests[chunk.first].in_passes_ns, pass_ns, "hardware.profile");
  rep.busy = true;
  rep.stats.busy_ns = ClockAdd(rep.stats.busy_ns, pass_ns, "hardware.profile");
  ++rep.stats.passes;
  rep.stats.pass_tokens += tokens;
  if (on_pass_) on_pass_(r, now, pass_ns, chunks_);
  Push(ClockAdd(now, pass_ns, "hardware.profile"), kPassEnd, r, 0, {kRootId, kRootId});
}

void ServingReplay::EndPass(size_t r, int64_t now) {
  Replica& rep = *replicas_[r];
  KV_CHECK(rep.busy, "pass end on idle replica " << r);
  rep.busy = false;
  rep.last_end_ns = now;
  std::vector<std::pair<size_t, Locks>>& done = done_;
  done.clear();
  for (const auto& [req, take] : rep.pass) {
    const size_t i = req;  // a plain copy: KV_CHECK's lambda cannot capture a binding in clang 14
    Running& run = *std::find_if(rep.running.begin(), rep.running.end(),
                                 [i](const Running& x) { return x.request == i; });
    run.context += take;
    run.remaining -= take;
    rep.load_tokens -= take;
    KV_CHECK(run.remaining >= 0, "request " << i << " computed past its input");
    if (run.remaining == 0) done.emplace_back(i, run.locks);
  }
  rep.pass.clear();
  std::erase_if(rep.running, [](const Running& x) { return x.remaining == 0; });
  const double rate = cfg_.serving.decode_tokens_per_s;
  for (const auto& [i, locks] : done) {
    result_.requests[i].first_token_ns = now;
    const int64_t out = trace_->requests[i].output_tokens;
    const int64_t hold_ns = rate > 0 && out > 0
                                ? StepNs(static_cast<double>(out) / rate, "",
                                         "serving.decode_tokens_per_s", "a decode hold")
                                : 0;
    if (hold_ns == 0) {
      ReleaseRequest(r, i, locks, now);
    } else {
      Push(ClockAdd(now, hold_ns, "serving.decode_tokens_per_s"), kRelease, r, i, locks);
    }
  }
}

void ServingReplay::ReleaseRequest(size_t r, size_t i, Locks locks, int64_t now) {
  Replica& rep = *replicas_[r];
  Admission a;
  a.match_node = locks[0];
  a.held_node = locks[1];
  rep.engine->Release(a);
  --rep.in_flight;
  result_.requests[i].release_ns = now;
}

}  // namespace kvlanes

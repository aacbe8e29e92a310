#include "sim/predict/predictor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "base/percentile.h"
#include "methods/backup_schedule.h"

namespace kvlanes {

Predictor::Predictor(const CostModel& model, TimelineWriter* timeline, bool layer_slices)
    : model_(model), timeline_(timeline), layer_slices_(layer_slices) {}

const RequestCost& Predictor::Add(const RequestPlan& p, bool schedule_detail) {
  last_ = model_.Request(p, schedule_detail || timeline_ != nullptr);
  const double arrival = static_cast<double>(p.arrival_ns) * 1e-9;
  if (first_arrival_s_ < 0) first_arrival_s_ = arrival;
  last_arrival_s_ = std::max(last_arrival_s_, arrival);
  const double start = std::max(arrival, free_at_s_);
  const double finish = start + last_.service_s;
  last_start_s_ = start;
  free_at_s_ = finish;
  last_.queue_s = start - arrival;
  last_.ttft_s = finish - arrival;
  queue_s_ += last_.queue_s;
  ttft_s_.push_back(last_.ttft_s);
  total_s_ += last_.service_s;
  compute_s_ += last_.compute_s;
  load_back_s_ += last_.load_back_exposed_s;
  load_back_copy_s_ += last_.load_back_copy_s;
  gather_s_ += last_.gather_s;
  backup_exposed_s_ += last_.backup.beyond_forward_s;
  backup_submit_s_ += last_.backup.submit_s;
  write_back_s_ += last_.write_back_s;
  last_.hit_saved_s = model_.HitSavedS(p, last_);
  hit_saved_s_ += last_.hit_saved_s;
  if (timeline_) AddEvents(p, last_, start);
  return last_;
}

nlohmann::ordered_json Predictor::Summary() const {
  nlohmann::ordered_json j;
  j["profile"] = model_.hw().name;
  j["profile_measured"] = model_.hw().measured;
  j["total_s"] = total_s_;
  j["makespan_s"] = ttft_s_.empty() ? 0.0 : free_at_s_ - first_arrival_s_;
  j["compute_s"] = compute_s_;
  j["load_back_s"] = load_back_s_;
  j["load_back_copy_s"] = load_back_copy_s_;
  j["gather_s"] = gather_s_;
  j["backup_exposed_s"] = backup_exposed_s_;
  j["backup_submit_s"] = backup_submit_s_;
  j["write_back_s"] = write_back_s_;
  j["queue_s"] = queue_s_;
  j["hit_saved_s"] = hit_saved_s_;
  j["ttft_mean_s"] = ttft_s_.empty() ? 0.0 : [&] {
    double s = 0;
    for (double t : ttft_s_) s += t;
    return s / static_cast<double>(ttft_s_.size());
  }();
  j["ttft_p50_s"] = ttft_s_.empty() ? 0.0 : Percentile(ttft_s_, 0.50);
  j["ttft_p99_s"] = ttft_s_.empty() ? 0.0 : Percentile(ttft_s_, 0.99);
  // One instance serves the requests in arrival order: busy longer than the trace lasts, its
  // queue grows and TTFT measures the backlog, not the engine (serving mode spreads the load over
  // replicas). offered_load: busy over the span from the first to the last arrival.
  const double span = std::max(0.0, last_arrival_s_ - first_arrival_s_);
  j["span_s"] = span;
  j["offered_load"] = span > 0 ? total_s_ / span : 0.0;
  if (span > 0 && total_s_ > span) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "overloaded: one instance is offered %.2fx its capacity (busy %.1f s over a "
                  "%.1f s trace span); TTFT measures the backlog (serving mode: replicas)",
                  total_s_ / span, total_s_, span);
    j["warning"] = buf;
  } else {
    j["warning"] = nullptr;
  }
  return j;
}

namespace {

// The op kinds the request spans cover, by stream and name.
enum ExtentKind : int { kLoadBack, kGather, kGatherIndex, kBackup, kComputeOps, kExtentKinds };

int ExtentKindOf(const SchedOp& o) {
  switch (o.stream) {
    case SchedStream::kH2D:
      return std::strcmp(o.name, "load_back") == 0 ? kLoadBack : -1;
    case SchedStream::kComm:
      if (std::strcmp(o.name, "gather") == 0) return kGather;
      return std::strcmp(o.name, "gather_index") == 0 ? kGatherIndex : -1;
    case SchedStream::kD2H:
      return std::strcmp(o.name, "backup") == 0 ? kBackup : -1;
    case SchedStream::kCompute:
      return std::strcmp(o.name, "compute") == 0 ? kComputeOps : -1;
  }
  return -1;
}

TimelineWriter::Track TrackOf(SchedStream s) {
  switch (s) {
    case SchedStream::kCompute:
      return TimelineWriter::Track::kCompute;
    case SchedStream::kComm:
      return TimelineWriter::Track::kCollective;
    case SchedStream::kH2D:
      return TimelineWriter::Track::kCopyH2D;
    case SchedStream::kD2H:
      break;
  }
  return TimelineWriter::Track::kCopyD2H;
}

}  // namespace

int Predictor::KindOf(const SchedOp& o) {
  for (const NameKind& n : name_kinds_)
    if (n.name == o.name && n.stream == o.stream) return n.kind;
  const int k = ExtentKindOf(o);
  if (name_kinds_.size() < 64) name_kinds_.push_back({o.name, o.stream, k});
  return k;
}

void Predictor::AddEvents(const RequestPlan& p, const RequestCost& c, double start_s) {
  // Spans per request and stream on each rank: each covers the request's ops of that kind on
  // that stream in the rank's schedule, from the first start to the last end, with their summed
  // spans as busy_s; with layer slices each op is a slice inside its request's span. The
  // request id is in every event's args. Track layout: docs/replay.md, "Timeline".
  using T = TimelineWriter;
  T& w = *timeline_;
  const double arrival = static_cast<double>(p.arrival_ns) * 1e-9;
  w.RequestInstant(T::RequestTrack::kArrivals, "arrival", arrival, p.request,
                   {T::Int("input_tokens", p.input_tokens)});
  w.RequestSpan(T::RequestTrack::kQueue, "queued", arrival, start_s - arrival, p.request, {});
  const double fwd0 = start_s + c.write_back_s + c.hit_agreement_s;
  const std::vector<int64_t> wb = PagesPerLane(p.write_back, model_.ranks());
  const std::vector<int64_t> lb = PagesPerLane(p.load_back, model_.ranks());
  const std::vector<int64_t> bk = PagesPerLane(p.backup, model_.ranks());
  const std::string gather = std::string("gather ") + kGatherMethodNames.CName(p.gather_method);
  const std::string backup = std::string("backup ") + kBackupScheduleNames.CName(p.backup_schedule);
  // The extent of each kind on each schedule rank: first start, last end, the sum of the op
  // spans (busy), in one pass over the ops in their order.
  size_t sched_ranks = 0;
  for (const SchedOp& o : c.ops)
    sched_ranks = std::max(sched_ranks, static_cast<size_t>(o.rank) + 1);
  extents_.assign(sched_ranks * kExtentKinds, StreamExtent{});
  for (size_t i = 0; i < c.ops.size(); ++i) {
    const int k = KindOf(c.ops[i]);
    if (k < 0) continue;
    StreamExtent& e = extents_[static_cast<size_t>(c.ops[i].rank) * kExtentKinds + k];
    if (e.ops == 0) e.begin = c.times[i].start_s;
    e.begin = std::min(e.begin, c.times[i].start_s);
    e.end = std::max(e.end, c.times[i].end_s);
    e.busy += c.times[i].end_s - c.times[i].start_s;
    ++e.ops;
  }
  const auto extent = [&](int q, int k) {
    return static_cast<size_t>(q) < sched_ranks
               ? extents_[static_cast<size_t>(q) * kExtentKinds + k]
               : StreamExtent{};
  };
  for (int rank = 0; rank < model_.ranks(); ++rank) {
    const int q =
        static_cast<size_t>(rank) < c.lane_rank.size() ? c.lane_rank[static_cast<size_t>(rank)] : 0;
    const StreamExtent load = extent(q, kLoadBack);
    StreamExtent gath = extent(q, kGather);
    const StreamExtent index = extent(q, kGatherIndex);
    if (index.ops > 0) gath.begin = index.begin, gath.busy += index.busy;
    const StreamExtent back = extent(q, kBackup);
    const StreamExtent comp = extent(q, kComputeOps);
    const double pl = model_.page_layer_bytes() * static_cast<double>(model_.layers());
    if (wb[rank] > 0)
      w.Span(rank, T::Track::kCopyD2H, "write-back", start_s,
             model_.TierCopyS(wb[rank] * pl, false), p.request, {T::Int("pages", wb[rank])});
    if (lb[rank] > 0 && load.ops > 0)
      w.Span(rank, T::Track::kCopyH2D, "load-back", fwd0 + load.begin, load.end - load.begin,
             p.request, {T::Int("pages", lb[rank]), T::Num("busy_s", load.busy)});
    w.Span(rank, T::Track::kCompute, "forward", fwd0, comp.end, p.request,
           {T::Int("new_tokens", p.computed_tokens), T::Int("prefix_pages", p.prefix_pages),
            T::Num("compute_s", c.compute_s), T::Num("load_back_exposed_s", c.load_back_exposed_s),
            T::Num("busy_s", comp.busy)});
    if (p.prefix_pages > 0 && gath.ops > 0)
      w.Span(
          rank, T::Track::kCollective, gather, fwd0 + gath.begin, gath.end - gath.begin, p.request,
          {T::Int("prefix_pages", p.prefix_pages),
           T::Int("runs", static_cast<int64_t>(p.runs.size())), T::Int("layers", model_.layers()),
           T::Int("prefetch_layers", model_.prefetch_layers()), T::Num("busy_s", gath.busy)});
    if (bk[rank] > 0 && back.ops > 0)
      w.Span(rank, T::Track::kCopyD2H, backup, fwd0 + back.begin,
             (BackupScheduleOf(p.backup_schedule).CopiesEachLayer()
                  ? std::max(comp.end, back.end) + c.backup.submit_s
                  : back.end) -
                 back.begin,
             p.request, {T::Int("pages", bk[rank]), T::Num("busy_s", back.busy)});
    if (!layer_slices_) continue;
    // Each op of this rank's schedule, inside the request span of its stream.
    for (size_t i = 0; i < c.ops.size(); ++i) {
      const SchedOp& o = c.ops[i];
      if (o.rank != q) continue;
      w.Span(rank, TrackOf(o.stream), o.name, fwd0 + c.times[i].start_s,
             c.times[i].end_s - c.times[i].start_s, p.request,
             {T::Int("layer", o.layer), T::Num("alone_s", o.work_s)});
    }
  }
}

}  // namespace kvlanes

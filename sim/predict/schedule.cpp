#include "sim/predict/schedule.h"

#include <algorithm>
#include <limits>

#include "sim/check.h"

namespace kvlanes {

const char* OpKindName(OpKind k) {
  static const char* const kNames[kNumOpKinds] = {"h2d", "d2h", "gather", "forward", "device_copy"};
  return kNames[static_cast<int>(k)];
}

const char* SchedStreamName(SchedStream s) {
  static const char* const kNames[kNumSchedStreams] = {"compute", "collective", "copy h2d",
                                                       "copy d2h"};
  return kNames[static_cast<int>(s)];
}

OverlapTable::OverlapTable() {
  for (auto& row : share)
    for (double& x : row) x = 1;
}

OverlapTable OverlapTable::Of(const HardwareProfile& hw) {
  OverlapTable t;
  for (int v = 0; v < kNumOpKinds; ++v)
    for (int b = 0; b < kNumOpKinds; ++b)
      t.share[v][b] =
          hw.OverlapShareOf(OpKindName(static_cast<OpKind>(v)), OpKindName(static_cast<OpKind>(b)));
  // The d2h ops are backups, and measured per-layer backup terms were timed over a forward pass
  // (bench sweep's backup samples, each layer's copy beside the next forward layer): what the
  // forward takes from them is in those terms already, so the pairs' d2h-beside-forward share
  // would count it twice (docs/cost_model.md, "Backups"). Tail backups start after their rank's
  // last forward layer, so no share of theirs beside the forward pass ever applies.
  if (hw.backup_per_layer.gbps > 0)
    t.share[static_cast<int>(OpKind::kD2H)][static_cast<int>(OpKind::kForward)] = 1;
  return t;
}

bool OverlapTable::Trivial() const {
  for (const auto& row : share)
    for (double x : row)
      if (x != 1) return false;
  return true;
}

int Schedule::Add(SchedOp op) {
  const int i = static_cast<int>(ops_.size());
  for (int d : op.deps) KV_CHECK(d < i, "schedule op " << op.name << " depends on a later op");
  KV_CHECK(op.work_s >= 0 && op.delay_s >= 0, "schedule op " << op.name << " has negative time");
  KV_CHECK(op.rank >= 0 && op.rank < 65536, "schedule op " << op.name << " on rank " << op.rank);
  KV_CHECK(op.group >= -1 && op.group < (1 << 24),
           "schedule op " << op.name << " in group " << op.group);
  KV_CHECK(op.group < 0 || op.engine == Engine::kNone,
           "schedule op " << op.name << " holds an engine in a group");
  ranks_ = std::max(ranks_, op.rank + 1);
  groups_ = std::max(groups_, op.group + 1);
  ops_.push_back(op);
  return i;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct OpState {
  bool running = false, done = false;
  double seg_start = 0;  // when its current rate began
  double seg_work = 0;   // work (alone-seconds) left at seg_start
  double rate = 1;
};

// One run of a schedule (Schedule::Run): the event loop's state, each step a method.
class Runner {
 public:
  Runner(const std::vector<SchedOp>& ops, int ranks, int groups, const OverlapTable& overlap)
      : ops_(ops),
        overlap_(overlap),
        S_(ranks * kNumSchedStreams),
        out_(ops.size()),
        st_(ops.size()),
        on_stream_(static_cast<size_t>(S_)),
        members_(static_cast<size_t>(groups)),
        head_(static_cast<size_t>(S_), 0),
        running_(static_cast<size_t>(S_), -1),
        holder_(static_cast<size_t>(ranks * kNumEngines), -1),
        stream_free_(static_cast<size_t>(S_), 0.0) {
    for (size_t i = 0; i < ops_.size(); ++i) {
      on_stream_[static_cast<size_t>(Slot(static_cast<int>(i)))].push_back(static_cast<int>(i));
      if (ops_[i].group >= 0)
        members_[static_cast<size_t>(ops_[i].group)].push_back(static_cast<int>(i));
    }
  }

  std::vector<ScheduledOp> Run() {
    const size_t n = ops_.size();
    double now = 0;
    size_t finished = 0;
    while (finished < n) {
      StartReady(now);
      const double next = NextEvent(now);
      KV_CHECK(next < kInf, "schedule deadlock: " << n - finished << " ops cannot start");
      now = std::max(now, next);
      finished += EndOps(now);
    }
    return std::move(out_);
  }

 private:
  // Stream slot: rank x kNumSchedStreams + stream.
  int Slot(int i) const {
    const SchedOp& o = ops_[static_cast<size_t>(i)];
    return o.rank * kNumSchedStreams + static_cast<int>(o.stream);
  }
  int EngineSlot(int i) const {
    const SchedOp& o = ops_[static_cast<size_t>(i)];
    return o.engine == Engine::kNone ? -1 : o.rank * kNumEngines + static_cast<int>(o.engine);
  }
  // The time op i may start, counting only its own deps and stream (kInf while a dependency has
  // not ended).
  double Ready(int i) const {
    double t = stream_free_[static_cast<size_t>(Slot(i))];
    for (int d : ops_[static_cast<size_t>(i)].deps) {
      if (d < 0) continue;
      if (!st_[static_cast<size_t>(d)].done) return kInf;
      t = std::max(t, out_[static_cast<size_t>(d)].end_s);
    }
    return t + ops_[static_cast<size_t>(i)].delay_s;
  }
  // Whether op i heads its idle stream (it may start once ready).
  bool AtHead(int i) const {
    const size_t s = static_cast<size_t>(Slot(i));
    return running_[s] < 0 && head_[s] < on_stream_[s].size() && on_stream_[s][head_[s]] == i;
  }
  double EndOf(int i) const {
    const OpState& o = st_[static_cast<size_t>(i)];
    return o.seg_start + o.seg_work / o.rate;
  }
  // After the running set changed at `now`: each running op's rate is the product of its
  // shares beside the others of its rank; an op whose rate is unchanged keeps its segment.
  void Rerate(double now) {
    for (int s = 0; s < S_; ++s) {
      const int i = running_[static_cast<size_t>(s)];
      if (i < 0) continue;
      const int v = static_cast<int>(ops_[static_cast<size_t>(i)].kind);
      const int base = s - s % kNumSchedStreams;
      double r = 1;
      for (int s2 = base; s2 < base + kNumSchedStreams; ++s2)
        if (s2 != s && running_[static_cast<size_t>(s2)] >= 0)
          r *= overlap_.share[v][static_cast<int>(
              ops_[static_cast<size_t>(running_[static_cast<size_t>(s2)])].kind)];
      OpState& o = st_[static_cast<size_t>(i)];
      if (r == o.rate) continue;
      o.seg_work = std::max(0.0, o.seg_work - (now - o.seg_start) * o.rate);
      o.seg_start = now;
      o.rate = r;
      if (r < 1) out_[static_cast<size_t>(i)].slowed = true;
    }
  }
  void Start(int i, double now) {
    const int e = EngineSlot(i);
    if (e >= 0) holder_[static_cast<size_t>(e)] = i;
    const size_t s = static_cast<size_t>(Slot(i));
    running_[s] = i;
    ++head_[s];
    OpState& o = st_[static_cast<size_t>(i)];
    o.running = true;
    o.seg_start = now;
    o.seg_work = ops_[static_cast<size_t>(i)].work_s;
    o.rate = 1;
    out_[static_cast<size_t>(i)].start_s = now;
  }
  // When the head of stream s could start (a group: when its last member is ready, kInf while
  // one is not at its stream's head), or kInf when it cannot start at `now` (engine held).
  double HeadStart(int s, double now) const {
    const size_t su = static_cast<size_t>(s);
    if (running_[su] >= 0 || head_[su] >= on_stream_[su].size()) return kInf;
    const int i = on_stream_[su][head_[su]];
    double t = Ready(i);
    if (t > now) return kInf;
    const int e = EngineSlot(i);
    if (e >= 0 && holder_[static_cast<size_t>(e)] >= 0) return kInf;
    if (const int g = ops_[static_cast<size_t>(i)].group; g >= 0) {
      for (int j : members_[static_cast<size_t>(g)]) {
        if (j == i) continue;
        if (!AtHead(j)) return kInf;
        t = std::max(t, Ready(j));
      }
      if (t > now) return kInf;
    }
    return t;
  }
  // Starts every stream head that is ready at `now` and whose engine is free, the earliest
  // ready first (then the lowest index): that is who gets a contended engine. A group starts
  // when its last member is ready, all members at once.
  void StartReady(double now) {
    for (;;) {
      int best = -1;
      double best_t = kInf;
      for (int s = 0; s < S_; ++s) {
        const double t = HeadStart(s, now);
        if (t > now) continue;
        const int i = on_stream_[static_cast<size_t>(s)][head_[static_cast<size_t>(s)]];
        if (t < best_t || (t == best_t && i < best)) best = i, best_t = t;
      }
      if (best < 0) break;
      if (const int g = ops_[static_cast<size_t>(best)].group; g >= 0)
        for (int j : members_[static_cast<size_t>(g)]) Start(j, now);
      else
        Start(best, now);
      Rerate(now);
    }
  }
  // The next event: a running op ends or a waiting head becomes ready.
  double NextEvent(double now) const {
    double next = kInf;
    for (int s = 0; s < S_; ++s) {
      const size_t su = static_cast<size_t>(s);
      if (running_[su] >= 0) {
        next = std::min(next, EndOf(running_[su]));
      } else if (head_[su] < on_stream_[su].size()) {
        const double t = Ready(on_stream_[su][head_[su]]);
        if (t > now) next = std::min(next, t);
      }
    }
    return next;
  }
  // Ends the running ops that are done by `now`; returns how many.
  size_t EndOps(double now) {
    size_t ended = 0;
    for (int s = 0; s < S_; ++s) {
      const size_t su = static_cast<size_t>(s);
      const int i = running_[su];
      if (i < 0) continue;
      const double e = EndOf(i);
      if (e > now) continue;
      out_[static_cast<size_t>(i)].end_s = e;
      st_[static_cast<size_t>(i)].running = false;
      st_[static_cast<size_t>(i)].done = true;
      stream_free_[su] = e;
      running_[su] = -1;
      if (const int es = EngineSlot(i); es >= 0) holder_[static_cast<size_t>(es)] = -1;
      ++ended;
    }
    if (ended > 0) Rerate(now);
    return ended;
  }

  const std::vector<SchedOp>& ops_;
  const OverlapTable& overlap_;
  int S_;
  std::vector<ScheduledOp> out_;
  std::vector<OpState> st_;
  // Each stream's ops in order; head_[s] is the next one not yet started.
  std::vector<std::vector<int>> on_stream_;
  std::vector<std::vector<int>> members_;
  std::vector<size_t> head_;
  std::vector<int> running_;
  std::vector<int> holder_;
  std::vector<double> stream_free_;
};

}  // namespace

std::vector<ScheduledOp> Schedule::Run(const OverlapTable& overlap) const {
  return Runner(ops_, ranks_, groups_, overlap).Run();
}

}  // namespace kvlanes

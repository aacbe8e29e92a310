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

}  // namespace

std::vector<ScheduledOp> Schedule::Run(const OverlapTable& overlap) const {
  const size_t n = ops_.size();
  const int S = ranks_ * kNumSchedStreams;  // stream slot: rank x kNumSchedStreams + stream
  std::vector<ScheduledOp> out(n);
  std::vector<OpState> st(n);
  // Each stream's ops in order; head[s] is the next one not yet started.
  std::vector<std::vector<int>> on_stream(static_cast<size_t>(S));
  std::vector<std::vector<int>> members(static_cast<size_t>(groups_));
  const auto slot = [&](int i) {
    const SchedOp& o = ops_[static_cast<size_t>(i)];
    return o.rank * kNumSchedStreams + static_cast<int>(o.stream);
  };
  for (size_t i = 0; i < n; ++i) {
    on_stream[static_cast<size_t>(slot(static_cast<int>(i)))].push_back(static_cast<int>(i));
    if (ops_[i].group >= 0)
      members[static_cast<size_t>(ops_[i].group)].push_back(static_cast<int>(i));
  }
  std::vector<size_t> head(static_cast<size_t>(S), 0);
  std::vector<int> running(static_cast<size_t>(S), -1);
  std::vector<int> holder(static_cast<size_t>(ranks_ * kNumEngines), -1);
  std::vector<double> stream_free(static_cast<size_t>(S), 0.0);
  const auto engine_slot = [&](int i) {
    const SchedOp& o = ops_[static_cast<size_t>(i)];
    return o.engine == Engine::kNone ? -1 : o.rank * kNumEngines + static_cast<int>(o.engine);
  };

  // The time op i may start, counting only its own deps and stream (kInf while a dependency has
  // not ended).
  const auto ready = [&](int i) {
    double t = stream_free[static_cast<size_t>(slot(i))];
    for (int d : ops_[static_cast<size_t>(i)].deps) {
      if (d < 0) continue;
      if (!st[static_cast<size_t>(d)].done) return kInf;
      t = std::max(t, out[static_cast<size_t>(d)].end_s);
    }
    return t + ops_[static_cast<size_t>(i)].delay_s;
  };
  // Whether op i heads its idle stream (it may start once ready).
  const auto at_head = [&](int i) {
    const size_t s = static_cast<size_t>(slot(i));
    return running[s] < 0 && head[s] < on_stream[s].size() && on_stream[s][head[s]] == i;
  };
  const auto end_of = [&](int i) {
    const OpState& o = st[static_cast<size_t>(i)];
    return o.seg_start + o.seg_work / o.rate;
  };
  // After the running set changed at `now`: each running op's rate is the product of its
  // shares beside the others of its rank; an op whose rate is unchanged keeps its segment.
  const auto rerate = [&](double now) {
    for (int s = 0; s < S; ++s) {
      const int i = running[static_cast<size_t>(s)];
      if (i < 0) continue;
      const int v = static_cast<int>(ops_[static_cast<size_t>(i)].kind);
      const int base = s - s % kNumSchedStreams;
      double r = 1;
      for (int s2 = base; s2 < base + kNumSchedStreams; ++s2)
        if (s2 != s && running[static_cast<size_t>(s2)] >= 0)
          r *= overlap.share[v][static_cast<int>(
              ops_[static_cast<size_t>(running[static_cast<size_t>(s2)])].kind)];
      OpState& o = st[static_cast<size_t>(i)];
      if (r == o.rate) continue;
      o.seg_work = std::max(0.0, o.seg_work - (now - o.seg_start) * o.rate);
      o.seg_start = now;
      o.rate = r;
      if (r < 1) out[static_cast<size_t>(i)].slowed = true;
    }
  };
  const auto start = [&](int i, double now) {
    const int e = engine_slot(i);
    if (e >= 0) holder[static_cast<size_t>(e)] = i;
    const size_t s = static_cast<size_t>(slot(i));
    running[s] = i;
    ++head[s];
    OpState& o = st[static_cast<size_t>(i)];
    o.running = true;
    o.seg_start = now;
    o.seg_work = ops_[static_cast<size_t>(i)].work_s;
    o.rate = 1;
    out[static_cast<size_t>(i)].start_s = now;
  };

  double now = 0;
  size_t finished = 0;
  while (finished < n) {
    // Start every stream head that is ready at `now` and whose engine is free, the earliest
    // ready first (then the lowest index): that is who gets a contended engine. A group starts
    // when its last member is ready, all members at once.
    for (;;) {
      int best = -1;
      double best_t = kInf;
      for (int s = 0; s < S; ++s) {
        const size_t su = static_cast<size_t>(s);
        if (running[su] >= 0 || head[su] >= on_stream[su].size()) continue;
        const int i = on_stream[su][head[su]];
        double t = ready(i);
        if (t > now) continue;
        const int e = engine_slot(i);
        if (e >= 0 && holder[static_cast<size_t>(e)] >= 0) continue;
        if (const int g = ops_[static_cast<size_t>(i)].group; g >= 0) {
          for (int j : members[static_cast<size_t>(g)]) {
            if (j == i) continue;
            if (!at_head(j)) {
              t = kInf;
              break;
            }
            t = std::max(t, ready(j));
          }
          if (t > now) continue;
        }
        if (t < best_t || (t == best_t && i < best)) best = i, best_t = t;
      }
      if (best < 0) break;
      if (const int g = ops_[static_cast<size_t>(best)].group; g >= 0)
        for (int j : members[static_cast<size_t>(g)]) start(j, now);
      else
        start(best, now);
      rerate(now);
    }
    // The next event: a running op ends or a waiting head becomes ready.
    double next = kInf;
    for (int s = 0; s < S; ++s) {
      const size_t su = static_cast<size_t>(s);
      if (running[su] >= 0) {
        next = std::min(next, end_of(running[su]));
      } else if (head[su] < on_stream[su].size()) {
        const double t = ready(on_stream[su][head[su]]);
        if (t > now) next = std::min(next, t);
      }
    }
    KV_CHECK(next < kInf, "schedule deadlock: " << n - finished << " ops cannot start");
    now = std::max(now, next);
    bool ended = false;
    for (int s = 0; s < S; ++s) {
      const size_t su = static_cast<size_t>(s);
      const int i = running[su];
      if (i < 0) continue;
      const double e = end_of(i);
      if (e > now) continue;
      out[static_cast<size_t>(i)].end_s = e;
      st[static_cast<size_t>(i)].running = false;
      st[static_cast<size_t>(i)].done = true;
      stream_free[su] = e;
      running[su] = -1;
      if (const int es = engine_slot(i); es >= 0) holder[static_cast<size_t>(es)] = -1;
      ++finished;
      ended = true;
    }
    if (ended) rerate(now);
  }
  return out;
}

}  // namespace kvlanes

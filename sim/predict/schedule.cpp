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
  std::vector<ScheduledOp> out(n);
  std::vector<OpState> st(n);
  // Each stream's ops in order; head[s] is the next one not yet started.
  std::vector<int> on_stream[kNumSchedStreams];
  for (size_t i = 0; i < n; ++i)
    on_stream[static_cast<int>(ops_[i].stream)].push_back(static_cast<int>(i));
  size_t head[kNumSchedStreams] = {};
  int running[kNumSchedStreams];
  std::fill(std::begin(running), std::end(running), -1);
  int holder[kNumEngines];
  std::fill(std::begin(holder), std::end(holder), -1);
  double stream_free[kNumSchedStreams] = {};

  // The time op i may start (kInf while a dependency has not ended).
  const auto ready = [&](int i, int s) {
    double t = stream_free[s];
    for (int d : ops_[static_cast<size_t>(i)].deps) {
      if (d < 0) continue;
      if (!st[static_cast<size_t>(d)].done) return kInf;
      t = std::max(t, out[static_cast<size_t>(d)].end_s);
    }
    return t + ops_[static_cast<size_t>(i)].delay_s;
  };
  const auto end_of = [&](int i) {
    const OpState& o = st[static_cast<size_t>(i)];
    return o.seg_start + o.seg_work / o.rate;
  };
  // After the running set changed at `now`: each running op's rate is the product of its
  // shares beside the others; an op whose rate is unchanged keeps its segment (exact ends).
  const auto rerate = [&](double now) {
    for (int s = 0; s < kNumSchedStreams; ++s) {
      const int i = running[s];
      if (i < 0) continue;
      const int v = static_cast<int>(ops_[static_cast<size_t>(i)].kind);
      double r = 1;
      for (int s2 = 0; s2 < kNumSchedStreams; ++s2)
        if (s2 != s && running[s2] >= 0)
          r *= overlap.share[v][static_cast<int>(ops_[static_cast<size_t>(running[s2])].kind)];
      OpState& o = st[static_cast<size_t>(i)];
      if (r == o.rate) continue;
      o.seg_work = std::max(0.0, o.seg_work - (now - o.seg_start) * o.rate);
      o.seg_start = now;
      o.rate = r;
      if (r < 1) out[static_cast<size_t>(i)].slowed = true;
    }
  };

  double now = 0;
  size_t finished = 0;
  while (finished < n) {
    // Start every stream head that is ready at `now` and whose engine is free, the earliest
    // ready first (then the lowest index): that is who gets a contended engine.
    for (;;) {
      int best = -1, best_s = -1;
      double best_t = kInf;
      for (int s = 0; s < kNumSchedStreams; ++s) {
        if (running[s] >= 0 || head[s] >= on_stream[s].size()) continue;
        const int i = on_stream[s][head[s]];
        const double t = ready(i, s);
        if (t > now) continue;
        const Engine e = ops_[static_cast<size_t>(i)].engine;
        if (e != Engine::kNone && holder[static_cast<int>(e)] >= 0) continue;
        if (t < best_t || (t == best_t && i < best)) best = i, best_s = s, best_t = t;
      }
      if (best < 0) break;
      const SchedOp& op = ops_[static_cast<size_t>(best)];
      if (op.engine != Engine::kNone) holder[static_cast<int>(op.engine)] = best;
      running[best_s] = best;
      ++head[best_s];
      OpState& o = st[static_cast<size_t>(best)];
      o.running = true;
      o.seg_start = now;
      o.seg_work = op.work_s;
      o.rate = 1;
      out[static_cast<size_t>(best)].start_s = now;
      rerate(now);
    }
    // The next event: a running op ends or a waiting head becomes ready.
    double next = kInf;
    for (int s = 0; s < kNumSchedStreams; ++s) {
      if (running[s] >= 0) {
        next = std::min(next, end_of(running[s]));
      } else if (head[s] < on_stream[s].size()) {
        const double t = ready(on_stream[s][head[s]], s);
        if (t > now) next = std::min(next, t);
      }
    }
    KV_CHECK(next < kInf, "schedule deadlock: " << n - finished << " ops cannot start");
    now = std::max(now, next);
    bool ended = false;
    for (int s = 0; s < kNumSchedStreams; ++s) {
      const int i = running[s];
      if (i < 0) continue;
      const double e = end_of(i);
      if (e > now) continue;
      out[static_cast<size_t>(i)].end_s = e;
      st[static_cast<size_t>(i)].running = false;
      st[static_cast<size_t>(i)].done = true;
      stream_free[s] = e;
      running[s] = -1;
      const Engine eng = ops_[static_cast<size_t>(i)].engine;
      if (eng != Engine::kNone) holder[static_cast<int>(eng)] = -1;
      ++finished;
      ended = true;
    }
    if (ended) rerate(now);
  }
  return out;
}

}  // namespace kvlanes

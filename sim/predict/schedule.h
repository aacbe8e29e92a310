// A stream-level schedule: operations placed on the streams and copy engines they use, ordered
// by the dependencies the executor enforces with events, and timed by a discrete-event loop in
// which operations that run at the same time share what they both use. The rules are written
// in docs/cost_model.md ("The request schedule"); CostModel builds one schedule per request.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/predict/hardware_profile.h"

namespace kvlanes {

// What an operation is, for the profile's overlap shares (OverlapKindNames()).
enum class OpKind : int { kH2D = 0, kD2H = 1, kGather = 2, kForward = 3, kDeviceCopy = 4 };
inline constexpr int kNumOpKinds = 5;
// The overlap kind name of `k` ("h2d", "d2h", "gather", "forward", "device_copy").
const char* OpKindName(OpKind k);

// The executor's streams (exec/backend.h names them alike).
enum class SchedStream : int { kCompute = 0, kComm = 1, kH2D = 2, kD2H = 3 };
inline constexpr int kNumSchedStreams = 4;
const char* SchedStreamName(SchedStream s);

// A shared resource an operation holds for its whole run: one at a time.
enum class Engine : int { kNone = -1, kCopyH2D = 0, kCopyD2H = 1 };
inline constexpr int kNumEngines = 2;

struct SchedOp {
  const char* name = "";  // a static name: "load_back", "gather", "compute", "backup", ...
  OpKind kind = OpKind::kForward;
  SchedStream stream = SchedStream::kCompute;
  Engine engine = Engine::kNone;
  double work_s = 0;   // seconds when it runs alone
  double delay_s = 0;  // added to its ready time (CPU submission before it can start)
  // Ops (indices, all earlier) that must end before it starts: the events the executor waits
  // on (its stream predecessor is implied).
  std::array<int, 3> deps = {-1, -1, -1};
  int64_t layer = -1;  // the layer it covers, -1 when it covers all or none
  // The rank (GPU) whose streams and copy engines it uses; ops share rates only with ops of
  // their own rank. Ranks are numbered from 0 without gaps.
  int rank = 0;
  // Ops of one group (>= 0) are one collective's part on each rank: none starts before every
  // one of them is ready, then all start together (a collective waits for its slowest peer).
  int group = -1;
};

// Overlap shares as a kind x kind table: share[victim][beside] (1 = unaffected).
struct OverlapTable {
  double share[kNumOpKinds][kNumOpKinds];
  OverlapTable();  // every share 1
  static OverlapTable Of(const HardwareProfile& hw);
  bool Trivial() const;  // every share 1
};

struct ScheduledOp {
  double start_s = 0;
  double end_s = 0;
  bool slowed = false;  // ran at a rate below 1 for some time (else end = start + work_s)
};

// Builds a schedule op by op; Run() times it.
class Schedule {
 public:
  // Appends `op`; returns its index. REQUIRES: deps name earlier ops.
  int Add(SchedOp op);
  const std::vector<SchedOp>& ops() const { return ops_; }
  void Reserve(size_t n) { ops_.reserve(n); }
  // Hands the ops over, leaving the schedule empty.
  std::vector<SchedOp> Release() { return std::move(ops_); }

  // Times every op. Each rank has its own streams and engines. Ops on one stream run in the
  // order they were added (as a CUDA stream runs its work); an op starts at max(its deps' ends,
  // its stream predecessor's end) + delay_s, later while its engine is held (granted by ready
  // time, then index) and, in a group, until every member is ready. While ops of one rank run
  // side by side each proceeds at the product, over the kinds of that rank's other running ops,
  // of share[its kind][their kind]; rates are constant between events, so every end is exact
  // (an op whose rate never changes ends at start + work_s, bit for bit).
  std::vector<ScheduledOp> Run(const OverlapTable& overlap) const;

 private:
  std::vector<SchedOp> ops_;
  int ranks_ = 1;
  int groups_ = 0;
};

}  // namespace kvlanes

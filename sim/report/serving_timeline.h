// The predicted timeline of a serving-mode replay (docs/serving.md, "Timeline") as Chrome
// trace-event JSON for Perfetto: one process per replica, with its forward passes, the chunk each
// request computes in each pass (one thread per position in the pass, so no spans overlap on a
// thread), arrival markers, and counters of waiting and in-flight requests that show the queue.
// Passes and chunks are streamed as the scheduler forms them; arrivals and counters are written
// from the serving result at the end.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "sim/engine/scheduler.h"

namespace kvlanes {

class ServingTimelineWriter {
 public:
  // Thread ids of a replica's process (pid = replica). Chunk threads are kFirstSlot + k for the
  // k-th chunk of a pass.
  static constexpr int kPasses = 1;
  static constexpr int kArrivals = 2;
  static constexpr int kFirstSlot = 10;

  // Writes the opening and the process metadata of `replicas` replicas. `requests`: the trace's
  // request count. `out` must outlive the writer.
  ServingTimelineWriter(std::ostream& out, int replicas, size_t requests);
  ServingTimelineWriter(const ServingTimelineWriter&) = delete;
  ServingTimelineWriter& operator=(const ServingTimelineWriter&) = delete;

  // At admission: the request's number in its replica's plan.
  void Admit(size_t trace_request, int64_t replica_request);
  // A forward pass of `replica` from start_ns for dur_ns with its chunks (ServingReplay's pass
  // observer). `arrival_ns` of each request, for the queueing time shown on its first chunk.
  void Pass(size_t replica, int64_t start_ns, int64_t dur_ns, const std::vector<PassChunk>& chunks,
            const ServingResult& progress);
  // REQUIRES: called once, after the replay. Writes arrivals and the queue counters, closes the
  // document and flushes.
  void Finish(const ServingResult& result);

 private:
  void Sep();
  void Meta(int pid, int tid, const char* kind, const std::string& name, int sort_index);
  void Flush(bool force);

  std::ostream& out_;
  std::string buf_;
  bool first_ = true;
  std::vector<int64_t> replica_request_;  // per trace index; -1 before admission
  std::vector<int64_t> passes_;           // per replica: passes so far
  std::vector<int> slots_named_;          // per replica: chunk threads named so far
  std::vector<char> started_;             // per trace index: first chunk written
};

}  // namespace kvlanes

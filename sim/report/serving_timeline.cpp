#include "sim/report/serving_timeline.h"

#include <algorithm>
#include <tuple>

#include "sim/predict/json_append.h"

namespace kvlanes {
namespace {

namespace ja = json_append;
constexpr size_t kServingBufferBytes = size_t{1} << 20;

double Us(int64_t ns) { return static_cast<double>(ns) * 1e-3; }

}  // namespace

ServingTimelineWriter::ServingTimelineWriter(std::ostream& out, int replicas, size_t requests)
    : out_(out),
      replica_request_(requests, -1),
      passes_(static_cast<size_t>(replicas), 0),
      slots_named_(static_cast<size_t>(replicas), 0),
      started_(requests, 0) {
  buf_.reserve(kServingBufferBytes + 4096);
  buf_.append("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  for (int r = 0; r < replicas; ++r) {
    Meta(r, 0, "process_name", "replica " + std::to_string(r), -1);
    Meta(r, 0, "process_sort_index", "", r);
    Meta(r, kPasses, "thread_name", "passes", -1);
    Meta(r, kPasses, "thread_sort_index", "", kPasses);
    Meta(r, kArrivals, "thread_name", "arrivals", -1);
    Meta(r, kArrivals, "thread_sort_index", "", kArrivals);
  }
}

void ServingTimelineWriter::Sep() {
  if (!first_) buf_.append(",\n");
  first_ = false;
}

void ServingTimelineWriter::Meta(int pid, int tid, const char* kind, const std::string& name,
                                 int sort_index) {
  Sep();
  ja::MetaEvent(buf_, pid, tid, kind, name, sort_index);
}

void ServingTimelineWriter::Flush(bool force) {
  if (!force && buf_.size() < kServingBufferBytes) return;
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
}

void ServingTimelineWriter::Admit(size_t trace_request, int64_t replica_request) {
  replica_request_[trace_request] = replica_request;
}

void ServingTimelineWriter::Pass(size_t replica, int64_t start_ns, int64_t dur_ns,
                                 const std::vector<PassChunk>& chunks,
                                 const ServingResult& progress) {
  const int pid = static_cast<int>(replica);
  int64_t tokens = 0;
  for (const PassChunk& c : chunks) tokens += c.tokens;
  Sep();
  buf_.append("{\"name\":\"pass\",\"ph\":\"X\",\"pid\":");
  ja::Int(buf_, pid);
  buf_.append(",\"tid\":");
  ja::Int(buf_, kPasses);
  buf_.append(",\"ts\":");
  ja::Double(buf_, Us(start_ns));
  buf_.append(",\"dur\":");
  ja::Double(buf_, Us(dur_ns));
  buf_.append(",\"args\":{\"pass\":");
  ja::Int(buf_, passes_[replica]++);
  buf_.append(",\"chunks\":");
  ja::Int(buf_, static_cast<int64_t>(chunks.size()));
  buf_.append(",\"tokens\":");
  ja::Int(buf_, tokens);
  buf_.append("}}");
  for (size_t k = 0; k < chunks.size(); ++k) {
    const int tid = kFirstSlot + static_cast<int>(k);
    while (slots_named_[replica] <= static_cast<int>(k)) {
      const int t = kFirstSlot + slots_named_[replica]++;
      std::string name = "pass slot ";
      name += std::to_string(t - kFirstSlot);
      Meta(pid, t, "thread_name", name, -1);
      Meta(pid, t, "thread_sort_index", "", t);
    }
    const PassChunk& c = chunks[k];
    Sep();
    buf_.append("{\"name\":\"r");  // "r<trace index>": no character to escape
    ja::Int(buf_, static_cast<int64_t>(c.request));
    buf_.append("\",\"ph\":\"X\",\"pid\":");
    ja::Int(buf_, pid);
    buf_.append(",\"tid\":");
    ja::Int(buf_, tid);
    buf_.append(",\"ts\":");
    ja::Double(buf_, Us(start_ns));
    buf_.append(",\"dur\":");
    ja::Double(buf_, Us(dur_ns));
    buf_.append(",\"args\":{\"request\":");
    ja::Int(buf_, static_cast<int64_t>(c.request));
    buf_.append(",\"replica_request\":");
    ja::Int(buf_, replica_request_[c.request]);
    buf_.append(",\"tokens\":");
    ja::Int(buf_, c.tokens);
    buf_.append(",\"context_tokens\":");
    ja::Int(buf_, c.context);
    if (!started_[c.request]) {
      started_[c.request] = 1;
      const ServedRequest& s = progress.requests[c.request];
      buf_.append(",\"queue_s\":");
      ja::Double(buf_, static_cast<double>(s.admit_ns - s.arrival_ns) * 1e-9);
    }
    buf_.append("}}");
  }
  Flush(false);
}

void ServingTimelineWriter::Finish(const ServingResult& result) {
  // Arrivals, and the queue and in-flight counters from every arrival, admission and release.
  struct Change {
    int64_t t;
    int32_t replica;
    int waiting;
    int in_flight;
  };
  std::vector<Change> changes;
  changes.reserve(result.requests.size() * 3);
  for (size_t i = 0; i < result.requests.size(); ++i) {
    const ServedRequest& s = result.requests[i];
    if (s.replica < 0) continue;
    Sep();
    buf_.append("{\"name\":\"r");
    ja::Int(buf_, static_cast<int64_t>(i));
    buf_.append(" arrives\",\"ph\":\"i\",\"s\":\"t\",\"pid\":");
    ja::Int(buf_, s.replica);
    buf_.append(",\"tid\":");
    ja::Int(buf_, kArrivals);
    buf_.append(",\"ts\":");
    ja::Double(buf_, Us(s.arrival_ns));
    buf_.append(",\"args\":{\"request\":");
    ja::Int(buf_, static_cast<int64_t>(i));
    buf_.append(",\"input_tokens\":");
    ja::Int(buf_, s.input_tokens);
    buf_.append("}}");
    Flush(false);
    changes.push_back({s.arrival_ns, s.replica, +1, 0});
    if (s.admit_ns >= 0) changes.push_back({s.admit_ns, s.replica, -1, +1});
    if (s.release_ns >= 0) changes.push_back({s.release_ns, s.replica, 0, -1});
  }
  std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    return std::tie(a.replica, a.t) < std::tie(b.replica, b.t);
  });
  int64_t waiting = 0, in_flight = 0;
  for (size_t k = 0; k < changes.size(); ++k) {
    if (k == 0 || changes[k].replica != changes[k - 1].replica) waiting = in_flight = 0;
    waiting += changes[k].waiting;
    in_flight += changes[k].in_flight;
    // One sample per instant: the state after every change at that time.
    if (k + 1 < changes.size() && changes[k + 1].replica == changes[k].replica &&
        changes[k + 1].t == changes[k].t)
      continue;
    Sep();
    buf_.append("{\"name\":\"requests\",\"ph\":\"C\",\"pid\":");
    ja::Int(buf_, changes[k].replica);
    buf_.append(",\"tid\":0,\"ts\":");
    ja::Double(buf_, Us(changes[k].t));
    buf_.append(",\"args\":{\"waiting\":");
    ja::Int(buf_, waiting);
    buf_.append(",\"in_flight\":");
    ja::Int(buf_, in_flight);
    buf_.append("}}");
    Flush(false);
  }
  buf_.append("\n]}\n");
  Flush(true);
  out_.flush();
}

}  // namespace kvlanes

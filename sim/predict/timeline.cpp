#include "sim/predict/timeline.h"

#include "sim/predict/json_append.h"

namespace kvlanes {
namespace {

namespace ja = json_append;
constexpr size_t kBufferBytes = size_t{1} << 20;

const char* TrackName(TimelineWriter::Track t) {
  switch (t) {
    case TimelineWriter::Track::kCompute:
      return "compute";
    case TimelineWriter::Track::kCollective:
      return "collective";
    case TimelineWriter::Track::kCopyH2D:
      return "copy h2d";
    case TimelineWriter::Track::kCopyD2H:
      return "copy d2h";
  }
  return "?";
}

}  // namespace

TimelineWriter::TimelineWriter(std::ostream& out, int ranks) : out_(out), ranks_(ranks) {
  buf_.reserve(kBufferBytes + 4096);
  buf_.append("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  for (int r = 0; r < ranks_; ++r) {
    Meta(r, 0, "process_name", "rank " + std::to_string(r), -1);
    Meta(r, 0, "process_sort_index", "", r);
    for (Track t : {Track::kCompute, Track::kCollective, Track::kCopyH2D, Track::kCopyD2H}) {
      Meta(r, static_cast<int>(t), "thread_name", TrackName(t), -1);
      Meta(r, static_cast<int>(t), "thread_sort_index", "", static_cast<int>(t));
    }
  }
  Meta(ranks_, 0, "process_name", "requests", -1);
  Meta(ranks_, 0, "process_sort_index", "", ranks_);
  Meta(ranks_, static_cast<int>(RequestTrack::kArrivals), "thread_name", "arrivals", -1);
  Meta(ranks_, static_cast<int>(RequestTrack::kQueue), "thread_name", "queue", -1);
}

void TimelineWriter::Meta(int pid, int tid, const char* kind, std::string_view name,
                          int sort_index) {
  if (!first_) buf_.append(",\n");
  first_ = false;
  ja::MetaEvent(buf_, pid, tid, kind, name, sort_index);
}

void TimelineWriter::Begin(int pid, int tid, std::string_view ph, std::string_view name,
                           double t_s) {
  if (!first_) buf_.append(",\n");
  first_ = false;
  buf_.append("{\"name\":");
  ja::Str(buf_, name);
  buf_.append(",\"ph\":");
  ja::Str(buf_, ph);
  buf_.append(",\"pid\":");
  ja::Int(buf_, pid);
  buf_.append(",\"tid\":");
  ja::Int(buf_, tid);
  buf_.append(",\"ts\":");
  ja::Double(buf_, t_s * 1e6);
}

void TimelineWriter::Args(int64_t request, std::initializer_list<Arg> args) {
  buf_.append(",\"args\":{");
  bool first = true;
  if (request >= 0) {
    buf_.append("\"request\":");
    ja::Int(buf_, request);
    first = false;
  }
  for (const Arg& a : args) {
    if (!first) buf_.push_back(',');
    first = false;
    ja::Key(buf_, a.key);
    if (a.integer)
      ja::Int(buf_, static_cast<int64_t>(a.value));
    else
      ja::Double(buf_, a.value);
  }
  buf_.push_back('}');
}

void TimelineWriter::End() {
  buf_.push_back('}');
  if (buf_.size() >= kBufferBytes) {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }
}

void TimelineWriter::Span(int rank, Track track, std::string_view name, double t0_s, double dur_s,
                          int64_t request, std::initializer_list<Arg> args) {
  if (!(dur_s > 0)) return;
  Begin(rank, static_cast<int>(track), "X", name, t0_s);
  buf_.append(",\"dur\":");
  ja::Double(buf_, dur_s * 1e6);
  Args(request, args);
  End();
}

void TimelineWriter::RequestSpan(RequestTrack track, std::string_view name, double t0_s,
                                 double dur_s, int64_t request, std::initializer_list<Arg> args) {
  if (!(dur_s > 0)) return;
  Begin(ranks_, static_cast<int>(track), "X", name, t0_s);
  buf_.append(",\"dur\":");
  ja::Double(buf_, dur_s * 1e6);
  Args(request, args);
  End();
}

void TimelineWriter::RequestInstant(RequestTrack track, std::string_view name, double t_s,
                                    int64_t request, std::initializer_list<Arg> args) {
  Begin(ranks_, static_cast<int>(track), "i", name, t_s);
  buf_.append(",\"s\":\"t\"");
  Args(request, args);
  End();
}

void TimelineWriter::Counter(int rank, std::string_view name, double t_s,
                             std::initializer_list<Arg> args) {
  Begin(rank, 0, "C", name, t_s);
  Args(-1, args);
  End();
}

void TimelineWriter::Finish() {
  buf_.append("\n]}\n");
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
  out_.flush();
}

}  // namespace kvlanes

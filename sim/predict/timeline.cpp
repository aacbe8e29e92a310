#include "sim/predict/timeline.h"

#include <cstring>
#include <utility>

#include "io/input_error.h"
#include "sim/predict/json_append.h"

namespace kvlanes {
namespace {

namespace ja = json_append;
constexpr size_t kTimelineBufferBytes = size_t{1} << 20;
// An event's bytes besides its name and args: the separator, the fixed keys, pid, tid, three
// numbers (ts, dur or "s", the request) and the braces, with room to spare.
constexpr size_t kEventBytes = 96 + 5 * ja::kMaxNumberChars;
// An arg's bytes besides its key: the comma, the quotes and colon, the number.
constexpr size_t kArgBytes = 4 + ja::kMaxNumberChars;

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

template <size_t N>
char* Lit(char* p, const char (&s)[N]) {
  std::memcpy(p, s, N - 1);
  return p + N - 1;
}

char* Put(char* p, std::string_view s) {
  std::memcpy(p, s.data(), s.size());
  return p + s.size();
}

}  // namespace

TimelineWriter::TimelineWriter(std::ostream& out, int ranks, TimelineWriterOptions opts)
    : out_(out), ranks_(ranks), opts_(std::move(opts)) {
  buf_.resize(kTimelineBufferBytes + (kTimelineBufferBytes >> 3));
  const std::string_view open = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  std::memcpy(buf_.data(), open.data(), open.size());
  len_ = open.size();
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
  current_.events.reserve(opts_.chunk_events);
  if (!opts_.background) return;
  slots_.resize(opts_.queue_chunks);
  thread_ = std::make_unique<WriterThread>(
      WriterThreadOptions{opts_.queue_chunks, opts_.wait_limit, opts_.name, "timeline writer",
                          "events"},
      [this](size_t slot) { Format(slots_[slot]); }, [this] { WriteEnd(); });
}

// The thread (its destructor) ends before the chunks and the buffer it uses are destroyed.
TimelineWriter::~TimelineWriter() { thread_.reset(); }

void TimelineWriter::Meta(int pid, int tid, const char* kind, std::string_view name,
                          int sort_index) {
  std::string s = meta_first_ ? "" : ",\n";
  meta_first_ = false;
  ja::MetaEvent(s, pid, tid, kind, name, sort_index);
  Reserve(s.size());
  std::memcpy(buf_.data() + len_, s.data(), s.size());
  len_ += s.size();
}

void TimelineWriter::Record(char ph, int pid, int tid, std::string_view name, double t_s,
                            double dur_s, int64_t request, std::initializer_list<Arg> args) {
  Chunk& c = current_;
  Event& e = c.events.emplace_back();
  e.t_s = t_s;
  e.dur_s = dur_s;
  e.request = request;
  e.pid = pid;
  e.tid = tid;
  e.ph = ph;
  e.name_begin = static_cast<uint32_t>(c.names.size());
  e.name_size = static_cast<uint32_t>(name.size());
  c.names.append(name);
  e.args_begin = static_cast<uint32_t>(c.args.size());
  e.args_size = static_cast<uint32_t>(args.size());
  c.args.insert(c.args.end(), args.begin(), args.end());
  if (c.events.size() >= opts_.chunk_events) Hand();
}

void TimelineWriter::Hand() {
  if (!thread_) {
    Format(current_);
    current_.clear();
    return;
  }
  const size_t slot = thread_->Acquire();
  std::swap(slots_[slot], current_);  // takes back a written chunk: its lists keep their capacity
  thread_->Publish();
  current_.clear();
}

void TimelineWriter::Reserve(size_t bytes) {
  if (buf_.size() - len_ >= bytes) return;
  Drain();
  if (buf_.size() < bytes) buf_.resize(bytes);
}

void TimelineWriter::Drain() {
  out_.write(buf_.data(), static_cast<std::streamsize>(len_));
  len_ = 0;
  if (!out_) throw InputError(opts_.name, 0, "", "write failed (disk full?)");
}

void TimelineWriter::Format(const Chunk& c) {
  for (const Event& e : c.events) {
    FormatEvent(c, e);
    if (len_ >= kTimelineBufferBytes) Drain();
  }
}

void TimelineWriter::FormatEvent(const Chunk& c, const Event& e) {
  const std::string_view name(c.names.data() + e.name_begin, e.name_size);
  std::string escaped;  // a name with bytes JSON escapes (none of the writer's own names)
  if (ja::NeedsEscape(name)) ja::Str(escaped, name);
  const Arg* args = c.args.data() + e.args_begin;
  size_t bytes = kEventBytes + (escaped.empty() ? name.size() : escaped.size());
  for (uint32_t i = 0; i < e.args_size; ++i) bytes += kArgBytes + std::strlen(args[i].key);
  Reserve(bytes);
  char* p = buf_.data() + len_;
  p = Lit(p, ",\n{\"name\":");
  if (escaped.empty()) {
    *p++ = '"';
    p = Put(p, name);
    *p++ = '"';
  } else {
    p = Put(p, escaped);
  }
  p = Lit(p, ",\"ph\":\"");
  *p++ = e.ph;
  p = Lit(p, "\",\"pid\":");
  p = ja::IntTo(p, e.pid);
  p = Lit(p, ",\"tid\":");
  p = ja::IntTo(p, e.tid);
  p = Lit(p, ",\"ts\":");
  p = ja::DoubleTo(p, e.t_s * 1e6);
  if (e.ph == 'X') {
    p = Lit(p, ",\"dur\":");
    p = ja::DoubleTo(p, e.dur_s * 1e6);
  } else if (e.ph == 'i') {
    p = Lit(p, ",\"s\":\"t\"");
  }
  p = Lit(p, ",\"args\":{");
  bool first = true;
  if (e.request >= 0) {
    p = Lit(p, "\"request\":");
    p = ja::IntTo(p, e.request);
    first = false;
  }
  for (uint32_t i = 0; i < e.args_size; ++i) {
    const Arg& a = args[i];
    if (!first) *p++ = ',';
    first = false;
    *p++ = '"';
    p = Put(p, a.key);
    p = Lit(p, "\":");
    p = a.integer ? ja::IntTo(p, static_cast<int64_t>(a.value)) : ja::DoubleTo(p, a.value);
  }
  p = Lit(p, "}}");
  len_ = static_cast<size_t>(p - buf_.data());
}

void TimelineWriter::WriteEnd() {
  Reserve(8);
  char* p = Lit(buf_.data() + len_, "\n]}\n");
  len_ = static_cast<size_t>(p - buf_.data());
  Drain();
  out_.flush();
  if (!out_) throw InputError(opts_.name, 0, "", "write failed (disk full?)");
}

void TimelineWriter::Span(int rank, Track track, std::string_view name, double t0_s, double dur_s,
                          int64_t request, std::initializer_list<Arg> args) {
  if (!(dur_s > 0)) return;
  Record('X', rank, static_cast<int>(track), name, t0_s, dur_s, request, args);
}

void TimelineWriter::RequestSpan(RequestTrack track, std::string_view name, double t0_s,
                                 double dur_s, int64_t request, std::initializer_list<Arg> args) {
  if (!(dur_s > 0)) return;
  Record('X', ranks_, static_cast<int>(track), name, t0_s, dur_s, request, args);
}

void TimelineWriter::RequestInstant(RequestTrack track, std::string_view name, double t_s,
                                    int64_t request, std::initializer_list<Arg> args) {
  Record('i', ranks_, static_cast<int>(track), name, t_s, 0, request, args);
}

void TimelineWriter::Counter(int rank, std::string_view name, double t_s,
                             std::initializer_list<Arg> args) {
  Record('C', rank, 0, name, t_s, 0, -1, args);
}

void TimelineWriter::Finish() {
  if (!thread_) {
    Format(current_);
    current_.clear();
    return WriteEnd();
  }
  if (!current_.events.empty()) Hand();
  thread_->Finish();
}

}  // namespace kvlanes

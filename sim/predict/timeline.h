// The predicted timeline of a replay as Chrome trace-event JSON, the format Perfetto's JSON
// importer (ui.perfetto.dev) and chrome://tracing read, streamed: each event is written as it is
// produced through a bounded buffer, so no document is held in memory. Track layout (integer pid
// and tid, named by metadata events) in docs/replay.md, "Timeline".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>

namespace kvlanes {

class TimelineWriter {
 public:
  // Threads of a rank's process (tid values).
  enum class Track : int { kCompute = 1, kCollective = 2, kCopyH2D = 3, kCopyD2H = 4 };
  // Threads of the requests process (pid = ranks).
  enum class RequestTrack : int { kArrivals = 1, kQueue = 2 };
  struct Arg {
    const char* key;
    double value;
    bool integer;  // written without a fraction (a count, an id)
  };
  static Arg Int(const char* key, int64_t v) { return {key, static_cast<double>(v), true}; }
  static Arg Num(const char* key, double v) { return {key, v, false}; }

  // Writes the opening and the process and thread metadata of `ranks` ranks and the requests
  // process. `out` must outlive the writer.
  TimelineWriter(std::ostream& out, int ranks);
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  // A complete event ("ph": "X") on a rank's track; times in seconds. dur_s <= 0 writes nothing.
  void Span(int rank, Track track, std::string_view name, double t0_s, double dur_s,
            int64_t request, std::initializer_list<Arg> args);
  // A span on the requests process (e.g. the time a request waited for the instance).
  void RequestSpan(RequestTrack track, std::string_view name, double t0_s, double dur_s,
                   int64_t request, std::initializer_list<Arg> args);
  // An instant event ("ph": "i", thread scope) on the requests process.
  void RequestInstant(RequestTrack track, std::string_view name, double t_s, int64_t request,
                      std::initializer_list<Arg> args);
  // A counter sample ("ph": "C") of a rank's process: one track per arg, "<name> <key>".
  void Counter(int rank, std::string_view name, double t_s, std::initializer_list<Arg> args);
  // REQUIRES: called once, after the last event. Closes the document and flushes.
  void Finish();

 private:
  void Begin(int pid, int tid, std::string_view ph, std::string_view name, double t_s);
  void Args(int64_t request, std::initializer_list<Arg> args);
  void End();
  void Meta(int pid, int tid, const char* kind, std::string_view name, int sort_index);

  std::ostream& out_;
  int ranks_;
  std::string buf_;
  bool first_ = true;
};

}  // namespace kvlanes

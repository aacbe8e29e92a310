// The predicted timeline of a replay as Chrome trace-event JSON, the format Perfetto's JSON
// importer (ui.perfetto.dev) and chrome://tracing read, streamed: no document is held in memory.
// The replay's thread records each event as a small fixed record (its name, times and args) into
// a chunk of events; a second thread (writer_thread.h) formats the chunks in order and writes
// them through a buffer of about 1 MiB. Track layout (integer pid and tid, named by metadata
// events) in docs/replay.md, "Timeline".
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "sim/predict/writer_thread.h"

namespace kvlanes {

// How a TimelineWriter runs. In the background (the default) a second thread formats and writes
// the events; the file is the same bytes either way.
struct TimelineWriterOptions {
  bool background = true;
  // Events per chunk and chunks the queue holds (>= 2). Memory: that many chunks plus the one
  // being filled, about 140 bytes per event (a 56-byte record, its args at 24 bytes each, its
  // name), plus the output buffer: 17 x 1024 events is about 2.4 MiB.
  size_t chunk_events = 1024;
  size_t queue_chunks = 16;
  // The longest an event or Finish() waits for the writer thread to take a chunk or end; past it
  // they throw InputError naming `name` (an output that takes no bytes, e.g. a stalled disk).
  std::chrono::milliseconds wait_limit{std::chrono::minutes(5)};
  // The output's name in errors (the timeline file's path).
  std::string name = "timeline";
};

// A failed write (the stream's state after a buffer is written) or an exception of the writer
// thread is thrown to the caller of a later event or of Finish(), as InputError(options.name, 0,
// "", "write failed (disk full?)") for a write.
class TimelineWriter {
 public:
  // Threads of a rank's process (tid values).
  enum class Track : int { kCompute = 1, kCollective = 2, kCopyH2D = 3, kCopyD2H = 4 };
  // Threads of the requests process (pid = ranks).
  enum class RequestTrack : int { kArrivals = 1, kQueue = 2 };
  struct Arg {
    const char* key;  // a string with static storage (a literal): it is formatted later
    double value;
    bool integer;  // written without a fraction (a count, an id)
  };
  static Arg Int(const char* key, int64_t v) { return {key, static_cast<double>(v), true}; }
  static Arg Num(const char* key, double v) { return {key, v, false}; }

  // Writes the opening and the process and thread metadata of `ranks` ranks and the requests
  // process (into the buffer). `out` must outlive the writer.
  TimelineWriter(std::ostream& out, int ranks, TimelineWriterOptions opts = {});
  // Without Finish() (an error elsewhere), stops the writer thread and drops the events not yet
  // written; the stream then holds no closing "]}", so no reader takes it for a whole document.
  ~TimelineWriter();
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
  // REQUIRES: called once, after the last event. Closes the document, flushes and, in the
  // background, waits for the writer thread to end.
  void Finish();

 private:
  struct Event {
    double t_s = 0, dur_s = 0;
    int64_t request = -1;
    int32_t pid = 0, tid = 0;
    uint32_t name_begin = 0, name_size = 0;  // in Chunk::names
    uint32_t args_begin = 0, args_size = 0;  // in Chunk::args
    char ph = 'X';
  };
  struct Chunk {
    std::vector<Event> events;
    std::vector<Arg> args;
    std::string names;
    void clear() {
      events.clear();
      args.clear();
      names.clear();
    }
  };
  void Record(char ph, int pid, int tid, std::string_view name, double t_s, double dur_s,
              int64_t request, std::initializer_list<Arg> args);
  // The filled chunk to the writer thread (or formatted here, in the foreground).
  void Hand();
  // The writer's side: a chunk's events as JSON into the buffer, the buffer to the stream.
  void Format(const Chunk& c);
  void FormatEvent(const Chunk& c, const Event& e);
  void Reserve(size_t bytes);
  void Drain();
  void WriteEnd();
  void Meta(int pid, int tid, const char* kind, std::string_view name, int sort_index);

  std::ostream& out_;
  int ranks_;
  TimelineWriterOptions opts_;
  // The writer's buffer: [0, len_) is formatted and not yet written; its size is the capacity.
  std::string buf_;
  size_t len_ = 0;
  bool meta_first_ = true;    // the first metadata event has no separator; every later event has
  Chunk current_;             // being filled by the replay's thread
  std::vector<Chunk> slots_;  // the queue's chunks, in the background
  std::unique_ptr<WriterThread> thread_;
};

}  // namespace kvlanes

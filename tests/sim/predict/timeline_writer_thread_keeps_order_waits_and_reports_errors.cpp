// The timeline writer's thread: events in the order they were given and the foreground writer's
// bytes whatever the chunk and queue sizes; each event kind formatted as written out by hand; a
// full queue makes the next event wait (back-pressure) and, past the wait limit, fail with the
// output's name; a failed write reaches the caller (and RunReplay's) with the output's name; a
// writer dropped without Finish() ends its thread and never closes the document.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/predict/timeline.h"
#include "sim/report/report.h"
#include "tests/sim/predict/stream_bufs.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

using namespace std::chrono_literals;
using T = TimelineWriter;

// `n` events of every kind, request r's events carrying r; a name JSON must escape, numbers that
// are not finite, integers up to 2^53 and below zero.
void Events(T& w, int ranks, int64_t n) {
  for (int64_t r = 0; r < n; ++r) {
    const double t = 0.001 * static_cast<double>(r) + 1.0 / 3.0;
    w.RequestInstant(T::RequestTrack::kArrivals, "arrival", t, r, {T::Int("input_tokens", r * 64)});
    w.RequestSpan(T::RequestTrack::kQueue, "queued", t, r % 3 == 0 ? 0.0 : 1e-7 * r, r, {});
    for (int k = 0; k < ranks; ++k) {
      w.Counter(k, "pages used", t, {T::Int("device", r + k), T::Int("host", -k)});
      w.Span(k, T::Track::kCompute, "forward", t + 1e-6, 2.5e-3 + 1e-9 * r, r,
             {T::Int("new_tokens", r), T::Num("compute_s", 1.0 / (r + 1)), T::Num("busy_s", 0.1)});
      if (r % 5 == 0)
        w.Span(k, T::Track::kCopyD2H, r % 10 == 0 ? "backup \"odd\"\tname" : "backup per_layer", t,
               1e-4, r,
               {T::Int("pages", int64_t{1} << 53), T::Num("nan", std::nan("")),
                T::Num("inf", std::numeric_limits<double>::infinity())});
    }
  }
}

std::string WriteTimeline(int ranks, int64_t n, TimelineWriterOptions opts) {
  std::ostringstream out;
  T w(out, ranks, opts);
  Events(w, ranks, n);
  w.Finish();
  return out.str();
}

TimelineWriterOptions Foreground() {
  TimelineWriterOptions o;
  o.background = false;
  return o;
}

TEST_CASE("each kind of event is written as the trace-event format spells it") {
  std::ostringstream out;
  T w(out, 1, Foreground());
  w.Span(0, T::Track::kCompute, "forward", 1.5, 0.25, 7,
         {T::Int("pages", 3), T::Num("busy_s", 0.125)});
  w.Span(0, T::Track::kCopyH2D, "skipped", 1.5, 0, 7, {});  // no duration: nothing
  w.RequestSpan(T::RequestTrack::kQueue, "queued", 2, 1e-6, 8, {});
  w.RequestInstant(T::RequestTrack::kArrivals, "arrival", 0.1, 9, {T::Int("input_tokens", -2)});
  w.Counter(0, "pages used", 3, {T::Int("device", 5), T::Num("host", std::nan(""))});
  w.Span(0, T::Track::kCollective, "a\"b", 1e-9, 1e300, 10, {});
  w.Finish();
  // (Numbers in the shortest form: 1500000 and 250000 as they are, 2e+06 and 1e+05 shorter so.)
  const std::string meta =
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"rank "
      "0\"}},\n"
      "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"sort_index\":"
      "0}}";
  const std::string s = out.str();
  CHECK(s.rfind("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + meta, 0) == 0);
  const std::string events =
      ",\n{\"name\":\"forward\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":1500000,\"dur\":250000,"
      "\"args\":{\"request\":7,\"pages\":3,\"busy_s\":0.125}}"
      ",\n{\"name\":\"queued\",\"ph\":\"X\",\"pid\":1,\"tid\":2,\"ts\":2e+06,\"dur\":1,"
      "\"args\":{\"request\":8}}"
      ",\n{\"name\":\"arrival\",\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":1e+05,\"s\":\"t\","
      "\"args\":{\"request\":9,\"input_tokens\":-2}}"
      ",\n{\"name\":\"pages used\",\"ph\":\"C\",\"pid\":0,\"tid\":0,\"ts\":3e+06,"
      "\"args\":{\"device\":5,\"host\":null}}"
      ",\n{\"name\":\"a\\\"b\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":0.001,\"dur\":1e+306,"
      "\"args\":{\"request\":10}}"
      "\n]}\n";
  REQUIRE(s.size() > events.size());
  CHECK(s.substr(s.size() - events.size()) == events);
  // The document parses, and holds the metadata (1 rank: 2 + 4 x 2, requests: 4) and 5 events.
  CHECK(nlohmann::json::parse(s)["traceEvents"].size() == 14 + 5);
}

TEST_CASE(
    "the writer thread writes the foreground writer's bytes, in order, for any chunk and queue") {
  const int ranks = 4;
  const int64_t n = 3000;  // about 31,000 events, over 4 MiB: several buffers
  const std::string expected = WriteTimeline(ranks, n, Foreground());
  REQUIRE(expected.size() > (size_t{4} << 20));
  // The events are in the order given: request ids never decrease through the document.
  const nlohmann::json doc = nlohmann::json::parse(expected);
  int64_t last = -1, seen = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (!e["args"].contains("request")) continue;
    const int64_t r = e["args"]["request"];
    CHECK(r >= last);
    last = r;
    ++seen;
  }
  CHECK(last == n - 1);
  CHECK(seen > 6 * n);  // all but the counters: 6.5 per request
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{1024}, size_t{100000}}) {
    for (size_t q : {size_t{2}, size_t{3}, size_t{16}}) {
      CAPTURE(chunk);
      CAPTURE(q);
      TimelineWriterOptions bg;
      bg.chunk_events = chunk;
      bg.queue_chunks = q;
      CHECK(WriteTimeline(ranks, n, bg) == expected);
    }
    TimelineWriterOptions fg = Foreground();
    fg.chunk_events = chunk;
    CHECK(WriteTimeline(ranks, n, fg) == expected);
  }
}

TEST_CASE("a full queue makes the next event wait until the writer takes a chunk") {
  GateBuf gate;
  std::ostream out(&gate);
  TimelineWriterOptions opts;
  opts.chunk_events = 1;
  opts.queue_chunks = 2;
  opts.wait_limit = 600s;
  const std::string big(size_t{3} << 20, 'x');  // an event larger than the buffer: written at once
  T w(out, 2, opts);
  w.Counter(0, big, 1, {T::Int("device", 1)});
  WaitUntil([&] { return gate.entered(); });  // the writer thread is held in its first write
  w.Counter(1, "pages used", 2, {T::Int("device", 2)});  // the second slot
  std::atomic<bool> added{false};
  std::thread t([&] {
    w.Counter(0, "pages used", 3, {T::Int("device", 3)});
    added = true;
  });
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(added.load());  // waits for room while the output takes nothing
  gate.open();
  t.join();
  CHECK(added.load());
  w.Finish();
  std::ostringstream expected;
  {
    T f(expected, 2, Foreground());
    f.Counter(0, big, 1, {T::Int("device", 1)});
    f.Counter(1, "pages used", 2, {T::Int("device", 2)});
    f.Counter(0, "pages used", 3, {T::Int("device", 3)});
    f.Finish();
  }
  CHECK(gate.text == expected.str());
}

TEST_CASE("an output that takes nothing fails an event past the wait limit, naming the output") {
  GateBuf gate;
  std::ostream out(&gate);
  std::string message;
  {
    TimelineWriterOptions opts;
    opts.chunk_events = 1;
    opts.queue_chunks = 2;
    opts.wait_limit = 300ms;
    opts.name = "out/stalled.timeline.json";
    T w(out, 1, opts);
    w.Counter(0, std::string(size_t{3} << 20, 'x'), 1, {});
    WaitUntil([&] { return gate.entered(); });
    try {
      for (int k = 0; k < 4; ++k) w.Counter(0, "pages used", 2, {});
    } catch (const InputError& e) {
      message = e.what();
    }
    gate.open();  // the writer thread's write returns; the destructor ends the thread
  }
  CHECK(message ==
        "out/stalled.timeline.json: the timeline writer took no events for 0.3 s (is the output "
        "stalled?)");
  CHECK(gate.text.find("]}") == std::string::npos);  // never presented as whole
}

TEST_CASE("a failed write reaches an event or Finish with the output's name") {
  CheckWriteFailures(
      [](std::ostream& out, bool background) {
        TimelineWriterOptions opts;
        opts.background = background;
        opts.queue_chunks = 4;
        opts.chunk_events = 64;
        opts.name = "full/timeline.json";
        T w(out, 4, opts);
        Events(w, 4, 3000);
        w.Finish();
      },
      "full/timeline.json: write failed (disk full?)");
}

TEST_CASE("a replay whose timeline cannot be written fails with the timeline's name") {
  ReplayConfig cfg;
  for (const std::string& s : std::vector<std::string>{
           "cache.cp_size=4", std::string("hardware.profile=") + KVLANES_SOURCE_DIR +
                                  "/config/profiles/8xh200_nccl_model.yaml"})
    ApplyConfigSetting(s, cfg);
  ValidateConfig(cfg);
  const Trace trace =
      LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake/synthetic_trace.jsonl"}, std::nullopt, {});
  auto policy = MakePolicy("lanes", cfg, trace);
  FullBuf full(size_t{1} << 20);  // the timeline of this replay is about 7 MB
  std::ostream out(&full);
  ReplaySinks sinks;
  sinks.timeline = &out;
  sinks.timeline_name = "out/full.timeline.json";
  std::string message;
  try {
    RunReplay(cfg, *policy, trace, {}, nullptr, sinks);
  } catch (const InputError& e) {
    message = e.what();
  }
  CHECK(message == "out/full.timeline.json: write failed (disk full?)");
}

TEST_CASE("a writer dropped without Finish ends its thread and never closes the document") {
  std::ostringstream out;
  {
    TimelineWriterOptions opts;
    opts.chunk_events = 16;
    opts.queue_chunks = 4;
    T w(out, 4, opts);
    Events(w, 4, 3000);
  }
  CHECK(out.str().find("]}") == std::string::npos);
}

}  // namespace
}  // namespace kvlanes::test

#include <cstdio>
#include <sstream>
#include <string>

#include "sim/predict/timeline.h"
using namespace kvlanes;
using T = TimelineWriter;
static void Events(T& w, int64_t n) {
  for (int64_t r = 0; r < n; ++r) {
    const double t = 0.001 * r;
    w.RequestInstant(T::RequestTrack::kArrivals, "arrival", t, r, {T::Int("input_tokens", r)});
    for (int k = 0; k < 4; ++k) {
      w.Counter(k, "pages used", t, {T::Int("device", r + k)});
      w.Span(k, T::Track::kCompute, "forward", t, 1e-3, r, {T::Num("busy_s", 0.5 * r)});
    }
  }
}
int main() {
  std::string ref;
  for (size_t q : {2, 3, 16})
    for (size_t c : {1, 7, 1024}) {
      std::ostringstream out;
      TimelineWriterOptions o;
      o.queue_chunks = q;
      o.chunk_events = c;
      {
        T w(out, 4, o);
        Events(w, 20000);
        w.Finish();
      }
      if (ref.empty()) ref = out.str();
      std::printf("queue %zu chunk %zu: %zu bytes, %s\n", q, c, out.str().size(),
                  out.str() == ref ? "same" : "DIFFERENT");
    }
  {
    std::ostringstream out;
    TimelineWriterOptions o;
    o.queue_chunks = 3;
    o.chunk_events = 5;
    T w(out, 4, o);
    Events(w, 5000);
  }
  std::printf("dropped without Finish: ok\n");
}

// The queue and thread behind the streamed writers that format and write on a second thread (the
// plan, plan.h; the timeline, timeline.h). One producer (the replay's thread) hands items to one
// writer thread through a ring of `slots` items that the writer's owner keeps and recycles: the
// ring holds slot indices only, so an item's buffers keep their capacity from one use to the next.
// Each side wakes the other only when the other waits and a batch (a quarter of the ring) is
// ready, so the two threads meet about once per batch rather than once per item.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace kvlanes {

struct WriterThreadOptions {
  size_t slots = 16;  // >= 2
  // The longest Acquire() or Finish() waits for the thread to free a slot or end; past it they
  // throw InputError naming `name` (an output that takes no bytes: a stalled disk or pipe).
  std::chrono::milliseconds wait_limit{std::chrono::minutes(5)};
  std::string name = "output";  // the output's name in errors (its path)
  std::string what = "writer";  // the writer in messages ("the plan writer took no ...")
  std::string item = "item";    // what it takes ("... took no request for 0.3 s")
};

class WriterThread {
 public:
  // consume(slot) formats and writes a filled slot; finish() writes the output's end and flushes
  // (after the last consume, only when Finish() was called). Both run on the writer thread and
  // may throw: the first exception is rethrown to the producer's next Acquire() or Finish(), and
  // the thread stops.
  WriterThread(WriterThreadOptions opts, std::function<void(size_t)> consume,
               std::function<void()> finish);
  // Without Finish() (an error elsewhere): stops the thread after the slot it is writing and
  // drops the rest, so the output never gets its end. Ends the process (KV_CHECK) if the thread
  // does not end within max(wait_limit, 1 minute): a write that never returns holds the stream.
  ~WriterThread();
  WriterThread(const WriterThread&) = delete;
  WriterThread& operator=(const WriterThread&) = delete;

  // Waits for a free slot (back-pressure) and returns its index; the caller fills the slot and
  // calls Publish(). Throws the thread's error, or InputError past the wait limit.
  size_t Acquire();
  // Hands the slot of the last Acquire() to the thread.
  void Publish();
  // REQUIRES: called once, after the last Publish(). Lets the thread write what is queued and
  // call finish(), waits for it (at most wait_limit) and throws its error, if any.
  void Finish();

 private:
  struct State;
  void Run();
  WriterThreadOptions opts_;
  std::function<void(size_t)> consume_;
  std::function<void()> finish_;
  std::unique_ptr<State> s_;
};

}  // namespace kvlanes

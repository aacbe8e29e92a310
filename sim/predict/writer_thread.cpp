#include "sim/predict/writer_thread.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <future>
#include <mutex>
#include <thread>
#include <utility>

#include "io/input_error.h"
#include "sim/check.h"

namespace kvlanes {

namespace {
std::string Seconds(std::chrono::milliseconds d) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", static_cast<double>(d.count()) / 1000.0);
  return b;
}
}  // namespace

struct WriterThread::State {
  std::mutex mu;
  std::condition_variable has_items, has_room;
  size_t slots = 0;
  size_t head = 0, count = 0, batch = 1;  // the filled slots are [head, head + count) mod slots
  bool closing = false;                   // Finish(): write what is queued, then finish()
  bool abandon = false;                   // the destructor without Finish(): stop now
  bool stopped = false;                   // the thread has left its loop
  bool producer_waiting = false, consumer_waiting = false;
  std::exception_ptr error;  // the thread's failure, thrown to the producer
  std::promise<void> ended;
  std::future<void> ended_f = ended.get_future();
  std::thread thread;
};

WriterThread::WriterThread(WriterThreadOptions opts, std::function<void(size_t)> consume,
                           std::function<void()> finish)
    : opts_(std::move(opts)),
      consume_(std::move(consume)),
      finish_(std::move(finish)),
      s_(std::make_unique<State>()) {
  KV_CHECK(opts_.slots >= 2, opts_.what << " queue of " << opts_.slots << " slots");
  s_->slots = opts_.slots;
  s_->batch = std::max<size_t>(1, opts_.slots / 4);
  s_->thread = std::thread([this] { Run(); });
}

WriterThread::~WriterThread() {
  {
    std::lock_guard<std::mutex> lk(s_->mu);
    s_->abandon = true;
  }
  s_->has_items.notify_one();
  // A thread blocked in a write that never returns cannot be stopped or left running (it holds
  // the stream): that is reported and the process ends, rather than hanging here.
  // The wait is at least a minute: a short wait_limit is for the producer's waits.
  const auto limit = std::max<std::chrono::milliseconds>(opts_.wait_limit, std::chrono::minutes(1));
  if (s_->ended_f.wait_for(limit) != std::future_status::ready)
    KV_CHECK(false, opts_.name << ": the " << opts_.what << " thread did not end within "
                               << Seconds(limit) << " s (a write that never returns)");
  s_->thread.join();
}

void WriterThread::Run() {
  State& b = *s_;
  try {
    for (;;) {
      std::unique_lock<std::mutex> lk(b.mu);
      // Waits in slices so that the flags are looked at even without a wake-up; the producer
      // always ends the wait by adding, by Finish() or by the destructor, so no limit applies.
      while (!b.abandon && !b.closing && b.count < b.batch) {
        b.consumer_waiting = true;
        b.has_items.wait_for(lk, std::chrono::seconds(1));
        b.consumer_waiting = false;
      }
      if (b.abandon || (b.closing && b.count == 0)) break;
      const size_t k = b.count;
      lk.unlock();
      for (size_t i = 0; i < k; ++i) {
        // Filled slots belong to this thread until released: the producer only fills past them.
        consume_(b.head);
        bool wake = false;
        {
          std::lock_guard<std::mutex> g(b.mu);
          b.head = (b.head + 1) % b.slots;
          --b.count;
          wake = b.producer_waiting && b.slots - b.count >= b.batch;
          if (b.abandon) break;
        }
        if (wake) b.has_room.notify_one();
      }
    }
    bool finish = false;
    {
      std::lock_guard<std::mutex> lk(b.mu);
      finish = b.closing && !b.abandon;
    }
    if (finish) finish_();
  } catch (...) {
    std::lock_guard<std::mutex> lk(b.mu);
    b.error = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lk(b.mu);
    b.stopped = true;
  }
  b.has_room.notify_one();
  b.ended.set_value();
}

size_t WriterThread::Acquire() {
  State& b = *s_;
  std::unique_lock<std::mutex> lk(b.mu);
  if (b.count == b.slots && !b.stopped) {
    b.producer_waiting = true;
    const bool room = b.has_room.wait_for(
        lk, opts_.wait_limit, [&] { return b.count + b.batch <= b.slots || b.stopped; });
    b.producer_waiting = false;
    if (!room)
      throw InputError(opts_.name, 0, "",
                       "the " + opts_.what + " took no " + opts_.item + " for " +
                           Seconds(opts_.wait_limit) + " s (is the output stalled?)");
  }
  if (b.error) std::rethrow_exception(b.error);
  KV_CHECK(!b.stopped, opts_.name << ": " << opts_.what << " thread ended before Finish()");
  // The thread only takes slots below head + count, and taking one moves head and count
  // together, so this slot stays free until Publish().
  return (b.head + b.count) % b.slots;
}

void WriterThread::Publish() {
  State& b = *s_;
  std::unique_lock<std::mutex> lk(b.mu);
  ++b.count;
  const bool wake = b.consumer_waiting && b.count >= b.batch;
  lk.unlock();
  if (wake) b.has_items.notify_one();
}

void WriterThread::Finish() {
  State& b = *s_;
  {
    std::lock_guard<std::mutex> lk(b.mu);
    b.closing = true;
  }
  b.has_items.notify_one();
  if (b.ended_f.wait_for(opts_.wait_limit) != std::future_status::ready)
    throw InputError(opts_.name, 0, "",
                     "the " + opts_.what + " did not finish within " + Seconds(opts_.wait_limit) +
                         " s (is the output stalled?)");
  std::lock_guard<std::mutex> lk(b.mu);
  if (b.error) std::rethrow_exception(b.error);
}

}  // namespace kvlanes

// PlanWriter (plan.h): the plan stream's lines formatted and written in request order, on a
// second thread by default. The queue between the replay's thread and the writer thread is a
// ring of RequestPlan objects that are swapped in and out, never freed, so that after the first
// requests no plan list is allocated on either side. Each side wakes the other only when the
// other waits and a batch (a quarter of the queue) is ready, so the two threads meet about once
// per batch rather than once per request.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <future>
#include <mutex>
#include <ostream>
#include <thread>
#include <utility>

#include "sim/check.h"
#include "sim/predict/plan.h"
#include "traces/input_error.h"

namespace kvlanes {

namespace {
constexpr size_t kPlanBufferBytes = size_t{1} << 20;

std::string Seconds(std::chrono::milliseconds d) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", static_cast<double>(d.count()) / 1000.0);
  return b;
}
}  // namespace

struct PlanWriter::Background {
  std::mutex mu;
  std::condition_variable has_plans, has_room;
  std::vector<RequestPlan> slots;  // ring: the filled plans are [head, head + count)
  size_t head = 0, count = 0, batch = 1;
  bool closing = false;  // Finish(): write what is queued, then the trailer
  bool abandon = false;  // the destructor without Finish(): stop now
  bool stopped = false;  // the thread has left its loop
  bool producer_waiting = false, consumer_waiting = false;
  std::exception_ptr error;  // the writer thread's failure, thrown to the producer
  std::promise<void> ended;
  std::future<void> ended_f = ended.get_future();
  std::thread thread;
};

PlanWriter::PlanWriter(std::ostream& out, const ReplayConfig& cfg, PlanWriterOptions opts)
    : out_(out), cfg_(cfg), opts_(std::move(opts)) {
  buf_.reserve(kPlanBufferBytes + (kPlanBufferBytes >> 2));
  buf_ = PlanHeader(cfg).dump();
  buf_.push_back('\n');
  if (!opts_.background) return;
  KV_CHECK(opts_.queue_plans >= 2, "PlanWriter queue of " << opts_.queue_plans << " plans");
  bg_ = std::make_unique<Background>();
  bg_->slots.resize(opts_.queue_plans);
  bg_->batch = std::max<size_t>(1, opts_.queue_plans / 4);
  bg_->thread = std::thread([this] { Run(); });
}

PlanWriter::~PlanWriter() {
  if (!bg_) return;
  {
    std::lock_guard<std::mutex> lk(bg_->mu);
    bg_->abandon = true;
  }
  bg_->has_plans.notify_one();
  // A thread blocked in a write that never returns cannot be stopped or left running (it holds
  // the stream): that is reported and the process ends, rather than hanging here.
  // The wait is at least a minute: a short wait_limit is for the producer's waits.
  const auto limit = std::max<std::chrono::milliseconds>(opts_.wait_limit, std::chrono::minutes(1));
  if (bg_->ended_f.wait_for(limit) != std::future_status::ready)
    KV_CHECK(false, opts_.name << ": the plan writer thread did not end within " << Seconds(limit)
                               << " s (a write that never returns)");
  bg_->thread.join();
}

void PlanWriter::Format(const RequestPlan& p) {
  ops_ += static_cast<int64_t>(AppendPlanLine(p, cfg_, buf_));
  ++requests_;
  if (buf_.size() >= kPlanBufferBytes) Drain();
}

void PlanWriter::Drain() {
  out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
  buf_.clear();
  if (!out_) throw InputError(opts_.name, 0, "", "write failed (disk full?)");
}

void PlanWriter::Run() {
  Background& b = *bg_;
  try {
    for (;;) {
      std::unique_lock<std::mutex> lk(b.mu);
      // Waits in slices so that the flags are looked at even without a wake-up; the producer
      // always ends the wait by adding, by Finish() or by the destructor, so no limit applies.
      while (!b.abandon && !b.closing && b.count < b.batch) {
        b.consumer_waiting = true;
        b.has_plans.wait_for(lk, std::chrono::seconds(1));
        b.consumer_waiting = false;
      }
      if (b.abandon || (b.closing && b.count == 0)) break;
      const size_t k = b.count;
      lk.unlock();
      for (size_t i = 0; i < k; ++i) {
        // Filled slots belong to this thread until released: the producer only writes past them.
        Format(b.slots[(b.head) % b.slots.size()]);
        bool wake = false;
        {
          std::lock_guard<std::mutex> g(b.mu);
          b.head = (b.head + 1) % b.slots.size();
          --b.count;
          wake = b.producer_waiting && b.slots.size() - b.count >= b.batch;
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
    if (finish) {
      buf_ += PlanTrailer(requests_, ops_).dump();
      buf_.push_back('\n');
      Drain();
      out_.flush();
      if (!out_) throw InputError(opts_.name, 0, "", "write failed (disk full?)");
    }
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

void PlanWriter::Add(const RequestPlan& p) {
  if (!bg_) return Format(p);
  Enqueue([&](RequestPlan& slot) { slot = p; });  // copy-assigned: the slot's lists are reused
}

void PlanWriter::Add(RequestPlan&& p) {
  if (!bg_) return Format(p);
  Enqueue([&](RequestPlan& slot) { std::swap(slot, p); });
}

template <typename Fill>
void PlanWriter::Enqueue(Fill fill) {
  Background& b = *bg_;
  std::unique_lock<std::mutex> lk(b.mu);
  if (b.count == b.slots.size() && !b.stopped) {
    b.producer_waiting = true;
    const bool room = b.has_room.wait_for(
        lk, opts_.wait_limit, [&] { return b.count + b.batch <= b.slots.size() || b.stopped; });
    b.producer_waiting = false;
    if (!room)
      throw InputError(opts_.name, 0, "",
                       "the plan writer took no request for " + Seconds(opts_.wait_limit) +
                           " s (is the output stalled?)");
  }
  if (b.error) std::rethrow_exception(b.error);
  KV_CHECK(!b.stopped, opts_.name << ": plan writer thread ended before Finish()");
  fill(b.slots[(b.head + b.count) % b.slots.size()]);
  ++b.count;
  const bool wake = b.consumer_waiting && b.count >= b.batch;
  lk.unlock();
  if (wake) b.has_plans.notify_one();
}

void PlanWriter::Finish() {
  if (!bg_) {
    buf_ += PlanTrailer(requests_, ops_).dump();
    buf_.push_back('\n');
    Drain();
    out_.flush();
    if (!out_) throw InputError(opts_.name, 0, "", "write failed (disk full?)");
    return;
  }
  Background& b = *bg_;
  {
    std::lock_guard<std::mutex> lk(b.mu);
    b.closing = true;
  }
  b.has_plans.notify_one();
  if (b.ended_f.wait_for(opts_.wait_limit) != std::future_status::ready)
    throw InputError(opts_.name, 0, "",
                     "the plan writer did not finish within " + Seconds(opts_.wait_limit) +
                         " s (is the output stalled?)");
  std::lock_guard<std::mutex> lk(b.mu);
  if (b.error) std::rethrow_exception(b.error);
}

}  // namespace kvlanes

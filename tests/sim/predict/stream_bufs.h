// Stream buffers for the writer-thread tests (plan, timeline): an output that stalls until it is
// opened, and one that fills up; a check that write failures reach the writer's caller.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <ostream>
#include <streambuf>
#include <string>
#include <thread>

#include "io/input_error.h"

namespace kvlanes::test {

// A stream buffer whose writes wait until open() (a stalled disk or pipe), then go to `text`.
class GateBuf : public std::streambuf {
 public:
  void open() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  bool entered() const { return entered_.load(); }
  std::string text;

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    entered_ = true;
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return open_; });
    text.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  std::atomic<bool> entered_{false};
};

// A stream buffer that takes `room` bytes and fails every write after them (a full disk).
class FullBuf : public std::streambuf {
 public:
  explicit FullBuf(size_t room) : room_(room) {}

 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override {
    if (static_cast<size_t>(n) > room_) return 0;
    room_ -= static_cast<size_t>(n);
    return n;
  }
  int_type overflow(int_type c) override {
    return room_ > 0 && c != traits_type::eof() ? (--room_, c) : traits_type::eof();
  }

 private:
  size_t room_;
};

inline void WaitUntil(const std::function<bool()>& cond) {
  for (int i = 0; i < 6000 && !cond(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(cond());
}

// write(out, background) against outputs that are full after 0 bytes, 100 bytes and 1 MiB, in
// the foreground and in the background, must throw InputError `expected`.
inline void CheckWriteFailures(const std::function<void(std::ostream&, bool)>& write,
                               const std::string& expected) {
  for (size_t room : {size_t{0}, size_t{100}, size_t{1} << 20}) {
    CAPTURE(room);
    for (bool background : {false, true}) {
      CAPTURE(background);
      FullBuf full(room);
      std::ostream out(&full);
      std::string message;
      try {
        write(out, background);
      } catch (const InputError& e) {
        message = e.what();
      }
      CHECK(message == expected);
    }
  }
}

}  // namespace kvlanes::test

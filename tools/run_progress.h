// Progress of a command that runs many replays (compare, sweep), on stderr: on a terminal one
// line rewritten in place with the runs done, the time spent and the time left; otherwise one
// line per finished run with the same figures, so a log shows every step.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

namespace kvlanes::cli {

class RunProgress {
 public:
  // `what`: the command ("sweep"); `total`: the runs (or other `unit`s); nothing is printed
  // unless `enabled`.
  RunProgress(std::string what, size_t total, bool enabled, std::string unit = "runs")
      : what_(std::move(what)),
        unit_(std::move(unit)),
        total_(total),
        enabled_(enabled),
        tty_(isatty(2) != 0) {}

  // One more run finished; `step` says which and what it gave ("lru x=1: token hit ratio 0.5").
  // The time left is the mean time per finished run times the runs left (runs in parallel
  // finish in waves, so it is an estimate that settles as runs finish).
  void Done(const std::string& step) {
    ++done_;
    if (!enabled_) return;
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double left = spent / static_cast<double>(done_) * static_cast<double>(total_ - done_);
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s: %zu/%zu %s, %.1f s spent, about %.0f s left (%s)",
                   what_.c_str(), done_, total_, unit_.c_str(), spent, left, step.c_str());
      if (done_ == total_) std::fprintf(stderr, "\n");
      return;
    }
    std::fprintf(stderr, "%s: [%zu/%zu] %s (%.1f s spent, about %.0f s left)\n", what_.c_str(),
                 done_, total_, step.c_str(), spent, left);
  }

 private:
  std::string what_;
  std::string unit_;
  size_t total_;
  bool enabled_;
  bool tty_;
  size_t done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace kvlanes::cli

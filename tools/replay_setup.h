// Options shared by every command that replays a trace (replay now; compare, sweep, explain
// later): trace files and format, config file, policy, --set overrides.
#pragma once

#include <boost/program_options.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "sim/config.h"
#include "traces/trace.h"
#include "traces/trace_reader.h"

namespace kvlanes::cli {

// `policy`: whether to list --policy (compare and sweep take --policies and leave it out of
// their help; they parse it hidden only to say so).
void AddReplayOptions(boost::program_options::options_description& desc, bool policy = true);
// --max-file-bytes and --max-line-bytes (docs/input_limits.md): stored into *bind when given,
// else read from the variables map (LoadTraceFor does).
void AddTraceLimitOptions(boost::program_options::options_description& desc,
                          TraceOptions* bind = nullptr);

struct ReplayInputs {
  ReplayConfig config;
  Trace trace;
};

// Defaults, then --config, then --policy, then each --set in order; validated; then the trace
// loaded with the config's page size. Throws InputError.
ReplayInputs LoadReplayInputs(const boost::program_options::variables_map& vm);
// A warning (one line, "" when none) for a config whose host tier holds fewer pages per lane
// than its device tier: host hits then come only from the few evicted pages the host still
// holds, a capacity curve over device pages goes flat, and host hits drop to 0 past the host's
// size. Capacities must be resolved into pages (ValidateConfig).
std::string HostTierWarning(const ReplayConfig& c);
// The trace files of --trace read for `cfg` (its page size, block size and format), as
// LoadReplayInputs does; for runs whose config differs from the base in those keys.
Trace LoadTraceFor(const ReplayConfig& cfg, const boost::program_options::variables_map& vm);

// Progress on stderr for long runs (shown once a run has taken over a second of wall time):
// "\r" updates on a terminal, a line every 10% otherwise.
class Progress {
 public:
  Progress(std::string what, size_t total, bool enabled);
  void Update(size_t done);
  void Finish();

 private:
  std::string what_;
  size_t total_;
  bool enabled_;
  bool tty_;
  size_t last_decile_ = 0;
  bool open_line_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace kvlanes::cli

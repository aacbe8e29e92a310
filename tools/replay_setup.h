// Options shared by every command that replays a trace (replay, compare, sweep, explain, ...):
// trace files and format, config file, policy, --set overrides, read into the driver's
// ReplaySources (driver/replay_inputs.h), and progress on stderr.
#pragma once

#include <boost/program_options.hpp>
#include <chrono>
#include <initializer_list>
#include <string>
#include <vector>

#include "driver/replay_inputs.h"
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

using driver::HostTierWarning;
using driver::ReplayInputs;

// The driver's LoadReplayInputs (driver/replay_inputs.h) on the sources the options give:
// --config, --policy, --profile, --format, each --set in order, --trace with its limits and
// --allow-unsorted; errors name the options. `outputs` are the command's output options: none
// may name the hardware profile the config sets. Throws InputError.
ReplayInputs LoadReplayInputs(const boost::program_options::variables_map& vm,
                              std::initializer_list<const char*> outputs = {});
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

// What a replay is made from, assembled the same way for every front end (the kvlanes commands
// through tools/replay_setup.h, the Python module): the config from its sources in a fixed
// order, validated and checked, and the trace read for it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/output_file.h"
#include "sim/config.h"
#include "traces/trace.h"
#include "traces/trace_reader.h"

namespace kvlanes::driver {

// The sources of one replay's inputs, as a front end was given them. `*_field` names the option
// or parameter an error about that source is located at ("--policy", "--format").
struct ReplaySources {
  std::optional<std::string> config_file;
  std::optional<std::string> policy;
  std::string policy_field = "policy";
  std::optional<std::string> profile;
  std::string profile_field = "hardware.profile";
  std::optional<std::string> format;  // a trace.format value
  std::string format_field = "trace.format";
  std::vector<std::string> sets;  // "key=value", applied in order, last
  std::vector<std::string> traces;
  std::string traces_field = "trace";
  TraceOptions trace_options;  // page and block tokens are taken from the config
  // The front end's output files: none may be the hardware profile the config names (a profile
  // set in a config file is no option of the command, so its own output check cannot see it).
  std::vector<OutputOption> outputs;
};

struct ReplayInputs {
  ReplayConfig config;
  Trace trace;
};

// Defaults, then the config file, then the policy, the profile and the format, then each `set`
// in order; validated; the named inputs checked (CheckNamedInputs) and `outputs` checked against
// the hardware profile (CheckDistinctOutputs); then the trace read with the
// config's page size (LoadTraceFor; no trace is an error at `traces_field`). Throws InputError.
ReplayInputs LoadReplayInputs(const ReplaySources& src);
// The checks ValidateConfig cannot make (sim/ knows no policy and opens no file), located where
// the key was set, so a config file's typo names its file and line: the policy name, and a
// hardware profile that cannot be opened (otherwise refused later, naming only the missing path).
void CheckNamedInputs(const ReplayConfig& c);
// The trace files `paths` read for `cfg` (its page size, block size and format; the other
// options from `opt`). Throws InputError, also for a trace that holds no requests.
Trace LoadTraceFor(const ReplayConfig& cfg, const std::vector<std::string>& paths,
                   TraceOptions opt);
// A warning (one line, "" when none) for a config whose host tier holds fewer pages per lane
// than its device tier: host hits then come only from the few evicted pages the host still
// holds, a capacity curve over device pages goes flat, and host hits drop to 0 past the host's
// size. Capacities must be resolved into pages (ValidateConfig).
std::string HostTierWarning(const ReplayConfig& c);

}  // namespace kvlanes::driver

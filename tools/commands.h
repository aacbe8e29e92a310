// The subcommands of the `kvlanes` executable. Each parses its own options with
// Boost.Program_options; argv[0] is the command's full name (e.g. "kvlanes trace stats").
// Return value is the process exit code: 0 success, 1 a run that failed (e.g. verification),
// 2 bad usage or bad input (the message names file, line and field).
#pragma once

#include <boost/program_options.hpp>

namespace kvlanes::cli {

using CommandFn = int (*)(int argc, const char* const* argv);

int CmdReplay(int argc, const char* const* argv);        // tools/cmd_replay.cpp
int CmdTraceStats(int argc, const char* const* argv);    // tools/cmd_trace_stats.cpp
int CmdBenchKernels(int argc, const char* const* argv);  // tools/cmd_bench_kernels.cpp
int CmdBenchReplay(int argc, const char* const* argv);   // tools/cmd_bench_replay.cpp
int CmdCompare(int argc, const char* const* argv);       // tools/cmd_compare.cpp
int CmdSweep(int argc, const char* const* argv);         // tools/cmd_sweep.cpp
int CmdMrc(int argc, const char* const* argv);           // tools/cmd_mrc.cpp
int CmdBenchMrc(int argc, const char* const* argv);      // tools/cmd_bench_mrc.cpp
int CmdSweepMerge(int argc, const char* const* argv);    // tools/cmd_sweep.cpp
int CmdExplain(int argc, const char* const* argv);       // tools/cmd_explain.cpp
int CmdExec(int argc, const char* const* argv);          // tools/cmd_exec.cpp
int CmdCalibrate(int argc, const char* const* argv);     // tools/cmd_calibrate.cpp
// `calibrate --sweep`: a recipe's sweeps, then the fit (tools/cmd_calibrate_sweep.cpp).
int CmdCalibrateSweep(int argc, const char* const* argv);
int CmdCheck(int argc, const char* const* argv);       // tools/cmd_check.cpp
int CmdBenchSweep(int argc, const char* const* argv);  // tools/cmd_bench_sweep.cpp
int CmdBenchRead(int argc, const char* const* argv);   // tools/cmd_bench_read.cpp
int CmdRegRecord(int argc, const char* const* argv);   // tools/cmd_regress.cpp
int CmdRegCheck(int argc, const char* const* argv);    // tools/cmd_regress.cpp
int CmdRegConform(int argc, const char* const* argv);  // tools/cmd_regress.cpp
// tools/cmd_bench_policies.cpp
int CmdBenchPolicies(int argc, const char* const* argv);

// The options of `bench sweep` and `calibrate`, which a calibration recipe's keys name.
boost::program_options::options_description SweepOptionsDescription();      // cmd_bench_sweep.cpp
boost::program_options::options_description CalibrateOptionsDescription();  // cmd_calibrate.cpp

// The whole `kvlanes` command line (tools/kvlanes_main.cpp): what `main` calls, and what a binary
// built outside this repository calls after registering its policies (docs/policies.md).
int Main(int argc, char** argv);

}  // namespace kvlanes::cli

// Many replays of one trace: the engine behind `kvlanes compare` (several policies) and
// `kvlanes sweep` (a grid of policies x config values, sharded over machines, merged back).
// Runs are independent and each result lands at its run's index, so the output is the same
// for any number of threads and any split into shards.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/config.h"
#include "sim/engine/replay_engine.h"
#include "traces/trace.h"

namespace kvlanes::driver {

// One replay: a registered policy on a validated config and the trace it replays.
struct ReplayJob {
  std::string policy;
  ReplayConfig config;
  const Trace* trace = nullptr;  // not owned; outlives the run
  EngineOptions engine = {};     // e.g. check_invariants for conformance runs
};

// Runs every job on up to `threads` threads and returns the reports in job order. on_done(i,
// report) is called once per finished job, one call at a time, in completion order (progress).
// Rethrows the first exception of any job after all threads have stopped.
std::vector<nlohmann::ordered_json> RunReplayJobs(
    const std::vector<ReplayJob>& jobs, int threads,
    const std::function<void(size_t, const nlohmann::ordered_json&)>& on_done);

// "a,b,c" -> {"a","b","c"}; empty items are an error naming `option`.
std::vector<std::string> SplitList(const std::string& list, const std::string& option);

// One --vary axis: a config key and the values it takes, as written (YAML scalars).
struct VaryAxis {
  std::string key;
  std::vector<std::string> values;
};
// Parses "key=v1,v2,...", where an item may be a range: "start:end:step" (arithmetic) or
// "start:end:xF" (geometric, factor F > 1), end included when reached; integers stay integers.
// Throws InputError naming --vary.
VaryAxis ParseVary(const std::string& arg);

// The grid: every policy x every combination of axis values. Run i is policy-major, then the
// axes in the order given, the first outermost.
struct Grid {
  std::vector<std::string> policies;
  std::vector<VaryAxis> axes;
  size_t size() const;
  // The policy and (key, value) settings of run i.
  std::pair<std::string, std::vector<std::pair<std::string, std::string>>> Run(size_t i) const;
};

// The most runs one sweep grid may hold (every shard builds and checks every run's config before
// running its own): a product of vary lists beyond it is refused before any work instead of
// running for days (or wrapping the count).
inline constexpr size_t kMaxSweepRuns = size_t{1} << 20;

// Throws InputError naming `option` when the grid holds more than kMaxSweepRuns runs.
void CheckGridSize(const Grid& grid, const std::string& option);

// Base config with run i's settings applied and validated; errors name the --vary value.
ReplayConfig GridRunConfig(const ReplayConfig& base, const Grid& grid, size_t i);

// The JSON `kvlanes sweep --json` writes (and the Python module's sweep returns): the grid, the
// shard (when given: index, count) and the runs `runs` (grid indices, ascending) with their
// vary values and reports (reports[j] is run runs[j]'s).
nlohmann::ordered_json SweepDoc(const ReplayConfig& base, const Grid& grid,
                                const std::vector<std::string>& trace,
                                const std::vector<size_t>& runs,
                                const std::vector<nlohmann::ordered_json>& reports,
                                std::optional<std::pair<size_t, size_t>> shard);

// "I/N" with 0 <= I < N (throws InputError naming --shard). Run i belongs to shard i mod N.
std::pair<size_t, size_t> ParseShard(const std::string& arg);

// The CSV of a list of runs (compare or sweep JSON `runs`): one header line, one row per run;
// the vary keys of `grid` (if any) come first. Formulas of derived columns: docs/policies.md.
std::string RunsToCsv(const nlohmann::ordered_json& runs,
                      const std::vector<std::string>& vary_keys);
// The CSV's sidecar (written as CSV_FILE.context.json, docs/replay.md "Context"): per data row
// (1-based, after the header line) the run's context block and effective config.
nlohmann::ordered_json RunsCsvContext(const nlohmann::ordered_json& runs);
// Writes RunsToCsv to `path` and RunsCsvContext to `path`.context.json (each whole or absent).
void WriteRunsCsv(const std::string& path, const nlohmann::ordered_json& runs,
                  const std::vector<std::string>& vary_keys);
// The console table of the same runs, written to `out`.
void PrintRunsTable(FILE* out, const nlohmann::ordered_json& runs,
                    const std::vector<std::string>& vary_keys);

// Joins shard outputs of one sweep (files written by `kvlanes sweep --shard I/N --json F`) into
// the JSON an unsharded run writes. Throws InputError naming the file at fault: not a sweep
// file, a different grid, a shard given twice or missing, runs missing or duplicated.
nlohmann::ordered_json MergeSweepFiles(const std::vector<std::string>& paths);

}  // namespace kvlanes::driver

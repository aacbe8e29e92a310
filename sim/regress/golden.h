// Golden files of `kvlanes regress` and the comparison of a rerun against one.
//
//   {"regress_version": 1,
//    "provenance": {"kvlanes_version", "commit", "build_type", "suite", "suite_fnv1a64"},
//    "entries": {"CASE/POLICY": {"token_hit_ratio": 0.06, "evicted_pages.device": 134210, ...}}}
//
// Tolerances are not stored: they are the suite's, so loosening one needs no new baseline.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/regress/suite.h"

namespace kvlanes::regress {

using Json = nlohmann::ordered_json;

// The golden leaves of one run: every metric its case pins, from the run's replay report.
Json EntryLeaves(const SuiteCase& c, const Json& report);

// This build and this suite: version and commit (io/build_info.h), build type, suite path
// and hash.
Json Provenance(const Suite& suite);

// The golden file of a recorded suite. REQUIRES: leaves[i] belongs to runs[i].
Json GoldenJson(const Suite& suite, const std::vector<SuiteRun>& runs,
                const std::vector<Json>& leaves);

// A golden file as read back. Throws InputError naming the file (and line and field) when it is
// not a golden file of this version.
struct Golden {
  std::string path;
  Json provenance;
  Json entries;  // entry -> {leaf: number}
};
Golden LoadGolden(const std::string& path);

// One leaf that did not hold. A missing side is null: a metric or run that has no baseline yet
// (`now` is new) or a lane that no longer exists.
struct Moved {
  std::string entry;
  std::string leaf;
  Json baseline;
  Json now;
  Tolerance tolerance;
};

struct CheckResult {
  size_t entries = 0;  // runs checked
  size_t leaves = 0;   // leaves checked
  std::vector<Moved> moved;
  // Golden entries or leaves the suite no longer pins (not a failure; --update drops them).
  std::vector<std::string> stale;
};

// Compares the rerun (leaves[i] of runs[i]) with the golden file, leaf by leaf, each within its
// metric's tolerance. A per-name leaf (gather.method_counts.KEY) absent on one side counts as 0.
CheckResult Compare(const Suite& suite, const std::vector<SuiteRun>& runs,
                    const std::vector<Json>& leaves, const Golden& golden);

// The golden file with only the moved leaves replaced by their new values (added when new,
// removed when gone), stale entries and leaves dropped, every other baseline kept as it was, and
// the provenance of this build.
Json UpdatedGolden(const Suite& suite, const std::vector<SuiteRun>& runs,
                   const std::vector<Json>& leaves, const Golden& golden,
                   const CheckResult& result);

// The table of moved leaves: entry, metric, baseline, now, delta, tolerance.
std::string MovedTable(const CheckResult& result);

// JUnit XML: one testsuite (the suite file), one testcase per run (classname the case, name the
// policy), a <failure> listing each moved leaf of that run.
std::string JUnitXml(const Suite& suite, const std::vector<SuiteRun>& runs,
                     const CheckResult& result);

}  // namespace kvlanes::regress

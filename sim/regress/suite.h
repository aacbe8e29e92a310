// A regress suite (docs/policies.md, "Pinning a policy with regress"): YAML cases, each a set of
// traces, a config, the policies to replay and the metrics to pin with their tolerances.
//
//   metrics: {token_hit_ratio: {rel: 1e-12}}    # optional: for cases without `metrics`
//   policies: [lanes, lru]                      # optional: for cases without `policies`
//   cases:
//     - name: conv
//       traces: [traces/mooncake_excerpt.jsonl]  # relative to the suite file
//       config: config/default.yaml              # optional, relative to the suite file
//       profile: config/profiles/h200.yaml       # optional (needed by predicted.* metrics)
//       set: {cache.cp_size: 4}                  # config keys, applied after `config`
//       policies: [lanes, lru]                   # or `all`: every registered policy
//       metrics: {token_hit_ratio: {abs: 0.0001}, evicted_pages: {}}
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/regress/metrics.h"

namespace kvlanes::regress {

struct MetricSpec {
  std::string name;  // as written in the suite (a metric or a group)
  std::vector<const MetricInfo*> metrics;
  Tolerance tolerance;
  int64_t line = 0;  // of the name in the suite file
};

struct SuiteCase {
  std::string name;
  int64_t line = 0;
  std::vector<std::string> traces;  // paths resolved against the suite's folder
  ReplayConfig config;              // validated, `policy` unset (each run sets its own)
  std::vector<std::string> policies;
  std::vector<MetricSpec> metrics;
};

struct Suite {
  std::string path;  // as given
  std::string hash;  // FNV-1a 64 of the file's bytes, 16 hex digits
  std::vector<SuiteCase> cases;
};

// The policy names a suite may use; supplied by the caller so that this library does not depend
// on policies/ (driver/regress_run.h passes the registry).
struct PolicyCatalog {
  std::function<std::vector<std::string>()> all;       // for `policies: all`
  std::function<void(const std::string& name)> check;  // throws InputError when unknown
};

// Reads and validates a suite: every key known, every trace, config and profile file present,
// every policy and metric known, tolerances finite and >= 0, case names unique. Throws
// InputError naming the suite file, the line and the field ("cases[1].metrics.foo").
Suite LoadSuite(const std::string& path, const PolicyCatalog& policies);

// The runs of a suite, in order: case-major, then the case's policies. Golden entry names are
// "CASE/POLICY".
struct SuiteRun {
  size_t case_index;
  std::string policy;
  std::string entry;
};
std::vector<SuiteRun> SuiteRuns(const Suite& suite);

// FNV-1a 64 of `bytes` as 16 lower-case hex digits.
std::string Fnv1a64Hex(const std::string& bytes);

}  // namespace kvlanes::regress

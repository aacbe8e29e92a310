// Golden regression: report metrics of every registered policy on every replay case, compared
// field by field with tests/policies/golden/replay_metrics.json.
// Tolerances: counts are exact (the replay is deterministic); ratios and predicted seconds
// within 1e-12 relative. Predicted metrics: tests/policies/golden/predicted_metrics.json.
// Regenerate (never by hand): KVLANES_UPDATE_GOLDEN=1 ./build/kvlanes_policies_tests
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "policies/registry.h"
#include "sim/report/report.h"
#include "tests/policies/replay_cases.h"

namespace kvlanes::test {
namespace {

const char* const kGoldenPath = KVLANES_SOURCE_DIR "/tests/policies/golden/replay_metrics.json";
const char* const kPredictedGoldenPath =
    KVLANES_SOURCE_DIR "/tests/policies/golden/predicted_metrics.json";

// The metrics that are pinned, as JSON pointers into the report.
const char* const kFields[] = {"/requests",
                               "/input_tokens",
                               "/device_hit_tokens",
                               "/host_hit_tokens",
                               "/host_match_tokens",
                               "/computed_tokens",
                               "/token_hit_ratio",
                               "/uncached_requests",
                               "/lane_deficit_failures",
                               "/ancestor_unlocks",
                               "/evicted_pages/device",
                               "/evicted_pages/host",
                               "/load_back/pages",
                               "/load_back/failed",
                               "/host_writes/pages",
                               "/host_writes/refused",
                               "/inserted_pages",
                               "/duplicate_pages",
                               "/gather/method_counts"};

nlohmann::ordered_json Metrics(const nlohmann::ordered_json& report) {
  nlohmann::ordered_json m;
  for (const char* f : kFields) m[f] = report.at(nlohmann::ordered_json::json_pointer(f));
  nlohmann::ordered_json peaks = nlohmann::ordered_json::array();
  for (const auto& l : report["lanes"])
    peaks.push_back({l["device_peak_pages"], l["host_peak_pages"]});
  m["/lanes/peak_pages"] = peaks;
  return m;
}

bool Close(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b) {
  if (a.is_number_float() || b.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::fabs(x - y) <= 1e-12 * std::max(1.0, std::fabs(y));
  }
  return a == b;
}

bool Updating() {
  const char* update = std::getenv("KVLANES_UPDATE_GOLDEN");
  return update && std::string(update) == "1";
}

void CompareWithGolden(const nlohmann::ordered_json& now, const char* path) {
  if (Updating()) {
    std::ofstream(path) << now.dump(1) << "\n";
    MESSAGE("golden file rewritten: " << std::string(path));
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing " << path << " (regenerate with KVLANES_UPDATE_GOLDEN=1)");
  const nlohmann::ordered_json golden = nlohmann::ordered_json::parse(in);
  for (const auto& [run, metrics] : now.items()) {
    CAPTURE(run);
    REQUIRE_MESSAGE(golden.contains(run), "no golden entry for " << run);
    for (const auto& [field, value] : metrics.items()) {
      CAPTURE(field);
      const auto& want = golden[run][field];
      CHECK_MESSAGE(Close(value, want),
                    field << ": now " << value.dump() << ", golden " << want.dump());
    }
  }
  CHECK(golden.size() == now.size());
}

}  // namespace

TEST_CASE("golden predicted metrics match on every replay case") {
  // Tolerance: 1e-12 relative (the prediction is deterministic arithmetic on the same plan).
  nlohmann::ordered_json now = nlohmann::ordered_json::object();
  for (const ReplayCase& c : ReplayCases()) {
    ReplayConfig cfg = CaseConfig(c, "lanes");
    cfg.hardware.profile = cfg.cache.cp_size == 1 ? KVLANES_SOURCE_DIR "/config/profiles/h200.yaml"
                                                  : KVLANES_SOURCE_DIR
                               "/config/profiles/8xh200_nccl_model.yaml";
    cfg.gather.method = "cost";
    cfg.backup.schedule = "cost";
    const Trace trace = CaseTrace(c, cfg);
    auto policy = MakePolicy("lanes", cfg, trace);
    const auto report = RunReplay(cfg, *policy, trace, {}, nullptr);
    nlohmann::ordered_json m = report["predicted"];
    m["gather_method_counts"] = report["gather"]["method_counts"];
    m["gather_bytes"] = report["gather"]["bytes"];
    m["backup_schedule_counts"] = report["backup"]["schedule_counts"];
    now[c.name] = m;
  }
  CompareWithGolden(now, kPredictedGoldenPath);
}

TEST_CASE("golden metrics match for every policy on every replay case") {
  nlohmann::ordered_json now = nlohmann::ordered_json::object();
  for (const ReplayCase& c : ReplayCases()) {
    for (const PolicyInfo& info : RegisteredPolicies()) {
      const ReplayConfig cfg = CaseConfig(c, info.name);
      const Trace trace = CaseTrace(c, cfg);
      auto policy = MakePolicy(info.name, cfg, trace);
      now[c.name + "/" + info.name] = Metrics(RunReplay(cfg, *policy, trace, {}, nullptr));
    }
  }
  CompareWithGolden(now, kGoldenPath);
}

}  // namespace kvlanes::test

// `cost` picks, per request, the gather method (and backup schedule) with the smallest predicted
// service time, so on every shipped case its predicted total and TTFTs are never worse than any
// fixed choice. Gather and backup choices do not change cache state, so runs are comparable.
#include <doctest/doctest.h>

#include "policies/registry.h"
#include "sim/report/report.h"
#include "tests/policies/replay_cases.h"

namespace kvlanes::test {

std::string ProfileFor(const ReplayConfig& cfg) {
  return cfg.cache.cp_size == 1 ? KVLANES_SOURCE_DIR "/config/profiles/h200.yaml"
                                : KVLANES_SOURCE_DIR "/config/profiles/8xh200_nccl_model.yaml";
}

nlohmann::ordered_json Predicted(const ReplayCase& c, const std::string& gather,
                                 const std::string& backup) {
  ReplayConfig cfg = CaseConfig(c, "lanes");
  cfg.hardware.profile = ProfileFor(cfg);
  cfg.gather.method = gather;
  cfg.backup.schedule = backup;
  const Trace trace = CaseTrace(c, cfg);
  auto policy = MakePolicy("lanes", cfg, trace);
  return RunReplay(cfg, *policy, trace, {}, nullptr);
}

TEST_CASE("cost gather and backup choices are never predicted worse than a fixed choice") {
  for (const ReplayCase& c : ReplayCases()) {
    CAPTURE(c.name);
    for (const char* backup : {"per-layer", "tail"}) {
      const auto best = Predicted(c, "cost", backup);
      const double best_total = best["predicted"]["total_s"].get<double>();
      for (const char* fixed : {"dense", "packed", "p2p", "zigzag-gated"}) {
        CAPTURE(fixed);
        const auto other = Predicted(c, fixed, backup);
        CHECK(best["device_hit_tokens"] == other["device_hit_tokens"]);  // same cache decisions
        CHECK(best_total <= other["predicted"]["total_s"].get<double>() * (1 + 1e-12));
        CHECK(best["predicted"]["ttft_p99_s"].get<double>() <=
              other["predicted"]["ttft_p99_s"].get<double>() * (1 + 1e-12));
      }
    }
    const auto both = Predicted(c, "cost", "cost");
    for (const char* backup : {"per-layer", "tail"}) {
      const auto other = Predicted(c, "cost", backup);
      CHECK(both["predicted"]["total_s"].get<double>() <=
            other["predicted"]["total_s"].get<double>() * (1 + 1e-12));
    }
  }
}

}  // namespace kvlanes::test

// The replay cases shared by the policy conformance and golden tests: real traces (the excerpts
// and sessions shipped in traces/), several CP sizes, placements, host
// tiers and write policies, capacities small enough that eviction and load-back happen.
#pragma once

#include <string>
#include <vector>

#include "sim/config.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {

struct ReplayCase {
  std::string name;
  std::string trace;              // path
  std::vector<std::string> sets;  // --set assignments
};

inline std::vector<ReplayCase> ReplayCases() {
  const std::string src = KVLANES_SOURCE_DIR;
  const std::string mc = src + "/traces/mooncake_excerpt.jsonl";
  const std::string kv34 = src + "/traces/kvtester_trace_0034.json";
  const std::string kv73 = src + "/traces/kvtester/trace_0073.json";
  const std::string kv169 = src + "/traces/kvtester/trace_0169.json";
  return {
      {"mooncake_cp1_device_only", mc, {"cache.cp_size=1", "cache.device_pages_per_lane=40000"}},
      {"mooncake_cp1_host_write_through",
       mc,
       {"cache.cp_size=1", "cache.device_pages_per_lane=20000", "cache.host_pages_per_lane=40000"}},
      {"mooncake_cp4_zigzag_host",
       mc,
       {"cache.cp_size=4", "cache.device_pages_per_lane=6000", "cache.host_pages_per_lane=10000"}},
      {"mooncake_cp4_interleave_selective",
       mc,
       {"cache.cp_size=4", "cache.placement=interleave", "cache.device_pages_per_lane=6000",
        "cache.host_pages_per_lane=10000", "cache.write_policy=write_through_selective"}},
      {"mooncake_cp4_slot_modulo_write_back",
       mc,
       {"cache.cp_size=4", "cache.placement=slot-modulo", "cache.device_pages_per_lane=6000",
        "cache.host_pages_per_lane=10000", "cache.write_policy=write_back"}},
      {"mooncake_cp4_owner_major_host",
       mc,
       {"cache.cp_size=4", "cache.placement=owner_major", "gather.method=owner_major",
        "cache.device_pages_per_lane=6000", "cache.host_pages_per_lane=10000"}},
      {"mooncake_cp8_zigzag_lfu",
       mc,
       {"cache.cp_size=8", "cache.device_pages_per_lane=3000", "cache.eviction=lfu"}},
      {"kvtester34_cp2_page16",
       kv34,
       {"cache.cp_size=2", "cache.page_tokens=16", "cache.device_pages_per_lane=8000",
        "cache.host_pages_per_lane=4000"}},
      {"kvtester73_cp8_fifo_host",
       kv73,
       {"cache.cp_size=8", "cache.device_pages_per_lane=400", "cache.host_pages_per_lane=800",
        "cache.eviction=fifo"}},
      {"kvtester169_cp4_slru_write_back",
       kv169,
       {"cache.cp_size=4", "cache.device_pages_per_lane=700", "cache.host_pages_per_lane=700",
        "cache.eviction=slru", "cache.write_policy=write_back"}},
      {"mooncake_cp4_layer_split_host_min_agreement",
       mc,
       {"cache.cp_size=4", "cache.placement=layer_split", "cache.device_pages_per_lane=1500",
        "cache.host_pages_per_lane=2500", "cache.cp_hit_agreement=min"}},
      // Token interleave: units of page_tokens x cp_size inside one block (mooncake's 512-token
      // blocks) and spanning four 64-token blocks (kv-cache-tester).
      {"mooncake_cp4_token_interleave_host",
       mc,
       {"cache.cp_size=4", "cache.placement=interleave", "cache.interleave_tokens=1",
        "cache.device_pages_per_lane=1500", "cache.host_pages_per_lane=2500"}},
      {"kvtester169_cp4_block_interleave_write_back",
       kv169,
       {"cache.cp_size=4", "cache.placement=interleave", "cache.interleave_tokens=64",
        "cache.device_pages_per_lane=700", "cache.host_pages_per_lane=700",
        "cache.write_policy=write_back"}},
  };
}

inline ReplayConfig CaseConfig(const ReplayCase& c, const std::string& policy) {
  ReplayConfig cfg;
  cfg.policy = policy;
  for (const auto& s : c.sets) ApplyConfigSetting(s, cfg);
  ValidateConfig(cfg);
  return cfg;
}

inline Trace CaseTrace(const ReplayCase& c, const ReplayConfig& cfg) {
  TraceOptions opt;
  opt.page_tokens = cfg.cache.page_tokens;
  return LoadTrace({c.trace}, std::nullopt, opt);
}

}  // namespace kvlanes::test

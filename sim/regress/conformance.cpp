#include "sim/regress/conformance.h"

namespace kvlanes::regress {

std::vector<std::string> ReportViolations(const nlohmann::ordered_json& r, const ReplayConfig& cfg,
                                          size_t requests) {
  std::vector<std::string> out;
  const auto i64 = [&](const char* pointer) {
    return r.at(nlohmann::ordered_json::json_pointer(pointer)).get<int64_t>();
  };
  const auto need = [&](bool ok, const std::string& what) {
    if (!ok) out.push_back(what);
  };
  const int64_t input = i64("/input_tokens"), device = i64("/device_hit_tokens"),
                host = i64("/host_hit_tokens"), computed = i64("/computed_tokens"),
                host_match = i64("/host_match_tokens");
  need(i64("/requests") == static_cast<int64_t>(requests),
       "requests " + std::to_string(i64("/requests")) + " != trace requests " +
           std::to_string(requests));
  need(device + host + computed == input,
       "device_hit_tokens + host_hit_tokens + computed_tokens != input_tokens (" +
           std::to_string(device + host + computed) + " != " + std::to_string(input) + ")");
  need(host <= host_match, "host_hit_tokens > host_match_tokens");
  need(i64("/load_back/pages") * cfg.cache.page_tokens == host,
       "load_back.pages x page_tokens != host_hit_tokens");
  need(i64("/lane_deficit_failures") <= i64("/uncached_requests") + i64("/load_back/failed"),
       "lane_deficit_failures > uncached_requests + load_back.failed");
  if (cfg.cache.host_pages_per_lane == 0) {
    need(i64("/host_writes/pages") == 0, "host writes without a host tier");
    need(host_match == 0, "host matches without a host tier");
  }
  for (const auto& lane : r.at("lanes")) {
    const std::string rank = std::to_string(lane.at("rank").get<int64_t>());
    for (const char* tier : {"device", "host"}) {
      const std::string t = tier;
      const int64_t cap = lane.at(t + "_capacity_pages").get<int64_t>();
      const int64_t peak = lane.at(t + "_peak_pages").get<int64_t>();
      const int64_t used = lane.at(t + "_used_pages").get<int64_t>();
      need(peak <= cap, "lane " + rank + " " + t + " peak pages above capacity");
      need(used <= peak, "lane " + rank + " " + t + " used pages above peak");
    }
  }
  return out;
}

}  // namespace kvlanes::regress

#include "sim/regress/metrics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace kvlanes::regress {

using J = nlohmann::ordered_json;

const std::vector<MetricInfo>& MetricTable() {
  using S = MetricShape;
  static const std::vector<MetricInfo> table = {
      {"requests", "/requests", S::kScalar, false},
      {"input_tokens", "/input_tokens", S::kScalar, false},
      {"device_hit_tokens", "/device_hit_tokens", S::kScalar, false},
      {"host_hit_tokens", "/host_hit_tokens", S::kScalar, false},
      {"host_match_tokens", "/host_match_tokens", S::kScalar, false},
      {"computed_tokens", "/computed_tokens", S::kScalar, false},
      {"token_hit_ratio", "/token_hit_ratio", S::kScalar, false},
      {"device_hit_ratio", "/device_hit_ratio", S::kScalar, false},
      {"uncached_requests", "/uncached_requests", S::kScalar, false},
      {"lane_deficit_failures", "/lane_deficit_failures", S::kScalar, false},
      {"ancestor_unlocks", "/ancestor_unlocks", S::kScalar, false},
      {"evicted_pages.device", "/evicted_pages/device", S::kScalar, false},
      {"evicted_pages.host", "/evicted_pages/host", S::kScalar, false},
      {"load_back.pages", "/load_back/pages", S::kScalar, false},
      {"load_back.bytes", "/load_back/bytes", S::kScalar, false},
      {"load_back.count", "/load_back/count", S::kScalar, false},
      {"load_back.skipped", "/load_back/skipped", S::kScalar, false},
      {"load_back.failed", "/load_back/failed", S::kScalar, false},
      {"host_writes.pages", "/host_writes/pages", S::kScalar, false},
      {"host_writes.bytes", "/host_writes/bytes", S::kScalar, false},
      {"host_writes.refused", "/host_writes/refused", S::kScalar, false},
      {"bypassed_pages", "/bypassed_pages", S::kScalar, false},
      {"tail_evictions", "/tail_evictions", S::kScalar, false},
      {"inserted_pages", "/inserted_pages", S::kScalar, false},
      {"duplicate_pages", "/duplicate_pages", S::kScalar, false},
      {"gather.method_counts", "/gather/method_counts", S::kPerName, false},
      {"gather.prefix_pages", "/gather/prefix_pages", S::kScalar, false},
      {"gather.prefix_runs", "/gather/prefix_runs", S::kScalar, false},
      {"gather.bytes", "/gather/bytes", S::kScalar, false},
      {"backup.schedule_counts", "/backup/schedule_counts", S::kPerName, false},
      {"lanes.device_peak_pages", "device_peak_pages", S::kPerLane, false},
      {"lanes.device_used_pages", "device_used_pages", S::kPerLane, false},
      {"lanes.host_peak_pages", "host_peak_pages", S::kPerLane, false},
      {"lanes.host_used_pages", "host_used_pages", S::kPerLane, false},
      {"predicted.total_s", "/predicted/total_s", S::kScalar, true},
      {"predicted.makespan_s", "/predicted/makespan_s", S::kScalar, true},
      {"predicted.compute_s", "/predicted/compute_s", S::kScalar, true},
      {"predicted.load_back_s", "/predicted/load_back_s", S::kScalar, true},
      {"predicted.load_back_copy_s", "/predicted/load_back_copy_s", S::kScalar, true},
      {"predicted.gather_s", "/predicted/gather_s", S::kScalar, true},
      {"predicted.backup_exposed_s", "/predicted/backup_exposed_s", S::kScalar, true},
      {"predicted.backup_submit_s", "/predicted/backup_submit_s", S::kScalar, true},
      {"predicted.write_back_s", "/predicted/write_back_s", S::kScalar, true},
      {"predicted.queue_s", "/predicted/queue_s", S::kScalar, true},
      {"predicted.ttft_mean_s", "/predicted/ttft_mean_s", S::kScalar, true},
      {"predicted.ttft_p50_s", "/predicted/ttft_p50_s", S::kScalar, true},
      {"predicted.ttft_p99_s", "/predicted/ttft_p99_s", S::kScalar, true},
      {"predicted.hit_saved_s", "/predicted/hit_saved_s", S::kScalar, true},
  };
  return table;
}

namespace {

std::string_view GroupOf(std::string_view name) {
  const auto dot = name.find('.');
  return dot == std::string_view::npos ? std::string_view{} : name.substr(0, dot);
}

}  // namespace

std::vector<const MetricInfo*> ResolveMetric(std::string_view name) {
  std::vector<const MetricInfo*> out;
  for (const MetricInfo& m : MetricTable())
    if (name == m.name) return {&m};
  for (const MetricInfo& m : MetricTable())
    if (!name.empty() && GroupOf(m.name) == name) out.push_back(&m);
  return out;
}

std::vector<std::string> MetricNames() {
  std::vector<std::string> names;
  for (const MetricInfo& m : MetricTable()) {
    const std::string group(GroupOf(m.name));
    if (!group.empty() && std::find(names.begin(), names.end(), group) == names.end())
      names.push_back(group);
    names.push_back(m.name);
  }
  return names;
}

void ExtractLeaves(const J& report, const MetricInfo& m, J& leaves) {
  const auto fail = [&](const char* why) {
    std::fprintf(stderr, "regress: report lacks metric %s (%s)\n", m.name, why);
    std::abort();
  };
  switch (m.shape) {
    case MetricShape::kScalar: {
      const J::json_pointer p(m.pointer);
      if (!report.contains(p) || !report.at(p).is_number()) fail("no number there");
      leaves[m.name] = report.at(p);
      return;
    }
    case MetricShape::kPerName: {
      const J::json_pointer p(m.pointer);
      if (!report.contains(p) || !report.at(p).is_object()) fail("no object there");
      for (const auto& [key, v] : report.at(p).items()) {
        if (!v.is_number()) fail("a non-number entry");
        leaves[std::string(m.name) + "." + key] = v;
      }
      return;
    }
    case MetricShape::kPerLane: {
      if (!report.contains("lanes") || !report["lanes"].is_array()) fail("no lanes");
      const auto& lanes = report["lanes"];
      for (size_t r = 0; r < lanes.size(); ++r) {
        if (!lanes[r].contains(m.pointer) || !lanes[r][m.pointer].is_number()) fail("lane field");
        leaves[std::string(m.name) + "[" + std::to_string(r) + "]"] = lanes[r][m.pointer];
      }
      return;
    }
  }
}

bool IsLeafOf(std::string_view leaf, const MetricInfo& m) {
  const std::string_view name = m.name;
  if (leaf == name) return m.shape == MetricShape::kScalar;
  if (leaf.size() <= name.size() || leaf.substr(0, name.size()) != name) return false;
  const char next = leaf[name.size()];
  return (m.shape == MetricShape::kPerName && next == '.') ||
         (m.shape == MetricShape::kPerLane && next == '[');
}

double Tolerance::Band(double baseline) const { return std::max(abs, rel * std::fabs(baseline)); }

bool Tolerance::Holds(const J& baseline, const J& now) const {
  assert(baseline.is_number() && now.is_number());
  if (Exact() && baseline.is_number_integer() && now.is_number_integer())
    return baseline.get<int64_t>() == now.get<int64_t>();
  const double b = baseline.get<double>(), n = now.get<double>();
  if (!std::isfinite(b) || !std::isfinite(n)) return b == n;
  if (Exact()) return b == n;
  return std::fabs(n - b) <= Band(b);
}

std::string Tolerance::ToString() const {
  if (Exact()) return "exact";
  std::ostringstream os;
  if (abs > 0) os << "abs " << abs;
  if (abs > 0 && rel > 0) os << " | ";
  if (rel > 0) os << "rel " << rel;
  return os.str();
}

}  // namespace kvlanes::regress

// The metrics a regress suite may pin (docs/policies.md, "Pinning a policy with regress"): names
// of replay report fields, their leaves in a golden file, and the tolerance each is held to.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace kvlanes::regress {

// How a metric's report value becomes golden leaves.
enum class MetricShape {
  kScalar,   // one number: leaf "name"
  kPerName,  // an object of name -> count (gather.method_counts): leaf "name.KEY"; a key absent
             // on one side counts as 0
  kPerLane,  // one field of each `lanes` entry: leaf "name[RANK]"
};

struct MetricInfo {
  const char* name;     // dotted, as written in a suite: "evicted_pages.device"
  const char* pointer;  // JSON pointer into the replay report; for kPerLane the lane field
  MetricShape shape;
  bool predicted;  // needs a hardware profile (`profile:` in the case)
};

// Every metric, in report order.
const std::vector<MetricInfo>& MetricTable();
// The metrics a suite name stands for: a table name, or a group that is the part before a '.'
// of table names ("evicted_pages" -> evicted_pages.device, evicted_pages.host; "predicted" ->
// every predicted metric). Empty when the name is unknown.
std::vector<const MetricInfo*> ResolveMetric(std::string_view name);
// Every name ResolveMetric accepts (table names and groups), for error messages.
std::vector<std::string> MetricNames();

// Adds the leaves of `m` in `report` to `leaves` (an object leaf -> number).
// REQUIRES: `report` is a replay report (sim/report/report.h) holding `m` (with `predicted`
// when m.predicted); aborts otherwise: the table and the report are out of step.
void ExtractLeaves(const nlohmann::ordered_json& report, const MetricInfo& m,
                   nlohmann::ordered_json& leaves);
// True when golden leaf `leaf` belongs to metric `m` (its name, or name.KEY / name[RANK]).
bool IsLeafOf(std::string_view leaf, const MetricInfo& m);

// How far a metric may move from its baseline. Both zero: exact (the replay is deterministic, so
// the same build on the same inputs reproduces every value bit for bit). Otherwise a value holds
// when |now - baseline| <= max(abs, rel * |baseline|).
struct Tolerance {
  double abs = 0;
  double rel = 0;

  bool Exact() const { return abs == 0 && rel == 0; }
  // The largest |now - baseline| that holds.
  double Band(double baseline) const;
  // Values as JSON numbers: integers are compared as integers when exact. A non-finite value
  // holds only against the same value.
  bool Holds(const nlohmann::ordered_json& baseline, const nlohmann::ordered_json& now) const;
  // "exact", "abs 0.0001", "rel 1e-12", "abs 1 | rel 0.01".
  std::string ToString() const;
};

}  // namespace kvlanes::regress

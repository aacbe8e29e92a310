#include "sim/regress/golden.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "io/build_info.h"
#include "io/input_error.h"
#include "io/input_file.h"
#include "io/json_location.h"

namespace kvlanes::regress {

namespace {

constexpr int kRegressVersion = 1;

// The pinned metric (and its tolerance) that a golden leaf belongs to; null when none.
const MetricSpec* SpecOf(const SuiteCase& c, const std::string& leaf, const MetricInfo** info) {
  for (const MetricSpec& s : c.metrics)
    for (const MetricInfo* m : s.metrics)
      if (IsLeafOf(leaf, *m)) {
        *info = m;
        return &s;
      }
  return nullptr;
}

std::string Value(const Json& v) { return v.is_null() ? "-" : v.dump(); }

std::string Delta(const Moved& m) {
  if (m.baseline.is_null() || m.now.is_null()) return "-";
  if (m.baseline.is_number_integer() && m.now.is_number_integer())
    return (m.now.get<int64_t>() >= m.baseline.get<int64_t>() ? "+" : "") +
           std::to_string(m.now.get<int64_t>() - m.baseline.get<int64_t>());
  const double b = m.baseline.get<double>(), n = m.now.get<double>();
  char buf[64];
  if (b != 0)
    std::snprintf(buf, sizeof buf, "%+.6g (%+.3g%%)", n - b, 100.0 * (n - b) / std::fabs(b));
  else
    std::snprintf(buf, sizeof buf, "%+.6g", n - b);
  return buf;
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

}  // namespace

Json EntryLeaves(const SuiteCase& c, const Json& report) {
  Json leaves = Json::object();
  for (const MetricSpec& s : c.metrics)
    for (const MetricInfo* m : s.metrics) ExtractLeaves(report, *m, leaves);
  return leaves;
}

Json Provenance(const Suite& suite) {
  return Json{{"kvlanes_version", BuildVersion()},
              {"commit", BuildCommit()},
              {"build_type", BuildType()},
              {"suite", JsonSafeText(suite.path)},
              {"suite_fnv1a64", suite.hash}};
}

Json GoldenJson(const Suite& suite, const std::vector<SuiteRun>& runs,
                const std::vector<Json>& leaves) {
  Json g;
  g["regress_version"] = kRegressVersion;
  g["provenance"] = Provenance(suite);
  Json entries = Json::object();
  for (size_t i = 0; i < runs.size(); ++i) entries[runs[i].entry] = leaves[i];
  g["entries"] = entries;
  return g;
}

Golden LoadGolden(const std::string& path) {
  const JsonInput in = JsonInput::Load(path, "golden file");
  const JsonCursor root = JsonCursor::Root(in);
  root.ExpectObject();
  root.OnlyKeys({"regress_version", "provenance", "entries"});
  const int64_t version = root.Key("regress_version").Int();
  if (version != kRegressVersion)
    root.Key("regress_version")
        .Fail("golden files of version " + std::to_string(version) +
              " are not read by this build (version " + std::to_string(kRegressVersion) + ")");
  root.Key("provenance").ExpectObject();
  const JsonCursor entries = root.Key("entries");
  entries.ExpectObject();
  Golden g;
  g.path = path;
  g.provenance = Json::parse(root.Key("provenance").value().dump());
  g.entries = Json::object();
  for (const auto& [entry, leaves] : entries.value().items()) {
    const JsonCursor e = entries.Key(entry);
    e.ExpectObject();
    for (const auto& [leaf, v] : leaves.items())
      if (!v.is_number()) e.Key(leaf).Fail("expected a number");
    g.entries[entry] = Json::parse(leaves.dump());
  }
  return g;
}

CheckResult Compare(const Suite& suite, const std::vector<SuiteRun>& runs,
                    const std::vector<Json>& leaves, const Golden& golden) {
  CheckResult r;
  std::set<std::string> in_suite;
  for (size_t i = 0; i < runs.size(); ++i) {
    const SuiteRun& run = runs[i];
    const SuiteCase& c = suite.cases[run.case_index];
    in_suite.insert(run.entry);
    ++r.entries;
    const Json none = Json::object();
    const bool recorded = golden.entries.contains(run.entry);
    const Json& base = recorded ? golden.entries[run.entry] : none;
    // Leaves of either side, in the rerun's order, then those only the golden file has.
    std::vector<std::string> names;
    for (const auto& [leaf, v] : leaves[i].items()) names.push_back(leaf);
    for (const auto& [leaf, v] : base.items())
      if (!leaves[i].contains(leaf)) names.push_back(leaf);
    for (const std::string& leaf : names) {
      const MetricInfo* info = nullptr;
      const MetricSpec* spec = SpecOf(c, leaf, &info);
      if (!spec) {
        r.stale.push_back(run.entry + " " + leaf);
        continue;
      }
      ++r.leaves;
      Json b = base.contains(leaf) ? base[leaf] : Json();
      Json n = leaves[i].contains(leaf) ? leaves[i][leaf] : Json();
      if (info->shape == MetricShape::kPerName && recorded) {
        if (b.is_null()) b = 0;
        if (n.is_null()) n = 0;
      }
      if (!b.is_null() && !n.is_null() && spec->tolerance.Holds(b, n)) continue;
      r.moved.push_back(Moved{run.entry, leaf, b, n, spec->tolerance});
    }
  }
  for (const auto& [entry, v] : golden.entries.items())
    if (!in_suite.count(entry)) r.stale.push_back(entry);
  return r;
}

Json UpdatedGolden(const Suite& suite, const std::vector<SuiteRun>& runs,
                   const std::vector<Json>& leaves, const Golden& golden,
                   const CheckResult& result) {
  std::map<std::pair<std::string, std::string>, const Moved*> moved;
  for (const Moved& m : result.moved) moved[{m.entry, m.leaf}] = &m;
  Json g;
  g["regress_version"] = kRegressVersion;
  g["provenance"] = Provenance(suite);
  Json entries = Json::object();
  for (size_t i = 0; i < runs.size(); ++i) {
    const SuiteRun& run = runs[i];
    const SuiteCase& c = suite.cases[run.case_index];
    const Json none = Json::object();
    const Json& base = golden.entries.contains(run.entry) ? golden.entries[run.entry] : none;
    Json out = Json::object();
    for (const auto& [leaf, v] : leaves[i].items()) {
      const auto it = moved.find({run.entry, leaf});
      if (it != moved.end())
        out[leaf] = v;
      else if (base.contains(leaf))
        out[leaf] = base[leaf];
    }
    for (const auto& [leaf, v] : base.items()) {
      const MetricInfo* info = nullptr;
      if (out.contains(leaf) || leaves[i].contains(leaf) || !SpecOf(c, leaf, &info)) continue;
      if (!moved.count({run.entry, leaf})) out[leaf] = v;  // a per-name 0 that still holds
    }
    entries[run.entry] = out;
  }
  g["entries"] = entries;
  return g;
}

std::string MovedTable(const CheckResult& result) {
  std::vector<std::array<std::string, 6>> rows = {
      {"entry", "metric", "baseline", "now", "delta", "tolerance"}};
  for (const Moved& m : result.moved)
    rows.push_back({m.entry, m.leaf, Value(m.baseline), Value(m.now), Delta(m),
                    m.baseline.is_null() ? "not recorded"
                    : m.now.is_null()    ? "gone"
                                         : m.tolerance.ToString()});
  std::array<size_t, 6> width{};
  for (const auto& row : rows)
    for (size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t k = 0; k < row.size(); ++k) {
      std::string cell = row[k];
      if (k + 1 < row.size()) cell.resize(width[k] + 2, ' ');
      line += cell;
    }
    out += line + "\n";
  }
  return out;
}

std::string JUnitXml(const Suite& suite, const std::vector<SuiteRun>& runs,
                     const CheckResult& result) {
  std::map<std::string, std::vector<const Moved*>> by_entry;
  for (const Moved& m : result.moved) by_entry[m.entry].push_back(&m);
  const std::string tests = std::to_string(runs.size());
  const std::string failures = std::to_string(by_entry.size());
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<testsuites name=\"kvlanes regress\" tests=\"" << tests << "\" failures=\"" << failures
    << "\">\n"
    << "  <testsuite name=\"" << XmlEscape(suite.path) << "\" tests=\"" << tests << "\" failures=\""
    << failures << "\" errors=\"0\">\n";
  for (const SuiteRun& run : runs) {
    x << "    <testcase classname=\"" << XmlEscape(suite.cases[run.case_index].name) << "\" name=\""
      << XmlEscape(run.policy) << "\"";
    const auto it = by_entry.find(run.entry);
    if (it == by_entry.end()) {
      x << "/>\n";
      continue;
    }
    x << ">\n      <failure message=\"" << it->second.size() << " metric"
      << (it->second.size() == 1 ? "" : "s") << " moved\" type=\"regress\">";
    for (const Moved* m : it->second)
      x << XmlEscape(m->leaf + ": baseline " + Value(m->baseline) + ", now " + Value(m->now) +
                     ", delta " + Delta(*m) + ", tolerance " + m->tolerance.ToString())
        << "\n";
    x << "</failure>\n    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

}  // namespace kvlanes::regress

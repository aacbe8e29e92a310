#include "sim/regress/suite.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/name_table.h"
#include "sim/yaml_input.h"

namespace kvlanes::regress {

namespace fs = std::filesystem;

namespace {

int64_t LineOf(const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; }

// Reads one suite file; every error names the file, the line and the field.
class SuiteReader {
 public:
  SuiteReader(std::string path, const PolicyCatalog& policies)
      : path_(std::move(path)), policies_(policies) {}

  Suite Read() {
    // Bounded: a suite path that never ends (/dev/zero, a FIFO) stops at the limit.
    const std::string text = ReadInputFile(path_, "suite file");
    Suite suite;
    suite.path = path_;
    suite.hash = Fnv1a64Hex(text);
    CheckUtf8(text, path_, "suite file");
    const YAML::Node root = ParseYamlDocument(text, path_);
    if (!root.IsMap()) throw InputError(path_, 1, "", "a suite is a YAML map with `cases:`");
    OnlyKeys(root, "", {"cases", "metrics", "policies"});
    has_default_metrics_ = static_cast<bool>(root["metrics"]);
    has_default_policies_ = static_cast<bool>(root["policies"]);
    if (has_default_metrics_) default_metrics_ = root["metrics"];
    if (has_default_policies_) default_policies_ = root["policies"];
    const YAML::Node cases = root["cases"];
    if (!cases) throw InputError(path_, 1, "cases", "missing: a suite needs at least one case");
    if (!cases.IsSequence() || cases.size() == 0)
      Fail(cases, "cases", "expected a non-empty list of cases");
    std::map<std::string, int64_t> names;
    for (size_t i = 0; i < cases.size(); ++i) {
      SuiteCase c = ReadCase(cases[i], "cases[" + std::to_string(i) + "]");
      const auto [it, fresh] = names.emplace(c.name, c.line);
      if (!fresh)
        Fail(cases[i]["name"], "cases[" + std::to_string(i) + "].name",
             "'" + c.name + "' is already the name of the case at line " +
                 std::to_string(it->second));
      suite.cases.push_back(std::move(c));
    }
    return suite;
  }

 private:
  [[noreturn]] void Fail(const YAML::Node& at, const std::string& field,
                         const std::string& msg) const {
    throw InputError(path_, LineOf(at), field, msg);
  }

  void OnlyKeys(const YAML::Node& map, const std::string& field,
                std::initializer_list<const char*> keys) const {
    const std::vector<std::string_view> valid(keys.begin(), keys.end());
    for (const auto& kv : map) {
      const std::string k = kv.first.Scalar();
      if (std::find(valid.begin(), valid.end(), k) == valid.end())
        ThrowUnknownName("key", k, valid, field.empty() ? k : field + "." + k, path_,
                         LineOf(kv.first));
    }
  }

  std::string Scalar(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) Fail(n, field, "expected a string");
    return n.Scalar();
  }

  // A path of the suite resolved against the suite's folder; must exist.
  std::string ExistingPath(const YAML::Node& n, const std::string& field, const char* what) const {
    const std::string given = Scalar(n, field);
    if (given.empty()) Fail(n, field, std::string("empty ") + what + " path");
    const fs::path p = fs::path(given).is_absolute()
                           ? fs::path(given)
                           : fs::path(path_).parent_path() / fs::path(given);
    std::error_code ec;
    if (!fs::exists(p, ec))
      Fail(n, field,
           std::string("no such ") + what + " '" + given + "' (resolved to '" + p.string() +
               "'; paths are relative to the suite file)");
    return p.lexically_normal().string();
  }

  Tolerance ReadTolerance(const YAML::Node& n, const std::string& field) const {
    Tolerance t;
    if (n.IsNull()) return t;
    if (!n.IsMap()) Fail(n, field, "expected a tolerance: {} (exact), {abs: X}, {rel: X} or both");
    OnlyKeys(n, field, {"abs", "rel"});
    for (const auto& kv : n) {
      const std::string k = kv.first.Scalar();
      const std::string f = field + "." + k;
      double x = 0;
      try {
        x = kv.second.as<double>();
      } catch (const YAML::Exception&) {
        Fail(kv.second, f, "expected a number, got '" + kv.second.Scalar() + "'");
      }
      if (!std::isfinite(x) || x < 0)
        Fail(kv.second, f,
             "a tolerance must be a finite number >= 0 (a distance from the baseline), got " +
                 kv.second.Scalar());
      (k == "abs" ? t.abs : t.rel) = x;
    }
    return t;
  }

  std::vector<MetricSpec> ReadMetrics(const YAML::Node& n, const std::string& field,
                                      bool has_profile) const {
    if (!n.IsMap() || n.size() == 0)
      Fail(n, field, "expected a map of metric: tolerance with at least one metric");
    std::vector<MetricSpec> out;
    const std::vector<std::string> valid = MetricNames();
    for (const auto& kv : n) {
      MetricSpec m;
      m.name = kv.first.Scalar();
      m.line = LineOf(kv.first);
      const std::string f = field + "." + m.name;
      m.metrics = ResolveMetric(m.name);
      if (m.metrics.empty()) ThrowUnknownName("metric", m.name, valid, f, path_, m.line);
      for (const MetricInfo* info : m.metrics)
        if (info->predicted && !has_profile)
          Fail(kv.first, f,
               std::string(info->name) +
                   " is a prediction: the case needs a hardware profile (`profile:`)");
      for (const MetricSpec& other : out)
        for (const MetricInfo* a : other.metrics)
          if (std::find(m.metrics.begin(), m.metrics.end(), a) != m.metrics.end())
            Fail(kv.first, f,
                 "pins " + std::string(a->name) + " again (already by '" + other.name +
                     "' at line " + std::to_string(other.line) + ")");
      m.tolerance = ReadTolerance(kv.second, f);
      out.push_back(std::move(m));
    }
    return out;
  }

  std::vector<std::string> ReadPolicies(const YAML::Node& n, const std::string& field) const {
    std::vector<std::string> out;
    if (n.IsScalar() && n.Scalar() == "all") return policies_.all();
    if (!n.IsSequence() || n.size() == 0)
      Fail(n, field, "expected a non-empty list of policy names, or `all`");
    for (size_t i = 0; i < n.size(); ++i) {
      const std::string f = field + "[" + std::to_string(i) + "]";
      const std::string name = Scalar(n[i], f);
      try {
        policies_.check(name);
      } catch (const InputError& e) {
        Fail(n[i], f, StripField(e));
      }
      if (std::find(out.begin(), out.end(), name) != out.end())
        Fail(n[i], f, "policy '" + name + "' is listed twice");
      out.push_back(name);
    }
    return out;
  }

  // The message of an error from elsewhere (a --set or a policy name) without its own prefix.
  static std::string StripField(const InputError& e) {
    std::string msg = e.what();
    const std::string prefix = e.field() + ": ";
    if (e.file().empty() && msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    return msg;
  }

  SuiteCase ReadCase(const YAML::Node& n, const std::string& field) {
    if (!n.IsMap()) Fail(n, field, "expected a case: a map with name, traces, policies, metrics");
    OnlyKeys(n, field, {"name", "traces", "config", "profile", "set", "policies", "metrics"});
    SuiteCase c;
    c.line = LineOf(n);
    if (!n["name"]) Fail(n, field + ".name", "missing");
    c.name = Scalar(n["name"], field + ".name");
    if (c.name.empty() || c.name.find_first_of("/ \t") != std::string::npos)
      Fail(n["name"], field + ".name", "a case name is non-empty, without '/' or blanks");
    const std::string here = field + " (" + c.name + ")";
    const YAML::Node traces = n["traces"];
    if (!traces) Fail(n, here + ".traces", "missing: a case needs at least one trace");
    if (traces.IsScalar()) {
      c.traces.push_back(ExistingPath(traces, here + ".traces", "trace"));
    } else {
      if (!traces.IsSequence() || traces.size() == 0)
        Fail(traces, here + ".traces", "expected a non-empty list of trace paths");
      for (size_t i = 0; i < traces.size(); ++i)
        c.traces.push_back(
            ExistingPath(traces[i], here + ".traces[" + std::to_string(i) + "]", "trace"));
    }
    if (n["config"])
      LoadConfigFile(ExistingPath(n["config"], here + ".config", "config"), c.config);
    if (n["profile"])
      c.config.hardware.profile = ExistingPath(n["profile"], here + ".profile", "profile");
    if (const YAML::Node set = n["set"]) {
      if (!set.IsMap()) Fail(set, here + ".set", "expected a map of config key: value");
      for (const auto& kv : set) {
        const std::string key = kv.first.Scalar();
        const std::string f = here + ".set." + key;
        std::string value;
        if (kv.second.IsScalar()) {
          value = kv.second.Scalar();
        } else {
          YAML::Emitter e;
          e << YAML::Flow << kv.second;
          value = e.c_str();
        }
        if (key == "policy") Fail(kv.first, f, "list policies under `policies:` instead");
        try {
          ApplyConfigSetting(key + "=" + value, c.config);
        } catch (const InputError& e) {
          Fail(kv.first, f, StripField(e));
        }
      }
    }
    try {
      ValidateConfig(c.config);
    } catch (const InputError& e) {
      Fail(n, here, e.what());
    }
    const YAML::Node policies = n["policies"] ? n["policies"] : default_policies_;
    if (!n["policies"] && !has_default_policies_)
      Fail(n, here + ".policies", "missing (and the suite has no top-level `policies:`)");
    c.policies = ReadPolicies(policies, n["policies"] ? here + ".policies" : "policies");
    const YAML::Node metrics = n["metrics"] ? n["metrics"] : default_metrics_;
    if (!n["metrics"] && !has_default_metrics_)
      Fail(n, here + ".metrics", "missing (and the suite has no top-level `metrics:`)");
    c.metrics = ReadMetrics(metrics, n["metrics"] ? here + ".metrics" : "metrics",
                            !c.config.hardware.profile.empty());
    return c;
  }

  std::string path_;
  const PolicyCatalog& policies_;
  YAML::Node default_metrics_, default_policies_;
  bool has_default_metrics_ = false, has_default_policies_ = false;
};

}  // namespace

Suite LoadSuite(const std::string& path, const PolicyCatalog& policies) {
  return SuiteReader(path, policies).Read();
}

std::vector<SuiteRun> SuiteRuns(const Suite& suite) {
  std::vector<SuiteRun> runs;
  for (size_t i = 0; i < suite.cases.size(); ++i)
    for (const std::string& p : suite.cases[i].policies)
      runs.push_back(SuiteRun{i, p, suite.cases[i].name + "/" + p});
  return runs;
}

std::string Fnv1a64Hex(const std::string& bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : bytes) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace kvlanes::regress

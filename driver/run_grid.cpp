#include "driver/run_grid.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/json_strict.h"
#include "io/output_file.h"
#include "policies/registry.h"
#include "sim/report/report.h"

namespace kvlanes::driver {

using J = nlohmann::ordered_json;

std::vector<J> RunReplayJobs(const std::vector<ReplayJob>& jobs, int threads,
                             const std::function<void(size_t, const J&)>& on_done) {
  std::vector<J> results(jobs.size());
  std::atomic<size_t> next{0};
  std::mutex mu;  // guards on_done and first_error
  std::exception_ptr first_error;
  // Each worker takes the next job index; a job owns its policy and engine and only reads the
  // shared trace, so runs cannot influence each other.
  const auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      try {
        const ReplayJob& job = jobs[i];
        // One cost model for the job's policies (a replica each in serving mode).
        const PolicyInputs policy_in{job.config, *job.trace, PolicyCostModel(job.config)};
        auto policy = MakePolicy(job.policy, policy_in);
        ReplaySinks sinks;
        sinks.replica_policy = [&] { return MakePolicy(job.policy, policy_in); };
        sinks.cost = policy_in.cost;
        J report = RunReplay(job.config, *policy, *job.trace, job.engine, nullptr, sinks);
        std::lock_guard<std::mutex> lock(mu);
        results[i] = std::move(report);
        if (on_done) on_done(i, results[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error) first_error = std::current_exception();
        next = jobs.size();  // stop handing out work
      }
    }
  };
  const size_t n = std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1,
                                      std::max<size_t>(jobs.size(), 1));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
  return results;
}

std::vector<std::string> SplitList(const std::string& list, const std::string& option) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) throw InputError("", 0, option, "empty item in list '" + list + "'");
    out.push_back(item);
  }
  if (out.empty() || list.back() == ',')
    throw InputError("", 0, option, "empty item in list '" + list + "'");
  return out;
}

namespace {

// A number as written in a range: an integer (digits with an optional sign) or a decimal.
std::optional<double> RangeNumber(const std::string& s, bool* integer) {
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != s.size() || !std::isfinite(v)) return std::nullopt;
  *integer = s.find_first_of(".eE") == std::string::npos;
  return v;
}

std::string RangeValue(double v, bool integer) {
  if (integer) return std::to_string(static_cast<long long>(std::llround(v)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

constexpr size_t kMaxRangeValues = 100000;

// "a:b:step" (a, a+step, ... up to b) or "a:b:xF" (a, a*F, ... up to b); nullopt when `item`
// is not written as a range (then it is a plain value).
std::optional<std::vector<std::string>> ExpandRange(const std::string& item,
                                                    const std::string& field) {
  const auto c1 = item.find(':');
  if (c1 == std::string::npos) return std::nullopt;
  const auto c2 = item.find(':', c1 + 1);
  if (c2 == std::string::npos || item.find(':', c2 + 1) != std::string::npos) return std::nullopt;
  bool ia = false, ib = false, is = false;
  const auto a = RangeNumber(item.substr(0, c1), &ia);
  const auto b = RangeNumber(item.substr(c1 + 1, c2 - c1 - 1), &ib);
  std::string step = item.substr(c2 + 1);
  const bool geometric = !step.empty() && step[0] == 'x';
  if (geometric) step.erase(0, 1);
  const auto st = RangeNumber(step, &is);
  if (!a || !b || !st) return std::nullopt;
  const auto bad = [&](const std::string& why) {
    return InputError("", 0, field, "range '" + item + "': " + why);
  };
  if (*a > *b) throw bad("the start is above the end");
  if (!geometric && *st <= 0) throw bad("the step must be positive");
  if (geometric && *st <= 1) throw bad("the factor must be above 1");
  if (geometric && *a <= 0) throw bad("a geometric range must start above 0");
  const bool integer = ia && ib && (geometric || is);
  std::vector<std::string> out;
  const double end = *b * (1 + 1e-12) + 1e-12;  // b itself is included despite rounding
  for (size_t k = 0;; ++k) {
    const double v =
        geometric ? *a * std::pow(*st, static_cast<double>(k)) : *a + *st * static_cast<double>(k);
    if (v > end) break;
    if (out.size() >= kMaxRangeValues)
      throw bad("more than " + std::to_string(kMaxRangeValues) + " values");
    std::string text = RangeValue(v, integer);
    if (out.empty() || out.back() != text) out.push_back(std::move(text));
  }
  return out;
}

}  // namespace

VaryAxis ParseVary(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(
        "", 0, "--vary",
        "expected key=v1,v2,... or key=start:end:step or key=start:end:xfactor, got '" + arg + "'");
  VaryAxis a{arg.substr(0, eq), {}};
  const std::string field = "--vary " + a.key;
  for (std::string& item : SplitList(arg.substr(eq + 1), field)) {
    if (auto range = ExpandRange(item, field))
      a.values.insert(a.values.end(), range->begin(), range->end());
    else
      a.values.push_back(std::move(item));
  }
  if (a.key == "policy")
    throw InputError("", 0, "--vary policy", "list policies with --policies instead");
  return a;
}

size_t Grid::size() const {
  size_t n = policies.size();
  for (const auto& a : axes) n *= a.values.size();
  return n;
}

std::pair<std::string, std::vector<std::pair<std::string, std::string>>> Grid::Run(size_t i) const {
  std::vector<std::pair<std::string, std::string>> settings(axes.size());
  for (size_t k = axes.size(); k-- > 0;) {  // the last axis varies fastest
    const auto& a = axes[k];
    settings[k] = {a.key, a.values[i % a.values.size()]};
    i /= a.values.size();
  }
  return {policies[i], settings};
}

void CheckGridSize(const Grid& grid, const std::string& option) {
  size_t runs = std::max<size_t>(1, grid.policies.size());
  std::string factors = std::to_string(grid.policies.size()) + " policies";
  for (const VaryAxis& a : grid.axes) {
    const size_t n = a.values.size();
    factors += " x " + std::to_string(n) + " (" + a.key + ")";
    runs = n == 0 || runs > kMaxSweepRuns / n ? kMaxSweepRuns + 1 : runs * n;
  }
  if (runs > kMaxSweepRuns)
    throw InputError("", 0, option,
                     "the grid holds more than " + std::to_string(kMaxSweepRuns) +
                         " runs (kMaxSweepRuns): " + factors);
}

ReplayConfig GridRunConfig(const ReplayConfig& base, const Grid& grid, size_t i) {
  ReplayConfig cfg = base;
  const auto [policy, settings] = grid.Run(i);
  cfg.policy = policy;
  std::string where = "--vary";
  for (const auto& [k, v] : settings) {
    where = "--vary " + k + "=" + v;
    try {
      ApplyConfigSetting(k + "=" + v, cfg);
    } catch (const InputError& e) {
      // Keep the message, name the --vary value rather than the --set it was turned into.
      std::string msg = e.what();
      const std::string prefix = e.field() + ": ";
      if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
      throw InputError("", 0, where, msg);
    }
  }
  try {
    ValidateConfig(cfg);
  } catch (const InputError& e) {
    throw InputError("", 0, where, e.what());
  }
  return cfg;
}

J SweepDoc(const ReplayConfig& base, const Grid& grid, const std::vector<std::string>& trace,
           const std::vector<size_t>& runs, const std::vector<J>& reports,
           std::optional<std::pair<size_t, size_t>> shard) {
  J doc;
  doc["sweep_version"] = 1;
  J g;
  g["trace"] = JsonSafeTexts(trace);
  g["base_config"] = ConfigToJson(base);
  g["policies"] = grid.policies;
  g["vary"] = J::array();
  for (const auto& a : grid.axes) g["vary"].push_back(J{{"key", a.key}, {"values", a.values}});
  g["runs"] = grid.size();
  doc["grid"] = g;
  if (shard) doc["shard"] = J{{"index", shard->first}, {"count", shard->second}};
  doc["runs"] = J::array();
  for (size_t j = 0; j < runs.size(); ++j) {
    J run;
    run["grid_index"] = runs[j];
    J vary = J::object();
    for (const auto& [k, v] : grid.Run(runs[j]).second) vary[k] = v;
    run["vary"] = vary;
    for (const auto& [k, v] : reports[j].items()) run[k] = v;
    doc["runs"].push_back(std::move(run));
  }
  return doc;
}

std::pair<size_t, size_t> ParseShard(const std::string& arg) {
  const auto slash = arg.find('/');
  const auto fail = [&] {
    throw InputError("", 0, "--shard",
                     "expected I/N with 0 <= I < N (e.g. 0/8), got '" + arg + "'");
  };
  if (slash == std::string::npos) fail();
  size_t i = 0, n = 0;
  try {
    size_t p1 = 0, p2 = 0;
    const std::string a = arg.substr(0, slash), b = arg.substr(slash + 1);
    if (a.empty() || b.empty() || a[0] == '-' || b[0] == '-') fail();
    i = std::stoul(a, &p1);
    n = std::stoul(b, &p2);
    if (p1 != a.size() || p2 != b.size()) fail();
  } catch (const std::logic_error&) {
    fail();
  }
  if (n == 0 || i >= n) fail();
  if (n > kMaxSweepRuns)  // sweep merge takes no more: a shard beyond the grid's runs is empty
    throw InputError("", 0, "--shard",
                     "N is at most " + std::to_string(kMaxSweepRuns) +
                         " (the most runs a grid holds), got '" + arg + "'");
  return {i, n};
}

namespace {

int64_t I(const J& r, const char* ptr) { return r.at(J::json_pointer(ptr)).get<int64_t>(); }

// The counts of a run that its CSV row holds after requests, input_tokens and the ratios.
constexpr const char* kRunCounts[] = {
    "/device_hit_tokens",  "/host_hit_tokens",       "/computed_tokens",   "/evicted_pages/device",
    "/evicted_pages/host", "/lane_deficit_failures", "/uncached_requests", "/bypassed_pages",
    "/load_back/pages",    "/load_back/bytes",       "/host_writes/pages", "/host_writes/bytes",
    "/host_writes/refused"};

double Ratio(const J& r, const char* ptr) {
  const int64_t in = I(r, "/input_tokens");
  return in > 0 ? static_cast<double>(I(r, ptr)) / static_cast<double>(in) : 0.0;
}

std::string VaryValue(const J& run, const std::string& key) {
  return run.contains("vary") && run["vary"].contains(key) ? run["vary"][key].get<std::string>()
                                                           : "";
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// A run's predicted times (with a hardware profile): TTFT percentiles and the mean request's
// queue, compute, gather, load-back stalls and exposed backups, from serving mode's schedule
// (docs/serving.md, "The TTFT breakdown") or the sequential predictor. Absent without a profile.
struct RunTimes {
  bool present = false;
  double p50 = 0, p99 = 0, queue = 0, compute = 0, gather = 0, load_back_stall = 0, backups = 0;
  double hit_saved = 0;  // in total, seconds (CostModel::HitSavedS)
};

RunTimes TimesOf(const J& r) {
  RunTimes t;
  const bool serving = r.contains("serving");
  if (!serving && !r.contains("predicted")) return t;
  const J& head = serving ? r["serving"]["total"] : r["predicted"];
  const J* parts = serving ? (head.contains("predicted") ? &head["predicted"] : nullptr) : &head;
  const J& count = serving ? head["requests"] : r["requests"];
  const double n = std::max(1.0, count.get<double>());
  const auto mean = [&](const char* key) {
    return parts && parts->contains(key) ? (*parts)[key].get<double>() / n : 0.0;
  };
  t.present = true;
  t.p50 = head["ttft_p50_s"].get<double>();
  t.p99 = head["ttft_p99_s"].get<double>();
  t.queue = mean("queue_s");
  t.compute = mean("compute_s");
  t.gather = mean("gather_s");
  t.load_back_stall = mean(serving ? "load_back_stall_s" : "load_back_s");
  t.backups = mean("backup_exposed_s");
  t.hit_saved = mean("hit_saved_s") * n;
  return t;
}

}  // namespace

std::string RunsToCsv(const J& runs, const std::vector<std::string>& vary_keys) {
  std::ostringstream os;
  for (const auto& k : vary_keys) os << CsvField(k) << ",";
  os << "policy,eviction_order,placement,requests,input_tokens,token_hit_ratio,device_hit_ratio,"
        "host_hit_ratio,device_hit_tokens,host_hit_tokens,computed_tokens,evicted_device_pages,"
        "evicted_host_pages,lane_deficit_failures,uncached_requests,bypassed_pages,"
        "load_back_pages,load_back_bytes,host_write_pages,host_write_bytes,host_write_refused,"
        "predicted_ttft_p50_s,predicted_ttft_p99_s,predicted_queue_mean_s,"
        "predicted_compute_mean_s,predicted_gather_mean_s,predicted_load_back_stall_mean_s,"
        "predicted_backup_exposed_mean_s,predicted_hit_saved_s\n";
  char buf[64];
  for (const auto& r : runs) {
    for (const auto& k : vary_keys) os << CsvField(VaryValue(r, k)) << ",";
    os << CsvField(r["policy"].get<std::string>()) << "," << r["eviction_order"].get<std::string>()
       << "," << r["placement"].get<std::string>() << "," << I(r, "/requests") << ","
       << I(r, "/input_tokens");
    std::snprintf(buf, sizeof buf, ",%.6f", r["token_hit_ratio"].get<double>());
    os << buf;
    std::snprintf(buf, sizeof buf, ",%.6f,%.6f", Ratio(r, "/device_hit_tokens"),
                  Ratio(r, "/host_hit_tokens"));
    os << buf;
    for (const char* p : kRunCounts) os << "," << I(r, p);
    // Predicted times when the run had a hardware profile (serving mode: those of its schedule,
    // docs/serving.md), else empty fields.
    const RunTimes t = TimesOf(r);
    if (t.present) {
      for (double v : {t.p50, t.p99, t.queue, t.compute, t.gather, t.load_back_stall, t.backups,
                       t.hit_saved}) {
        std::snprintf(buf, sizeof buf, ",%.9g", v);
        os << buf;
      }
    } else {
      os << ",,,,,,,,";
    }
    os << "\n";
  }
  return os.str();
}

J RunsCsvContext(const J& runs) {
  J rows = J::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    const J& r = runs[i];
    rows.push_back(J{{"row", i + 1},
                     {"context", r.contains("context") ? r["context"] : J(nullptr)},
                     {"config", r.contains("config") ? r["config"] : J(nullptr)}});
  }
  J doc;
  doc["kvlanes_csv_context"] = 1;
  doc["rows"] = std::move(rows);
  return doc;
}

void WriteRunsCsv(const std::string& path, const J& runs,
                  const std::vector<std::string>& vary_keys) {
  const std::string csv = RunsToCsv(runs, vary_keys);
  const std::string context = RunsCsvContext(runs).dump(1) + "\n";
  struct stat st {};
  if (path == "-" || (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))) {
    // Standard output or a device/FIFO: the table only (a sidecar has nowhere to go).
    WriteFileAtomically(path, csv);
    return;
  }
  WriteFileAtomically(path + ".context.json", context);
  WriteFileAtomically(path, csv);
}

void PrintRunsTable(FILE* out, const J& runs, const std::vector<std::string>& vary_keys) {
  std::vector<size_t> widths;
  for (const auto& k : vary_keys) {
    size_t w = k.size();
    for (const auto& r : runs) w = std::max(w, VaryValue(r, k).size());
    widths.push_back(w);
  }
  size_t pw = 6;
  bool predicted = false;
  for (const auto& r : runs) {
    pw = std::max(pw, r["policy"].get<std::string>().size());
    predicted = predicted || TimesOf(r).present;
  }
  for (size_t i = 0; i < vary_keys.size(); ++i)
    std::fprintf(out, "%-*s  ", static_cast<int>(widths[i]), vary_keys[i].c_str());
  std::fprintf(out, "%-*s  %7s %7s %7s  %11s %11s  %8s %8s  %10s %10s\n", static_cast<int>(pw),
               "policy", "hit", "device", "host", "evicted dev", "evicted hst", "lane def",
               "uncached", "load-back",
               predicted ? "host write  TTFT p50   TTFT p99  hit saved" : "host write");
  for (size_t i = 0; i < vary_keys.size(); ++i)
    std::fprintf(out, "%-*s  ", static_cast<int>(widths[i]), "");
  std::fprintf(out, "%-*s  %7s %7s %7s  %11s %11s  %8s %8s  %10s %10s\n", static_cast<int>(pw), "",
               "ratio", "ratio", "ratio", "pages", "pages", "failures", "requests", "GB",
               predicted ? "GB   (predicted, s)" : "GB");
  for (const auto& r : runs) {
    for (size_t i = 0; i < vary_keys.size(); ++i)
      std::fprintf(out, "%-*s  ", static_cast<int>(widths[i]), VaryValue(r, vary_keys[i]).c_str());
    std::fprintf(out, "%-*s  %7.4f %7.4f %7.4f  %11lld %11lld  %8lld %8lld  %10.3f %10.3f",
                 static_cast<int>(pw), r["policy"].get<std::string>().c_str(),
                 r["token_hit_ratio"].get<double>(), Ratio(r, "/device_hit_tokens"),
                 Ratio(r, "/host_hit_tokens"),
                 static_cast<long long>(I(r, "/evicted_pages/device")),
                 static_cast<long long>(I(r, "/evicted_pages/host")),
                 static_cast<long long>(I(r, "/lane_deficit_failures")),
                 static_cast<long long>(I(r, "/uncached_requests")), I(r, "/load_back/bytes") / 1e9,
                 I(r, "/host_writes/bytes") / 1e9);
    const RunTimes t = TimesOf(r);
    if (t.present) std::fprintf(out, "  %9.3f  %9.3f  %9.3f", t.p50, t.p99, t.hit_saved);
    std::fprintf(out, "\n");
  }
}

namespace {

using Need = std::function<void(bool, const char*, const std::string&)>;

// The grid a sweep file names (policies, vary axes, run count), read with its types checked.
Grid GridOfSweepFile(const J& grid, const Need& need) {
  Grid g;
  need(grid.contains("policies") && grid["policies"].is_array(), "grid.policies", "missing");
  for (const auto& p : grid["policies"]) {
    need(p.is_string(), "grid.policies", "expected policy names");
    g.policies.push_back(p.get<std::string>());
  }
  need(grid.contains("vary") && grid["vary"].is_array(), "grid.vary", "missing");
  for (const auto& a : grid["vary"]) {
    need(a.is_object() && a.contains("key") && a["key"].is_string() && a.contains("values") &&
             a["values"].is_array() && !a["values"].empty(),
         "grid.vary", "expected {key, values} with at least one value");
    VaryAxis axis;
    axis.key = a["key"].get<std::string>();
    for (const auto& v : a["values"]) {
      need(v.is_string(), "grid.vary", axis.key + ": expected values as strings");
      axis.values.push_back(v.get<std::string>());
    }
    g.axes.push_back(std::move(axis));
  }
  need(!g.policies.empty(), "grid.policies", "empty");
  need(grid["runs"].is_number_unsigned() && grid["runs"].get<size_t>() == g.size(), "grid.runs",
       "disagrees with grid.policies x grid.vary (" + std::to_string(g.size()) + " runs)");
  return g;
}

// Whether a configured value can be what a --vary value set: the same text for a name, the
// same number for a number. Other forms (units such as 80GiB, booleans, lists) are not compared.
bool SameSetting(const J& configured, const std::string& value) {
  if (configured.is_string()) return configured.get<std::string>() == value;
  if (!configured.is_number()) return true;
  try {
    size_t used = 0;
    const double v = std::stod(value, &used);
    return used != value.size() || v == configured.get<double>();
  } catch (const std::exception&) {
    return true;
  }
}

// Run `gi` of a shard file must be the grid's run `gi`: its vary settings, its policy and the
// values of those keys in its own config (a hand-edited or mixed-up file is refused, not merged).
void CheckRunMatchesGrid(const J& r, const Grid& g, size_t gi, const Need& need) {
  const auto [policy, settings] = g.Run(gi);
  const std::string run = "run " + std::to_string(gi);
  if (r.contains("policy"))
    need(r["policy"] == policy, "runs[].policy",
         run + " has policy " + r["policy"].dump() + ", the grid's run is '" + policy + "'");
  need(r.contains("vary") && r["vary"].is_object() && r["vary"].size() == settings.size(),
       "runs[].vary", run + ": expected the grid's " + std::to_string(settings.size()) + " keys");
  for (const auto& [key, value] : settings) {
    need(r["vary"].contains(key) && r["vary"][key] == value, "runs[].vary",
         run + " has " + key + "=" + (r["vary"].contains(key) ? r["vary"][key].dump() : "(none)") +
             ", the grid's run has " + key + "=" + value);
    if (r.contains("config") && r["config"].is_object() && r["config"].contains(key))
      need(SameSetting(r["config"][key], value), "runs[].config",
           run + "'s config has " + key + "=" + r["config"][key].dump() +
               ", its vary and the grid say " + value);
  }
}

// A value for a message, cut to 80 characters.
std::string Shown(const J& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

// The fields of run `gi` that the merged file's table and CSV read (RunsToCsv, PrintRunsTable),
// with their types: a shard edited by hand is refused naming the field, not merged.
void CheckRunFields(const J& r, size_t gi, const Need& need) {
  const std::string run = "run " + std::to_string(gi) + ": ";
  for (const char* key : {"policy", "eviction_order", "placement"})
    need(r.contains(key) && r[key].is_string(), ("runs[]." + std::string(key)).c_str(),
         run + "expected a name");
  const J& ratio = r.contains("token_hit_ratio") ? r["token_hit_ratio"] : J();
  need(ratio.is_number() && ratio.get<double>() >= 0 && ratio.get<double>() <= 1,
       "runs[].token_hit_ratio", run + Shown(ratio) + ", expected a number in 0..1");
  std::vector<const char*> counts = {"/requests", "/input_tokens"};
  counts.insert(counts.end(), std::begin(kRunCounts), std::end(kRunCounts));
  for (const char* ptr : counts) {
    const J::json_pointer at(ptr);
    std::string field = "runs[]" + at.to_string();
    std::replace(field.begin(), field.end(), '/', '.');
    const bool ok = r.contains(at) && r[at].is_number_integer() &&
                    (r[at].is_number_unsigned() || r[at].get<int64_t>() >= 0);
    need(ok, field.c_str(),
         run + (r.contains(at) ? Shown(r[at]) : "missing") + ", expected an integer >= 0");
  }
  for (const auto& [section, ptr] : {std::pair{"predicted", "/predicted/ttft_p50_s"},
                                     std::pair{"predicted", "/predicted/ttft_p99_s"},
                                     std::pair{"serving", "/serving/total/ttft_p50_s"},
                                     std::pair{"serving", "/serving/total/ttft_p99_s"},
                                     std::pair{"serving", "/serving/total/requests"}}) {
    if (!r.contains(section)) continue;
    const J::json_pointer at(ptr);
    std::string field = "runs[]" + at.to_string();
    std::replace(field.begin(), field.end(), '/', '.');
    need(r.contains(at) && r[at].is_number(), field.c_str(), run + "expected seconds (a number)");
  }
}

// Every run of the grid was read from the shard it belongs to (run gi in shard gi mod shards);
// otherwise the error names the first short shard's file and, for each short shard, its file and
// the runs it lacks.
void CheckEveryRunMerged(const std::map<size_t, J>& runs, size_t total, size_t shards,
                         const std::map<size_t, std::string>& shard_file) {
  std::string first_file, msg;
  for (size_t s = 0; s < shards; ++s) {
    std::vector<size_t> lack;
    size_t own = 0;
    for (size_t gi = s; gi < total; gi += shards, ++own)
      if (!runs.count(gi)) lack.push_back(gi);
    if (lack.empty()) continue;
    if (first_file.empty()) first_file = shard_file.at(s);
    msg += (msg.empty() ? "" : "; ") + std::string("shard ") + std::to_string(s) + "/" +
           std::to_string(shards) + " (" + shard_file.at(s) + ") holds " +
           std::to_string(own - lack.size()) + " of its " + std::to_string(own) +
           " runs, lacking run" + (lack.size() > 1 ? "s " : " ");
    for (size_t i = 0; i < lack.size() && i < 8; ++i)
      msg += (i ? ", " : "") + std::to_string(lack[i]);
    if (lack.size() > 8) msg += " and " + std::to_string(lack.size() - 8) + " more";
  }
  if (!msg.empty())
    throw InputError(first_file, 0, "runs",
                     msg + " of the " + std::to_string(total) +
                         "-run grid (a shard file written by an interrupted run?)");
}

// A shard file's {index, count}: whole numbers, count in 1..kMaxSweepRuns (as --shard takes it),
// index below count. A string or null here was an uncaught type error, and a count of 10^11 made
// the "missing shards" list take every byte of memory.
template <typename Need>
std::pair<size_t, size_t> ShardOfSweepFile(const J& doc, const Need& need) {
  need(doc.contains("shard") && doc["shard"].is_object() && doc["shard"].contains("index") &&
           doc["shard"].contains("count"),
       "shard", "missing");
  const J& count = doc["shard"]["count"];
  const J& index = doc["shard"]["index"];
  need(count.is_number_unsigned() && count.get<size_t>() >= 1 &&
           count.get<size_t>() <= kMaxSweepRuns,
       "shard.count",
       "must be a whole number in 1.." + std::to_string(kMaxSweepRuns) + ", got " + count.dump());
  need(index.is_number_unsigned() && index.get<size_t>() < count.get<size_t>(), "shard.index",
       "must be a whole number below shard.count " + count.dump() + ", got " + index.dump());
  return {index.get<size_t>(), count.get<size_t>()};
}

}  // namespace

J MergeSweepFiles(const std::vector<std::string>& paths) {
  if (paths.empty()) throw InputError("", 0, "sweep merge", "no shard files given");
  J grid;
  std::string grid_from;
  size_t shards = 0;
  std::map<size_t, std::string> shard_file;  // shard index -> file
  std::map<size_t, J> runs;                  // grid index -> run
  size_t skipped = 0;
  for (const auto& path : paths) {
    // A glob like sweep.*.json also matches a CSV's context sidecar (FILE.csv.context.json).
    const std::string_view sidecar = ".csv.context.json";
    if (path.size() >= sidecar.size() &&
        path.compare(path.size() - sidecar.size(), sidecar.size(), sidecar) == 0) {
      std::fprintf(stderr, "kvlanes sweep merge: skipping %s (a CSV's context sidecar)\n",
                   path.c_str());
      ++skipped;
      continue;
    }
    // Bounded and never waiting forever (ReadInputFile); duplicate keys and numbers no double
    // holds refused with their line (ParseJsonStrict); then parsed again keeping key order.
    const std::string text = ReadInputFile(path, "sweep result");
    ParseJsonStrict(text, path);
    const J doc = J::parse(text);
    const auto need = [&](bool ok, const char* field, const std::string& msg) {
      if (!ok) throw InputError(path, 0, field, msg);
    };
    need(doc.is_object() && doc.contains("sweep_version"), "sweep_version",
         "missing: not written by kvlanes sweep --json");
    need(doc["sweep_version"] == 1, "sweep_version",
         "unsupported version " + doc["sweep_version"].dump());
    need(doc.contains("grid") && doc["grid"].is_object() && doc["grid"].contains("runs"), "grid",
         "missing");
    const auto [index, count] = ShardOfSweepFile(doc, need);
    need(doc.contains("runs") && doc["runs"].is_array(), "runs", "missing");
    if (grid_from.empty()) {
      grid = doc["grid"];
      grid_from = path;
      shards = count;
    }
    need(doc["grid"] == grid, "grid",
         "differs from " + grid_from + "'s (another trace, config, policy list or --vary)");
    need(count == shards, "shard.count",
         std::to_string(count) + " shards here, " + std::to_string(shards) + " in " + grid_from);
    const auto [it, fresh] = shard_file.emplace(index, path);
    need(fresh, "shard.index",
         "shard " + std::to_string(index) + "/" + std::to_string(count) + " is also in " +
             it->second);
    const Grid g = GridOfSweepFile(doc["grid"], need);
    for (const auto& r : doc["runs"]) {
      need(r.is_object() && r.contains("grid_index") && r["grid_index"].is_number_unsigned(),
           "runs[].grid_index", "missing or not a whole number >= 0");
      const size_t gi = r["grid_index"].get<size_t>();
      need(gi < g.size(), "runs[].grid_index",
           "run " + std::to_string(gi) + " is beyond the grid, which has " +
               std::to_string(g.size()) + " runs (grid.runs, grid.policies x grid.vary)");
      CheckRunMatchesGrid(r, g, gi, need);
      CheckRunFields(r, gi, need);
      need(gi % count == index, "runs[].grid_index",
           "run " + std::to_string(gi) + " does not belong to shard " + std::to_string(index) +
               "/" + std::to_string(count));
      need(runs.emplace(gi, r).second, "runs[].grid_index",
           "run " + std::to_string(gi) + " given twice");
    }
  }
  if (shard_file.empty())
    throw InputError(
        "", 0, "sweep merge",
        "no shard files given (" + std::to_string(skipped) + " CSV context sidecars skipped)");
  std::string missing;
  const size_t lacking = shards - shard_file.size();
  for (size_t s = 0, listed = 0; s < shards && listed < 20; ++s)
    if (!shard_file.count(s)) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(s);
      ++listed;
    }
  if (lacking > 20) missing += ", ... (" + std::to_string(lacking) + " in all)";
  if (lacking > 0)
    throw InputError("", 0, "sweep merge",
                     "missing shards " + missing + " of " + std::to_string(shards));
  CheckEveryRunMerged(runs, grid["runs"].get<size_t>(), shards, shard_file);
  J out;
  out["sweep_version"] = 1;
  out["grid"] = grid;
  out["shard"] = J{{"index", 0}, {"count", 1}};
  J all = J::array();
  for (auto& [gi, r] : runs) all.push_back(std::move(r));
  out["runs"] = std::move(all);
  return out;
}

}  // namespace kvlanes::driver

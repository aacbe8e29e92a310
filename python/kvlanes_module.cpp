// The `kvlanes` Python module: replay, compare and sweep from a config dict (or a YAML file),
// returning the same reports the command line writes as Python dicts, and the per-request table
// as columns (a dict of equal-length lists that pandas.DataFrame takes). docs/python.md.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "policies/registry.h"
#include "sim/config.h"
#include "sim/report/report.h"
#include "sim/report/request_table.h"
#include "tools/run_grid.h"
#include "traces/build_info.h"
#include "traces/input_error.h"
#include "traces/trace_reader.h"

namespace py = pybind11;

namespace kvlanes::python {
namespace {

using J = nlohmann::ordered_json;

// JSON text is YAML, so a Python value dumped by the json module is a valid `--set` value.
std::string YamlValue(const py::handle& v) {
  return py::module_::import("json").attr("dumps")(v).cast<std::string>();
}

// {"cache": {"cp_size": 4}} and {"cache.cp_size": 4} both become cache.cp_size=4.
void ApplyDict(const py::dict& d, const std::string& prefix, ReplayConfig& cfg) {
  for (const auto& [k, v] : d) {
    const std::string key = prefix + py::str(k).cast<std::string>();
    if (py::isinstance<py::dict>(v) && key != "model.pools")
      ApplyDict(v.cast<py::dict>(), key + ".", cfg);
    else
      ApplyConfigSetting(key + "=" + YamlValue(v), cfg);
  }
}

// Defaults, then the config (a YAML path or a dict), then policy and profile, then `set`.
ReplayConfig MakeConfig(const py::object& config, const std::optional<std::string>& policy,
                        const std::optional<std::string>& profile, const py::object& set) {
  ReplayConfig cfg;
  if (py::isinstance<py::str>(config)) {
    LoadConfigFile(config.cast<std::string>(), cfg);
  } else if (py::isinstance<py::dict>(config)) {
    ApplyDict(config.cast<py::dict>(), "", cfg);
  } else if (!config.is_none()) {
    throw py::type_error("config: a YAML file path or a dict of config keys");
  }
  if (policy) cfg.policy = *policy;
  if (profile) cfg.hardware.profile = *profile;
  if (py::isinstance<py::dict>(set))
    ApplyDict(set.cast<py::dict>(), "", cfg);
  else if (!set.is_none())
    throw py::type_error("set: a dict of config keys");
  ValidateConfig(cfg);
  return cfg;
}

std::vector<std::string> Paths(const py::object& trace) {
  if (py::isinstance<py::str>(trace)) return {trace.cast<std::string>()};
  return trace.cast<std::vector<std::string>>();
}

Trace LoadFor(const ReplayConfig& cfg, const std::vector<std::string>& paths, bool allow_unsorted) {
  TraceOptions opt;
  opt.page_tokens = cfg.cache.page_tokens;
  opt.block_tokens = cfg.trace.block_tokens;
  opt.allow_unsorted = allow_unsorted;
  std::optional<TraceFormat> fmt;
  if (cfg.trace.format != "auto") fmt = ParseTraceFormat(cfg.trace.format);
  Trace t = LoadTrace(paths, fmt, opt);
  if (t.requests.empty())
    throw InputError(t.sources.empty() ? "" : t.sources[0], 0, "", "the trace holds no requests");
  return t;
}

py::object ToPython(const J& j) { return py::module_::import("json").attr("loads")(j.dump()); }

py::dict Columns(const RequestTable& t) {
  py::dict d;
  for (const std::string& c : t.Columns()) {
    switch (t.ColumnKind(c)) {
      case RequestTable::Kind::kText:
        d[py::str(c)] = py::cast(t.Texts(c));
        break;
      case RequestTable::Kind::kReal:
        d[py::str(c)] = py::cast(t.Reals(c));
        break;
      case RequestTable::Kind::kInteger:
        d[py::str(c)] = py::cast(t.Integers(c));
        break;
    }
  }
  return d;
}

int Threads(int threads, size_t jobs) {
  if (threads < 0) throw InputError("", 0, "threads", "must be >= 0 (0 = hardware threads)");
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(
      std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(1, jobs)));
}

py::dict Replay(const py::object& trace, const py::object& config,
                const std::optional<std::string>& policy, const py::object& set,
                const std::optional<std::string>& profile, bool allow_unsorted) {
  const ReplayConfig cfg = MakeConfig(config, policy, profile, set);
  const std::vector<std::string> paths = Paths(trace);
  J report;
  RequestTable table(cfg);
  {
    py::gil_scoped_release release;
    const Trace t = LoadFor(cfg, paths, allow_unsorted);
    const PolicyInputs policy_in{cfg, t, PolicyCostModel(cfg)};  // one cost model for the run
    auto pol = MakePolicy(cfg.policy, policy_in);
    ReplaySinks sinks;
    sinks.replica_policy = [&] { return MakePolicy(cfg.policy, policy_in); };
    table.Attach(sinks);
    report = RunReplay(cfg, *pol, t, EngineOptions{}, {}, sinks);
  }
  py::dict out;
  out["report"] = ToPython(report);
  out["requests"] = Columns(table);
  return out;
}

py::object Compare(const py::object& trace, const std::vector<std::string>& policies,
                   const py::object& config, const py::object& set,
                   const std::optional<std::string>& profile, int threads, bool allow_unsorted) {
  if (policies.empty()) throw InputError("", 0, "policies", "name at least one policy");
  for (const auto& n : policies) CheckPolicyName(n, "policies");
  const ReplayConfig base = MakeConfig(config, std::nullopt, profile, set);
  const std::vector<std::string> paths = Paths(trace);
  J doc;
  {
    py::gil_scoped_release release;
    const Trace t = LoadFor(base, paths, allow_unsorted);
    std::vector<cli::ReplayJob> jobs;
    for (const auto& n : policies) {
      ReplayConfig cfg = base;
      cfg.policy = n;
      jobs.push_back(cli::ReplayJob{n, cfg, &t});
    }
    const auto reports = cli::RunReplayJobs(jobs, Threads(threads, jobs.size()), {});
    doc["compare_version"] = 1;
    doc["context"] = {
        {"trace", t.sources}, {"requests", t.requests.size()}, {"config", ConfigToJson(base)}};
    doc["runs"] = J::array();
    for (const auto& r : reports) doc["runs"].push_back(r);
  }
  return ToPython(doc);
}

py::object Sweep(const py::object& trace, const std::vector<std::string>& policies,
                 const py::dict& vary, const py::object& config, const py::object& set,
                 const std::optional<std::string>& profile, int threads, bool allow_unsorted) {
  if (policies.empty()) throw InputError("", 0, "policies", "name at least one policy");
  for (const auto& n : policies) CheckPolicyName(n, "policies");
  const ReplayConfig base = MakeConfig(config, std::nullopt, profile, set);
  cli::Grid grid;
  grid.policies = policies;
  for (const auto& [k, v] : vary) {
    cli::VaryAxis a;
    a.key = py::str(k).cast<std::string>();
    for (const auto& x : v.cast<py::list>()) a.values.push_back(YamlValue(x));
    if (a.values.empty()) throw InputError("", 0, "vary", a.key + ": give at least one value");
    grid.axes.push_back(std::move(a));
  }
  const std::vector<std::string> paths = Paths(trace);
  J doc;
  {
    py::gil_scoped_release release;
    // Runs that change how the trace is read get it read their way, once per distinct way.
    std::map<std::tuple<int64_t, int64_t, std::string>, Trace> traces;
    std::vector<cli::ReplayJob> jobs;
    for (size_t i = 0; i < grid.size(); ++i) {
      ReplayConfig cfg = cli::GridRunConfig(base, grid, i);
      const auto key =
          std::make_tuple(cfg.cache.page_tokens, cfg.trace.block_tokens, cfg.trace.format);
      auto it = traces.find(key);
      if (it == traces.end()) it = traces.emplace(key, LoadFor(cfg, paths, allow_unsorted)).first;
      jobs.push_back(cli::ReplayJob{cfg.policy, cfg, &it->second});
    }
    const auto reports = cli::RunReplayJobs(jobs, Threads(threads, jobs.size()), {});
    doc["sweep_version"] = 1;
    J g;
    g["trace"] = jobs.empty() ? J::array() : J(jobs[0].trace->sources);
    g["base_config"] = ConfigToJson(base);
    g["policies"] = grid.policies;
    g["vary"] = J::array();
    for (const auto& a : grid.axes) g["vary"].push_back(J{{"key", a.key}, {"values", a.values}});
    g["runs"] = grid.size();
    doc["grid"] = g;
    doc["runs"] = J::array();
    for (size_t i = 0; i < jobs.size(); ++i) {
      J run;
      run["grid_index"] = i;
      J settings = J::object();
      for (const auto& [k, v] : grid.Run(i).second) settings[k] = v;
      run["vary"] = settings;
      for (const auto& [k, v] : reports[i].items()) run[k] = v;
      doc["runs"].push_back(std::move(run));
    }
  }
  return ToPython(doc);
}

}  // namespace
}  // namespace kvlanes::python

PYBIND11_MODULE(kvlanes, m) {
  namespace kp = kvlanes::python;
  m.doc() =
      "kvlanes: KV-cache placement replay for context-parallel serving.\n"
      "replay(), compare() and sweep() return the reports `kvlanes replay/compare/sweep "
      "--json` write.";
  m.attr("__version__") = kvlanes::BuildVersion();
  static py::exception<kvlanes::InputError> input_error(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kvlanes::InputError& e) {
      PyErr_SetString(input_error.ptr(), e.what());
    }
  });
  m.def("replay", &kp::Replay, py::arg("trace"), py::kw_only(), py::arg("config") = py::none(),
        py::arg("policy") = py::none(), py::arg("set") = py::none(),
        py::arg("profile") = py::none(), py::arg("allow_unsorted") = false,
        "Replays a trace (a path or a list of paths) through one policy.\n"
        "config: a YAML file path or a dict ({'cache': {'cp_size': 4}} or {'cache.cp_size': 4});\n"
        "set: a dict of config keys applied last. Returns {'report': dict, 'requests': columns},\n"
        "where columns is a dict of equal-length lists (pandas.DataFrame(r['requests'])).\n"
        "Raises kvlanes.InputError (a ValueError) on bad input, naming file, line and field.");
  m.def("compare", &kp::Compare, py::arg("trace"), py::kw_only(), py::arg("policies"),
        py::arg("config") = py::none(), py::arg("set") = py::none(),
        py::arg("profile") = py::none(), py::arg("threads") = 0, py::arg("allow_unsorted") = false,
        "Replays one trace through several policies (parallel threads; same results as\n"
        "sequential runs). Returns what `kvlanes compare --json` writes: {context, runs}.");
  m.def("sweep", &kp::Sweep, py::arg("trace"), py::kw_only(), py::arg("policies"), py::arg("vary"),
        py::arg("config") = py::none(), py::arg("set") = py::none(),
        py::arg("profile") = py::none(), py::arg("threads") = 0, py::arg("allow_unsorted") = false,
        "A grid of replays: every policy x every combination of vary values\n"
        "(vary={'cache.device_pages_per_lane': [1000, 2000]}). Returns {grid, runs} as\n"
        "`kvlanes sweep --json` writes (without shards).");
}

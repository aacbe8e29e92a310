// The `kvlanes` Python module: replay, compare and sweep from a config dict (or a YAML file),
// returning the same reports the command line writes as Python dicts, and the per-request table
// as columns (a dict of equal-length lists that pandas.DataFrame takes). docs/python.md.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "driver/replay_inputs.h"
#include "driver/run_grid.h"
#include "io/build_info.h"
#include "io/input_error.h"
#include "io/input_file.h"
#include "policies/registry.h"
#include "sim/config.h"
#include "sim/report/report.h"
#include "sim/report/request_table.h"
#include "sim/yaml_input.h"
#include "traces/trace_reader.h"

namespace py = pybind11;

namespace kvlanes::python {
namespace {

using J = nlohmann::ordered_json;

// JSON text is YAML, so a Python value dumped by the json module is a valid `--set` value.
// `at` names the value as the caller wrote it (set['cache.cp_size']): a value JSON cannot hold
// (an object, bytes, a list that contains itself) is an InputError naming it.
std::string YamlValue(const py::handle& v, const std::string& at) {
  try {
    return py::module_::import("json").attr("dumps")(v).cast<std::string>();
  } catch (py::error_already_set& e) {
    throw InputError("", 0, at,
                     "a number, string, bool, None or a list of them, got " +
                         py::str(py::type::of(v).attr("__name__")).cast<std::string>() + " (" +
                         py::str(e.value()).cast<std::string>() + ")");
  }
}

// A path given as str or os.PathLike (pathlib.Path), as the bytes the file system sees
// (os.fsencode: a name that is not UTF-8 arrives as surrogate escapes and goes back to its
// bytes); `param` names the parameter.
std::string PathOf(const py::handle& p, const std::string& param) {
  if (py::isinstance<py::str>(p) || py::hasattr(p, "__fspath__"))
    return py::module_::import("os").attr("fsencode")(p).cast<std::string>();
  throw py::type_error(param + ": a path (str or pathlib.Path), got " +
                       py::str(py::type::of(p).attr("__name__")).cast<std::string>());
}

bool IsPath(const py::handle& p) {
  return py::isinstance<py::str>(p) || py::hasattr(p, "__fspath__");
}

// Where each key of one dict parameter was written (dotted key -> "set['cache']['cp_size']"), so
// a key given both dotted and nested is refused as a config file refuses it, not the last one
// winning.
using WrittenKeys = std::map<std::string, std::string>;

// {"cache": {"cp_size": 4}} and {"cache.cp_size": 4} both become cache.cp_size=4. An error names
// the parameter and key as the caller wrote them (set['cache.cp_size']), not the command line's
// --set. `written` is the path of `d` as the caller wrote it ("set['cache']"), `depth` the
// number of dicts around `d`'s keys: nesting is bounded as in a config file (kMaxYamlDepth).
void ApplyDict(const py::dict& d, const std::string& param, const std::string& prefix,
               const std::string& written, int depth, WrittenKeys& seen, ReplayConfig& cfg) {
  for (const auto& [k, v] : d) {
    const std::string name = py::str(k).cast<std::string>();
    const std::string key = prefix + name;
    const std::string at = written + "['" + name + "']";
    if (py::isinstance<py::dict>(v) && key != "model.pools") {
      if (depth >= kMaxYamlDepth)
        throw InputError("", 0, param + "['" + key + "']",
                         "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
      ApplyDict(v.cast<py::dict>(), param, key + ".", at, depth + 1, seen, cfg);
      continue;
    }
    const auto [first, fresh] = seen.emplace(key, at);
    if (!fresh) throw InputError("", 0, at, "given twice (also as " + first->second + ")");
    try {
      ApplyConfigSetting(key + "=" + YamlValue(v, at), cfg);
    } catch (const InputError& e) {
      throw InputError("", 0, param + "['" + key + "']", e.message());
    }
  }
}

// A dict parameter's keys over `cfg` (ApplyDict from the top).
void ApplyDict(const py::dict& d, const std::string& param, ReplayConfig& cfg) {
  WrittenKeys seen;
  ApplyDict(d, param, "", param, 1, seen, cfg);
}

// Defaults, then the config (a YAML path or a dict), then policy and profile, then `set`.
ReplayConfig MakeConfig(const py::object& config, const std::optional<std::string>& policy,
                        const py::object& profile, const py::object& set) {
  ReplayConfig cfg;
  if (IsPath(config)) {
    LoadConfigFile(PathOf(config, "config"), cfg);
  } else if (py::isinstance<py::dict>(config)) {
    ApplyDict(config.cast<py::dict>(), "config", cfg);
  } else if (!config.is_none()) {
    throw py::type_error("config: a YAML file path (str or pathlib.Path) or a dict of config keys");
  }
  if (policy) cfg.policy = *policy;
  if (!profile.is_none()) cfg.hardware.profile = PathOf(profile, "profile");
  if (py::isinstance<py::dict>(set))
    ApplyDict(set.cast<py::dict>(), "set", cfg);
  else if (!set.is_none())
    throw py::type_error("set: a dict of config keys");
  ValidateConfig(cfg);
  return cfg;
}

// `trace`: one path or a list of them, each a str or os.PathLike.
std::vector<std::string> Paths(const py::object& trace) {
  if (IsPath(trace)) return {PathOf(trace, "trace")};
  if (!py::isinstance<py::sequence>(trace))
    throw py::type_error("trace: a path (str or pathlib.Path) or a list of paths");
  std::vector<std::string> paths;
  for (const auto& p : trace.cast<py::sequence>()) paths.push_back(PathOf(p, "trace"));
  return paths;
}

Trace LoadFor(const ReplayConfig& cfg, const std::vector<std::string>& paths, bool allow_unsorted) {
  TraceOptions opt;
  opt.allow_unsorted = allow_unsorted;
  return driver::LoadTraceFor(cfg, paths, opt);
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

// Run i's config; an error names the vary value as the caller wrote it (vary['key'] = value).
ReplayConfig RunConfigOf(const ReplayConfig& base, const driver::Grid& grid, size_t i) {
  try {
    return driver::GridRunConfig(base, grid, i);
  } catch (const InputError& e) {
    std::string field = e.field();  // "--vary key=value"
    static const std::string kVary = "--vary ";
    if (field.rfind(kVary, 0) == 0) {
      const std::string kv = field.substr(kVary.size());
      const auto eq = kv.find('=');
      field = "vary['" + kv.substr(0, eq) + "'] = " + kv.substr(eq + 1);
    }
    throw InputError(e.file(), e.line(), field, e.message());
  }
}

// Messages written for the command line name its options; from Python they name the
// parameters that do the same (the kvlanes command's option where Python has none).
std::string InPythonWords(std::string m) {
  static const std::pair<const char*, const char*> kWords[] = {
      {"pass --allow-unsorted", "pass allow_unsorted=True"},
      {"use --format", "give set={'trace.format': NAME}"},
      {"leave --format out", "leave trace.format out"},
      {"needs --format ", "needs trace.format "},
      {"pass --format ", "set trace.format to "},
      {"raise it with --max-line-bytes", "the kvlanes command's --max-line-bytes raises it"},
      {"raise it with --max-file-bytes", "the kvlanes command's --max-file-bytes raises it"},
      {"--set ", "set "},
      {"--vary ", "vary "},
  };
  for (const auto& [cli, python] : kWords)
    for (size_t at = m.find(cli); at != std::string::npos; at = m.find(cli, at + 1))
      m.replace(at, std::string(cli).size(), python);
  return m;
}

int Threads(int threads, size_t jobs) {
  if (threads < 0) throw InputError("", 0, "threads", "must be >= 0 (0 = hardware threads)");
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(
      std::min<size_t>(static_cast<size_t>(threads), std::max<size_t>(1, jobs)));
}

py::dict Replay(const py::object& trace, const py::object& config,
                const std::optional<std::string>& policy, const py::object& set,
                const py::object& profile, bool allow_unsorted) {
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
    sinks.cost = policy_in.cost;
    table.Attach(sinks);
    report = RunReplay(cfg, *pol, t, EngineOptions{}, {}, sinks);
  }
  py::dict out;
  out["report"] = ToPython(report);
  out["requests"] = Columns(table);
  return out;
}

py::object Compare(const py::object& trace, const std::vector<std::string>& policies,
                   const py::object& config, const py::object& set, const py::object& profile,
                   int threads, bool allow_unsorted) {
  if (policies.empty()) throw InputError("", 0, "policies", "name at least one policy");
  for (const auto& n : policies) CheckPolicyName(n, "policies");
  const ReplayConfig base = MakeConfig(config, std::nullopt, profile, set);
  const std::vector<std::string> paths = Paths(trace);
  J doc;
  {
    py::gil_scoped_release release;
    const Trace t = LoadFor(base, paths, allow_unsorted);
    std::vector<driver::ReplayJob> jobs;
    for (const auto& n : policies) {
      ReplayConfig cfg = base;
      cfg.policy = n;
      jobs.push_back(driver::ReplayJob{n, cfg, &t});
    }
    const auto reports = driver::RunReplayJobs(jobs, Threads(threads, jobs.size()), {});
    doc["compare_version"] = 1;
    doc["context"] = {{"trace", JsonSafeTexts(t.sources)},
                      {"requests", t.requests.size()},
                      {"config", ConfigToJson(base)}};
    doc["runs"] = J::array();
    for (const auto& r : reports) doc["runs"].push_back(r);
  }
  return ToPython(doc);
}

py::object Sweep(const py::object& trace, const std::vector<std::string>& policies,
                 const py::dict& vary, const py::object& config, const py::object& set,
                 const py::object& profile, int threads, bool allow_unsorted) {
  if (policies.empty()) throw InputError("", 0, "policies", "name at least one policy");
  for (const auto& n : policies) CheckPolicyName(n, "policies");
  const ReplayConfig base = MakeConfig(config, std::nullopt, profile, set);
  driver::Grid grid;
  grid.policies = policies;
  // Per axis, each value's YAML text -> the Python value given, handed back in the result (the
  // grid works on the text; the caller gets 5000 back, not "5000").
  std::vector<std::map<std::string, py::object>> given;
  for (const auto& [k, v] : vary) {
    driver::VaryAxis a;
    a.key = py::str(k).cast<std::string>();
    if (py::isinstance<py::str>(v) || py::isinstance<py::dict>(v) ||
        !py::isinstance<py::iterable>(v))
      throw py::type_error("vary['" + a.key + "']: a list of values, got " +
                           py::repr(v).cast<std::string>() + " (for one value: [" +
                           py::repr(v).cast<std::string>() + "])");
    given.emplace_back();
    for (const auto& x : v) {
      if (a.values.size() == driver::kMaxSweepRuns)  // an endless or huge iterable: stop reading
        throw InputError("", 0, "vary['" + a.key + "']",
                         "more than " + std::to_string(driver::kMaxSweepRuns) +
                             " values (kMaxSweepRuns, the most runs of a sweep grid)");
      a.values.push_back(YamlValue(x, "vary['" + a.key + "']"));
      given.back().emplace(a.values.back(), py::reinterpret_borrow<py::object>(x));
    }
    if (a.values.empty())
      throw InputError("", 0, "vary['" + a.key + "']", "give at least one value");
    grid.axes.push_back(std::move(a));
  }
  driver::CheckGridSize(grid, "vary");
  const std::vector<std::string> paths = Paths(trace);
  J doc;
  {
    py::gil_scoped_release release;
    // Runs that change how the trace is read get it read their way, once per distinct way.
    std::map<std::tuple<int64_t, int64_t, std::string>, Trace> traces;
    std::vector<driver::ReplayJob> jobs;
    for (size_t i = 0; i < grid.size(); ++i) {
      ReplayConfig cfg = RunConfigOf(base, grid, i);
      const auto key =
          std::make_tuple(cfg.cache.page_tokens, cfg.trace.block_tokens, cfg.trace.format);
      auto it = traces.find(key);
      if (it == traces.end()) it = traces.emplace(key, LoadFor(cfg, paths, allow_unsorted)).first;
      jobs.push_back(driver::ReplayJob{cfg.policy, cfg, &it->second});
    }
    const auto reports = driver::RunReplayJobs(jobs, Threads(threads, jobs.size()), {});
    std::vector<size_t> every(jobs.size());
    std::iota(every.begin(), every.end(), size_t{0});
    doc = driver::SweepDoc(base, grid,
                           jobs.empty() ? std::vector<std::string>{} : jobs[0].trace->sources,
                           every, reports, std::nullopt);
  }
  py::object out = ToPython(doc);
  for (size_t a = 0; a < grid.axes.size(); ++a) {
    const std::string& key = grid.axes[a].key;
    py::list values;
    for (const std::string& v : grid.axes[a].values) values.append(given[a].at(v));
    out["grid"]["vary"][py::int_(a)]["values"] = values;
    for (auto run : out["runs"])
      run["vary"][py::str(key)] = given[a].at(run["vary"][py::str(key)].cast<std::string>());
  }
  return out;
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
      // A message may hold bytes that are not UTF-8 (a path's): shown as \xNN escapes.
      const std::string text = kvlanes::python::InPythonWords(e.what());
      PyObject* msg = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                                           "backslashreplace");
      PyErr_SetObject(input_error.ptr(), msg);
      Py_XDECREF(msg);
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

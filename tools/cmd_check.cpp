// kvlanes check: predicted vs measured seconds per plan op, per request and for the whole replay,
// with a verdict against thresholds (statistics and formats: docs/calibration.md).
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/output_file.h"
#include "sim/compare/check_stats.h"
#include "sim/compare/op_predictions.h"
#include "sim/compare/serving_check.h"
#include "sim/predict/cost_model.h"
#include "sim/predict/hardware_profile.h"
#include "sim/predict/plan.h"
#include "sim/predict/plan_pricing.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// tools/plot_check.py beside this source file, or $KVLANES_PLOT_SCRIPT.
std::string PlotScript() {
  if (const char* env = std::getenv("KVLANES_PLOT_SCRIPT")) return env;
  std::string here = __FILE__;
  const auto slash = here.rfind('/');
  return (slash == std::string::npos ? std::string(".") : here.substr(0, slash)) + "/plot_check.py";
}

// The first of $KVLANES_PYTHON, python3 on PATH, /usr/bin/python3 (Debian's, where
// python3-matplotlib installs) that can import matplotlib; "" when none can.
std::string PythonWithMatplotlib(std::string& tried) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KVLANES_PYTHON")) candidates.push_back(env);
  candidates.push_back("python3");
  candidates.push_back("/usr/bin/python3");
  for (const std::string& py : candidates) {
    tried += (tried.empty() ? "" : ", ") + py;
    if (std::system((ShellQuote(py) + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0)
      return py;
  }
  return "";
}

struct Plotter {
  std::string python, script;
};

// Fails early, before any work, when --plot cannot work here.
Plotter CheckPlotting(const std::string& out) {
  const auto dot = out.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : out.substr(dot + 1);
  if (ext != "png" && ext != "svg")
    throw InputError("", 0, "--plot", "the file must end in .png or .svg");
  Plotter p;
  p.script = PlotScript();
  if (!Exists(p.script))
    throw InputError("", 0, "--plot",
                     "plot script not found at " + p.script + " (set KVLANES_PLOT_SCRIPT)");
  std::string tried;
  p.python = PythonWithMatplotlib(tried);
  if (p.python.empty())
    throw InputError("", 0, "--plot",
                     "needs python3 with matplotlib; none of " + tried +
                         " imports it (Debian: apt-get install python3-matplotlib; or set "
                         "KVLANES_PYTHON)");
  return p;
}

// A serving-mode plan of several replicas is checked one replica at a time: each replica's
// records are one CP group's plan, and their op ids (request numbers counting within the
// replica) repeat across replicas.
// A serving plan's passes, handed over with the cost model that priced the plan (the check of
// the passes and the times to first token).
using ServingHook = std::function<void(const CostModel&, const PlanFile&)>;

// The serving check of a run that measured passes (a run of the requests one at a time has none):
// the plan's passes of the requests that ran, priced by the plan's cost model, against them.
ServingHook ServingCheckHook(std::optional<ServingCheck>& out,
                             const std::function<const Measured&()>& meas_file) {
  return [&out, meas_file](const CostModel& model, const PlanFile& plan) {
    const Measured& m = meas_file();
    if (m.pass_s.empty()) return;
    std::vector<RequestPlan> requests = plan.requests;
    if (m.requests_executed && *m.requests_executed < static_cast<int64_t>(requests.size()))
      requests.resize(static_cast<size_t>(*m.requests_executed));
    std::vector<PlanPass> passes = plan.passes;
    KeepPassesOf(passes, requests, 0);
    out =
        CheckServing(PredictServing(model, requests, passes, plan.header.rate_scale), requests, m);
  };
}

// The check of a run: op by op, and for a run of serving passes pass by pass
// (KeepServingComparable, AddServingVerdict).
CheckReport CompareRun(Predictions& pred, const Measured& meas,
                       const std::optional<ServingCheck>& serving, const CheckOptions& opt) {
  if (!serving) return RunCheck(pred, meas, opt);
  Measured compared = meas;
  KeepServingComparable(*serving, pred, compared);
  CheckReport report = RunCheck(pred, compared, opt);
  AddServingVerdict(*serving, opt, report);
  return report;
}

// `synthetic` says whether the run used the synthetic forward pass: asked only once the plan has
// been read and its replicas checked, so that a bad plan is refused before the measured file is
// read.
Predictions PredictFromPlan(const std::string& plan_path, std::string profile_path,
                            double compute_scale, const std::function<bool()>& synthetic,
                            std::optional<int64_t> replica, std::string& config_hash,
                            std::string& profile_gpu, const ServingHook& serving) {
  PlanFile plan = ReadPlanFile(plan_path);
  config_hash = plan.header.config_hash;
  if (replica) {
    SelectReplica(plan, *replica, plan_path);
  } else if (const std::vector<int64_t> r = PlanReplicas(plan.requests); r.size() > 1) {
    throw InputError(plan_path, 0, "--replica",
                     "the plan holds " + std::to_string(r.size()) +
                         " replicas (serving mode), whose op ids repeat: check one at a time "
                         "with --replica N (0.." +
                         std::to_string(r.back()) +
                         ") against the measured file of `kvlanes exec --replica N`");
  }
  ReplayConfig cfg = PlanReplayConfig(plan.header, plan_path);
  // The profile given, else the one the plan stores (docs/plan.md), as `kvlanes exec` picks it.
  std::optional<PlanProfile> profile = ResolvePlanProfile(plan.header, profile_path, plan_path);
  if (!profile)
    throw InputError("", 0, "--profile",
                     "needed with --plan (the plan stores no hardware profile)");
  profile_path = profile->path;
  cfg.hardware.profile = profile_path;
  HardwareProfile& hw = profile->profile;
  if (hw.measured_on.count("gpu")) profile_gpu = hw.measured_on.at("gpu");
  // As `kvlanes exec --compute-scale`: the synthetic forward pass ran for this share of the model,
  // with the spin's own per-layer time and shares where the profile has them.
  if (synthetic()) {
    hw.UseSyntheticForward(compute_scale);
  } else {
    hw.ScaleCompute(compute_scale);
  }
  const CostModel model(hw, cfg, profile_path);
  if (!plan.passes.empty() && serving) serving(model, plan);
  return PredictPlan(model, cfg, plan.requests);
}

// The thresholds and listing options; the thresholds are given in percent.
CheckOptions CheckOptionsFrom(const po::variables_map& vm) {
  CheckOptions opt;
  opt.max_median = vm["max-median"].as<double>() / 100;
  opt.max_p95 = vm["max-p95"].as<double>() / 100;
  opt.max_total = vm["max-total"].as<double>() / 100;
  opt.allow_missing = vm["allow-missing"].as<bool>();
  const int64_t worst = vm["worst"].as<int64_t>();
  if (worst < 0) throw InputError("", 0, "--worst", "must be >= 0, got " + std::to_string(worst));
  opt.worst = static_cast<size_t>(worst);
  for (const char* k : {"max-median", "max-p95", "max-total"})
    if (!(vm[k].as<double>() >= 0) || !std::isfinite(vm[k].as<double>()))
      throw InputError("", 0, std::string("--") + k, "must be a finite percentage >= 0");
  return opt;
}

// From --plan (predicted here; `config_hash` set to the plan's) or from --predicted.
Predictions LoadPredictions(const po::variables_map& vm, double compute_scale,
                            const std::function<bool()>& synthetic, std::string& config_hash,
                            std::string& profile_gpu, const ServingHook& serving) {
  if (!vm.count("plan")) return ReadPredictions(vm["predicted"].as<std::string>());
  std::optional<int64_t> replica;
  if (vm.count("replica")) replica = vm["replica"].as<int64_t>();
  Predictions pred = PredictFromPlan(
      vm["plan"].as<std::string>(), vm.count("profile") ? vm["profile"].as<std::string>() : "",
      compute_scale, synthetic, replica, config_hash, profile_gpu, serving);
  return pred;
}

// The forward pass to price: --forward, or with auto the measured run's (its context's
// compute_model.forward is "model" for the proxy; a run without it used the synthetic pass).
// Without `meas`, the option as given (checked), "auto" included.
std::string ForwardOf(const po::variables_map& vm, const std::function<const Measured&()>& meas) {
  const std::string f = vm["forward"].as<std::string>();
  if (f != "auto" && f != "model" && f != "synthetic")
    throw InputError("", 0, "--forward", "expected auto, model or synthetic, got '" + f + "'");
  if (!vm.count("plan") && !vm["forward"].defaulted())
    throw InputError("", 0, "--forward", "only with --plan");
  if (f != "auto" || !meas) return f;
  const nlohmann::json& ctx = meas().context;
  const bool model = ctx.is_object() && ctx.contains("compute_model") &&
                     ctx["compute_model"].is_object() &&
                     ctx["compute_model"].value("forward", std::string()) == "model";
  return model ? "model" : "synthetic";
}

// A measured file of another plan is not joined: its context's config_hash (the FNV-1a 64 of
// the plan header's config, docs/plan.md) must be the plan's. Files without one are taken.
void CheckSamePlan(const Measured& meas, const std::string& plan_hash, const std::string& path,
                   const std::string& plan_path) {
  const nlohmann::json& ctx = meas.context;
  if (plan_hash.empty() || !ctx.is_object() || !ctx.contains("config_hash") ||
      !ctx["config_hash"].is_string())
    return;
  const std::string hash = ctx["config_hash"].get<std::string>();
  if (hash != plan_hash)
    throw InputError(path, 0, "context.config_hash",
                     hash + " is not the config hash of " + plan_path + " (" + plan_hash +
                         "): the file measures another plan's run (kvlanes exec --plan " +
                         plan_path + " measures this one)");
}

// A run on another GPU than the profile's measurements is said, not refused (a transfer check):
// the note, or "" when the GPUs agree or either is unknown.
std::string OtherGpuNote(const Measured& meas, const std::string& profile_gpu) {
  const nlohmann::json& c = meas.context;
  if (profile_gpu.empty() || !c.is_object() || !c.contains("gpu") || !c["gpu"].is_string())
    return "";
  const std::string run_gpu = c["gpu"].get<std::string>();
  if (run_gpu == profile_gpu) return "";
  return "the run measured " + JsonSafeText(run_gpu) + "; the profile was measured on " +
         JsonSafeText(profile_gpu);
}

// Runs the plot script on the report's JSON: the --json file when given, else a temporary copy.
void DrawPlot(const po::variables_map& vm, const Plotter& plotter, const std::string& json) {
  const std::string out = vm["plot"].as<std::string>();
  std::string data = vm.count("json") ? vm["json"].as<std::string>() : "";
  if (data.empty()) {
    char tmpl[] = "/tmp/kvlanes_check_XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0)
      throw InputError("", 0, "--plot", "cannot create a temporary file for the plot data");
    ::close(fd);
    data = tmpl;
    WriteFileAtomically(data, json);
  }
  const int rc = std::system((ShellQuote(plotter.python) + " " + ShellQuote(plotter.script) + " " +
                              ShellQuote(data) + " " + ShellQuote(out))
                                 .c_str());
  if (!vm.count("json")) std::remove(data.c_str());
  if (rc != 0)
    throw InputError(out, 0, "--plot", "the plot script failed (" + plotter.script + ")");
  if (!vm["quiet"].as<bool>()) std::printf("plot: %s\n", out.c_str());
}

void AddCheckOptions(po::options_description& desc) {
  const CheckOptions d;
  // clang-format off
  desc.add_options()
      ("predicted", po::value<std::string>(), "predictions file (docs/calibration.md); or give --plan")
      ("plan", po::value<std::string>(), "plan file of `kvlanes replay --plan`: predict it here")
      ("profile", po::value<std::string>(),
       "with --plan: hardware profile YAML (default: the plan's hardware.profile)")
      ("write-predicted", po::value<std::string>(), "with --plan: also write the predictions file")
      ("replica", po::value<int64_t>(),
       "with --plan of serving mode: check replica N's requests (as `kvlanes exec --replica N` ran "
       "them); required when the plan holds several replicas")
      ("compute-scale", po::value<double>()->default_value(1.0),
       "with --plan: multiply the profile's compute terms, as `kvlanes exec --compute-scale` did")
      ("forward", po::value<std::string>()->default_value("auto"),
       "with --plan: the forward pass the run used, model or synthetic (synthetic: priced with the "
       "profile's beside_spin terms); auto: as the measured file's context "
       "says")
      ("measured", po::value<std::string>(), "measured file of `kvlanes exec` (docs/calibration.md)")
      ("max-median", po::value<double>()->default_value(100 * d.max_median),
       "per kind: largest median APE, percent")
      ("max-p95", po::value<double>()->default_value(100 * d.max_p95),
       "per kind: largest p95 APE, percent")
      ("max-total", po::value<double>()->default_value(100 * d.max_total),
       "whole replay: largest total error, percent")
      ("allow-missing", po::bool_switch(),
       "ids on one side only are reported but do not fail the verdict")
      ("worst", po::value<int64_t>()->default_value(static_cast<int64_t>(d.worst)), "how many worst operations to list")
      ("json", po::value<std::string>(), "write the report as JSON")
      ("plot", po::value<std::string>(),
       "draw predicted vs measured (FILE.png or FILE.svg; python3 + matplotlib)")
      ("quiet,q", po::bool_switch(), "no console report (the exit code still gives the verdict)")
      ("help,h", "this help");
  // clang-format on
}

}  // namespace

int CmdCheck(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddCheckOptions(desc);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, nullptr, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(
        std::cout,
        std::string(argv[0]) +
            " (--predicted P.json | --plan PLAN [--profile H.yaml] [--replica N]) "
            "--measured M.json",
        "Joins predicted and measured seconds on plan op ids; prints per op kind, per request\n"
        "(service time) and for the whole replay the median and p95 absolute percentage error,\n"
        "the worst operations and a verdict. A serving-mode plan of several replicas is\n"
        "checked one replica at a time (--replica N, against `kvlanes exec --replica N`).\n"
        "Exit 0 pass, 1 fail, 2 bad input.",
        desc,
        {"kvlanes check --plan plan.jsonl --measured measured.json --json check.json",
         "kvlanes check --plan plan.jsonl --profile config/profiles/h200.yaml "
         "--measured measured.json --plot check.png",
         "kvlanes check --plan serving_plan.jsonl --replica 1 --measured measured_r1.json"});
    return 0;
  }
  try {
    CheckOutputOptions(vm, {"json", "write-predicted", "plot"},
                       {"plan", "predicted", "measured", "profile"});
    if (vm.count("predicted") == vm.count("plan"))
      throw InputError("", 0, "--predicted", "give either --predicted or --plan (exactly one)");
    if (!vm.count("measured")) throw InputError("", 0, "--measured", "a measured file is required");
    if (vm.count("plan") == 0 && (vm.count("profile") || vm.count("write-predicted") ||
                                  vm.count("replica") || !vm["compute-scale"].defaulted()))
      throw InputError("", 0,
                       vm.count("profile")           ? "--profile"
                       : vm.count("write-predicted") ? "--write-predicted"
                       : vm.count("replica")         ? "--replica"
                                                     : "--compute-scale",
                       "only with --plan");
    const double compute_scale = vm["compute-scale"].as<double>();
    if (!(compute_scale >= 0) || !std::isfinite(compute_scale))
      throw InputError("", 0, "--compute-scale", "must be a finite number >= 0");
    const CheckOptions opt = CheckOptionsFrom(vm);
    Plotter plotter;
    if (vm.count("plot")) plotter = CheckPlotting(vm["plot"].as<std::string>());

    // The measured file is read when the plan's pricing asks which forward pass ran (after the
    // plan itself is read and checked), else after the predictions.
    std::optional<Measured> measured;
    const auto meas_file = [&]() -> const Measured& {
      if (!measured) measured = ReadMeasured(vm["measured"].as<std::string>());
      return *measured;
    };
    std::string forward = ForwardOf(vm, nullptr);
    const auto synthetic = [&] {
      if (forward == "auto") forward = ForwardOf(vm, meas_file);
      return forward == "synthetic";
    };
    std::string plan_hash, profile_gpu;
    std::optional<ServingCheck> serving;
    Predictions pred = LoadPredictions(vm, compute_scale, synthetic, plan_hash, profile_gpu,
                                       ServingCheckHook(serving, meas_file));
    const Measured& meas = meas_file();
    if (vm.count("plan"))
      CheckSamePlan(meas, plan_hash, vm["measured"].as<std::string>(),
                    vm["plan"].as<std::string>());
    const std::string predicted_json =
        vm.count("write-predicted") ? PredictionsToJson(pred).dump(1) + "\n" : "";
    const size_t not_run = KeepExecutedRequests(pred, meas);
    if (not_run > 0 && !vm["quiet"].as<bool>())
      std::printf("the run executed the first %lld requests: %zu later ones left out\n",
                  static_cast<long long>(*meas.requests_executed), not_run);
    const CheckReport report = CompareRun(pred, meas, serving, opt);
    auto doc = CheckReportToJson(report);
    if (vm.count("plan")) doc["forward"] = forward;
    if (vm.count("replica")) doc["replica"] = vm["replica"].as<int64_t>();
    if (serving) doc["serving"] = ServingCheckToJson(*serving);
    const std::string other_gpu = OtherGpuNote(meas, profile_gpu);
    if (!other_gpu.empty()) doc["gpu"] = other_gpu;
    const std::string json = doc.dump(1) + "\n";
    // Written once the measured file is known to belong to the plan, so that a refused check
    // leaves no output behind.
    if (vm.count("write-predicted"))
      WriteFileAtomically(vm["write-predicted"].as<std::string>(), predicted_json);
    if (vm.count("json")) WriteFileAtomically(vm["json"].as<std::string>(), json);
    if (!vm["quiet"].as<bool>()) {
      if (vm.count("replica"))
        std::printf("replica %lld of the plan\n",
                    static_cast<long long>(vm["replica"].as<int64_t>()));
      if (!other_gpu.empty()) std::printf("note: %s\n", other_gpu.c_str());
      std::fputs(FormatCheckReport(report).c_str(), stdout);
      if (serving) std::fputs(FormatServingCheck(*serving).c_str(), stdout);
    }
    if (vm.count("plot")) DrawPlot(vm, plotter, json);
    return report.pass ? 0 : 1;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

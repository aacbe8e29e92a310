// kvlanes calibrate --sweep: one command per GPU. Runs a calibration recipe
// (config/recipes/NAME.yaml: the `bench sweep` steps and the `calibrate` options, as data) on
// this machine for the configured model and writes the fitted profile (docs/calibration.md, "One
// command"). Each step is the `kvlanes bench sweep` its keys spell, run in this process; the
// measurement files stay beside the profile for `check` and the record.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "sim/yaml_input.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

struct RecipeStep {
  std::string name;
  double expect_s = 0;            // the step's time on one H100, for the time-left estimate
  std::vector<std::string> args;  // `bench sweep` options, `--key value` each
  bool model_forward = false;     // forward: model (the host backend cannot run it)
  // model_layers: config: the step times the configured model at its own depth instead of the
  // recipe's slice (the tail backups, whose time per entry grows with the layers they span).
  bool config_depth = false;
};

struct Recipe {
  std::string file;
  int64_t model_layers = 0;
  std::vector<RecipeStep> steps;
  std::vector<std::string> calibrate_args;  // `calibrate` options, `--key value` each
  std::string base;                         // the base profile, resolved against the recipe
};

// Options a recipe may not set: the command sets them itself.
const std::vector<std::string> kReserved = {"out",    "measurements", "config", "set",  "backend",
                                            "device", "quiet",        "help",   "name", "base"};

// A recipe by name or by path. A name is config/recipes/NAME.yaml from here, then where the
// install put the shipped configs (PREFIX/share/kvlanes/config beside PREFIX/bin/kvlanes), then
// in the source tree the binary was built from.
std::string RecipePath(const std::string& r) {
  namespace fs = std::filesystem;
  if (r.find('/') != std::string::npos || r.ends_with(".yaml")) return r;
  std::error_code exe_ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", exe_ec);
  const std::string installed =
      exe_ec ? std::string() : (exe.parent_path() / "../share/kvlanes/config/recipes/").string();
  for (const std::string& dir : {std::string("config/recipes/"), installed,
                                 std::string(KVLANES_SOURCE_DIR) + "/config/recipes/"}) {
    std::error_code ec;
    if (!dir.empty() && fs::is_regular_file(dir + r + ".yaml", ec)) return dir + r + ".yaml";
  }
  throw InputError(
      "", 0, "--recipe",
      "no recipe '" + r + "' in config/recipes/ (give a name there, e.g. standard, or a path)");
}

// The entries of a map of options as `--key value` (a list's items joined by commas); each key
// must be an option of `allowed` that the command does not set itself.
std::vector<std::string> FlagsOf(const YAML::Node& map, const std::string& file,
                                 const std::string& path, const po::options_description& allowed,
                                 const std::vector<std::string>& skip = {}) {
  const auto fail = [&](const YAML::Node& at, const std::string& field, const std::string& msg) {
    throw InputError(file, at.Mark().line + 1, field, msg);
  };
  if (!map.IsMap()) fail(map, path, "expected a map of options");
  std::vector<std::string> out;
  for (const auto& kv : map) {
    const std::string key = kv.first.Scalar();
    const std::string field = path + "." + key;
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    if (std::find(kReserved.begin(), kReserved.end(), key) != kReserved.end())
      fail(kv.first, field, "set by the command itself, not by a recipe");
    if (!allowed.find_nothrow(key, false)) fail(kv.first, field, "not an option of the command");
    std::string value;
    if (kv.second.IsSequence()) {
      for (size_t i = 0; i < kv.second.size(); ++i) {
        if (!kv.second[i].IsScalar()) fail(kv.second[i], field, "expected a list of values");
        value += (i ? "," : "") + kv.second[i].Scalar();
      }
    } else if (kv.second.IsScalar()) {
      value = kv.second.Scalar();
    } else {
      fail(kv.second, field, "expected a value or a list of values");
    }
    out.push_back("--" + key);
    out.push_back(value);
  }
  return out;
}

// A whole number in [lo, hi] at `n`.
int64_t WholeNumber(const YAML::Node& n, const std::string& file, const std::string& field,
                    int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v) || v < lo || v > hi)
    throw InputError(file, YamlLine(n), field,
                     "expected a whole number from " + std::to_string(lo) + " to " +
                         std::to_string(hi) + ", got '" + (n.IsScalar() ? n.Scalar() : "") + "'");
  return v;
}

Recipe LoadRecipe(const std::string& name) {
  Recipe r;
  r.file = RecipePath(name);
  const YAML::Node root = LoadYamlFile(r.file, "recipe");
  const auto fail = [&](const YAML::Node& at, const std::string& field, const std::string& msg) {
    throw InputError(r.file, at.IsDefined() ? at.Mark().line + 1 : 0, field, msg);
  };
  if (!root.IsMap())
    fail(root, "recipe", "expected a map {recipe, model_layers, steps, calibrate}");
  for (const auto& kv : root)
    if (kv.first.Scalar() != "recipe" && kv.first.Scalar() != "model_layers" &&
        kv.first.Scalar() != "steps" && kv.first.Scalar() != "calibrate")
      fail(kv.first, kv.first.Scalar(),
           "unknown key (valid: recipe, model_layers, steps, calibrate)");
  const YAML::Node ml = root["model_layers"];
  if (!ml || !ml.IsScalar()) fail(root, "model_layers", "missing (the layers the sweeps time)");
  r.model_layers = WholeNumber(ml, r.file, "model_layers", 1, 1000);
  const YAML::Node steps = root["steps"];
  if (!steps || !steps.IsSequence() || steps.size() == 0)
    fail(steps ? steps : root, "steps", "expected a non-empty list of {name, expect_s, sweep}");
  const po::options_description sweep = SweepOptionsDescription();
  for (size_t i = 0; i < steps.size(); ++i) {
    const YAML::Node s = steps[i];
    const std::string path = "steps[" + std::to_string(i) + "]";
    if (!s.IsMap() || !s["name"] || !s["sweep"] || !s["expect_s"])
      fail(s, path, "expected {name, expect_s, sweep[, model_layers: config]}");
    for (const auto& kv : s)
      if (kv.first.Scalar() != "name" && kv.first.Scalar() != "expect_s" &&
          kv.first.Scalar() != "sweep" && kv.first.Scalar() != "model_layers")
        fail(kv.first, path + "." + kv.first.Scalar(),
             "unknown key (valid: name, expect_s, sweep, model_layers)");
    RecipeStep st;
    st.name = s["name"].Scalar();
    // The name is the measurement file's: letters, digits, '_' and '-' only.
    if (st.name.empty() ||
        st.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789_-") != std::string::npos)
      fail(s["name"], path + ".name",
           "'" + st.name + "': a step's name names its measurement file: letters, digits, _ and -");
    for (const RecipeStep& o : r.steps)
      if (o.name == st.name) fail(s["name"], path + ".name", "'" + st.name + "' given twice");
    st.expect_s =
        static_cast<double>(WholeNumber(s["expect_s"], r.file, path + ".expect_s", 0, 36000));
    st.args = FlagsOf(s["sweep"], r.file, path + ".sweep", sweep);
    st.model_forward = s["sweep"]["forward"] && s["sweep"]["forward"].Scalar() == "model";
    if (const YAML::Node d = s["model_layers"]) {
      if (!d.IsScalar() || d.Scalar() != "config")
        fail(d, path + ".model_layers",
             "expected config (the step measures the configured model at its depth; without the "
             "key, the recipe's model_layers)");
      st.config_depth = true;
    }
    r.steps.push_back(std::move(st));
  }
  const YAML::Node cal = root["calibrate"];
  if (!cal) fail(root, "calibrate", "missing (the calibrate options)");
  r.calibrate_args = FlagsOf(cal, r.file, "calibrate", CalibrateOptionsDescription(), {"base"});
  if (cal["base"]) {
    const std::filesystem::path b = cal["base"].Scalar();
    r.base =
        b.is_absolute() ? b.string() : (std::filesystem::path(r.file).parent_path() / b).string();
  }
  return r;
}

}  // namespace

namespace {

po::options_description CalibrateSweepOptions() {
  po::options_description desc("options");
  // clang-format off
  desc.add_options()
      ("sweep", po::bool_switch(), "run a recipe's sweeps on this machine, then fit (this mode)")
      ("out", po::value<std::string>(), "write the fitted profile YAML here (required); the "
       "measurement files go to the folder OUT without .yaml plus .sweep/")
      ("recipe", po::value<std::string>()->default_value("standard"),
       "recipe name (config/recipes/NAME.yaml) or path")
      ("config", po::value<std::string>(), "the model and cache geometry to measure (the replay's config)")
      ("set", po::value<std::vector<std::string>>()->composing(), "override a config key, key=value (repeatable)")
      ("backend", po::value<std::string>()->default_value("cuda"),
       "cuda | host (host memory; steps that run the model forward pass are skipped, visibly)")
      ("device", po::value<int>()->default_value(0), "cuda: GPU index")
      ("name", po::value<std::string>(), "name of the fitted profile (default: the GPU's name and the recipe)")
      ("base", po::value<std::string>(), "profile giving what the recipe measures nothing of (default: the recipe's)")
      ("quick", po::bool_switch(), "small grids in every step (for tests; not a calibration)")
      ("sweep-dir", po::value<std::string>(), "the measurement folder (default: OUT without "
       ".yaml plus .sweep/)")
      ("fit-only", po::bool_switch(), "measure nothing: fit the files an earlier run of the "
       "recipe left in the measurement folder again (after a change to the fit, or with "
       "--measurements)")
      ("measurements", po::value<std::vector<std::string>>()->composing(),
       "also fit this measurement file of `kvlanes bench sweep` (repeatable), e.g. a group the "
       "recipe does not run")
      ("dry-run", po::bool_switch(), "print the commands the recipe runs, run nothing")
      ("quiet,q", po::bool_switch(), "only errors")
      ("help,h", "this help");
  // clang-format on
  return desc;
}

// argv of a command from a list of strings (valid while `args` lives).
int RunCommand(int (*cmd)(int, const char* const*), const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  return cmd(static_cast<int>(args.size()), argv.data());
}

// A step the host backend cannot run (the model forward pass): skipped there, with a line.
bool SkippedHere(const po::variables_map& vm, const RecipeStep& st) {
  return st.model_forward && vm["backend"].as<std::string>() == "host";
}

// Where a step's measurements go.
std::string StepFile(const std::string& dir, const RecipeStep& st) {
  return dir + "/" + st.name + ".json";
}

// The options every step takes from the command: geometry, backend, output.
std::vector<std::string> StepArgs(const po::variables_map& vm, const Recipe& r,
                                  const RecipeStep& st, const std::string& out) {
  std::vector<std::string> a = {"kvlanes bench sweep"};
  a.insert(a.end(), st.args.begin(), st.args.end());
  if (vm.count("config")) a.insert(a.end(), {"--config", vm["config"].as<std::string>()});
  if (vm.count("set"))
    for (const std::string& s : vm["set"].as<std::vector<std::string>>())
      a.insert(a.end(), {"--set", s});
  if (!st.config_depth)
    a.insert(a.end(), {"--set", "model.layers=" + std::to_string(r.model_layers)});
  a.insert(a.end(), {"--backend", vm["backend"].as<std::string>(), "--device",
                     std::to_string(vm["device"].as<int>()), "--out", out});
  if (vm["quick"].as<bool>()) a.push_back("--quick");
  if (vm["quiet"].as<bool>()) a.push_back("--quiet");
  return a;
}

// Runs the steps; returns the measurement files written (0 on success in `rc`).
std::vector<std::string> RunSteps(const po::variables_map& vm, const Recipe& r,
                                  const std::string& dir, int& rc) {
  const bool quiet = vm["quiet"].as<bool>();
  const auto start = std::chrono::steady_clock::now();
  double done_expect = 0, left_expect = 0;
  for (const RecipeStep& st : r.steps) left_expect += st.expect_s;
  std::vector<std::string> files;
  rc = 0;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const RecipeStep& st = r.steps[i];
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The recipe's times, scaled by how this machine compares with them so far.
    const double left = done_expect > 0 ? left_expect * spent / done_expect : left_expect;
    if (SkippedHere(vm, st)) {
      if (!quiet)
        std::fprintf(stderr,
                     "calibrate --sweep: [%zu/%zu] %s skipped: it runs the model forward pass, "
                     "which the host backend does not have\n",
                     i + 1, r.steps.size(), st.name.c_str());
      left_expect -= st.expect_s;
      continue;
    }
    if (!quiet)
      std::fprintf(stderr, "calibrate --sweep: [%zu/%zu] %s (%.0f s spent, about %.0f s left)\n",
                   i + 1, r.steps.size(), st.name.c_str(), spent, left);
    const std::string out = StepFile(dir, st);
    rc = RunCommand(&CmdBenchSweep, StepArgs(vm, r, st, out));
    if (rc != 0) {
      std::fprintf(stderr, "calibrate --sweep: step %s failed (exit %d); no profile written\n",
                   st.name.c_str(), rc);
      return files;
    }
    files.push_back(out);
    done_expect += st.expect_s;
    left_expect -= st.expect_s;
  }
  return files;
}

// --fit-only: the steps' files an earlier run left in `dir`; a step without one (skipped there,
// or its run stopped) is said, and a folder without any is refused.
std::vector<std::string> EarlierFiles(const po::variables_map& vm, const Recipe& r,
                                      const std::string& dir) {
  std::vector<std::string> files;
  for (const RecipeStep& st : r.steps) {
    const std::string f = StepFile(dir, st);
    if (std::filesystem::is_regular_file(f))
      files.push_back(f);
    else if (!vm["quiet"].as<bool>())
      std::fprintf(stderr, "calibrate --sweep --fit-only: no %s (step %s): fitted without it\n",
                   f.c_str(), st.name.c_str());
  }
  if (files.empty())
    throw InputError(dir, 0, "--fit-only",
                     "no measurement file of the recipe's steps here (run the recipe first, "
                     "without --fit-only)");
  return files;
}

// The fit: the recipe's calibrate options over the steps' files.
std::vector<std::string> CalibrateArgs(const po::variables_map& vm, const Recipe& r,
                                       const std::vector<std::string>& files,
                                       const std::string& out) {
  std::vector<std::string> a = {"kvlanes calibrate"};
  // The host backend copies one way (memcpy): a recipe's copy mode names a GPU's.
  const bool host = vm["backend"].as<std::string>() == "host";
  for (size_t i = 0; i + 1 < r.calibrate_args.size(); i += 2)
    if (!(host && r.calibrate_args[i] == "--mode"))
      a.insert(a.end(), {r.calibrate_args[i], r.calibrate_args[i + 1]});
  for (const std::string& f : files) a.insert(a.end(), {"--measurements", f});
  if (vm.count("measurements"))
    for (const std::string& f : vm["measurements"].as<std::vector<std::string>>())
      a.insert(a.end(), {"--measurements", f});
  const std::string base = vm.count("base") ? vm["base"].as<std::string>() : r.base;
  if (!base.empty()) a.insert(a.end(), {"--base", base});
  a.insert(a.end(), {"--out", out, "--name",
                     vm.count("name") ? vm["name"].as<std::string>()
                                      : "calibrated (recipe " +
                                            std::filesystem::path(r.file).stem().string() + ")"});
  if (vm["quiet"].as<bool>()) a.push_back("--quiet");
  return a;
}

// --dry-run: every command the recipe would run, one per line, runnable as printed.
int DryRun(const po::variables_map& vm, const Recipe& r, const std::string& dir,
           const std::string& out) {
  const auto print = [](const std::vector<std::string>& a) {
    std::string line;
    for (const std::string& x : a) {
      const bool plain =
          !x.empty() && x.find_first_of(" '\"\\$`*?[]{}()<>|&;#~!") == std::string::npos;
      line += (line.empty() ? "" : " ") + (plain || line.empty() ? x : "'" + x + "'");
    }
    std::printf("%s\n", line.c_str());
  };
  std::vector<std::string> files;
  std::printf("# recipe %s: %zu steps, then the fit\n", r.file.c_str(), r.steps.size());
  for (const RecipeStep& st : r.steps) {
    if (SkippedHere(vm, st)) {
      std::printf("# %s skipped: it runs the model forward pass (not on the host backend)\n",
                  st.name.c_str());
      continue;
    }
    files.push_back(StepFile(dir, st));
    print(StepArgs(vm, r, st, files.back()));
  }
  print(CalibrateArgs(vm, r, files, out));
  return 0;
}

}  // namespace

int CmdCalibrateSweep(int argc, const char* const* argv) {
  const po::options_description desc = CalibrateSweepOptions();
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, nullptr, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(std::cout, std::string(argv[0]) + " --sweep --out profile.yaml [--config C.yaml]",
              "One command per GPU: runs a calibration recipe (config/recipes/*.yaml: the\n"
              "`bench sweep` steps and the `calibrate` options, as data) on this machine for the\n"
              "configured model, with a line per step and the time left, then fits the profile\n"
              "(docs/calibration.md, \"One command\"). The measurement files stay in OUT.sweep/\n"
              "for `kvlanes check` and the record.",
              desc,
              {"kvlanes calibrate --sweep --out my_gpu.yaml",
               "kvlanes calibrate --sweep --config config/default.yaml --out my_gpu.yaml",
               "kvlanes calibrate --sweep --backend host --quick --out host.yaml",
               "kvlanes calibrate --sweep --fit-only --sweep-dir my_gpu.sweep --out refit.yaml"});
    return 0;
  }
  try {
    if (!vm.count("out")) throw InputError("", 0, "--out", "required (the profile YAML)");
    const std::string out = vm["out"].as<std::string>();
    CheckOutputOptions(vm, {"out"}, {"config", "base", "measurements"});
    const std::string b = vm["backend"].as<std::string>();
    if (b != "cuda" && b != "host")
      throw InputError("", 0, "--backend", "expected cuda or host, got '" + b + "'");
    const Recipe r = LoadRecipe(vm["recipe"].as<std::string>());
    std::string dir = out;
    if (dir.ends_with(".yaml")) dir.resize(dir.size() - 5);
    dir += ".sweep";
    if (vm.count("sweep-dir")) dir = vm["sweep-dir"].as<std::string>();
    if (vm["dry-run"].as<bool>() && vm["fit-only"].as<bool>())
      throw InputError("", 0, "--fit-only", "runs no sweep: --dry-run has nothing to print");
    if (vm["dry-run"].as<bool>()) return DryRun(vm, r, dir, out);
    if (vm["fit-only"].as<bool>())
      return RunCommand(&CmdCalibrate, CalibrateArgs(vm, r, EarlierFiles(vm, r, dir), out));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw InputError(dir, 0, "--out", "cannot create the measurement folder: " + ec.message());
    int rc = 0;
    const std::vector<std::string> files = RunSteps(vm, r, dir, rc);
    if (rc != 0) return rc;
    return RunCommand(&CmdCalibrate, CalibrateArgs(vm, r, files, out));
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

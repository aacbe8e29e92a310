// kvlanes calibrate: fits a hardware profile to the measurements of `kvlanes bench sweep`
// (format, method and formulas: docs/calibration.md) and writes it as a profile YAML.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "io/input_error.h"
#include "io/output_file.h"
#include "sim/compare/calibrate.h"
#include "sim/compare/measurements.h"
#include "sim/compare/profile_writer.h"
#include "sim/model/model_shapes.h"
#include "sim/predict/hardware_profile.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/run_progress.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

void PrintFits(const CalibrationResult& r, bool several_files) {
  std::printf("%-36s %7s %9s %9s %9s  %s\n", "group", "samples", "median", "max", "max@line",
              "parameters");
  for (const FitReport& f : r.fits) {
    std::string params;
    for (const auto& [k, v] : f.params) {
      char b[96];
      std::snprintf(b, sizeof b, "%s%s=%.4g", params.empty() ? "" : " ", k.c_str(), v);
      params += b;
    }
    std::printf("%-36s %7lld %8.2f%% %8.2f%% %9lld  %s\n", f.group.c_str(),
                static_cast<long long>(f.samples), 100 * f.median_rel_err, 100 * f.max_rel_err,
                static_cast<long long>(f.max_line), params.c_str());
    if (several_files && !f.max_file.empty())
      std::printf("%-36s max@line is in %s\n", "", f.max_file.c_str());
    if (!f.note.empty()) std::printf("%-36s note: %s\n", "", f.note.c_str());
  }
  if (!r.kept_from_base.empty()) {
    std::printf("kept from the base profile (no samples):");
    for (const auto& k : r.kept_from_base) std::printf(" %s", k.c_str());
    std::printf("\n");
  }
  for (const auto& n : r.notes) std::printf("note: %s\n", n.c_str());
}

// --backup-fit: a comma list of per-layer and tail, or none.
void ParseBackupFit(const std::string& list, CalibrateOptions& opt) {
  opt.fit_backup_per_layer = opt.fit_backup_tail = false;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "per-layer")
      opt.fit_backup_per_layer = true;
    else if (item == "tail")
      opt.fit_backup_tail = true;
    else if (item != "none")
      throw InputError("", 0, "--backup-fit",
                       "expected per-layer and/or tail, or none, got '" + item + "'");
  }
}

// --backup-entry-bands: bounds in bytes per entry, ascending, comma-separated (none: one line).
std::vector<double> ParseEntryBands(const std::string& list) {
  std::vector<double> v;
  if (list == "none") return v;
  std::stringstream ss(list);
  std::string item, previous;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double b = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(b) || !(b > 0))
      throw InputError("", 0, "--backup-entry-bands",
                       "expected bytes per entry > 0, comma-separated, got '" + item + "'");
    if (!v.empty() && !(b > v.back()))
      throw InputError("", 0, "--backup-entry-bands",
                       "the bounds must ascend, got " + item + " after " + previous);
    v.push_back(b);
    previous = item;
  }
  if (v.empty()) throw InputError("", 0, "--backup-entry-bands", "expected at least one bound");
  return v;
}

// The selections and band options, checked.
CalibrateOptions CalibrateOptionsFrom(const po::variables_map& vm) {
  CalibrateOptions opt;
  opt.name = vm["name"].as<std::string>();
  if (vm.count("layout")) opt.layout = vm["layout"].as<std::string>();
  if (vm.count("mode")) opt.mode = vm["mode"].as<std::string>();
  if (vm.count("backup-gather-pages")) {
    opt.backup_gather_pages = vm["backup-gather-pages"].as<int64_t>();
    if (opt.backup_gather_pages < 0)
      throw InputError("", 0, "--backup-gather-pages", "must be >= 0");
  }
  ParseBackupFit(vm["backup-fit"].as<std::string>(), opt);
  if (vm.count("backup-entry-bands"))
    opt.backup_entry_bands = ParseEntryBands(vm["backup-entry-bands"].as<std::string>());
  if (vm.count("run-pages")) {
    opt.run_pages = vm["run-pages"].as<int64_t>();
    if (opt.run_pages < 1) throw InputError("", 0, "--run-pages", "must be >= 1");
  }
  if (vm.count("model-preset")) {
    opt.model_preset = vm["model-preset"].as<std::string>();
    FindModelPreset(opt.model_preset, "--model-preset");  // a misspelt name, even with no samples
  }
  const std::string form = vm["compute-form"].as<std::string>();
  if (form != "table" && form != "linear" && form != "rescale")
    throw InputError("", 0, "--compute-form",
                     "expected table, linear or rescale, got '" + form + "'");
  opt.compute_table = form == "table";
  opt.compute_rescale = form == "rescale";
  if (vm.count("overlap-forward")) {
    opt.overlap_forward = vm["overlap-forward"].as<std::string>();
    if (opt.overlap_forward != "model" && opt.overlap_forward != "synthetic")
      throw InputError("", 0, "--overlap-forward",
                       "expected model or synthetic, got '" + opt.overlap_forward + "'");
  }
  opt.bands.max_bands = vm["max-bands"].as<int>();
  opt.bands.min_sizes_per_band = vm["min-band-sizes"].as<int>();
  opt.bands.min_gain = vm["band-gain"].as<double>();
  opt.bands.floor_rms = vm["band-floor"].as<double>();
  if (opt.bands.max_bands < 1) throw InputError("", 0, "--max-bands", "must be >= 1");
  if (opt.bands.min_sizes_per_band < 2) throw InputError("", 0, "--min-band-sizes", "must be >= 2");
  if (!(opt.bands.min_gain > 0 && opt.bands.min_gain < 1))
    throw InputError("", 0, "--band-gain", "must be in (0, 1)");
  if (!(opt.bands.floor_rms >= 0) || !std::isfinite(opt.bands.floor_rms))
    throw InputError("", 0, "--band-floor", "must be a finite number >= 0");
  return opt;
}

}  // namespace

// calibrate's options, with the defaults of CalibrateOptions.
po::options_description CalibrateOptionsDescription() {
  po::options_description desc("options");
  const CalibrateOptions d;
  // clang-format off
  desc.add_options()
      ("measurements", po::value<std::vector<std::string>>()->composing(),
       "measurement file of `kvlanes bench sweep` (docs/calibration.md); repeat it to fit the "
       "samples of several files together")
      ("out", po::value<std::string>(), "write the fitted profile YAML here")
      ("base", po::value<std::string>(), "profile YAML giving the parameters that have no samples")
      ("name", po::value<std::string>()->default_value(d.name), "name of the fitted profile")
      ("layout", po::value<std::string>(), "host copies: fit the samples of this host layout")
      ("mode", po::value<std::string>(), "host copies: fit the samples of this copy mode")
      ("backup-gather-pages", po::value<int64_t>(),
       "backups over a forward pass: fit the samples with this many pages gathered per layer beside them "
       "(bench sweep backup samples)")
      ("backup-fit", po::value<std::string>()->default_value("per-layer,tail"),
       "backup schedules that get measured terms from backup samples (comma list of per-layer, tail; "
       "none: leave every backup sample out)")
      ("backup-entry-bands", po::value<std::string>(),
       "bounds in bytes per copy entry, ascending, e.g. 16384,131072,1048576: the backup terms get an "
       "entry cost and a bandwidth per band of entry size (a few large entries and many small ones "
       "differ; docs/calibration.md \"Backups\"); default none: one line. Tail samples of several "
       "depths also give each band an entry cost per layer a copy spans (one band without bounds)")
      ("run-pages", po::value<int64_t>(), "host copies: fit the samples whose slots form runs of this many pages "
                                          "(bench sweep --slot-runs)")
      ("model-preset", po::value<std::string>(),
       "forward samples: fit the compute terms to the samples of this model preset")
      ("overlap-forward", po::value<std::string>(),
       "overlap samples: fit the overlap list to the pairs timed beside this forward pass (model | "
       "synthetic; default: model when both were swept). The pairs beside the synthetic spin also "
       "give the beside_spin section's overlap and compute.extra_layer_s")
      ("compute-form", po::value<std::string>()->default_value("table"),
       "forward samples: table (the linear terms and the measured points as compute.table, "
       "interpolated between them) | linear (the linear terms alone) | rescale (the --base "
       "profile's compute terms and table times the median of measured / priced: this GPU's "
       "speed from a few points)")
      ("max-bands", po::value<int>()->default_value(d.bands.max_bands),
       "collectives: most size bands per curve")
      ("min-band-sizes", po::value<int>()->default_value(d.bands.min_sizes_per_band),
       "collectives: fewest distinct sizes in a band")
      ("band-gain", po::value<double>()->default_value(d.bands.min_gain),
       "a split must cut the weighted squared residual to at most this fraction")
      ("band-floor", po::value<double>()->default_value(d.bands.floor_rms),
       "no split when the RMS relative error is already below this")
      ("quiet,q", po::bool_switch(), "no table")
      ("help,h", "this help");
  // clang-format on
  return desc;
}

namespace {}  // namespace

int CmdCalibrate(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)  // one command per GPU: the recipe's sweeps, then this fit
    if (std::string(argv[i]) == "--sweep") return CmdCalibrateSweep(argc, argv);
  const po::options_description desc = CalibrateOptionsDescription();
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, nullptr, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(
        std::cout,
        std::string(argv[0]) + " --measurements M.json --out profile.yaml [--base profile.yaml]",
        "Fits the hardware profile's parameters (docs/cost_model.md) to benchmark measurements\n"
        "by non-negative, relative-error-weighted least squares, with size bands for\n"
        "collectives (docs/calibration.md). Prints each fit's residuals and writes them into\n"
        "the YAML.",
        desc,
        {"kvlanes calibrate --measurements M.json --base config/profiles/h200.yaml --out "
         "h200_measured.yaml",
         "kvlanes calibrate --measurements RANKS2.json --base h200_measured.yaml --out "
         "2xh200_measured.yaml",
         "kvlanes calibrate --measurements FWD_SMALL.json --measurements FWD_LARGE.json --base "
         "h200_measured.yaml --model-preset deepseek-v3.2 --out h200_model.yaml",
         "kvlanes calibrate --measurements FWD_FEW.json --base h200_model.yaml --compute-form "
         "rescale --out h200_this_gpu.yaml"});
    return 0;
  }
  try {
    if (!vm.count("measurements"))
      throw InputError("", 0, "--measurements", "a measurement file is required");
    if (!vm.count("out")) throw InputError("", 0, "--out", "an output file is required");
    CheckOutputOptions(vm, {"out"}, {"measurements", "base"});
    CalibrateOptions opt = CalibrateOptionsFrom(vm);
    std::optional<RunProgress> progress;  // a line per group fitted (on a terminal, one line)
    opt.progress = [&](const std::string& group, size_t, size_t total) {
      if (!progress) progress.emplace("calibrate", total, !vm["quiet"].as<bool>(), "groups");
      progress->Done(group + " fitted");
    };
    std::vector<Measurements> parts;
    for (const std::string& f : vm["measurements"].as<std::vector<std::string>>()) {
      parts.push_back(ReadMeasurements(f));
      const std::string zeros = ZeroPrefixNote(parts.back());
      if (!zeros.empty()) std::printf("note: %s\n", zeros.c_str());
    }
    const Measurements m = MergeMeasurements(std::move(parts));
    const std::string& mfile = m.file;
    HardwareProfile base;
    if (vm.count("base")) base = LoadHardwareProfile(vm["base"].as<std::string>());
    const CalibrationResult r = Calibrate(m, vm.count("base") ? &base : nullptr, opt);
    RequireWritableGatherRatios(r, m);
    const std::string out = vm["out"].as<std::string>();
    WriteFileAtomically(out, ProfileToYaml(r, mfile));
    try {
      LoadHardwareProfile(out);  // what we write must load: anything else is a bug here
    } catch (const InputError& e) {
      std::fprintf(stderr, "%s: internal error: the written profile does not load: %s\n", argv[0],
                   e.what());
      std::abort();
    }
    if (!vm["quiet"].as<bool>()) {
      PrintFits(r, vm["measurements"].as<std::vector<std::string>>().size() > 1);
      std::printf("wrote %s\n", out.c_str());
    }
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

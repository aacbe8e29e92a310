// Calibration: fits the hardware profile's parameters (sim/predict/hardware_profile.h) to benchmark
// measurements (sim/compare/measurements.h), for exactly the formulas of docs/cost_model.md. The
// fitting method and every formula are in docs/calibration.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/compare/fit.h"
#include "sim/compare/measurements.h"
#include "sim/predict/hardware_profile.h"

namespace kvlanes {

struct CalibrateOptions {
  BandOptions bands;
  std::string layout;  // host copies: keep samples of this layout ("" = the only one present)
  std::string mode;    // host copies: keep samples of this mode ("" = the only one present)
  int64_t run_pages =
      0;  // host copies: keep samples of this slot run length (0 = the only one present)
  int64_t backup_gather_pages =
      -1;  // backups: keep samples with this gather beside them (-1 = the only one present)
  // Which backup schedules get measured terms (--backup-fit); neither: every backup sample is left
  // out and backups keep the generic copy model.
  bool fit_backup_per_layer = true;
  bool fit_backup_tail = true;
  // Bounds in bytes per entry, ascending (`--backup-entry-bands`): the backup terms get a cost per
  // entry and a bandwidth per band of entry size (HardwareProfile::CopyCost::entry_bands); empty:
  // one line.
  std::vector<double> backup_entry_bands;
  // Forward samples: keep those of this model preset ("" = the only one present).
  std::string model_preset;
  // Forward samples: also write the measured points as compute.table (the linear terms corrected
  // between them, docs/cost_model.md); false: the linear terms alone.
  bool compute_table = true;
  // Forward samples: keep the base's compute terms and table, all times one factor, the median of
  // measured / base over the samples (`--compute-form rescale`: this GPU's speed against the
  // base's, from a few points measured here); compute_table is then not used.
  bool compute_rescale = false;
  // Overlap samples: keep those timed beside this forward pass, model or synthetic ("" = the
  // only one present).
  std::string overlap_forward;
  // Called after each parameter group is fitted: the group, the groups done and their number.
  std::function<void(const std::string& group, size_t done, size_t total)> progress;
  std::string name = "calibrated";
};

// One fitted group of parameters and how well it reproduces its samples.
struct FitReport {
  std::string group;  // e.g. "host_device", "collectives[ranks=8].all_gather"
  int64_t samples = 0;
  double median_rel_err = 0;  // of |predicted - measured| / measured over the group's samples
  double max_rel_err = 0;
  int64_t max_line = 0;                                // the sample with the largest error
  std::string max_file;                                // and its measurement file
  std::vector<std::pair<std::string, double>> params;  // fitted values, in profile units
  std::string note;
};

struct CalibrationResult {
  HardwareProfile profile;
  std::vector<FitReport> fits;
  std::vector<std::string> kept_from_base;  // parameters without samples, taken from --base
  std::vector<std::string> notes;           // samples left out, selections made
};

// Throws InputError, naming a first_gather sample, when a fitted gather-after-forward ratio is 10
// or more, which a profile cannot hold: the copy bands priced another machine than the sweep's
// (e.g. a GPU base for a host sweep). `kvlanes calibrate` calls it before writing.
void RequireWritableGatherRatios(const CalibrationResult& r, const Measurements& m);

// Fits every parameter group that has samples; the others come from `base` (may be null).
// Throws InputError when a group's samples cannot separate its parameters, when host copies
// mix layouts or modes without a selection, or when a parameter has neither samples nor base.
CalibrationResult Calibrate(const Measurements& m, const HardwareProfile* base,
                            const CalibrateOptions& opt);

}  // namespace kvlanes

// Calibration: fits the hardware profile's parameters (sim/predict/hardware_profile.h) to benchmark
// measurements, for exactly the formulas of docs/cost_model.md. The measurement file is what
// `kvlanes bench sweep` writes; its format, the fitting method and every formula are in
// docs/calibration.md.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/predict/hardware_profile.h"

namespace kvlanes {

inline constexpr int kMeasurementsVersion = 1;

enum class SampleKind {
  kHostCopy,    // host <-> device copies: copies * latency + bytes / h2d (or d2h)
  kCopySubmit,  // CPU time to submit `copies` copies: copies * submit
  kDeviceCopy,  // device kernels: kernels * launch + (2 or 1) * bytes / device copy bandwidth
  kAllGather,   // (N-1) alpha + (N-1)/N bytes / B, banded by bytes, per rank count
  kAllReduce,   // 2(N-1) alpha + 2(N-1)/N bytes / B, banded, per rank count
  kPeerRead,    // peers * setup + alpha + bytes / B, banded, per rank count
  kForward,     // layers * (base + (token n + pair n (p + n/2)) / N)
  kBackup,      // backup copies over a forward pass: copies * latency + bytes / d2h, per schedule
};
const char* SampleKindName(SampleKind k);

// One measured point: the median of `repeats` timed runs of one configuration.
struct Sample {
  SampleKind kind = SampleKind::kHostCopy;
  int64_t line = 0;  // where in the measurement file (for messages)
  double median_s = 0;
  int64_t repeats = 0;
  double bytes = 0;        // host_copy (all copies), device_copy (payload), collectives
  int64_t copies = 1;      // host_copy, copy_submit: copy calls (or copy kernels) timed together
  double chunk_bytes = 0;  // host_copy: contiguous piece size (descriptive)
  int64_t run_pages = 1;   // host_copy, backup: pages per run of adjacent slots (descriptive)
  bool tail = false;       // backup: schedule tail (one copy of all layers) instead of per-layer
  int64_t gather_pages = 0;  // backup: pages gathered per layer beside the forward pass
  int64_t pages = 0;         // backup: pages backed up (0: not given)
  bool to_device = true;   // host_copy: direction h2d (true) or d2h
  bool fill = false;       // device_copy: op "fill" (write only) instead of "copy"
  int64_t kernels = 1;     // device_copy: kernel launches timed together
  int64_t ranks = 1;       // collectives; forward (cp_size)
  int64_t peers = 0;       // peer_read
  int64_t new_tokens = 0;  // forward
  int64_t prefix_tokens = 0;
  int64_t layers = 1;                 // forward: the time covers this many layers
  std::string layout, mode, variant;  // descriptive; layout and mode select host copies
};

struct Measurements {
  std::string file;
  nlohmann::json context;  // the sweep's context block (machine, versions, configuration)
  std::vector<Sample> samples;
};

// Throws InputError naming file, line and field (e.g. "M.json:57: samples[12].bytes: ...").
Measurements ReadMeasurements(const std::string& path);
Measurements ParseMeasurements(const std::string& text, const std::string& file);

// ---- Fitting primitives (exposed for tests) ----

// Non-negative least squares: argmin ||A x - b||_2 subject to x >= 0 (Lawson-Hanson active
// set; columns are scaled to unit norm internally, which leaves the solution unchanged).
Eigen::VectorXd SolveNnls(const Eigen::MatrixXd& a, const Eigen::VectorXd& b);

// Relative-error fit: each row divided by its measured time t_i > 0, then NNLS, so the fit
// minimizes sum ((a_i x - t_i) / t_i)^2. rel_err holds (a_i x - t_i) / t_i per row.
struct LinearFit {
  Eigen::VectorXd x;
  std::vector<double> rel_err;
  double ssr = 0;  // sum of squared relative errors
};
LinearFit FitRelative(const Eigen::MatrixXd& a, const Eigen::VectorXd& t);

// Size-banded fit: each row has a size (bytes), features whose coefficients are fitted per
// band (e.g. latency and inverse bandwidth) and optionally features shared by all bands.
struct BandedRows {
  std::vector<double> size;
  Eigen::MatrixXd band_features;    // rows x kb
  Eigen::MatrixXd shared_features;  // rows x ks (ks may be 0)
  Eigen::VectorXd t;                // measured seconds
};

struct BandOptions {
  int max_bands = 3;
  int min_sizes_per_band = 3;  // distinct sizes in each band
  double min_gain = 0.5;       // a split must cut the weighted residual to at most this fraction
  double floor_rms = 0.01;     // and is tried only when the RMS relative error exceeds this
};

struct BandedFit {
  std::vector<double> max_bytes;  // per band, ascending; 0 for the last (unbounded)
  std::vector<Eigen::VectorXd> band_x;
  Eigen::VectorXd shared_x;
  std::vector<double> rel_err;  // per row, in input order
  double ssr = 0;
};
BandedFit FitBands(const BandedRows& rows, const BandOptions& opt);

// ---- Calibration ----

struct CalibrateOptions {
  BandOptions bands;
  std::string layout;  // host copies: keep samples of this layout ("" = the only one present)
  std::string mode;    // host copies: keep samples of this mode ("" = the only one present)
  int64_t run_pages = 0;  // host copies: keep samples of this slot run length (0 = the only one present)
  int64_t backup_gather_pages = -1;  // backups: keep samples with this gather beside them (-1 = the only one present)
  // Which backup schedules get measured terms (--backup-fit); neither: every backup sample is left
  // out and backups keep the generic copy model.
  bool fit_backup_per_layer = true;
  bool fit_backup_tail = true;
  std::string name = "calibrated";
};

// One fitted group of parameters and how well it reproduces its samples.
struct FitReport {
  std::string group;  // e.g. "host_device", "collectives[ranks=8].all_gather"
  int64_t samples = 0;
  double median_rel_err = 0;  // of |predicted - measured| / measured over the group's samples
  double max_rel_err = 0;
  int64_t max_line = 0;                                // the sample with the largest error
  std::vector<std::pair<std::string, double>> params;  // fitted values, in profile units
  std::string note;
};

struct CalibrationResult {
  HardwareProfile profile;
  std::vector<FitReport> fits;
  std::vector<std::string> kept_from_base;  // parameters without samples, taken from --base
  std::vector<std::string> notes;           // samples left out, selections made
};

// Fits every parameter group that has samples; the others come from `base` (may be null).
// Throws InputError when a group's samples cannot separate its parameters, when host copies
// mix layouts or modes without a selection, or when a parameter has neither samples nor base.
CalibrationResult Calibrate(const Measurements& m, const HardwareProfile* base,
                            const CalibrateOptions& opt);

// The profile as YAML in the schema of config/profiles/*.yaml, with each fit's residuals as
// comments. LoadHardwareProfile reads it back.
std::string ProfileToYaml(const CalibrationResult& r, const std::string& measurements_file);

}  // namespace kvlanes

// The fitting primitives calibration uses: non-negative least squares, relative-error fits, and
// size-banded fits that find where a cost curve bends. Method: docs/calibration.md ("Fitting
// method").
#pragma once

#include <Eigen/Dense>
#include <vector>

namespace kvlanes {

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

// Numerical rank of the design matrix `a` weighted by 1 / t per row, columns at unit norm: how
// many parameters a relative-error fit of these samples can tell apart.
Eigen::Index WeightedRank(const Eigen::MatrixXd& a, const Eigen::VectorXd& t);

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

}  // namespace kvlanes

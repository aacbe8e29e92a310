#include "sim/compare/fit.h"

#include <algorithm>
#include <cmath>

#include "sim/check.h"

namespace kvlanes {

Eigen::VectorXd SolveNnls(const Eigen::MatrixXd& a0, const Eigen::VectorXd& b) {
  const Eigen::Index n = a0.cols();
  Eigen::VectorXd scale(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    const double s = a0.col(j).norm();
    scale[j] = s > 0 ? s : 1;
  }
  const Eigen::MatrixXd a = a0 * scale.cwiseInverse().asDiagonal();
  Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
  std::vector<bool> passive(static_cast<size_t>(n), false);
  const double tol = 1e-12 * std::max(1.0, a.norm() * b.norm());
  auto solve_passive = [&]() {
    std::vector<Eigen::Index> idx;
    for (Eigen::Index j = 0; j < n; ++j)
      if (passive[static_cast<size_t>(j)]) idx.push_back(j);
    Eigen::MatrixXd ap(a.rows(), static_cast<Eigen::Index>(idx.size()));
    for (size_t k = 0; k < idx.size(); ++k) ap.col(static_cast<Eigen::Index>(k)) = a.col(idx[k]);
    const Eigen::VectorXd zp = ap.colPivHouseholderQr().solve(b);
    Eigen::VectorXd z = Eigen::VectorXd::Zero(n);
    for (size_t k = 0; k < idx.size(); ++k) z[idx[k]] = zp[static_cast<Eigen::Index>(k)];
    return z;
  };
  for (int outer = 0; outer < 3 * static_cast<int>(n) + 10; ++outer) {
    const Eigen::VectorXd w = a.transpose() * (b - a * x);
    Eigen::Index pick = -1;
    double best = tol;
    for (Eigen::Index j = 0; j < n; ++j)
      if (!passive[static_cast<size_t>(j)] && w[j] > best) best = w[pick = j];
    if (pick < 0) break;
    passive[static_cast<size_t>(pick)] = true;
    for (int inner = 0; inner <= n; ++inner) {
      const Eigen::VectorXd z = solve_passive();
      bool feasible = true;
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)] && z[j] <= 0) feasible = false;
      if (feasible) {
        x = z;
        break;
      }
      // Step from x towards z until the first passive coefficient reaches zero; drop it.
      double alpha = 1;
      Eigen::Index blocking = -1;
      for (Eigen::Index j = 0; j < n; ++j) {
        if (!passive[static_cast<size_t>(j)] || z[j] > 0) continue;
        const double step = x[j] / (x[j] - z[j]);
        if (step < alpha || blocking < 0) {
          alpha = std::min(alpha, step);
          blocking = j;
        }
      }
      x += alpha * (z - x);
      for (Eigen::Index j = 0; j < n; ++j)
        if (passive[static_cast<size_t>(j)] && (j == blocking || x[j] <= 0)) {
          passive[static_cast<size_t>(j)] = false;
          x[j] = 0;
        }
    }
  }
  return x.cwiseQuotient(scale);
}

LinearFit FitRelative(const Eigen::MatrixXd& a, const Eigen::VectorXd& t) {
  KV_CHECK(a.rows() == t.size() && a.rows() > 0, "rows " << a.rows() << " times " << t.size());
  const Eigen::VectorXd inv = t.cwiseInverse();
  const Eigen::MatrixXd aw = inv.asDiagonal() * a;
  LinearFit f;
  f.x = SolveNnls(aw, Eigen::VectorXd::Ones(t.size()));
  const Eigen::VectorXd r = aw * f.x - Eigen::VectorXd::Ones(t.size());
  f.rel_err.assign(r.data(), r.data() + r.size());
  f.ssr = r.squaredNorm();
  return f;
}

Eigen::Index WeightedRank(const Eigen::MatrixXd& a, const Eigen::VectorXd& t) {
  Eigen::MatrixXd aw = t.cwiseInverse().asDiagonal() * a;
  for (Eigen::Index j = 0; j < aw.cols(); ++j)
    if (aw.col(j).norm() > 0) aw.col(j) /= aw.col(j).norm();
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(aw);
  qr.setThreshold(1e-9);
  return qr.rank();
}

namespace {

size_t BandOf(const std::vector<double>& breaks, double size) {
  size_t b = 0;
  while (b < breaks.size() && size > breaks[b]) ++b;
  return b;
}

BandedFit EvaluateBands(const BandedRows& r, const std::vector<double>& breaks) {
  const Eigen::Index rows = r.t.size(), kb = r.band_features.cols(), ks = r.shared_features.cols();
  const size_t bands = breaks.size() + 1;
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(rows, ks + static_cast<Eigen::Index>(bands) * kb);
  for (Eigen::Index i = 0; i < rows; ++i) {
    if (ks > 0) a.row(i).head(ks) = r.shared_features.row(i);
    const auto b = static_cast<Eigen::Index>(BandOf(breaks, r.size[static_cast<size_t>(i)]));
    a.row(i).segment(ks + b * kb, kb) = r.band_features.row(i);
  }
  const LinearFit lf = FitRelative(a, r.t);
  BandedFit f;
  f.max_bytes = breaks;
  f.max_bytes.push_back(0);
  f.shared_x = lf.x.head(ks);
  for (size_t b = 0; b < bands; ++b)
    f.band_x.push_back(lf.x.segment(ks + static_cast<Eigen::Index>(b) * kb, kb));
  f.rel_err = lf.rel_err;
  f.ssr = lf.ssr;
  return f;
}

}  // namespace

BandedFit FitBands(const BandedRows& r, const BandOptions& opt) {
  std::vector<double> sizes(r.size);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  std::vector<double> breaks;
  BandedFit fit = EvaluateBands(r, breaks);
  const double n = static_cast<double>(r.t.size());
  // Greedy top-down splitting: add the breakpoint that lowers the weighted residual most, while
  // it lowers it markedly and the current fit is worse than the noise floor.
  while (static_cast<int>(breaks.size()) + 1 < opt.max_bands &&
         std::sqrt(fit.ssr / n) > opt.floor_rms) {
    BandedFit best;
    bool found = false;
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      // Geometric midpoint, rounded down to whole bytes where that stays above the lower size.
      double c = std::sqrt(sizes[i] * sizes[i + 1]);
      if (std::floor(c) >= sizes[i]) c = std::floor(c);
      if (std::find(breaks.begin(), breaks.end(), c) != breaks.end()) continue;
      std::vector<double> cand = breaks;
      cand.push_back(c);
      std::sort(cand.begin(), cand.end());
      std::vector<int> per_band(cand.size() + 1, 0);
      for (double s : sizes) ++per_band[BandOf(cand, s)];
      if (*std::min_element(per_band.begin(), per_band.end()) < opt.min_sizes_per_band) continue;
      BandedFit f = EvaluateBands(r, cand);
      if (!found || f.ssr < best.ssr) {
        best = std::move(f);
        found = true;
      }
    }
    if (!found || best.ssr > opt.min_gain * fit.ssr) break;
    fit = std::move(best);
    breaks.assign(fit.max_bytes.begin(), fit.max_bytes.end() - 1);
  }
  return fit;
}

}  // namespace kvlanes

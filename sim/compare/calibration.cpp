#include "sim/compare/calibration.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "sim/check.h"
#include "traces/json_location.h"
#include "traces/input_error.h"

namespace kvlanes {

const char* SampleKindName(SampleKind k) {
  switch (k) {
    case SampleKind::kHostCopy:
      return "host_copy";
    case SampleKind::kCopySubmit:
      return "copy_submit";
    case SampleKind::kDeviceCopy:
      return "device_copy";
    case SampleKind::kAllGather:
      return "all_gather";
    case SampleKind::kAllReduce:
      return "all_reduce";
    case SampleKind::kPeerRead:
      return "peer_read";
    case SampleKind::kForward:
      return "forward";
    case SampleKind::kBackup:
      return "backup";
  }
  return "?";
}

// ---------------------------------------------------------------- measurement file

namespace {

constexpr const char* kKindList =
    "host_copy, copy_submit, device_copy, all_gather, all_reduce, peer_read, forward, backup";

std::string OptStr(const JsonCursor& s, const char* key) {
  return s.Has(key) ? s.Key(key).Str() : "";
}

Sample ParseSample(const JsonCursor& s) {
  s.ExpectObject();
  Sample x;
  const std::string kind = s.Key("kind").Str();
  // Keys every sample may carry: the timing summary of its repeats.
#define KV_COMMON "kind", "median_s", "repeats", "min_s", "max_s", "label"
  if (kind == "host_copy") {
    x.kind = SampleKind::kHostCopy;
    s.OnlyKeys({KV_COMMON, "direction", "bytes", "copies", "chunk_bytes", "layout", "mode", "run_pages"});
    const std::string d = s.Key("direction").Str();
    if (d != "h2d" && d != "d2h") s.Key("direction").Fail("expected h2d or d2h, got '" + d + "'");
    x.to_device = d == "h2d";
    x.bytes = s.Key("bytes").NumAtLeast(0, true);
    x.copies = s.Key("copies").IntAtLeast(1);
    if (s.Has("chunk_bytes")) x.chunk_bytes = s.Key("chunk_bytes").NumAtLeast(0, true);
    if (s.Has("run_pages")) x.run_pages = s.Key("run_pages").IntAtLeast(1);
    x.layout = OptStr(s, "layout");
    x.mode = OptStr(s, "mode");
  } else if (kind == "copy_submit") {
    x.kind = SampleKind::kCopySubmit;
    s.OnlyKeys({KV_COMMON, "copies", "direction", "layout", "mode"});
    x.copies = s.Key("copies").IntAtLeast(1);
    x.layout = OptStr(s, "layout");
    x.mode = OptStr(s, "mode");
  } else if (kind == "device_copy") {
    x.kind = SampleKind::kDeviceCopy;
    s.OnlyKeys({KV_COMMON, "bytes", "op", "kernels", "variant"});
    x.bytes = s.Key("bytes").NumAtLeast(0, true);
    const std::string op = s.Key("op").Str();
    if (op != "copy" && op != "fill") s.Key("op").Fail("expected copy or fill, got '" + op + "'");
    x.fill = op == "fill";
    if (s.Has("kernels")) x.kernels = s.Key("kernels").IntAtLeast(1);
    x.variant = OptStr(s, "variant");
  } else if (kind == "all_gather" || kind == "all_reduce" || kind == "peer_read") {
    x.kind = kind == "all_gather"   ? SampleKind::kAllGather
             : kind == "all_reduce" ? SampleKind::kAllReduce
                                    : SampleKind::kPeerRead;
    if (x.kind == SampleKind::kPeerRead)
      s.OnlyKeys({KV_COMMON, "ranks", "bytes", "peers", "variant"});
    else
      s.OnlyKeys({KV_COMMON, "ranks", "bytes", "variant"});
    x.ranks = s.Key("ranks").IntAtLeast(2);
    x.bytes = s.Key("bytes").NumAtLeast(0, true);
    if (x.kind == SampleKind::kPeerRead) {
      x.peers = s.Key("peers").IntAtLeast(1);
      if (x.peers >= x.ranks)
        s.Key("peers").Fail("must be < ranks (" + std::to_string(x.ranks) + ")");
    }
    x.variant = OptStr(s, "variant");
  } else if (kind == "forward") {
    x.kind = SampleKind::kForward;
    s.OnlyKeys({KV_COMMON, "new_tokens", "prefix_tokens", "ranks", "layers"});
    x.new_tokens = s.Key("new_tokens").IntAtLeast(1);
    x.prefix_tokens = s.Key("prefix_tokens").IntAtLeast(0);
    if (s.Has("ranks")) x.ranks = s.Key("ranks").IntAtLeast(1);
    if (s.Has("layers")) x.layers = s.Key("layers").IntAtLeast(1);
  } else if (kind == "backup") {
    x.kind = SampleKind::kBackup;
    s.OnlyKeys({KV_COMMON, "schedule", "bytes", "copies", "pages", "layers", "pool", "run_pages", "gather_pages",
                "forward_s", "gate", "mode", "layout"});
    const std::string sch = s.Key("schedule").Str();
    if (sch != "per-layer" && sch != "tail") s.Key("schedule").Fail("expected per-layer or tail, got '" + sch + "'");
    x.tail = sch == "tail";
    x.to_device = false;
    x.bytes = s.Key("bytes").NumAtLeast(0, true);
    x.copies = s.Key("copies").IntAtLeast(1);
    if (s.Has("layers")) x.layers = s.Key("layers").IntAtLeast(1);
    if (s.Has("run_pages")) x.run_pages = s.Key("run_pages").IntAtLeast(1);
    if (s.Has("gather_pages")) x.gather_pages = s.Key("gather_pages").IntAtLeast(0);
    if (s.Has("pages")) x.pages = s.Key("pages").IntAtLeast(1);
    x.mode = OptStr(s, "mode");
    x.layout = OptStr(s, "layout");
  } else {
    s.Key("kind").Fail("unknown sample kind '" + kind + "' (valid: " + kKindList + ")");
  }
#undef KV_COMMON
  x.median_s = s.Key("median_s").NumAtLeast(0, true);
  x.repeats = s.Key("repeats").IntAtLeast(1);
  return x;
}

}  // namespace

Measurements ParseMeasurements(const std::string& text, const std::string& file) {
  const JsonInput in(file, text);
  const JsonCursor root = JsonCursor::Root(in);
  root.OnlyKeys({"kvlanes_measurements", "context", "samples"});
  const int64_t version = root.Key("kvlanes_measurements").Int();
  if (version != kMeasurementsVersion)
    root.Key("kvlanes_measurements")
        .Fail("measurement format version " + std::to_string(version) +
              ", this build reads version " + std::to_string(kMeasurementsVersion));
  Measurements m;
  m.file = file;
  const JsonCursor ctx = root.Key("context");
  ctx.ExpectObject();
  m.context = ctx.value();
  const JsonCursor samples = root.Key("samples");
  samples.ExpectArray();
  if (samples.Size() == 0) samples.Fail("holds no samples");
  for (size_t i = 0; i < samples.Size(); ++i) {
    const JsonCursor s = samples.Index(i);
    Sample x = ParseSample(s);
    x.line = JsonLineOf(text, s.path());
    m.samples.push_back(std::move(x));
  }
  return m;
}

Measurements ReadMeasurements(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, 0, "", "cannot open measurement file");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseMeasurements(text.str(), path);
}

// ---------------------------------------------------------------- fitting primitives

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

namespace {

// Numerical rank of the relative-weighted design matrix with unit-norm columns.
Eigen::Index WeightedRank(const Eigen::MatrixXd& a, const Eigen::VectorXd& t) {
  Eigen::MatrixXd aw = t.cwiseInverse().asDiagonal() * a;
  for (Eigen::Index j = 0; j < aw.cols(); ++j)
    if (aw.col(j).norm() > 0) aw.col(j) /= aw.col(j).norm();
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(aw);
  qr.setThreshold(1e-9);
  return qr.rank();
}

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

// ---------------------------------------------------------------- calibration

namespace {

struct Stats {
  double median = 0, max = 0;
  size_t argmax = 0;
};

Stats AbsStats(const std::vector<double>& rel) {
  Stats s;
  std::vector<double> a;
  for (size_t i = 0; i < rel.size(); ++i) {
    a.push_back(std::fabs(rel[i]));
    if (a.back() > s.max || i == 0) {
      s.max = a.back();
      s.argmax = i;
    }
  }
  std::sort(a.begin(), a.end());
  if (!a.empty()) {
    const size_t m = a.size() / 2;
    s.median = a.size() % 2 ? a[m] : (a[m - 1] + a[m]) / 2;
  }
  return s;
}

FitReport Report(std::string group, const std::vector<const Sample*>& used,
                 const std::vector<double>& rel) {
  FitReport r;
  r.group = std::move(group);
  r.samples = static_cast<int64_t>(used.size());
  const Stats s = AbsStats(rel);
  r.median_rel_err = s.median;
  r.max_rel_err = s.max;
  r.max_line = used.empty() ? 0 : used[s.argmax]->line;
  return r;
}

double Gbps(double inverse_bytes_per_s, const std::string& file, const std::string& group) {
  if (!(inverse_bytes_per_s > 0))
    throw InputError(
        file, 0, group,
        "the fit found no bandwidth term (time does not grow with bytes): add samples over a "
        "wider range of sizes");
  return 1.0 / (inverse_bytes_per_s * 1e9);
}

void RequireRank(const Eigen::MatrixXd& a, const Eigen::VectorXd& t, const std::string& file,
                 const std::string& group, const std::string& hint) {
  if (WeightedRank(a, t) < a.cols())
    throw InputError(file, 0, group,
                     "the samples cannot separate this group's parameters: " + hint);
}

std::string Distinct(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "'" : ", '") + x + "'";
  return out;
}

// Keeps host copy samples of one layout and one mode (the profile has one bandwidth each way).
std::vector<const Sample*> SelectHostCopies(const Measurements& m, SampleKind kind,
                                            const CalibrateOptions& opt,
                                            std::vector<std::string>& notes) {
  std::vector<const Sample*> all;
  std::set<std::string> layouts, modes;
  for (const Sample& s : m.samples)
    if (s.kind == kind) {
      all.push_back(&s);
      layouts.insert(s.layout);
      modes.insert(s.mode);
    }
  if (all.empty()) return all;
  const char* kname = SampleKindName(kind);
  auto pick = [&](const std::set<std::string>& present, const std::string& want, const char* field,
                  const char* flag) -> std::string {
    if (!want.empty()) {
      if (!present.count(want))
        throw InputError(m.file, 0, flag,
                         std::string("no ") + kname + " samples with " + field + " '" + want +
                             "' (present: " + Distinct(present) + ")");
      return want;
    }
    if (present.size() > 1)
      throw InputError(m.file, 0, std::string(kname) + "." + field,
                       "samples hold several " + std::string(field) + "s (" + Distinct(present) +
                           "); the profile has one copy model: choose one with " + flag);
    return *present.begin();
  };
  const std::string layout = pick(layouts, opt.layout, "layout", "--layout");
  const std::string mode = pick(modes, opt.mode, "mode", "--mode");
  // Slot runs (host_copy only): the copies' entries, hence their cost, depend on them.
  std::string runs;
  if (kind == SampleKind::kHostCopy) {
    std::set<std::string> present;
    for (const Sample* s : all) present.insert(std::to_string(s->run_pages));
    runs = pick(present, opt.run_pages > 0 ? std::to_string(opt.run_pages) : "", "run_pages", "--run-pages");
  }
  std::vector<const Sample*> kept;
  for (const Sample* s : all)
    if (s->layout == layout && s->mode == mode && (runs.empty() || std::to_string(s->run_pages) == runs)) kept.push_back(s);
  if (kept.size() < all.size())
    notes.push_back(std::to_string(all.size() - kept.size()) + " " + kname +
                    " samples of other layouts, modes or slot runs left out (kept layout '" + layout + "', mode '" +
                    mode + "'" + (runs.empty() ? "" : ", run_pages " + runs) + ")");
  return kept;
}

CostBand Band(const BandedFit& f, size_t b, const std::string& file, const std::string& group) {
  return CostBand{f.max_bytes[b], f.band_x[b][0], Gbps(f.band_x[b][1], file, group)};
}

void BandParams(FitReport& r, const std::vector<CostBand>& bands) {
  for (size_t b = 0; b < bands.size(); ++b) {
    const std::string p = "band" + std::to_string(b) + ".";
    if (bands[b].max_bytes > 0) r.params.push_back({p + "max_bytes", bands[b].max_bytes});
    r.params.push_back({p + "latency_s", bands[b].latency_s});
    r.params.push_back({p + "gbps", bands[b].gbps});
  }
}

}  // namespace

CalibrationResult Calibrate(const Measurements& m, const HardwareProfile* base,
                            const CalibrateOptions& opt) {
  CalibrationResult out;
  HardwareProfile& p = out.profile;
  p.name = opt.name;
  p.measured = true;
  std::vector<std::string> missing;
  auto keep = [&](const std::string& param, double HardwareProfile::*field) {
    if (base) {
      p.*field = base->*field;
      out.kept_from_base.push_back(param);
    } else {
      missing.push_back(param);
    }
  };

  // Host <-> device copies: time = copies * copy_latency_s + bytes / (gbps * 1e9), one shared
  // latency, one bandwidth per direction.
  {
    const std::vector<const Sample*> s = SelectHostCopies(m, SampleKind::kHostCopy, opt, out.notes);
    bool h2d = false, d2h = false;
    for (const Sample* x : s) (x->to_device ? h2d : d2h) = true;
    if (!s.empty()) {
      const Eigen::Index cols = 1 + h2d + d2h;
      Eigen::VectorXd t(static_cast<Eigen::Index>(s.size()));
      for (size_t i = 0; i < s.size(); ++i) t[static_cast<Eigen::Index>(i)] = s[i]->median_s;
      // The latency column: the sample's copies (per chunk for batch samples), or 1 per call.
      const auto design = [&](bool per_copy) {
        Eigen::MatrixXd a = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(s.size()), cols);
        for (size_t i = 0; i < s.size(); ++i) {
          const auto r = static_cast<Eigen::Index>(i);
          a(r, 0) = per_copy ? static_cast<double>(s[i]->copies) : 1.0;
          a(r, s[i]->to_device || !h2d ? 1 : 2) = s[i]->bytes;
        }
        return a;
      };
      const Eigen::MatrixXd a = design(true);
      RequireRank(a, t, m.file, "host_copy",
                  "vary the bytes per copy (chunk size) so latency and bandwidth separate");
      LinearFit f = FitRelative(a, t);
      // Batch samples (one cudaMemcpyBatchAsync entry per chunk): the fixed cost may be per chunk
      // (copy_unit: chunk) or per call (copy_unit: call); both are fitted, the smaller weighted
      // residual is kept, and the note gives both.
      bool per_chunk = false;
      std::string unit_note;
      if (s.front()->mode == "batch") {
        const LinearFit per_call = FitRelative(design(false), t);
        per_chunk = f.ssr <= per_call.ssr;
        char b[200];
        std::snprintf(b, sizeof b, "mode batch: weighted SSR per chunk %.4g, per call %.4g; kept copy_unit %s", f.ssr,
                      per_call.ssr, per_chunk ? "chunk" : "call");
        unit_note = b;
        if (!per_chunk) f = per_call;
      }
      FitReport r = Report("host_device", s, f.rel_err);
      p.copy_latency_s = f.x[0];
      p.latency_per_chunk = per_chunk;
      r.note = unit_note;
      r.params.push_back({"copy_latency_s", p.copy_latency_s});
      if (h2d) {
        p.h2d_gbps = Gbps(f.x[1], m.file, "host_copy h2d");
        r.params.push_back({"h2d_gbps", p.h2d_gbps});
      }
      if (d2h) {
        p.d2h_gbps = Gbps(f.x[h2d ? 2 : 1], m.file, "host_copy d2h");
        r.params.push_back({"d2h_gbps", p.d2h_gbps});
      }
      out.fits.push_back(std::move(r));
    } else {
      keep("host_device.copy_latency_s", &HardwareProfile::copy_latency_s);
      if (base && base->latency_per_chunk) {  // the latency's unit goes with it
        p.latency_per_chunk = true;
        out.kept_from_base.push_back("host_device.copy_unit");
      }
    }
    if (!h2d) keep("host_device.h2d_gbps", &HardwareProfile::h2d_gbps);
    if (!d2h) keep("host_device.d2h_gbps", &HardwareProfile::d2h_gbps);
  }
  // Backups over a forward pass, per schedule: time = copies * latency + bytes / (gbps * 1e9).
  {
    std::vector<const Sample*> all = SelectHostCopies(m, SampleKind::kBackup, opt, out.notes);
    if (!opt.fit_backup_per_layer && !opt.fit_backup_tail && !all.empty()) {
      out.notes.push_back(std::to_string(all.size()) + " backup samples left out (--backup-fit none)");
      all.clear();
    }
    // One gather size beside the forward pass (the copies' contention differs with it).
    std::set<int64_t> gathers;
    for (const Sample* x : all) gathers.insert(x->gather_pages);
    if (!all.empty()) {
      int64_t g = opt.backup_gather_pages;
      std::string present;
      for (const int64_t v : gathers) present += (present.empty() ? "" : ", ") + std::to_string(v);
      if (g < 0 && gathers.size() > 1)
        throw InputError(m.file, 0, "backup.gather_pages",
                         "samples hold several gather sizes (" + present + "); choose one with --backup-gather-pages");
      if (g < 0) g = *gathers.begin();
      if (!gathers.count(g))
        throw InputError(m.file, 0, "--backup-gather-pages", "no backup samples with gather_pages " + std::to_string(g) + " (present: " + present + ")");
      std::vector<const Sample*> kept;
      for (const Sample* x : all)
        if (x->gather_pages == g) kept.push_back(x);
      if (kept.size() < all.size())
        out.notes.push_back(std::to_string(all.size() - kept.size()) + " backup samples with another gather beside them left out (kept gather_pages " +
                            std::to_string(g) + ")");
      all = std::move(kept);
    }
    for (const bool tail : {false, true}) {
      const char* group = tail ? "backup_tail" : "backup_per_layer";
      HardwareProfile::CopyCost& c = tail ? p.backup_tail : p.backup_per_layer;
      std::vector<const Sample*> s;
      if (tail ? opt.fit_backup_tail : opt.fit_backup_per_layer)
        for (const Sample* x : all)
          if (x->tail == tail) s.push_back(x);
      if (s.empty()) {
        if (base && (tail ? base->backup_tail : base->backup_per_layer).gbps > 0) {
          c = tail ? base->backup_tail : base->backup_per_layer;
          out.kept_from_base.push_back(std::string("host_device.") + group);
        }
        continue;
      }
      // Columns: copy calls, entries (runs of run_pages pages, per layer; when every sample gives
      // its pages and the entries separate from the bytes), bytes.
      bool entries = true;
      for (const Sample* x : s) entries = entries && x->pages > 0;
      const auto design = [&](bool with_entries) {
        Eigen::MatrixXd a = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(s.size()), with_entries ? 3 : 2);
        for (size_t i = 0; i < s.size(); ++i) {
          const auto r = static_cast<Eigen::Index>(i);
          a(r, 0) = static_cast<double>(s[i]->copies);
          if (with_entries)
            a(r, 1) = static_cast<double>((s[i]->pages + s[i]->run_pages - 1) / s[i]->run_pages * s[i]->layers);
          a(r, with_entries ? 2 : 1) = s[i]->bytes;
        }
        return a;
      };
      Eigen::VectorXd t(static_cast<Eigen::Index>(s.size()));
      for (size_t i = 0; i < s.size(); ++i) t[static_cast<Eigen::Index>(i)] = s[i]->median_s;
      Eigen::MatrixXd a = design(entries);
      if (entries && WeightedRank(a, t) < 3) {
        entries = false;
        a = design(false);
      }
      RequireRank(a, t, m.file, group, "vary the pages backed up so latency and bandwidth separate");
      const LinearFit f = FitRelative(a, t);
      FitReport r = Report(group, s, f.rel_err);
      c.latency_s = f.x[0];
      c.entry_s = entries ? f.x[1] : 0;
      c.gbps = Gbps(f.x[entries ? 2 : 1], m.file, group);
      r.params.push_back({std::string(group) + ".latency_s", c.latency_s});
      if (entries) r.params.push_back({std::string(group) + ".entry_s", c.entry_s});
      r.params.push_back({std::string(group) + ".gbps", c.gbps});
      out.fits.push_back(std::move(r));
    }
  }
  // Copy submission (CPU): time = copies * copy_submit_s.
  {
    const std::vector<const Sample*> s =
        SelectHostCopies(m, SampleKind::kCopySubmit, opt, out.notes);
    if (!s.empty()) {
      Eigen::MatrixXd a(static_cast<Eigen::Index>(s.size()), 1);
      Eigen::VectorXd t(static_cast<Eigen::Index>(s.size()));
      for (size_t i = 0; i < s.size(); ++i) {
        a(static_cast<Eigen::Index>(i), 0) = static_cast<double>(s[i]->copies);
        t[static_cast<Eigen::Index>(i)] = s[i]->median_s;
      }
      const LinearFit f = FitRelative(a, t);
      FitReport r = Report("copy_submit", s, f.rel_err);
      p.copy_submit_s = f.x[0];
      r.params.push_back({"copy_submit_s", p.copy_submit_s});
      out.fits.push_back(std::move(r));
    } else {
      keep("host_device.copy_submit_s", &HardwareProfile::copy_submit_s);
    }
  }
  // Device kernels: time = kernels * kernel_launch_s + (2 copy | 1 fill) * bytes / (gbps * 1e9).
  {
    std::vector<const Sample*> s;
    for (const Sample& x : m.samples)
      if (x.kind == SampleKind::kDeviceCopy) s.push_back(&x);
    if (!s.empty()) {
      // Banded by one kernel's payload (bytes / kernels): small kernels do not reach full
      // bandwidth, so the curve bends; one band when it does not.
      BandedRows rows;
      const auto rn = static_cast<Eigen::Index>(s.size());
      rows.band_features.resize(rn, 2);
      rows.shared_features.resize(rn, 0);
      rows.t.resize(rn);
      for (size_t i = 0; i < s.size(); ++i) {
        const auto r = static_cast<Eigen::Index>(i);
        rows.size.push_back(s[i]->bytes / static_cast<double>(s[i]->kernels));
        rows.band_features(r, 0) = static_cast<double>(s[i]->kernels);
        rows.band_features(r, 1) = (s[i]->fill ? 1.0 : 2.0) * s[i]->bytes;
        rows.t[r] = s[i]->median_s;
      }
      RequireRank(rows.band_features, rows.t, m.file, "device_copy",
                  "vary bytes (and kernels) so launch and bandwidth separate");
      const BandedFit f = FitBands(rows, opt.bands);
      FitReport r = Report("device", s, f.rel_err);
      std::vector<CostBand> bands;
      for (size_t b = 0; b < f.band_x.size(); ++b) bands.push_back(Band(f, b, m.file, "device_copy"));
      // The scalar pair is the last (largest) band; the bands are kept when there are several.
      p.kernel_launch_s = bands.back().latency_s;
      p.device_copy_gbps = bands.back().gbps;
      if (bands.size() > 1) p.device_copy_bands.bands = bands;
      BandParams(r, bands);
      out.fits.push_back(std::move(r));
    } else {
      keep("device.kernel_launch_s", &HardwareProfile::kernel_launch_s);
      keep("device.copy_gbps", &HardwareProfile::device_copy_gbps);
      if (base && !base->device_copy_bands.bands.empty()) {
        p.device_copy_bands = base->device_copy_bands;
        out.kept_from_base.push_back("device.copy_bands");
      }
    }
    // Not a timing: bytes of one index entry. From the base profile, else the struct default.
    p.index_bytes_per_page =
        base ? base->index_bytes_per_page : HardwareProfile{}.index_bytes_per_page;
  }
  // Collectives, per rank count, each banded by bytes.
  {
    std::set<int64_t> rank_counts;
    for (const Sample& x : m.samples)
      if (x.kind == SampleKind::kAllGather || x.kind == SampleKind::kAllReduce ||
          x.kind == SampleKind::kPeerRead)
        rank_counts.insert(x.ranks);
    for (int64_t n : rank_counts) {
      CollectiveModel c;
      c.ranks = static_cast<int>(n);
      const CollectiveModel* bc = base ? base->Collectives(c.ranks) : nullptr;
      const std::string pre = "collectives[ranks=" + std::to_string(n) + "].";
      const double nd = static_cast<double>(n);
      for (SampleKind k : {SampleKind::kAllGather, SampleKind::kAllReduce, SampleKind::kPeerRead}) {
        const std::string group = pre + SampleKindName(k);
        std::vector<const Sample*> s;
        for (const Sample& x : m.samples)
          if (x.kind == k && x.ranks == n) s.push_back(&x);
        BandedCost& dst = k == SampleKind::kAllGather   ? c.all_gather
                          : k == SampleKind::kAllReduce ? c.all_reduce
                                                        : c.peer_read;
        if (s.empty()) {
          if (bc) {
            dst = k == SampleKind::kAllGather   ? bc->all_gather
                  : k == SampleKind::kAllReduce ? bc->all_reduce
                                                : bc->peer_read;
            out.kept_from_base.push_back(group);
            if (k == SampleKind::kPeerRead) {
              c.peer_setup_s = bc->peer_setup_s;
              out.kept_from_base.push_back(pre + "peer_setup_s");
            }
          } else {
            missing.push_back(group);
          }
          continue;
        }
        std::set<int64_t> peers;
        for (const Sample* x : s) peers.insert(x->peers);
        const bool shared = k == SampleKind::kPeerRead && peers.size() > 1;
        BandedRows rows;
        const auto rn = static_cast<Eigen::Index>(s.size());
        rows.band_features.resize(rn, 2);
        rows.shared_features.resize(rn, shared ? 1 : 0);
        rows.t.resize(rn);
        for (size_t i = 0; i < s.size(); ++i) {
          const auto r = static_cast<Eigen::Index>(i);
          const double y = s[i]->bytes;
          rows.size.push_back(y);
          rows.t[r] = s[i]->median_s;
          if (k == SampleKind::kAllGather) {
            rows.band_features(r, 0) = nd - 1;
            rows.band_features(r, 1) = (nd - 1) / nd * y;
          } else if (k == SampleKind::kAllReduce) {
            rows.band_features(r, 0) = 2 * (nd - 1);
            rows.band_features(r, 1) = 2 * (nd - 1) / nd * y;
          } else {
            rows.band_features(r, 0) = 1;
            rows.band_features(r, 1) = y;
            if (shared) rows.shared_features(r, 0) = static_cast<double>(s[i]->peers);
          }
        }
        {
          Eigen::MatrixXd a(rn, rows.band_features.cols() + rows.shared_features.cols());
          a << rows.band_features, rows.shared_features;
          RequireRank(
              a, rows.t, m.file, group,
              shared ? "vary bytes and the number of peers" : "vary bytes (at least two sizes)");
        }
        const BandedFit f = FitBands(rows, opt.bands);
        FitReport r = Report(group, s, f.rel_err);
        for (size_t b = 0; b < f.band_x.size(); ++b) dst.bands.push_back(Band(f, b, m.file, group));
        BandParams(r, dst.bands);
        if (k == SampleKind::kPeerRead) {
          c.peer_setup_s = shared ? f.shared_x[0] : 0;
          r.params.push_back({"peer_setup_s", c.peer_setup_s});
          if (!shared)
            r.note = "all samples read from " + std::to_string(*peers.begin()) +
                     " peers: peer_setup_s cannot be separated and is 0, latency_s carries it";
        }
        out.fits.push_back(std::move(r));
      }
      p.collectives.push_back(std::move(c));
    }
    if (base)
      for (const CollectiveModel& bc : base->collectives)
        if (!rank_counts.count(bc.ranks)) {
          p.collectives.push_back(bc);
          out.kept_from_base.push_back("collectives[ranks=" + std::to_string(bc.ranks) + "]");
        }
    std::sort(p.collectives.begin(), p.collectives.end(),
              [](const CollectiveModel& a, const CollectiveModel& b) { return a.ranks < b.ranks; });
  }
  // Forward pass per layer: base + (token * n + pair * n * (p + n/2)) / N.
  {
    std::vector<const Sample*> s;
    for (const Sample& x : m.samples)
      if (x.kind == SampleKind::kForward) s.push_back(&x);
    if (!s.empty()) {
      Eigen::MatrixXd a(static_cast<Eigen::Index>(s.size()), 3);
      Eigen::VectorXd t(static_cast<Eigen::Index>(s.size()));
      for (size_t i = 0; i < s.size(); ++i) {
        const auto r = static_cast<Eigen::Index>(i);
        const double n = static_cast<double>(s[i]->new_tokens),
                     pre = static_cast<double>(s[i]->prefix_tokens);
        const double ranks = static_cast<double>(s[i]->ranks);
        a(r, 0) = 1;
        a(r, 1) = n / ranks;
        a(r, 2) = n * (pre + n / 2) / ranks;
        t[r] = s[i]->median_s / static_cast<double>(s[i]->layers);
      }
      RequireRank(a, t, m.file, "forward",
                  "vary new_tokens over at least three values and prefix_tokens over at least two");
      const LinearFit f = FitRelative(a, t);
      FitReport r = Report("compute", s, f.rel_err);
      p.layer_base_s = f.x[0];
      p.layer_token_s = f.x[1];
      p.layer_attn_pair_s = f.x[2];
      r.params = {{"layer_base_s", p.layer_base_s},
                  {"layer_token_s", p.layer_token_s},
                  {"layer_attn_pair_s", p.layer_attn_pair_s}};
      out.fits.push_back(std::move(r));
    } else {
      keep("compute.layer_base_s", &HardwareProfile::layer_base_s);
      keep("compute.layer_token_s", &HardwareProfile::layer_token_s);
      keep("compute.layer_attn_pair_s", &HardwareProfile::layer_attn_pair_s);
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& x : missing) list += (list.empty() ? "" : ", ") + x;
    throw InputError(m.file, 0, "",
                     "no samples for " + list + ", and no --base profile to take them from");
  }
  p.source = "kvlanes calibrate on " + m.file + "; context " + m.context.dump();
  if (!out.kept_from_base.empty()) {
    p.source += "; from base profile '" + base->name + "' (no samples):";
    for (const auto& x : out.kept_from_base) p.source += " " + x;
  }
  return out;
}

namespace {

// Shortest text that reads back as the same double.
std::string Num(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string Pct(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100 * v);
  return buf;
}

std::string FitComment(const CalibrationResult& r, const std::string& group,
                       const std::string& indent) {
  for (const FitReport& f : r.fits)
    if (f.group == group)
      return indent + "# fit: " + std::to_string(f.samples) + " samples, |rel err| median " +
             Pct(f.median_rel_err) + ", max " + Pct(f.max_rel_err) +
             (f.note.empty() ? "" : "; " + f.note) + "\n";
  return indent + "# no samples: from the base profile\n";
}

std::string Bands(const BandedCost& c) {
  std::string s = "[";
  for (size_t i = 0; i < c.bands.size(); ++i) {
    const CostBand& b = c.bands[i];
    s += i ? ", {" : "{";
    if (b.max_bytes > 0) s += "max_bytes: " + Num(b.max_bytes) + ", ";
    s += "latency_s: " + Num(b.latency_s) + ", gbps: " + Num(b.gbps) + "}";
  }
  return s + "]";
}

}  // namespace

std::string ProfileToYaml(const CalibrationResult& r, const std::string& measurements_file) {
  const HardwareProfile& p = r.profile;
  std::string y;
  y += "# Fitted by `kvlanes calibrate` from " + measurements_file +
       " (method: docs/calibration.md).\n";
  y += "# Residuals are |predicted - measured| / measured over each group's samples.\n";
  for (const FitReport& f : r.fits)
    y += "#   " + f.group + ": " + std::to_string(f.samples) + " samples, median " +
         Pct(f.median_rel_err) + ", max " + Pct(f.max_rel_err) + " (line " +
         std::to_string(f.max_line) + ")\n";
  if (!r.kept_from_base.empty()) {
    y += "# Kept from the base profile (no samples):";
    for (const auto& k : r.kept_from_base) y += " " + k;
    y += "\n";
  }
  for (const auto& n : r.notes) y += "# Note: " + n + "\n";
  y += "name: " + nlohmann::json(p.name).dump() + "\n";
  y += std::string("measured: ") + (p.measured ? "true" : "false") + "\n";
  y += "source: " + nlohmann::json(p.source).dump() + "\n\n";
  y += "host_device:\n" + FitComment(r, "host_device", "  ");
  y += "  h2d_gbps: " + Num(p.h2d_gbps) + "\n";
  y += "  d2h_gbps: " + Num(p.d2h_gbps) + "\n";
  y += "  copy_latency_s: " + Num(p.copy_latency_s) + "\n";
  if (p.latency_per_chunk) y += "  copy_unit: chunk\n";
  for (const auto& [group, c] : {std::pair{"backup_per_layer", p.backup_per_layer}, std::pair{"backup_tail", p.backup_tail}})
    if (c.gbps > 0)
      y += FitComment(r, group, "  ") + "  " + group + ": {latency_s: " + Num(c.latency_s) + ", gbps: " + Num(c.gbps) +
           (c.entry_s > 0 ? ", entry_s: " + Num(c.entry_s) : std::string()) + "}\n";
  y += FitComment(r, "copy_submit", "  ");
  y += "  copy_submit_s: " + Num(p.copy_submit_s) + "\n\n";
  y += "device:\n" + FitComment(r, "device", "  ");
  y += "  copy_gbps: " + Num(p.device_copy_gbps) + "\n";
  y += "  kernel_launch_s: " + Num(p.kernel_launch_s) + "\n";
  y += "  index_bytes_per_page: " + Num(p.index_bytes_per_page) + "\n";
  if (!p.device_copy_bands.bands.empty()) y += "  copy_bands: " + Bands(p.device_copy_bands) + "\n";
  y += "\n";
  if (p.collectives.empty()) {
    y += "collectives: []\n\n";
  } else {
    y += "collectives:\n";
    for (const CollectiveModel& c : p.collectives) {
      const std::string pre = "collectives[ranks=" + std::to_string(c.ranks) + "].";
      y += "  - ranks: " + std::to_string(c.ranks) + "\n";
      y += FitComment(r, pre + "all_gather", "    ");
      y += "    all_gather: " + Bands(c.all_gather) + "\n";
      y += FitComment(r, pre + "all_reduce", "    ");
      y += "    all_reduce: " + Bands(c.all_reduce) + "\n";
      y += FitComment(r, pre + "peer_read", "    ");
      y += "    peer_read: " + Bands(c.peer_read) + "\n";
      y += "    peer_setup_s: " + Num(c.peer_setup_s) + "\n";
    }
    y += "\n";
  }
  y += "compute:\n" + FitComment(r, "compute", "  ");
  y += "  layer_base_s: " + Num(p.layer_base_s) + "\n";
  y += "  layer_token_s: " + Num(p.layer_token_s) + "\n";
  y += "  layer_attn_pair_s: " + Num(p.layer_attn_pair_s) + "\n";
  return y;
}

}  // namespace kvlanes

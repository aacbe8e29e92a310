#include "sim/compare/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <string_view>

#include "base/percentile.h"
#include "io/input_error.h"
#include "io/input_file.h"

namespace kvlanes {
namespace {

// ---------------------------------------------------------------- fit reports and checks

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
  r.max_file = used.empty() ? "" : used[s.argmax]->file;
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

// The measured seconds of `s`, one row each.
Eigen::VectorXd MedianTimes(const std::vector<const Sample*>& s) {
  Eigen::VectorXd t(static_cast<Eigen::Index>(s.size()));
  for (size_t i = 0; i < s.size(); ++i) t[static_cast<Eigen::Index>(i)] = s[i]->median_s;
  return t;
}

std::vector<const Sample*> OfKind(const Measurements& m, SampleKind kind) {
  std::vector<const Sample*> s;
  for (const Sample& x : m.samples)
    if (x.kind == kind) s.push_back(&x);
  return s;
}

// ---------------------------------------------------------------- sample selection

std::string Distinct(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "'" : ", '") + x + "'";
  return out;
}

// The one value of `field` the fit uses: `want` when given (it must be present), else the only
// one present. `flag` is the option that chooses it.
std::string PickOne(const Measurements& m, SampleKind kind, const std::set<std::string>& present,
                    const std::string& want, const char* field, const char* flag) {
  const char* kname = kSampleKindNames.CName(kind);
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
                         "); the profile has one " +
                         (kind == SampleKind::kForward   ? "compute model"
                          : kind == SampleKind::kOverlap ? "set of overlap shares"
                                                         : "copy model") +
                         ": choose one with " + flag);
  return *present.begin();
}

// Keeps host copy samples of one layout and one mode (the profile has one bandwidth each way).
std::vector<const Sample*> SelectHostCopies(const Measurements& m, SampleKind kind,
                                            const CalibrateOptions& opt,
                                            std::vector<std::string>& notes) {
  const std::vector<const Sample*> all = OfKind(m, kind);
  if (all.empty()) return all;
  std::set<std::string> layouts, modes;
  for (const Sample* s : all) {
    layouts.insert(s->layout);
    modes.insert(s->mode);
  }
  const std::string layout = PickOne(m, kind, layouts, opt.layout, "layout", "--layout");
  const std::string mode = PickOne(m, kind, modes, opt.mode, "mode", "--mode");
  // Slot runs (host_copy only): the copies' entries, hence their cost, depend on them.
  std::string runs;
  if (kind == SampleKind::kHostCopy) {
    std::set<std::string> present;
    for (const Sample* s : all) present.insert(std::to_string(s->run_pages));
    runs = PickOne(m, kind, present, opt.run_pages > 0 ? std::to_string(opt.run_pages) : "",
                   "run_pages", "--run-pages");
  }
  std::vector<const Sample*> kept;
  for (const Sample* s : all)
    if (s->layout == layout && s->mode == mode &&
        (runs.empty() || std::to_string(s->run_pages) == runs))
      kept.push_back(s);
  if (kept.size() < all.size())
    notes.push_back(std::to_string(all.size() - kept.size()) + " " + kSampleKindNames.CName(kind) +
                    " samples of other layouts, modes or slot runs left out (kept layout '" +
                    layout + "', mode '" + mode + "'" +
                    (runs.empty() ? "" : ", run_pages " + runs) + ")");
  return kept;
}

// Keeps backup samples of one gather size beside the forward pass (the copies' contention
// differs with it): `want` when given (>= 0), else the only one present.
std::vector<const Sample*> SelectBackupGather(const std::vector<const Sample*>& all, int64_t want,
                                              const std::string& file,
                                              std::vector<std::string>& notes) {
  if (all.empty()) return all;
  std::set<int64_t> gathers;
  for (const Sample* x : all) gathers.insert(x->gather_pages);
  int64_t g = want;
  std::string present;
  for (const int64_t v : gathers) present += (present.empty() ? "" : ", ") + std::to_string(v);
  if (g < 0 && gathers.size() > 1)
    throw InputError(file, 0, "backup.gather_pages",
                     "samples hold several gather sizes (" + present +
                         "); choose one with --backup-gather-pages");
  if (g < 0) g = *gathers.begin();
  if (!gathers.count(g))
    throw InputError(
        file, 0, "--backup-gather-pages",
        "no backup samples with gather_pages " + std::to_string(g) + " (present: " + present + ")");
  std::vector<const Sample*> kept;
  for (const Sample* x : all)
    if (x->gather_pages == g) kept.push_back(x);
  if (kept.size() < all.size())
    notes.push_back(std::to_string(all.size() - kept.size()) +
                    " backup samples with another gather beside them left out (kept gather_pages " +
                    std::to_string(g) + ")");
  return kept;
}

// ---------------------------------------------------------------- the calibration's state

// What every group's fit reads and adds to: the samples, the base profile, the result being
// built, and the parameters that have neither samples nor a base value (an error at the end).
struct Calibration {
  const Measurements& m;
  const HardwareProfile* base;
  const CalibrateOptions& opt;
  CalibrationResult& out;
  std::vector<std::string> missing;

  HardwareProfile& profile() { return out.profile; }
  // A parameter without samples: the base profile's value, else recorded as missing.
  void Keep(const std::string& param, double HardwareProfile::*field) {
    if (base) {
      out.profile.*field = base->*field;
      out.kept_from_base.push_back(param);
    } else {
      missing.push_back(param);
    }
  }
};

// ---------------------------------------------------------------- host <-> device copies

// Columns: the latency term (the sample's copies, per chunk for batch samples, or 1 per call),
// then bytes in the h2d column or the d2h one (d2h is column 1 when there is no h2d sample).
Eigen::MatrixXd HostCopyDesign(const std::vector<const Sample*>& s, bool h2d, bool d2h,
                               bool per_copy) {
  const Eigen::Index cols = 1 + h2d + d2h;
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(s.size()), cols);
  for (size_t i = 0; i < s.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(i);
    a(r, 0) = per_copy ? static_cast<double>(s[i]->copies) : 1.0;
    a(r, s[i]->to_device || !h2d ? 1 : 2) = s[i]->bytes;
  }
  return a;
}

// Batch samples (one cudaMemcpyBatchAsync entry per chunk): the fixed cost may be per chunk
// (copy_unit: chunk) or per call (copy_unit: call); both are fitted, the smaller weighted
// residual is kept in `f`, and the returned note gives both.
std::string ChooseCopyUnit(const std::vector<const Sample*>& s, bool h2d, bool d2h,
                           const Eigen::VectorXd& t, LinearFit& f, bool& per_chunk) {
  const LinearFit per_call = FitRelative(HostCopyDesign(s, h2d, d2h, false), t);
  per_chunk = f.ssr <= per_call.ssr;
  char b[200];
  std::snprintf(b, sizeof b,
                "mode batch: weighted SSR per chunk %.4g, per call %.4g; kept copy_unit %s", f.ssr,
                per_call.ssr, per_chunk ? "chunk" : "call");
  if (!per_chunk) f = per_call;
  return b;
}

// time = copies * copy_latency_s + bytes / (gbps * 1e9): one shared latency, one bandwidth per
// direction.
void FitHostCopyGroup(Calibration& c, const std::vector<const Sample*>& s, bool h2d, bool d2h) {
  HardwareProfile& p = c.profile();
  const Eigen::VectorXd t = MedianTimes(s);
  const Eigen::MatrixXd a = HostCopyDesign(s, h2d, d2h, true);
  RequireRank(a, t, c.m.file, "host_copy",
              "vary the bytes per copy (chunk size) so latency and bandwidth separate");
  LinearFit f = FitRelative(a, t);
  bool per_chunk = false;
  std::string unit_note;
  if (s.front()->mode == "batch") unit_note = ChooseCopyUnit(s, h2d, d2h, t, f, per_chunk);
  FitReport r = Report("host_device", s, f.rel_err);
  p.copy_latency_s = f.x[0];
  p.latency_per_chunk = per_chunk;
  r.note = unit_note;
  r.params.push_back({"copy_latency_s", p.copy_latency_s});
  if (h2d) {
    p.h2d_gbps = Gbps(f.x[1], c.m.file, "host_copy h2d");
    r.params.push_back({"h2d_gbps", p.h2d_gbps});
  }
  if (d2h) {
    p.d2h_gbps = Gbps(f.x[h2d ? 2 : 1], c.m.file, "host_copy d2h");
    r.params.push_back({"d2h_gbps", p.d2h_gbps});
  }
  c.out.fits.push_back(std::move(r));
}

void FitHostCopies(Calibration& c) {
  const std::vector<const Sample*> s =
      SelectHostCopies(c.m, SampleKind::kHostCopy, c.opt, c.out.notes);
  bool h2d = false, d2h = false;
  for (const Sample* x : s) (x->to_device ? h2d : d2h) = true;
  if (!s.empty()) {
    FitHostCopyGroup(c, s, h2d, d2h);
  } else {
    c.Keep("host_device.copy_latency_s", &HardwareProfile::copy_latency_s);
    if (c.base && c.base->latency_per_chunk) {  // the latency's unit goes with it
      c.profile().latency_per_chunk = true;
      c.out.kept_from_base.push_back("host_device.copy_unit");
    }
  }
  if (!h2d) c.Keep("host_device.h2d_gbps", &HardwareProfile::h2d_gbps);
  if (!d2h) c.Keep("host_device.d2h_gbps", &HardwareProfile::d2h_gbps);
}

// ---------------------------------------------------------------- backups

// Columns: copy calls, entries (runs of run_pages pages, per layer) when `with_entries`, bytes.
Eigen::MatrixXd BackupDesign(const std::vector<const Sample*>& s, bool with_entries) {
  Eigen::MatrixXd a =
      Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(s.size()), with_entries ? 3 : 2);
  for (size_t i = 0; i < s.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(i);
    a(r, 0) = static_cast<double>(s[i]->copies);
    if (with_entries)
      a(r, 1) =
          static_cast<double>((s[i]->pages + s[i]->run_pages - 1) / s[i]->run_pages * s[i]->layers);
    a(r, with_entries ? 2 : 1) = s[i]->bytes;
  }
  return a;
}

// A sample's copy entries: runs of run_pages pages, per layer.
double BackupEntries(const Sample& x) {
  return static_cast<double>((x.pages + x.run_pages - 1) / x.run_pages * x.layers);
}

// The backup terms with bands of entry size (CalibrateOptions::backup_entry_bands): each sample's
// bytes per entry pick its band; time = copies * latency + entries * (entry_s[band] + spread *
// entry_layer_s[band]) + bytes / gbps[band], spread = the layers a copy spans (a tail copy's
// layers, 1 for a per-layer copy). Bands without samples are left out (their entries fall to the
// next band up; the highest band with samples takes every larger entry). A band whose samples all
// move entries of one size cannot separate its entry cost from its bandwidth: it gets the
// bandwidth alone; one whose samples all span one depth gets no entry_layer_s. A cost the fit
// makes negative is dropped and the fit repeated.
void FitBackupEntryBands(Calibration& c, const std::vector<const Sample*>& s,
                         const std::string& group, HardwareProfile::CopyCost& cost) {
  const std::vector<double>& bounds = c.opt.backup_entry_bands;
  const auto band_of = [&](const Sample& x) {
    const double per_entry = x.bytes / BackupEntries(x);
    size_t k = 0;
    while (k < bounds.size() && per_entry > bounds[k]) ++k;
    return k;
  };
  const auto spread = [](const Sample& x) { return x.tail ? static_cast<double>(x.layers) : 1.0; };
  std::map<size_t, std::vector<double>> sizes;  // band -> entry sizes of its samples
  std::map<size_t, std::set<double>> spreads;   // band -> the spreads of its samples
  for (const Sample* x : s) {
    sizes[band_of(*x)].push_back(x->bytes / BackupEntries(*x));
    spreads[band_of(*x)].insert(spread(*x));
  }
  std::vector<size_t> used;  // the bands with samples, ascending
  std::vector<bool> with_entry, with_layer;
  for (auto& [k, v] : sizes) {
    used.push_back(k);
    std::sort(v.begin(), v.end());
    with_entry.push_back(v.back() > v.front() * 1.01);
    with_layer.push_back(spreads[k].size() > 1);
  }
  const auto column_of = [&](size_t k) {
    return static_cast<size_t>(std::find(used.begin(), used.end(), k) - used.begin());
  };
  const Eigen::VectorXd t = MedianTimes(s);
  while (true) {
    // Columns: copies; per used band its bytes, then its entries and entries x spread where
    // fitted.
    std::vector<Eigen::Index> bytes_col(used.size()), entry_col(used.size(), -1),
        layer_col(used.size(), -1);
    Eigen::Index cols = 1;
    for (size_t j = 0; j < used.size(); ++j) {
      bytes_col[j] = cols++;
      if (with_entry[j]) entry_col[j] = cols++;
      if (with_layer[j]) layer_col[j] = cols++;
    }
    Eigen::MatrixXd a = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(s.size()), cols);
    for (size_t i = 0; i < s.size(); ++i) {
      const auto r = static_cast<Eigen::Index>(i);
      const size_t j = column_of(band_of(*s[i]));
      a(r, 0) = static_cast<double>(s[i]->copies);
      a(r, bytes_col[j]) = s[i]->bytes;
      if (entry_col[j] >= 0) a(r, entry_col[j]) = BackupEntries(*s[i]);
      if (layer_col[j] >= 0) a(r, layer_col[j]) = BackupEntries(*s[i]) * spread(*s[i]);
    }
    RequireRank(a, t, c.m.file, group,
                "vary the pages backed up and their runs within every band of entry size (or give "
                "fewer --backup-entry-bands)");
    const LinearFit f = FitRelative(a, t);
    // The most negative entry cost (or, failing one, cost per layer) is dropped.
    const auto drop_negative = [&](const std::vector<Eigen::Index>& col, std::vector<bool>& with) {
      size_t worst = used.size();
      for (size_t j = 0; j < used.size(); ++j)
        if (col[j] >= 0 && f.x[col[j]] < 0 &&
            (worst == used.size() || f.x[col[j]] < f.x[col[worst]]))
          worst = j;
      if (worst == used.size()) return false;
      with[worst] = false;
      return true;
    };
    if (drop_negative(entry_col, with_entry) || drop_negative(layer_col, with_layer)) continue;
    FitReport r = Report(group, s, f.rel_err);
    cost.latency_s = f.x[0];
    r.params.push_back({group + ".latency_s", cost.latency_s});
    for (size_t j = 0; j < used.size(); ++j) {
      CostBand b;  // latency_s: the band's cost per entry
      b.max_bytes = j + 1 < used.size() ? bounds[used[j]] : 0;
      b.latency_s = entry_col[j] >= 0 ? f.x[entry_col[j]] : 0;
      b.layer_s = layer_col[j] >= 0 ? f.x[layer_col[j]] : 0;
      const std::string at = group + ".band[" + std::to_string(j) + "]";
      b.gbps = Gbps(f.x[bytes_col[j]], c.m.file, at);
      r.params.push_back({at + ".entry_s", b.latency_s});
      if (layer_col[j] >= 0) r.params.push_back({at + ".entry_layer_s", b.layer_s});
      r.params.push_back({at + ".gbps", b.gbps});
      cost.entry_bands.bands.push_back(b);
    }
    cost.entry_s = cost.entry_bands.bands.back().latency_s;
    cost.gbps = cost.entry_bands.bands.back().gbps;
    c.out.fits.push_back(std::move(r));
    return;
  }
}

// A term's name, in fits and in the profile, as timed beside the model's forward pass (the main
// terms: `name`) or beside the synthetic spin (`spin`: in the beside_spin section).
std::string BesideName(bool spin, const std::string& name) {
  return spin ? "beside_spin." + name : name;
}

// One schedule's backup terms (`tail` or per-layer), the main ones or beside_spin's (`spin`), of
// a profile or the base (const).
template <typename Profile>
auto& BackupTerms(Profile& p, bool spin, bool tail) {
  if (spin) return tail ? p.beside_spin.backup_tail : p.beside_spin.backup_per_layer;
  return tail ? p.backup_tail : p.backup_per_layer;
}

// One schedule (per-layer or tail): time = copies * latency + entries * entry_s + bytes / (gbps
// * 1e9). The entry term is fitted when every sample gives its pages and the entries separate
// from the bytes. `spin`: the terms timed over the spin (beside_spin's), else the main ones.
void FitBackupSchedule(Calibration& c, const std::vector<const Sample*>& all, bool tail,
                       bool spin) {
  const std::string name = tail ? "backup_tail" : "backup_per_layer";
  const std::string group = BesideName(spin, name);
  std::vector<const Sample*> s;
  if (tail ? c.opt.fit_backup_tail : c.opt.fit_backup_per_layer)
    for (const Sample* x : all)
      if (x->tail == tail) s.push_back(x);
  if (s.empty()) {
    if (c.base && BackupTerms(*c.base, spin, tail).gbps > 0) {
      BackupTerms(c.profile(), spin, tail) = BackupTerms(*c.base, spin, tail);
      c.out.kept_from_base.push_back(BesideName(spin, "host_device." + name));
    }
    return;
  }
  HardwareProfile::CopyCost& cost = BackupTerms(c.profile(), spin, tail);
  bool entries = true;
  for (const Sample* x : s) entries = entries && x->pages > 0;
  cost.entry_bands = {};
  // Tail copies of several depths need the cost per layer spanned, which the bands carry (one
  // unbounded band where none are asked for).
  std::set<int64_t> depths;
  for (const Sample* x : s) depths.insert(x->layers);
  if (entries && (!c.opt.backup_entry_bands.empty() || (tail && depths.size() > 1))) {
    FitBackupEntryBands(c, s, group, cost);
    return;
  }
  const Eigen::VectorXd t = MedianTimes(s);
  Eigen::MatrixXd a = BackupDesign(s, entries);
  if (entries && WeightedRank(a, t) < 3) {
    entries = false;
    a = BackupDesign(s, false);
  }
  RequireRank(a, t, c.m.file, group, "vary the pages backed up so latency and bandwidth separate");
  const LinearFit f = FitRelative(a, t);
  FitReport r = Report(group, s, f.rel_err);
  cost.latency_s = f.x[0];
  cost.entry_s = entries ? f.x[1] : 0;
  cost.gbps = Gbps(f.x[entries ? 2 : 1], c.m.file, group);
  r.params.push_back({std::string(group) + ".latency_s", cost.latency_s});
  if (entries) r.params.push_back({std::string(group) + ".entry_s", cost.entry_s});
  r.params.push_back({std::string(group) + ".gbps", cost.gbps});
  c.out.fits.push_back(std::move(r));
}

// Tail backups of several depths (the recipe's tail step at the configured depth beside the
// slice's): a tail copy's entries are spread over every layer of the host pool, and the time per
// entry grows with that spread (docs/cost_model.md, "Tail backups at the model's depth"), so
// where tail samples of several depths are given, both sets of tail terms come from all of them,
// whatever ran before the copy (it starts after the last layer), with a cost per entry per layer
// spanned (FitBackupEntryBands). Empty when every tail sample has one depth.
std::vector<const Sample*> TailOfDepths(Calibration& c, const std::vector<const Sample*>& all) {
  std::set<int64_t> depths;
  std::vector<const Sample*> tail;
  for (const Sample* x : all)
    if (x->tail) {
      depths.insert(x->layers);
      tail.push_back(x);
    }
  if (depths.size() < 2) return {};
  std::string list;
  for (const int64_t d : depths) list += (list.empty() ? "" : ", ") + std::to_string(d);
  c.out.notes.push_back(std::to_string(tail.size()) + " tail backup samples of " + list +
                        " layers give both sets of tail terms, with an entry cost per layer a "
                        "copy spans");
  return tail;
}

// Backups over a forward pass, per schedule.
void FitBackups(Calibration& c) {
  std::vector<const Sample*> all = SelectHostCopies(c.m, SampleKind::kBackup, c.opt, c.out.notes);
  if (!c.opt.fit_backup_per_layer && !c.opt.fit_backup_tail && !all.empty()) {
    c.out.notes.push_back(std::to_string(all.size()) +
                          " backup samples left out (--backup-fit none)");
    all.clear();
  }
  all = SelectBackupGather(all, c.opt.backup_gather_pages, c.m.file, c.out.notes);
  // The sweep's diagnostics (another slot choice or pool order) are not what the executor runs.
  const size_t before = all.size();
  std::erase_if(all, [](const Sample* x) { return !x->variant.empty(); });
  if (all.size() < before)
    c.out.notes.push_back(std::to_string(before - all.size()) +
                          " backup samples of the sweep's diagnostics left out (host_slots, "
                          "pool_order)");
  // Timed over the model's forward pass (the proxy) and over the spin: with samples of both, the
  // main terms come from the model's and beside_spin's from the spin's (used when a run of the
  // spin is checked); with one kind only, the main terms come from it, and beside_spin's are the
  // base's when the samples are the model's, none when they are the spin's (the main terms are
  // then the spin's own).
  const std::vector<const Sample*> deep = TailOfDepths(c, all);
  std::vector<const Sample*> model, spin;
  for (const Sample* x : all) (x->forward == "model" ? model : spin).push_back(x);
  const bool both = !model.empty() && !spin.empty();
  if (both)
    c.out.notes.push_back(std::to_string(model.size()) +
                          " backup samples over the model's forward pass give the backup terms, " +
                          std::to_string(spin.size()) +
                          " over the synthetic one give the beside_spin backup terms");
  for (const bool tail : {false, true}) {
    const bool own = tail && !deep.empty();  // both sets of tail terms from every depth
    FitBackupSchedule(c, own ? deep : model.empty() ? spin : model, tail, false);
    if (both || spin.empty())  // else the main terms are the spin's own
      FitBackupSchedule(c, own ? deep : both ? spin : std::vector<const Sample*>{}, tail, true);
  }
}

// ---------------------------------------------------------------- copy submission, device copies

// Copy submission (CPU): time = copies * copy_submit_s.
void FitCopySubmit(Calibration& c) {
  const std::vector<const Sample*> s =
      SelectHostCopies(c.m, SampleKind::kCopySubmit, c.opt, c.out.notes);
  if (s.empty()) {
    c.Keep("host_device.copy_submit_s", &HardwareProfile::copy_submit_s);
    return;
  }
  Eigen::MatrixXd a(static_cast<Eigen::Index>(s.size()), 1);
  for (size_t i = 0; i < s.size(); ++i)
    a(static_cast<Eigen::Index>(i), 0) = static_cast<double>(s[i]->copies);
  const LinearFit f = FitRelative(a, MedianTimes(s));
  FitReport r = Report("copy_submit", s, f.rel_err);
  c.profile().copy_submit_s = f.x[0];
  r.params.push_back({"copy_submit_s", c.profile().copy_submit_s});
  c.out.fits.push_back(std::move(r));
}

// Rows banded by one kernel's payload (bytes / kernels): small kernels do not reach full
// bandwidth, so the curve bends; one band when it does not. Features: kernels, bytes moved.
BandedRows DeviceCopyRows(const std::vector<const Sample*>& s) {
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
  return rows;
}

void FitDeviceCopyGroup(Calibration& c, const std::vector<const Sample*>& s) {
  HardwareProfile& p = c.profile();
  const BandedRows rows = DeviceCopyRows(s);
  RequireRank(rows.band_features, rows.t, c.m.file, "device_copy",
              "vary bytes (and kernels) so launch and bandwidth separate");
  const BandedFit f = FitBands(rows, c.opt.bands);
  FitReport r = Report("device", s, f.rel_err);
  std::vector<CostBand> bands;
  for (size_t b = 0; b < f.band_x.size(); ++b) bands.push_back(Band(f, b, c.m.file, "device_copy"));
  // The scalar pair is the last (largest) band; the bands are kept when there are several.
  p.kernel_launch_s = bands.back().latency_s;
  p.device_copy_gbps = bands.back().gbps;
  if (bands.size() > 1) p.device_copy_bands.bands = bands;
  BandParams(r, bands);
  c.out.fits.push_back(std::move(r));
}

// The median and the range of a descriptive note's values (REQUIRES: `v` not empty).
struct Spread {
  double median, low, high;
};
Spread SpreadOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {PercentileOfSorted(v, 0.5), v.front(), v.back()};
}

// The sweep's one-kernel gather layers at cp_size 1, by their device_copy variant.
constexpr std::string_view kOneKernelGatherVariants[] = {"gather_p2p", "gather_dense"};

bool OneKernelGatherLayer(const Sample& x) {
  return std::ranges::find(kOneKernelGatherVariants, x.variant) !=
         std::ranges::end(kOneKernelGatherVariants);
}

// The extra s + s_per_gb x GB over one kernel of the fitted bands that minimises the samples'
// relative errors (weighted least squares; one size or a singular system: s alone).
HardwareProfile::KernelExtra FitKernelExtra(const HardwareProfile& p,
                                            const std::vector<const Sample*>& of) {
  double sw = 0, sx = 0, sxx = 0, sr = 0, sxr = 0;
  for (const Sample* x : of) {
    const double w = 1 / (x->median_s * x->median_s), gb = x->bytes * 1e-9;
    const double r = x->median_s - p.KernelCopyS(x->bytes);
    sw += w;
    sx += w * gb;
    sxx += w * gb * gb;
    sr += w * r;
    sxr += w * gb * r;
  }
  HardwareProfile::KernelExtra e;
  const double det = sw * sxx - sx * sx;
  if (det > 1e-9 * sw * sxx) {
    e.s_per_gb = (sw * sxr - sx * sr) / det;
    e.s = (sr - e.s_per_gb * sx) / sw;
  } else {
    e.s = sr / sw;
  }
  return e;
}

// A one-kernel gather method's own extra per layer (HardwareProfile::gather_kernel_extra), per
// method from its one-kernel layers against one kernel of the fitted bands (the packed layers');
// the fit report gives each layer's error once the extra is added.
void FitOneKernelGatherLayers(Calibration& c, const std::vector<const Sample*>& one) {
  std::vector<const Sample*> used;
  std::vector<double> rel;
  std::vector<std::pair<std::string, double>> params;
  for (const std::string_view variant : kOneKernelGatherVariants) {
    std::vector<const Sample*> of;
    for (const Sample* x : one)
      if (x->variant == variant) of.push_back(x);
    if (of.empty()) continue;
    const HardwareProfile::KernelExtra e = FitKernelExtra(c.profile(), of);
    const std::string method(variant.substr(variant.find('_') + 1));
    c.profile().gather_kernel_extra[method] = e;
    params.emplace_back(method + ".s", e.s);
    params.emplace_back(method + ".s_per_gb", e.s_per_gb);
    for (const Sample* x : of) {
      used.push_back(x);
      rel.push_back((c.profile().KernelCopyS(x->bytes) + e.At(x->bytes)) / x->median_s - 1);
    }
  }
  if (used.empty()) return;
  FitReport f = Report("gather_kernel_extra", used, rel);
  f.note = "each method's one-kernel layers beyond one kernel of the device bands";
  f.params = std::move(params);
  c.out.fits.push_back(std::move(f));
}

// Device kernels: time = kernels * kernel_launch_s + (2 copy | 1 fill) * bytes / (gbps * 1e9),
// fitted on every device copy but the one-kernel gather layers (FitOneKernelGatherLayers).
void FitDeviceCopies(Calibration& c) {
  std::vector<const Sample*> s, one;
  for (const Sample* x : OfKind(c.m, SampleKind::kDeviceCopy))
    (OneKernelGatherLayer(*x) ? one : s).push_back(x);
  if (!s.empty()) {
    FitDeviceCopyGroup(c, s);
  } else {
    c.Keep("device.kernel_launch_s", &HardwareProfile::kernel_launch_s);
    c.Keep("device.copy_gbps", &HardwareProfile::device_copy_gbps);
    if (c.base && !c.base->device_copy_bands.bands.empty()) {
      c.profile().device_copy_bands = c.base->device_copy_bands;
      c.out.kept_from_base.push_back("device.copy_bands");
    }
    // Extras beyond the base's bands go with them.
    if (c.base && !c.base->gather_kernel_extra.empty()) {
      c.profile().gather_kernel_extra = c.base->gather_kernel_extra;
      c.out.kept_from_base.push_back("device.gather_kernel_extra");
    }
  }
  FitOneKernelGatherLayers(c, one);
  // Not a timing: bytes of one index entry. From the base profile, else the struct default.
  c.profile().index_bytes_per_page =
      c.base ? c.base->index_bytes_per_page : HardwareProfile{}.index_bytes_per_page;
}

// Load-backs over the proxy (both schedules, every pool): time = copies * latency + entries *
// entry_s + bytes / (gbps * 1e9) -> host_device.load_back (the entry term where it separates from
// the bytes). Samples over the spin are left out (noted); without proxy samples the base's term.
void FitLoadBacks(Calibration& c) {
  std::vector<const Sample*> s;
  int64_t spin = 0;
  for (const Sample* x : OfKind(c.m, SampleKind::kLoadBack)) {
    if (x->forward == "synthetic")
      ++spin;
    else
      s.push_back(x);
  }
  if (spin > 0)
    c.out.notes.push_back(std::to_string(spin) +
                          " load_back samples over the spin left out (the term is the proxy's)");
  if (s.empty()) {
    if (c.base && c.base->load_back.gbps > 0) {
      c.profile().load_back = c.base->load_back;
      c.out.kept_from_base.push_back("host_device.load_back");
    }
    return;
  }
  const Eigen::VectorXd t = MedianTimes(s);
  bool entries = true;
  Eigen::MatrixXd a = BackupDesign(s, entries);
  if (WeightedRank(a, t) < 3) {
    entries = false;
    a = BackupDesign(s, false);
  }
  RequireRank(a, t, c.m.file, "load_back",
              "vary the pages loaded so latency and bandwidth separate");
  const LinearFit f = FitRelative(a, t);
  FitReport r = Report("load_back", s, f.rel_err);
  HardwareProfile::CopyCost& cost = c.profile().load_back;
  cost.latency_s = f.x[0];
  cost.entry_s = entries ? f.x[1] : 0;
  cost.gbps = Gbps(f.x[entries ? 2 : 1], c.m.file, "load_back");
  r.params.push_back({"load_back.latency_s", cost.latency_s});
  if (entries) r.params.push_back({"load_back.entry_s", cost.entry_s});
  r.params.push_back({"load_back.gbps", cost.gbps});
  c.out.fits.push_back(std::move(r));
}

// load_back samples against the host copies' price: calibrate notes, per schedule and pool, the
// median of their time over a copy call's latency (or a chunk's) plus bytes / h2d_gbps, what
// `check` prices a load-back at without the load_back term, before the request schedule's overlap.
void NoteLoadBacks(Calibration& c) {
  const std::vector<const Sample*> s = OfKind(c.m, SampleKind::kLoadBack);
  const HardwareProfile& p = c.profile();
  if (s.empty() || !(p.h2d_gbps > 0)) return;
  std::map<std::pair<bool, std::string>, std::vector<double>> ratios;
  for (const Sample* x : s) {
    const double pages = static_cast<double>(x->pages), L = static_cast<double>(x->layers);
    const double lat = p.latency_per_chunk ? pages * (x->tail ? L : 1.0) : 1.0;
    const double price =
        static_cast<double>(x->copies) * lat * p.copy_latency_s + x->bytes / (p.h2d_gbps * 1e9);
    if (price > 0) ratios[{x->tail, x->pool}].push_back(x->median_s / price);
  }
  for (const auto& [key, r] : ratios) {
    const Spread q = SpreadOf(r);
    char buf[240];
    std::snprintf(
        buf, sizeof buf,
        "load_back %s %s: %zu samples took a median %.3f of the host copies' price (%.3f .. %.3f)",
        key.first ? "all-layers" : "per-layer", key.second.c_str(), r.size(), q.median, q.low,
        q.high);
    c.out.notes.push_back(buf);
  }
}

// first_gather samples are descriptive: calibrate fits nothing from them and notes how much
// longer the first gather layer after a forward layer took than the next layer of its slots.
void NoteFirstGather(Calibration& c) {
  const std::vector<const Sample*> s = OfKind(c.m, SampleKind::kFirstGather);
  if (s.empty()) return;
  std::vector<double> r;
  for (const Sample* x : s) r.push_back(x->median_s / x->next_s);
  const Spread q = SpreadOf(r);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "first_gather: %zu samples (descriptive, nothing is fitted from them): the first "
                "gather layer after a forward layer took a median %.3f of the next layer's time "
                "(%.3f .. %.3f)",
                s.size(), q.median, q.low, q.high);
  c.out.notes.push_back(buf);
}

// A gather ratio table: after the first layer or the next ones (`next`), the main one or
// beside_spin's (`spin`), of a profile or the base (const). The main terms have no next-layer
// table: after the proxy the next gather is as cold as the first.
template <typename Profile>
auto& GatherRatios(Profile& p, bool spin, bool next) {
  if (!spin) return p.gather_after_forward;
  return next ? p.beside_spin.gather_next_after_forward : p.beside_spin.gather_after_forward;
}

// The gather ratio tables calibrate fits: {spin, next}.
constexpr std::pair<bool, bool> kGatherTables[] = {{false, false}, {true, false}, {true, true}};

// A gather layer after a forward layer over the fitted copy bands' time for it (two kernels, pack
// and unpack, of the sample's bytes each: a packed gather at cp_size 1), per page count the median
// over the forward shapes: gather_after_forward from the proxy's samples (forward "model" or not
// given), beside_spin's gather_after_forward from the spin's, and from the spin's next layer
// (next_s) beside_spin's gather_next_after_forward. After the proxy the next layer is not fitted:
// its layers leave the next gather as cold as the first (docs/cost_model.md "Gather after a forward
// layer"). Without such samples, the base's.
void FitGatherAfterForward(Calibration& c) {
  using Table = std::vector<HardwareProfile::PagesRatio>;
  for (const auto& [spin, next] : kGatherTables) {
    const std::string name = next ? "gather_next_after_forward" : "gather_after_forward";
    const std::string group = BesideName(spin, name);
    std::map<int64_t, std::vector<double>> by_pages;
    std::vector<const Sample*> used;
    std::vector<double> ratios;  // each used sample's own ratio
    for (const Sample* x : OfKind(c.m, SampleKind::kFirstGather)) {
      if ((x->forward == "synthetic") != spin) continue;
      const double alone = 2 * c.profile().KernelCopyS(x->bytes);
      const double t = next ? x->next_s : x->median_s;
      if (!(alone > 0) || !(t > 0)) continue;
      by_pages[x->pages].push_back(t / alone);
      used.push_back(x);
      ratios.push_back(t / alone);
    }
    if (by_pages.empty()) {
      if (c.base && !GatherRatios(*c.base, spin, next).empty()) {
        GatherRatios(c.profile(), spin, next) = GatherRatios(*c.base, spin, next);
        c.out.kept_from_base.push_back(BesideName(spin, "device." + name));
      }
      continue;
    }
    std::map<int64_t, double> median;
    Table t;
    for (auto& [pages, r] : by_pages) {
      std::sort(r.begin(), r.end());
      median[pages] = PercentileOfSorted(r, 0.5);
      t.push_back({pages, median[pages]});
    }
    // How far each sample is from its page count's ratio (the shapes' spread): predicted over
    // measured is that ratio over the sample's own.
    std::vector<double> rel;
    for (size_t i = 0; i < used.size(); ++i) rel.push_back(median[used[i]->pages] / ratios[i] - 1);
    FitReport r = Report(group, used, rel);
    for (const auto& e : t)
      r.params.push_back({group + "[pages=" + std::to_string(e.pages) + "]", e.ratio});
    GatherRatios(c.profile(), spin, next) = std::move(t);
    c.out.fits.push_back(std::move(r));
  }
}

}  // namespace

void RequireWritableGatherRatios(const CalibrationResult& r, const Measurements& m) {
  for (const auto& [spin, next] : kGatherTables)
    for (const HardwareProfile::PagesRatio& e : GatherRatios(r.profile, spin, next)) {
      if (e.ratio < HardwareProfile::PagesRatio::kMax) continue;
      const Sample* x = nullptr;  // the first sample at those pages, to name
      for (const Sample& u : m.samples)
        if (u.kind == SampleKind::kFirstGather && u.pages == e.pages &&
            (u.forward == "synthetic") == spin) {
          x = &u;
          break;
        }
      throw InputError(x && !x->file.empty() ? x->file : m.file, x ? x->line : 0, "first_gather",
                       "the gather layers of " + std::to_string(e.pages) + " pages after a " +
                           "forward layer took " + std::to_string(e.ratio) +
                           " times their price by the copy bands (a profile holds ratios below " +
                           std::to_string(HardwareProfile::PagesRatio::kMax) +
                           "); the copy bands (from --base or these files) must be of the "
                           "machine that ran the sweep");
    }
}

namespace {

// ---------------------------------------------------------------- collectives

constexpr SampleKind kCollectiveKinds[] = {SampleKind::kAllGather, SampleKind::kAllReduce,
                                           SampleKind::kPeerRead};

BandedCost& CostOf(CollectiveModel& c, SampleKind k) {
  return k == SampleKind::kAllGather   ? c.all_gather
         : k == SampleKind::kAllReduce ? c.all_reduce
                                       : c.peer_read;
}
const BandedCost& CostOf(const CollectiveModel& c, SampleKind k) {
  return k == SampleKind::kAllGather   ? c.all_gather
         : k == SampleKind::kAllReduce ? c.all_reduce
                                       : c.peer_read;
}

// Rows banded by bytes, for n ranks. Band features (alpha, inverse bandwidth) follow the
// collective's formula; with `shared`, peer reads also fit peer_setup_s per peer.
BandedRows CollectiveRows(const std::vector<const Sample*>& s, SampleKind k, double nd,
                          bool shared) {
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
  return rows;
}

// A collective without samples at this rank count: the base profile's, else missing.
void KeepCollective(Calibration& c, CollectiveModel& model, const CollectiveModel* bc, SampleKind k,
                    const std::string& pre, const std::string& group) {
  if (!bc) {
    c.missing.push_back(group);
    return;
  }
  CostOf(model, k) = CostOf(*bc, k);
  c.out.kept_from_base.push_back(group);
  if (k == SampleKind::kPeerRead) {
    model.peer_setup_s = bc->peer_setup_s;
    c.out.kept_from_base.push_back(pre + "peer_setup_s");
  }
}

void FitCollective(Calibration& c, CollectiveModel& model, const std::vector<const Sample*>& s,
                   SampleKind k, const std::string& group) {
  std::set<int64_t> peers;
  for (const Sample* x : s) peers.insert(x->peers);
  const bool shared = k == SampleKind::kPeerRead && peers.size() > 1;
  const BandedRows rows = CollectiveRows(s, k, static_cast<double>(model.ranks), shared);
  {
    Eigen::MatrixXd a(rows.t.size(), rows.band_features.cols() + rows.shared_features.cols());
    a << rows.band_features, rows.shared_features;
    RequireRank(a, rows.t, c.m.file, group,
                shared ? "vary bytes and the number of peers" : "vary bytes (at least two sizes)");
  }
  const BandedFit f = FitBands(rows, c.opt.bands);
  FitReport r = Report(group, s, f.rel_err);
  BandedCost& dst = CostOf(model, k);
  for (size_t b = 0; b < f.band_x.size(); ++b) dst.bands.push_back(Band(f, b, c.m.file, group));
  BandParams(r, dst.bands);
  if (k == SampleKind::kPeerRead) {
    model.peer_setup_s = shared ? f.shared_x[0] : 0;
    r.params.push_back({"peer_setup_s", model.peer_setup_s});
    if (!shared)
      r.note = "all samples read from " + std::to_string(*peers.begin()) +
               " peers: peer_setup_s cannot be separated and is 0, latency_s carries it";
  }
  c.out.fits.push_back(std::move(r));
}

// The collectives of one rank count, each fitted from its samples or kept from the base.
CollectiveModel FitCollectivesAt(Calibration& c, int64_t n) {
  CollectiveModel model;
  model.ranks = static_cast<int>(n);
  const CollectiveModel* bc = c.base ? c.base->Collectives(model.ranks) : nullptr;
  const std::string pre = "collectives[ranks=" + std::to_string(n) + "].";
  for (SampleKind k : kCollectiveKinds) {
    const std::string group = pre + kSampleKindNames.CName(k);
    std::vector<const Sample*> s;
    for (const Sample& x : c.m.samples)
      if (x.kind == k && x.ranks == n) s.push_back(&x);
    if (s.empty())
      KeepCollective(c, model, bc, k, pre, group);
    else
      FitCollective(c, model, s, k, group);
  }
  return model;
}

// Collectives, per rank count, each banded by bytes; rank counts without samples come from the
// base profile.
void FitCollectives(Calibration& c) {
  HardwareProfile& p = c.profile();
  std::set<int64_t> rank_counts;
  for (const Sample& x : c.m.samples)
    if (std::find(std::begin(kCollectiveKinds), std::end(kCollectiveKinds), x.kind) !=
        std::end(kCollectiveKinds))
      rank_counts.insert(x.ranks);
  for (int64_t n : rank_counts) p.collectives.push_back(FitCollectivesAt(c, n));
  if (c.base)
    for (const CollectiveModel& bc : c.base->collectives)
      if (!rank_counts.count(bc.ranks)) {
        p.collectives.push_back(bc);
        c.out.kept_from_base.push_back("collectives[ranks=" + std::to_string(bc.ranks) + "]");
      }
  std::sort(p.collectives.begin(), p.collectives.end(),
            [](const CollectiveModel& a, const CollectiveModel& b) { return a.ranks < b.ranks; });
}

// ---------------------------------------------------------------- forward pass

// One measured point of the compute table: per-layer seconds at (new tokens per rank, prefix).
struct ComputePoint {
  double n = 0, p = 0, t = 0;
  const Sample* s = nullptr;
};

// The rows of a compute table from points sorted by (n, p) (HardwareProfile::ComputeRow).
std::vector<HardwareProfile::ComputeRow> TableOf(const std::vector<ComputePoint>& pts) {
  std::vector<HardwareProfile::ComputeRow> rows;
  for (const ComputePoint& x : pts) {
    if (rows.empty() || rows.back().new_tokens != x.n) rows.push_back({x.n, {}, {}});
    rows.back().prefix_tokens.push_back(x.p);
    rows.back().layer_s.push_back(x.t);
  }
  return rows;
}

// Per-layer seconds of a forward sample: the mean layer's (kind -1), or one kind's time alone.
double LayerSecondsOf(const Sample& x, int kind) {
  if (kind < 0) return x.median_s / static_cast<double>(x.layers);
  for (const Sample::KindTime& k : x.per_kind)
    if (k.kind == kind) return k.median_s;
  return 0;
}

// A compute table for terms `t` (after their linear fit, whose terms the ratios use) from the
// forward samples' per-layer times of `kind`: every (new tokens, prefix) point, repeated points
// averaged. Its residuals are leave-one-out: each point predicted from the table without it, so
// they say how well the table interpolates (at its own points it is exact). `group` names it.
void FitComputeTable(Calibration& c, const std::vector<const Sample*>& s, int kind,
                     const std::string& group, HardwareProfile::KindTerms& t) {
  std::vector<ComputePoint> pts;
  for (const Sample* x : s)
    pts.push_back({static_cast<double>(x->new_tokens) / static_cast<double>(x->ranks),
                   static_cast<double>(x->prefix_tokens), LayerSecondsOf(*x, kind), x});
  std::stable_sort(pts.begin(), pts.end(), [](const ComputePoint& a, const ComputePoint& b) {
    return a.n != b.n ? a.n < b.n : a.p < b.p;
  });
  std::vector<ComputePoint> merged;
  std::vector<int> count;
  size_t repeated = 0;
  for (const ComputePoint& x : pts) {
    if (!merged.empty() && merged.back().n == x.n && merged.back().p == x.p) {
      merged.back().t += x.t;
      ++count.back();
      ++repeated;
      continue;
    }
    merged.push_back(x);
    count.push_back(1);
  }
  for (size_t i = 0; i < merged.size(); ++i) merged[i].t /= count[i];
  if (repeated > 0 && kind < 0)
    c.out.notes.push_back(std::to_string(repeated) +
                          " forward samples repeat a (new tokens, prefix) point: averaged into "
                          "compute.table");
  for (const ComputePoint& x : merged)
    if (!(t.LinearS(x.n, x.p, 1) > 0))
      throw InputError(c.m.file, x.s->line, "forward",
                       "the fitted linear compute terms of " + group +
                           " are 0 at a measured point, so the table cannot be written (add "
                           "samples or use --compute-form linear)");
  std::vector<double> rel;
  std::vector<const Sample*> used;
  HardwareProfile::KindTerms loo = t;
  for (size_t i = 0; i < merged.size() && merged.size() > 1; ++i) {
    std::vector<ComputePoint> rest = merged;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    loo.table = TableOf(rest);
    const ComputePoint& x = merged[i];
    rel.push_back((loo.TableS(x.n, x.p, 1) - x.t) / x.t);
    used.push_back(x.s);
  }
  t.table = TableOf(merged);
  FitReport r = Report(group + ".table", used, rel);
  r.samples = static_cast<int64_t>(merged.size());
  r.note = std::to_string(t.table.size()) + " rows; residuals leave one point out";
  c.out.fits.push_back(std::move(r));
}

// Terms `t` of one layer (the mean layer, kind -1, or one kind's) from the forward samples:
// base + (token * n + pair * n * (p + n/2)) / N by least squares on relative error, then, with
// --compute-form table, the table (FitComputeTable). `group` names the fits.
void FitTerms(Calibration& c, const std::vector<const Sample*>& s, int kind,
              const std::string& group, HardwareProfile::KindTerms& t) {
  Eigen::MatrixXd a(static_cast<Eigen::Index>(s.size()), 3);
  Eigen::VectorXd y(static_cast<Eigen::Index>(s.size()));
  for (size_t i = 0; i < s.size(); ++i) {
    const auto r = static_cast<Eigen::Index>(i);
    const double n = static_cast<double>(s[i]->new_tokens),
                 pre = static_cast<double>(s[i]->prefix_tokens);
    const double ranks = static_cast<double>(s[i]->ranks);
    a(r, 0) = 1;
    a(r, 1) = n / ranks;
    a(r, 2) = n * (pre + n / 2) / ranks;
    y[r] = LayerSecondsOf(*s[i], kind);
  }
  RequireRank(a, y, c.m.file, "forward",
              "vary new_tokens over at least three values and prefix_tokens over at least two");
  const LinearFit f = FitRelative(a, y);
  t.layer_base_s = f.x[0];
  t.layer_token_s = f.x[1];
  t.layer_attn_pair_s = f.x[2];
  FitReport r = Report(group, s, f.rel_err);
  r.params = {{"layer_base_s", t.layer_base_s},
              {"layer_token_s", t.layer_token_s},
              {"layer_attn_pair_s", t.layer_attn_pair_s}};
  c.out.fits.push_back(std::move(r));
  t.table.clear();
  if (c.opt.compute_table) FitComputeTable(c, s, kind, group, t);
}

// One kind's time of a pass sample's parts (KindTime first_s, other_s), or nullptr.
const Sample::KindTime* PassParts(const Sample& x, int kind) {
  for (const Sample::KindTime& k : x.per_kind)
    if (k.kind == kind && k.first_s > 0 && k.other_s > 0) return &k;
  return nullptr;
}

// Each kind's GEMMs alone at a pass's token counts (KindTerms::gemm_tokens, gemm_layer_s) from
// the samples of passes of k requests of n new tokens: the first request's layer less another's
// is the GEMMs over k n tokens; one request's layer (the fitted price at (n, 0)) less another's is
// the GEMMs over n. Points of one token count are averaged.
void FitPassGemm(const std::vector<const Sample*>& passes, int kind,
                 HardwareProfile::KindTerms& t) {
  std::map<int64_t, std::pair<double, int>> points;  // tokens -> (sum of seconds, count)
  for (const Sample* x : passes) {
    const Sample::KindTime* k = PassParts(*x, kind);
    if (!k) continue;
    const double n = static_cast<double>(x->new_tokens);
    const double one = t.TableS(n, 0, 1);  // the linear terms without a table
    for (const auto& [tokens, s] :
         {std::pair{x->new_tokens, one - k->other_s},
          std::pair{x->pass_requests * x->new_tokens, k->first_s - k->other_s}}) {
      auto& [sum, count] = points[tokens];
      sum += std::max(0.0, s);
      ++count;
    }
  }
  t.gemm_tokens.clear();
  t.gemm_layer_s.clear();
  for (const auto& [tokens, sc] : points) {
    t.gemm_tokens.push_back(static_cast<double>(tokens));
    t.gemm_layer_s.push_back(sc.first / sc.second);
  }
}

// Serving mode's pass formula (docs/serving.md, "Pass time") against the samples of passes of k
// requests of n new tokens (bench sweep forward_pass_requests), per layer kind when the profile
// has kinds (else over the mean layer's terms `mean`): first each kind's GEMMs at a pass's tokens
// are taken from them (FitPassGemm: compute.layer_kinds.<kind>.pass_gemm), then the fits
// "<group>.passes" report the formula without them, base + k (price(n) - base), whose note gives
// the saving the samples measured per extra request, (k price(n) - pass) / (k - 1) (median),
// beside the base the formula credits.
void FitPasses(Calibration& c, const std::vector<const Sample*>& passes,
               const HardwareProfile::KindTerms& mean) {
  HardwareProfile& p = c.profile();
  std::vector<std::pair<int, std::string>> groups;
  if (p.HasComputeKinds()) {
    for (int k = 0; k < 2; ++k)
      if (p.compute_kinds[k].measured)
        groups.push_back({k, std::string("compute.layer_kinds.") +
                                 HardwareProfile::kComputeKindNames[k] + ".passes"});
  } else {
    groups.push_back({-1, "compute.passes"});
  }
  for (const auto& [kind, group] : groups) {
    const HardwareProfile::KindTerms& t = kind < 0 ? mean : p.compute_kinds[kind];
    std::vector<const Sample*> used;
    std::vector<double> rel, saving;
    for (const Sample* x : passes) {
      const double measured = LayerSecondsOf(*x, kind);
      if (!(measured > 0)) continue;
      const double k = static_cast<double>(x->pass_requests);
      const double n = static_cast<double>(x->new_tokens);
      const double one = t.TableS(n, 0, 1);  // the linear terms without a table
      const double priced = t.layer_base_s + k * (one - t.layer_base_s);
      used.push_back(x);
      rel.push_back((priced - measured) / measured);
      saving.push_back((k * one - measured) / (k - 1));
    }
    if (used.empty()) continue;
    if (kind >= 0) FitPassGemm(passes, kind, p.compute_kinds[kind]);
    FitReport r = Report(group, used, rel);
    std::sort(saving.begin(), saving.end());
    char buf[240];
    std::snprintf(buf, sizeof buf,
                  "the pass formula without pass_gemm; measured saving per extra request %.4g ms "
                  "a layer (median), the formula credits %.4g ms; pass_gemm: %zu points",
                  1e3 * PercentileOfSorted(saving, 0.5), 1e3 * t.layer_base_s,
                  kind >= 0 ? p.compute_kinds[kind].gemm_tokens.size() : size_t{0});
    r.note = buf;
    c.out.fits.push_back(std::move(r));
  }
}

// --compute-form rescale: the base's compute terms and table times k, the median over the
// samples of measured / the base's price. The samples must be of the base's preset and layer
// count (another model's proxy says nothing about this one's table). Residuals are after the
// rescale; the note gives them before it.
void RescaleCompute(Calibration& c, const std::vector<const Sample*>& s,
                    const std::string& preset) {
  if (!c.base ||
      !(c.base->layer_base_s > 0 || c.base->layer_token_s > 0 || !c.base->compute_table.empty()))
    throw InputError("", 0, "--compute-form",
                     "rescale scales the base profile's compute terms: give --base with them");
  const HardwareProfile& b = *c.base;
  for (const Sample* x : s) {
    if (!b.compute_model_preset.empty() && x->preset != b.compute_model_preset)
      throw InputError(c.m.file, x->line, "preset",
                       "a forward sample of '" + x->preset + "' cannot rescale compute terms " +
                           "measured on '" + b.compute_model_preset + "'");
    if (!b.HasComputeKinds() && b.compute_model_layers > 0 &&
        x->model_layers != b.compute_model_layers)
      throw InputError(c.m.file, x->line, "model_layers",
                       "a forward sample of a " + std::to_string(x->model_layers) +
                           "-layer model cannot rescale compute terms measured at " +
                           std::to_string(b.compute_model_layers) + " layers");
  }
  std::vector<double> ratio;
  for (const Sample* x : s) {
    const double n = static_cast<double>(x->new_tokens) / static_cast<double>(x->ranks);
    HardwareProfile at = b;  // with per-kind terms: composed for the sample's layer kinds
    if (b.HasComputeKinds()) {
      int64_t kinds[2] = {0, 0};
      for (const Sample::KindTime& k : x->per_kind) kinds[k.kind] += k.layers;
      if (kinds[0] + kinds[1] == 0 || !at.ComposeDepth(kinds[0], kinds[1]).empty())
        throw InputError(c.m.file, x->line, "per_kind",
                         "the base profile's per-kind compute terms need each sample's layer "
                         "kinds (per_kind) of kinds the base has");
    }
    const double priced = at.TableLayerS(n, static_cast<double>(x->prefix_tokens), 1);
    if (!(priced > 0))
      throw InputError(c.m.file, x->line, "forward",
                       "the base profile prices this point at 0 s, so there is nothing to rescale");
    ratio.push_back(x->median_s / static_cast<double>(x->layers) / priced);
  }
  std::vector<double> sorted = ratio;
  std::sort(sorted.begin(), sorted.end());
  const double k = PercentileOfSorted(sorted, 0.5);
  HardwareProfile& p = c.profile();
  p.layer_base_s = b.layer_base_s;
  p.layer_token_s = b.layer_token_s;
  p.layer_attn_pair_s = b.layer_attn_pair_s;
  p.compute_table = b.compute_table;
  for (int k = 0; k < 2; ++k) p.compute_kinds[k] = b.compute_kinds[k];
  p.compute_measured = b.compute_measured;
  p.compute_model_preset = b.compute_model_preset.empty() ? preset : b.compute_model_preset;
  p.compute_model_layers = b.compute_model_layers;
  p.ScaleCompute(k);
  std::vector<double> before, after;
  for (const double r : ratio) {
    before.push_back(std::abs(1 / r - 1));
    after.push_back(k / r - 1);
  }
  std::sort(before.begin(), before.end());
  FitReport r = Report("compute.rescale", s, after);
  r.params = {{"scale", k}};
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "the base's compute terms and table times %.4f; before it |rel err| median %.2f%%",
                k, 100 * PercentileOfSorted(before, 0.5));
  r.note = buf;
  c.out.fits.push_back(std::move(r));
}

// Each kind's sustained grid (KindTerms::sustained_*): at every (new tokens, prefix) of the
// sustained samples, the kind's time back to back over its time in the forward grid's sample of
// the same point (`grid`). The points must fill a grid of tokens x prefixes. The fits
// "<kind>.sustained" report |ratio - 1| (a slowdown, not an error).
void FitSustained(Calibration& c, const std::vector<const Sample*>& sustained,
                  const std::vector<const Sample*>& grid) {
  HardwareProfile& p = c.profile();
  for (int k = 0; k < 2; ++k) {
    HardwareProfile::KindTerms& t = p.compute_kinds[k];
    const std::string group =
        std::string("compute.layer_kinds.") + HardwareProfile::kComputeKindNames[k] + ".sustained";
    t.sustained_tokens.clear();
    t.sustained_prefix.clear();
    t.sustained_ratio.clear();
    if (!t.measured) continue;
    std::map<std::pair<int64_t, int64_t>, double> ratio;
    std::vector<const Sample*> used;
    std::vector<double> rel;
    for (const Sample* x : sustained) {
      const double s = LayerSecondsOf(*x, k);
      if (!(s > 0) || ratio.count({x->new_tokens, x->prefix_tokens})) continue;
      const auto g = std::find_if(grid.begin(), grid.end(), [&](const Sample* y) {
        return y->new_tokens == x->new_tokens && y->prefix_tokens == x->prefix_tokens &&
               LayerSecondsOf(*y, k) > 0;
      });
      if (g == grid.end()) {
        c.out.notes.push_back(group + ": the sustained sample at " + std::to_string(x->new_tokens) +
                              " new over " + std::to_string(x->prefix_tokens) +
                              " prefix tokens has no forward grid sample there: left out");
        continue;
      }
      ratio[{x->new_tokens, x->prefix_tokens}] = s / LayerSecondsOf(**g, k);
      used.push_back(x);
      rel.push_back(ratio[{x->new_tokens, x->prefix_tokens}] - 1);
    }
    if (ratio.empty()) continue;
    std::set<int64_t> tokens, prefixes;
    for (const auto& [point, r] : ratio) {
      tokens.insert(point.first);
      prefixes.insert(point.second);
    }
    if (ratio.size() != tokens.size() * prefixes.size()) {
      c.out.notes.push_back(group +
                            ": the sustained samples do not fill a grid of new x prefix "
                            "tokens: none written");
      continue;
    }
    for (const int64_t n : tokens) {
      t.sustained_tokens.push_back(static_cast<double>(n));
      std::vector<double> row;
      for (const int64_t q : prefixes) row.push_back(ratio[{n, q}]);
      t.sustained_ratio.push_back(std::move(row));
    }
    for (const int64_t q : prefixes) t.sustained_prefix.push_back(static_cast<double>(q));
    FitReport r = Report(group, used, rel);
    const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end(),
                                              [](auto& a, auto& b) { return a.second < b.second; });
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "back to back over the grid: %.4f to %.4f (residuals are |ratio - 1|)",
                  lo->second, hi->second);
    r.note = buf;
    c.out.fits.push_back(std::move(r));
  }
}

// Forward pass per layer: base + (token * n + pair * n * (p + n/2)) / N. Samples of the spin
// kernel (forward "synthetic") time a duration the sweep chose, so they calibrate nothing and are
// left out; samples of several presets need --model-preset.
void FitForward(Calibration& c) {
  HardwareProfile& p = c.profile();
  std::vector<const Sample*> s, passes, sustained;
  std::set<std::string> presets;
  size_t synthetic = 0;
  for (const Sample* x : OfKind(c.m, SampleKind::kForward)) {
    if (x->forward == "synthetic") {
      ++synthetic;
      continue;
    }
    if (x->pass_requests > 1) {  // priced by the pass formula after the fit, not fitted
      passes.push_back(x);
      continue;
    }
    if (x->sustained) {  // ratios to the grid after the fit (FitSustained), not fitted
      sustained.push_back(x);
      continue;
    }
    s.push_back(x);
    presets.insert(x->preset);
  }
  if (synthetic > 0)
    c.out.notes.push_back(std::to_string(synthetic) +
                          " forward samples of the synthetic forward pass left out (they time a "
                          "chosen duration)");
  if (s.empty()) {
    c.Keep("compute.layer_base_s", &HardwareProfile::layer_base_s);
    c.Keep("compute.layer_token_s", &HardwareProfile::layer_token_s);
    c.Keep("compute.layer_attn_pair_s", &HardwareProfile::layer_attn_pair_s);
    if (c.base) {
      p.compute_measured = c.base->compute_measured;
      p.compute_model_preset = c.base->compute_model_preset;
      p.compute_model_layers = c.base->compute_model_layers;
      p.compute_table = c.base->compute_table;
      if (!p.compute_table.empty()) c.out.kept_from_base.push_back("compute.table");
      for (int k = 0; k < 2; ++k) p.compute_kinds[k] = c.base->compute_kinds[k];
      if (c.base->HasComputeKinds()) c.out.kept_from_base.push_back("compute.layer_kinds");
    }
    return;
  }
  const std::string preset =
      PickOne(c.m, SampleKind::kForward, presets, c.opt.model_preset, "preset", "--model-preset");
  const size_t all = s.size();
  std::erase_if(s, [&](const Sample* x) { return x->preset != preset; });
  if (s.size() < all)
    c.out.notes.push_back(std::to_string(all - s.size()) +
                          " forward samples of other model presets left out (kept '" + preset +
                          "')");
  if (c.opt.compute_rescale) {
    RescaleCompute(c, s, preset);
    return;
  }
  HardwareProfile::KindTerms mean;
  const size_t mean_fit = c.out.fits.size();
  FitTerms(c, s, -1, "compute", mean);
  p.layer_base_s = mean.layer_base_s;
  p.layer_token_s = mean.layer_token_s;
  p.layer_attn_pair_s = mean.layer_attn_pair_s;
  // Measured on the proxy of a named preset: the profile says so (a replay of another preset is
  // refused). Samples without a preset (older files) leave the terms unlabelled.
  p.compute_measured = !preset.empty();
  p.compute_model_preset = preset;
  // The layer count the samples were measured at, when they agree (a mix leaves it unrecorded).
  p.compute_model_layers = s.front()->model_layers;
  for (const Sample* x : s)
    if (x->model_layers != p.compute_model_layers) p.compute_model_layers = 0;
  if (!preset.empty())
    c.out.fits[mean_fit].note =
        "model preset " + preset +
        (p.compute_model_layers > 0
             ? ", " + std::to_string(p.compute_model_layers) + " layers"
             : ", model layer count not given or not the same in every sample");
  // Each layer kind's own terms, when every sample times the kinds (per_kind): a replay of any
  // depth then composes them. The mean table is left out then (the kinds price every depth).
  bool kinds = p.compute_measured;
  for (const Sample* x : s) kinds = kinds && !x->per_kind.empty();
  for (int k = 0; k < 2 && kinds; ++k) {
    std::vector<const Sample*> ks;
    for (const Sample* x : s)
      if (LayerSecondsOf(*x, k) > 0) ks.push_back(x);
    if (ks.empty()) continue;
    HardwareProfile::KindTerms& t = p.compute_kinds[k];
    FitTerms(c, ks, k, std::string("compute.layer_kinds.") + HardwareProfile::kComputeKindNames[k],
             t);
    t.measured = true;
  }
  p.compute_table = p.HasComputeKinds() ? std::vector<HardwareProfile::ComputeRow>{} : mean.table;
  std::erase_if(passes, [&](const Sample* x) { return x->preset != preset; });
  if (!passes.empty()) FitPasses(c, passes, mean);
  std::erase_if(sustained, [&](const Sample* x) { return x->preset != preset; });
  if (p.HasComputeKinds()) FitSustained(c, sustained, s);
}

// ---------------------------------------------------------------- overlap shares

// One pair of kinds: while the victim runs beside the other op for `o` seconds it proceeds at
// share s of its rate alone, so its time in the pair is T = A + (1 - s) o (A: its time alone).
// Fitted by least squares on relative error over the samples with overlap: x = 1 - s minimizes
// sum ((A_i + x o_i - T_i) / T_i)^2, x = sum(u_i v_i) / sum(u_i^2) with u = o / T, v = (T - A) / T;
// s = 1 - x, kept in [kMinShare, 1]. Two copies of one direction (one copy engine) are reported
// but not written: the stream schedule serializes them.
constexpr double kMinShare = 0.01;
constexpr double kMinOverlapFraction = 0.05;  // of the victim's pair time; less tells nothing

// The shares of every pair of kinds in `all` (one forward mode), in the order OverlapKindNames
// lists them; `prefix` names the fits ("overlap", "beside_spin.overlap").
std::vector<HardwareProfile::OverlapShare> FitShares(Calibration& c,
                                                     const std::vector<const Sample*>& all,
                                                     const std::string& prefix) {
  std::vector<HardwareProfile::OverlapShare> shares;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& v : OverlapKindNames())
    for (const std::string& b : OverlapKindNames())
      for (const Sample* x : all)
        if (x->victim == v && x->beside == b) {
          pairs.push_back({v, b});
          break;
        }
  for (const auto& [v, b] : pairs) {
    std::vector<const Sample*> used;
    size_t no_overlap = 0;
    double uv = 0, uu = 0;
    for (const Sample* x : all) {
      if (x->victim != v || x->beside != b) continue;
      if (!(x->overlap_s > kMinOverlapFraction * x->median_s)) {
        ++no_overlap;
        continue;
      }
      const double u = x->overlap_s / x->median_s, w = (x->median_s - x->alone_s) / x->median_s;
      uv += u * w;
      uu += u * u;
      used.push_back(x);
    }
    const std::string group = prefix + "." + v + "/" + b;
    if (no_overlap > 0)
      c.out.notes.push_back(group + ": " + std::to_string(no_overlap) +
                            " samples left out (the two ops ran at once for less than " +
                            std::to_string(static_cast<int>(100 * kMinOverlapFraction)) +
                            "% of the victim's time)");
    if (used.empty()) continue;
    const double share = std::clamp(1 - uv / uu, kMinShare, 1.0);
    std::vector<double> rel;
    for (const Sample* x : used)
      rel.push_back((x->alone_s + (1 - share) * x->overlap_s - x->median_s) / x->median_s);
    FitReport r = Report(group, used, rel);
    r.params = {{"share", share}};
    const bool same_engine = v == b && (v == "h2d" || v == "d2h");
    if (same_engine) {
      r.note = "one copy engine: serialized by the schedule, not written";
    } else {
      shares.push_back({v, b, share});
    }
    c.out.fits.push_back(std::move(r));
  }
  return shares;
}

// The synthetic forward pass's time per layer beyond its busy time (beside_spin's
// compute.extra_layer_s): the median over the samples that time a spin layer alone against its
// busy time (0 when none give it).
void FitSpinExtraLayer(Calibration& c, const std::vector<const Sample*>& synthetic) {
  const std::string group = "beside_spin.compute.extra_layer_s";
  const auto keep_base = [&] {
    if (c.base && c.base->beside_spin.extra_layer_s > 0) {
      c.profile().beside_spin.extra_layer_s = c.base->beside_spin.extra_layer_s;
      c.out.kept_from_base.push_back(group);
    }
  };
  std::vector<const Sample*> used;
  std::vector<double> extra;
  for (const Sample* x : synthetic)
    if (x->victim == "forward" && x->forward_busy_s > 0) {
      used.push_back(x);
      extra.push_back(x->alone_s - x->forward_busy_s);
    }
  if (used.empty()) return keep_base();
  const double med = Percentile(extra, 0.5);
  if (!(med >= 0)) {
    // A pass shorter than its busy time did not spin for it (the host backend's does not).
    c.out.notes.push_back(group + ": " + std::to_string(used.size()) +
                          " samples left out (the synthetic forward layer took less than its busy "
                          "time: it did not spin)");
    return keep_base();
  }
  const double layer = med;
  std::vector<double> rel;
  for (const Sample* x : used) rel.push_back((x->forward_busy_s + layer - x->alone_s) / x->alone_s);
  FitReport r = Report(group, used, rel);
  r.params = {{"extra_layer_s", layer}};
  c.profile().beside_spin.extra_layer_s = layer;
  c.out.fits.push_back(std::move(r));
}

// The overlap list from the samples of one forward pass (--overlap-forward; the proxy's when
// both were swept), and from the samples beside the synthetic spin, when there are any, its own
// shares of the pairs with the forward pass (beside_spin's overlap) and its per-layer excess.
void FitOverlap(Calibration& c) {
  std::vector<const Sample*> all = OfKind(c.m, SampleKind::kOverlap);
  if (all.empty()) {
    if (c.base) {
      c.profile().overlap = c.base->overlap;
      if (!c.base->overlap.empty()) c.out.kept_from_base.push_back("overlap");
    }
  }
  std::vector<const Sample*> synthetic;
  for (const Sample* x : all)
    if (x->forward == "synthetic") synthetic.push_back(x);
  HardwareProfile::SpinTerms& spin = c.profile().beside_spin;
  if (synthetic.empty()) {
    if (c.base && c.base->beside_spin.has_overlap) {
      spin.has_overlap = true;
      spin.overlap = c.base->beside_spin.overlap;
      c.out.kept_from_base.push_back("beside_spin.overlap");
    }
  } else {
    std::vector<const Sample*> with_forward;
    for (const Sample* x : synthetic)
      if (x->victim == "forward" || x->beside == "forward") with_forward.push_back(x);
    spin.has_overlap = true;
    spin.overlap = FitShares(c, with_forward, "beside_spin.overlap");
  }
  FitSpinExtraLayer(c, synthetic);
  if (all.empty()) return;
  // The forward pass beside which the list's samples were timed: one per profile; the proxy's
  // when both were swept and none is asked for (the spin's shares have their own list).
  std::set<std::string> modes;
  for (const Sample* x : all) modes.insert(x->forward);
  std::string want = c.opt.overlap_forward;
  if (want.empty() && modes.size() == 2 && modes.count("model") && modes.count("synthetic"))
    want = "model";
  const std::string mode =
      PickOne(c.m, SampleKind::kOverlap, modes, want, "forward", "--overlap-forward");
  const size_t n_all = all.size();
  std::erase_if(all, [&](const Sample* x) { return x->forward != mode; });
  if (all.size() < n_all)
    c.out.notes.push_back(std::to_string(n_all - all.size()) +
                          " overlap samples beside another forward pass left out of `overlap` "
                          "(kept '" +
                          mode + "')");
  c.profile().overlap = FitShares(c, all, "overlap");
}

// ---------------------------------------------------------------- the whole profile

void RequireNoneMissing(const Calibration& c) {
  if (c.missing.empty()) return;
  std::string list;
  for (const auto& x : c.missing) list += (list.empty() ? "" : ", ") + x;
  throw InputError(c.m.file, 0, "",
                   "no samples for " + list + ", and no --base profile to take them from");
}

// The context the measurements stand under: with several files (MergeMeasurements) the first
// file's (a sweep split into runs on one machine; their names are in m.file).
bool SeveralFiles(const Measurements& m) {
  return m.context.contains("files") && m.context["files"].is_array() &&
         !m.context["files"].empty();
}
const nlohmann::json& FirstContext(const Measurements& m) {
  return SeveralFiles(m) ? m.context["files"][0]["context"] : m.context;
}

// Where the profile came from: the measurements and their context, and what the base gave.
std::string SourceOf(const Measurements& m, const HardwareProfile* base,
                     const CalibrationResult& out) {
  std::string source =
      "kvlanes calibrate on " + JsonSafeText(m.file) + "; context " + FirstContext(m).dump() +
      (SeveralFiles(m)
           ? " (of the first of " + std::to_string(m.context["files"].size()) + " files)"
           : "");
  if (!out.kept_from_base.empty()) {
    source += "; from base profile '" + base->name + "' (no samples):";
    for (const auto& x : out.kept_from_base) source += " " + x;
  }
  return source;
}

}  // namespace

CalibrationResult Calibrate(const Measurements& m, const HardwareProfile* base,
                            const CalibrateOptions& opt) {
  CalibrationResult out;
  out.profile.name = opt.name;
  out.profile.measured = true;
  Calibration c{m, base, opt, out, {}};
  // The groups in the order their fits, notes and base parameters are reported.
  const std::pair<const char*, void (*)(Calibration&)> groups[] = {
      {"host copies", FitHostCopies},
      {"backups", FitBackups},
      {"load-backs", NoteLoadBacks},
      {"load-back term", FitLoadBacks},
      {"copy submission", FitCopySubmit},
      {"device copies", FitDeviceCopies},
      {"first gathers", NoteFirstGather},
      {"gathers after a forward pass", FitGatherAfterForward},
      {"collectives", FitCollectives},
      {"forward pass", FitForward},
      {"overlap", FitOverlap}};
  for (size_t i = 0; i < std::size(groups); ++i) {
    groups[i].second(c);
    if (opt.progress) opt.progress(groups[i].first, i + 1, std::size(groups));
  }
  RequireNoneMissing(c);
  out.profile.source = SourceOf(m, base, out);
  // What the measurements ran on.
  const nlohmann::json& ctx = FirstContext(m);
  for (const char* k : kMeasuredOnKeys)
    if (ctx.is_object() && ctx.contains(k) && ctx[k].is_string())
      out.profile.measured_on[k] = ctx[k].get<std::string>();
  return out;
}

}  // namespace kvlanes

#include "sim/predict/hardware_profile.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <vector>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/name_table.h"
#include "sim/cache/decisions.h"
#include "sim/model/model_shapes.h"
#include "sim/yaml_input.h"

namespace kvlanes {

const CostBand& BandedCost::For(double bytes) const {
  for (const CostBand& b : bands)
    if (b.max_bytes <= 0 || bytes <= b.max_bytes) return b;
  return bands.back();
}

const CollectiveModel* HardwareProfile::Collectives(int ranks) const {
  for (const auto& c : collectives)
    if (c.ranks == ranks) return &c;
  return nullptr;
}

namespace {

// The largest seconds term and the smallest rate a profile may give: far beyond any real machine,
// and every product with a plan's counts (below 2^63 bytes, 2^40 tokens) stays finite.
constexpr double kMaxProfileSeconds = 3600;
// device.index_bytes_per_page: one page's entry in a gather's index list (8: a 64-bit slot).
// 4 KiB is far above any index format and keeps index copies of 2^31 pages within 2^43 bytes.
constexpr double kMaxIndexBytesPerPage = 4096;
constexpr double kMinProfileGbps = 1e-9;

struct Reader {
  std::string file;
  [[noreturn]] void Fail(const YAML::Node& at, const std::string& key,
                         const std::string& msg) const {
    // A missing key's node is invalid and has no mark (Mark() would throw): the key names it.
    const int line = at.IsDefined() ? at.Mark().line : -1;
    throw InputError(file, line >= 0 ? line + 1 : 0, key, msg);
  }
  double Num(const YAML::Node& map, const std::string& key, const std::string& path,
             bool positive) const {
    const YAML::Node v = map[key];
    if (!v) Fail(map, path + key, "missing");
    return Value(v, path + key, positive);
  }
  // One finite number >= 0 (> 0 when `positive`); `field` names it in errors.
  double Value(const YAML::Node& v, const std::string& field, bool positive) const {
    double d;
    try {
      d = v.as<double>();
    } catch (const YAML::Exception&) {
      Fail(v, field, "expected a number");
    }
    if (!std::isfinite(d)) Fail(v, field, "must be a finite number");
    if (positive ? !(d > 0) : !(d >= 0)) Fail(v, field, positive ? "must be > 0" : "must be >= 0");
    // Bounds that keep every predicted time finite (a term of 1e300 s overflowed to inf).
    if (field.ends_with("_s") && d > kMaxProfileSeconds)
      Fail(v, field, "must be at most 3600 s (kMaxProfileSeconds)");
    if (field.find("gbps") != std::string::npos && d < kMinProfileGbps)
      Fail(v, field, "must be at least 1e-9 GB/s, 1 byte/s (kMinProfileGbps)");
    return d;
  }
  void OnlyKeys(const YAML::Node& map, const std::string& path,
                std::initializer_list<const char*> keys) const {
    if (!map.IsMap()) Fail(map, path, "expected a map");
    const std::vector<std::string_view> valid(keys.begin(), keys.end());
    for (const auto& kv : map) {
      const std::string k = kv.first.Scalar();
      if (std::find(valid.begin(), valid.end(), k) == valid.end())
        Fail(kv.first, path + k, "unknown key " + ValidNamesNote(k, valid));
    }
  }

  // [{max_bytes, latency_s, gbps}, ...]; a backup term's entry_bands name the bound and the fixed
  // cost max_entry_bytes and entry_s (`max_key`, `cost_key`).
  // `layer_key`: an optional per-band CostBand::layer_s (a backup term's entry_layer_s).
  BandedCost Bands(const YAML::Node& node, const std::string& path,
                   const char* max_key = "max_bytes", const char* cost_key = "latency_s",
                   const char* layer_key = nullptr) const {
    if (!node) Fail(node, path, "missing");
    if (!node.IsSequence() || node.size() == 0) Fail(node, path, "expected a list of bands");
    BandedCost c;
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node b = node[i];
      const std::string p = path + "[" + std::to_string(i) + "].";
      if (layer_key)
        OnlyKeys(b, p, {max_key, cost_key, layer_key, "gbps"});
      else
        OnlyKeys(b, p, {max_key, cost_key, "gbps"});
      CostBand band;
      band.max_bytes = b[max_key] ? Num(b, max_key, p, true) : 0;
      band.latency_s = Num(b, cost_key, p, false);
      if (layer_key && b[layer_key]) band.layer_s = Num(b, layer_key, p, false);
      band.gbps = Num(b, "gbps", p, true);
      if (i + 1 < node.size() && band.max_bytes <= 0)
        Fail(b, p + max_key, "only the last band may be unbounded");
      if (!c.bands.empty() && band.max_bytes > 0 && band.max_bytes <= c.bands.back().max_bytes)
        Fail(b, p + max_key, "bands must grow");
      c.bands.push_back(band);
    }
    return c;
  }

  // device.gather_kernel_extra: {METHOD: {s, s_per_gb}}, each key a gather method's name and each
  // value finite and within a second either way (an extra is microseconds); absent: none.
  std::map<std::string, HardwareProfile::KernelExtra> GatherKernelExtras(
      const YAML::Node& node) const {
    std::map<std::string, HardwareProfile::KernelExtra> out;
    if (!node) return out;
    const std::string path = "device.gather_kernel_extra";
    if (!node.IsMap()) Fail(node, path, "expected a map {gather method: {s, s_per_gb}}");
    for (const auto& kv : node) {
      const std::string method = kv.first.Scalar(), at = path + "." + method;
      kGatherMethodNames.Parse(method, at, file, kv.first.Mark().line + 1);
      OnlyKeys(kv.second, at + ".", {"s", "s_per_gb"});
      HardwareProfile::KernelExtra e;
      e.s = Signed(kv.second, "s", at + ".");
      e.s_per_gb = Signed(kv.second, "s_per_gb", at + ".");
      out[method] = e;
    }
    return out;
  }
  // map[key]: a finite number within [-1, 1] (0 when absent).
  double Signed(const YAML::Node& map, const std::string& key, const std::string& path) const {
    const YAML::Node v = map[key];
    if (!v) return 0;
    double d;
    try {
      d = v.as<double>();
    } catch (const YAML::Exception&) {
      Fail(v, path + key, "expected a number");
    }
    if (!std::isfinite(d) || std::abs(d) > 1)
      Fail(v, path + key, "expected a finite number within [-1, 1]");
    return d;
  }

  // [{pages, ratio}, ...], pages strictly ascending and >= 1, ratios in (0, 10); absent: none.
  std::vector<HardwareProfile::PagesRatio> PagesRatios(const YAML::Node& node,
                                                       const std::string& path) const {
    std::vector<HardwareProfile::PagesRatio> out;
    if (!node) return out;
    if (!node.IsSequence() || node.size() == 0)
      Fail(node, path, "expected a list of {pages, ratio}");
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node e = node[i];
      const std::string p = path + "[" + std::to_string(i) + "].";
      OnlyKeys(e, p, {"pages", "ratio"});
      HardwareProfile::PagesRatio x;
      const double pages = Num(e, "pages", p, true);
      if (pages != std::floor(pages) || pages > HardwareProfile::PagesRatio::kMaxPages)
        Fail(e["pages"], p + "pages", "expected a whole page count");
      x.pages = static_cast<int64_t>(pages);
      x.ratio = Num(e, "ratio", p, true);
      if (x.ratio >= HardwareProfile::PagesRatio::kMax)
        Fail(e["ratio"], p + "ratio",
             "must be below " + std::to_string(HardwareProfile::PagesRatio::kMax));
      if (!out.empty() && x.pages <= out.back().pages)
        Fail(e["pages"], p + "pages", "pages must grow");
      out.push_back(x);
    }
    return out;
  }

  // compute.table: rows {new_tokens, prefix_tokens: [...], layer_s: [...]}, checked against the
  // linear terms already read (the ratio at each point needs them > 0 there).
  // `path` names the table; `linear(n, p)`: its linear terms on one rank.
  std::vector<HardwareProfile::ComputeRow> ComputeTable(
      const YAML::Node& node, const std::string& path,
      const std::function<double(double, double)>& linear) const {
    if (!node.IsSequence() || node.size() == 0)
      Fail(node, path, "expected a list of rows {new_tokens, prefix_tokens, layer_s}");
    std::vector<HardwareProfile::ComputeRow> rows;
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node row = node[i];
      const std::string pre = path + "[" + std::to_string(i) + "].";
      OnlyKeys(row, pre, {"new_tokens", "prefix_tokens", "layer_s"});
      HardwareProfile::ComputeRow c;
      c.new_tokens = Num(row, "new_tokens", pre, true);
      if (!rows.empty() && c.new_tokens <= rows.back().new_tokens)
        Fail(row["new_tokens"], pre + "new_tokens", "rows must be in growing new_tokens");
      c.prefix_tokens = List(row, "prefix_tokens", pre, false);
      c.layer_s = List(row, "layer_s", pre, true);
      if (c.layer_s.size() != c.prefix_tokens.size())
        Fail(row["layer_s"], pre + "layer_s",
             "expected one value per prefix_tokens entry (" +
                 std::to_string(c.prefix_tokens.size()) + "), got " +
                 std::to_string(c.layer_s.size()));
      for (size_t j = 0; j < c.prefix_tokens.size(); ++j) {
        if (j > 0 && c.prefix_tokens[j] <= c.prefix_tokens[j - 1])
          Fail(row["prefix_tokens"], pre + "prefix_tokens", "must grow");
        if (!(c.layer_s[j] <= kMaxProfileSeconds))
          Fail(row["layer_s"], pre + "layer_s", "must be at most 3600 s (kMaxProfileSeconds)");
        if (!(linear(c.new_tokens, c.prefix_tokens[j]) > 0))
          Fail(row, pre + "new_tokens",
               "the linear compute terms are 0 here, so the table's ratio is undefined");
      }
      rows.push_back(std::move(c));
    }
    return rows;
  }

  // A non-empty list of finite numbers >= 0 (> 0 when `positive`).
  std::vector<double> List(const YAML::Node& map, const std::string& key, const std::string& path,
                           bool positive) const {
    const YAML::Node v = map[key];
    if (!v) Fail(map, path + key, "missing");
    if (!v.IsSequence() || v.size() == 0) Fail(v, path + key, "expected a non-empty list");
    std::vector<double> out;
    for (size_t i = 0; i < v.size(); ++i)
      out.push_back(Value(v[i], path + key + "[" + std::to_string(i) + "]", positive));
    return out;
  }
};

}  // namespace

namespace {

// base + (token n + pair n (p + n / 2)) / ranks: the linear compute form, for the mean layer's
// terms and each kind's.
double LinearForm(double base, double token, double pair, double n, double p, double ranks) {
  return base + (token * n + pair * n * (p + n / 2)) / ranks;
}

}  // namespace

double HardwareProfile::LinearLayerS(double n, double p, double ranks) const {
  return LinearForm(layer_base_s, layer_token_s, layer_attn_pair_s, n, p, ranks);
}

double HardwareProfile::KindTerms::LinearS(double n, double p, double ranks) const {
  return LinearForm(layer_base_s, layer_token_s, layer_attn_pair_s, n, p, ranks);
}

namespace {

// The table's measured / linear ratio along one row at prefix p: between the row's points the
// measured seconds interpolated linearly in p, over the linear form there (the proxy's time is
// close to linear in the prefix between points; interpolating the ratio instead multiplies two
// lines and bulges, up to 10% at mid points 0..3072 on the H200, docs/cost_model.md); beyond
// them the end point's ratio. `linear(n, p)`: the linear form on one rank.
template <typename Linear>
double RowRatio(const Linear& linear, const HardwareProfile::ComputeRow& r, double p) {
  const auto at = [&](size_t i) { return r.layer_s[i] / linear(r.new_tokens, r.prefix_tokens[i]); };
  const std::vector<double>& x = r.prefix_tokens;
  if (p <= x.front()) return at(0);
  if (p >= x.back()) return at(x.size() - 1);
  const size_t j = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), p) - x.begin());
  const double w = (p - x[j - 1]) / (x[j] - x[j - 1]);
  return ((1 - w) * r.layer_s[j - 1] + w * r.layer_s[j]) / linear(r.new_tokens, p);
}

// The linear form `linear_s` (at n, p over the ranks) times the table's ratio at (n / ranks, p):
// between rows linear in log(new tokens) (the GEMMs' efficiency steps are about ratios of sizes);
// the first or last row's ratio beyond them.
template <typename Linear>
double TableS(const Linear& linear, const std::vector<HardwareProfile::ComputeRow>& t,
              double linear_s, double n, double p, double ranks) {
  if (t.empty() || !(n > 0)) return linear_s;
  const double q = n / ranks;
  if (q <= t.front().new_tokens) return linear_s * RowRatio(linear, t.front(), p);
  if (q >= t.back().new_tokens) return linear_s * RowRatio(linear, t.back(), p);
  size_t j = 1;
  while (t[j].new_tokens < q) ++j;
  const double w =
      std::log(q / t[j - 1].new_tokens) / std::log(t[j].new_tokens / t[j - 1].new_tokens);
  return linear_s * ((1 - w) * RowRatio(linear, t[j - 1], p) + w * RowRatio(linear, t[j], p));
}

}  // namespace

double HardwareProfile::KindTerms::TableS(double n, double p, double ranks) const {
  const auto linear = [this](double nn, double pp) { return LinearS(nn, pp, 1); };
  return kvlanes::TableS(linear, table, LinearS(n, p, ranks), n, p, ranks);
}

double HardwareProfile::ComputeLayerS(double n, double p, double ranks) const {
  // A rank's tokens beyond one chunk: chunk by chunk, each over the prefix and the chunks before.
  const double chunk = static_cast<double>(kPrefillChunkTokens) * ranks;
  if (!(n > chunk) || !(n <= chunk * 1e5)) return TableLayerS(n, p, ranks) + compute_extra_layer_s;
  double s = 0;
  for (double done = 0; done < n; done += chunk)
    s += TableLayerS(std::min(chunk, n - done), p + done, ranks);
  return s + compute_extra_layer_s;
}

double HardwareProfile::TableLayerS(double n, double p, double ranks) const {
  if (compute_composed) {
    double s = 0;
    for (const KindTerms& k : compute_kinds)
      if (k.weight > 0) s += k.weight * k.TableS(n, p, ranks);
    return s;
  }
  const auto linear = [this](double nn, double pp) { return LinearLayerS(nn, pp, 1); };
  return kvlanes::TableS(linear, compute_table, LinearLayerS(n, p, ranks), n, p, ranks);
}

double HardwareProfile::KindTerms::GemmS(double tokens) const {
  const size_t n = gemm_tokens.size();
  if (n == 0) return 0;
  if (n == 1 || tokens <= gemm_tokens.front()) return gemm_layer_s.front();
  size_t j = 1;
  while (j + 1 < n && tokens > gemm_tokens[j]) ++j;
  const double x0 = gemm_tokens[j - 1], x1 = gemm_tokens[j];
  const double y0 = gemm_layer_s[j - 1], y1 = gemm_layer_s[j];
  return std::max(0.0, y0 + (y1 - y0) * (tokens - x0) / (x1 - x0));
}

double HardwareProfile::KindTerms::SustainedRatio(double n, double p) const {
  const std::vector<double>& x = sustained_tokens;
  if (x.empty() || !(n > 0)) return 1;
  // Linear along one row in the prefix, the edge values beyond it.
  const auto row = [&](size_t i) {
    const std::vector<double>& y = sustained_prefix;
    const std::vector<double>& r = sustained_ratio[i];
    if (p <= y.front()) return r.front();
    if (p >= y.back()) return r.back();
    const size_t j = static_cast<size_t>(std::upper_bound(y.begin(), y.end(), p) - y.begin());
    const double w = (p - y[j - 1]) / (y[j] - y[j - 1]);
    return (1 - w) * r[j - 1] + w * r[j];
  };
  if (n <= x.front()) return row(0);
  if (n >= x.back()) return row(x.size() - 1);
  size_t j = 1;
  while (x[j] < n) ++j;
  const double w = std::log(n / x[j - 1]) / std::log(x[j] / x[j - 1]);
  return (1 - w) * row(j - 1) + w * row(j);
}

bool HardwareProfile::HasSustained() const {
  if (!compute_composed) return false;
  for (const KindTerms& k : compute_kinds)
    if (k.weight > 0 && !k.sustained_tokens.empty()) return true;
  return false;
}

double HardwareProfile::SustainedRatio(double n, double p, double ranks) const {
  if (!HasSustained() || !(n > 0)) return 1;
  double fresh = 0, sustained = 0;
  for (const KindTerms& k : compute_kinds) {
    if (!(k.weight > 0)) continue;
    const double s = k.weight * k.TableS(n, p, ranks);
    fresh += s;
    sustained += s * k.SustainedRatio(n / ranks, p);
  }
  return fresh > 0 ? sustained / fresh : 1;
}

double HardwareProfile::PassBatchLayerS(std::span<const int64_t> chunk_tokens, double ranks) const {
  if (chunk_tokens.size() < 2 || !compute_composed) return 0;
  for (const KindTerms& k : compute_kinds)
    if (k.weight > 0 && k.gemm_tokens.empty()) return 0;
  const double chunk = static_cast<double>(kPrefillChunkTokens);
  auto g = [&](double tokens) {
    double s = 0;
    for (double done = 0; done < tokens; done += chunk)
      for (const KindTerms& k : compute_kinds)
        if (k.weight > 0) s += k.weight * k.GemmS(std::min(chunk, tokens - done));
    return s;
  };
  double all = 0, each = 0;
  for (const int64_t n : chunk_tokens) {
    const double t = static_cast<double>(n) / ranks;
    all += t;
    each += g(t);
  }
  return g(all) - each + static_cast<double>(chunk_tokens.size() - 1) * layer_base_s;
}

std::string HardwareProfile::ComposeDepth(int64_t dense, int64_t moe) {
  const int64_t counts[2] = {dense, moe};
  for (int k = 0; k < 2; ++k)
    if (counts[k] > 0 && !compute_kinds[k].measured) return kComputeKindNames[k];
  const double layers = static_cast<double>(dense + moe);
  layer_base_s = layer_token_s = layer_attn_pair_s = 0;
  for (int k = 0; k < 2; ++k) {
    KindTerms& t = compute_kinds[k];
    t.weight = static_cast<double>(counts[k]) / layers;
    layer_base_s += t.weight * t.layer_base_s;
    layer_token_s += t.weight * t.layer_token_s;
    layer_attn_pair_s += t.weight * t.layer_attn_pair_s;
  }
  compute_table.clear();
  compute_model_layers = dense + moe;
  compute_composed = true;
  return "";
}

void HardwareProfile::ScaleCompute(double k) {
  if (k == 0) compute_table.clear();  // every term 0: no ratio to take
  layer_base_s *= k;
  layer_token_s *= k;
  layer_attn_pair_s *= k;
  for (ComputeRow& r : compute_table)
    for (double& s : r.layer_s) s *= k;
  for (KindTerms& t : compute_kinds) {
    if (k == 0) t.table.clear();
    t.layer_base_s *= k;
    t.layer_token_s *= k;
    t.layer_attn_pair_s *= k;
    for (ComputeRow& r : t.table)
      for (double& s : r.layer_s) s *= k;
    for (double& s : t.gemm_layer_s) s *= k;
  }
}

double HardwareProfile::KernelCopyS(double payload_bytes) const {
  if (device_copy_bands.bands.empty())
    return kernel_launch_s + 2 * payload_bytes / (device_copy_gbps * 1e9);
  const CostBand& b = device_copy_bands.For(payload_bytes);
  return b.latency_s + 2 * payload_bytes / (b.gbps * 1e9);
}

double HardwareProfile::CopyCost::Seconds(double copies, double entries, double bytes,
                                          double layers) const {
  double e = entry_s, bw = gbps;
  if (!entry_bands.bands.empty() && entries > 0) {
    const CostBand& b = entry_bands.For(bytes / entries);
    e = b.latency_s + layers * b.layer_s;
    bw = b.gbps;
  }
  return copies * latency_s + entries * e + bytes / (bw * 1e9);
}

namespace {

// A ratio table's value at `pages`: linear in log pages between points, the end points' beyond
// them; 1 when empty.
double PagesRatioAt(const std::vector<HardwareProfile::PagesRatio>& t, double pages) {
  if (t.empty()) return 1;
  if (pages <= static_cast<double>(t.front().pages)) return t.front().ratio;
  if (pages >= static_cast<double>(t.back().pages)) return t.back().ratio;
  size_t i = 1;
  while (static_cast<double>(t[i].pages) < pages) ++i;
  const double a = std::log(static_cast<double>(t[i - 1].pages));
  const double b = std::log(static_cast<double>(t[i].pages));
  const double f = (std::log(pages) - a) / (b - a);
  return t[i - 1].ratio + f * (t[i].ratio - t[i - 1].ratio);
}

}  // namespace

double HardwareProfile::GatherAfterForwardRatio(double pages) const {
  return PagesRatioAt(gather_after_forward, pages);
}

double HardwareProfile::GatherNextLayerRatio(double pages) const {
  return gather_next_after_forward.empty() ? GatherAfterForwardRatio(pages)
                                           : PagesRatioAt(gather_next_after_forward, pages);
}

bool HardwareProfile::SpinTerms::Empty() const {
  return backup_per_layer.gbps <= 0 && backup_tail.gbps <= 0 && gather_after_forward.empty() &&
         gather_next_after_forward.empty() && extra_layer_s <= 0 && !has_overlap;
}

void HardwareProfile::UseSyntheticForward(double k) {
  ScaleCompute(k);
  // The spin holds the SMs for its modelled time whatever the clock: no sustained slowdown.
  for (KindTerms& t : compute_kinds) {
    t.sustained_tokens.clear();
    t.sustained_prefix.clear();
    t.sustained_ratio.clear();
  }
  const SpinTerms& s = beside_spin;
  compute_extra_layer_s = s.extra_layer_s;
  gather_after_forward = s.gather_after_forward;
  gather_next_after_forward = s.gather_next_after_forward;
  // The load-back term was timed over the proxy; beside the spin the generic copy model prices it.
  load_back = {};
  if (s.backup_per_layer.gbps > 0) backup_per_layer = s.backup_per_layer;
  if (s.backup_tail.gbps > 0) backup_tail = s.backup_tail;
  if (!s.has_overlap) return;
  std::erase_if(overlap, [](const OverlapShare& o) {
    return o.victim == "forward" || o.beside == "forward";
  });
  overlap.insert(overlap.end(), s.overlap.begin(), s.overlap.end());
}

const std::vector<std::string>& OverlapKindNames() {
  static const std::vector<std::string> kinds = {"h2d", "d2h", "gather", "forward", "device_copy"};
  return kinds;
}

double HardwareProfile::OverlapShareOf(const std::string& victim, const std::string& beside) const {
  for (const auto& o : overlap)
    if (o.victim == victim && o.beside == beside) return o.share;
  return 1;
}

namespace {

std::vector<HardwareProfile::OverlapShare> ReadOverlap(const Reader& r, const YAML::Node& ov,
                                                       const std::string& path, bool forward_only);
void ReadComputeKinds(const Reader& r, const YAML::Node& node, HardwareProfile& p);
void ReadCompute(const Reader& r, const YAML::Node& root, HardwareProfile& p);
void ReadSustained(const Reader& r, const YAML::Node& g, const std::string& key,
                   HardwareProfile::KindTerms& t);

// The backup terms of `hd` (host_device, or beside_spin's), each optional; `path` names `hd`.
void ReadBackupTerms(const Reader& r, const YAML::Node& hd, const std::string& path,
                     HardwareProfile::CopyCost& per_layer, HardwareProfile::CopyCost& tail) {
  for (const auto& [key, c] :
       {std::pair<const char*, HardwareProfile::CopyCost*>{"backup_per_layer", &per_layer},
        {"backup_tail", &tail}}) {
    const YAML::Node b = hd[key];
    if (!b) continue;
    const std::string pre = path + key + ".";
    r.OnlyKeys(b, pre, {"latency_s", "gbps", "entry_s", "entry_bands"});
    c->latency_s = r.Num(b, "latency_s", pre, false);
    c->gbps = r.Num(b, "gbps", pre, true);
    if (b["entry_s"]) c->entry_s = r.Num(b, "entry_s", pre, false);
    if (const YAML::Node bands = b["entry_bands"])
      c->entry_bands =
          r.Bands(bands, pre + "entry_bands", "max_entry_bytes", "entry_s", "entry_layer_s");
  }
}

// The keys that held the terms timed beside the synthetic forward pass before the beside_spin
// section did: a profile that still holds one is refused, naming where its term lives now.
void RefuseSpinTwinKeys(const Reader& r, const YAML::Node& root) {
  struct Moved {
    const char* section;  // "" for the top level
    const char* key;
    const char* now;
  };
  // In the order a written profile holds them, so the first one in the file is named.
  static constexpr Moved kMoved[] = {
      {"host_device", "backup_per_layer_synthetic", "beside_spin.host_device.backup_per_layer"},
      {"host_device", "backup_tail_synthetic", "beside_spin.host_device.backup_tail"},
      {"device", "gather_after_forward_synthetic", "beside_spin.device.gather_after_forward"},
      {"device", "gather_next_after_forward_synthetic",
       "beside_spin.device.gather_next_after_forward"},
      {"compute", "synthetic_layer_s", "beside_spin.compute.extra_layer_s"},
      {"", "overlap_synthetic", "beside_spin.overlap"}};
  if (!root.IsMap()) return;  // the reader's key check says what is wrong
  for (const Moved& m : kMoved) {
    const std::string section = m.section;
    const YAML::Node at = section.empty() ? root : root[section];
    if (!at || !at.IsMap() || !at[m.key]) continue;
    r.Fail(at[m.key], section.empty() ? m.key : section + "." + m.key,
           std::string("no longer read: the terms timed beside the synthetic forward pass are in "
                       "the beside_spin section, this one is ") +
               m.now + " now; move it there, or refit the profile with `kvlanes calibrate`");
  }
}

// The beside_spin section: the terms as timed beside the synthetic forward pass, each optional.
void ReadBesideSpin(const Reader& r, const YAML::Node& bs, HardwareProfile& p) {
  HardwareProfile::SpinTerms& s = p.beside_spin;
  r.OnlyKeys(bs, "beside_spin.", {"host_device", "device", "compute", "overlap"});
  if (const YAML::Node hd = bs["host_device"]) {
    r.OnlyKeys(hd, "beside_spin.host_device.", {"backup_per_layer", "backup_tail"});
    ReadBackupTerms(r, hd, "beside_spin.host_device.", s.backup_per_layer, s.backup_tail);
  }
  if (const YAML::Node dv = bs["device"]) {
    r.OnlyKeys(dv, "beside_spin.device.", {"gather_after_forward", "gather_next_after_forward"});
    s.gather_after_forward =
        r.PagesRatios(dv["gather_after_forward"], "beside_spin.device.gather_after_forward");
    s.gather_next_after_forward = r.PagesRatios(dv["gather_next_after_forward"],
                                                "beside_spin.device.gather_next_after_forward");
  }
  if (const YAML::Node cp = bs["compute"]) {
    r.OnlyKeys(cp, "beside_spin.compute.", {"extra_layer_s"});
    if (cp["extra_layer_s"])
      s.extra_layer_s = r.Num(cp, "extra_layer_s", "beside_spin.compute.", false);
  }
  if (const YAML::Node ov = bs["overlap"]) {
    s.has_overlap = true;
    s.overlap = ReadOverlap(r, ov, "beside_spin.overlap", true);
  }
}

HardwareProfile ReadProfile(const YAML::Node& root, const std::string& path) {
  Reader r{path};
  if (root.IsNull()) throw InputError(path, 0, "", "the hardware profile is empty (no keys)");
  RefuseSpinTwinKeys(r, root);
  r.OnlyKeys(root, "",
             {"name", "source", "measured", "measured_on", "host_device", "device", "collectives",
              "compute", "overlap", "beside_spin"});
  HardwareProfile p;
  if (!root["name"]) r.Fail(root, "name", "missing");
  p.name = root["name"].Scalar();
  p.source = root["source"] ? root["source"].Scalar() : "";
  p.measured = root["measured"] && root["measured"].as<bool>();
  if (const YAML::Node on = root["measured_on"]) {
    if (!on.IsMap()) r.Fail(on, "measured_on", "expected a map {gpu, driver_version, ...}");
    r.OnlyKeys(on, "measured_on.",
               {"gpu", "driver_version", "cuda_runtime_version", "nccl_version"});
    for (const auto& kv : on) {
      if (!kv.second.IsScalar())
        r.Fail(kv.second, "measured_on." + kv.first.Scalar(), "expected a text value");
      p.measured_on[kv.first.Scalar()] = kv.second.Scalar();
    }
  }
  const YAML::Node hd = root["host_device"];
  if (!hd) r.Fail(root, "host_device", "missing");
  r.OnlyKeys(hd, "host_device.",
             {"h2d_gbps", "d2h_gbps", "copy_latency_s", "copy_submit_s", "copy_unit",
              "backup_per_layer", "backup_tail", "backup_pools", "load_back"});
  ReadBackupTerms(r, hd, "host_device.", p.backup_per_layer, p.backup_tail);
  if (const YAML::Node lb = hd["load_back"]) {
    r.OnlyKeys(lb, "host_device.load_back.", {"latency_s", "gbps", "entry_s"});
    p.load_back.latency_s = r.Num(lb, "latency_s", "host_device.load_back.", false);
    p.load_back.gbps = r.Num(lb, "gbps", "host_device.load_back.", true);
    if (lb["entry_s"]) p.load_back.entry_s = r.Num(lb, "entry_s", "host_device.load_back.", false);
  }
  // Per-pool backup terms are gone: on held-out plans they were no better than one fit over every
  // pool, whose entry-size bands price each pool's copy by its own bytes per entry.
  if (const YAML::Node bp = hd["backup_pools"])
    r.Fail(bp, "host_device.backup_pools",
           "no longer read: each pool's backup copy is priced by backup_per_layer / backup_tail "
           "(with entry_bands); delete the key, or refit the profile with `kvlanes calibrate`");
  if (hd["copy_unit"]) {
    const std::string u = hd["copy_unit"].as<std::string>();
    if (u != "call" && u != "chunk")
      r.Fail(hd["copy_unit"], "host_device.copy_unit", "expected call or chunk, got '" + u + "'");
    p.latency_per_chunk = u == "chunk";
  }
  p.h2d_gbps = r.Num(hd, "h2d_gbps", "host_device.", true);
  p.d2h_gbps = r.Num(hd, "d2h_gbps", "host_device.", true);
  p.copy_latency_s = r.Num(hd, "copy_latency_s", "host_device.", false);
  p.copy_submit_s = r.Num(hd, "copy_submit_s", "host_device.", false);
  const YAML::Node dv = root["device"];
  if (!dv) r.Fail(root, "device", "missing");
  r.OnlyKeys(dv, "device.",
             {"copy_gbps", "kernel_launch_s", "index_bytes_per_page", "copy_bands",
              "gather_after_forward", "gather_kernel_extra"});
  if (dv["copy_bands"]) p.device_copy_bands = r.Bands(dv["copy_bands"], "device.copy_bands");
  p.gather_after_forward = r.PagesRatios(dv["gather_after_forward"], "device.gather_after_forward");
  p.device_copy_gbps = r.Num(dv, "copy_gbps", "device.", true);
  p.kernel_launch_s = r.Num(dv, "kernel_launch_s", "device.", false);
  p.gather_kernel_extra = r.GatherKernelExtras(dv["gather_kernel_extra"]);
  if (dv["index_bytes_per_page"]) {
    p.index_bytes_per_page = r.Num(dv, "index_bytes_per_page", "device.", false);
    if (p.index_bytes_per_page > kMaxIndexBytesPerPage)
      r.Fail(dv["index_bytes_per_page"], "device.index_bytes_per_page",
             "must be at most 4096 bytes (kMaxIndexBytesPerPage)");
  }
  if (const YAML::Node cs = root["collectives"]) {
    if (!cs.IsSequence()) r.Fail(cs, "collectives", "expected a list (one entry per rank count)");
    for (size_t i = 0; i < cs.size(); ++i) {
      const YAML::Node c = cs[i];
      const std::string pre = "collectives[" + std::to_string(i) + "].";
      r.OnlyKeys(c, pre, {"ranks", "all_gather", "all_reduce", "peer_read", "peer_setup_s"});
      CollectiveModel m;
      const double ranks = r.Num(c, "ranks", pre, true);
      if (ranks > 4096 || ranks != std::floor(ranks))
        r.Fail(c["ranks"], pre + "ranks", "expected a whole number in 1..4096");
      m.ranks = static_cast<int>(ranks);
      m.all_gather = r.Bands(c["all_gather"], pre + "all_gather");
      m.all_reduce = r.Bands(c["all_reduce"], pre + "all_reduce");
      m.peer_read = r.Bands(c["peer_read"], pre + "peer_read");
      m.peer_setup_s = r.Num(c, "peer_setup_s", pre, false);
      if (p.Collectives(m.ranks)) r.Fail(c, pre + "ranks", "duplicate rank count");
      p.collectives.push_back(std::move(m));
    }
  }
  ReadCompute(r, root, p);
  p.overlap = ReadOverlap(r, root["overlap"], "overlap", false);
  if (const YAML::Node bs = root["beside_spin"]) ReadBesideSpin(r, bs, p);
  return p;
}

// The compute section: the mean layer's terms and table, the kinds'.
void ReadCompute(const Reader& r, const YAML::Node& root, HardwareProfile& p) {
  const YAML::Node cp = root["compute"];
  if (!cp) r.Fail(root, "compute", "missing");
  r.OnlyKeys(cp, "compute.",
             {"layer_base_s", "layer_token_s", "layer_attn_pair_s", "measured", "model_preset",
              "model_layers", "table", "layer_kinds", "sustained_gap_s"});
  p.compute_measured = cp["measured"] && cp["measured"].as<bool>();
  p.compute_model_preset = cp["model_preset"] ? cp["model_preset"].Scalar() : "";
  if (p.compute_measured && p.compute_model_preset.empty())
    r.Fail(cp, "compute.model_preset", "measured compute terms need the model preset they fit");
  if (const YAML::Node ml = cp["model_layers"]) {
    const double v = r.Value(ml, "compute.model_layers", true);
    if (v != std::floor(v) || v > 1e6)
      r.Fail(ml, "compute.model_layers", "expected a whole layer count from 1 to 1,000,000");
    p.compute_model_layers = static_cast<int64_t>(v);
  }
  p.layer_base_s = r.Num(cp, "layer_base_s", "compute.", false);
  p.layer_token_s = r.Num(cp, "layer_token_s", "compute.", false);
  p.layer_attn_pair_s = r.Num(cp, "layer_attn_pair_s", "compute.", false);
  if (const YAML::Node t = cp["table"])
    p.compute_table = r.ComputeTable(
        t, "compute.table", [&p](double n, double pre) { return p.LinearLayerS(n, pre, 1); });
  if (const YAML::Node k = cp["layer_kinds"]) ReadComputeKinds(r, k, p);
  if (const YAML::Node g = cp["sustained_gap_s"]) {
    p.sustained_gap_s = r.Value(g, "compute.sustained_gap_s", false);
    if (p.sustained_gap_s > 60) r.Fail(g, "compute.sustained_gap_s", "must be at most 60 s");
  }
}

// compute.layer_kinds.<kind>.sustained: {tokens: [...], prefix_tokens: [...], ratio: [[...]]},
// tokens >= 1 and prefixes >= 0 ascending, one row of ratios (each in (0, 10)) per token count
// with one per prefix.
void ReadSustained(const Reader& r, const YAML::Node& g, const std::string& key,
                   HardwareProfile::KindTerms& t) {
  if (!g.IsMap()) r.Fail(g, key, "expected {tokens: [...], prefix_tokens: [...], ratio: [[...]]}");
  r.OnlyKeys(g, key + ".", {"tokens", "prefix_tokens", "ratio"});
  for (const char* f : {"tokens", "prefix_tokens", "ratio"})
    if (!g[f] || !g[f].IsSequence() || g[f].size() == 0)
      r.Fail(g, key + "." + f, "expected a non-empty list");
  const auto axis = [&](const char* f, double least, std::vector<double>& out) {
    for (size_t i = 0; i < g[f].size(); ++i) {
      const std::string at = key + "." + f + "[" + std::to_string(i) + "]";
      const double v = r.Value(g[f][i], at, false);
      if (v < least || (!out.empty() && !(v > out.back())))
        r.Fail(g[f][i], at,
               "must be ascending, each >= " + std::to_string(static_cast<int>(least)));
      out.push_back(v);
    }
  };
  axis("tokens", 1, t.sustained_tokens);
  axis("prefix_tokens", 0, t.sustained_prefix);
  const YAML::Node rows = g["ratio"];
  if (rows.size() != t.sustained_tokens.size())
    r.Fail(rows, key + ".ratio",
           "needs one row per token count (" + std::to_string(t.sustained_tokens.size()) + ")");
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string at = key + ".ratio[" + std::to_string(i) + "]";
    if (!rows[i].IsSequence() || rows[i].size() != t.sustained_prefix.size())
      r.Fail(rows[i], at,
             "expected a list of one ratio per prefix (" +
                 std::to_string(t.sustained_prefix.size()) + ")");
    std::vector<double> row;
    for (size_t j = 0; j < rows[i].size(); ++j) {
      const std::string e = at + "[" + std::to_string(j) + "]";
      const double v = r.Value(rows[i][j], e, true);
      if (v >= HardwareProfile::PagesRatio::kMax) r.Fail(rows[i][j], e, "must be below 10");
      row.push_back(v);
    }
    t.sustained_ratio.push_back(std::move(row));
  }
}

// compute.layer_kinds.<kind>.pass_gemm: {tokens: [...], layer_s: [...]}, the same length, tokens
// ascending and positive, seconds in [0, kMaxProfileSeconds].
void ReadPassGemm(const Reader& r, const YAML::Node& g, const std::string& key,
                  HardwareProfile::KindTerms& t) {
  if (!g.IsMap()) r.Fail(g, key, "expected {tokens: [...], layer_s: [...]}");
  r.OnlyKeys(g, key + ".", {"tokens", "layer_s"});
  for (const char* f : {"tokens", "layer_s"})
    if (!g[f] || !g[f].IsSequence() || g[f].size() == 0)
      r.Fail(g, key + "." + f, "expected a non-empty list of numbers");
  if (g["tokens"].size() != g["layer_s"].size())
    r.Fail(g, key + ".layer_s", "must have as many entries as tokens");
  for (size_t i = 0; i < g["tokens"].size(); ++i) {
    const double n = r.Value(g["tokens"][i], key + ".tokens", true);
    const double s = r.Value(g["layer_s"][i], key + ".layer_s", false);
    if (!(n >= 1) || (i > 0 && !(n > t.gemm_tokens.back())))
      r.Fail(g["tokens"][i], key + ".tokens", "must be ascending token counts >= 1");
    if (!(s >= 0 && s <= kMaxProfileSeconds))
      r.Fail(g["layer_s"][i], key + ".layer_s", "must be seconds in [0, 3600]");
    t.gemm_tokens.push_back(n);
    t.gemm_layer_s.push_back(s);
  }
}

// compute.layer_kinds: {dense: {layer_base_s, layer_token_s, layer_attn_pair_s, table}, moe: ...},
// each kind optional, its table optional; only with measured compute terms (the kinds' times are
// of one preset's proxy).
void ReadComputeKinds(const Reader& r, const YAML::Node& node, HardwareProfile& p) {
  if (!node.IsMap())
    r.Fail(node, "compute.layer_kinds", "expected a map {dense: {...}, moe: {...}}");
  if (!p.compute_measured)
    r.Fail(node, "compute.layer_kinds",
           "per-kind terms are measured ones: give compute.measured and compute.model_preset");
  r.OnlyKeys(node, "compute.layer_kinds.", {"dense", "moe"});
  for (int i = 0; i < 2; ++i) {
    const std::string name = HardwareProfile::kComputeKindNames[i];
    const YAML::Node k = node[name];
    if (!k) continue;
    const std::string pre = "compute.layer_kinds." + name + ".";
    r.OnlyKeys(
        k, pre,
        {"layer_base_s", "layer_token_s", "layer_attn_pair_s", "table", "pass_gemm", "sustained"});
    HardwareProfile::KindTerms& t = p.compute_kinds[i];
    t.measured = true;
    t.layer_base_s = r.Num(k, "layer_base_s", pre, false);
    t.layer_token_s = r.Num(k, "layer_token_s", pre, false);
    t.layer_attn_pair_s = r.Num(k, "layer_attn_pair_s", pre, false);
    if (const YAML::Node tb = k["table"])
      t.table = r.ComputeTable(tb, pre + "table", [&t](double n, double pre_tokens) {
        return t.LinearS(n, pre_tokens, 1);
      });
    if (const YAML::Node g = k["pass_gemm"]) ReadPassGemm(r, g, pre + "pass_gemm", t);
    if (const YAML::Node g = k["sustained"]) ReadSustained(r, g, pre + "sustained", t);
  }
}

// An overlap list `ov` (the profile's overlap, or beside_spin's), none when absent; `path` names
// it. With `forward_only` (beside_spin's) every entry must name the forward pass as victim or
// beside.
std::vector<HardwareProfile::OverlapShare> ReadOverlap(const Reader& r, const YAML::Node& ov,
                                                       const std::string& path, bool forward_only) {
  std::vector<HardwareProfile::OverlapShare> out;
  if (ov) {
    if (!ov.IsSequence()) r.Fail(ov, path, "expected a list of {victim, beside, share}");
    for (size_t i = 0; i < ov.size(); ++i) {
      const YAML::Node o = ov[i];
      const std::string pre = path + "[" + std::to_string(i) + "].";
      r.OnlyKeys(o, pre, {"victim", "beside", "share"});
      HardwareProfile::OverlapShare s;
      for (const auto& [key, field] :
           {std::pair{"victim", &HardwareProfile::OverlapShare::victim},
            std::pair{"beside", &HardwareProfile::OverlapShare::beside}}) {
        if (!o[key]) r.Fail(o, pre + key, "missing");
        s.*field = o[key].Scalar();
        const auto& kinds = OverlapKindNames();
        if (std::find(kinds.begin(), kinds.end(), s.*field) == kinds.end())
          r.Fail(o[key], pre + key,
                 "unknown kind '" + s.*field + "' (known: h2d, d2h, gather, " +
                     "forward, device_copy)");
      }
      s.share = r.Num(o, "share", pre, true);
      if (s.share > 1) r.Fail(o["share"], pre + "share", "expected 0 < share <= 1");
      if (forward_only && s.victim != "forward" && s.beside != "forward")
        r.Fail(o, pre + "victim",
               "a share beside the spin names the forward pass (victim or beside forward), not " +
                   s.victim + " beside " + s.beside);
      for (const auto& e : out)
        if (e.victim == s.victim && e.beside == s.beside)
          r.Fail(o, pre + "victim", "duplicate pair " + s.victim + " beside " + s.beside);
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace

std::string ReadHardwareProfileText(const std::string& path) {
  return ReadInputFile(path, "hardware profile");
}

HardwareProfile LoadHardwareProfile(const std::string& path) {
  return ParseHardwareProfile(ReadHardwareProfileText(path), path);
}

ProfileFile ReadProfileFile(const std::string& path) {
  ProfileFile f{path, ReadHardwareProfileText(path), {}};
  f.profile = ParseHardwareProfile(f.yaml, path);
  return f;
}

HardwareProfile ParseHardwareProfile(const std::string& yaml, const std::string& path) {
  CheckUtf8(yaml, path, "hardware profile");
  const YAML::Node root = ParseYamlDocument(yaml, path);
  try {
    return ReadProfile(root, path);
  } catch (const YAML::Exception& e) {  // e.g. measured: maybe (not a bool)
    throw InputError(path, e.mark.line >= 0 ? e.mark.line + 1 : 0, "", "YAML error: " + e.msg);
  }
}

}  // namespace kvlanes

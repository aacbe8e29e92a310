#include "sim/compare/profile_writer.h"

#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <utility>

#include "io/input_file.h"

namespace kvlanes {
namespace {

// Shortest text that reads back as the same double.
std::string Num(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// A compute table's rows, one per line at `indent`.
std::string TableRows(const std::vector<HardwareProfile::ComputeRow>& rows,
                      const std::string& indent) {
  std::string y;
  for (const HardwareProfile::ComputeRow& row : rows) {
    y += indent + "- {new_tokens: " + Num(row.new_tokens) + ", prefix_tokens: [";
    for (size_t i = 0; i < row.prefix_tokens.size(); ++i)
      y += (i ? ", " : "") + Num(row.prefix_tokens[i]);
    y += "], layer_s: [";
    for (size_t i = 0; i < row.layer_s.size(); ++i) y += (i ? ", " : "") + Num(row.layer_s[i]);
    y += "]}\n";
  }
  return y;
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

// [{max_bytes, latency_s, gbps}, ...] (a backup term's entry_bands: other key names and the
// per-band layer cost, as read).
std::string Bands(const BandedCost& c, const char* max_key = "max_bytes",
                  const char* cost_key = "latency_s", const char* layer_key = nullptr) {
  std::string s = "[";
  for (size_t i = 0; i < c.bands.size(); ++i) {
    const CostBand& b = c.bands[i];
    s += i ? ", {" : "{";
    if (b.max_bytes > 0) s += std::string(max_key) + ": " + Num(b.max_bytes) + ", ";
    s += std::string(cost_key) + ": " + Num(b.latency_s) + ", ";
    if (layer_key && b.layer_s > 0) s += std::string(layer_key) + ": " + Num(b.layer_s) + ", ";
    s += "gbps: " + Num(b.gbps) + "}";
  }
  return s + "]";
}

// A file name as comment text: UTF-8 (JsonSafeText) on one line (control bytes such as a newline,
// which would end the comment and turn the rest of the name into YAML, as \xHH), so that the
// written profile reads back whatever the measurement files were called.
std::string CommentText(const std::string& name) {
  std::string out;
  for (const char ch : JsonSafeText(name)) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b != 0x7f) {
      out += ch;
      continue;
    }
    char esc[8];
    std::snprintf(esc, sizeof esc, "\\x%02X", b);
    out += esc;
  }
  return out;
}

// The comment block at the top: where the fit came from, every group's residuals, what the
// base profile gave and the notes.
std::string HeaderComments(const CalibrationResult& r, const std::string& measurements_file) {
  std::string y;
  y += "# Fitted by `kvlanes calibrate` from " + CommentText(measurements_file) +
       " (method: docs/calibration.md).\n";
  y += "# Residuals are |predicted - measured| / measured over each group's samples.\n";
  for (const FitReport& f : r.fits)
    y +=
        "#   " + f.group + ": " + std::to_string(f.samples) + " samples, median " +
        Pct(f.median_rel_err) + ", max " + Pct(f.max_rel_err) + " (line " +
        std::to_string(f.max_line) +
        (f.max_file.empty() || f.max_file == measurements_file ? ""
                                                               : " of " + CommentText(f.max_file)) +
        ")\n";
  if (!r.kept_from_base.empty()) {
    y += "# Kept from the base profile (no samples):";
    for (const auto& k : r.kept_from_base) y += " " + k;
    y += "\n";
  }
  for (const auto& n : r.notes) y += "# Note: " + n + "\n";
  return y;
}

// The collectives section, one entry per rank count, each curve with its fit comment.
std::string CollectivesYaml(const CalibrationResult& r) {
  const HardwareProfile& p = r.profile;
  if (p.collectives.empty()) return "collectives: []\n\n";
  std::string y = "collectives:\n";
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
  return y + "\n";
}

// A backup term's flow map: {latency_s, gbps[, entry_s][, entry_bands: [...]]}.
std::string CopyCostYaml(const HardwareProfile::CopyCost& c) {
  return "{latency_s: " + Num(c.latency_s) + ", gbps: " + Num(c.gbps) +
         (c.entry_s > 0 ? ", entry_s: " + Num(c.entry_s) : std::string()) +
         (c.entry_bands.bands.empty() ? std::string()
                                      : ", entry_bands: " + Bands(c.entry_bands, "max_entry_bytes",
                                                                  "entry_s", "entry_layer_s")) +
         "}";
}

// A kind's sustained grid as flow lists, under its fit comment.
std::string SustainedYaml(const CalibrationResult& r, const std::string& group,
                          const HardwareProfile::KindTerms& t) {
  const auto list = [](const std::vector<double>& v) {
    std::string x = "[";
    for (size_t i = 0; i < v.size(); ++i) x += (i ? ", " : "") + Num(v[i]);
    return x + "]";
  };
  std::string rows;
  for (size_t i = 0; i < t.sustained_ratio.size(); ++i)
    rows += (i ? ", " : "") + list(t.sustained_ratio[i]);
  return FitComment(r, group + ".sustained", "      ") +
         "      # the layer back to back (power-capped clock) over its table's time, per new "
         "tokens (rows)\n"
         "      # x prefix tokens; a serving pass started within sustained_gap_s of the last is "
         "priced so\n"
         "      sustained: {tokens: " +
         list(t.sustained_tokens) + ", prefix_tokens: " + list(t.sustained_prefix) + ", ratio: [" +
         rows + "]}\n";
}

// The compute section: the mean layer's terms, its table or each layer kind's terms and table.
std::string ComputeYaml(const CalibrationResult& r) {
  const HardwareProfile& p = r.profile;
  std::string y;
  y += "compute:\n" + FitComment(r, "compute", "  ");
  if (p.compute_measured)
    y += "  measured: true\n  model_preset: \"" + p.compute_model_preset + "\"\n";
  if (p.compute_measured && p.compute_model_layers > 0)
    y += "  model_layers: " + std::to_string(p.compute_model_layers) + "\n";
  y += "  layer_base_s: " + Num(p.layer_base_s) + "\n";
  y += "  layer_token_s: " + Num(p.layer_token_s) + "\n";
  y += "  layer_attn_pair_s: " + Num(p.layer_attn_pair_s) + "\n";
  bool sustained = false;
  for (const HardwareProfile::KindTerms& t : p.compute_kinds)
    sustained = sustained || !t.sustained_tokens.empty();
  if (sustained) y += "  sustained_gap_s: " + Num(p.sustained_gap_s) + "\n";
  if (!p.compute_table.empty()) {
    y += FitComment(r, "compute.table", "  ");
    y += "  # per-layer seconds measured at (new_tokens, prefix_tokens); between and beyond the\n"
         "  # points the linear terms above times the interpolated measured / linear ratio\n";
    y += "  table:\n" + TableRows(p.compute_table, "    ");
  }
  if (p.HasComputeKinds()) {
    y += "  # each layer kind alone (same form as the terms above); a replay of any depth of this\n"
         "  # preset weighs them by the kinds' shares of its layers\n";
    y += "  layer_kinds:\n";
    for (int k = 0; k < 2; ++k) {
      const HardwareProfile::KindTerms& t = p.compute_kinds[k];
      if (!t.measured) continue;
      const std::string name = HardwareProfile::kComputeKindNames[k];
      const std::string group = "compute.layer_kinds." + name;
      y += "    " + name + ":\n" + FitComment(r, group, "      ");
      y += "      layer_base_s: " + Num(t.layer_base_s) + "\n";
      y += "      layer_token_s: " + Num(t.layer_token_s) + "\n";
      y += "      layer_attn_pair_s: " + Num(t.layer_attn_pair_s) + "\n";
      if (!t.table.empty())
        y += FitComment(r, group + ".table", "      ") + "      table:\n" +
             TableRows(t.table, "        ");
      if (!t.gemm_tokens.empty()) {
        y += FitComment(r, group + ".passes", "      ");
        y += "      # the GEMMs alone at a pass's tokens: a pass of several chunks is priced as "
             "their\n"
             "      # times less their GEMMs plus the GEMMs over all its tokens\n";
        std::string tokens, secs;
        for (size_t i = 0; i < t.gemm_tokens.size(); ++i) {
          tokens += (i ? ", " : "") + Num(t.gemm_tokens[i]);
          secs += (i ? ", " : "") + Num(t.gemm_layer_s[i]);
        }
        y += "      pass_gemm: {tokens: [" + tokens + "], layer_s: [" + secs + "]}\n";
      }
      if (!t.sustained_tokens.empty()) y += SustainedYaml(r, group, t);
    }
  }
  return y;
}

// A gather ratio table as a flow list: [{pages, ratio}, ...].
std::string PagesRatios(const std::vector<HardwareProfile::PagesRatio>& t) {
  std::string y = "[";
  for (size_t i = 0; i < t.size(); ++i)
    y += std::string(i ? ", " : "") + "{pages: " + std::to_string(t[i].pages) +
         ", ratio: " + Num(t[i].ratio) + "}";
  return y + "]";
}

// One overlap entry per line at `indent`, each under its fit comment (`group` + victim/beside).
std::string OverlapList(const CalibrationResult& r,
                        const std::vector<HardwareProfile::OverlapShare>& list,
                        const std::string& group, const std::string& indent) {
  std::string y;
  for (const auto& o : list)
    y += FitComment(r, group + "." + o.victim + "/" + o.beside, indent) + indent +
         "- {victim: " + o.victim + ", beside: " + o.beside + ", share: " + Num(o.share) + "}\n";
  return y;
}

// The beside_spin section (nothing when no term is given): each part under the key it has in the
// main layout, each term under its fit comment (the group "beside_spin." + the main group).
std::string BesideSpinYaml(const CalibrationResult& r) {
  const HardwareProfile::SpinTerms& s = r.profile.beside_spin;
  if (s.Empty()) return "";
  std::string y =
      "\n# The terms as timed beside the synthetic forward pass (the spin kernel, `--forward\n"
      "# synthetic`) instead of the model's: used only when a run of the spin is priced.\n"
      "beside_spin:\n";
  if (s.backup_per_layer.gbps > 0 || s.backup_tail.gbps > 0) {
    y += "  host_device:\n";
    for (const auto& [key, c] : {std::pair{"backup_per_layer", &s.backup_per_layer},
                                 std::pair{"backup_tail", &s.backup_tail}})
      if (c->gbps > 0)
        y += FitComment(r, std::string("beside_spin.") + key, "    ") + "    " + key + ": " +
             CopyCostYaml(*c) + "\n";
  }
  if (!s.gather_after_forward.empty() || !s.gather_next_after_forward.empty()) {
    y += "  device:\n";
    for (const auto& [key, t] :
         {std::pair{"gather_after_forward", &s.gather_after_forward},
          std::pair{"gather_next_after_forward", &s.gather_next_after_forward}})
      if (!t->empty())
        y += FitComment(r, std::string("beside_spin.") + key, "    ") + "    " + key + ": " +
             PagesRatios(*t) + "\n";
  }
  if (s.extra_layer_s > 0)
    y += "  compute:\n" + FitComment(r, "beside_spin.compute.extra_layer_s", "    ") +
         "    extra_layer_s: " + Num(s.extra_layer_s) + "\n";
  if (s.has_overlap)
    y += std::string("  overlap:") + (s.overlap.empty() ? " []\n" : "\n") +
         OverlapList(r, s.overlap, "beside_spin.overlap", "    ");
  return y;
}

}  // namespace

std::string ProfileToYaml(const CalibrationResult& r, const std::string& measurements_file) {
  const HardwareProfile& p = r.profile;
  // The paths and the name go into the YAML, which must stay UTF-8 to be read back.
  std::string y = HeaderComments(r, measurements_file);
  y += "name: " + nlohmann::json(JsonSafeText(p.name)).dump() + "\n";
  y += std::string("measured: ") + (p.measured ? "true" : "false") + "\n";
  y += "source: " + nlohmann::json(p.source).dump() + "\n";
  if (!p.measured_on.empty()) {
    y += "measured_on:\n";
    for (const char* k : kMeasuredOnKeys)
      if (p.measured_on.count(k))
        y += std::string("  ") + k + ": " +
             nlohmann::json(JsonSafeText(p.measured_on.at(k))).dump() + "\n";
  }
  y += "\n";
  y += "host_device:\n" + FitComment(r, "host_device", "  ");
  y += "  h2d_gbps: " + Num(p.h2d_gbps) + "\n";
  y += "  d2h_gbps: " + Num(p.d2h_gbps) + "\n";
  y += "  copy_latency_s: " + Num(p.copy_latency_s) + "\n";
  if (p.latency_per_chunk) y += "  copy_unit: chunk\n";
  for (const auto& [group, c] :
       {std::pair{"backup_per_layer", p.backup_per_layer}, std::pair{"backup_tail", p.backup_tail}})
    if (c.gbps > 0) y += FitComment(r, group, "  ") + "  " + group + ": " + CopyCostYaml(c) + "\n";
  if (p.load_back.gbps > 0)
    y += FitComment(r, "load_back", "  ") + "  load_back: " + CopyCostYaml(p.load_back) + "\n";
  y += FitComment(r, "copy_submit", "  ");
  y += "  copy_submit_s: " + Num(p.copy_submit_s) + "\n\n";
  y += "device:\n" + FitComment(r, "device", "  ");
  y += "  copy_gbps: " + Num(p.device_copy_gbps) + "\n";
  y += "  kernel_launch_s: " + Num(p.kernel_launch_s) + "\n";
  y += "  index_bytes_per_page: " + Num(p.index_bytes_per_page) + "\n";
  if (!p.device_copy_bands.bands.empty()) y += "  copy_bands: " + Bands(p.device_copy_bands) + "\n";
  if (!p.gather_kernel_extra.empty()) {
    y += FitComment(r, "gather_kernel_extra", "  ") + "  gather_kernel_extra: {";
    const char* sep = "";
    for (const auto& [method, e] : p.gather_kernel_extra) {
      y += sep + method + ": {s: " + Num(e.s) + ", s_per_gb: " + Num(e.s_per_gb) + "}";
      sep = ", ";
    }
    y += "}\n";
  }
  if (!p.gather_after_forward.empty())
    y += FitComment(r, "gather_after_forward", "  ") +
         "  gather_after_forward: " + PagesRatios(p.gather_after_forward) + "\n";
  y += "\n";
  y += CollectivesYaml(r);
  y += ComputeYaml(r);
  if (!p.overlap.empty()) y += "\noverlap:\n" + OverlapList(r, p.overlap, "overlap", "  ");
  // Fitted pairs the list leaves out (two copies of one direction): their share as a comment.
  for (const FitReport& f : r.fits)
    if (f.group.rfind("overlap.", 0) == 0 && !f.note.empty() && !f.params.empty())
      y += "# " + f.group + " share " + Num(f.params[0].second) + " (" + f.note + ")\n";
  return y + BesideSpinYaml(r);
}

}  // namespace kvlanes

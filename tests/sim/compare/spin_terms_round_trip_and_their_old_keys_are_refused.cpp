// The terms timed beside the synthetic forward pass (the spin) live in one beside_spin section:
// the writer writes it and the reader reads it back term for term, and a profile that still holds
// one of the keys these terms had before is refused, naming the file, the key and the term's place
// now.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "io/input_error.h"
#include "sim/compare/calibrate.h"
#include "sim/compare/profile_writer.h"
#include "tests/sim/compare/synthetic.h"

namespace kvlanes::test {
namespace {

void CheckSame(const HardwareProfile::CopyCost& a, const HardwareProfile::CopyCost& b) {
  CHECK(a.latency_s == b.latency_s);
  CHECK(a.gbps == b.gbps);
  CHECK(a.entry_s == b.entry_s);
  REQUIRE(a.entry_bands.bands.size() == b.entry_bands.bands.size());
  for (size_t i = 0; i < a.entry_bands.bands.size(); ++i) {
    CHECK(a.entry_bands.bands[i].max_bytes == b.entry_bands.bands[i].max_bytes);
    CHECK(a.entry_bands.bands[i].latency_s == b.entry_bands.bands[i].latency_s);
    CHECK(a.entry_bands.bands[i].gbps == b.entry_bands.bands[i].gbps);
  }
}

void CheckSame(const std::vector<HardwareProfile::PagesRatio>& a,
               const std::vector<HardwareProfile::PagesRatio>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].pages == b[i].pages);
    CHECK(a[i].ratio == b[i].ratio);
  }
}

// Every term beside the spin given, with values that need all 17 digits to read back.
HardwareProfile::SpinTerms EveryTerm() {
  HardwareProfile::SpinTerms s;
  s.backup_per_layer = {3.4348757763788593e-06, 56.012382093475146, 1.1127057756936565e-06, {}};
  s.backup_tail.latency_s = 3.2974655456387086e-06;
  s.backup_tail.entry_bands.bands = {{16384, 0, 24.57390865162018},
                                     {131072, 1.5121208264091198e-08, 39.895117914975444},
                                     {0, 3.253057559045082e-07, 55.22550883134298}};
  s.backup_tail.entry_s = s.backup_tail.entry_bands.bands.back().latency_s;
  s.backup_tail.gbps = s.backup_tail.entry_bands.bands.back().gbps;
  s.gather_after_forward = {{16, 0.9991201099716964}, {2048, 0.9870736993035784}};
  s.gather_next_after_forward = {{16, 0.9715961966401339}, {64, 0.9534545213068846}};
  s.extra_layer_s = 3.008002042770381e-06;
  s.overlap = {{"h2d", "forward", 1}, {"forward", "gather", 0.9595393926737811}};
  s.has_overlap = true;
  return s;
}

HardwareProfile WrittenAndRead(const HardwareProfile& p, std::string* yaml = nullptr) {
  CalibrationResult r;
  r.profile = p;
  const std::string text = ProfileToYaml(r, "spin.json");
  if (yaml) *yaml = text;
  return ParseHardwareProfile(text, "spin.yaml");
}

}  // namespace

TEST_CASE("the beside_spin section is written and read back term for term") {
  HardwareProfile p = TruthProfile();
  p.backup_tail = {9e-6, 48, 0, {}};
  p.overlap = {{"gather", "forward", 0.4}};
  p.beside_spin = EveryTerm();
  std::string yaml;
  const HardwareProfile back = WrittenAndRead(p, &yaml);
  CHECK(yaml.find("\nbeside_spin:\n  host_device:\n") != std::string::npos);
  const HardwareProfile::SpinTerms& s = back.beside_spin;
  CheckSame(s.backup_per_layer, p.beside_spin.backup_per_layer);
  CheckSame(s.backup_tail, p.beside_spin.backup_tail);
  CheckSame(s.gather_after_forward, p.beside_spin.gather_after_forward);
  CheckSame(s.gather_next_after_forward, p.beside_spin.gather_next_after_forward);
  CHECK(s.extra_layer_s == p.beside_spin.extra_layer_s);
  REQUIRE(s.has_overlap);
  REQUIRE(s.overlap.size() == 2);
  CHECK(s.overlap[1].victim == "forward");
  CHECK(s.overlap[1].beside == "gather");
  CHECK(s.overlap[1].share == p.beside_spin.overlap[1].share);
  // The main terms stay the main ones; a run of the spin is priced with the section's.
  CheckSame(back.backup_tail, p.backup_tail);
  CHECK(back.gather_after_forward.empty());
  HardwareProfile spin = back;
  spin.UseSyntheticForward(0.5);
  CheckSame(spin.backup_tail, s.backup_tail);
  CHECK(spin.OverlapShareOf("gather", "forward") == 1);
  CHECK(spin.OverlapShareOf("forward", "gather") == s.overlap[1].share);
  CHECK(spin.GatherNextLayerRatio(16) == s.gather_next_after_forward[0].ratio);

  // An empty overlap list alone is a section of its own (every share beside the spin 1), unlike
  // none; without any term no section is written.
  p.beside_spin = {};
  p.beside_spin.has_overlap = true;
  const HardwareProfile empty_list = WrittenAndRead(p, &yaml);
  CHECK(yaml.find("\nbeside_spin:\n  overlap: []\n") != std::string::npos);
  CHECK(empty_list.beside_spin.has_overlap);
  CHECK(empty_list.beside_spin.overlap.empty());
  p.beside_spin = {};
  const HardwareProfile none = WrittenAndRead(p, &yaml);
  CHECK(yaml.find("beside_spin") == std::string::npos);
  CHECK(none.beside_spin.Empty());
}

TEST_CASE("a profile holding an old twin key of a spin term is refused, naming its new place") {
  struct Old {
    const char* section;  // where the key was ("" for the top level)
    const char* entry;    // the key and a value
    const char* key;      // as the error names it
    const char* now;      // where the term lives now
  };
  const Old olds[] = {
      {"host_device", "backup_per_layer_synthetic: {latency_s: 1e-6, gbps: 50}",
       "host_device.backup_per_layer_synthetic", "beside_spin.host_device.backup_per_layer"},
      {"host_device", "backup_tail_synthetic: {latency_s: 1e-6, gbps: 50}",
       "host_device.backup_tail_synthetic", "beside_spin.host_device.backup_tail"},
      {"device", "gather_after_forward_synthetic: [{pages: 16, ratio: 1}]",
       "device.gather_after_forward_synthetic", "beside_spin.device.gather_after_forward"},
      {"device", "gather_next_after_forward_synthetic: [{pages: 16, ratio: 1}]",
       "device.gather_next_after_forward_synthetic",
       "beside_spin.device.gather_next_after_forward"},
      {"compute", "synthetic_layer_s: 3e-6", "compute.synthetic_layer_s",
       "beside_spin.compute.extra_layer_s"},
      {"", "overlap_synthetic: []", "overlap_synthetic", "beside_spin.overlap"}};
  for (const Old& o : olds) {
    CAPTURE(o.key);
    const std::string section = o.section;
    const auto extra = [&](const std::string& in) {
      return section == in ? ", " + std::string(o.entry) : std::string();
    };
    const std::string yaml =
        "name: x\nhost_device: {h2d_gbps: 1, d2h_gbps: 1, copy_latency_s: 0, copy_submit_s: 0" +
        extra("host_device") + "}\ndevice: {copy_gbps: 1, kernel_launch_s: 0" + extra("device") +
        "}\ncompute: {layer_base_s: 0, layer_token_s: 0, layer_attn_pair_s: 0" + extra("compute") +
        "}\n" + (section.empty() ? std::string(o.entry) + "\n" : "");
    std::string error;
    try {
      ParseHardwareProfile(yaml, "old.yaml");
    } catch (const InputError& e) {
      error = e.what();
    }
    CHECK(error.find("old.yaml:") == 0);
    CHECK(error.find(std::string(o.key) + ": no longer read") != std::string::npos);
    CHECK(error.find(std::string("this one is ") + o.now + " now;") != std::string::npos);
  }
}

}  // namespace kvlanes::test

// Synthetic sweeps for the calibration tests: measurement files generated from a known ("truth")
// profile with the formulas of docs/calibration.md and seeded multiplicative noise.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/predict/hardware_profile.h"
#include "sim/predict/plan.h"
#include "tests/sim/hand_made_profile.h"

namespace kvlanes::test {

// Uniform multiplicative noise in [1 - amp, 1 + amp], seeded (mt19937_64 is specified exactly,
// so the sequence is the same on every platform).
class Noise {
 public:
  Noise(uint64_t seed, double amp) : gen_(seed), amp_(amp) {}
  double operator()() {
    const double u = static_cast<double>(gen_() >> 11) / static_cast<double>(uint64_t{1} << 53);
    return 1 + amp_ * (2 * u - 1);
  }

 private:
  std::mt19937_64 gen_;
  double amp_;
};

// The first of `notes` (a calibration's) that starts with `prefix`; empty when none does.
inline std::string NoteStartingWith(const std::vector<std::string>& notes,
                                    const std::string& prefix) {
  for (const std::string& n : notes)
    if (n.rfind(prefix, 0) == 0) return n;
  return "";
}

// The truth: every parameter non-zero, an all-gather whose curve bends at 1 MiB (two bands).
// cp_size 1, 64-token pages, `layers` layers, DeepSeek-V3.2's two pools (kv 656, indexer 132 B
// a token and layer).
inline ReplayConfig TwoPoolConfig(int64_t layers) {
  ReplayConfig cfg;
  cfg.cache.cp_size = 1;
  cfg.cache.page_tokens = 64;
  cfg.model.layers = layers;
  cfg.model.pools = {PoolSpec{"kv", 656}, PoolSpec{"indexer", 132}};
  return cfg;
}

// A lane copy of 8 pages in 3 runs of slots adjacent on both sides.
inline LaneCopy ThreeRunCopy() {
  LaneCopy c;
  c.pages = {{{10, 100}}, {{11, 101}}, {{12, 102}}, {{20, 200}},
             {{21, 201}}, {{30, 300}}, {{31, 301}}, {{32, 302}}};
  return c;
}

inline HardwareProfile TruthProfile() {
  return HandMadeProfile({.name = "truth",
                          .h2d_gbps = 50,
                          .d2h_gbps = 45,
                          .copy_latency_s = 2e-6,
                          .copy_submit_s = 3e-6,
                          .device_copy_gbps = 3000,
                          .kernel_launch_s = 4e-6,
                          .ranks = 4,
                          .all_gather = {{1 << 20, 10e-6, 50}, {0, 30e-6, 300}},
                          .all_reduce = {{0, 15e-6, 200}},
                          .peer_read = {{0, 5e-6, 350}},
                          .peer_setup_s = 2e-6,
                          .layer_base_s = 2e-5,
                          .layer_token_s = 3e-6,
                          .layer_attn_pair_s = 2e-10});
}

inline double BandTime(const BandedCost& c, double bytes, double lat_factor, double byte_factor) {
  const CostBand& b = c.For(bytes);
  return lat_factor * b.latency_s + byte_factor * bytes / (b.gbps * 1e9);
}

// A sweep over `truth` (which must have one collective model) as a measurement document.
inline nlohmann::json SyntheticSweep(const HardwareProfile& t, uint64_t seed, double noise_amp) {
  Noise noise(seed, noise_amp);
  nlohmann::json samples = nlohmann::json::array();
  auto add = [&](nlohmann::json s, double seconds) {
    s["median_s"] = seconds * noise();
    s["repeats"] = 20;
    samples.push_back(std::move(s));
  };
  for (const char* dir : {"h2d", "d2h"})
    for (double chunk = 4096; chunk <= 4 << 20; chunk *= 4)
      for (int copies : {1, 16, 256}) {
        const double bytes = chunk * copies;
        const double gbps = std::string(dir) == "h2d" ? t.h2d_gbps : t.d2h_gbps;
        add({{"kind", "host_copy"},
             {"direction", dir},
             {"bytes", bytes},
             {"chunk_bytes", chunk},
             {"copies", copies},
             {"layout", "page_first"},
             {"mode", "memcpy"}},
            copies * t.copy_latency_s + bytes / (gbps * 1e9));
      }
  for (int copies : {1, 8, 64, 512})
    add({{"kind", "copy_submit"}, {"copies", copies}, {"layout", "page_first"}, {"mode", "memcpy"}},
        copies * t.copy_submit_s);
  for (double bytes = 65536; bytes <= 1 << 30; bytes *= 8)
    for (const char* op : {"copy", "fill"})
      for (int kernels : {1, 2}) {
        const double f = std::string(op) == "copy" ? 2 : 1;
        add({{"kind", "device_copy"},
             {"bytes", bytes},
             {"op", op},
             {"kernels", kernels},
             {"variant", "pack"}},
            kernels * t.kernel_launch_s + f * bytes / (t.device_copy_gbps * 1e9));
      }
  const CollectiveModel& c = t.collectives.at(0);
  const double n = c.ranks;
  for (double y = 16384; y <= 256 << 20; y *= 2) {
    add({{"kind", "all_gather"}, {"ranks", c.ranks}, {"bytes", y}},
        BandTime(c.all_gather, y, n - 1, (n - 1) / n));
    add({{"kind", "all_reduce"}, {"ranks", c.ranks}, {"bytes", y}},
        BandTime(c.all_reduce, y, 2 * (n - 1), 2 * (n - 1) / n));
    for (int peers = 1; peers < c.ranks; ++peers)
      add({{"kind", "peer_read"}, {"ranks", c.ranks}, {"peers", peers}, {"bytes", y}},
          peers * c.peer_setup_s + BandTime(c.peer_read, y, 1, 1));
  }
  for (int64_t nt : {64, 256, 1024, 4096})
    for (int64_t pre : {0, 4096, 32768}) {
      const double nd = static_cast<double>(nt), pd = static_cast<double>(pre);
      const double layer =
          t.layer_base_s + t.layer_token_s * nd + t.layer_attn_pair_s * nd * (pd + nd / 2);
      add({{"kind", "forward"},
           {"new_tokens", nt},
           {"prefix_tokens", pre},
           {"ranks", 1},
           {"layers", 4}},
          4 * layer);
    }
  return {{"kvlanes_measurements", 1},
          {"context",
           {{"generator", "tests/sim/compare/synthetic.h"}, {"seed", seed}, {"noise", noise_amp}}},
          {"samples", samples}};
}

// The sweep's sample of one grid point of DeepSeek-V3.2 at 4 layers (3 dense, 1 MoE; moe_s <= 0:
// dense only) as `bench sweep --forward model` writes it: the mean layer's time and each kind's.
inline nlohmann::json ProxyForwardSample(double n, double p, double dense_s, double moe_s) {
  nlohmann::json kinds = {{{"layer_kind", "dense"}, {"layers", 3}, {"median_s", dense_s}}};
  if (moe_s > 0) kinds.push_back({{"layer_kind", "moe"}, {"layers", 1}, {"median_s", moe_s}});
  return {{"kind", "forward"},
          {"forward", "model"},
          {"preset", "deepseek-v3.2"},
          {"new_tokens", int64_t(n)},
          {"prefix_tokens", int64_t(p)},
          {"ranks", 1},
          {"layers", 1},
          {"median_s", moe_s > 0 ? (3 * dense_s + moe_s) / 4 : dense_s},
          {"repeats", 3},
          {"per_kind", std::move(kinds)}};
}

}  // namespace kvlanes::test

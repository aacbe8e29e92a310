// The small hand-computable profile and config the cost-model tests price with (every term
// non-zero, one collective model for `ranks`).
#pragma once

#include <utility>
#include <vector>

#include "sim/config.h"
#include "sim/predict/hardware_profile.h"
#include "tests/sim/hand_made_profile.h"

namespace kvlanes::test {

inline HardwareProfile HandProfile(int ranks, std::vector<CostBand> all_gather) {
  HardwareProfile p = HandMadeProfile({.name = "test",
                                       .h2d_gbps = 50,
                                       .d2h_gbps = 40,
                                       .copy_latency_s = 2e-6,
                                       .copy_submit_s = 3e-6,
                                       .device_copy_gbps = 4000,
                                       .kernel_launch_s = 5e-6,
                                       .ranks = ranks,
                                       .all_gather = std::move(all_gather),
                                       .all_reduce = {{0, 15e-6, 200}},
                                       .peer_read = {{0, 4e-6, 400}},
                                       .peer_setup_s = 1e-6,
                                       .layer_base_s = 1e-5,
                                       .layer_token_s = 2e-6,
                                       .layer_attn_pair_s = 1e-10});
  p.index_bytes_per_page = 8;
  return p;
}

// `ranks` ranks, 64-token pages, 10 layers, pools of 600 and 100 bytes per token and layer.
inline ReplayConfig HandConfig(int ranks) {
  ReplayConfig cfg;
  cfg.cache.cp_size = ranks;
  cfg.cache.page_tokens = 64;
  cfg.model.layers = 10;
  cfg.model.pools = {{"kv", 600}, {"idx", 100}};
  return cfg;
}

}  // namespace kvlanes::test

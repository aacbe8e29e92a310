// The small hand-computable profile and config the cost-model tests price with (every term
// non-zero, one collective model for `ranks`).
#pragma once

#include <vector>

#include "sim/config.h"
#include "sim/predict/hardware_profile.h"

namespace kvlanes::test {

inline HardwareProfile HandProfile(int ranks, std::vector<CostBand> all_gather) {
  HardwareProfile p;
  p.name = "test";
  p.h2d_gbps = 50;
  p.d2h_gbps = 40;
  p.copy_latency_s = 2e-6;
  p.copy_submit_s = 3e-6;
  p.device_copy_gbps = 4000;
  p.kernel_launch_s = 5e-6;
  p.index_bytes_per_page = 8;
  CollectiveModel c;
  c.ranks = ranks;
  c.all_gather.bands = std::move(all_gather);
  c.all_reduce.bands = {{0, 15e-6, 200}};
  c.peer_read.bands = {{0, 4e-6, 400}};
  c.peer_setup_s = 1e-6;
  p.collectives = {c};
  p.layer_base_s = 1e-5;
  p.layer_token_s = 2e-6;
  p.layer_attn_pair_s = 1e-10;
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

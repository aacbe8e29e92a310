// A hand-made hardware profile for tests that price or fit with known terms: one collective
// model, the terms given by name, everything else at its default.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/predict/hardware_profile.h"

namespace kvlanes::test {

// The terms, in HardwareProfile's units; the bands are those of the one collective model.
struct HandMadeTerms {
  std::string name;
  double h2d_gbps = 0, d2h_gbps = 0, copy_latency_s = 0, copy_submit_s = 0;
  double device_copy_gbps = 0, kernel_launch_s = 0;
  int ranks = 0;
  std::vector<CostBand> all_gather, all_reduce, peer_read;
  double peer_setup_s = 0;
  double layer_base_s = 0, layer_token_s = 0, layer_attn_pair_s = 0;
};

inline HardwareProfile HandMadeProfile(HandMadeTerms t) {
  HardwareProfile p;
  p.name = std::move(t.name);
  p.h2d_gbps = t.h2d_gbps;
  p.d2h_gbps = t.d2h_gbps;
  p.copy_latency_s = t.copy_latency_s;
  p.copy_submit_s = t.copy_submit_s;
  p.device_copy_gbps = t.device_copy_gbps;
  p.kernel_launch_s = t.kernel_launch_s;
  CollectiveModel c;
  c.ranks = t.ranks;
  c.all_gather.bands = std::move(t.all_gather);
  c.all_reduce.bands = std::move(t.all_reduce);
  c.peer_read.bands = std::move(t.peer_read);
  c.peer_setup_s = t.peer_setup_s;
  p.collectives = {c};
  p.layer_base_s = t.layer_base_s;
  p.layer_token_s = t.layer_token_s;
  p.layer_attn_pair_s = t.layer_attn_pair_s;
  return p;
}

}  // namespace kvlanes::test

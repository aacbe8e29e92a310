// Each cost formula of docs/cost_model.md checked against a hand computation on a small profile.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <functional>

#include "io/input_error.h"
#include "sim/predict/cost_model.h"
#include "tests/approx.h"
#include "tests/sim/predict/hand_profile.h"

namespace kvlanes {
namespace {

HardwareProfile Profile() { return test::HandProfile(4, {{1e6, 10e-6, 100}, {0, 20e-6, 300}}); }

ReplayConfig Config(int ranks) { return test::HandConfig(ranks); }

constexpr double kB = 64.0 * 700;  // bytes of one page-layer, both pools

}  // namespace

TEST_CASE("device, tier and collective primitives follow latency plus bytes over bandwidth") {
  const CostModel m(Profile(), Config(4));
  CHECK(m.page_layer_bytes() == kvlanes::test::RelApprox(kB));
  CHECK(m.DeviceCopyS(1e9) == kvlanes::test::RelApprox(2.0 / 4000));
  CHECK(m.TierCopyS(1e6, true) == kvlanes::test::RelApprox(2e-6 + 1e6 / 50e9));
  CHECK(m.TierCopyS(1e6, false) == kvlanes::test::RelApprox(2e-6 + 1e6 / 40e9));
  // Ring all-gather: (N-1) latency + (N-1)/N bytes / busbw, in the band of the total size.
  CHECK(m.AllGatherS(5e5) == kvlanes::test::RelApprox(3 * 10e-6 + 0.75 * 5e5 / 100e9));
  CHECK(m.AllGatherS(8e6) == kvlanes::test::RelApprox(3 * 20e-6 + 0.75 * 8e6 / 300e9));
  CHECK(m.AllReduceS(8e6) == kvlanes::test::RelApprox(6 * 15e-6 + 1.5 * 8e6 / 200e9));
  CHECK(m.PeerReadS(1e6, 3) == kvlanes::test::RelApprox(3 * 1e-6 + 4e-6 + 1e6 / 400e9));
  // Compute: base + (token * n + pair * n * (p + n/2)) / N.
  CHECK(m.ComputeLayerS(1000, 3000) ==
        kvlanes::test::RelApprox(1e-5 + (2e-6 * 1000 + 1e-10 * 1000 * 3500) / 4));
}

TEST_CASE("gather methods cost what docs/cost_model.md says, with padding to the largest shard") {
  const CostModel m(Profile(), Config(4));
  const std::vector<int64_t> shards = {40, 10, 10, 20};  // unbalanced: largest shard 40
  const double P = 80, S = 40, L = 5e-6;
  const GatherCost dense = m.Gather(GatherMethod::kDense, shards, 80);
  // One fused kernel: P pages written, the S owned ones read.
  CHECK(dense.per_layer_s ==
        kvlanes::test::RelApprox(L + (P + S) * kB / 4000e9 + m.AllReduceS(P * kB)));
  CHECK(dense.once_s == 0);
  const GatherCost packed = m.Gather(GatherMethod::kPacked, shards, 80);
  CHECK(packed.per_layer_s ==
        kvlanes::test::RelApprox(2 * L + 2 * S * kB / 4000e9 + m.AllGatherS(4 * S * kB) +
                                 2 * P * kB / 4000e9));
  CHECK(packed.once_s ==
        kvlanes::test::RelApprox(3e-6 + 2e-6 + P * 8 / 50e9));  // index to the device
  CHECK(packed.total_s == kvlanes::test::RelApprox(packed.once_s + 10 * packed.per_layer_s));
  const GatherCost zig = m.Gather(GatherMethod::kZigzag, shards, 80);
  CHECK(zig.per_layer_s == kvlanes::test::RelApprox(packed.per_layer_s));
  CHECK(zig.once_s == 0);  // closed formula: no index
  const GatherCost p2p = m.Gather(GatherMethod::kP2p, shards, 80);
  // The slowest rank owns the fewest pages and reads the most (70 pages) from its 3 peers.
  // Its own pages' copy and the peer reads run at once: the slower sets the time.
  CHECK(p2p.per_layer_s ==
        kvlanes::test::RelApprox(std::max(L + 2 * 10 * kB / 4000e9, m.PeerReadS(70 * kB, 3))));
  CHECK(p2p.bytes_per_rank == kvlanes::test::RelApprox(70 * kB));
  CHECK(m.Gather(GatherMethod::kPacked, shards, 0).total_s == 0);
}

TEST_CASE("a one-kernel method's extra adds to its kernel, after a forward layer too") {
  HardwareProfile hp = Profile();
  hp.gather_kernel_extra = {{"dense", {-2e-6, 1e-4}}, {"p2p", {3e-6, 0}}};
  hp.gather_after_forward = {{1, 1.5}};
  const std::vector<int64_t> one = {80};
  const CostModel plain(Profile(), Config(1)), with(hp, Config(1));
  const double P = 80, L = 5e-6, kernel = L + 2 * P * kB / 4000e9;
  // At cp_size 1 both one-kernel methods copy the prefix once: k (kernel + s + s_per_gb x GB),
  // k = 1.5.
  CHECK(plain.Gather(GatherMethod::kDense, one, 80).per_layer_s == test::RelApprox(kernel));
  CHECK(with.Gather(GatherMethod::kDense, one, 80).per_layer_s ==
        test::RelApprox(1.5 * (kernel - 2e-6 + 1e-4 * P * kB * 1e-9)));
  CHECK(with.Gather(GatherMethod::kP2p, one, 80).per_layer_s ==
        test::RelApprox(1.5 * (kernel + 3e-6)));
  // Packed (the bands' own two kernels) takes none.
  HardwareProfile ratio_only = Profile();
  ratio_only.gather_after_forward = hp.gather_after_forward;
  CHECK(with.Gather(GatherMethod::kPacked, one, 80).per_layer_s ==
        test::RelApprox(
            CostModel(ratio_only, Config(1)).Gather(GatherMethod::kPacked, one, 80).per_layer_s));
  // Never below 0: an extra beyond the kernel's time prices the layer at 0.
  hp.gather_kernel_extra = {{"dense", {-1, 0}}};
  CHECK(CostModel(hp, Config(1)).Gather(GatherMethod::kDense, one, 80).per_layer_s == 0);
  // The YAML key names gather methods; another name is refused with the valid ones.
  const std::string base =
      "name: x\nhost_device: {h2d_gbps: 1, d2h_gbps: 1, copy_latency_s: 0, copy_submit_s: 0}\n"
      "compute: {layer_base_s: 0, layer_token_s: 0, layer_attn_pair_s: 0}\n"
      "device:\n  copy_gbps: 1\n  kernel_launch_s: 0\n";
  const HardwareProfile read = ParseHardwareProfile(
      base + "  gather_kernel_extra: {p2p: {s: 2.5e-06}, dense: {s: -1e-06, s_per_gb: 2e-05}}\n",
      "p.yaml");
  CHECK(read.gather_kernel_extra.at("dense").s == -1e-6);
  CHECK(read.gather_kernel_extra.at("dense").s_per_gb == 2e-5);
  CHECK(read.gather_kernel_extra.at("p2p").s_per_gb == 0);
  auto error = [&](const std::string& extra) {
    try {
      ParseHardwareProfile(base + extra, "p.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error("  gather_kernel_extra: {p2q: {s: 1e-06}}\n")
            .starts_with("p.yaml:7: device.gather_kernel_extra.p2q: unknown gather method"));
  CHECK(error("  gather_kernel_extra: {p2p: {s: 2}}\n") ==
        "p.yaml:7: device.gather_kernel_extra.p2p.s: expected a finite number within [-1, 1]");
  CHECK(error("  gather_kernel_extra: {p2p: {t: 0}}\n")
            .starts_with("p.yaml:7: device.gather_kernel_extra.p2p.t: unknown key"));
}

TEST_CASE("owner_major costs the packed gather without its unpack pass and its index") {
  const CostModel m(Profile(), Config(4));
  // An owner-major prefix of 10 pages on 4 ranks: shards 3, 3, 2, 2, padded to 3.
  const std::vector<int64_t> shards = {3, 3, 2, 2};
  const double P = 10, S = 3, L = 5e-6;
  const GatherCost om = m.Gather(GatherMethod::kOwnerMajor, shards, 10);
  CHECK(om.per_layer_s ==
        kvlanes::test::RelApprox(L + 2 * S * kB / 4000e9 + m.AllGatherS(4 * S * kB)));
  CHECK(om.once_s == 0);
  CHECK(om.total_s == kvlanes::test::RelApprox(10 * om.per_layer_s));
  CHECK(om.bytes_per_rank == kvlanes::test::RelApprox(3.0 / 4 * 4 * S * kB));
  const GatherCost packed = m.Gather(GatherMethod::kPacked, shards, 10);
  CHECK(packed.per_layer_s - om.per_layer_s == kvlanes::test::RelApprox(L + 2 * P * kB / 4000e9));
  CHECK(m.Gather(GatherMethod::kOwnerMajor, shards, 0).total_s == 0);
}

TEST_CASE("backup schedules: per-layer overlaps the forward pass, tail follows it") {
  const CostModel m(Profile(), Config(4));
  const std::vector<int64_t> pages = {100, 50, 0, 0};
  std::vector<double> ends;
  for (int l = 1; l <= 10; ++l) ends.push_back(l * 1e-3);  // 1 ms per layer
  const double layer_copy = 2 * 2e-6 + 100 * kB / 40e9;    // slowest lane, two pools
  const BackupCost per = m.Backup(BackupSchedule::kPerLayer, pages, ends);
  CHECK(per.forward_s == kvlanes::test::RelApprox(10e-3));
  CHECK(per.submit_s == kvlanes::test::RelApprox(10 * 2 * 3e-6));
  CHECK(per.total_s == kvlanes::test::RelApprox(10e-3 + layer_copy + per.submit_s));
  const BackupCost tail = m.Backup(BackupSchedule::kTail, pages, ends);
  CHECK(tail.submit_s == kvlanes::test::RelApprox(2 * 3e-6));
  CHECK(tail.total_s ==
        kvlanes::test::RelApprox(10e-3 + 2 * 3e-6 + 2 * 2e-6 + 100 * kB * 10 / 40e9));
  CHECK(tail.beyond_forward_s == kvlanes::test::RelApprox(tail.total_s - 10e-3));
  const BackupCost none = m.Backup(BackupSchedule::kTail, std::vector<int64_t>{0, 0, 0, 0}, ends);
  CHECK(none.total_s == kvlanes::test::RelApprox(10e-3));
}

TEST_CASE("load-back overlaps compute one layer ahead") {
  const CostModel m(Profile(), Config(4));
  const std::vector<int64_t> load = {200, 0, 0, 0}, none = {0, 0, 0, 0}, shards = {0, 0, 0, 0};
  ForwardShape f;
  f.new_tokens = 64;
  f.load_back_pages = load;
  f.backup_pages = none;
  f.shard_pages = shards;
  const double load_layer = 2 * 2e-6 + 200 * kB / 50e9 + 2 * 3e-6;
  const double comp = m.ComputeLayerS(64, 0);
  const RequestCost c = m.Evaluate(f);
  // Loading is slower than computing here, so every layer waits for its load.
  REQUIRE(load_layer > comp);
  CHECK(c.forward_s == kvlanes::test::RelApprox(10 * load_layer + comp));
  CHECK(c.load_back_exposed_s == kvlanes::test::RelApprox(c.forward_s - 10 * comp));
  CHECK(c.service_s == kvlanes::test::RelApprox(c.forward_s));
}

TEST_CASE("a profile without the CP group's collectives is an error naming the file") {
  HardwareProfile p = Profile();
  std::string err;
  try {
    CostModel m(p, Config(8), "prof.yaml");
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err.find("prof.yaml: collectives: profile 'test' has no collective model for 8 ranks") !=
        std::string::npos);
}

TEST_CASE("hardware profile YAML errors name file, line and key") {
  const std::string path = "/tmp/kvlanes_bad_profile.yaml";
  std::ofstream(path)
      << "name: x\nhost_device:\n  h2d_gbps: -1\n  d2h_gbps: 1\n  copy_latency_s: 0\n"
         "  copy_submit_s: 0\ndevice: {copy_gbps: 1, kernel_launch_s: 0}\n"
         "compute: {layer_base_s: 0, layer_token_s: 0, layer_attn_pair_s: 0}\n";
  std::string err;
  try {
    LoadHardwareProfile(path);
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err == path + ":3: host_device.h2d_gbps: must be > 0");
  const HardwareProfile shipped =
      LoadHardwareProfile(KVLANES_SOURCE_DIR "/config/profiles/8xh200_nccl_model.yaml");
  CHECK(shipped.Collectives(8) != nullptr);
  CHECK_FALSE(shipped.measured);
}

TEST_CASE(
    "overlap shares parse, default to 1 and refuse unknown kinds, duplicates and shares > 1") {
  const std::string base =
      "name: x\nhost_device: {h2d_gbps: 1, d2h_gbps: 1, copy_latency_s: 0, copy_submit_s: 0}\n"
      "device: {copy_gbps: 1, kernel_launch_s: 0}\n"
      "compute: {layer_base_s: 0, layer_token_s: 0, layer_attn_pair_s: 0}\n";
  const HardwareProfile p = ParseHardwareProfile(
      base + "overlap:\n  - {victim: d2h, beside: gather, share: 0.75}\n", "p.yaml");
  CHECK(p.OverlapShareOf("d2h", "gather") == 0.75);
  CHECK(p.OverlapShareOf("gather", "d2h") == 1);
  auto error = [&](const std::string& overlap) {
    try {
      ParseHardwareProfile(base + overlap, "p.yaml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error("overlap:\n  - {victim: d2h, beside: gpu, share: 0.5}\n") ==
        "p.yaml:6: overlap[0].beside: unknown kind 'gpu' (known: h2d, d2h, gather, forward, "
        "device_copy)");
  CHECK(error("overlap:\n  - {victim: d2h, beside: h2d, share: 1.5}\n") ==
        "p.yaml:6: overlap[0].share: expected 0 < share <= 1");
  CHECK(error("overlap:\n  - {victim: d2h, beside: h2d, share: 0.5}\n"
              "  - {victim: d2h, beside: h2d, share: 0.6}\n")
            .find("overlap[1].victim: duplicate pair d2h beside h2d") != std::string::npos);
}

}  // namespace kvlanes

namespace kvlanes {

TEST_CASE("partial_merge moves queries and partial outputs, not the prefix") {
  // Default shape: MLA, 128 heads, key 512 + 64 elements, value 512: a token's bf16 queries are
  // 2 x 128 x 576 B, its partials 128 x (2 x 512 + 4) B.
  const CostModel m(Profile(), Config(4));
  const double q = 100 * 2.0 * 128 * 576, o = 100 * 128.0 * (2 * 512 + 4);
  const GatherCost g = m.PartialMerge(100);
  // Both exchanges fall in the > 1 MB all-gather band (20 us, 300 GB/s).
  CHECK(g.per_layer_s ==
        kvlanes::test::RelApprox((3 * 20e-6 + 0.75 * q / 300e9) + (3 * 20e-6 + 0.75 * o / 300e9) +
                                 m.KernelCopyS(o)));
  CHECK(g.total_s == kvlanes::test::RelApprox(10 * g.per_layer_s));
  CHECK(g.bytes_per_rank == kvlanes::test::RelApprox(0.75 * (q + o)));
  CHECK(m.PartialMerge(0).total_s == 0);
  const CostModel one(Profile(), Config(1));
  CHECK(one.PartialMerge(100).total_s == 0);
}

}  // namespace kvlanes

// `kvlanes bench sweep` on the host backend: every sample kind the sweep promises is there with
// the sizes of the geometry, the file reads back as a measurement file, and calibrate fits it.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "exec/bench/sweep.h"
#include "exec/exec_error.h"
#include "io/input_error.h"
#include "sim/compare/calibrate.h"
#include "sim/compare/measurements.h"
#include "sim/predict/hardware_profile.h"
#include "tests/approx.h"

namespace kvlanes::exec {
namespace {

SweepOptions SmallSweep() {
  SweepOptions o;
  o.backend = "host";
  o.page_tokens = 16;
  o.layers = 3;
  o.max_pages = 32;
  o.max_all_layer_pages = 8;
  o.repeats = 3;
  o.warmup = 1;
  o.submit_batches = {1, 4, 16};
  o.pairs = false;  // the pairs: sweep_times_pairs_and_the_forward_grid.cpp
  // The host's copies of a few KiB are timed in microseconds; a 64 MiB cache eviction before each
  // run makes them cold misses whose time hardly grows with bytes (an ASan build's device_copy fit
  // then found no bandwidth term). The eviction has its own test.
  o.cache_evict = false;
  return o;
}

TEST_CASE("sweep: page counts are powers of two then the maximum") {
  CHECK(SweepPageCounts(1) == std::vector<int64_t>{1});
  CHECK(SweepPageCounts(8) == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(SweepPageCounts(12) == std::vector<int64_t>{1, 2, 4, 8, 12});
}

TEST_CASE("sweep: the host backend measures every kind over the grid") {
  const SweepOptions o = SmallSweep();
  const nlohmann::ordered_json doc = RunSweep(o);
  REQUIRE(doc["kvlanes_measurements"] == 1);
  CHECK(doc["context"]["backend"] == "host");
  CHECK(doc["context"]["geometry"]["layers"] == 3);

  std::set<int64_t> h2d_one_layer_kv, all_layer_bytes, gather_bytes, submit_copies;
  std::map<std::string, std::set<int64_t>> one_kernel_bytes;  // by variant
  std::set<std::tuple<bool, std::string, int64_t, int64_t>> backups;
  const int64_t kv_chunk = 16 * 656, page_layer = 16 * (656 + 132);
  for (const auto& s : doc["samples"]) {
    CHECK(s["median_s"].get<double>() > 0);
    CHECK(s["min_s"].get<double>() <= s["median_s"].get<double>());
    CHECK(s["repeats"] == 3);
    const std::string kind = s["kind"];
    if (kind == "host_copy") {
      CHECK(s["mode"] == "memcpy");
      CHECK(s["layout"] == "layer_first");
      if (s["direction"] == "h2d" && s["chunk_bytes"] == kv_chunk) {
        const int64_t b = s["bytes"];
        CHECK(b % kv_chunk == 0);
        if (b / kv_chunk <= 32 &&
            s["label"].get<std::string>().find("1 layer(s)") != std::string::npos)
          h2d_one_layer_kv.insert(b / kv_chunk);
        if (s["label"].get<std::string>().find("3 layer(s)") != std::string::npos)
          all_layer_bytes.insert(b / kv_chunk / 3);
      }
    } else if (kind == "device_copy") {
      // A packed gather layer (pack and unpack) and, at one rank, a p2p and a dense layer (one
      // kernel each).
      const std::string variant = s["variant"];
      const bool one = variant != "gather_packed";
      CHECK(s["kernels"] == (one ? 1 : 2));
      CHECK(s["op"] == "copy");
      (one ? one_kernel_bytes[variant] : gather_bytes)
          .insert(s["bytes"].get<int64_t>() / ((one ? 1 : 2) * page_layer));
    } else if (kind == "copy_submit") {
      submit_copies.insert(s["copies"].get<int64_t>());
    } else if (kind == "backup") {
      // One sample per schedule, page count and pool; per-layer: one copy per layer.
      const bool tail = s["schedule"] == "tail";
      CHECK(s["copies"] == (tail ? 1 : 3));
      CHECK(s["layers"] == 3);
      const int64_t chunk = s["pool"] == "kv" ? kv_chunk : 16 * 132;
      CHECK(s["bytes"].get<int64_t>() == s["pages"].get<int64_t>() * 3 * chunk);
      backups.insert({tail, s["pool"].get<std::string>(), s["pages"].get<int64_t>(),
                      s["gather_pages"].get<int64_t>()});
    } else {
      FAIL("unexpected kind " << kind);
    }
  }
  for (const bool tail : {false, true})
    for (const char* pool : {"kv", "indexer"})
      for (const int64_t n : {1, 2, 4, 8, 16, 32})
        for (const int64_t g : {0, 32}) {  // gathers of 0, 1024 and 2048 pages, capped at max pages
          CAPTURE(tail);
          CAPTURE(pool);
          CAPTURE(n);
          CAPTURE(g);
          CHECK(backups.count({tail, pool, n, g}) == 1);
        }
  CHECK(backups.size() == 2 * 2 * 6 * 2);
  CHECK(h2d_one_layer_kv == std::set<int64_t>{1, 2, 4, 8, 16, 32});
  CHECK(all_layer_bytes == std::set<int64_t>{1, 2, 4, 8});
  CHECK(gather_bytes == std::set<int64_t>{1, 2, 4, 8, 16, 32});
  CHECK(one_kernel_bytes.size() == 2);
  CHECK(one_kernel_bytes["gather_p2p"] == gather_bytes);
  CHECK(one_kernel_bytes["gather_dense"] == gather_bytes);
  CHECK(submit_copies == std::set<int64_t>{1, 4, 16});

  // The file format is the one calibrate reads, and every group it has can be fitted.
  const Measurements m = ParseMeasurements(doc.dump(1), "sweep.json");
  CHECK(m.samples.size() == doc["samples"].size());
  HardwareProfile base;
  base.layer_base_s = 1e-5;
  base.layer_token_s = 1e-6;
  base.layer_attn_pair_s = 1e-10;
  CHECK_THROWS_WITH(Calibrate(m, &base, CalibrateOptions{}),
                    doctest::Contains("choose one with --backup-gather-pages"));
  CalibrateOptions opt;
  opt.backup_gather_pages = 32;
  const CalibrationResult r = Calibrate(m, &base, opt);
  CHECK(r.profile.h2d_gbps > 0);
  CHECK(r.profile.d2h_gbps > 0);
  CHECK(r.profile.device_copy_gbps > 0);
  CHECK(r.profile.copy_submit_s > 0);
  CHECK(r.profile.backup_per_layer.gbps > 0);
  CHECK(r.profile.backup_tail.gbps > 0);
  CHECK(r.profile.layer_token_s ==
        kvlanes::test::RelApprox(1e-6));  // no forward samples: from the base
}

// Backups at two slot run lengths: every sample grid once per length, with its run_pages, and
// calibrate fits a cost per entry beside the bandwidth for both schedules.
TEST_CASE("sweep: progress numbers every step of the steps planned, with the time left") {
  SweepOptions o = SmallSweep();
  o.pairs = true;
  o.pair_pages = {4, 8};
  o.pair_forward_s = {1e-5};
  std::vector<std::string> lines;
  o.progress = [&](const std::string& s) { lines.push_back(s); };
  const nlohmann::ordered_json doc = RunSweep(o);
  // host copies: 2 directions x 2 pools x (one layer, all layers); submit; gather; backups: 2
  // gather sizes (0 and 1024, 2048 capped at 32) x 2 schedules; pairs: 2 page counts, then 2
  // beside the forward layer, 1 first_gather.
  const size_t planned = 8 + 1 + 1 + 4 + 2 + 2 + 1;
  REQUIRE(lines.size() == planned);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string head = "[" + std::to_string(i + 1) + "/" + std::to_string(planned) + "] ";
    CHECK(lines[i].rfind(head, 0) == 0);
    if (i > 0) CHECK(lines[i].find(" s spent, about ") != std::string::npos);
  }
  CHECK(lines.front().find("host_copy h2d pool kv, one layer") != std::string::npos);
  CHECK(lines.back().find("first_gather") != std::string::npos);
  CHECK(doc["samples"].size() > planned);  // the steps ran: a count pass alone records nothing
}

TEST_CASE("sweep: backups over several slot run lengths, and calibrate fits their entry cost") {
  SweepOptions o = SmallSweep();
  o.copies = false;
  o.backup_runs = {1, 8};
  o.backup_gather_pages = {0};
  const nlohmann::ordered_json doc = RunSweep(o);
  std::set<std::tuple<bool, std::string, int64_t, int64_t>> seen;  // tail, pool, pages, run
  for (const auto& s : doc["samples"]) {
    REQUIRE(s["kind"] == "backup");
    const int64_t n = s["pages"], run = s["run_pages"];
    CHECK(s["label"].get<std::string>().find("(" + std::to_string((n + run - 1) / run) +
                                             " runs)") != std::string::npos);
    seen.insert({s["schedule"] == "tail", s["pool"].get<std::string>(), n, run});
  }
  CHECK(seen.size() == 2 * 2 * 6 * 2);
  for (const int64_t run : {1, 8}) CHECK(seen.count({true, "kv", 32, run}) == 1);
  HardwareProfile base;
  base.layer_base_s = 1e-5;
  base.layer_token_s = 1e-6;
  base.layer_attn_pair_s = 1e-10;
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "backups.json"), &base, CalibrateOptions{});
  std::set<std::string> params;
  for (const auto& f : r.fits)
    for (const auto& p : f.params) params.insert(p.first);
  CHECK(params.count("backup_tail.entry_s") == 1);
  CHECK(params.count("backup_per_layer.entry_s") == 1);
  CHECK(r.profile.backup_tail.gbps > 0);
}

TEST_CASE("sweep: load-backs over a forward pass, per layer and all layers; calibrate notes them") {
  SweepOptions o = SmallSweep();
  o.copies = o.backups = false;
  o.load_backs = true;
  o.backup_runs = {1, 4};
  const nlohmann::ordered_json doc = RunSweep(o);
  std::set<std::tuple<bool, std::string, int64_t, int64_t>> seen;  // all layers, pool, pages, run
  for (const auto& s : doc["samples"]) {
    REQUIRE(s["kind"] == "load_back");
    const bool all = s["schedule"] == "all-layers";
    const int64_t n = s["pages"];
    const int64_t chunk = s["pool"] == "kv" ? 16 * 656 : 16 * 132;
    CHECK(s["bytes"] == n * 3 * chunk);
    CHECK(s["copies"] == (all ? 1 : 3));
    CHECK(s["median_s"].get<double>() > 0);
    seen.insert({all, s["pool"].get<std::string>(), n, s["run_pages"].get<int64_t>()});
  }
  CHECK(seen.size() == 2 * 2 * 6 * 2);
  HardwareProfile base;
  base.h2d_gbps = base.d2h_gbps = 50;
  base.copy_latency_s = 5e-6;
  base.layer_base_s = 1e-5;
  base.layer_token_s = 1e-6;
  base.layer_attn_pair_s = 1e-10;
  const CalibrationResult r =
      Calibrate(ParseMeasurements(doc.dump(1), "load_backs.json"), &base, CalibrateOptions{});
  for (const std::string group :
       {"per-layer kv", "per-layer indexer", "all-layers kv", "all-layers indexer"}) {
    CAPTURE(group);
    CHECK(std::ranges::count_if(r.notes, [&](const std::string& n) {
            return n.starts_with("load_back " + group + ": 12 samples");
          }) == 1);
  }
  // Descriptive: the profile's host copy terms are the base's.
  CHECK(r.profile.h2d_gbps == base.h2d_gbps);
}

TEST_CASE(
    "sweep: several ranks measure the collectives and peer reads, and calibrate keeps the base's "
    "copies") {
  SweepOptions o = SmallSweep();
  o.ranks = 3;
  const nlohmann::ordered_json doc = RunSweep(o);
  CHECK(doc["context"]["ranks"] == 3);
  const int64_t page_layer = 16 * (656 + 132);
  std::set<int64_t> gather_pages, reduce_pages, read_pages;
  for (const auto& s : doc["samples"]) {
    CHECK(s["ranks"] == 3);
    CHECK(s["median_s"].get<double>() > 0);
    const std::string kind = s["kind"];
    const int64_t b = s["bytes"];
    REQUIRE(b % page_layer == 0);
    if (kind == "all_gather") {
      CHECK(b / page_layer % 3 == 0);  // three equal (padded) shards
      gather_pages.insert(b / page_layer / 3);
    } else if (kind == "all_reduce") {
      reduce_pages.insert(b / page_layer);
    } else if (kind == "peer_read") {
      CHECK(s["peers"] == std::min<int64_t>(2, b / page_layer));
      read_pages.insert(b / page_layer);
    } else {
      FAIL("unexpected kind " << kind);
    }
  }
  CHECK(gather_pages == std::set<int64_t>{1, 2, 3, 6, 11});  // ceil(n / 3) for n = 1..32
  CHECK(reduce_pages == std::set<int64_t>{1, 2, 4, 8, 16, 32});
  CHECK(read_pages == std::set<int64_t>{1, 2, 4, 8, 16, 32});

  // Calibrated on top of a one-rank profile: the collectives are fitted, the copies (bands and
  // latency unit included) come from the base. The fit gets synthetic times (latency + bytes /
  // bandwidth, per kind) in place of the host's: real CPU timings of a 3-rank exchange on a
  // loaded 2-core machine need not grow with the bytes, and this checks the format, not figures.
  nlohmann::ordered_json synthetic = doc;
  for (auto& s : synthetic["samples"]) {
    const std::string kind = s["kind"];
    const double gbps = kind == "all_gather" ? 20 : kind == "all_reduce" ? 10 : 40;
    const double t = 8e-6 + s["bytes"].get<double>() / (gbps * 1e9);
    s["median_s"] = t;
    s["min_s"] = t;
    s["max_s"] = t;
  }
  HardwareProfile base;
  base.layer_base_s = 1e-5;
  base.layer_token_s = 1e-6;
  base.layer_attn_pair_s = 1e-10;
  base.h2d_gbps = 40;
  base.d2h_gbps = 41;
  base.copy_latency_s = 2e-6;
  base.latency_per_chunk = true;
  base.copy_submit_s = 3e-6;
  base.kernel_launch_s = 4e-6;
  base.device_copy_gbps = 3000;
  base.device_copy_bands.bands = {CostBand{1e6, 5e-6, 200}, CostBand{0, 4e-6, 3000}};
  const CalibrationResult r =
      Calibrate(ParseMeasurements(synthetic.dump(1), "sweep3.json"), &base, CalibrateOptions{});
  const CollectiveModel* c = r.profile.Collectives(3);
  REQUIRE(c != nullptr);
  CHECK(!c->all_gather.bands.empty());
  CHECK(!c->all_reduce.bands.empty());
  CHECK(!c->peer_read.bands.empty());
  // Exact synthetic times: the fitted all-gather and all-reduce bands give them back through the
  // ring formulas of 3 ranks (docs/cost_model.md: all-gather (n-1) latency + (n-1)/n bytes /
  // busbw, all-reduce twice both).
  for (const auto& s : synthetic["samples"]) {
    const std::string kind = s["kind"];
    if (kind == "peer_read") continue;  // split between the bands and peer_setup_s
    const double bytes = s["bytes"].get<double>();
    const CostBand& band = (kind == "all_gather" ? c->all_gather : c->all_reduce).For(bytes);
    const double steps = kind == "all_gather" ? 2 : 4;  // (n - 1), 2 (n - 1)
    CHECK(steps * band.latency_s + steps / 3 * bytes / (band.gbps * 1e9) ==
          kvlanes::test::RelApprox(s["median_s"].get<double>()).epsilon(0.01));
  }
  CHECK(r.profile.h2d_gbps == 40);
  CHECK(r.profile.latency_per_chunk);
  REQUIRE(r.profile.device_copy_bands.bands.size() == 2);
  CHECK(r.profile.device_copy_bands.bands[0].gbps == 200);
}

TEST_CASE("sweep: bad options are refused before any allocation") {
  SweepOptions o = SmallSweep();
  o.repeats = 0;
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("repeats >= 1"));
  o = SmallSweep();
  o.backend = "tpu";
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("unknown backend 'tpu'"));
  o = SmallSweep();
  o.ranks = 2;
  o.devices = {0};
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("1 devices for 2 ranks"));
  o.devices.clear();
  o.backend = "tpu";
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("unknown backend 'tpu'"));
}

// The parent reads rank 0's result back bounded: /dev/zero in its place (which never ends) is
// refused at its first byte, a missing or non-JSON result is an ExecError naming the file.
TEST_CASE("sweep: rank 0's result is read back bounded and refused when not JSON") {
  CHECK_THROWS_WITH_AS(ReadSweepRankResult("/dev/zero"),
                       doctest::Contains("/dev/zero:1: control byte 0x00 is not allowed in a "
                                         "sweep result"),
                       InputError);
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string missing = dir + "/kvlanes-sweep-no-such-result.json";
  CHECK_THROWS_WITH_AS(ReadSweepRankResult(missing),
                       doctest::Contains(("rank 0 wrote no result (" + missing + ")").c_str()),
                       ExecError);
  const std::string cut = dir + "/kvlanes-sweep-cut-result-" + std::to_string(getpid()) + ".json";
  std::ofstream(cut) << "{\"kvlanes_measurements\": 1, \"samples\": [";
  CHECK_THROWS_WITH_AS(ReadSweepRankResult(cut),
                       doctest::Contains(("rank 0's result " + cut + " is not JSON").c_str()),
                       ExecError);
  std::ofstream(cut) << "{\"kvlanes_measurements\": 1}";
  CHECK(ReadSweepRankResult(cut)["kvlanes_measurements"] == 1);
  std::remove(cut.c_str());
}

}  // namespace
}  // namespace kvlanes::exec

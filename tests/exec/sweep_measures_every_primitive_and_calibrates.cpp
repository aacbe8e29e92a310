// `kvlanes bench sweep` on the host backend: every sample kind the sweep promises is there with
// the sizes of the geometry, the file reads back as a measurement file, and calibrate fits it.
#include <doctest/doctest.h>

#include <set>

#include "exec/sweep.h"
#include "sim/calibration.h"
#include "sim/hardware_profile.h"

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
        if (b / kv_chunk <= 32 && s["label"].get<std::string>().find("1 layer(s)") != std::string::npos)
          h2d_one_layer_kv.insert(b / kv_chunk);
        if (s["label"].get<std::string>().find("3 layer(s)") != std::string::npos) all_layer_bytes.insert(b / kv_chunk / 3);
      }
    } else if (kind == "device_copy") {
      CHECK(s["kernels"] == 2);
      CHECK(s["op"] == "copy");
      gather_bytes.insert(s["bytes"].get<int64_t>() / (2 * page_layer));
    } else if (kind == "copy_submit") {
      submit_copies.insert(s["copies"].get<int64_t>());
    } else {
      FAIL("unexpected kind " << kind);
    }
  }
  CHECK(h2d_one_layer_kv == std::set<int64_t>{1, 2, 4, 8, 16, 32});
  CHECK(all_layer_bytes == std::set<int64_t>{1, 2, 4, 8});
  CHECK(gather_bytes == std::set<int64_t>{1, 2, 4, 8, 16, 32});
  CHECK(submit_copies == std::set<int64_t>{1, 4, 16});

  // The file format is the one calibrate reads, and every group it has can be fitted.
  const Measurements m = ParseMeasurements(doc.dump(1), "sweep.json");
  CHECK(m.samples.size() == doc["samples"].size());
  HardwareProfile base;
  base.layer_base_s = 1e-5;
  base.layer_token_s = 1e-6;
  base.layer_attn_pair_s = 1e-10;
  const CalibrationResult r = Calibrate(m, &base, CalibrateOptions{});
  CHECK(r.profile.h2d_gbps > 0);
  CHECK(r.profile.d2h_gbps > 0);
  CHECK(r.profile.device_copy_gbps > 0);
  CHECK(r.profile.copy_submit_s > 0);
  CHECK(r.profile.layer_token_s == doctest::Approx(1e-6));  // no forward samples: from the base
}

TEST_CASE("sweep: bad options are refused before any allocation") {
  SweepOptions o = SmallSweep();
  o.repeats = 0;
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("repeats >= 1"));
  o = SmallSweep();
  o.backend = "tpu";
  CHECK_THROWS_WITH(RunSweep(o), doctest::Contains("unknown backend 'tpu'"));
}

}  // namespace
}  // namespace kvlanes::exec

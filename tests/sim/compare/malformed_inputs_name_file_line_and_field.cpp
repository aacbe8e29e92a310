// Bad measurement, predictions and measured files are errors that name file, line and field;
// samples that cannot determine a profile are errors that say what to vary or choose.
#include <doctest/doctest.h>

#include <functional>

#include "io/input_error.h"
#include "sim/compare/calibrate.h"
#include "sim/compare/check_stats.h"
#include "sim/compare/measurements.h"
#include "sim/compare/op_predictions.h"
#include "tests/sim/compare/synthetic.h"

namespace kvlanes::test {
namespace {

struct Caught {
  std::string what, file, field;
  int64_t line = -1;
};

Caught Catch(const std::function<void()>& fn) {
  Caught c;
  try {
    fn();
  } catch (const InputError& e) {
    c = {e.what(), e.file(), e.field(), e.line()};
  }
  return c;
}

// Line 1 is "{", each sample is on its own line from line 4.
std::string SamplesDoc(const std::vector<std::string>& samples) {
  std::string s = "{\n  \"kvlanes_measurements\": 1,\n  \"context\": {},\n  \"samples\": [\n";
  for (size_t i = 0; i < samples.size(); ++i)
    s += "    " + samples[i] + (i + 1 < samples.size() ? ",\n" : "\n");
  return s + "  ]\n}\n";
}

const std::string kGood =
    R"({"kind": "host_copy", "direction": "h2d", "bytes": 4096, "copies": 1, "median_s": 1e-5, "repeats": 5})";

}  // namespace

TEST_CASE("a bad sample value names the file, the sample's line and the field") {
  const Caught c = Catch([] {
    ParseMeasurements(
        SamplesDoc(
            {kGood, kGood,
             R"({"kind": "host_copy", "direction": "h2d", "bytes": -5, "copies": 1, "median_s": 1e-5, "repeats": 5})"}),
        "m.json");
  });
  CHECK(c.file == "m.json");
  CHECK(c.line == 7);
  CHECK(c.field == "samples[2].bytes");
  CHECK(c.what == "m.json:7: samples[2].bytes: must be > 0, got -5");
}

TEST_CASE("missing fields, unknown kinds, unknown keys and bad directions are named") {
  Caught c = Catch([] {
    ParseMeasurements(
        SamplesDoc(
            {R"({"kind": "host_copy", "direction": "h2d", "bytes": 1, "copies": 1, "repeats": 5})"}),
        "m.json");
  });
  CHECK(c.what == "m.json:5: samples[0].median_s: missing");
  c = Catch([] {
    ParseMeasurements(SamplesDoc({kGood, R"({"kind": "warp_drive", "median_s": 1, "repeats": 1})"}),
                      "m.json");
  });
  CHECK(c.line == 6);
  CHECK(c.field == "samples[1].kind");
  CHECK(
      c.what.find("unknown sample kind 'warp_drive' (valid: host_copy, copy_submit, device_copy") !=
      std::string::npos);
  c = Catch([] {
    ParseMeasurements(
        SamplesDoc(
            {R"({"kind": "device_copy", "bytes": 1, "op": "copy", "median_s": 1, "repeats": 1, "colour": 3})"}),
        "m.json");
  });
  CHECK(c.field == "samples[0].colour");
  CHECK(c.what.find("unknown key (valid: kind, median_s, repeats, min_s, max_s, label, bytes, op, "
                    "kernels, variant)") != std::string::npos);
  c = Catch([] {
    ParseMeasurements(
        SamplesDoc(
            {R"({"kind": "host_copy", "direction": "up", "bytes": 1, "copies": 1, "median_s": 1, "repeats": 1})"}),
        "m.json");
  });
  CHECK(c.what == "m.json:5: samples[0].direction: expected h2d or d2h, got 'up'");
  c = Catch([] {
    ParseMeasurements(
        SamplesDoc(
            {R"({"kind": "peer_read", "ranks": 4, "peers": 4, "bytes": 1, "median_s": 1, "repeats": 1})"}),
        "m.json");
  });
  CHECK(c.what == "m.json:5: samples[0].peers: must be < ranks (4)");
  c = Catch([] {
    ParseMeasurements(
        SamplesDoc(
            {R"({"kind": "load_back", "schedule": "tail", "bytes": 1, "copies": 1, "pages": 1, "layers": 4, "median_s": 1, "repeats": 1})"}),
        "m.json");
  });
  CHECK(c.what == "m.json:5: samples[0].schedule: expected per-layer or all-layers, got 'tail'");
}

TEST_CASE("syntax errors and wrong versions are located") {
  Caught c = Catch([] {
    ParseMeasurements("{\n  \"kvlanes_measurements\": 1,\n  \"samples\": [,]\n}", "m.json");
  });
  CHECK(c.file == "m.json");
  CHECK(c.line == 3);
  CHECK(c.what.find("malformed JSON") != std::string::npos);
  c = Catch([] {
    ParseMeasurements("{\"kvlanes_measurements\": 2, \"context\": {}, \"samples\": []}", "m.json");
  });
  CHECK(c.what ==
        "m.json:1: kvlanes_measurements: measurement format version 2, this build reads version 1");
  c = Catch([] { ReadMeasurements("/nonexistent/m.json"); });
  CHECK(c.what == "/nonexistent/m.json: cannot open measurement file: No such file or directory");
}

TEST_CASE("samples that cannot determine the profile are errors saying what is missing") {
  // Every copy the same size and count: latency and bandwidth cannot separate.
  const std::string same =
      R"({"kind": "host_copy", "direction": "h2d", "bytes": 4096, "copies": 1, "median_s": 1e-5, "repeats": 5})";
  HardwareProfile base = TruthProfile();
  Caught c = Catch([&] {
    Calibrate(ParseMeasurements(SamplesDoc({same, same, same}), "m.json"), &base, {});
  });
  CHECK(c.field == "host_copy");
  CHECK(c.what.find("cannot separate") != std::string::npos);
  // Two layouts and no --layout.
  nlohmann::json doc = SyntheticSweep(TruthProfile(), 1, 0.01);
  doc["samples"][0]["layout"] = "layer_first";
  c = Catch([&] { Calibrate(ParseMeasurements(doc.dump(), "m.json"), nullptr, {}); });
  CHECK(c.field == "host_copy.layout");
  CHECK(c.what.find("'layer_first', 'page_first'") != std::string::npos);
  CHECK(c.what.find("--layout") != std::string::npos);
  CalibrateOptions pick;
  pick.layout = "page_first";
  const CalibrationResult r = Calibrate(ParseMeasurements(doc.dump(), "m.json"), nullptr, pick);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("1 host_copy samples of other layouts, modes or slot runs left out") == 0);
  // No samples for most parameters and no base.
  const std::string big =
      R"({"kind": "host_copy", "direction": "h2d", "bytes": 4194304, "copies": 1, "median_s": 1e-4, "repeats": 5})";
  c = Catch([&] { Calibrate(ParseMeasurements(SamplesDoc({kGood, big}), "m.json"), nullptr, {}); });
  CHECK(c.what.find("no samples for host_device.d2h_gbps, host_device.copy_submit_s") !=
        std::string::npos);
  CHECK(c.what.find("and no --base profile") != std::string::npos);
}

TEST_CASE("measured files: bad ops, duplicates and kind conflicts are located") {
  Caught c = Catch([] {
    ParseMeasured("{\"ops\": [\n {\"id\": \"0/compute\", \"kind\": \"compute\", \"rank\": 0}\n]}",
                  "x.json");
  });
  CHECK(c.what == "x.json:2: ops[0].seconds: missing");
  c = Catch([] {
    ParseMeasured(
        "{\"ops\": [\n {\"id\": \"0/compute\", \"kind\": \"compute\", \"rank\": 0, \"seconds\": "
        "1},\n"
        " {\"id\": \"0/compute\", \"kind\": \"compute\", \"rank\": 0, \"seconds\": 2}\n]}",
        "x.json");
  });
  CHECK(c.what == "x.json:3: ops[1].rank: op '0/compute' measured twice on rank 0");
  c = Catch([] {
    ParseMeasured(
        "{\"ops\": [\n {\"id\": \"0/gather\", \"kind\": \"gather\", \"rank\": 0, \"seconds\": 1},\n"
        " {\"id\": \"0/gather\", \"kind\": \"compute\", \"rank\": 1, \"seconds\": 2}\n]}",
        "x.json");
  });
  CHECK(c.what == "x.json:3: ops[1].kind: op '0/gather' is 'gather' on another rank (line 2)");
  c = Catch([] {
    ParseMeasured(
        "{\"ops\": [{\"id\": \"0/compute\", \"kind\": \"compute\", \"rank\": 0, \"seconds\": 0}]}",
        "x.json");
  });
  CHECK(c.what == "x.json:1: ops[0].seconds: must be > 0, got 0");
  // An id whose kind differs between predicted and measured: files from different plans.
  Predictions p;
  p.ops = {{"0/gather", "gather", 1.0}};
  const Measured m = ParseMeasured(
      "{\"ops\": [\n{\"id\": \"0/gather\", \"kind\": \"compute\", \"rank\": 0, \"seconds\": 1}]}",
      "x.json");
  c = Catch([&] { RunCheck(p, m, {}); });
  CHECK(c.what ==
        "x.json:2: kind: op '0/gather' is 'compute' here but 'gather' in the predictions: are both "
        "from the "
        "same plan?");
}

TEST_CASE("predictions files: duplicates and wrong versions are located") {
  Caught c = Catch([] {
    ParsePredictions(
        "{\"kvlanes_predictions\": 1, \"profile\": \"p\", \"profile_measured\": false, "
        "\"total_s\": 1,\n"
        "\"requests\": [], \"ops\": [\n{\"id\": \"0/compute\", \"kind\": \"compute\", \"seconds\": "
        "1},\n"
        "{\"id\": \"0/compute\", \"kind\": \"compute\", \"seconds\": 1}]}",
        "p.json");
  });
  CHECK(c.what == "p.json:4: ops[1].id: duplicate op id '0/compute' (first at ops[0])");
  c = Catch([] { ParsePredictions("{\"kvlanes_predictions\": 3}", "p.json"); });
  CHECK(c.what ==
        "p.json:1: kvlanes_predictions: predictions format version 3, this build reads version 1");
}

}  // namespace kvlanes::test

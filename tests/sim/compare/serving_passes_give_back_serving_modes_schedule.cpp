// Serving mode writes its forward passes into the plan (version 5); the check's schedule of those
// passes, priced by the same cost model, gives back serving mode's pass times, queues and times
// to first token, so a serving run is checked against the schedule the replay predicted. The
// reader refuses pass lines that contradict the requests, naming the file, line and field.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/compare/serving_check.h"
#include "sim/engine/scheduler.h"
#include "sim/predict/hardware_profile.h"
#include "sim/predict/plan.h"
#include "sim/report/report.h"
#include "tests/approx.h"
#include "tests/sim/predict/temp_file.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

constexpr const char* kServingProfile =
    KVLANES_SOURCE_DIR "/config/profiles/8xh200_nccl_model.yaml";

// Two replicas, batches of 16,384 tokens in chunks of 4,096, arrivals four times as dense as the
// trace's, so passes hold several requests and long requests span several passes.
ReplayConfig ServingConfig() {
  ReplayConfig cfg;
  for (const char* s :
       {"cache.cp_size=2", "cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=3000",
        "serving.mode=serving", "serving.replicas=2", "serving.max_batch_tokens=16384",
        "serving.chunk_tokens=4096", "trace.rate_scale=4"})
    ApplyConfigSetting(s, cfg);
  ApplyConfigSetting(std::string("hardware.profile=") + kServingProfile, cfg);
  ValidateConfig(cfg);
  return cfg;
}

struct Served {
  std::string plan_text;
  ServingResult result;
  std::vector<size_t> trace_index;  // per plan request line: its trace index
};

Served Serve(const ReplayConfig& cfg, size_t requests) {
  Trace t = LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"}, std::nullopt, {});
  t.requests.resize(requests);
  auto policy = MakePolicy("lanes", cfg, t);
  std::ostringstream out;
  Served s;
  ReplaySinks sinks;
  sinks.plan = &out;
  sinks.on_served = [&](const ServingResult& r) { s.result = r; };
  sinks.replica_policy = [&] { return MakePolicy("lanes", cfg, t); };
  RunReplay(cfg, *policy, t, {}, nullptr, sinks);
  s.plan_text = out.str();
  return s;
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

std::string ReadError(const std::string& text) {
  TempFile f(text);
  try {
    ReadPlanFile(f.path());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("the check's schedule of a plan's passes gives back serving mode's own times") {
  const ReplayConfig cfg = ServingConfig();
  const Served s = Serve(cfg, 120);
  TempFile f(s.plan_text);
  const PlanFile plan = ReadPlanFile(f.path());
  REQUIRE(!plan.passes.empty());
  size_t batched = 0, chunked = 0;
  std::map<int64_t, int> chunks_of;
  for (const PlanPass& p : plan.passes) {
    batched += p.chunks.size() > 1;
    for (const PlanPassChunk& c : p.chunks)
      chunked += ++chunks_of[p.replica * 100000 + c.request] == 2;
  }
  CHECK(batched > 0);  // the case exercises batches and chunks
  CHECK(chunked > 0);
  const ProfileFile profile = ReadProfileFile(kServingProfile);
  const CostModel model(profile.profile, cfg, kServingProfile);
  for (int64_t replica = 0; replica < 2; ++replica) {
    CAPTURE(replica);
    std::vector<RequestPlan> requests;
    std::vector<PlanPass> passes;
    for (const RequestPlan& r : plan.requests)
      if (r.replica == replica) requests.push_back(r);
    for (const PlanPass& p : plan.passes)
      if (p.replica == replica) passes.push_back(p);
    REQUIRE(!requests.empty());
    const ServingSchedule sched = PredictServing(model, requests, passes, cfg.trace.rate_scale);
    REQUIRE(sched.pass_s.size() == passes.size());
    // Serving mode rounds each pass up to whole nanoseconds; the schedule keeps seconds.
    for (size_t k = 0; k < passes.size(); ++k)
      CHECK(std::fabs(sched.pass_s[k] * 1e9 - static_cast<double>(passes[k].predicted_ns)) <= 1.0);
    for (size_t i = 0; i < requests.size(); ++i) {
      const ServedRequest& sr = s.result.requests[static_cast<size_t>(requests[i].trace_request)];
      const double tol = 1e-9 * static_cast<double>(passes.size()) + 1e-12;
      CHECK(std::fabs(sched.ttft_s[i] - (sr.first_token_ns - sr.arrival_ns) * 1e-9) <= tol);
      CHECK(std::fabs(sched.queue_s[i] - (sr.admit_ns - sr.arrival_ns) * 1e-9) <= tol);
    }
  }
}

TEST_CASE("a run of a plan's first requests keeps their chunks in passes numbered from 0") {
  const Served s = Serve(ServingConfig(), 60);
  TempFile f(s.plan_text);
  PlanFile plan = ReadPlanFile(f.path());
  std::vector<RequestPlan> first;
  for (const RequestPlan& r : plan.requests)
    if (r.replica == 0 && r.request < 10) first.push_back(r);
  std::vector<PlanPass> passes;
  for (const PlanPass& p : plan.passes)
    if (p.replica == 0) passes.push_back(p);
  const size_t before = passes.size();
  std::map<int64_t, PlanPass> original;  // by start: each pass as the plan has it
  for (const PlanPass& p : passes) original[p.start_ns] = p;
  KeepPassesOf(passes, first, 0);
  REQUIRE(!passes.empty());
  CHECK(passes.size() < before);
  std::map<int64_t, int64_t> tokens;
  int64_t whole = 0, cut = 0;
  for (size_t k = 0; k < passes.size(); ++k) {
    CHECK(passes[k].index == static_cast<int64_t>(k));
    double spin = 0;
    for (const PlanPassChunk& c : passes[k].chunks) {
      CHECK(c.request < 10);
      tokens[c.request] += c.tokens;
      spin += c.layer_spin_s;
    }
    const PlanPass& was = original.at(passes[k].start_ns);
    if (was.chunks.size() == passes[k].chunks.size()) {
      ++whole;  // every chunk kept: the plan's spin, batched-pass term included
      CHECK(passes[k].layer_spin_s == was.layer_spin_s);
    } else {
      ++cut;
      CHECK(passes[k].layer_spin_s ==
            kvlanes::test::RelApprox(spin));  // layer base 0: the chunks' sum
    }
  }
  CHECK(whole > 0);
  MESSAGE(whole, " passes kept whole, ", cut, " cut");
  for (const RequestPlan& r : first) CHECK(tokens[r.request] == r.computed_tokens);
}

TEST_CASE("pass lines that contradict the requests are refused with file, line and field") {
  const Served s = Serve(ServingConfig(), 40);
  const std::string& text = s.plan_text;
  REQUIRE(ReadError(text) == "(accepted)");
  const size_t first_pass = text.find("{\"pass\":");
  REQUIRE(first_pass != std::string::npos);
  const int64_t line =
      1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(first_pass), '\n');
  const std::string at = ":" + std::to_string(line) + ": ";
  const size_t eol = text.find('\n', first_pass);
  const std::string pass_line = text.substr(first_pass, eol - first_pass);
  // A chunk naming a request that has no line.
  std::string bad = Replace(text, "\"chunks\":[[0,", "\"chunks\":[[999999,");
  std::string e = ReadError(bad);
  CHECK(e.find(at) != std::string::npos);
  CHECK(e.find("pass.chunks") != std::string::npos);
  CHECK(e.find("has no request line") != std::string::npos);
  // A pass line in a version 4 plan.
  e = ReadError(Replace(text, "\"kvlanes_plan\":5", "\"kvlanes_plan\":4"));
  CHECK(e.find("version 4") != std::string::npos);
  // The trailer's pass count.
  const size_t trailer = text.find("\"passes\":", text.find("kvlanes_plan_end"));
  REQUIRE(trailer != std::string::npos);
  e = ReadError(text.substr(0, trailer) + "\"passes\":1}}\n");
  CHECK(e.find("kvlanes_plan_end.passes") != std::string::npos);
  // A request line after the pass lines.
  const size_t second_line = text.find('\n') + 1;
  const std::string request_line =
      text.substr(second_line, text.find('\n', second_line) - second_line + 1);
  e = ReadError(text.substr(0, eol + 1) + request_line + text.substr(eol + 1));
  CHECK(e.find("after the pass lines") != std::string::npos);
  // A pass dropped (the trailer counting one fewer): its replica's numbers skip one, or its
  // requests' chunks no longer add up.
  const size_t count_at = trailer + std::string("\"passes\":").size();
  const int64_t count = std::stoll(text.substr(count_at));
  e = ReadError(
      Replace(text.substr(0, count_at) + std::to_string(count - 1) + "}}\n", pass_line + "\n", ""));
  CHECK(e.find("pass.") != std::string::npos);
}

}  // namespace kvlanes::test

namespace kvlanes::test {

TEST_CASE("a serving run is checked pass by pass and its verdict takes passes, TTFT and queues") {
  ServingCheck c;
  c.pass_error = ErrorStats{10, 0.02, 0.20, 0.30};
  c.ttft_pred[0] = 1;
  c.ttft_meas[0] = 1;
  c.ttft_pred[1] = 2;
  c.ttft_meas[1] = 2;
  c.ttft_pred[2] = 3;
  c.ttft_meas[2] = 3.5;
  c.queue_pred = 1;
  c.queue_meas = 1.05;
  c.predicted_pass_s = 40;
  c.measured_pass_s = 41;
  CheckReport r;
  r.pass = true;
  AddServingVerdict(c, CheckOptions{}, r);
  CHECK(!r.pass);
  REQUIRE(r.reasons.size() == 2);
  CHECK(r.reasons[0] == "serving pass p95 APE 20.00% > 15.00%");
  CHECK(r.reasons[1] == "serving TTFT p99 error 14.29% > 5.00%");

  // Compute ops (a chunk's share of its pass) and request times leave the per-op comparison; the
  // whole replay becomes the passes' sums.
  Predictions pred;
  pred.ops = {{"0/compute", "compute", 1.0}, {"0/backup/l0/kv", "backup", 0.1}};
  pred.requests = {RequestPrediction{0, 0, 1.1, 1.1}};
  Measured meas;
  meas.ops = {{"0/compute", "compute", 0.5, 1, 1}, {"0/backup/l0/kv", "backup", 0.1, 1, 2}};
  meas.request_s[0] = 0.6;
  KeepServingComparable(c, pred, meas);
  REQUIRE(pred.ops.size() == 1);
  CHECK(pred.ops[0].kind == "backup");
  REQUIRE(meas.ops.size() == 1);
  CHECK(pred.requests.empty());
  CHECK(meas.request_s.empty());
  CHECK(pred.total_s == 40);
  CHECK(*meas.total_s == 41);
  const CheckReport joined = RunCheck(pred, meas, CheckOptions{});
  CHECK(joined.total_available);
  CHECK(joined.total_error == kvlanes::test::RelApprox(1.0 / 41));
}

}  // namespace kvlanes::test

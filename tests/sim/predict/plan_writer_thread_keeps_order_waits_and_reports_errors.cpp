// The plan writer's thread: lines in request order and byte-identical to the foreground writer's
// whatever the queue's size; a full queue makes Add() wait (back-pressure) and, past the wait
// limit, fail with the output's name; a failed write reaches the caller with the output's name;
// a writer dropped without Finish() ends its thread and writes no trailer.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <sstream>
#include <streambuf>
#include <string>
#include <thread>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/predict/plan.h"
#include "sim/predict/plan_pricing.h"
#include "sim/report/report.h"
#include "tests/sim/predict/stream_bufs.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

using namespace std::chrono_literals;

ReplayConfig RichConfig() {
  ReplayConfig cfg;
  for (const char* s : {"cache.cp_size=4", "cache.device_pages_per_lane=2000",
                        "cache.host_pages_per_lane=3000", "cache.write_policy=write_back"})
    ApplyConfigSetting(s, cfg);
  ValidateConfig(cfg);
  return cfg;
}

// Every plan of a replay of the excerpt (evictions, write-backs, load-backs, gathers, backups).
std::vector<RequestPlan> RecordedPlans(const ReplayConfig& cfg) {
  static const Trace t =
      LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"}, std::nullopt, {});
  auto policy = MakePolicy("lanes", cfg, t);
  std::vector<RequestPlan> plans;
  ReplaySinks sinks;
  sinks.on_request = [&](const RequestPlan& p, const RequestCost*) { plans.push_back(p); };
  RunReplay(cfg, *policy, t, {}, nullptr, sinks);
  return plans;
}

std::string Write(const ReplayConfig& cfg, const std::vector<RequestPlan>& plans,
                  PlanWriterOptions opts, bool move) {
  std::ostringstream out;
  PlanWriter w(out, cfg, nullptr, opts);
  for (const RequestPlan& p : plans) {
    if (move) {
      RequestPlan copy = p;
      w.Add(std::move(copy));
    } else {
      w.Add(p);
    }
  }
  w.Finish();
  return out.str();
}

// A plan whose line is about `pages` x 20 bytes: its slots step by 2, so no two pages share a run.
RequestPlan BigPlan(int64_t request, int64_t pages) {
  RequestPlan p;
  p.request = request;
  p.input_tokens = pages * 64;
  p.computed_tokens = pages * 64;
  for (int64_t i = 0; i < pages; ++i)
    p.new_pages.push_back(NewPage{i, 0, static_cast<uint32_t>(2 * i), 0});
  return p;
}

TEST_CASE("the writer thread writes the foreground writer's bytes, in order, for any queue size") {
  const ReplayConfig cfg = RichConfig();
  const std::vector<RequestPlan> plans = RecordedPlans(cfg);
  REQUIRE(plans.size() > 20);
  PlanWriterOptions fg;
  fg.background = false;
  const std::string expected = Write(cfg, plans, fg, false);
  // The foreground writer is the one line per request of AppendPlanLine between header and
  // trailer (the format's own test checks those lines against PlanToJson).
  // Each line priced as the writer prices it (layer_spin_s, no profile: the default terms).
  const SpinPricer spin(nullptr, "", cfg.cache.cp_size, cfg.cache.page_tokens);
  std::string lines;
  for (RequestPlan p : plans) {
    p.layer_spin_s = spin.LayerS(p);
    AppendPlanLine(p, cfg, lines);
  }
  CHECK(expected.find(lines) != std::string::npos);
  for (size_t q : {2, 3, 16, 1000}) {
    for (bool move : {false, true}) {
      CAPTURE(q);
      CAPTURE(move);
      PlanWriterOptions bg;
      bg.queue_plans = q;
      CHECK(Write(cfg, plans, bg, move) == expected);
    }
  }
}

TEST_CASE("integers at every digit-count boundary are written as the JSON dump writes them") {
  ReplayConfig cfg;
  ValidateConfig(cfg);
  std::vector<uint64_t> values{0, 1, 9};
  for (uint64_t p = 10; p <= 1000000000000000000ull; p *= 10)
    for (uint64_t v : {p - 1, p, p + 1, 2 * p + 7}) values.push_back(v);
  RequestPlan plan;
  plan.request = 7;
  plan.input_tokens = 64;
  plan.computed_tokens = 64;
  // Positions take every value (int64); slots and extents those that fit 32 bits. Each page
  // starts its own run (the slot steps by 2), so every value is written.
  for (size_t i = 0; i < values.size(); ++i) {
    const uint64_t v = values[i];
    const uint32_t small = static_cast<uint32_t>(std::min<uint64_t>(v, 0xFFFFFFFFull));
    plan.new_pages.push_back(
        NewPage{static_cast<int64_t>(v), 0, small + static_cast<uint32_t>(2 * i), small});
  }
  plan.new_pages.push_back(NewPage{0, 0, 0xFFFFFFFFu, 0xFFFFFFFFu});
  std::string line;
  AppendPlanLine(plan, cfg, line);
  CHECK(line == PlanToJson(plan, cfg).dump() + "\n");
}

TEST_CASE("a moved plan comes back as a recycled plan the engine can record into") {
  const ReplayConfig cfg = RichConfig();
  const std::vector<RequestPlan> plans = RecordedPlans(cfg);
  std::ostringstream out;
  PlanWriter w(out, cfg, nullptr, PlanWriterOptions{.queue_plans = 2});
  RequestPlan p = plans[3];
  w.Add(std::move(p));
  p = plans[4];  // whatever it held, it is a valid plan
  CHECK(p == plans[4]);
  w.Add(std::move(p));
  w.Finish();
  PlanWriterOptions fg;
  fg.background = false;
  CHECK(out.str() == Write(cfg, {plans[3], plans[4]}, fg, false));
}

TEST_CASE("a full queue makes Add wait until the writer takes a plan (back-pressure)") {
  ReplayConfig cfg;
  ValidateConfig(cfg);
  GateBuf gate;
  std::ostream out(&gate);
  PlanWriterOptions opts;
  opts.queue_plans = 2;
  opts.wait_limit = 600s;
  std::vector<RequestPlan> plans;
  for (int64_t r = 0; r < 4; ++r) plans.push_back(BigPlan(r, 80000));  // each line > 1 MiB
  PlanWriter w(out, cfg, nullptr, opts);
  w.Add(plans[0]);
  WaitUntil([&] { return gate.entered(); });  // the writer thread is held in its first write
  w.Add(plans[1]);  // the queue's two slots: plan 0's (until its write returns) and plan 1's
  std::atomic<bool> added{false};
  std::thread t([&] {
    w.Add(plans[2]);
    added = true;
  });
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(added.load());  // waits for room while the output takes nothing
  gate.open();
  t.join();
  CHECK(added.load());
  w.Add(plans[3]);
  w.Finish();
  PlanWriterOptions fg;
  fg.background = false;
  CHECK(gate.text == Write(cfg, plans, fg, false));
}

TEST_CASE("an output that takes nothing fails Add past the wait limit, naming the output") {
  ReplayConfig cfg;
  ValidateConfig(cfg);
  GateBuf gate;
  std::ostream out(&gate);
  std::string message;
  {
    PlanWriterOptions opts;
    opts.queue_plans = 2;
    opts.wait_limit = 300ms;
    opts.name = "out/stalled.plan.jsonl";
    PlanWriter w(out, cfg, nullptr, opts);
    w.Add(BigPlan(0, 80000));
    WaitUntil([&] { return gate.entered(); });
    try {
      for (int64_t r = 1; r < 4; ++r) w.Add(BigPlan(r, 10));
    } catch (const InputError& e) {
      message = e.what();
    }
    gate.open();  // the writer thread's write returns; the destructor ends the thread
  }
  CHECK(message ==
        "out/stalled.plan.jsonl: the plan writer took no request for 0.3 s (is the output "
        "stalled?)");
  CHECK(gate.text.find("kvlanes_plan_end") == std::string::npos);  // never presented as whole
}

TEST_CASE("a failed write reaches Add or Finish with the output's name") {
  const ReplayConfig cfg = RichConfig();
  const std::vector<RequestPlan> plans = RecordedPlans(cfg);
  CheckWriteFailures(
      [&](std::ostream& out, bool background) {
        PlanWriterOptions opts;
        opts.background = background;
        opts.queue_plans = 4;
        opts.name = "full/plan.jsonl";
        PlanWriter w(out, cfg, nullptr, opts);
        for (int k = 0; k < 20; ++k)
          for (const RequestPlan& p : plans) w.Add(p);
        w.Finish();
      },
      "full/plan.jsonl: write failed (disk full?)");
}

TEST_CASE("a writer dropped without Finish ends its thread and writes no trailer") {
  const ReplayConfig cfg = RichConfig();
  const std::vector<RequestPlan> plans = RecordedPlans(cfg);
  std::ostringstream out;
  {
    PlanWriter w(out, cfg, nullptr, PlanWriterOptions{.queue_plans = 4});
    for (const RequestPlan& p : plans) w.Add(p);
  }
  CHECK(out.str().find("kvlanes_plan_end") == std::string::npos);
}

}  // namespace
}  // namespace kvlanes::test

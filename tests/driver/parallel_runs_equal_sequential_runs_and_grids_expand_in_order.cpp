// The many-run engine of compare and sweep: results do not depend on the thread count, grids
// expand in the documented order, and bad --vary/--shard values are refused with their option.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "driver/run_grid.h"
#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/report/report.h"
#include "traces/trace_reader.h"

namespace kvlanes::driver {

TEST_CASE("compare on parallel threads gives byte-identical reports to sequential runs") {
  ReplayConfig cfg;
  ApplyConfigSetting("cache.cp_size=4", cfg);
  ApplyConfigSetting("cache.device_pages_per_lane=3000", cfg);
  ApplyConfigSetting("cache.host_pages_per_lane=6000", cfg);
  ValidateConfig(cfg);
  TraceOptions opt;
  const Trace trace = LoadTrace(
      {std::string(KVLANES_SOURCE_DIR) + "/traces/mooncake_excerpt.jsonl"}, std::nullopt, opt);
  std::vector<ReplayJob> jobs;
  for (const PolicyInfo& p : RegisteredPolicies()) jobs.push_back(ReplayJob{p.name, cfg, &trace});
  size_t calls = 0;
  const auto seq = RunReplayJobs(jobs, 1, [&](size_t, const nlohmann::ordered_json&) { ++calls; });
  const auto par = RunReplayJobs(jobs, 4, nullptr);
  CHECK(calls == jobs.size());
  REQUIRE(seq.size() == jobs.size());
  REQUIRE(par.size() == jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    CAPTURE(jobs[i].policy);
    CHECK(seq[i]["policy"] == jobs[i].policy);
    CHECK(seq[i].dump() == par[i].dump());
    // And both equal a plain single replay outside the runner.
    auto policy = MakePolicy(jobs[i].policy, cfg, trace);
    CHECK(RunReplay(cfg, *policy, trace, {}, nullptr).dump() == par[i].dump());
  }
}

TEST_CASE("a grid expands policy-major with the first --vary axis outermost") {
  Grid g;
  g.policies = {"lru", "oracle"};
  g.axes = {ParseVary("cache.cp_size=1,2"), ParseVary("cache.device_pages_per_lane=10,20,30")};
  REQUIRE(g.size() == 12);
  auto [p0, s0] = g.Run(0);
  CHECK(p0 == "lru");
  CHECK(s0 == std::vector<std::pair<std::string, std::string>>{
                  {"cache.cp_size", "1"}, {"cache.device_pages_per_lane", "10"}});
  auto [p5, s5] = g.Run(5);
  CHECK(p5 == "lru");
  CHECK(s5[0].second == "2");
  CHECK(s5[1].second == "30");
  auto [p7, s7] = g.Run(7);
  CHECK(p7 == "oracle");
  CHECK(s7[0].second == "1");
  CHECK(s7[1].second == "20");
  const ReplayConfig cfg = GridRunConfig(ReplayConfig{}, g, 7);
  CHECK(cfg.policy == "oracle");
  CHECK(cfg.cache.device_pages_per_lane == 20);
}

TEST_CASE("--vary ranges expand arithmetically and geometrically, end included") {
  using V = std::vector<std::string>;
  CHECK(ParseVary("cache.device_pages_per_lane=1000:4000:1000").values ==
        V{"1000", "2000", "3000", "4000"});
  CHECK(ParseVary("cache.device_pages_per_lane=1000:9000:x2").values ==
        V{"1000", "2000", "4000", "8000"});
  CHECK(ParseVary("cache.device_pages_per_lane=100,1000:8000:x2.5").values ==
        V{"100", "1000", "2500", "6250"});
  CHECK(ParseVary("trace.rate_scale=0.5:1.5:0.25").values == V{"0.5", "0.75", "1", "1.25", "1.5"});
  CHECK(ParseVary("cache.cp_size=1:8:x2").values == V{"1", "2", "4", "8"});
  CHECK(ParseVary("x=3:3:1").values == V{"3"});
  // Not written as a range: kept as one value (a later config check judges it).
  CHECK(ParseVary("hardware.profile=a:b:c").values == V{"a:b:c"});
}

TEST_CASE("bad --vary and --shard values are refused naming the option") {
  const auto message = [](auto fn) {
    try {
      fn();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([] { ParseVary("cache.cp_size"); }).rfind("--vary", 0) == 0);
  CHECK(message([] { ParseVary("cache.cp_size=1,,2"); }).find("empty item") != std::string::npos);
  CHECK(message([] { ParseVary("policy=lru"); }).find("--policies") != std::string::npos);
  CHECK(message([] { ParseVary("cache.cp_size=8:1:1"); }) ==
        "--vary cache.cp_size: range '8:1:1': the start is above the end");
  CHECK(message([] { ParseVary("cache.cp_size=1:8:0"); }).find("step must be positive") !=
        std::string::npos);
  CHECK(message([] { ParseVary("cache.cp_size=1:8:x1"); }).find("factor must be above 1") !=
        std::string::npos);
  CHECK(message([] { ParseVary("cache.cp_size=0:8:x2"); }).find("start above 0") !=
        std::string::npos);
  CHECK(message([] { ParseVary("cache.cp_size=1:1e9:1"); }).find("more than 100000 values") !=
        std::string::npos);
  Grid g;
  g.policies = {"lru"};
  g.axes = {ParseVary("cache.device_pages_per_lane=10,ten")};
  CHECK(message([&] { GridRunConfig(ReplayConfig{}, g, 1); }) ==
        "--vary cache.device_pages_per_lane=ten: expected an integer, got 'ten'");
  CHECK(ParseShard("2/8") == std::pair<size_t, size_t>{2, 8});
  for (const char* bad : {"8/8", "1", "-1/4", "1/0", "a/b", "1/4x"}) {
    CAPTURE(bad);
    CHECK(message([&] { ParseShard(bad); }).rfind("--shard", 0) == 0);
  }
}

TEST_CASE("sweep merge refuses shards of different grids and missing shards") {
  const auto write = [](const std::string& path, const nlohmann::ordered_json& j) {
    std::ofstream(path) << j.dump();
  };
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string key = "cache.device_pages_per_lane";
  nlohmann::ordered_json vary = nlohmann::ordered_json::array();
  vary.push_back({{"key", key}, {"values", {"10", "20"}}});
  nlohmann::ordered_json a = {{"sweep_version", 1},
                              {"grid", {{"runs", 2}, {"policies", {"lru"}}, {"vary", vary}}},
                              {"shard", {{"index", 0}, {"count", 2}}},
                              {"runs", nlohmann::ordered_json::array()}};
  // A run with the fields its table and CSV read, which sweep merge checks.
  a["runs"].push_back({{"grid_index", 0},
                       {"policy", "lru"},
                       {"vary", {{key, "10"}}},
                       {"eviction_order", "lru"},
                       {"placement", "zigzag"},
                       {"requests", 1},
                       {"input_tokens", 100},
                       {"token_hit_ratio", 0.5},
                       {"device_hit_tokens", 50},
                       {"host_hit_tokens", 0},
                       {"computed_tokens", 50},
                       {"evicted_pages", {{"device", 0}, {"host", 0}}},
                       {"lane_deficit_failures", 0},
                       {"uncached_requests", 0},
                       {"bypassed_pages", 0},
                       {"load_back", {{"pages", 0}, {"bytes", 0}}},
                       {"host_writes", {{"pages", 0}, {"bytes", 0}, {"refused", 0}}}});
  nlohmann::ordered_json b = a;
  b["shard"]["index"] = 1;
  b["runs"][0]["grid_index"] = 1;
  b["runs"][0]["vary"][key] = "20";
  const std::string pa = dir + "/kvlanes_merge_test_a.json",
                    pb = dir + "/kvlanes_merge_test_b.json",
                    pc = dir + "/kvlanes_merge_test_c.json";
  write(pa, a);
  write(pb, b);
  const auto merged = MergeSweepFiles({pb, pa});
  CHECK(merged["runs"].size() == 2);
  CHECK(merged["runs"][0]["grid_index"] == 0);
  CHECK(merged["shard"]["count"] == 1);
  std::string err;
  try {
    MergeSweepFiles({pa});
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err == "sweep merge: missing shards 1 of 2");
  nlohmann::ordered_json short_b = b;
  short_b["runs"] = nlohmann::ordered_json::array();
  write(pc, short_b);
  err.clear();
  try {
    MergeSweepFiles({pa, pc});
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err == pc + ": runs: shard 1/2 (" + pc +
                   ") holds 0 of its 1 runs, lacking run 1 of the 2-run grid (a shard file "
                   "written by an interrupted run?)");
  nlohmann::ordered_json c = b;
  c["grid"]["policies"] = {"lfu"};
  write(pc, c);
  err.clear();
  try {
    MergeSweepFiles({pa, pc});
  } catch (const InputError& e) {
    err = e.what();
  }
  CHECK(err.rfind(pc + ": grid: differs from " + pa, 0) == 0);
  for (const auto& p : {pa, pb, pc}) std::remove(p.c_str());
}

}  // namespace kvlanes::driver

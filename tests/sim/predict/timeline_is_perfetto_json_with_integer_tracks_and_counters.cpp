// The predicted timeline is Chrome trace-event JSON as Perfetto's importer reads it: integer pid
// and tid, a name for every process and thread that carries events, the request id in every
// event's args, one arrival per request, and per-lane page counters that end at the report's
// occupancy. Same inputs, same bytes.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "policies/registry.h"
#include "sim/report/report.h"
#include "tests/approx.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

constexpr const char* kTimelineProfile =
    KVLANES_SOURCE_DIR "/config/profiles/8xh200_nccl_model.yaml";

struct Run {
  std::string timeline;
  nlohmann::ordered_json report;
  std::vector<int64_t> arrival_ns;
};

Run Replay(bool layers = false) {
  ReplayConfig cfg;
  for (const std::string& s : std::vector<std::string>{
           "cache.cp_size=4", "cache.device_pages_per_lane=2000", "cache.host_pages_per_lane=3000",
           "cache.write_policy=write_back", std::string("hardware.profile=") + kTimelineProfile})
    ApplyConfigSetting(s, cfg);
  ValidateConfig(cfg);
  const Trace trace =
      LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"}, std::nullopt, {});
  auto policy = MakePolicy("lanes", cfg, trace);
  std::ostringstream out;
  ReplaySinks sinks;
  sinks.timeline = &out;
  sinks.timeline_layers = layers;
  Run r;
  sinks.on_request = [&](const RequestPlan& p, const RequestCost*) {
    r.arrival_ns.push_back(p.arrival_ns);
  };
  r.report = RunReplay(cfg, *policy, trace, {}, nullptr, sinks);
  r.timeline = out.str();
  return r;
}

}  // namespace

TEST_CASE("the timeline has integer tracks, named processes and threads, and request args") {
  const Run run = Replay();
  const nlohmann::json doc = nlohmann::json::parse(run.timeline);
  CHECK(doc["displayTimeUnit"] == "ms");
  const nlohmann::json& ev = doc["traceEvents"];
  REQUIRE(ev.is_array());
  const int ranks = 4;
  const int64_t requests = static_cast<int64_t>(run.arrival_ns.size());
  std::map<int, std::string> process;
  std::map<std::pair<int, int>, std::string> thread;
  std::set<std::pair<int, int>> used;
  std::map<std::string, int64_t> spans;
  int64_t arrivals = 0, counters = 0;
  std::map<int, nlohmann::json> last_counter;
  for (const auto& e : ev) {
    REQUIRE(e["pid"].is_number_integer());
    REQUIRE(e["tid"].is_number_integer());
    const int pid = e["pid"], tid = e["tid"];
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name") process[pid] = e["args"]["name"];
      if (e["name"] == "thread_name") thread[{pid, tid}] = e["args"]["name"];
      continue;
    }
    used.insert({pid, tid});
    REQUIRE(e["ts"].is_number());
    if (ph == "C") {
      CHECK(pid < ranks);
      CHECK(e["name"] == "pages used");
      last_counter[pid] = e["args"];
      ++counters;
      continue;
    }
    REQUIRE(e["args"]["request"].is_number_integer());
    const int64_t req = e["args"]["request"];
    REQUIRE(req >= 0);
    REQUIRE(req < requests);
    if (ph == "i") {
      CHECK(pid == ranks);
      CHECK(e["ts"].get<double>() == kvlanes::test::RelApprox(run.arrival_ns[req] * 1e-3));
      ++arrivals;
      continue;
    }
    REQUIRE(ph == "X");
    CHECK(e["dur"].get<double>() > 0);
    ++spans[e["name"].get<std::string>()];
  }
  for (int r = 0; r < ranks; ++r) CHECK(process[r] == "rank " + std::to_string(r));
  CHECK(process[ranks] == "requests");
  for (const auto& used_thread : used) {  // no structured binding: clang 14 cannot capture one
    const auto pid = used_thread.first, tid = used_thread.second;
    if (tid != 0) CHECK_MESSAGE(thread.count({pid, tid}), "unnamed thread ", pid, "/", tid);
  }
  CHECK(thread[{0, 1}] == "compute");
  CHECK(thread[{3, 4}] == "copy d2h");
  CHECK(arrivals == requests);
  CHECK(spans["forward"] == requests * ranks);
  CHECK(spans["load-back"] > 0);
  CHECK(spans["write-back"] > 0);
  CHECK(spans["queued"] > 0);
  CHECK(counters == requests * ranks);
  // The last sample of each lane is the occupancy the report ends with.
  for (int r = 0; r < ranks; ++r) {
    // As integers: doctest cannot compare a json with an ordered_json under clang 14.
    CHECK(last_counter[r]["device"].get<int64_t>() ==
          run.report["lanes"][r]["device_used_pages"].get<int64_t>());
    CHECK(last_counter[r]["host"].get<int64_t>() ==
          run.report["lanes"][r]["host_used_pages"].get<int64_t>());
  }
}

TEST_CASE("the same replay writes the same timeline bytes") {
  const Run a = Replay(), b = Replay();
  CHECK(a.timeline.size() > 1000);
  CHECK(a.timeline == b.timeline);
}

TEST_CASE("layer slices: every op of each rank's schedule inside its request's span") {
  const Run run = Replay(true);
  const nlohmann::json doc = nlohmann::json::parse(run.timeline);
  const int64_t layers = ReplayConfig{}.model.layers;
  // Request spans and slices by (pid, tid, request): a slice has args.layer, a span has not.
  using Key = std::tuple<int, int, int64_t>;
  std::map<Key, std::pair<double, double>> span;
  std::map<Key, std::vector<std::pair<double, double>>> slices;
  std::map<std::pair<int64_t, int>, double> load_span;  // (request, rank) -> load-back span
  int64_t compute_slices = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"].get<int>() >= 4) continue;
    const Key k{e["pid"].get<int>(), e["tid"].get<int>(), e["args"]["request"].get<int64_t>()};
    const double t0 = e["ts"], t1 = t0 + e["dur"].get<double>();
    if (e["args"].contains("layer")) {
      slices[k].push_back({t0, t1});
      if (e["name"] == "compute") ++compute_slices;
    } else if (e["name"] != "write-back") {
      span[k] = {t0, t1};
      if (e["name"] == "load-back")
        load_span[{std::get<2>(k), std::get<0>(k)}] = e["dur"].get<double>();
    }
  }
  CHECK(compute_slices == static_cast<int64_t>(run.arrival_ns.size()) * 4 * layers);
  for (const auto& [k, list] : slices) {
    REQUIRE(span.count(k));
    for (const auto& [t0, t1] : list) {
      CHECK(t0 >= span[k].first - 1e-6);
      CHECK(t1 <= span[k].second + 1e-6);
    }
  }
  // Lanes are scheduled with their own copies: some request's load-back spans differ by rank.
  bool differ = false;
  for (const auto& [k, d] : load_span)
    for (int r = 0; r < 4; ++r)
      if (load_span.count({k.first, r}) && load_span[{k.first, r}] != d) differ = true;
  CHECK(differ);
  CHECK(Replay(true).timeline == run.timeline);
  CHECK(Replay(false).timeline.size() < run.timeline.size());
}

}  // namespace kvlanes::test

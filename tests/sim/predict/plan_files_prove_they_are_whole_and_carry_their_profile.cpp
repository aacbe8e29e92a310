// The plan writer streams lines equal to PlanToJson's, byte for byte; a plan file ends with a
// trailer whose counts the reader checks, so a plan cut short or padded is refused with its file
// and line; the header stores the hardware profile, so a plan is read the same from anywhere.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/predict/content_hash.h"
#include "sim/predict/plan.h"
#include "sim/predict/plan_pricing.h"
#include "sim/report/report.h"
#include "tests/sim/predict/temp_file.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

constexpr const char* kProfile = KVLANES_SOURCE_DIR "/config/profiles/8xh200_nccl_model.yaml";

// A replay with a host tier and write-back, so evictions, write-backs, load-backs, gathers and
// backups all appear, on two pools.
ReplayConfig ProfiledConfig(bool with_profile) {
  ReplayConfig cfg;
  for (const char* s : {"cache.cp_size=4", "cache.device_pages_per_lane=2000",
                        "cache.host_pages_per_lane=3000", "cache.write_policy=write_back"})
    ApplyConfigSetting(s, cfg);
  if (with_profile) ApplyConfigSetting(std::string("hardware.profile=") + kProfile, cfg);
  ValidateConfig(cfg);
  return cfg;
}

const Trace& Excerpt() {
  static const Trace t =
      LoadTrace({KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl"}, std::nullopt, {});
  return t;
}

// The plan file text of a replay, and the plans it recorded.
std::string RecordedPlanText(const ReplayConfig& cfg, std::vector<RequestPlan>* recorded) {
  auto policy = MakePolicy("lanes", cfg, Excerpt());
  std::ostringstream out;
  ReplaySinks sinks;
  sinks.plan = &out;
  if (recorded)
    sinks.on_request = [&](const RequestPlan& p, const RequestCost*) { recorded->push_back(p); };
  RunReplay(cfg, *policy, Excerpt(), {}, nullptr, sinks);
  return out.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::string Join(const std::vector<std::string>& lines, size_t from, size_t to) {
  std::string s;
  for (size_t i = from; i < to; ++i) s += lines[i] + "\n";
  return s;
}

std::string ReadError(const std::string& content) {
  TempFile f(content);
  try {
    ReadPlanFile(f.path());
  } catch (const InputError& e) {
    std::string msg = e.what();
    // The temp file's name varies; report it as PLAN.
    if (const size_t at = msg.find(f.path()); at != std::string::npos)
      msg.replace(at, f.path().size(), "PLAN");
    return msg;
  }
  return "";
}

}  // namespace

TEST_CASE("the streamed plan lines are PlanToJson's dump byte for byte, ops counted") {
  std::set<std::string> kinds;
  for (const char* write_policy : {"write_back", "write_through"}) {
    ReplayConfig cfg = ProfiledConfig(false);
    ApplyConfigSetting(std::string("cache.write_policy=") + write_policy, cfg);
    std::vector<RequestPlan> recorded;
    const std::vector<std::string> lines = Lines(RecordedPlanText(cfg, &recorded));
    REQUIRE(lines.size() == recorded.size() + 2);
    CHECK(lines[0] == PlanHeaderJson(cfg, nullptr).dump());
    size_t ops = 0;
    // The writer prices each request's forward spin (version 4); the recorded plans are not.
    const SpinPricer spin(nullptr, "", cfg.cache.cp_size, cfg.cache.page_tokens);
    for (RequestPlan& r : recorded) {
      CHECK(r.layer_spin_s == -1);
      r.layer_spin_s = spin.LayerS(r);
    }
    for (size_t i = 0; i < recorded.size(); ++i) {
      const nlohmann::ordered_json j = PlanToJson(recorded[i], cfg);
      REQUIRE(lines[i + 1] == j.dump());
      std::string one;
      CHECK(AppendPlanLine(recorded[i], cfg, one) == j["ops"].size());
      CHECK(one == lines[i + 1] + "\n");
      ops += j["ops"].size();
      for (const auto& op : j["ops"]) kinds.insert(op["kind"].get<std::string>());
    }
    CHECK(lines.back() ==
          PlanTrailer(static_cast<int64_t>(recorded.size()), static_cast<int64_t>(ops)).dump());
  }
  CHECK(kinds ==
        std::set<std::string>{"evict", "write_back", "load_back", "compute", "gather", "backup"});
}

TEST_CASE("integer lists are written as nlohmann writes them at every digit count and length") {
  const ReplayConfig cfg = ProfiledConfig(false);
  // Every value with 1..10 digits at both ends of its range, and lists long enough that the
  // writer's tuple buffer is flushed into the line several times.
  std::vector<uint32_t> edges = {0, 4294967295u};
  for (uint64_t p10 = 10; p10 <= 1000000000ull; p10 *= 10) {
    edges.push_back(static_cast<uint32_t>(p10 - 1));
    edges.push_back(static_cast<uint32_t>(p10));
  }
  RequestPlan p;
  p.request = 7;
  p.input_tokens = 64;
  p.computed_tokens = 64;
  SlotFree f{Tier::kDevice, {}};
  for (size_t i = 0; i < 3000; ++i) {
    const uint32_t a = edges[i % edges.size()], b = edges[(i * 7 + 3) % edges.size()];
    f.slots.push_back({a, b});
    p.new_pages.push_back(
        NewPage{static_cast<int64_t>(i) * 1000003, static_cast<uint16_t>(a), b, a});
  }
  p.new_pages.push_back(NewPage{INT64_MAX, 65535, 4294967295u, 4294967295u});
  p.evictions.push_back(f);
  std::string line;
  AppendPlanLine(p, cfg, line);
  CHECK(line == PlanToJson(p, cfg).dump() + "\n");
}

TEST_CASE("a pool name that needs JSON escapes is written as nlohmann writes it") {
  ReplayConfig cfg = ProfiledConfig(false);
  cfg.model.pools = {{"kv \"main\"\\\t\xc3\xa9", 64}, {"idx", 8}};
  std::vector<RequestPlan> recorded;
  const std::vector<std::string> lines = Lines(RecordedPlanText(cfg, &recorded));
  REQUIRE(lines.size() == recorded.size() + 2);
  size_t copies = 0;
  const SpinPricer spin(nullptr, "", cfg.cache.cp_size, cfg.cache.page_tokens);
  for (size_t i = 0; i < recorded.size(); ++i) {
    recorded[i].layer_spin_s = spin.LayerS(recorded[i]);  // as the writer prices it
    REQUIRE(lines[i + 1] == PlanToJson(recorded[i], cfg).dump());
    copies += recorded[i].load_back.size() + recorded[i].backup.size();
  }
  CHECK(copies > 0);  // the escaped name was written
}

TEST_CASE("a whole plan reads back; cut, padded or miscounted plans are refused at their line") {
  std::vector<RequestPlan> recorded;
  const ReplayConfig cfg = ProfiledConfig(false);
  const std::string text = RecordedPlanText(cfg, &recorded);
  const std::vector<std::string> lines = Lines(text);
  const size_t n = lines.size();  // header, requests, trailer
  {
    TempFile f(text);
    const PlanFile pf = ReadPlanFile(f.path());
    REQUIRE(pf.requests.size() == recorded.size());
    CHECK(pf.requests.front() == recorded.front());
    CHECK(pf.requests.back() == recorded.back());
  }
  // Cut at a line boundary: the trailer (or more) is missing.
  CHECK(ReadError(Join(lines, 0, n - 1)) ==
        "PLAN:" + std::to_string(n - 1) + ": kvlanes_plan_end: the plan ends at line " +
            std::to_string(n - 1) +
            " without its trailer: it was cut short (or is still being "
            "written)");
  CHECK(ReadError(Join(lines, 0, n / 2))
            .find("PLAN:" + std::to_string(n / 2) + ": kvlanes_plan_end: the plan ends at line") ==
        0);
  CHECK(ReadError(Join(lines, 0, 1)).find("PLAN:1: kvlanes_plan_end:") == 0);
  // A request line lost in the middle: the trailer's counts disagree.
  std::vector<std::string> dropped = lines;
  dropped.erase(dropped.begin() + 5);
  CHECK(ReadError(Join(dropped, 0, dropped.size())) ==
        "PLAN:" + std::to_string(n - 1) + ": kvlanes_plan_end.requests: the trailer counts " +
            std::to_string(recorded.size()) + " requests, the plan holds " +
            std::to_string(recorded.size() - 1));
  // The trailer counts one op more than the lines hold (an op lost from a line; removing one
  // from a request line itself is refused earlier, by the request's own consistency checks).
  std::vector<std::string> fewer = lines;
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(fewer[n - 1]);
  REQUIRE(j.contains("kvlanes_plan_end"));
  j["kvlanes_plan_end"]["ops"] = j["kvlanes_plan_end"]["ops"].get<int64_t>() + 1;
  fewer[n - 1] = j.dump();
  CHECK(ReadError(Join(fewer, 0, n))
            .find("PLAN:" + std::to_string(n) + ": kvlanes_plan_end.ops: the trailer counts") == 0);
  // Anything after the trailer.
  CHECK(ReadError(text + lines[1] + "\n") == "PLAN:" + std::to_string(n + 1) +
                                                 ": a line after the trailer (line " +
                                                 std::to_string(n) + ")");
  // A version 1 plan is refused with the reason.
  nlohmann::ordered_json v1 = nlohmann::ordered_json::parse(lines[0]);
  v1["kvlanes_plan"] = 1;
  CHECK(ReadError(v1.dump() + "\n" + Join(lines, 1, n - 1))
            .find("PLAN:1: kvlanes_plan: plan version 1, this build reads versions 2..5 (version "
                  "1 plans carry no trailer") == 0);
}

TEST_CASE("the header stores the hardware profile; it is read back from anywhere, hash checked") {
  const ReplayConfig cfg = ProfiledConfig(true);
  const ProfileFile file = ReadProfileFile(cfg.hardware.profile);
  const nlohmann::ordered_json h = PlanHeaderJson(cfg, &file);
  REQUIRE(h.contains("hardware_profile"));
  std::ifstream in(kProfile, std::ios::binary);
  const std::string yaml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(h["hardware_profile"]["yaml"] == yaml);
  CHECK(h["hardware_profile"]["fnv1a64"] == Fnv1a64Hex(yaml));
  CHECK(h["hardware_profile"]["path"] == kProfile);
  CHECK(h["hardware_profile"]["name"] == LoadHardwareProfile(kProfile).name);

  // Read from another directory, with the path no longer valid: the stored text is used.
  nlohmann::json moved = nlohmann::json::parse(h.dump());
  moved["hardware_profile"]["path"] = "config/../no/such/profile.yaml";
  const std::optional<PlanProfile> p =
      ResolvePlanProfile(ParsePlanHeader(moved, "p.jsonl"), "", "p.jsonl");
  REQUIRE(p.has_value());
  CHECK(p->path == "config/../no/such/profile.yaml");
  const HardwareProfile direct = LoadHardwareProfile(kProfile);
  CHECK(p->profile.name == direct.name);
  CHECK(p->profile.h2d_gbps == direct.h2d_gbps);
  CHECK(p->profile.layer_token_s == direct.layer_token_s);
  CHECK(p->profile.collectives.size() == direct.collectives.size());

  // An edited profile text no longer matches its hash.
  moved["hardware_profile"]["yaml"] = yaml + "\n# edited\n";
  CHECK_THROWS_WITH_AS(ResolvePlanProfile(ParsePlanHeader(moved, "p.jsonl"), "", "p.jsonl"),
                       doctest::Contains("p.jsonl:1: hardware_profile.fnv1a64: is "), InputError);
  // A plan written without a profile stores none.
  CHECK_FALSE(ResolvePlanProfile(PlanHeaderOf(ProfiledConfig(false), nullptr), "", "p.jsonl"));
}

}  // namespace kvlanes::test

// The report's context block names the build, hashes the effective config, each trace file (size
// and content) and the hardware profile, carries a date only from SOURCE_DATE_EPOCH, and is the
// same bytes on every run.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "policies/registry.h"
#include "sim/predict/content_hash.h"
#include "sim/report/provenance.h"
#include "sim/report/report.h"
#include "traces/build_info.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

constexpr const char* kTrace = KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl";
constexpr const char* kProfile = KVLANES_SOURCE_DIR "/config/profiles/h200.yaml";

std::string FileText(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::ordered_json Report() {
  ReplayConfig cfg;
  ApplyConfigSetting("cache.cp_size=1", cfg);
  ApplyConfigSetting(std::string("hardware.profile=") + kProfile, cfg);
  ValidateConfig(cfg);
  const Trace trace = LoadTrace({kTrace}, std::nullopt, {});
  auto policy = MakePolicy("lru", cfg, trace);
  return RunReplay(cfg, *policy, trace, {}, nullptr);
}

}  // namespace

TEST_CASE("the report's context names the build, the config hash, the traces and the profile") {
  unsetenv("SOURCE_DATE_EPOCH");
  const nlohmann::ordered_json r = Report();
  const nlohmann::ordered_json& c = r["context"];
  CHECK(c["kvlanes"]["version"] == BuildVersion());
  CHECK(c["kvlanes"]["commit"] == BuildCommit());
  CHECK(c["kvlanes"]["build_type"] == BuildType());
  CHECK_FALSE(c["kvlanes"].contains("date"));
  CHECK(c["config_fnv1a64"] == Fnv1a64Hex(nlohmann::json::parse(r["config"].dump()).dump()));
  REQUIRE(c["traces"].size() == 1);
  CHECK(c["traces"][0]["path"] == kTrace);
  CHECK(c["traces"][0]["bytes"] == std::filesystem::file_size(kTrace));
  CHECK(c["traces"][0]["fnv1a64"] == Fnv1a64Hex(FileText(kTrace)));
  CHECK(c["hardware_profile"]["path"] == kProfile);
  CHECK(c["hardware_profile"]["fnv1a64"] == Fnv1a64Hex(FileText(kProfile)));
  CHECK(c["hardware_profile"]["name"] == LoadHardwareProfile(kProfile).name);
  // Known values of the hash (FNV-1a 64 test vectors).
  CHECK(Fnv1a64Hex("") == "cbf29ce484222325");
  CHECK(Fnv1a64Hex("a") == "af63dc4c8601ec8c");
  // Deterministic: a second run writes the same bytes.
  CHECK(Report().dump() == r.dump());
}

TEST_CASE("a date appears only from SOURCE_DATE_EPOCH; names that are not files get no hash") {
  setenv("SOURCE_DATE_EPOCH", "1796083200", 1);
  CHECK(BuildContext()["date"] == "2026-12-01T00:00:00Z");
  setenv("SOURCE_DATE_EPOCH", "yesterday", 1);
  CHECK_FALSE(BuildContext().contains("date"));
  unsetenv("SOURCE_DATE_EPOCH");
  const nlohmann::ordered_json c = ReplayContext(ReplayConfig{}, {"(synthetic)"});
  CHECK(c["traces"][0]["bytes"].is_null());
  CHECK(c["traces"][0]["fnv1a64"].is_null());
  CHECK(c["hardware_profile"].is_null());
}

}  // namespace kvlanes::test

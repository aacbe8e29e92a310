// The report's context block names the build, hashes the effective config, each trace file (size
// and XXH64 content hash) and the hardware profile, carries a date only from SOURCE_DATE_EPOCH, and
// is the same bytes on every run.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "io/build_info.h"
#include "policies/registry.h"
#include "sim/predict/content_hash.h"
#include "sim/report/provenance.h"
#include "sim/report/report.h"
#include "traces/trace_reader.h"

namespace kvlanes::test {
namespace {

constexpr const char* kTrace = KVLANES_SOURCE_DIR "/traces/mooncake_excerpt.jsonl";
constexpr const char* kContextProfile = KVLANES_SOURCE_DIR "/config/profiles/h200.yaml";

std::string FileText(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

nlohmann::ordered_json Report() {
  ReplayConfig cfg;
  ApplyConfigSetting("cache.cp_size=1", cfg);
  ApplyConfigSetting(std::string("hardware.profile=") + kContextProfile, cfg);
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
  CHECK(c["traces"][0]["xxh64"] == Xxh64Hex(FileText(kTrace)));
  // The same value from an independent implementation: a plain Python XXH64 written after the
  // specification (it gives the published vectors below) over the 230,740 bytes of the file.
  CHECK(c["traces"][0]["xxh64"] == "094ca76f37c3e3f9");
  CHECK_FALSE(c["traces"][0].contains("fnv1a64"));
  CHECK(c["hardware_profile"]["path"] == kContextProfile);
  CHECK(c["hardware_profile"]["fnv1a64"] == Fnv1a64Hex(FileText(kContextProfile)));
  CHECK(c["hardware_profile"]["name"] == LoadHardwareProfile(kContextProfile).name);
  // Known values of the hash (FNV-1a 64 test vectors).
  CHECK(Fnv1a64Hex("") == "cbf29ce484222325");
  CHECK(Fnv1a64Hex("a") == "af63dc4c8601ec8c");
  // Deterministic: a second run writes the same bytes.
  CHECK(Report().dump() == r.dump());
}

TEST_CASE("the trace hash is XXH64: the published vectors, and the same value fed in pieces") {
  // Seed 0 vectors of the xxHash project (its sanity checks and documentation); the last two are
  // longer than the 32-byte stripe.
  CHECK(Xxh64Hex("") == "ef46db3751d8e999");
  CHECK(Xxh64Hex("a") == "d24ec4f1a98c6e5b");
  CHECK(Xxh64Hex("abc") == "44bc2cf5ad770999");
  CHECK(Xxh64Hex("Call me Ishmael.") == "6d04390fc9d61a90");
  CHECK(Xxh64Hex("Nobody inspects the spammish repetition") == "fbcea83c8a378bf1");
  // 100,003 bytes (i * 131 + i / 7) mod 256; values from the Python implementation named above.
  std::string text(100003, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>((i * 131 + i / 7) % 256);
  CHECK(Xxh64Hex(text) == "11f965d2ca9dff94");
  CHECK(Xxh64Hex(text.substr(0, 31)) == "3a4bddf524c48530");
  CHECK(Xxh64Hex(text.substr(0, 32)) == "a4d75ab355f13155");
  CHECK(Xxh64Hex(text.substr(0, 33)) == "445a4aaaffe45526");
  for (const size_t piece :
       {size_t{1}, size_t{7}, size_t{31}, size_t{32}, size_t{33}, size_t{65536}}) {
    Xxh64 h;
    for (size_t at = 0; at < text.size(); at += piece)
      h.Update(std::string_view(text).substr(at, piece));
    CHECK(h.Hex() == "11f965d2ca9dff94");
  }
}

TEST_CASE("a date appears only from SOURCE_DATE_EPOCH; names that are not files get no hash") {
  setenv("SOURCE_DATE_EPOCH", "1796083200", 1);
  CHECK(BuildContext()["date"] == "2026-12-01T00:00:00Z");
  setenv("SOURCE_DATE_EPOCH", "yesterday", 1);
  CHECK_FALSE(BuildContext().contains("date"));
  unsetenv("SOURCE_DATE_EPOCH");
  const nlohmann::ordered_json c = ReplayContext(ReplayConfig{}, {"(synthetic)"});
  CHECK(c["traces"][0]["bytes"].is_null());
  CHECK(c["traces"][0]["xxh64"].is_null());
  CHECK(c["hardware_profile"].is_null());
}

}  // namespace kvlanes::test

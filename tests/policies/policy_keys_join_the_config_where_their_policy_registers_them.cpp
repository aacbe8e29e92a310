// A policy's own config keys (PolicyKey) are registered with the policy and then read, listed,
// validated and reported like the engine's keys: admission.host_write_min_hits of admit-hits
// keeps its name, default, help, table position and range message; a name key refuses unknown
// values listing the valid ones and is reported only when set.
#include <doctest/doctest.h>

#include <string>

#include "io/input_error.h"
#include "policies/registry.h"
#include "sim/config.h"

namespace kvlanes::test {
namespace {

constexpr std::string_view kModes[] = {"fast", "slow"};
constexpr PolicyKey kTestMode{.key = "policy_keys_test.mode",
                              .help = "a test policy's mode",
                              .type = PolicyKey::Type::kName,
                              .default_name = "fast",
                              .names = kModes};

}  // namespace

TEST_CASE("admission.host_write_min_hits is admit-hits' key, listed where the engine kept it") {
  const std::string help = ConfigKeysHelp();
  const auto at = help.find(
      "  admission.host_write_min_hits: policy admit-hits: hit count at which a node may be "
      "written to host (default 2)\n");
  REQUIRE(at != std::string::npos);
  CHECK(help.find("  hardware.profile:") < at);
  CHECK(at < help.find("  serving.mode:"));

  ReplayConfig cfg;
  const nlohmann::ordered_json j = ConfigToJson(cfg);
  REQUIRE(j.contains("admission.host_write_min_hits"));
  CHECK(j["admission.host_write_min_hits"] == 2);

  const std::vector<PolicyKey> keys = AdmitHitsPolicyKeys();
  REQUIRE(keys.size() == 1);
  ApplyConfigSetting("admission.host_write_min_hits=5", cfg);
  CHECK(keys[0].Integer(cfg) == 5);
  CHECK(ConfigToJson(cfg)["admission.host_write_min_hits"] == 5);

  ApplyConfigSetting("admission.host_write_min_hits=0", cfg);
  try {
    ValidateConfig(cfg);
    FAIL("a threshold of 0 was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "--set admission.host_write_min_hits: must be >= 1");
  }
}

TEST_CASE("a registered name key refuses unknown values and is reported only when set") {
  RegisterPolicyKey(kTestMode);
  RegisterPolicyKey(kTestMode);  // a second policy reading the same knob: kept once
  const std::string help = ConfigKeysHelp();
  const auto first = help.find("  policy_keys_test.mode: a test policy's mode (default \"fast\")");
  REQUIRE(first != std::string::npos);
  CHECK(help.find("  policy_keys_test.mode:", first + 1) == std::string::npos);
  CHECK(help.find("  admission.host_write_min_hits:") < first);
  CHECK(first < help.find("  serving.mode:"));

  ReplayConfig cfg;
  CHECK(kTestMode.Name(cfg) == "fast");
  CHECK_FALSE(ConfigToJson(cfg).contains("policy_keys_test.mode"));
  try {
    ApplyConfigSetting("policy_keys_test.mode=medium", cfg);
    FAIL("an unknown value was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) ==
          "--set policy_keys_test.mode: unknown value 'medium' (valid: fast, slow)");
  }
  ApplyConfigSetting("policy_keys_test.mode=slow", cfg);
  CHECK(kTestMode.Name(cfg) == "slow");
  CHECK(ConfigToJson(cfg)["policy_keys_test.mode"] == "slow");
  ValidateConfig(cfg);
}

}  // namespace kvlanes::test

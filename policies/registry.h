// Every cache policy by name, in one explicit table. The CLI, the YAML config (`policy:`), the
// JSON report and golden files use these names; an unknown name is an error listing them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/policy.h"

namespace kvlanes {

struct PolicyInfo {
  const char* name;
  const char* help;  // one line for --help
  std::unique_ptr<CachePolicy> (*make)(const ReplayConfig& cfg);
};

const std::vector<PolicyInfo>& RegisteredPolicies();
// Throws InputError("policy", ...) listing valid names when unknown.
std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const ReplayConfig& cfg);
std::string PolicyNames();
std::string PoliciesHelp();  // "  name  help" lines

// Factories, one file per policy.
std::unique_ptr<CachePolicy> MakeLanesPolicy(const ReplayConfig& cfg);   // lanes_policy.cpp
std::unique_ptr<CachePolicy> MakeScalarPolicy(const ReplayConfig& cfg);  // scalar_policy.cpp

}  // namespace kvlanes

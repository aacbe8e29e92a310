// Every cache policy by name, in one explicit table. The CLI, the YAML config (`policy:`), the
// JSON report and golden files use these names; an unknown name is an error listing them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/cache/policy.h"
#include "sim/config.h"
#include "traces/trace.h"

namespace kvlanes {

// A factory gets the validated config and the trace that will be replayed: only offline
// policies (oracle) read the trace, and they keep what they need from it (it need not outlive
// them), but they require the engine to replay exactly that trace in order.
using PolicyFactory = std::unique_ptr<CachePolicy> (*)(const ReplayConfig& cfg, const Trace& trace);

struct PolicyInfo {
  const char* name;
  const char* help;  // one line for --help
  PolicyFactory make;
};

const std::vector<PolicyInfo>& RegisteredPolicies();
// Besides the table, any `NAME+tinylfu` is a policy, NAME a table name that is neither a
// composite nor `oracle` (the oracle decides its own admission); the table lists the
// combinations that the conformance and golden tests pin.
// Throws InputError("policy", ...) listing valid names when unknown.
std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const ReplayConfig& cfg,
                                        const Trace& trace);
// Throws InputError(field, ...) listing valid names when `name` is not registered.
void CheckPolicyName(const std::string& name, const std::string& field = "policy");
std::string PolicyNames();
std::string PoliciesHelp();  // "  name  help" lines

// Factories, one file per policy (name_policy.cpp).
std::unique_ptr<CachePolicy> MakeLanesPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeScalarPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeLruPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeLfuPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeFifoPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeSlruPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeOraclePolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeAdmitHitsPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeAdmitOwnerPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeLaneBalancePolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeS3FifoPolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeSievePolicy(const ReplayConfig& cfg, const Trace& trace);
std::unique_ptr<CachePolicy> MakeArcPolicy(const ReplayConfig& cfg, const Trace& trace);
// `base+tinylfu`: policy `base` with TinyLFU device admission (tinylfu_policy.cpp).
// REQUIRES: `base` names a registered policy that is neither a composite nor `oracle`.
std::unique_ptr<CachePolicy> MakeTinyLfuComposite(const std::string& base, const ReplayConfig& cfg,
                                                  const Trace& trace);

}  // namespace kvlanes

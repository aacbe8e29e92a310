// Every cache policy by name, in one explicit table. The CLI, the YAML config (`policy:`), the
// JSON report and golden files use these names; an unknown name is an error listing them.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "policies/policy_inputs.h"
#include "sim/cache/policy.h"
#include "sim/config.h"
#include "traces/trace.h"

namespace kvlanes {

// A factory gets the validated config, the trace that will be replayed and the run's cost model
// (PolicyInputs).
using PolicyFactory = std::unique_ptr<CachePolicy> (*)(const PolicyInputs& in);

struct PolicyInfo {
  const char* name;
  const char* help;  // one line for --help
  PolicyFactory make;
  // The config keys the policy owns (its knobs), registered with the config (RegisterPolicyKey)
  // when the policy is: the YAML file, --set, --help and validation find them there.
  std::vector<PolicyKey> keys = {};
};

// The built-in table followed by the policies added with RegisterPolicy, in registration order.
const std::vector<PolicyInfo>& RegisteredPolicies();
// Adds a policy defined outside this repository (docs/policies.md, "Out-of-tree policies"), so
// every command, `policies: all` in a regress suite and the help list it like a built-in one.
// REQUIRES: called before any replay starts (a static PolicyRegistrar, or main before
// kvlanes::cli::Main); `info.name` follows the naming rule of docs/architecture.md and is not
// taken (aborts otherwise: two policies of one name would make every result ambiguous); the
// strings have static storage.
void RegisterPolicy(const PolicyInfo& info);
// Registers a policy at static initialization: `const kvlanes::PolicyRegistrar r{"name", "help",
// &MakeMyPolicy};` at namespace scope in a file of the executable (with its keys as a fourth
// argument, when it has any).
struct PolicyRegistrar {
  PolicyRegistrar(const char* name, const char* help, PolicyFactory make,
                  std::vector<PolicyKey> keys = {}) {
    RegisterPolicy(PolicyInfo{name, help, make, std::move(keys)});
  }
};
// Besides the table, any `NAME+tinylfu` is a policy, NAME a table name that is neither a
// composite nor `oracle` (the oracle decides its own admission); the table lists the
// combinations that the conformance and golden tests pin.
// Throws InputError("policy", ...) listing valid names when unknown.
std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const PolicyInputs& in);
// The same with the cost model built here (PolicyCostModel): for a caller that makes one policy
// per run. A caller that makes several (a replica each) builds the cost model once and passes it.
std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const ReplayConfig& cfg,
                                        const Trace& trace);
// Throws InputError(field, ...) listing valid names when `name` is not registered.
void CheckPolicyName(const std::string& name, const std::string& field = "policy");
std::string PolicyNames();
std::string PoliciesHelp();  // "  name  help" lines

// Factories, one file per policy (name_policy.cpp).
std::unique_ptr<CachePolicy> MakeLanesPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeScalarPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeLruPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeLfuPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeFifoPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeSlruPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeOraclePolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeAdmitHitsPolicy(const PolicyInputs& in);
std::vector<PolicyKey> AdmitHitsPolicyKeys();
std::unique_ptr<CachePolicy> MakeAdmitOwnerPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeLaneBalancePolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeS3FifoPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeSievePolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeArcPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeSeenLruPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeSeenLruHostPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeSeenRatePolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeGdsfPolicy(const PolicyInputs& in);
std::unique_ptr<CachePolicy> MakeGdsfConvPolicy(const PolicyInputs& in);
// `base+tinylfu`: policy `base` with TinyLFU device admission (tinylfu_policy.cpp).
// REQUIRES: `base` names a registered policy that is neither a composite nor `oracle`.
std::unique_ptr<CachePolicy> MakeTinyLfuComposite(const std::string& base, const PolicyInputs& in);
// `base+bypass`: policy `base` with the online bypass rule (bypass_policy.cpp).
// REQUIRES: `base` names a registered policy other than `oracle`, not a composite, or such a
// policy's `+tinylfu` composite.
std::unique_ptr<CachePolicy> MakeBypassComposite(const std::string& base, const PolicyInputs& in);

}  // namespace kvlanes

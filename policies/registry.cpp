#include "policies/registry.h"

#include "traces/input_error.h"

namespace kvlanes {

const std::vector<PolicyInfo>& RegisteredPolicies() {
  static const std::vector<PolicyInfo> table = {
      {"lanes", "owner-lane aware eviction per deficit lane, counting ancestors the cascade unlocks",
       &MakeLanesPolicy},
      {"scalar", "baseline: rank-wide total capacity; lane shortfalls drop the request's pages",
       &MakeScalarPolicy},
      {"lru", "lanes planner, least recently used first (ignores cache.eviction)", &MakeLruPolicy},
      {"lfu", "lanes planner, least frequently used first, then LRU (ignores cache.eviction)",
       &MakeLfuPolicy},
      {"fifo", "lanes planner, oldest node first (ignores cache.eviction)", &MakeFifoPolicy},
      {"slru", "lanes planner, segmented LRU: hit once before hit twice (ignores cache.eviction)",
       &MakeSlruPolicy},
      {"oracle", "offline bound: evict the page used farthest in the future, bypass pages used later",
       &MakeOraclePolicy},
      {"admit-hits", "lanes + host writes only at hit count >= admission.host_write_min_hits",
       &MakeAdmitHitsPolicy},
      {"admit-owner", "lanes + refuse a host write when its owner lane holds only locked or newer pages",
       &MakeAdmitOwnerPolicy},
      {"lane-balance", "lanes + new pages to the lanes with most free pages (ignores cache.placement)",
       &MakeLaneBalancePolicy},
  };
  return table;
}

std::string PolicyNames() {
  std::string s;
  for (const auto& p : RegisteredPolicies()) {
    s += s.empty() ? "" : ", ";
    s += p.name;
  }
  return s;
}

std::string PoliciesHelp() {
  std::string s;
  for (const auto& p : RegisteredPolicies()) {
    std::string name = p.name;
    name.resize(std::max<size_t>(name.size() + 2, 14), ' ');
    s += "  " + name + p.help + "\n";
  }
  return s;
}

void CheckPolicyName(const std::string& name, const std::string& field) {
  for (const auto& p : RegisteredPolicies())
    if (name == p.name) return;
  throw InputError("", 0, field, "unknown policy '" + name + "' (valid: " + PolicyNames() + ")");
}

std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const ReplayConfig& cfg, const Trace& trace) {
  for (const auto& p : RegisteredPolicies())
    if (name == p.name) return p.make(cfg, trace);
  CheckPolicyName(name);
  return nullptr;  // not reached: CheckPolicyName throws
}

}  // namespace kvlanes

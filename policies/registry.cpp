#include "policies/registry.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "traces/input_error.h"

namespace kvlanes {

namespace {

// The table RegisteredPolicies returns; RegisterPolicy appends to it before any replay starts.
std::vector<PolicyInfo>& Table() {
  static std::vector<PolicyInfo> table = {
      {"lanes",
       "owner-lane aware eviction per deficit lane, counting ancestors the cascade unlocks",
       &MakeLanesPolicy},
      {"scalar", "baseline: rank-wide total capacity; lane shortfalls drop the request's pages",
       &MakeScalarPolicy},
      {"lru", "lanes planner, least recently used first (ignores cache.eviction)", &MakeLruPolicy},
      {"lfu", "lanes planner, least frequently used first, then LRU (ignores cache.eviction)",
       &MakeLfuPolicy},
      {"fifo", "lanes planner, oldest node first (ignores cache.eviction)", &MakeFifoPolicy},
      {"slru", "lanes planner, segmented LRU: hit once before hit twice (ignores cache.eviction)",
       &MakeSlruPolicy},
      {"oracle",
       "offline bound: evict the page used farthest in the future, bypass pages used later",
       &MakeOraclePolicy},
      {"admit-hits", "lanes + host writes only at hit count >= admission.host_write_min_hits",
       &MakeAdmitHitsPolicy},
      {"admit-owner",
       "lanes + refuse a host write when its owner lane holds only locked or newer pages",
       &MakeAdmitOwnerPolicy},
      {"lane-balance",
       "lanes + new pages to the lanes with most free pages (ignores cache.placement)",
       &MakeLaneBalancePolicy},
      {"s3fifo", "S3-FIFO on nodes: small FIFO filter (10%), main FIFO with reinsertion, ghosts",
       &MakeS3FifoPolicy},
      {"sieve", "SIEVE on nodes: FIFO with visited bits and a sweeping hand", &MakeSievePolicy},
      {"arc", "ARC on nodes: seen-once and reused LRU lists, ghost-tuned target split",
       &MakeArcPolicy},
      {"lru+tinylfu", "lru with TinyLFU admission (any NAME+tinylfu works)",
       [](const ReplayConfig& c, const Trace& t) { return MakeTinyLfuComposite("lru", c, t); }},
      {"s3fifo+tinylfu", "s3fifo with TinyLFU admission",
       [](const ReplayConfig& c, const Trace& t) { return MakeTinyLfuComposite("s3fifo", c, t); }},
      {"sieve+tinylfu", "sieve with TinyLFU admission",
       [](const ReplayConfig& c, const Trace& t) { return MakeTinyLfuComposite("sieve", c, t); }},
      {"arc+tinylfu", "arc with TinyLFU admission",
       [](const ReplayConfig& c, const Trace& t) { return MakeTinyLfuComposite("arc", c, t); }},
  };
  return table;
}

bool ValidPolicyName(std::string_view name) {
  if (name.empty()) return false;
  for (char ch : name)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' ||
          ch == '+'))
      return false;
  return true;
}

}  // namespace

const std::vector<PolicyInfo>& RegisteredPolicies() { return Table(); }

void RegisterPolicy(const PolicyInfo& info) {
  const std::string_view name = info.name ? info.name : "";
  const char* why = nullptr;
  if (!ValidPolicyName(name)) why = "a policy name is lower case letters, digits, '_', '-', '+'";
  if (!info.make) why = "no factory";
  for (const auto& p : Table())
    if (name == p.name) why = "the name is taken";
  if (why) {
    std::fprintf(stderr, "kvlanes: cannot register policy '%s': %s\n", info.name ? info.name : "",
                 why);
    std::abort();
  }
  Table().push_back(PolicyInfo{info.name, info.help ? info.help : "", info.make});
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

namespace {

constexpr std::string_view kTinyLfuSuffix = "+tinylfu";

const PolicyInfo* FindInTable(std::string_view name) {
  for (const auto& p : RegisteredPolicies())
    if (name == p.name) return &p;
  return nullptr;
}

// The base of a `NAME+tinylfu` composite not in the table, or "" when `name` is none.
std::string_view TinyLfuBase(std::string_view name) {
  if (name.size() <= kTinyLfuSuffix.size() || !name.ends_with(kTinyLfuSuffix)) return {};
  const std::string_view base = name.substr(0, name.size() - kTinyLfuSuffix.size());
  if (base == "oracle" || base.find('+') != std::string_view::npos || FindInTable(base) == nullptr)
    return {};
  return base;
}

}  // namespace

void CheckPolicyName(const std::string& name, const std::string& field) {
  if (FindInTable(name) != nullptr || !TinyLfuBase(name).empty()) return;
  throw InputError("", 0, field,
                   "unknown policy '" + name + "' (valid: " + PolicyNames() +
                       ", or NAME+tinylfu for NAME other than oracle)");
}

std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const ReplayConfig& cfg,
                                        const Trace& trace) {
  if (const PolicyInfo* p = FindInTable(name)) return p->make(cfg, trace);
  CheckPolicyName(name);
  return MakeTinyLfuComposite(std::string(TinyLfuBase(name)), cfg, trace);
}

}  // namespace kvlanes

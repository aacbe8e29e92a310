#include "policies/registry.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "io/input_error.h"

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
       &MakeAdmitHitsPolicy, AdmitHitsPolicyKeys()},
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
      {"seen_lru",
       "lru crediting 1000 requests of recency per earlier sighting of a node's block (up to 2)",
       &MakeSeenLruPolicy},
      {"seen_lru_host",
       "seen_lru + host writes only of nodes whose block 3 requests have contained",
       &MakeSeenLruHostPolicy},
      {"seen_rate",
       "evicts the lowest reuse rate: (earlier sightings of a node's block + 0.3) / (age + 50)",
       &MakeSeenRatePolicy},
      {"gdsf",
       "greedy-dual-size-frequency: clock + sightings x compute a hit saves per page (depth)",
       &MakeGdsfPolicy},
      {"gdsf_conv",
       "gdsf keeping a conversation's blocks for a keep time learned from its inter-turn gaps",
       &MakeGdsfConvPolicy},
      {"lru+tinylfu", "lru with TinyLFU admission (any NAME+tinylfu works)",
       [](const PolicyInputs& in) { return MakeTinyLfuComposite("lru", in); }},
      {"s3fifo+tinylfu", "s3fifo with TinyLFU admission",
       [](const PolicyInputs& in) { return MakeTinyLfuComposite("s3fifo", in); }},
      {"sieve+tinylfu", "sieve with TinyLFU admission",
       [](const PolicyInputs& in) { return MakeTinyLfuComposite("sieve", in); }},
      {"arc+tinylfu", "arc with TinyLFU admission",
       [](const PolicyInputs& in) { return MakeTinyLfuComposite("arc", in); }},
      {"lru+bypass",
       "lru, bypassing new pages whose last reuse interval exceeds the eviction age (any "
       "NAME+bypass works)",
       [](const PolicyInputs& in) { return MakeBypassComposite("lru", in); }},
  };
  static const bool keys_registered = [] {
    for (const PolicyInfo& p : table)
      for (const PolicyKey& k : p.keys) RegisterPolicyKey(k);
    return true;
  }();
  (void)keys_registered;
  return table;
}

// The built-in policies' keys join the config's table before main runs, so a config file read
// before any policy is made knows them.
[[maybe_unused]] const bool kBuiltInPolicyKeys = (Table(), true);

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
  for (const PolicyKey& k : info.keys) RegisterPolicyKey(k);
  Table().push_back(PolicyInfo{info.name, info.help ? info.help : "", info.make, info.keys});
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
constexpr std::string_view kBypassSuffix = "+bypass";

const PolicyInfo* FindInTable(std::string_view name) {
  for (const auto& p : RegisteredPolicies())
    if (name == p.name) return &p;
  return nullptr;
}

// What `name` strips to when it is a composite built from its suffix: `NAME+tinylfu` (NAME a
// table name that is neither a composite nor `oracle`) or `NAME+bypass` (NAME such a table name
// or its `+tinylfu` composite); "" when `name` is neither.
std::string_view CompositeBase(std::string_view name, std::string_view* suffix) {
  for (std::string_view s : {kBypassSuffix, kTinyLfuSuffix}) {
    if (name.size() <= s.size() || !name.ends_with(s)) continue;
    const std::string_view base = name.substr(0, name.size() - s.size());
    *suffix = s;
    if (base == "oracle") return {};
    if (base.find('+') == std::string_view::npos) return FindInTable(base) ? base : "";
    // Only bypass wraps a composite, and only a TinyLFU one.
    if (s != kBypassSuffix || !base.ends_with(kTinyLfuSuffix)) return {};
    std::string_view inner;
    return CompositeBase(base, &inner).empty() ? "" : base;
  }
  return {};
}

}  // namespace

void CheckPolicyName(const std::string& name, const std::string& field) {
  std::string_view suffix;
  if (FindInTable(name) != nullptr || !CompositeBase(name, &suffix).empty()) return;
  throw InputError("", 0, field,
                   "unknown policy '" + name + "' (valid: " + PolicyNames() +
                       ", or NAME+tinylfu, NAME+bypass, NAME+tinylfu+bypass for NAME other "
                       "than oracle)");
}

std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const PolicyInputs& in) {
  if (const PolicyInfo* p = FindInTable(name)) return p->make(in);
  CheckPolicyName(name);
  std::string_view suffix;
  const std::string base(CompositeBase(name, &suffix));
  if (suffix == kBypassSuffix) return MakeBypassComposite(base, in);
  return MakeTinyLfuComposite(base, in);
}

std::unique_ptr<CachePolicy> MakePolicy(const std::string& name, const ReplayConfig& cfg,
                                        const Trace& trace) {
  CheckPolicyName(name);
  return MakePolicy(name, PolicyInputs{cfg, trace, PolicyCostModel(cfg)});
}

}  // namespace kvlanes

// Small driver for hand-made engine scenarios: one token per page and per block, so a request
// is just its list of page ids, and a test policy whose placement is scripted per extent.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "policies/cascade_planner.h"
#include "policies/configured_policy.h"
#include "sim/engine/replay_engine.h"

namespace kvlanes::test {

// Places each new extent on the owners given in order by `script` (one list per extent; the
// last list repeats); evicts with the lanes or scalar planner.
class ScriptedPolicy final : public ConfiguredPolicy {
 public:
  ScriptedPolicy(const ReplayConfig& cfg, PlanScope scope)
      : ConfiguredPolicy(cfg, nullptr), scope_(scope) {}
  std::string_view Name() const override { return "scripted"; }
  void Script(std::vector<uint16_t> owners) { script_.push_back(std::move(owners)); }
  void PlaceExtent(const CacheView& view, int64_t first_page,
                   std::span<uint16_t> owners) const override {
    if (script_.empty()) return ConfiguredPolicy::PlaceExtent(view, first_page, owners);
    const auto& s = script_.front();
    for (size_t i = 0; i < owners.size(); ++i) owners[i] = s[std::min(i, s.size() - 1)];
    if (script_.size() > 1) script_.pop_front();
  }
  EvictionPlan PlanEviction(const CacheView& view, const LaneDemand& demand) const override {
    return PlanCascadeEviction(view, demand, scope_);
  }

 private:
  PlanScope scope_;
  mutable std::deque<std::vector<uint16_t>> script_;
};

inline ReplayConfig TinyConfig(int cp, int64_t device_per_lane, int64_t host_per_lane = 0) {
  ReplayConfig cfg;
  cfg.cache.page_tokens = 1;
  cfg.cache.cp_size = cp;
  cfg.cache.device_pages_per_lane = device_per_lane;
  cfg.cache.host_pages_per_lane = host_per_lane;
  cfg.cache.load_back_min_tokens = 1;
  cfg.model.layers = 2;
  cfg.model.pools = {{"kv", 8}};
  return cfg;
}

inline Request Tokens(std::vector<uint64_t> ids) {
  Request r;
  r.input_tokens = static_cast<int64_t>(ids.size());
  r.block_ids = std::move(ids);
  return r;
}

// Runs requests through an engine, checking every invariant after each one.
struct Harness {
  Harness(const ReplayConfig& c, CachePolicy& p) : cfg(c), engine(cfg, p, 1) {}
  void Run(std::vector<uint64_t> ids) {
    engine.Process(Tokens(std::move(ids)));
    engine.CheckInvariants();
  }
  const ReplayCounters& c() const { return engine.counters(); }
  const LaneAccount& dev(int lane) const { return engine.ledger().at(Tier::kDevice, lane); }
  const LaneAccount& host(int lane) const { return engine.ledger().at(Tier::kHost, lane); }
  ReplayConfig cfg;
  ReplayEngine engine;
};

}  // namespace kvlanes::test

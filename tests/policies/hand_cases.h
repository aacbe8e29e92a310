// Hand-made scenarios for the queue policies: one token per page and per block; a document is
// its keyed pages plus one unkeyed tail token, so a repeat request hits all its keyed pages
// without splitting the node (the match cap stops at the tail).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "policies/registry.h"
#include "sim/engine/replay_engine.h"
#include "tests/sim/harness.h"

namespace kvlanes::test {

inline Request Doc(std::vector<uint64_t> ids) {
  Request r;
  r.input_tokens = static_cast<int64_t>(ids.size()) + 1;
  r.block_ids = std::move(ids);
  return r;
}

// True when the page keyed `first` is cached on device as the first page of a root child.
inline bool Cached(const RadixTree& tree, uint64_t first) {
  const NodeId id = tree.Child(kRootId, PageKey{first, 0});
  return id != kNoNode && tree.node(id).on_device();
}

// Owns a policy by name and an engine over it; device capacity `pages` on one lane.
struct HandRun {
  HandRun(const std::string& policy, int64_t pages)
      : cfg(TinyConfig(1, pages)),
        trace(EmptyTrace()),
        p(MakePolicy(policy, cfg, trace)),
        engine(cfg, *p, 1) {}
  void Run(std::vector<uint64_t> ids) {
    engine.Process(Doc(std::move(ids)));
    engine.CheckInvariants();
  }
  static Trace EmptyTrace() {
    Trace t;
    t.block_tokens = 1;
    return t;
  }
  HandRun(const HandRun&) = delete;  // the engine refers to cfg and *p
  HandRun& operator=(const HandRun&) = delete;
  const RadixTree& tree() const { return engine.tree(); }
  bool Cached(uint64_t first) const { return test::Cached(engine.tree(), first); }

  ReplayConfig cfg;
  Trace trace;
  std::unique_ptr<CachePolicy> p;
  ReplayEngine engine;
};

}  // namespace kvlanes::test

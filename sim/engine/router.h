// The router of serving mode: which replica (data-parallel CP group, each with its own cache)
// a request goes to when it arrives. Routers decide from a const view of the replicas; the
// scheduler (scheduler.h) applies the choice. docs/serving.md#routing gives each rule and the
// public designs it follows.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "sim/config.h"
#include "sim/engine/replay_engine.h"
#include "traces/trace.h"

namespace kvlanes {

// What a router may read of one replica at the request's arrival.
struct ReplicaView {
  const ReplayEngine* engine = nullptr;
  int64_t load_tokens = 0;  // tokens still to prefill: queued requests' inputs + running remainders
};

class Router {
 public:
  virtual ~Router() = default;
  virtual std::string_view Name() const = 0;
  // The replica index for `req`, in [0, replicas.size()). Must not change the replicas.
  // REQUIRES: replicas non-empty. Called once per request, in arrival order.
  virtual size_t Route(const Request& req, std::span<const ReplicaView> replicas) = 0;
};

// REQUIRES: cfg validated (serving.router a name of kRouterNames).
std::unique_ptr<Router> MakeRouter(const ServingConfig& cfg);

}  // namespace kvlanes

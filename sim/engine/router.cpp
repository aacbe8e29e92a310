#include "sim/engine/router.h"

#include "sim/check.h"

namespace kvlanes {
namespace {

// Request i goes to replica i mod R.
class RoundRobinRouter final : public Router {
 public:
  std::string_view Name() const override { return "round_robin"; }
  size_t Route(const Request&, std::span<const ReplicaView> replicas) override {
    return next_++ % replicas.size();
  }

 private:
  size_t next_ = 0;
};

// The replica with the fewest tokens still to prefill; ties to the lowest index.
size_t LeastLoaded(std::span<const ReplicaView> replicas) {
  size_t best = 0;
  for (size_t r = 1; r < replicas.size(); ++r)
    if (replicas[r].load_tokens < replicas[best].load_tokens) best = r;
  return best;
}

class LeastLoadRouter final : public Router {
 public:
  std::string_view Name() const override { return "least_load"; }
  size_t Route(const Request&, std::span<const ReplicaView> replicas) override {
    return LeastLoaded(replicas);
  }
};

// The replica whose cache holds the longest prefix of the request (device and host pages of
// its radix tree), ties to the least loaded, then the lowest index: the cache-aware choice of
// SGLang's router and of Dynamo's KV router, read from the replicas' real trees instead of an
// approximate tree of routed requests. With no cached prefix anywhere, the least loaded.
class PrefixRouter final : public Router {
 public:
  std::string_view Name() const override { return "prefix"; }
  size_t Route(const Request& req, std::span<const ReplicaView> replicas) override {
    size_t best = 0;
    int64_t best_pages = -1;
    for (size_t r = 0; r < replicas.size(); ++r) {
      const MatchPeek m = replicas[r].engine->Peek(req);
      const int64_t pages = m.device_pages + m.host_pages;
      if (pages > best_pages ||
          (pages == best_pages && replicas[r].load_tokens < replicas[best].load_tokens)) {
        best = r;
        best_pages = pages;
      }
    }
    return best;
  }
};

}  // namespace

std::unique_ptr<Router> MakeRouter(const ServingConfig& cfg) {
  switch (kRouterNames.Parse(cfg.router, "serving.router")) {
    case RouterKind::kRoundRobin:
      return std::make_unique<RoundRobinRouter>();
    case RouterKind::kLeastLoad:
      return std::make_unique<LeastLoadRouter>();
    case RouterKind::kPrefix:
      return std::make_unique<PrefixRouter>();
  }
  KV_CHECK(false, "router '" << cfg.router << "' has no implementation");
  return nullptr;
}

}  // namespace kvlanes

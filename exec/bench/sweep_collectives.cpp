// bench sweep --ranks N: the collectives and peer reads of the gathers, every rank taking part.
#include "exec/bench/sweeper.h"

namespace kvlanes::exec::sweep {
namespace {

// Several ranks: the bare collectives and peer reads of the gathers, every rank taking part.
// Per repeat every rank times the op on its collective stream after a barrier and a gate; the
// repeat's time is the smallest of the ranks' spans (the rank that reached the collective last
// waited for nobody; the others' spans include waiting for it), and the sample is the median of
// those. Only rank 0's document is kept.
class CollectiveSweeper {
 public:
  CollectiveSweeper(const SweepOptions& o, RankBackend& b)
      : o_(o), b_(b), geo_(SweepGeometry(o)), rng_(o.seed + static_cast<uint64_t>(b.rank())) {}

  nlohmann::ordered_json Run() {
    b_.StartEpoch();
    progress_.Plan(3);  // all_gather, all_reduce, peer_read
    const int N = geo_.ranks;
    const int64_t record = geo_.page_layer_bytes();
    const std::vector<int64_t> counts = SweepPageCounts(o_.max_pages);
    Progress("all_gather, " + std::to_string(N) + " ranks");
    for (const int64_t n : counts) {
      const int64_t shard = (n + N - 1) / N;
      const std::vector<double> t = Time(
          [&] { return [this, shard, record] { b_.AllGather(Stream::kComm, shard * record); }; });
      Add(Stats("all_gather", t), N * shard * record,
          "all-gather of " + std::to_string(n) + " pages, one layer, all pools (" +
              std::to_string(shard) + " per rank)");
    }
    Progress("all_reduce, " + std::to_string(N) + " ranks");
    for (const int64_t n : counts) {
      const std::vector<double> t =
          Time([&] { return [this, n, record] { b_.AllReduce(Stream::kComm, 0, n * record); }; });
      Add(Stats("all_reduce", t), n * record,
          "all-reduce of " + std::to_string(n) + " pages, one layer, all pools");
    }
    Progress("peer_read, " + std::to_string(N) + " ranks");
    for (const int64_t n : counts) {
      int64_t peers = 0;
      const std::vector<double> t = Time([&] {
        // Every page from a peer (round robin over them), random slots there: the p2p gather's
        // remote part, one layer, all pools.
        GatherIndex g;
        g.method = GatherMethod::kP2p;
        g.prefix_pages = n;
        g.tags.assign(static_cast<size_t>(n), PageTag{});
        g.src_slot = RandomSlots(rng_, geo_.device_slots, n);
        for (int64_t i = 0; i < n; ++i)
          g.src_rank.push_back(static_cast<int32_t>((b_.rank() + 1 + i % (N - 1)) % N));
        peers = std::min<int64_t>(n, N - 1);
        auto keep = std::make_shared<GatherIndex>(std::move(g));
        b_.PrepareGather(*keep);
        const int64_t l = static_cast<int64_t>(rng_() % static_cast<uint64_t>(geo_.layers));
        return [this, keep, l] { GatherLayer(b_, *keep, Stream::kComm, l); };
      });
      nlohmann::ordered_json x = Stats("peer_read", t);
      x["peers"] = peers;
      Add(std::move(x), n * record,
          "peer reads of " + std::to_string(n) + " pages, one layer, all pools");
    }

    nlohmann::ordered_json ctx;
    ctx["ranks"] = N;
    ctx["geometry"] =
        GeometryJson(geo_, std::string(kernels::HostLayoutName(geo_.host_layout)), "none");
    ctx["timing"] =
        "per repeat the smallest rank span (after a barrier and a gate kernel), median over "
        "repeats";
    ctx["not_measured"] = {
        "tier copies, device copies, copy submission: run the sweep with --ranks 1",
        kForwardNotMeasured};
    return MeasurementDocument(b_, o_, std::move(ctx), std::move(samples_));
  }

 private:
  void Progress(const std::string& what) {
    if (b_.rank() == 0) progress_.Start(o_.progress, what);
  }

  void Add(nlohmann::ordered_json x, int64_t bytes, const std::string& label) {
    x["ranks"] = geo_.ranks;
    x["bytes"] = bytes;
    x["label"] = label;
    samples_.push_back(std::move(x));
  }

  // Every rank runs the same number of repeats; returns, per repeat, the smallest rank's span.
  template <class Make>
  std::vector<double> Time(Make make) {
    std::vector<double> mine;
    for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
      auto run = make();
      if (o_.cache_evict) b_.EvictCaches(Stream::kComm);
      b_.Barrier();
      b_.ForwardLayer(Stream::kComm, 0, {}, kGateSeconds);
      const int m0 = b_.Mark(Stream::kComm);
      run();
      const int m1 = b_.Mark(Stream::kComm);
      b_.Sync();
      const double dt = b_.MarkInterval(m0, m1);
      b_.ReleaseMarks();
      if (rep >= 0) mine.push_back(std::max(dt, 1e-9));
    }
    std::string bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
    const std::vector<std::string> all = b_.AllGatherBytes(bytes);
    std::vector<double> t(mine.size(), 0);
    for (size_t i = 0; i < t.size(); ++i) {
      double best = mine[i];
      for (const std::string& a : all) {
        if (a.size() != bytes.size())
          throw ExecError("sweep: ranks timed different numbers of repeats");
        double v;
        std::memcpy(&v, a.data() + i * sizeof(double), sizeof(double));
        best = std::min(best, v);
      }
      t[i] = best;
    }
    return t;
  }

  const SweepOptions& o_;
  RankBackend& b_;
  ExecGeometry geo_;
  std::mt19937_64 rng_;
  StepProgress progress_;
  nlohmann::ordered_json samples_ = nlohmann::ordered_json::array();
};

}  // namespace

nlohmann::ordered_json SweepCollectives(const SweepOptions& o, RankBackend& b) {
  return CollectiveSweeper(o, b).Run();
}

}  // namespace kvlanes::exec::sweep

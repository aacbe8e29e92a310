// bench sweep: tier copies of one pool (one layer and all layers, both directions) and the
// host time of submitting them; the copy op of the pairs.
#include "exec/bench/sweeper.h"

namespace kvlanes::exec::sweep {

// Tier copies: one pool per call, as the executor issues them.
void Sweeper::TierCopySamples(const std::string& layout, const std::string& mode) {
  const std::vector<int64_t> counts = SweepPageCounts(o_.max_pages);
  const std::vector<int64_t> all_counts =
      SweepPageCounts(std::min(o_.max_pages, o_.max_all_layer_pages));
  for (const TierDirection dir : {TierDirection::kHostToDevice, TierDirection::kDeviceToHost}) {
    const bool h2d = dir == TierDirection::kHostToDevice;
    const Stream s = h2d ? Stream::kH2D : Stream::kD2H;
    for (const int64_t run : o_.slot_runs)  // the copy grid once per slot run length
      for (int k = 0; k < geo_.num_pools(); ++k)
        for (const bool all : {false, true}) {
          if (!Step(std::string("host_copy ") + (h2d ? "h2d" : "d2h") + " pool " +
                    geo_.pool_names[static_cast<size_t>(k)] +
                    (all ? ", all layers" : ", one layer") +
                    (run > 1 ? ", runs of " + std::to_string(run) + " pages" : "")))
            continue;
          for (const int64_t n : all ? all_counts : counts) {
            const int64_t nl = all ? geo_.layers : 1;
            const std::vector<double> t = Time(s, [&] {
              // Named members, not a structured binding: clang 14 cannot capture one.
              const auto slots = run > 1 ? RunSlots(n, run) : Slots(n);
              const std::vector<int32_t>& d = slots.first;
              const std::vector<int32_t>& h = slots.second;
              runs_ = Runs(d, h);
              const int64_t l0 = all ? 0 : RandomLayer();
              return [this, s, k, dir, d, h, l0, nl] {
                b_.TierCopy(s, k, dir, d, h, LayerRange{l0, l0 + nl});
              };
            });
            nlohmann::ordered_json x = Stats("host_copy", t);
            x["direction"] = h2d ? "h2d" : "d2h";
            x["bytes"] = n * nl * geo_.chunk_bytes(k);
            // batch: one copy engine entry per run of adjacent pages (both sides), per layer.
            x["copies"] = o_.tier_copy == "batch" && o_.backend == "cuda" ? runs_ * nl : 1;
            x["chunk_bytes"] = geo_.chunk_bytes(k);
            x["layout"] = layout;
            x["mode"] = mode;
            x["run_pages"] = run;
            x["label"] = "pool " + geo_.pool_names[static_cast<size_t>(k)] + ", " +
                         std::to_string(n) + " pages, " + std::to_string(nl) + " layer(s)" +
                         (run > 1 ? ", runs of " + std::to_string(run) : "");
            samples_.push_back(std::move(x));
          }
        }
  }
}

// Submission: host time of enqueueing a batch of one-layer copies of 8 pages.
void Sweeper::SubmitSamples(const std::string& layout, const std::string& mode) {
  if (!Step("copy_submit")) return;
  for (const TierDirection dir : {TierDirection::kHostToDevice, TierDirection::kDeviceToHost}) {
    const bool h2d = dir == TierDirection::kHostToDevice;
    const Stream s = h2d ? Stream::kH2D : Stream::kD2H;
    for (const int c : o_.submit_batches) {
      std::vector<double> t;
      for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
        std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> sets;
        for (int i = 0; i < c; ++i) sets.push_back(Slots(std::min<int64_t>(8, o_.max_pages)));
        const auto t0 = Clock::now();
        for (int i = 0; i < c; ++i)
          b_.TierCopy(s, i % geo_.num_pools(), dir, sets[static_cast<size_t>(i)].first,
                      sets[static_cast<size_t>(i)].second, LayerRange{0, 1});
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        b_.Sync();
        b_.ReleaseMarks();
        if (rep >= 0) t.push_back(std::max(dt, 1e-9));
      }
      nlohmann::ordered_json x = Stats("copy_submit", t);
      x["copies"] = c;
      x["direction"] = h2d ? "h2d" : "d2h";
      x["layout"] = layout;
      x["mode"] = mode;
      x["label"] = std::to_string(c) + " one-layer copies of 8 pages";
      samples_.push_back(std::move(x));
    }
  }
}

// The ops of the pairs.
PairOp Sweeper::CopyOp(TierDirection dir, Stream s, int64_t n) {
  const bool h2d = dir == TierDirection::kHostToDevice;
  PairOp op{h2d ? "h2d" : "d2h",
            s,
            static_cast<double>(n * geo_.page_layer_bytes()),
            std::string(h2d ? "h2d" : "d2h") + " copy of " + std::to_string(n) +
                " pages, one layer, every pool",
            {}};
  op.make = [this, dir, s, n]() -> std::function<void()> {
    const auto slots = Slots(n);  // not a structured binding: clang 14 cannot capture one
    const std::vector<int32_t>& d = slots.first;
    const std::vector<int32_t>& h = slots.second;
    const int64_t l = RandomLayer();
    return [this, dir, s, d, h, l] {
      for (int k = 0; k < geo_.num_pools(); ++k) b_.TierCopy(s, k, dir, d, h, LayerRange{l, l + 1});
    };
  };
  return op;
}

}  // namespace kvlanes::exec::sweep

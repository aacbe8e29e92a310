// bench sweep: load-backs over a forward pass, per layer and all layers first.
#include "exec/bench/sweeper.h"

namespace kvlanes::exec::sweep {

void Sweeper::LoadBackPassSamples(const std::string& layout, const std::string& mode) {
  for (const bool all : {false, true}) {
    if (!Step(std::string("load-back over a forward pass, ") + (all ? "all layers" : "per layer")))
      continue;
    for (const int64_t run : o_.backup_runs)
      for (const int64_t n : SweepPageCounts(std::min<int64_t>(o_.max_pages, kBackupMaxPages)))
        LoadBackSamples(n, run, all, layout, mode);
  }
}

void Sweeper::LoadBackSamples(int64_t n, int64_t run, bool all_layers, const std::string& layout,
                              const std::string& mode) {
  const int pools = geo_.num_pools();
  std::vector<std::vector<double>> t(static_cast<size_t>(pools));
  const int64_t L = geo_.layers;
  const bool model = o_.forward == "model";
  const int64_t tokens = std::min(n * geo_.page_tokens, o_.backup_forward_tokens);
  for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
    const auto [d, h] = RunSlots(n, run);
    if (model) b_.RequireModelForward().PrepareForward(Work(tokens, 0));
    EvictCachesNow();
    b_.HoldStreams(1.0);
    std::vector<std::vector<std::pair<int, int>>> spans(static_cast<size_t>(pools));
    // Layers [from, to) of every pool on the h2d stream, each pool after the one before.
    const auto load = [&](int64_t from, int64_t to) {
      for (int k = 0; k < pools; ++k) {
        const int m0 = b_.Mark(Stream::kH2D);
        b_.TierCopy(Stream::kH2D, k, TierDirection::kHostToDevice, d, h, LayerRange{from, to});
        spans[static_cast<size_t>(k)].push_back({m0, b_.Mark(Stream::kH2D)});
      }
      return b_.Mark(Stream::kH2D);
    };
    const int all = all_layers ? load(0, L) : -1;
    for (int64_t l = 0; l < L; ++l) {
      b_.Wait(Stream::kCompute, all_layers ? all : load(l, l + 1));
      if (model)
        b_.RequireModelForward().ModelForwardLayer(Stream::kCompute, l, {});
      else
        b_.ForwardLayer(Stream::kCompute, l, {}, kBackupForwardS);
    }
    EndPoolCopyPass(spans, rep, t);
  }
  const int64_t runs = (n + run - 1) / run;
  for (int k = 0; k < pools; ++k) {
    nlohmann::ordered_json x = PoolCopySample("load_back", t[static_cast<size_t>(k)], k,
                                              all_layers ? "all-layers" : "per-layer", all_layers,
                                              n, run, tokens, layout, mode);
    x["label"] = std::string(all_layers ? "all-layer" : "per-layer") + " load-back of " +
                 std::to_string(n) + " pages (" + std::to_string(runs) + " runs), pool " +
                 geo_.pool_names[static_cast<size_t>(k)] + ", before " +
                 (model ? "proxy layers of " + std::to_string(tokens) + " new tokens"
                        : std::string("spin layers"));
    samples_.push_back(std::move(x));
  }
}

}  // namespace kvlanes::exec::sweep

// bench sweep: backups over a forward pass, per-layer and tail, beside a packed gather.
#include "exec/bench/sweeper.h"

namespace kvlanes::exec::sweep {

// Backups over a forward pass, as the executor runs them (docs/calibration.md): per layer a
// packed gather layer of each size in backup_gather_pages (one set of samples per size) on the
// collective stream, then a forward layer of kBackupForwardS that writes the pages backed up
// on the compute stream; per-layer: after each forward layer the d2h stream
// copies that layer of n pages of every pool; tail: after the last layer one all-layer copy per
// pool. The whole pass is enqueued behind the request gate, as the executor with --gate on
// (SweepOptions::backup_gate false: as the host goes, as with --gate off).
void Sweeper::BackupPassSamples(const std::string& layout, const std::string& mode) {
  std::set<int64_t> gathers;
  for (const int64_t g : o_.backup_gather_pages) gathers.insert(std::min<int64_t>(g, o_.max_pages));
  for (const int64_t gp : gathers)
    for (const bool tail : {false, true}) {
      if (!(tail ? o_.backup_tail : o_.backup_per_layer)) continue;
      if (!Step(std::string("backup over a forward pass, ") + (tail ? "tail" : "per-layer") +
                ", gather of " + std::to_string(gp) + " pages beside it"))
        continue;
      for (const int64_t run : o_.backup_runs)
        for (const int64_t n : SweepPageCounts(std::min<int64_t>(o_.max_pages, kBackupMaxPages)))
          BackupSamples(n, run, gp, tail, layout, mode);
    }
}

// One `backup` sample per pool: n pages in runs of `run`, `gather_pages` gathered per layer
// beside the forward pass (0: none).
void Sweeper::BackupSamples(int64_t n, int64_t run, int64_t gather_pages, bool tail,
                            const std::string& layout, const std::string& mode) {
  const int pools = geo_.num_pools();
  std::vector<std::vector<double>> t(static_cast<size_t>(pools));
  const int64_t L = geo_.layers;
  const bool model = o_.forward == "model";
  const int64_t tokens = std::min(n * geo_.page_tokens, o_.backup_forward_tokens);
  // The order the pools are copied in, each after the one before on the copy stream.
  std::vector<int> order(static_cast<size_t>(pools));
  for (int k = 0; k < pools; ++k)
    order[static_cast<size_t>(k)] = o_.backup_pools_reversed ? pools - 1 - k : k;
  for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
    auto [d, h] = RunSlots(n, run);
    if (o_.backup_fresh_host) h = FreshHostSlots(n);
    const GatherIndex g = PackedIdentityIndex(RandomSlots(rng_, geo_.device_slots, gather_pages));
    if (gather_pages > 0) b_.PrepareGather(g);
    std::vector<PageWrite> writes;
    for (size_t i = 0; i < d.size(); ++i)
      writes.push_back(PageWrite{d[i], PageTag{1, 0, static_cast<int64_t>(i)}});
    // Set up before the gate, as the executor does (its forward layers' spans open after).
    if (model) b_.RequireModelForward().PrepareForward(Work(tokens, 0));
    b_.StageForwardWrites(Stream::kCompute, writes);
    EvictCachesNow();
    if (o_.backup_gate) b_.HoldStreams(1.0);
    std::vector<std::vector<std::pair<int, int>>> spans(static_cast<size_t>(pools));
    int fwd = -1;
    for (int64_t l = 0; l < L; ++l) {
      int ready = -1;
      if (gather_pages > 0) {
        if (fwd >= 0) b_.Wait(Stream::kComm, fwd);
        GatherLayer(b_, g, Stream::kComm, l);
        ready = b_.Mark(Stream::kComm);
        b_.Wait(Stream::kCompute, ready);
      }
      // Writes the pages backed up, as the executor: the proxy's layer, then the pages' pattern;
      // or the spin, which writes it.
      if (model)
        b_.RequireModelForward().ModelForwardLayer(Stream::kCompute, l, writes);
      else
        b_.ForwardLayer(Stream::kCompute, l, writes, kBackupForwardS);
      fwd = b_.Mark(Stream::kCompute);
      if (!tail) {
        b_.Wait(Stream::kD2H, fwd);
        for (const int k : order) {
          const int m0 = b_.Mark(Stream::kD2H);
          b_.TierCopy(Stream::kD2H, k, TierDirection::kDeviceToHost, d, h, LayerRange{l, l + 1});
          spans[static_cast<size_t>(k)].push_back({m0, b_.Mark(Stream::kD2H)});
        }
      }
    }
    if (tail) {
      b_.Wait(Stream::kD2H, fwd);
      for (const int k : order) {
        const int m0 = b_.Mark(Stream::kD2H);
        b_.TierCopy(Stream::kD2H, k, TierDirection::kDeviceToHost, d, h, LayerRange{0, L});
        spans[static_cast<size_t>(k)].push_back({m0, b_.Mark(Stream::kD2H)});
      }
    }
    EndPoolCopyPass(spans, rep, t);
  }
  const int64_t runs = (n + run - 1) / run;
  for (int k = 0; k < pools; ++k) {
    nlohmann::ordered_json x =
        PoolCopySample("backup", t[static_cast<size_t>(k)], k, tail ? "tail" : "per-layer", tail, n,
                       run, tokens, layout, mode);
    x["gather_pages"] = gather_pages;
    x["gate"] = o_.backup_gate;
    if (o_.backup_fresh_host) x["host_slots"] = "fresh";
    if (o_.backup_pools_reversed) x["pool_order"] = "reversed";
    x["label"] =
        std::string(tail ? "tail" : "per-layer") + " backup of " + std::to_string(n) + " pages (" +
        std::to_string(runs) + " runs), pool " + geo_.pool_names[static_cast<size_t>(k)] +
        ", beside a forward pass (" +
        (model ? "proxy layers of " + std::to_string(tokens) + " new tokens"
               : std::string("spin")) +
        ")" + (gather_pages > 0 ? " and a " + std::to_string(gather_pages) + "-page gather" : "");
    samples_.push_back(std::move(x));
  }
}

void Sweeper::EndPoolCopyPass(const std::vector<std::vector<std::pair<int, int>>>& spans, int rep,
                              std::vector<std::vector<double>>& t) {
  b_.OpenGate();
  b_.Sync();
  for (size_t k = 0; k < spans.size(); ++k) {
    double sum = 0;
    for (const auto& [a, e] : spans[k]) sum += b_.MarkInterval(a, e);
    if (rep >= 0) t[k].push_back(std::max(sum, 1e-9));
  }
  b_.ReleaseMarks();
}

nlohmann::ordered_json Sweeper::PoolCopySample(const char* kind, const std::vector<double>& t,
                                               int k, const char* schedule, bool one_copy,
                                               int64_t n, int64_t run, int64_t tokens,
                                               const std::string& layout, const std::string& mode) {
  const int64_t L = geo_.layers;
  nlohmann::ordered_json x = Stats(kind, t);
  x["schedule"] = schedule;
  x["bytes"] = n * L * geo_.chunk_bytes(k);
  x["copies"] = one_copy ? 1 : L;
  x["pages"] = n;
  x["layers"] = L;
  x["pool"] = geo_.pool_names[static_cast<size_t>(k)];
  x["run_pages"] = run;
  const bool model = o_.forward == "model";
  x["forward"] = model ? "model" : "synthetic";
  if (model)
    x["forward_tokens"] = tokens;
  else
    x["forward_s"] = kBackupForwardS;
  x["layout"] = layout;
  x["mode"] = mode;
  return x;
}

}  // namespace kvlanes::exec::sweep

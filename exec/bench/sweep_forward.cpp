// bench sweep: the forward-pass proxy per layer kind over the grid of new x prefix tokens, and
// the forward ops of the pairs.
#include "exec/bench/sweeper.h"

namespace kvlanes::exec::sweep {

std::vector<Sweeper::KindLayers> Sweeper::ModelLayerKinds() const {
  std::vector<KindLayers> k;
  for (int64_t l = 0; l < geo_.layers; ++l) {
    const LayerKind lk = LayerKindOf(o_.model_shape, l);
    auto it = std::find_if(k.begin(), k.end(), [&](const KindLayers& x) { return x.kind == lk; });
    if (it == k.end()) {
      k.push_back({lk, l, 1});
    } else {
      ++it->count;
    }
  }
  return k;
}

// The proxy's work of one request at one rank: every new token, over a prefix of whole pages.
ForwardWork& Sweeper::Work(int64_t new_tokens, int64_t prefix_tokens) {
  ForwardWork& w = work_[work_next_++ % work_.size()];
  w.prefix_pages = prefix_tokens / geo_.page_tokens;
  w.new_tokens = new_tokens;
  w.gemm_tokens = -1;
  w.positions.resize(static_cast<size_t>(new_tokens));
  const int64_t first = w.prefix_pages * geo_.page_tokens;
  std::iota(w.positions.begin(), w.positions.end(), static_cast<int32_t>(first));
  return w;
}

int64_t Sweeper::WholePagePrefix(int64_t asked, const char* what) {
  if (asked > MaxPrefixTokens()) {
    skipped_.push_back(std::string(what) + " prefix " + std::to_string(asked) +
                       " tokens: above the dense buffer's " + std::to_string(MaxPrefixTokens()) +
                       " (raise --max-pages)");
    return -1;
  }
  return asked / geo_.page_tokens * geo_.page_tokens;
}

nlohmann::ordered_json Sweeper::ModelLayerSample(const std::vector<double>& mix, int64_t n,
                                                 int64_t p) const {
  nlohmann::ordered_json x = Stats("forward", mix);
  x["forward"] = "model";
  x["preset"] = o_.model_preset;
  x["new_tokens"] = n;
  x["prefix_tokens"] = p;
  x["ranks"] = 1;
  x["layers"] = 1;
  return x;
}

std::vector<double> Sweeper::TimeModelLayer(int64_t n, int64_t p, int64_t layer) {
  return Time(Stream::kCompute, [&] {
    b_.RequireModelForward().PrepareForward(Work(n, p));
    return
        [this, layer] { b_.RequireModelForward().ModelForwardLayer(Stream::kCompute, layer, {}); };
  });
}

// forward "model": one layer of the proxy per layer kind, on the compute stream, per (new
// tokens, prefix) of the grid. The sample's time is the per-layer mean over the model's layers
// (each kind's median weighted by its layer count, per repeat), so `layers` is 1.
void Sweeper::ForwardGridSamples() {
  const ModelShape& ms = o_.model_shape;
  const std::vector<KindLayers> kinds = ModelLayerKinds();
  int64_t kv_bytes = 0;  // all pools of one layer, per token
  for (const int64_t e : geo_.elem_bytes) kv_bytes += e;
  for (const int64_t n : o_.forward_new_tokens)
    for (const int64_t p_asked : o_.forward_prefix_tokens) {
      const int64_t p = WholePagePrefix(p_asked, "forward");
      if (p < 0) continue;
      if (!Step("forward (the model proxy, per layer), " + std::to_string(n) + " new tokens over " +
                std::to_string(p) + " prefix tokens"))
        continue;
      std::vector<double> mix(static_cast<size_t>(o_.repeats), 0.0);
      double flops = 0, bytes = 0;
      nlohmann::ordered_json per_kind = nlohmann::ordered_json::array();
      for (const KindLayers& k : kinds) {
        const std::vector<double> t = TimeModelLayer(n, p, k.first);
        const double w = static_cast<double>(k.count) / static_cast<double>(geo_.layers);
        for (size_t i = 0; i < t.size(); ++i) mix[i] += w * t[i];
        const double kf = LayerFlops(ms, k.kind, n, p), kb = LayerBytes(ms, k.kind, n, p, kv_bytes);
        flops += w * kf;
        bytes += w * kb;
        nlohmann::ordered_json x = Stats("forward", t);
        x.erase("kind");
        x["layer_kind"] = k.kind == LayerKind::kMoe ? "moe" : "dense";
        x["layers"] = k.count;
        x["flops"] = kf;
        x["hbm_bytes"] = kb;
        x["tflops"] = kf / x["median_s"].get<double>() / 1e12;
        x["gbps"] = kb / x["median_s"].get<double>() / 1e9;
        per_kind.push_back(std::move(x));
      }
      nlohmann::ordered_json x = ModelLayerSample(mix, n, p);
      x["flops"] = flops;
      x["hbm_bytes"] = bytes;
      x["tflops"] = flops / x["median_s"].get<double>() / 1e12;
      x["gbps"] = bytes / x["median_s"].get<double>() / 1e9;
      x["per_kind"] = std::move(per_kind);
      x["label"] = "proxy layer (mean over the model's layers), " + std::to_string(n) +
                   " new tokens over " + std::to_string(p) + " prefix tokens";
      char line[160];  // one line per shape, so a run cut short still shows how far it got
      std::snprintf(line, sizeof line,
                    "forward %lld new over %lld prefix: %.3f ms a layer, %.0f TFLOP/s",
                    static_cast<long long>(n), static_cast<long long>(p),
                    1e3 * x["median_s"].get<double>(), x["tflops"].get<double>());
      Note(line);
      samples_.push_back(std::move(x));
    }
}

// forward "model", passes of several requests: for each k of forward_pass_requests and each
// new-token count n of the grid, one layer per kind of a pass of k requests of n new tokens over
// no prefix, as `exec` runs it (docs/forward_pass.md, "A pass of several requests"): the first
// request's layer runs the GEMMs of the pass's k n tokens and its own attention, each other
// request's layer its attention alone. Each is timed on its own, as the executor measures a pass
// as the sum of its parts; a repeat's pass is the first's time plus k - 1 times the other's.
// Samples as the grid's, with pass_requests k.
void Sweeper::ForwardPassSamples() {
  const std::vector<KindLayers> kinds = ModelLayerKinds();
  for (const int64_t k : o_.forward_pass_requests)
    for (const int64_t n : o_.forward_new_tokens) {
      if (!Step("forward pass of " + std::to_string(k) + " requests of " + std::to_string(n) +
                " new tokens (the model proxy, per layer)"))
        continue;
      std::vector<double> mix(static_cast<size_t>(o_.repeats), 0.0);
      nlohmann::ordered_json per_kind = nlohmann::ordered_json::array();
      for (const KindLayers& kl : kinds) {
        auto layer = [&](int64_t gemm_tokens) {
          return Time(Stream::kCompute, [&, gemm_tokens] {
            ForwardWork& w = Work(n, 0);
            w.gemm_tokens = gemm_tokens;
            b_.RequireModelForward().PrepareForward(w);
            const int64_t l = kl.first;
            return
                [this, l] { b_.RequireModelForward().ModelForwardLayer(Stream::kCompute, l, {}); };
          });
        };
        const std::vector<double> first = layer(k * n), other = layer(0);
        std::vector<double> t(first.size());
        const double w = static_cast<double>(kl.count) / static_cast<double>(geo_.layers);
        for (size_t i = 0; i < t.size(); ++i) {  // both o_.repeats long
          t[i] = first[i] + static_cast<double>(k - 1) * other[i];
          mix[i] += w * t[i];
        }
        nlohmann::ordered_json x = Stats("forward", t);
        x.erase("kind");
        x["layer_kind"] = kl.kind == LayerKind::kMoe ? "moe" : "dense";
        x["layers"] = kl.count;
        x["first_median_s"] = Stats("forward", first)["median_s"];
        x["other_median_s"] = Stats("forward", other)["median_s"];
        per_kind.push_back(std::move(x));
      }
      nlohmann::ordered_json x = ModelLayerSample(mix, n, 0);
      x["pass_requests"] = k;
      x["per_kind"] = std::move(per_kind);
      x["label"] = "proxy layer of a pass of " + std::to_string(k) + " requests of " +
                   std::to_string(n) + " new tokens (mean over the model's layers)";
      char line[160];
      std::snprintf(line, sizeof line, "forward pass of %lld x %lld new: %.3f ms a layer",
                    static_cast<long long>(k), static_cast<long long>(n),
                    1e3 * x["median_s"].get<double>());
      Note(line);
      samples_.push_back(std::move(x));
    }
}

// Runs `layer` of the proxy over (n, p) back to back for sustain_s.
void Sweeper::Sustain(int64_t n, int64_t p, int64_t layer) {
  ForwardWork& load = Work(n, p);
  b_.RequireModelForward().PrepareForward(load);
  const auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < o_.sustain_s) {
    for (int i = 0; i < 4; ++i)
      b_.RequireModelForward().ModelForwardLayer(Stream::kCompute, layer, {});
    b_.Sync();
  }
}

// forward "model", sustained: per (new tokens, prefix) of sustain_*, each kind's layer run back
// to back for sustain_s (the GPU drawn towards its power limit, as back-to-back serving passes
// draw it), then timed as the grid times it. One sample per point, as the grid's with "load":
// "sustained"; calibrate takes each kind's ratio to the grid sample of the same point.
void Sweeper::ForwardSustainSamples() {
  const std::vector<KindLayers> kinds = ModelLayerKinds();
  for (const int64_t n : o_.sustain_new_tokens)
    for (const int64_t p_asked : o_.sustain_prefix_tokens) {
      const int64_t p = WholePagePrefix(p_asked, "sustained");
      if (p < 0) continue;
      if (!Step("forward sustained (the model proxy back to back, per layer), " +
                std::to_string(n) + " new tokens over " + std::to_string(p) + " prefix tokens"))
        continue;
      std::vector<double> mix(static_cast<size_t>(o_.repeats), 0.0);
      nlohmann::ordered_json per_kind = nlohmann::ordered_json::array();
      for (const KindLayers& k : kinds) {
        Sustain(n, p, k.first);
        const std::vector<double> t = TimeModelLayer(n, p, k.first);
        const double w = static_cast<double>(k.count) / static_cast<double>(geo_.layers);
        for (size_t i = 0; i < t.size(); ++i) mix[i] += w * t[i];
        nlohmann::ordered_json x = Stats("forward", t);
        x.erase("kind");
        x["layer_kind"] = k.kind == LayerKind::kMoe ? "moe" : "dense";
        x["layers"] = k.count;
        per_kind.push_back(std::move(x));
      }
      nlohmann::ordered_json x = ModelLayerSample(mix, n, p);
      x["load"] = "sustained";
      x["sustain_s"] = o_.sustain_s;
      x["per_kind"] = std::move(per_kind);
      x["label"] = "proxy layer after " + std::to_string(o_.sustain_s) + " s back to back, " +
                   std::to_string(n) + " new tokens over " + std::to_string(p) + " prefix tokens";
      char line[160];
      std::snprintf(
          line, sizeof line, "forward sustained %lld new over %lld prefix: %.3f ms a layer",
          static_cast<long long>(n), static_cast<long long>(p), 1e3 * x["median_s"].get<double>());
      Note(line);
      samples_.push_back(std::move(x));
    }
}

PairOp Sweeper::SyntheticForwardOp(double busy_s) {
  char what[64];
  std::snprintf(what, sizeof what, "synthetic forward layer of %g s", busy_s);
  PairOp op{"forward", Stream::kCompute, 0, what, {}};
  op.busy_s = busy_s;
  op.make = [this, busy_s]() -> std::function<void()> {
    const int64_t l = RandomLayer();
    return [this, l, busy_s] { b_.ForwardLayer(Stream::kCompute, l, {}, busy_s); };
  };
  return op;
}

PairOp Sweeper::ModelForwardOp(int64_t n, int64_t p, const KindLayers& k) {
  PairOp op{"forward",
            Stream::kCompute,
            0,
            std::string("proxy ") + (k.kind == LayerKind::kMoe ? "moe" : "dense") + " layer, " +
                std::to_string(n) + " new tokens over " + std::to_string(p) + " prefix tokens",
            {}};
  op.make = [this, n, p, k]() -> std::function<void()> {
    b_.RequireModelForward().PrepareForward(Work(n, p));
    const int64_t l = k.first;
    return [this, l] { b_.RequireModelForward().ModelForwardLayer(Stream::kCompute, l, {}); };
  };
  return op;
}

}  // namespace kvlanes::exec::sweep

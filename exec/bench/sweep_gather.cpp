// bench sweep: one layer of a packed gather at one rank, the gather op of the pairs, and gather
// layers timed after a forward layer (the after-forward ratios).
#include "exec/bench/sweeper.h"
#include "methods/gather_method.h"

namespace kvlanes::exec::sweep {

// One layer of a packed gather at one rank: pack the owned pages, unpack them into order.
void Sweeper::PackedGatherSamples() {
  const std::vector<int64_t> counts = SweepPageCounts(o_.max_pages);
  if (!Step("device_copy (packed gather layer)")) return;
  for (const int64_t n : counts) {
    const std::vector<double> t = Time(Stream::kComm, [&] {
      const auto [d, h] = Slots(n);
      (void)h;
      // The index upload is the gather's once-per-request part: enqueued before the timed span.
      auto keep = std::make_shared<GatherIndex>(PackedIdentityIndex(d));
      b_.PrepareGather(*keep);
      const int64_t l = RandomLayer();
      return [this, keep, l] { GatherLayer(b_, *keep, Stream::kComm, l); };
    });
    nlohmann::ordered_json x = Stats("device_copy", t);
    x["bytes"] = 2 * n * geo_.page_layer_bytes();
    x["op"] = "copy";
    x["kernels"] = 2;
    x["variant"] = "gather_packed";
    x["label"] = "pack + unpack of " + std::to_string(n) + " pages, one layer, all pools";
    samples_.push_back(std::move(x));
    if (geo_.ranks == 1) OneKernelGatherSample(n);
  }
}

// One layer of each one-kernel gather at cp_size 1, of the n pages the packed layer gathered:
// p2p (the peer gather kernel over the rank's own pools) and dense (the fused scatter, every page
// owned). What such a layer takes beyond a kernel of the packed layer's fit is the method's own
// cost per layer (calibrate notes it, fits nothing from it).
void Sweeper::OneKernelGatherSample(int64_t n) {
  for (const GatherMethod m : {GatherMethod::kP2p, GatherMethod::kDense}) {
    const std::vector<double> t = Time(Stream::kComm, [&] {
      const auto [d, h] = Slots(n);
      (void)h;
      // Every page on this rank (rank 0 of 1), indexed as the executor indexes the method.
      std::vector<PrefixPage> prefix;
      for (const int32_t slot : d) prefix.push_back({0, static_cast<uint32_t>(slot)});
      auto keep = std::make_shared<GatherIndex>();
      keep->method = m;
      keep->prefix_pages = n;
      keep->tags.assign(d.size(), PageTag{});
      GatherMethodOf(m).BuildIndex(0, 1, prefix, *keep);
      b_.PrepareGather(*keep);
      const int64_t l = RandomLayer();
      return [this, keep, l] { GatherLayer(b_, *keep, Stream::kComm, l); };
    });
    const std::string name = GatherMethodOf(m).Name();
    nlohmann::ordered_json x = Stats("device_copy", t);
    x["bytes"] = n * geo_.page_layer_bytes();
    x["op"] = "copy";
    x["kernels"] = 1;
    x["variant"] = "gather_" + name;
    x["label"] = name + " gather of " + std::to_string(n) + " own pages, one layer, all pools";
    samples_.push_back(std::move(x));
  }
}

PairOp Sweeper::GatherOp(int64_t n) {
  PairOp op{"gather",
            Stream::kComm,
            static_cast<double>(2 * n * geo_.page_layer_bytes()),
            "packed gather layer of " + std::to_string(n) + " pages",
            {}};
  op.make = [this, n]() -> std::function<void()> {
    const auto [d, h] = Slots(n);
    (void)h;
    auto g = std::make_shared<GatherIndex>(PackedIdentityIndex(d));
    b_.PrepareGather(*g);
    const int64_t l = RandomLayer();
    return [this, g, l] { GatherLayer(b_, *g, Stream::kComm, l); };
  };
  return op;
}

// As the executor runs a request (prefetch 0): a forward layer, then gather layer l of n fresh
// random slots (the first layer to read them since that forward layer), then another forward
// layer, then layer l + 1 of the same slots. Times both gather layers; behind the request gate.
void Sweeper::FirstGatherSample(const PairOp& fwd, const nlohmann::ordered_json& shape, int64_t n) {
  std::vector<double> first, next;
  for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
    const auto f0 = fwd.make();
    const auto f1 = fwd.make();
    const GatherIndex g = PackedIdentityIndex(RandomSlots(rng_, geo_.device_slots, n));
    b_.PrepareGather(g);
    const int64_t l = geo_.layers > 1 ? RandomLayer() % (geo_.layers - 1) : 0;
    const int64_t l1 = geo_.layers > 1 ? l + 1 : l;
    EvictCachesNow();
    b_.HoldStreams(kPairGateTimeoutS);
    f0();
    b_.Wait(Stream::kComm, b_.Mark(Stream::kCompute));
    const int m0 = b_.Mark(Stream::kComm);
    GatherLayer(b_, g, Stream::kComm, l);
    const int m1 = b_.Mark(Stream::kComm);
    b_.Wait(Stream::kCompute, m1);
    f1();
    b_.Wait(Stream::kComm, b_.Mark(Stream::kCompute));
    const int m2 = b_.Mark(Stream::kComm);
    GatherLayer(b_, g, Stream::kComm, l1);
    const int m3 = b_.Mark(Stream::kComm);
    b_.OpenGate();
    b_.Sync();
    if (rep >= 0) {
      first.push_back(std::max(b_.MarkInterval(m0, m1), 1e-9));
      next.push_back(std::max(b_.MarkInterval(m2, m3), 1e-9));
    }
    b_.ReleaseMarks();
  }
  nlohmann::ordered_json x = Stats("first_gather", first);
  x["next_s"] = Percentile(next, 0.5);
  x["bytes"] = n * geo_.page_layer_bytes();
  x["pages"] = n;
  x["forward"] = o_.forward;
  for (const auto& [k, v] : shape.items()) x[k] = v;
  x["variant"] = "gather_packed";
  x["label"] = "packed gather layer of " + std::to_string(n) + " pages after " + fwd.what +
               ", then the next layer";
  samples_.push_back(std::move(x));
}

}  // namespace kvlanes::exec::sweep

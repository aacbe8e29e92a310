// bench sweep: pairs of ops on separate streams, each alone and both at once (overlap shares).
#include "exec/bench/sweeper.h"

namespace kvlanes::exec::sweep {

// Runs `ops` (one or two) released together by the request gate, warm-up runs first: per
// repeat the first op's span, the second's and the time both ran at once.
PairTimes Sweeper::TimeTogether(const std::vector<const PairOp*>& ops) {
  PairTimes t;
  for (int rep = -o_.warmup; rep < o_.repeats; ++rep) {
    std::vector<std::function<void()>> runs;
    for (const PairOp* op : ops) runs.push_back(op->make());
    EvictCachesNow();
    b_.HoldStreams(kPairGateTimeoutS);
    std::vector<std::pair<int, int>> marks;
    for (size_t i = 0; i < ops.size(); ++i) {
      const int m0 = b_.Mark(ops[i]->stream);
      runs[i]();
      marks.push_back({m0, b_.Mark(ops[i]->stream)});
    }
    b_.OpenGate();
    b_.Sync();
    // Each op's span from the first op's start: full resolution for lengths and overlaps.
    std::vector<std::pair<double, double>> span;
    for (const auto& [m0, m1] : marks)
      span.push_back({b_.MarkInterval(marks[0].first, m0), b_.MarkInterval(marks[0].first, m1)});
    b_.ReleaseMarks();
    if (rep < 0) continue;
    t.a.push_back(std::max(span[0].second - span[0].first, 1e-9));
    if (ops.size() > 1) {
      t.b.push_back(std::max(span[1].second - span[1].first, 1e-9));
      t.both.push_back(std::max(
          0.0, std::min(span[0].second, span[1].second) - std::max(span[0].first, span[1].first)));
    }
  }
  return t;
}

// One pair: each op alone, then both; one overlap sample per op (victim).
void Sweeper::Pair(const PairOp& a, const PairOp& b) {
  const PairTimes alone_a = TimeTogether({&a});
  const PairTimes alone_b = TimeTogether({&b});
  const PairTimes both = TimeTogether({&a, &b});
  const std::string pair = a.what + " | " + b.what;
  for (const bool first : {true, false}) {
    const PairOp& v = first ? a : b;
    const PairOp& w = first ? b : a;
    nlohmann::ordered_json x = Stats("overlap", first ? both.a : both.b);
    x["victim"] = v.kind;
    x["beside"] = w.kind;
    x["alone_s"] = Percentile(first ? alone_a.a : alone_b.a, 0.5);
    x["overlap_s"] = Percentile(both.both, 0.5);
    x["beside_s"] = Percentile(first ? both.b : both.a, 0.5);
    x["beside_alone_s"] = Percentile(first ? alone_b.a : alone_a.a, 0.5);
    x["victim_bytes"] = v.bytes;
    x["beside_bytes"] = w.bytes;
    x["victim_stream"] = kStreamNames.CName(v.stream);
    x["beside_stream"] = kStreamNames.CName(w.stream);
    x["forward"] = o_.forward;
    if (v.busy_s > 0) x["forward_busy_s"] = v.busy_s;
    x["pair"] = pair;
    x["label"] = v.what + ", beside " + w.what;
    samples_.push_back(std::move(x));
  }
}

// The pairs over sizes: copies beside a gather, beside a forward layer, beside a copy of the
// other direction and of the same one (another stream: one copy engine per direction), and a
// gather beside a forward layer.
void Sweeper::PairSamples() {
  std::set<int64_t> pages;
  for (const int64_t n : o_.pair_pages) pages.insert(std::min<int64_t>(n, o_.max_pages));
  const TierDirection h2d = TierDirection::kHostToDevice, d2h = TierDirection::kDeviceToHost;
  for (const int64_t n : pages) {
    if (!Step("overlap: copies of " + std::to_string(n) + " pages beside a gather and copies"))
      continue;
    Pair(CopyOp(h2d, Stream::kH2D, n), GatherOp(n));
    Pair(CopyOp(d2h, Stream::kD2H, n), GatherOp(n));
    Pair(CopyOp(h2d, Stream::kH2D, n), CopyOp(d2h, Stream::kD2H, n));
    Pair(CopyOp(h2d, Stream::kH2D, n), CopyOp(h2d, Stream::kD2H, n));
    Pair(CopyOp(d2h, Stream::kD2H, n), CopyOp(d2h, Stream::kH2D, n));
  }
  std::vector<PairOp> forwards;
  std::vector<nlohmann::ordered_json> shapes;  // what each forward layer is, for first_gather
  if (o_.forward == "model") {
    std::vector<KindLayers> kinds = ModelLayerKinds();
    const KindLayers k = kinds.back();  // the most common kind last in the presets (MoE)
    for (const auto& [n, p] : o_.pair_forward_shapes) {
      if (p > MaxPrefixTokens()) {
        skipped_.push_back("pair forward prefix " + std::to_string(p) +
                           " tokens: above the dense buffer's " +
                           std::to_string(MaxPrefixTokens()) + " (raise --max-pages)");
        continue;
      }
      const int64_t pp = p / geo_.page_tokens * geo_.page_tokens;
      forwards.push_back(ModelForwardOp(n, pp, k));
      shapes.push_back({{"new_tokens", n}, {"prefix_tokens", pp}});
    }
  } else {
    for (const double f : o_.pair_forward_s) {
      forwards.push_back(SyntheticForwardOp(f));
      shapes.push_back({{"forward_s", f}});
    }
  }
  for (const PairOp& f : forwards)
    for (const int64_t n : pages) {
      if (!Step("overlap: copies and a gather of " + std::to_string(n) + " pages beside a " +
                f.what))
        continue;
      Pair(CopyOp(h2d, Stream::kH2D, n), f);
      Pair(CopyOp(d2h, Stream::kD2H, n), f);
      Pair(GatherOp(n), f);
    }
  std::set<int64_t> first_pages = pages;
  if (!o_.first_gather_pages.empty()) {
    first_pages.clear();
    for (const int64_t n : o_.first_gather_pages)
      first_pages.insert(std::min<int64_t>(n, o_.max_pages));
  }
  for (size_t i = 0; i < forwards.size(); ++i) {
    if (!Step("first_gather: a gather layer after a " + forwards[i].what +
              ", then the next layer of its slots"))
      continue;
    for (const int64_t n : first_pages) FirstGatherSample(forwards[i], shapes[i], n);
  }
}

}  // namespace kvlanes::exec::sweep

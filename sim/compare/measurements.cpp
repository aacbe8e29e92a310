#include "sim/compare/measurements.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "io/input_error.h"
#include "io/input_file.h"
#include "io/json_location.h"
#include "sim/predict/hardware_profile.h"

namespace kvlanes {
namespace {

// Keys every sample may carry: the timing summary of its repeats.
#define KV_COMMON "kind", "median_s", "repeats", "min_s", "max_s", "label"

std::string OptStr(const JsonCursor& s, const char* key) {
  return s.Has(key) ? s.Key(key).Str() : "";
}

// The sample's kind; an unknown one fails at the `kind` key with the valid names and the closest.
SampleKind ParseKind(const JsonCursor& k) {
  const std::string name = k.Str();
  try {
    return kSampleKindNames.Parse(name, "");
  } catch (const InputError& e) {  // given no file and no field, what() is the bare message
    k.Fail(e.what());
  }
}

void ParseHostCopy(const JsonCursor& s, Sample& x) {
  s.OnlyKeys(
      {KV_COMMON, "direction", "bytes", "copies", "chunk_bytes", "layout", "mode", "run_pages"});
  const std::string d = s.Key("direction").Str();
  if (d != "h2d" && d != "d2h") s.Key("direction").Fail("expected h2d or d2h, got '" + d + "'");
  x.to_device = d == "h2d";
  x.bytes = s.Key("bytes").NumAtLeast(0, true);
  x.copies = s.Key("copies").IntAtLeast(1);
  if (s.Has("chunk_bytes")) x.chunk_bytes = s.Key("chunk_bytes").NumAtLeast(0, true);
  if (s.Has("run_pages")) x.run_pages = s.Key("run_pages").IntAtLeast(1);
  x.layout = OptStr(s, "layout");
  x.mode = OptStr(s, "mode");
}

void ParseCopySubmit(const JsonCursor& s, Sample& x) {
  s.OnlyKeys({KV_COMMON, "copies", "direction", "layout", "mode"});
  x.copies = s.Key("copies").IntAtLeast(1);
  x.layout = OptStr(s, "layout");
  x.mode = OptStr(s, "mode");
}

void ParseDeviceCopy(const JsonCursor& s, Sample& x) {
  s.OnlyKeys({KV_COMMON, "bytes", "op", "kernels", "variant"});
  x.bytes = s.Key("bytes").NumAtLeast(0, true);
  const std::string op = s.Key("op").Str();
  if (op != "copy" && op != "fill") s.Key("op").Fail("expected copy or fill, got '" + op + "'");
  x.fill = op == "fill";
  if (s.Has("kernels")) x.kernels = s.Key("kernels").IntAtLeast(1);
  x.variant = OptStr(s, "variant");
}

// all_gather, all_reduce and peer_read (which also names how many peers are read from).
void ParseCollective(const JsonCursor& s, Sample& x) {
  const bool peer = x.kind == SampleKind::kPeerRead;
  if (peer)
    s.OnlyKeys({KV_COMMON, "ranks", "bytes", "peers", "variant"});
  else
    s.OnlyKeys({KV_COMMON, "ranks", "bytes", "variant"});
  x.ranks = s.Key("ranks").IntAtLeast(2);
  x.bytes = s.Key("bytes").NumAtLeast(0, true);
  if (peer) {
    x.peers = s.Key("peers").IntAtLeast(1);
    if (x.peers >= x.ranks)
      s.Key("peers").Fail("must be < ranks (" + std::to_string(x.ranks) + ")");
  }
  x.variant = OptStr(s, "variant");
}

// "forward" of forward and overlap samples: model or synthetic.
std::string ParseForwardMode(const JsonCursor& s) {
  if (!s.Has("forward")) return "";
  const std::string f = s.Key("forward").Str();
  if (f != "model" && f != "synthetic")
    s.Key("forward").Fail("expected model or synthetic, got '" + f + "'");
  return f;
}

void ParseForward(const JsonCursor& s, Sample& x) {
  s.OnlyKeys({KV_COMMON, "new_tokens", "prefix_tokens", "ranks", "layers", "forward", "preset",
              "per_kind", "flops", "hbm_bytes", "tflops", "gbps", "pass_requests", "load",
              "sustain_s"});
  x.new_tokens = s.Key("new_tokens").IntAtLeast(1);
  x.prefix_tokens = s.Key("prefix_tokens").IntAtLeast(0);
  if (s.Has("ranks")) x.ranks = s.Key("ranks").IntAtLeast(1);
  if (s.Has("layers")) x.layers = s.Key("layers").IntAtLeast(1);
  x.forward = ParseForwardMode(s);
  x.preset = OptStr(s, "preset");
  if (s.Has("pass_requests")) {
    if (x.forward != "model") s.Key("pass_requests").Fail("only with forward 'model'");
    x.pass_requests = s.Key("pass_requests").IntAtLeast(2);
    if (x.pass_requests > 64) s.Key("pass_requests").Fail("must be at most 64");
  }
  if (s.Has("load")) {
    const std::string load = s.Key("load").Str();
    if (load != "sustained") s.Key("load").Fail("expected sustained, got '" + load + "'");
    if (x.forward != "model") s.Key("load").Fail("only with forward 'model'");
    if (x.pass_requests > 1) s.Key("load").Fail("not with pass_requests");
    x.sustained = true;
  }
  if (s.Has("sustain_s")) (void)s.Key("sustain_s").NumAtLeast(0, false);
  if (s.Has("per_kind")) {  // each kind's time, and with their layer counts the model's depth
    const JsonCursor k = s.Key("per_kind");
    k.ExpectArray();
    for (size_t i = 0; i < k.Size(); ++i) {
      const JsonCursor e = k.Index(i);
      if (e.Has("layers")) x.model_layers += e.Key("layers").IntAtLeast(1);
      if (!e.Has("layer_kind") || !e.Has("median_s") || !e.Has("layers")) continue;
      const std::string name = e.Key("layer_kind").Str();
      Sample::KindTime t;
      t.kind = name == "dense" ? 0 : name == "moe" ? 1 : -1;
      if (t.kind < 0) e.Key("layer_kind").Fail("expected dense or moe, got '" + name + "'");
      for (const Sample::KindTime& o : x.per_kind)
        if (o.kind == t.kind) e.Key("layer_kind").Fail("'" + name + "' given twice");
      t.layers = e.Key("layers").IntAtLeast(1);
      t.median_s = e.Key("median_s").Seconds(kMaxSampleSeconds, true);
      if (x.pass_requests > 1 && e.Has("first_median_s") && e.Has("other_median_s")) {
        t.first_s = e.Key("first_median_s").Seconds(kMaxSampleSeconds, true);
        t.other_s = e.Key("other_median_s").Seconds(kMaxSampleSeconds, true);
      }
      x.per_kind.push_back(t);
    }
  }
}

void ParseOverlap(const JsonCursor& s, Sample& x) {
  s.OnlyKeys({KV_COMMON, "victim", "beside", "alone_s", "overlap_s", "beside_s", "beside_alone_s",
              "victim_bytes", "beside_bytes", "victim_stream", "beside_stream", "forward",
              "forward_shape", "pair", "forward_busy_s"});
  const auto& kinds = OverlapKindNames();
  for (const auto& [key, field] :
       {std::pair{"victim", &Sample::victim}, std::pair{"beside", &Sample::beside}}) {
    x.*field = s.Key(key).Str();
    if (std::find(kinds.begin(), kinds.end(), x.*field) == kinds.end())
      s.Key(key).Fail("unknown op kind '" + x.*field +
                      "' (known: h2d, d2h, gather, forward, device_copy)");
  }
  x.alone_s = s.Key("alone_s").NumAtLeast(0, true);
  x.overlap_s = s.Key("overlap_s").NumAtLeast(0, false);
  x.beside_s = s.Key("beside_s").NumAtLeast(0, true);
  for (const char* k : {"alone_s", "overlap_s", "beside_s"})
    if (s.Key(k).Num() > kMaxSampleSeconds)
      s.Key(k).Fail("must be at most " + std::to_string(kMaxSampleSeconds) + " s for one sample");
  if (s.Has("victim_bytes")) x.bytes = s.Key("victim_bytes").NumAtLeast(0, false);
  x.forward = ParseForwardMode(s);
  if (s.Has("forward_busy_s")) {
    x.forward_busy_s = s.Key("forward_busy_s").NumAtLeast(0, true);
    if (x.forward_busy_s > kMaxSampleSeconds)
      s.Key("forward_busy_s")
          .Fail("must be at most " + std::to_string(kMaxSampleSeconds) + " s for one sample");
    if (x.forward != "synthetic" || x.victim != "forward")
      s.Key("forward_busy_s")
          .Fail(
              "only for a synthetic forward pass as the victim (forward 'synthetic', victim "
              "'forward')");
  }
}

void ParseFirstGather(const JsonCursor& s, Sample& x) {
  s.OnlyKeys({KV_COMMON, "bytes", "pages", "next_s", "forward", "new_tokens", "prefix_tokens",
              "forward_s", "variant"});
  x.bytes = s.Key("bytes").NumAtLeast(0, true);
  x.pages = s.Key("pages").IntAtLeast(1);
  if (x.pages > HardwareProfile::PagesRatio::kMaxPages)
    s.Key("pages").Fail("must be at most " +
                        std::to_string(HardwareProfile::PagesRatio::kMaxPages) +
                        " pages (a profile's gather_after_forward table holds no more)");
  x.next_s = s.Key("next_s").NumAtLeast(0, true);
  if (x.next_s > kMaxSampleSeconds)
    s.Key("next_s").Fail("must be at most " + std::to_string(kMaxSampleSeconds) +
                         " s for one sample");
  if (s.Has("new_tokens")) x.new_tokens = s.Key("new_tokens").IntAtLeast(0);
  if (s.Has("prefix_tokens")) x.prefix_tokens = s.Key("prefix_tokens").IntAtLeast(0);
  x.forward = ParseForwardMode(s);
  x.variant = OptStr(s, "variant");
}

// The sample's `schedule`: false for per-layer, true for `other`; anything else is refused.
bool OtherThanPerLayer(const JsonCursor& s, const std::string& other) {
  const std::string sch = s.Key("schedule").Str();
  if (sch != "per-layer" && sch != other)
    s.Key("schedule").Fail("expected per-layer or " + other + ", got '" + sch + "'");
  return sch == other;
}

// A backup's or load-back's forward pass: `forward` and, for the proxy, its `forward_tokens`.
void ParseCopyPassForward(const JsonCursor& s, Sample& x) {
  x.forward = ParseForwardMode(s);
  if (s.Has("forward_tokens")) {
    if (x.forward != "model") s.Key("forward_tokens").Fail("only with forward 'model'");
    x.new_tokens = s.Key("forward_tokens").IntAtLeast(1);
  }
}

void ParseBackup(const JsonCursor& s, Sample& x) {
  s.OnlyKeys({KV_COMMON, "schedule", "bytes", "copies", "pages", "layers", "pool", "run_pages",
              "gather_pages", "forward_s", "gate", "mode", "layout", "forward", "forward_tokens",
              "host_slots", "pool_order"});
  x.tail = OtherThanPerLayer(s, "tail");
  x.to_device = false;
  x.bytes = s.Key("bytes").NumAtLeast(0, true);
  x.copies = s.Key("copies").IntAtLeast(1);
  if (s.Has("layers")) x.layers = s.Key("layers").IntAtLeast(1);
  if (s.Has("run_pages")) x.run_pages = s.Key("run_pages").IntAtLeast(1);
  if (s.Has("gather_pages")) x.gather_pages = s.Key("gather_pages").IntAtLeast(0);
  if (s.Has("pages")) x.pages = s.Key("pages").IntAtLeast(1);
  x.mode = OptStr(s, "mode");
  x.layout = OptStr(s, "layout");
  x.pool = OptStr(s, "pool");
  // The sweep's diagnostics (bench sweep --backup-host-slots fresh, --backup-pools-reversed):
  // named in `variant`, which calibrate leaves out.
  const std::string host_slots = OptStr(s, "host_slots"), order = OptStr(s, "pool_order");
  if (!host_slots.empty()) x.variant = "host_slots " + host_slots;
  if (!order.empty()) x.variant += (x.variant.empty() ? "" : ", ") + ("pool_order " + order);
  // The forward pass the backups followed ("": not given, the spin of sweeps before the key).
  ParseCopyPassForward(s, x);
}

// A load-back over a forward pass: as a backup sample, h2d, schedule per-layer or all-layers.
void ParseLoadBack(const JsonCursor& s, Sample& x) {
  s.OnlyKeys({KV_COMMON, "schedule", "bytes", "copies", "pages", "layers", "pool", "run_pages",
              "forward_s", "mode", "layout", "forward", "forward_tokens"});
  x.tail = OtherThanPerLayer(s, "all-layers");
  x.to_device = true;
  x.bytes = s.Key("bytes").NumAtLeast(0, true);
  x.copies = s.Key("copies").IntAtLeast(1);
  x.layers = s.Key("layers").IntAtLeast(1);
  x.pages = s.Key("pages").IntAtLeast(1);
  if (s.Has("run_pages")) x.run_pages = s.Key("run_pages").IntAtLeast(1);
  x.mode = OptStr(s, "mode");
  x.layout = OptStr(s, "layout");
  x.pool = OptStr(s, "pool");
  ParseCopyPassForward(s, x);
}

#undef KV_COMMON

Sample ParseSample(const JsonCursor& s) {
  s.ExpectObject();
  Sample x;
  x.kind = ParseKind(s.Key("kind"));
  switch (x.kind) {
    case SampleKind::kHostCopy:
      ParseHostCopy(s, x);
      break;
    case SampleKind::kCopySubmit:
      ParseCopySubmit(s, x);
      break;
    case SampleKind::kDeviceCopy:
      ParseDeviceCopy(s, x);
      break;
    case SampleKind::kAllGather:
    case SampleKind::kAllReduce:
    case SampleKind::kPeerRead:
      ParseCollective(s, x);
      break;
    case SampleKind::kForward:
      ParseForward(s, x);
      break;
    case SampleKind::kBackup:
      ParseBackup(s, x);
      break;
    case SampleKind::kOverlap:
      ParseOverlap(s, x);
      break;
    case SampleKind::kFirstGather:
      ParseFirstGather(s, x);
      break;
    case SampleKind::kLoadBack:
      ParseLoadBack(s, x);
      break;
  }
  // One sample times one copy, collective or forward step: an hour is far beyond any of them,
  // and a value like 1e308 s (or 5e-324 s) would dominate (or overflow) the fit.
  x.median_s = s.Key("median_s").Seconds(kMaxSampleSeconds, true);
  if (x.bytes > kMaxSampleBytes)
    s.Key(s.Has("bytes") ? "bytes" : "victim_bytes")
        .Fail("must be at most 2^50 bytes (1 PiB) for one sample (kMaxSampleBytes)");
  x.repeats = s.Key("repeats").IntAtLeast(1);
  return x;
}

}  // namespace

Measurements ParseMeasurements(const std::string& text, const std::string& file) {
  const JsonInput in(file, text);
  const JsonCursor root = JsonCursor::Root(in);
  root.OnlyKeys({"kvlanes_measurements", "context", "samples"});
  const int64_t version = root.Key("kvlanes_measurements").Int();
  if (version != kMeasurementsVersion)
    root.Key("kvlanes_measurements")
        .Fail("measurement format version " + std::to_string(version) +
              ", this build reads version " + std::to_string(kMeasurementsVersion));
  Measurements m;
  m.file = file;
  const JsonCursor ctx = root.Key("context");
  ctx.ExpectObject();
  m.context = ctx.value();
  const JsonCursor samples = root.Key("samples");
  samples.ExpectArray();
  if (samples.Size() == 0) samples.Fail("holds no samples");
  for (size_t i = 0; i < samples.Size(); ++i) {
    const JsonCursor s = samples.Index(i);
    Sample x = ParseSample(s);
    x.line = JsonLineOf(text, s.path());
    x.file = file;
    m.samples.push_back(std::move(x));
  }
  return m;
}

std::string ZeroPrefixNote(const Measurements& m) {
  if (m.context.is_object() && m.context.value("buffers", std::string()) == "pattern") return "";
  int64_t over_prefix = 0;
  for (const Sample& s : m.samples)
    over_prefix += s.kind == SampleKind::kForward && s.forward == "model" && s.prefix_tokens > 0;
  if (over_prefix == 0) return "";
  return m.file + ": " + std::to_string(over_prefix) +
         " proxy samples over a prefix from a sweep that did not fill its buffers (no "
         "context.buffers \"pattern\"): their prefix was a fresh allocation's zeros, which drew "
         "less power than the executor's pages (on one H100 those points ran 0.5-2.6% fast); "
         "re-run the sweep with this kvlanes (docs/calibration.md, \"Data\")";
}

Measurements MergeMeasurements(std::vector<Measurements> parts) {
  if (parts.size() == 1) return std::move(parts.front());
  Measurements m;
  m.context = {{"files", nlohmann::json::array()}};
  for (Measurements& x : parts) {
    m.file += (m.file.empty() ? "" : " + ") + x.file;
    m.context["files"].push_back(
        {{"file", JsonSafeText(x.file)}, {"context", std::move(x.context)}});
    for (Sample& s : x.samples) m.samples.push_back(std::move(s));
  }
  return m;
}

Measurements ReadMeasurements(const std::string& path) {
  return ParseMeasurements(ReadInputFile(path, "measurement file"), path);
}

}  // namespace kvlanes

// The measurement file `kvlanes bench sweep` writes and `kvlanes calibrate` reads: one timed
// sample per configuration. Its format: docs/calibration.md ("Measurement file").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/name_table.h"

namespace kvlanes {

inline constexpr int kMeasurementsVersion = 1;
// Largest median_s one sample may hold (seconds); larger values are refused as bad input.
inline constexpr double kMaxSampleSeconds = 3600;
// The most bytes one sample may move (1 PiB): a byte count like 1e300 would overflow the fit.
inline constexpr double kMaxSampleBytes = 1125899906842624.0;

enum class SampleKind {
  kHostCopy,     // host <-> device copies: copies * latency + bytes / h2d (or d2h)
  kCopySubmit,   // CPU time to submit `copies` copies: copies * submit
  kDeviceCopy,   // device kernels: kernels * launch + (2 or 1) * bytes / device copy bandwidth
  kAllGather,    // (N-1) alpha + (N-1)/N bytes / B, banded by bytes, per rank count
  kAllReduce,    // 2(N-1) alpha + 2(N-1)/N bytes / B, banded, per rank count
  kPeerRead,     // peers * setup + alpha + bytes / B, banded, per rank count
  kForward,      // layers * (base + (token n + pair n (p + n/2)) / N)
  kBackup,       // backup copies over a forward pass: copies * latency + bytes / d2h, per schedule
  kOverlap,      // one op (victim) timed beside another on its own stream: alone + (1 - share) *
                 // overlap
  kFirstGather,  // a gather layer right after a forward layer (first of its slots) against the
                 // next layer of the same slots after the next forward layer: next + excess
  kLoadBack,     // load-back copies over a forward pass, per layer or all layers first
                 // (descriptive: calibrate notes them against the host copies' price)
};

// The `kind` values of the measurement file; calibrate's fit groups are named with them too.
inline constexpr NameTable<SampleKind, 11> kSampleKindNames{
    {{{SampleKind::kHostCopy, "host_copy"},
      {SampleKind::kCopySubmit, "copy_submit"},
      {SampleKind::kDeviceCopy, "device_copy"},
      {SampleKind::kAllGather, "all_gather"},
      {SampleKind::kAllReduce, "all_reduce"},
      {SampleKind::kPeerRead, "peer_read"},
      {SampleKind::kForward, "forward"},
      {SampleKind::kBackup, "backup"},
      {SampleKind::kOverlap, "overlap"},
      {SampleKind::kFirstGather, "first_gather"},
      {SampleKind::kLoadBack, "load_back"}}},
    "sample kind"};

// One measured point: the median of `repeats` timed runs of one configuration.
struct Sample {
  SampleKind kind = SampleKind::kHostCopy;
  int64_t line = 0;  // where in the measurement file (for messages)
  std::string file;  // which measurement file
  double median_s = 0;
  int64_t repeats = 0;
  double bytes = 0;          // host_copy (all copies), device_copy (payload), collectives
  int64_t copies = 1;        // host_copy, copy_submit: copy calls (or copy kernels) timed together
  double chunk_bytes = 0;    // host_copy: contiguous piece size (descriptive)
  int64_t run_pages = 1;     // host_copy, backup: pages per run of adjacent slots (descriptive)
  bool tail = false;         // backup: schedule tail (one copy of all layers) instead of per-layer;
                             // load_back: all layers first
  int64_t gather_pages = 0;  // backup: pages gathered per layer beside the forward pass
  int64_t pages = 0;         // backup: pages backed up (0: not given)
  std::string pool;          // backup: the pool copied ("": not given)
  bool to_device = true;     // host_copy: direction h2d (true) or d2h
  bool fill = false;         // device_copy: op "fill" (write only) instead of "copy"
  int64_t kernels = 1;       // device_copy: kernel launches timed together
  int64_t ranks = 1;         // collectives; forward (cp_size)
  int64_t peers = 0;         // peer_read
  int64_t new_tokens = 0;    // forward; backup over the model: the proxy's new tokens
  int64_t prefix_tokens = 0;
  // forward "model": a pass of this many requests of new_tokens each (bench sweep
  // forward_pass_requests; docs/calibration.md, "Batched passes"); 1: one request.
  int64_t pass_requests = 1;
  // forward "model", "load": "sustained": timed after the layer ran back to back (bench sweep
  // --sustain-tokens; docs/calibration.md, "Passes run back to back"), not part of the grid.
  bool sustained = false;
  int64_t layers = 1;  // forward: the time covers this many layers
  // forward: the layer count of the model measured (the sum of per_kind[].layers; 0: not given).
  // A proxy sample times the mean layer (layers 1) of a model of model_layers layers.
  int64_t model_layers = 0;
  // forward "model": each layer kind's own time (per_kind[]: layer_kind dense or moe, its layer
  // count in the model measured, the median of one such layer); empty when not given.
  struct KindTime {
    int kind = 0;  // index into HardwareProfile::kComputeKindNames
    int64_t layers = 0;
    double median_s = 0;
    // A pass sample's (pass_requests > 1) parts: the first request's layer (the pass's GEMMs and
    // its attention) and another's (its attention alone), medians; 0 when not given.
    double first_s = 0, other_s = 0;
  };
  std::vector<KindTime> per_kind;
  // forward, overlap, backup: the sweep's forward pass ("model": the proxy, "synthetic": the spin
  // kernel; "" = not given: forward and overlap samples are read as measured on the proxy, backup
  // samples on the spin, as the sweeps before the key timed them); forward: the preset measured.
  std::string forward, preset;
  // overlap: the victim's and the other op's kinds (OverlapKindNames), the victim's median time
  // alone, the median time both ran at once, and the other op's median time in the pair run.
  // median_s is the victim's time in the pair run.
  std::string victim, beside;
  double alone_s = 0, overlap_s = 0, beside_s = 0;
  // overlap with the synthetic forward pass as the victim: the spin's busy time per layer (the
  // sweep's forward_busy_s; 0: not given).
  double forward_busy_s = 0;
  // first_gather: the next layer's median time (median_s is the first layer's); bytes is what the
  // layer's pack reads from the pool (pages * one page-layer of every pool).
  double next_s = 0;
  // descriptive; layout and mode select host copies; a backup sample's variant names the sweep's
  // diagnostics (calibrate leaves such samples out)
  std::string layout, mode, variant;
};

struct Measurements {
  std::string file;
  nlohmann::json context;  // the sweep's context block (machine, versions, configuration)
  std::vector<Sample> samples;
};

// Throws InputError naming file, line and field (e.g. "M.json:57: samples[12].bytes: ...").
Measurements ReadMeasurements(const std::string& path);
Measurements ParseMeasurements(const std::string& text, const std::string& file);
// Several files as one (calibrate --measurements A --measurements B): the samples in file order,
// `file` naming every file, the context the first's for one file, else {"files": [{file,
// context}, ...]}.
Measurements MergeMeasurements(std::vector<Measurements> parts);

// A note when `m` holds samples of the proxy over a prefix (forward "model", prefix_tokens > 0)
// and its context does not say `"buffers": "pattern"`: a sweep before the sweep filled its
// buffers read a fresh allocation's zeros as the prefix, which draws less power than the
// executor's pages (docs/calibration.md, "Data"). "" otherwise.
std::string ZeroPrefixNote(const Measurements& m);

}  // namespace kvlanes

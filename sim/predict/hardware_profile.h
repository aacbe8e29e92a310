// A machine's measured (or, until calibration, assumed) costs: the input of the cost model.
// Loaded from YAML (config/profiles/*.yaml); every number carries its unit in its name.
// Formulas using these numbers are written once, in docs/cost_model.md.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace kvlanes {

// time(bytes) = latency_s + bytes / (gbps * 1e9) in the first band whose max_bytes >= bytes
// (the last band is unbounded). Collective bandwidths are bus bandwidths (see cost_model.h).
struct CostBand {
  double max_bytes = 0;  // 0 in the last band = unbounded
  double latency_s = 0;
  double gbps = 0;
  // A backup term's entry band only (YAML entry_layer_s, optional): the cost per entry per layer
  // the copy spans, the spread of a tail copy's entries over a layer-first host pool.
  double layer_s = 0;
};

struct BandedCost {
  std::vector<CostBand> bands;
  const CostBand& For(double bytes) const;
};

struct CollectiveModel {
  int ranks = 0;
  BandedCost all_gather;    // bytes = whole gathered output (all ranks' shards)
  BandedCost all_reduce;    // bytes = buffer size
  BandedCost peer_read;     // bytes = one rank's reads from all peers
  double peer_setup_s = 0;  // fixed cost per peer read from (one copy or kernel per peer)
};

// The operation kinds an overlap share names: "h2d" and "d2h" (tier copies), "gather"
// (materialization kernels and collectives), "forward" (the forward pass), "device_copy"
// (pack, unpack, scatter kernels).
const std::vector<std::string>& OverlapKindNames();

// The keys of HardwareProfile::measured_on, as the sweep's and the executor's contexts name them.
inline constexpr const char* kMeasuredOnKeys[] = {"gpu", "driver_version", "cuda_runtime_version",
                                                  "nccl_version"};

struct HardwareProfile {
  std::string name;
  std::string source;     // where the numbers come from
  bool measured = false;  // false: reference figures or models, not yet calibrated here
  // Optional (YAML measured_on): what the measurements ran on, by kMeasuredOnKeys (the sweep's
  // context: GPU name, driver, CUDA runtime and NCCL versions); `check` notes a measured run on
  // another GPU.
  std::map<std::string, std::string> measured_on;
  // Host <-> device copies of pinned memory (per rank, each rank its own link).
  double h2d_gbps = 0;
  double d2h_gbps = 0;
  double copy_latency_s = 0;  // per copy, on the device
  // What one "copy" is: a copy call per pool and layer range (kernel, cudaMemcpy2DAsync), or
  // every page-layer chunk (cudaMemcpyBatchAsync entries). YAML host_device.copy_unit.
  bool latency_per_chunk = false;
  double copy_submit_s = 0;  // CPU time to submit one copy or copy kernel
  // Optional: backup copies as measured over a forward pass (`bench sweep` backup samples, with
  // the forward and gather kernels beside them): latency per copy call and d2h bandwidth, per
  // schedule, and optionally a cost per copy entry (a run of pages adjacent on both sides, per
  // layer: what one cudaMemcpyBatchAsync entry moves). gbps 0 = not measured: backups use
  // copy_latency_s and d2h_gbps. YAML host_device.backup_per_layer / backup_tail:
  // {latency_s, gbps[, entry_s]}.
  struct CopyCost {
    double latency_s = 0;
    double gbps = 0;
    double entry_s = 0;
    // Optional (YAML entry_bands: [{max_entry_bytes, entry_s, gbps}, ..., {entry_s, gbps}], the
    // bounds ascending): the cost per entry (a band's latency_s) and the bandwidth by the bytes
    // one entry moves (a copy's bytes over its entries), where a few large entries and many small
    // ones do not share one line (`kvlanes calibrate --backup-entry-bands`; docs/cost_model.md
    // "Backups"). With bands, entry_s and gbps above are the last band's.
    BandedCost entry_bands;
    // copies x latency_s + entries x (entry_s + layers x entry_layer_s) + bytes / gbps, the
    // last three in the band of bytes / entries where entry_bands are given; `layers`: the layers
    // the copy spans (a tail copy: the model's; a per-layer copy: 1). Only for a measured term
    // (gbps > 0).
    double Seconds(double copies, double entries, double bytes, double layers = 1) const;
  };
  CopyCost backup_per_layer, backup_tail;
  // Optional (YAML host_device.load_back: {latency_s, gbps[, entry_s]}): load-back copies as
  // measured over the forward-pass proxy (`bench sweep --only load_backs --forward model`, both
  // schedules in one fit): per copy call latency_s, per entry entry_s (a run of adjacent host
  // slots, per layer; SlotRuns) and h2d bandwidth. gbps 0 = not measured: load-backs use
  // copy_latency_s and h2d_gbps (docs/cost_model.md, "Load-back").
  CopyCost load_back;
  // Device-local copies (pack/unpack/scatter); bandwidth counts bytes read plus written.
  double device_copy_gbps = 0;
  double kernel_launch_s = 0;
  // Optional (empty: one band of kernel_launch_s and device_copy_gbps): per size band of one
  // kernel's payload, its latency (launch included) and read+write bandwidth. Fitted by
  // `kvlanes calibrate` where the curve bends (small kernels do not reach full bandwidth).
  BandedCost device_copy_bands;
  // One device copy kernel of `payload_bytes` (read and written): its band's latency and
  // bandwidth, or kernel_launch_s and device_copy_gbps without bands.
  double KernelCopyS(double payload_bytes) const;
  // Optional (YAML device.gather_kernel_extra: {METHOD: {s, s_per_gb}, ...}, METHOD a gather
  // method's name): how much longer one layer of a one-kernel gather method (dense's fused
  // scatter, p2p's peer kernel) took alone than one kernel of the device bands, which are fitted
  // on packed layers of two kernels: s + s_per_gb x its payload in GB; either may be negative.
  // `kvlanes calibrate` fits it from the sweep's one-kernel layers at cp_size 1
  // (docs/cost_model.md, "Gather"). Absent: 0.
  struct KernelExtra {
    double s = 0;
    double s_per_gb = 0;
    double At(double payload_bytes) const { return s + s_per_gb * payload_bytes * 1e-9; }
  };
  std::map<std::string, KernelExtra> gather_kernel_extra;
  // Optional (YAML device.gather_after_forward: [{pages, ratio}, ...], pages ascending): a gather
  // layer's time after a forward layer of the model over its time after the cache eviction the
  // sweep times it after, by pages gathered per layer (`bench sweep --forward model`'s
  // first_gather samples over the fitted copy bands; docs/cost_model.md "Gather after a forward
  // layer"). The gather's kernels take that ratio (GatherAfterForwardRatio: linear in log pages
  // between points, the end points' beyond them; 1 when empty).
  struct PagesRatio {
    int64_t pages = 0;
    double ratio = 1;
    static constexpr int kMax = 10;  // a profile holds ratios below this
    // and page counts up to this (a measurement file's first_gather samples too, so that a
    // fitted profile always loads)
    static constexpr int64_t kMaxPages = 1000000000;
  };
  std::vector<PagesRatio> gather_after_forward;
  double GatherAfterForwardRatio(double pages) const;
  // The same for a request's gather layers after its first (GatherNextLayerRatio; empty: the
  // first layer's ratio). Only UseSyntheticForward sets it (from beside_spin): after the proxy none
  // is kept, its layers move enough memory to leave the next gather as cold as the first.
  std::vector<PagesRatio> gather_next_after_forward;
  double GatherNextLayerRatio(double pages) const;
  // Host-side index materialization for multi-extent unpack: bytes per prefix page entry.
  double index_bytes_per_page = 8;
  std::vector<CollectiveModel> collectives;  // one per rank count
  // Prefill compute per layer on one GPU: base + token_s * new + attn_pair_s * new * (prefix +
  // new / 2); with cp_size N ranks the token and attention terms divide by N.
  double layer_base_s = 0;
  double layer_token_s = 0;
  double layer_attn_pair_s = 0;
  // YAML compute.measured / compute.model_preset: the compute terms were fitted to the
  // forward-pass proxy of that model preset (docs/forward_pass.md); a replay of another preset
  // with such a profile is refused (CostModel's constructor).
  bool compute_measured = false;
  std::string compute_model_preset;
  // Optional (YAML compute.model_layers): the layer count of the model the terms were measured
  // at. Per-layer times are the mean over that model's layers, whose mix of dense and MoE layers
  // depends on the count, so a replay with another model.layers is refused unless the profile
  // has compute_kinds (then any depth is composed from them). 0: not recorded.
  int64_t compute_model_layers = 0;
  // Optional (YAML compute.table): per-layer seconds measured on one GPU at points (new tokens,
  // prefix tokens), one row per new-token count, rows by growing new tokens and each row's
  // prefixes growing. With a table, ComputeLayerS scales the linear terms by measured / linear,
  // interpolated between the points (docs/cost_model.md, "Compute"): exact at the points, the
  // linear form's shape between them and beyond the last.
  struct ComputeRow {
    double new_tokens = 0;
    std::vector<double> prefix_tokens;
    std::vector<double> layer_s;
  };
  std::vector<ComputeRow> compute_table;
  // Optional (YAML compute.layer_kinds.dense / .moe): the terms of one layer kind alone (dense:
  // attention and the dense MLP; moe: attention and the MoE), each of the form of the mean terms
  // above (linear terms and a table), fitted from the per-kind times of the forward sweep
  // (`bench sweep --forward model` times every kind of the model). With them a replay of any
  // depth of the measured preset is priced: ComposeDepth weighs each kind by its share of the
  // model's layers, so the model's compute is the sum of its layers' prices.
  struct KindTerms {
    bool measured = false;
    double layer_base_s = 0, layer_token_s = 0, layer_attn_pair_s = 0;
    std::vector<ComputeRow> table;
    // Optional (YAML compute.layer_kinds.<kind>.pass_gemm: {tokens: [...], layer_s: [...]}): the
    // layer's GEMMs alone over these token counts (ascending), from the sweep's batched passes
    // (docs/cost_model.md, "Batched passes"): what a pass of several chunks runs once over all
    // their tokens. GemmS interpolates linearly, holds the first value below it and extends the
    // last two points' line above it.
    std::vector<double> gemm_tokens, gemm_layer_s;
    double GemmS(double tokens) const;
    // Optional (YAML compute.layer_kinds.<kind>.sustained: {tokens: [...], prefix_tokens: [...],
    // ratio: [[...], ...]}): the layer's time when the GPU has run back to back for a while
    // (power-capped clock), over its table's time, on a grid of new tokens (rows, ascending) x
    // prefix tokens (ascending), from the sweep's sustained samples (docs/cost_model.md,
    // "Passes run back to back"). SustainedRatio interpolates linearly in log tokens and in the
    // prefix, holding the edge values beyond the grid; 1 without a grid.
    std::vector<double> sustained_tokens, sustained_prefix;
    std::vector<std::vector<double>> sustained_ratio;  // [token row][prefix]
    double SustainedRatio(double new_tokens, double prefix_tokens) const;
    double weight = 0;  // set by ComposeDepth: the kind's share of the replay's layers
    double LinearS(double new_tokens, double prefix_tokens, double ranks) const;
    double TableS(double new_tokens, double prefix_tokens, double ranks) const;
  };
  static constexpr const char* kComputeKindNames[2] = {"dense", "moe"};
  KindTerms compute_kinds[2];  // by kComputeKindNames
  bool HasComputeKinds() const { return compute_kinds[0].measured || compute_kinds[1].measured; }
  // Prices a model of `dense` dense and `moe` MoE layers from compute_kinds: every compute time is
  // then the kinds' times weighted by their layer counts, the mean linear terms above become the
  // weighted ones, compute_model_layers the model's depth. Returns the name of a kind the model
  // has and the profile lacks (nothing is changed then), "" when done.
  std::string ComposeDepth(int64_t dense, int64_t moe);
  bool compute_composed = false;  // ComposeDepth was called
  // base + (token_s n + attn_pair_s n (p + n / 2)) / ranks: the linear terms alone.
  double LinearLayerS(double new_tokens, double prefix_tokens, double ranks) const;
  // One layer's forward pass on each of `ranks` ranks: LinearLayerS times the table's ratio at
  // (new_tokens / ranks, prefix_tokens), the ratio 1 without a table (the kinds' weighted sum
  // once composed). A rank's new tokens beyond kPrefillChunkTokens run in chunks, each priced
  // over the prefix and the chunks before it (sim/model/model_shapes.h).
  double ComputeLayerS(double new_tokens, double prefix_tokens, double ranks) const;
  // ComputeLayerS of one chunk without compute_extra_layer_s: the linear terms times the table's
  // ratio (the kinds' weighted sum once composed).
  double TableLayerS(double new_tokens, double prefix_tokens, double ranks) const;
  // A serving pass of chunks of `chunk_tokens` new tokens each (a rank computes a 1 / `ranks` share
  // of each), per layer, beside
  // serving mode's formula base + sum (price - base): with a pass_gemm table on every kind the
  // composed model has, G(sum) - sum G(n) + (k - 1) layer_base_s, G the kinds' weighted GemmS (a
  // rank's tokens beyond kPrefillChunkTokens in pieces, as the proxy runs them); else 0. So the
  // pass is priced as its chunks' times less their GEMMs plus the GEMMs over all its tokens. 0 for
  // one chunk.
  double PassBatchLayerS(std::span<const int64_t> chunk_tokens, double ranks) const;
  // A chunk's layer time back to back over its time after an idle gap (the kinds' sustained
  // grids, each weighted by its share of the chunk's time; `ranks` share the new tokens); 1 when
  // no kind has one.
  double SustainedRatio(double new_tokens, double prefix_tokens, double ranks) const;
  bool HasSustained() const;
  // YAML compute.sustained_gap_s: a serving pass that starts less than this after its replica's
  // previous pass ended runs at the sustained clock (docs/cost_model.md).
  static constexpr double kDefaultSustainedGapS = 0.05;
  double sustained_gap_s = kDefaultSustainedGapS;
  // Every compute time times `k` (the linear terms and the tables; --compute-scale).
  void ScaleCompute(double k);
  // Added to every ComputeLayerS: beside_spin.extra_layer_s once UseSyntheticForward is called,
  // else 0.
  double compute_extra_layer_s = 0;
  // Optional (YAML overlap: list of {victim, beside, share}): while an operation of kind
  // `victim` runs at the same time as one of kind `beside` (on another stream), it proceeds at
  // `share` (0 < share <= 1) of the rate it has alone. Kinds: OverlapKindNames(). A pair not
  // listed shares nothing (share 1), except two copies in one direction, which use one copy
  // engine and serialize. Fitted by `kvlanes calibrate` from `bench sweep` pair samples; the
  // rules that use them are in docs/cost_model.md.
  struct OverlapShare {
    std::string victim;
    std::string beside;
    double share = 1;
  };
  std::vector<OverlapShare> overlap;
  // The share of `victim` beside `beside` (1 when not listed).
  double OverlapShareOf(const std::string& victim, const std::string& beside) const;

  // Optional (YAML beside_spin: {host_device, device, compute, overlap}, each part optional): the
  // terms as timed beside the synthetic forward pass (`--forward synthetic`: one spin kernel per
  // layer, busy for the modelled time, holding SMs but moving no memory) instead of the model's
  // forward-pass proxy, under the names and in the form of the main ones. Fitted by `kvlanes
  // calibrate` from samples swept with `--forward synthetic`; used only by UseSyntheticForward.
  struct SpinTerms {
    // host_device.backup_per_layer / backup_tail: the backups timed over the spin. On the H200
    // small backups after a proxy layer take a few microseconds more than after the spin
    // (docs/cost_model.md "Backups"). gbps 0: not given (the main terms stay).
    CopyCost backup_per_layer, backup_tail;
    // device.gather_after_forward: a gather layer after a spin layer (first_gather samples);
    // device.gather_next_after_forward: the layers after a gather's first (their next_s): the spin
    // moves no memory, so a gather layer finds the buffers the layer before it filled still in L2
    // (docs/cost_model.md "Gather after a forward layer"). Empty: not given (no ratio).
    std::vector<PagesRatio> gather_after_forward, gather_next_after_forward;
    // compute.extra_layer_s: how much longer than its busy time one spin layer takes (launch,
    // block start-up; the spin layer alone against its busy time). 0: not fitted.
    double extra_layer_s = 0;
    // overlap: the shares of the pairs with the forward pass when that pass is the spin (copies
    // and gathers beside it keep nearly their whole rate). Every entry names the forward pass.
    std::vector<OverlapShare> overlap;
    bool has_overlap = false;  // the key was given (an empty list: every share 1)
    bool Empty() const;        // nothing given: the section is not written
  };
  SpinTerms beside_spin;
  // Prices a run of the synthetic forward pass at `k` of the modelled compute (`kvlanes check` of
  // a measured file of `--forward synthetic`, docs/cost_model.md "The synthetic forward pass"):
  // ScaleCompute(k), each layer plus beside_spin.extra_layer_s, the gather ratios beside_spin's,
  // its backup terms, where given, in place of the main ones, and, where its overlap is given,
  // its shares in place of every overlap pair with the forward pass.
  void UseSyntheticForward(double k);

  // The collective model for `ranks` ranks, or nullptr.
  const CollectiveModel* Collectives(int ranks) const;
};

// Throws InputError naming the file, line and key.
HardwareProfile LoadHardwareProfile(const std::string& path);
// The same from the profile's YAML text; `path` names it in errors (a file, or where the text was
// stored: a plan header embeds the profile it was priced with, docs/plan.md).
HardwareProfile ParseHardwareProfile(const std::string& yaml, const std::string& path);
// The bytes of a profile file. Throws InputError(path) when it cannot be read.
std::string ReadHardwareProfileText(const std::string& path);

// A profile file read once per run: its path, its bytes (a plan stores them) and the profile they
// parse to. A replay hands the one it read to the cost model, the plan writer and the report.
struct ProfileFile {
  std::string path;
  std::string yaml;
  HardwareProfile profile;
};
// Throws InputError naming the file, line and key.
ProfileFile ReadProfileFile(const std::string& path);

}  // namespace kvlanes

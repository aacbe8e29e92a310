#include "sim/predict/cost_model.h"

#include <algorithm>
#include <array>
#include <atomic>

#include "io/input_error.h"
#include "methods/method_costs.h"
#include "sim/check.h"

namespace kvlanes {

std::vector<int64_t> PagesPerLane(const std::vector<LaneCopy>& copies, int ranks) {
  std::vector<int64_t> n(ranks, 0);
  for (const LaneCopy& c : copies) n[c.lane] += static_cast<int64_t>(c.pages.size());
  return n;
}

double PartialMergeQueryRowBytes(const ModelShape& s) {
  return 2.0 * static_cast<double>(s.heads) * static_cast<double>(s.attn_key_dim());
}
double PartialMergePartialRowBytes(const ModelShape& s) {
  return static_cast<double>(s.heads) * (2.0 * static_cast<double>(s.attn_value_dim()) + 4.0);
}
int64_t PartialMergeBytes(const ReplayConfig& cfg, int64_t new_tokens) {
  const ModelShape& s = cfg.model.shape;
  return cfg.model.layers * new_tokens *
         static_cast<int64_t>(PartialMergeQueryRowBytes(s) + PartialMergePartialRowBytes(s));
}

int64_t SlotRuns(const LaneCopy& c) {
  int64_t runs = c.pages.empty() ? 0 : 1;
  for (size_t i = 1; i < c.pages.size(); ++i)
    if (c.pages[i][1] != c.pages[i - 1][1] + 1) ++runs;
  return runs;
}

std::vector<int64_t> RunsPerLane(const std::vector<LaneCopy>& copies, int ranks) {
  std::vector<int64_t> n(ranks, 0);
  for (const LaneCopy& c : copies) n[c.lane] += SlotRuns(c);
  return n;
}

namespace {

uint64_t NextModelId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

ForwardShape ShapeOf(const GatherContext& ctx, GatherMethod gather, BackupSchedule backup) {
  ForwardShape f;
  f.new_tokens = ctx.new_tokens;
  f.prefix_tokens = ctx.prefix_tokens;
  f.prefix_pages = ctx.prefix_pages;
  f.shard_pages = ctx.shard_pages;
  f.load_back_pages = ctx.load_back_pages;
  f.backup_pages = ctx.backup_pages;
  f.gather = gather;
  f.backup = backup;
  f.schedule_detail = false;  // a decision reads the totals only
  return f;
}

PlanShape::PlanShape(const RequestPlan& p, int ranks, int64_t page_tokens, int64_t prefetch_layers)
    : load_back_pages(PagesPerLane(p.load_back, ranks)),
      backup_pages(PagesPerLane(p.backup, ranks)),
      backup_runs(RunsPerLane(p.backup, ranks)),
      load_back_runs(RunsPerLane(p.load_back, ranks)) {
  shape.new_tokens = p.computed_tokens;
  shape.prefix_pages = p.prefix_pages;
  shape.prefix_tokens = p.prefix_pages * page_tokens;
  shape.shard_pages = p.shard_pages;
  shape.load_back_pages = load_back_pages;
  shape.backup_pages = backup_pages;
  shape.backup_runs = backup_runs;
  shape.load_back_runs = load_back_runs;
  shape.gather = p.gather_method;
  shape.backup = p.backup_schedule;
  shape.prefetch_layers = prefetch_layers;
}

void FitComputeToModel(HardwareProfile& hw, const ModelConfig& model,
                       const std::string& profile_path) {
  if (!hw.compute_measured) return;
  if (hw.compute_model_preset != model.preset)
    throw InputError(
        profile_path, 0, "compute.model_preset",
        "profile '" + hw.name + "' has compute terms measured for model preset '" +
            hw.compute_model_preset + "', but this run uses model.preset '" + model.preset +
            "': calibrate a profile for it or set model.preset=" + hw.compute_model_preset);
  if (hw.HasComputeKinds()) {
    int64_t kinds[2] = {0, 0};
    for (int64_t l = 0; l < model.layers; ++l)
      ++kinds[LayerKindOf(model.shape, l) == LayerKind::kMoe ? 1 : 0];
    const std::string missing = hw.ComposeDepth(kinds[0], kinds[1]);
    if (!missing.empty())
      throw InputError(profile_path, 0, "compute.layer_kinds",
                       "profile '" + hw.name + "' has no terms for " + missing +
                           " layers, but this run's model (" + std::to_string(model.layers) +
                           " layers of '" + model.preset + "') has " + missing +
                           " layers: calibrate from a forward sweep of a model that has them");
    return;
  }
  if (hw.compute_model_layers > 0 && hw.compute_model_layers != model.layers)
    throw InputError(
        profile_path, 0, "compute.model_layers",
        "profile '" + hw.name + "' has compute terms measured at " +
            std::to_string(hw.compute_model_layers) + " layers of '" + hw.compute_model_preset +
            "' (its per-layer times are that model's mean over dense and MoE layers, and it has "
            "no per-kind terms, compute.layer_kinds), but this run uses model.layers " +
            std::to_string(model.layers) + ": calibrate from a sweep at " +
            std::to_string(model.layers) + " layers, or from one that times each layer kind, or " +
            "set model.layers=" + std::to_string(hw.compute_model_layers));
}

CostModel::CostModel(HardwareProfile hw, const ReplayConfig& cfg, const std::string& profile_path)
    : hw_(std::move(hw)),
      ranks_(static_cast<int>(cfg.cache.cp_size)),
      layers_(cfg.model.layers),
      pools_(static_cast<int64_t>(cfg.model.pools.size())),
      page_tokens_(cfg.cache.page_tokens),
      page_layer_bytes_(static_cast<double>(cfg.model.PageBytes(cfg.cache.page_tokens)) /
                        static_cast<double>(cfg.model.layers)),
      hit_agreement_min_(cfg.cache.cp_hit_agreement ==
                         kHitAgreementNames.CName(HitAgreement::kMin)),
      query_row_bytes_(PartialMergeQueryRowBytes(cfg.model.shape)),
      partial_row_bytes_(PartialMergePartialRowBytes(cfg.model.shape)),
      prefetch_layers_(cfg.gather.prefetch_layers),
      overlap_(OverlapTable::Of(hw_)),
      unshared_(overlap_.Trivial()),
      id_(NextModelId()) {
  for (const PoolSpec& p : cfg.model.pools) {
    pool_share_.push_back(static_cast<double>(p.bytes_per_token_layer * cfg.cache.page_tokens) /
                          page_layer_bytes_);
  }
  FitComputeToModel(hw_, cfg.model, profile_path);
  for (const auto& [name, e] : hw_.gather_kernel_extra) {
    const size_t i = static_cast<size_t>(
        kGatherMethodNames.Parse(name, "device.gather_kernel_extra", profile_path));
    if (gather_kernel_extra_.size() <= i) gather_kernel_extra_.resize(i + 1);
    gather_kernel_extra_[i] = e;
  }
  if (ranks_ > 1) {
    coll_ = hw_.Collectives(ranks_);
    if (!coll_)
      throw InputError(profile_path, 0, "collectives",
                       "profile '" + hw_.name + "' has no collective model for " +
                           std::to_string(ranks_) + " ranks (cache.cp_size)");
  }
}

double CostModel::HitSavedS(const RequestPlan& p, const RequestCost& c) const {
  // No prefix: its compute is the uncached compute (priced once, so no rounding residue).
  const double saved =
      p.prefix_pages > 0
          ? ComputeLayerS(p.input_tokens, 0) * static_cast<double>(layers_) - c.compute_s
          : 0.0;
  return saved - c.gather_s - c.load_back_exposed_s;
}

double CostModel::ComputeLayerS(int64_t new_tokens, int64_t prefix_tokens) const {
  return hw_.ComputeLayerS(static_cast<double>(new_tokens), static_cast<double>(prefix_tokens),
                           ranks_);
}

double CostModel::DeviceCopyS(double payload_bytes) const {
  return 2 * payload_bytes / (hw_.device_copy_gbps * 1e9);
}

double CostModel::CopyLatencyS(double pages, double layers) const {
  return (hw_.latency_per_chunk ? pages * layers : 1.0) * hw_.copy_latency_s;
}

double CostModel::CopiesLatencyS(int64_t pages, int64_t layers) const {
  return static_cast<double>(pools_) *
         CopyLatencyS(static_cast<double>(pages), static_cast<double>(layers));
}

double CostModel::KernelCopyS(double payload_bytes) const { return hw_.KernelCopyS(payload_bytes); }

double CostModel::BackupCopyS(BackupSchedule s, double pages, double layers, double bytes,
                              double runs) const {
  const HardwareProfile::CopyCost& b = BackupCostFor(s).Terms(hw_);
  if (b.gbps > 0) return b.Seconds(1, runs * layers, bytes, layers);
  return CopyLatencyS(pages, layers) + bytes / (hw_.d2h_gbps * 1e9);
}

double CostModel::BackupCopiesS(BackupSchedule s, int64_t pages, int64_t layers, double bytes,
                                double runs) const {
  const HardwareProfile::CopyCost& b = BackupCostFor(s).Terms(hw_);
  // Per pool where the bytes per entry pick a band (the pools' chunks differ in size).
  if (!b.entry_bands.bands.empty() && b.gbps > 0) {
    double t = 0;
    for (size_t k = 0; k < pool_share_.size(); ++k)
      t += BackupCopyS(s, static_cast<double>(pages), static_cast<double>(layers),
                       bytes * pool_share_[k], runs);
    return t;
  }
  if (b.gbps > 0)
    return static_cast<double>(pools_) *
               (b.latency_s + runs * static_cast<double>(layers) * b.entry_s) +
           bytes / (b.gbps * 1e9);
  return CopiesLatencyS(pages, layers) + bytes / (hw_.d2h_gbps * 1e9);
}

double CostModel::LoadBackCopyS(double pages, double layers, double bytes, double runs) const {
  const HardwareProfile::CopyCost& b = hw_.load_back;
  if (b.gbps > 0) return b.Seconds(1, runs * layers, bytes);
  return CopyLatencyS(pages, layers) + bytes / (hw_.h2d_gbps * 1e9);
}

double CostModel::LoadBackCopiesS(int64_t pages, int64_t layers, double runs) const {
  const double L = static_cast<double>(layers), P = static_cast<double>(pools_);
  const double bytes = static_cast<double>(pages) * page_layer_bytes_ * L;
  const HardwareProfile::CopyCost& b = hw_.load_back;
  if (b.gbps > 0) return b.Seconds(P, P * runs * L, bytes);  // one copy per pool
  return CopiesLatencyS(pages, layers) + bytes / (hw_.h2d_gbps * 1e9);
}

double CostModel::TierCopyS(double bytes, bool to_device) const {
  return hw_.copy_latency_s + bytes / ((to_device ? hw_.h2d_gbps : hw_.d2h_gbps) * 1e9);
}

double CostModel::AllGatherS(double total_bytes) const {
  if (ranks_ == 1) return 0;
  const CostBand& b = coll_->all_gather.For(total_bytes);
  const double n = ranks_;
  return (n - 1) * b.latency_s + (n - 1) / n * total_bytes / (b.gbps * 1e9);
}

double CostModel::AllReduceS(double bytes) const {
  if (ranks_ == 1) return 0;
  const CostBand& b = coll_->all_reduce.For(bytes);
  const double n = ranks_;
  return 2 * (n - 1) * b.latency_s + 2 * (n - 1) / n * bytes / (b.gbps * 1e9);
}

double CostModel::BroadcastS(double bytes) const {
  if (ranks_ == 1) return 0;
  // No broadcast band is measured: the all-gather band of the same size stands in, with the
  // latency paid once per hop of the ring (N-1) and busbw equal to algbw (nccl-tests).
  const CostBand& b = coll_->all_gather.For(bytes);
  return (ranks_ - 1) * b.latency_s + bytes / (b.gbps * 1e9);
}

double CostModel::PeerReadS(double bytes, int peers) const {
  if (peers == 0) return 0;
  const CostBand& b = coll_->peer_read.For(bytes);
  return peers * coll_->peer_setup_s + b.latency_s + bytes / (b.gbps * 1e9);
}

double CostModel::HitAgreementS(int64_t host_match_pages) const {
  if (!hit_agreement_min_ || host_match_pages == 0) return 0;
  return AllReduceS(8);
}

GatherCost CostModel::Gather(GatherMethod m, std::span<const int64_t> shard_pages,
                             int64_t prefix_pages) const {
  if (prefix_pages == 0) return {};
  // The gather's kernels after a forward layer (HardwareProfile::gather_after_forward; measured
  // for packed gathers at cp_size 1, taken for every method's kernels): the request's first layer
  // and the ones after it (gather_next_after_forward, where the profile has it).
  const double P = static_cast<double>(prefix_pages);
  const double first = hw_.GatherAfterForwardRatio(P), next = hw_.GatherNextLayerRatio(P);
  GatherCost c = GatherLayer(m, shard_pages, prefix_pages, next);
  if (next == first) return c;
  c.first_layer_s = GatherLayer(m, shard_pages, prefix_pages, first).per_layer_s;
  c.total_s = c.once_s + c.LayersS(layers_);
  return c;
}

GatherCost CostModel::GatherLayer(GatherMethod m, std::span<const int64_t> shard_pages,
                                  int64_t prefix_pages, double k) const {
  GatherCost c;
  int64_t max_shard = 0;
  for (int64_t s : shard_pages) max_shard = std::max(max_shard, s);
  const GatherLayerShape shape{
      shard_pages,         static_cast<double>(prefix_pages), static_cast<double>(max_shard),
      page_layer_bytes_,   static_cast<double>(ranks_),       k,
      GatherKernelExtra(m)};
  GatherCostFor(m).LayerCost(*this, shape, c);
  c.first_layer_s = c.per_layer_s;
  c.total_s = c.once_s + c.LayersS(layers_);
  return c;
}

GatherCost CostModel::PartialMerge(int64_t new_tokens) const {
  GatherCost c;
  if (new_tokens == 0) return c;
  const double n = static_cast<double>(new_tokens), N = ranks_;
  const double queries = n * query_row_bytes_, partials = n * partial_row_bytes_;
  c.per_layer_s = c.first_layer_s =
      AllGatherS(queries) + AllGatherS(partials) + (ranks_ > 1 ? KernelCopyS(partials) : 0.0);
  c.bytes_per_rank = (N - 1) / N * (queries + partials);
  c.total_s = static_cast<double>(layers_) * c.per_layer_s;
  return c;
}

double CostModel::LayerTierCopyS(std::span<const int64_t> pages_per_lane, bool to_device) const {
  double worst = 0;
  for (int64_t pages : pages_per_lane) {
    if (pages == 0) continue;
    const double bytes = static_cast<double>(pages) * page_layer_bytes_;
    worst = std::max(worst, CopiesLatencyS(pages, 1) +
                                bytes / ((to_device ? hw_.h2d_gbps : hw_.d2h_gbps) * 1e9));
  }
  return worst;
}

BackupCost CostModel::Backup(BackupSchedule s, std::span<const int64_t> pages_per_lane,
                             std::span<const double> layer_end_s,
                             std::span<const int64_t> runs_per_lane) const {
  const auto runs = [&](size_t lane) {
    return lane < runs_per_lane.size()
               ? static_cast<double>(std::max<int64_t>(1, runs_per_lane[lane]))
               : 1.0;
  };
  BackupCost c;
  c.forward_s = layer_end_s.empty() ? 0 : layer_end_s.back();
  int64_t total_pages = 0;
  for (int64_t p : pages_per_lane) total_pages += p;
  if (total_pages == 0) {
    c.total_s = c.forward_s;
    return c;
  }
  // One layer's backup on the slowest lane: one copy per pool.
  double layer_copy = 0;
  for (size_t lane = 0; lane < pages_per_lane.size(); ++lane)
    if (const int64_t pages = pages_per_lane[lane]; pages > 0)
      layer_copy = std::max(
          layer_copy, BackupCopiesS(BackupSchedule::kPerLayer, pages, 1,
                                    static_cast<double>(pages) * page_layer_bytes_, runs(lane)));
  BackupCostFor(s).ClosedForm(*this, pages_per_lane, layer_end_s, layer_copy, runs, pools_, c);
  c.beyond_forward_s = c.total_s - c.forward_s;
  return c;
}

namespace {

// One lane's copies: load-back per layer (or of all layers at once), backup per layer, tail.
struct LaneWork {
  int64_t load_pages = 0, backup_pages = 0, backup_runs = 1, load_runs = 1;
  double load = 0, backup_layer = 0, backup_tail = 0;
  bool operator==(const LaneWork& o) const {
    return load_pages == o.load_pages && backup_pages == o.backup_pages &&
           backup_runs == o.backup_runs && load_runs == o.load_runs;
  }
};

int64_t At(std::span<const int64_t> v, size_t i) { return i < v.size() ? v[i] : 0; }

// Lanes with the same copies have the same schedule: one schedule rank stands for them all (in
// lane order of their first member, so the result does not depend on a sort's ties). Fills
// lane_rank (each lane's class) and members (each class's lanes).
std::vector<LaneWork> LaneClasses(const std::vector<LaneWork>& work, std::vector<int>& lane_rank,
                                  std::vector<int64_t>& members) {
  std::vector<LaneWork> classes;
  lane_rank.assign(work.size(), 0);
  members.clear();
  for (size_t r = 0; r < work.size(); ++r) {
    size_t k = 0;
    while (k < classes.size() && !(classes[k] == work[r])) ++k;
    if (k == classes.size()) {
      classes.push_back(work[r]);
      members.push_back(0);
    }
    lane_rank[r] = static_cast<int>(k);
    ++members[k];
  }
  return classes;
}

SchedOp MakeOp(const char* name, OpKind k, SchedStream st, Engine e, double work, int64_t layer,
               int rank) {
  SchedOp o;
  o.name = name;
  o.kind = k;
  o.stream = st;
  o.engine = e;
  o.work_s = work;
  o.layer = layer;
  o.rank = rank;
  return o;
}

// What a request's schedule is made of, besides the lane classes.
struct RequestTerms {
  GatherCost gather;
  bool gathers = false;         // a prefix to gather
  bool load_all_first = false;  // p2p: every layer's load-back before the first gather layer
  double compute_layer_s = 0;
  int64_t ahead = 0;  // gather layers run ahead of the forward pass
  const BackupScheduleImpl* backup = nullptr;
  double tail_submit_s = 0;  // the tail backup's submission, once the forward pass ends
};

// Each schedule rank's ops by layer (-1: none), and its gather index upload (-1: none).
struct RequestOps {
  std::vector<std::vector<int>> load, compute, gather, backup;
  std::vector<int> index;
};

// The request's ops as the executor enqueues them (exec/executor.cpp, RankRun::Request), on each
// schedule rank. Layer l loads on the h2d stream (all layers back to back); its gather waits for
// that load and for the forward layer whose buffer it reuses, and is one collective over the
// ranks; its forward waits for the gather (or the load); its per-layer backup waits for the
// forward layer.
RequestOps AddRequestOps(Schedule& s, const std::vector<LaneWork>& classes, const RequestTerms& t,
                         size_t L) {
  const int R = static_cast<int>(classes.size());
  const size_t Ru = classes.size();
  RequestOps ops{std::vector<std::vector<int>>(Ru), std::vector<std::vector<int>>(Ru),
                 std::vector<std::vector<int>>(Ru), std::vector<std::vector<int>>(Ru),
                 std::vector<int>(Ru, -1)};
  for (int q = 0; q < R; ++q) {
    const LaneWork& w = classes[static_cast<size_t>(q)];
    const size_t qu = static_cast<size_t>(q);
    // The index upload of a packed gather, before the first gather layer on its stream (the
    // executor uploads it while setting the gather up; it does not wait for the load-back
    // copies, so it is not placed on the h2d engine).
    if (t.gathers && t.gather.once_s > 0)
      ops.index[qu] = s.Add(MakeOp("gather_index", OpKind::kH2D, SchedStream::kComm, Engine::kNone,
                                   t.gather.once_s, -1, q));
    ops.load[qu].assign(L, -1);
    ops.compute[qu].assign(L, -1);
    ops.gather[qu].assign(L, -1);
    if (w.load_pages == 0) continue;
    if (t.load_all_first) {
      ops.load[qu].assign(L, s.Add(MakeOp("load_back", OpKind::kH2D, SchedStream::kH2D,
                                          Engine::kCopyH2D, w.load, -1, q)));
    } else {
      for (size_t l = 0; l < L; ++l)
        ops.load[qu][l] = s.Add(MakeOp("load_back", OpKind::kH2D, SchedStream::kH2D,
                                       Engine::kCopyH2D, w.load, static_cast<int64_t>(l), q));
    }
  }
  for (size_t l = 0; l < L; ++l) {
    for (int q = 0; q < R; ++q) {
      const LaneWork& w = classes[static_cast<size_t>(q)];
      const size_t qu = static_cast<size_t>(q);
      const int loaded_dep = ops.load[qu][l];
      int ready = loaded_dep;
      if (t.gathers) {
        SchedOp go = MakeOp("gather", OpKind::kGather, SchedStream::kComm, Engine::kNone,
                            l == 0 ? t.gather.first_layer_s : t.gather.per_layer_s,
                            static_cast<int64_t>(l), q);
        go.deps[0] = loaded_dep;
        // The buffer layer l fills was read by forward layer l - 1 - ahead.
        const int64_t reuse = static_cast<int64_t>(l) - 1 - t.ahead;
        go.deps[1] = reuse >= 0 ? ops.compute[qu][static_cast<size_t>(reuse)] : -1;
        if (R > 1) go.group = static_cast<int>(l);
        ready = ops.gather[qu][l] = s.Add(go);
      }
      SchedOp co = MakeOp("compute", OpKind::kForward, SchedStream::kCompute, Engine::kNone,
                          t.compute_layer_s, static_cast<int64_t>(l), q);
      co.deps[0] = ready;
      ops.compute[qu][l] = s.Add(co);
      if (w.backup_pages > 0 && t.backup->CopiesEachLayer()) {
        SchedOp bo = MakeOp("backup", OpKind::kD2H, SchedStream::kD2H, Engine::kCopyD2H,
                            w.backup_layer, static_cast<int64_t>(l), q);
        bo.deps[0] = ops.compute[qu][l];
        ops.backup[qu].push_back(s.Add(bo));
      }
    }
  }
  for (int q = 0; q < R; ++q) {
    const LaneWork& w = classes[static_cast<size_t>(q)];
    if (w.backup_pages == 0 || t.backup->CopiesEachLayer()) continue;
    // One copy per pool of all layers after the forward pass, submitted when it ends.
    SchedOp bo =
        MakeOp("backup", OpKind::kD2H, SchedStream::kD2H, Engine::kCopyD2H, w.backup_tail, -1, q);
    bo.deps[0] = ops.compute[static_cast<size_t>(q)][L - 1];
    bo.delay_s = t.tail_submit_s;
    ops.backup[static_cast<size_t>(q)].push_back(s.Add(bo));
  }
  return ops;
}

// The ops of one schedule rank that TimeUnshared reports, by what they are.
enum class UnsharedOp { kIndex, kLoad, kGather, kCompute, kBackup };

// When the request's schedule ends, without building it: the forward pass, and the backups under
// either schedule (with every share 1 the backups do not change the forward pass).
struct UnsharedEnds {
  double forward_s = 0;  // the last forward layer's end over the schedule ranks
  // The last backup copy's end (0 without backups), per layer and as a tail.
  double per_layer_end = 0, tail_end = 0;
};

// The times Schedule::Run gives the ops AddRequestOps builds when every overlap share is 1,
// computed in the order AddRequestOps adds them, without building or running them. No op then
// slows another (each ends work_s after it starts), and each copy engine serves one stream only,
// so it never makes an op wait: an op starts when it is ready (its stream's previous op ended,
// its deps ended, plus its delay), a gather group when its last member is ready. Each start is
// the same max and each end the same sum as in the event loop, so the times are equal bit for
// bit (a test holds them to Schedule::Run). `record(op, rank, layer, start, end)` receives every
// op's times (layer -1: all layers or none), the backups of t.backup's schedule; `ring` is
// scratch.
template <class Record>
UnsharedEnds TimeUnshared(const std::vector<LaneWork>& classes, const RequestTerms& t, size_t L,
                          std::vector<double>& ring, Record&& record) {
  const size_t R = classes.size();
  // Per rank: its comm, compute, d2h and h2d streams' last end, then the compute ends of the
  // last `keep` layers (layer l's at l % keep: the forward layer whose buffer gather l reuses
  // is l - 1 - ahead, in the slot layer l's own end takes next).
  const size_t keep =
      static_cast<size_t>(std::clamp<int64_t>(t.ahead, 0, static_cast<int64_t>(L))) + 1;
  const size_t stride = 4 + keep;
  ring.assign(R * stride, 0.0);
  const bool each_layer = t.backup->CopiesEachLayer();
  for (size_t q = 0; q < R; ++q) {
    double* st = ring.data() + q * stride;
    if (t.gathers && t.gather.once_s > 0) {
      st[0] = 0.0 + t.gather.once_s;
      record(UnsharedOp::kIndex, q, -1, 0.0, st[0]);
    }
    if (classes[q].load_pages > 0 && t.load_all_first) {
      st[3] = 0.0 + classes[q].load;
      record(UnsharedOp::kLoad, q, -1, 0.0, st[3]);
    }
  }
  double group_start = 0;
  for (size_t l = 0; l < L; ++l) {
    const int64_t reuse = static_cast<int64_t>(l) - 1 - t.ahead;
    const size_t slot = l % keep;
    for (size_t q = 0; q < R; ++q) {
      double* st = ring.data() + q * stride;
      if (classes[q].load_pages > 0 && !t.load_all_first) {
        const double start = st[3];
        st[3] = start + classes[q].load;
        record(UnsharedOp::kLoad, q, static_cast<int64_t>(l), start, st[3]);
      }
    }
    if (t.gathers) {
      // Each gather's ready time: its stream, its layer's load-back, the forward layer whose
      // buffer it reuses; a group (several ranks) starts at its members' latest.
      for (size_t q = 0; q < R; ++q) {
        const double* st = ring.data() + q * stride;
        double ready = st[0];
        if (classes[q].load_pages > 0) ready = std::max(ready, st[3]);
        if (reuse >= 0) ready = std::max(ready, st[4 + slot]);
        group_start = q == 0 ? ready : std::max(group_start, ready);
      }
    }
    for (size_t q = 0; q < R; ++q) {
      const LaneWork& w = classes[q];
      double* st = ring.data() + q * stride;
      double ready = st[1];
      if (t.gathers) {
        const double end = group_start + (l == 0 ? t.gather.first_layer_s : t.gather.per_layer_s);
        record(UnsharedOp::kGather, q, static_cast<int64_t>(l), group_start, end);
        st[0] = end;
        ready = std::max(ready, end);
      } else if (w.load_pages > 0) {
        ready = std::max(ready, st[3]);
      }
      st[1] = ready + t.compute_layer_s;
      st[4 + slot] = st[1];
      record(UnsharedOp::kCompute, q, static_cast<int64_t>(l), ready, st[1]);
      if (w.backup_pages > 0) {
        const double start = std::max(st[2], st[1]);
        st[2] = start + w.backup_layer;
        if (each_layer) record(UnsharedOp::kBackup, q, static_cast<int64_t>(l), start, st[2]);
      }
    }
  }
  UnsharedEnds ends;
  for (size_t q = 0; q < R; ++q) {
    const LaneWork& w = classes[q];
    double* st = ring.data() + q * stride;
    ends.forward_s = std::max(ends.forward_s, st[1]);
    if (w.backup_pages == 0) continue;
    ends.per_layer_end = std::max(ends.per_layer_end, st[2]);
    // The tail copy is the first op of its stream.
    const double start = std::max(0.0, st[1]) + t.tail_submit_s;
    const double end = start + w.backup_tail;
    if (!each_layer) record(UnsharedOp::kBackup, q, -1, start, end);
    ends.tail_end = std::max(ends.tail_end, end);
  }
  return ends;
}

// What overlap added to the ops alone: the most any schedule rank's spans grew on each of the
// load-back, gather and compute streams (into c's totals), and each stream's stretch over every
// lane's ops (weighed by the lanes a rank stands for).
void AddOverlap(RequestCost& c, const Schedule& s, const std::vector<ScheduledOp>& t,
                const std::vector<int64_t>& members) {
  const size_t R = members.size();
  std::vector<double> extra_load(R), extra_gather(R), extra_compute(R);
  double sum[4] = {}, sum_alone[4] = {};  // per stream, weighed by lanes
  for (size_t i = 0; i < t.size(); ++i) {
    const SchedOp& o = s.ops()[i];
    const double span = t[i].end_s - t[i].start_s;
    const double extra = t[i].slowed ? span - o.work_s : 0;
    const size_t q = static_cast<size_t>(o.rank);
    const int st = static_cast<int>(o.stream);
    const double m = static_cast<double>(members[q]);
    if (o.stream == SchedStream::kH2D) extra_load[q] += extra;
    if (o.stream == SchedStream::kComm) extra_gather[q] += extra;
    if (o.stream == SchedStream::kCompute) extra_compute[q] += extra;
    sum[st] += m * extra;
    sum_alone[st] += m * o.work_s;
  }
  const auto stretch = [&](SchedStream st) {
    const int k = static_cast<int>(st);
    return sum[k] == 0 || sum_alone[k] <= 0 ? 1.0 : (sum_alone[k] + sum[k]) / sum_alone[k];
  };
  c.load_back_stretch = stretch(SchedStream::kH2D);
  c.gather_stretch = stretch(SchedStream::kComm);
  c.compute_stretch = stretch(SchedStream::kCompute);
  c.backup_stretch = stretch(SchedStream::kD2H);
  c.load_back_copy_s += *std::max_element(extra_load.begin(), extra_load.end());
  c.gather_s += *std::max_element(extra_gather.begin(), extra_gather.end());
  c.compute_s += *std::max_element(extra_compute.begin(), extra_compute.end());
}

// Each layer's forward end and load-back end over the schedule ranks; returns the last backup's
// end (0 without backups).
double ReadLayerEnds(RequestCost& c, const RequestOps& ops, const std::vector<ScheduledOp>& t,
                     size_t L) {
  c.layer_end_s.assign(L, 0);
  c.load_end_s.assign(L, 0);
  double backup_end = 0;
  for (size_t q = 0; q < ops.compute.size(); ++q) {
    for (size_t l = 0; l < L; ++l) {
      c.layer_end_s[l] =
          std::max(c.layer_end_s[l], t[static_cast<size_t>(ops.compute[q][l])].end_s);
      if (ops.load[q][l] >= 0)
        c.load_end_s[l] = std::max(c.load_end_s[l], t[static_cast<size_t>(ops.load[q][l])].end_s);
    }
    if (!ops.backup[q].empty())
      backup_end = std::max(backup_end, t[static_cast<size_t>(ops.backup[q].back())].end_s);
  }
  return backup_end;
}

}  // namespace

namespace {

// The request's terms and each lane's copies (RequestTerms, LaneWork) from its shape.
RequestTerms TermsOf(const CostModel& m, const ForwardShape& f) {
  RequestTerms terms;
  // A method may price itself from something else than the prefix (partial_merge: queries and
  // partial outputs).
  const GatherMethodImpl& method = GatherMethodOf(f.gather);
  if (!GatherCostFor(f.gather).RequestCost(m, f, terms.gather))
    terms.gather = m.Gather(f.gather, f.shard_pages, f.prefix_pages);
  terms.gathers = f.prefix_pages > 0;
  // A gather that reads peers' pools (p2p) is ordered by no event: the executor loads every
  // layer of the load-backs first, one copy per pool, and every gather layer waits for that.
  terms.load_all_first = terms.gathers && method.ReadsPeers();
  terms.compute_layer_s = m.ComputeLayerS(f.new_tokens, f.prefix_tokens);
  terms.ahead = method.LayersAhead(f.prefetch_layers < 0 ? m.prefetch_layers() : f.prefetch_layers);
  terms.backup = &BackupScheduleOf(f.backup);
  terms.tail_submit_s = static_cast<double>(m.pools()) * m.hw().copy_submit_s;
  return terms;
}

std::vector<LaneWork> LaneWorkOf(const CostModel& m, const ForwardShape& f,
                                 const RequestTerms& terms) {
  const size_t lanes =
      std::max({static_cast<size_t>(m.ranks()), f.load_back_pages.size(), f.backup_pages.size()});
  const auto pools = static_cast<double>(m.pools());
  std::vector<LaneWork> work(lanes);
  for (size_t r = 0; r < lanes; ++r) {
    LaneWork& w = work[r];
    w.load_pages = At(f.load_back_pages, r);
    w.backup_pages = At(f.backup_pages, r);
    w.backup_runs = std::max<int64_t>(1, At(f.backup_runs, r));
    w.load_runs = std::max<int64_t>(1, At(f.load_back_runs, r));
    if (w.load_pages > 0) {
      const int64_t layers = terms.load_all_first ? m.layers() : 1;
      w.load = m.LoadBackCopiesS(w.load_pages, layers, static_cast<double>(w.load_runs)) +
               pools * m.hw().copy_submit_s;
    }
    if (w.backup_pages > 0) {
      const double bytes = static_cast<double>(w.backup_pages) * m.page_layer_bytes();
      const auto runs = static_cast<double>(w.backup_runs);
      w.backup_layer = m.BackupCopiesS(BackupSchedule::kPerLayer, w.backup_pages, 1, bytes, runs);
      w.backup_tail = m.BackupCopiesS(BackupSchedule::kTail, w.backup_pages, m.layers(),
                                      bytes * static_cast<double>(m.layers()), runs);
    }
  }
  return work;
}

// The ops of the request schedule and their times: by the event loop, or by TimeUnshared where
// every overlap share is 1 (the same times). Fills c's schedule detail and adds what overlap
// added to its totals; returns the last backup's end (0 without backups).
double ScheduleInDetail(RequestCost& c, const std::vector<LaneWork>& classes,
                        const std::vector<int64_t>& members, const RequestTerms& terms, size_t L,
                        const OverlapTable& overlap, bool unshared) {
  Schedule s;
  s.Reserve(classes.size() * (4 * L + 3));
  const RequestOps ops = AddRequestOps(s, classes, terms, L);
  std::vector<ScheduledOp> t;
  if (unshared) {
    t.resize(s.ops().size());
    std::vector<double> ring;
    TimeUnshared(classes, terms, L, ring,
                 [&](UnsharedOp k, size_t q, int64_t l, double start, double end) {
                   const size_t lu = l < 0 ? 0 : static_cast<size_t>(l);
                   int i = -1;
                   switch (k) {
                     case UnsharedOp::kIndex:
                       i = ops.index[q];
                       break;
                     case UnsharedOp::kLoad:
                       i = ops.load[q][lu];
                       break;
                     case UnsharedOp::kGather:
                       i = ops.gather[q][lu];
                       break;
                     case UnsharedOp::kCompute:
                       i = ops.compute[q][lu];
                       break;
                     case UnsharedOp::kBackup:
                       i = ops.backup[q][l < 0 ? 0 : lu];
                       break;
                   }
                   t[static_cast<size_t>(i)] = ScheduledOp{start, end, false};
                 });
  } else {
    t = s.Run(overlap);
  }
  AddOverlap(c, s, t, members);
  const double backup_end = ReadLayerEnds(c, ops, t, L);
  c.ops = s.Release();
  c.times = std::move(t);
  return backup_end;
}

}  // namespace

namespace {

// Fills c's backup block and service time from its forward end and the backups' end under
// `schedule` (`backed`: the request backs pages up).
void BackupTotals(const CostModel& m, const BackupScheduleCost& schedule, bool backed,
                  double backup_end, RequestCost& c) {
  BackupCost& b = c.backup;
  b.forward_s = c.forward_s;
  if (!backed) {
    b.total_s = c.forward_s;
  } else {
    schedule.ScheduledTotal(m, backup_end, m.pools(), b);
  }
  b.beyond_forward_s = b.total_s - b.forward_s;
  c.service_s = b.total_s;
}

// The last totals-only evaluations of this thread (CostModel::Evaluate without schedule detail,
// every share 1), by model and shape, each under both backup schedules: a request's `cost`
// decisions price one shape under each schedule, for every gather method, then the chosen
// method's again. Per thread, so that replays on several threads share nothing.
struct TotalsMemo {
  struct Entry {
    uint64_t model = 0;  // 0: empty
    std::vector<int64_t> key;
    RequestCost per_layer, tail;
  };
  std::array<Entry, 8> entries;
  size_t next = 0;             // the entry the next miss replaces
  std::vector<int64_t> key;    // the shape being looked up
  std::vector<double> ring;    // TimeUnshared's scratch
  std::vector<int> lane_rank;  // LaneClasses' output, not kept (no schedule detail)

  // The key of `f` under model `m`: every field Evaluate reads but the backup schedule, as
  // Evaluate reads it (prefetch_layers -1 as the model's; backup runs per lane, at least 1; no
  // shards without a prefix, where nothing is gathered), so that a policy's decision and the
  // plan's prediction of one request meet in one entry.
  void KeyOf(const CostModel& m, const ForwardShape& f) {
    key.clear();
    key.insert(key.end(), {f.new_tokens, f.prefix_tokens, f.prefix_pages,
                           f.prefetch_layers < 0 ? m.prefetch_layers() : f.prefetch_layers,
                           static_cast<int64_t>(f.gather)});
    const std::span<const int64_t> shards =
        f.prefix_pages > 0 ? f.shard_pages : std::span<const int64_t>();
    for (std::span<const int64_t> v : {shards, f.load_back_pages, f.backup_pages}) {
      key.push_back(static_cast<int64_t>(v.size()));
      key.insert(key.end(), v.begin(), v.end());
    }
    const size_t lanes =
        std::max({static_cast<size_t>(m.ranks()), f.load_back_pages.size(), f.backup_pages.size()});
    for (size_t r = 0; r < lanes; ++r) key.push_back(std::max<int64_t>(1, At(f.backup_runs, r)));
    for (size_t r = 0; r < lanes; ++r) key.push_back(std::max<int64_t>(1, At(f.load_back_runs, r)));
  }
  const Entry* Find(uint64_t model) const {
    for (const Entry& e : entries)
      if (e.model == model && e.key == key) return &e;
    return nullptr;
  }
};

thread_local TotalsMemo g_totals;

}  // namespace

RequestCost CostModel::Evaluate(const ForwardShape& f) const {
  const size_t L = static_cast<size_t>(layers_);
  const bool totals_only = unshared_ && !f.schedule_detail;
  TotalsMemo& memo = g_totals;
  if (totals_only) {
    memo.KeyOf(*this, f);
    if (const TotalsMemo::Entry* e = memo.Find(id_))
      return f.backup == BackupSchedule::kTail ? e->tail : e->per_layer;
  }
  RequestCost c;
  int64_t backed = 0;
  for (int64_t x : f.backup_pages) backed += x;
  const RequestTerms terms = TermsOf(*this, f);
  std::vector<int64_t> members;
  const std::vector<LaneWork> classes =
      LaneClasses(LaneWorkOf(*this, f, terms), totals_only ? memo.lane_rank : c.lane_rank, members);

  // Closed forms of the ops alone on the slowest lane, then what overlap added.
  double load_slowest = 0;
  for (const LaneWork& w : classes) load_slowest = std::max(load_slowest, w.load);
  c.compute_s = terms.compute_layer_s * static_cast<double>(layers_);
  c.gather_s = terms.gather.total_s;
  c.load_back_copy_s = load_slowest * (terms.load_all_first ? 1.0 : static_cast<double>(layers_));
  if (totals_only) {
    // Nothing overlaps to add, and the totals need no ops. Both schedules at once, for the memo.
    const UnsharedEnds e = TimeUnshared(classes, terms, L, memo.ring,
                                        [](UnsharedOp, size_t, int64_t, double, double) {});
    c.forward_s = e.forward_s;
    c.load_back_exposed_s = std::max(0.0, c.forward_s - c.compute_s - c.gather_s);
    TotalsMemo::Entry& slot = memo.entries[memo.next];
    memo.next = (memo.next + 1) % memo.entries.size();
    slot.model = id_;
    slot.key.assign(memo.key.begin(), memo.key.end());
    slot.per_layer = c;
    BackupTotals(*this, BackupCostFor(BackupSchedule::kPerLayer), backed > 0, e.per_layer_end,
                 slot.per_layer);
    slot.tail = c;
    BackupTotals(*this, BackupCostFor(BackupSchedule::kTail), backed > 0, e.tail_end, slot.tail);
    return f.backup == BackupSchedule::kTail ? slot.tail : slot.per_layer;
  }
  const double backup_end = ScheduleInDetail(c, classes, members, terms, L, overlap_, unshared_);
  c.forward_s = c.layer_end_s.back();
  // Exposed load-back: the forward pass beyond its gather and compute spans. With layers
  // gathered ahead, gather time hidden under compute makes this smaller, never below 0.
  c.load_back_exposed_s = std::max(0.0, c.forward_s - c.compute_s - c.gather_s);
  BackupTotals(*this, BackupCostFor(f.backup), backed > 0, backup_end, c);
  return c;
}

RequestCost CostModel::Request(const RequestPlan& p, bool schedule_detail) const {
  // Write-back at eviction: all layers of the evicted pages, before the forward pass.
  double write_back = 0;
  for (int64_t pages : PagesPerLane(p.write_back, ranks_))
    if (pages > 0)
      write_back =
          std::max(write_back, pools_ * hw_.copy_submit_s + CopiesLatencyS(pages, layers_) +
                                   static_cast<double>(pages) * page_layer_bytes_ *
                                       static_cast<double>(layers_) / (hw_.d2h_gbps * 1e9));
  PlanShape f(p, ranks_, page_tokens_, prefetch_layers_);
  f.shape.schedule_detail = schedule_detail;
  RequestCost c = Evaluate(f.shape);
  c.write_back_s = write_back;
  c.hit_agreement_s = HitAgreementS(p.host_match_pages);
  c.service_s = write_back + c.hit_agreement_s + c.backup.total_s;
  return c;
}

}  // namespace kvlanes

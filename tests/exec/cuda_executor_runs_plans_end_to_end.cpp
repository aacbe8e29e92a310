// The CUDA backend end to end (run on the device machine: ctest -L gpu):
//  - cp_size 1 with NCCL (a one-rank communicator: all-gather for packed, all-reduce for dense),
//    every op measured with CUDA events, every gathered and loaded byte checked on the GPU;
//  - CUDA IPC peer reads between two processes on the same GPU (a p2p-only plan needs no NCCL,
//    so two ranks may share GPU 0), and between two GPUs;
//  - cp_size 2 on two GPUs (one GPU per rank): every gather method (dense all-reduce, packed
//    all-gather, zigzag when proven, p2p) on a multi-turn trace's multi-extent prefixes and on
//    prefixes a run descriptor proves zigzag; every rank's dense result verified;
//  - two ranks on one GPU with an NCCL gather: a clear error before any work;
//  - a plan larger than the GPU: a clear error with the sizes;
//  - a flipped byte: found by the GPU verification kernel, reported with op, rank and page;
//  - --forward model on a token-interleaved plan: the merge on the GPU, checked per request;
//  - --forward model on a serving plan whose requests span several passes: each chunk's queries.
// Cases that need two GPUs carry the test suite "gpu2": ctest runs them as their own entry (label
// gpu2, `--gpus 2 --test-suite=gpu2`), which exits 77 (skipped) where fewer than two GPUs are
// visible, and runs the rest without them (label gpu). Run directly on one GPU, a gpu2 case
// fails; it never passes unrun.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "exec_cases.h"

extern int g_gpu_count;

namespace kvlanes::exec::testing {
namespace {

// The modelled forward pass of 100k-token requests takes seconds per layer; a thousandth of it
// still runs the real kernel and its overlap with the backups while keeping the test short.
ExecPlan GpuPlan(const PlanFile& pf) {
  ExecPlan p = MakeExecPlan(pf, "(memory)", -1);
  ScaleCompute(p, 1e-3);
  return p;
}

RunOptions CudaOptions(const TempDir& dir) {
  RunOptions o;
  o.backend = "cuda";
  o.out = dir.File("measured.json");
  o.timeline = dir.File("timeline.json");
  o.timeout_s = 120;
  o.quiet = true;
  return o;
}

void CheckCoverage(const PlanFile& pf, const ReplayConfig& cfg, const RunOptions& o) {
  const nlohmann::json m = ReadJson(o.out);
  std::set<std::pair<std::string, int>> got;
  for (const auto& op : m["ops"]) {
    got.insert({op["id"].get<std::string>(), op["rank"].get<int>()});
    CHECK(op["seconds"].get<double>() >= 0);
  }
  CHECK(got == ExpectedOps(pf, cfg));
  CHECK(m["verified_bytes"].get<int64_t>() > 0);
  CHECK(m["context"]["gpu"].get<std::string>().size() > 0);
  MESSAGE("GPU ", m["context"]["gpu"].get<std::string>(), ", driver ",
          m["context"]["driver_version"].get<std::string>(), ", NCCL ",
          m["context"]["nccl_version"].get<std::string>(), ": ", m["ops"].size(), " ops, ",
          m["verified_bytes"].get<int64_t>(), " bytes verified");
}

// The cases that need two GPUs carry the test suite "gpu2"; a run that reaches one with fewer
// visible fails rather than passing with nothing run.
void RequireTwoGpus() {
  REQUIRE_MESSAGE(g_gpu_count >= 2, g_gpu_count,
                  " GPU(s) visible: run the gpu2 cases through ctest (-L gpu2), which skips them");
}

TEST_CASE("cp_size 1 runs end to end with NCCL, every op measured and every byte verified") {
  for (const char* method : {"packed", "dense", "zigzag-gated"}) {
    CAPTURE(method);
    const ReplayConfig cfg =
        SmallConfig(1, {"cache.device_pages_per_lane=2400", "cache.host_pages_per_lane=6000",
                        std::string("gather.method=") + method, "backup.schedule=per-layer"});
    const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
    TempDir dir;
    const RunOptions o = CudaOptions(dir);
    const RunOutcome out = RunLocal(GpuPlan(pf), o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    CheckCoverage(pf, cfg, o);
    CHECK(ReadJson(o.out)["context"]["nccl_version"].get<std::string>().find("not used") ==
          std::string::npos);
    CHECK(NoChildrenLeft());
  }
}

TEST_CASE("--forward model runs a DeepSeek-V3.2 plan end to end with real compute ops") {
  // 4 layers of the real shape: 3 dense, 1 MoE (all 256 experts' weights), the fp8 latent and
  // indexer pools the preset implies.
  const ReplayConfig cfg = SmallConfig(
      1, {"model.preset=deepseek-v3.2", "model.layers=4", "cache.device_pages_per_lane=2400",
          "cache.host_pages_per_lane=6000", "gather.method=packed", "backup.schedule=per-layer"});
  const PlanFile pf = ReplayPlan("traces/kvtester_trace_0034.json", cfg, 12);
  ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  UseModelForward(plan);
  CHECK(plan.forward_plan.preset == "deepseek-v3.2");
  TempDir dir;
  const RunOptions o = CudaOptions(dir);
  const RunOutcome out = RunLocal(plan, o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  CheckCoverage(pf, cfg, o);
  const nlohmann::json m = ReadJson(o.out);
  int64_t computes = 0, with_prefix = 0;
  for (const auto& op : m["ops"]) {
    if (op["kind"] != "compute") continue;
    ++computes;
    CHECK(op["forward"] == "model");
    CHECK(op["seconds"].get<double>() > 0);
    if (op["prefix_tokens"].get<int64_t>() > 0) ++with_prefix;
    MESSAGE(op["id"].get<std::string>(), ": ", op["new_tokens"].get<int64_t>(), " new over ",
            op["prefix_tokens"].get<int64_t>(), " prefix tokens, ",
            op["seconds"].get<double>() * 1e3, " ms for 4 layers");
  }
  CHECK(computes > 0);
  CHECK(with_prefix > 0);  // the attention read a gathered prefix
  CHECK(NoChildrenLeft());
}

TEST_CASE("--forward model runs a serving plan whose requests are prefilled over several passes") {
  // Passes of at most 4,096 tokens in chunks of 2,048: the Mooncake conversation trace's first
  // requests (thousands of tokens each, every one after the first sharing its first block) span
  // several passes with a gathered prefix; each later chunk runs the proxy over its own queries.
  // (The excerpt's first requests share no block: nothing gathered, nothing to verify.)
  const ReplayConfig cfg = SmallConfig(
      1, {"model.preset=deepseek-v3.2", "model.layers=4", "cache.device_pages_per_lane=2400",
          "cache.host_pages_per_lane=6000", "gather.method=packed", "backup.schedule=tail",
          "serving.mode=serving", "serving.replicas=1", "serving.max_batch_tokens=4096",
          "serving.chunk_tokens=2048", "trace.rate_scale=60",
          "hardware.profile=" + SourcePath("config/profiles/8xh200_nccl_model.yaml")});
  const PlanFile pf = ServingPlanOf("traces/mooncake/conversation_trace.jsonl", cfg, 11);
  std::map<int64_t, int64_t> chunks_of;
  for (const PlanPass& p : pf.passes)
    for (const PlanPassChunk& c : p.chunks) ++chunks_of[c.request];
  REQUIRE(std::any_of(pf.requests.begin(), pf.requests.end(), [&](const RequestPlan& r) {
    return r.prefix_pages > 0 && chunks_of[r.request] > 1;
  }));
  ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  UseModelForward(plan);
  TempDir dir;
  const RunOptions o = CudaOptions(dir);
  const RunOutcome out = RunLocal(plan, o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  const nlohmann::json m = ReadJson(o.out);
  CHECK(m["verified_bytes"].get<int64_t>() > 0);
  CHECK(m["serving"]["passes"].size() == pf.passes.size());
  // Every request's tokens are computed once: its compute op's first chunk plus its chunk ops.
  std::map<int64_t, int64_t> computed, later;
  for (const auto& op : m["ops"]) {
    const std::string kind = op["kind"].get<std::string>();
    if (kind != "compute" && kind != "chunk") continue;
    const std::string id = op["id"].get<std::string>();
    const int64_t req = std::stoll(id.substr(0, id.find('/')));
    CHECK(op["forward"] == "model");
    CHECK(op["seconds"].get<double>() > 0);
    const int64_t n = kind == "chunk"               ? op["new_tokens"].get<int64_t>()
                      : op.contains("chunk_tokens") ? op["chunk_tokens"].get<int64_t>()
                                                    : op["new_tokens"].get<int64_t>();
    CHECK(op["rank_tokens"].get<int64_t>() == n);  // cp_size 1: the rank computes every token
    computed[req] += n;
    if (kind == "chunk") ++later[req];
  }
  for (const RequestPlan& r : pf.requests) {
    CAPTURE(r.request);
    CHECK(computed[r.request] == r.computed_tokens);
    CHECK(later[r.request] == chunks_of[r.request] - 1);
  }
  CHECK(NoChildrenLeft());
}

// A multi-turn conversation, so later requests gather a prefix (the first requests of the
// Mooncake excerpt share none, and would never exercise the peer reads).
void PeerReadsRun(const std::vector<int>& devices) {
  const ReplayConfig cfg =
      SmallConfig(2, {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=3000",
                      "gather.method=p2p", "backup.schedule=tail"});
  const PlanFile pf = ReplayPlan("traces/kvtester_trace_0034.json", cfg, 100);
  TempDir dir;
  RunOptions o = CudaOptions(dir);
  o.devices = devices;
  const RunOutcome out = RunLocal(GpuPlan(pf), o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  CheckCoverage(pf, cfg, o);
  int64_t p2p = 0;
  const auto measured = ReadJson(o.out);  // (iterating a temporary's member would dangle)
  for (const auto& op : measured["ops"])
    if (op["kind"] == "gather" && op["method"] == "p2p") ++p2p;
  CHECK(p2p > 0);
  CHECK(NoChildrenLeft());
}

TEST_CASE("CUDA IPC peer reads work between two processes on the same GPU") {
  PeerReadsRun({0, 0});
}

TEST_CASE("CUDA IPC peer reads work between two processes on two GPUs" *
          doctest::test_suite("gpu2")) {
  RequireTwoGpus();
  PeerReadsRun({0, 1});
}

// cp_size 1 on one GPU (NCCL with one rank: the pack is the result), cp_size 2 on two GPUs.
void LayerSplitRuns(int cp) {
  const ReplayConfig cfg =
      SmallConfig(cp, {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000",
                       "cache.placement=layer_split", "model.layers=3"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
  int64_t prefix = 0, loaded = 0;
  for (const RequestPlan& p : pf.requests) {
    prefix += p.prefix_pages;
    for (const LaneCopy& c : p.load_back) loaded += static_cast<int64_t>(c.pages.size());
  }
  REQUIRE(prefix > 0);
  TempDir dir;
  RunOptions o = CudaOptions(dir);
  if (cp == 2) o.devices = {0, 1};
  const RunOutcome out = RunLocal(GpuPlan(pf), o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  const nlohmann::json m = ReadJson(o.out);
  const int64_t page_layer = cfg.model.PageBytes(cfg.cache.page_tokens) / cfg.model.layers;
  CHECK(m["verified_bytes"].get<int64_t>() == cp * (prefix + loaded) * 3 * page_layer);
  for (const auto& op : m["ops"])
    if (op["kind"] == "gather") CHECK(op["method"] == "broadcast");
  CHECK(NoChildrenLeft());
}

TEST_CASE("layer_split plans broadcast each layer from its owner, verified on the GPU") {
  LayerSplitRuns(1);
}

TEST_CASE("layer_split plans at cp_size 2 broadcast each layer from its owner, on two GPUs" *
          doctest::test_suite("gpu2")) {
  RequireTwoGpus();
  LayerSplitRuns(2);
}

TEST_CASE(
    "token-interleaved plans merge partial attention; the pool bytes are checked on the GPU") {
  // cp_size 1, and cp_size 4 as four processes on one GPU (no NCCL: nothing is gathered, the
  // merge's exchanges go through the rendezvous); the merge runs on the host over the values
  // the rank's pages hold, whose bytes the GPU verification checks.
  for (int cp : {1, 4}) {
    CAPTURE(cp);
    const ReplayConfig cfg =
        SmallConfig(cp, {"cache.device_pages_per_lane=1200", "cache.host_pages_per_lane=3000",
                         "cache.placement=interleave", "cache.interleave_tokens=1"});
    const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 120);
    int64_t merges = 0;
    for (const RequestPlan& p : pf.requests) merges += p.prefix_pages > 0 ? 1 : 0;
    REQUIRE(merges > 0);
    TempDir dir;
    RunOptions o = CudaOptions(dir);
    o.devices = std::vector<int>(static_cast<size_t>(cp), 0);
    const RunOutcome out = RunLocal(GpuPlan(pf), o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    const nlohmann::json m = ReadJson(o.out);
    int64_t ops = 0;
    for (const auto& op : m["ops"]) {
      if (op["kind"] != "gather") continue;
      CHECK(op["method"] == "partial_merge");
      ++ops;
    }
    CHECK(ops == cp * merges);
    CHECK(NoChildrenLeft());
  }
}

TEST_CASE(
    "--forward model merges token-interleaved prefixes on the GPU, checked against full "
    "attention") {
  // cp_size 1: every layer's attention is the partial attention over the rank's pages (through
  // the page table) and its new tokens, merged; after each request the last layer's merged
  // output is compared with the full attention over the whole prefix.
  const ReplayConfig cfg =
      SmallConfig(1, {"model.preset=deepseek-v3.2", "model.layers=4",
                      "cache.device_pages_per_lane=2400", "cache.host_pages_per_lane=6000",
                      "cache.placement=interleave", "cache.interleave_tokens=1"});
  const PlanFile pf = ReplayPlan("traces/kvtester_trace_0034.json", cfg, 12);
  int64_t merges = 0;
  for (const RequestPlan& p : pf.requests) merges += p.prefix_pages > 0 ? 1 : 0;
  REQUIRE(merges > 0);
  ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  UseModelForward(plan);
  TempDir dir;
  const RunOptions o = CudaOptions(dir);
  const RunOutcome out = RunLocal(plan, o);
  REQUIRE_MESSAGE(out.exit_code == 0, out.message);
  CheckCoverage(pf, cfg, o);
  const nlohmann::json m = ReadJson(o.out);
  int64_t checked = 0;
  for (const auto& op : m["ops"]) {
    if (op["kind"] != "gather") continue;
    CHECK(op["method"] == "partial_merge");
    CHECK(op["merged_on"] == "device");
    CHECK(op["outputs_checked"].get<int64_t>() > 0);
    CHECK(op["max_abs_difference"].get<double>() <= kPartialAttentionTolerance);
    MESSAGE(op["id"].get<std::string>(), ": ", op["prefix_tokens"].get<int64_t>(),
            " prefix tokens, max |merged - full| = ", op["max_abs_difference"].get<double>(),
            " over ", op["outputs_checked"].get<int64_t>(), " outputs");
    ++checked;
  }
  CHECK(checked == merges);
  CHECK(NoChildrenLeft());
}

TEST_CASE("--forward model refuses a token-interleaved plan above cp_size 1 with a clear error") {
  const ReplayConfig cfg = SmallConfig(
      2, {"model.preset=deepseek-v3.2", "model.layers=2", "cache.device_pages_per_lane=1200",
          "cache.placement=interleave", "cache.interleave_tokens=1"});
  const PlanFile pf = ReplayPlan("traces/kvtester_trace_0034.json", cfg, 6);
  ExecPlan plan = MakeExecPlan(pf, "(memory)", -1);
  UseModelForward(plan);
  TempDir dir;
  RunOptions o = CudaOptions(dir);
  o.devices = {0, 0};
  const RunOutcome out = RunLocal(plan, o);
  CHECK(out.exit_code != 0);
  CHECK(out.message.find("runs at cp_size 1 on the CUDA backend") != std::string::npos);
  CHECK(NoChildrenLeft());
}

TEST_CASE("two GPUs: every gather method at cp_size 2, every rank's dense result verified" *
          doctest::test_suite("gpu2")) {
  RequireTwoGpus();
  struct Case {
    const char* method;
    const char* trace;  // "(aligned)": AlignedPrefixTrace, whose prefixes are proven zigzag
    const char* gathered;
  };
  for (const Case& c : {Case{"dense", "traces/kvtester_trace_0034.json", "dense"},
                        Case{"packed", "traces/kvtester_trace_0034.json", "packed"},
                        Case{"p2p", "traces/kvtester_trace_0034.json", "p2p"},
                        Case{"zigzag-gated", "traces/kvtester_trace_0034.json", "packed"},
                        Case{"zigzag-gated", "(aligned)", "zigzag"}}) {
    CAPTURE(c.method);
    CAPTURE(c.trace);
    const ReplayConfig cfg =
        SmallConfig(2, {"cache.device_pages_per_lane=3000", "cache.host_pages_per_lane=3000",
                        std::string("gather.method=") + c.method, "backup.schedule=per-layer"});
    const PlanFile pf =
        c.trace[0] == '(' ? ReplayTrace(AlignedPrefixTrace(5), cfg) : ReplayPlan(c.trace, cfg, 100);
    int64_t multi_extent = 0;
    for (const RequestPlan& p : pf.requests)
      if (p.prefix_pages > 0 && p.runs.size() > 1) ++multi_extent;
    if (c.trace[0] != '(') CHECK(multi_extent > 0);  // the trace's prefixes span several extents
    TempDir dir;
    RunOptions o = CudaOptions(dir);
    o.devices = {0, 1};
    const RunOutcome out = RunLocal(GpuPlan(pf), o);
    REQUIRE_MESSAGE(out.exit_code == 0, out.message);
    CheckCoverage(pf, cfg, o);
    const auto measured = ReadJson(o.out);
    std::set<int> ranks_gathering;
    for (const auto& op : measured["ops"])
      if (op["kind"] == "gather" && op["method"] == c.gathered)
        ranks_gathering.insert(op["rank"].get<int>());
    CHECK(ranks_gathering == std::set<int>{0, 1});
    CHECK(NoChildrenLeft());
  }
}

TEST_CASE("two ranks on one GPU with an NCCL gather fail before any work with a clear error") {
  const ReplayConfig cfg =
      SmallConfig(2, {"cache.device_pages_per_lane=3000", "gather.method=packed"});
  const PlanFile pf = ReplayPlan("traces/kvtester_trace_0034.json", cfg, 100);  // has gathers
  TempDir dir;
  RunOptions o = CudaOptions(dir);
  o.devices = {0, 0};
  const RunOutcome out = RunLocal(GpuPlan(pf), o);
  CHECK(out.exit_code == 1);
  CHECK(out.message.find("ranks 0 and 1 both use GPU 0") != std::string::npos);
  CHECK(out.message.find("NCCL needs one GPU per rank") != std::string::npos);
  CHECK(NoChildrenLeft());
}

TEST_CASE("a plan larger than the GPU fails with the sizes it asked for") {
  const ReplayConfig cfg = SmallConfig(1, {"cache.device_pages_per_lane=1200"});
  PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 10);
  // 2 Gi slots (the most a plan header may hold) x 2 layers x 768 B = 3 TiB; the header's config
  // block repeats the field and must agree.
  nlohmann::json line = pf.header.json;
  line["device_pages_per_lane"] = int64_t{2} << 30;
  line["config"]["cache.device_pages_per_lane"] = int64_t{2} << 30;
  pf.header = ParsePlanHeader(line, "(memory)");
  TempDir dir;
  const RunOutcome out = RunLocal(GpuPlan(pf), CudaOptions(dir));
  CHECK(out.exit_code == 1);
  CHECK(out.message.find("out of device memory: the plan needs") != std::string::npos);
  CHECK(out.message.find("device pools 3072.000 GiB") != std::string::npos);
  CHECK(NoChildrenLeft());
}

TEST_CASE("a flipped byte is found by the GPU verification and named with op, rank and page") {
  const ReplayConfig cfg =
      SmallConfig(1, {"cache.device_pages_per_lane=2400", "gather.method=packed"});
  const PlanFile pf = ReplayPlan("traces/mooncake_excerpt.jsonl", cfg, 60);
  std::string id;
  for (const RequestPlan& p : pf.requests)
    if (p.prefix_pages > 0 && id.empty()) id = std::to_string(p.request) + "/gather";
  REQUIRE(!id.empty());
  TempDir dir;
  RunOptions o = CudaOptions(dir);
  o.exec.faults.push_back(ParseFault("corrupt:0:" + id));
  const RunOutcome out = RunLocal(GpuPlan(pf), o);
  CHECK(out.exit_code == 1);
  CHECK(out.message.find("op " + id + ", rank 0, layer 0: logical page") != std::string::npos);
  CHECK(NoChildrenLeft());
}

}  // namespace
}  // namespace kvlanes::exec::testing

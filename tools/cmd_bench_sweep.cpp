// kvlanes bench sweep: times every primitive of the executor over a grid of sizes and writes
// the measurement file `kvlanes calibrate` fits (exec/bench/sweep.h; format: docs/calibration.md).
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "exec/bench/sweep.h"
#include "exec/exec_error.h"
#include "exec/forward_model.h"
#include "io/input_error.h"
#include "io/output_file.h"
#include "sim/config.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

// A comma list of integers >= min for option `flag`.
std::vector<int64_t> IntList(const std::string& text, const char* flag, int64_t min) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < min)
      throw InputError("", 0, flag, "'" + item + "' is not an integer >= " + std::to_string(min));
    out.push_back(v);
  }
  if (out.empty()) throw InputError("", 0, flag, "empty list");
  return out;
}

}  // namespace

// Every option of `bench sweep`, with the defaults of SweepOptions.
po::options_description SweepOptionsDescription() {
  po::options_description desc("options");
  const exec::SweepOptions d;
  // clang-format off
  desc.add_options()
      ("out", po::value<std::string>(), "write the measurement JSON here (required)")
      ("config", po::value<std::string>(),
       "replay config giving the geometry (page_tokens, layers, pools, host_layout); default: "
       "DeepSeek-V3.2-like, 64-token pages, 61 layers, layer_first")
      ("host-layout", po::value<std::string>(), "override the host layout: layer_first | page_first | page_first_direct")
      ("backend", po::value<std::string>()->default_value("cuda"), "cuda | host (host memory, steady clock)")
      ("device", po::value<int>()->default_value(d.device), "cuda, one rank: GPU index")
      ("ranks", po::value<int>()->default_value(d.ranks),
       "ranks (one process each); above 1 only collectives and peer reads are measured")
      ("devices", po::value<std::string>(), "cuda, several ranks: GPU of each rank, comma-separated (default: rank r on GPU r)")
      ("tier-copy", po::value<std::string>()->default_value("kernel"), "cuda tier copies: kernel (SM copy kernel) | memcpy (cudaMemcpy2DAsync) | batch (cudaMemcpyBatchAsync)")
      ("tier-max-ctas", po::value<int>(), "--tier-copy kernel: at most N CTAs per tier copy instead of the tuned cap (0: no cap); for experiments")
      ("max-pages", po::value<int64_t>()->default_value(d.max_pages), "largest page count of a one-layer copy or gather")
      ("max-all-layer-pages", po::value<int64_t>()->default_value(d.max_all_layer_pages),
       "largest page count of an all-layer copy")
      ("repeats", po::value<int>()->default_value(d.repeats), "timed runs per sample (the median is kept)")
      ("warmup", po::value<int>()->default_value(d.warmup), "untimed runs before them")
      ("quick", po::bool_switch(), "small grid (max pages 64, all-layer 16, 5 repeats, 1 warm-up): for tests")
      ("slot-runs", po::value<std::string>()->default_value("1"),
       "host copies: comma-separated run lengths R; for each, the copy grid with slots in runs of R "
       "adjacent pages (1: every page on its own random slot)")
      ("backup-runs", po::value<std::string>()->default_value("4"),
       "backups over a forward pass: comma-separated run lengths of their slots, a sample grid for "
       "each (two or more let calibrate fit a cost per entry apart from the bytes)")
      ("backup-schedules", po::value<std::string>()->default_value("per-layer,tail"),
       "backups over a forward pass: the schedules sampled, a comma list of per-layer and tail")
      ("backup-gather-pages", po::value<std::string>(),
       "backups over a forward pass: comma-separated page counts of the packed gather beside them, "
       "a sample grid for each (0: none; default 0,1024,2048, capped at --max-pages)")
      ("backup-forward-tokens", po::value<int64_t>()->default_value(d.backup_forward_tokens),
       "backups with --forward model: at most this many new tokens in the proxy layers before them "
       "(n pages backed up follow n * page_tokens tokens up to this)")
      ("set", po::value<std::vector<std::string>>()->composing(),
       "KEY=VALUE config setting after --config (repeatable), e.g. model.preset=glm-5")
      ("forward", po::value<std::string>()->default_value("synthetic"),
       "the forward pass of the forward grid and the pairs: synthetic (spin kernel; no forward grid) | "
       "model (the proxy of the config's model shape; cuda)")
      ("only", po::value<std::string>(),
       "comma list of groups to run: copies (tier copies, submission, packed gathers), backups, "
       "load_backs (load-backs over the forward pass, per layer and all layers first, slots in "
       "runs of --backup-runs; only when named), forward (the forward grid), pairs (overlap), "
       "sustained (only the sustained samples of --sustain-tokens); default: all but load_backs")
      ("forward-tokens", po::value<std::string>(), "forward grid: new-token counts (comma list)")
      ("forward-prefix", po::value<std::string>(), "forward grid: prefix token counts (comma list)")
      ("forward-pass-requests", po::value<std::string>(),
       "forward grid: also passes of k requests of each new-token count over no prefix, one set "
       "of GEMMs per layer over the pass's tokens, as exec runs a serving pass (comma list of k "
       "in [2, 64]; default: none)")
      ("sustain-tokens", po::value<std::string>(),
       "forward model: also each layer kind timed after running back to back for --sustain-s, "
       "at these new-token counts (comma list; default: none), the clock a GPU holds under "
       "back-to-back passes; calibrate divides by the forward grid's sample of the same point")
      ("sustain-prefix", po::value<std::string>(),
       "sustained samples: prefix token counts (comma list; default 0)")
      ("sustain-s", po::value<double>()->default_value(d.sustain_s),
       "sustained samples: seconds of back-to-back layers before each is timed, in [0, 60]")
      ("pair-pages", po::value<std::string>(), "pairs: page counts of the copies and gathers (comma list)")
      ("first-gather-pages", po::value<std::string>(),
       "pairs: page counts of the gather layers timed after a forward layer and of their next "
       "layer (comma list; default: the pair pages), the points of the after-forward ratios")
      ("no-backups", po::bool_switch(), "leave out the backups over a forward pass (per-layer and tail, beside a gather)")
      ("backup-host-slots", po::value<std::string>()->default_value("random"),
       "backups over a forward pass, a diagnostic: random = random run-aligned blocks of the host pool | "
       "fresh = host slots in order from a cursor over the pool, as the executor's backups of new pages")
      ("backup-pools-reversed", po::bool_switch(),
       "backups over a forward pass, a diagnostic: copy the pools last to first (default: in pool order)")
      ("backup-gate", po::value<std::string>()->default_value("on"),
       "backups over a forward pass: on = each pass enqueued behind the request gate, off = as the host goes")
      ("cache-evict", po::value<std::string>()->default_value("on"),
       "on = before every timed run write a buffer of twice the GPU's L2 (host: 64 MiB), so no run reads what the last one left in cache (as the executor's ops after a forward layer); off = runs back to back")
      ("seed", po::value<uint64_t>()->default_value(d.seed), "slot and layer choice")
      ("timeout-s", po::value<double>()->default_value(d.timeout_s), "longest any wait may take")
      ("quiet,q", po::bool_switch(), "no progress or summary")
      ("help,h", "this help");
  // clang-format on
  return desc;
}

namespace {

void PrintSweepHelp(const char* argv0, const po::options_description& desc) {
  const std::string self = argv0;
  PrintHelp(
      std::cout, self + " --out M.json [--config C.yaml] [options]",
      "Times the executor's primitives on this machine's GPU (or host memory): tier copies\n"
      "of one pool (one layer and all layers, both directions) over page counts 1, 2, 4,\n"
      "..., the host time of submitting copies, one layer of a packed gather (pack +\n"
      "unpack), and backups over a forward pass (per-layer and tail, beside a gather, as\n"
      "the executor runs them). Each sample is the median of --repeats runs on fresh\n"
      "random slots after warm-up. Feed the file to `kvlanes calibrate`\n"
      "(docs/calibration.md). With --ranks N (N > 1; one GPU per rank for NCCL) it\n"
      "measures instead, with every rank taking part, the NCCL all-gather and all-reduce\n"
      "of the gathers and CUDA IPC peer reads over the same page counts; calibrate those\n"
      "with --base set to the one-rank profile. With --forward model (cuda) it also times\n"
      "the executor's forward-pass proxy per layer over a grid of new tokens x prefix\n"
      "tokens (--set model.preset=NAME) and prints its TFLOP/s and GB/s, and its backups\n"
      "follow layers of the proxy instead of the spin. With either\n"
      "forward pass it times pairs of ops on separate streams (copies beside a gather, a\n"
      "forward layer or another copy; a gather beside a forward layer), each also alone,\n"
      "for the overlap shares calibrate fits.",
      desc,
      {"kvlanes bench sweep --out M.json",
       "kvlanes bench sweep --tier-copy batch --slot-runs 1,4,32 --out M.json",
       "kvlanes bench sweep --tier-copy batch --only backups --backup-runs 1,4,64 --out B.json",
       "kvlanes bench sweep --tier-copy batch --only backups --forward model "
       "--backup-gather-pages 0 "
       "--out BM.json",
       "kvlanes bench sweep --forward model --set model.preset=deepseek-v3.2 --out M.json",
       "kvlanes bench sweep --only pairs --forward synthetic --out PAIRS.json",
       "kvlanes bench sweep --ranks 2 --out RANKS2.json"});
}

// The geometry of --config / --set and --host-layout.
void ReadSweepGeometry(const po::variables_map& vm, exec::SweepOptions& o) {
  if (vm.count("config") || vm.count("set")) {
    ReplayConfig cfg;
    if (vm.count("config")) LoadConfigFile(vm["config"].as<std::string>(), cfg);
    if (vm.count("set")) {
      for (const std::string& a : vm["set"].as<std::vector<std::string>>())
        ApplyConfigSetting(a, cfg);
      ValidateConfig(cfg);
    }
    o.model_shape = cfg.model.shape;
    o.model_preset = cfg.model.preset;
    o.page_tokens = cfg.cache.page_tokens;
    o.layers = cfg.model.layers;
    o.pool_names.clear();
    o.elem_bytes.clear();
    for (const PoolSpec& p : cfg.model.pools) {
      o.pool_names.push_back(p.name);
      o.elem_bytes.push_back(p.bytes_per_token_layer);
    }
    const auto l = kernels::ParseHostLayout(cfg.cache.host_layout);
    if (!l)
      throw InputError(vm.count("config") ? vm["config"].as<std::string>() : "--set", 0,
                       "cache.host_layout", "expected one of " + kernels::HostLayoutNames());
    o.host_layout = *l;
  }
  if (vm.count("host-layout")) {
    const auto l = kernels::ParseHostLayout(vm["host-layout"].as<std::string>());
    if (!l)
      throw InputError("", 0, "--host-layout", "expected one of " + kernels::HostLayoutNames());
    o.host_layout = *l;
  }
}

// The backend, the ranks and the copy grid.
void ReadSweepBackend(const po::variables_map& vm, exec::SweepOptions& o) {
  o.backend = vm["backend"].as<std::string>();
  if (o.backend != "cuda" && o.backend != "host")
    throw InputError("", 0, "--backend", "expected cuda or host");
  o.device = vm["device"].as<int>();
  o.ranks = vm["ranks"].as<int>();
  if (o.ranks < 1 || o.ranks > 64) throw InputError("", 0, "--ranks", "must be in 1..64");
  if (vm.count("devices")) {
    o.devices = ParseDevices(vm["devices"].as<std::string>());
    if (static_cast<int>(o.devices.size()) != o.ranks)
      throw InputError(
          "", 0, "--devices",
          std::to_string(o.devices.size()) + " GPUs for " + std::to_string(o.ranks) + " ranks");
  }
  const std::string tc = vm["tier-copy"].as<std::string>();
  exec::kTierCopyModeNames.Parse(tc, "--tier-copy");
  o.tier_copy = tc;
  if (vm.count("tier-max-ctas")) {
    o.tier_max_ctas = vm["tier-max-ctas"].as<int>();
    if (o.tier_max_ctas < 0) throw InputError("", 0, "--tier-max-ctas", "must be >= 0");
  }
  o.max_pages = vm["max-pages"].as<int64_t>();
  o.max_all_layer_pages = vm["max-all-layer-pages"].as<int64_t>();
  o.repeats = vm["repeats"].as<int>();
  o.warmup = vm["warmup"].as<int>();
  if (vm["quick"].as<bool>()) {
    o.max_pages = 64;
    o.max_all_layer_pages = 16;
    o.repeats = 5;
    o.warmup = 1;
  }
  if (o.max_pages < 1) throw InputError("", 0, "--max-pages", "must be >= 1");
  if (o.max_all_layer_pages < 1) throw InputError("", 0, "--max-all-layer-pages", "must be >= 1");
  if (o.repeats < 1) throw InputError("", 0, "--repeats", "must be >= 1");
  if (o.warmup < 0) throw InputError("", 0, "--warmup", "must be >= 0");
}

// A comma-separated list of run lengths in 1..max pages of option `flag`.
std::vector<int64_t> RunLengths(const po::variables_map& vm, const char* flag, int64_t max_pages) {
  std::vector<int64_t> out;
  std::stringstream ss(vm[flag].as<std::string>());
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1 || v > max_pages)
      throw InputError("", 0, std::string("--") + flag,
                       "'" + item + "' is not a run length in 1.." + std::to_string(max_pages));
    out.push_back(v);
  }
  if (out.empty()) throw InputError("", 0, std::string("--") + flag, "empty list");
  return out;
}

// The seed, the backups over a forward pass and the slot runs.
void ReadSweepBackups(const po::variables_map& vm, exec::SweepOptions& o) {
  o.seed = vm["seed"].as<uint64_t>();
  if (!vm.count("only")) o.backups = !vm["no-backups"].as<bool>();
  const std::string bg = vm["backup-gate"].as<std::string>();
  if (bg != "on" && bg != "off")
    throw InputError("", 0, "--backup-gate", "expected on or off, got '" + bg + "'");
  o.backup_gate = bg == "on";
  const std::string bh = vm["backup-host-slots"].as<std::string>();
  if (bh != "random" && bh != "fresh")
    throw InputError("", 0, "--backup-host-slots", "expected random or fresh, got '" + bh + "'");
  o.backup_fresh_host = bh == "fresh";
  o.backup_pools_reversed = vm["backup-pools-reversed"].as<bool>();
  const std::string ce = vm["cache-evict"].as<std::string>();
  if (ce != "on" && ce != "off")
    throw InputError("", 0, "--cache-evict", "expected on or off, got '" + ce + "'");
  o.cache_evict = ce == "on";
  o.slot_runs = RunLengths(vm, "slot-runs", o.max_pages);
  o.backup_runs = RunLengths(vm, "backup-runs", o.max_pages);
  if (vm.count("backup-gather-pages"))
    o.backup_gather_pages =
        IntList(vm["backup-gather-pages"].as<std::string>(), "--backup-gather-pages", 0);
  o.backup_per_layer = o.backup_tail = false;
  std::stringstream schedules(vm["backup-schedules"].as<std::string>());
  for (std::string s; std::getline(schedules, s, ',');) {
    if (s != "per-layer" && s != "tail")
      throw InputError("", 0, "--backup-schedules",
                       "expected a comma list of per-layer and tail, got '" + s + "'");
    (s == "tail" ? o.backup_tail : o.backup_per_layer) = true;
  }
  if (!o.backup_per_layer && !o.backup_tail)
    throw InputError("", 0, "--backup-schedules", "names no schedule (per-layer, tail)");
  o.backup_forward_tokens = vm["backup-forward-tokens"].as<int64_t>();
  if (o.backup_forward_tokens < 1)
    throw InputError("", 0, "--backup-forward-tokens", "must be >= 1");
}

// The forward pass, the groups (--only) and the forward and pair grids.
void ReadSweepGroups(const po::variables_map& vm, exec::SweepOptions& o) {
  o.forward = vm["forward"].as<std::string>();
  exec::kForwardModeNames.Parse(o.forward, "--forward");
  if (o.forward == "model" && (o.backend != "cuda" || o.ranks > 1))
    throw InputError("", 0, "--forward",
                     "model runs the proxy on one GPU: it needs --backend cuda and --ranks 1 "
                     "(the host backend has no model forward pass; use --forward synthetic)");
  if (vm.count("only")) {
    o.copies = o.backups = o.forward_grid = o.pairs = false;
    std::stringstream ss(vm["only"].as<std::string>());
    std::string g;
    while (std::getline(ss, g, ',')) {
      if (g == "copies")
        o.copies = true;
      else if (g == "backups")
        o.backups = true;
      else if (g == "load_backs")
        o.load_backs = true;
      else if (g == "forward" && o.forward != "model")
        throw InputError("", 0, "--only",
                         "the forward grid times the model proxy: it needs --forward model");
      else if (g == "forward")
        o.forward_grid = true;
      else if (g == "pairs")
        o.pairs = true;
      else if (g == "sustained")  // only the sustained samples (--sustain-tokens)
        continue;
      else
        throw InputError("", 0, "--only",
                         "unknown group '" + g +
                             "' (valid: copies, backups, load_backs, forward, pairs, sustained)");
    }
    if (vm["no-backups"].as<bool>()) o.backups = false;
  }
  if (vm.count("forward-tokens"))
    o.forward_new_tokens = IntList(vm["forward-tokens"].as<std::string>(), "--forward-tokens", 1);
  if (vm.count("forward-prefix"))
    o.forward_prefix_tokens =
        IntList(vm["forward-prefix"].as<std::string>(), "--forward-prefix", 0);
  if (vm.count("forward-pass-requests"))
    o.forward_pass_requests =
        IntList(vm["forward-pass-requests"].as<std::string>(), "--forward-pass-requests", 2);
  if (vm.count("sustain-tokens")) {
    if (o.forward != "model")
      throw InputError("", 0, "--sustain-tokens",
                       "sustained samples time the model proxy: they need --forward model");
    o.sustain_new_tokens = IntList(vm["sustain-tokens"].as<std::string>(), "--sustain-tokens", 1);
  }
  if (vm.count("sustain-prefix"))
    o.sustain_prefix_tokens =
        IntList(vm["sustain-prefix"].as<std::string>(), "--sustain-prefix", 0);
  o.sustain_s = vm["sustain-s"].as<double>();
  if (!(o.sustain_s >= 0 && o.sustain_s <= 60))
    throw InputError("", 0, "--sustain-s", "must be in [0, 60] seconds");
  if (vm.count("pair-pages"))
    o.pair_pages = IntList(vm["pair-pages"].as<std::string>(), "--pair-pages", 1);
  if (vm.count("first-gather-pages"))
    o.first_gather_pages =
        IntList(vm["first-gather-pages"].as<std::string>(), "--first-gather-pages", 1);
  if (vm["quick"].as<bool>()) {  // a small pair and forward grid too
    if (!vm.count("pair-pages")) o.pair_pages = {4, 32};
    if (!vm.count("forward-tokens")) o.forward_new_tokens = {16, 64, 256};
    if (!vm.count("forward-prefix")) o.forward_prefix_tokens = {0, 1024, 4096};
    o.pair_forward_s = {1e-4};
    o.pair_forward_shapes = {{128, 1024}};
  }
}

// Runs the sweep and writes `out`; prints the summary unless quiet.
void RunAndWriteSweep(const exec::SweepOptions& o, const std::string& out, bool quiet) {
  {  // refuse an unwritable output before timing anything
    const std::filesystem::path dir = std::filesystem::path(out).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      throw InputError(out, 0, "--out", "directory " + dir.string() + " does not exist");
  }
  const nlohmann::ordered_json doc = exec::RunSweep(o);
  WriteFileAtomically(out, doc.dump(1) + "\n");
  if (quiet) return;
  std::map<std::string, int> by_kind;
  for (const auto& s : doc["samples"]) ++by_kind[s["kind"].get<std::string>()];
  std::printf("%-12s %8s\n", "kind", "samples");
  for (const auto& [k, n] : by_kind) std::printf("%-12s %8d\n", k.c_str(), n);
  std::fputs(exec::ForwardTable(doc).c_str(), stdout);
  std::printf("wrote %s\n", out.c_str());
}

}  // namespace

int CmdBenchSweep(int argc, const char* const* argv) {
  const po::options_description desc = SweepOptionsDescription();
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, nullptr, vm)) return 2;
  if (vm.count("help")) {
    PrintSweepHelp(argv[0], desc);
    return 0;
  }
  try {
    if (!vm.count("out")) throw InputError("", 0, "--out", "required (the measurement JSON)");
    CheckOutputOptions(vm, {"out"}, {"config"});
    exec::SweepOptions o;
    ReadSweepGeometry(vm, o);
    ReadSweepBackend(vm, o);
    ReadSweepBackups(vm, o);
    ReadSweepGroups(vm, o);
    o.timeout_s = TimeoutOption(vm, "timeout-s");
    const bool quiet = vm["quiet"].as<bool>();
    if (!quiet)
      o.progress = [](const std::string& s) { std::fprintf(stderr, "sweep: %s\n", s.c_str()); };
    RunAndWriteSweep(o, vm["out"].as<std::string>(), quiet);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  } catch (const exec::ExecError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
}

}  // namespace kvlanes::cli

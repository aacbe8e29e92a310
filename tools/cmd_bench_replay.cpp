// kvlanes bench replay: the stages of a replay, each against a floor measured in the same run.
// The floor is the least any replay of the trace must do: read the file, parse the fields the
// replay uses (input_length and hash_ids) with a minimal scanner, and build the page keys.
// `--scale K` replays K concatenated copies of the trace (block ids and arrivals offset per copy,
// so no copy shares a prefix with another) to show how time and memory grow. Formulas:
// docs/replay.md, "Speed".
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "io/input_error.h"
#include "io/output_file.h"
#include "policies/registry.h"
#include "sim/engine/replay_engine.h"
#include "sim/report/report.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"
#include "tools/scaled_trace.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

// The bench's clock: the thread's CPU time (user + system) by default, so that a shared
// machine's other load does not stretch the stages (the bench is one thread), or with --wall
// the steady clock. Every stage and the floor use the same one.
bool g_wall_clock = false;

struct Clock {
  using time_point = double;  // seconds
  static time_point now() {
    timespec ts{};
    clock_gettime(g_wall_clock ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
};

double Seconds(Clock::time_point a, Clock::time_point b) { return b - a; }

// The output stages (the plan writer runs a thread of its own) are also timed by the process's
// CPU time, every thread's, and by the wall clock, so that work moved to another thread shows.
struct StageTimes {
  double clock = 0, process = 0, wall = 0;  // clock: the bench's Clock
  static StageTimes Now() {
    timespec p{}, w{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p);
    clock_gettime(CLOCK_MONOTONIC, &w);
    return {Clock::now(), static_cast<double>(p.tv_sec) + 1e-9 * static_cast<double>(p.tv_nsec),
            static_cast<double>(w.tv_sec) + 1e-9 * static_cast<double>(w.tv_nsec)};
  }
  StageTimes operator-(const StageTimes& o) const {
    return {clock - o.clock, process - o.process, wall - o.wall};
  }
};

// Medians of each clock of `v`.
StageTimes MedianTimes(const std::vector<StageTimes>& v);

double ReplayMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Highest resident set of the process so far, bytes.
int64_t PeakRssBytes() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

// Resident set now, bytes (/proc/self/statm, second field, in pages).
int64_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// The floor's minimal parse of a Mooncake JSONL file: per line, the integer after
// "input_length" and the integers of "hash_ids". No validation: it is a speed reference only.
struct MinimalTrace {
  std::vector<int64_t> input_tokens;
  std::vector<size_t> first_id;  // index into ids of each request's first block id
  std::vector<uint64_t> ids;
};

const char* SkipTo(const char* p, const char* end, char c) {
  while (p < end && *p != c) ++p;
  return p;
}

uint64_t ScanUint(const char*& p, const char* end) {
  while (p < end && (*p < '0' || *p > '9')) ++p;
  uint64_t v = 0;
  while (p < end && *p >= '0' && *p <= '9') v = v * 10 + static_cast<uint64_t>(*p++ - '0');
  return v;
}

void MinimalParse(const std::string& text, MinimalTrace& out) {
  out.input_tokens.clear();
  out.first_id.clear();
  out.ids.clear();
  const char* p = text.data();
  const char* const end = p + text.size();
  static constexpr std::string_view kInput = "\"input_length\"", kIds = "\"hash_ids\"";
  while (p < end) {
    const char* eol = SkipTo(p, end, '\n');
    const std::string_view line(p, static_cast<size_t>(eol - p));
    const size_t in = line.find(kInput), ids = line.find(kIds);
    if (in != std::string_view::npos && ids != std::string_view::npos) {
      const char* q = p + in + kInput.size();
      out.input_tokens.push_back(static_cast<int64_t>(ScanUint(q, eol)));
      out.first_id.push_back(out.ids.size());
      q = SkipTo(p + ids + kIds.size(), eol, '[') + 1;
      const char* close = SkipTo(q, eol, ']');
      while (q < close) {
        while (q < close && (*q == ' ' || *q == ',')) ++q;
        if (q < close) out.ids.push_back(ScanUint(q, close));
      }
    }
    p = eol + 1;
  }
  out.first_id.push_back(out.ids.size());
}

StageTimes MedianTimes(const std::vector<StageTimes>& v) {
  std::vector<double> c, p, w;
  for (const StageTimes& t : v) {
    c.push_back(t.clock);
    p.push_back(t.process);
    w.push_back(t.wall);
  }
  return {ReplayMedian(c), ReplayMedian(p), ReplayMedian(w)};
}

struct FloorTimes {
  double read = 0, parse = 0, keys = 0;
  int64_t page_keys = 0;
  double total() const { return read + parse + keys; }
};

// The file's bytes by the shortest path: its size from fstat, one buffer, read(2) until done.
// (An istreambuf_iterator copy, which this floor once used, runs at a few hundred MB/s and made
// the floor look slower than reading is.)
std::string ReadWhole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    throw InputError(path, 0, "", std::string("cannot read file: ") + std::strerror(errno));
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0) text.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

// Reads, parses and keys `k` copies of a Mooncake file (the copies' ids offset as ScaleTrace
// does); keys every full page below the last block id, as the replay keys its requests.
FloorTimes MeasureFloor(const std::string& path, int k, int64_t page_tokens, int64_t block_tokens) {
  FloorTimes f;
  const int64_t ppb = block_tokens / page_tokens;
  std::vector<PageKey> buf;
  MinimalTrace mt;
  uint64_t sink = 0;
  for (int c = 0; c < k; ++c) {
    auto a = Clock::now();
    const std::string text = ReadWhole(path);
    auto b = Clock::now();
    MinimalParse(text, mt);
    auto d = Clock::now();
    uint64_t max_id = 0;
    for (uint64_t id : mt.ids) max_id = std::max(max_id, id);
    const uint64_t off = static_cast<uint64_t>(c) * (max_id + 1);
    for (size_t r = 0; r + 1 < mt.first_id.size(); ++r) {
      const int64_t blocks = static_cast<int64_t>(mt.first_id[r + 1] - mt.first_id[r]);
      const int64_t n = std::min(mt.input_tokens[r] / page_tokens, blocks * ppb);
      buf.clear();
      for (int64_t i = 0; i < n; ++i)
        buf.push_back(PageKey{mt.ids[mt.first_id[r] + static_cast<size_t>(i / ppb)] + off,
                              static_cast<uint32_t>(i % ppb)});
      f.page_keys += n;
      sink += buf.empty() ? 0 : buf.back().block;
    }
    auto e = Clock::now();
    f.read += Seconds(a, b);
    f.parse += Seconds(b, d);
    f.keys += Seconds(d, e);
  }
  volatile uint64_t keep = sink;  // the keys must be built
  (void)keep;
  return f;
}

// The memory target's budget per cached page and per request (docs/replay.md, "Speed").
constexpr int64_t kBudgetBytesPerCachedPage = 48;
constexpr int64_t kBudgetBytesPerRequest = 64;

// Pages held by the cache at the end of a replay, both tiers, all lanes.
int64_t CachedPages(const Ledger& l) {
  int64_t t = 0;
  for (int r = 0; r < l.lanes(); ++r) t += l.at(Tier::kDevice, r).tree + l.at(Tier::kHost, r).tree;
  return t;
}

// The memory target (docs/replay.md, "Speed"): the replay's own peak within
// kBudgetBytesPerCachedPage per cached page + kBudgetBytesPerRequest per request + a constant
// that does not grow with the trace.
int64_t MemoryBudget(int64_t cached_pages, size_t requests) {
  return kBudgetBytesPerCachedPage * cached_pages +
         kBudgetBytesPerRequest * static_cast<int64_t>(requests);
}

// The engine loop alone, `repeat` times; the first repetition also samples the resident set.
struct ReplayRuns {
  std::vector<double> replay_s;
  int64_t page_ops = 0, nodes = 0, cached = 0, replay_peak = 0, storage_slots = 0;
};

ReplayRuns TimeReplays(const ReplayConfig& cfg, const Trace& trace, int repeat) {
  const int64_t P = cfg.cache.page_tokens;
  ReplayRuns r;
  for (int rep = 0; rep < repeat; ++rep) {
    auto policy = MakePolicy(cfg.policy, cfg, trace);
    const int64_t before = RssBytes();
    const auto b = Clock::now();
    ReplayEngine engine(cfg, *policy, trace.block_tokens);
    // The first repetition samples the resident set every 256 requests (the process-wide peak
    // may have been set by the trace load); the others run untouched.
    int64_t highest = before;
    for (size_t i = 0; i < trace.requests.size(); ++i) {
      engine.Process(trace.requests[i]);
      if (rep == 0 && (i % 256 == 255 || i + 1 == trace.requests.size()))
        highest = std::max(highest, RssBytes());
    }
    r.replay_s.push_back(Seconds(b, Clock::now()));
    if (rep == 0) r.replay_peak = highest - before;
    r.page_ops = engine.counters().PageOps(P);
    r.nodes = static_cast<int64_t>(engine.tree().alive_nodes());
    r.storage_slots = static_cast<int64_t>(engine.tree().storage_slots());
    r.cached = CachedPages(engine.ledger());
  }
  return r;
}

// The JSON report of one replay, built and serialized `repeat` times; the first hashes the trace
// files for the report's context, as the one report of a `kvlanes replay --json` process does
// (the hash is memoized for the process, so the later ones, the median, do not).
struct ReportRuns {
  std::vector<double> report_s;
  double first = 0;
};

ReportRuns TimeReports(const ReplayConfig& cfg, const Trace& trace, int repeat) {
  ReportRuns t;
  auto policy = MakePolicy(cfg.policy, cfg, trace);
  ReplayEngine engine(cfg, *policy, trace.block_tokens);
  for (const Request& r : trace.requests) engine.Process(r);
  for (int rep = 0; rep < repeat; ++rep) {
    const auto a = Clock::now();
    const std::string s = ReportToJson(cfg, *policy, trace, engine).dump(2);
    t.report_s.push_back(Seconds(a, Clock::now()));
    if (rep == 0) t.first = t.report_s.back();
    volatile size_t keep = s.size();
    (void)keep;
  }
  return t;
}

// The whole driver (RunReplay, with predictions when a profile is set) without outputs, with the
// plan stream written to a file in `dir`, and with the timeline written; each output's cost is
// its run minus the run without outputs (medians).
struct OutputRuns {
  std::vector<StageTimes> driver_s, plan_s, timeline_s;
  int64_t plan_bytes = 0, timeline_bytes = 0, peak_driver = 0, peak_plan = 0, peak_timeline = 0;
};

OutputRuns TimeOutputs(const ReplayConfig& cfg, const Trace& trace, int repeat,
                       const std::string& dir) {
  const bool has_profile = !cfg.hardware.profile.empty();
  OutputRuns o;
  const auto run_driver = [&](const ReplaySinks& sinks) {
    // One cost model for the run, as `kvlanes replay` has it.
    const PolicyInputs policy_in{cfg, trace, PolicyCostModel(cfg)};
    auto policy = MakePolicy(cfg.policy, policy_in);
    ReplaySinks with_replicas = sinks;  // serving mode: a policy per further replica
    with_replicas.replica_policy = [&] { return MakePolicy(cfg.policy, policy_in); };
    with_replicas.cost = policy_in.cost;
    const StageTimes a = StageTimes::Now();
    RunReplay(cfg, *policy, trace, EngineOptions{}, {}, with_replicas);
    return StageTimes::Now() - a;
  };
  const std::string plan_path = dir + "/kvlanes_bench_replay_plan.jsonl";
  const std::string tl_path = dir + "/kvlanes_bench_replay_timeline.json";
  // The driver alone, with the plan and with the timeline, interleaved per repetition, so that a
  // change of the machine's load falls on all three alike.
  for (int rep = 0; rep < repeat; ++rep) {
    o.driver_s.push_back(run_driver({}));
    if (rep == 0) o.peak_driver = PeakRssBytes();
    {
      const StageTimes a = StageTimes::Now();
      {
        std::ofstream out(plan_path, std::ios::binary);
        ReplaySinks sinks;
        sinks.plan = &out;
        run_driver(sinks);
        o.plan_bytes = static_cast<int64_t>(out.tellp());
      }
      o.plan_s.push_back(StageTimes::Now() - a);
      std::remove(plan_path.c_str());
      if (rep == 0) o.peak_plan = PeakRssBytes();
    }
    if (has_profile) {
      const StageTimes a = StageTimes::Now();
      {
        std::ofstream out(tl_path, std::ios::binary);
        ReplaySinks sinks;
        sinks.timeline = &out;  // streamed as `kvlanes replay --timeline` writes it
        run_driver(sinks);
        o.timeline_bytes = static_cast<int64_t>(out.tellp());
      }
      o.timeline_s.push_back(StageTimes::Now() - a);
      std::remove(tl_path.c_str());
      if (rep == 0) o.peak_timeline = PeakRssBytes();
    }
  }
  return o;
}

// Each floor stage's median over the repetitions.
FloorTimes MedianFloor(const std::vector<FloorTimes>& floors) {
  std::vector<double> r, p, k;
  for (const FloorTimes& f : floors) {
    r.push_back(f.read);
    p.push_back(f.parse);
    k.push_back(f.keys);
  }
  FloorTimes fl;
  fl.read = ReplayMedian(r);
  fl.parse = ReplayMedian(p);
  fl.keys = ReplayMedian(k);
  fl.page_keys = floors[0].page_keys;
  return fl;
}

// The shipped default config's rows beside the plain replay's: the driver (RunReplay with
// predictions, no outputs) of the same trace under that config as it is, in sequential mode, and
// in sequential mode with the fixed choices (gather.method packed, backup.schedule tail) its
// `cost` choices are measured against (docs/replay.md, "Speed"); each the median of `repeat`,
// interleaved per repetition.
struct DefaultConfigRuns {
  std::string path;  // empty: not measured
  std::vector<std::string> names;
  std::vector<std::vector<double>> driver_s;  // per row, per repetition
};

DefaultConfigRuns TimeDefaultConfig(const po::variables_map& vm, const ReplayConfig& plain,
                                    const Trace& plain_trace, int scale, int repeat) {
  DefaultConfigRuns d;
  // The default path is the repository's: run elsewhere without the option, the rows are left
  // out (said on stderr); a path given that cannot be read is an error.
  const std::string path = vm["default-config"].as<std::string>();
  if (vm["default-config"].defaulted() && ::access(path.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "note: no %s here: its driver rows are left out (--default-config)\n",
                 path.c_str());
    return d;
  }
  if (path.empty()) return d;
  d.path = path;
  const std::vector<std::pair<std::string, std::vector<std::string>>> variants = {
      {"as configured", {}},
      {"sequential", {"serving.mode=sequential"}},
      {"sequential, packed/tail",
       {"serving.mode=sequential", "gather.method=packed", "backup.schedule=tail"}},
      {"as configured, packed/tail", {"gather.method=packed", "backup.schedule=tail"}}};
  std::vector<ReplayConfig> cfgs;
  for (const auto& [name, sets] : variants) {
    ReplayConfig c;
    LoadConfigFile(path, c);
    for (const std::string& s : sets) ApplyConfigSetting(s, c);
    ValidateConfig(c);
    cfgs.push_back(std::move(c));
    d.names.push_back(name);
  }
  // The trace as the config reads it (its page and block sizes may differ from the plain run's).
  Trace own;
  const ReplayConfig& c0 = cfgs[0];
  const bool same = c0.cache.page_tokens == plain.cache.page_tokens &&
                    c0.trace.block_tokens == plain.trace.block_tokens &&
                    c0.trace.format == plain.trace.format;
  if (!same) own = ScaleTrace(LoadTraceFor(c0, vm), scale);
  const Trace& trace = same ? plain_trace : own;
  d.driver_s.resize(cfgs.size());
  for (int rep = 0; rep < repeat; ++rep) {
    for (size_t k = 0; k < cfgs.size(); ++k) {
      const ReplayConfig& cfg = cfgs[k];
      // One cost model for the run, as `kvlanes replay` has it.
      const PolicyInputs policy_in{cfg, trace, PolicyCostModel(cfg)};
      auto policy = MakePolicy(cfg.policy, policy_in);
      ReplaySinks sinks;
      sinks.replica_policy = [&] { return MakePolicy(cfg.policy, policy_in); };
      sinks.cost = policy_in.cost;
      const StageTimes a = StageTimes::Now();
      RunReplay(cfg, *policy, trace, EngineOptions{}, {}, sinks);
      d.driver_s[k].push_back((StageTimes::Now() - a).clock);
    }
  }
  return d;
}

// The config as it is (serving mode in the shipped one) against sequential mode, per request (both
// replay every request of the trace once): the median over repetitions of the ratio of the two
// rows' times in the same repetition, so that load shared by both runs of a pair cancels; with the
// lowest and highest. Rows `as` and `seq` index DefaultConfigRuns::names.
struct PairedRatio {
  double median = 0, low = 0, high = 0;
};

PairedRatio RatioOfRows(const DefaultConfigRuns& d, size_t as, size_t seq) {
  std::vector<double> r;
  for (size_t k = 0; k < d.driver_s[as].size(); ++k)
    if (d.driver_s[seq][k] > 0) r.push_back(d.driver_s[as][k] / d.driver_s[seq][k]);
  if (r.empty()) return {};
  const auto [lo, hi] = std::minmax_element(r.begin(), r.end());
  return {ReplayMedian(r), *lo, *hi};
}

// The rows compared: (as configured, sequential), (as configured packed/tail, sequential
// packed/tail), by their index in DefaultConfigRuns::names.
constexpr std::array<std::array<size_t, 2>, 2> kDefaultConfigPairs = {{{0, 1}, {3, 2}}};

// What bench replay measured, for the table and the JSON.
struct BenchReplayRun {
  const Trace& trace;
  const ReplayConfig& cfg;
  int scale, repeat;
  int64_t rss_start, rss_loaded, peak_after_replay;
  double load_s, copies_s, reload_s;
  bool floor_ok, has_profile;
  const std::vector<FloorTimes>& floors;
  const ReplayRuns& rr;
  const ReportRuns& rep_t;
  const OutputRuns& out_t;
  const DefaultConfigRuns& dflt;
};

// The medians of bench replay's measurements; each output stage's time is its run's minus the
// driver's without outputs.
struct BenchMedians {
  double n, replay, report, driver;
  StageTimes driver_t, plan_t, timeline_t;
  FloorTimes fl;
  double floor_s;
};

BenchMedians MediansOf(const BenchReplayRun& b) {
  BenchMedians m{};
  m.n = static_cast<double>(b.trace.requests.size());
  m.replay = ReplayMedian(b.rr.replay_s);
  m.report = ReplayMedian(b.rep_t.report_s);
  m.driver_t = MedianTimes(b.out_t.driver_s);
  m.plan_t = MedianTimes(b.out_t.plan_s) - m.driver_t;
  m.timeline_t = b.has_profile ? MedianTimes(b.out_t.timeline_s) - m.driver_t : StageTimes{};
  m.driver = m.driver_t.clock;
  m.fl = b.floor_ok ? MedianFloor(b.floors) : FloorTimes{};
  m.floor_s = b.floor_ok ? m.fl.read + m.fl.parse + m.fl.keys : 0.0;
  return m;
}

// The memory lines: resident set at each stage, the replay's own peak per cached page and per
// request, and that peak against the memory budget.
void PrintBenchMemory(const BenchReplayRun& b) {
  const Trace& trace = b.trace;
  const ReplayRuns& rr = b.rr;
  const OutputRuns& out_t = b.out_t;
  const double n = static_cast<double>(trace.requests.size());
  const int64_t rss_start = b.rss_start, rss_loaded = b.rss_loaded;
  const int64_t peak_after_replay = b.peak_after_replay;
  char timeline_mib[32] = "-";
  if (b.has_profile)
    std::snprintf(timeline_mib, sizeof timeline_mib, "%.1f", out_t.peak_timeline / 1048576.0);
  const double per_page = rr.cached > 0 ? static_cast<double>(rr.replay_peak) / rr.cached : 0.0;
  const int64_t budget = MemoryBudget(rr.cached, trace.requests.size());
  std::printf(
      "memory: start %.1f MiB, trace loaded %.1f MiB, replay's own peak %.1f MiB (first rep, "
      "resident set sampled every 256 requests, above the loaded trace), peak after replays %.1f "
      "MiB, after the first driver run %.1f MiB, with plan %.1f MiB, with timeline "
      "%s MiB\n",
      rss_start / 1048576.0, rss_loaded / 1048576.0, rr.replay_peak / 1048576.0,
      peak_after_replay / 1048576.0, out_t.peak_driver / 1048576.0, out_t.peak_plan / 1048576.0,
      timeline_mib);
  std::printf(
      "cached pages at end %lld: replay's own peak %.1f B per cached page, %.1f B per "
      "request; "
      "tree nodes alive %lld, node storage slots %lld; page ops %lld; plan %lld B, timeline "
      "%lld B\n",
      static_cast<long long>(rr.cached), per_page, static_cast<double>(rr.replay_peak) / n,
      static_cast<long long>(rr.nodes), static_cast<long long>(rr.storage_slots),
      static_cast<long long>(rr.page_ops), static_cast<long long>(out_t.plan_bytes),
      static_cast<long long>(out_t.timeline_bytes));
  char versus[96];
  if (rr.replay_peak <= budget) {
    std::snprintf(versus, sizeof versus, "within it, %.2f MiB below",
                  (budget - rr.replay_peak) / 1048576.0);
  } else {
    std::snprintf(versus, sizeof versus,
                  "over it by %.2f MiB (the target's constant: flat across --scale if it holds)",
                  (rr.replay_peak - budget) / 1048576.0);
  }
  std::printf(
      "memory budget %lld B x %lld cached pages + %lld B x %zu requests = %.2f MiB; replay's "
      "own "
      "peak %.2f MiB: %s\n",
      static_cast<long long>(kBudgetBytesPerCachedPage), static_cast<long long>(rr.cached),
      static_cast<long long>(kBudgetBytesPerRequest), trace.requests.size(), budget / 1048576.0,
      rr.replay_peak / 1048576.0, versus);
}

// The table of stage times against the floor, the output stages against the replay, memory.
void PrintBenchReplay(const BenchReplayRun& b) {
  const Trace& trace = b.trace;
  const ReplayConfig& cfg = b.cfg;
  const int64_t P = cfg.cache.page_tokens;
  const ReportRuns& rep_t = b.rep_t;
  const bool floor_ok = b.floor_ok, has_profile = b.has_profile;
  const int scale = b.scale, repeat = b.repeat;
  const double load_s = b.load_s, copies_s = b.copies_s, reload_s = b.reload_s;
  const BenchMedians m = MediansOf(b);
  const double n = m.n, replay = m.replay, report = m.report, driver = m.driver;
  const StageTimes driver_t = m.driver_t, plan_t = m.plan_t, timeline_t = m.timeline_t;
  const FloorTimes fl = m.fl;
  const double floor_s = m.floor_s;
  const auto ratio = [&](double s, char* out) {
    if (floor_s > 0) {
      std::snprintf(out, 16, "%.2f", s / floor_s);
    } else {
      std::snprintf(out, 16, "-");
    }
  };
  std::printf(
      "kvlanes bench replay: %zu requests (scale %d), policy %s, cp_size %lld, page_tokens "
      "%lld, %d reps (medians), %s\n",
      trace.requests.size(), scale, cfg.policy.c_str(), static_cast<long long>(cfg.cache.cp_size),
      static_cast<long long>(P), repeat, g_wall_clock ? "wall clock" : "thread CPU time");
  std::printf("%-34s %10s %14s %10s\n", "stage", "seconds", "requests/s", "x floor");
  char buf[16];
  const auto row = [&](const char* name, double s) {
    ratio(s, buf);
    std::printf("%-34s %10.4f %14.0f %10s\n", name, s, s > 0 ? n / s : 0.0, buf);
  };
  if (floor_ok) {
    row("floor: read file", fl.read);
    row("floor: minimal parse", fl.parse);
    row("floor: page-key build", fl.keys);
    row("floor (sum)", floor_s);
  } else {
    std::printf("floor: not measured (one Mooncake JSONL file only)\n");
  }
  row(scale > 1 ? "trace load (1 file + copies)" : "trace load", load_s);
  if (scale > 1) row("  of which the copies", copies_s);
  row("trace read again (warm, 1 file)", reload_s);
  row("replay (engine loop)", replay);
  row("report (build + serialize)", report);
  row("report, first (hashes the trace)", rep_t.first);
  row("load + replay + first report", load_s + replay + rep_t.first);
  row(has_profile ? "driver with predictions" : "driver (RunReplay)", driver);
  row("plan writing (extra)", plan_t.clock);
  if (has_profile) {
    row("timeline writing (extra)", timeline_t.clock);
  } else {
    std::printf("%-34s %10s (needs a hardware profile)\n", "timeline writing (extra)", "-");
  }
  if (!b.dflt.path.empty()) {
    std::printf("driver under %s (scale %d):\n", b.dflt.path.c_str(), scale);
    for (size_t k = 0; k < b.dflt.names.size(); ++k)
      row(("  " + b.dflt.names[k]).c_str(), ReplayMedian(b.dflt.driver_s[k]));
    for (const auto& [as, seq] : kDefaultConfigPairs) {
      const PairedRatio q = RatioOfRows(b.dflt, as, seq);
      std::printf("  %s / %s per request: %.3f (paired by repetition; %.3f to %.3f)\n",
                  b.dflt.names[as].c_str(), b.dflt.names[seq].c_str(), q.median, q.low, q.high);
    }
  }
  // The output stages against the replay (engine loop), by each clock: the target is <= 1x
  // (docs/replay.md, "Speed"). The replay is one thread, so its time stands for all three.
  std::printf("%-34s %10s %14s %10s\n", "output / replay", g_wall_clock ? "wall" : "thread",
              "all threads", "wall");
  const auto over_replay = [&](const char* name, const StageTimes& t) {
    std::printf("%-34s %10.2f %14.2f %10.2f\n", name, t.clock / replay, t.process / replay,
                t.wall / replay);
  };
  over_replay("driver (RunReplay, no outputs)", driver_t);
  over_replay("plan writing (extra)", plan_t);
  if (has_profile) over_replay("timeline writing (extra)", timeline_t);
  PrintBenchMemory(b);
}

// The figures of the table as JSON (--json).
nlohmann::ordered_json BenchReplayJson(const BenchReplayRun& b) {
  const Trace& trace = b.trace;
  const ReplayConfig& cfg = b.cfg;
  const ReplayRuns& rr = b.rr;
  const ReportRuns& rep_t = b.rep_t;
  const OutputRuns& out_t = b.out_t;
  const bool floor_ok = b.floor_ok, has_profile = b.has_profile;
  const int scale = b.scale, repeat = b.repeat;
  const int64_t rss_loaded = b.rss_loaded, peak_after_replay = b.peak_after_replay;
  const double load_s = b.load_s, copies_s = b.copies_s, reload_s = b.reload_s;
  const BenchMedians m = MediansOf(b);
  const double replay = m.replay, report = m.report, driver = m.driver;
  const StageTimes driver_t = m.driver_t, plan_t = m.plan_t, timeline_t = m.timeline_t;
  const FloorTimes fl = m.fl;
  const double floor_s = m.floor_s;
  const double per_page = rr.cached > 0 ? static_cast<double>(rr.replay_peak) / rr.cached : 0.0;
  const int64_t budget = MemoryBudget(rr.cached, trace.requests.size());
  nlohmann::ordered_json j;
  j["requests"] = trace.requests.size();
  j["scale"] = scale;
  j["policy"] = cfg.policy;
  j["config"] = ConfigToJson(cfg);
  j["repeat"] = repeat;
  j["clock"] = g_wall_clock ? "wall" : "thread_cpu";
  if (floor_ok) {
    j["floor_read_s"] = fl.read;
    j["floor_parse_s"] = fl.parse;
    j["floor_key_build_s"] = fl.keys;
    j["floor_s"] = floor_s;
    j["page_keys"] = fl.page_keys;
  }
  j["trace_load_s"] = load_s;
  j["trace_copies_s"] = copies_s;
  j["trace_reload_s"] = reload_s;
  j["replay_s"] = replay;
  j["report_s"] = report;
  j["report_first_s"] = rep_t.first;
  j["driver_s"] = driver;
  j["driver_process_cpu_s"] = driver_t.process;
  j["driver_wall_s"] = driver_t.wall;
  j["plan_extra_s"] = plan_t.clock;
  j["plan_extra_process_cpu_s"] = plan_t.process;
  j["plan_extra_wall_s"] = plan_t.wall;
  if (has_profile) {
    j["timeline_extra_s"] = timeline_t.clock;
    j["timeline_extra_process_cpu_s"] = timeline_t.process;
    j["timeline_extra_wall_s"] = timeline_t.wall;
  }
  j["peak_rss_driver_bytes"] = out_t.peak_driver;
  j["peak_rss_with_plan_bytes"] = out_t.peak_plan;
  if (has_profile) j["peak_rss_with_timeline_bytes"] = out_t.peak_timeline;
  j["page_ops"] = rr.page_ops;
  j["cached_pages"] = rr.cached;
  j["replay_peak_bytes"] = rr.replay_peak;
  j["replay_peak_bytes_per_cached_page"] = per_page;
  j["memory_budget_bytes"] = budget;
  j["replay_peak_within_budget"] = rr.replay_peak <= budget;
  j["rss_loaded_bytes"] = rss_loaded;
  j["peak_rss_bytes"] = peak_after_replay;
  j["plan_bytes"] = out_t.plan_bytes;
  if (!b.dflt.path.empty()) {
    nlohmann::ordered_json d;
    d["config"] = b.dflt.path;
    for (size_t k = 0; k < b.dflt.names.size(); ++k)
      d["driver_s"][b.dflt.names[k]] = ReplayMedian(b.dflt.driver_s[k]);
    for (const auto& [as, seq] : kDefaultConfigPairs) {
      const PairedRatio q = RatioOfRows(b.dflt, as, seq);
      d["per_request_ratio"][b.dflt.names[as] + " / " + b.dflt.names[seq]] = {
          {"median", q.median}, {"low", q.low}, {"high", q.high}};
    }
    j["default_config"] = d;
  }
  return j;
}

}  // namespace

// The options of `kvlanes bench replay`: the replay's, then its own.
po::options_description BenchReplayOptions() {
  po::options_description desc("options");
  AddReplayOptions(desc);
  desc.add_options()("repeat", po::value<int>()->default_value(5),
                     "timed repetitions (median reported)")(
      "scale", po::value<int>()->default_value(1),
      "replay K concatenated copies of the trace (ids and arrivals offset per copy)")(
      "out-dir", po::value<std::string>()->default_value("/tmp"),
      "where the plan and timeline written by the output stages go (removed afterwards)")(
      "wall", po::bool_switch(), "time with the wall clock instead of the thread's CPU time")(
      "default-config", po::value<std::string>()->default_value("config/default.yaml"),
      "also time the driver under this config (as configured, sequential, sequential with "
      "packed/tail, and as configured with packed/tail), as rows beside the plain one, and the "
      "per-request ratio of the config as it is to sequential mode; \"\" skips them")(
      "json", po::value<std::string>(), "write the results as JSON")("help,h", "this help");
  return desc;
}

int CmdBenchReplay(int argc, const char* const* argv) {
  const po::options_description desc = BenchReplayOptions();
  po::positional_options_description pos;
  pos.add("trace", -1);
  po::variables_map vm;
  if (!ParseArgs(argc, argv, desc, &pos, vm)) return 2;
  if (vm.count("help")) {
    PrintHelp(std::cout, std::string(argv[0]) + " --trace FILE [options]",
              "Times the floor (read the file, minimal parse, page-key build), then trace load,\n"
              "replay, report, plan and timeline writing, each as a ratio of the floor, and the\n"
              "replay's peak memory per cached page and per request (docs/replay.md).",
              desc,
              {"kvlanes bench replay --trace traces/mooncake_excerpt.jsonl",
               "kvlanes bench replay --trace traces/mooncake/conversation_trace.jsonl --config "
               "config/default.yaml --json bench.json"});
    return 0;
  }
  try {
    const int scale = vm["scale"].as<int>();
    if (scale < 1 || scale > 4096) throw InputError("", 0, "--scale", "must be in [1, 4096]");
    const int repeat = vm["repeat"].as<int>();
    if (repeat < 1 || repeat > 1000000)
      throw InputError("", 0, "--repeat", "must be in 1..1000000, got " + std::to_string(repeat));
    g_wall_clock = vm["wall"].as<bool>();
    CheckOutputOptions(vm, {"json"}, {"trace", "config", "profile", "default-config"});
    const std::string out_dir = vm["out-dir"].as<std::string>();
    if (std::error_code ec; !std::filesystem::is_directory(out_dir, ec))
      throw InputError(out_dir, 0, "--out-dir",
                       "is not a directory (the timed plan and timeline are written there)");
    const int64_t rss_start = RssBytes();

    // Load (and scale) first, so that the first replay's peak memory is not hidden by the
    // floor's buffers.
    const auto t0 = Clock::now();
    ReplayInputs in = LoadReplayInputs(vm, {"json"});
    const auto t1 = Clock::now();
    if (scale > 1) in.trace = ScaleTrace(in.trace, scale);
    const double load_s = Seconds(t0, Clock::now());
    const double copies_s = Seconds(t1, Clock::now());
    const Trace& trace = in.trace;
    const ReplayConfig& cfg = in.config;
    const int64_t P = cfg.cache.page_tokens;
    const int64_t rss_loaded = RssBytes();
    const ReplayRuns rr = TimeReplays(cfg, trace, repeat);
    const int64_t peak_after_replay = PeakRssBytes();
    // The trace read again, its result dropped: what the first load costs above a warm read of
    // the trace alone (the config, and code and heap touched for the first time; `kvlanes bench
    // read` reports warm loads). After the replays, so that the memory it frees does not lower
    // their measured peak.
    double reload_s = 0;
    {
      const auto a = Clock::now();
      const Trace again = LoadTraceFor(in.config, vm);
      reload_s = Seconds(a, Clock::now());
    }

    const std::vector<std::string> files = vm["trace"].as<std::vector<std::string>>();
    const bool floor_ok = trace.format == TraceFormat::kMooncake && files.size() == 1;
    std::vector<FloorTimes> floors;
    if (floor_ok)
      for (int rep = 0; rep < repeat; ++rep)
        floors.push_back(MeasureFloor(files[0], scale, P, trace.block_tokens));

    // Report: the JSON report of one replay, built and serialized. The first one hashes the trace
    // files for the report's context, as the one report of a `kvlanes replay --json` process
    // does; the hash is memoized for the process, so the later ones (the median) do not.
    const ReportRuns rep_t = TimeReports(cfg, trace, repeat);

    // Plan and timeline: the whole driver (RunReplay, with predictions when a profile is set)
    // without outputs, with the plan stream written to a file, and with the timeline written.
    // Each output's cost is its run minus the run without outputs (medians).
    const bool has_profile = !cfg.hardware.profile.empty();
    const OutputRuns out_t = TimeOutputs(cfg, trace, repeat, out_dir);

    const DefaultConfigRuns dflt = TimeDefaultConfig(vm, cfg, trace, scale, repeat);

    BenchReplayRun b{
        trace,  cfg,      scale,    repeat,   rss_start,   rss_loaded, peak_after_replay,
        load_s, copies_s, reload_s, floor_ok, has_profile, floors,     rr,
        rep_t,  out_t,    dflt};
    PrintBenchReplay(b);
    if (vm.count("json"))
      WriteFileAtomically(vm["json"].as<std::string>(), BenchReplayJson(b).dump(2) + "\n");
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

#include "exec/exec_run.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "base/percentile.h"
#include "exec/exec_error.h"
#include "exec/host_backend.h"
#include "io/input_error.h"
#include "io/input_file.h"
#include "io/output_file.h"
#include "methods/gather_method.h"
#if KVLANES_WITH_CUDA
#include "exec/cuda_backend.h"
#endif

namespace kvlanes::exec {
namespace {

using Clock = std::chrono::steady_clock;

bool NeedsNccl(const ExecPlan& plan) {
  for (const RequestPlan& r : plan.requests) {
    // cache.cp_hit_agreement min: the group's minimum all-reduce of the reported hits.
    if (!r.hit_reports.empty() && plan.geo.ranks > 1) return true;
    // p2p reads through CUDA IPC; partial_merge exchanges through the rendezvous.
    if (r.prefix_pages > 0 && GatherMethodOf(r.gather_method).UsesCollectives()) return true;
  }
  return false;
}
bool NeedsP2p(const ExecPlan& plan) {
  for (const RequestPlan& r : plan.requests)
    if (r.prefix_pages > 0 && GatherMethodOf(r.gather_method).ReadsPeers()) return true;
  return false;
}

// A serving plan's run: its passes' time, and the measured times to first token and queues.
void PrintServingSummary(const nlohmann::ordered_json& serving) {
  double pass_s = 0, queue = 0;
  for (const auto& p : serving["passes"]) pass_s += p["seconds"].get<double>();
  std::vector<double> ttft;
  for (const auto& r : serving["requests"]) {
    ttft.push_back(r["ttft_s"].get<double>());
    queue += r["queue_s"].get<double>();
  }
  if (ttft.empty()) return;
  std::printf(
      "  serving: %zu passes, %.6f s (device); TTFT p50 %.4f s, p90 %.4f s, p99 %.4f s; queue "
      "mean %.4f s (%zu requests, open loop)\n",
      serving["passes"].size(), pass_s, Percentile(ttft, 0.5), Percentile(ttft, 0.9),
      Percentile(ttft, 0.99), queue / static_cast<double>(ttft.size()), ttft.size());
}

void PrintSummary(const nlohmann::ordered_json& report) {
  std::map<std::string, std::pair<int64_t, double>> by_kind;
  for (const auto& o : report["ops"]) {
    if (o["kind"] == "pass" || o["kind"] == "ttft") continue;  // the serving line's
    auto& k = by_kind[o["kind"].get<std::string>()];
    ++k.first;
    k.second += o["seconds"].get<double>();
  }
  std::printf(
      "executed %lld requests on %lld ranks (%s backend): %zu measured ops, %lld bytes verified\n",
      static_cast<long long>(report["requests_executed"].get<int64_t>()),
      static_cast<long long>(report["cp_size"].get<int64_t>()),
      report["context"]["backend"].get<std::string>().c_str(), report["ops"].size(),
      static_cast<long long>(report["verified_bytes"].get<int64_t>()));
  if (report["verified_bytes"].get<int64_t>() == 0)
    std::printf(
        "  (0 bytes verified: the executor checks the cached pages a request reuses, gathered "
        "or loaded back, and no request of this run reused any; more requests or a trace with "
        "shared prefixes give some)\n");
  for (const auto& [kind, v] : by_kind)
    std::printf("  %-11s %8lld ops  %12.6f s (all ranks)\n", kind.c_str(),
                static_cast<long long>(v.first), v.second);
  double enqueue = 0;
  for (const auto& r : report["requests"])
    if (r.contains("host_enqueue_s")) enqueue += r["host_enqueue_s"].get<double>();
  std::printf("  request time %.6f s (device), host enqueue %.6f s\n",
              report["total_s"].get<double>(), enqueue);
  if (report.contains("serving")) PrintServingSummary(report["serving"]);
  const auto& gate = report["context"]["gate"];
  if (gate.contains("expired") && gate["expired"].get<int64_t>() > 0)
    std::printf(
        "  WARNING: %lld request gate(s) opened by their %.3g s timeout before the host had "
        "enqueued the request: those requests' ops include host time (if the host was blocked "
        "by a full launch queue, a longer --gate-timeout-s only makes it wait longer)\n",
        static_cast<long long>(gate["expired"].get<int64_t>()), gate["timeout_s"].get<double>());
  if (gate.contains("opened_early") && gate["opened_early"].get<int64_t>() > 0)
    std::printf(
        "  note: %lld request gate(s) opened before a forward layer too large for the launch "
        "queue behind them: those requests' later ops include host time\n",
        static_cast<long long>(gate["opened_early"].get<int64_t>()));
}

// One rank, start to finish. Returns the exit code; *error gets the message of a failure.
int RankBody(const ExecPlan& plan, const RunOptions& o, int rank, int local_rank, HostSegment* seg,
             const std::optional<RendezvousSpec>& rv_spec, int device, std::string* error) {
  std::unique_ptr<Rendezvous> rv;
  std::unique_ptr<RankBackend> b;
  auto fail = [&](int code, const std::string& msg) {
    *error = msg;
    if (b) {
      b->Abort(msg);
    } else if (seg) {
      seg->MarkFailed(rank, msg);
    }
    return code;
  };
  try {
    if (o.backend == "host") {
      if (!seg) throw InputError("", 0, "--backend host", "needs the shared segment (internal)");
      b = MakeHostBackend(plan.geo, *seg, rank, o.timeout_s);
    } else {
#if KVLANES_WITH_CUDA
      rv = OpenRendezvous(*rv_spec, rank, plan.geo.ranks, o.timeout_s);
      CudaBackendOptions c;
      c.device = device;
      c.tier_copy = o.tier_copy;
      c.tier_max_ctas = o.tier_max_ctas;
      c.timeout_s = o.timeout_s;
      c.needs_nccl = NeedsNccl(plan);
      c.needs_p2p = NeedsP2p(plan);
      if (plan.forward == ForwardMode::kModel) c.forward = &plan.forward_plan;
      b = MakeCudaBackend(plan.geo, rank, local_rank, *rv, c);
#else
      (void)local_rank;
      (void)device;
      (void)rv_spec;
      throw InputError("", 0, "--backend", "this build has no CUDA (use --backend host)");
#endif
    }
    ExecOptions eo = o.exec;
    eo.keep_spans = eo.keep_spans || !o.span_trace.empty();
    const RankResult mine = ExecuteRank(plan, *b, eo);
    const std::vector<std::string> all = b->AllGatherBytes(RankResultToJson(mine).dump());
    if (rank == 0) {
      std::vector<RankResult> results;
      for (const std::string& s : all)
        results.push_back(RankResultFromJson(nlohmann::json::parse(s)));
      const nlohmann::ordered_json report = MeasuredReport(plan, results, o);
      if (o.out_file)
        o.out_file->Write(report.dump(1) + "\n");
      else
        WriteFileAtomically(o.out, report.dump(1) + "\n");
      if (!o.timeline.empty())
        WriteFileAtomically(o.timeline, MeasuredTimeline(results).dump() + "\n");
      if (!o.span_trace.empty())
        WriteFileAtomically(o.span_trace, MeasuredSpanTrace(results).dump() + "\n");
      if (!o.quiet) PrintSummary(report);
    }
    b->Barrier();  // nobody tears down (NCCL, IPC mappings) while rank 0 still needs the others
    return 0;
  } catch (const InputError& e) {
    return fail(2, "rank " + std::to_string(rank) + ": error: " + e.what());
  } catch (const ExecError& e) {
    const std::string w = e.what();
    return fail(1, w.rfind("rank ", 0) == 0 ? w : "rank " + std::to_string(rank) + ": " + w);
  } catch (const std::exception& e) {
    return fail(1, "rank " + std::to_string(rank) + ": " + e.what());
  }
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

}  // namespace

void CheckBackendAvailable(const std::string& backend) {
  if (kBackendNames.Parse(backend, "--backend") == BackendKind::kHost) return;
#if !KVLANES_WITH_CUDA
  throw InputError(
      "", 0, "--backend",
      "cuda: this build has no CUDA (configure where nvcc exists), use --backend host");
#else
  // Asked in a child process: CUDA initialized here would be unusable in the forked ranks. One
  // message here instead of one per rank process, with the way to run without a GPU.
  int fds[2];
  if (pipe(fds) != 0) return;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return;  // the ranks will say it themselves
  }
  if (pid == 0) {
    close(fds[0]);
    std::string why;
    const std::string answer = std::to_string(VisibleCudaDevices(&why)) + " " + why;
    const ssize_t written = write(fds[1], answer.data(), answer.size());
    _exit(written == static_cast<ssize_t>(answer.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string answer;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) answer.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (answer.empty() || std::atoi(answer.c_str()) > 0) return;
  throw InputError("", 0, "--backend",
                   "cuda: no CUDA device visible (" + answer.substr(answer.find(' ') + 1) +
                       "); run on a GPU machine, or use --backend host to run the plan on host "
                       "memory shared by forked rank processes (same logic and checks, no GPU)");
#endif
}

void CheckOutputPaths(const RunOptions& o) {
  namespace fs = std::filesystem;
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--out", &o.out}, {"--timeline", &o.timeline}, {"--span-trace", &o.span_trace}};
  for (const auto& [option, path] : outputs) {
    if (path->empty()) continue;
    std::error_code ec;
    if (fs::is_directory(*path, ec)) throw InputError(*path, 0, option, "is a directory");
    const fs::path parent = fs::path(*path).parent_path();
    const std::string dir = parent.empty() ? "." : parent.string();
    if (!fs::exists(dir, ec))
      throw InputError(*path, 0, option, "cannot be written: directory " + dir + " does not exist");
    if (!fs::is_directory(dir, ec))
      throw InputError(*path, 0, option, "cannot be written: " + dir + " is not a directory");
    if (access(dir.c_str(), W_OK) != 0)
      throw InputError(*path, 0, option,
                       "cannot be written: directory " + dir + " is not writable");
  }
}

namespace {

// The forked rank processes of one SuperviseRanks call, as they are watched.
struct RankProcs {
  std::vector<pid_t> pids;  // -1 once reaped
  std::vector<int> pipes;   // read end of each rank's error pipe
  std::vector<int> status;  // waitpid status once reaped
  int live = 0;
  int first_failed = -1;
  Clock::time_point failed_at;
};

bool ExitedCleanly(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

// Forks one process per rank; each runs `body` and writes its error text into its pipe.
RankProcs ForkRanks(int N, const std::function<int(int rank, std::string* error)>& body) {
  std::fflush(nullptr);
  const pid_t parent = getpid();
  RankProcs procs;
  procs.pids.assign(static_cast<size_t>(N), -1);
  procs.pipes.assign(static_cast<size_t>(N), -1);
  procs.status.assign(static_cast<size_t>(N), 0);
  for (int r = 0; r < N; ++r) {
    int fd[2];
    if (pipe(fd) != 0) throw ExecError(std::string("pipe: ") + std::strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) throw ExecError(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      close(fd[0]);
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a supervisor that dies takes its ranks with it
      if (getppid() != parent) _exit(1);
      std::string error;
      const int code = body(r, &error);
      if (!error.empty()) {
        const ssize_t ignored = write(fd[1], error.data(), error.size());
        (void)ignored;
      }
      close(fd[1]);
      std::fflush(nullptr);
      _exit(code);
    }
    close(fd[1]);
    fcntl(fd[0], F_SETFL, O_NONBLOCK);
    procs.pids[static_cast<size_t>(r)] = pid;
    procs.pipes[static_cast<size_t>(r)] = fd[0];
  }
  procs.live = N;
  return procs;
}

// Appends what the ranks have written to their pipes so far.
void DrainErrors(const RankProcs& procs, RunOutcome& out) {
  char buf[4096];
  for (size_t r = 0; r < procs.pipes.size(); ++r) {
    if (procs.pipes[r] < 0) continue;
    ssize_t n;
    while ((n = read(procs.pipes[r], buf, sizeof(buf))) > 0)
      out.rank_errors[r].append(buf, static_cast<size_t>(n));
  }
}

// Reaps the ranks that have ended; the first to fail is told to the others at once (the host
// backend's waits poll the segment; CUDA ranks are killed after the grace period if their own
// timeouts have not stopped them).
void ReapEnded(RankProcs& procs, HostSegment* seg) {
  for (size_t r = 0; r < procs.pids.size(); ++r) {
    pid_t& pid = procs.pids[r];
    if (pid < 0) continue;
    int st = 0;
    const pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == 0) continue;
    pid = -1;
    --procs.live;
    procs.status[r] = st;
    if (!ExitedCleanly(st) && procs.first_failed < 0) {
      procs.first_failed = static_cast<int>(r);
      procs.failed_at = Clock::now();
      if (seg)
        seg->MarkFailed(static_cast<int>(r),
                        "rank " + std::to_string(r) + " " + DescribeStatus(st));
    }
  }
}

// Watches the ranks until all have ended: kills all once one failed more than a grace period
// ago, or once the run is over run_timeout_s.
void WatchRanks(RankProcs& procs, HostSegment* seg, double timeout_s, double run_timeout_s,
                RunOutcome& out) {
  const auto start = Clock::now();
  const double grace_s = std::min(5.0, timeout_s);
  bool killed = false;
  while (procs.live > 0) {
    DrainErrors(procs, out);
    ReapEnded(procs, seg);
    if (procs.live == 0) break;
    const auto now = Clock::now();
    const bool over_grace = procs.first_failed >= 0 &&
                            std::chrono::duration<double>(now - procs.failed_at).count() > grace_s;
    const bool over_run =
        run_timeout_s > 0 && std::chrono::duration<double>(now - start).count() > run_timeout_s;
    if ((over_grace || over_run) && !killed) {
      killed = true;
      if (over_run && out.message.empty())
        out.message =
            "the run took longer than " + std::to_string(run_timeout_s) + " s; killed every rank. ";
      for (pid_t pid : procs.pids)
        if (pid > 0) kill(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  DrainErrors(procs, out);
  for (int fd : procs.pipes) close(fd);
}

// The exit code and message of a run in which some rank failed.
void DescribeFailure(const RankProcs& procs, HostSegment* seg, RunOutcome& out) {
  const int N = static_cast<int>(procs.status.size());
  int first_failed = procs.first_failed;
  // Ranks reaped in the same poll come in rank order; the shared segment (host backend) knows
  // which failed first, and a rank that stopped because of another names it.
  if (seg) {
    const int32_t f = seg->control()->failed_rank.load();
    if (f >= 0 && f < N && !ExitedCleanly(procs.status[static_cast<size_t>(f)])) first_failed = f;
  }
  const int st = procs.status[static_cast<size_t>(first_failed)];
  out.exit_code = WIFEXITED(st) && WEXITSTATUS(st) == 2 ? 2 : 1;
  out.message +=
      "rank " + std::to_string(first_failed) + " failed first (" + DescribeStatus(st) + ")";
  if (!out.rank_errors[static_cast<size_t>(first_failed)].empty())
    out.message += ": " + out.rank_errors[static_cast<size_t>(first_failed)];
  for (int r = 0; r < N; ++r)
    if (r != first_failed && !ExitedCleanly(procs.status[static_cast<size_t>(r)]))
      out.message += "; rank " + std::to_string(r) + " " +
                     DescribeStatus(procs.status[static_cast<size_t>(r)]);
}

}  // namespace

RunOutcome SuperviseRanks(int N, HostSegment* seg, double timeout_s, double run_timeout_s,
                          const std::function<int(int rank, std::string* error)>& body) {
  RankProcs procs = ForkRanks(N, body);
  RunOutcome out;
  out.rank_errors.assign(static_cast<size_t>(N), "");
  WatchRanks(procs, seg, timeout_s, run_timeout_s, out);
  if (procs.first_failed < 0 && out.message.empty()) return out;
  if (procs.first_failed < 0) {
    out.exit_code = 1;
    return out;
  }
  DescribeFailure(procs, seg, out);
  return out;
}

RunOutcome RunLocal(const ExecPlan& plan, const RunOptions& o) {
  CheckBackendAvailable(o.backend);
  CheckOutputPaths(o);
  OutputFile out_file(o.out);  // refused here when another run is writing the same --out
  const int N = plan.geo.ranks;
  if (!o.devices.empty() && static_cast<int>(o.devices.size()) != N)
    throw InputError(
        "", 0, "--devices",
        std::to_string(o.devices.size()) + " GPUs for " + std::to_string(N) + " ranks");
  std::unique_ptr<HostSegment> seg;
  std::optional<RendezvousSpec> rv;
  std::string tmpdir;
  if (o.backend == "host") {
    seg = HostSegment::CreateAnonymous(plan.geo);
  } else {
    tmpdir = MakeRendezvousDir("kvlanes-exec");
    rv = ParseRendezvous("file:" + tmpdir);
  }
  struct Cleanup {
    std::string d;
    ~Cleanup() {
      std::error_code ec;
      if (!d.empty()) std::filesystem::remove_all(d, ec);
    }
  } cleanup{tmpdir};
  RunOptions ro = o;
  ro.out_file = &out_file;
  const RunOutcome outcome =
      SuperviseRanks(N, seg.get(), o.timeout_s, o.run_timeout_s, [&](int r, std::string* error) {
        const int device = o.devices.empty() ? -1 : o.devices[static_cast<size_t>(r)];
        const int code = RankBody(plan, ro, r, r, seg.get(), rv, device, error);
        if (!error->empty()) std::fprintf(stderr, "kvlanes exec: %s\n", error->c_str());
        return code;
      });
  if (outcome.exit_code == 0) out_file.Commit();  // rank 0 wrote the report into it
  return outcome;
}

std::string MakeRendezvousDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (!mkdtemp(templ.data()))
    throw ExecError("cannot create a rendezvous directory under " + templ);
  return templ;
}

namespace {

// The host segment of this run: named after rank 0's live claim, so a segment a dead run left in
// the directory is never mapped. Waits (bounded) for rank 0 to claim.
std::string HostSegmentName(const std::string& dir, int rank, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const std::string token = LiveClaimToken(dir, 0);
    if (!token.empty()) {
      uint64_t h = 1469598103934665603ull;  // FNV-1a
      for (unsigned char c : token) h = (h ^ c) * 1099511628211ull;
      char buf[32];
      std::snprintf(buf, sizeof(buf), "host_segment.%016llx", static_cast<unsigned long long>(h));
      return buf;
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw ExecError("rank " + std::to_string(rank) + ": rank 0 did not claim the rendezvous " +
                      dir + " within " + std::to_string(timeout_s) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int RunEnvRank(const ExecPlan& plan, const RunOptions& o, const GetEnvFn& getenv) {
  CheckBackendAvailable(o.backend);
  const RankEnv env = ParseRankEnv(getenv);
  if (env.ranks != plan.geo.ranks)
    throw InputError("", 0, env.source,
                     "world size " + std::to_string(env.ranks) + " but the plan's cp_size is " +
                         std::to_string(plan.geo.ranks));
  if (env.rank == 0) CheckOutputPaths(o);  // only rank 0 writes (its node's paths)
  const RendezvousSpec spec = o.rendezvous ? *o.rendezvous : DefaultRendezvous(getenv);
  std::unique_ptr<HostSegment> seg;
  std::unique_ptr<RendezvousClaim> claim;  // held until the rank is done
  if (o.backend == "host") {
    if (spec.kind != RendezvousSpec::Kind::kFile)
      throw InputError(
          "", 0, "--rendezvous",
          "the host backend shares memory between the ranks of one node: it needs file:DIR");
    claim = RendezvousClaim::Take(spec.path, env.rank, std::min(o.timeout_s, 1.0));
    seg = HostSegment::OpenFile(spec.path + "/" + HostSegmentName(spec.path, env.rank, o.timeout_s),
                                plan.geo, env.rank, o.timeout_s);
  }
  std::string error;
  RunOptions ro = o;
  std::optional<OutputFile> out_file;  // rank 0 holds --out (locked) for the whole run
  if (env.rank == 0) {
    out_file.emplace(o.out);
    ro.out_file = &*out_file;
  }
  const int code = RankBody(plan, ro, env.rank, env.local_rank, seg.get(), spec, -1, &error);
  if (!error.empty()) std::fprintf(stderr, "kvlanes exec: %s\n", error.c_str());
  if (out_file && code == 0) out_file->Commit();
  if (seg && env.rank == 0 && code == 0) seg->Unlink();
  return code;
}

namespace {

using OJ = nlohmann::ordered_json;

OJ RoundsJson(const std::vector<double>& v) {
  OJ a = OJ::array();
  for (double x : v) a.push_back(x);
  return a;
}

// The measured file's context: how the run was made, each rank's facts, the timed rounds and
// the request gates (their expiries summed over ranks).
OJ MeasuredContext(const ExecPlan& plan, const std::vector<RankResult>& ranks, const RunOptions& o,
                   int rounds) {
  OJ ctx;
  ctx["backend"] = o.backend;
  ctx["plan"] = JsonSafeText(plan.source);
  ctx["config_hash"] = plan.config_hash;
  ctx["compute_model"] = plan.compute_model;
  ctx["warmup_rounds"] = o.exec.warmup;
  if (plan.forward == ForwardMode::kModel)
    ctx["forward_warm"] = o.exec.forward_warm
                              ? "each request's layer shapes once, untimed, before its timed work"
                              : "no";
  ctx["cache_evict"] = o.exec.evict_caches
                           ? "before each request, untimed (a buffer of twice the L2 written)"
                           : "no";
  ctx["timeout_s"] = o.timeout_s;
  ctx["clock"] = o.backend == "cuda"
                     ? "CUDA events on the op's stream, from each rank's epoch event"
                     : "std::chrono::steady_clock, from each rank's epoch";
  OJ per_rank = OJ::array();
  for (const RankResult& r : ranks) per_rank.push_back(r.context);
  ctx["ranks"] = per_rank;
  if (!ranks.empty()) {
    for (const char* k :
         {"gpu", "driver_version", "cuda_runtime_version", "nccl_version", "host", "cpu"})
      if (ranks[0].context.contains(k)) ctx[k] = ranks[0].context[k];
  }
  if (rounds > 1)
    ctx["timed_rounds"] = {{"rounds", rounds},
                           {"seconds",
                            "each op's and request's median over the rounds (round_seconds: each "
                            "round's); start_s and end_s are round 0's"}};
  int64_t expired = 0, opened_early = 0;
  for (const RankResult& rr : ranks) {
    expired += rr.gates_expired;
    opened_early += rr.gates_opened_early;
  }
  if (o.exec.gate)
    ctx["gate"] = {
        {"held", o.exec.gate_first_layer ? "every request until its first layer is enqueued"
                                         : "every request until its host enqueue ends"},
        {"timeout_s", o.exec.gate_timeout_s},
        {"expired", expired},
        {"opened_early", opened_early}};
  else
    ctx["gate"] = {{"held", "no (the device runs each op as soon as it is enqueued)"}};
  return ctx;
}

// One rank's ops, round by round: each round's in the same order (a plan may repeat an op id:
// ops are matched by position, their ids checked); each op's seconds the median over rounds.
void AppendRankOps(const RankResult& r, int rounds, OJ& ops) {
  std::vector<std::vector<const MeasuredOp*>> by_round(static_cast<size_t>(rounds));
  for (const MeasuredOp& m : r.ops) {
    if (m.round < 0 || m.round >= rounds)
      throw ExecError("rank " + std::to_string(r.rank) + ": op " + m.id + " in round " +
                      std::to_string(m.round) + " of " + std::to_string(rounds));
    by_round[static_cast<size_t>(m.round)].push_back(&m);
  }
  for (int k = 1; k < rounds; ++k)
    if (by_round[static_cast<size_t>(k)].size() != by_round[0].size())
      throw ExecError("rank " + std::to_string(r.rank) + ": round " + std::to_string(k) + " ran " +
                      std::to_string(by_round[static_cast<size_t>(k)].size()) + " ops, round 0 " +
                      std::to_string(by_round[0].size()));
  for (size_t i = 0; i < by_round[0].size(); ++i) {
    const MeasuredOp& m = *by_round[0][i];
    std::vector<double> v;
    for (int k = 0; k < rounds; ++k) {
      const MeasuredOp& o = *by_round[static_cast<size_t>(k)][i];
      if (o.id != m.id)
        throw ExecError("rank " + std::to_string(r.rank) + ": op " + std::to_string(i) +
                        " of round " + std::to_string(k) + " is " + o.id + ", of round 0 " + m.id);
      v.push_back(o.seconds);
    }
    OJ op = {{"id", m.id},           {"kind", m.kind},
             {"rank", m.rank},       {"seconds", rounds > 1 ? Percentile(v, 0.5) : m.seconds},
             {"start_s", m.start_s}, {"end_s", m.end_s},
             {"stream", m.stream},   {"bytes", m.bytes},
             {"pages", m.pages}};
    if (rounds > 1) op["round_seconds"] = RoundsJson(v);
    for (const auto& [key, val] : m.extra.items()) op[key] = val;
    ops.push_back(std::move(op));
  }
}

// Host facts per request and round: the longest enqueue over ranks, and a second gate's pause
// (p2p) as the time every rank was paused (the intersection), which is not the request's work.
struct HostFacts {
  double enqueue_s = 0, pause_begin = 0, pause_end = 0;
  int paused_ranks = 0;
};

std::map<std::pair<int64_t, int>, HostFacts> HostFactsOf(const std::vector<RankResult>& ranks) {
  std::map<std::pair<int64_t, int>, HostFacts> facts;
  for (const RankResult& rr : ranks) {
    for (const RequestHostTime& q : rr.requests) {
      HostFacts& f = facts[{q.request, q.round}];
      f.enqueue_s = std::max(f.enqueue_s, q.enqueue_s);
      if (q.pause_end_s < q.pause_begin_s) continue;
      f.pause_begin =
          f.paused_ranks == 0 ? q.pause_begin_s : std::max(f.pause_begin, q.pause_begin_s);
      f.pause_end = f.paused_ranks == 0 ? q.pause_end_s : std::min(f.pause_end, q.pause_end_s);
      ++f.paused_ranks;
    }
  }
  return facts;
}

// A serving pass's records (exec/executor.h, RunPasses): the pass itself, a request's time to
// first token and a later chunk's spin, which are not a request's own ops.
bool IsServingRecord(const MeasuredOp& m) {
  return m.kind == "pass" || m.kind == "ttft" || m.kind == "chunk";
}

// Serving plans: each pass's seconds (its parts' device time), host seconds, tokens and chunks,
// and each request's arrival, queue and time to first token (rank 0's records; medians over the
// rounds). Empty when the plan has no passes.
OJ MeasuredServing(const std::vector<RankResult>& ranks) {
  std::map<std::string, std::vector<const MeasuredOp*>> by_id;
  std::vector<std::string> order;
  for (const MeasuredOp& m : ranks.front().ops) {
    if (m.kind != "pass" && m.kind != "ttft") continue;
    auto& v = by_id[m.id];
    if (v.empty()) order.push_back(m.id);
    v.push_back(&m);
  }
  OJ passes = OJ::array(), requests = OJ::array();
  for (const std::string& id : order) {
    const std::vector<const MeasuredOp*>& v = by_id[id];
    std::vector<double> s, host, queue;
    for (const MeasuredOp* m : v) {
      s.push_back(m->seconds);
      host.push_back(m->kind == "pass" ? m->extra.value("host_s", 0.0) : m->start_s);
      queue.push_back(m->extra.value("queue_s", 0.0));
    }
    const MeasuredOp& m = *v.front();
    if (m.kind == "pass") {
      passes.push_back({{"pass", m.extra.value("pass", int64_t{0})},
                        {"seconds", Percentile(s, 0.5)},
                        {"host_s", Percentile(host, 0.5)},
                        {"tokens", m.extra.value("tokens", int64_t{0})},
                        {"chunks", m.extra.value("chunks", int64_t{0})}});
    } else {
      requests.push_back({{"request", std::stoll(id.substr(0, id.find('/')))},
                          {"arrival_s", Percentile(host, 0.5)},
                          {"queue_s", Percentile(queue, 0.5)},
                          {"ttft_s", Percentile(s, 0.5)}});
    }
  }
  if (passes.empty()) return OJ();
  return {{"passes", std::move(passes)}, {"requests", std::move(requests)}};
}

// Per request and round: from its first op's start to its last op's end on any rank (the
// request's span; ranks' epochs are aligned by a barrier), less the time every rank was paused.
// A request's seconds are their median over the rounds; the requests' sum is the replay's
// measured total (`total`, and each round's in `round_totals`).
OJ MeasuredRequests(const std::vector<RankResult>& ranks, int rounds, double& total,
                    std::vector<double>& round_totals) {
  std::map<int64_t, std::vector<std::pair<double, double>>> span;
  for (const RankResult& r : ranks)
    for (const MeasuredOp& m : r.ops) {
      if (IsServingRecord(m)) continue;
      const int64_t q = std::stoll(m.id.substr(0, m.id.find('/')));
      auto& v = span[q];
      if (v.empty())
        v.assign(static_cast<size_t>(rounds), {std::numeric_limits<double>::infinity(),
                                               -std::numeric_limits<double>::infinity()});
      auto& ab = v.at(static_cast<size_t>(m.round));
      ab = {std::min(ab.first, m.start_s), std::max(ab.second, m.end_s)};
    }
  const std::map<std::pair<int64_t, int>, HostFacts> facts = HostFactsOf(ranks);
  OJ reqs = OJ::array();
  for (const auto& [r, per_round] : span) {
    std::vector<double> seconds, enqueue, held;
    for (int k = 0; k < rounds; ++k) {
      const auto& ab = per_round[static_cast<size_t>(k)];
      double s = ab.second - ab.first;
      const auto f = facts.find({r, k});
      if (f != facts.end()) {
        enqueue.push_back(f->second.enqueue_s);
        if (f->second.paused_ranks == static_cast<int>(ranks.size())) {
          const double h = std::max(0.0, std::min(f->second.pause_end, ab.second) -
                                             std::max(f->second.pause_begin, ab.first));
          held.push_back(h);
          s -= h;
        }
      }
      seconds.push_back(s);
      round_totals[static_cast<size_t>(k)] += s;
    }
    OJ q = {{"request", r}};
    if (!enqueue.empty()) q["host_enqueue_s"] = Percentile(enqueue, 0.5);
    if (!held.empty()) q["held_s"] = Percentile(held, 0.5);
    q["seconds"] = Percentile(seconds, 0.5);
    if (rounds > 1) q["round_seconds"] = RoundsJson(seconds);
    total += q["seconds"].get<double>();
    reqs.push_back(std::move(q));
  }
  return reqs;
}

}  // namespace

nlohmann::ordered_json MeasuredReport(const ExecPlan& plan, const std::vector<RankResult>& ranks,
                                      const RunOptions& o) {
  const int rounds = std::max(o.exec.rounds, 1);
  OJ j;
  j["kvlanes_measured"] = 1;
  j["context"] = MeasuredContext(plan, ranks, o, rounds);
  j["cp_size"] = plan.geo.ranks;
  j["requests_executed"] = plan.requests.size();
  j["layers"] = plan.geo.layers;
  int64_t verified = 0;
  OJ ops = OJ::array();
  for (const RankResult& r : ranks) {
    verified += r.verified_bytes;
    AppendRankOps(r, rounds, ops);
  }
  j["verified_bytes"] = verified;
  double total = 0;
  std::vector<double> round_totals(static_cast<size_t>(rounds), 0.0);
  j["requests"] = MeasuredRequests(ranks, rounds, total, round_totals);
  j["total_s"] = total;
  if (rounds > 1) j["round_totals_s"] = RoundsJson(round_totals);
  if (OJ s = MeasuredServing(ranks); !s.is_null()) j["serving"] = std::move(s);
  j["ops"] = ops;
  return j;
}

namespace {

// The trace-event format's thread ids are integers: each stream name gets one (in name order,
// the same on every rank), and a thread_name event per rank and stream names it.
std::map<std::string, int> StreamTids(const std::vector<RankResult>& ranks) {
  std::map<std::string, int> tids;
  for (const RankResult& r : ranks)
    for (const MeasuredOp& m : r.ops) tids.emplace(m.stream, 0);
  int next = 0;
  for (auto& [name, tid] : tids) tid = next++;
  return tids;
}

void AddThreadNames(nlohmann::ordered_json& all, int pid, const std::set<std::string>& streams,
                    const std::map<std::string, int>& tids) {
  for (const std::string& t : streams)
    all.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", pid},
                   {"tid", tids.at(t)},
                   {"args", {{"name", t}}}});
}

}  // namespace

nlohmann::ordered_json MeasuredTimeline(const std::vector<RankResult>& ranks) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  const std::map<std::string, int> tids = StreamTids(ranks);
  for (const RankResult& r : ranks) {
    all.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", r.rank},
                   {"args", {{"name", "rank " + std::to_string(r.rank)}}}});
    std::set<std::string> streams;
    for (const MeasuredOp& m : r.ops)
      if (m.round == 0) streams.insert(m.stream);
    AddThreadNames(all, r.rank, streams, tids);
  }
  for (const RankResult& r : ranks)
    for (const MeasuredOp& m : r.ops) {
      if (m.round != 0) continue;  // the timeline shows round 0 (start_s is round 0's)
      nlohmann::ordered_json args = {
          {"kind", m.kind}, {"seconds", m.seconds}, {"bytes", m.bytes}, {"pages", m.pages}};
      all.push_back({{"name", m.id},
                     {"cat", m.stream},
                     {"ph", "X"},
                     {"pid", r.rank},
                     {"tid", tids.at(m.stream)},
                     {"ts", m.start_s * 1e6},
                     {"dur", (m.end_s - m.start_s) * 1e6},
                     {"args", args}});
    }
  return {{"traceEvents", all}, {"displayTimeUnit", "ms"}};
}

nlohmann::ordered_json MeasuredSpanTrace(const std::vector<RankResult>& ranks) {
  struct Event {
    double ts, dur;  // microseconds from the rank's epoch
    int pid;
    const MeasuredOp* op;
    const MeasuredSpan* span;
  };
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  const std::map<std::string, int> tids = StreamTids(ranks);
  std::vector<Event> events;
  for (const RankResult& r : ranks) {
    all.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", r.rank},
                   {"args", {{"name", "rank " + std::to_string(r.rank)}}}});
    std::set<std::string> streams;
    for (const MeasuredSpan& s : r.spans) {
      const MeasuredOp& m = r.ops.at(s.op);
      streams.insert(m.stream);
      events.push_back(Event{s.start_s * 1e6, (s.end_s - s.start_s) * 1e6, r.rank, &m, &s});
    }
    AddThreadNames(all, r.rank, streams, tids);
  }
  // Stable: spans with equal ts, pid and tid keep their recorded order (rank order, then request).
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.ts, a.pid, a.op->stream) < std::tie(b.ts, b.pid, b.op->stream);
  });
  // A gather phase's span is an event of its own, "op:phase" of category gather_phase, on the
  // gather's stream (inside the gather layer's event).
  for (const Event& e : events) {
    const bool phase = !e.span->phase.empty();
    nlohmann::ordered_json args = {{"op", e.op->id}};
    if (e.span->layer >= 0) args["layer"] = e.span->layer;
    args["request"] = e.span->request;
    if (phase) args["phase"] = e.span->phase;
    all.push_back({{"name", phase ? e.op->id + ":" + e.span->phase : e.op->id},
                   {"cat", phase ? std::string("gather_phase") : e.op->kind},
                   {"ph", "X"},
                   {"ts", e.ts},
                   {"dur", e.dur},
                   {"pid", e.pid},
                   {"tid", tids.at(e.op->stream)},
                   {"args", args}});
  }
  return {{"traceEvents", all}, {"displayTimeUnit", "ms"}};
}

}  // namespace kvlanes::exec

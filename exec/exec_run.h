// Running a plan on N rank processes and writing what was measured (docs/executor.md).
//   RunLocal    forks one process per rank, supervises them (reaps every child; after the first
//               failure the others get a grace period to stop on their own, then SIGKILL) and
//               returns what went wrong, rank by rank.
//   RunEnvRank  the body of one rank started by an external launcher (--launch env).
// Rank 0 collects every rank's measured operations (through the backend's collectives) and
// writes the measured JSON and, on request, the Chrome trace-event timeline (one event per op)
// and the span trace (one event per timed span: every layer's copy, gather (and each of its
// phases) and forward pass).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/launch.h"
#include "io/output_file.h"

namespace kvlanes::exec {

struct RunOptions {
  std::string backend = "cuda";  // cuda | host
  std::string out;               // measured JSON (written by rank 0)
  // --out opened (its .tmp locked) before any rank starts, so a second run with the same --out
  // is refused at once instead of the two replacing each other; rank 0 writes into it and the
  // process that opened it commits it when the run succeeds. nullptr: rank 0 opens --out itself.
  OutputFile* out_file = nullptr;
  std::string timeline;                      // Chrome trace events ("" = none)
  std::string span_trace;                    // Chrome trace events of every timed span ("" = none)
  std::optional<RendezvousSpec> rendezvous;  // --launch env (local runs make their own)
  ExecOptions exec;
  double timeout_s = 300;    // any single wait inside a rank
  double run_timeout_s = 0;  // RunLocal: the whole run (0 = none); then every rank is killed
  std::vector<int> devices;  // RunLocal, cuda: GPU of each rank (empty = rank modulo count)
  std::string tier_copy = "kernel";  // tier copies: kernel (SM copy kernel on mapped pinned memory)
                                     // | memcpy (cudaMemcpy2DAsync) | batch (cudaMemcpyBatchAsync)
  int tier_max_ctas =
      -1;  // kernel tier copies: grid cap instead of tuning.h's (0: no cap, -1: tuning.h's)
  bool quiet = false;
};

struct RunOutcome {
  int exit_code = 0;                     // 0 ok, 1 run failed, 2 bad input
  std::string message;                   // what the supervisor saw ("" when all went well)
  std::vector<std::string> rank_errors;  // per rank, its own error message ("" if none)
};

// "cuda" needs a build with CUDA and a visible CUDA device (asked in a child process); throws
// InputError naming --backend, and --backend host as the way without a GPU, otherwise.
void CheckBackendAvailable(const std::string& backend);
// Output files (--out, --timeline, --span-trace) must be creatable before any rank starts: their
// directory exists and the path is not a directory. Throws InputError naming the option and
// path. RunLocal and RunEnvRank call it first.
void CheckOutputPaths(const RunOptions& opts);

RunOutcome RunLocal(const ExecPlan& plan, const RunOptions& opts);

class HostSegment;
// The supervision RunLocal uses, for any per-rank body (also `kvlanes bench sweep --ranks`):
// forks N processes, each running body(rank, &error) and exiting with its return value (the
// error text reaches the supervisor through a pipe); the first failure stops the others (the
// host segment, when given, is marked failed; after a grace period of min(5 s, timeout_s) every
// rank still running is killed), as is a run longer than run_timeout_s (0 = no limit).
RunOutcome SuperviseRanks(int ranks, HostSegment* seg, double timeout_s, double run_timeout_s,
                          const std::function<int(int rank, std::string* error)>& body);
// A fresh directory $TMPDIR/<prefix>-XXXXXX for a file rendezvous. Throws ExecError.
std::string MakeRendezvousDir(const std::string& prefix);
// Returns the exit code; prints the rank's error on stderr.
int RunEnvRank(const ExecPlan& plan, const RunOptions& opts, const GetEnvFn& getenv);

// The measured report from every rank's result (rank order) and the timeline.
nlohmann::ordered_json MeasuredReport(const ExecPlan& plan, const std::vector<RankResult>& ranks,
                                      const RunOptions& opts);
nlohmann::ordered_json MeasuredTimeline(const std::vector<RankResult>& ranks);
// Every rank's spans (RankResult::spans) as Chrome trace events (docs/executor.md, "Span
// trace"): metadata first, then complete events sorted by ts, pid and tid.
nlohmann::ordered_json MeasuredSpanTrace(const std::vector<RankResult>& ranks);

}  // namespace kvlanes::exec

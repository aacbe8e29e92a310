// `kvlanes`: one executable, subcommands dispatched by name (commands.h).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace {

struct Entry {
  const char* name;  // one or two words
  kvlanes::cli::CommandFn fn;
  const char* help;
};

const Entry kCommands[] = {
    {"replay", &kvlanes::cli::CmdReplay, "replay a request trace through a cache policy and report"},
    {"compare", &kvlanes::cli::CmdCompare, "replay one trace through several policies, one table"},
    // "sweep merge" before "sweep": the first entry whose words match wins.
    {"sweep merge", &kvlanes::cli::CmdSweepMerge, "join the shard outputs of one sweep (--shard I/N)"},
    {"sweep", &kvlanes::cli::CmdSweep, "grid of replays over config values (capacity curves)"},
    {"explain", &kvlanes::cli::CmdExplain, "one request's decisions, alternatives and predicted costs"},
    {"exec", &kvlanes::cli::CmdExec, "GPU executor: perform a plan with NCCL, CUDA IPC and copies; verify, measure"},
    {"calibrate", &kvlanes::cli::CmdCalibrate, "fit a hardware profile to benchmark measurements"},
    {"check", &kvlanes::cli::CmdCheck, "compare predicted and measured costs per operation, request and replay"},
    {"trace stats", &kvlanes::cli::CmdTraceStats, "summarize a trace: lengths, ids, ideal hit ratio"},
    {"bench sweep", &kvlanes::cli::CmdBenchSweep, "GPU: measure every operation kind over a grid of sizes"},
    {"bench replay", &kvlanes::cli::CmdBenchReplay, "replay speed: requests/s, page operations/s, peak memory"},
    {"bench kernels", &kvlanes::cli::CmdBenchKernels,
     "GPU: bandwidth of the materialization and tier-copy kernels vs plain copies"},
};

void Usage(FILE* to) {
  std::fprintf(to,
               "kvlanes: KV-cache placement for context-parallel LLM serving: replay traces, "
               "predict, execute, compare.\n\nusage: kvlanes COMMAND [options]   "
               "(kvlanes COMMAND --help for its options)\n\ncommands:\n");
  for (const Entry& e : kCommands) std::fprintf(to, "  %-15s %s\n", e.name, e.help);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const Entry& e : kCommands) {
    const std::string name = e.name;
    const auto space = name.find(' ');
    int words = 1;
    if (space == std::string::npos) {
      if (name != argv[1]) continue;
    } else {
      if (name.substr(0, space) != argv[1]) continue;
      if (argc < 3 || name.substr(space + 1) != argv[2]) continue;
      words = 2;
    }
    std::string full = "kvlanes " + name;
    std::vector<const char*> args;
    args.push_back(full.c_str());
    for (int i = 1 + words; i < argc; ++i) args.push_back(argv[i]);
    return e.fn(static_cast<int>(args.size()), args.data());
  }
  std::fprintf(stderr, "kvlanes: unknown command '%s'%s%s\n\n", argv[1], argc > 2 ? " " : "",
               argc > 2 ? argv[2] : "");
  Usage(stderr);
  return 2;
}

// `kvlanes`: one executable, subcommands dispatched by name (commands.h).
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "io/build_info.h"
#include "io/name_table.h"
#include "tools/commands.h"

namespace {

struct Entry {
  const char* name;  // one or two words
  kvlanes::cli::CommandFn fn;
  const char* help;
};

const Entry kCommands[] = {
    {"replay", &kvlanes::cli::CmdReplay,
     "replay a request trace through a cache policy and report"},
    {"compare", &kvlanes::cli::CmdCompare, "replay one trace through several policies, one table"},
    // "sweep merge" before "sweep": the first entry whose words match wins.
    {"sweep merge", &kvlanes::cli::CmdSweepMerge,
     "join the shard outputs of one sweep (--shard I/N)"},
    {"sweep", &kvlanes::cli::CmdSweep, "grid of replays over config values (capacity curves)"},
    {"mrc", &kvlanes::cli::CmdMrc,
     "token hit ratio against device capacity, in one pass where exact (lru)"},
    {"explain", &kvlanes::cli::CmdExplain,
     "one request's decisions, alternatives and predicted costs"},
    {"exec", &kvlanes::cli::CmdExec,
     "GPU executor: perform a plan with NCCL, CUDA IPC and copies; verify, measure"},
    {"calibrate", &kvlanes::cli::CmdCalibrate, "fit a hardware profile to benchmark measurements"},
    {"check", &kvlanes::cli::CmdCheck,
     "compare predicted and measured costs per operation, request and replay"},
    {"trace stats", &kvlanes::cli::CmdTraceStats,
     "summarize a trace: lengths, ids, ideal hit ratio"},
    {"bench sweep", &kvlanes::cli::CmdBenchSweep,
     "GPU: measure every operation kind over a grid of sizes"},
    {"bench replay", &kvlanes::cli::CmdBenchReplay,
     "replay speed: requests/s, page operations/s, peak memory"},
    {"bench policies", &kvlanes::cli::CmdBenchPolicies,
     "replay speed of policies against lru, interleaved rounds, one table"},
    {"bench mrc", &kvlanes::cli::CmdBenchMrc,
     "one-pass capacity curve against a replay per point: time and accuracy"},
    {"bench read", &kvlanes::cli::CmdBenchRead,
     "trace loading speed: read (the ceiling), parse and load, GB/s"},
    {"regress record", &kvlanes::cli::CmdRegRecord, "run a regress suite, write its golden file"},
    {"regress check", &kvlanes::cli::CmdRegCheck,
     "rerun a regress suite: which pinned metrics moved"},
    {"regress conform", &kvlanes::cli::CmdRegConform,
     "every run of a suite keeps the policy invariants"},
    {"bench kernels", &kvlanes::cli::CmdBenchKernels,
     "GPU: bandwidth of the materialization and tier-copy kernels vs plain copies"},
};

void Usage(FILE* to) {
  std::fprintf(to,
               "kvlanes: KV-cache placement for context-parallel LLM serving: replay traces, "
               "predict, execute, compare.\n\nusage: kvlanes COMMAND [options]   "
               "(kvlanes help COMMAND, or kvlanes COMMAND --help, for its options and examples)\n"
               "       kvlanes --version\n\ncommands:\n");
  for (const Entry& e : kCommands) std::fprintf(to, "  %-16s %s\n", e.name, e.help);
  std::fprintf(
      to,
      "\nexamples:\n"
      "  kvlanes replay --trace traces/mooncake_excerpt.jsonl --config config/default.yaml\n"
      "  kvlanes compare --trace traces/mooncake_excerpt.jsonl --policies lru,lanes\n"
      "  kvlanes help sweep\n");
}

std::string FirstWord(const std::string& name) { return name.substr(0, name.find(' ')); }

// The command whose words are argv[1] (and argv[2] for two-word names), with the words it used.
const Entry* FindCommand(int argc, const char* const* argv, int* words) {
  for (const Entry& e : kCommands) {
    const std::string name = e.name;
    const auto space = name.find(' ');
    if (space == std::string::npos) {
      if (name != argv[1]) continue;
      *words = 1;
    } else {
      if (name.substr(0, space) != argv[1]) continue;
      if (argc < 3 || name.substr(space + 1) != argv[2]) continue;
      *words = 2;
    }
    return &e;
  }
  return nullptr;
}

// `kvlanes bench`: a group name alone lists its subcommands.
bool IsGroup(const std::string& word) {
  for (const Entry& e : kCommands) {
    const std::string name = e.name;
    if (name.find(' ') != std::string::npos && FirstWord(name) == word) return true;
  }
  return false;
}

int GroupUsage(const std::string& group, FILE* to) {
  std::fprintf(to, "usage: kvlanes %s SUBCOMMAND [options]\n\nsubcommands:\n", group.c_str());
  for (const Entry& e : kCommands) {
    const std::string name = e.name;
    if (name.find(' ') != std::string::npos && FirstWord(name) == group)
      std::fprintf(to, "  %-15s %s\n", e.name, e.help);
  }
  return 2;
}

int UnknownCommand(int argc, const char* const* argv) {
  std::string given = argv[1];
  std::vector<std::string> names;
  for (const Entry& e : kCommands) names.push_back(e.name);
  if (IsGroup(given) && argc > 2) given += std::string(" ") + argv[2];
  std::fprintf(stderr, "kvlanes: unknown command '%s'", given.c_str());
  std::vector<std::string_view> views(names.begin(), names.end());
  std::string close = kvlanes::ClosestName(given, views);
  if (close.empty()) {  // a typo in the first word of a one-word command
    close = kvlanes::ClosestName(argv[1], views);
  }
  if (!close.empty()) std::fprintf(stderr, "; did you mean 'kvlanes %s'?", close.c_str());
  std::fprintf(stderr, "\n\n");
  Usage(stderr);
  return 2;
}

int Dispatch(int argc, const char* const* argv) {
  int words = 0;
  const Entry* e = FindCommand(argc, argv, &words);
  if (!e) {
    if (IsGroup(argv[1]) && argc == 2) return GroupUsage(argv[1], stderr);
    // `kvlanes bench --help`: the group's list, asked for (stdout, exit 0).
    if (IsGroup(argv[1]) && argc == 3 &&
        (!std::strcmp(argv[2], "--help") || !std::strcmp(argv[2], "-h"))) {
      GroupUsage(argv[1], stdout);
      return 0;
    }
    return UnknownCommand(argc, argv);
  }
  std::string full = std::string("kvlanes ") + e->name;
  std::vector<const char*> args;
  args.push_back(full.c_str());
  for (int i = 1 + words; i < argc; ++i) args.push_back(argv[i]);
  return e->fn(static_cast<int>(args.size()), args.data());
}

// The heap of a process that fills tens of MiB of fresh memory once (a replay's trace, tree and
// report; docs/replay.md, "Whole process"). The set-up grows glibc's heap by kHeapPad at once
// and keeps large blocks in it (instead of a mapping of their own each, mapped and unmapped as
// vectors grow), and, where the kernel's free memory stays the kernel's, asks for transparent
// huge pages over that region (Linux "always" or "madvise"): one page fault per 2 MiB instead of
// one per 4 KiB. Nothing an output holds depends on it. KVLANES_HEAP: "default" (or malloc
// settings in GLIBC_TUNABLES) leaves glibc's defaults, "huge" asks for huge pages in any case,
// "small" never.
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE) && defined(M_TOP_PAD)
constexpr size_t kHeapPad = size_t{64} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
void* volatile heap_gap = nullptr;  // (volatile: see below)

// The first line of a small file, or "" when it cannot be read.
std::string FirstLine(const char* path) {
  std::string line;
  if (FILE* f = std::fopen(path, "r")) {
    char buf[256];
    if (std::fgets(buf, sizeof buf, f) != nullptr) line = buf;
    std::fclose(f);
  }
  return line;
}

// Whether a virtio balloon reports free 2 MiB blocks to the hypervisor (free page reporting at
// page_reporting_order 9 or below, feature bit 5 negotiated), which then takes their memory back:
// a huge page taken from such a block is faulted in again by the host on its first touch. On the
// 2-core development VM (page_reporting_order 9) a huge page's first touch then took
// 10-12 ms of system time, and a replay process that asked for huge pages 50-120 ms in half of the
// runs instead of 15-30 ms (docs/replay.md, "Whole process").
bool FreeHugePagesGoToTheHost() {
  const std::string order = FirstLine("/sys/module/page_reporting/parameters/page_reporting_order");
  if (order.empty() || std::atoi(order.c_str()) > 9) return false;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/bus/virtio/drivers/virtio_balloon/virtio" + std::to_string(i);
    const std::string features = FirstLine((dir + "/features").c_str());
    if (features.size() > 5 && features[5] == '1') return true;
  }
  return false;
}

void PrepareHeap() {
  const char* mode_env = std::getenv("KVLANES_HEAP");
  const std::string mode = mode_env != nullptr ? mode_env : "";
  if (mode == "default") return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) return;
  // Blocks up to 32 MiB from the heap (glibc's largest dynamic threshold); the pad is never
  // trimmed away, so the advised region stays mapped.
  if (mallopt(M_MMAP_THRESHOLD, 32 << 20) == 0 || mallopt(M_TRIM_THRESHOLD, 2 * kHeapPad) == 0 ||
      mallopt(M_TOP_PAD, kHeapPad) == 0)
    return;
  // The heap grows when a block does not fit in its free top: one of kHugePage does not fit in a
  // fresh process's top, and the pad comes with it. (volatile: a malloc/free pair whose block is
  // never used may be removed by the compiler.)
  void* volatile block = std::malloc(kHugePage);
  if (block == nullptr) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(static_cast<void*>(block));
  std::free(block);
  if (mode == "small" || (mode != "huge" && FreeHugePagesGoToTheHost())) return;
  const uintptr_t end = reinterpret_cast<uintptr_t>(sbrk(0));
  // madvise applies to mapped memory only: the region must lie in the grown heap (a heap that
  // could not grow by brk gives a block elsewhere, and nothing is advised).
  if (end <= begin || end - begin > kHeapPad + 2 * kHugePage) return;
  // A 2 MiB range gets a huge page only if its first touch comes after the advice: malloc wrote
  // the header of the rest of the heap at begin + kHugePage, so the region starts above it.
  constexpr uintptr_t kHeader = 2 * sizeof(size_t);  // glibc's block header
  const uintptr_t b = (begin + kHugePage + kHeader + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t e = end & ~(kHugePage - 1);
  if (e <= b || madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE) != 0) return;
  // The heap's free part starts at `begin`, below the region: a block that fills the gap, kept
  // for the life of the process, makes the next blocks start at `b`. Only the pages of its two
  // headers are ever written; the rest takes address space, not memory.
  heap_gap = std::malloc(b - begin - kHeader);
}
#else
void PrepareHeap() {}
#endif

}  // namespace

int kvlanes::cli::Main(int argc, char** argv) {
  PrepareHeap();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      (!std::strcmp(argv[1], "help") && argc == 2)) {
    Usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) {
    std::printf("kvlanes %s (commit %s, %s build)\n", kvlanes::BuildVersion(),
                kvlanes::BuildCommit(), kvlanes::BuildType());
    return 0;
  }
  if (!std::strcmp(argv[1], "help")) {  // kvlanes help CMD [SUB]: that command's --help
    std::vector<const char*> args(argv + 1, argv + argc);
    args[0] = argv[0];
    int words = 0;
    if (!FindCommand(static_cast<int>(args.size()), args.data(), &words)) {
      if (IsGroup(args[1]) && args.size() == 2) {
        GroupUsage(args[1], stdout);
        return 0;
      }
      return UnknownCommand(static_cast<int>(args.size()), args.data());
    }
    args.resize(1 + words);
    args.push_back("--help");
    return Dispatch(static_cast<int>(args.size()), args.data());
  }
  return Dispatch(argc, argv);
}

// kvlanes bench read: trace loading speed, with its ceiling measured in the same run. The ceiling
// is reading the file into memory (ReadTraceFile: no loader can be faster than its input); parse
// is the reader on text already in memory (ParseTraceText); load is LoadTrace as a replay calls
// it (read + parse + namespacing + merge); first load is the first LoadTrace of the file, before
// the others (its memory fresh from the kernel, as for a process that loads its trace once). GB/s =
// file bytes / time (1 GB = 1e9 bytes); each time is the median of --reps runs, in thread CPU time
// (a shared machine's other load does not count) and wall time. "scan" is a reference measured in
// the same run: a minimal integer scan of the same text (every digit run into a vector, no JSON),
// the speed a trivial reader of these numbers has on this machine. Formulas and figures:
// traces/README.md, "Speed".
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "io/build_info.h"
#include "io/input_error.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"
#include "traces/format_readers.h"
#include "traces/trace_reader.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Every run of digits of `text` as an integer: the reference "scan".
size_t MinimalIntegerScan(const std::string& text) {
  std::vector<uint64_t> v;
  v.reserve(text.size() / 4);
  uint64_t x = 0;
  bool in = false;
  for (const char c : text) {
    const unsigned d = static_cast<unsigned char>(c - '0');
    if (d <= 9) {
      x = x * 10 + d;
      in = true;
    } else if (in) {
      v.push_back(x);
      x = 0;
      in = false;
    }
  }
  return v.size();
}

struct Times {
  double cpu, wall;
};

// Reads `path` through a small buffer, so that its pages are in the page cache and the process's
// heap does not grow. Errors are left to the reader.
void WarmPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[1 << 16];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
  }
  ::close(fd);
}

double ReadMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median CPU and wall seconds of `reps` calls of fn.
template <typename Fn>
Times Time(int reps, Fn&& fn) {
  std::vector<double> cpu, wall;
  for (int i = 0; i < reps; ++i) {
    const double c = CpuSeconds();
    const double w = WallSeconds();
    fn();
    wall.push_back(WallSeconds() - w);
    cpu.push_back(CpuSeconds() - c);
  }
  return Times{ReadMedian(cpu), ReadMedian(wall)};
}

}  // namespace

int CmdBenchRead(int argc, const char* const* argv) {
  const std::string name = argc > 0 ? argv[0] : "kvlanes bench read";
  std::vector<std::string> files;
  std::string format;
  int reps = 5;
  TraceOptions opt;
  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "format", po::value(&format),
      ("one of " + kTraceFormatNames.List() + " (default: detected per file)").c_str())(
      "reps", po::value(&reps)->default_value(5), "runs per measurement (the median is shown)");
  AddTraceLimitOptions(visible, &opt);
  po::options_description hidden;
  hidden.add_options()("file", po::value(&files)->composing(), "trace file");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("file", -1);
  const auto usage = [&](std::ostream& out) {
    PrintHelp(
        out, name + " FILE... [options]",
        "Trace loading speed per file: bytes, read (the ceiling: the file into memory), scan\n"
        "(a minimal integer scan of the text, a reference), parse (the reader on text in\n"
        "memory), load (LoadTrace: read + parse), first load (the first LoadTrace of the file,\n"
        "before the others: memory fresh from the kernel), as times and GB/s.",
        visible,
        {"kvlanes bench read traces/mooncake_excerpt.jsonl",
         "kvlanes bench read traces/mooncake/conversation_trace.jsonl --reps 3"});
  };
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << UsageErrorLine(name, e, visible) << "\n";
    usage(std::cerr);
    return 2;
  }
  if (vm.count("help")) {
    usage(std::cout);
    return 0;
  }
  if (files.empty() || reps < 1) {
    std::cerr << name << ": " << (files.empty() ? "no trace file given" : "--reps must be >= 1")
              << "\n";
    usage(std::cerr);
    return 2;
  }
  try {
    std::optional<TraceFormat> fmt;
    if (!format.empty()) fmt = ParseTraceFormat(format);
    std::printf(
        "kvlanes %s (commit %s, %s); median of %d runs; thread CPU time (wall time in "
        "brackets); GB/s = 1e9 bytes / CPU s\n",
        BuildVersion(), BuildCommit(), BuildType(), reps);
    std::printf("%-44s %8s %11s %9s %16s %16s %16s %16s %16s %9s %9s %10s %9s %10s\n", "file",
                "format", "bytes", "requests", "read ms", "scan ms", "parse ms", "load ms",
                "first load ms", "read GB/s", "scan GB/s", "parse GB/s", "load GB/s", "first GB/s");
    for (const std::string& f : files) {
      // The first load, before anything else of this file: the file is in the page cache, but the
      // heap has not yet grown for it (as in a process that loads its trace once); the later loads
      // reuse memory that the earlier ones freed.
      WarmPageCache(f);
      Times first{CpuSeconds(), WallSeconds()};
      LoadTrace({f}, fmt, opt);
      first = Times{CpuSeconds() - first.cpu, WallSeconds() - first.wall};
      const std::string text = ReadTraceFile(f, opt);  // checks the file
      size_t requests = 0;
      size_t numbers = 0;
      TraceFormat got = TraceFormat::kMooncake;
      const Times read = Time(reps, [&] { ReadTraceFile(f, opt).size(); });
      const Times scan = Time(reps, [&] { numbers += MinimalIntegerScan(text); });
      const Times parse = Time(reps, [&] {
        const reader::FileTrace ft = reader::ParseTraceText(f, text, fmt, opt);
        requests = ft.requests.size();
        got = ft.format;
      });
      const Times load = Time(reps, [&] { LoadTrace({f}, fmt, opt); });
      const double gb = static_cast<double>(text.size()) / 1e9;
      const auto ms = [](const Times& t) {
        char b[40];
        std::snprintf(b, sizeof b, "%.2f (%.2f)", t.cpu * 1e3, t.wall * 1e3);
        return std::string(b);
      };
      std::printf("%-44s %8s %11zu %9zu %16s %16s %16s %16s %16s %9.2f %9.2f %10.3f %9.3f %10.3f\n",
                  f.c_str(), TraceFormatName(got), text.size(), requests, ms(read).c_str(),
                  ms(scan).c_str(), ms(parse).c_str(), ms(load).c_str(), ms(first).c_str(),
                  gb / read.cpu, gb / scan.cpu, gb / parse.cpu, gb / load.cpu, gb / first.cpu);
      if (numbers == 0) std::printf("  (the file holds no digits)\n");
    }
  } catch (const InputError& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace kvlanes::cli

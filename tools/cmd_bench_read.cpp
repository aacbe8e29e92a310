// kvlanes bench read: trace loading speed, with its ceiling measured in the same run. The ceiling
// is reading the file into memory (ReadTraceFile: no loader can be faster than its input); parse
// is the reader on text already in memory (ParseTraceText); load is LoadTrace as a replay calls
// it (read + parse + namespacing + merge). GB/s = file bytes / time (1 GB = 1e9 bytes); each time
// is the median of --reps runs. Formulas and figures: traces/README.md, "Speed".
#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "traces/build_info.h"
#include "traces/format_readers.h"
#include "traces/input_error.h"
#include "traces/trace_reader.h"

namespace po = boost::program_options;

namespace kvlanes::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of `reps` calls of fn.
template <typename Fn>
double Time(int reps, Fn&& fn) {
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    const Clock::time_point a = Clock::now();
    fn();
    s.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  return Median(s);
}

}  // namespace

int CmdBenchRead(int argc, const char* const* argv) {
  const std::string name = argc > 0 ? argv[0] : "kvlanes bench read";
  std::vector<std::string> files;
  std::string format;
  int reps = 5;
  TraceOptions opt;
  po::options_description visible("Options");
  visible.add_options()("help,h", "print this help")(
      "format", po::value(&format), "mooncake | kvtester | tokens (default: detected per file)")(
      "reps", po::value(&reps)->default_value(5), "runs per measurement (the median is shown)")(
      "max-file-bytes", po::value(&opt.max_file_bytes)->default_value(opt.max_file_bytes),
      "largest trace file accepted")(
      "max-line-bytes", po::value(&opt.max_line_bytes)->default_value(opt.max_line_bytes),
      "longest JSONL record line accepted");
  po::options_description hidden;
  hidden.add_options()("file", po::value(&files)->composing(), "trace file");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("file", -1);
  const auto usage = [&](std::ostream& out) {
    out << "Usage: " << name << " FILE... [options]\n"
        << "Trace loading speed per file: bytes, read (the ceiling: the file into memory), parse "
           "(the reader on text in memory), load (LoadTrace), each as GB/s.\n\n"
        << visible;
  };
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << name << ": " << e.what() << "\n";
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
    std::printf("kvlanes %s (commit %s, %s); median of %d runs; GB = 1e9 bytes\n", BuildVersion(),
                BuildCommit(), BuildType(), reps);
    std::printf("%-48s %8s %12s %10s %9s %10s %9s %10s %9s %7s\n", "file", "format", "bytes",
                "requests", "read ms", "read GB/s", "parse ms", "parse GB/s", "load ms",
                "parse/read");
    for (const std::string& f : files) {
      const std::string text = ReadTraceFile(f, opt);  // warms the page cache, checks the file
      size_t requests = 0;
      TraceFormat got = TraceFormat::kMooncake;
      const double read_s = Time(reps, [&] { ReadTraceFile(f, opt).size(); });
      const double parse_s = Time(reps, [&] {
        const reader::FileTrace ft = reader::ParseTraceText(f, text, fmt, opt);
        requests = ft.requests.size();
        got = ft.format;
      });
      const double load_s = Time(reps, [&] { LoadTrace({f}, fmt, opt); });
      const double gb = static_cast<double>(text.size()) / 1e9;
      std::printf("%-48s %8s %12zu %10zu %9.2f %10.2f %9.2f %10.3f %9.2f %7.2f\n", f.c_str(),
                  TraceFormatName(got), text.size(), requests, read_s * 1e3, gb / read_s,
                  parse_s * 1e3, gb / parse_s, load_s * 1e3, parse_s / read_s);
    }
  } catch (const InputError& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace kvlanes::cli

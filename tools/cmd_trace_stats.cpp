// `kvlanes trace stats FILE...`: loads a trace (any format, merged if several files) and prints
// its summary statistics (traces/trace_stats.h), optionally also as JSON.
#include <algorithm>
#include <boost/program_options.hpp>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/input_error.h"
#include "io/output_file.h"
#include "sim/config.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/replay_setup.h"
#include "traces/trace_reader.h"
#include "traces/trace_stats.h"

namespace kvlanes::cli {
namespace {

// --set with replay's key names for the keys that shape a trace's pages, into the options;
// `format_from` becomes the option a format error names.
void ApplyTraceStatsSets(const std::vector<std::string>& sets, TraceOptions& opt,
                         std::string& format, std::string& format_from) {
  for (const std::string& s : sets) {
    const std::string key = s.substr(0, s.find('='));
    static const std::vector<std::string_view> kKeys = {"cache.page_tokens", "trace.block_tokens",
                                                        "trace.format"};
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end())
      ThrowUnknownName("trace stats key", key, kKeys, "--set", "", 0);
    ReplayConfig c;
    ApplyConfigSetting(s, c);
    if (key == "cache.page_tokens") opt.page_tokens = c.cache.page_tokens;
    if (key == "trace.block_tokens") opt.block_tokens = c.trace.block_tokens;
    if (key == "trace.format") {
      format = c.trace.format == "auto" ? "" : c.trace.format;
      format_from = "--set trace.format";
    }
  }
}

}  // namespace

int CmdTraceStats(int argc, const char* const* argv) {
  namespace po = boost::program_options;
  const std::string name = argc > 0 ? argv[0] : "kvlanes trace stats";
  TraceOptions opt;
  std::string format;
  std::string json_path;
  std::vector<std::string> files;
  std::vector<std::string> sets;

  po::options_description visible("options");
  visible.add_options()("help,h", "print this help")(
      "format", po::value(&format),
      ("trace format: one of " + kTraceFormatNames.List() +
       " (default: detected per file from its first record)")
          .c_str())(
      "block-tokens", po::value(&opt.block_tokens)->default_value(0),
      "tokens per block id; 0 = the format's default (mooncake 512, kvtester the file's "
      "block_size, bailian 16, csv 512, tokens, lcs and oracle_general the page size)")(
      "page-tokens", po::value(&opt.page_tokens)->default_value(64),
      "tokens per KV page; must divide the block size")(
      "allow-unsorted", po::bool_switch(&opt.allow_unsorted),
      "sort each file by time instead of refusing timestamps that go backwards")(
      "json", po::value(&json_path), "also write the statistics as a JSON object to this file")(
      "set", po::value(&sets)->composing(),
      "KEY=VALUE, as replay takes it: cache.page_tokens, trace.block_tokens or trace.format "
      "(the same as --page-tokens, --block-tokens, --format)");
  AddTraceLimitOptions(visible, &opt);
  po::options_description hidden;
  hidden.add_options()("file", po::value(&files)->composing(), "trace file or directory");
  po::options_description all;
  all.add(visible).add(hidden);
  po::positional_options_description positional;
  positional.add("file", -1);

  const auto usage = [&](std::ostream& out) {
    PrintHelp(out, name + " FILE... [options]",
              "Summary statistics of a request trace: requests, time span, input length mean/p50/\n"
              "p99/max, distinct block ids and the infinite-cache token hit ratio (formulas in\n"
              "traces/README.md). FILE: a trace file, or a directory of *.json/*.jsonl/*.csv/*.lcs "
              "files;\n"
              "several files are merged in arrival order, each with its own block-id namespace.",
              visible,
              {"kvlanes trace stats traces/mooncake_excerpt.jsonl",
               "kvlanes trace stats traces/kvtester --json stats.json"});
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
  if (files.empty()) {
    std::cerr << name << ": no trace file given\n";
    usage(std::cerr);
    return 2;
  }

  std::string format_from = "--format";
  try {
    ApplyTraceStatsSets(sets, opt, format, format_from);
    std::optional<TraceFormat> fmt;
    if (!format.empty()) {
      try {
        fmt = ParseTraceFormat(format);
      } catch (const InputError& e) {  // named by the option it came from
        throw InputError("", 0, format_from, e.message());
      }
    }
    std::vector<OutputOption> inputs;
    for (const std::string& f : files) inputs.push_back({"FILE", f});
    CheckDistinctOutputs({{"--json", json_path}}, inputs);
    const Trace trace = LoadTrace(files, fmt, opt);
    const TraceStats stats = ComputeTraceStats(trace);
    std::cout << "trace: " << files.front() << (files.size() > 1 ? " (and others)" : "")
              << ", format " << TraceFormatName(trace.format) << "\n";
    PrintTraceStats(stats, std::cout);
    if (!json_path.empty()) {
      WriteFileAtomically(json_path, TraceStatsToJson(stats).dump(2) + "\n");
    }
  } catch (const InputError& e) {
    std::cerr << name << ": " << e.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace kvlanes::cli

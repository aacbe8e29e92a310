// Command-line parsing shared by the subcommands.
#pragma once

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "io/input_error.h"
#include "io/name_table.h"
#include "io/output_file.h"
#include "sim/predict/plan.h"

namespace kvlanes::cli {

// The long option of `desc` closest to `given` ("--trce" -> "--trace"), or "" when none is a
// plausible typo (ClosestName's rule, the one every "did you mean" of the project follows).
inline std::string ClosestOption(const std::string& given,
                                 const boost::program_options::options_description& desc) {
  std::string bare = given.substr(given.find_first_not_of('-') == std::string::npos
                                      ? given.size()
                                      : given.find_first_not_of('-'));
  bare = bare.substr(0, bare.find('='));
  std::vector<std::string> names;
  for (const auto& o : desc.options())
    if (!o->long_name().empty()) names.push_back(o->long_name());
  std::vector<std::string_view> views(names.begin(), names.end());
  const std::string close = ClosestName(bare, views);
  return close.empty() ? close : "--" + close;
}

// The message of a command-line error, with "; did you mean --x?" for a mistyped option.
inline std::string UsageErrorLine(const std::string& command,
                                  const boost::program_options::error& e,
                                  const boost::program_options::options_description& desc) {
  std::string line = command + ": " + e.what();
  if (const auto* u = dynamic_cast<const boost::program_options::unknown_option*>(&e)) {
    const std::string close = ClosestOption(u->get_option_name(), desc);
    if (!close.empty()) line += "; did you mean " + close + "?";
  }
  return line;
}

// A command-line error of `command` on stderr, with a pointer to --help. The caller exits with 2.
inline void ReportUsageError(const std::string& command, const boost::program_options::error& e,
                             const boost::program_options::options_description& desc) {
  std::fprintf(stderr, "%s\n(see %s --help)\n", UsageErrorLine(command, e, desc).c_str(),
               command.c_str());
}

// Refuses two of this command's output options that name one output, or an output that names
// one of the files of its input options `inputs` (a string or a list each), before any work
// (CheckDistinctOutputs). A CSV option also names its context file, "<csv>.context.json".
inline void CheckOutputOptions(const boost::program_options::variables_map& vm,
                               std::initializer_list<const char*> options,
                               std::initializer_list<const char*> inputs = {}) {
  std::vector<OutputOption> ins;
  for (const char* o : inputs) {
    if (!vm.count(o)) continue;
    const boost::any& v = vm[o].value();
    if (const auto* one = boost::any_cast<std::string>(&v))
      ins.push_back({std::string("--") + o, *one});
    if (const auto* many = boost::any_cast<std::vector<std::string>>(&v))
      for (const std::string& p : *many) ins.push_back({std::string("--") + o, p});
  }
  std::vector<OutputOption> outs;
  for (const char* o : options) {
    if (!vm.count(o)) continue;
    const std::string path = vm[o].as<std::string>();
    outs.push_back({std::string("--") + o, path});
    if (std::string_view(o).ends_with("csv") && path != "-")
      outs.push_back({std::string("--") + o + " (its context file)", path + ".context.json"});
  }
  CheckDistinctOutputs(outs, ins);
}

// Boost keeps an argument that no positional description claims under an empty key, and
// store() drops it silently (`calibrate --sweep zzz` ran the whole standard recipe, `check ...
// zzz` gave a verdict): refused here, naming it.
inline void RefuseStrayArguments(const boost::program_options::parsed_options& parsed) {
  for (const auto& o : parsed.options)
    if (o.string_key.empty() && o.position_key >= 0)
      throw boost::program_options::error(
          "unexpected argument '" + (o.original_tokens.empty() ? "" : o.original_tokens[0]) +
          "': this command takes no positional arguments (a value goes after its option)");
}

// Parses argv[1..] into vm (positional arguments per `pos`, may be null: the command takes
// none). On a usage error prints it with a pointer to --help and returns false (the caller
// exits with 2).
inline bool ParseArgs(int argc, const char* const* argv,
                      const boost::program_options::options_description& desc,
                      const boost::program_options::positional_options_description* pos,
                      boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  try {
    po::command_line_parser parser(argc, argv);
    parser.options(desc);
    if (pos) parser.positional(*pos);
    const po::parsed_options parsed = parser.run();
    RefuseStrayArguments(parsed);
    po::store(parsed, vm);
    po::notify(vm);
    return true;
  } catch (const po::error& e) {
    ReportUsageError(argv[0], e, desc);
    return false;
  }
}

// Whether output option `name` of vm writes to standard output ("-" or /dev/stdout).
inline bool WritesToStdout(const boost::program_options::variables_map& vm, const char* name) {
  if (!vm.count(name)) return false;
  const std::string& p = vm[name].as<std::string>();
  return p == "-" || p == "/dev/stdout";
}

// Where a command's console summary goes: standard output, unless one of the output options
// `outputs` writes its data there (`--json -`), then standard error, so that the data stays
// whole for the pipe it goes to.
inline FILE* SummaryStream(const boost::program_options::variables_map& vm,
                           std::initializer_list<const char*> outputs) {
  for (const char* o : outputs)
    if (WritesToStdout(vm, o)) return stderr;
  return stdout;
}

// The one layout of every command's --help: "usage:" line(s), what the command does, its
// options, then "examples:" (commands that run as written from the repository root), then
// `after` (lists of policies or config keys). `usage` and `about` end without a newline.
inline void PrintHelp(std::ostream& out, const std::string& usage, const std::string& about,
                      const boost::program_options::options_description& desc,
                      std::initializer_list<const char*> examples, const std::string& after = "") {
  out << "usage: " << usage << "\n\n" << about << "\n\n" << desc << "\nexamples:\n";
  for (const char* e : examples) out << "  " << e << "\n";
  if (!after.empty()) out << "\n" << after;
}

// Keeps replica `n`'s requests and passes of a serving-mode plan (option --replica of exec and
// check): each replica is its own CP group with its own slots, so its records alone are a complete
// plan (their request numbers count within it). Throws InputError naming --replica.
inline void SelectReplica(PlanFile& plan, int64_t n, const std::string& source) {
  std::vector<RequestPlan>& requests = plan.requests;
  if (n < 0) throw InputError("", 0, "--replica", "must be >= 0, got " + std::to_string(n));
  bool any_replica = false;
  std::vector<RequestPlan> kept;
  for (RequestPlan& p : requests) {
    any_replica |= p.replica >= 0;
    if (p.replica == n) kept.push_back(std::move(p));
  }
  if (!any_replica)
    throw InputError(source, 0, "--replica",
                     "the plan has no replica fields (written in sequential mode)");
  if (kept.empty())
    throw InputError(source, 0, "--replica", "no request of replica " + std::to_string(n));
  requests = std::move(kept);
  std::erase_if(plan.passes, [n](const PlanPass& p) { return p.replica != n; });
}

// The replicas a plan's records name, ascending (empty for a sequential-mode plan).
inline std::vector<int64_t> PlanReplicas(const std::vector<RequestPlan>& requests) {
  std::vector<int64_t> r;
  for (const RequestPlan& p : requests)
    if (p.replica >= 0 && std::find(r.begin(), r.end(), p.replica) == r.end())
      r.push_back(p.replica);
  std::sort(r.begin(), r.end());
  return r;
}

// "0,1,3" -> {0, 1, 3} (option --devices). Throws InputError naming --devices otherwise.
inline std::vector<int> ParseDevices(const std::string& s) {
  std::vector<int> d;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
      throw InputError("", 0, "--devices",
                       "'" + s + "': expected a comma-separated list of GPU indices");
    d.push_back(std::stoi(item));
  }
  return d;
}

// Longest wait any timeout option may ask for: a week. A wait longer than that (or an infinite
// or NaN one) would never time a hung rank out, so it is bad input, not a setting.
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;

// A number as the user would write it ("1e+300", "nan", "-1"), for messages.
inline std::string OptionNumber(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// The value of a timeout option in seconds: finite, > 0 and at most kMaxTimeoutS; 0 too when
// `zero_means_never` (the option's documented "no limit").
inline double TimeoutOption(const boost::program_options::variables_map& vm,
                            const std::string& name, bool zero_means_never = false) {
  const double t = vm[name].as<double>();
  if (zero_means_never && t == 0) return t;
  if (!std::isfinite(t) || !(t > 0) || t > kMaxTimeoutS)
    throw InputError("", 0, "--" + name,
                     "must be a finite number of seconds in (0, " +
                         std::to_string(static_cast<int64_t>(kMaxTimeoutS)) + "]" +
                         (zero_means_never ? " or 0 (no limit)" : "") + ", got " + OptionNumber(t));
  return t;
}

// A scale factor option: finite and >= 0.
inline double ScaleOption(const boost::program_options::variables_map& vm,
                          const std::string& name) {
  const double x = vm[name].as<double>();
  if (!std::isfinite(x) || x < 0)
    throw InputError("", 0, "--" + name, "must be a finite number >= 0, got " + OptionNumber(x));
  return x;
}

}  // namespace kvlanes::cli

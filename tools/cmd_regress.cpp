// kvlanes regress record | check | conform: policy regression tests on the user's own traces
// and configs (docs/policies.md, "Pinning a policy with regress" and "Regress in CI").
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <set>
#include <thread>

#include "driver/regress_run.h"
#include "driver/run_grid.h"
#include "io/input_error.h"
#include "io/output_file.h"
#include "policies/registry.h"
#include "sim/regress/conformance.h"
#include "sim/regress/golden.h"
#include "tools/cli_options.h"
#include "tools/commands.h"

namespace po = boost::program_options;

namespace kvlanes::cli {

namespace {

using regress::Json;

void AddCommonOptions(po::options_description& desc) {
  desc.add_options()("suite", po::value<std::string>(), "the suite file (YAML; also positional)")(
      "jobs,j", po::value<int>(), "threads (default: hardware threads)")(
      "quiet,q", po::bool_switch(), "print only errors and moved metrics")("help,h", "this help");
}

const char* const kSuiteHelp =
    "A suite file lists cases; trace, config and profile paths are relative to it:\n"
    "  cases:\n"
    "    - name: conv\n"
    "      traces: [traces/mooncake_excerpt.jsonl]\n"
    "      config: config/default.yaml          # optional\n"
    "      profile: config/profiles/h200.yaml   # optional; needed by predicted.* metrics\n"
    "      set: {cache.cp_size: 4, cache.device_pages_per_lane: 6000}\n"
    "      policies: [lanes, lru]               # or `all`\n"
    "      metrics: {token_hit_ratio: {abs: 0.0001}, evicted_pages: {}}\n"
    "Top-level `policies:` and `metrics:` apply to cases without their own. A tolerance is {}\n"
    "(exact), {abs: X}, {rel: X} or both (holds when |now - baseline| <= max(abs, rel x\n"
    "|baseline|)). Exit status: 0 all hold, 1 a metric moved, 2 bad input.\n";

// Parses argv; on --help prints `usage` and the options. Returns -1 to go on, else the exit code.
int Parse(int argc, const char* const* argv, po::options_description& desc, const char* usage,
          std::initializer_list<const char*> examples, po::variables_map& vm) {
  po::positional_options_description pos;
  pos.add("suite", 1);
  if (!ParseArgs(argc, argv, desc, &pos, vm)) return 2;
  if (vm.count("help")) {
    std::string about = kSuiteHelp;
    about += "metrics:";
    for (const std::string& m : regress::MetricNames()) about += " " + m;
    PrintHelp(std::cout, std::string(argv[0]) + " " + usage, about, desc, examples,
              "policies:\n" + PoliciesHelp());
    return 0;
  }
  if (!vm.count("suite")) {
    std::fprintf(stderr, "%s: a suite file is required\n(see %s --help)\n", argv[0], argv[0]);
    return 2;
  }
  return -1;
}

int Threads(const po::variables_map& vm) {
  const int t = vm.count("jobs") ? vm["jobs"].as<int>()
                                 : static_cast<int>(std::thread::hardware_concurrency());
  if (t < 1) throw InputError("", 0, "--jobs", "must be >= 1");
  return t;
}

// Refuses output `option` when it names a file the suite reads: a case's trace, config file or
// hardware profile (CheckOutputOptions sees only the suite file itself). Before any replay.
void CheckOutputAgainstSuite(const po::variables_map& vm, const char* option,
                             const regress::Suite& suite) {
  if (!vm.count(option)) return;
  std::vector<OutputOption> ins;
  std::set<std::string> seen;
  auto add = [&](const std::string& what, const std::string& p) {
    if (!p.empty() && seen.insert(p).second) ins.push_back({what, p});
  };
  for (const regress::SuiteCase& c : suite.cases) {
    for (const std::string& t : c.traces) add("case '" + c.name + "' traces", t);
    add("case '" + c.name + "' profile", c.config.hardware.profile);
    for (const auto& [key, origin] : c.config.origins)
      add("case '" + c.name + "' config", origin.file);
  }
  CheckDistinctOutputs({{std::string("--") + option, vm[option].as<std::string>()}}, ins);
}

// The golden leaves of every run of the suite.
std::vector<Json> RunLeaves(const regress::Suite& suite, const std::vector<regress::SuiteRun>& runs,
                            int threads) {
  const std::vector<Json> reports = driver::RunSuite(suite, threads, false, nullptr);
  std::vector<Json> leaves;
  for (size_t i = 0; i < runs.size(); ++i)
    leaves.push_back(regress::EntryLeaves(suite.cases[runs[i].case_index], reports[i]));
  return leaves;
}

}  // namespace

int CmdRegRecord(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddCommonOptions(desc);
  desc.add_options()("out,o", po::value<std::string>(), "the golden file to write (JSON)");
  po::variables_map vm;
  if (const int rc =
          Parse(argc, argv, desc, "SUITE --out GOLDEN [-j N]",
                {"kvlanes regress record tests/policies/golden_suite.yaml --out golden.json"}, vm);
      rc >= 0)
    return rc;
  try {
    if (!vm.count("out")) throw InputError("", 0, "--out", "required: the golden file to write");
    CheckOutputOptions(vm, {"out"}, {"suite"});
    const regress::Suite suite =
        regress::LoadSuite(vm["suite"].as<std::string>(), driver::RegistryCatalog());
    CheckOutputAgainstSuite(vm, "out", suite);
    const int threads = Threads(vm);
    const auto runs = regress::SuiteRuns(suite);
    const auto leaves = RunLeaves(suite, runs, threads);
    const std::string out = vm["out"].as<std::string>();
    WriteFileAtomically(out, regress::GoldenJson(suite, runs, leaves).dump(1) + "\n");
    size_t n = 0;
    for (const Json& l : leaves) n += l.size();
    if (!vm["quiet"].as<bool>())
      std::printf("regress record: %zu runs, %zu metrics written to %s\n", runs.size(), n,
                  out.c_str());
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

int CmdRegCheck(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddCommonOptions(desc);
  desc.add_options()("golden,g", po::value<std::string>(), "the golden file (from record)")(
      "junit", po::value<std::string>(), "also write JUnit XML (one testcase per run) here")(
      "update", po::bool_switch(),
      "rewrite the moved entries of the golden file with the new values (and say which); "
      "exit 0");
  po::variables_map vm;
  if (const int rc =
          Parse(argc, argv, desc, "SUITE --golden GOLDEN [--junit FILE] [--update] [-j N]",
                {"kvlanes regress check tests/policies/golden_suite.yaml --golden "
                 "tests/policies/golden/golden_metrics.json",
                 "kvlanes regress check tests/policies/golden_suite.yaml --golden "
                 "tests/policies/golden/golden_metrics.json --junit regress.xml"},
                vm);
      rc >= 0)
    return rc;
  try {
    if (!vm.count("golden"))
      throw InputError("", 0, "--golden", "required: the golden file written by record");
    CheckOutputOptions(vm, {"junit"}, {"suite", "golden"});
    if (vm["update"].as<bool>()) CheckOutputOptions(vm, {"golden"}, {"suite"});
    const regress::Suite suite =
        regress::LoadSuite(vm["suite"].as<std::string>(), driver::RegistryCatalog());
    CheckOutputAgainstSuite(vm, "junit", suite);
    if (vm["update"].as<bool>()) CheckOutputAgainstSuite(vm, "golden", suite);
    const std::string golden_path = vm["golden"].as<std::string>();
    const regress::Golden golden = regress::LoadGolden(golden_path);
    const int threads = Threads(vm);
    const bool quiet = vm["quiet"].as<bool>();
    const auto runs = regress::SuiteRuns(suite);
    const auto leaves = RunLeaves(suite, runs, threads);
    const regress::CheckResult result = regress::Compare(suite, runs, leaves, golden);
    if (vm.count("junit"))
      WriteFileAtomically(vm["junit"].as<std::string>(), regress::JUnitXml(suite, runs, result));
    if (!quiet) {
      const Json& p = golden.provenance;
      const auto field = [&](const char* k) {
        return p.contains(k) && p[k].is_string() ? p[k].get<std::string>() : std::string("?");
      };
      std::printf("regress check: %s against %s (recorded by kvlanes %s, commit %s)\n",
                  suite.path.c_str(), golden_path.c_str(), field("kvlanes_version").c_str(),
                  field("commit").c_str());
      if (field("suite_fnv1a64") != suite.hash)
        std::printf(
            "note: the suite changed since the golden file was recorded (fnv1a64 %s, now "
            "%s); tolerances are the suite's\n",
            field("suite_fnv1a64").c_str(), suite.hash.c_str());
      for (const std::string& s : result.stale)
        std::printf("note: %s is in the golden file but not pinned by the suite\n", s.c_str());
    }
    if (result.moved.empty()) {
      if (!quiet) std::printf("all %zu metrics of %zu runs hold\n", result.leaves, result.entries);
      if (vm["update"].as<bool>() && !result.stale.empty()) {
        WriteFileAtomically(
            golden_path,
            regress::UpdatedGolden(suite, runs, leaves, golden, result).dump(1) + "\n");
        std::printf("updated %s: dropped %zu stale entries or metrics\n", golden_path.c_str(),
                    result.stale.size());
      }
      return 0;
    }
    std::set<std::string> moved_runs;
    for (const auto& m : result.moved) moved_runs.insert(m.entry);
    std::printf("%s%zu of %zu metrics moved, in %zu of %zu runs\n",
                regress::MovedTable(result).c_str(), result.moved.size(), result.leaves,
                moved_runs.size(), result.entries);
    if (!vm["update"].as<bool>()) return 1;
    WriteFileAtomically(golden_path,
                        regress::UpdatedGolden(suite, runs, leaves, golden, result).dump(1) + "\n");
    std::printf("updated %s: rewrote the %zu moved metrics above", golden_path.c_str(),
                result.moved.size());
    if (!result.stale.empty()) std::printf(", dropped %zu stale", result.stale.size());
    std::printf("; every other baseline kept\n");
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

int CmdRegConform(int argc, const char* const* argv) {
  po::options_description desc("options");
  AddCommonOptions(desc);
  desc.add_options()("policies", po::value<std::string>(),
                     "check these policies on every case (default: each case's own)");
  po::variables_map vm;
  if (const int rc = Parse(argc, argv, desc, "SUITE [--policies a,b] [-j N]",
                           {"kvlanes regress conform tests/policies/golden_suite.yaml",
                            "kvlanes regress conform tests/policies/golden_suite.yaml --policies "
                            "lanes,lru"},
                           vm);
      rc >= 0)
    return rc;
  try {
    regress::Suite suite =
        regress::LoadSuite(vm["suite"].as<std::string>(), driver::RegistryCatalog());
    if (vm.count("policies")) {
      const auto names = driver::SplitList(vm["policies"].as<std::string>(), "--policies");
      for (const auto& n : names) CheckPolicyName(n, "--policies");
      for (auto& c : suite.cases) c.policies = names;
    }
    const int threads = Threads(vm);
    const auto runs = regress::SuiteRuns(suite);
    // Once with the engine's structural check after every request (aborts on a broken
    // invariant), once without: the reports must be byte-identical (determinism; the check
    // must not change a decision).
    std::vector<size_t> requests;
    const auto checked = driver::RunSuite(suite, threads, true, nullptr, &requests);
    const auto plain = driver::RunSuite(suite, threads, false, nullptr);
    size_t failed = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto& c = suite.cases[runs[i].case_index];
      std::vector<std::string> v =
          regress::ReportViolations(checked[i], c.config, requests[runs[i].case_index]);
      if (checked[i].dump() != plain[i].dump())
        v.push_back("the report differs between two runs of the same inputs");
      if (v.empty()) continue;
      ++failed;
      for (const auto& s : v) std::printf("%s: %s\n", runs[i].entry.c_str(), s.c_str());
    }
    if (!vm["quiet"].as<bool>() || failed)
      std::printf("regress conform: %zu of %zu runs keep every invariant\n", runs.size() - failed,
                  runs.size());
    return failed ? 1 : 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 2;
  }
}

}  // namespace kvlanes::cli

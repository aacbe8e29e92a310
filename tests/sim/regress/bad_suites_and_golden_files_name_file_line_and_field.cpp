// Bad suite and golden files are refused with the file, the line and the field at fault
// (`kvlanes regress` exits 2 on them; tests/tools/regress_commands.py checks the exit codes).
#include <doctest/doctest.h>

#include <fstream>

#include "io/input_error.h"
#include "sim/regress/golden.h"
#include "tests/sim/regress/suite_files.h"

namespace kvlanes::test {

namespace {

// The message LoadSuite throws for `text` (from the file name on), or "" when it loads.
doctest::String SuiteError(const std::string& text) {
  const std::string path = WriteSuite("bad.yaml", text);
  try {
    regress::LoadSuite(path, TwoPolicies());
  } catch (const InputError& e) {
    return std::string(e.what()).substr(path.size() - std::string("bad.yaml").size()).c_str();
  }
  return "";
}

std::string Case(const std::string& rest) {
  return "cases:\n  - name: c\n    traces: [" + ExcerptTrace() + "]\n" + rest;
}

}  // namespace

TEST_CASE("a good suite loads and resolves its paths against its own folder") {
  std::filesystem::create_directories(TempDir() + "/sub");
  std::filesystem::copy_file(ExcerptTrace(), TempDir() + "/sub/t.jsonl",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(TempDir() + "/sub/cfg.yaml") << "cache:\n  cp_size: 2\n";
  const regress::Suite s =
      regress::LoadSuite(WriteSuite("sub/good.yaml",
                                    "metrics: {token_hit_ratio: {abs: 0.001}}\n"
                                    "policies: all\n"
                                    "cases:\n"
                                    "  - name: a\n"
                                    "    traces: t.jsonl\n"
                                    "    config: cfg.yaml\n"
                                    "    set: {cache.device_pages_per_lane: 6000}\n"
                                    "  - name: b\n"
                                    "    traces: [t.jsonl]\n"
                                    "    policies: [beta]\n"
                                    "    metrics: {evicted_pages: {}, host_writes.pages: {}}\n"),
                         TwoPolicies());
  REQUIRE(s.cases.size() == 2);
  CHECK(s.cases[0].traces[0] == TempDir() + "/sub/t.jsonl");
  CHECK(s.cases[0].config.cache.cp_size == 2);
  CHECK(s.cases[0].config.cache.device_pages_per_lane == 6000);
  CHECK(s.cases[0].policies == std::vector<std::string>{"alpha", "beta"});
  CHECK(s.cases[0].metrics.size() == 1);
  CHECK(s.cases[0].metrics[0].tolerance.abs == 0.001);
  CHECK(s.cases[1].policies == std::vector<std::string>{"beta"});
  REQUIRE(s.cases[1].metrics.size() == 2);
  CHECK(s.cases[1].metrics[0].metrics.size() == 2);  // evicted_pages: device and host
  CHECK(s.cases[1].metrics[0].line == 11);
  CHECK(s.cases[1].line == 8);
  CHECK(regress::SuiteRuns(s).size() == 3);
  CHECK(s.hash.size() == 16);
}

TEST_CASE("bad suites name the line and the field") {
  // An unknown metric, with the closest name suggested.
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {evicted_page: {}}\n")) ==
        doctest::Contains("bad.yaml:5: cases[0] (c).metrics.evicted_page: unknown metric "
                          "'evicted_page'"));
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {evicted_page: {}}\n")) ==
        doctest::Contains("did you mean 'evicted_pages'?"));
  // A missing trace.
  CHECK(SuiteError("cases:\n  - name: c\n    policies: [alpha]\n    metrics: {requests: {}}\n"
                   "    traces: [nowhere.jsonl]\n") ==
        doctest::Contains("bad.yaml:5: cases[0] (c).traces[0]: no such trace 'nowhere.jsonl'"));
  // A negative tolerance, and one that is not a number.
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics:\n      requests: {}\n"
                        "      token_hit_ratio: {rel: -0.01}\n")) ==
        doctest::Contains("bad.yaml:7: cases[0] (c).metrics.token_hit_ratio.rel: a tolerance "
                          "must be a finite number >= 0"));
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {requests: {abs: lots}}\n")) ==
        doctest::Contains("bad.yaml:5: cases[0] (c).metrics.requests.abs: expected a number"));
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {requests: {abs: .inf}}\n")) ==
        doctest::Contains("must be a finite number >= 0"));
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {requests: {tol: 1}}\n")) ==
        doctest::Contains("bad.yaml:5: cases[0] (c).metrics.requests.tol: unknown key 'tol'"));
  // Unknown keys at each level.
  CHECK(SuiteError("casse: []\n") == doctest::Contains("bad.yaml:1: casse: unknown key 'casse'"));
  CHECK(SuiteError(Case("    polices: [alpha]\n")) ==
        doctest::Contains("bad.yaml:4: cases[0].polices: unknown key 'polices'"));
  // A prediction without a profile.
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {predicted.total_s: {}}\n")) ==
        doctest::Contains("bad.yaml:5: cases[0] (c).metrics.predicted.total_s: "
                          "predicted.total_s is a prediction: the case needs a hardware profile"));
  // Policies: unknown, twice, none.
  CHECK(SuiteError(Case("    policies: [alpha, gamma]\n    metrics: {requests: {}}\n")) ==
        doctest::Contains("bad.yaml:4: cases[0] (c).policies[1]: unknown policy 'gamma'"));
  CHECK(SuiteError(Case("    policies: [alpha, alpha]\n    metrics: {requests: {}}\n")) ==
        doctest::Contains("bad.yaml:4: cases[0] (c).policies[1]: policy 'alpha' is listed twice"));
  CHECK(SuiteError(Case("    metrics: {requests: {}}\n")) ==
        doctest::Contains("cases[0] (c).policies: missing"));
  // A config value the config refuses, at its key's line.
  CHECK(SuiteError(Case("    set:\n      cache.cp_size: many\n    policies: [alpha]\n"
                        "    metrics: {requests: {}}\n")) ==
        doctest::Contains("bad.yaml:5: cases[0] (c).set.cache.cp_size: expected an integer"));
  CHECK(SuiteError(Case("    set: {cache.cp_size: 0}\n    policies: [alpha]\n"
                        "    metrics: {requests: {}}\n")) ==
        doctest::Contains("bad.yaml:2: cases[0] (c): --set cache.cp_size: must be in 1..4096"));
  // A metric pinned twice (through its group), and two cases of one name.
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {evicted_pages: {}, "
                        "evicted_pages.host: {abs: 1}}\n")) ==
        doctest::Contains("pins evicted_pages.host again (already by 'evicted_pages' at line 5)"));
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {requests: {}}\n") +
                   "  - name: c\n    traces: [" + ExcerptTrace() +
                   "]\n    policies: [alpha]\n    metrics: {requests: {}}\n") ==
        doctest::Contains("bad.yaml:6: cases[1].name: 'c' is already the name of the case at "
                          "line 2"));
  CHECK(SuiteError("cases: [\n") == doctest::Contains("YAML syntax error"));
  CHECK(SuiteError(Case("    policies: [alpha]\n    metrics: {requests: {}}\n")).size() == 0);
}

TEST_CASE("bad golden files name the line and the field") {
  const auto error = [](const std::string& text) {
    const std::string path = WriteSuite("golden.json", text);
    try {
      regress::LoadGolden(path);
    } catch (const InputError& e) {
      return doctest::String(e.what());
    }
    return doctest::String();
  };
  CHECK(error("{\"regress_version\": 2, \"provenance\": {}, \"entries\": {}}") ==
        doctest::Contains("golden.json:1: regress_version: golden files of version 2"));
  CHECK(error("{\"regress_version\": 1,\n \"provenance\": {},\n \"entries\": {\"c/a\": "
              "{\"requests\": \"many\"}}}") ==
        doctest::Contains("golden.json:3: entries.c/a.requests: expected a number"));
  CHECK(error("{\"regress_version\": 1,\n \"provenance\": {}\n \"entries\": {}}") ==
        doctest::Contains("golden.json:3"));
  CHECK(error("{\"regress_version\": 1, \"provenance\": {}, \"entries\": {}}").size() == 0);
}

}  // namespace kvlanes::test

// Comparing a rerun with a golden file (sim/regress/golden.h) on hand-made leaves: which leaves
// moved, per-name counts absent on one side, new and stale entries, --update, the table, JUnit.
#include <doctest/doctest.h>

#include "sim/regress/golden.h"
#include "tests/sim/regress/suite_files.h"

namespace kvlanes::test {

using regress::Json;

namespace {

regress::Suite HandSuite() {
  return regress::LoadSuite(WriteSuite("hand.yaml",
                                       "cases:\n"
                                       "  - name: c\n"
                                       "    traces: [" +
                                           ExcerptTrace() +
                                           "]\n"
                                           "    policies: [alpha, beta]\n"
                                           "    metrics:\n"
                                           "      token_hit_ratio: {abs: 0.001}\n"
                                           "      evicted_pages: {}\n"
                                           "      gather.method_counts: {}\n"),
                            TwoPolicies());
}

Json Leaves(double ratio, int64_t device, int64_t host, Json methods) {
  Json l = Json::object();
  l["token_hit_ratio"] = ratio;
  l["evicted_pages.device"] = device;
  l["evicted_pages.host"] = host;
  for (const auto& [k, v] : methods.items()) l["gather.method_counts." + k] = v;
  return l;
}

regress::Golden AsGolden(const Json& g) {
  regress::Golden out;
  out.path = "golden.json";
  out.provenance = g["provenance"];
  out.entries = g["entries"];
  return out;
}

}  // namespace

TEST_CASE("a rerun equal to its record holds, every leaf counted") {
  const regress::Suite s = HandSuite();
  const auto runs = regress::SuiteRuns(s);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].entry == "c/alpha");
  CHECK(runs[1].entry == "c/beta");
  const std::vector<Json> leaves = {Leaves(0.5, 10, 0, {{"packed", 3}}),
                                    Leaves(0.4, 12, 1, {{"packed", 2}, {"p2p", 1}})};
  const Json g = regress::GoldenJson(s, runs, leaves);
  CHECK(g["provenance"]["suite_fnv1a64"] == s.hash);
  const regress::CheckResult r = regress::Compare(s, runs, leaves, AsGolden(g));
  CHECK(r.entries == 2);
  CHECK(r.leaves == 9);
  CHECK(r.moved.empty());
  CHECK(r.stale.empty());
}

TEST_CASE("moved leaves are named with baseline, now and tolerance; the rest is kept") {
  const regress::Suite s = HandSuite();
  const auto runs = regress::SuiteRuns(s);
  const std::vector<Json> base = {Leaves(0.5, 10, 0, {{"packed", 3}}),
                                  Leaves(0.4, 12, 1, {{"packed", 2}, {"p2p", 1}})};
  const regress::Golden golden = AsGolden(regress::GoldenJson(s, runs, base));
  // alpha: ratio within 0.001, one more device eviction, a new gather method used once;
  // beta: p2p no longer used (absent = 0, moved), a zero-count method appears (holds).
  const std::vector<Json> now = {Leaves(0.5009, 11, 0, {{"packed", 3}, {"dense", 1}}),
                                 Leaves(0.4, 12, 1, {{"packed", 2}, {"zigzag", 0}})};
  const regress::CheckResult r = regress::Compare(s, runs, now, golden);
  REQUIRE(r.moved.size() == 3);
  CHECK(r.moved[0].entry == "c/alpha");
  CHECK(r.moved[0].leaf == "evicted_pages.device");
  CHECK(r.moved[0].baseline == 10);
  CHECK(r.moved[0].now == 11);
  CHECK(r.moved[0].tolerance.Exact());
  CHECK(r.moved[1].leaf == "gather.method_counts.dense");
  CHECK(r.moved[1].baseline == 0);
  CHECK(r.moved[1].now == 1);
  CHECK(r.moved[2].entry == "c/beta");
  CHECK(r.moved[2].leaf == "gather.method_counts.p2p");
  CHECK(r.moved[2].baseline == 1);
  CHECK(r.moved[2].now == 0);

  const std::string table = regress::MovedTable(r);
  CHECK(table.find("entry") == 0);
  CHECK(table.find("c/alpha  evicted_pages.device") != std::string::npos);
  CHECK(table.find("+1") != std::string::npos);
  CHECK(table.find("c/beta") != std::string::npos);

  const std::string xml = regress::JUnitXml(s, runs, r);
  CHECK(xml.find("tests=\"2\" failures=\"2\"") != std::string::npos);
  CHECK(xml.find("<failure message=\"2 metrics moved\"") != std::string::npos);
  CHECK(xml.find("<failure message=\"1 metric moved\"") != std::string::npos);

  // --update: the three moved leaves take their new values, the ratio keeps its baseline
  // (0.5, not 0.5009: it held), the zero-count method is not added.
  const Json u = regress::UpdatedGolden(s, runs, now, golden, r);
  CHECK(u["entries"]["c/alpha"]["token_hit_ratio"] == 0.5);
  CHECK(u["entries"]["c/alpha"]["evicted_pages.device"] == 11);
  CHECK(u["entries"]["c/alpha"]["gather.method_counts.dense"] == 1);
  CHECK_FALSE(u["entries"]["c/beta"].contains("gather.method_counts.p2p"));
  CHECK_FALSE(u["entries"]["c/beta"].contains("gather.method_counts.zigzag"));
  CHECK(u["entries"]["c/beta"]["gather.method_counts.packed"] == 2);
  // ... and the rerun then holds against it.
  CHECK(regress::Compare(s, runs, now, AsGolden(u)).moved.empty());
}

TEST_CASE("a run without a baseline moves; golden entries the suite dropped are stale") {
  const regress::Suite s = HandSuite();
  const auto runs = regress::SuiteRuns(s);
  const std::vector<Json> leaves = {Leaves(0.5, 10, 0, {}), Leaves(0.4, 12, 1, {})};
  Json g = regress::GoldenJson(s, runs, leaves);
  g["entries"].erase("c/beta");
  g["entries"]["old/alpha"] = Leaves(0.1, 1, 1, {});
  g["entries"]["c/alpha"]["bypassed_pages"] = 7;  // no longer pinned
  const regress::CheckResult r = regress::Compare(s, runs, leaves, AsGolden(g));
  REQUIRE(r.moved.size() == 3);  // beta's three leaves
  for (const auto& m : r.moved) {
    CHECK(m.entry == "c/beta");
    CHECK(m.baseline.is_null());
  }
  CHECK(regress::MovedTable(r).find("not recorded") != std::string::npos);
  REQUIRE(r.stale.size() == 2);
  CHECK(r.stale[0] == "c/alpha bypassed_pages");
  CHECK(r.stale[1] == "old/alpha");
  const Json u = regress::UpdatedGolden(s, runs, leaves, AsGolden(g), r);
  CHECK_FALSE(u["entries"].contains("old/alpha"));
  CHECK_FALSE(u["entries"]["c/alpha"].contains("bypassed_pages"));
  CHECK(u["entries"]["c/beta"] == leaves[1]);
}

TEST_CASE("a tolerance loosened in the suite applies without a new baseline") {
  const regress::Suite s = HandSuite();
  const auto runs = regress::SuiteRuns(s);
  const regress::Golden golden =
      AsGolden(regress::GoldenJson(s, runs, {Leaves(0.5, 10, 0, {}), Leaves(0.4, 12, 1, {})}));
  const std::vector<Json> now = {Leaves(0.502, 10, 0, {}), Leaves(0.4, 12, 1, {})};
  CHECK(regress::Compare(s, runs, now, golden).moved.size() == 1);
  const regress::Suite loose =
      regress::LoadSuite(WriteSuite("loose.yaml",
                                    "cases:\n"
                                    "  - name: c\n"
                                    "    traces: [" +
                                        ExcerptTrace() +
                                        "]\n"
                                        "    policies: [alpha, beta]\n"
                                        "    metrics:\n"
                                        "      token_hit_ratio: {rel: 0.01}\n"
                                        "      evicted_pages: {}\n"
                                        "      gather.method_counts: {}\n"),
                         TwoPolicies());
  CHECK(loose.hash != s.hash);
  CHECK(regress::Compare(loose, runs, now, golden).moved.empty());
}

}  // namespace kvlanes::test

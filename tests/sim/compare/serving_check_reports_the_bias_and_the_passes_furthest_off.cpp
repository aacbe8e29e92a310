// `kvlanes check` on a serving run reports which way the passes are off (the quartiles of
// measured / predicted per pass, which the APE hides) and the passes furthest off, with their
// tokens and chunks, largest error first; ties keep the passes' order.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/compare/serving_check.h"
#include "tests/approx.h"

namespace kvlanes::test {
namespace {

TEST_CASE("the serving check gives the per-pass bias and the passes furthest off") {
  ServingSchedule s;
  s.pass_s = {1.0, 2.0, 0.5, 4.0, 3.0};
  s.pass_tokens = {100, 2000, 50, 9000, 7000};
  s.pass_chunks = {1, 2, 1, 4, 3};
  s.back_to_back = {true, false, false, true, false};
  s.queue_s = {0.0, 0.5};
  s.ttft_s = {1.0, 3.0};
  std::vector<RequestPlan> requests(2);
  requests[0].request = 7;
  requests[1].request = 9;
  Measured m;
  m.file = "measured.json";
  // measured / predicted 1.1, 1.0, 0.9, 1.05, 1.0: APEs 0.0909, 0, 0.1111, 0.0476, 0
  const double measured[5] = {1.1, 2.0, 0.45, 4.2, 3.0};
  for (int64_t k = 0; k < 5; ++k) m.pass_s[k] = measured[k];
  m.first_token[7] = {0.0, 1.1};
  m.first_token[9] = {0.6, 3.2};
  const ServingCheck c = CheckServing(s, requests, m);
  // sorted ratios 0.9, 1.0, 1.0, 1.05, 1.1: quartiles at ranks 1, 2, 3
  CHECK(c.pass_ratio[0] == kvlanes::test::RelApprox(1.0));
  CHECK(c.pass_ratio[1] == kvlanes::test::RelApprox(1.0));
  CHECK(c.pass_ratio[2] == kvlanes::test::RelApprox(1.05));
  // after a gap: 1.0, 0.9, 1.0 (median 1.0); back to back: 1.1, 1.05 (median 1.075)
  CHECK(c.pass_ratio_by_gap[0].count == 3);
  CHECK(c.pass_ratio_by_gap[0].median == kvlanes::test::RelApprox(1.0));
  CHECK(c.pass_ratio_by_gap[1].count == 2);
  CHECK(c.pass_ratio_by_gap[1].median == kvlanes::test::RelApprox(1.075));
  REQUIRE(c.worst_passes.size() == 5);
  const size_t order[5] = {2, 0, 3, 1, 4};  // passes 1 and 4 tie at 0: their own order
  for (size_t i = 0; i < 5; ++i) CHECK(c.worst_passes[i].index == order[i]);
  CHECK(c.worst_passes[0].tokens == 50);
  CHECK(c.worst_passes[2].chunks == 4);
  CHECK(c.worst_passes[0].measured_s == kvlanes::test::RelApprox(0.45));
  const std::string text = FormatServingCheck(c);
  CHECK(text.find("measured / predicted per pass: q1 1.000, median 1.000, q3 1.050") !=
        std::string::npos);
  CHECK(text.find("pass 2 (50 tokens in 1 chunk): predicted 0.5000 s, measured 0.4500 s, APE "
                  "11.11%") != std::string::npos);
  CHECK(text.find("pass 3 (9000 tokens in 4 chunks)") != std::string::npos);
  const auto j = ServingCheckToJson(c);
  CHECK(j["worst_passes"].size() == 5);
  CHECK(j["worst_passes"][0]["pass"] == 2);
  CHECK(j["pass_ratio"]["q3"].get<double>() == kvlanes::test::RelApprox(1.05));
  CHECK(j["pass_ratio"]["back_to_back"]["passes"] == 2);
  CHECK(text.find("median after an idle gap 1.000 (3 passes), back to back 1.075 (2)") !=
        std::string::npos);
  // A schedule that does not say which passes ran back to back gives no split.
  s.back_to_back.clear();
  const ServingCheck plain = CheckServing(s, requests, m);
  CHECK(plain.pass_ratio_by_gap[0].count + plain.pass_ratio_by_gap[1].count == 0);
  CHECK(FormatServingCheck(plain).find("after an idle gap") == std::string::npos);
}

TEST_CASE("a serving check of more passes than the list keeps the five furthest off") {
  ServingSchedule s;
  std::vector<RequestPlan> requests(1);
  requests[0].request = 0;
  Measured m;
  for (int64_t k = 0; k < 8; ++k) {
    s.pass_s.push_back(1.0);
    s.pass_tokens.push_back(k);
    s.pass_chunks.push_back(1);
    m.pass_s[k] = 1.0 + 0.01 * static_cast<double>(k);  // pass k is k% over
  }
  s.queue_s = {0.0};
  s.ttft_s = {8.0};
  m.first_token[0] = {0.0, 8.0};
  const ServingCheck c = CheckServing(s, requests, m);
  REQUIRE(c.worst_passes.size() == ServingCheck::kWorstPasses);
  CHECK(c.worst_passes.front().index == 7);
  CHECK(c.worst_passes.back().index == 3);
}

}  // namespace
}  // namespace kvlanes::test

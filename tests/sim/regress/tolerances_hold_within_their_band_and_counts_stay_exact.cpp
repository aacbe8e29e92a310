// Tolerance arithmetic on hand-made values (sim/regress/metrics.h): a value holds when
// |now - baseline| <= max(abs, rel x |baseline|); {} is exact, integers compared as integers.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "sim/regress/metrics.h"
#include "tests/approx.h"

namespace kvlanes::test {

using regress::Tolerance;
using J = nlohmann::ordered_json;

TEST_CASE("an exact tolerance holds only the same value") {
  const Tolerance exact;
  CHECK(exact.Exact());
  CHECK(exact.Holds(J(134210), J(134210)));
  CHECK_FALSE(exact.Holds(J(134210), J(134211)));
  CHECK(exact.Holds(J(0.1), J(0.1)));
  CHECK_FALSE(exact.Holds(J(0.1), J(std::nextafter(0.1, 1.0))));
  // Counts beyond 2^53 differ although they are the same double: compared as integers.
  const int64_t big = (int64_t{1} << 53);
  CHECK(static_cast<double>(big) == static_cast<double>(big + 1));
  CHECK_FALSE(exact.Holds(J(big), J(big + 1)));
  CHECK(exact.ToString() == "exact");
}

TEST_CASE("an absolute tolerance is a band of fixed width on both sides") {
  const Tolerance t{0.25, 0};
  CHECK(t.Band(1.0) == 0.25);
  CHECK(t.Band(-1e9) == 0.25);
  CHECK(t.Holds(J(1.0), J(1.25)));
  CHECK(t.Holds(J(1.0), J(0.75)));
  CHECK_FALSE(t.Holds(J(1.0), J(1.2500001)));
  CHECK_FALSE(t.Holds(J(1.0), J(0.7499999)));
  CHECK(t.Holds(J(10), J(10)));  // integers with a tolerance compare as numbers
  CHECK_FALSE(t.Holds(J(10), J(11)));
  CHECK(t.ToString() == "abs 0.25");
}

TEST_CASE("a relative tolerance scales with the baseline's magnitude") {
  const Tolerance t{0, 0.01};
  CHECK(t.Band(200.0) == kvlanes::test::RelApprox(2.0));
  CHECK(t.Band(-200.0) == kvlanes::test::RelApprox(2.0));
  CHECK(t.Holds(J(200.0), J(201.5)));
  CHECK_FALSE(t.Holds(J(200.0), J(202.5)));
  CHECK(t.Holds(J(-200.0), J(-198.5)));
  CHECK_FALSE(t.Holds(J(-200.0), J(-197.5)));
  // A zero baseline leaves no room: relative to nothing is exact.
  CHECK(t.Holds(J(0.0), J(0.0)));
  CHECK_FALSE(t.Holds(J(0.0), J(1e-300)));
  CHECK(t.ToString() == "rel 0.01");
}

TEST_CASE("with both, the wider band wins") {
  const Tolerance t{1.0, 0.01};
  CHECK(t.Band(50.0) == 1.0);                             // abs wider than 0.5
  CHECK(t.Band(500.0) == kvlanes::test::RelApprox(5.0));  // rel wider than 1
  CHECK(t.Holds(J(50.0), J(51.0)));
  CHECK_FALSE(t.Holds(J(50.0), J(51.5)));
  CHECK(t.Holds(J(500.0), J(504.0)));
  CHECK_FALSE(t.Holds(J(500.0), J(506.0)));
  CHECK(t.ToString() == "abs 1 | rel 0.01");
}

TEST_CASE("non-finite values hold only against themselves") {
  const double inf = std::numeric_limits<double>::infinity();
  const Tolerance wide{1e308, 0};
  CHECK(wide.Holds(J(inf), J(inf)));
  CHECK_FALSE(wide.Holds(J(1e308), J(inf)));
  CHECK_FALSE(wide.Holds(J(inf), J(-inf)));
}

}  // namespace kvlanes::test

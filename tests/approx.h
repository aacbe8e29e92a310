// doctest::Approx compares within epsilon x (scale + max |value|) with scale 1, so a time of
// 1e-4 s passes against any value within about 1.2e-5 s of it (10%). RelApprox compares relative
// to the values alone (epsilon x max |value|), and absolutely (within epsilon) against zero.
#pragma once

#include <doctest/doctest.h>

namespace kvlanes::test {

inline doctest::Approx RelApprox(double x) { return doctest::Approx(x).scale(x == 0 ? 1 : 0); }

}  // namespace kvlanes::test

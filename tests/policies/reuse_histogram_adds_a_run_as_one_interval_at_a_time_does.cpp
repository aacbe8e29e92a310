// ReuseHistogram (policies/reuse_histogram.h) adds a run of intervals of one bucket in a few
// steps where no sum rounds; this checks, bit for bit, that every bucket and the total end up as
// adding the intervals one at a time leaves them (each adding 1, then halving everything above
// the limit), over long random runs that halve the histogram often enough for the sums to carry
// fractions down to the last place, and a long run on a bucket as small as a subnormal.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "policies/reuse_histogram.h"

namespace kvlanes::test {
namespace {

// The histogram added one interval at a time.
struct OneAtATime {
  explicit OneAtATime(double limit) : limit(limit) {}
  void Add(int bucket, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
      hist[bucket] += 1;
      total += 1;
      if (total > limit) {
        for (double& x : hist) x *= 0.5;
        total *= 0.5;
      }
    }
  }
  double limit;
  double hist[ReuseHistogram::kBuckets] = {};
  double total = 0;
};

bool SameBits(const ReuseHistogram& h, const OneAtATime& r) {
  for (int b = 0; b < ReuseHistogram::kBuckets; ++b)
    if (std::bit_cast<uint64_t>(h.bucket(b)) != std::bit_cast<uint64_t>(r.hist[b])) return false;
  return std::bit_cast<uint64_t>(h.total()) == std::bit_cast<uint64_t>(r.total);
}

}  // namespace

TEST_CASE("the reuse histogram adds a run as adding its intervals one at a time does") {
  std::mt19937_64 rng(4099);
  for (double limit : {1.0, 4.0, 12.0, 6248.0, 25000.0}) {
    ReuseHistogram h(limit);
    OneAtATime r(limit);
    uint64_t fractional = 0;  // buckets seen holding a fraction below 2^-20
    for (int run = 0; run < 8000; ++run) {
      // Mostly a few buckets, as a trace's intervals are; now and then a far one.
      const int bucket = rng() % 8 == 0 ? static_cast<int>(rng() % ReuseHistogram::kBuckets)
                                        : static_cast<int>(rng() % 4);
      const uint64_t sizes[] = {1, 3, 40, 1200};
      const uint64_t count = 1 + rng() % sizes[rng() % 4];
      h.Add(bucket, count);
      r.Add(bucket, count);
      REQUIRE(SameBits(h, r));
      for (double x : r.hist) fractional += std::floor(x * 0x1p20) != x * 0x1p20;
    }
    INFO("limit ", limit);
    CHECK(fractional > 0);  // the sums carried fine fractions, where adding 1 can round
    CHECK(h.total() <= limit);
  }
  // A bucket halved into the subnormals, then a run on it.
  ReuseHistogram h(2.0);
  OneAtATime r(2.0);
  h.Add(5, 1);
  r.Add(5, 1);
  for (int i = 0; i < 1100; ++i) {
    h.Add(0, 3);
    r.Add(0, 3);
  }
  CHECK(r.hist[5] == 0);  // halved past the smallest subnormal
  h.Add(5, 1);
  r.Add(5, 1);
  h.Add(5, 500);
  r.Add(5, 500);
  CHECK(SameBits(h, r));
}

TEST_CASE("the reuse histogram's fraction within a horizon counts whole buckets") {
  ReuseHistogram h(1000);
  CHECK(h.FractionWithin(100) == 0);      // no interval yet
  h.Add(ReuseHistogram::Bucket(1), 1);    // bucket 0: [1, 2)
  h.Add(ReuseHistogram::Bucket(5), 2);    // bucket 2: [4, 8)
  h.Add(ReuseHistogram::Bucket(300), 1);  // bucket 8: [256, 512)
  CHECK(ReuseHistogram::Bucket(uint64_t{1} << 63) == ReuseHistogram::kBuckets - 1);
  CHECK(h.FractionWithin(6.5) == 0.25);  // [4, 8) is not wholly within 6.5
  CHECK(h.FractionWithin(7) == 0.75);
  CHECK(h.FractionWithin(511) == 1);
}

}  // namespace kvlanes::test

// BoundedSamples (sim/core/bounded_samples.h) and a WeightedSamples told bound_memory(): memory that
// does not grow with the samples, and each statistic as exact as the header promises against the
// exact set of the same samples.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/core/bounded_samples.h"
#include "sim/core/weighted_samples.h"

using capsim::BoundedSamples;
using capsim::WeightedSamples;

namespace {

// Values spread over [1, 64): six binary orders of magnitude, from raw generator bits (no
// library distribution, so the same on every standard library).
std::vector<double> spread_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (double& x : v) x = std::exp2(6.0 * static_cast<double>(rng() >> 11) * 0x1p-53);
  return v;
}

double relative_error(double approx, double exact) { return std::abs(approx - exact) / exact; }

}  // namespace

TEST_CASE("log histogram: buckets of 2^-10 relative width, values interpolated inside a bucket", "[core][stats]") {
  // 1 and 1 + 2^-10 are the first values of two neighbouring buckets of the binade [1, 2); 1 + 2^-11 shares
  // the first bucket with 1.
  BoundedSamples h;
  h.add(1.0);
  h.add(1.0 + 0x1p-11);
  h.add(1.0 + 0x1p-10);
  // Sorted: 1, 1 + 2^-11, 1 + 2^-10. The median (k = 1) is the first bucket's last value, its hi: exact.
  CHECK(h.percentile(50) == 1.0 + 0x1p-11);
  CHECK(h.percentile(0) == 1.0);
  CHECK(h.percentile(100) == 1.0 + 0x1p-10);
  // Three values in one bucket, unevenly spaced: the middle one is read on the line from lo to hi,
  // 1 + 2^-12 instead of 1 + 2^-20: off by 2^-12 - 2^-20, inside the promised 2^-10 x value.
  BoundedSamples u;
  for (const double x : {1.0, 1.0 + 0x1p-20, 1.0 + 0x1p-11}) u.add(x);
  CHECK(u.percentile(50) == 1.0 + 0x1p-12);
  // numpy's interpolation between neighbours: p25 of {1, 1 + 2^-20, 1 + 2^-11} is halfway from k = 0 to
  // k = 1, i.e. 1 + 2^-13 from the estimates (1 and 1 + 2^-12).
  CHECK(u.percentile(25) == 1.0 + 0x1p-13);
  CHECK(u.size() == 3);
  // Zero is its own value (the bucket of the smallest bit patterns holds only it here).
  BoundedSamples z;
  z.add(0.0, 5);
  z.add(2.5);
  CHECK(z.percentile(50) == 0.0);
  CHECK(z.percentile(100) == 2.5);
  CHECK(z.mean() == 2.5 / 6.0);
}

TEST_CASE("bounded weighted samples: integer counts equal the exact set bit for bit, as batch sizes need",
          "[core][stats]") {
  // kIntegers keeps a count per value: every statistic is the exact set's, the standard deviation
  // included (the same terms summed in the same, sorted order). kReals on the same integers below
  // 2^11 = 2048 is exact in its percentiles too: each integer is alone in a bucket narrower than 1.
  std::mt19937_64 rng(11);
  WeightedSamples exact, integers, reals;
  integers.bound_memory(BoundedSamples::Kind::kIntegers);
  reals.bound_memory(BoundedSamples::Kind::kReals);
  REQUIRE(integers.bounded());
  for (int i = 0; i < 30000; ++i) {
    const auto v = static_cast<double>(rng() % 2048);
    const auto c = static_cast<std::int64_t>(1 + rng() % 3);
    for (WeightedSamples* w : {&exact, &integers, &reals}) w->add(v, c);
  }
  CHECK(integers.size() == exact.size());
  CHECK(integers.mean() == exact.mean());  // before the exact set sorts
  CHECK(reals.mean() == exact.mean());
  for (const double p : {0.0, 1.0, 10.0, 33.3, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0}) {
    INFO("p" << p);
    CHECK(integers.percentile(p) == exact.percentile(p));
    CHECK(reals.percentile(p) == exact.percentile(p));
  }
  CHECK(integers.stddev() == exact.stddev());
  CHECK(relative_error(reals.stddev(), exact.stddev()) < 1e-12);
  // 2,048 values x 8 B of counts, whatever the number of samples; the vector grows by doubling, so
  // its capacity may reach 4,096.
  CHECK(integers.memory_bytes() <= sizeof(BoundedSamples) + 2 * 2048 * 8);
}

TEST_CASE("bounded weighted samples: percentiles within 2^-10, memory flat in the number of samples",
          "[core][stats]") {
  const std::vector<double> values = spread_values(200000, 5);
  WeightedSamples exact, bounded;
  bounded.bound_memory();
  std::size_t bounded_bytes_at_20k = 0, exact_bytes_at_20k = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    exact.add(values[i], 1 + static_cast<std::int64_t>(i % 4));
    bounded.add(values[i], 1 + static_cast<std::int64_t>(i % 4));
    if (i + 1 == 20000) {
      bounded_bytes_at_20k = bounded.memory_bytes();
      exact_bytes_at_20k = exact.memory_bytes();
    }
  }
  // Six binades of 1,024 buckets of 24 B, touched in the first 20k values already: ten times the samples,
  // the same bytes; the exact set's runs grow with them.
  CHECK(bounded.memory_bytes() == bounded_bytes_at_20k);
  CHECK(bounded.memory_bytes() < 6 * 1024 * 24 + 2048);
  CHECK(bounded.memory_bytes() > 6 * 1024 * 24);
  CHECK(exact.memory_bytes() >= 200000 * 16);
  CHECK(exact.memory_bytes() > 5 * exact_bytes_at_20k);

  CHECK(bounded.size() == exact.size());
  CHECK(bounded.mean() == exact.mean());  // the same arrival-order sum; the exact set has not sorted yet
  double worst = 0;
  for (double p = 0; p <= 100; p += 0.5) {
    const double e = relative_error(bounded.percentile(p), exact.percentile(p));
    worst = std::max(worst, e);
    CHECK(e < 0x1p-10);
  }
  CHECK(worst > 0);  // the values are spread: some percentile is really estimated
  CHECK(bounded.min() == exact.min());
  CHECK(bounded.max() == exact.max());
  CHECK(relative_error(bounded.stddev(), exact.stddev()) < 1e-12);
}

TEST_CASE("bounded weighted samples: merged halves equal the whole", "[core][stats]") {
  const std::vector<double> values = spread_values(50000, 9);
  WeightedSamples whole, first, second;
  for (WeightedSamples* w : {&whole, &first, &second}) w->bound_memory();
  for (std::size_t i = 0; i < values.size(); ++i) {
    whole.add(values[i]);
    (i < values.size() / 2 ? first : second).add(values[i]);
  }
  WeightedSamples pooled;  // an exact, empty set takes the first bounded one whole
  first.merge_into(pooled);
  second.merge_into(pooled);
  REQUIRE(pooled.bounded());
  CHECK(pooled.size() == whole.size());
  // Buckets merge exactly (counts add, extremes combine), so the percentiles are the whole set's.
  for (const double p : {0.0, 50.0, 90.0, 99.0, 100.0}) CHECK(pooled.percentile(p) == whole.percentile(p));
  CHECK(relative_error(pooled.mean(), whole.mean()) < 1e-12);
  CHECK(relative_error(pooled.stddev(), whole.stddev()) < 1e-12);

  // An exact set with samples, meeting a bounded one, becomes bounded with both sets' samples.
  WeightedSamples exact_part;
  for (std::size_t i = 0; i < values.size() / 2; ++i) exact_part.add(values[i]);
  second.merge_into(exact_part);
  REQUIRE(exact_part.bounded());
  for (const double p : {0.0, 50.0, 99.0, 100.0}) CHECK(exact_part.percentile(p) == whole.percentile(p));
}

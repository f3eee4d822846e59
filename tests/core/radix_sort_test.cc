#include "sim/core/radix_sort.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "sim/core/stats.h"
#include "sim/core/weighted_samples.h"

using capsim::kRadixSortMinSize;
using capsim::ordered_bits;
using capsim::radix_sort_by_double;
using capsim::Samples;
using capsim::WeightedSamples;

namespace {
const auto identity = [](double x) { return x; };
}

TEST_CASE("radix sort: a double's bits, mapped, order like the numbers", "[core][radix]") {
  // Negative numbers have the sign bit set and larger magnitudes larger bits, so they are all
  // flipped; non-negative numbers only get the sign bit set, which puts them above every negative.
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ascending = {-inf, -1e300, -2.5, -1.0, -1e-310, 0.0, 5e-324, 1e-300, 0.5,
                                         1.0, 1.0000000000000002, 3.0, 1e300, inf};
  for (std::size_t i = 0; i + 1 < ascending.size(); ++i) {
    CHECK(ordered_bits(ascending[i]) < ordered_bits(ascending[i + 1]));
  }
  // 1.0 is 0x3FF0000000000000: with the sign bit set, 0xBFF0000000000000. -1.0 is
  // 0xBFF0000000000000: flipped, 0x400FFFFFFFFFFFFF.
  CHECK(ordered_bits(1.0) == 0xBFF0000000000000ULL);
  CHECK(ordered_bits(-1.0) == 0x400FFFFFFFFFFFFFULL);
  CHECK(ordered_bits(0.0) == 0x8000000000000000ULL);
  CHECK(ordered_bits(-0.0) == 0x7FFFFFFFFFFFFFFFULL);  // just below +0.0
}

TEST_CASE("radix sort: a small list by hand", "[core][radix]") {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {3.5, -1.0, 0.0, 2.25, -7.0, 1e-300, inf, 2.25, -inf, 0.1};
  REQUIRE(radix_sort_by_double(v, identity, true));
  CHECK(v == std::vector<double>{-inf, -7.0, -1.0, 0.0, 1e-300, 0.1, 2.25, 2.25, 3.5, inf});
}

TEST_CASE("radix sort: the sequence std::sort gives, on many sizes and spreads", "[core][radix]") {
  std::mt19937_64 rng(12);
  std::lognormal_distribution<double> latency(-3.0, 1.0);
  std::uniform_int_distribution<int> few(0, 9);
  std::normal_distribution<double> signed_values(0.0, 1e3);
  for (const std::size_t n : {2u, 3u, 255u, 256u, 1000u, 65537u}) {
    std::vector<double> a(n), b(n), c(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = latency(rng);
      b[i] = few(rng) * 0.125;  // many equal values, one of them +0.0
      c[i] = signed_values(rng);
    }
    for (std::vector<double>* v : {&a, &b, &c}) {
      std::vector<double> expected = *v;
      std::sort(expected.begin(), expected.end());
      REQUIRE(radix_sort_by_double(*v, identity, true));
      CHECK(*v == expected);
    }
  }
}

TEST_CASE("radix sort: declines NaN, and -0.0 when asked, leaving the list as it was", "[core][radix]") {
  const std::vector<double> with_nan = {1.0, std::nan(""), 0.5};
  std::vector<double> v = with_nan;
  CHECK_FALSE(radix_sort_by_double(v, identity, false));
  CHECK(std::isnan(v[1]));
  CHECK(v[0] == 1.0);
  CHECK(v[2] == 0.5);

  std::vector<double> zeros = {0.0, 1.0, -0.0};
  CHECK_FALSE(radix_sort_by_double(zeros, identity, true));
  CHECK(std::signbit(zeros[2]));  // untouched
  // Without the guard -0.0 sorts just before +0.0 (stable among equal keys otherwise).
  REQUIRE(radix_sort_by_double(zeros, identity, false));
  CHECK(std::signbit(zeros[0]));
  CHECK_FALSE(std::signbit(zeros[1]));
  CHECK(zeros[2] == 1.0);
}

TEST_CASE("radix sort: by a key, stable among equal keys", "[core][radix]") {
  // Pairs (key, order of insertion): equal keys keep their insertion order.
  std::vector<std::pair<double, int>> v;
  for (int i = 0; i < 600; ++i) v.emplace_back(static_cast<double>((i * 7) % 5), i);
  REQUIRE(radix_sort_by_double(v, [](const std::pair<double, int>& e) { return e.first; }, true));
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    const bool ordered = v[i].first < v[i + 1].first ||
                         (v[i].first == v[i + 1].first && v[i].second < v[i + 1].second);
    CHECK(ordered);
  }
  // 600 keys i*7 mod 5 cycle 0, 2, 4, 1, 3: 120 of each, so key 1 starts at 120.
  CHECK(v[120].first == 1.0);
  CHECK(v[120].second == 3);  // the first i with 7i = 1 (mod 5)
}

TEST_CASE("samples and weighted samples: the radix path gives the comparison sort's statistics",
          "[core][radix][stats]") {
  // Above kRadixSortMinSize both classes sort by radix; the summaries must equal those of the
  // values sorted by std::sort, computed here by numpy's formulas: mean in insertion order
  // before any percentile, then (as summarize asks) percentiles and the standard deviation over
  // the sorted values.
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(-4.0, 0.7);
  const std::size_t n = 4 * kRadixSortMinSize + 3;
  std::vector<double> values(n);
  for (double& x : values) x = d(rng);
  Samples s;
  WeightedSamples w;
  for (const double x : values) {
    s.add(x);
    w.add(x, 2);  // each value twice: runs of 2
  }
  double insertion_sum = 0;
  for (const double x : values) insertion_sum += x;
  CHECK(s.mean() == insertion_sum / static_cast<double>(n));
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const auto numpy = [&](double p, const std::vector<double>& v) {
    const double rank = p / 100 * static_cast<double>(v.size() - 1);
    const auto lo = static_cast<std::size_t>(rank);
    if (lo + 1 >= v.size()) return v.back();
    const double f = rank - static_cast<double>(lo);
    return f >= 0.5 ? v[lo + 1] - (v[lo + 1] - v[lo]) * (1 - f) : v[lo] + (v[lo + 1] - v[lo]) * f;
  };
  for (const double p : {0.0, 50.0, 90.0, 95.0, 99.0, 100.0}) CHECK(s.percentile(p) == numpy(p, sorted));
  CHECK(s.sorted_values() == sorted);
  double sorted_sum = 0;
  for (const double x : sorted) sorted_sum += x;
  const double m = sorted_sum / static_cast<double>(n);
  double squares = 0;
  for (const double x : sorted) squares += (x - m) * (x - m);
  CHECK(s.stddev() == std::sqrt(squares / static_cast<double>(n)));
  // The weighted set expands to each value twice: WeightedSamples::percentile interpolates
  // a + frac x (b - a) between the expanded list's ranks floor(r) and floor(r) + 1,
  // r = p/100 x (2n - 1). p50: r = n - 0.5, halfway between the two middle values.
  std::vector<double> doubled;
  for (const double x : sorted) doubled.insert(doubled.end(), {x, x});
  const auto expanded = [&](double p) {
    const double rank = p / 100.0 * static_cast<double>(doubled.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const double frac = rank - static_cast<double>(lo);
    if (frac == 0 || lo + 1 >= doubled.size()) return doubled[lo];
    return doubled[lo] + frac * (doubled[lo + 1] - doubled[lo]);
  };
  CHECK(w.percentile(50) == doubled[n - 1] + 0.5 * (doubled[n] - doubled[n - 1]));
  for (const double p : {0.0, 50.0, 90.0, 95.0, 99.0, 100.0}) CHECK(w.percentile(p) == expanded(p));
  CHECK(w.min() == sorted.front());
  CHECK(w.max() == sorted.back());
}

// Samples and WeightedSamples sort with Boost's spreadsort (sim/core/stats.cc,
// weighted_samples.cc): the statistics must be exactly those of std::sort's order.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "sim/core/stats.h"
#include "sim/core/weighted_samples.h"

using capsim::Samples;
using capsim::WeightedSamples;

TEST_CASE("samples and weighted samples: the spreadsort path gives the comparison sort's statistics",
          "[core][stats]") {
  // Both classes sort with Boost's spreadsort (radix buckets for large lists); the summaries must
  // equal those of the values sorted by std::sort, computed here by numpy's formulas: mean in insertion order
  // before any percentile, then (as summarize asks) percentiles and the standard deviation over
  // the sorted values.
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(-4.0, 0.7);
  const std::size_t n = 20003;  // well above spreadsort's switch to a comparison sort
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

TEST_CASE("samples: a -0.0 among the values keeps std::sort's order", "[core][stats]") {
  // spreadsort orders by bits (-0.0 before +0.0); std::sort sees them as equal. Samples then
  // takes std::sort, so sorted_values() is, sign for sign, what std::sort gives.
  std::vector<double> values;
  for (int i = 0; i < 5000; ++i) values.push_back(i % 7 == 0 ? (i % 2 ? -0.0 : 0.0) : 0.001 * (i % 97));
  Samples s;
  for (const double x : values) s.add(x);
  std::vector<double> expected = values;
  std::sort(expected.begin(), expected.end());
  const std::vector<double> got = s.sorted_values();
  REQUIRE(got.size() == expected.size());
  bool same_signs = true;
  for (std::size_t i = 0; i < got.size(); ++i) same_signs = same_signs && got[i] == expected[i] && std::signbit(got[i]) == std::signbit(expected[i]);
  CHECK(same_signs);
}

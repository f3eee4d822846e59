// Samples and WeightedSamples sort non-negative values with a radix sort by bit pattern
// (sim/core/radix_sort.h; stats.cc, weighted_samples.cc): the statistics must be exactly those
// of std::sort's order.
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

TEST_CASE("samples and weighted samples: the radix path gives the comparison sort's statistics",
          "[core][stats]") {
  // Both classes sort with the radix sort by bit pattern; the summaries must
  // equal those of the values sorted by std::sort, computed here by numpy's formulas: mean in insertion order
  // before any percentile, then (as summarize asks) percentiles and the standard deviation over
  // the sorted values.
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> d(-4.0, 0.7);
  const std::size_t n = 20003;
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
  // Bits order -0.0 before +0.0; std::sort sees them as equal. Samples then
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

TEST_CASE("weighted samples: merging into an empty set equals adding its runs one by one",
          "[core][stats]") {
  // merge_into copies the runs when the target is empty. Adding them one by one (what it did
  // before, and still does into a non-empty set) builds the set that adding the original samples
  // builds, so the copy must give that set's statistics bit for bit: the mean first (its sum
  // follows the runs' order, insertion or sorted), then percentiles and the standard deviation;
  // with -0.0 and +0.0 among the values and runs extended in place.
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> d(-3.0, 0.5);
  std::vector<std::pair<double, std::int64_t>> adds;
  for (int i = 0; i < 3000; ++i) {
    const double x = i % 301 == 3 ? (i % 2 ? -0.0 : 0.0) : d(rng);
    adds.emplace_back(x, 1 + i % 3);
    if (i % 5 == 0) adds.emplace_back(x, 2);  // extends the run just added
  }
  const auto build = [&] {
    WeightedSamples w;
    for (const auto& [x, c] : adds) w.add(x, c);
    return w;
  };
  const auto same = [](double a, double b) { return a == b && std::signbit(a) == std::signbit(b); };
  for (const bool sort_first : {false, true}) {
    WeightedSamples source = build(), expected = build();
    if (sort_first) {
      (void)source.percentile(50);
      (void)expected.percentile(50);
    }
    WeightedSamples copied;
    source.merge_into(copied);
    CHECK(copied.size() == expected.size());
    CHECK(same(copied.mean(), expected.mean()));
    for (const double p : {0.0, 10.0, 50.0, 90.0, 99.0, 100.0}) CHECK(same(copied.percentile(p), expected.percentile(p)));
    CHECK(same(copied.stddev(), expected.stddev()));
    // Into a non-empty set the runs are added one by one: one sample more than the source.
    WeightedSamples two;
    two.add(expected.max());
    source.merge_into(two);
    CHECK(two.size() == expected.size() + 1);
    CHECK(two.max() == expected.max());
  }
}

TEST_CASE("samples and weighted samples: negative values sort as std::sort does", "[core][stats]") {
  // A value with the sign bit set (here the smallest subnormals) goes to std::sort: by bit
  // pattern a negative value would sort above every positive one.
  const std::vector<double> xs = {0.75, -4.9e-324, 0.25, 1.0, -0.5, 4.9e-324, 0.5};
  Samples s;
  WeightedSamples w;
  for (double x : xs) {
    s.add(x);
    w.add(x, 2);
  }
  std::vector<double> sorted = xs;
  std::sort(sorted.begin(), sorted.end());
  CHECK(s.percentile(0) == -0.5);
  CHECK(s.percentile(100) == 1.0);
  // numpy's linear rank: 50% of 6 gaps is the 4th smallest (index 3).
  CHECK(s.percentile(50) == sorted[3]);
  CHECK(w.percentile(0) == -0.5);
  CHECK(w.percentile(50) == sorted[3]);  // 14 samples, rank 6.5: both neighbours are sorted[3]
  CHECK(w.max() == 1.0);
}

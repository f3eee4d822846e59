#include "sim/core/stats.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/time.h"

using capsim::from_seconds;
using capsim::Samples;
using capsim::StreamingStats;
using capsim::TimeWeightedStats;

TEST_CASE("samples: percentiles of {1,2,3,4} like numpy", "[core][stats]") {
  Samples s;
  for (double x : {4.0, 1.0, 3.0, 2.0}) s.add(x);  // insertion order must not matter
  // Sorted v = {1, 2, 3, 4}, rank r = p/100 * 3, result v[floor r] + frac(r) * 1:
  //   p0: r 0 -> 1        p25: r 0.75 -> 1.75    p50: r 1.5 -> 2.5
  //   p90: r 2.7 -> 3.7   p99: r 2.97 -> 3.97    p100: r 3 -> 4
  CHECK(s.percentile(0) == 1);
  CHECK(s.percentile(25) == Approx(1.75).margin(1e-12));
  CHECK(s.percentile(50) == 2.5);
  CHECK(s.percentile(90) == Approx(3.7).margin(1e-12));
  CHECK(s.percentile(99) == Approx(3.97).margin(1e-12));
  CHECK(s.percentile(100) == 4);
  CHECK(s.median() == 2.5);
  // mean 10/4 = 2.5; population variance (1.5^2 + 0.5^2 + 0.5^2 + 1.5^2) / 4 = 1.25.
  CHECK(s.mean() == 2.5);
  CHECK(s.stddev() == Approx(std::sqrt(1.25)).epsilon(1e-15));
  CHECK(s.min() == 1);
  CHECK(s.max() == 4);
  CHECK(s.sorted_values() == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("samples: other sizes and re-sorting after add", "[core][stats]") {
  Samples one;
  one.add(7);
  // n = 1: rank is 0 for every p.
  CHECK(one.percentile(0) == 7);
  CHECK(one.percentile(37) == 7);
  CHECK(one.percentile(100) == 7);
  CHECK(one.stddev() == 0);

  Samples two;
  two.add(20);
  two.add(10);
  // r = 0.33 * 1 -> 10 + 0.33 * 10 = 13.3;  r = 0.75 -> 20 - 10 * 0.25 = 17.5.
  CHECK(two.percentile(33) == Approx(13.3).margin(1e-12));
  CHECK(two.percentile(75) == 17.5);

  Samples s;
  s.add(4);
  s.add(1);
  CHECK(s.median() == 2.5);
  s.add(0);
  // {0, 1, 4}: r = 1 -> 1.
  CHECK(s.median() == 1);
  CHECK(s.min() == 0);
}

TEST_CASE("samples: mean and stddev do not depend on a percentile asked before them", "[core][stats]") {
  // 1 + 1e16 rounds to 1e16 (ties to even), so the order of the sum shows in the mean: added
  // order 1, 1e16, 1 sums to 1e16; sorted, 1 + 1 + 1e16 = 1e16 + 2. The mean is the sum in the
  // order added, before or after a percentile sorted the values (it used to be the sorted sum
  // after one).
  Samples s;
  for (double x : {1.0, 1e16, 1.0}) s.add(x);
  const double in_order = (1.0 + 1e16 + 1.0) / 3;
  REQUIRE(in_order != (1.0 + 1.0 + 1e16) / 3);
  CHECK(s.mean() == in_order);
  CHECK(s.median() == 1);
  CHECK(s.mean() == in_order);

  // The stddev's two passes run over the values sorted, asked first or not: for {0.1, 0.1, 3,
  // 0.3} the added order gives 1.2295832627357937 and the sorted one ...939.
  const std::vector<double> added = {0.1, 0.1, 3, 0.3}, sorted = {0.1, 0.1, 0.3, 3};
  const auto two_pass = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    const double m = sum / static_cast<double>(v.size());
    double squares = 0;
    for (double x : v) squares += (x - m) * (x - m);
    return std::sqrt(squares / static_cast<double>(v.size()));
  };
  REQUIRE(two_pass(added) != two_pass(sorted));
  Samples fresh, queried;
  for (double x : added) {
    fresh.add(x);
    queried.add(x);
  }
  CHECK(queried.percentile(90) == Approx(2.19));
  CHECK(fresh.stddev() == two_pass(sorted));
  CHECK(queried.stddev() == two_pass(sorted));
  // Values added after a sort still sum in the order added.
  fresh.add(0.2);
  CHECK(fresh.mean() == (0.1 + 0.1 + 3 + 0.3 + 0.2) / 5);
}

TEST_CASE("samples: empty gives NaN, bad p throws", "[core][stats]") {
  Samples s;
  CHECK(s.empty());
  CHECK(std::isnan(s.percentile(50)));
  CHECK(std::isnan(s.mean()));
  CHECK(std::isnan(s.stddev()));
  s.add(1);
  CHECK_THROWS_WITH(s.percentile(101), "percentile: p = 101; accepted: 0 <= p <= 100");
  CHECK_THROWS_WITH(s.percentile(-0.5), "percentile: p = -0.5; accepted: 0 <= p <= 100");
  CHECK_THROWS_AS(s.percentile(std::numeric_limits<double>::quiet_NaN()), capsim::Error);
}

TEST_CASE("streaming stats: Welford matches the direct formulas", "[core][stats]") {
  StreamingStats st;
  for (double x : {2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0}) st.add(x);
  // Direct: sum 40, mean 5; deviations -3 -1 -1 -1 0 0 2 4, squares sum 32:
  // population variance 32/8 = 4 (sd 2), sample variance 32/7.
  CHECK(st.count() == 8);
  CHECK(st.mean() == 5);
  CHECK(st.variance() == Approx(4).epsilon(1e-15));
  CHECK(st.stddev() == Approx(2).epsilon(1e-15));
  CHECK(st.sample_variance() == Approx(32.0 / 7).epsilon(1e-15));
  CHECK(st.min() == 2);
  CHECK(st.max() == 9);

  // A large offset: 1e9 + {4, 7, 13, 16}. Mean 1e9 + 10, deviations -6 -3 3 6, population
  // variance (36 + 9 + 9 + 36) / 4 = 22.5. The one-pass sum(x^2)/n - mean^2 form would
  // cancel 1e18-sized terms and lose every digit; Welford keeps them.
  StreamingStats big;
  for (double x : {4.0, 7.0, 13.0, 16.0}) big.add(1e9 + x);
  CHECK(big.mean() == 1e9 + 10);
  CHECK(big.variance() == Approx(22.5).epsilon(1e-9));
}

TEST_CASE("streaming stats: merge equals adding everything", "[core][stats]") {
  StreamingStats a, b;
  for (double x : {2.0, 4.0, 4.0, 4.0}) a.add(x);
  for (double x : {5.0, 5.0, 7.0, 9.0}) b.add(x);
  // Same eight values as above: mean 5, variance 4, min 2, max 9.
  StreamingStats merged = a;
  merged.merge(b);
  CHECK(merged.count() == 8);
  CHECK(merged.mean() == 5);
  CHECK(merged.variance() == Approx(4).epsilon(1e-15));
  CHECK(merged.min() == 2);
  CHECK(merged.max() == 9);

  StreamingStats empty;
  StreamingStats c = a;
  c.merge(empty);
  CHECK(c.count() == 4);
  CHECK(c.mean() == 3.5);  // (2 + 4 + 4 + 4) / 4
  empty.merge(b);
  CHECK(empty.mean() == 6.5);  // (5 + 5 + 7 + 9) / 4
}

TEST_CASE("streaming stats: empty and single", "[core][stats]") {
  StreamingStats st;
  CHECK(st.count() == 0);
  CHECK(std::isnan(st.mean()));
  CHECK(std::isnan(st.variance()));
  CHECK(std::isnan(st.min()));
  st.add(-3);
  CHECK(st.mean() == -3);
  CHECK(st.variance() == 0);
  CHECK(std::isnan(st.sample_variance()));
  CHECK(st.min() == -3);
  CHECK(st.max() == -3);
}

TEST_CASE("time-weighted stats: worked example", "[core][stats]") {
  TimeWeightedStats q;
  q.add(from_seconds(0), 2);
  q.add(from_seconds(10), 6);
  q.add(from_seconds(30), 1);
  // Value 2 on [0,10), 6 on [10,30), 1 from 30 on.
  //   integral to 40 s = 2*10 + 6*20 + 1*10 = 150 value-s; mean 150 / 40 = 3.75
  //   to 30 s: (20 + 120) / 30 = 4.6667;  to 35 s: (20 + 120 + 5) / 35 = 4.142857
  CHECK(q.integral(from_seconds(40)) == Approx(150).epsilon(1e-12));
  CHECK(q.mean(from_seconds(40)) == Approx(3.75).epsilon(1e-12));
  CHECK(q.mean(from_seconds(30)) == Approx(140.0 / 30).epsilon(1e-12));
  CHECK(q.mean(from_seconds(35)) == Approx(145.0 / 35).epsilon(1e-12));
  CHECK(q.peak() == 6);
  CHECK(q.current() == 1);
  CHECK(q.start_time() == 0);
}

TEST_CASE("time-weighted stats: late start, same-instant updates, empty", "[core][stats]") {
  TimeWeightedStats late;
  late.add(from_seconds(5), 3);
  late.add(from_seconds(7), 1);
  // Window [5, 9]: (3*2 + 1*2) / 4 = 2.
  CHECK(late.mean(from_seconds(9)) == Approx(2).epsilon(1e-12));
  CHECK(late.start_time() == from_seconds(5));

  TimeWeightedStats spike;
  spike.add(0, 1);
  spike.add(from_seconds(5), 100);
  spike.add(from_seconds(5), 1);
  // The 100 held for no time: mean over [0, 10] is 1; the peak still records it.
  CHECK(spike.mean(from_seconds(10)) == 1);
  CHECK(spike.peak() == 100);

  TimeWeightedStats point;
  point.add(from_seconds(3), 4);
  // Zero-length window: the current value.
  CHECK(point.mean(from_seconds(3)) == 4);
  CHECK(point.integral(from_seconds(3)) == 0);

  TimeWeightedStats none;
  CHECK(none.empty());
  CHECK(std::isnan(none.mean(100)));
  CHECK(none.integral(100) == 0);
  CHECK(std::isnan(none.peak()));
}

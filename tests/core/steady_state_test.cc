// MSER-5 truncation and batch-means intervals (sim/core/steady_state.h) on series whose answers
// are worked out by hand.
#include "sim/core/steady_state.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "sim/core/rng.h"

using capsim::batch_interval;
using capsim::batch_means;
using capsim::mser5;

TEST_CASE("mser5: a constant series needs no truncation", "[core][steady]") {
  const std::vector<double> flat(1000, 3.0);
  const auto m = mser5(flat);
  CHECK(m.batches == 200);
  CHECK(m.truncate == 0);  // every MSER(d) is 0: the earliest minimum is d = 0
  CHECK(m.settled);
}

TEST_CASE("mser5: a step transient is cut where it ends", "[core][steady]") {
  // 100 observations at 10, then 900 alternating 0/2 (mean 1). Batches of 5: 20 batches at 10,
  // then batches averaging 0.8 or 1.2 (three 0s and two 2s, or the reverse). Dropping the 20 high
  // batches removes nearly all the variance; dropping more only shrinks (k - d)^2.
  std::vector<double> s(100, 10.0);
  for (int i = 0; i < 900; ++i) s.push_back(i % 2 == 0 ? 0.0 : 2.0);
  const auto m = mser5(s);
  CHECK(m.truncate == 100);
  CHECK(m.settled);
}

TEST_CASE("mser5: a series that keeps climbing never settles", "[core][steady]") {
  // A queue that grows without bound: x_i = i. Truncating more always lowers MSER (the remaining
  // ramp of n batches has a sum of squares ~ 25 n^3 / 12, so MSER ~ 25 n / 12 falls with n), so
  // the minimum sits on the boundary of the search, d = k/2 = 100 batches: not settled.
  std::vector<double> ramp;
  for (int i = 0; i < 1000; ++i) ramp.push_back(i);
  const auto m = mser5(ramp);
  CHECK(m.truncate == 500);
  CHECK_FALSE(m.settled);
  // The end of a series does not fool it: a stationary series whose last 30 values are 0 (a
  // closed loop draining) is still settled at d = 0... up to the alternating pattern's noise.
  std::vector<double> drain;
  for (int i = 0; i < 970; ++i) drain.push_back(i % 2 == 0 ? 0.0 : 2.0);
  for (int i = 0; i < 30; ++i) drain.push_back(0.0);
  CHECK(mser5(drain).settled);
}

TEST_CASE("batch means: the interval worked by hand", "[core][steady]") {
  // 20 batches of 10; batch j holds the value j. Mean 9.5; batch means 0..19 with sample
  // variance sum (j - 9.5)^2 / 19 = 665 / 19 = 35; half-width t(19, 0.975) x sqrt(35 / 20)
  // = 2.0930240544 x 1.3228756555 = 2.7688.
  std::vector<double> s;
  for (int j = 0; j < 20; ++j) {
    for (int i = 0; i < 10; ++i) s.push_back(j);
  }
  const auto iv = batch_interval(s, -1, 20);
  REQUIRE(iv.valid);
  CHECK(iv.estimate == Approx(9.5));
  CHECK(capsim::student_t_quantile(19, 0.975) == Approx(2.0930240544).epsilon(1e-9));
  CHECK(iv.high - iv.estimate == Approx(2.0930240544 * std::sqrt(35.0 / 20)).epsilon(1e-9));
  CHECK(iv.estimate - iv.low == Approx(iv.high - iv.estimate));
  // Lag-1 correlation of 0..19: sum over j = 0..18 of (j - 9.5)(j - 8.5) = sum (j - 9.5)^2 +
  // sum (j - 9.5) = 574.75 - 9.5 = 565.25; / 665 = 0.85.
  CHECK(iv.lag1_correlation == Approx(0.85));
  // The 95th percentile of each batch is its value: the same spread around the pooled p95.
  const auto p95 = batch_interval(s, 95, 20);
  CHECK(p95.high - p95.estimate == Approx(2.0930240544 * std::sqrt(35.0 / 20)).epsilon(1e-9));
  const auto means = batch_means(s, 20);
  REQUIRE(means.size() == 20);
  CHECK(means[7] == 7.0);
}

TEST_CASE("batch means: iid noise gives the textbook width and covers the truth", "[core][steady]") {
  // 20,000 draws uniform on [0, 1): sd 1/sqrt(12). With independent batches the half-width is
  // about t(19) x sd / sqrt(n) = 2.093 x 0.288675 / 141.42 = 0.00427; allow the batch-to-batch
  // sampling error of a 19-dof variance (+-40%).
  capsim::Rng rng(7);
  std::vector<double> s;
  for (int i = 0; i < 20000; ++i) s.push_back(rng.uniform01());
  const auto iv = batch_interval(s, -1, 20);
  const double half = (iv.high - iv.low) / 2;
  CHECK(half == Approx(2.093 * std::sqrt(1.0 / 12) / std::sqrt(20000.0)).epsilon(0.4));
  CHECK(iv.low < 0.5);
  CHECK(iv.high > 0.5);
  CHECK(std::fabs(iv.lag1_correlation) < 0.5);
}

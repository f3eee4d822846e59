#include "sim/core/rng.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "sim/core/error.h"

using capsim::Rng;

namespace {

// Golden values below were computed once by an independent Python reimplementation of
// splitmix64 seeding + xoshiro256** (arbitrary-precision ints masked to 64 bits):
//
//   M = 2**64 - 1; G = 0x9e3779b97f4a7c15
//   def mix64(z):
//       z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
//       z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
//       return z ^ (z >> 31)
//   def rotl(x, k): return ((x << k) | (x >> (64 - k))) & M
//   seed: sm = seed; s = [mix64(sm := (sm + G) & M) for _ in range(4)]
//   next: r = rotl(s[1] * 5 & M, 7) * 9 & M; t = s[1] << 17 & M
//         s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t
//         s[3] = rotl(s[3], 45); return r
//   uniform01: (next() >> 11) * 2**-53
//   split(stream): h = mix64((stream + G) & M)
//                  for w in s: h = mix64(((h ^ w) + G) & M)
//                  return seeded(h)
//
// The same script reproduces the published reference values: xoshiro256** from state
// {1, 2, 3, 4} gives 11520, 0, 1509978240, 1215971899390074240, and splitmix64 from 0 gives
// 0xe220a8397b1dcdaf first.

constexpr int kN = 200'000;  // sqrt(kN) = 447.2136

struct Moments {
  double mean;
  double variance;  // population
};

// Two-pass, independent of sim/core/stats.
Moments moments(const std::vector<double>& xs) {
  double sum = 0;
  for (double x : xs) sum += x;
  const double mean = sum / static_cast<double>(xs.size());
  double squares = 0;
  for (double x : xs) squares += (x - mean) * (x - mean);
  return {mean, squares / static_cast<double>(xs.size())};
}

std::vector<double> draw(int n, const std::function<double()>& f) {
  std::vector<double> xs;
  xs.reserve(n);
  for (int i = 0; i < n; ++i) xs.push_back(f());
  return xs;
}

double fraction(const std::vector<double>& xs, const std::function<bool(double)>& pred) {
  int hits = 0;
  for (double x : xs) hits += pred(x) ? 1 : 0;
  return static_cast<double>(hits) / static_cast<double>(xs.size());
}

// Tolerances: every statistical check allows 5 standard errors, computed from the CLT:
//   SE(sample mean)     = sd / sqrt(N)
//   SE(sample variance) = sqrt((mu4 - sigma^4) / N), mu4 the 4th central moment
//   SE(sample fraction) = sqrt(q (1 - q) / N)
// A correct generator fails a 5-SE check with probability ~6e-7; the seeds are fixed, so
// the tests are deterministic anyway.

}  // namespace

TEST_CASE("rng: xoshiro256** reference vector from state {1,2,3,4}", "[core][rng]") {
  Rng rng = Rng::from_state({1, 2, 3, 4});
  CHECK(rng.next_u64() == 11520u);
  CHECK(rng.next_u64() == 0u);
  CHECK(rng.next_u64() == 1509978240u);
  CHECK(rng.next_u64() == 1215971899390074240u);
  CHECK(rng.next_u64() == 1216172134540287360u);
  CHECK(rng.next_u64() == 607988272756665600u);
}

TEST_CASE("rng: golden values for seed 42", "[core][rng]") {
  // splitmix64(42) state: bdd732262feb6e95 28efe333b266f103 47526757130f9f52 581ce1ff0e4ae394
  Rng rng(42);
  CHECK(rng.next_u64() == 1546998764402558742u);
  CHECK(rng.next_u64() == 6990951692964543102u);
  CHECK(rng.next_u64() == 12544586762248559009u);
  CHECK(rng.next_u64() == 17057574109182124193u);
  CHECK(rng.next_u64() == 18295552978065317476u);

  // uniform01 is exact arithmetic: (word >> 11) * 2^-53.
  Rng u(42);
  CHECK(u.uniform01() == 755370490430936 * 0x1.0p-53);   // 0.08386297105988216
  CHECK(u.uniform01() == 3413550631330343 * 0x1.0p-53);  // 0.3789802506626686
  CHECK(u.uniform01() == 6125286505004179 * 0x1.0p-53);  // 0.6800434110281394

  // uniform_int(1, 6): 1 + word % 6 (rejection threshold 2^64 mod 6 = 4 never hit here).
  Rng dice(42);
  const std::int64_t want[] = {1, 1, 6, 6, 5, 1, 5, 4, 5, 6};
  for (std::int64_t w : want) CHECK(dice.uniform_int(1, 6) == w);

  // The full int64 range takes one raw word as is; this one is below 2^63.
  Rng full(42);
  CHECK(full.uniform_int(std::numeric_limits<std::int64_t>::min(),
                         std::numeric_limits<std::int64_t>::max()) == 1546998764402558742);
}

TEST_CASE("rng: golden values of the distributions for seed 42", "[core][rng]") {
  // From the Python reference (same glibc log/exp; see rng.h on libm caveats), with
  // 2 * -log(1 - U) for exponential(2), the polar method for normal, Knuth for poisson(3.5)
  // and numpy's random_poisson_ptrs (math.lgamma for log k!) for poisson(100).
  Rng e(42);
  CHECK(e.exponential(2) == Approx(0.17517866116683514).epsilon(1e-14));
  CHECK(e.exponential(2) == Approx(0.9527847901575448).epsilon(1e-14));
  CHECK(e.exponential(2) == Approx(2.279139903707755).epsilon(1e-14));

  Rng n(42);
  CHECK(n.normal(0, 1) == Approx(-0.7262191382447857).epsilon(1e-14));
  CHECK(n.normal(0, 1) == Approx(-0.21119691823195985).epsilon(1e-14));  // the spare

  Rng knuth(42);
  for (std::int64_t w : {2, 10, 6, 3, 4, 7, 7, 6, 1, 7}) CHECK(knuth.poisson(3.5) == w);

  Rng ptrs(42);
  for (std::int64_t w : {83, 105, 107, 108, 105, 110, 106, 103, 106, 84}) {
    CHECK(ptrs.poisson(100) == w);
  }
  Rng ptrs10(42);
  for (std::int64_t w : {5, 13, 12, 13, 11, 12, 5, 9, 8, 9}) CHECK(ptrs10.poisson(10) == w);
}

TEST_CASE("rng: same seed gives the same stream, and split is pure and independent", "[core][rng]") {
  Rng a(7), b(7), c(8);
  bool all_equal = true, any_differs_from_c = false;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t x = a.next_u64();
    all_equal = all_equal && x == b.next_u64();
    any_differs_from_c = any_differs_from_c || x != c.next_u64();
  }
  CHECK(all_equal);
  CHECK(any_differs_from_c);

  // Python reference: Rng(42).split(7) and .split(8), first words.
  const Rng parent(42);
  Rng s7 = parent.split(7);
  CHECK(s7.next_u64() == 1071371876527367257u);
  CHECK(s7.next_u64() == 7653600051278717753u);
  CHECK(s7.next_u64() == 9147580030583645987u);
  Rng s8 = parent.split(8);
  CHECK(s8.next_u64() == 4175105533280544517u);
  Rng again = parent.split(7);
  CHECK(again.next_u64() == 1071371876527367257u);
  // Splitting did not advance the parent.
  Rng p = parent;
  CHECK(p.next_u64() == 1546998764402558742u);
}

TEST_CASE("rng: uniform01 and uniform moments", "[core][rng]") {
  Rng rng(1);
  // U[0,1): mean 1/2, variance 1/12, mu4 = 1/80.
  //   mean tol 5 * sqrt(1/12) / 447.21 = 0.00323; var tol 5 * sqrt(1/80 - 1/144) / 447.21
  //   = 0.000833.
  const auto u = draw(kN, [&] { return rng.uniform01(); });
  const Moments m = moments(u);
  CHECK(m.mean == Approx(0.5).margin(0.0033));
  CHECK(m.variance == Approx(1.0 / 12).margin(0.00084));
  CHECK(fraction(u, [](double x) { return x >= 0 && x < 1; }) == 1.0);

  // U[-3,5): mean 1, variance 64/12 = 5.3333, mu4 = 8^4/80 = 51.2.
  //   mean tol 5 * 2.3094 / 447.21 = 0.0258; var tol 5 * sqrt(51.2 - 28.444) / 447.21 = 0.0533.
  const auto w = draw(kN, [&] { return rng.uniform(-3, 5); });
  const Moments mw = moments(w);
  CHECK(mw.mean == Approx(1.0).margin(0.026));
  CHECK(mw.variance == Approx(64.0 / 12).margin(0.054));
  CHECK(fraction(w, [](double x) { return x >= -3 && x < 5; }) == 1.0);
  CHECK(rng.uniform(2.5, 2.5) == 2.5);
}

TEST_CASE("rng: uniform_int is uniform on an inclusive range", "[core][rng]") {
  Rng rng(2);
  // A die: each face has q = 1/6; count SE = sqrt(N q (1 - q)) = 166.7, tol 5 SE = 833.
  // Mean 3.5, variance 35/12 = 2.9167: mean tol 5 * 1.7078 / 447.21 = 0.0191.
  std::vector<int> counts(7, 0);
  std::vector<double> xs;
  for (int i = 0; i < kN; ++i) {
    const std::int64_t x = rng.uniform_int(1, 6);
    REQUIRE(x >= 1);
    REQUIRE(x <= 6);
    ++counts[x];
    xs.push_back(static_cast<double>(x));
  }
  for (int face = 1; face <= 6; ++face) {
    CHECK(counts[face] == Approx(kN / 6.0).margin(834));
  }
  CHECK(moments(xs).mean == Approx(3.5).margin(0.0191));
  CHECK(rng.uniform_int(-4, -4) == -4);

  // A span that needs the rejection step to be unbiased: n = 3 * 2^62 values, lo = -2^63,
  // hi = lo + n - 1 = 2^62 - 1. Plain word % n would map words [n, 2^64) onto offsets
  // [0, 2^62) again, making the bottom third (x < lo + 2^62 = -2^62) probability 1/2.
  // With rejection of words below 2^64 mod n = 2^62 it is 1/3, SE sqrt(2/9 / N) = 0.00105,
  // tol 0.0053.
  const std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  const std::int64_t hi = (std::int64_t{1} << 62) - 1;
  int bottom_third = 0;
  for (int i = 0; i < kN; ++i) {
    const std::int64_t x = rng.uniform_int(lo, hi);
    REQUIRE(x <= hi);
    if (x < -(std::int64_t{1} << 62)) ++bottom_third;
  }
  CHECK(bottom_third / static_cast<double>(kN) == Approx(1.0 / 3).margin(0.0053));
}

TEST_CASE("rng: normal and exponential moments", "[core][rng]") {
  Rng rng(3);
  // Normal(10, 3): mean tol 5 * 3 / 447.21 = 0.0335; var 9, mu4 = 3 sigma^4 so
  // var tol 5 * 9 * sqrt(2 / N) = 0.142; P(|X - 10| < 3) = erf(1/sqrt 2) = 0.682689,
  // tol 5 * sqrt(0.6827 * 0.3173 / N) = 0.0052.
  const auto n = draw(kN, [&] { return rng.normal(10, 3); });
  const Moments mn = moments(n);
  CHECK(mn.mean == Approx(10).margin(0.0336));
  CHECK(mn.variance == Approx(9).margin(0.143));
  CHECK(fraction(n, [](double x) { return std::fabs(x - 10) < 3; }) ==
        Approx(0.682689).margin(0.0053));
  CHECK(rng.normal(4, 0) == 4);

  // Exponential(mean 2): var 4, mu4 = 9 * 2^4 so var tol 5 * 4 * sqrt(8 / N) = 0.1265;
  // mean tol 5 * 2 / 447.21 = 0.0224; P(X > 2) = e^-1 = 0.367879, tol 0.0054.
  const auto e = draw(kN, [&] { return rng.exponential(2); });
  const Moments me = moments(e);
  CHECK(me.mean == Approx(2).margin(0.0224));
  CHECK(me.variance == Approx(4).margin(0.127));
  CHECK(fraction(e, [](double x) { return x > 2; }) == Approx(0.367879).margin(0.0054));
  CHECK(fraction(e, [](double x) { return x >= 0 && !std::signbit(x); }) == 1.0);
}

TEST_CASE("rng: lognormal", "[core][rng]") {
  Rng rng(4);
  // Lognormal(mu 0.5, sigma 0.4): mean exp(0.5 + 0.08) = 1.786038, variance
  // mean^2 (e^0.16 - 1) = 0.553488 (sd 0.74397): mean tol 5 * 0.74397 / 447.21 = 0.00832;
  // 4th central moment from raw moments exp(k mu + k^2 sigma^2 / 2) gives var tol 0.0142;
  // median exp(0.5): P(X < e^0.5) = 0.5, tol 5 * sqrt(0.25 / N) = 0.00559.
  const auto x = draw(kN, [&] { return rng.lognormal(0.5, 0.4); });
  const Moments m = moments(x);
  CHECK(m.mean == Approx(1.786038).margin(0.0084));
  CHECK(m.variance == Approx(0.553488).margin(0.0143));
  CHECK(fraction(x, [](double v) { return v < std::exp(0.5); }) == Approx(0.5).margin(0.0056));
}

TEST_CASE("rng: lognormal from mean and p99", "[core][rng]") {
  // mean 2, p99 10: d = ln 5 = 1.609438, z = 2.3263479,
  // sigma = z - sqrt(z^2 - 2d) = 2.3263479 - sqrt(5.411894 - 3.218876) = 0.845463,
  // mu = ln 2 - sigma^2 / 2 = 0.693147 - 0.357404 = 0.335743. (Python to full precision:
  // mu 0.33574293759784374, sigma 0.8454634740331501; the other root, 3.807, is rejected.)
  const capsim::LognormalParams p = capsim::lognormal_params_from_mean_p99(2, 10);
  CHECK(p.mu == Approx(0.33574293759784374).epsilon(1e-12));
  CHECK(p.sigma == Approx(0.8454634740331501).epsilon(1e-12));

  // Empirically: variance = mean^2 (e^{sigma^2} - 1) = 4.17518 (sd 2.04333), so mean tol
  // 5 * 2.04333 / 447.21 = 0.0228; P(X < 10) = 0.99, tol 5 * sqrt(0.99 * 0.01 / N) = 0.00111.
  Rng rng(5);
  const auto x = draw(kN, [&] { return rng.lognormal_from_mean_p99(2, 10); });
  CHECK(moments(x).mean == Approx(2).margin(0.0229));
  CHECK(fraction(x, [](double v) { return v < 10; }) == Approx(0.99).margin(0.00112));

  // Just inside the largest ratio exp(z^2 / 2) = 14.968 (where sigma would reach z):
  // sigma = z - sqrt(z^2 - 2 ln 14.9) = 2.3263479 - sqrt(5.4118945 - 5.4027247) = 2.230577,
  // mu = -sigma^2 / 2 = -2.487738.
  const capsim::LognormalParams edge = capsim::lognormal_params_from_mean_p99(1, 14.9);
  CHECK(edge.sigma == Approx(2.230577287995268).epsilon(1e-9));
  CHECK(edge.mu == Approx(-2.487737518860162).epsilon(1e-9));
}

TEST_CASE("rng: gamma moments", "[core][rng]") {
  Rng rng(6);
  // Gamma(k 2.5, theta 1.5): mean k theta = 3.75, var k theta^2 = 5.625, excess kurtosis
  // 6/k so mu4 = 5.625^2 (3 + 2.4) = 170.859: mean tol 5 * 2.3717 / 447.21 = 0.0265,
  // var tol 5 * sqrt((170.859 - 31.641) / N) = 0.1319.
  const auto a = draw(kN, [&] { return rng.gamma(2.5, 1.5); });
  const Moments ma = moments(a);
  CHECK(ma.mean == Approx(3.75).margin(0.0266));
  CHECK(ma.variance == Approx(5.625).margin(0.132));

  // Gamma(0.5, 2) exercises the shape < 1 boost: mean 1, var 2, mu4 = 4 * (3 + 12) = 60:
  // mean tol 5 * 1.41421 / 447.21 = 0.0158, var tol 5 * sqrt(56 / N) = 0.0837.
  const auto b = draw(kN, [&] { return rng.gamma(0.5, 2); });
  const Moments mb = moments(b);
  CHECK(mb.mean == Approx(1).margin(0.0159));
  CHECK(mb.variance == Approx(2).margin(0.0837));
  CHECK(fraction(b, [](double v) { return v >= 0; }) == 1.0);

  // Gamma(1, 1) is Exponential(1): mean 1 tol 0.0112, var 1 (mu4 9) tol 5 * sqrt(8/N) = 0.0316.
  const auto c = draw(kN, [&] { return rng.gamma(1, 1); });
  const Moments mc = moments(c);
  CHECK(mc.mean == Approx(1).margin(0.0112));
  CHECK(mc.variance == Approx(1).margin(0.0317));
}

TEST_CASE("rng: geometric on {1, 2, ...}", "[core][rng]") {
  Rng rng(7);
  // Mean 4: p = 1/4, var (1 - p)/p^2 = 12, excess kurtosis 6 + p^2/(1 - p) = 6.0833 so
  // mu4 = 144 * 9.0833 = 1308: mean tol 5 * 3.4641 / 447.21 = 0.0387, var tol
  // 5 * sqrt((1308 - 144) / N) = 0.381; P(X = 1) = p = 0.25, tol 5 * sqrt(0.1875 / N) = 0.00484.
  const auto x = draw(kN, [&] { return static_cast<double>(rng.geometric(4)); });
  const Moments m = moments(x);
  CHECK(m.mean == Approx(4).margin(0.0388));
  CHECK(m.variance == Approx(12).margin(0.382));
  CHECK(fraction(x, [](double v) { return v == 1; }) == Approx(0.25).margin(0.00485));
  CHECK(fraction(x, [](double v) { return v >= 1 && v == std::floor(v); }) == 1.0);

  // Mean 1 is the certain first success, and still takes one word.
  Rng one(42);
  CHECK(one.geometric(1) == 1);
  CHECK(one.next_u64() == 6990951692964543102u);  // the second word of seed 42
}

TEST_CASE("rng: poisson moments on both sides of the method switch", "[core][rng]") {
  Rng rng(8);
  // Poisson variance = mean = lambda and mu4 = lambda (1 + 3 lambda), so
  // mean tol 5 sqrt(lambda / N), var tol 5 sqrt((lambda + 2 lambda^2) / N):
  //   lambda 3.5: 0.0209, 0.0592     lambda 9.99 / 10: 0.0354, 0.1620    lambda 100: 0.1118, 1.585
  struct Case {
    double lambda, mean_tol, var_tol;
  };
  for (const Case& c : {Case{3.5, 0.0210, 0.0592}, Case{9.99, 0.0354, 0.1620},
                        Case{10, 0.0354, 0.1621}, Case{100, 0.1119, 1.586}}) {
    INFO("lambda = " << c.lambda);
    const auto x = draw(kN, [&] { return static_cast<double>(rng.poisson(c.lambda)); });
    const Moments m = moments(x);
    CHECK(m.mean == Approx(c.lambda).margin(c.mean_tol));
    CHECK(m.variance == Approx(c.lambda).margin(c.var_tol));
    CHECK(fraction(x, [](double v) { return v >= 0 && v == std::floor(v); }) == 1.0);
  }

  // Shape checks against the pmf e^-l l^k / k!:
  //   P(X = 0 | 3.5) = e^-3.5 = 0.0301974, tol 5 sqrt(q (1 - q) / N) = 0.00191
  //   P(X = 10 | 10) = 0.1251100, tol 0.00370
  //   P(X = 100 | 100) = 0.0398610, tol 0.00219
  struct Pmf {
    double lambda;
    double k;
    double q;
    double tol;
  };
  for (const Pmf& c : {Pmf{3.5, 0, 0.0301974, 0.00192}, Pmf{10, 10, 0.1251100, 0.00370},
                       Pmf{100, 100, 0.0398610, 0.00219}}) {
    INFO("lambda = " << c.lambda << ", k = " << c.k);
    const auto x = draw(kN, [&] { return static_cast<double>(rng.poisson(c.lambda)); });
    CHECK(fraction(x, [&](double v) { return v == c.k; }) == Approx(c.q).margin(c.tol));
  }

  // lambda 0 is the constant 0 and takes no words.
  Rng zero(42);
  CHECK(zero.poisson(0) == 0);
  CHECK(zero.next_u64() == 1546998764402558742u);
}

TEST_CASE("rng: bad parameters throw capsim::Error and consume nothing", "[core][rng]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  Rng rng(42);
  CHECK_THROWS_WITH(rng.exponential(0), "exponential: mean = 0; accepted: finite mean > 0");
  CHECK_THROWS_WITH(rng.exponential(nan), "exponential: mean = nan; accepted: finite mean > 0");
  CHECK_THROWS_WITH(rng.uniform(2, 1), "uniform: a = 2, b = 1; accepted: finite a <= b");
  CHECK_THROWS_WITH(rng.uniform(0, inf), "uniform: a = 0, b = inf; accepted: finite a <= b");
  CHECK_THROWS_WITH(rng.uniform_int(5, 1), "uniform_int: lo = 5 > hi = 1; accepted: lo <= hi");
  CHECK_THROWS_WITH(rng.normal(0, -1),
                    "normal: mean = 0, sd = -1; accepted: finite mean, finite sd >= 0");
  CHECK_THROWS_WITH(rng.lognormal(0, -0.1),
                    "lognormal: mu = 0, sigma = -0.1; accepted: finite mu, finite sigma >= 0");
  CHECK_THROWS_WITH(rng.gamma(0, 1),
                    "gamma: shape = 0, scale = 1; accepted: finite shape > 0, finite scale > 0");
  CHECK_THROWS_WITH(rng.gamma(2, -1),
                    "gamma: shape = 2, scale = -1; accepted: finite shape > 0, finite scale > 0");
  CHECK_THROWS_WITH(rng.geometric(0.5), "geometric: mean = 0.5; accepted: finite mean >= 1");
  CHECK_THROWS_WITH(rng.poisson(-1), "poisson: lambda = -1; accepted: finite 0 <= lambda <= 1e15");
  CHECK_THROWS_WITH(rng.poisson(2e15),
                    "poisson: lambda = 2e+15; accepted: finite 0 <= lambda <= 1e15");
  CHECK_THROWS_WITH(rng.lognormal_from_mean_p99(0, 5),
                    "lognormal_from_mean_p99: mean = 0; accepted: finite 0 < mean < p99 <= 14.97 "
                    "* mean");
  CHECK_THROWS_WITH(rng.lognormal_from_mean_p99(2, 1.5),
                    "lognormal_from_mean_p99: p99 = 1.5 is not above mean = 2; accepted: finite "
                    "0 < mean < p99 <= 14.97 * mean");
  CHECK_THROWS_WITH(capsim::lognormal_params_from_mean_p99(2, 2),
                    "lognormal_from_mean_p99: p99 = 2 is not above mean = 2; accepted: finite "
                    "0 < mean < p99 <= 14.97 * mean");
  // exp(z^2 / 2) = 14.968 is the largest p99 / mean any lognormal has.
  CHECK_THROWS_WITH(capsim::lognormal_params_from_mean_p99(1, 15),
                    "lognormal_from_mean_p99: p99 / mean = 15 is too large for any lognormal; "
                    "accepted: finite 0 < mean < p99 <= 14.97 * mean");
  CHECK_THROWS_WITH(Rng::from_state({0, 0, 0, 0}),
                    "Rng::from_state: all four state words are zero; accepted: a state with at "
                    "least one non-zero word");
  CHECK_THROWS_AS(rng.exponential(-1), capsim::Error);

  // None of the rejected calls drew a word: the stream is where a fresh Rng(42) starts.
  CHECK(rng.next_u64() == 1546998764402558742u);
}

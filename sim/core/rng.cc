#include "sim/core/rng.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "sim/core/error.h"

namespace capsim {
namespace {

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio

// The standard normal 0.99 quantile, Phi^-1(0.99), to double precision.
constexpr double kZ99 = 2.3263478740408408;

// The splitmix64 output function: a bijective 64-bit mixer (Stafford's "Mix13").
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t splitmix64_next(std::uint64_t& state) {
  state += kGolden;
  return mix64(state);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Shortest text that reads back as the same double ("0.1", "2", "1e-05"), so messages show
// exactly what the caller passed.
std::string num(double x) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, result.ptr);
}

[[noreturn]] void reject(const std::string& where, const std::string& what,
                         const std::string& accepted) {
  throw Error(where + ": " + what + "; accepted: " + accepted);
}

bool finite_positive(double x) { return std::isfinite(x) && x > 0; }

// log(k!) for integral k >= 0. Below 10, the log of the exact factorial; from 10 on, the
// Stirling series through the k^-7 term, whose truncation error there is under 1e-12
// absolute (the next term is 1/(1188 k^9)). Our own code rather than std::lgamma, whose
// accuracy differs between libms.
double log_factorial(double k) {
  static constexpr double kFactorials[10] = {1,    1,    2,     6,      24,
                                             120,  720,  5040,  40320,  362880};
  if (k < 10) return std::log(kFactorials[static_cast<int>(k)]);
  constexpr double kHalfLog2Pi = 0.91893853320467274178;
  const double r = 1.0 / k;
  const double r2 = r * r;
  const double series = r * (1.0 / 12 - r2 * (1.0 / 360 - r2 * (1.0 / 1260 - r2 / 1680)));
  return (k + 0.5) * std::log(k) - k + kHalfLog2Pi + series;
}

}  // namespace

LognormalParams lognormal_params_from_mean_p99(double mean, double p99) {
  const std::string where = "lognormal_from_mean_p99";
  const std::string accepted = "finite 0 < mean < p99 <= 14.97 * mean";
  if (!finite_positive(mean)) reject(where, "mean = " + num(mean), accepted);
  if (!(std::isfinite(p99) && p99 > mean)) {
    reject(where, "p99 = " + num(p99) + " is not above mean = " + num(mean), accepted);
  }
  // With d = ln(p99) - ln(mean), the two defining equations reduce to
  //   sigma^2 / 2 - z * sigma + d = 0,   sigma = z -+ sqrt(z^2 - 2d).
  // Real roots need d <= z^2 / 2, i.e. p99 / mean <= exp(z^2 / 2) ~ 14.97.
  const double d = std::log(p99) - std::log(mean);
  const double discriminant = kZ99 * kZ99 - 2 * d;
  if (discriminant < 0) {
    reject(where, "p99 / mean = " + num(p99 / mean) + " is too large for any lognormal",
           accepted);
  }
  const double sigma = kZ99 - std::sqrt(discriminant);
  return LognormalParams{std::log(mean) - sigma * sigma / 2, sigma};
}

Rng::Rng(std::uint64_t seed) {
  // splitmix64 is a bijection of its counter, so at most one of four consecutive outputs is
  // zero and the all-zero xoshiro state (a fixed point) cannot arise.
  std::uint64_t sm = seed;
  for (auto& word : s_) word = splitmix64_next(sm);
}

Rng Rng::from_state(const std::array<std::uint64_t, 4>& state) {
  if (state[0] == 0 && state[1] == 0 && state[2] == 0 && state[3] == 0) {
    reject("Rng::from_state", "all four state words are zero",
           "a state with at least one non-zero word");
  }
  Rng rng;
  rng.s_ = state;
  return rng;
}

Rng Rng::split(std::uint64_t stream) const {
  // Chain the mixer over the stream id and every state word: any change to either changes
  // the child seed unpredictably. Adding kGolden before each mix keeps zero inputs away from
  // mix64's fixed point at zero.
  std::uint64_t h = mix64(stream + kGolden);
  for (const std::uint64_t word : s_) h = mix64((h ^ word) + kGolden);
  return Rng(h);
}

std::uint64_t Rng::next_u64() {
  // xoshiro256**, transcribed from Blackman & Vigna's reference xoshiro256starstar.c.
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform01() {
  // The top 53 bits are the generator's strongest; 2^-53 scaling is exact.
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double Rng::uniform(double a, double b) {
  if (!(std::isfinite(a) && std::isfinite(b) && a <= b)) {
    reject("uniform", "a = " + num(a) + ", b = " + num(b), "finite a <= b");
  }
  return a + (b - a) * uniform01();
}

std::int64_t Rng::uniform_int(std::int64_t lo, std::int64_t hi) {
  if (lo > hi) {
    reject("uniform_int", "lo = " + std::to_string(lo) + " > hi = " + std::to_string(hi),
           "lo <= hi");
  }
  // Unsigned arithmetic wraps, so this is hi - lo even when the signed subtraction would
  // overflow.
  const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
  if (span == std::numeric_limits<std::uint64_t>::max()) {
    return static_cast<std::int64_t>(next_u64());
  }
  const std::uint64_t n = span + 1;
  // 2^64 mod n. Accepting only x >= threshold leaves 2^64 - threshold candidates, a
  // multiple of n, so x % n is exactly uniform.
  const std::uint64_t threshold = (0 - n) % n;
  std::uint64_t x = next_u64();
  while (x < threshold) x = next_u64();
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + x % n);
}

double Rng::exponential(double mean) {
  if (!finite_positive(mean)) reject("exponential", "mean = " + num(mean), "finite mean > 0");
  // 1 - U lies in (0, 1], so the log is finite. "0.0 - log" rather than "-log" so that
  // U = 0 gives +0, not -0.
  return mean * (0.0 - std::log(1.0 - uniform01()));
}

double Rng::normal(double mean, double sd) {
  if (!(std::isfinite(mean) && std::isfinite(sd) && sd >= 0)) {
    reject("normal", "mean = " + num(mean) + ", sd = " + num(sd), "finite mean, finite sd >= 0");
  }
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return mean + sd * spare_normal_;
  }
  // Marsaglia's polar method: needs only log and sqrt (no sin/cos, whose last bits vary
  // more between libms than log's), at the cost of rejecting 1 - pi/4 of the pairs.
  double u, v, s;
  do {
    u = 2 * uniform01() - 1;
    v = 2 * uniform01() - 1;
    s = u * u + v * v;
  } while (s >= 1 || s == 0);
  const double factor = std::sqrt(-2 * std::log(s) / s);
  spare_normal_ = v * factor;
  has_spare_normal_ = true;
  return mean + sd * (u * factor);
}

double Rng::lognormal(double mu, double sigma) {
  if (!(std::isfinite(mu) && std::isfinite(sigma) && sigma >= 0)) {
    reject("lognormal", "mu = " + num(mu) + ", sigma = " + num(sigma),
           "finite mu, finite sigma >= 0");
  }
  return std::exp(normal(mu, sigma));
}

double Rng::lognormal_from_mean_p99(double mean, double p99) {
  const LognormalParams p = lognormal_params_from_mean_p99(mean, p99);
  return lognormal(p.mu, p.sigma);
}

double Rng::gamma(double shape, double scale) {
  if (!(finite_positive(shape) && finite_positive(scale))) {
    reject("gamma", "shape = " + num(shape) + ", scale = " + num(scale),
           "finite shape > 0, finite scale > 0");
  }
  if (shape < 1) {
    // Marsaglia & Tsang's boost: if G ~ Gamma(k + 1) and U ~ U(0, 1], G * U^(1/k) ~ Gamma(k).
    // U^(1/k) is written exp(log(U) / k) to stay within log/exp.
    const double g = gamma(shape + 1, 1.0);
    const double u = 1.0 - uniform01();
    return scale * g * std::exp(std::log(u) / shape);
  }
  // Marsaglia & Tsang (2000), "A simple method for generating gamma variables", for k >= 1:
  // propose d * (1 + c x)^3 with x standard normal, accept by a cheap squeeze first and
  // the exact log test second. Acceptance is above 95% for every k >= 1.
  const double d = shape - 1.0 / 3;
  const double c = 1.0 / std::sqrt(9 * d);
  for (;;) {
    double x, v;
    do {
      x = normal(0, 1);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = uniform01();
    const double x2 = x * x;
    if (u < 1 - 0.0331 * x2 * x2) return scale * d * v;
    if (std::log(u) < 0.5 * x2 + d * (1 - v + std::log(v))) return scale * d * v;
  }
}

std::int64_t Rng::geometric(double mean) {
  if (!(std::isfinite(mean) && mean >= 1)) {
    reject("geometric", "mean = " + num(mean), "finite mean >= 1");
  }
  // Draw first so that every call takes exactly one word, whatever the mean.
  const double u = 1.0 - uniform01();
  if (mean == 1) return 1;
  // Inversion: P(floor(log U / log q) >= k) = P(U <= q^k) = q^k with q = 1 - p, which is
  // the tail of the number of failures before the first success.
  const double failures = std::floor(std::log(u) / std::log(1.0 - 1.0 / mean));
  // Below 2^63 the largest double is 2^63 - 1024, so 1 + failures still fits.
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (failures >= kTwoTo63) return std::numeric_limits<std::int64_t>::max();
  return 1 + static_cast<std::int64_t>(failures);
}

std::int64_t Rng::poisson(double lambda) {
  if (!(std::isfinite(lambda) && lambda >= 0 && lambda <= 1e15)) {
    // Above ~1e15 neighbouring counts stop being distinct doubles near lambda.
    reject("poisson", "lambda = " + num(lambda), "finite 0 <= lambda <= 1e15");
  }
  if (lambda == 0) return 0;
  if (lambda < 10) {
    // Knuth: the count of uniforms whose running product stays above e^-lambda. Cost grows
    // with lambda, which is why large lambdas switch method.
    const double limit = std::exp(-lambda);
    std::int64_t k = 0;
    double product = uniform01();
    while (product > limit) {
      ++k;
      product *= uniform01();
    }
    return k;
  }
  // PTRS: W. Hoermann, "The transformed rejection method for generating Poisson random
  // variables", Insurance: Mathematics and Economics 12 (1993). Constants from the paper;
  // the structure follows numpy's random_poisson_ptrs so results can be cross-checked.
  const double slam = std::sqrt(lambda);
  const double loglam = std::log(lambda);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double log_inv_alpha = std::log(1.1239 + 1.1328 / (b - 3.4));
  const double vr = 0.9277 - 3.6224 / (b - 2);
  for (;;) {
    const double u = uniform01() - 0.5;
    const double v = uniform01();
    const double us = 0.5 - std::fabs(u);
    // Kept as a double until accepted: near us = 0 the expression is huge or -inf, and
    // converting that to an integer would be undefined.
    const double k = std::floor((2 * a / us + b) * u + lambda + 0.43);
    if (us >= 0.07 && v <= vr) return static_cast<std::int64_t>(k);
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + log_inv_alpha - std::log(a / (us * us) + b) <=
        -lambda + k * loglam - log_factorial(k)) {
      return static_cast<std::int64_t>(k);
    }
  }
}

}  // namespace capsim

// Seeded random numbers that are the same everywhere.
//
// A capsim run must replay bit-for-bit from its seed on any machine. std::mt19937 would give
// the same raw words everywhere, but std::*_distribution algorithms differ between standard
// libraries, so every distribution here is our own code over our own generator:
//
//   generator: xoshiro256** (Blackman & Vigna, 2018), 256-bit state, period 2^256 - 1;
//   seeding:   the four state words are the first four outputs of splitmix64(seed), as the
//              xoshiro authors recommend.
//
// Integer outputs (next_u64, uniform_int, and the raw words behind every draw) are identical
// on all platforms. Floating-point draws use only + - * /, floor, fabs and std::sqrt (all
// exact or correctly rounded under IEEE 754) and std::log, std::exp. The caveat: libm's log and exp are accurate to within an
// ulp but not required to be correctly rounded, so a different libm could change the last bit
// of a sample and, very rarely through a rejection test, which sample is accepted. Likewise a
// compiler that fuses a*b+c into an FMA changes last bits; g++ in strict -std=c++20 mode does
// not (its -ffp-contract defaults to off there), other compilers want -ffp-contract=off.
//
// Parameter contract: every distribution checks its parameters and throws capsim::Error
// naming the method, the bad value and what is accepted. NaN is never accepted.
//
// Consumption contract: how many raw words each draw takes is part of the output and is
// documented below, because changing it changes every later sample of the stream.
//
// Not thread-safe: give each thread (or each independent consumer) its own Rng via split().
#pragma once

#include <array>
#include <cstdint>

namespace capsim {

// Parameters of a lognormal: ln(X) ~ Normal(mu, sigma).
struct LognormalParams {
  double mu;
  double sigma;
};

// The lognormal with the given mean and 99th percentile, both in the caller's units.
// Solves mean = exp(mu + sigma^2/2), p99 = exp(mu + z*sigma) with z = 2.326347874 (the
// standard normal 0.99 quantile); of the two roots sigma takes the smaller, the one whose
// median lies nearer the mean (the other fits the two numbers with an absurdly heavy tail).
// Accepted: finite 0 < mean < p99 <= exp(z^2/2) * mean (~14.97 * mean); beyond that ratio
// no lognormal has that mean and p99. Throws capsim::Error otherwise.
LognormalParams lognormal_params_from_mean_p99(double mean, double p99);

class Rng {
 public:
  // Seeds through splitmix64; every seed, 0 included, gives a valid (non-zero) state.
  explicit Rng(std::uint64_t seed);

  // Uses `state` as the raw xoshiro256** state, for checking against the reference
  // implementation. Throws capsim::Error if all four words are zero (a fixed point).
  static Rng from_state(const std::array<std::uint64_t, 4>& state);

  // An independent generator for substream `stream`, derived by hashing this generator's
  // current state with `stream` into a new seed. A pure function: it does not advance this
  // generator, the same (state, stream) always gives the same child, and distinct streams
  // give unrelated children. Typical use: one root Rng per run, one split per consumer, so
  // adding draws to one consumer does not shift another's samples.
  Rng split(std::uint64_t stream) const;

  // 64 uniformly random bits. One word.
  std::uint64_t next_u64();

  // Uniform on [0, 1) with 53 random bits (every multiple of 2^-53). One word.
  double uniform01();

  // Uniform on [a, b): a + (b - a) * uniform01(), so b itself can appear only through
  // rounding. Accepted: finite a <= b (a == b returns a). One word.
  double uniform(double a, double b);

  // Uniform integer on [lo, hi], both inclusive, exactly unbiased: draws below
  // 2^64 mod (hi - lo + 1) are rejected and redrawn. Accepted: lo <= hi.
  // One word, plus one per (rare) rejection.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi);

  // Exponential with the given mean (rate 1/mean), by inversion. Accepted: finite
  // mean > 0. One word.
  double exponential(double mean);

  // Normal, by Marsaglia's polar method. Each accepted pair of words (pairs are accepted
  // with probability pi/4) yields two standard normals; the second is kept as a spare and
  // used by the next call, taking no words. The spare is part of the state: a copy of the
  // Rng has it too, split() children start without one. Accepted: finite mean, finite
  // sd >= 0.
  double normal(double mean, double sd);

  // exp(normal(mu, sigma)); words as normal(). Accepted: finite mu, finite sigma >= 0.
  double lognormal(double mu, double sigma);

  // lognormal(p.mu, p.sigma) with p = lognormal_params_from_mean_p99(mean, p99). Callers
  // drawing many samples should compute the parameters once instead.
  double lognormal_from_mean_p99(double mean, double p99);

  // Gamma with the given shape k and scale theta (mean k*theta, variance k*theta^2), by
  // Marsaglia & Tsang (2000); for k < 1, draws Gamma(k + 1) * U^(1/k). A variable number
  // of words: per proposal one normal() and one uniform, proposals accepted > 95% of the
  // time; one more word when k < 1. Accepted: finite shape > 0, finite scale > 0.
  double gamma(double shape, double scale);

  // Geometric on {1, 2, 3, ...}: the number of Bernoulli(p = 1/mean) trials up to and
  // including the first success; mean `mean`, variance (1 - p) / p^2. By inversion, one word.
  // Accepted: finite mean >= 1 (mean == 1 always returns 1). Results too large for int64
  // (only for astronomically large means) saturate at INT64_MAX.
  std::int64_t geometric(double mean);

  // Poisson with mean lambda.
  //   lambda < 10:  Knuth's multiplication method; exact, about lambda + 1 words.
  //   lambda >= 10: Hoermann's PTRS transformed rejection with squeeze (1993), the method
  //                 numpy uses; exact but for the < 1e-12 absolute error of our
  //                 Stirling-series log(k!); about 2-3 words per sample at any lambda.
  // Accepted: finite 0 <= lambda <= 1e15 (lambda == 0 returns 0 and takes no words).
  std::int64_t poisson(double lambda);

 private:
  Rng() = default;

  std::array<std::uint64_t, 4> s_{};
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;  // a standard normal, valid when has_spare_normal_
};

}  // namespace capsim

// A weighted sample set whose memory does not grow with the number of samples: what a long run's
// per-step distributions (inter-token gaps, step times, batch sizes) cost when the exact sets
// (WeightedSamples) would grow with the trace (SimulationConfig::bounded_memory). Two kinds:
//
// - kIntegers (batch sizes): a count per integer value, 8 B per value up to the largest seen.
//   Every statistic equals the exact set's bit for bit (integer sums are exact in any order, and
//   the standard deviation walks the values in the exact set's sorted order).
// - kReals (gaps, step times): buckets of relative width 2^-kMantissaBits (the top bits of the
//   double's bit pattern), each keeping its count and the smallest and largest value it received;
//   one block of 2^kMantissaBits buckets (24 KiB) per binary order of magnitude that received a
//   value. Against the exact set: size, min and max exact, and every value whose bucket received
//   one distinct value; a percentile (numpy's linear interpolation over the expanded sorted list)
//   takes the k-th smallest value inside its bucket on the line between the bucket's min and max,
//   so it is off by less than the bucket's width, 2^-kMantissaBits x the value (0.098%); the mean
//   is the exact set's sum before it sorts (value x count per run of equal consecutive values, in
//   arrival order), bit for bit for one set, to rounding for merged ones; the standard deviation
//   comes from weighted Welford updates (merged: Chan et al.'s pairwise formula), equal to the
//   exact set's sorted two-pass sum to rounding (~1e-15 relative).
//
// Values must be finite and >= 0; kIntegers values whole numbers below kMaxInteger.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace capsim {

class BoundedSamples {
 public:
  enum class Kind { kReals, kIntegers };
  static constexpr int kMantissaBits = 10;
  static constexpr int kBucketsPerBinade = 1 << kMantissaBits;
  static constexpr std::int64_t kMaxInteger = std::int64_t{1} << 24;
  // The most a kReals percentile can differ from the exact one, relative to it: one bucket.
  static constexpr double kMaxRelativeError = 1.0 / kBucketsPerBinade;

  explicit BoundedSamples(Kind kind = Kind::kReals) : kind_(kind) {}
  Kind kind() const { return kind_; }
  // REQUIRES: value finite and >= 0 (and for kIntegers a whole number below kMaxInteger).
  void add(double value, std::int64_t count = 1);
  std::int64_t size() const { return total_; }
  bool empty() const { return total_ == 0; }
  double mean() const;
  double stddev() const;  // population
  double percentile(double p) const;  // REQUIRES: !empty(), 0 <= p <= 100
  // Adds every sample of this set to `other` (REQUIRES: the same kind).
  void merge_into(BoundedSamples& other) const;
  // Bytes held (buckets or counts and their index): bounded by the span of the values, not by
  // their number.
  std::size_t memory_bytes() const;

 private:
  struct Bucket {
    std::int64_t count = 0;
    double lo = 0, hi = 0;  // smallest and largest value received (meaningful when count > 0)
  };
  using Binade = std::vector<Bucket>;  // kBucketsPerBinade buckets
  // The k-th smallest value (0-based) of the expanded sorted list.
  double kth(std::int64_t k) const;
  void flush_run();

  Kind kind_;
  std::map<std::uint32_t, Binade> binades_;  // kReals: by the double's biased exponent
  std::vector<std::int64_t> counts_;          // kIntegers: by value
  std::int64_t total_ = 0;
  // mean(): the arrival-order sum of value x count per run of equal consecutive values.
  double sum_ = 0;
  double run_value_ = 0;
  std::int64_t run_count_ = 0;
  // stddev() of kReals: weighted Welford state.
  double welford_mean_ = 0, welford_m2_ = 0;
};

}  // namespace capsim

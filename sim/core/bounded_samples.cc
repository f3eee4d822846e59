#include "sim/core/bounded_samples.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>

namespace capsim {

namespace {

constexpr int kFractionBits = 52;  // of an IEEE-754 double

}  // namespace

void BoundedSamples::flush_run() {
  if (run_count_ > 0) sum_ += run_value_ * static_cast<double>(run_count_);
  run_count_ = 0;
}

void BoundedSamples::add(double value, std::int64_t count) {
  if (count <= 0) return;
  assert(std::isfinite(value) && value >= 0);
  // Runs of equal consecutive values summed as one product, as WeightedSamples::add merges them.
  if (run_count_ > 0 && run_value_ == value) {
    run_count_ += count;
  } else {
    flush_run();
    run_value_ = value;
    run_count_ = count;
  }
  if (kind_ == Kind::kIntegers) {
    assert(value < static_cast<double>(kMaxInteger) && value == std::floor(value));
    const auto i = static_cast<std::size_t>(value);
    if (i >= counts_.size()) counts_.resize(std::max(i + 1, 2 * counts_.size()));
    counts_[i] += count;
    total_ += count;
    return;
  }
  // Welford, weighted: the mean moves by count/n of the distance, M2 by the product of the
  // distances before and after.
  const std::int64_t n = total_ + count;
  const double delta = value - welford_mean_;
  welford_mean_ += delta * (static_cast<double>(count) / static_cast<double>(n));
  welford_m2_ += delta * (value - welford_mean_) * static_cast<double>(count);
  total_ = n;

  // Non-negative doubles order as their bit patterns: exponent, then fraction.
  const auto bits = std::bit_cast<std::uint64_t>(value + 0.0);  // +0.0: -0 counts as 0
  const auto exponent = static_cast<std::uint32_t>(bits >> kFractionBits);
  const auto index = static_cast<std::size_t>((bits >> (kFractionBits - kMantissaBits)) & (kBucketsPerBinade - 1));
  Binade& b = binades_[exponent];
  if (b.empty()) b.resize(kBucketsPerBinade);
  Bucket& k = b[index];
  if (k.count == 0) {
    k.lo = k.hi = value + 0.0;
  } else {
    if (value < k.lo) k.lo = value;
    if (value > k.hi) k.hi = value;
  }
  k.count += count;
}

double BoundedSamples::mean() const {
  if (!total_) return std::nan("");
  const double s = run_count_ > 0 ? sum_ + run_value_ * static_cast<double>(run_count_) : sum_;
  return s / static_cast<double>(total_);
}

double BoundedSamples::stddev() const {
  if (!total_) return std::nan("");
  if (kind_ == Kind::kIntegers) {
    // WeightedSamples::stddev over its sorted, merged runs: the same terms in the same order.
    double sum = 0;
    for (std::size_t v = 0; v < counts_.size(); ++v) {
      if (counts_[v]) sum += static_cast<double>(v) * static_cast<double>(counts_[v]);
    }
    const double m = sum / static_cast<double>(total_);
    double s = 0;
    for (std::size_t v = 0; v < counts_.size(); ++v) {
      if (!counts_[v]) continue;
      const double d = static_cast<double>(v) - m;
      s += d * d * static_cast<double>(counts_[v]);
    }
    return std::sqrt(s / static_cast<double>(total_));
  }
  return std::sqrt(std::max(0.0, welford_m2_) / static_cast<double>(total_));
}

double BoundedSamples::kth(std::int64_t k) const {
  std::int64_t seen = 0;
  if (kind_ == Kind::kIntegers) {
    for (std::size_t v = 0; v < counts_.size(); ++v) {
      seen += counts_[v];
      if (k < seen) return static_cast<double>(v);
    }
    assert(false && "k past the end");
    return std::nan("");
  }
  for (const auto& [exponent, binade] : binades_) {
    for (const Bucket& b : binade) {
      if (k < seen + b.count) {
        // The bucket's values are spread over [lo, hi]: its first is lo, its last hi, the ones
        // between on the line between them (exact when the bucket received one value).
        if (b.count == 1 || b.lo == b.hi) return b.lo;
        const double f = static_cast<double>(k - seen) / static_cast<double>(b.count - 1);
        return b.lo + f * (b.hi - b.lo);
      }
      seen += b.count;
    }
  }
  assert(false && "k past the end");
  return std::nan("");
}

double BoundedSamples::percentile(double p) const {
  assert(total_ > 0 && p >= 0 && p <= 100);
  const double rank = p / 100.0 * static_cast<double>(total_ - 1);
  const auto lo = static_cast<std::int64_t>(std::floor(rank));
  const double frac = rank - static_cast<double>(lo);
  const double a = kth(lo);
  if (frac == 0 || lo + 1 >= total_) return a;
  const double b = kth(lo + 1);
  return a + frac * (b - a);
}

void BoundedSamples::merge_into(BoundedSamples& other) const {
  if (total_ == 0) return;
  assert(kind_ == other.kind_);
  if (other.total_ == 0) {
    other = *this;
    return;
  }
  if (kind_ == Kind::kIntegers) {
    if (other.counts_.size() < counts_.size()) other.counts_.resize(counts_.size());
    for (std::size_t v = 0; v < counts_.size(); ++v) other.counts_[v] += counts_[v];
  }
  // Chan, Golub and LeVeque's pairwise update of the Welford state.
  const double n_a = static_cast<double>(other.total_), n_b = static_cast<double>(total_);
  const double n = n_a + n_b;
  const double delta = welford_mean_ - other.welford_mean_;
  other.welford_mean_ += delta * (n_b / n);
  other.welford_m2_ += welford_m2_ + delta * delta * (n_a * n_b / n);
  other.flush_run();
  other.sum_ += run_count_ > 0 ? sum_ + run_value_ * static_cast<double>(run_count_) : sum_;
  other.total_ += total_;
  for (const auto& [exponent, binade] : binades_) {
    Binade& mine = other.binades_[exponent];
    if (mine.empty()) {
      mine = binade;
      continue;
    }
    for (std::size_t i = 0; i < binade.size(); ++i) {
      const Bucket& from = binade[i];
      if (from.count == 0) continue;
      Bucket& to = mine[i];
      if (to.count == 0) {
        to = from;
      } else {
        if (from.lo < to.lo) to.lo = from.lo;
        if (from.hi > to.hi) to.hi = from.hi;
        to.count += from.count;
      }
    }
  }
}

std::size_t BoundedSamples::memory_bytes() const {
  // A std::map node holds its key and value beside three pointers and a colour.
  constexpr std::size_t kNode = sizeof(std::uint32_t) + sizeof(Binade) + 4 * sizeof(void*);
  std::size_t bytes = sizeof(*this) + counts_.capacity() * sizeof(counts_[0]);
  for (const auto& [exponent, binade] : binades_) bytes += kNode + binade.capacity() * sizeof(Bucket);
  return bytes;
}

}  // namespace capsim

#include "sim/core/stats.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>


#include "sim/core/error.h"
#include "sim/core/radix_sort.h"
#include "sim/core/sample_statistics.h"

namespace capsim {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

// ---- StreamingStats ----

void StreamingStats::merge(const StreamingStats& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    *this = other;
    return;
  }
  const double n_a = static_cast<double>(count_);
  const double n_b = static_cast<double>(other.count_);
  const double n = n_a + n_b;
  const double delta = other.mean_ - mean_;
  mean_ += delta * (n_b / n);
  m2_ += other.m2_ + delta * delta * (n_a * n_b / n);
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double StreamingStats::mean() const { return count_ == 0 ? kNaN : mean_; }

double StreamingStats::variance() const {
  return count_ == 0 ? kNaN : m2_ / static_cast<double>(count_);
}

double StreamingStats::sample_variance() const {
  return count_ < 2 ? kNaN : m2_ / static_cast<double>(count_ - 1);
}

double StreamingStats::stddev() const { return std::sqrt(variance()); }

double StreamingStats::min() const { return count_ == 0 ? kNaN : min_; }

double StreamingStats::max() const { return count_ == 0 ? kNaN : max_; }

// ---- Samples ----

void Samples::sort_if_needed() const {
  if (!sorted_) {
    // A radix sort by bit pattern (sim/core/radix_sort.h) sorts a run's thousands of latencies
    // several times faster than std::sort, to the same sequence of values, given a total order
    // in which -0.0 and +0.0 are equal as for `<`. Only non-negative values go to it: with a NaN
    // (no order) or a -0.0 (bits order it before +0.0) the sequence would differ. Latencies are
    // never negative; std::sort takes the rest.
    if (radix::has_sortable_keys(values_, [](double x) { return x; })) {
      std::vector<double> scratch;
      radix::sort_by_key(values_, scratch, [](double x) { return x; });
    } else {
      std::sort(values_.begin(), values_.end());
    }
    sorted_ = true;
  }
}

const std::vector<double>& Samples::sorted_values() const {
  sort_if_needed();
  return values_;
}

namespace sample_statistics {

void check_percentile(double p) {
  if (!(p >= 0 && p <= 100)) {
    char buf[64];
    const auto result = std::to_chars(buf, buf + sizeof buf, p);
    throw Error("percentile: p = " + std::string(buf, result.ptr) + "; accepted: 0 <= p <= 100");
  }
}

double interpolate(double lo, double hi, double fraction) {
  // numpy's _lerp form: it is exact at both ends (fraction 0 gives lo, 1 gives hi).
  const double diff = hi - lo;
  return fraction >= 0.5 ? hi - diff * (1 - fraction) : lo + diff * fraction;
}

double mean_in_order(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double sum = 0;
  for (const double x : values) sum += x;
  return sum / static_cast<double>(values.size());
}

}  // namespace sample_statistics

double Samples::percentile(double p) const {
  sample_statistics::check_percentile(p);
  if (values_.empty()) return kNaN;
  sort_if_needed();
  const double rank = p / 100 * static_cast<double>(values_.size() - 1);
  const std::size_t below = static_cast<std::size_t>(rank);
  if (below + 1 >= values_.size()) return values_.back();
  return sample_statistics::interpolate(values_[below], values_[below + 1], rank - static_cast<double>(below));
}

double Samples::mean() const {
  return values_.empty() ? kNaN : sum_in_order_ / static_cast<double>(values_.size());
}

double Samples::stddev() const {
  if (values_.empty()) return kNaN;
  sort_if_needed();
  const double m = sample_statistics::mean_in_order(values_);
  double squares = 0;
  for (const double x : values_) squares += (x - m) * (x - m);
  return std::sqrt(squares / static_cast<double>(values_.size()));
}

double Samples::min() const {
  if (values_.empty()) return kNaN;
  sort_if_needed();
  return values_.front();
}

double Samples::max() const {
  if (values_.empty()) return kNaN;
  sort_if_needed();
  return values_.back();
}

// ---- TimeWeightedStats ----

double TimeWeightedStats::integral(SimTime end) const {
  if (!started_) return 0.0;
  assert(end >= last_time_);
  const double area_ns = area_ns_ + last_value_ * static_cast<double>(end - last_time_);
  return area_ns / static_cast<double>(kNsPerSecond);
}

double TimeWeightedStats::mean(SimTime end) const {
  if (!started_) return kNaN;
  assert(end >= last_time_);
  if (end == start_) return last_value_;
  const double area_ns = area_ns_ + last_value_ * static_cast<double>(end - last_time_);
  return area_ns / static_cast<double>(end - start_);
}

double TimeWeightedStats::peak() const { return started_ ? peak_ : kNaN; }

double TimeWeightedStats::current() const { return started_ ? last_value_ : kNaN; }

}  // namespace capsim

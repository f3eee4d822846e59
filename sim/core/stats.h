// Summary statistics over simulation outputs.
//
//   StreamingStats     count, mean, variance, min, max in O(1) memory (Welford's update).
//   Samples            keeps every value, for exact percentiles (numpy's default method).
//   TimeWeightedStats  a piecewise-constant quantity over SimTime (queue length, memory in
//                      use), averaged over time rather than over updates.
//
// Units are the caller's: these classes never interpret the values. Empty summaries return
// quiet NaN from every statistic, so callers check count()/size() before reporting.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/core/time.h"

namespace capsim {

class StreamingStats {
 public:
  // Inline: the simulator adds three per engine step.
  void add(double x) {
    // Welford (1962): updating the mean and the sum of squared deviations incrementally
    // avoids the catastrophic cancellation of sum(x^2) - n*mean^2 when the mean is large
    // relative to the spread (e.g. timestamps, or latencies around a large constant).
    ++count_;
    const double delta = x - mean_;
    mean_ += delta / static_cast<double>(count_);
    m2_ += delta * (x - mean_);
    if (count_ == 1) {
      min_ = max_ = x;
    } else {
      min_ = std::min(min_, x);
      max_ = std::max(max_, x);
    }
  }

  // Folds `other` in, as if its values had been add()ed here (Chan et al.'s pairwise
  // update), e.g. to combine per-replica statistics.
  void merge(const StreamingStats& other);

  std::uint64_t count() const { return count_; }
  double mean() const;
  // Population variance (divides by n, like numpy.var's default ddof=0).
  double variance() const;
  // Sample variance (divides by n - 1); NaN when count() < 2.
  double sample_variance() const;
  // sqrt(variance()), the population standard deviation.
  double stddev() const;
  double min() const;
  double max() const;

 private:
  std::uint64_t count_ = 0;
  double mean_ = 0.0;
  double m2_ = 0.0;  // sum of squared deviations from the running mean
  double min_ = 0.0;
  double max_ = 0.0;
};

class Samples {
 public:
  void add(double x) {
    values_.push_back(x);
    sum_in_order_ += x;
    sorted_ = false;
  }
  void reserve(std::size_t n) { values_.reserve(n); }

  std::size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }

  // The p-th percentile, p in [0, 100], exactly as numpy.percentile's default ("linear")
  // method: with the values sorted ascending as v[0..n-1], rank r = p/100 * (n - 1), and
  // the result is v[floor(r)] + (r - floor(r)) * (v[floor(r)+1] - v[floor(r)]).
  // Throws capsim::Error for p outside [0, 100] or NaN.
  double percentile(double p) const;
  double median() const { return percentile(50); }

  // The values summed in the order they were added, over their count: the same digits whether
  // or not a percentile (which sorts the values) was asked first.
  double mean() const;
  // Population standard deviation (ddof = 0, numpy.std's default), computed in two passes
  // for accuracy, both over the values sorted ascending (their mean summed in that order, then
  // the squared deviations from it), so that it too does not depend on the queries before it.
  double stddev() const;
  double min() const;
  double max() const;

  // The values sorted ascending.
  const std::vector<double>& sorted_values() const;

 private:
  // Sorted lazily, on the first query after an add(), so adding stays O(1) and a run of
  // percentile queries sorts once. Const queries therefore mutate: a Samples must not be
  // queried from two threads at once.
  void sort_if_needed() const;

  mutable std::vector<double> values_;
  double sum_in_order_ = 0;  // of values_ in the order added (a sort reorders values_)
  mutable bool sorted_ = true;
};

// The time average of a quantity that holds its value between updates.
//
// add(t, v) says "from time t on, the value is v". The window starts at the first add()'s
// time; each value holds until the next add() or the end time given to a query. Times must
// not decrease (checked by assert: the simulator's clock never runs backwards). Several
// add()s at the same time are allowed; only the last one holds for any duration.
class TimeWeightedStats {
 public:
  // Inline: the simulator adds three per engine step.
  void add(SimTime time, double value) {
    if (!started_) {
      started_ = true;
      start_ = last_time_ = time;
      last_value_ = peak_ = value;
      return;
    }
    assert(time >= last_time_);
    area_ns_ += last_value_ * static_cast<double>(time - last_time_);
    last_time_ = time;
    last_value_ = value;
    peak_ = std::max(peak_, value);
  }

  bool empty() const { return !started_; }

  // The time average over [start_time(), end]: integral(end) / (end - start_time()).
  // When end == start_time() the window has no length and the result is the current value.
  // Precondition: end >= the last add()'s time. NaN when empty().
  double mean(SimTime end) const;

  // The integral of the quantity over [start_time(), end], in value-units x seconds (e.g.
  // requests x s). Precondition as for mean(). 0 when empty().
  double integral(SimTime end) const;

  // The largest value ever added, including one replaced at the same instant: a momentary
  // spike still happened, and capacity limits care about spikes. NaN when empty().
  double peak() const;

  // The last value added. NaN when empty().
  double current() const;
  SimTime start_time() const { return start_; }

 private:
  bool started_ = false;
  SimTime start_ = 0;
  SimTime last_time_ = 0;
  double last_value_ = 0.0;
  double peak_ = 0.0;
  // Integral up to last_time_ in value-units x ns; a double's ~16 significant digits are
  // ample for an average.
  double area_ns_ = 0.0;
};

}  // namespace capsim

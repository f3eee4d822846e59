#include "sim/core/weighted_samples.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include <boost/sort/spreadsort/float_sort.hpp>

namespace capsim {

void WeightedSamples::sort_if_needed() const {
  if (sorted_) return;
  // By value only: runs of equal value are merged below, so their order among themselves does
  // not matter. Boost's spreadsort (a radix/comparison hybrid) sorts the tens of thousands of
  // runs of a long run's step times several times faster than std::sort. Only non-negative
  // values go to it (step times, gaps and batch sizes always are): NaN has no order, and a value
  // with the sign bit set (-0.0, a tiny negative) overflows its signed range arithmetic (UBSan:
  // float_sort.hpp), so those sets fall back to std::sort.
  const bool ordered = std::none_of(runs_.begin(), runs_.end(), [](const std::pair<double, std::int64_t>& r) {
    return std::isnan(r.first) || std::signbit(r.first);
  });
  if (ordered) {
    using Run = std::pair<double, std::int64_t>;
    boost::sort::spreadsort::float_sort(
        runs_.begin(), runs_.end(),
        [](const Run& r, unsigned offset) {
          return boost::sort::spreadsort::float_mem_cast<double, std::int64_t>(r.first) >> offset;
        },
        [](const Run& a, const Run& b) { return a.first < b.first; });
  } else {
    std::sort(runs_.begin(), runs_.end());
  }
  // Merge equal neighbours so lookups walk fewer runs.
  std::vector<std::pair<double, std::int64_t>> merged;
  merged.reserve(runs_.size());
  for (const auto& r : runs_) {
    if (!merged.empty() && merged.back().first == r.first) merged.back().second += r.second;
    else merged.push_back(r);
  }
  runs_.swap(merged);
  sorted_ = true;
}

double WeightedSamples::mean() const {
  double s = 0;
  for (const auto& [v, c] : runs_) s += v * static_cast<double>(c);
  return total_ ? s / static_cast<double>(total_) : std::nan("");
}

double WeightedSamples::stddev() const {
  if (!total_) return std::nan("");
  const double m = mean();
  double s = 0;
  for (const auto& [v, c] : runs_) s += (v - m) * (v - m) * static_cast<double>(c);
  return std::sqrt(s / static_cast<double>(total_));
}

namespace {

// The index-th and (index+1)-th smallest of the expanded list of sorted runs, in one walk (the
// second is the last value when index + 1 is past the end).
std::pair<double, double> at_and_next(const std::vector<std::pair<double, std::int64_t>>& runs,
                                      std::int64_t index) {
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    seen += runs[i].second;
    if (index < seen) {
      if (index + 1 < seen || i + 1 == runs.size()) return {runs[i].first, runs[i].first};
      return {runs[i].first, runs[i + 1].first};
    }
  }
  return {runs.back().first, runs.back().first};
}

}  // namespace

double WeightedSamples::percentile(double p) const {
  assert(total_ > 0 && p >= 0 && p <= 100);
  sort_if_needed();
  const double rank = p / 100.0 * static_cast<double>(total_ - 1);
  const auto lo = static_cast<std::int64_t>(std::floor(rank));
  const double frac = rank - static_cast<double>(lo);
  // The largest (max, p100) is the last run's value: no walk.
  if (lo + 1 >= total_) return runs_.back().first;
  const auto [a, b] = at_and_next(runs_, lo);
  if (frac == 0) return a;
  return a + frac * (b - a);
}

}  // namespace capsim

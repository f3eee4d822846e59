#include "sim/core/weighted_samples.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include <boost/sort/spreadsort/float_sort.hpp>

namespace capsim {

void WeightedSamples::add_run(double value, std::int64_t count) {
  if (!runs_.empty() && value < runs_.back().first) sorted_ = false;
  runs_.emplace_back(value, count);
  total_ += count;
}

void WeightedSamples::sort_if_needed() const {
  if (sorted_) return;
  // By value only: runs of equal value are merged below, so their order among themselves does
  // not matter. Boost's spreadsort (a radix/comparison hybrid) sorts the tens of thousands of
  // runs of a long run's step times several times faster than std::sort. It needs a total
  // order: NaN (never a sample here) would break it, so it falls back to std::sort then.
  const bool ordered = std::none_of(runs_.begin(), runs_.end(),
                                    [](const std::pair<double, std::int64_t>& r) { return std::isnan(r.first); });
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

double WeightedSamples::at(std::int64_t index) const {
  std::int64_t seen = 0;
  for (const auto& [v, c] : runs_) {
    seen += c;
    if (index < seen) return v;
  }
  return runs_.back().first;
}

double WeightedSamples::percentile(double p) const {
  assert(total_ > 0 && p >= 0 && p <= 100);
  sort_if_needed();
  const double rank = p / 100.0 * static_cast<double>(total_ - 1);
  const auto lo = static_cast<std::int64_t>(std::floor(rank));
  const double frac = rank - static_cast<double>(lo);
  const double a = at(lo);
  if (frac == 0 || lo + 1 >= total_) return a;
  return a + frac * (at(lo + 1) - a);
}

}  // namespace capsim

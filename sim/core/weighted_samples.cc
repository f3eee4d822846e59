#include "sim/core/weighted_samples.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "sim/core/radix_sort.h"

namespace capsim {

void WeightedSamples::sort_if_needed() const {
  if (sorted_) return;
  // By value only: runs of equal value are merged below, so their order among themselves does
  // not matter. A radix sort by bit pattern (sim/core/radix_sort.h) sorts the tens of thousands
  // of runs of a long run's step times several times faster than a comparison sort. Only
  // non-negative values go to it (step times, gaps and batch sizes always are): NaN has no order,
  // and a value with the sign bit set orders wrongly by bits, so those sets go to std::sort.
  using Run = std::pair<double, std::int64_t>;
  const auto value = [](const Run& r) { return r.first; };
  if (radix::has_sortable_keys(runs_, value)) {
    // Swaps buffers with sort_room_ or leaves it as scratch; the counts' room is kept only when
    // reserve_sort_room asked for it (a sorted set does not otherwise hold 48 KiB).
    if (count_room_.capacity() >= radix::kCountWords) {
      radix::sort_by_key(runs_, sort_room_, count_room_, value);
    } else {
      radix::sort_by_key(runs_, sort_room_, value);
    }
    sort_room_.clear();  // kept allocated (see reserve_sort_room); a copy of the set copies none of it
  } else {
    std::sort(runs_.begin(), runs_.end());
  }
  // Merge equal neighbours (in place: merging only shrinks) so lookups walk fewer runs.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < runs_.size(); ++i) {
    if (kept > 0 && runs_[kept - 1].first == runs_[i].first) runs_[kept - 1].second += runs_[i].second;
    else runs_[kept++] = runs_[i];
  }
  runs_.resize(kept);
  sorted_ = true;
}

void WeightedSamples::bound_memory(BoundedSamples::Kind kind) {
  assert(empty());
  runs_ = {};
  sort_room_ = {};
  count_room_ = {};
  sorted_ = true;
  bounded_.emplace(kind);
}

std::size_t WeightedSamples::memory_bytes() const {
  if (bounded_) return bounded_->memory_bytes();
  return (runs_.capacity() + sort_room_.capacity()) * sizeof(runs_[0]) +
         count_room_.capacity() * sizeof(count_room_[0]);
}

void WeightedSamples::merge_bounded_into(WeightedSamples& other) const {
  // An exact set meeting a bounded one becomes bounded: its runs go into a histogram first.
  if (!other.bounded_) {
    const std::vector<std::pair<double, std::int64_t>> runs = std::move(other.runs_);
    other.total_ = 0;
    other.bound_memory(bounded_->kind());  // this set is the bounded one
    for (const auto& [v, c] : runs) other.add_run(v, c);
  }
  if (bounded_) {
    bounded_->merge_into(*other.bounded_);
  } else {
    for (const auto& [v, c] : runs_) other.bounded_->add(v, c);
  }
  other.total_ += total_;
}

double WeightedSamples::mean() const {
  if (bounded_) return bounded_->mean();
  double s = 0;
  for (const auto& [v, c] : runs_) s += v * static_cast<double>(c);
  return total_ ? s / static_cast<double>(total_) : std::nan("");
}

double WeightedSamples::stddev() const {
  if (bounded_) return bounded_->stddev();
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
  if (bounded_) return bounded_->percentile(p);
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

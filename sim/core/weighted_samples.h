// Samples stored as (value, count) runs: equal consecutive values cost one entry. Inter-token
// gaps come in runs (every sequence of a decode step sees the same gap), so a million gaps take
// a few thousand entries. Statistics equal those of the expanded list, percentiles included
// (numpy's linear interpolation). A set told bound_memory() keeps a BoundedSamples instead: memory
// flat in the number of samples, percentiles within 0.1% (sim/core/bounded_samples.h says exactly
// what stays exact).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "sim/core/bounded_samples.h"
#include "sim/core/radix_sort.h"

namespace capsim {

class WeightedSamples {
 public:
  // Inline: the simulator adds every inter-token gap (a run extended in place, mostly).
  void add(double value, std::int64_t count = 1) {
    if (count <= 0) return;
    if (!runs_.empty() && runs_.back().first == value) {
      runs_.back().second += count;
      total_ += count;
      return;
    }
    add_run(value, count);
  }
  std::int64_t size() const { return total_; }
  bool empty() const { return total_ == 0; }
  // From now on the samples go to a BoundedSamples of that kind (SimulationConfig::bounded_memory).
  // REQUIRES: empty().
  void bound_memory(BoundedSamples::Kind kind = BoundedSamples::Kind::kReals);
  bool bounded() const { return bounded_.has_value(); }
  // Bytes held by the samples (not the object itself): grows with the runs unless bounded().
  std::size_t memory_bytes() const;
  double mean() const;
  double stddev() const;  // population
  double percentile(double p) const;  // REQUIRES: !empty(), 0 <= p <= 100
  double min() const { return percentile(0); }
  // Adds every sample of this set to `other`. Into an empty set this is a copy of the runs as
  // they stand: consecutive runs never hold equal values (add() extends a run instead, a sort
  // merges them), so adding them one by one would rebuild exactly these runs.
  void merge_into(WeightedSamples& other) const {
    if (bounded_ || other.bounded_) {
      merge_bounded_into(other);
      return;
    }
    if (other.runs_.empty()) {
      other.runs_ = runs_;
      other.sorted_ = sorted_;
      other.total_ = total_;
      return;
    }
    for (const auto& [v, c] : runs_) other.add(v, c);
  }
  double max() const { return percentile(100); }
  // Allocates now what the first statistic's sort will need, so that another thread can then
  // compute every statistic without calling malloc or free (a thread's first one sets up a
  // glibc arena of its own, whose fresh pages cost more than the work: sim/cluster's
  // end-of-run summary). The room is kept until the set is destroyed.
  void reserve_sort_room() const {
    if (sorted_ || bounded_) return;
    sort_room_.reserve(runs_.size());
    count_room_.reserve(radix::kCountWords);
  }

 private:
  // A new run (add's other path; inline too: every step adds one or two).
  void add_run(double value, std::int64_t count) {
    if (bounded_) [[unlikely]] {
      bounded_->add(value, count);
      total_ += count;
      return;
    }
    if (!runs_.empty() && value < runs_.back().first) sorted_ = false;
    runs_.emplace_back(value, count);
    total_ += count;
  }
  void sort_if_needed() const;
  void merge_bounded_into(WeightedSamples& other) const;

  mutable std::vector<std::pair<double, std::int64_t>> runs_;
  mutable std::vector<std::pair<double, std::int64_t>> sort_room_;  // the radix sort's scratch
  mutable std::vector<std::uint32_t> count_room_;  // its digit counts, when reserve_sort_room kept them
  mutable bool sorted_ = true;
  std::int64_t total_ = 0;
  std::optional<BoundedSamples> bounded_;  // set by bound_memory(); runs_ then stays empty
};

}  // namespace capsim

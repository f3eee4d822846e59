// Steady-state output analysis of one simulation output series (observations in the order they
// were generated, e.g. each request's latency in arrival order): where the warm-up transient
// ends, and confidence intervals for the mean and percentiles of what follows.
//
// Warm-up: MSER-5 (White, K. P. Jr. 1997, "An effective truncation heuristic for bias reduction
// in simulation output", Simulation 69(6):323-334; White, Cobb & Spratt 2000, "A comparison of
// five steady-state truncation heuristics for simulation", Proc. Winter Simulation Conference,
// 755-760). The series is averaged in consecutive batches of 5 (Z_1..Z_k); the truncation d*
// (in batches) minimises MSER(d) = sum_{j>d} (Z_j - mean_{j>d} Z)^2 / (k - d)^2 over the first
// half, 0 <= d <= k/2 (White et al.: the truncation point is taken from the first half of the
// run). A minimum on the boundary d = k/2 means the transient did not end within the first half:
// the run never settled — too short, or not stationary at all (a queue that keeps growing).
//
// Intervals: non-overlapping batch means on the truncated series (Law, A. M., "Simulation
// Modeling and Analysis", 5th ed., McGraw-Hill 2015, the method of batch means; 10-30 batches
// after Schmeiser 1982, "Batch size effects in the analysis of simulation output", Operations
// Research 30(3)). `batches` equal batches (the earliest leftover observations are dropped);
// the statistic is computed on each batch and the interval is the pooled estimate
// +/- t_{k-1, (1+level)/2} x sd(batch statistics) / sqrt(k). For a percentile the per-batch
// statistic is the batch's percentile ("batch quantiles"); its mean carries a small-batch bias,
// so the point estimate stays the pooled percentile and only the spread comes from the batches.
// Batch means rather than independent replications: one run pays the warm-up once, costs
// nothing extra and stays byte-identical for a seed; the lag-1 correlation of the batch
// statistics is reported so that batches too short to be independent show.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace capsim {

struct MserResult {
  std::size_t truncate = 0;      // observations to drop from the front (5 x d*)
  std::size_t batches = 0;       // k: batches of 5 analysed
  bool settled = true;           // d* < k/2: the transient ended within the first half
};

// REQUIRES: nothing; fewer than 10 observations give truncate 0, settled false.
MserResult mser5(const std::vector<double>& series);

struct Interval {
  double estimate = 0;   // the statistic on the whole (truncated) series
  double low = 0, high = 0;
  std::size_t batches = 0;
  double lag1_correlation = 0;  // of the batch statistics; near 0 when batches are independent
  bool valid = false;           // enough observations (>= 2 per batch and >= 2 batches)
};

// `statistic` < 0: the mean; otherwise the percentile in [0, 100] (numpy's linear method).
Interval batch_interval(const std::vector<double>& series, double statistic, std::size_t batches = 20,
                        double level = 0.95);
// The same for several statistics at once (each batch sorted once).
std::vector<Interval> batch_intervals(const std::vector<double>& series, const std::vector<double>& statistics,
                                      std::size_t batches = 20, double level = 0.95);

// The batch means of `series` in `batches` equal batches (earliest leftovers dropped), for trend
// checks; empty when there are fewer than 2 observations per batch.
std::vector<double> batch_means(const std::vector<double>& series, std::size_t batches = 20);

// The t quantile for `df` degrees of freedom at cumulative probability p.
double student_t_quantile(double df, double p);

}  // namespace capsim

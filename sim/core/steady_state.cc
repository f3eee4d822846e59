#include "sim/core/steady_state.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>

#include "sim/core/sample_statistics.h"
#include "sim/core/stats.h"

namespace capsim {

MserResult mser5(const std::vector<double>& series) {
  MserResult out;
  const std::size_t k = series.size() / 5;
  out.batches = k;
  if (k < 2) {
    out.settled = false;
    return out;
  }
  std::vector<double> z(k);
  for (std::size_t j = 0; j < k; ++j) {
    double s = 0;
    for (std::size_t i = 0; i < 5; ++i) s += series[5 * j + i];
    z[j] = s / 5;
  }
  // Suffix sums give each MSER(d) in O(1): sum (Z - mean)^2 = sum Z^2 - (sum Z)^2 / n.
  std::vector<double> sum(k + 1, 0.0), sum2(k + 1, 0.0);
  for (std::size_t j = k; j-- > 0;) {
    sum[j] = sum[j + 1] + z[j];
    sum2[j] = sum2[j + 1] + z[j] * z[j];
  }
  // d ranges over the first half only (White, Cobb & Spratt 2000 select the truncation point from
  // the first half of the run): near the end a few batches can have a spuriously small spread (a
  // closed loop drains when arrivals stop), which an unrestricted search would pick. A minimum on
  // the boundary d = k/2 means the transient did not end within the first half: not settled.
  const std::size_t last = k / 2;
  std::size_t best = 0;
  double best_value = INFINITY;
  for (std::size_t d = 0; d <= last && d + 2 <= k; ++d) {
    const double n = static_cast<double>(k - d);
    const double ss = std::max(0.0, sum2[d] - sum[d] * sum[d] / n);
    const double v = ss / (n * n);
    if (v < best_value) {  // the earliest minimum: never truncate more than needed
      best_value = v;
      best = d;
    }
  }
  out.truncate = 5 * best;
  out.settled = best < last;
  return out;
}

double student_t_quantile(double df, double p) {
  boost::math::students_t dist(df);
  return boost::math::quantile(dist, p);
}

namespace {

double statistic_of(const Samples& s, double statistic) {
  return statistic < 0 ? s.mean() : s.percentile(statistic);
}

// The statistics of `values` (a batch, in series order) exactly as a Samples holding them gives
// them (statistic_of), asked in `statistics`' order, without sorting the batch when it can:
// a mean sums the values in series order (as Samples::mean, whatever was asked before it), and
// percentiles asked in non-decreasing order are order statistics found by selection
// (std::nth_element puts the same value at a rank as a sort; the one above it is the least of
// the rest), then interpolated by Samples::percentile's formula. Percentiles out of order fall
// back to Samples. `values` is reordered.
void statistics_of(std::vector<double>& values, const std::vector<double>& statistics, double* out) {
  const std::size_t n = values.size();
  bool selectable = true;
  double last = -1;
  for (const double st : statistics) {
    if (st < 0) continue;  // a mean: summed before any selection reorders the values
    if (st < last) selectable = false;
    last = st;
  }
  if (!selectable || n == 0) {
    Samples s;
    s.reserve(n);
    for (const double x : values) s.add(x);
    for (std::size_t i = 0; i < statistics.size(); ++i) out[i] = statistic_of(s, statistics[i]);
    return;
  }
  const bool mean_asked = std::any_of(statistics.begin(), statistics.end(), [](double st) { return st < 0; });
  const double mean = mean_asked ? sample_statistics::mean_in_order(values) : 0;
  std::size_t from = 0;  // values[0, from) <= values[from, n); values[from - 1] is at its rank
  for (std::size_t i = 0; i < statistics.size(); ++i) {
    const double p = statistics[i];
    if (p < 0) {
      out[i] = mean;
      continue;
    }
    sample_statistics::check_percentile(p);
    const double rank = p / 100 * static_cast<double>(n - 1);
    const std::size_t below = static_cast<std::size_t>(rank);
    const auto at = values.begin() + static_cast<std::ptrdiff_t>(below);
    if (below >= from) {
      std::nth_element(values.begin() + static_cast<std::ptrdiff_t>(from), at, values.end());
      from = below + 1;
    }
    if (below + 1 >= n) {
      out[i] = *at;  // the largest (Samples: values_.back())
      continue;
    }
    const double hi = *std::min_element(at + 1, values.end());
    out[i] = sample_statistics::interpolate(*at, hi, rank - static_cast<double>(below));
  }
}

}  // namespace

std::vector<Interval> batch_intervals(const std::vector<double>& series, const std::vector<double>& statistics,
                                      std::size_t batches, double level) {
  std::vector<Interval> out(statistics.size());
  if (series.empty()) return out;
  std::vector<double> all(series), estimates(statistics.size());
  statistics_of(all, statistics, estimates.data());
  for (std::size_t i = 0; i < statistics.size(); ++i) {
    out[i].estimate = estimates[i];
    out[i].low = out[i].high = out[i].estimate;
  }
  const std::size_t m = batches ? series.size() / batches : 0;
  if (batches < 2 || m < 2) return out;
  const std::size_t skip = series.size() - m * batches;  // the earliest leftovers
  std::vector<std::vector<double>> b(statistics.size(), std::vector<double>(batches));
  std::vector<double> batch(m), values(statistics.size());
  for (std::size_t j = 0; j < batches; ++j) {
    const auto first = series.begin() + static_cast<std::ptrdiff_t>(skip + j * m);
    std::copy(first, first + static_cast<std::ptrdiff_t>(m), batch.begin());
    statistics_of(batch, statistics, values.data());
    for (std::size_t i = 0; i < statistics.size(); ++i) b[i][j] = values[i];
  }
  const double t = student_t_quantile(static_cast<double>(batches - 1), 0.5 + level / 2);
  for (std::size_t i = 0; i < statistics.size(); ++i) {
    const std::vector<double>& v = b[i];
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(batches);
    double var = 0, cov = 0;
    for (std::size_t j = 0; j < batches; ++j) {
      var += (v[j] - mean) * (v[j] - mean);
      if (j + 1 < batches) cov += (v[j] - mean) * (v[j + 1] - mean);
    }
    out[i].lag1_correlation = var > 0 ? cov / var : 0;
    const double half = t * std::sqrt(var / static_cast<double>(batches - 1) / static_cast<double>(batches));
    out[i].low = out[i].estimate - half;
    out[i].high = out[i].estimate + half;
    out[i].batches = batches;
    out[i].valid = true;
  }
  return out;
}

Interval batch_interval(const std::vector<double>& series, double statistic, std::size_t batches,
                        double level) {
  return batch_intervals(series, {statistic}, batches, level).front();
}

std::vector<double> batch_means(const std::vector<double>& series, std::size_t batches) {
  const std::size_t m = batches ? series.size() / batches : 0;
  if (batches < 2 || m < 2) return {};
  const std::size_t skip = series.size() - m * batches;
  std::vector<double> out(batches, 0.0);
  for (std::size_t j = 0; j < batches; ++j) {
    for (std::size_t i = 0; i < m; ++i) out[j] += series[skip + j * m + i];
    out[j] /= static_cast<double>(m);
  }
  return out;
}

}  // namespace capsim

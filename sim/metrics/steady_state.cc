#include "sim/metrics/steady_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace capsim {
namespace {


MetricIntervals intervals_of(const std::vector<double>& series, std::size_t batches) {
  const std::vector<Interval> v = batch_intervals(series, {-1, 50, 90, 95, 99}, batches);
  MetricIntervals m;
  m.mean = v[0];
  m.p50 = v[1];
  m.p90 = v[2];
  m.p95 = v[3];
  m.p99 = v[4];
  for (Interval* i : {&m.mean, &m.p50, &m.p90, &m.p95, &m.p99}) i->low = std::max(0.0, i->low);  // latencies
  return m;
}

std::string fmt_s(double s) {
  char buf[32];
  if (s >= 1) std::snprintf(buf, sizeof buf, "%.2f s", s);
  else std::snprintf(buf, sizeof buf, "%.0f ms", s * 1e3);
  return buf;
}

}  // namespace

const Interval* MetricIntervals::get(const std::string& statistic) const {
  if (statistic == "mean") return &mean;
  if (statistic == "p50") return &p50;
  if (statistic == "p90") return &p90;
  if (statistic == "p95") return &p95;
  if (statistic == "p99") return &p99;
  return nullptr;
}

SteadyState analyze_steady_state(const std::vector<RequestRecord>& records, std::size_t batches,
                                 bool bounded_population) {
  SteadyState st;
  std::vector<const RequestRecord*> order;
  order.reserve(records.size());
  for (const RequestRecord& r : records) order.push_back(&r);
  // By arrival, then id (ids are unique, so the order is unique). Records sorted by id usually
  // are in arrival order already (ids are given in arrival order): then checking is enough.
  const auto earlier = [](const RequestRecord* a, const RequestRecord* b) {
    return a->arrival_s != b->arrival_s ? a->arrival_s < b->arrival_s : a->id < b->id;
  };
  if (!std::is_sorted(order.begin(), order.end(), earlier)) std::sort(order.begin(), order.end(), earlier);
  st.observations = order.size();
  if (order.size() < kMinSteadyStateObservations) {
    st.warnings.push_back("too short: " + std::to_string(order.size()) + " measured requests (< " +
                          std::to_string(kMinSteadyStateObservations) +
                          "); no steady-state check or confidence interval; run longer (--duration)");
    return st;
  }
  // MSER-5 on TTFT and on E2E latency; the later truncation of the two holds for every metric.
  std::vector<double> ttft, e2el;
  for (const RequestRecord* r : order) {
    ttft.push_back(r->ttft_s);
    e2el.push_back(r->e2el_s);
  }
  st.analysed = true;
  const MserResult a = mser5(ttft), b = mser5(e2el);
  st.truncated = std::max(a.truncate, b.truncate);
  st.settled = a.settled && b.settled;
  st.transient_end_s = order[st.truncated]->arrival_s;
  std::vector<double> t2(ttft.begin() + static_cast<std::ptrdiff_t>(st.truncated), ttft.end());
  std::vector<double> e2(e2el.begin() + static_cast<std::ptrdiff_t>(st.truncated), e2el.end());
  std::vector<double> tp;
  for (std::size_t i = st.truncated; i < order.size(); ++i) {
    if (order[i]->output_tokens > 1) tp.push_back(order[i]->tpot_s);
  }
  st.batches = std::min<std::size_t>(batches, std::max<std::size_t>(2, t2.size() / 10));
  st.ttft = intervals_of(t2, st.batches);
  st.e2el = intervals_of(e2, st.batches);
  st.tpot = intervals_of(tp, std::min<std::size_t>(st.batches, std::max<std::size_t>(2, tp.size() / 10)));
  // A queue that keeps growing: TTFT batch means climbing with a least-squares slope whose
  // t-statistic exceeds 3 and a last batch at least 1.5x the first.
  const std::vector<double> means = batch_means(t2, st.batches);
  if (means.size() >= 4) {
    const double n = static_cast<double>(means.size());
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t j = 0; j < means.size(); ++j) {
      sx += j;
      sy += means[j];
      sxx += static_cast<double>(j * j);
      sxy += j * means[j];
    }
    const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    const double icpt = (sy - slope * sx) / n;
    double rss = 0;
    for (std::size_t j = 0; j < means.size(); ++j) {
      const double e = means[j] - (icpt + slope * static_cast<double>(j));
      rss += e * e;
    }
    const double se = std::sqrt(rss / (n - 2) / (sxx - sx * sx / n));
    const double tstat = se > 0 ? slope / se : (slope > 0 ? INFINITY : 0);
    const bool rising = tstat > 3 && means.back() >= 1.5 * means.front();
    if (rising && bounded_population) {
      // N users waiting for their answers cannot queue without bound: the rise is the run
      // still settling, and its percentiles are not yet the steady state's.
      st.settled = false;
      st.warnings.push_back("not at steady state: TTFT still rising at the end of the run (batch means " +
                            fmt_s(means.front()) + " -> " + fmt_s(means.back()) +
                            "); a closed loop cannot queue without bound, so this is the warm-up (sessions "
                            "and histories still growing), not an overload; run longer (--duration)");
    }
    st.growing = rising && !bounded_population;
    if (st.growing) {
      st.warnings.push_back("overloaded: TTFT keeps growing through the run (batch means " + fmt_s(means.front()) +
                            " -> " + fmt_s(means.back()) +
                            "); the queue is not stable, so its percentiles depend on the run length");
    }
  }
  if (!(a.settled && b.settled)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.0f s", st.transient_end_s);
    st.warnings.push_back("not at steady state: MSER-5 puts the end of the warm-up transient at request " +
                          std::to_string(st.truncated) + " of " + std::to_string(order.size()) + " (arrival t = " +
                          buf + "), beyond half the run; run longer (--duration) before trusting the percentiles");
  }
  if (st.ttft.p95.valid && st.ttft.p95.lag1_correlation > 0.5) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", st.ttft.p95.lag1_correlation);
    st.warnings.push_back(std::string("correlated batches (TTFT p95 lag-1 correlation ") + buf +
                          "): the intervals may be too narrow; run longer");
  }
  return st;
}

}  // namespace capsim

#include "sim/cli/report_charts.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/core/units.h"
#include "sim/report/json_output.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

// An empirical CDF of `v` (values in ms) with at most ~`max_points` points: every value when
// few, else evenly spaced ranks plus the extremes.
plot::Series cdf(std::vector<double> v, const std::string& title, std::size_t max_points = 600) {
  plot::Series s;
  s.title = title;
  s.style = "steps";
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (n == 0) return s;
  const std::size_t step = std::max<std::size_t>(1, n / max_points);
  for (std::size_t i = 0; i < n; i += step) {
    s.x.push_back(v[i]);
    s.y.push_back(static_cast<double>(i + 1) / static_cast<double>(n));
  }
  if (s.x.back() != v.back() || s.y.back() != 1.0) {
    s.x.push_back(v.back());
    s.y.push_back(1.0);
  }
  return s;
}

std::string slo_label(const SloSpec& s) {
  return s.metric + "_" + s.statistic + " <= " + units::format_time(s.seconds);
}

// Simulated time on the x axis in minutes for long runs, seconds otherwise.
double time_unit(const SimulationResult& r) { return r.simulated_s > 600 ? 60.0 : 1.0; }

}  // namespace

plot::Chart latency_cdf_chart(const SimulationResult& r, const std::vector<SloSpec>& slos,
                              const std::string& title) {
  plot::Chart c;
  c.title = title;
  c.xlabel = "latency (ms, log scale)";
  c.ylabel = "share of requests";
  c.logx = true;
  c.ymin = 0;
  c.ymax = 1;
  std::vector<double> ttft, tpot, e2el;
  for (const RequestRecord& q : r.records) {
    ttft.push_back(q.ttft_s * 1e3);
    e2el.push_back(q.e2el_s * 1e3);
    if (q.output_tokens > 1) tpot.push_back(q.tpot_s * 1e3);
  }
  c.series.push_back(cdf(ttft, "TTFT"));
  c.series.push_back(cdf(tpot, "TPOT"));
  c.series.push_back(cdf(e2el, "E2E latency"));
  for (const SloSpec& s : slos) c.vlines.push_back({slo_label(s), s.seconds * 1e3});
  return c;
}

plot::Chart kv_timeline_chart(const SimulationResult& r, double warmup_s) {
  const double unit = time_unit(r);
  plot::Chart c;
  c.title = "KV-cache use over time";
  c.xlabel = unit > 1 ? "simulated time (min)" : "simulated time (s)";
  c.ylabel = "KV cache used (%)";
  c.ymin = 0;
  c.ymax = 100;
  plot::Series s;
  s.title = r.replicas.size() > 1 ? "mean over " + std::to_string(r.replicas.size()) + " replicas" : "KV cache";
  s.style = "steps";
  for (const ClusterSample& p : r.timeline) {
    s.x.push_back(p.time_s / unit);
    s.y.push_back(100 * p.kv_used_fraction);
  }
  c.series.push_back(s);
  if (warmup_s > 0) c.vlines.push_back({"end of warm-up", warmup_s / unit});
  return c;
}

plot::Chart queue_timeline_chart(const SimulationResult& r, double warmup_s) {
  const double unit = time_unit(r);
  plot::Chart c;
  c.title = "Requests waiting and running over time";
  c.xlabel = unit > 1 ? "simulated time (min)" : "simulated time (s)";
  c.ylabel = "requests";
  c.ymin = 0;
  plot::Series waiting, running;
  waiting.title = "waiting (queue)";
  running.title = "running (in the batch)";
  waiting.style = running.style = "steps";
  for (const ClusterSample& p : r.timeline) {
    waiting.x.push_back(p.time_s / unit);
    waiting.y.push_back(p.waiting);
    running.x.push_back(p.time_s / unit);
    running.y.push_back(p.running);
  }
  c.series.push_back(running);
  c.series.push_back(waiting);
  if (warmup_s > 0) c.vlines.push_back({"end of warm-up", warmup_s / unit});
  return c;
}

plot::Chart capacity_chart(const std::vector<LoadPoint>& points, const std::string& axis_name,
                           const std::vector<SloSpec>& slos, double capacity) {
  plot::Chart c;
  c.title = "Latency percentiles against load";
  c.xlabel = axis_name;
  c.ylabel = "latency (ms, log scale)";
  c.logy = true;
  const auto series = [&](const char* title, double LoadPoint::*field) {
    plot::Series s;
    s.title = title;
    s.style = "linespoints";
    for (const LoadPoint& p : points) {
      s.x.push_back(p.load);
      s.y.push_back(p.*field * 1e3);
    }
    c.series.push_back(s);
  };
  series("TTFT p50", &LoadPoint::ttft_p50);
  series("TTFT p95", &LoadPoint::ttft_p95);
  series("TTFT p99", &LoadPoint::ttft_p99);
  series("TPOT p95", &LoadPoint::tpot_p95);
  series("E2E p95", &LoadPoint::e2el_p95);
  for (const SloSpec& s : slos) c.hlines.push_back({slo_label(s), s.seconds * 1e3});
  if (capacity > 0) c.vlines.push_back({"capacity " + fmt("%g", capacity), capacity});
  return c;
}

plot::Chart cost_chart(const std::vector<std::string>& names, const std::vector<double>& usd_per_hour,
                       const std::vector<bool>& ok, const std::string& title) {
  plot::Chart c;
  c.title = title;
  c.ylabel = "$ per hour";
  c.categories = names;
  c.bars = usd_per_hour;
  c.bar_ok = ok;
  c.bar_format = "$%.2f";
  return c;
}

void add_simulation_section(HtmlReport& page, const ScenarioSpec& spec, const BuiltScenario& b,
                            const SimulationResult& r) {
  std::ostringstream text;
  print_simulation(text, spec, b, r);
  page.paragraph("Workload: " + b.workload_description);
  page.paragraph(std::to_string(r.completed) + " requests measured over " + fmt("%.1f", r.duration_s) +
                 " s: " + fmt("%.2f", r.request_throughput) + " requests/s, " +
                 fmt("%.0f", r.output_throughput) + " output tokens/s; " + std::to_string(r.preemptions) +
                 " preemptions.");
  page.table(answers::latency_headings(), answers::latency_rows(r));
  if (b.config.bounded_memory) page.paragraph(answers::bounded_memory_note());
  if (!spec.slos.empty()) {
    std::vector<std::vector<std::string>> srows;
    std::vector<std::string> cls;
    // The rows and verdicts the text report gives (print_simulation), from one function: decided
    // on the steady state's 95% interval, not on the whole window's value alone.
    for (const SloSpec& s : spec.slos) {
      srows.push_back(answers::slo_row(s, r));
      const plan::Decision d = plan::decide_slo(s, r).decision;
      cls.push_back(d == plan::Decision::kPass ? "pass" : d == plan::Decision::kFail ? "fail" : "");
    }
    page.table(answers::slo_row_headings(), srows, cls);
  }
  const double warmup = to_seconds(b.config.warmup);
  page.chart(latency_cdf_chart(r, spec.slos), "Cumulative share of measured requests at or below each latency.");
  page.chart(kv_timeline_chart(r, warmup), "KV-cache blocks in use, sampled at most once per simulated second.");
  page.chart(queue_timeline_chart(r, warmup), "Requests in the batch and in the queue, summed over replicas.");
  page.text_report(text.str());
}

void write_json_and_report(const std::string& json_path, const nlohmann::json& j, const std::string& report_path,
                           std::string page_html) {
  OutputSet outputs;
  outputs.add_json(json_path, j);
  outputs.add("--report", report_path, std::move(page_html));
  outputs.commit();
}

}  // namespace capsim::cli

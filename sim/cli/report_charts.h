// The charts and report sections the commands share (--report FILE.html, --plot FILE):
// latency CDFs and the KV-cache / queue timeline of a simulation, latency against load, cost
// per option. Charts are descriptions (plot::Chart); gnuplot draws them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/cli/common.h"
#include "sim/report/html.h"
#include "sim/report/plot.h"

namespace capsim::cli {

// Cumulative share of requests against TTFT, TPOT and E2E latency (ms, log scale), from the
// per-request records; the scenario's SLO bounds as vertical lines.
plot::Chart latency_cdf_chart(const SimulationResult& r, const std::vector<SloSpec>& slos,
                              const std::string& title = "Latency CDF");
// KV-cache use (%, mean over replicas) over simulated time.
plot::Chart kv_timeline_chart(const SimulationResult& r, double warmup_s);
// Requests waiting and running (summed over replicas) over simulated time.
plot::Chart queue_timeline_chart(const SimulationResult& r, double warmup_s);

// One point of a latency-against-load curve.
struct LoadPoint {
  double load = 0;
  bool met = false;
  double ttft_p50 = 0, ttft_p95 = 0, ttft_p99 = 0, tpot_p95 = 0, e2el_p95 = 0;  // seconds
};
// Percentiles (ms, log scale) against load; SLO bounds as horizontal lines, the capacity as a
// vertical one (when > 0).
plot::Chart capacity_chart(const std::vector<LoadPoint>& points, const std::string& axis_name,
                           const std::vector<SloSpec>& slos, double capacity);

// Dollars per hour per option, a bar each; green/red by `ok` when given.
plot::Chart cost_chart(const std::vector<std::string>& names, const std::vector<double>& usd_per_hour,
                       const std::vector<bool>& ok, const std::string& title);

// A simulation's section of a report: the run in a sentence, the latency table, the three
// charts and the command's text output.
void add_simulation_section(HtmlReport& page, const ScenarioSpec& spec, const BuiltScenario& b,
                            const SimulationResult& r);

// Writes a command's --json (`j`) and --report (`page_html`) together, all or none (OutputSet);
// an empty path is a flag not given.
void write_json_and_report(const std::string& json_path, const nlohmann::json& j, const std::string& report_path,
                           std::string page_html);

}  // namespace capsim::cli

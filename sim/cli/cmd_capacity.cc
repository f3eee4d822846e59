// `capsim capacity`: for one deployment, the most load (users, concurrency or requests/s) that
// meets the SLOs, and the curve of latency percentiles against load around it.
#include <algorithm>
#include <cmath>
#include <iostream>

#include <sstream>

#include "sim/cli/commands.h"
#include "sim/cli/report_charts.h"
#include "sim/cli/scenario.h"
#include "sim/cli/simulate_report.h"
#include "sim/core/error.h"
#include "sim/core/progress.h"
#include "sim/core/units.h"
#include "sim/plan/capacity.h"
#include "sim/plan/search.h"
#include "sim/report/html.h"
#include "sim/report/plot.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct CapacityOptions {
  std::string scenario;
  ScenarioFlags flags;
  std::optional<double> min_goodput;
  int points = 8;
  std::string json;
  std::string report;
  std::string plot;
  bool quiet = false;
};

using plan::LoadAxis;
using plan::load_of;
using plan::with_load;

int run_capacity(const CapacityOptions& o) {
  const ScenarioSpec base = o.flags.resolve(o.scenario);
  validate_names(base);  // unknown names: exit 2 before anything runs
  if (base.slos.empty() && !o.min_goodput) {
    throw Error("--slo: capacity needs at least one SLO (e.g. --slo 'ttft_p95<=1s') or --min-goodput");
  }
  // Fail before the search, not after it, when the report or chart cannot be drawn.
  if (!o.report.empty()) plot::require_gnuplot("--report");
  if (!o.plot.empty()) plot::check_plot_path(o.plot, "--plot");
  const plan::CapacityResult found = plan::find_capacity(base, o.min_goodput);
  const LoadAxis axis = found.axis;
  const double capacity = found.capacity;
  const double floor_load = found.floor_load;
  const int evaluations = found.evaluations;

  // The curve: fractions of the capacity (or of the scenario's load when nothing meets the SLOs).
  const double ref = capacity > 0 ? capacity : load_of(base, axis);
  std::vector<double> fractions = {0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5};
  if (o.points != 8) {
    fractions.clear();
    for (int i = 1; i <= o.points; ++i) fractions.push_back(1.5 * i / o.points);
  }
  std::vector<double> loads;
  for (double f : fractions) {
    double l = ref * f;
    if (axis.whole) l = std::max(1.0, std::round(l));
    if (loads.empty() || l != loads.back()) loads.push_back(l);
  }
  std::vector<plan::Evaluation> curve(loads.size());
  ProgressLine line;  // in place on a terminal, a line every 5 s in logs
  plan::run_parallel(
      loads.size(), plan::default_threads(),
      [&](std::size_t i) { curve[i] = plan::evaluate(with_load(base, axis, loads[i]), base.replicas, o.min_goodput); },
      o.quiet ? std::function<void(std::size_t, std::size_t)>()
              : [&line](std::size_t d, std::size_t t) {
                  const std::string text = "capsim capacity: curve " + std::to_string(d) + "/" + std::to_string(t);
                  if (d == t) line.finish(text); else line.update(text);
                });

  nlohmann::json j;
  j["scenario"] = base.name;
  j["load_axis"] = axis.name;
  j["capacity"] = capacity;
  j["evaluations"] = evaluations;
  nlohmann::json pts = nlohmann::json::array();
  for (std::size_t i = 0; i < loads.size(); ++i) {
    const SimulationResult& r = curve[i].result;
    pts.push_back({{"load", loads[i]}, {"slos_met", curve[i].verdict.met},
                   {"request_throughput", r.request_throughput}, {"output_throughput", r.output_throughput},
                   {"median_ttft_ms", r.ttft.median * 1e3}, {"p95_ttft_ms", r.ttft.p95 * 1e3},
                   {"p99_ttft_ms", r.ttft.p99 * 1e3}, {"p95_tpot_ms", r.tpot.p95 * 1e3},
                   {"p95_e2el_ms", r.e2el.p95 * 1e3}, {"goodput_fraction", r.goodput_fraction},
                   {"preemptions", r.preemptions}, {"binding_resource", plan::binding_resource(r)}});
  }
  j["curve"] = pts;
  const Deployment d = base.deployment.resolve();
  std::ostringstream text;
  const std::string title = "capsim capacity: " + d.model.name + " on " + std::to_string(base.replicas) + " x " +
                            d.card.name + (d.tp > 1 ? " tp" + std::to_string(d.tp) : "") + " (" +
                            std::string(precision_name(d.weights)) + ")";
  const std::string verdict =
      capacity > 0 ? (axis.whole ? fmt("%.0f", capacity) : fmt("%.2f", capacity)) + " " + axis.name +
                         " meet every SLO (" + std::to_string(evaluations) + " simulations)"
                   : "none — the SLOs fail even at " + fmt("%g", floor_load) + " " + axis.name;
  text << title << "\n  capacity: " << verdict << "\n\n";
  TextTable t({axis.name, "req/s", "out tok/s", "TTFT p50", "TTFT p95", "TTFT p99", "TPOT p95",
               "E2E p95", "SLOs", "limited by"});
  std::vector<LoadPoint> points;
  for (std::size_t i = 0; i < loads.size(); ++i) {
    const SimulationResult& r = curve[i].result;
    t.row({axis.whole ? fmt("%.0f", loads[i]) : fmt("%.2f", loads[i]), fmt("%.2f", r.request_throughput),
           fmt("%.0f", r.output_throughput), units::format_time(r.ttft.median), units::format_time(r.ttft.p95),
           units::format_time(r.ttft.p99), units::format_time(r.tpot.p95), units::format_time(r.e2el.p95),
           curve[i].verdict.met ? "met" : "missed", plan::binding_resource(r)});
    points.push_back({loads[i], curve[i].verdict.met, r.ttft.median, r.ttft.p95, r.ttft.p99, r.tpot.p95, r.e2el.p95});
  }
  t.print(text);
  if (o.json != "-") std::cout << text.str();
  // Everything is drawn before anything is written: a failing chart leaves no file behind.
  const plot::Chart chart = capacity_chart(points, axis.name, base.slos, capacity);
  std::string chart_file, page_html;
  if (!o.plot.empty()) chart_file = plot::chart_bytes(chart, o.plot, "--plot");
  if (!o.report.empty()) {
    HtmlReport page(title, "--report");
    page.paragraph("Scenario " + base.name + ". Capacity: " + verdict + ".");
    page.chart(chart, "Latency percentiles at each load of the curve; dashed lines: the SLO bounds.");
    page.table(t);
    std::vector<std::string> names;
    std::vector<double> goodput;
    std::vector<bool> ok;
    for (const LoadPoint& p : points) {
      names.push_back(axis.whole ? fmt("%.0f", p.load) : fmt("%.2f", p.load));
      ok.push_back(p.met);
    }
    for (const plan::Evaluation& e : curve) goodput.push_back(100 * e.result.goodput_fraction);
    plot::Chart g;
    g.title = "Requests meeting every SLO, by load (" + std::string(axis.name) + ")";
    g.ylabel = "goodput (% of requests)";
    g.categories = names;
    g.bars = goodput;
    g.bar_ok = ok;
    g.bar_format = "%.1f%%";
    g.ymax = 100;
    page.chart(g, "Green: the load meets the SLOs; red: it misses them.");
    page.heading("Text report", 3);
    page.preformatted(text.str());
    page_html = page.render();
  }
  if (!o.json.empty()) write_json(o.json, j);
  if (!o.plot.empty()) write_text_file(o.plot, chart_file, "--plot");
  if (!o.report.empty()) write_text_file(o.report, page_html, "--report");
  return capacity > 0 ? 0 : 1;
}

}  // namespace

void add_capacity_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CapacityOptions>();
  CLI::App* cmd = app.add_subcommand(
      "capacity", "the most users (or requests/s) one deployment serves within SLOs, and the latency curve");
  cmd->footer(
      "examples:\n"
      "  capsim capacity workloads/chatbot-500-users.yaml\n"
      "  capsim capacity --model llama-3.1-8b --card l40s --rate 5 --duration 10min --slo 'ttft_p95<=500ms'\n"
      "  capsim capacity workloads/chat-8b-1x-h100.yaml --plot capacity.svg --report capacity.html\n"
      "exit status: 0 capacity found, 1 the SLOs fail at the smallest load, 2 bad input");
  cmd->add_option("scenario", o->scenario, "scenario YAML file (workloads/*.yaml)");
  o->flags.add_to(*cmd);
  cmd->add_option("--min-goodput", o->min_goodput, "least share of requests meeting every SLO (0-1)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--points", o->points, "points on the latency curve (up to 1.5x capacity)")->capture_default_str()->check(CLI::Range(2, 100));
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (tables, charts by gnuplot) to FILE.html");
  cmd->add_option("--plot", o->plot, "also draw latency percentiles against load to FILE.svg or FILE.png (gnuplot)");
  cmd->add_flag("--quiet,-q", o->quiet, "no progress on stderr");
  cmd->callback([o, &exit_code] { exit_code = run_capacity(*o); });
}

}  // namespace capsim::cli

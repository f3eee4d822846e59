// `capsim capacity`: for one deployment, the most load (users, concurrency or requests/s) that
// meets the SLOs, and the curve of latency percentiles against load around it.
#include <algorithm>
#include <cmath>
#include <iostream>

#include <sstream>

#include "sim/cli/commands.h"
#include "sim/cli/report_charts.h"
#include "sim/flags/scenario_flags.h"
#include "sim/core/error.h"
#include "sim/core/progress.h"
#include "sim/core/units.h"
#include "sim/plan/capacity.h"
#include "sim/plan/search.h"
#include "sim/answers/capacity_answer.h"
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
  int replications = 1;
  std::string json;
  std::string report;
  std::string plot;
  bool quiet = false;
};

using plan::LoadAxis;

int run_capacity(const CapacityOptions& o) {
  answers::CapacityRequest req;
  req.base = o.flags.resolve(o.scenario);
  req.min_goodput = o.min_goodput;
  req.points = o.points;
  req.replications = o.replications;
  // Fail before the search, not after it, when the report or chart cannot be drawn.
  req.before_search = [&o] {
    if (!o.report.empty()) plot::require_gnuplot("--report");
    if (!o.plot.empty()) plot::check_plot_path(o.plot, "--plot");
  };
  ProgressLine line;  // in place on a terminal, a line every 5 s in logs
  const answers::CapacityAnswer a = answers::answer_capacity(
      req, o.quiet ? answers::CapacityProgress()
                   : [&line](const char* phase, std::size_t d, std::size_t t) {
                       if (std::string(phase) != "curve") return;
                       const std::string text = "capsim capacity: curve " + std::to_string(d) + "/" + std::to_string(t);
                       if (d == t) line.finish(text); else line.update(text);
                     });
  const ScenarioSpec& base = a.base;
  const LoadAxis& axis = a.found.axis;
  const double capacity = a.found.capacity;
  const std::vector<plan::Evaluation>& curve = a.curve;
  const std::string& title = a.title;
  const std::string& verdict = a.verdict;
  const TextTable& t = a.table;
  const nlohmann::json& j = a.json;
  const std::string text = a.text;
  std::vector<LoadPoint> points;
  for (std::size_t i = 0; i < a.loads.size(); ++i) {
    const SimulationResult& r = curve[i].result;
    points.push_back({a.loads[i], curve[i].verdict.met, r.ttft.median, r.ttft.p95, r.ttft.p99, r.tpot.p95, r.e2el.p95});
  }
  if (o.json != "-") std::cout << text;
  // Everything is drawn before anything is written: a failing chart leaves no file behind.
  const plot::Chart chart = capacity_chart(points, axis.name, base.slos, capacity);
  std::string chart_file, page_html;
  if (!o.plot.empty()) chart_file = plot::chart_bytes(chart, o.plot, "--plot");
  if (!o.report.empty()) {
    HtmlReport page(title, "--report");
    page.paragraph("Scenario " + base.name + ". Capacity: " + verdict + "." +
                   (a.interval.empty() ? std::string() : " Interval: " + a.interval + "."));
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
    page.text_report(text);
    page_html = page.render();
  }
  OutputSet outputs;
  outputs.add_json(o.json, j);
  outputs.add("--plot", o.plot, std::move(chart_file));
  outputs.add("--report", o.report, std::move(page_html));
  outputs.commit();
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
      "  capsim capacity workloads/chatbot-500-users.yaml --replications 8   # over seeds 1-8, with an interval\n"
      "exit status: 0 capacity found, 1 the SLOs fail at the smallest load, 2 bad input");
  cmd->add_option("scenario", o->scenario, "scenario YAML file (workloads/*.yaml)");
  o->flags.add_to(*cmd);
  cmd->add_option("--min-goodput", o->min_goodput, "least share of requests meeting every SLO (0-1)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--points", o->points, "points on the latency curve (up to 1.5x capacity)")->capture_default_str()->check(CLI::Range(2, 100));
  cmd->add_option("--replications", o->replications,
                  "decide each load over N seeds (seed..seed+N-1, in parallel; as plan --replications) and give "
                  "an interval: the capacity is the most load whose verdict over the seeds is PASS (default 1: "
                  "one run's batch means, no interval)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (tables, charts by gnuplot) to FILE.html");
  cmd->add_option("--plot", o->plot, "also draw latency percentiles against load to FILE.svg or FILE.png (gnuplot)");
  cmd->add_flag("--quiet,-q", o->quiet, "no progress on stderr");
  cmd->callback([o, &exit_code] { exit_code = run_capacity(*o); });
}

}  // namespace capsim::cli

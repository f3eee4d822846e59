// `capsim check ASSUMPTIONS.yaml`: named capacity assertions checked by simulation, for CI —
// a table of measured values, limits and margins, exit status 1 when one fails, JUnit XML for
// the CI's test view (sim/check/assumptions.h, docs/ci.md).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "sim/check/assumptions.h"
#include "sim/cli/commands.h"
#include "sim/cli/report_charts.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/report/html.h"
#include "sim/report/json_output.h"
#include "sim/report/plot.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct CheckOptions {
  std::string file;
  std::string junit;
  std::string json;
  std::string report;
  std::vector<std::string> price_overrides;
  std::string prices_file;
  std::string until_conclusive;
  int replications = 1;
  bool quiet = false;
};

int run_check(const CheckOptions& o) {
  if (!o.report.empty()) plot::require_gnuplot("--report");
  // Everything that can be wrong with the input is found before any simulation.
  check::Assumptions a = check::load_assumptions(o.file, o.prices_file, o.price_overrides);
  a.replications = o.replications;
  if (!o.until_conclusive.empty()) {
    a.max_duration_s = units::parse_time(o.until_conclusive, "--until-conclusive");
    if (a.max_duration_s <= 0) throw Error("--until-conclusive: must be a duration > 0, e.g. 2h");
  }
  const check::CheckOutcome c = check::run_checks(
      a, o.quiet ? std::function<void(const check::AssertionOutcome&, std::size_t, std::size_t)>()
                 : [](const check::AssertionOutcome& x, std::size_t done, std::size_t total) {
                     const bool any_fail = std::any_of(x.rows.begin(), x.rows.end(), [](const check::Row& r) {
                       return !r.passed && !r.inconclusive;
                     });
                     std::fprintf(stderr, "capsim check: [%zu/%zu] %s: %s (%.1f s)\n", done, total, x.name.c_str(),
                                  x.passed() ? "PASS" : any_fail ? "FAIL" : "INCONCLUSIVE", x.seconds);
                   });
  std::ostringstream text;
  text << "capsim check: " << a.path << " — " << a.assertions.size() << " assertions, " << c.tests << " checks\n";
  if (!a.description.empty()) text << "  " << a.description << "\n";
  text << "\n";
  TextTable t({"assertion", "kind", "measured", "limit", "margin", "result"});
  std::vector<std::string> row_class;
  for (const check::AssertionOutcome& x : c.assertions) {
    for (const check::Row& r : x.rows) {
      t.row({x.name, r.kind + (r.item.empty() ? "" : " " + r.item), r.measured_text, r.limit_text,
             check::margin_text(r.margin), check::row_status(r)});
      row_class.push_back(r.passed ? "pass" : "fail");
    }
  }
  t.print(text);
  text << "\n";
  for (const check::AssertionOutcome& x : c.assertions) {
    for (const check::Row& r : x.rows) {
      if (!r.message.empty()) {
        text << "  " << (r.passed ? "note" : check::row_status(r)) << " " << x.name << " / " << r.kind
             << (r.item.empty() ? "" : " " + r.item) << ": " << r.message << "\n";
      }
    }
  }
  for (const check::AssertionOutcome& x : c.assertions) {
    if (!x.model_error_text.empty()) text << "  " << x.name << ": " << x.model_error_text << "\n";
  }
  if (a.require_model_error) {
    text << "  require_model_error: p90: an SLO passes only if latency x (1 + p90) stays within its bound\n";
  }
  text << "  " << (c.passed() ? "all " + std::to_string(c.tests) + " checks hold"
                              : std::to_string(c.failures) + " of " + std::to_string(c.tests) + " checks fail, " +
                                    std::to_string(c.inconclusive) + " inconclusive")
       << " (" << fmt("%.1f", c.seconds) << " s)\n";
  if (c.inconclusive > 0) {
    text << "  INCONCLUSIVE: the 95% interval straddles a bound or the run did not reach steady state; "
            "rerun with --until-conclusive 2h (doubles the duration until decided) or a longer duration\n";
  }
  if (o.json != "-") std::cout << text.str();

  // Everything is rendered before anything is written: a failure leaves no file behind.
  const nlohmann::json j = check::check_json(c);
  const std::string junit = o.junit.empty() ? "" : check::junit_xml(c);
  std::string page_html;
  if (!o.report.empty()) {
    HtmlReport page("capsim check: " + a.path, "--report");
    if (!a.description.empty()) page.paragraph(a.description);
    page.paragraph(c.passed() ? "All " + std::to_string(c.tests) + " checks hold."
                              : std::to_string(c.failures) + " of " + std::to_string(c.tests) + " checks fail.");
    page.table(t.header(), t.rows(), row_class);
    plot::Chart margins;
    margins.title = "Margin of each check";
    margins.ylabel = "margin (% of the limit)";
    margins.bar_format = "%+.0f%%";
    for (const check::AssertionOutcome& x : c.assertions) {
      for (const check::Row& r : x.rows) {
        if (!r.margin) continue;
        std::string label = x.name + ": " + (r.kind == "slo" || r.kind == "baseline" ? r.item : r.kind);
        if (label.size() > 44) label = label.substr(0, 41) + "...";
        margins.categories.push_back(label);
        margins.bars.push_back(std::max(-100.0, std::min(300.0, 100 * *r.margin)));
        margins.bar_ok.push_back(r.passed);
      }
    }
    margins.ymin = std::nullopt;
    double lowest = 0;
    for (double v : margins.bars) lowest = std::min(lowest, v);
    margins.ymin = lowest < 0 ? lowest * 1.15 : 0;
    page.chart(margins, "Green: holds; red: fails. Margins are clipped to -100%..+300% for display.");
    for (const check::AssertionOutcome& x : c.assertions) {
      if (!x.result || !x.built) continue;
      page.heading(x.name + " (scenario " + x.scenario + ")", 2);
      if (!x.description.empty()) page.paragraph(x.description);
      add_simulation_section(page, *x.spec, *x.built, *x.result);
    }
    page.text_report(text.str(), 2);
    page_html = page.render();
  }
  OutputSet outputs;
  outputs.add_json(o.json, j);
  outputs.add("--junit", o.junit, junit);
  outputs.add("--report", o.report, std::move(page_html));
  outputs.commit();
  return c.exit_code();
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check", "check capacity assumptions (SLOs, capacity, cost, baselines) by simulation, for CI");
  cmd->footer(
      "examples:\n"
      "  capsim check workloads/assumptions.yaml\n"
      "  capsim check workloads/assumptions.yaml --junit build/capsim-check.xml --report check.html\n"
      "assertion kinds: slo, min_users, min_rate, max_cost_usd_per_hour, no_preemption, fits_in_memory,\n"
      "  plan_cheapest_max_usd_per_hour, baseline (docs/ci.md)\n"
      "  capsim check workloads/chatbot-500-users.yaml --until-conclusive 2h   (a scenario file: its SLOs)\n"
      "SLOs are decided with 95% intervals (batch means after MSER-5 warm-up detection): PASS when the\n"
      "interval is inside the bound, FAIL when outside, INCONCLUSIVE when it straddles the bound or the run\n"
      "did not reach steady state\n"
      "exit status: 0 every assertion holds, 1 one fails, 2 bad input, 3 none fails but one is inconclusive");
  cmd->add_option("assumptions", o->file, "assumptions YAML file (docs/ci.md)")->required();
  cmd->add_option("--junit", o->junit, "also write JUnit XML (one testcase per check) to FILE");
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (tables, charts by gnuplot) to FILE.html");
  cmd->add_option("--price", o->price_overrides, "override a card's $/hour per GPU: h100-sxm=2.49 (repeatable)");
  cmd->add_option("--prices", o->prices_file, "price file (default: the assumptions file's prices:, else calibration/prices.yaml)");
  cmd->add_option("--until-conclusive", o->until_conclusive,
                  "re-run an INCONCLUSIVE assertion with its duration doubled, up to this duration (e.g. 2h)");
  cmd->add_option("--replications", o->replications,
                  "decide SLOs from N independent runs (seeds seed..seed+N-1, in parallel) instead of one run's "
                  "batch means; robust when one run's output is strongly correlated. min_users/min_rate: the "
                  "search and interval of capacity --replications N")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--quiet,-q", o->quiet, "no progress lines on stderr");
  cmd->callback([o, &exit_code] { exit_code = run_check(*o); });
}

}  // namespace capsim::cli

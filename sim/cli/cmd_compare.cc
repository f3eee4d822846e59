// `capsim compare`: named deployments on the same workload side by side — latency, throughput,
// cost, throughput per dollar — and the verdict; `--search-mix` looks for the cheapest mix of two
// card types behind one router.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <sstream>

#include "sim/cli/commands.h"
#include "sim/cli/report_charts.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/progress.h"
#include "sim/core/run_limits.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/flags/scenario_flags.h"
#include "sim/plan/costs.h"
#include "sim/plan/prices.h"
#include "sim/plan/search.h"
#include "sim/report/html.h"
#include "sim/report/json_output.h"
#include "sim/report/plot.h"
#include "sim/report/table.h"
#include "sim/answers/compare_answer.h"

namespace capsim::cli {
namespace {

struct CompareOptions {
  std::string scenario;
  ScenarioFlags flags;
  answers::CompareRequest req;  // the deployments and options; base comes from the flags
  std::string kv_cache;  // --kv-cache: every deployment's KV precision unless its text names one
  std::string json;
  std::string report;
  bool quiet = false;
};

int run_compare(const CompareOptions& o) {
  answers::CompareRequest req = o.req;
  req.base = o.flags.resolve(o.scenario);
  if (!o.kv_cache.empty()) {
    req.base.deployment.kv_cache = o.kv_cache;
    req.base.origin.erase("--kv-cache");
  }
  if (!o.report.empty()) req.before_search = [] { plot::require_gnuplot("--report"); };
  ProgressLine line;  // in place on a terminal, a line every 5 s in logs
  const answers::CompareAnswer a = answers::answer_compare(
      req, o.quiet ? std::function<void(std::size_t, std::size_t)>()
                   : [&line](std::size_t d, std::size_t t) {
                       const std::string text = "capsim compare: " + std::to_string(d) + "/" + std::to_string(t) + " deployments simulated";
                       if (d == t) line.finish(text); else line.update(text);
                     });
  const ScenarioSpec& base = a.base;
  const std::vector<answers::CompareRow>& rows = a.rows;
  const int best = a.best;
  const bool have_slos = a.have_slos;
  const nlohmann::json& j = a.json;
  const std::optional<TextTable>& table = a.table;
  std::ostringstream text;
  text << a.text;
  if (o.json != "-") std::cout << text.str();
  std::string page_html;
  if (!o.report.empty()) {
    // The title names the model, the scenario and the verdict's cards and replicas.
    HtmlReport page("capsim compare: " + base.deployment.model + ", " + base.name + " (" +
                        (best >= 0 ? "verdict " + rows[static_cast<std::size_t>(best)].name : std::string("no verdict")) + ")",
                    "--report");
    page.paragraph(best >= 0 ? "Verdict: " + rows[static_cast<std::size_t>(best)].name +
                                   (have_slos ? " is the cheapest deployment that meets every SLO."
                                              : " gives the most output tokens per dollar at this load (not at saturation).")
                             : "Verdict: no deployment meets every SLO.");
    std::vector<std::string> names;
    std::vector<double> usd, ttft;
    std::vector<bool> ok;
    for (const answers::CompareRow& r : rows) {
      if (!r.error.empty()) continue;
      names.push_back(r.name);
      usd.push_back(r.usd_per_hour);
      ttft.push_back(r.eval.result.ttft.p95 * 1e3);
      ok.push_back(!have_slos || r.eval.verdict.met);
    }
    page.chart(cost_chart(names, usd, have_slos ? ok : std::vector<bool>{}, "Cost per deployment"),
               have_slos ? "Dollars per hour; green: meets every SLO, red: misses one." : "Dollars per hour.");
    plot::Chart lat;
    lat.title = "TTFT p95 per deployment";
    lat.ylabel = "TTFT p95 (ms)";
    lat.categories = names;
    lat.bars = ttft;
    lat.bar_ok = have_slos ? ok : std::vector<bool>{};
    lat.bar_format = "%.0f ms";
    for (const SloSpec& sl : base.slos) {
      if (sl.metric == "ttft" && sl.statistic == "p95") lat.hlines.push_back({"ttft_p95 bound", sl.seconds * 1e3});
    }
    page.chart(lat, "Time to first token, 95th percentile.");
    plot::Chart tpot;
    tpot.title = "TPOT p95 per deployment";
    tpot.ylabel = "TPOT p95 (ms)";
    tpot.categories = names;
    for (const answers::CompareRow& r : rows) {
      if (r.error.empty()) tpot.bars.push_back(r.eval.result.tpot.p95 * 1e3);
    }
    tpot.bar_ok = have_slos ? ok : std::vector<bool>{};
    tpot.bar_format = "%.1f ms";
    for (const SloSpec& sl : base.slos) {
      if (sl.metric == "tpot" && sl.statistic == "p95") tpot.hlines.push_back({"tpot_p95 bound", sl.seconds * 1e3});
    }
    page.chart(tpot, "Time per output token, 95th percentile.");
    if (table) page.table(*table);
    page.text_report(text.str());
    page_html = page.render();
  }
  write_json_and_report(o.json, j, o.report, std::move(page_html));
  return best >= 0 ? 0 : 1;
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "named deployments side by side on one workload: latency, throughput, cost, verdict");
  cmd->footer(
      "examples:\n"
      "  capsim compare workloads/chat-8b-1x-h100.yaml --deployment '4x rtx-4090' \\\n"
      "      --deployment '2x rtx-4090 tp2' --deployment '1x h100-sxm' --deployment '1x a100-80gb-sxm'\n"
      "  capsim compare workloads/chat-8b-1x-h100.yaml --deployment '1x h100-sxm + 2x rtx-4090'\n"
      "  capsim compare workloads/chat-8b-1x-h100.yaml --search-mix h100-sxm,rtx-4090 --max-cards 4\n"
      "exit status: 0 a verdict, 1 none meets the SLOs, 2 bad input");
  cmd->add_option("scenario", o->scenario, "scenario YAML file (workloads/*.yaml)");
  o->flags.add_to(*cmd, false);
  cmd->add_option("--deployment,-d", o->req.deployments, std::string("a deployment, repeatable; ") + answers::kDeploymentForm);
  cmd->add_option("--kv-cache,--kv-cache-dtype", o->kv_cache,
                  "KV cache of every deployment that names none with kv:PRECISION: auto, bf16, fp16, fp8 "
                  "(default: the scenario's)");
  cmd->add_option("--search-mix", o->req.search_mix, "two cards: try every mix of them up to --max-cards");
  cmd->add_option("--max-cards", o->req.max_cards, "most cards in a --search-mix fleet")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--min-goodput", o->req.min_goodput, "least share of requests meeting every SLO (0-1)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--price", o->req.price_overrides, "override a card's $/hour per GPU: h100-sxm=2.49 (repeatable)");
  cmd->add_option("--prices", o->req.prices_file, "price file (default calibration/prices.yaml)");
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (tables, charts by gnuplot) to FILE.html");
  cmd->add_flag("--quiet,-q", o->quiet, "no progress on stderr");
  cmd->callback([o, &exit_code] { exit_code = run_compare(*o); });
}

}  // namespace capsim::cli

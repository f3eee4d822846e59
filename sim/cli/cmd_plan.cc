// `capsim plan`: the cheapest deployments (card x TP x precision x replicas) that serve a
// workload within its SLOs, found by simulation, with what binds each one; and, given a daily
// load profile, what a fixed fleet costs against one that follows the load.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>
#include <unistd.h>

#include "sim/cli/commands.h"
#include "sim/cli/report_charts.h"
#include "sim/flags/scenario_flags.h"
#include "sim/core/error.h"
#include "sim/core/progress.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/memory_plan.h"
#include "sim/plan/costs.h"
#include "sim/plan/prices.h"
#include "sim/plan/planner.h"
#include "sim/plan/search.h"
#include "sim/answers/pd_plan_answer.h"
#include "sim/answers/plan_answer.h"
#include "sim/report/html.h"
#include "sim/report/plot.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct PlanOptions {
  std::string scenario;
  ScenarioFlags flags;
  answers::PlanRequest req;  // the search options; base comes from the flags
  CLI::Option* kv_option = nullptr;
  std::string json;
  std::string report;
  bool quiet = false;
  bool pd_search = false;
  bool datacenter_only = false;
  std::optional<int> pd_total;
};

using plan::Candidate;
using plan::label;

// Progress on stderr: a bar rewritten in place on a terminal, a line every 5 s in logs.
void progress_bar(ProgressLine& line, std::size_t done, std::size_t total, const char* what) {
  if (std::string(what) == "verified") {  // verification stopped early: why, as the last line
    line.finish("capsim plan: verified the cheapest " + std::to_string(done) + " of " + std::to_string(total) +
                " options; the other " + std::to_string(total - done) +
                " already cost more than the options that passed");
    return;
  }
  const int width = 30;
  const int filled = total ? static_cast<int>(width * done / total) : width;
  const std::string text = "capsim plan: " + std::string(what) + " [" + std::string(filled, '#') +
                           std::string(width - filled, '.') + "] " + std::to_string(done) + "/" +
                           std::to_string(total);
  if (done == total) line.finish(text); else line.update(text);
}

// plan --pd-search: the prefill:decode ratio of a disaggregated deployment.
int run_pd_plan(PlanOptions& o) {
  // The P/D search has no report page yet: refused rather than silently not written.
  if (!o.report.empty()) throw Error("--report: not available with --pd-search (its answer is the text table and --json)");
  answers::PdPlanRequest req;
  req.base = o.flags.resolve(o.scenario);
  req.total_cards = o.pd_total;
  req.max_cards = o.req.max_cards;
  req.min_goodput = o.req.min_goodput;
  req.price_overrides = o.req.price_overrides;
  req.prices_file = o.req.prices_file;
  const answers::PdPlanAnswer a = answers::answer_pd_plan(req);
  if (o.json != "-") std::cout << a.text;
  if (!o.json.empty()) write_json(o.json, a.json);
  return a.best >= 0 ? 0 : 1;
}

int run_plan(PlanOptions& o) {
  if (o.datacenter_only) {
    if (!o.req.card_classes.empty() && o.req.card_classes != "datacenter") {
      throw Error("--datacenter-only: conflicts with --card-class " + o.req.card_classes + "; give one of them");
    }
    o.req.card_classes = "datacenter";
  }
  if (o.pd_search && (!o.req.card_classes.empty() || !o.req.explain.empty())) {
    throw Error("--pd-search: searches the cards of --prefill-pool and --decode-pool; --card-class, --datacenter-only "
                "and --explain apply to the plan of aggregated deployments");
  }
  if (o.pd_search) return run_pd_plan(o);
  answers::PlanRequest req = o.req;
  req.base = o.flags.resolve(o.scenario);
  req.kv_given = o.kv_option != nullptr && o.kv_option->count() > 0;
  if (!o.report.empty()) req.before_search = [] { plot::require_gnuplot("--report"); };
  ProgressLine line;
  const answers::PlanAnswer a = answers::answer_plan(
      req, o.quiet ? plan::PlanProgress() : [&line](std::size_t d, std::size_t t, const char* what) { progress_bar(line, d, t, what); });
  const ScenarioSpec& base = a.base;
  const std::vector<Candidate>& cands = a.outcome.candidates;
  const std::vector<std::size_t>& live = a.outcome.live;
  const std::vector<std::size_t>& ok = a.outcome.ok;
  const auto cost_of = [](const Candidate& c) { return c.option_usd_per_hour(); };
  const std::optional<double>& users = a.users;
  const std::vector<double>& profile = a.profile;
  const std::optional<TextTable>& table = a.table;
  const nlohmann::json& j = a.json;
  const nlohmann::json& slos = j["slos"];
  const nlohmann::json daily = j.contains("daily_profile") ? j["daily_profile"] : nlohmann::json();
  std::ostringstream text;
  text << a.text;
  if (o.json != "-") std::cout << text.str();
  std::string page_html;
  if (!o.report.empty()) {
    std::string best_text = "no option meets the SLOs";
    if (!ok.empty()) {
      const Candidate& b0 = cands[ok.front()];
      best_text = "best " + std::to_string(b0.search.best.replicas) + " x " + label(b0) + ", " + b0.router;
    }
    HtmlReport page("capsim plan: " + base.deployment.model + " for " + base.name + " (" + best_text + ")", "--report");
    std::string slo_text;
    for (const auto& sl : slos) slo_text += (slo_text.empty() ? "" : ", ") + sl.get<std::string>();
    page.paragraph("SLOs: " + (slo_text.empty() ? std::string("none") : slo_text) + ". " +
                   std::to_string(cands.size()) + " candidates, " + std::to_string(live.size()) +
                   " fit in memory, " + std::to_string(ok.size()) + " meet the SLOs.");
    std::vector<std::string> names;
    std::vector<double> usd;
    for (std::size_t i : ok) {
      if (static_cast<int>(names.size()) >= o.req.top) break;
      names.push_back(std::to_string(cands[i].search.best.replicas) + "x " + label(cands[i]));
      usd.push_back(cost_of(cands[i]));
    }
    page.chart(cost_chart(names, usd, {}, "Cost per option (cheapest first)"),
               "Dollars per hour of each option that meets the SLOs: replicas x cards x $/GPU-hour.");
    // Latency against cost: each verified option's TTFT p95 (and TPOT p95 on the right axis)
    // against its $/hour, with the SLO bounds.
    {
      plot::Chart lc;
      lc.title = "Latency against cost (verified options)";
      lc.xlabel = "$/hour";
      lc.ylabel = "TTFT p95 (ms)";
      lc.y2label = "TPOT p95 (ms)";
      plot::Series ttft{"TTFT p95", {}, {}, "points", false}, tpot{"TPOT p95", {}, {}, "points", true};
      int n = 0;
      for (std::size_t i : ok) {
        if (n++ >= o.req.top) break;
        ttft.x.push_back(cost_of(cands[i]));
        ttft.y.push_back(cands[i].search.best.result.ttft.p95 * 1e3);
        tpot.x.push_back(cost_of(cands[i]));
        tpot.y.push_back(cands[i].search.best.result.tpot.p95 * 1e3);
      }
      lc.series = {ttft, tpot};
      lc.ymin = 0;
      lc.y2min = 0;
      for (const SloSpec& sl : base.slos) {
        if (sl.metric == "ttft") lc.hlines.push_back({"ttft_" + sl.statistic + " bound", sl.seconds * 1e3});
      }
      if (!ttft.x.empty()) page.chart(lc, "Each option that meets the SLOs: what it costs and how fast it answers.");
    }
    if (!daily.is_null()) {
      plot::Chart dc;
      dc.title = "Daily profile: replicas per hour on " + daily["option"].get<std::string>();
      dc.xlabel = "hour of day";
      dc.ylabel = "replicas";
      dc.y2label = "load";
      plot::Series reps{"replicas following the load", {}, {}, "steps", false};
      plot::Series load{"load (" + std::string(users ? "users" : "requests/s") + ")", {}, {}, "linespoints", true};
      const auto per_hour = daily["replicas_per_hour"].get<std::vector<int>>();
      for (std::size_t h = 0; h < per_hour.size(); ++h) {
        reps.x.push_back(static_cast<double>(h));
        reps.y.push_back(per_hour[h]);
        load.x.push_back(static_cast<double>(h));
        load.y.push_back(profile[h]);
      }
      dc.series = {reps, load};
      dc.hlines.push_back({"fixed fleet", static_cast<double>(daily["fixed_fleet_replicas"].get<int>())});
      dc.ymin = 0;
      dc.y2min = 0;
      page.chart(dc, "Replicas each hour needs against the fixed fleet sized for the peak.");
    }
    if (table) page.table(*table);
    page.text_report(text.str());
    page_html = page.render();
  }
  write_json_and_report(o.json, j, o.report, std::move(page_html));
  return ok.empty() ? 1 : 0;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "the cheapest cards x TP x precision x replicas that meet SLOs, and why");
  cmd->footer(
      "examples:\n"
      "  capsim plan workloads/chatbot-500-users.yaml\n"
      "  capsim plan --model llama-3.1-8b --users 200 --think-time exponential:15s --duration 10min \\\n"
      "      --slo 'ttft_p95<=1s' --slo 'tpot_p95<=50ms' --cards rtx-4090,h100-sxm,a100-80gb-sxm\n"
      "  capsim plan workloads/chatbot-500-users.yaml --weights bf16,fp8,int4 --price h100-sxm=1.99\n"
      "  capsim plan --pd-search --model llama-3.1-70b --rate 4 --input-tokens 4000 --output-tokens 300 \\\n"
      "      --prefill-pool '1x h100-sxm tp2' --decode-pool '1x h100-sxm tp4' --kv-link ib-ndr-400 \\\n"
      "      --slo 'ttft_p95<=2s' --slo 'tpot_p95<=40ms'\n"
      "  capsim plan workloads/chatbot-500-users.yaml --load-profile 50,30,20,20,20,30,80,150,300,450,500,500,480,500,500,450,400,350,300,250,200,150,100,70\n"
      "exit status: 0 options found, 1 none meets the SLOs, 2 bad input");
  cmd->add_option("scenario", o->scenario, "scenario YAML file (workloads/*.yaml)");
  o->flags.add_to(*cmd, false);
  cmd->add_option("--cards", o->req.cards, "cards to consider, comma separated (default: all in the catalogue)");
  cmd->add_option("--card-class", o->req.card_classes,
                  "only cards of these classes (catalogue field card_class), comma separated: datacenter, "
                  "workstation, consumer");
  cmd->add_flag("--datacenter-only", o->datacenter_only, "only datacenter cards (--card-class datacenter): no GeForce");
  cmd->add_option("--explain", o->req.explain,
                  "for this card: every candidate (TP x weights x KV) and why it fails or where it ranks; those cut "
                  "by cost are searched and verified too");
  cmd->add_option("--tp", o->req.tps, "tensor-parallel sizes to consider, comma separated")->capture_default_str();
  cmd->add_option("--weights", o->req.weights, "weight precisions to consider, e.g. bf16,fp8,int4")->capture_default_str();
  o->kv_option = cmd->add_option("--kv-cache", o->req.kv, "KV-cache precisions to consider, e.g. auto,fp8 (default: "
                                 "auto, plus fp8 where the card's engines support it)");
  cmd->add_option("--max-cards", o->req.max_cards, "most cards per deployment")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--min-goodput", o->req.min_goodput, "least share of requests meeting every SLO (0-1)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--price", o->req.price_overrides, "override a card's $/hour per GPU: h100-sxm=2.49 (repeatable)");
  cmd->add_option("--prices", o->req.prices_file, "price file (default calibration/prices.yaml)");
  cmd->add_option("--load-profile", o->req.load_profile, "24 hourly loads (users or req/s) for fixed vs following fleets");
  cmd->add_option("--top", o->req.top, "options to print")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--search-duration", o->req.search_duration,
                  "measured time of the search's runs (after warm-up); the answer is re-run in full")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (tables, cost chart by gnuplot) to FILE.html");
  cmd->add_option("--replications", o->req.replications,
                  "verify each listed option over N seeds (independent replications) instead of one run's "
                  "batch means: N times the verification time, robust when one run's output is correlated")
      ->check(CLI::Range(1, 100));
  cmd->add_flag("--quiet,-q", o->quiet, "no progress bar on stderr");
  cmd->add_flag("--pd-search", o->pd_search,
                "disaggregated serving: search the prefill:decode replica ratio of --prefill-pool and --decode-pool "
                "(their cards and TP; counts are searched) over --kv-link, cheapest split meeting the SLOs, "
                "against aggregated serving on the same cards");
  cmd->add_option("--pd-total", o->pd_total, "with --pd-search: only the splits of this many GPUs")->check(CLI::Range(2, 100000));
  cmd->callback([o, &exit_code] { exit_code = run_plan(*o); });
}

}  // namespace capsim::cli

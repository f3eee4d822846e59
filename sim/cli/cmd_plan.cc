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
#include "sim/cli/scenario.h"
#include "sim/cli/simulate_report.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/memory_plan.h"
#include "sim/plan/costs.h"
#include "sim/plan/prices.h"
#include "sim/plan/planner.h"
#include "sim/plan/search.h"
#include "sim/report/html.h"
#include "sim/report/plot.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string x;
  while (std::getline(in, x, ',')) {
    if (!x.empty()) out.push_back(x);
  }
  return out;
}

struct PlanOptions {
  std::string scenario;
  ScenarioFlags flags;
  std::string cards;
  std::string tps = "1,2,4,8";
  std::string weights = "auto";
  std::string kv = "auto";
  int max_cards = 64;
  std::optional<double> min_goodput;
  std::vector<std::string> price_overrides;
  std::string prices_file;
  std::string load_profile;
  int top = 10;
  std::string search_duration = "5min";
  std::string json;
  std::string report;
  bool quiet = false;
};

using plan::Candidate;
using plan::label;

// A progress bar on stderr, only when stderr is a terminal (logs stay clean).
void progress_bar(std::size_t done, std::size_t total, const char* what) {
  if (!isatty(2)) return;
  const int width = 30;
  const int filled = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\rcapsim plan: %s [%s%s] %zu/%zu", what, std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), done, total);
  if (done == total) std::fprintf(stderr, "\n");
}

// Load unit of the scenario, for profiles and per-user costs.
std::optional<double> users_of(const ScenarioSpec& s) {
  if (s.users) return *s.users;
  if (s.concurrency) return *s.concurrency;
  return std::nullopt;
}

nlohmann::json evaluation_json(const plan::Evaluation& e) {
  const SimulationResult& r = e.result;
  return {{"replicas", e.replicas},
          {"slos_met", e.verdict.met},
          {"worst_slo", e.verdict.worst},
          {"worst_slo_ratio", e.verdict.worst_ratio},
          {"p95_ttft_ms", r.ttft.p95 * 1e3},
          {"p99_ttft_ms", r.ttft.p99 * 1e3},
          {"p95_tpot_ms", r.tpot.p95 * 1e3},
          {"p95_e2el_ms", r.e2el.p95 * 1e3},
          {"output_throughput", e.output_throughput()},
          {"request_throughput", e.request_throughput()},
          {"estimated_from_load_share", e.from_share},
          {"goodput_fraction", r.goodput_fraction},
          {"preemptions", r.preemptions},
          {"binding_resource", plan::binding_resource(r)}};
}

int run_plan(PlanOptions& o) {
  const ScenarioSpec base = o.flags.resolve(o.scenario);
  if (base.slos.empty() && !o.min_goodput) {
    throw Error("--slo: plan needs at least one SLO (e.g. --slo 'ttft_p95<=1s') or --min-goodput");
  }
  if (!base.extra_groups.empty()) {
    throw Error("deployment: plan searches one card type at a time; use `capsim compare` for mixed fleets");
  }
  // Bad input is refused before any simulation.
  std::vector<double> profile;
  if (!o.load_profile.empty()) {
    for (const auto& v : split_list(o.load_profile)) profile.push_back(parse_number(v, "--load-profile"));
    if (profile.size() != 24) {
      throw Error("--load-profile: " + std::to_string(profile.size()) +
                  " values; expected 24 (one per hour, users or requests/s)");
    }
    if (!base.users && !base.concurrency && !base.rate) {
      throw Error("--load-profile: needs a --users, --concurrency or --rate workload");
    }
  }
  const PriceBook prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(),
      o.price_overrides);

  std::vector<std::string> card_names;
  if (o.cards.empty()) {
    for (const Card& c : cards().cards()) card_names.push_back(c.name);
  } else {
    for (const auto& n : split_list(o.cards)) {
      try {
        card_names.push_back(cards().find(n).name);
      } catch (const Error& e) {
        throw Error(std::string("--cards: ") + e.what());
      }
    }
  }
  std::vector<int> tps;
  for (const auto& t : split_list(o.tps)) {
    const double v = parse_number(t, "--tp");
    if (v < 1 || v > 64 || v != std::floor(v)) throw Error("--tp: '" + t + "' is not a GPU count in 1..64");
    tps.push_back(static_cast<int>(v));
  }
  const auto weights = split_list(o.weights);
  const auto kvs = split_list(o.kv);
  if (tps.empty() || weights.empty() || kvs.empty()) throw Error("--tp/--weights/--kv-cache: empty list");
  // A precision nobody knows is bad input (exit 2), not a candidate the search rejects.
  for (const auto& w : weights) {
    if (w != "auto") parse_precision(w, "--weights");
  }
  for (const auto& k : kvs) {
    if (k != "auto") parse_precision(k, "--kv-cache");
  }

  if (!o.report.empty()) plot::require_gnuplot("--report");
  plan::PlanSpace space;
  space.cards = card_names;
  space.tps = tps;
  space.weights = weights;
  space.kv_caches = kvs;
  space.max_cards = o.max_cards;
  space.min_goodput = o.min_goodput;
  space.top = o.top;
  space.search_duration = o.search_duration;
  const plan::PlanOutcome outcome = plan::search_plan(
      base, space, prices,
      o.quiet ? plan::PlanProgress() : [](std::size_t d, std::size_t t, const char* what) { progress_bar(d, t, what); });
  const std::vector<Candidate>& cands = outcome.candidates;
  const std::vector<std::size_t>& live = outcome.live;
  const std::vector<std::size_t>& ok = outcome.ok;
  const std::size_t searched = outcome.searched, skipped = outcome.skipped, verify_n = outcome.verify_n;
  const unsigned threads = plan::default_threads();
  const auto cost_of = [](const Candidate& c) { return c.option_usd_per_hour(); };
  const auto spec_of = [&](const Candidate& c) { return plan::spec_of(base, c); };

  const std::optional<double> users = users_of(base);
  nlohmann::json j;
  j["scenario"] = base.name;
  j["model"] = base.deployment.model;
  nlohmann::json slos = nlohmann::json::array();
  for (const auto& s : base.slos) slos.push_back(s.metric + "_" + s.statistic + "<=" + fmt("%g", s.seconds) + "s");
  j["slos"] = slos;
  nlohmann::json options = nlohmann::json::array();
  for (std::size_t i : ok) {
    const Candidate& c = cands[i];
    const plan::Evaluation& e = c.search.best;
    const double usd_h = cost_of(c);
    const double mtok_h = e.output_throughput() * 3600 / 1e6;
    nlohmann::json x = {{"card", c.card}, {"tp", c.tp}, {"weights", c.weights}, {"kv_cache", c.kv},
                        {"replicas", e.replicas}, {"total_cards", c.total_cards()},
                        {"verified_as_cluster", c.verified}, {"usd_per_hour", usd_h},
                        {"usd_per_million_output_tokens", mtok_h > 0 ? usd_h / mtok_h : 0},
                        {"result", evaluation_json(e)}};
    if (users) x["usd_per_user_per_month"] = usd_h * kHoursPerMonth / *users;
    // Energy: every card of the deployment at TDP while busy (busy share of the run).
    const Card& card = cards().find(c.card);
    double busy = 0;
    for (const ReplicaSummary& rs : e.result.replicas) busy += rs.stats.busy_seconds;
    const double busy_share = e.result.simulated_s > 0
                                  ? std::min(1.0, busy / (e.result.simulated_s * static_cast<double>(e.result.replicas.size()))) : 0;
    if (e.output_throughput() > 0) {
      x["kwh_per_million_output_tokens"] =
          kwh_per_million(card.tdp_watts * c.total_cards(), busy_share, e.output_throughput());
    }
    x["busy_share"] = busy_share;
    if (const auto buy = prices.purchase_usd(card); buy && busy_share > 0) {
      x["buy_breakeven_months"] = breakeven_months(
          *buy, prices.usd_per_hour(card), card.tdp_watts, prices.electricity_usd_per_kwh(), busy_share);
    }
    if (c.search.below) x["with_one_replica_fewer"] = evaluation_json(*c.search.below);
    options.push_back(x);
  }
  j["options"] = options;
  nlohmann::json rejected = nlohmann::json::array();
  for (const Candidate& c : cands) {
    if (c.rejected) rejected.push_back({{"card", c.card}, {"tp", c.tp}, {"weights", c.weights},
                                        {"kv_cache", c.kv}, {"reason", c.reason}});
  }
  j["rejected"] = rejected;

  // Daily load profile (parsed above): replicas per hour for the best option.
  nlohmann::json daily;
  if (!profile.empty() && !ok.empty()) {
    const Candidate& best = cands[ok.front()];
    std::vector<int> per_hour(24, 0);
    plan::run_parallel(
        24, threads,
        [&](std::size_t h) {
          ScenarioSpec s = spec_of(best);
          if (profile[h] <= 0) return;
          if (s.users) s.users = static_cast<int>(std::ceil(profile[h]));
          else if (s.concurrency) s.concurrency = static_cast<int>(std::ceil(profile[h]));
          else if (s.rate) s.rate = fmt("%.17g", profile[h]);
          else throw Error("--load-profile: needs a --users, --concurrency or --rate workload");
          const auto r = plan::search_replicas(s, std::max(1, o.max_cards / best.tp), o.min_goodput, false);
          per_hour[h] = r.found ? r.best.replicas : -1;
        },
        {});
    int peak = 0, sum = 0;
    for (int r : per_hour) {
      if (r < 0) throw Error("--load-profile: some hour's load cannot be met within --max-cards");
      peak = std::max(peak, r);
      sum += r;
    }
    const double unit = best.usd_per_hour;
    daily = {{"option", label(best)}, {"replicas_per_hour", per_hour},
             {"fixed_fleet_replicas", peak}, {"fixed_fleet_usd_per_day", peak * unit * 24},
             {"following_load_usd_per_day", sum * unit},
             {"fixed_fleet_utilisation", peak ? static_cast<double>(sum) / (24.0 * peak) : 0}};
    j["daily_profile"] = daily;
  }

  std::ostringstream text;
  std::optional<TextTable> table;
  {
    text << "capsim plan: " << base.deployment.model << " for " << base.name << "\n  SLOs:";
    for (const auto& s : slos) text << " " << s.get<std::string>();
    if (o.min_goodput) text << " goodput>=" << fmt("%.0f%%", 100 * *o.min_goodput);
    text << "\n  " << cands.size() << " candidates, " << live.size() << " fit in memory, "
              << searched << " searched (" << skipped << " skipped by cost); replicas found on 1/r "
              << "load shares, the cheapest " << verify_n << " re-run as whole clusters\n\n";
    TextTable t({"#", "deployment", "replicas", "cards", "TTFT p95", "TPOT p95", "out tok/s", "$/hour",
                 "$/M tok", users ? "$/user/mo" : "", "binds"});
    int rank_no = 0;
    for (std::size_t i : ok) {
      if (rank_no >= o.top) break;
      const Candidate& c = cands[i];
      const plan::Evaluation& e = c.search.best;
      const double usd_h = cost_of(c);
      const double mtok_h = e.output_throughput() * 3600 / 1e6;
      std::string binds = c.search.below ? c.search.below->verdict.worst + " with " +
                                               std::to_string(c.search.below->replicas) + " (" +
                                               plan::binding_resource(c.search.below->result) + ")"
                                         : plan::binding_resource(e.result);
      t.row({std::to_string(++rank_no) + (c.verified ? "" : "*"), label(c), std::to_string(e.replicas),
             std::to_string(c.total_cards()), units::format_time(e.result.ttft.p95),
             units::format_time(e.result.tpot.p95), fmt("%.0f", e.output_throughput()),
             fmt("%.2f", usd_h), mtok_h > 0 ? fmt("%.3f", usd_h / mtok_h) : "-",
             users ? fmt("%.2f", usd_h * kHoursPerMonth / *users) : "", binds});
    }
    if (ok.empty()) {
      text << (live.empty() ? "  fits on no candidate: none fits in memory (reasons below)\n"
                            : "  no candidate meets the SLOs (reasons below)\n");
    }
    else t.print(text);
    table = t;
    text << "  * estimated from load shares, not re-run as a whole cluster. 'binds': the SLO that"
                 " fails with one replica fewer, and what limits it.\n";
    if (!rejected.empty()) {
      text << "\n  rejected:\n";
      for (const Candidate& c : cands) {
        if (c.rejected) text << "    " << label(c) << ": " << c.reason << "\n";
      }
    }
    if (!daily.is_null()) {
      text << "\n  daily profile on " << daily["option"].get<std::string>() << ": replicas per hour";
      for (int r : daily["replicas_per_hour"]) text << " " << r;
      text << "\n    fixed fleet of " << daily["fixed_fleet_replicas"].get<int>() << " replicas: $"
                << fmt("%.2f", daily["fixed_fleet_usd_per_day"].get<double>()) << "/day at "
                << fmt("%.0f%%", 100 * daily["fixed_fleet_utilisation"].get<double>())
                << " utilisation; following the load: $"
                << fmt("%.2f", daily["following_load_usd_per_day"].get<double>()) << "/day\n";
    }
  }
  if (o.json != "-") std::cout << text.str();
  std::string page_html;
  if (!o.report.empty()) {
    HtmlReport page("capsim plan: " + base.deployment.model + " for " + base.name, "--report");
    std::string slo_text;
    for (const auto& sl : slos) slo_text += (slo_text.empty() ? "" : ", ") + sl.get<std::string>();
    page.paragraph("SLOs: " + (slo_text.empty() ? std::string("none") : slo_text) + ". " +
                   std::to_string(cands.size()) + " candidates, " + std::to_string(live.size()) +
                   " fit in memory, " + std::to_string(ok.size()) + " meet the SLOs.");
    std::vector<std::string> names;
    std::vector<double> usd;
    for (std::size_t i : ok) {
      if (static_cast<int>(names.size()) >= o.top) break;
      names.push_back(std::to_string(cands[i].search.best.replicas) + "x " + label(cands[i]));
      usd.push_back(cost_of(cands[i]));
    }
    page.chart(cost_chart(names, usd, {}, "Cost per option (cheapest first)"),
               "Dollars per hour of each option that meets the SLOs: replicas x cards x $/GPU-hour.");
    if (table) page.table(*table);
    page.heading("Text report", 3);
    page.preformatted(text.str());
    page_html = page.render();
  }
  if (!o.json.empty()) write_json(o.json, j);
  if (!o.report.empty()) write_text_file(o.report, page_html, "--report");
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
      "  capsim plan workloads/chatbot-500-users.yaml --load-profile 50,30,20,20,20,30,80,150,300,450,500,500,480,500,500,450,400,350,300,250,200,150,100,70\n"
      "exit status: 0 options found, 1 none meets the SLOs, 2 bad input");
  cmd->add_option("scenario", o->scenario, "scenario YAML file (workloads/*.yaml)");
  o->flags.add_to(*cmd, false);
  cmd->add_option("--cards", o->cards, "cards to consider, comma separated (default: all in the catalogue)");
  cmd->add_option("--tp", o->tps, "tensor-parallel sizes to consider, comma separated")->capture_default_str();
  cmd->add_option("--weights", o->weights, "weight precisions to consider, e.g. bf16,fp8,int4")->capture_default_str();
  cmd->add_option("--kv-cache", o->kv, "KV-cache precisions to consider, e.g. auto,fp8")->capture_default_str();
  cmd->add_option("--max-cards", o->max_cards, "most cards per deployment")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--min-goodput", o->min_goodput, "least share of requests meeting every SLO (0-1)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--price", o->price_overrides, "override a card's $/hour per GPU: h100-sxm=2.49 (repeatable)");
  cmd->add_option("--prices", o->prices_file, "price file (default calibration/prices.yaml)");
  cmd->add_option("--load-profile", o->load_profile, "24 hourly loads (users or req/s) for fixed vs following fleets");
  cmd->add_option("--top", o->top, "options to print")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--search-duration", o->search_duration,
                  "measured time of the search's runs (after warm-up); the answer is re-run in full")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (tables, cost chart by gnuplot) to FILE.html");
  cmd->add_flag("--quiet,-q", o->quiet, "no progress bar on stderr");
  cmd->callback([o, &exit_code] { exit_code = run_plan(*o); });
}

}  // namespace capsim::cli

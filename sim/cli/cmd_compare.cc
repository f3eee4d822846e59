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
#include "sim/cli/scenario.h"
#include "sim/cli/simulate_report.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/run_limits.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/plan/costs.h"
#include "sim/plan/prices.h"
#include "sim/plan/search.h"
#include "sim/report/html.h"
#include "sim/report/json_output.h"
#include "sim/report/plot.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct CompareOptions {
  std::string scenario;
  ScenarioFlags flags;
  std::vector<std::string> deployments;
  std::string search_mix;
  int max_cards = 8;
  std::optional<double> min_goodput;
  std::vector<std::string> price_overrides;
  std::string prices_file;
  std::string json;
  std::string report;
  bool quiet = false;
};

struct GroupSpec {
  int replicas = 1;
  std::string card;
  int tp = 1;
  std::string weights = "auto";
};

const char* kDeploymentForm =
    "accepted: 'N x CARD [tpK] [PRECISION]' joined by '+', e.g. '4x rtx-4090', '2x rtx-4090 tp2', "
    "'1x h100-sxm fp8', '1x h100-sxm + 2x rtx-4090'";

// "2x rtx-4090 tp2 fp8 + 1x h100-sxm" -> groups.
std::vector<GroupSpec> parse_deployment(const std::string& text) {
  std::vector<GroupSpec> groups;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, '+')) {
    std::stringstream words(part);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) throw Error("--deployment: '" + text + "' has an empty part; " + kDeploymentForm);
    GroupSpec g;
    std::size_t i = 0;
    // "4x", "4", "x" forms for the count.
    std::string count = w[0];
    if (!count.empty() && (count.back() == 'x' || count.back() == 'X')) count.pop_back();
    if (!count.empty() && std::all_of(count.begin(), count.end(), ::isdigit)) {
      const std::string where = "--deployment '" + text + "': " + w[0];
      std::int64_t n = 0;
      const auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
      if (ec != std::errc() || end != count.data() + count.size()) {
        throw Error(where + ": the count is out of range; accepted: 1..100000 replicas");
      }
      check_run_limit(RunLimit::kReplicas, static_cast<double>(n), where);
      if (n > 100000) throw Error(where + ": the count is out of range; accepted: 1..100000 replicas");
      g.replicas = static_cast<int>(n);
      i = 1;
      if (i < w.size() && (w[i] == "x" || w[i] == "X")) ++i;
    }
    if (g.replicas < 1) throw Error("--deployment: '" + text + "': the count must be >= 1; " + kDeploymentForm);
    if (i >= w.size()) throw Error("--deployment: '" + text + "' names no card; " + kDeploymentForm);
    g.card = cards().find(w[i++]).name;
    for (; i < w.size(); ++i) {
      if (w[i].rfind("tp", 0) == 0 && w[i].size() > 2) {
        const std::string where = "--deployment '" + text + "': " + w[i];
        g.tp = static_cast<int>(checked::whole_in(parse_number(w[i].substr(2), where), 1, 64, where));
      } else {
        parse_precision(w[i], "--deployment '" + text + "'");
        g.weights = w[i];
      }
    }
    groups.push_back(g);
  }
  if (groups.empty()) throw Error("--deployment: empty; " + std::string(kDeploymentForm));
  return groups;
}

ScenarioSpec apply_groups(ScenarioSpec s, const std::vector<GroupSpec>& groups) {
  s.deployment.card = groups[0].card;
  s.deployment.tp = groups[0].tp;
  s.deployment.weights = groups[0].weights;
  s.deployment.kv_cache = "auto";
  s.replicas = groups[0].replicas;
  s.extra_groups.clear();
  for (std::size_t i = 1; i < groups.size(); ++i) {
    s.extra_groups.push_back({groups[i].card, groups[i].tp, groups[i].replicas, groups[i].weights});
  }
  return s;
}

std::string describe(const std::vector<GroupSpec>& groups) {
  std::string out;
  for (const auto& g : groups) {
    out += (out.empty() ? "" : " + ") + std::to_string(g.replicas) + "x " + g.card +
           (g.tp > 1 ? " tp" + std::to_string(g.tp) : "") + (g.weights != "auto" ? " " + g.weights : "");
  }
  return out;
}

struct Row {
  std::string name;
  std::vector<GroupSpec> groups;
  int cards = 0;
  double usd_per_hour = 0;
  plan::Evaluation eval;
  std::string error;
};

int run_compare(const CompareOptions& o) {
  const ScenarioSpec base = o.flags.resolve(o.scenario);
  if (!o.report.empty()) plot::require_gnuplot("--report");
  const PriceBook prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(),
      o.price_overrides);
  std::vector<Row> rows;
  for (const auto& d : o.deployments) {
    Row r;
    r.groups = parse_deployment(d);
    rows.push_back(r);
  }
  if (!o.search_mix.empty()) {
    std::stringstream in(o.search_mix);
    std::vector<std::string> names;
    for (std::string x; std::getline(in, x, ',');) names.push_back(cards().find(x).name);
    if (names.size() != 2) throw Error("--search-mix: '" + o.search_mix + "' must name two cards, e.g. h100-sxm,rtx-4090");
    for (int a = 0; a <= o.max_cards; ++a) {
      for (int b = 0; a + b <= o.max_cards; ++b) {
        if (a + b == 0) continue;
        Row r;
        if (a > 0) r.groups.push_back({a, names[0], 1, "auto"});
        if (b > 0) r.groups.push_back({b, names[1], 1, "auto"});
        rows.push_back(r);
      }
    }
  }
  if (rows.empty()) throw Error("--deployment: give at least one (or --search-mix); " + std::string(kDeploymentForm));
  // The model every row shares is loaded once here: a bad config is bad input (exit 2), not a
  // row that "fails" (exit 1 when none is best). Precisions were checked by parse_deployment.
  (void)models().find(base.deployment.model);
  for (Row& r : rows) {
    r.name = describe(r.groups);
    for (const auto& g : r.groups) {
      r.cards += g.replicas * g.tp;
      r.usd_per_hour += prices.usd_per_hour(cards().find(g.card)) * g.replicas * g.tp;
    }
  }
  plan::run_parallel(
      rows.size(), plan::default_threads(),
      [&](std::size_t i) {
        Row& r = rows[i];
        try {
          ScenarioSpec s = apply_groups(base, r.groups);
          r.eval = plan::evaluate(s, s.replicas, o.min_goodput);
        } catch (const Error& e) {
          r.error = e.what();
        }
      },
      o.quiet ? std::function<void(std::size_t, std::size_t)>()
              : [](std::size_t d, std::size_t t) {
                  std::fprintf(stderr, "\rcapsim compare: %zu/%zu", d, t);
                  if (d == t) std::fprintf(stderr, "\n");
                });
  // Verdict: the cheapest deployment meeting the SLOs; without SLOs, the most output per dollar.
  const bool have_slos = !base.slos.empty() || o.min_goodput;
  int best = -1;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (!r.error.empty() || r.eval.result.completed == 0) continue;
    const double per_usd = r.eval.result.output_throughput * 3600 / r.usd_per_hour;
    if (have_slos) {
      if (!r.eval.verdict.met) continue;
      if (best < 0 || r.usd_per_hour < rows[static_cast<std::size_t>(best)].usd_per_hour) best = static_cast<int>(i);
    } else {
      const Row& b = rows[static_cast<std::size_t>(std::max(best, 0))];
      if (best < 0 || per_usd > b.eval.result.output_throughput * 3600 / b.usd_per_hour) best = static_cast<int>(i);
    }
  }
  nlohmann::json j;
  j["scenario"] = base.name;
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    nlohmann::json x = {{"deployment", r.name}, {"cards", r.cards}, {"usd_per_hour", r.usd_per_hour},
                        {"best", static_cast<int>(i) == best}};
    if (!r.error.empty()) {
      x["error"] = r.error;
    } else {
      const SimulationResult& s = r.eval.result;
      x["slos_met"] = r.eval.verdict.met;
      x["median_ttft_ms"] = s.ttft.median * 1e3;
      x["p95_ttft_ms"] = s.ttft.p95 * 1e3;
      x["p95_tpot_ms"] = s.tpot.p95 * 1e3;
      x["p95_e2el_ms"] = s.e2el.p95 * 1e3;
      x["output_throughput"] = s.output_throughput;
      x["output_tokens_per_usd"] = s.output_throughput * 3600 / r.usd_per_hour;
      x["usd_per_million_output_tokens"] = s.output_throughput > 0 ? usd_per_million(r.usd_per_hour, s.output_throughput) : 0;
      x["binding_resource"] = plan::binding_resource(s);
    }
    out.push_back(x);
  }
  j["deployments"] = out;
  std::optional<TextTable> table;
  std::ostringstream text;
  {
    text << "capsim compare: " << base.deployment.model << ", " << base.name << "\n\n";
    TextTable t({"deployment", "cards", "TTFT p50", "TTFT p95", "TPOT p95", "E2E p95", "out tok/s", "$/hour",
                 "tok per $", "SLOs", "limited by"});
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      if (!r.error.empty()) {
        t.row({r.name, std::to_string(r.cards), "-", "-", "-", "-", "-", fmt("%.2f", r.usd_per_hour), "-", "n/a",
               r.error.substr(0, 60)});
        continue;
      }
      const SimulationResult& s = r.eval.result;
      t.row({(static_cast<int>(i) == best ? "> " : "  ") + r.name, std::to_string(r.cards),
             units::format_time(s.ttft.median), units::format_time(s.ttft.p95), units::format_time(s.tpot.p95),
             units::format_time(s.e2el.p95), fmt("%.0f", s.output_throughput), fmt("%.2f", r.usd_per_hour),
             fmt("%.0f", s.output_throughput * 3600 / r.usd_per_hour),
             have_slos ? (r.eval.verdict.met ? "met" : "missed " + r.eval.verdict.worst) : "-",
             plan::binding_resource(s)});
    }
    t.print(text);
    table = t;
    if (best >= 0) {
      const Row& b = rows[static_cast<std::size_t>(best)];
      text << "\n  verdict: " << b.name
                << (have_slos ? " is the cheapest that meets every SLO ($" + fmt("%.2f", b.usd_per_hour) + "/hour)"
                              : " gives the most output tokens per dollar")
                << "\n";
    } else {
      text << "\n  verdict: no deployment meets every SLO\n";
    }
  }
  if (o.json != "-") std::cout << text.str();
  std::string page_html;
  if (!o.report.empty()) {
    HtmlReport page("capsim compare: " + base.deployment.model + ", " + base.name, "--report");
    page.paragraph(best >= 0 ? "Verdict: " + rows[static_cast<std::size_t>(best)].name +
                                   (have_slos ? " is the cheapest deployment that meets every SLO."
                                              : " gives the most output tokens per dollar.")
                             : "Verdict: no deployment meets every SLO.");
    std::vector<std::string> names;
    std::vector<double> usd, ttft;
    std::vector<bool> ok;
    for (const Row& r : rows) {
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
    if (table) page.table(*table);
    page.heading("Text report", 3);
    page.preformatted(text.str());
    page_html = page.render();
  }
  if (!o.json.empty()) write_json(o.json, j);
  if (!o.report.empty()) write_text_file(o.report, page_html, "--report");
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
  cmd->add_option("--deployment,-d", o->deployments, std::string("a deployment, repeatable; ") + kDeploymentForm);
  cmd->add_option("--search-mix", o->search_mix, "two cards: try every mix of them up to --max-cards");
  cmd->add_option("--max-cards", o->max_cards, "most cards in a --search-mix fleet")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--min-goodput", o->min_goodput, "least share of requests meeting every SLO (0-1)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--price", o->price_overrides, "override a card's $/hour per GPU: h100-sxm=2.49 (repeatable)");
  cmd->add_option("--prices", o->prices_file, "price file (default calibration/prices.yaml)");
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (tables, charts by gnuplot) to FILE.html");
  cmd->add_flag("--quiet,-q", o->quiet, "no progress on stderr");
  cmd->callback([o, &exit_code] { exit_code = run_compare(*o); });
}

}  // namespace capsim::cli

#include "sim/answers/compare_answer.h"

#include "sim/answers/model_error_answer.h"
#include "sim/answers/plan_answer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/run_limits.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/memory_plan.h"
#include "sim/plan/costs.h"
#include "sim/plan/prices.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"
#include "sim/scenario/catalogues.h"
#include "sim/answers/launch_command.h"
#include "sim/answers/simulate_report.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;

const char* const kDeploymentForm =
    "accepted: 'N x CARD [tpK] [PRECISION] [kv:PRECISION]' joined by '+', e.g. '4x rtx-4090', '2x rtx-4090 tp2', "
    "'1x h100-sxm fp8', '1x h100-sxm kv:fp8', '1x h100-sxm + 2x rtx-4090'";

namespace {

// The scenario on these groups. The first group keeps the scenario's weights and KV precision
// unless it names its own (inherit_scenario_precisions put them in the group).
ScenarioSpec apply_groups(ScenarioSpec s, const std::vector<GroupSpec>& groups) {
  s.deployment.card = groups[0].card;
  s.deployment.tp = groups[0].tp;
  s.deployment.weights = groups[0].weights;
  s.deployment.kv_cache = groups[0].kv_cache;
  // A message about what the deployment text names names the flag, not the scenario file's field.
  for (const char* flag : {"--card", "--tp"}) s.origin.erase(flag);
  if (groups[0].weights_named) s.origin.erase("--weights");
  if (groups[0].kv_cache_named) s.origin.erase("--kv-cache");
  s.replicas = groups[0].replicas;
  s.extra_groups.clear();
  for (std::size_t i = 1; i < groups.size(); ++i) {
    const GroupSpec& g = groups[i];
    s.extra_groups.push_back({g.card, g.tp, g.replicas, g.weights, "", g.kv_cache});
  }
  return s;
}

// The first group's weights and KV precision where its text names none: the scenario's, as
// `simulate --card CARD` runs them (follow_card_defaults: a 16-bit default of the scenario's card
// becomes the new card's own). Before, every deployment ran "auto", so `compare -d '1x h100-sxm'`
// on a scenario with an fp8 KV cache ran a 16-bit one and disagreed with `simulate`.
void inherit_scenario_precisions(const DeploymentSpec& scenario, GroupSpec& g) {
  ScenarioSpec on_card;
  on_card.deployment = scenario;
  on_card.deployment.card = g.card;
  follow_card_defaults(on_card, scenario, {false, false, true, true});
  if (!g.weights_named) g.weights = on_card.deployment.weights;
  if (!g.kv_cache_named) g.kv_cache = on_card.deployment.kv_cache;
}

// "2x rtx-4090 tp2 fp8 kv:fp8 + 1x h100-sxm". A precision is shown where the text named one, or
// where the first group inherited one from the scenario that is not its card's 16-bit default.
std::string describe(const std::vector<GroupSpec>& groups, const DeploymentSpec& scenario) {
  const Precision scenario_half = native_half(cards().find(scenario.card));
  const auto shown = [&](const std::string& value, bool named, bool first) {
    if (value == "auto") return false;
    return named || (first && parse_precision(value, "deployment") != scenario_half);
  };
  std::string out;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const GroupSpec& g = groups[i];
    out += (out.empty() ? "" : " + ") + std::to_string(g.replicas) + "x " + g.card +
           (g.tp > 1 ? " tp" + std::to_string(g.tp) : "") +
           (shown(g.weights, g.weights_named, i == 0) ? " " + g.weights : "") +
           (shown(g.kv_cache, g.kv_cache_named, i == 0) ? " kv:" + g.kv_cache : "");
  }
  return out;
}

// The commands that start a deployment as simulated: one per group (card type), in order.
std::vector<LaunchCommand> launch_of(const ScenarioSpec& base, const std::vector<GroupSpec>& groups) {
  std::vector<LaunchCommand> out;
  for (const LaunchTarget& t : launch_targets(apply_groups(base, groups))) {
    for (LaunchCommand& c : launch_commands(t)) out.push_back(std::move(c));
  }
  return out;
}

// The row's first deployment group, resolved: the class its model error is read for.
Deployment deployment_of(const ScenarioSpec& base, const std::vector<GroupSpec>& groups) {
  return apply_groups(base, groups).deployment.resolve();
}

}  // namespace

std::vector<GroupSpec> parse_deployment_groups(const std::string& text, const std::string& flag) {
  std::vector<GroupSpec> groups;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, '+')) {
    std::stringstream words(part);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) throw Error(flag + ": '" + text + "' has an empty part; " + kDeploymentForm);
    GroupSpec g;
    std::size_t i = 0;
    // "4x", "4", "x" forms for the count.
    std::string count = w[0];
    if (!count.empty() && (count.back() == 'x' || count.back() == 'X')) count.pop_back();
    if (!count.empty() && std::all_of(count.begin(), count.end(), ::isdigit)) {
      const std::string where = flag + " '" + text + "': " + w[0];
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
    if (g.replicas < 1) throw Error(flag + ": '" + text + "': the count must be >= 1; " + kDeploymentForm);
    if (i >= w.size()) throw Error(flag + ": '" + text + "' names no card; " + kDeploymentForm);
    g.card = cards().find(w[i++]).name;
    bool tp_given = false, weights_given = false;
    for (; i < w.size(); ++i) {
      // Each of TP and precision once: a second one would silently replace the first.
      if (w[i].rfind("tp", 0) == 0 && w[i].size() > 2) {
        const std::string where = flag + " '" + text + "': " + w[i];
        if (tp_given) throw Error(where + ": a second TP in one group; " + kDeploymentForm);
        tp_given = true;
        g.tp = static_cast<int>(checked::whole_in(parse_number(w[i].substr(2), where), 1, 64, where));
      } else if (w[i].rfind("kv:", 0) == 0) {
        const std::string where = flag + " '" + text + "': " + w[i];
        if (g.kv_cache_named) throw Error(where + ": a second KV precision in one group; " + kDeploymentForm);
        g.kv_cache_named = true;
        g.kv_cache = w[i].substr(3);
        if (g.kv_cache != "auto" && !is_kv_cache_precision(parse_precision(g.kv_cache, where))) {
          throw Error(where + ": not a KV-cache precision capsim models; accepted: kv:auto, kv:fp32, kv:bf16, "
                      "kv:fp16, kv:fp8");
        }
      } else {
        parse_precision(w[i], flag + " '" + text + "'");
        if (weights_given) {
          throw Error(flag + " '" + text + "': " + w[i] + ": a second precision in one group; " + kDeploymentForm);
        }
        weights_given = true;
        g.weights_named = true;
        g.weights = w[i];
      }
    }
    groups.push_back(g);
  }
  if (groups.empty()) throw Error(flag + ": empty; " + std::string(kDeploymentForm));
  // getline drops what follows a last '+': "1x h100-sxm +" would read as one group.
  const auto last = text.find_last_not_of(" \t");
  if (last != std::string::npos && text[last] == '+') {
    throw Error(flag + ": '" + text + "' ends with '+' and no group after it; " + kDeploymentForm);
  }
  return groups;
}

namespace {

// --search-mix: every fleet of the two cards' replicas within --max-cards, one row each.
std::vector<CompareRow> search_mix_rows(const CompareRequest& o, const ScenarioSpec& base) {
  std::vector<CompareRow> rows;
  std::stringstream in(o.search_mix);
  std::vector<std::string> names;
  for (std::string x; std::getline(in, x, ',');) names.push_back(cards().find(x).name);
  if (names.size() != 2) throw Error("--search-mix: '" + o.search_mix + "' must name two cards, e.g. h100-sxm,rtx-4090");
  // Each card's replicas use the smallest TP of plan's default list (1, 2, 4, 8) within
  // --max-cards at which the model fits, at the scenario's weights, else at fp8, else int4
  // (the precision named in the fleet), so a model too large for one card is still mixed; one
  // (TP, weights) per card keeps the search to the same number of fleets. A card the model fits
  // at none keeps TP 1 at the scenario's weights, whose rows say why it does not fit.
  const auto smallest_group = [&](const std::string& card) {
    for (const char* weights : {"", "fp8", "int4"}) {  // "": the scenario's (as a -d naming none)
      for (int tp : {1, 2, 4, 8}) {
        if (tp > o.max_cards) break;
        GroupSpec g{1, card, tp, "auto"};
        if (*weights) {
          g.weights = weights;
          g.weights_named = true;
        }
        GroupSpec first = g;
        inherit_scenario_precisions(base.deployment, first);
        try {
          const std::vector<ReplicaGroup> resolved = resolve_groups(apply_groups(base, {first}));
          if (std::all_of(resolved.begin(), resolved.end(),
                          [](const ReplicaGroup& x) { return plan_fit(x.deployment).fits; })) {
            return g;
          }
        } catch (const Error&) {  // a TP the heads do not split over, a precision the card lacks
        }
      }
    }
    return GroupSpec{1, card, 1, "auto"};
  };
  const GroupSpec group_a = smallest_group(names[0]), group_b = smallest_group(names[1]);
  for (int a = 0; a * group_a.tp <= o.max_cards; ++a) {
    for (int b = 0; a * group_a.tp + b * group_b.tp <= o.max_cards; ++b) {
      if (a + b == 0) continue;
      CompareRow r;
      if (a > 0) {
        r.groups.push_back(group_a);
        r.groups.back().replicas = a;
      }
      if (b > 0) {
        r.groups.push_back(group_b);
        r.groups.back().replicas = b;
      }
      rows.push_back(r);
    }
  }
  return rows;
}

// The verdict (answer.best, -1 for none) and, when it beat a deployment tied with it on the
// primary criterion, why (the returned note; empty otherwise).
std::string rank_rows(CompareAnswer& answer) {
  const std::vector<CompareRow>& rows = answer.rows;
  const bool have_slos = answer.have_slos;
  // Verdict: the cheapest deployment meeting the SLOs; without SLOs, the most output per dollar.
  // Ties (prices within half a cent per hour, or output per dollar within 0.1%) go to quality —
  // the smaller worst SLO ratio, then lower TTFT p95, TPOT p95, higher output — then to cost and
  // the name, so the verdict never depends on the order the deployments were listed in.
  const auto per_usd = [](const CompareRow& r) { return r.eval.result.output_throughput * 3600 / r.usd_per_hour; };
  std::vector<std::size_t> eligible;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CompareRow& r = rows[i];
    if (!r.error.empty() || r.eval.result.completed == 0) continue;
    if (have_slos && !r.eval.verdict.met) continue;
    eligible.push_back(i);
  }
  const auto primary_tie = [&](const CompareRow& a, const CompareRow& b) {
    return have_slos ? std::fabs(a.usd_per_hour - b.usd_per_hour) < 0.005
                     : std::fabs(per_usd(a) - per_usd(b)) <= 1e-3 * std::max(per_usd(a), per_usd(b));
  };
  // The quality criterion that separates a from b (empty when none does), with both values.
  const auto quality_reason = [&](const CompareRow& a, const CompareRow& b) -> std::string {
    const SimulationResult &x = a.eval.result, &y = b.eval.result;
    if (have_slos && std::fabs(a.eval.verdict.worst_ratio - b.eval.verdict.worst_ratio) > 1e-9) {
      return "a worst SLO further inside its bound (" + fmt("%.2f", a.eval.verdict.worst_ratio) +
             " vs " + fmt("%.2f", b.eval.verdict.worst_ratio) + " of the bound)";
    }
    if (x.ttft.p95 != y.ttft.p95) {
      return "its lower TTFT p95 (" + units::format_time(x.ttft.p95) + " vs " + units::format_time(y.ttft.p95) + ")";
    }
    if (x.tpot.p95 != y.tpot.p95) {
      return "its lower TPOT p95 (" + units::format_time(x.tpot.p95) + " vs " + units::format_time(y.tpot.p95) + ")";
    }
    if (x.output_throughput != y.output_throughput) {
      return "its higher output (" + fmt("%.0f", x.output_throughput) + " vs " + fmt("%.0f", y.output_throughput) + " tok/s)";
    }
    return "";
  };
  const auto quality_less = [&](const CompareRow& a, const CompareRow& b) {
    const SimulationResult &x = a.eval.result, &y = b.eval.result;
    if (have_slos && std::fabs(a.eval.verdict.worst_ratio - b.eval.verdict.worst_ratio) > 1e-9) {
      return a.eval.verdict.worst_ratio < b.eval.verdict.worst_ratio;
    }
    if (x.ttft.p95 != y.ttft.p95) return x.ttft.p95 < y.ttft.p95;
    if (x.tpot.p95 != y.tpot.p95) return x.tpot.p95 < y.tpot.p95;
    if (x.output_throughput != y.output_throughput) return x.output_throughput > y.output_throughput;
    if (a.usd_per_hour != b.usd_per_hour) return a.usd_per_hour < b.usd_per_hour;
    return a.name < b.name;
  };
  std::stable_sort(eligible.begin(), eligible.end(), [&](std::size_t ia, std::size_t ib) {
    const CompareRow &a = rows[ia], &b = rows[ib];
    if (!primary_tie(a, b)) return have_slos ? a.usd_per_hour < b.usd_per_hour : per_usd(a) > per_usd(b);
    return quality_less(a, b);
  });
  answer.best = eligible.empty() ? -1 : static_cast<int>(eligible.front());
  std::string tie_note;  // why the verdict beat a deployment tied with it on the primary criterion
  if (eligible.size() > 1 && primary_tie(rows[eligible[0]], rows[eligible[1]])) {
    const CompareRow &a = rows[eligible[0]], &b = rows[eligible[1]];
    const std::string why = quality_reason(a, b);
    tie_note = "tied with " + b.name + (have_slos ? " on price" : " on output tokens per dollar at this load") +
               "; chosen for " + (why.empty() ? std::string("its name (identical results)") : why);
  }
  return tie_note;
}

// The text report: the table (kept in answer.table for the HTML report), the reasons rows did
// not run, the verdict and the commands that launch what ran.
std::string compare_text(const CompareRequest& o, CompareAnswer& answer, const std::string& tie_note) {
  const ScenarioSpec& base = answer.base;
  const std::vector<CompareRow>& rows = answer.rows;
  const bool have_slos = answer.have_slos;
  const int best = answer.best;
  std::optional<TextTable>& table = answer.table;
  std::ostringstream text;
  text << "capsim compare: " << base.deployment.model << ", " << base.name << "\n\n";
  // With SLOs, a last column: whether they hold at capsim's p90 model error (as plan's).
  std::vector<std::string> header{"deployment", "cards", "TTFT p50", "TTFT p95", "TPOT p95", "E2E p95", "out tok/s",
                                  "$/hour", "tok/$ @load", "SLOs", "limited by"};
  if (have_slos) header.push_back("at p90 model error");
  TextTable t(header);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CompareRow& r = rows[i];
    std::vector<std::string> cells;
    if (!r.error.empty()) {
      cells = {r.name, std::to_string(r.cards), "-", "-", "-", "-", "-", fmt("%.2f", r.usd_per_hour), "-",
               r.fits ? "n/a" : "does not fit", shorten_at_word(r.error, 60)};
      if (have_slos) cells.push_back("-");
      t.row(cells);
      continue;
    }
    const SimulationResult& s = r.eval.result;
    cells = {(static_cast<int>(i) == best ? "> " : "  ") + r.name, std::to_string(r.cards),
             // TTFT p95 as plan's table gives it: with a ttft_p95 SLO, the steady-state estimate the
             // verdict rests on and its interval's upper end; else the measured window's.
             units::format_time(s.ttft.median), option_ttft_text(r.eval), units::format_time(s.tpot.p95),
             units::format_time(s.e2el.p95), fmt("%.0f", s.output_throughput), fmt("%.2f", r.usd_per_hour),
             fmt("%.0f", s.output_throughput * 3600 / r.usd_per_hour),
             have_slos ? (r.eval.verdict.met ? std::string("met")
                          : r.eval.verdict.decision == plan::Decision::kInconclusive ? "inconclusive " + r.eval.verdict.worst
                                                                                      : "missed " + r.eval.verdict.worst)
                       : "-",
             plan::binding_resource(s)};
    if (have_slos) cells.push_back(deployment_model_error_margin(deployment_of(base, r.groups), r.eval.verdict).text());
    t.row(cells);
  }
  t.print(text);
  table = t;
  text << "  'tok/$ @load': output tokens per dollar at this scenario's offered load (out tok/s x 3600 / $/hour). "
          "A deployment the load does not saturate would serve more for the same price, so this compares prices at "
          "this load, not capacities; `capsim capacity` finds the load where each one saturates.\n";
  // Which rows rest on cards whose efficiencies nobody measured (plan's 'data' column).
  std::string unmeasured;
  for (const CompareRow& r : rows) {
    std::set<std::string> seen;
    for (const GroupSpec& g : r.groups) {
      const Card& c = cards().find(g.card);
      if (c.efficiency_data == "measured" || !seen.insert(c.name).second) continue;
      unmeasured += "\n    " + r.name + ": " + c.name + " " + c.efficiency_data_text();
    }
  }
  if (!unmeasured.empty()) {
    text << "  'data': these deployments' card efficiencies are not measured on the card (calibration/cards, "
            "efficiency.data); their latencies are less certain than their intervals say:"
         << unmeasured << "\n";
  }
  // The table's cell holds the start of a reason; here each one whole, once, with the
  // deployments it stopped.
  std::vector<std::pair<std::string, std::string>> reasons;  // (message, deployments)
  for (const CompareRow& r : rows) {
    if (r.error.empty()) continue;
    const auto same = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == r.error; });
    if (same == reasons.end()) reasons.emplace_back(r.error, r.name);
    else same->second += ", " + r.name;
  }
  if (!reasons.empty()) text << "\n";
  for (const auto& [message, names] : reasons) text << "  " << names << ": " << message << "\n";
  const auto ran = std::count_if(rows.begin(), rows.end(), [](const CompareRow& r) { return r.error.empty(); });
  if (best >= 0) {
    const CompareRow& b = rows[static_cast<std::size_t>(best)];
    text << "\n  verdict: " << b.name
              << (have_slos ? " is the cheapest that meets every SLO ($" + fmt("%.2f", b.usd_per_hour) + "/hour)"
                            : " gives the most output tokens per dollar at this load")
              << "\n";
    if (!tie_note.empty()) text << "  (" << tie_note << ")\n";
  } else if (ran == 0) {
    text << "\n  verdict: none of the deployments can run (the reasons are above)\n";
  } else {
    // Within the SLOs but on runs too short to call it (SloVerdict::only_too_short): say so, and
    // what to change, rather than that they miss.
    const bool short_only = std::any_of(rows.begin(), rows.end(), [](const CompareRow& r) {
      return r.error.empty() && r.fits && r.eval.verdict.only_too_short();
    });
    text << "\n  verdict: no deployment meets every SLO"
         << (short_only ? " verifiably: a run within its SLOs is too short to support a PASS (fewer than " +
                              std::to_string(kMinSteadyStateObservations) +
                              " measured requests); lengthen the run (--duration or --requests)"
                        : "")
         << "\n";
  }
  // The config to launch (docs/deployment-options.md#the-config-to-launch): every deployment
  // that ran, or only the verdict's among a searched mix's many.
  const bool all = o.search_mix.empty();
  if ((all && ran > 0) || best >= 0) {
    text << "\n  to launch " << (all ? "each deployment" : "the verdict") << " as simulated:\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const CompareRow& r = rows[i];
      if (!r.error.empty() || (!all && static_cast<int>(i) != best)) continue;
      text << "    " << r.name << ":\n" << launch_text(launch_of(base, r.groups), "      ");
    }
  }
  return text.str();
}

}  // namespace

CompareAnswer answer_compare(const CompareRequest& o, const std::function<void(std::size_t, std::size_t)>& progress) {
  CompareAnswer answer;
  answer.base = o.base;
  const ScenarioSpec& base = answer.base;
  // Serving first: a disaggregated base has pool and link names compare would never use, so
  // naming a missing KV link would be the wrong complaint.
  if (base.serving != "aggregated") {
    throw Error("--serving: compare runs aggregated deployments; for " + base.serving +
                " use `capsim simulate` or `capsim plan --pd-search`");
  }
  validate_names(base);  // unknown names: exit 2 before anything runs
  if (o.before_search) o.before_search();
  const PriceBook prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(),
      o.price_overrides);
  std::vector<CompareRow>& rows = answer.rows;
  for (const auto& d : o.deployments) {
    CompareRow r;
    r.groups = parse_deployment_groups(d);
    rows.push_back(r);
  }
  if (!o.search_mix.empty()) {
    for (CompareRow& r : search_mix_rows(o, base)) rows.push_back(std::move(r));
  }
  if (rows.empty()) throw Error("--deployment: give at least one (or --search-mix); " + std::string(kDeploymentForm));
  // The model every row shares is loaded once here: a bad config is bad input (exit 2), not a
  // row that "fails" (exit 1 when none is best). Precisions were checked by parse_deployment.
  (void)find_model(base.deployment.model);
  // The first group runs the base scenario's pipeline and data-parallel ranks (scenario.cc
  // build_scenario): its replicas take TP x PP x DP GPUs each.
  const DeploymentSpec& bd = base.deployment;
  const int first_gpus = bd.pp * bd.dp;
  const std::string first_suffix = (bd.pp > 1 ? " pp" + std::to_string(bd.pp) : std::string()) +
                                   (bd.dp > 1 ? " dp" + std::to_string(bd.dp) : std::string()) +
                                   (bd.enable_expert_parallel ? " ep" : "");
  for (CompareRow& r : rows) {
    inherit_scenario_precisions(bd, r.groups.front());
    r.name = describe(r.groups, bd);
    if (!first_suffix.empty()) {
      const std::size_t cut = r.name.find(" + ");
      r.name.insert(cut == std::string::npos ? r.name.size() : cut, first_suffix);
    }
    for (std::size_t i = 0; i < r.groups.size(); ++i) {
      const auto& g = r.groups[i];
      const int per_replica = g.tp * (i == 0 ? first_gpus : 1);
      r.cards += g.replicas * per_replica;
      r.usd_per_hour += prices.usd_per_hour(cards().find(g.card)) * g.replicas * per_replica;
    }
  }
  // A deployment that cannot hold one ordinary request does not run: the simulator would cap its
  // max_model_len at its KV cache and reject every request, a row of zeros "limited by idle".
  // A --deployment that cannot be resolved (a TP that does not divide the heads, a precision
  // the card lacks) is bad input, exit 2 naming it, not a row of "n/a" beside the good ones;
  // unless every deployment fails alike, when the input they share is at fault. A searched
  // mix's row keeps its message in the table.
  std::vector<std::string> resolve_errors(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CompareRow& r = rows[i];
    try {
      for (const ReplicaGroup& g : resolve_groups(apply_groups(base, r.groups))) {
        const MemoryPlan fit = plan_fit(g.deployment);
        if (!fit.fits) {
          r.fits = false;
          r.error = does_not_fit_message(g.deployment, fit);
          break;
        }
      }
    } catch (const Error& e) {
      resolve_errors[i] = e.what();
    }
  }
  bool shared = rows.size() > 1 && std::all_of(resolve_errors.begin(), resolve_errors.end(), [&](const std::string& e) {
                  return !e.empty() && e == resolve_errors.front();
                });
  if (shared) {
    try {
      (void)resolve_groups(base);
      shared = false;  // the scenario's own deployment resolves: the deployments named are at fault
    } catch (const Error&) {
    }
  }
  for (std::size_t i = 0; i < o.deployments.size() && !shared; ++i) {
    if (!resolve_errors[i].empty()) throw Error("--deployment '" + o.deployments[i] + "': " + resolve_errors[i]);
  }
  plan::run_parallel(
      rows.size(), plan::pool_width(plan::default_threads()),
      [&](std::size_t i) {
        CompareRow& r = rows[i];
        if (!r.fits) return;
        try {
          ScenarioSpec s = apply_groups(base, r.groups);
          r.eval = plan::evaluate(s, s.replicas, o.min_goodput);
        } catch (const Error& e) {
          r.error = e.what();
        }
      },
      progress);
  // Every row failed with the same message: the input they share (the workload, a flag) is at
  // fault, not a deployment (a deployment's failure names its card or TP). That is bad input
  // (exit 2), not a table of failures under "no deployment meets every SLO" (exit 1).
  if (std::all_of(rows.begin(), rows.end(), [&](const CompareRow& r) {
        return r.fits && !r.error.empty() && r.error == rows.front().error;
      })) {
    throw Error(rows.front().error);
  }
  answer.have_slos = !base.slos.empty() || o.min_goodput;
  const std::string tie_note = rank_rows(answer);
  const int best = answer.best;
  nlohmann::json& j = answer.json;
  j["scenario"] = base.name;
  j["seed"] = base.seed;  // every deployment runs the same workload from it; `diff` reads it
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const CompareRow& r = rows[i];
    nlohmann::json x = {{"deployment", r.name}, {"cards", r.cards}, {"usd_per_hour", r.usd_per_hour},
                        {"best", static_cast<int>(i) == best}};
    if (!r.error.empty()) {
      x["error"] = r.error;
      if (!r.fits) x["fits"] = false;
    } else {
      const SimulationResult& s = r.eval.result;
      x["slos_met"] = r.eval.verdict.met;
      x["worst_slo"] = r.eval.verdict.worst;
      x["worst_slo_ratio"] = r.eval.verdict.worst_ratio;
      x["median_ttft_ms"] = s.ttft.median * 1e3;
      x["p95_ttft_ms"] = s.ttft.p95 * 1e3;
      x["p95_tpot_ms"] = s.tpot.p95 * 1e3;
      x["p95_e2el_ms"] = s.e2el.p95 * 1e3;
      x["output_throughput"] = s.output_throughput;
      // At the scenario's offered load, not at saturation: the name says so (docs/planning.md#compare).
      x["output_tokens_per_usd_at_offered_load"] = s.output_throughput * 3600 / r.usd_per_hour;
      x["usd_per_million_output_tokens"] = s.output_throughput > 0 ? usd_per_million(r.usd_per_hour, s.output_throughput) : 0;
      x["binding_resource"] = plan::binding_resource(s);
      x["decision"] = plan::decision_name(r.eval.verdict.decision);
      x["steady_state"] = steady_state_json(s.steady);
      x["launch"] = launch_json(launch_of(base, r.groups));
      nlohmann::json data = nlohmann::json::array();
      for (const GroupSpec& g : r.groups) {
        const Card& c = cards().find(g.card);
        nlohmann::json one = {{"card", c.name}};
        one.update(card_data_json(c));
        data.push_back(one);
      }
      x["card_data"] = data;
      if (answer.have_slos) x["model_error"] = deployment_model_error_json(deployment_of(base, r.groups), r.eval.verdict);
    }
    out.push_back(x);
  }
  j["deployments"] = out;
  if (!tie_note.empty()) j["verdict_tie_break"] = tie_note;
  answer.text = compare_text(o, answer, tie_note);
  return answer;
}

}  // namespace capsim::answers

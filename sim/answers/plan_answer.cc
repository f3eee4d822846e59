#include "sim/answers/plan_answer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/memory_plan.h"
#include "sim/plan/costs.h"
#include "sim/plan/prices.h"
#include "sim/plan/planner.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"
#include "sim/scenario/catalogues.h"
#include "sim/answers/launch_command.h"
#include "sim/answers/simulate_report.h"

namespace capsim::scenario {
namespace {

using plan::Candidate;
using plan::label;

// `s` split at commas (empty `s`: no entries). An empty entry (",", "a,,b", a trailing comma) is
// refused, naming `flag`, rather than dropped: `--cards ,` read as no names searched all cards.
std::vector<std::string> split_list(const std::string& s, const std::string& flag) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  for (std::size_t start = 0;;) {
    const std::size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (out.back().empty()) {
      throw Error(flag + ": '" + s + "' has an empty entry; give values separated by single commas");
    }
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
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
          {"binding_resource", plan::binding_resource(r)},
          {"decision", plan::decision_name(e.verdict.decision)},
          {"steady_state", steady_state_json(r.steady)}};
}

// The commands that start the option as simulated: its replicas behind the router that won.
std::vector<LaunchCommand> launch_of(const ScenarioSpec& base, const Candidate& c) {
  ScenarioSpec s = plan::spec_of(base, c);
  s.replicas = c.search.best.replicas;
  return launch_commands(launch_targets(s).front());
}

}  // namespace

PlanAnswer answer_plan(const PlanRequest& o, const plan::PlanProgress& progress) {
  PlanAnswer a;
  a.base = o.base;
  const ScenarioSpec& base = a.base;
  validate_names(base);  // an unknown model or router is bad input (2), not "none fits" (1)
  if (base.slos.empty() && !o.min_goodput) {
    throw Error("--slo: plan needs at least one SLO (e.g. --slo 'ttft_p95<=1s') or --min-goodput");
  }
  if (!base.extra_groups.empty()) {
    throw Error("deployment: plan searches one card type at a time; use `capsim compare` for mixed fleets");
  }
  if (base.serving != "aggregated") {
    throw Error("--serving: plan searches aggregated deployments; add --pd-search to search the prefill:decode ratio of " +
                base.serving + " serving");
  }
  // Bad input is refused before any simulation.
  std::vector<double>& profile = a.profile;
  if (!o.load_profile.empty()) {
    for (const auto& v : split_list(o.load_profile, "--load-profile")) profile.push_back(parse_number(v, "--load-profile"));
    if (profile.size() != 24) {
      throw Error("--load-profile: " + std::to_string(profile.size()) +
                  " values; expected 24 (one per hour, users or requests/s)");
    }
    if (!base.users && !base.concurrency && !base.rate) {
      throw Error("--load-profile: needs a --users, --concurrency or --rate workload");
    }
  }
  a.prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(),
      o.price_overrides);
  const PriceBook& prices = a.prices;

  std::vector<std::string> card_names;
  if (o.cards.empty()) {
    for (const Card& c : cards().cards()) card_names.push_back(c.name);
  } else {
    for (const auto& n : split_list(o.cards, "--cards")) {
      try {
        card_names.push_back(cards().find(n).name);
      } catch (const Error& e) {
        throw Error(std::string("--cards: ") + e.what());
      }
    }
  }
  std::vector<int> tps;
  for (const auto& t : split_list(o.tps, "--tp")) {
    const double v = parse_number(t, "--tp");
    if (v < 1 || v > 64 || v != std::floor(v)) throw Error("--tp: '" + t + "' is not a GPU count in 1..64");
    tps.push_back(static_cast<int>(v));
  }
  const auto weights = split_list(o.weights, "--weights");
  const auto kvs = split_list(o.kv, "--kv-cache");
  // A precision nobody knows is bad input (exit 2), not a candidate the search rejects.
  for (const auto& w : weights) {
    if (w != "auto") parse_precision(w, "--weights");
  }
  for (const auto& k : kvs) {
    if (k == "auto") continue;
    const Precision p = parse_precision(k, "--kv-cache");
    if (!is_kv_cache_precision(p)) {
      throw Error("--kv-cache: " + k + " is not a KV-cache precision capsim models; accepted: auto, fp32, bf16, fp16, fp8");
    }
  }
  if (tps.empty() || weights.empty() || kvs.empty()) throw Error("--tp/--weights/--kv-cache: empty list");
  {
    // A TP list none of whose sizes divides the model's attention heads asks for nothing that
    // exists: bad input (2), not "fits on no candidate" (1).
    const int heads = find_model(base.deployment.model).heads;
    if (std::none_of(tps.begin(), tps.end(), [&](int t) { return heads % t == 0; })) {
      throw Error("--tp: " + o.tps + " divides none of the " + std::to_string(heads) + " attention heads of " +
                  base.deployment.model + "; accepted: divisors of " + std::to_string(heads));
    }
  }

  if (o.before_search) o.before_search();
  plan::PlanSpace space;
  space.cards = card_names;
  space.tps = tps;
  space.weights = weights;
  space.kv_caches = kvs;
  space.max_cards = o.max_cards;
  space.min_goodput = o.min_goodput;
  space.top = o.top;
  space.search_duration = o.search_duration;
  // --kv-cache not given: each card's own 16-bit KV cache and, where its engines support it, fp8.
  space.try_fp8_kv = !o.kv_given;
  space.routers = plan::routers_to_try(base);
  space.replications = o.replications;
  a.outcome = plan::search_plan(base, space, prices, progress);
  const plan::PlanOutcome& outcome = a.outcome;
  const std::vector<Candidate>& cands = outcome.candidates;
  const std::vector<std::size_t>& live = outcome.live;
  const std::vector<std::size_t>& ok = outcome.ok;
  const std::size_t searched = outcome.searched, skipped = outcome.skipped;
  const unsigned threads = plan::default_threads();
  const auto cost_of = [](const Candidate& c) { return c.option_usd_per_hour(); };
  const auto spec_of = [&](const Candidate& c) { return plan::spec_of(base, c); };

  a.users = users_of(base);
  const std::optional<double>& users = a.users;
  nlohmann::json& j = a.json;
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
                        {"verified_as_cluster", c.verified}, {"router", c.router},
                        {"verified_over_seeds", o.replications},
                        {"estimated_replicas_from_load_shares", c.estimated_replicas},
                        {"price_provenance", price_provenance(prices, c.card)}, {"usd_per_hour", usd_h},
                        {"usd_per_million_output_tokens", mtok_h > 0 ? usd_h / mtok_h : 0},
                        {"result", evaluation_json(e)}};
    if (users) x["usd_per_user_per_month"] = usd_h * kHoursPerMonth / *users;
    nlohmann::json tried = nlohmann::json::array();
    for (const Candidate::RouterTried& t : c.router_replicas) {
      if (t.at_least > 0) {
        tried.push_back({{"router", t.router}, {"replicas", nullptr}, {"at_least", t.at_least}});
      } else {
        tried.push_back({{"router", t.router}, {"replicas", t.replicas}});
      }
    }
    x["routers_tried"] = tried;
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
    x["launch"] = launch_json(launch_of(base, c));
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
  std::optional<TextTable>& table = a.table;
  {
    text << "capsim plan: " << base.deployment.model << " for " << base.name << "\n  SLOs:";
    for (const auto& s : slos) text << " " << s.get<std::string>();
    if (o.min_goodput) text << " goodput>=" << fmt("%.0f%%", 100 * *o.min_goodput);
    std::string router_list;
    for (const auto& r : plan::routers_to_try(base)) router_list += (router_list.empty() ? "" : ", ") + r;
    text << "\n  " << cands.size() << " candidates, " << live.size() << " fit in memory, " << searched
         << " searched (" << skipped << " skipped by cost); replicas estimated on 1/r load shares, then every "
         << "option below verified as the whole cluster behind each router tried (" << router_list << ")\n\n";
    TextTable t({"#", "deployment", "router", "replicas", "cards", "TTFT p95", "TPOT p95", "out tok/s", "$/hour",
                 "price", "$/M tok", users ? "$/user/mo" : "", "binds"});
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
      const plan::SloDecision* ttft = nullptr;
      for (const auto& d : e.verdict.slos) {
        if (d.slo == "ttft_p95") ttft = &d;
      }
      // With an interval: the steady-state estimate (after MSER-5) and the interval's upper end,
      // the number the decision rests on; else the measured window's value.
      const std::string ttft_text = ttft && ttft->has_interval
                                        ? units::format_time(ttft->estimate) + " (<=" + units::format_time(ttft->high) + ")"
                                        : units::format_time(e.result.ttft.p95);
      t.row({std::to_string(++rank_no), label(c), c.router, std::to_string(e.replicas),
             std::to_string(c.total_cards()), ttft_text,
             units::format_time(e.result.tpot.p95), fmt("%.0f", e.output_throughput()),
             fmt("%.2f", usd_h), price_provenance(prices, c.card), mtok_h > 0 ? fmt("%.3f", usd_h / mtok_h) : "-",
             users ? fmt("%.2f", usd_h * kHoursPerMonth / *users) : "", binds});
    }
    if (ok.empty()) {
      text << (live.empty() ? "  fits on no candidate: none fits in memory (reasons below)\n"
                            : "  no candidate meets the SLOs (reasons below)\n");
    }
    else t.print(text);
    table = t;
    // The interval the decision used: one run's batch means, or (--replications) a t interval over
    // the seeds' steady-state estimates (decide_slo_replicated).
    if (o.replications > 1) {
      text << "  Each option meets every SLO with its 95% interval over " << o.replications
           << " seeds (a t interval of the seeds' steady-state estimates, each after MSER-5 warm-up detection) "
              "inside the bound; TTFT p95 is the seeds' mean estimate with the interval's upper end in brackets. 'router': the ";
    } else {
      text << "  Each option meets every SLO with its 95% interval (batch means after MSER-5 warm-up "
              "detection) inside the bound; TTFT p95 is the steady-state estimate with the interval's upper end in brackets. 'router': the ";
    }
    text << "router that needed the fewest replicas. 'price': the rent's provenance (cited, secondary, assumed, "
              "doubtful, --price; calibration/prices.yaml). 'binds': the SLO that fails with one replica fewer, "
              "and what limits it.\n";
    // Verification can confirm more options than the table shows (a round verifies several at
    // once); they are in the JSON's options[], and named here so that every candidate is
    // accounted for in the text too.
    if (ok.size() > static_cast<std::size_t>(std::max(0, o.top))) {
      text << "  Also verified, ranked below the top " << o.top << ":";
      const char* sep = " ";
      for (std::size_t k = static_cast<std::size_t>(o.top); k < ok.size(); ++k) {
        const Candidate& c = cands[ok[k]];
        text << sep << label(c) << " (" << c.search.best.replicas << " x " << c.router << ", $"
             << fmt("%.2f", cost_of(c)) << "/hour)";
        sep = "; ";
      }
      text << ".\n";
    }
    if (!ok.empty()) {
      const Candidate& best = cands[ok.front()];
      text << "\n  to launch #1 (" << label(best) << ") as simulated (docs/deployment-options.md#the-config-to-launch):\n"
           << launch_text(launch_of(base, best), "    ");
    }
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
  a.text = text.str();
  return a;
}

}  // namespace capsim::scenario

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
#include "sim/answers/model_error_answer.h"
#include "sim/answers/simulate_report.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
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

// Each SLO's 95% interval upper end (the run's value where there is no interval) as a share of
// its bound: how far below its bound the option sits. `label` is the SLO's metric ("ttft"), or
// its whole name when the scenario bounds one metric twice.
double upper_share(const plan::SloDecision& d) { return d.high / d.bound; }
std::string bound_use_text(const plan::SloVerdict& v) {
  std::string out;
  for (const plan::SloDecision& d : v.slos) {
    std::string name = d.slo.substr(0, d.slo.find('_'));
    const auto same_metric = std::count_if(v.slos.begin(), v.slos.end(), [&](const plan::SloDecision& x) {
      return x.slo.substr(0, x.slo.find('_')) == name;
    });
    if (same_metric > 1) name = d.slo;
    out += (out.empty() ? "" : " ") + name + " " + (std::isnan(d.high) ? std::string("-") : fmt("%.0f%%", 100 * upper_share(d)));
  }
  return out.empty() ? "-" : out;
}
nlohmann::json bound_use_json(const plan::SloVerdict& v) {
  nlohmann::json out = nlohmann::json::array();
  for (const plan::SloDecision& d : v.slos) {
    out.push_back({{"slo", d.slo}, {"bound_s", d.bound}, {"upper_s", d.high}, {"has_interval", d.has_interval},
                   {"upper_share_of_bound", upper_share(d)}});
  }
  return out;
}

// "+125 users, ttft_p95": the load over the scenario's that still met every SLO, and the SLO
// that failed first above it.
std::string load_number(double v, const std::string& unit) {
  if (unit == "users" || unit == "concurrent requests") return fmt("%.0f", v) + (unit == "users" ? " users" : " concurrent");
  if (unit == "requests/s") return fmt("%.3g", v) + " req/s";
  return fmt("%.0f%%", 100 * v);
}
std::string headroom_text(const Candidate::Headroom& h) {
  if (!h.searched) return "-";
  if (h.capped) return ">= +" + load_number(h.max_load - h.load, h.unit);
  const std::string slo = h.fails_first + (h.fails_as == plan::Decision::kInconclusive ? "?" : "");
  if (h.max_load <= h.load) return "< +" + load_number(h.fail_load - h.load, h.unit) + ", " + slo;
  return "+" + load_number(h.max_load - h.load, h.unit) + ", " + slo;
}
nlohmann::json headroom_json(const Candidate::Headroom& h, const std::string& window) {
  if (!h.searched) return nullptr;
  return {{"unit", h.unit}, {"load", h.load}, {"max_load_met", h.max_load},
          {"least_load_missed", h.capped ? nlohmann::json(nullptr) : nlohmann::json(h.fail_load)},
          {"capped", h.capped}, {"max_factor_tried", plan::kHeadroomMaxFactor},
          {"first_missed_slo", h.capped ? nlohmann::json(nullptr) : nlohmann::json(h.fails_first)},
          {"first_missed_decision", h.capped ? nlohmann::json(nullptr) : nlohmann::json(plan::decision_name(h.fails_as))},
          {"runs", h.runs}, {"measured_window", window}};
}

// Why an evaluation does not meet the SLOs: each SLO that did not pass, with its numbers.
std::string misses_text(const plan::Evaluation& e) {
  std::string out;
  for (const plan::SloDecision& d : e.verdict.slos) {
    if (d.decision == plan::Decision::kPass) continue;
    out += (out.empty() ? "" : "; ") + std::string(d.decision == plan::Decision::kInconclusive ? "inconclusive: " : "") +
           (d.why.rfind(d.slo, 0) == 0 ? d.why : d.slo + ": " + d.why);
  }
  if (out.empty()) {
    out = "worst " + e.verdict.worst + " at " + fmt("%.2f", e.verdict.worst_ratio) + "x its bound";
    if (e.result.rejected > 0) out += ", " + std::to_string(e.result.rejected) + " requests rejected";
  }
  return out + " (limited by " + plan::binding_resource(e.result) + ")";
}
std::string replicas_text(int n) { return std::to_string(n) + (n == 1 ? " replica" : " replicas"); }
std::string with_text(const plan::Evaluation& e) {
  return "with " + replicas_text(e.replicas) +
         (e.from_share ? " (estimated on a load share: one replica under 1/" + std::to_string(e.replicas) + " of the load)" : "");
}

// The commands that start the option as simulated: its replicas behind the router that won.
std::vector<LaunchCommand> launch_of(const ScenarioSpec& base, const Candidate& c) {
  ScenarioSpec s = plan::spec_of(base, c);
  s.replicas = c.search.best.replicas;
  return launch_commands(launch_targets(s).front());
}

// The request's cards, TP sizes and precisions checked (bad input throws, exit 2, before any
// simulation) and turned into the search's space.
plan::PlanSpace plan_space_of(const PlanRequest& o, const ScenarioSpec& base) {
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
  if (!o.card_classes.empty()) {
    const std::vector<std::string> accepted = {"datacenter", "workstation", "consumer"};
    const std::vector<std::string> wanted = split_list(o.card_classes, "--card-class");
    for (const auto& w : wanted) {
      if (std::find(accepted.begin(), accepted.end(), w) == accepted.end()) {
        throw Error("--card-class: '" + w + "' is not a card class; accepted: datacenter, workstation, consumer");
      }
    }
    std::vector<std::string> kept;
    for (const auto& n : card_names) {
      const Card& c = cards().find(n);
      if (c.card_class.empty()) {
        throw Error("--card-class: card " + c.name + " (" + c.file +
                    ") states no card_class; add one (docs/data-formats.md#cards) or leave it out of --cards");
      }
      if (std::find(wanted.begin(), wanted.end(), c.card_class) != wanted.end()) kept.push_back(n);
    }
    if (kept.empty()) throw Error("--card-class: no card of class " + o.card_classes + " among the cards to search");
    card_names = kept;
  }
  std::string explain_card;
  if (!o.explain.empty()) {
    try {
      explain_card = cards().find(o.explain).name;
    } catch (const Error& e) {
      throw Error(std::string("--explain: ") + e.what());
    }
    if (std::find(card_names.begin(), card_names.end(), explain_card) == card_names.end()) {
      std::string list;
      for (const auto& n : card_names) list += (list.empty() ? "" : ", ") + n;
      throw Error("--explain: " + explain_card + " is not among the cards searched (--cards, --card-class); accepted: " +
                  list);
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
  space.explain_card = explain_card;
  space.headroom = true;
  return space;
}

// One verified option as the JSON's options[] gives it: deployment, price, result, headroom,
// model error, energy and the commands that launch it.
nlohmann::json option_json(const PlanRequest& o, const PlanAnswer& a, const Candidate& c,
                           const std::string& headroom_window) {
  const ScenarioSpec& base = a.base;
  const PriceBook& prices = a.prices;
  const std::optional<double>& users = a.users;
  const auto cost_of = [](const Candidate& x) { return x.option_usd_per_hour(); };
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
  x["card_data"] = card_data_json(cards().find(c.card));
  x["headroom"] = {{"slos", bound_use_json(e.verdict)}, {"load", headroom_json(c.headroom, headroom_window)}};
  x["model_error"] = option_model_error_json(base, c);
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
  return x;
}

// --explain: each candidate of the card, why it fails or where it ranks, into the JSON's
// "explain"; returns the text report's line for each.
std::vector<std::string> explain_plan(const PlanRequest& o, PlanAnswer& a, const std::string& explain_card) {
  const plan::PlanOutcome& outcome = a.outcome;
  const std::vector<Candidate>& cands = outcome.candidates;
  const std::vector<std::size_t>& ok = outcome.ok;
  const auto cost_of = [](const Candidate& c) { return c.option_usd_per_hour(); };
  std::vector<std::string> explain_lines;
  nlohmann::json ex = nlohmann::json::array();
  for (const plan::PlanOutcome::Explained& x : outcome.explained) {
    const Candidate& c = x.searched_now ? x.as_searched : cands[x.candidate];
    nlohmann::json e = {{"deployment", label(c)}, {"tp", c.tp}, {"weights", c.weights}, {"kv_cache", c.kv},
                        {"searched_for_explain", x.searched_now}};
    std::string line = label(c) + ": ";
    const auto listed_at = std::find(ok.begin(), ok.end(), x.candidate);
    const bool passes = x.searched_now ? c.verified && !c.rejected : listed_at != ok.end();
    if (c.reason.rfind("does not fit", 0) == 0 || (!passes && c.search.evaluations == 0 && !x.searched_now)) {
      e["outcome"] = c.reason.rfind("does not fit", 0) == 0 ? "does_not_fit" : "rejected";
      e["reason"] = c.reason;
      line += c.reason;
    } else if (passes) {
      const double usd_h = cost_of(c);
      // Where it ranks among the verified options: after every cheaper one.
      const std::size_t rank = x.searched_now
                                   ? 1 + static_cast<std::size_t>(std::count_if(ok.begin(), ok.end(), [&](std::size_t i) {
                                           return cost_of(cands[i]) <= usd_h;
                                         }))
                                   : static_cast<std::size_t>(listed_at - ok.begin()) + 1;
      e["outcome"] = x.searched_now ? "passes_when_searched" : "verified";
      e["rank"] = rank;
      e["replicas"] = c.search.best.replicas;
      e["total_cards"] = c.total_cards();
      e["router"] = c.router;
      e["usd_per_hour"] = usd_h;
      line += "meets the SLOs with " + replicas_text(c.search.best.replicas) + " (" + std::to_string(c.total_cards()) +
              (c.total_cards() == 1 ? " card, " : " cards, ") + c.router + ") at $" + fmt("%.2f", usd_h) + "/hour: " +
              (x.searched_now ? "would rank #" : "ranks #") + std::to_string(rank) +
              (rank > static_cast<std::size_t>(o.top) ? " (the table lists " + std::to_string(o.top) + ")" : "") +
              (x.searched_now ? " (the plan cut it by cost: " + cands[x.candidate].reason + ")" : "");
      if (c.search.below) {
        e["with_one_replica_fewer"] = evaluation_json(*c.search.below);
        line += "; " + with_text(*c.search.below) + ": " + misses_text(*c.search.below);
      }
    } else {
      e["outcome"] = "misses";
      e["reason"] = c.reason;
      e["replicas_tried"] = c.search.best.replicas;
      e["result"] = evaluation_json(c.search.best);
      line += "misses the SLOs " + with_text(c.search.best) + " (the most tried: --max-cards " +
              std::to_string(o.max_cards) + "): " + misses_text(c.search.best);
      if (!x.searched_now && cands[x.candidate].reason.rfind("misses", 0) != 0) line += " [" + c.reason + "]";
    }
    ex.push_back(e);
    explain_lines.push_back(line);
  }
  a.json["explain"] = {{"card", explain_card}, {"candidates", ex}};
  return explain_lines;
}

// The daily load profile (--load-profile): replicas per hour for the best option, and the cost
// of a fixed fleet against one that follows the load. REQUIRES: a.profile and the verified
// options are not empty.
nlohmann::json daily_profile(const PlanRequest& o, const PlanAnswer& a) {
  const std::vector<double>& profile = a.profile;
  const std::vector<Candidate>& cands = a.outcome.candidates;
  const std::vector<std::size_t>& ok = a.outcome.ok;
  const unsigned threads = plan::default_threads();
  const auto spec_of = [&](const Candidate& c) { return plan::spec_of(a.base, c); };
  const Candidate& best = cands[ok.front()];
  std::vector<int> per_hour(24, 0);
  plan::run_parallel(
      24, plan::pool_width(threads),
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
  return {{"option", label(best)}, {"replicas_per_hour", per_hour},
           {"fixed_fleet_replicas", peak}, {"fixed_fleet_usd_per_day", peak * unit * 24},
           {"following_load_usd_per_day", sum * unit},
           {"fixed_fleet_utilisation", peak ? static_cast<double>(sum) / (24.0 * peak) : 0}};
}

// The text report: the ranked table (kept in a.table for the HTML report), what its columns
// mean, and the launch commands, rejections, --explain lines and daily profile.
std::string plan_text(const PlanRequest& o, PlanAnswer& a, const std::vector<std::string>& explain_lines,
                      const std::string& explain_card, const std::string& headroom_window) {
  const ScenarioSpec& base = a.base;
  const PriceBook& prices = a.prices;
  const plan::PlanOutcome& outcome = a.outcome;
  const std::vector<Candidate>& cands = outcome.candidates;
  const std::vector<std::size_t>& live = outcome.live;
  const std::vector<std::size_t>& ok = outcome.ok;
  const std::size_t searched = outcome.searched, skipped = outcome.skipped;
  const std::optional<double>& users = a.users;
  const nlohmann::json& slos = a.json["slos"];
  const nlohmann::json& rejected = a.json["rejected"];
  const nlohmann::json daily = a.json.contains("daily_profile") ? a.json["daily_profile"] : nlohmann::json();
  const auto cost_of = [](const Candidate& c) { return c.option_usd_per_hour(); };
  std::ostringstream text;
  std::optional<TextTable>& table = a.table;
  text << "capsim plan: " << base.deployment.model << " for " << base.name << "\n  SLOs:";
  for (const auto& s : slos) text << " " << s.get<std::string>();
  if (o.min_goodput) text << " goodput>=" << fmt("%.0f%%", 100 * *o.min_goodput);
  std::string router_list;
  for (const auto& r : plan::routers_to_try(base)) router_list += (router_list.empty() ? "" : ", ") + r;
  text << "\n  " << cands.size() << " candidates, " << live.size() << " fit in memory, " << searched
       << " searched (" << skipped << " skipped by cost); replicas estimated on 1/r load shares, then every "
       << "option below verified as the whole cluster behind each router tried (" << router_list << ")\n\n";
  TextTable t({"#", "deployment", "data", "router", "replicas", "cards", "TTFT p95", "TPOT p95", "of bound",
               "more load", "out tok/s", "$/hour", "price", "$/M tok", users ? "$/user/mo" : "", "binds",
               "costs from", "at p90 model error"});
  int rank_no = 0;
  for (std::size_t i : ok) {
    if (rank_no >= o.top) break;
    const Candidate& c = cands[i];
    const plan::Evaluation& e = c.search.best;
    const double usd_h = cost_of(c);
    const double mtok_h = e.output_throughput() * 3600 / 1e6;
    std::string binds = option_binds_text(c);
    const std::string ttft_text = option_ttft_text(e);
    const std::string data = cards().find(c.card).efficiency_data;
    t.row({std::to_string(++rank_no), label(c), data.empty() ? "unstated" : data, c.router, std::to_string(e.replicas),
           std::to_string(c.total_cards()), ttft_text,
           units::format_time(e.result.tpot.p95), bound_use_text(e.verdict), headroom_text(c.headroom),
           fmt("%.0f", e.output_throughput()),
           fmt("%.2f", usd_h), price_provenance(prices, c.card), mtok_h > 0 ? fmt("%.3f", usd_h / mtok_h) : "-",
           users ? fmt("%.2f", usd_h * kHoursPerMonth / *users) : "", binds, option_cost_source_text(base, c),
           option_model_error_margin(base, c).text()});
  }
  const bool too_short = std::any_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.too_short; });
  if (ok.empty()) {
    text << (live.empty()  ? "  fits on no candidate: none fits in memory (reasons below)\n"
             : too_short ? "  no option verified: the runs are too short to support a PASS (reasons below); "
                           "lengthen the run (--duration or --requests)\n"
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
            "and what limits it.\n"
       << "  'data': what the card's efficiencies rest on (calibration/cards, efficiency.data): measured on this card, "
          "partial (some measured), or assumed from another card or a default; an assumed card's latencies are "
          "less certain than its interval says. 'of bound': each SLO's 95% interval upper end as a share of its bound. "
          "'more load': the extra load the same cluster still met every SLO at, and the SLO that failed first above "
          "it ('?': inconclusive there): whole-cluster runs at 1.25, 1.6, 2.5 and 4x the load measuring "
       << headroom_window << " (the search's window), then two bisection steps ('>=': met at 4x).\n"
       << "  'costs from': whether the card's step costs rest on its measured kernel tables (calibration/kernels) or "
          "on the datasheet roofline alone. 'at p90 model error': whether every TTFT, TPOT/ITL and E2E SLO still holds "
          "when its 95% interval upper end is made worse by capsim's out-of-fold p90 error for the option's class "
          "(latency x (1 + p90) <= bound; calibration/model-error.yaml, docs/data-formats.md#model-error).\n";
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
  if (!explain_lines.empty()) {
    text << "\n  --explain " << explain_card << ": each candidate (TP x weights x KV cache), why it fails or where it "
            "ranks; candidates the plan cut by cost were searched and verified for this:\n";
    for (const auto& l : explain_lines) text << "    " << l << "\n";
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
  return text.str();
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

  const plan::PlanSpace space = plan_space_of(o, base);
  const std::string& explain_card = space.explain_card;
  if (o.before_search) o.before_search();
  a.outcome = plan::search_plan(base, space, prices, progress);
  const plan::PlanOutcome& outcome = a.outcome;
  const std::vector<Candidate>& cands = outcome.candidates;
  const std::vector<std::size_t>& ok = outcome.ok;

  a.users = users_of(base);
  nlohmann::json& j = a.json;
  j["scenario"] = base.name;
  j["model"] = base.deployment.model;
  j["seed"] = base.seed;  // the first seed (--replications N runs seed .. seed + N - 1); `diff` reads it
  nlohmann::json slos = nlohmann::json::array();
  for (const auto& s : base.slos) slos.push_back(s.metric + "_" + s.statistic + "<=" + fmt("%g", s.seconds) + "s");
  j["slos"] = slos;
  // The measured window of the headroom runs: the search's (search_plan shortens the scenario's
  // to --search-duration when it is longer).
  std::string headroom_window = o.search_duration;
  if (base.duration) {
    const double measured = units::parse_time(*base.duration, "--duration") - units::parse_time(base.warmup, "--warmup");
    if (measured <= units::parse_time(o.search_duration, "--search-duration")) headroom_window = units::format_time(measured);
  }
  nlohmann::json options = nlohmann::json::array();
  for (std::size_t i : ok) options.push_back(option_json(o, a, cands[i], headroom_window));
  j["options"] = options;
  nlohmann::json rejected = nlohmann::json::array();
  for (const Candidate& c : cands) {
    if (!c.rejected) continue;
    rejected.push_back({{"card", c.card}, {"tp", c.tp}, {"weights", c.weights}, {"kv_cache", c.kv}, {"reason", c.reason}});
    // Within the SLOs on runs too short to call it: a machine-readable flag beside the reason.
    if (c.too_short) rejected.back()["too_short"] = true;
  }
  j["rejected"] = rejected;

  // --explain: each candidate of the card, why it fails or where it ranks (one line each).
  std::vector<std::string> explain_lines;
  if (!explain_card.empty()) explain_lines = explain_plan(o, a, explain_card);

  if (!profile.empty() && !ok.empty()) j["daily_profile"] = daily_profile(o, a);

  a.text = plan_text(o, a, explain_lines, explain_card, headroom_window);
  return a;
}

nlohmann::json card_data_json(const Card& c) {
  return {{"card_class", c.card_class.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.card_class)},
          {"efficiencies", c.efficiency_data.empty() ? "unstated" : c.efficiency_data},
          {"basis", c.efficiency_data_basis}};
}

std::string option_ttft_text(const plan::Evaluation& e) {
  const plan::SloDecision* ttft = nullptr;
  for (const auto& d : e.verdict.slos) {
    if (d.slo == "ttft_p95") ttft = &d;
  }
  return ttft && ttft->has_interval ? units::format_time(ttft->estimate) + " (<=" + units::format_time(ttft->high) + ")"
                                    : units::format_time(e.result.ttft.p95);
}

std::string option_binds_text(const Candidate& c) {
  return c.search.below ? c.search.below->verdict.worst + " with " + std::to_string(c.search.below->replicas) + " (" +
                              plan::binding_resource(c.search.below->result) + ")"
                        : plan::binding_resource(c.search.best.result);
}

}  // namespace capsim::answers

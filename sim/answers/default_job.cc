#include "sim/answers/default_job.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/hardware/precision.h"
#include "sim/plan/planner.h"
#include "sim/plan/prices.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"
#include "sim/scenario/catalogues.h"
#include "sim/answers/model_error_answer.h"
#include "sim/answers/simulate_report.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

using plan::Candidate;

// The scenario's deployment in the plan's terms (card, TP, resolved precisions), so that it can
// be matched against the plan's candidates and labelled as the plan labels them.
Candidate as_candidate(const ScenarioSpec& s) {
  const Deployment d = s.deployment.resolve();
  Candidate c;
  c.card = d.card.name;
  c.tp = s.deployment.tp;
  // As search_plan names a candidate: a checkpoint run as shipped keeps its spec.
  c.weights = d.expert_weights ? s.deployment.weights : std::string(precision_name(d.weights));
  c.kv = std::string(precision_name(d.kv_cache));
  return c;
}

// `spec` decided over seeds spec.seed .. spec.seed + seeds - 1: the runs and the decision
// `simulate --replications N` makes (each seed built afresh, exactly the run `--seed` gives).
OverSeedsAnswer over_seeds(const ScenarioSpec& spec, int seeds, const PriceBook& prices) {
  OverSeedsAnswer a;
  a.spec = spec;
  a.deployment = std::to_string(spec.replicas) + " x " + plan::label(as_candidate(spec));
  // run_next_seeds runs seeds after the one it is given; the one before the scenario's (the
  // unsigned seed wraps back) makes its first run the scenario's own seed.
  ScenarioSpec before = spec;
  before.seed = spec.seed - 1;
  const std::vector<SimulationResult> results = plan::run_next_seeds(before, seeds, plan::default_threads());
  std::vector<const SimulationResult*> runs;
  for (const SimulationResult& r : results) runs.push_back(&r);
  a.over_seeds = replications_json(spec, runs);
  a.met = true;
  for (const auto& row : a.over_seeds["statistics"]) a.met = a.met && row.value("met", false);
  const Deployment d = spec.deployment.resolve();
  a.usd_per_hour = prices.usd_per_hour(d.card) * d.gpus() * spec.replicas;
  return a;
}

// One row per deployment: each SLO's mean over the seeds with its 95% interval, and the verdict
// (PASS only when every SLO passes; else the first SLO that does not, with its decision).
void over_seeds_row(TextTable& t, const OverSeedsAnswer& a, const std::string& price) {
  std::vector<std::string> row{a.deployment, a.flag.empty() ? "(the scenario's)" : a.flag,
                               fmt("%.2f", a.usd_per_hour), price};
  std::string verdict = "PASS";
  for (const auto& s : a.over_seeds["statistics"]) {
    const double mean = s["mean_ms"].get<double>() / 1e3;
    row.push_back(std::isnan(mean) ? "-"
                                   : units::format_time(mean) + " (" +
                                         units::format_time(s["low_ms"].get<double>() / 1e3) + " - " +
                                         units::format_time(s["high_ms"].get<double>() / 1e3) + ")");
    if (verdict == "PASS" && s["decision"] != "PASS") {
      verdict = s["decision"].get<std::string>() + " (" + s["statistic"].get<std::string>() + ")";
    }
  }
  row.push_back(verdict);
  t.row(row);
}

std::string load_text(const ScenarioSpec& s) {
  if (s.trace) return "the requests of " + *s.trace;
  if (s.users) return std::to_string(*s.users) + " users (closed loop: each reads, thinks and writes again)";
  if (s.concurrency) return std::to_string(*s.concurrency) + " requests in flight";
  if (s.rate) return *s.rate + " requests/s";
  return "the scenario's requests";
}

}  // namespace

DefaultJobAnswer answer_default_job(const DefaultJobRequest& request) {
  const ScenarioSpec& scenario = request.scenario;
  validate_names(scenario);
  if (scenario.slos.empty()) {
    throw Error(scenario.file + ": slo: the default job answers whether the SLOs are met; give the scenario an slo "
                "(e.g. slo: {ttft_p95: 1s})");
  }
  if (request.seeds < 2) throw Error("seeds: the default job decides the SLOs over at least 2 seeds");
  const auto stage = [&](const std::string& s) {
    if (request.stage) request.stage(s);
  };
  const std::string seeds_text =
      std::to_string(scenario.seed) + "-" + std::to_string(scenario.seed + static_cast<std::uint64_t>(request.seeds) - 1);
  DefaultJobAnswer a;

  // The cheapest options: `capsim plan SCENARIO` with its defaults.
  PlanRequest plan_request;
  plan_request.base = scenario;
  a.plan = answer_plan(plan_request, request.plan_progress);
  const PriceBook& prices = a.plan.prices;

  // The scenario's own deployment, decided as `simulate --replications N` decides it.
  const Candidate own = as_candidate(scenario);
  stage(std::to_string(scenario.replicas) + " x " + plan::label(own) + " over seeds " + seeds_text);
  a.own = over_seeds(scenario, request.seeds, prices);

  // One flag away on the same card: the plan's candidates on the scenario's card and TP that fit
  // and differ in exactly one precision, each set as its flag sets it on the scenario.
  if (!a.own.met) {
    for (std::size_t i : a.plan.outcome.live) {
      const Candidate& c = a.plan.outcome.candidates[i];
      if (c.card != own.card || c.tp != own.tp) continue;
      const bool weights_differ = c.weights != own.weights, kv_differs = c.kv != own.kv;
      if (weights_differ == kv_differs) continue;  // the scenario's own, or two flags away
      ScenarioSpec s = scenario;
      std::string flag;
      if (weights_differ) {
        s.deployment.weights = c.weights;
        s.origin.erase("--weights");
        flag = "--weights " + c.weights;
      } else {
        s.deployment.kv_cache = c.kv;
        s.origin.erase("--kv-cache");
        flag = "--kv-cache " + c.kv;
      }
      stage(flag + " over seeds " + seeds_text);
      OverSeedsAnswer alt = over_seeds(s, request.seeds, prices);
      alt.flag = flag;
      a.one_flag.push_back(std::move(alt));
    }
  }

  std::ostringstream text;
  const std::string& path = request.scenario_path;
  std::string slo_text;
  for (const SloSpec& s : scenario.slos) {
    slo_text += (slo_text.empty() ? "" : " and ") + s.metric + "_" + s.statistic + " <= " + units::format_time(s.seconds);
  }
  text << "  Question: which cards, how many and at what cost serve " << scenario.deployment.model << " to "
       << load_text(scenario) << " with " << slo_text << "?\n";
  if (!scenario.description.empty()) text << "  (" << path << ": " << scenario.description << ")\n";

  // The scenario's deployment and its one-flag variants, over the seeds.
  text << "\n  The scenario's deployment" << (a.one_flag.empty() ? "" : " and the one-flag changes on its card")
       << ", each SLO decided over seeds " << seeds_text
       << " (the mean of the seeds' steady-state estimates, 95% interval over the seeds, as `capsim simulate "
       << path << " --replications " << request.seeds << "` decides it):\n";
  {
    std::vector<std::string> head{"deployment", "flag", "$/hour", "price"};
    for (const SloSpec& s : scenario.slos) head.push_back(s.metric + "_" + s.statistic + " <= " + units::format_time(s.seconds));
    head.push_back("verdict");
    TextTable t(head);
    over_seeds_row(t, a.own, price_provenance(prices, own.card));
    for (const OverSeedsAnswer& alt : a.one_flag) over_seeds_row(t, alt, price_provenance(prices, own.card));
    t.print(text);
  }
  std::string passing;
  for (const OverSeedsAnswer& alt : a.one_flag) {
    if (alt.met) passing += (passing.empty() ? "" : ", or ") + alt.flag;
  }
  if (a.own.met) {
    text << "  The scenario's deployment meets the SLOs.\n";
  } else if (!passing.empty()) {
    text << "  It does not meet the SLOs; one flag on the same card does: " << passing << ".\n";
  } else {
    text << "  It does not meet the SLOs, and no change of one precision on " << own.card
         << (a.one_flag.empty() ? " exists in the plan's search space" : " meets them") << ".\n";
  }

  // The plan's cheapest options, compactly (all of them: `capsim plan`).
  const plan::PlanOutcome& outcome = a.plan.outcome;
  text << "\n  The cheapest options that meet the SLOs (`capsim plan " << path << "`: " << outcome.candidates.size()
       << " candidates, " << outcome.live.size() << " fit in memory, " << outcome.ok.size()
       << " verified as the whole cluster):\n";
  if (outcome.ok.empty()) {
    text << (outcome.live.empty() ? "  none fits in memory\n" : "  none meets the SLOs\n");
  } else {
    TextTable t({"#", "deployment", "router", "replicas", "cards", "$/hour", "price", "data", "TTFT p95", "TPOT p95",
                 "binds", "at p90 model error"});
    // The cheapest few, and below them (ranked as the plan ranks them) the cheapest option on a
    // datacenter card and the cheapest whose card efficiencies were measured on that card, when
    // the few have none: the cheapest option can rest on consumer cards with borrowed numbers.
    std::vector<int> rows;
    const int ok = static_cast<int>(outcome.ok.size());
    for (int k = 0; k < std::min(request.options_shown, ok); ++k) rows.push_back(k);
    const auto card_of = [&](int k) -> const Card& {
      return cards().find(outcome.candidates[outcome.ok[static_cast<std::size_t>(k)]].card);
    };
    const auto add_first = [&](const std::function<bool(const Card&)>& wanted) {
      for (int k = 0; k < ok; ++k) {
        if (!wanted(card_of(k))) continue;
        if (std::find(rows.begin(), rows.end(), k) == rows.end()) rows.push_back(k);
        return;
      }
    };
    add_first([](const Card& c) { return c.card_class == "datacenter"; });
    add_first([](const Card& c) { return c.efficiency_data == "measured"; });
    for (int k : rows) {
      const Candidate& c = outcome.candidates[outcome.ok[static_cast<std::size_t>(k)]];
      const plan::Evaluation& e = c.search.best;
      // The cells as plan's table gives them.
      const std::string ttft_text = option_ttft_text(e), binds = option_binds_text(c);
      t.row({std::to_string(k + 1), plan::label(c), c.router, std::to_string(e.replicas),
             std::to_string(c.total_cards()), fmt("%.2f", c.option_usd_per_hour()),
             price_provenance(prices, c.card), card_of(k).efficiency_data.empty() ? "unstated" : card_of(k).efficiency_data,
             ttft_text, units::format_time(e.result.tpot.p95), binds,
             option_model_error_margin(a.plan.base, c).text()});
    }
    t.print(text);
    text << "  Confidence: each option meets every SLO with its 95% interval inside the bound, from one run's batch "
            "means after MSER-5 warm-up detection (TTFT p95: the estimate, the interval's upper end in brackets); "
            "decided over seeds as above by `--replications`. 'binds': the SLO that fails with one replica fewer "
            "and what limits it. 'data': whether the card's efficiencies were measured on that card, in part, or "
            "assumed from another card (calibration/cards/; `capsim plan --datacenter-only` leaves out consumer "
            "cards). 'at p90 model error': whether every latency SLO still holds with its interval's upper end made "
            "worse by capsim's out-of-fold p90 error for the option's class, as `capsim plan` says it "
            "(calibration/model-error.yaml).\n";
  }

  // Commands to copy, each with what it adds.
  std::vector<std::pair<std::string, std::string>> next;
  next.push_back({"capsim plan " + path + " --report plan.html",
                  "all " + std::to_string(outcome.ok.size()) + " options with their launch lines, and why "
                  "the other candidates fail"});
  if (a.plan.found()) {
    next.push_back({"capsim plan " + path + " --replications " + std::to_string(request.seeds),
                    "the options decided over " + std::to_string(request.seeds) + " seeds, as the deployments above"});
  }
  const OverSeedsAnswer* in_full = &a.own;
  for (const OverSeedsAnswer& alt : a.one_flag) {
    if (alt.met) {
      in_full = &alt;
      break;
    }
  }
  next.push_back({"capsim simulate " + path + (in_full->flag.empty() ? "" : " " + in_full->flag) +
                      " --replications " + std::to_string(request.seeds) + " --report run.html",
                  in_full->deployment + " in full: latency percentiles, KV-cache use, preemptions, charts"});
  text << "\n  Next:\n";
  for (const auto& [command, what] : next) text << "    " << command << "\n        " << what << "\n";
  a.text = text.str();
  return a;
}

}  // namespace capsim::answers

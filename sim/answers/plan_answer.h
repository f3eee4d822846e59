// `plan`'s answer as every front end gives it: the cheapest card x TP x precision x replicas that
// meet the SLOs (sim/plan/planner.h searches), the JSON `capsim plan --json` prints
// (docs/json-output.md#plan) and the readable table.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/plan/planner.h"
#include "sim/plan/prices.h"
#include "sim/report/table.h"
#include "sim/scenario/scenario.h"

namespace capsim::answers {

// The search space and options, as `capsim plan`'s flags give them (lists comma separated; error
// messages name the flag: --cards, --tp, --weights, --kv-cache, --load-profile, ...).
struct PlanRequest {
  scenario::ScenarioSpec base;
  std::string cards;               // empty: every card in the catalogue
  // Card classes to keep (--card-class; catalogue field card_class: datacenter, workstation,
  // consumer), comma separated; empty: every class. --datacenter-only is "datacenter".
  std::string card_classes;
  // --explain CARD: every candidate of that card, and why it fails or where it ranks.
  std::string explain;
  std::string tps = "1,2,4,8";
  std::string weights = "auto";
  std::string kv = "auto";
  bool kv_given = false;           // false: each card's 16-bit KV cache and fp8 where supported
  int replications = 1;
  int max_cards = 64;
  std::optional<double> min_goodput;
  std::vector<std::string> price_overrides;  // "h100-sxm=2.49"
  std::string prices_file;         // empty: calibration/prices.yaml in the data root
  std::string load_profile;        // 24 hourly loads, or empty
  int top = 10;
  std::string search_duration = "5min";
  // Called once the input is validated, before the search (the CLI checks gnuplot for --report).
  std::function<void()> before_search;
};

struct PlanAnswer {
  scenario::ScenarioSpec base;
  PriceBook prices;
  plan::PlanOutcome outcome;
  std::vector<double> profile;     // the parsed --load-profile (empty without one)
  std::optional<double> users;     // the load in users (closed loops), for per-user costs
  nlohmann::json json;             // exactly what `capsim plan --json -` prints
  std::string text;                // the readable report `capsim plan` prints
  std::optional<TextTable> table;  // the options table (for an HTML report)
  bool found() const { return !outcome.ok.empty(); }
};

// Throws capsim::Error for bad input before any simulation; Cancelled when the base spec's
// cancel flag is set during the search.
PlanAnswer answer_plan(const PlanRequest& request, const plan::PlanProgress& progress);

// Two cells of plan's table, for every summary that shows an option as plan does (the default
// job): TTFT p95 as the decision rests on it (the steady-state estimate and its interval's upper
// end in brackets; the measured window's value when there is no interval), and what binds (the
// SLO that fails with one replica fewer and what limits it, else what limits the option).
std::string option_ttft_text(const plan::Evaluation& e);
// What a card's efficiencies rest on (plan's card_data, compare's per group):
// {card_class, efficiencies (measured, partial, assumed, unstated), basis}.
nlohmann::json card_data_json(const Card& c);
std::string option_binds_text(const plan::Candidate& c);

}  // namespace capsim::answers

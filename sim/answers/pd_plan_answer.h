// `capsim plan --pd-search`: the prefill:decode pool ratio of a disaggregated deployment
// (cluster/disaggregation.h). Every split of a GPU total into prefill and decode replicas is
// simulated; the answer is the cheapest split that meets the SLOs (or, with a fixed total, the
// best split of it), why the others miss (TTFT: too few prefill replicas; TPOT: too few decode
// replicas), and the cheapest aggregated deployment of the same cards for comparison.
// docs/deployment-options.md#prefilldecode-disaggregation.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/plan/search.h"
#include "sim/scenario/scenario.h"

namespace capsim::answers {

struct PdPlanRequest {
  scenario::ScenarioSpec base;                 // serving pd-disaggregated: the pools' cards, TP and the link
  std::optional<int> total_cards;    // --pd-total: only splits of this many GPUs
  int max_cards = 16;                // otherwise totals up to this many GPUs, smallest first
  std::optional<double> min_goodput;
  std::vector<std::string> price_overrides;
  std::string prices_file;
};

struct PdSplit {
  int prefill = 0, decode = 0;  // replicas of each pool
  int cards = 0;
  double usd_per_hour = 0;
  plan::Evaluation eval;
  std::string why;  // what the split shows: met, or which pool is short
};

struct PdPlanAnswer {
  std::vector<PdSplit> splits;  // in the order run: by total, then prefill replicas
  int best = -1;                // the answer in `splits`, -1 when none meets the SLOs
  // The cheapest aggregated deployment of the pool cards (each pool's card and TP tried).
  std::optional<plan::Evaluation> aggregated;
  std::string aggregated_label;
  double aggregated_usd_per_hour = 0;
  nlohmann::json json;
  std::string text;
};

// Throws capsim::Error for bad input (no SLO, not disaggregated) before any simulation.
PdPlanAnswer answer_pd_plan(const PdPlanRequest& request);

}  // namespace capsim::answers

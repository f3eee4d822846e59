// `capsim` with no command: the question the README asks of a scenario ("what does it take to
// serve these users within these SLOs?") answered by the library calls the commands make, so
// that every number it prints is the one `capsim simulate SCENARIO --replications N` (the
// scenario's deployment and its one-flag variants) and `capsim plan SCENARIO` (the cheapest
// options) print for the same inputs. The front end only prints `text`.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/answers/plan_answer.h"
#include "sim/scenario/scenario.h"

namespace capsim::answers {

struct DefaultJobRequest {
  scenario::ScenarioSpec scenario;
  std::string scenario_path;  // as the next commands name it, e.g. "workloads/chatbot-500-users.yaml"
  int seeds = 8;              // the scenario's SLOs decided over seeds seed .. seed + seeds - 1
  int options_shown = 3;      // the plan's cheapest options summarised (the plan keeps its default --top)
  // Stages as they start ("simulating 1 x h100-sxm over seeds 1-8") and the plan's own progress;
  // may be empty.
  std::function<void(const std::string&)> stage;
  plan::PlanProgress plan_progress;
};

// One deployment decided over the seeds, as `simulate --replications N` decides it.
struct OverSeedsAnswer {
  scenario::ScenarioSpec spec;
  std::string flag;        // the one flag that turns the scenario's deployment into this one; "" for its own
  std::string deployment;  // "1 x h100-sxm bf16/kv fp8"
  nlohmann::json over_seeds;  // exactly `simulate --replications N --json -`'s capsim.over_seeds
  bool met = false;           // every SLO PASS over the seeds
  double usd_per_hour = 0;    // at the plan's prices
};

struct DefaultJobAnswer {
  OverSeedsAnswer own;
  // The plan's candidates on the scenario's own card and TP that differ from its deployment in
  // one precision (weights or KV cache) and fit in memory, each decided over the same seeds;
  // cheapest first as the plan orders candidates.
  std::vector<OverSeedsAnswer> one_flag;
  PlanAnswer plan;  // `capsim plan SCENARIO` with its default search space
  std::string text;
  // 0: the plan found options (as `capsim plan` exits), 1: none meets the SLOs.
  int exit_code() const { return plan.found() ? 0 : 1; }
};

// Throws capsim::Error for bad input (a scenario without SLOs, an unknown name).
DefaultJobAnswer answer_default_job(const DefaultJobRequest& request);

}  // namespace capsim::answers

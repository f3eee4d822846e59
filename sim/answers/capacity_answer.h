// `capacity`'s answer as every front end gives it: the most load (users, concurrency or
// requests/s) one deployment serves within its SLOs (sim/plan/capacity.h), the latency curve
// around it, the JSON `capsim capacity --json` prints (docs/json-output.md#capacity) and the
// readable table.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/plan/capacity.h"
#include "sim/plan/search.h"
#include "sim/report/table.h"
#include "sim/scenario/scenario.h"

namespace capsim::answers {

struct CapacityRequest {
  scenario::ScenarioSpec base;
  std::optional<double> min_goodput;
  int points = 8;  // points on the curve, up to 1.5x the capacity
  // Seeds each load is decided over (seed .. seed + replications - 1; plan::find_capacity).
  int replications = 1;
  // Called once the input is validated, before the search (the CLI checks gnuplot and --plot).
  std::function<void()> before_search;
};

struct CapacityAnswer {
  scenario::ScenarioSpec base;
  plan::CapacityResult found;
  std::vector<double> loads;               // the curve's loads
  std::vector<plan::Evaluation> curve;     // one evaluation per load
  std::string title;                       // "capsim capacity: MODEL on N x CARD ..."
  std::string verdict;                     // "12 users meet every SLO (9 simulations)"
  std::string interval;                    // "9 - 14 users (...)"; empty for one seed
  nlohmann::json json;                     // exactly what `capsim capacity --json -` prints
  std::string text;                        // the readable report
  TextTable table{{}};
};

// `phase` names the stage ("search", "curve"); (done, total) counts simulations of the curve.
using CapacityProgress = std::function<void(const char* phase, std::size_t done, std::size_t total)>;

// Throws capsim::Error for bad input before any simulation; Cancelled when the base spec's
// cancel flag is set.
CapacityAnswer answer_capacity(const CapacityRequest& request, const CapacityProgress& progress);

}  // namespace capsim::answers

// The load search behind `capsim capacity` and `capsim check` (min_users, min_rate): the most
// load (users, concurrency or requests/s) one deployment serves within the SLOs, found by
// doubling or halving from the scenario's own load, then bisecting.
#pragma once

#include <optional>
#include <string>

#include "sim/scenario/scenario.h"

namespace capsim::plan {

enum class LoadKind { kUsers, kConcurrency, kRate };

struct LoadAxis {
  LoadKind kind;
  const char* name;  // "users", "concurrency", "requests/s"
  bool whole;        // integer loads
};

// The scenario's load axis. Throws capsim::Error for traces and offline runs (no load to vary).
LoadAxis load_axis(const scenario::ScenarioSpec& s);
// The scenario's load on that axis. Throws for rate stages (capacity varies one rate).
double load_of(const scenario::ScenarioSpec& s, const LoadAxis& a);
// The scenario with its load replaced (rounded for whole axes).
scenario::ScenarioSpec with_load(scenario::ScenarioSpec s, const LoadAxis& a, double load);

struct CapacityResult {
  LoadAxis axis;
  double capacity = 0;     // the most load found to meet the SLOs; 0 = none, even at floor_load
  double floor_load = 0;   // the smallest load tried (1 or 0.01 requests/s)
  int evaluations = 0;     // simulations after the first one
};

// Doubles (or halves) the load from the scenario's until the SLOs fail (or hold), then bisects
// to 1 user (whole axes) or 2% of the load (rates). The scenario's replicas serve the load.
CapacityResult find_capacity(const scenario::ScenarioSpec& base, std::optional<double> min_goodput);

}  // namespace capsim::plan

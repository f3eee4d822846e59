// The load search behind `capsim capacity` and `capsim check` (min_users, min_rate): the most
// load (users, concurrency or requests/s) one deployment serves within the SLOs, found by
// doubling or halving from the scenario's own load, then bisecting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/plan/search.h"
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

// The most seeds find_capacity takes (check --replications' limit; capacity's flag takes 1..100).
constexpr int kMaxCapacityReplications = 1000;

struct CapacityResult {
  LoadAxis axis{LoadKind::kUsers, "users", true};
  // The largest load found whose SLO verdict over the seeds (check_slos_runs, the decision of
  // `plan --replications` and `simulate --replications`) is PASS; 0 = none, even at floor_load.
  double capacity = 0;
  double floor_load = 0;   // the smallest load tried (1 or 0.01 requests/s)
  int evaluations = 0;     // loads decided after the first one, by the search for `capacity`
  int simulations = 0;     // runs, every seed and every search counted
  int replications = 1;    // seeds: seed .. seed + replications - 1
  std::uint64_t first_seed = 0;

  // With replications > 1 (all equal `capacity`, or empty, for one seed):
  // fails_from: the smallest load found whose verdict over the seeds is FAIL (0: none up to 4
  // times the first load that did not pass); between `capacity` and it the verdicts are
  // INCONCLUSIVE (an interval straddles a bound, or a seed's run did not settle), or PASS again
  // (the bisection assumes none is).
  double fails_from = 0;
  // Each seed's own capacity: what `capacity --seed S` answers alone.
  std::vector<double> seed_capacities;
  // The search's answer over the seeds with each one left out in turn (two seeds: the other alone).
  std::vector<double> leave_one_out;
  // The answer's standard error: the larger of the jackknife's over leave_one_out and the
  // standard deviation of seed_capacities. The interval, where the answer of another set of as
  // many seeds is expected: capacity +/- t(n-1, 0.975) x standard_error (whole axes rounded
  // outwards), widened to every seed capacity and leave-one-out answer, at least 0 and at most
  // the last load below fails_from.
  double jackknife_error = 0, seed_capacity_sd = 0, standard_error = 0;
  double low = 0, high = 0;
  // > 0: the capacity's run (the fewest of its seeds') measured only this many requests, too few
  // for a PASS (SloDecision::too_short); the search steered by the statistic there
  // (search_verdict), so the capacity is within the SLOs but not verified.
  std::size_t too_short_requests = 0;
};

// Doubles (or halves) the load from the scenario's until the SLOs fail (or hold), then bisects
// to 1 user (whole axes) or 2% of the load (rates). The scenario's replicas serve the load.
// Each load is decided over `replications` seeds (their runs on up to `threads` threads; the
// answer does not depend on the thread count); with one seed it is that run's own verdict.
// Throws capsim::Error for bad input (a load axis it cannot vary, replications out of 1..1000).
CapacityResult find_capacity(const scenario::ScenarioSpec& base, std::optional<double> min_goodput,
                             int replications = 1, unsigned threads = 1);

// Where `needed` lies against a capacity answer, the verdict `check`'s min_users and min_rate
// give: PASS at or below `capacity` (verified over the seeds), FAIL above `high` or from
// fails_from, INCONCLUSIVE between (other seeds may well answer it; these did not verify it),
// and INCONCLUSIVE instead of PASS when the capacity's run is too short (too_short_requests).
Decision decide_min_load(const CapacityResult& c, double needed);

}  // namespace capsim::plan

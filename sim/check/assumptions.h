// `capsim check`: capacity assumptions as named assertions, checked by simulation in CI.
//
// An assumptions file (docs/ci.md) lists assertions. Each names a scenario — a scenario file
// (`scenario: x.yaml`, relative to the assumptions file) with optional overrides, or the
// scenario fields inline — and what must hold (`expect`), one or more kinds:
//   slo                         latency statistics within bounds ({ttft_p95: 1s} or true = the scenario's)
//   min_users, min_rate         the capacity search finds at least this load within the scenario's SLOs
//   max_cost_usd_per_hour       the deployment's rent
//   no_preemption               the run preempts nothing
//   fits_in_memory              every card group's memory plan fits (true, or {context: N})
//   plan_cheapest_max_usd_per_hour   plan's cheapest option costs no more than this
//   baseline                    no worse than a `capsim simulate --json` result by more than a tolerance
// Each kind yields one or more rows: measured value, limit, margin (distance to the limit as a
// share of it; positive holds), PASS/FAIL.
//
// Contract: load_assumptions() reads and validates everything that can be checked without
// simulating — YAML, kinds, values, scenarios, baseline files and whether they come from the
// assertion's scenario — and throws capsim::Error naming file: field (exit 2). run_checks()
// simulates; an assertion whose simulation cannot run (e.g. does not fit) fails, it is not an
// input error.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/plan/planner.h"
#include "sim/plan/prices.h"

namespace capsim::check {

// The kinds, in the order the documentation lists them.
const std::vector<std::string>& assertion_kinds();

struct BaselineMetric {
  std::string name;        // a numeric field of the simulate JSON, dotted for nested ones
  bool higher_is_worse = true;
};

struct Expectation {
  std::string kind;
  std::string where;  // "a.yaml: assertions[0].expect.slo", for messages
  std::vector<scenario::SloSpec> slos;    // slo
  double limit = 0;                  // min_users, min_rate, max_cost_usd_per_hour, plan_cheapest...
  std::optional<long long> context;  // fits_in_memory; unset: fit's default (plan_fit)
  std::string baseline_file;         // baseline: the path as resolved
  nlohmann::json baseline;
  double tolerance = 0;              // fraction
  std::vector<BaselineMetric> metrics;
  std::string baseline_note;         // e.g. the baseline ran another workload
  plan::PlanSpace space;             // plan_cheapest_max_usd_per_hour
};

struct Assertion {
  std::string name, description;
  std::string where;  // "a.yaml: assertions[0]"
  scenario::ScenarioSpec spec;
  std::vector<Expectation> expect;
};

struct Assumptions {
  std::string path;
  // `capsim check --until-conclusive D`: an assertion with an INCONCLUSIVE SLO is re-run with its
  // duration doubled (warm-up kept) while the doubled duration is at most this; 0 = never.
  double max_duration_s = 0;
  // `capsim check --replications N`: SLOs are decided from N independent runs (seeds seed ..
  // seed + N - 1, run in parallel; deterministic) instead of one run's batch means.
  int replications = 1;
  // `require_model_error: p90`: an SLO passes only if it also holds at capsim's p90 model error
  // for the scenario's class (sim/check/model_error_requirement.h).
  bool require_model_error = false;
  std::string description;
  std::vector<Assertion> assertions;
  PriceBook prices;
};

// `prices_file` empty: the file's `prices:` field, else calibration/prices.yaml. A scenario file
// (no `assertions:`, a `workload:`) is checked as one assertion: its own SLOs (`slo: true`).
Assumptions load_assumptions(const std::string& path, const std::string& prices_file = "",
                             const std::vector<std::string>& price_overrides = {});
// The same from YAML text already in memory (a server's request body), named `label` in
// messages; relative paths in it (prices, scenario files) resolve against the working folder.
Assumptions assumptions_from_text(const std::string& text, const std::string& label, const std::string& prices_file = "",
                                  const std::vector<std::string>& price_overrides = {});

// A direction for a metric of the simulate JSON by its name: latencies (*_ms), failures and
// preemptions are worse higher; throughputs, goodput and completions worse lower. nullopt when
// the name says nothing.
std::optional<bool> higher_is_worse(const std::string& metric);
// Tolerance text: "10%" = 0.10, a plain number is a fraction ("0.1"). Throws naming `where`.
double parse_tolerance(const std::string& text, const std::string& where);

struct Row {
  std::string assertion;
  std::string kind;
  std::string item;     // the SLO ("ttft_p95"), the metric, or empty
  std::optional<double> measured, limit;
  std::string unit;     // "s", "ms", "users", "requests/s", "usd_per_hour", "preemptions", "tokens", ...
  std::string measured_text, limit_text;
  std::optional<double> margin;  // (limit - measured) / limit, or (measured - limit) / limit for minimums
  bool passed = false;
  // An SLO whose 95% interval straddles its bound, or a run that passed without reaching steady
  // state (plan::decide_slo): neither passed nor failed. Counted apart; exit status 3.
  bool inconclusive = false;
  std::optional<double> low, high;  // the 95% interval of an SLO's statistic (seconds), when it has one
  std::string message;  // why it failed, or a note
  double seconds = 0;   // time spent on it
};

struct AssertionOutcome {
  std::string name, description, scenario;
  std::vector<Row> rows;
  double seconds = 0;
  int extensions = 0;  // times the run was doubled by --until-conclusive
  bool passed() const;
  // For reports: the simulation, when one ran.
  std::shared_ptr<const scenario::ScenarioSpec> spec;
  std::shared_ptr<const scenario::BuiltScenario> built;
  std::shared_ptr<const SimulationResult> result;
  // The model error of the scenario's class (scenario::model_error_line, model_error_json with
  // "required"); empty / null when no simulation ran.
  std::string model_error_text;
  nlohmann::json model_error_json;
};

// "PASS", "FAIL" or "INCONCLUSIVE".
const char* row_status(const Row& r);

struct CheckOutcome {
  std::string file;
  std::vector<AssertionOutcome> assertions;
  int tests = 0, failures = 0, inconclusive = 0;
  double seconds = 0;
  bool passed() const { return failures == 0 && inconclusive == 0; }
  // 0 every check passes, 1 one fails, 3 none fails but one is inconclusive.
  int exit_code() const { return failures > 0 ? 1 : inconclusive > 0 ? 3 : 0; }
};

// Checks every assertion (in parallel; results in file order). `on_done` is called as each
// assertion finishes (from worker threads, one at a time), may be empty.
CheckOutcome run_checks(const Assumptions& a,
                        const std::function<void(const AssertionOutcome&, std::size_t done, std::size_t total)>& on_done);

// docs/json-output.md#check.
nlohmann::json check_json(const CheckOutcome& c);
// JUnit XML: <testsuites> with one <testsuite> per assertion, one <testcase> per row, a
// <failure message=...> for each FAIL row and an <error type="inconclusive" message=...> for each
// INCONCLUSIVE row; failures/errors totals count them alike at both levels.
std::string junit_xml(const CheckOutcome& c);

// "+12.3%", "-4.0%", "-" when absent.
std::string margin_text(std::optional<double> margin);

}  // namespace capsim::check

// The model error (sim/scenario/model_error.h) as the answers report it: beside a simulation's
// own interval in `simulate`, `capacity` and `check`, and per option in `plan` and per deployment
// in `compare` with whether it still meets its SLOs at the class's p90 error
// (sim/plan/model_error_margin.h).
// JSON shapes: docs/json-output.md#model-error.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/plan/model_error_margin.h"
#include "sim/plan/planner.h"
#include "sim/scenario/scenario.h"

namespace capsim::answers {

// {"class": {cost_source, engine, architecture, label}, "file", "date", "min_runs",
//  "metrics": {"ttft": {p50, p90, bias, runs, pooled_over}, ...}}; "file" null without a table.
nlohmann::json model_error_json(const Deployment& d);

// An option of `plan`: "measured tables" or "roofline" (its card's step costs).
std::string option_cost_source_text(const scenario::ScenarioSpec& base, const plan::Candidate& c);
// Whether the option's verified run holds at its class's p90 error.
plan::ModelErrorMargin option_model_error_margin(const scenario::ScenarioSpec& base, const plan::Candidate& c);
// {"cost_source", "class", "holds_at_p90", "rule", "slos": [{slo, bound_s, latency_s, p90, with_error_s, holds}]}
nlohmann::json option_model_error_json(const scenario::ScenarioSpec& base, const plan::Candidate& c);
nlohmann::json margin_json(const plan::ModelErrorMargin& m);
// The same for any resolved deployment and the verdict of its run (compare's rows): whether it
// holds at its class's p90 error, and that as option_model_error_json's object.
plan::ModelErrorMargin deployment_model_error_margin(const Deployment& d, const plan::SloVerdict& verdict);
nlohmann::json deployment_model_error_json(const Deployment& d, const plan::SloVerdict& verdict);

// Where a deployment's step times come from (issue 32: every answer says which it used): the
// measured kernel tables, the datasheet roofline with the card file's efficiencies (and what they
// rest on), or both. One line ("step costs: ..."), and as JSON {summary, linear_layers,
// attention, moe, allreduce} (null where the model has none); `capsim roofline` itemises a step.
std::string step_costs_text(const Deployment& d);
nlohmann::json step_costs_json(const Deployment& d);

}  // namespace capsim::answers

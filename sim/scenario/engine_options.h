// The engine's options (vLLM's engine arguments: --max-num-seqs, --block-size, --scheduler, ...)
// as one table. A row is the option once: the scenario file's key (vLLM's flag in snake case),
// its type, unit, accepted range, default, the line that documents it, the command line's help
// line, and the member of the spec it sets. Every front end loops over the table: the scenario
// file's `engine:` section (scenario_fields.cc), the command-line flags (sim/flags/engine_flags.h,
// for simulate, plan, capacity, compare, emulate and fit), `capsim list scenario-fields`
// (docs/data-formats.md#scenario-fields) and the HTTP API's schema. Adding an engine option is one
// row here and its use where the deployment is resolved (DeploymentSpec::resolve) and run.
//
// Contract: a value is refused by the same words wherever it comes from (engine_option_refusal):
// the scenario reader prefixes them with file and field, CLI11 with the flag.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "sim/scenario/field_table.h"
#include "sim/scenario/scenario.h"

namespace capsim::scenario {

// Where a row's value lives: a member of the deployment, or of the scenario for the settings
// every deployment group shares (the scheduler, prefix caching).
using EngineOptionMember =
    std::variant<std::optional<int> DeploymentSpec::*, std::optional<long long> DeploymentSpec::*,
                 std::optional<double> DeploymentSpec::*, std::optional<bool> DeploymentSpec::*,
                 std::optional<std::string> DeploymentSpec::*, std::optional<bool> ScenarioSpec::*,
                 std::string ScenarioSpec::*>;

struct EngineOption {
  // key, type, range, unit, default and the reference's line; `flag` is the command-line name
  // (a row whose flag an earlier row has is a second key for it: enable_prefix_caching).
  FieldDoc doc;
  const char* help;  // the command line's help line (it says the default in the flag's words)
  EngineOptionMember member;
  // It lands in the deployment's SchedulerLimits, which `fit` sizes memory with: fit takes it too.
  bool scheduler_limit = false;
};

// The rows in the order the scenario reader applies them and the docs list them.
std::span<const EngineOption> engine_options();

// The scenario file's `engine:` section as the field tables document it.
std::vector<FieldDoc> engine_option_docs();

// The value a row's member holds in `s` (the deployment's or the scenario's own).
template <class T>
T& member_of(ScenarioSpec& s, T DeploymentSpec::*m) {
  return s.deployment.*m;
}
template <class T>
const T& member_of(const ScenarioSpec& s, T DeploymentSpec::*m) {
  return s.deployment.*m;
}
template <class T>
T& member_of(ScenarioSpec& s, T ScenarioSpec::*m) {
  return s.*m;
}
template <class T>
const T& member_of(const ScenarioSpec& s, T ScenarioSpec::*m) {
  return s.*m;
}

// Sets `row`'s member of `s` from a value the scenario reader read and checked against the row.
void apply_field(const EngineOption& row, ScenarioSpec& s, const FieldValue& v);

// Why `text` is refused for `row` (a whole number or a number with a range), as the words after
// "where: " the scenario reader writes; "" when it is accepted. Rows of other types accept any
// text here (booleans and names are checked by their own parsers).
std::string engine_option_refusal(const EngineOption& row, const std::string& text);

}  // namespace capsim::scenario

// The engine options' flags: one per row of the table (sim/scenario/engine_options.h), its name,
// help line and value check taken from the row, so a command line refuses a value with the same
// words as a scenario file's `engine:` section ("--max-num-seqs: '0' is not a whole number in
// 1..1048576" beside "a.yaml: engine.max_num_seqs: '0' is not a whole number in 1..1048576").
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "sim/scenario/engine_options.h"

namespace capsim::flags {

struct EngineFlag {
  const scenario::EngineOption* row;
  CLI::Option* option;
};

enum class EngineFlagSet {
  kAll,              // simulate, plan, capacity, compare, emulate
  kSchedulerLimits,  // fit: the rows that land in SchedulerLimits (EngineOption::scheduler_limit)
};

// Adds the flags of `set`'s rows to `cmd` in row order, bound to the members of `deployment` and
// (rows of the scenario's own members, kAll only) `scenario`, which must then be non-null. A row
// whose flag an earlier row added (a second key of the scenario file) adds none.
std::vector<EngineFlag> add_engine_flags(CLI::App& cmd, EngineFlagSet set, scenario::DeploymentSpec& deployment,
                                         scenario::ScenarioSpec* scenario);

}  // namespace capsim::flags

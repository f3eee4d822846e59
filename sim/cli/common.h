// What the subcommands share: the deployment flags (named as vLLM names them) and the CLI11
// plumbing every command gets. The scenario API (sim/scenario/) is what they drive; its names are
// used unqualified here because the CLI is one front end over it.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>

#include "sim/flags/scenario_flags.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/deployment_spec.h"
#include "sim/scenario/scenario.h"
#include "sim/answers/simulate_report.h"

namespace capsim::cli {

using flags::ScenarioFlags;
using scenario::BuiltScenario;
using scenario::DeploymentSpec;
using scenario::ScenarioSpec;
using scenario::SloSpec;
using scenario::apply_scenario_yaml;
using scenario::build_scenario;
using scenario::cards;
using scenario::data_dir;
using scenario::engines;
using scenario::load_scenario_file;
using scenario::models;
using scenario::parse_slo;
using scenario::parse_slo_expression;
using answers::print_simulation;
using answers::print_steady_state;
using scenario::set_data_dir;
using answers::simulation_json;
using scenario::slo_value;
using answers::steady_state_json;
using scenario::validate_names;

// Registers --model, --card, --tp, --weights, --kv-cache, --engine and (with_limits) the
// scheduler limits, bound to `d`'s fields.
void add_deployment_flags(CLI::App& app, DeploymentSpec& d, bool with_limits = true);

// Adds to every floating-point option of `app` and its subcommands a check that refuses NaN and
// infinities (CLI11 parses "nan" and "inf", and its range checks let NaN through).
void refuse_non_finite(CLI::App& app);

// Adds --allow-large (lift the run limits of sim/core/run_limits.h) to `app` and every
// subcommand.
void add_allow_large(CLI::App& app);

// Checks, once the command line is parsed and before any command's callback runs (its work),
// every output file the command line names (--json, --csv, --report, --plot, --junit, --out, on
// the command and the commands above it): writable, not a directory, no two the same file
// (check_outputs, sim/report/json_output.h). A bad one throws Error naming the flag: exit 2 with
// nothing run and nothing written.
void add_output_checks(CLI::App& app);

// Prints "capsim: error: <message>" and returns the exit code for bad input (2).
int report_error(const std::exception& e);

}  // namespace capsim::cli

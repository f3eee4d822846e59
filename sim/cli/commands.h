// The subcommand table: each add_*_command registers one subcommand on the app; its callback
// stores the exit status in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace capsim::cli {

void add_fit_command(CLI::App& app, int& exit_code);
void add_roofline_command(CLI::App& app, int& exit_code);
void add_list_command(CLI::App& app, int& exit_code);
void add_simulate_command(CLI::App& app, int& exit_code);

struct ScenarioSpec;
// Runs one scenario: prints the report (unless json is "-") and writes JSON when asked.
int run_scenario(const ScenarioSpec& spec, const std::string& json, bool progress);

}  // namespace capsim::cli

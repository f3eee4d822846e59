// The subcommand table: each add_*_command registers one subcommand on the app; its callback
// stores the exit status in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace capsim::scenario {
struct ScenarioSpec;
}  // namespace capsim::scenario

namespace capsim::cli {

void add_fit_command(CLI::App& app, int& exit_code);
void add_roofline_command(CLI::App& app, int& exit_code);
void add_kernels_command(CLI::App& app, int& exit_code);
void add_list_command(CLI::App& app, int& exit_code);
void add_simulate_command(CLI::App& app, int& exit_code);
void add_calibrate_command(CLI::App& app, int& exit_code);
void add_plan_command(CLI::App& app, int& exit_code);
void add_capacity_command(CLI::App& app, int& exit_code);
void add_compare_command(CLI::App& app, int& exit_code);
void add_finetune_command(CLI::App& app, int& exit_code);
void add_batch_serve_command(CLI::App& app, int& exit_code);
void add_check_command(CLI::App& app, int& exit_code);
void add_diff_command(CLI::App& app, int& exit_code);
void add_sweep_commands(CLI::App& app, int& exit_code);  // sweep and merge

// Runs one scenario: prints the report (unless json is "-") and writes JSON, an HTML report and
// a latency chart (--plot) when asked. `replications` > 1 also runs the next seeds and decides
// the SLOs over all of them (printed after the report, `capsim.over_seeds` in the JSON).
int run_scenario(const scenario::ScenarioSpec& spec, const std::string& json, bool progress,
                 const std::string& report = "", const std::string& plot = "", int replications = 1);

}  // namespace capsim::cli

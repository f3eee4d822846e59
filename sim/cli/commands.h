// The subcommand table: each add_*_command registers one subcommand on the app; its callback
// stores the exit status in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

namespace capsim::cli {

void add_fit_command(CLI::App& app, int& exit_code);
void add_roofline_command(CLI::App& app, int& exit_code);
void add_list_command(CLI::App& app, int& exit_code);

}  // namespace capsim::cli

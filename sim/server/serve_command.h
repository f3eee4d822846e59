// `capsim serve` as a subcommand: its flags (CLI11) over ServerOptions (sim/server/server.h).
// The executable (sim/main/) registers it beside the CLI's commands.
#pragma once

#include <CLI/CLI.hpp>

namespace capsim::server {

// Registers `serve` on `app`; its callback runs the server until it stops and stores the exit
// status in `exit_code`.
void add_serve_command(CLI::App& app, int& exit_code);

}  // namespace capsim::server

// `capsim emulate`: registers the subcommand (front end; see server.h for the server itself).
#pragma once

#include <CLI/CLI.hpp>

namespace capsim::emulate {

void add_emulate_command(CLI::App& app, int& exit_code);

}  // namespace capsim::emulate

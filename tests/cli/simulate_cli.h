// What the `capsim simulate` CLI tests share (simulate_cli_test.cc, simulate_options_cli_test.cc):
// running the built binary from the repository root and reading what it printed.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/check/cli_run.h"

namespace capsim_test::simulate_cli {

using ScratchDir = capsim_test::TempDir;
using capsim_test::has;
using capsim_test::read_all;
using capsim_test::Run;

// `capsim simulate <args>` from the repository root with the source tree's data.
inline Run simulate(const std::string& args) { return capsim_test::run_capsim("simulate " + args); }

inline const char* const kSmall =
    "-q --model llama-3.1-8b --card h100-sxm --rate 20 --requests 300 "
    "--input-tokens lognormal:300:2000 --output-tokens uniform:10:200";

// Bad input: exit 2, nothing on stdout, one pinned line on stderr.
inline void check_refused(const Run& r, const std::string& message) {
  INFO("stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(has(r.err, message));
}

// A scenario file `name` holding `yaml`, refused by `simulate` with `message`.
inline void check_file_refused(const ScratchDir& tmp, const std::string& name, const std::string& yaml,
                        const std::string& message) {
  check_refused(simulate("-q '" + tmp.write(name, yaml) + "'"), message);
}

}  // namespace capsim_test::simulate_cli

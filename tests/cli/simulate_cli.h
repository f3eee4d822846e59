// What the `capsim simulate` CLI tests share (simulate_cli_test.cc, simulate_options_cli_test.cc):
// running the built binary from the repository root and reading what it printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_BINARY
#error "CAPSIM_BINARY must name the built capsim executable (the build defines it)"
#endif
#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace capsim_test::simulate_cli {

namespace fs = std::filesystem;

using ScratchDir = capsim_test::TempDir;

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Run {
  int status = -1;
  std::string out, err;
};

// `capsim simulate <args>` from the repository root with the source tree's data.
inline Run simulate(const std::string& args) {
  ScratchDir tmp;
  const std::string out = tmp.file("stdout"), err = tmp.file("stderr");
  const std::string cmd = "cd '" + std::string(CAPSIM_DATA_DIR) + "' && env -u CAPSIM_DATA_DIR '" +
                          std::string(CAPSIM_BINARY) + "' simulate " + args + " >'" + out +
                          "' 2>'" + err + "'";
  const int raw = std::system(cmd.c_str());
  Run r;
  REQUIRE(WIFEXITED(raw));
  r.status = WEXITSTATUS(raw);
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

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

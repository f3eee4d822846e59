// Running the built capsim (CAPSIM_BINARY) from the repository root, as a user (or CI) runs it:
// stdout, stderr and exit status; scratch directories for the files it writes.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.h"

#ifndef CAPSIM_BINARY
#error "CAPSIM_BINARY must name the built capsim executable (the build defines it)"
#endif
#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace capsim_test {

// Scratch directories for the files a command writes.
using Scratch = TempDir;

inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Run {
  int status = -1;
  std::string out, err;
};

// `capsim <args>` from the repository root with the source tree's data; `env` is put before
// the binary (e.g. "PATH=/nonexistent").
inline Run run_capsim(const std::string& args, const std::string& env = "") {
  Scratch tmp("run");
  const std::string out = tmp.file("stdout"), err = tmp.file("stderr");
  const std::string cmd = "cd '" + std::string(CAPSIM_DATA_DIR) + "' && env -u CAPSIM_DATA_DIR " + env + " '" +
                          std::string(CAPSIM_BINARY) + "' " + args + " >'" + out + "' 2>'" + err + "'";
  const int raw = std::system(cmd.c_str());
  Run r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

}  // namespace capsim_test

// Shared by the libFuzzer targets: the input is written to a file (capsim's parsers read files)
// and the parser runs on it. capsim::Error is the expected answer to bad input; any other
// exception escaping a parser is a finding (an unclear message at best), so it aborts and
// libFuzzer records the input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <typeinfo>

#include "sim/core/error.h"

namespace capsim::fuzz {

// One file per process (libFuzzer -jobs/-workers run several), rewritten for every input.
inline std::string input_path(const char* suffix) {
  return "/tmp/capsim-fuzz-" + std::to_string(::getpid()) + suffix;
}

inline const std::string& write_input(const std::uint8_t* data, std::size_t size,
                                      const char* suffix) {
  static const std::string path = input_path(suffix);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

template <typename F>
void expect_clean(F&& parse) {
  try {
    parse();
  } catch (const capsim::Error&) {
    // bad input, reported with a message: the intended outcome
  } catch (const std::exception& e) {
    std::fprintf(stderr, "capsim fuzz: escaped %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

}  // namespace capsim::fuzz

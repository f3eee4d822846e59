// The capsim::Error message a call throws, for tests that pin what bad input is told.
#pragma once

#include <functional>
#include <string>

#include "sim/core/error.h"

namespace capsim_test {

// "(no error)" when `f` returns.
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace capsim_test

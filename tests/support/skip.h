// Skipping a test visibly. A test that needs what a machine may lack (the shared reference data
// beside the checkout, /dev/full, a tool) stops with CAPSIM_SKIP: Catch2 v2 has no skip of its
// own, so the reason is printed with a marker that ctest's SKIP_REGULAR_EXPRESSION turns into
// "Skipped" (tests/CMakeLists.txt), never a silent pass. CI fails on any skip (.ci/run), since
// it has ../shared and every tool.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#define CAPSIM_SKIP(reason)                      \
  do {                                           \
    WARN("capsim test skipped: " << reason);     \
    return;                                      \
  } while (0)

// Skips the test when `path` (a file or folder of ../shared) is not there.
#define CAPSIM_REQUIRE_SHARED(path)                                                             \
  do {                                                                                          \
    if (!std::filesystem::exists(path)) CAPSIM_SKIP(path << " not found (a clone without ../shared)"); \
  } while (0)

#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (docs/robustness.md),
# built by clang-14 in build-asan/ with the simulation's invariant checks compiled in. The same
# folder holds the libFuzzer targets (scripts/fuzz.sh): the library is instrumented for both, so
# one compile serves CI's sanitizer run and its fuzz run.
#   scripts/sanitize.sh                   configure, build capsim, the tests and the fuzz targets,
#                                         run ctest (the tests and the fuzz regressions)
#   scripts/sanitize.sh --configure-only  (used by scripts/fuzz.sh)
# Any sanitizer report or broken invariant aborts the test that met it, so ctest fails.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build-asan}"
jobs="${JOBS:-$(nproc)}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  # -O1 keeps the instrumented build and run quick; line tables are enough for sanitizer stacks.
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
        -DCMAKE_CXX_COMPILER=clang++-14 -DCAPSIM_SANITIZE=ON -DCAPSIM_FUZZ=ON -DCAPSIM_CUDA=OFF \
        >/dev/null
fi
[ "${1:-}" = "--configure-only" ] && exit 0
cmake --build "$build" -j"$jobs" --target capsim capsim_tests capsim_fuzzers
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The accuracy test (label accuracy) scores validate.py's medians: thousands of capsim runs that
# the Release suite already makes, with numbers a sanitizer cannot change; under ASan it would
# only take several times as long.
# Likewise the tests that hold the docs to what the commands print now (every docs/*.md command
# output and quoted number, docs/kernel-validation.md, the default job's answer): each runs whole
# plans and sweeps, several minutes under ASan (the kernel-validation page timed out at 300 s in
# CI), for numbers a sanitizer cannot change along code paths the other tests run under it.
numbers_only='^(docs: every |kernels: docs/kernel-validation\.md is what|the default job answers)'
ctest --test-dir "$build" --output-on-failure -j"$jobs" -LE accuracy -E "$numbers_only"

#!/usr/bin/env bash
# Installs capsim's build dependencies from Debian 12 packages, builds capsim (Release) and,
# unless --no-run is given, runs the default job. Run as root (or with sudo) on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
# gnuplot-nox draws the charts of --report/--plot; chromium renders reports and drives the web
# planner page in the tests; clang-14 and libclang-rt-14-dev build the sanitizer and libFuzzer
# runs (scripts/sanitize.sh, scripts/fuzz.sh; docs/robustness.md); nodejs and npm bundle the web
# planner page of `capsim serve` at build time (web/, docs/server.md); wrk is the server's load test;
# slurm-wlm and munge run the sweep test's one-node Slurm (tests/scale/slurm_sweep_test.sh;
# docs/scale.md); python3-yaml reads the card and engine files in scripts/kernel_validation.py
# (its ctest checks docs/kernel-validation.md).
packages=(build-essential cmake g++ libboost-dev libeigen3-dev libcli11-dev catch2
          nlohmann-json3-dev libyaml-cpp-dev python3 python3-yaml gnuplot-nox chromium clang-14
          libclang-rt-14-dev wrk slurm-wlm munge)
# nodejs and npm bundle the web page and run the `capsim emulate` client tests
# (tests/emulate/client: the official OpenAI npm client). A Node.js already on the machine, with
# its own npm, is used as it is: NodeSource's nodejs package provides npm and conflicts with
# Debian's, so asking apt for `npm` there fails.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
# The page's npm packages, exactly as web/package-lock.json pins them (esbuild and Chart.js to
# bundle it, playwright-core to drive Debian's chromium in its test; no browser is downloaded).
(cd web && npm ci --no-audit --no-fund --loglevel=error)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
# The npm packages of the emulate client tests, exactly as package-lock.json pins them.
(cd tests/emulate/client && npm ci --no-audit --no-fund --loglevel=error)
if [ "${1:-}" != "--no-run" ]; then
  ./build/capsim
fi

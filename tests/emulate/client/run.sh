#!/usr/bin/env bash
# ctest entry for tests/emulate/client: the official OpenAI npm client against `capsim emulate`.
# Usage: run.sh PATH/TO/capsim. Exits 77 (ctest: skipped) saying why when node or the npm
# packages are missing; scripts/setup.sh installs both (Debian nodejs/npm, then `npm ci` here).
set -euo pipefail
# The binary as given, made absolute before the cd below (a relative build/capsim would name
# nothing from tests/emulate/client).
if [ "$#" -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: run.sh PATH/TO/capsim (an executable; got '${1-}')" >&2
  exit 2
fi
capsim_bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
cd "$(dirname "$0")"
if ! command -v node >/dev/null 2>&1; then
  echo "SKIPPED: node is not installed (scripts/setup.sh installs Debian's nodejs and npm)"
  exit 77
fi
for p in openai parse-prometheus-text-format; do
  if [ ! -f "node_modules/$p/package.json" ]; then
    echo "SKIPPED: npm package '$p' is missing: run 'npm ci' in tests/emulate/client (scripts/setup.sh does)"
    exit 77
  fi
done
CAPSIM="$capsim_bin" exec node --test emulate.test.mjs

#!/usr/bin/env bash
# ctest entry for tests/emulate/client: the official OpenAI npm client against `capsim emulate`.
# Usage: run.sh PATH/TO/capsim. Exits 77 (ctest: skipped) saying why when node or the npm
# packages are missing; scripts/setup.sh installs both (Debian nodejs/npm, then `npm ci` here).
set -euo pipefail
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
CAPSIM="$1" exec node --test emulate.test.mjs

#!/usr/bin/env bash
# A bounded load test of `capsim serve` on loopback with wrk (Debian package wrk): GET /v1/cards
# and a small POST /v1/simulate (50 requests of Llama-3.1-8B on one H100), each for SECONDS
# (default 5) with 16 connections on 2 wrk threads. Prints requests/s and latency percentiles of
# each, and the server's resident memory after each round and at its peak (VmHWM).
#   scripts/loadtest.sh [CAPSIM_BINARY] [SECONDS]
# Fails (exit 1) on any socket error or non-2xx answer, or when the server's memory grows by more
# than 20 MiB between the second and the last simulate round (it should be flat: nothing is kept
# between requests). Exit 77 (skipped) without wrk.
set -euo pipefail
capsim="${1:-build/capsim}"
seconds="${2:-5}"
command -v wrk >/dev/null || { echo "SKIPPED: wrk not found (Debian package wrk; scripts/setup.sh installs it)"; exit 77; }
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$capsim" serve --port 0 --workers 2 --queue 64 >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q 'listening on' "$work/serve.log" && break; sleep 0.1; done
url="$(grep -o 'http://[^/ ]*' "$work/serve.log" | head -1)"
[ -n "$url" ] || { echo "capsim serve did not start:"; cat "$work/serve.log"; exit 1; }
cat >"$work/simulate.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model": "llama-3.1-8b", "deployment": {"card": "h100-sxm"}, "workload": {"rate": 5, "requests": 50}}'
LUA
rss() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }
status=0
round() {  # round NAME PATH [LUA]
  local name="$1" path="$2" script="${3:-}"
  local out="$work/$(echo "$name" | tr -c 'a-zA-Z0-9#\n' _).txt"
  wrk -t2 -c16 -d"${seconds}s" --latency ${script:+-s "$script"} "$url$path" >"$out"
  local rps p50 p99 errors non2xx
  rps=$(awk '/^Requests\/sec/ {print $2}' "$out")
  p50=$(awk '$1 == "50%" {print $2}' "$out")
  p99=$(awk '$1 == "99%" {print $2}' "$out")
  errors=$(grep -o 'Socket errors: .*' "$out" || true)
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$out")
  printf '%-22s %9s req/s  p50 %8s  p99 %8s  RSS %6s KiB  %s%s\n' "$name" "$rps" "$p50" "$p99" "$(rss)" \
         "${errors:-0 socket errors}" "${non2xx:+, $non2xx non-2xx answers}"
  if [ -n "$errors" ] || [ -n "$non2xx" ]; then status=1; fi
}
round "GET /v1/cards" /v1/cards
round "POST /v1/simulate #1" /v1/simulate "$work/simulate.lua"
round "POST /v1/simulate #2" /v1/simulate "$work/simulate.lua"
before=$(rss)
round "POST /v1/simulate #3" /v1/simulate "$work/simulate.lua"
after=$(rss)
peak=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
echo "peak RSS (VmHWM): $peak KiB; growth over the last round: $((after - before)) KiB"
if [ $((after - before)) -gt 20480 ]; then echo "FAIL: memory grew by more than 20 MiB in one round"; status=1; fi
exit $status

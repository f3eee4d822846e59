#!/usr/bin/env bash
# Builds capsim's libFuzzer targets (fuzz/, clang-14, ASan + UBSan) in build-asan/ (shared with
# scripts/sanitize.sh: one compile serves both) and runs each for SECONDS (default 60) on one
# core, seeding its corpus from the repository's own files.
#   scripts/fuzz.sh [SECONDS] [TARGET...]        (default: every target)
#   RUNS=1000000 scripts/fuzz.sh 0 [TARGET...]   each target to RUNS executions instead of a time
# Prints one line per target: executions reached, corpus size, and whether it crashed. A crash
# leaves its input in build-asan/crashes/TARGET/; turn it into a regression test (tests/) and fix
# it. Exit status 1 when any target crashed. BUILD_DIR overrides the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
build="${BUILD_DIR:-build-asan}"
all=(fuzz_trace fuzz_model_config fuzz_card_yaml fuzz_engine_yaml fuzz_prices fuzz_scenario
     fuzz_assumptions fuzz_json_results fuzz_expressions fuzz_http fuzz_sweep fuzz_openai_request
     fuzz_emulate_http fuzz_kernel_table fuzz_bench_runs fuzz_empirical
     fuzz_card_profile)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

BUILD_DIR="$build" ./scripts/sanitize.sh --configure-only
cmake --build "$build" -j"${JOBS:-2}" --target "${targets[@]}"

# Seed corpora: the repository's files of each format, and fuzz/seeds/TARGET/ (for the YAML
# targets: anchors, aliases, merge keys and an alias bomb, which every reader refuses). Targets
# whose first byte picks a format or parser get that byte prepended.
seed() {  # seed TARGET PREFIX-BYTE-OR-EMPTY FILES...
  local t="$1" prefix="$2"; shift 2
  local dir="$build/corpus/$t"
  mkdir -p "$dir"
  for f in "$@"; do
    [ -f "$f" ] || continue
    local out="$dir/seed-$(echo "$prefix$f" | md5sum | cut -c1-12)"
    if [ -n "$prefix" ]; then { printf "\\x$prefix"; cat "$f"; } >"$out"; else cp "$f" "$out"; fi
  done
}
for t in "${targets[@]}"; do
  case "$t" in
    fuzz_trace)
      seed "$t" 00 workloads/traces/azure-*.csv
      seed "$t" 01 workloads/traces/*.jsonl
      seed "$t" 02 workloads/traces/burstgpt-*.csv
      seed "$t" 03 workloads/traces/*plain*.csv workloads/traces/*.csv
      seed "$t" 04 workloads/traces/* ;;
    fuzz_model_config) seed "$t" "" models/*/config.json ;;
    fuzz_card_yaml) seed "$t" "" calibration/cards/*.yaml fuzz/seeds/fuzz_card_yaml/* ;;
    fuzz_engine_yaml) seed "$t" "" calibration/engines/*.yaml fuzz/seeds/fuzz_engine_yaml/* ;;
    fuzz_prices) seed "$t" "" calibration/prices.yaml fuzz/seeds/fuzz_prices/* ;;
    fuzz_scenario) seed "$t" "" workloads/*.yaml fuzz/seeds/fuzz_scenario/* ;;
    fuzz_assumptions) seed "$t" "" workloads/assumptions.yaml fuzz/seeds/fuzz_assumptions/* ;;
    fuzz_json_results)
      seed "$t" 00 workloads/baselines/*.json
      seed "$t" 01 fuzz/seeds/fuzz_json_results/*.json ;;
    fuzz_expressions) seed "$t" "" fuzz/seeds/fuzz_expressions/* ;;
    fuzz_http) seed "$t" "" fuzz/seeds/fuzz_http/* ;;
    fuzz_sweep) seed "$t" "" workloads/sweeps/*.yaml fuzz/seeds/fuzz_sweep/* ;;
    fuzz_openai_request) seed "$t" "" fuzz/seeds/fuzz_openai_request/* ;;
    fuzz_emulate_http) seed "$t" "" fuzz/seeds/fuzz_emulate_http/* ;;
    fuzz_kernel_table)
      seed "$t" 00 fuzz/seeds/fuzz_kernel_table/gemm.csv
      seed "$t" 01 fuzz/seeds/fuzz_kernel_table/attention.csv
      seed "$t" 02 fuzz/seeds/fuzz_kernel_table/moe.csv
      seed "$t" 03 fuzz/seeds/fuzz_kernel_table/allreduce.csv
      seed "$t" 04 fuzz/seeds/fuzz_kernel_table/training.csv ;;
    fuzz_bench_runs) seed "$t" "" tests/data/calibrate-runs/*.json ;;
    fuzz_card_profile) seed "$t" "" fuzz/seeds/fuzz_card_profile/* ;;
    fuzz_empirical)
      seed "$t" 00 fuzz/seeds/fuzz_empirical/tokens.csv
      seed "$t" 01 fuzz/seeds/fuzz_empirical/seconds.csv ;;
  esac
done

for t in "${targets[@]}"; do seed "$t" "" fuzz/regressions/"$t"/*; done

status=0
for t in "${targets[@]}"; do
  mkdir -p "$build/crashes/$t" "$build/corpus/$t"
  log="$build/fuzz-$t.log"
  # -rss_limit_mb and -timeout turn an input that eats memory or hangs into a finding too.
  set +e
  if [ -n "${RUNS:-}" ]; then budget=(-runs="$RUNS"); else budget=(-max_total_time="$seconds"); fi
  start=$(date +%s)
  "$build/fuzz/$t" "$build/corpus/$t" "${budget[@]}" \
      -rss_limit_mb=2048 -timeout=10 -max_len=8192 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$t/" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  corpus=$(ls "$build/corpus/$t" | wc -l)
  if [ $rc -eq 0 ]; then verdict="ok"; else verdict="CRASH (rc $rc, see $log)"; status=1; fi
  printf '%-20s %12s executions in %ss, corpus %5s files: %s\n' "$t" "${runs:-?}" "$(( $(date +%s) - start ))" "$corpus" "$verdict"
done
exit $status

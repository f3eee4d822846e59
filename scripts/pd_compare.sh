#!/bin/bash
# Reproduces docs/deployment-options.md "Against a published measurement": the most requests/s
# that meet TPOT p95 <= $1 (and TTFT p95 <= 2 s) for aggregated and disaggregated deployments of
# Llama-3.1-70B fp8 on 8 H100 SXM (one node, KV over NVLink), 3,000 in / 150 out, as NVIDIA
# Dynamo's published Llama 70B comparison (ai-dynamo/dynamo docs/architecture/architecture.md).
# Usage: scripts/pd_compare.sh 25ms [build/capsim]
set -euo pipefail
tpot=${1:?usage: scripts/pd_compare.sh TPOT_BOUND [capsim]}
capsim=${2:-build/capsim}
common=(--model llama-3.1-70b --weights fp8 --rate 4 --duration 3min --warmup 30s --input-tokens 3000
        --output-tokens 150 --slo "tpot_p95<=${tpot}" --slo 'ttft_p95<=2s' -q --points 2)
capacity() { "$capsim" capacity "${common[@]}" "$@" 2>&1 | grep -o 'capacity: [0-9.]* requests/s\|fails.*\|does not fit.*' | head -1 || true; }
for cfg in "4 2" "2 4" "1 8"; do
  set -- $cfg
  echo "aggregated $1x tp$2: $(capacity --card h100-sxm --tp "$2" --replicas "$1")"
done
for cfg in "1 2 3 2" "2 2 2 2" "3 2 1 2" "2 2 1 4" "1 4 2 2" "1 4 1 4"; do
  set -- $cfg
  echo "disaggregated $1x tp$2 + $3x tp$4: $(capacity --prefill-pool "$1x h100-sxm tp$2 fp8" \
       --decode-pool "$3x h100-sxm tp$4 fp8" --kv-link nvlink-h100)"
done

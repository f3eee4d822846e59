#!/bin/bash
# Reproduces docs/deployment-options.md "Against a published measurement": the most requests/s
# that meet TPOT p95 <= $1 (and TTFT p95 <= 2 s) for aggregated and disaggregated deployments of
# Llama-3.1-70B fp8 on H100 SXM, 3,000 in / 150 out, as NVIDIA Dynamo's published Llama 70B
# comparison (ai-dynamo/dynamo docs/architecture/architecture.md): one node (8 GPUs, KV over
# NVLink) or two nodes (16 GPUs, KV over InfiniBand NDR).
# Usage: scripts/pd_compare.sh TPOT_BOUND [capsim] [1|2 nodes]   e.g. scripts/pd_compare.sh 25ms
set -euo pipefail
tpot=${1:?usage: scripts/pd_compare.sh TPOT_BOUND [capsim] [nodes]}
capsim=${2:-build/capsim}
nodes=${3:-1}
if [ "$nodes" = 1 ]; then
  rate=4; link=nvlink-h100
  aggregated=("4 2" "2 4" "1 8")
  pools=("1 2 3 2" "2 2 2 2" "3 2 1 2" "2 2 1 4" "1 4 2 2" "1 4 1 4")
else
  rate=8; link=ib-ndr-400
  aggregated=("8 2" "4 4" "2 8")
  pools=("4 2 2 4" "6 2 1 4" "6 2 2 2" "5 2 3 2" "4 2 4 2" "7 2 1 2")
fi
common=(--model llama-3.1-70b --weights fp8 --rate "$rate" --duration 3min --warmup 30s --input-tokens 3000
        --output-tokens 150 --slo "tpot_p95<=${tpot}" --slo 'ttft_p95<=2s' -q --points 2)
capacity() { "$capsim" capacity "${common[@]}" "$@" 2>&1 | grep -o 'capacity: [0-9.]* requests/s\|fails.*\|does not fit.*' | head -1 || true; }
for cfg in "${aggregated[@]}"; do
  set -- $cfg
  echo "aggregated $1x tp$2: $(capacity --card h100-sxm --tp "$2" --replicas "$1")"
done
for cfg in "${pools[@]}"; do
  set -- $cfg
  echo "disaggregated $1x tp$2 + $3x tp$4: $(capacity --prefill-pool "$1x h100-sxm tp$2 fp8" \
       --decode-pool "$3x h100-sxm tp$4 fp8" --kv-link "$link")"
done

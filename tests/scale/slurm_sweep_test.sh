#!/usr/bin/env bash
# A 4-shard sweep under a real single-node Slurm (docs/scale.md): starts munged, slurmctld and
# slurmd on localhost from a temporary folder, submits scale/slurm-sweep.sbatch as a 4-task job
# array, merges the shards with `capsim merge` and checks the JSON and CSV equal the unsharded
# sweep byte for byte. Bounded: Slurm gets 60 s to come up and the array 300 s to finish.
# Exit 77 (ctest: skipped) with the reason when Slurm cannot run here: packages missing (scripts/
# setup.sh installs slurm-wlm and munge), not root, or the daemons do not start — never faked.
# The daemons talk over 127.0.0.1 (SlurmctldHost and NodeAddr), so the machine's host name need
# not resolve.
# Usage: slurm_sweep_test.sh CAPSIM_BINARY REPO_ROOT
set -uo pipefail
CAPSIM="$(realpath "$1")"
ROOT="$(realpath "$2")"
SWEEP="$ROOT/workloads/sweeps/chat-grid.yaml"

# CAPSIM_REQUIRE_SLURM=1 (set by .ci/run) turns every skip into a failure with the same reason,
# so that a passing CI run is itself the record that the sweep ran under a real Slurm there.
skip() {
  if [ "${CAPSIM_REQUIRE_SLURM:-0}" = 1 ]; then echo "FAILED (CAPSIM_REQUIRE_SLURM=1, not skipped): $*"; exit 1; fi
  echo "SKIPPED: $*"; exit 77
}
fail() { echo "FAILED: $*"; exit 1; }

for c in slurmctld slurmd sbatch sinfo squeue munged munge unmunge; do
  command -v "$c" >/dev/null 2>&1 || skip "'$c' not installed (Debian: slurm-wlm munge; scripts/setup.sh installs them)"
done
[ "$(id -u)" -eq 0 ] || skip "the daemons are started as root here (SlurmUser=root), and this is uid $(id -u)"
[ -r /etc/munge/munge.key ] || skip "/etc/munge/munge.key missing (the munge package creates it)"

TMP="$(mktemp -d /tmp/capsim-slurm.XXXXXX)"
cleanup() {
  for p in "$TMP/slurmd.pid" "$TMP/slurmctld.pid" "$TMP/munged.pid"; do
    [ -s "$p" ] && kill "$(cat "$p")" 2>/dev/null
  done
  sleep 1
  for p in "$TMP/slurmd.pid" "$TMP/slurmctld.pid" "$TMP/munged.pid"; do
    [ -s "$p" ] && kill -9 "$(cat "$p")" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

logs() { for f in "$TMP"/*.log; do echo "== $f"; tail -n 20 "$f"; done; }

# munged on its own socket, so a system munged (if any) is left alone.
SOCK="$TMP/munge.sock"
munged --force --socket="$SOCK" --pid-file="$TMP/munged.pid" --log-file="$TMP/munged.log" \
       --seed-file="$TMP/munged.seed" --key-file=/etc/munge/munge.key >/dev/null 2>&1 \
  || { logs; skip "munged did not start (see its log above)"; }
for _ in $(seq 1 20); do [ -S "$SOCK" ] && break; sleep 0.25; done
munge --socket="$SOCK" -n | unmunge --socket="$SOCK" >/dev/null 2>&1 \
  || { logs; skip "munge credentials do not round-trip on $SOCK"; }

# Two free TCP ports for the daemons.
read -r CTLD_PORT SLURMD_PORT < <(python3 -c '
import socket
s1, s2 = socket.socket(), socket.socket()
s1.bind(("127.0.0.1", 0)); s2.bind(("127.0.0.1", 0))
print(s1.getsockname()[1], s2.getsockname()[1])')
HOST="$(hostname -s)"
CPUS="$(nproc)"
MEM_MB=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
mkdir -p "$TMP/state" "$TMP/spool" "$TMP/out"
CONF="$TMP/slurm.conf"
cat > "$CONF" <<EOF
ClusterName=capsimtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/slurmctld.log
SlurmdLogFile=$TMP/slurmd.log
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=sweep Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$CONF"
slurmctld -f "$CONF" >/dev/null 2>&1 || { logs; skip "slurmctld did not start (see its log above)"; }
slurmd -f "$CONF" >/dev/null 2>&1 || { logs; skip "slurmd did not start (see its log above)"; }
up=0
for _ in $(seq 1 60); do
  if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then up=1; break; fi
  sleep 1
done
[ "$up" -eq 1 ] || { sinfo 2>&1; logs; skip "the Slurm node did not become idle within 60 s"; }

# The sweep under Slurm: a 4-task array, each task one shard (the shipped job file).
OUT="$TMP/out"
JOB=$(sbatch --parsable --array=0-3 --chdir="$TMP" --output="$TMP/task-%a.log" \
        --export=ALL,SWEEP="$SWEEP",OUT="$OUT",CAPSIM="$CAPSIM" "$ROOT/scale/slurm-sweep.sbatch") \
  || { logs; fail "sbatch refused the job array"; }
echo "submitted job array $JOB (4 tasks)"
done_all=0
for _ in $(seq 1 300); do
  if [ -z "$(squeue -h -j "$JOB" 2>/dev/null)" ]; then done_all=1; break; fi
  sleep 1
done
[ "$done_all" -eq 1 ] || { squeue; logs; fail "the job array did not finish within 300 s"; }
for i in 0 1 2 3; do
  [ -s "$OUT/shard-$i.json" ] || { cat "$TMP"/task-*.log; logs; fail "task $i wrote no shard-$i.json"; }
done

"$CAPSIM" merge "$OUT"/shard-{0,1,2,3}.json --json "$TMP/merged.json" --csv "$TMP/merged.csv" >/dev/null \
  || fail "capsim merge failed"
"$CAPSIM" sweep "$SWEEP" --quiet --json "$TMP/whole.json" --csv "$TMP/whole.csv" >/dev/null \
  || fail "the unsharded sweep failed"
cmp "$TMP/merged.json" "$TMP/whole.json" || fail "merged JSON differs from the unsharded sweep"
cmp "$TMP/merged.csv" "$TMP/whole.csv" || fail "merged CSV differs from the unsharded sweep"
runs=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["results"]))' "$TMP/merged.json")
[ "$runs" -eq 16 ] || fail "merged $runs runs, the grid has 16"
# Each shard really ran a quarter: runs i, i+4, i+8, i+12.
for i in 0 1 2 3; do
  got=$(python3 -c 'import json,sys; print(" ".join(str(r["index"]) for r in json.load(open(sys.argv[1]))["results"]))' "$OUT/shard-$i.json")
  [ "$got" = "$i $((i+4)) $((i+8)) $((i+12))" ] || fail "shard $i ran runs '$got'"
done
echo "PASSED: 4 Slurm array tasks ran the 16-run sweep; the merge equals the unsharded run byte for byte"

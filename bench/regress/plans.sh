#!/usr/bin/env bash
# Behaviour fingerprint of the search: runs a fixed set of searches (chunked and unchunked schedules, a batch sweep,
# a plan-table sweep, the memory objective, infeasible cases, 1 and 2 threads, 1 and 4 ranks) and writes each one's
# top-5 JSON with the run-dependent fields (search counters, wall time) removed, one file per case, into OUTDIR.
# A refactoring must leave `diff -r` of two such folders (before, after) empty.
#   bench/regress/plans.sh BUILD_DIR OUTDIR
set -uo pipefail
build=${1:?usage: plans.sh BUILD_DIR OUTDIR}
out=${2:?usage: plans.sh BUILD_DIR OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
ps="$build/cli/psearch"
[[ -x $ps ]] || { echo "plans.sh: no $ps" >&2; exit 2; }
mkdir -p "$out"
export PSEARCH_DATA_DIR="$root/presets" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
strip() { # drop the fields that change from run to run; keep the exit code
  python3 -c '
import json, sys
raw = sys.stdin.read()
try:
    d = json.loads(raw)
except ValueError:
    print(raw, end=""); sys.exit(0)
def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items() if k not in ("search", "wall_s", "psearch_version")}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x
print(json.dumps(clean(d), indent=1, sort_keys=True))'
}
run() { # name threads ranks args...
  local name=$1 th=$2 np=$3
  shift 3
  local cmd=("$ps" "$@" --format json)
  ((np > 1)) && cmd=(mpirun -n "$np" --bind-to none "${cmd[@]}")
  { OMP_NUM_THREADS=$th "${cmd[@]}" 2>"$out/$name.err" | strip; echo "rc=${PIPESTATUS[0]}"; } >"$out/$name.json"
}
for th in 1 2; do
  run "gpt3-65b-sweep-t$th" "$th" 1 --top 5 --model gpt3-65b --cluster dgx-a100-80g:4 --gbs-range 64:512:64
  run "gpt3-1.3b-t$th" "$th" 1 --top 5 --model gpt3-1.3b --cluster dgx-a100-40g:1
  run "gpt3-175b-chunked-t$th" "$th" 1 --top 5 --model gpt3-175b --cluster dgx-a100-80g:16 --gbs 1536 \
    --schedules interleaved,v-min,v-half,v-zb
  run "llama2-70b-t$th" "$th" 1 --top 5 --model llama2-70b --cluster dgx-h100:4
  run "gpt3-6.7b-v100-t$th" "$th" 1 --top 5 --model gpt3-6.7b --cluster p3-8xlarge:4
  run "gpt3-13b-memory-t$th" "$th" 1 --top 5 --model gpt3-13b --cluster dgx-a100-40g:1 --objective memory
  run "gpt3-1.3b-bigbatch-t$th" "$th" 1 --top 5 --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 131072
  run "infeasible-chunked-t$th" "$th" 1 --top 5 --model gpt3-175b --cluster dgx-a100-40g:2 --gbs 64 \
    --schedules interleaved,v-zb
  run "infeasible-memory-t$th" "$th" 1 --top 5 --model gpt3-175b --cluster dgx-a100-40g:1
done
run "gpt3-175b-r4" 1 4 --top 5 --model gpt3-175b --cluster dgx-a100-80g:16 --gbs 1536
run "gpt3-65b-r4-t2" 2 4 --top 5 --model gpt3-65b --cluster dgx-a100-80g:4 --gbs 256 --distribute static
run "oases-r4" 1 4 --top 5 --model "$root/bench/fidelity/models/oases-h4096-l16.json" --cluster rtx3090-pcie:2 --gbs 32
run "estimate-plan" 1 1 estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --vocab-pad 256 \
  --plan "$root/tests/data/plans/gpt3-1.3b-pp2.json"
# A plan-table sweep: its tables, without the timing columns.
rm -rf "$out/sweep.d"
OMP_NUM_THREADS=2 "$ps" sweep --models gpt3-1.3b,gpt3-6.7b --clusters dgx-a100-80g:1,2 --out "$out/sweep.d" \
  >"$out/sweep.out" 2>&1
echo "rc=$?" >>"$out/sweep.out"
sed -E 's/[0-9.]+ ?s\b//g' "$out/sweep.d/plans.csv" >"$out/sweep-plans.csv" 2>/dev/null
rm -rf "$out/sweep.d" "$out/sweep.out"
echo "# plans.sh: $(ls "$out" | grep -c json) cases in $out"

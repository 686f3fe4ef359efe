#!/usr/bin/env bash
# Valgrind memcheck of psearch under mpiexec with 2 ranks (issue #9): one search, one small sweep (records, tables,
# schedule timelines) and psearch exec of a TP 2 plan on a 2-GPU cluster, plain and overlapped (CPU backend:
# communicators, OpenBLAS GEMMs, TP collectives blocking and non-blocking, the watchdog's polled waits). Fails on any invalid access or uninitialised use and on any
# definite leak outside Open MPI's own allocations (tests/sanitizers/openmpi.supp says which and why). Exit 77
# (skipped) without valgrind.
set -u
psearch=$1
launch=$2
supp=$3
data=$4 # tests/data
command -v valgrind >/dev/null 2>&1 || { echo "# valgrind: skipped: valgrind not installed (scripts/install-deps.sh)"; exit 77; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Plugins stay loaded to the end, so the suppressions see their function names in the leak reports.
export OMPI_MCA_mca_base_component_disable_dlclose=1 OMP_NUM_THREADS=2
vg=(valgrind --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite --error-exitcode=99
    --num-callers=40 --suppressions="$supp" --log-file="$scratch/vg.%p.log")
# shellcheck source=tests/cli/test_lib.sh
source "$(dirname "$0")/test_lib.sh"
run() { # label psearch-args...
  local label=$1
  shift
  rm -f "$scratch"/vg.*.log
  # shellcheck disable=SC2086 # the launcher is a command line
  $launch "${vg[@]}" "$psearch" "$@" </dev/null >"$scratch/out" 2>&1
  local rc=$?
  local errs
  errs=$(grep -h 'ERROR SUMMARY' "$scratch"/vg.*.log | sed 's/^==[0-9]*== //' | sort | uniq -c | tr -s ' ')
  echo "# valgrind $label: exit $rc; $errs"
  # Every rank ran under valgrind to its end (a log without its summary, or no log at all, checked nothing).
  local logs summaries
  logs=$(find "$scratch" -maxdepth 1 -name 'vg.*.log' | wc -l)
  summaries=$(grep -l 'ERROR SUMMARY' "$scratch"/vg.*.log 2>/dev/null | wc -l)
  if [[ $logs -lt 2 || $summaries -ne $logs ]]; then bad "$label: $logs valgrind log(s), $summaries with a summary"; fi
  if [[ $rc -eq 0 ]] && ! grep -q 'ERROR SUMMARY: [1-9]' "$scratch"/vg.*.log; then
    ok
  else
    bad "$label under valgrind (exit $rc)"
    grep -h -v '^==[0-9]*== *$' "$scratch"/vg.*.log | grep -A30 -E 'Invalid|uninitialised|definitely lost in' | head -80
    tail -5 "$scratch/out"
  fi
}
run "search" --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --top 3 --format json --out "$scratch/plan.json"
run "sweep" sweep --models gpt3-1.3b --clusters dgx-a100-80g:1 --gbs 64 --out "$scratch/sweep"
check "the sweep under valgrind recorded its cell and drew its timeline" \
  test "$(sweep_records "$scratch/sweep") $(find "$scratch/sweep/timelines" -name '*.svg' | wc -l)" = "1 1"

# psearch exec: a TP 2 plan of gpt2-small (scaled down 16x, 2 micro-batches, one timed iteration, no warm-up) on a
# one-node cluster of 2 GPUs (no preset has 2), one rank each. The plan is made outside valgrind.
cat >"$scratch/two-gpus.json" <<'EOF'
{
  "name": "two-gpus",
  "source": "psearch test data (tests/cli/valgrind.sh): one node of two GPUs, for psearch exec on 2 ranks",
  "node_groups": [
    {"name": "g", "nodes": 1, "gpus_per_node": 2, "gpu": "rtx3090", "intra": {"kind": "nvlink3", "bw_GBps": 56}}
  ]
}
EOF
model=$data/models/good/gpt2-small.json
if "$psearch" estimate --model "$model" --cluster "$scratch/two-gpus.json" --tp 2 --gbs 2 --mbs 1 --vocab-pad 256 \
  --format json --out "$scratch/exec-plan.json" 2>"$scratch/out"; then
  run "exec" exec "$scratch/exec-plan.json" --model "$model" --cluster "$scratch/two-gpus.json" --backend cpu \
    --iters 1 --warmup 0 --watchdog 120 --format json --out "$scratch/exec.json"
  # 2 micro-batches x (F, BW) on each of the 2 ranks
  check "the exec under valgrind ran every pass" grep -q -E '"passes_per_iteration": 8,' "$scratch/exec.json"
else
  bad "psearch estimate of the exec plan failed: $(tail -3 "$scratch/out")"
fi
# the same with overlapped TP (Oases): two sub-batches, non-blocking all-reduces on a duplicate communicator
# progressed between GEMM pieces, waited for before the sub-batch's next block
if "$psearch" estimate --model "$model" --cluster "$scratch/two-gpus.json" --tp 2 --gbs 4 --mbs 2 --vocab-pad 256 \
  --recompute full --tp-overlap oases --format json --out "$scratch/ov-plan.json" 2>"$scratch/out"; then
  run "exec, overlapped TP" exec "$scratch/ov-plan.json" --model "$model" --cluster "$scratch/two-gpus.json" \
    --backend cpu --iters 1 --warmup 0 --watchdog 120 --format json --out "$scratch/ov.json"
  check "the overlapped exec under valgrind overlapped its all-reduces" \
    grep -q -E '"overlapped_allreduces_per_iteration": [1-9]' "$scratch/ov.json"
else
  bad "psearch estimate of the overlapped exec plan failed: $(tail -3 "$scratch/out")"
fi

finish

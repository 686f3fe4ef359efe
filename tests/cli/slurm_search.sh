#!/usr/bin/env bash
# The search under Slurm (issue #7): bring up a Slurm cluster of 8 emulated nodes on this host (slurmctld and 8
# slurmd in a scratch folder, the recipe of notes/platform.md), run `srun -N 8 psearch --model gpt3-65b --cluster
# dgx-a100-80g:4` over PMIx and check its plan is the one-rank plan; check `--cluster auto` describes the allocation
# (8 nodes; no GPUs here, so a search on it stops with exit 2 naming that), run a small sweep and the detection test
# program on it. The daemons are stopped by PID on every exit path (trap), pass or fail, after this controller has
# cancelled its jobs (scancel), so no step task outlives the test.
# Exit 77 (ctest SKIP_RETURN_CODE) when slurm-wlm is not installed or we are not root (slurmd must be).
# Usage: slurm_search.sh PSEARCH [TEST_DETECT]
set -u
psearch=$1
detect=${2:-}
# shellcheck source=tests/cli/test_lib.sh
source "$(dirname "$0")/test_lib.sh"
# shellcheck source=tests/cli/slurm_lib.sh
source "$(dirname "$0")/slurm_lib.sh"
slurm_require slurm_search
# Every step ends 570 s from now, 30 s before ctest's TIMEOUT (600 s): 32 s in the normal build, 259 s in the sanitizer
# build (a fresh-clone .ci/run on a 2-core machine, 2026-11-28), where 8 ASan ranks share the cores.
slurm_up 570

args=(--model gpt3-65b --cluster dgx-a100-80g:4 --format json)
t0=$(date +%s.%N)
run_srun "$psearch" "${args[@]}" --out "$d/out/slurm.json" 2>"$d/err"
rc=$?
echo "# slurm_search: srun -N 8 psearch ${args[*]}: exit $rc in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N)-$t0}") s"
if [[ $rc -eq 0 ]]; then ok; else bad "srun psearch exited $rc: $(tail -5 "$d/err")"; fi
"$psearch" "${args[@]}" --out "$d/out/one.json" </dev/null 2>"$d/err1" || bad "one-rank psearch failed: $(tail -3 "$d/err1")"
if grep -q '"ranks": 8' "$d/out/slurm.json" 2>/dev/null; then ok; else bad "the search did not run on 8 ranks"; fi
# The plans (stages, strategies, schedule, batch), the top k and baselines, and their predicted numbers, which are
# computed from the plans; only the search's own counters may differ: wall time, rank count, and the work pruning
# saved, which depends on the order the ranks met the candidates in (as in search_determinism.sh).
strip() { grep -v -E '"(wall_s|ranks|evaluated|feasible|pruned|dp_cells)"' "$1"; }
if diff <(strip "$d/out/one.json") <(strip "$d/out/slurm.json") >"$d/diff" 2>&1; then ok
else bad "8-rank and one-rank plans differ:"; head -20 "$d/diff"; fi
grep -q '"pp"' "$d/out/slurm.json" 2>/dev/null || bad "no plan in the srun output"

# --cluster auto describes the allocation: 8 nodes (emulated on one host, told apart by SLURM_NODEID).
run_srun "$psearch" cluster show auto --format json --out "$d/out/auto.json" 2>"$d/err"
rc=$?
if [[ $rc -eq 0 ]] && grep -q '"nodes": 8' "$d/out/auto.json"; then ok
else bad "cluster show auto under srun -N 8: exit $rc, $(grep -m1 '"nodes"' "$d/out/auto.json" 2>/dev/null) $(tail -3 "$d/err")"; fi
# Searching for that allocation: with GPUs it plans for them; a CPU-only allocation is refused with exit 2, once.
run_srun "$psearch" --cluster auto --model gpt3-1.3b --format json --out "$d/out/auto-plan.json" >"$d/out/auto-plan.log" 2>&1
rc=$?
if grep -q '"gpus_per_node": 0' "$d/out/auto.json"; then
  if [[ $rc -eq 2 ]] && grep -q 'has no GPUs' "$d/out/auto-plan.log" && [[ ! -e "$d/out/auto-plan.json" ]]; then ok
  else bad "--cluster auto on CPU-only nodes: exit $rc, expected 2 and 'has no GPUs': $(tail -3 "$d/out/auto-plan.log")"; fi
  if [[ $(grep -c 'psearch: error' "$d/out/auto-plan.log") -eq 1 ]]; then ok; else bad "not exactly one error message"; fi
else
  if [[ $rc -eq 0 ]] && grep -q '"pp"' "$d/out/auto-plan.json"; then ok; else bad "--cluster auto search: exit $rc"; fi
fi
# A sweep across the allocation: every cell searched by the 8 ranks, recorded once.
run_srun "$psearch" sweep --models gpt3-1.3b --clusters dgx-a100-80g:1,2 --out "$d/out/sweep" >"$d/out/sweep.log" 2>&1
rc=$?
if [[ $rc -eq 0 ]] && grep -q '8 rank(s)' "$d/out/sweep.log" && [[ $(grep -c '' "$d/out/sweep/cells.jsonl") -eq 2 ]]; then ok
else bad "sweep under srun -N 8: exit $rc: $(tail -12 "$d/out/sweep.log")"; fi
# The detection test program of tests/hw on the same allocation.
if [[ -n "$detect" ]]; then
  if run_srun "$detect" --slurm-nodes 8 >"$d/err" 2>&1; then ok; else bad "test_detect under srun: $(tail -5 "$d/err")"; fi
fi

# No psearch task outlives its step once srun has returned (the teardown would have to kill it); 5 s of grace.
exe=$(readlink -f "$psearch")
psearch_tasks() { local p; for p in $(leftover_tasks); do [[ $(readlink "/proc/$p/exe") == "$exe" ]] && echo "$p"; done; }
t=0
while left=$(psearch_tasks) && [[ -n "$left" ]] && ((t < 50)); do sleep 0.1; t=$((t + 1)); done
if [[ -z "$left" ]]; then ok; else bad "psearch tasks still running after their srun returned: $left"; fi
finish

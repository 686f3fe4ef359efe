#!/usr/bin/env bash
# The search answers the same whatever the number of OpenMP threads and MPI ranks: the JSON of the best plans must be
# identical apart from the wall time, the rank count and the work counters (bounds prune more or less depending on
# the order the work was done in; they never change a result).
set -u
psearch=$1
launch=$2
args=(--model gpt3-1.3b --cluster dgx-a100-80g:2 --gbs 128 --top 3 --format json)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
strip() { grep -v -E '"(wall_s|ranks|evaluated|feasible|pruned|dp_cells)"' "$1"; }
OMP_NUM_THREADS=1 "$psearch" "${args[@]}" --out "$scratch/t1" </dev/null || exit 1
OMP_NUM_THREADS=2 "$psearch" "${args[@]}" --out "$scratch/t2" </dev/null || exit 1
# shellcheck disable=SC2086 # the launcher is a command line
OMP_NUM_THREADS=1 $launch "$psearch" "${args[@]}" --out "$scratch/r2" </dev/null || exit 1
pass=0 fail=0
for f in t2 r2; do
  if diff <(strip "$scratch/t1") <(strip "$scratch/$f") >"$scratch/diff"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: 1 thread vs $f differ:"; head -20 "$scratch/diff"
  fi
done
grep -q '"samples_per_s"' "$scratch/t1" || { echo "FAIL: no plan in the output"; fail=$((fail + 1)); }
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]

#!/usr/bin/env bash
# The model and cluster files are read once, by rank 0, and every rank plans for those bytes (issue #7). Two ranks
# run in different working folders (an MPMD launch, -wdir per rank) so the same relative path names different files,
# or none, on each: what rank 0 sees decides, and the plan is the one a single process plans from rank 0's files.
# Where rank 0 cannot read a file, the job fails with exit 2 and one message, rank 0's, naming the file.
set -u
psearch=$1
mpiexec=$2
preflags=$3 # MPIEXEC_PREFLAGS (may be empty)
data=$4
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cli/test_lib.sh
. "$here/test_lib.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
presets=${PSEARCH_DATA_DIR:-$here/../../presets}
strip() { grep -v -E '"(wall_s|ranks|evaluated|feasible|pruned|dp_cells)"' "$1"; }

# mpmd DIR0 DIR1 OUT [RANK1-ARGS --] ARGS...: psearch ARGS on 2 ranks, rank 0 in DIR0, rank 1 in DIR1 (with
# RANK1-ARGS added), stdout+stderr in OUT.log; the exit status.
mpmd() {
  local d0=$1 d1=$2 out=$3 extra=()
  shift 3
  if [[ $1 == --rank1 ]]; then
    extra=("$2")
    shift 2
  fi
  # shellcheck disable=SC2086 # the pre-flags are a command line to split
  timeout 30 "$mpiexec" -n 1 $preflags -wdir "$d0" "$psearch" "$@" --format json --out "$out" : \
    -n 1 $preflags -wdir "$d1" "$psearch" "$@" "${extra[@]}" --format json --out "$out" >"$out.log" 2>&1 </dev/null
}

# same_plan NAME OUT REF: the 2-rank output equals the 1-process reference (apart from timings and the rank count).
same_plan() {
  if [[ ! -s $2 ]]; then
    bad "$1: no plan written"
    sed 's/^/     | /' "$2.log" | head -5
  elif diff <(strip "$3") <(strip "$2") >"$scratch/diff"; then
    ok
  else
    bad "$1: the plan differs from rank 0's files planned on one process"
    head -10 "$scratch/diff"
  fi
}

a=$scratch/a b=$scratch/b empty=$scratch/empty
mkdir -p "$a" "$b" "$empty"
cp "$data/models/good/gpt2-small.json" "$a/m.json"
cp "$data/../../examples/clusters/amp-mixed-v100-t4.json" "$a/c.json"
args=(--model m.json --cluster c.json --gbs 32)
(cd "$a" && "$psearch" "${args[@]}" --format json --out "$scratch/ref.json" </dev/null >"$scratch/ref.log" 2>&1)
check "one process plans rank 0's files" test -s "$scratch/ref.json"

# Rank 1 sees neither file.
mpmd "$a" "$empty" "$scratch/none.json" "${args[@]}"
check "rank 1 without the files: exit $?" test $? -eq 0
same_plan "rank 1 without the files" "$scratch/none.json" "$scratch/ref.json"

# Rank 1 sees other content under the same names: a broken model, then another model and another cluster.
echo '{ "layers": [ broken' >"$b/m.json"
mpmd "$a" "$b" "$scratch/broken.json" "${args[@]}"
check "rank 1 with a broken m.json: exit $?" test $? -eq 0
same_plan "rank 1 with a broken m.json" "$scratch/broken.json" "$scratch/ref.json"
cp "$data/models/good/t5-small-512-4.json" "$b/m.json"
cp "$presets/clusters/dgx-h100.json" "$b/c.json"
mpmd "$a" "$b" "$scratch/other.json" "${args[@]}"
check "rank 1 with other files: exit $?" test $? -eq 0
same_plan "rank 1 with other files" "$scratch/other.json" "$scratch/ref.json"

# The presets: found where rank 0 looks, though rank 1's --data-dir holds none.
(cd "$a" && "$psearch" --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --format json \
  --out "$scratch/pref.json" </dev/null >"$scratch/pref.log" 2>&1)
mpmd "$a" "$a" "$scratch/preset.json" --rank1 --data-dir="$empty" --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64
check "presets on rank 0 only: exit $?" test $? -eq 0
same_plan "presets on rank 0 only" "$scratch/preset.json" "$scratch/pref.json"

# Rank 0 sees no file while rank 1 does: exit 2, one error line, rank 0's, naming the file; nothing written.
cp "$a/m.json" "$a/c.json" "$b/"
mpmd "$empty" "$b" "$scratch/fail.json" "${args[@]}"
rc=$?
check "rank 0 without the cluster file: exit $rc, expected 2" test $rc -eq 2
check "rank 0 without the cluster file: one error line" test "$(grep -c '^psearch: error' "$scratch/fail.json.log")" -eq 1
check "rank 0 without the cluster file: rank 0 names it" grep -q '^psearch: error (rank 0): c.json: cannot open' \
  "$scratch/fail.json.log"
check "rank 0 without the cluster file: nothing written" test ! -e "$scratch/fail.json"
cp "$a/c.json" "$empty/"
mpmd "$empty" "$b" "$scratch/fail2.json" "${args[@]}"
rc=$?
check "rank 0 without the model file: exit $rc, expected 2" test $rc -eq 2
check "rank 0 without the model file: rank 0 names it" grep -q '^psearch: error (rank 0): m.json: cannot open' \
  "$scratch/fail2.json.log"
check "rank 0 without the model file: one error line" test "$(grep -c '^psearch: error' "$scratch/fail2.json.log")" -eq 1

# A sweep where one rank alone fails a step of its own before the first collective loading (here rank 1's list
# of models, an MPMD launch giving it another; out of memory in the real world): every rank stops at the same
# agreement, exit 2 with rank 1's cause, instead of rank 1 leaving for the final agreement while rank 0 waits in the
# loading's (124: the job hung until the timeout).
mpmd "$a" "$a" "$scratch/alone" --rank1 --models=m.json, sweep --models m.json --clusters c.json
rc=$?
check "sweep, rank 1 alone fails its setup: exit $rc, expected 2 (124: a rank left the others waiting)" test $rc -eq 2
check "sweep, rank 1 alone fails its setup: one error line" \
  test "$(grep -c '^psearch: error' "$scratch/alone.log")" -eq 1
check "sweep, rank 1 alone fails its setup: the message gives rank 1's cause" \
  grep -q "^psearch: error.*failed on rank 1: option --models: item 2 of 'm.json,' is empty" "$scratch/alone.log"
check "sweep, rank 1 alone fails its setup: no folder made" test ! -e "$scratch/alone"

# A --costdb database is still read by every rank: one missing on rank 1 (the model and cluster files there too, so
# only the database differs) fails the plan and the sweep on every rank together, exit 2, instead of sending rank 1
# away while rank 0 waits for it in the next collective. The cluster has the devices the database measured, so rank 0
# accepts it.
db=$scratch/db one=$scratch/one
mkdir -p "$db" "$one"
# shellcheck disable=SC2086 # the pre-flags are a command line to split
timeout 60 "$mpiexec" -n 2 $preflags "$psearch" calibrate --quick --out "$db/site.h5" >"$scratch/cal.log" 2>&1 </dev/null
check "calibrate --quick for the database" test -s "$db/site.h5"
dev=$(cd "$db" && "$psearch" cluster show costdb --costdb site.h5 --format json 2>/dev/null |
  sed -n '/"gpu": {/{n;s/^ *"name": "\(.*\)",$/\1/p;q;}')
check "the database names its device" test -n "$dev"
printf '{"name": "measured", "node_groups": [{"nodes": 1, "gpus_per_node": 2, "gpu": {"name": "%s", "mem_GiB": 8,
  "hbm_GBps": 6, "fp32_TFLOPs": 0.15, "fp16_TFLOPs": 0.15}, "intra": {"kind": "pcie", "bw_GBps": 17}}]}\n' "$dev" \
  >"$db/c.json"
cp "$a/m.json" "$db/"
cp "$a/m.json" "$db/c.json" "$one/"
dbargs=(--costdb site.h5 --dtype fp32 --vocab-pad 256 --gbs 8)
(cd "$db" && "$psearch" "${args[@]:0:4}" "${dbargs[@]}" --out "$scratch/db-one.txt" </dev/null >"$scratch/db-one.log" 2>&1)
check "one process plans with the database: exit $?" test $? -eq 0
mpmd "$db" "$one" "$scratch/db-plan.json" "${args[@]:0:4}" "${dbargs[@]}"
rc=$?
check "plan, database on rank 0 only: exit $rc, expected 2 (124: a rank left the others waiting)" test $rc -eq 2
check "plan, database on rank 0 only: the message says so, with rank 1's cause" \
  grep -q '^psearch: error.*cost database.*site\.h5: cannot open' "$scratch/db-plan.json.log"
# shellcheck disable=SC2086 # the pre-flags are a command line to split
timeout 30 "$mpiexec" -n 1 $preflags -wdir "$db" "$psearch" sweep --models m.json --clusters c.json "${dbargs[@]}" \
  --out "$scratch/sweep" : -n 1 $preflags -wdir "$one" "$psearch" sweep --models m.json --clusters c.json \
  "${dbargs[@]}" --out "$scratch/sweep" >"$scratch/db-sweep.log" 2>&1 </dev/null
rc=$?
check "sweep, database on rank 0 only: exit $rc, expected 2 (124: a rank left the others waiting)" test $rc -eq 2
check "sweep, database on rank 0 only: the message says so, with rank 1's cause" \
  grep -q '^psearch: error.*cost database.*site\.h5: cannot open' "$scratch/db-sweep.log"
[[ $fail -eq 0 ]] || { echo "last log:"; sed 's/^/     | /' "$scratch/db-sweep.log" | head -5; }
finish

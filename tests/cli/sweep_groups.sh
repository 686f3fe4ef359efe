#!/usr/bin/env bash
# psearch sweep with its cells across rank groups (docs/search.md, "Sweeps across rank groups"): the same 4 x 3 sweep
# on 1, 2, 3 and 4 ranks, with automatic groups and with --group-ranks, gives byte-identical tables and timelines
# and the same records (but for the run's own fields: search time, ranks, finish time), however the cells were
# shared out and in whatever order they finished; groups were really used (cells searched by groups of one rank,
# the big cell by all four); and a sweep begun on 1 rank and resumed on 3 gives the same tables again.
#   sweep_groups.sh PSEARCH LAUNCH_TEMPLATE   (the launcher with @N@ for the rank count)
set -u
psearch=$1
template=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=tests/cli/test_lib.sh
source "$(dirname "$0")/test_lib.sh"
# sweep N ARGS...: psearch sweep on N ranks
sweep() {
  local n=$1
  shift
  # shellcheck disable=SC2086 # the launcher is a command line
  ${template//@N@/$n} "$psearch" sweep "$@" </dev/null
}
# The records without what depends on the run: the search's own figures (time, ranks) and the finish time; sorted,
# since cells are recorded as they finish.
records() { sed -e 's/,"search":{[^}]*}//' -e 's/,"finished":"[^"]*"//' "$1/cells.jsonl" | sort; }
same_output() { # label DIR: DIR's tables, timelines and records are the 1-rank sweep's
  local f
  for f in plans.md plans.csv index.html; do check "$1: $f as on 1 rank" cmp -s "$base/$f" "$2/$f"; done
  check "$1: the same timelines" diff -r "$base/timelines" "$2/timelines"
  check "$1: the same records" test "$(records "$2")" = "$(records "$base")"
}

# gpt3-175b does not fit one or two DGX (infeasible cells are results too); llama2-70b on 4 is the big cell.
args=(--models gpt3-1.3b,llama2-7b,gpt3-175b,llama2-70b --clusters dgx-a100-80g:1,2,4 --gbs 64 --format json)
base=$scratch/n1
sweep 1 "${args[@]}" --out "$base" >"$scratch/o1" 2>"$scratch/e1"
rc=$?
check "1 rank: exit 0 (exit $rc; stderr: $(tail -2 "$scratch/e1"))" test $rc -eq 0
check "1 rank: 12 records" test "$(sweep_records "$base") $(sweep_cells "$base")" = "12 12"
check "1 rank: one group" grep -q '"groups": 1,' "$scratch/o1"
check "1 rank: some cells infeasible" grep -q '"status":"infeasible"' "$base/cells.jsonl"

for run in "2 auto" "3 auto" "4 auto" "4 2" "3 3"; do
  read -r n g <<<"$run"
  out=$scratch/n$n-g$g
  extra=()
  [[ $g != auto ]] && extra=(--group-ranks "$g")
  sweep "$n" "${args[@]}" "${extra[@]}" --out "$out" >"$scratch/o" 2>"$scratch/e"
  rc=$?
  check "$n ranks, groups $g: exit 0 (exit $rc; stderr: $(tail -2 "$scratch/e"))" test $rc -eq 0
  same_output "$n ranks, groups $g" "$out"
  busy=$(jq '.busy_s | length' "$scratch/o")
  check "$n ranks, groups $g: busy time of every rank ($busy)" test "$busy" = "$n"
  groups=$(jq .groups "$scratch/o")
  shared=$(jq .shared_cells "$scratch/o")
  case $g in
    auto) want=$n ;;
    *) want=$((n / g)) ;;
  esac
  check "$n ranks, groups $g: $groups groups, $want expected" test "$groups" = "$want"
  # each group searched its cells alone, the shared ones took every rank
  on_all=$(grep -c "\"ranks\":$n," "$out/cells.jsonl")
  if [[ $groups -gt 1 ]]; then
    check "$n ranks, groups $g: cells searched by groups of $((n / groups)) rank(s)" \
      grep -q "\"ranks\":$((n / groups))," "$out/cells.jsonl"
    check "$n ranks, groups $g: $shared shared cell(s) searched by all ranks ($on_all records say so)" \
      test "$on_all" = "$shared"
  else
    check "$n ranks, groups $g: every cell searched by all $n ranks" test "$on_all" = 12
  fi
  [[ $run == "4 auto" ]] && four=$shared
done
# With 4 groups, llama2-70b on 4 DGX (most of the sweep's estimated work) is above a group's share.
check "4 ranks: the big cell searched by all ranks ($four shared)" test "${four:-0}" -ge 1

# A sweep begun on 1 rank and resumed on 3 (groups): the same tables.
part=$scratch/part
mkdir -p "$part"
sweep 1 --models gpt3-1.3b,llama2-7b --clusters dgx-a100-80g:1,2,4 --gbs 64 --out "$part" >/dev/null 2>&1
sweep 3 "${args[@]}" --out "$part" --resume >"$scratch/o" 2>"$scratch/e"
rc=$?
check "resume on 3 ranks: exit 0 (exit $rc; stderr: $(tail -2 "$scratch/e"))" test $rc -eq 0
check "resume on 3 ranks: 6 cells searched, 6 from records" \
  test "$(jq -c '[.searched, .from_records]' "$scratch/o")" = "[6,6]"
same_output "resumed on 3 ranks" "$part"

# --group-ranks is a count: 0 and words are refused before anything runs.
sweep 2 "${args[@]}" --group-ranks 0 --out "$scratch/bad" >/dev/null 2>"$scratch/e"
check "--group-ranks 0 exits 2" test $? -eq 2
check "... naming the option" grep -q -- '--group-ranks' "$scratch/e"
check "... creating nothing" test ! -e "$scratch/bad"

finish

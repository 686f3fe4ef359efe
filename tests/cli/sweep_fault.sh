#!/usr/bin/env bash
# Fault injection on psearch sweep (issue #9): the whole job (mpiexec and every rank, as a scheduler's kill would)
# is killed with SIGKILL at several points -- once the first tables exist while the first cell is searched, and right
# after a cell's record lands -- then resumed, until the sweep completes. No cell may be lost or recorded twice,
# every table must parse at every kill point, and no temporary file may be left once the sweep is done.
set -u
psearch=$1
launch=$2
scratch=$(mktemp -d)
job=""
# shellcheck source=tests/cli/test_lib.sh
source "$(dirname "$0")/test_lib.sh"
cleanup() {
  [[ -n "$job" ]] && kill_and_reap "$job"
  rm -rf "$scratch"
}
trap cleanup EXIT

out=$scratch/sweep
# 4 cells of ~0.6-1.1 s each on 2 ranks (longer on a loaded machine), so a kill lands while a cell is searched.
args=(--models gpt3-65b,gpt3-175b --clusters dgx-a100-80g:8,16 --out "$out")

start() { # extra args
  # shellcheck disable=SC2086 # the launcher is a command line
  $launch "$psearch" sweep "${args[@]}" "$@" </dev/null >>"$scratch/log" 2>&1 &
  job=$!
}
# wait_for CONDITION...: poll (20 ms) until it holds or the job ends; 30 s at most. True when it holds.
wait_for() {
  local t=0
  until "$@"; do
    kill -0 "$job" 2>/dev/null && [[ $t -lt 1500 ]] || return 1
    sleep 0.02
    t=$((t + 1))
  done
}
kill_job() { # the label of this kill point: the job must still run when it is killed, or the kill tested nothing
  # Judged by how the job ended, not by a look before the kill: one that ends in between exits 0, not 137 (SIGKILL).
  kill_and_reap "$job"
  local rc=$?
  job=""
  if [[ $rc -eq 137 ]]; then ok; else bad "$1: the job ended (exit $rc) before the kill; make the cells longer"; fi
}

# Every table parses whatever the moment of the kill: they are replaced by rename, never written in place.
check_tables() { # label
  local n rows
  n=$(sweep_records "$out")
  if [[ ! -f "$out/plans.csv" ]]; then bad "$1: no plans.csv with $n records"; return; fi
  rows=$(($(grep -c '' "$out/plans.csv") - 1))
  # The tables follow the records; a kill between a record's append and the re-render leaves them one behind.
  if [[ $rows -eq $n || $rows -eq $((n - 1)) ]]; then ok; else bad "$1: plans.csv has $rows rows for $n records"; fi
  if [[ $(sweep_torn "$out") -le 1 ]]; then ok; else bad "$1: more than one unfinished record"; fi
  if command -v xmllint >/dev/null; then
    if xmllint --noout "$out/index.html" 2>"$scratch/xml"; then ok; else bad "$1: index.html: $(head -2 "$scratch/xml")"; fi
  elif [[ $(grep -c '<table>' "$out/index.html") -eq $(grep -c '</table>' "$out/index.html") ]]; then ok
  else bad "$1: index.html tables not closed"; fi
}

# Kill point 1: the first tables are there (rendered before any cell runs) and the first cell is being searched.
start
tables_there() { [[ -f "$out/plans.csv" ]]; }
if wait_for tables_there; then ok; else bad "no plans.csv within 30 s of the start: $(tail -3 "$scratch/log")"; fi
kill_job "first kill"
echo "# first kill: $(sweep_records "$out") records"
if [[ $(sweep_records "$out") -eq 0 ]]; then ok; else bad "first kill: a cell finished before it"; fi
check_tables "after the first kill"
# Kill points 2 and 3: as soon as one more record has landed (the next cell is then in progress).
round=1
for extra in --resume --resume; do
  round=$((round + 1))
  before=$(sweep_records "$out")
  start $extra
  one_more() { [[ $(sweep_records "$out") -gt $before ]]; }
  wait_for one_more
  kill_job "kill $round"
  after=$(sweep_records "$out")
  echo "# kill $round: $before -> $after records"
  if [[ $after -gt $before ]]; then ok; else bad "round $round: no record within 30 s"; fi
  check_tables "after kill $round ($after records)"
done
# Resume to the end.
start --resume
wait "$job"
rc=$?
job=""
if [[ $rc -eq 0 ]]; then ok; else bad "final resume exited $rc: $(tail -5 "$scratch/log")"; fi

n=$(sweep_records "$out")
uniq=$(sweep_cells "$out")
if [[ $n -eq 4 && $uniq -eq 4 ]]; then ok; else bad "after the kills: $n records of $uniq distinct cells, expected 4 of 4"; fi
if [[ $(sweep_torn "$out") -eq 0 ]]; then ok; else bad "a record is not whole"; fi
check_tables "complete"
if [[ $(grep -c '' "$out/plans.csv") -eq 5 ]]; then ok; else bad "plans.csv does not have 4 rows"; fi
planned=$(grep -c '"status":"ok"' "$out/cells.jsonl")
if [[ $(grep -c '<img src=' "$out/index.html") -eq $planned ]]; then ok; else bad "index.html does not link $planned timelines"; fi
if [[ $(sweep_timelines "$out") -eq $planned ]]; then ok; else bad "not one timeline per planned cell"; fi
left=$(sweep_leftovers "$out")
if [[ -z "$left" ]]; then ok; else bad "left in the folder: $left"; fi

finish

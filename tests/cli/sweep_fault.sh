#!/usr/bin/env bash
# Fault injection on psearch sweep (issue #9): the whole job (mpiexec and every rank, as a scheduler's kill would)
# is killed with SIGKILL at several points -- early in a run, and right after a cell's record lands -- then resumed,
# until the sweep completes. No cell may be lost or recorded twice, every table must parse at every kill point, and
# no temporary file may be left once the sweep is done.
set -u
psearch=$1
launch=$2
scratch=$(mktemp -d)
job=""
cleanup() {
  [[ -n "$job" ]] && kill_job "$job"
  rm -rf "$scratch"
}
trap cleanup EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# Children of a process, from /proc (no procps needed). Open MPI puts each rank in a process group of its own, so
# killing mpiexec's group would leave the ranks running: kill them by PID.
# shellcheck source=tests/cli/proc_lib.sh
source "$(dirname "$0")/proc_lib.sh"
kill_job() { # mpiexec pid: SIGKILL to it and its ranks at once, then reap
  local pids
  pids="$1 $(children_of "$1")"
  # shellcheck disable=SC2086
  kill -9 $pids 2>/dev/null
  wait "$1" 2>/dev/null
  job=""
  # ranks orphaned by the kill are gone once /proc forgets them
  local t=0
  for p in $pids; do while [[ -e /proc/$p && $t -lt 100 ]]; do sleep 0.05; t=$((t + 1)); done; done
}
records() { if [[ -f "$out/cells.jsonl" ]]; then grep -c '' "$out/cells.jsonl"; else echo 0; fi; }

out=$scratch/sweep
# 4 cells of ~0.6-1.1 s each on 2 ranks, so a kill lands while a cell is being searched.
args=(--models gpt3-65b,gpt3-175b --clusters dgx-a100-80g:8,16 --out "$out")

start() { # extra args
  # shellcheck disable=SC2086 # the launcher is a command line
  $launch "$psearch" sweep "${args[@]}" "$@" </dev/null >>"$scratch/log" 2>&1 &
  job=$!
}

# Every table parses whatever the moment of the kill: they are replaced by rename, never written in place.
check_tables() { # label
  local n rows
  n=$(records)
  [[ -f "$out/plans.csv" ]] || { [[ $n -eq 0 ]] && { ok; return; }; bad "$1: no plans.csv with $n records"; return; }
  rows=$(($(grep -c '' "$out/plans.csv") - 1))
  # The tables follow the records; a kill between a record's append and the re-render leaves them one behind.
  if [[ $rows -eq $n || $rows -eq $((n - 1)) ]]; then ok; else bad "$1: plans.csv has $rows rows for $n records"; fi
  if [[ $(grep -c '}$' "$out/cells.jsonl") -ge $((n - 1)) ]]; then ok; else bad "$1: more than one unfinished record"; fi
  if command -v xmllint >/dev/null; then
    if xmllint --noout "$out/index.html" 2>"$scratch/xml"; then ok; else bad "$1: index.html: $(head -2 "$scratch/xml")"; fi
  elif [[ $(grep -c '<table>' "$out/index.html") -eq $(grep -c '</table>' "$out/index.html") ]]; then ok
  else bad "$1: index.html tables not closed"; fi
}

# Kill point 1: early in a fresh run (start-up, the first tables, the first search).
start
sleep 0.3
kill_job "$job"
echo "# early kill: $(records) records"
check_tables "after the early kill"
# Kill points 2 and 3: as soon as one more record has landed (the next cell is then in progress).
round=1
for extra in --resume --resume; do
  round=$((round + 1))
  before=$(records)
  start $extra
  t=0
  while [[ $(records) -le $before && $t -lt 600 ]]; do sleep 0.02; t=$((t + 1)); done
  kill_job "$job"
  after=$(records)
  echo "# kill $round: $before -> $after records"
  if [[ $after -gt $before ]]; then ok; else bad "round $round: no record within 12 s"; fi
  # Otherwise the kill hit a finished sweep and tested nothing: the cells must be made longer.
  if [[ $after -lt 4 ]]; then ok; else bad "round $round: the sweep finished before the kill"; fi
  check_tables "after kill $round ($after records)"
done
# Resume to the end.
start --resume
wait "$job"
rc=$?
job=""
if [[ $rc -eq 0 ]]; then ok; else bad "final resume exited $rc: $(tail -5 "$scratch/log")"; fi

n=$(records)
uniq=$(grep -o '"cell":"[^"]*"' "$out/cells.jsonl" | sort -u | wc -l)
if [[ $n -eq 4 && $uniq -eq 4 ]]; then ok; else bad "after the kills: $n records of $uniq distinct cells, expected 4 of 4"; fi
if [[ $(grep -c '}$' "$out/cells.jsonl") -eq 4 ]]; then ok; else bad "a record is not whole"; fi
check_tables "complete"
if [[ $(grep -c '' "$out/plans.csv") -eq 5 ]]; then ok; else bad "plans.csv does not have 4 rows"; fi
planned=$(grep -c '"status":"ok"' "$out/cells.jsonl")
if [[ $(grep -c '<img src=' "$out/index.html") -eq $planned ]]; then ok; else bad "index.html does not link $planned timelines"; fi
left=$(ls -A "$out" | grep -v -x -E 'cells.jsonl|plans.md|plans.csv|index.html|timelines'; ls -A "$out/timelines" | grep -v '\.svg$')
if [[ -z "$left" ]]; then ok; else bad "left in the folder: $left"; fi
if [[ $(ls "$out/timelines" | grep -c '\.svg$') -eq $planned ]]; then ok; else bad "not one timeline per planned cell"; fi

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]

#!/usr/bin/env bash
# One writer per destination (issue #23): a second sweep into a folder another sweep is writing, and a second
# calibration into a database another one is writing, are refused at once (exit 2, naming the other process), and
# the first finishes untouched: every cell recorded once, the folder resumable, the database readable.
# With a launcher (LAUNCH: "mpiexec -n 2 ..."), SIGTERM also goes to a calibration on 2 ranks: every rank's
# temporary and the lock go.
#   one_writer.sh PSEARCH [LAUNCH]
set -u
psearch=$1
launch=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cli/test_lib.sh
source "$here/test_lib.sh"
scratch=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$scratch"' EXIT
cd "$scratch" || exit 1

show() { # file...: the outputs, for a failure's diagnosis
  local f
  for f in "$@"; do [[ -f $f ]] && sed "s|^|     $f: |" "$f" | tail -5; done
}

wait_for() { # path seconds: until the path exists
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    [[ -e $1 ]] && return 0
    sleep 0.05
  done
  return 1
}

# two_writers NAME SIGN ARGS...: psearch ARGS in the background; once SIGN exists (its lock is held), the same
# command again must be refused at once, naming the first; then the first must complete. Outputs: NAME.1, NAME.2.
two_writers() {
  local name=$1 sign=$2 first rc
  shift 2
  "$psearch" "$@" >"$name.1" 2>&1 &
  first=$!
  if wait_for "$sign" 30; then
    "$psearch" "$@" >"$name.2" 2>&1
    rc=$?
    if kill -0 $first 2>/dev/null; then
      check "second $name refused (exit 2), got $rc" test $rc -eq 2 || show "$name.2"
      check "second $name names the other process" grep -q 'being written by another psearch (process' "$name.2"
    else
      bad "the first $name ended before the second started: the lock was not exercised (make it longer)"
    fi
  else
    bad "the first $name never took its lock"
  fi
  wait $first
  check "first $name completed" test $? -eq 0 || show "$name.1" "$name.2"
}

# ---- two sweeps, one folder ----
sweep=(sweep --models gpt3-65b,gpt3-175b,llama2-70b --clusters dgx-a100-80g:1,2,4,8,16 --out tables)
two_writers sweep tables/cells.jsonl "${sweep[@]}"
check "each cell recorded once" test "$(wc -l <tables/cells.jsonl)" -eq 15 || show sweep.1 sweep.2
dups=$(grep -o '"key": *"[^"]*"' tables/cells.jsonl | sort | uniq -d | wc -l)
check "no cell recorded twice" test "$dups" -eq 0
"$psearch" "${sweep[@]}" --resume >resume.out 2>&1
check "the folder resumes" test $? -eq 0 || show resume.out

# ---- two calibrations, one database ----
two_writers calibration .site.h5.lock calibrate --quick --out site.h5
"$psearch" costdb show site.h5 >/dev/null 2>&1
check "the database reads back" test $? -eq 0
check "no lock file left" test ! -e .site.h5.lock
check "no temporary left" test -z "$(ls -A | grep tmp)"

# ---- SIGTERM: no temporary left behind ----
# sigterm NAME [LAUNCH...]: a calibration into NAME.h5, SIGTERM once it holds its lock; no temporary, no lock file, no
# database may remain (a launcher forwards the signal to every rank)
sigterm() {
  local name=$1 victim rc
  shift
  "$@" "$psearch" calibrate --quick --out "$name.h5" >"$name.out" 2>&1 &
  victim=$!
  if wait_for ".$name.h5.lock" 30; then
    sleep 0.5
    kill -TERM $victim
    wait $victim
    rc=$?
    check "SIGTERM ends the $name calibration (exit > 128 or 1 from a launcher), got $rc" test $rc -ne 0 ||
      show "$name.out"
    sleep 0.5
    check "no temporary left after SIGTERM ($name)" test -z "$(ls -A | grep "$name.h5.tmp")"
    check "no lock file left after SIGTERM ($name)" test ! -e ".$name.h5.lock"
    check "no database appeared ($name)" test ! -e "$name.h5"
  else
    bad "the $name calibration never took its lock"
  fi
}
sigterm killed
# shellcheck disable=SC2086 # the launcher is a command line
[[ -n $launch ]] && sigterm killed_mpi $launch
finish

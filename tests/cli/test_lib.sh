# shellcheck shell=bash
# Shared by the shell tests of tests/cli (sourced, not run): counting checks, the /proc process helpers of the
# fault scripts, and what a sweep folder may hold. No procps needed: processes are read from /proc.

pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { # description command...: the command's success is the check
  local what=$1
  shift
  if "$@"; then ok; else bad "$what"; return 1; fi
}
finish() { # the counts; the script's exit status
  echo "$pass passed, $fail failed"
  [[ $fail -eq 0 ]]
}

# children_of PID: the PIDs whose parent is PID. Open MPI puts each rank in a process group of its own, so killing
# mpiexec's group would leave the ranks running: the scripts kill mpiexec and these children by PID. (read, not cat:
# no process per /proc entry, so a kill lands within a few milliseconds of its cue.)
children_of() {
  local s line rest ppid p
  for s in /proc/[0-9]*/stat; do
    read -r line <"$s" 2>/dev/null || continue
    rest=${line##*) }
    read -r _ ppid _ <<<"$rest"
    if [[ "$ppid" == "$1" ]]; then p=${s#/proc/}; echo "${p%/stat}"; fi
  done
}

# has_env PID NAME=VALUE: the process's environment holds exactly that entry.
has_env() { tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | grep -qxF -- "$2"; }

# rank_pid MPIEXEC-PID RANK: the child of mpiexec that is that MPI rank (Open MPI tells each its rank).
rank_pid() {
  local p
  for p in $(children_of "$1"); do
    if has_env "$p" "OMPI_COMM_WORLD_RANK=$2"; then echo "$p"; return; fi
  done
}

# cpu_ticks PID: user + system CPU time the process has used, in clock ticks (0 once it is gone).
cpu_ticks() {
  local line rest
  read -r line <"/proc/$1/stat" 2>/dev/null || { echo 0; return; }
  rest=${line##*) }
  # shellcheck disable=SC2086 # fields
  set -- $rest
  echo $((${12} + ${13}))
}

# kill_and_reap PID: SIGKILL to PID and its children at once (a scheduler's kill of the whole job), then reap PID
# and wait (5 s at most) until /proc forgets the children the kill orphaned. Returns PID's exit status: 137 when the
# kill ended it, anything else when it had ended on its own before the kill landed.
kill_and_reap() {
  local pids p t=0 rc
  pids="$1 $(children_of "$1")"
  # shellcheck disable=SC2086 # a list of PIDs
  kill -9 $pids 2>/dev/null
  wait "$1" 2>/dev/null
  rc=$?
  for p in $pids; do while [[ -e /proc/$p && $t -lt 100 ]]; do sleep 0.05; t=$((t + 1)); done; done
  return $rc
}

# ---- a sweep's folder (psearch sweep --out DIR) ----
# sweep_records DIR: how many lines the records have (0 without records).
sweep_records() { if [[ -f "$1/cells.jsonl" ]]; then grep -c '' "$1/cells.jsonl"; else echo 0; fi; }
# sweep_torn DIR: lines of the records that are not whole records (a kill during an append leaves at most one).
sweep_torn() { if [[ -f "$1/cells.jsonl" ]]; then grep -c -v '}$' "$1/cells.jsonl"; else echo 0; fi; }
# sweep_cells DIR: distinct cells recorded.
sweep_cells() { if [[ -f "$1/cells.jsonl" ]]; then grep -o '"cell":"[^"]*"' "$1/cells.jsonl" | sort -u | wc -l; else echo 0; fi; }
# sweep_leftovers DIR: what the folder holds beyond what a sweep publishes (tables, records, its manifest, the
# comparison with --compare, timelines/*.svg);
# empty when clean.
sweep_leftovers() {
  local f
  for f in "$1"/* "$1"/.[!.]* "$1"/timelines/* "$1"/timelines/.[!.]*; do
    [[ -e "$f" ]] || continue
    case ${f#"$1"/} in
      cells.jsonl | sweep.json | changes.json | plans.md | plans.csv | index.html | timelines | timelines/*.svg) ;;
      *) echo "${f#"$1"/}" ;;
    esac
  done
}
# sweep_timelines DIR: how many timeline files the folder holds.
sweep_timelines() { find "$1/timelines" -maxdepth 1 -name '*.svg' 2>/dev/null | wc -l; }

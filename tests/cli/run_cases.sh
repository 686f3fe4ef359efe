#!/usr/bin/env bash
# Table-driven end-to-end test of the psearch command. Each line of the case file:
#   name | expected exit code | extended regex the message (stdout+stderr) must match | arguments
# @DATA@ expands to tests/data, @TMP@ to a fresh scratch folder. PS_LAUNCH, when set, prefixes every run (an mpiexec
# command line for the MPI cases). Unless the arguments name --out themselves, every
# case runs with --out @TMP@/out, and a case exiting 2 or 3 must leave @TMP@ empty (no half-written or temporary
# file).
set -u
psearch=$1
cases=$2
data=$3
pass=0
fail=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

while IFS= read -r line; do
  [[ -z "${line// }" || "$line" == \#* ]] && continue
  IFS='|' read -r name code regex args <<<"$line"
  name=$(echo "$name" | xargs)
  code=$(echo "$code" | xargs)
  regex=$(echo "$regex" | sed -e 's/^ *//' -e 's/ *$//')
  args=$(echo "$args" | sed -e 's/^ *//' -e 's/ *$//')
  tmp="$scratch/$name"
  mkdir -p "$tmp"
  args=${args//@DATA@/$data}
  args=${args//@TMP@/$tmp}
  regex=${regex//@TMP@/$tmp}
  eval "set -- $args"
  extra=()
  # --help and --version print to the terminal; every other command takes --out.
  [[ " $* " == *" --out "* || " $* " == *" --help "* || " $* " == *" -h "* || " $* " == *" --version "* ]] ||
    extra=(--out "$tmp/out")
  # shellcheck disable=SC2086 # PS_LAUNCH is a command line to split
  # </dev/null: mpiexec forwards stdin, which would otherwise eat the rest of the case file.
  out=$(timeout 60 ${PS_LAUNCH:-} "$psearch" "$@" "${extra[@]}" 2>&1 </dev/null)
  rc=$?
  # A successful case is judged on what it wrote too.
  if [[ $rc -le 1 ]]; then for f in "$tmp"/*; do [[ -f "$f" ]] && out+=$'\n'$(cat "$f"); done; fi
  why=""
  [[ $rc -eq $code ]] || why="exit $rc, expected $code"
  if [[ -z "$why" ]] && ! grep -Eq -- "$regex" <<<"$out"; then why="message does not match /$regex/"; fi
  # Bad input and system failures leave nothing; "no feasible plan" (exit 1) still writes its whole answer.
  if [[ -z "$why" && $code -ge 2 ]]; then
    left=$(ls -A "$tmp")
    [[ -z "$left" ]] || why="left files behind: $left"
  fi
  if [[ -z "$why" && $code -eq 0 && ${#extra[@]} -gt 0 && ! -s "$tmp/out" ]]; then why="no output file written"; fi
  if [[ -z "$why" ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $name: $why"
    echo "     psearch $* ${extra[*]}"
    echo "$out" | head -5 | sed 's/^/     | /'
  fi
done <"$cases"

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]

#!/usr/bin/env bash
# Every bad model / HF config / cluster file under tests/data, fed to the psearch command: exit 2, exactly one
# "psearch: error:" line naming the file, and no output file left behind.
set -u
psearch=$1
data=$2
pass=0
fail=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

check() { # kind file
  local kind=$1 f=$2 out rc why=""
  rm -rf "${scratch:?}"/*
  if [[ $kind == model ]]; then
    out=$("$psearch" model show "$f" --out "$scratch/plan" 2>&1 </dev/null)
  else
    out=$("$psearch" cluster show "$f" --out "$scratch/cluster" 2>&1 </dev/null)
  fi
  rc=$?
  [[ $rc -eq 2 ]] || why="exit $rc, expected 2"
  [[ -n "$why" || $(grep -c '^psearch: error: ' <<<"$out") -eq 1 ]] || why="not exactly one error line"
  [[ -n "$why" ]] || grep -qF "$(basename "$f")" <<<"$out" || why="message does not name the file"
  [[ -n "$why" || -z "$(ls -A "$scratch")" ]] || why="left files behind: $(ls -A "$scratch")"
  if [[ -z "$why" ]]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL $f: $why"
    echo "$out" | head -3 | sed 's/^/     | /'
  fi
}

for f in "$data"/models/bad/* "$data"/models/hf/bad/*; do check model "$f"; done
for f in "$data"/clusters/bad-*; do check cluster "$f"; done
echo "$pass passed, $fail failed"
[[ $fail -eq 0 && $pass -gt 0 ]]

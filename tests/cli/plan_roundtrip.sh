#!/usr/bin/env bash
# The JSON psearch prints is a plan file psearch reads: the search's best plan (a whole result document: top k,
# baselines, search counters), an estimate's output and a plan searched with --dp-overlap off all go back through
# `estimate --plan` and predict the same samples/s.
set -u
psearch=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
pass=0 fail=0
sps() { grep -m1 '"samples_per_s"' "$1" | tr -dc '0-9.e+-'; }
check() { # label file-written-by-psearch
  local label=$1 f=$2 out="$scratch/$1.est.json"
  # the search pads the vocabulary to 128 x GPUs per node (8 here), estimate does not unless told
  if ! "$psearch" estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --vocab-pad 1024 --plan "$f" --format json \
       --out "$out" </dev/null 2>"$scratch/err"; then
    fail=$((fail + 1)); echo "FAIL $label: estimate --plan refused it: $(cat "$scratch/err")"; return
  fi
  if [[ -n "$(sps "$f")" && "$(sps "$f")" == "$(sps "$out")" ]]; then pass=$((pass + 1))
  else fail=$((fail + 1)); echo "FAIL $label: samples/s $(sps "$f") written, $(sps "$out") re-estimated"; fi
}
"$psearch" --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --format json --out "$scratch/search.json" </dev/null ||
  { echo "FAIL: the search itself failed"; exit 1; }
check search "$scratch/search.json"
check estimate "$scratch/search.est.json" # an estimate's own output, read back
# Transformer Engine's TP overlap: its name is written and read back, and the prediction with it
if "$psearch" estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --vocab-pad 1024 --tp 4 --seq-parallel \
  --tp-overlap te --format json --out "$scratch/te.json" </dev/null 2>"$scratch/err" &&
  grep -q '"overlap": "te"' "$scratch/te.json"; then
  check te "$scratch/te.json"
else
  fail=$((fail + 1)); echo "FAIL estimate --tp-overlap te: $(cat "$scratch/err")"
fi
# without --model and --cluster, estimate --plan takes the plan file's own (as exec does), not the default gpt3-65b
if "$psearch" estimate --vocab-pad 1024 --plan "$scratch/search.json" --format json --out "$scratch/own.json" \
  </dev/null 2>"$scratch/err" && grep -q '"model": "gpt3-1.3b"' "$scratch/own.json" &&
  [[ "$(sps "$scratch/own.json")" == "$(sps "$scratch/search.json")" ]]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL estimate --plan without --model: $(cat "$scratch/err")"
fi
# a plan searched with --dp-overlap off carries it ("dp_overlap": false): estimate --plan prices it off untold
"$psearch" --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --dp-overlap off --format json \
  --out "$scratch/off.json" </dev/null || { echo "FAIL: the search with --dp-overlap off failed"; exit 1; }
if grep -q '"dp_overlap": false' "$scratch/off.json"; then check dp_off "$scratch/off.json"
else fail=$((fail + 1)); echo "FAIL dp_off: the plan file does not say \"dp_overlap\": false"; fi
echo "$pass passed, $fail failed"
[[ $fail -eq 0 && $pass -eq 5 ]]

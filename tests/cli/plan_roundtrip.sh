#!/usr/bin/env bash
# The JSON psearch prints is a plan file psearch reads: the search's best plan (a whole result document: top k,
# baselines, search counters), an estimate's output and a plan searched with --dp-overlap off all go back through
# `estimate --plan` and predict the same samples/s; a plan file keeps its vocabulary padding (vocab_pad), so a
# restricted search's plan re-estimates and re-exports as the search did without --vocab-pad.
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
# without --vocab-pad, estimate --plan pads the vocabulary as the plan file records (the search: 128 x 8 GPUs per
# node), so the plan predicts the same and exports the same launch as the search did
"$psearch" --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --framework megatron --format json \
  --out "$scratch/mg.json" </dev/null 2>"$scratch/err" || echo "FAIL: the megatron search failed: $(cat "$scratch/err")"
if grep -q '"vocab_pad": 1024' "$scratch/mg.json" &&
  "$psearch" estimate --plan "$scratch/mg.json" --format json --out "$scratch/mg.est.json" </dev/null 2>"$scratch/err" &&
  [[ "$(sps "$scratch/mg.json")" == "$(sps "$scratch/mg.est.json")" ]] &&
  "$psearch" --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --export megatron >"$scratch/mg.search.txt" </dev/null &&
  "$psearch" estimate --plan "$scratch/mg.json" --export megatron >"$scratch/mg.est.txt" </dev/null &&
  diff -q "$scratch/mg.search.txt" "$scratch/mg.est.txt" >/dev/null; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL the plan file's vocab_pad: $(cat "$scratch/err"; diff "$scratch/mg.search.txt" "$scratch/mg.est.txt" | head -5)"
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
[[ $fail -eq 0 && $pass -eq 6 ]]

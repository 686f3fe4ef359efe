#!/usr/bin/env bash
# Pipeline timelines (--svg) of plans small and large (issue #22). gpt3-175b on 128 GPUs with 256 micro-batches drew
# 12,302 rectangles, most narrower than a pixel, in 2.4 MB: passes under a pixel are now merged, so the document stays
# small; a small plan still shows every pass. Rows are labelled with the GPUs of each pipeline device, the time axis
# with its unit; `psearch schedule --svg` keeps its own rows (dev i) and unitless axis.
set -u
psearch=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=tests/cli/test_lib.sh
source "$(dirname "$0")/test_lib.sh"
n() { grep -o -- "$1" "$2" 2>/dev/null | wc -l; } # occurrences of a string in a file
size() { wc -c <"$1" 2>/dev/null || echo 0; }
within() { [[ $1 -ge $2 && $1 -le $3 ]]; } # N LO HI: LO <= N <= HI (a missing file has 0 rectangles: no pass)
labels() { grep -o 'text-anchor="end">[^<]*' "$1" | sed 's/.*>//' | tr '\n' ','; }

# The large plan, searched (the search picks v-zb, pp 8, 256 micro-batches: 8 x 256 x 2 x 3 = 12,288 passes).
big=$scratch/big.svg
"$psearch" --model gpt3-175b --cluster dgx-a100-80g:16 --gbs 2048 --svg "$big" --out "$scratch/big.txt" </dev/null
check "search with --svg exits 0" test $? -eq 0
check "the plan is the issue's: 256 micro-batches on 8 pipeline devices" \
  grep -q 'pp 8, mbs 1, gbs 2048 (256 micro-batches)' "$scratch/big.txt"
# 50 rectangles and 11.5 KB when written (8 rows of merged blocks, row backgrounds, page and legend)
check "10 to 200 rectangles (was 12,302): $(n '<rect' "$big")" within "$(n '<rect' "$big")" 10 200
check "1 to 64 KB (was 2.4 MB): $(size "$big")" within "$(size "$big")" 1024 65536
check "merged blocks drawn and explained" grep -q 'blocks of consecutive passes each narrower than a pixel' "$big"
check "rows are the GPUs of each pipeline device" test "$(labels "$big")" = \
  "GPUs 0-15,GPUs 16-31,GPUs 32-47,GPUs 48-63,GPUs 64-79,GPUs 80-95,GPUs 96-111,GPUs 112-127,"
check "the axis is in seconds" grep -q '>time (s)</text>' "$big"
check "the makespan has its unit" grep -Eq 'makespan [0-9.]+ s, bubble' "$big"

# The same plan given to estimate (its vocabulary padded for tp 2 as Megatron does): as small.
est=$scratch/est.svg
"$psearch" estimate --model gpt3-175b --cluster dgx-a100-80g:16 --tp 2 --pp 8 --schedule v-zb --zero 2 \
  --seq-parallel --gbs 2048 --svg "$est" --out "$scratch/est.txt" </dev/null
check "estimate --svg of the large plan exits 0" test $? -eq 0
check "estimate: 10 to 200 rectangles: $(n '<rect' "$est")" within "$(n '<rect' "$est")" 10 200
check "estimate: 1 to 64 KB: $(size "$est")" within "$(size "$est")" 1024 65536

# A small plan: 1F1B on 4 devices of 2 GPUs, 8 micro-batches: 4 x 8 x 2 = 64 passes, each drawn, none merged.
small=$scratch/small.svg
"$psearch" estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --pp 4 --gbs 16 --svg "$small" \
  --out "$scratch/small.txt" </dev/null
check "estimate --svg of a small plan exits 0" test $? -eq 0
check "every pass drawn: $(n 'class="pass"' "$small") of 64" test "$(n 'class="pass"' "$small")" -eq 64
check "none merged" test "$(n 'class="merged"' "$small")" -eq 0
check "small: rows are GPU pairs" test "$(labels "$small")" = "GPUs 0-1,GPUs 2-3,GPUs 4-5,GPUs 6-7,"
check "small: the axis is in milliseconds" grep -q '>time (ms)</text>' "$small"

# psearch schedule: its devices and the units of --fbw, as before.
sch=$scratch/sch.svg
"$psearch" schedule --kind 1f1b --stages 4 --micro 8 --svg "$sch" --out "$scratch/sch.txt" </dev/null
check "schedule --svg exits 0" test $? -eq 0
check "schedule: rows dev 0-3" test "$(labels "$sch")" = "dev 0,dev 1,dev 2,dev 3,"
check "schedule: the axis in --fbw units" grep -q '>time (units of --fbw)</text>' "$sch"
check "schedule: every pass drawn" test "$(n 'class="pass"' "$sch")" -eq 64
if command -v xmllint >/dev/null; then
  check "well-formed SVG" xmllint --noout "$big" "$est" "$small" "$sch"
fi
finish

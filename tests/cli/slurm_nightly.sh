#!/usr/bin/env bash
# examples/nightly/nightly.sbatch end to end (issue #25) on the emulated 8-node Slurm cluster of slurm_lib.sh, through
# sbatch --wait as a site runs it, three nights:
#   1. calibrate the 8 nodes, the first site database, the first published night (nothing to compare with);
#   2. no calibration (NIGHTLY_CALIBRATE=0), the same options: the tables report no change and no input differing;
#   3. a new calibration merged with --replace and another --gbs injected: every cell changed, the options and the
#      cost database named as the causes, the site database still one calibration's 8 ranks (not 16).
# Meanwhile a reader polls what the web folder shows and fails the test if it ever finds a night without all its
# tables (a half-published folder). Exit 77 (skip) without slurm-wlm or root.
# Usage: slurm_nightly.sh PSEARCH
set -u
psearch=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/cli/test_lib.sh
source "$(dirname "$0")/test_lib.sh"
# shellcheck source=tests/cli/slurm_lib.sh
source "$(dirname "$0")/slurm_lib.sh"
slurm_require slurm_nightly sbatch flock
# Every job ends 570 s from now, 30 s before ctest's TIMEOUT (600 s).
slurm_up 570

www=$d/www
cp "$src/tests/data/models/good/gpt2-small.json" "$d/gpt2-small.json"
sed 's/"repeat": 12/"repeat": 24/; s/"name": "gpt2-small"/"name": "gpt2-24"/' "$d/gpt2-small.json" >"$d/gpt2-24.json"
printf '# the site'"'"'s models\n%s\n%s  # a deeper one\n' "$d/gpt2-small.json" "$d/gpt2-24.json" >"$d/models.txt"
export NIGHTLY_PSEARCH=$psearch NIGHTLY_STATE=$d/nightly NIGHTLY_WWW=$www NIGHTLY_MODELS=@$d/models.txt
export NIGHTLY_CLUSTERS=costdb NIGHTLY_CALIBRATE_ARGS=--quick NIGHTLY_TRIES=3 NIGHTLY_STEP_TIMEOUT=100
# --kill-on-bad-exit: a rank that dies (Open MPI's wire-up race, slurm_lib.sh) ends its step at once, and the
# script's next try runs it again
export NIGHTLY_SRUN="srun --kill-on-bad-exit=1"
base_args="--dtype fp32 --vocab-pad 256"

# half NIGHT-FOLDER...: the folders a reader would find incomplete (a table, the records or the manifest missing,
# or the page cut short).
half() {
  local f
  for f in "$@"; do
    [[ -e $f ]] || continue
    [[ -s $f/plans.md && -s $f/plans.csv && -s $f/cells.jsonl && -s $f/sweep.json && -s $f/index.html ]] &&
      [[ $(tail -c 8 "$f/index.html") == *"</html>"* ]] || echo "$f"
  done
}
# The check can fail: a folder holding only some of the tables is found.
mkdir -p "$d/probe/n" && echo x >"$d/probe/n/plans.md"
check "the reader's check finds a half folder" test "$(half "$d/probe/n")" = "$d/probe/n"
reader() { # until $d/reader.stop exists: every folder a web server would serve, as often as it can
  local polls=0
  while [[ ! -e $d/reader.stop ]]; do
    half "$www"/nights/* "$www/latest" >>"$d/reader.half"
    polls=$((polls + 1))
    sleep 0.02
  done
  echo "$polls" >"$d/reader.polls"
}
: >"$d/reader.half"
reader &
reader_pid=$!

night() { # DATE LOG [VAR=VALUE...]: one night through sbatch --wait; its exit status
  local date=$1 log=$2 left
  shift 2
  left=$(slurm_deadline)
  ((left > 10)) || { echo "# slurm_nightly: no time left for night $date"; return 124; }
  env NIGHTLY_DATE="$date" "$@" timeout "$left" sbatch --wait --nodes=8 --ntasks-per-node=1 --output="$log" \
    --job-name="nightly-$date" "$src/examples/nightly/nightly.sbatch" >/dev/null 2>>"$log.sbatch"
}
t0=$SECONDS
night 2026-01-01 "$d/n1.log" NIGHTLY_SWEEP_ARGS="$base_args"
rc=$?
echo "# slurm_nightly: night 1 (calibrate 8 nodes, sweep, publish): exit $rc in $((SECONDS - t0)) s"
check "night 1 exits 0 ($(tail -4 "$d/n1.log" "$d/n1.log.sbatch" 2>/dev/null))" test $rc -eq 0
check "... published as latest" test "$(readlink "$www/latest")" = nights/2026-01-01
check "... whole" test -z "$(half "$www/latest")"
check "... 2 cells, from the list file" test "$(grep -c '' "$www/latest/cells.jsonl")" -eq 2
check "... nothing to compare with yet" grep -q 'no published night yet' "$d/n1.log"
check "... a dated database" test -s "$d/nightly/calib/2026-01-01.h5"
check "... the site database: the 8 nodes" \
  grep -q 'devices *8 rank(s) on 8 node(s)' <("$psearch" costdb show "$d/nightly/site.h5" 2>&1)

t0=$SECONDS
night 2026-01-02 "$d/n2.log" NIGHTLY_SWEEP_ARGS="$base_args" NIGHTLY_CALIBRATE=0
rc=$?
echo "# slurm_nightly: night 2 (no calibration): exit $rc in $((SECONDS - t0)) s"
check "night 2 exits 0 ($(tail -4 "$d/n2.log" "$d/n2.log.sbatch" 2>/dev/null))" test $rc -eq 0
check "... published as latest" test "$(readlink "$www/latest")" = nights/2026-01-02
check "... compared with night 1: no cell changed, no input differs" \
  grep -q '^Compared with 2026-01-01 ([^)]*): 0 of 2 cell(s) changed .*Inputs that differ: none\.$' \
  "$www/latest/plans.md"
check "... changes.json agrees" grep -q '"changed": 0,' "$www/latest/changes.json"
check "... no dated database tonight" test ! -e "$d/nightly/calib/2026-01-02.h5"

t0=$SECONDS
night 2026-01-03 "$d/n3.log" NIGHTLY_SWEEP_ARGS="$base_args --gbs 16"
rc=$?
echo "# slurm_nightly: night 3 (calibrate, merge --replace, --gbs 16): exit $rc in $((SECONDS - t0)) s"
check "night 3 exits 0 ($(tail -4 "$d/n3.log" "$d/n3.log.sbatch" 2>/dev/null))" test $rc -eq 0
check "... published as latest" test "$(readlink "$www/latest")" = nights/2026-01-03
check "... merged with --replace" grep -q 'costdb merge .*/site.h5 .*/2026-01-03.h5 --replace' "$d/n3.log"
check "... the site database still the 8 nodes once (replaced, not added)" \
  grep -q 'devices *8 rank(s) on 8 node(s)' <("$psearch" costdb show "$d/nightly/site.h5" 2>&1)
check "... every cell changed" grep -q '"changed": 2,' "$www/latest/changes.json"
check "... the options and the database named as the inputs that differ" \
  grep -q '"inputs_differ": "the options of 2 cell(s); the cost database (its content)"' "$www/latest/changes.json"
check "... each cell's why names the option's values and the database" \
  test "$(grep -c 'why: options gbs=64 -> gbs=16; cost database [0-9a-f]\{16\} -> [0-9a-f]\{16\}' \
    "$www/latest/plans.md")" -eq 2
check "... the page draws 3 nights per cell" \
  test "$(grep -o '<title>3 night(s), oldest first</title>' "$www/latest/index.html" | wc -l)" -eq 2

touch "$d/reader.stop"
wait "$reader_pid"
check "the reader polled the web folder throughout ($(cat "$d/reader.polls" 2>/dev/null) polls)" \
  test "$(cat "$d/reader.polls" 2>/dev/null || echo 0)" -gt 10
check "... and never found a half-published night: $(sort -u "$d/reader.half" | head -3)" test ! -s "$d/reader.half"
check "3 nights published, nothing else left in the web folder" \
  test "$(cd "$www" && find . -mindepth 1 | sort | grep -v '^./nights/[^/]*/' | tr '\n' ' ')" = \
  "./latest ./nights ./nights/2026-01-01 ./nights/2026-01-02 ./nights/2026-01-03 "

# A bad setting: exit 2 before anything is written, naming it.
NIGHTLY_KEEP=0 NIGHTLY_STATE=$d/bad bash "$src/examples/nightly/nightly.sbatch" >"$d/bad.log" 2>&1
check "NIGHTLY_KEEP=0 exits 2" test $? -eq 2
check "... naming it" grep -q 'NIGHTLY_KEEP must be a positive number' "$d/bad.log"
check "... writing nothing" test ! -e "$d/bad"
finish

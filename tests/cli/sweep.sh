#!/usr/bin/env bash
# psearch sweep end to end under 2 MPI ranks: the tables and records of a 2 x 2 sweep (the docs/design.md cluster
# shorthand PRESET:N,N), --resume after a complete sweep doing no work, a torn last record dropped and its cell
# searched again, an infeasible cell recorded with its binding constraint, and the refusals (exit 2) that protect a
# folder: bad names before any cell runs, a folder holding another sweep, other options, fewer cells.
set -u
psearch=$1
launch=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=tests/cli/test_lib.sh
source "$(dirname "$0")/test_lib.sh"
# shellcheck disable=SC2086 # the launcher is a command line
sweep() { $launch "$psearch" sweep "$@" </dev/null; }

out=$scratch/t
args=(--models gpt3-1.3b,gpt3-2.7b --clusters dgx-a100-80g:1,2)
sweep "${args[@]}" --out "$out" >"$scratch/o1" 2>"$scratch/e1"
# The status first: a $(...) in the description runs before `test $?` expands and would leave it 0.
rc=$?
check "first sweep exits 0 (exit $rc; stderr: $(tail -3 "$scratch/e1"))" test $rc -eq 0
check "4 records" test "$(grep -c '' "$out/cells.jsonl")" -eq 4
check "4 distinct cells" test "$(sweep_cells "$out")" -eq 4
check "the shorthand expanded to :2" grep -q '"cluster":"dgx-a100-80g:2"' "$out/cells.jsonl"
check "CSV: header + 4 rows" test "$(grep -c '' "$out/plans.csv")" -eq 5
header=model,model_name,dtype,cluster,gpus,status,pp,vpp,tp,cp,cp_comm,ep,etp,dp,zero,ckpt,sp,uniform,varies,schedule,gbs,mbs
header+=,micro_batches,iter_time_s,samples_per_s,tokens_per_s,tflops_per_gpu,mfu,bubble_frac,peak_mem_gib
header+=,mem_capacity_gib,megatron_samples_per_s,megatron_peak_mem_gib,gain_over_megatron,timeline_svg,binding
# LF line ends (awk saw "binding\r" in the last field with RFC 4180's CRLF)
check "CSV lines end with LF, no CR" test "$(grep -c $'\r' "$out/plans.csv")" -eq 0
check "CSV header" test "$(head -1 "$out/plans.csv")" = "$header"
check "CSV: the last column is named binding" test "$(head -1 "$out/plans.csv" | awk -F, '{print $NF}')" = binding
check "CSV rows have the header's 36 fields" \
  test "$(awk -F, '{print NF}' "$out/plans.csv" | sort -u | tr -d '\n')" = 36
# csvcol NAME FILE: that column of every row (no quoted commas in these rows)
csvcol() { awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next } { print $k }' "$2"; }
# per-layer plans say which fields vary ("tp 1-2; zero 0/3"), uniform ones nothing: uniform 0 exactly when varies
# is filled in, and at least one per-layer plan here to show it
check "varies is filled in exactly for per-layer plans" \
  test "$(paste -d' ' <(csvcol uniform "$out/plans.csv") <(csvcol varies "$out/plans.csv" | sed 's/^$/-/') |
    awk '($1 == 0) != ($2 != "-")' | wc -l)" -eq 0
check "a per-layer plan names its varying fields: $(csvcol varies "$out/plans.csv" | tr '\n' '|')" \
  test "$(csvcol varies "$out/plans.csv" | grep -cE '^(tp|dp|zero|ckpt|sp|tp-overlap|attention|dp-overlap) ')" -ge 1
check "Markdown: a table per model" test "$(grep -c '^## ' "$out/plans.md")" -eq 2
check "Markdown: 4 plan rows" test "$(grep -c '^| dgx-a100-80g:' "$out/plans.md")" -eq 4
check "HTML: 2 tables, 4 timelines linked" \
  test "$(grep -c '<table>' "$out/index.html") $(grep -o '<img src="[^"]*"' "$out/index.html" | wc -l)" = "2 4"
check "HTML inlines no timeline" test "$(grep -c '<svg' "$out/index.html")" -eq 0
check "4 timeline files, one per cell" test "$(sweep_timelines "$out")" -eq 4
links_resolve() { # every timeline the page links is a file of the folder
  local f
  for f in $(grep -o '<img src="[^"]*"' "$1/index.html" | cut -d'"' -f2); do [[ -s "$1/$f" ]] || return 1; done
}
check "every linked timeline exists" links_resolve "$out"
if command -v xmllint >/dev/null; then
  check "HTML is well-formed" xmllint --noout "$out/index.html"
  check "timelines are well-formed SVG" xmllint --noout "$out"/timelines/*.svg
fi
check "gain over the Megatron heuristic in every row" test "$(grep -c -E '\| [+-][0-9.]+% \|$' "$out/plans.md")" -eq 4
# The search covers the heuristic's plans, so its best plan is never slower than the heuristic's.
check "searched plans at least as fast as the Megatron heuristic's" \
  test "$(csvcol gain_over_megatron "$out/plans.csv" | awk '$1 == "" || $1 < 0.9999' | wc -l)" -eq 0
check "CSV timeline paths are the files the page links" \
  test "$(csvcol timeline_svg "$out/plans.csv" | sort)" = "$(grep -o '<img src="[^"]*"' "$out/index.html" | cut -d'"' -f2 | sort)"
check "plain progress line per cell" test "$(grep -c '^# sweep: [1-4]/4 ' "$scratch/e1")" -eq 4
check "summary on stdout" grep -q '4 cells (4 searched now' "$scratch/o1"

# --resume after a complete sweep: nothing searched, records untouched.
cp "$out/cells.jsonl" "$scratch/before"
sweep "${args[@]}" --out "$out" --resume >"$scratch/o2" 2>"$scratch/e2"
check "resume of a complete sweep exits 0" test $? -eq 0
check "resume searched nothing" grep -q '(0 searched now, 4 from earlier records' "$scratch/o2"
check "resume left the records as they were" cmp -s "$out/cells.jsonl" "$scratch/before"

# A timeline removed since its cell was recorded: the resume says so and so does the page; nothing searched again.
mkdir "$scratch/lost" && cp -r "$out"/. "$scratch/lost/"
lost=$(grep -o '<img src="[^"]*"' "$out/index.html" | head -1 | cut -d'"' -f2)
rm "$scratch/lost/$lost"
sweep "${args[@]}" --out "$scratch/lost" --resume >"$scratch/o2" 2>"$scratch/e2"
check "resume with a lost timeline exits 0" test $? -eq 0
check "... searches nothing" grep -q '(0 searched now, 4 from earlier records' "$scratch/o2"
check "... says so" grep -q '1 recorded cell(s) lost their timeline' "$scratch/e2"
check "... and the page says which" grep -q "timeline file missing: $lost" "$scratch/lost/index.html"
check "... still linking the 3 others" test "$(grep -c '<img src=' "$scratch/lost/index.html")" -eq 3

# Refusals, each leaving the records as they were.
sweep "${args[@]}" --out "$out" >/dev/null 2>"$scratch/e3"
check "a folder holding a sweep needs --resume (exit 2)" test $? -eq 2
check "... and says so" grep -q 'add --resume' "$scratch/e3"
sweep "${args[@]}" --out "$out" --resume --mbs-max 8 >/dev/null 2>"$scratch/e4"
check "other options refused (exit 2)" test $? -eq 2
check "... naming both" grep -q 'mbs-max=8' "$scratch/e4"
# A framework's restriction and fixed plan fields change every cell: a resume under other ones mixes nothing in.
sweep "${args[@]}" --out "$out" --resume --framework megatron >/dev/null 2>"$scratch/e4"
check "another framework refused (exit 2)" test $? -eq 2
check "... naming it" grep -q 'now: .* framework=megatron' "$scratch/e4"
sweep "${args[@]}" --out "$out" --resume --micro 8 --tp 2 >/dev/null 2>"$scratch/e4"
check "fixed plan fields refused (exit 2)" test $? -eq 2
check "... naming them" grep -q 'now: .* tp=2 micro=8' "$scratch/e4"
sweep --models gpt3-1.3b --clusters dgx-a100-80g:1,2 --out "$out" --resume >/dev/null 2>"$scratch/e5"
check "fewer cells than recorded refused (exit 2)" test $? -eq 2
# Records are compared on the options as the search resolves them: the defaults spelled out are the same sweep.
sweep "${args[@]}" --out "$out" --resume --mbs-max 16 --max-tp 8 >"$scratch/o5" 2>"$scratch/e5"
check "the default options spelled out resume the sweep (stderr: $(tail -2 "$scratch/e5"))" \
  grep -q '(0 searched now, 4 from earlier records' "$scratch/o5"
check "records untouched by refusals" cmp -s "$out/cells.jsonl" "$scratch/before"
# Records of another psearch version: its cost model may differ, so a table would mix two.
mkdir "$scratch/old"
sed 's/"psearch":"[^"]*"/"psearch":"0.0.0-older"/' "$scratch/before" >"$scratch/old/cells.jsonl"
sweep "${args[@]}" --out "$scratch/old" --resume >/dev/null 2>"$scratch/e5"
check "records of another psearch version refused (exit 2)" test $? -eq 2
check "... naming it" grep -q 'searched by psearch 0.0.0-older' "$scratch/e5"

# A torn last record (a kill inside its write): dropped, its cell searched again, the file whole again.
head -n 3 "$scratch/before" >"$out/cells.jsonl"
tail -n 1 "$scratch/before" | head -c 120 >>"$out/cells.jsonl"
sweep "${args[@]}" --out "$out" --resume >"$scratch/o6" 2>"$scratch/e6"
check "resume after a torn record exits 0" test $? -eq 0
check "the torn record is reported" grep -q 'dropped a torn last record' "$scratch/e6"
check "one cell searched again" grep -q '(1 searched now, 3 from earlier records' "$scratch/o6"
check "4 whole records again" test "$(sweep_records "$out") $(sweep_torn "$out")" = "4 0"
check "4 distinct cells after the torn record" test "$(sweep_cells "$out")" -eq 4

# Bad names: exit 2 before any cell runs, nothing created.
sweep --models gpt3-1.3b,no-such-model --clusters dgx-a100-80g:1 --out "$scratch/n1" >/dev/null 2>"$scratch/e7"
check "unknown model exits 2" test $? -eq 2
check "... naming it" grep -q "no-such-model" "$scratch/e7"
check "... creating nothing" test ! -e "$scratch/n1"
sweep --models gpt3-1.3b --clusters dgx-a100-80g:1,no-such-cluster:2 --out "$scratch/n2" >/dev/null 2>"$scratch/e8"
check "unknown cluster exits 2" test $? -eq 2
check "... creating nothing" test ! -e "$scratch/n2"
sweep --models gpt3-1.3b --clusters 2,dgx-a100-80g:1 --out "$scratch/n3" >/dev/null 2>"$scratch/e9"
check "a node count with no preset before it exits 2" test $? -eq 2
check "... and says how to write it" grep -q 'no preset comes before it' "$scratch/e9"

sweep --models gpt3-1.3b --clusters dgx-a100-80g:1 --schedules 1f1b,no-such-kind --out "$scratch/n4" >/dev/null 2>"$scratch/e11"
check "an unknown schedule exits 2 before any cell" test $? -eq 2
check "... creating nothing" test ! -e "$scratch/n4"

# --objective memory: the gain over the Megatron heuristic is its peak memory over the plan's (as the plan command's
# baselines table says), never below 1 since the search covers the heuristic's plans, and not a samples/s ratio.
sweep --models gpt3-1.3b --clusters dgx-a100-80g:1 --objective memory --out "$scratch/mem" >/dev/null 2>"$scratch/e18"
rc=$?
check "a sweep for the memory objective exits 0 (exit $rc; stderr: $(tail -2 "$scratch/e18"))" test $rc -eq 0
check "... recorded with objective=memory" grep -q '"options":"[^"]*objective=memory' "$scratch/mem/cells.jsonl"
num() { grep -m1 -o "\"$1\":[0-9.eE+-]*" "$scratch/mem/cells.jsonl" | cut -d: -f2; }
peak=$(num peak_mem_gib) mpeak=$(num megatron_peak_mem_gib) gain=$(num gain_over_megatron)
sps=$(num samples_per_s) msps=$(num megatron_samples_per_s)
check "... gain $gain = heuristic peak $mpeak GiB / plan peak $peak GiB, at least 1" \
  awk -v g="$gain" -v a="$mpeak" -v b="$peak" 'BEGIN { r = a / b; exit !(b > 0 && g >= 0.9999 && (g - r) / r < 1e-6 && (r - g) / r < 1e-6) }'
check "... not the samples/s ratio ($sps / $msps)" \
  awk -v g="$gain" -v a="$sps" -v b="$msps" 'BEGIN { r = a / b; exit !(b > 0 && ((g - r) / r > 1e-3 || (r - g) / r > 1e-3)) }'
check "... the CSV's gain is the record's" \
  test "$(csvcol gain_over_megatron "$scratch/mem/plans.csv")" = "$(awk -v g="$gain" 'BEGIN { printf "%.6g", g }')"

# A cluster without bf16 tensor cores (V100) is planned in fp16, as the plan command plans it, and says so once.
sweep --models gpt3-1.3b --clusters p3-8xlarge:2 --out "$scratch/fp16" >/dev/null 2>"$scratch/e12"
rc=$?
check "a cluster without bf16 exits 0 (exit $rc; stderr: $(tail -2 "$scratch/e12"))" test $rc -eq 0
check "... its cell recorded as planned in fp16" grep -q '"dtype":"fp16"' "$scratch/fp16/cells.jsonl"
check "... and a plan found" grep -q '"status":"ok"' "$scratch/fp16/cells.jsonl"
check "... the fallback said once" test "$(grep -c 'without bf16 tensor cores' "$scratch/e12")" -eq 1

# The search options are checked as the search checks them, before the folder is made.
sweep --models gpt3-1.3b --clusters dgx-a100-80g:1 --gbs-range 8:100000:1 --out "$scratch/n5" >/dev/null 2>"$scratch/e13"
check "a --gbs-range of more than 4096 sizes exits 2" test $? -eq 2
check "... saying why" grep -q 'more than 4096 batch sizes' "$scratch/e13"
check "... creating nothing" test ! -e "$scratch/n5"

# --costdb: the measured tables cost every cell as they cost the plan command's search, and the options name the
# file; a cluster of other devices is refused before the folder is made.
$launch "$psearch" calibrate --quick --out "$scratch/t.h5" </dev/null >/dev/null 2>"$scratch/e14"
rc=$?
check "calibrate --quick for the --costdb cases: exit $rc (stderr: $(tail -2 "$scratch/e14"))" test $rc -eq 0
sweep --models amp-gpt2 --clusters costdb --costdb "$scratch/t.h5" --out "$scratch/db" >/dev/null 2>"$scratch/e15"
rc=$?
check "a sweep on the calibrated machine exits 0 (exit $rc; stderr: $(tail -2 "$scratch/e15"))" test $rc -eq 0
check "... its options name the cost database" grep -q "costdb=$scratch/t.h5" "$scratch/db/cells.jsonl"
want=$("$psearch" --model amp-gpt2 --cluster costdb --costdb "$scratch/t.h5" --format json </dev/null 2>/dev/null |
  grep -m1 -o '"samples_per_s": [0-9.eE+-]*' | grep -o '[0-9.eE+-]*$')
got=$(grep -m1 -o '"samples_per_s":[0-9.eE+-]*' "$scratch/db/cells.jsonl" | cut -d: -f2)
check "... and its plan predicted as the plan command predicts it ($got vs $want samples/s)" \
  awk -v a="$got" -v b="$want" 'BEGIN { exit !(b > 0 && (a - b) / b < 1e-6 && (b - a) / b < 1e-6) }'
sweep --models amp-gpt2 --clusters dgx-a100-80g:1 --costdb "$scratch/t.h5" --out "$scratch/n6" >/dev/null 2>"$scratch/e16"
check "--costdb of other devices than a cluster's exits 2" test $? -eq 2
check "... saying so" grep -q 'another device kind' "$scratch/e16"
check "... creating nothing" test ! -e "$scratch/n6"
for opt in "--export megatron" "--svg $scratch/x.svg"; do
  # shellcheck disable=SC2086 # the option and its value
  sweep --models amp-gpt2 --clusters dgx-a100-80g:1 $opt --out "$scratch/n7" >/dev/null 2>"$scratch/e17"
  check "${opt%% *}, an option for one plan, exits 2" test $? -eq 2
  check "... naming it" grep -q -e "${opt%% *}" "$scratch/e17"
  check "... creating nothing" test ! -e "$scratch/n7" -a ! -e "$scratch/x.svg"
done

# An infeasible cell is a result: recorded with its binding constraint and shown as such.
sweep --models gpt3-175b --clusters dgx-a100-80g:1 --out "$scratch/inf" >/dev/null 2>"$scratch/e10"
rc=$?
check "a sweep with an infeasible cell exits 0 (exit $rc; stderr: $(tail -2 "$scratch/e10"))" test $rc -eq 0
check "infeasible cell recorded with its binding constraint" \
  grep -q '"status":"infeasible","binding":"[^"]' "$scratch/inf/cells.jsonl"
check "infeasible cell shown in the tables" grep -q 'infeasible: ' "$scratch/inf/plans.md"
check "... in a Markdown row as wide as the header" \
  test "$(grep '^|' "$scratch/inf/plans.md" | awk -F'|' '{print NF}' | sort -u | wc -l)" -eq 1
check "... and an HTML row spanning the plan's columns" grep -q '<td class="bad" colspan="17">infeasible: ' "$scratch/inf/index.html"

# A sweep restricted to a framework with a fixed field: every cell's plan keeps to both, and its records say so.
sweep --models gpt3-1.3b --clusters dgx-a100-80g:1,2 --framework deepspeed --pp 1 --out "$scratch/fw" >/dev/null \
  2>"$scratch/e11"
rc=$?
check "a sweep with --framework deepspeed --pp 1 exits 0 (exit $rc; stderr: $(tail -2 "$scratch/e11"))" test $rc -eq 0
check "... its records carry the restriction" \
  test "$(grep -c '"options":"[^"]* framework=deepspeed pp=1' "$scratch/fw/cells.jsonl")" -eq 2
check "... and its plans keep to the fixed pp" test "$(grep -c '"plan":{"pp":1,' "$scratch/fw/cells.jsonl")" -eq 2

# Each model file is read once, by rank 0, for all the clusters of the sweep (only the parse depends on the
# cluster): reading it again per column could give two columns two models of a file edited meanwhile. Every rank
# runs under strace, which counts the opens of the file. LeakSanitizer cannot run under ptrace (it stops the
# process with its own exit code), so a sanitized build leaves leak checking to the other checks of this script.
if command -v strace >/dev/null && strace -qq -o /dev/null true 2>/dev/null; then
  cp "$(dirname "$0")/../data/models/good/gpt2-small.json" "$scratch/m.json"
  # shellcheck disable=SC2086 # the launcher is a command line
  (cd "$scratch" && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" && $launch strace -f -ff -qq -e trace=open,openat -o "$scratch/trace" "$psearch" sweep \
    --models m.json --clusters dgx-a100-80g:1,2,4 --gbs 16 --out "$scratch/once" </dev/null >/dev/null 2>"$scratch/e19")
  rc=$?
  check "a sweep of 1 model x 3 clusters under strace exits 0 (exit $rc; stderr: $(tail -2 "$scratch/e19"))" \
    test $rc -eq 0
  opens=$(cat "$scratch"/trace.* | grep -c '"m.json", O_RDONLY')
  check "... reads the model file once, not once per cluster ($opens opens)" test "$opens" -eq 1
else
  echo "skipped: the model file read once per sweep (no strace, or it cannot trace here)"
fi

# ---- what changed since an earlier sweep (--compare, --history; docs/nightly.md) ----
check "every sweep writes its manifest" grep -q '"gpt3-1.3b": "[0-9a-f]\{16\}"' "$out/sweep.json"
# The same sweep again, compared with the first: nothing changed, nothing differs, and the tables say so.
sweep "${args[@]}" --out "$scratch/same" --compare "$out" >"$scratch/o20" 2>"$scratch/e20"
rc=$?
check "a sweep compared with an identical one exits 0 (exit $rc; $(tail -2 "$scratch/e20"))" test $rc -eq 0
check "... 0 of 4 changed, no input differs" grep -q "since $out: 0 of 4 cell(s) changed .*inputs that differ: none" \
  "$scratch/o20"
check "... Markdown: no cell changed" grep -q '^- no cell changed$' "$scratch/same/plans.md"
check "... Markdown: every row 'same'" test "$(grep -c '| same |$' "$scratch/same/plans.md")" -eq 4
# the change columns by name: the columns before them grow with the plan's fields (cp, cp_comm, ...)
ccol=$(head -1 "$scratch/same/plans.csv" | tr ',' '\n' | grep -n -x changed | cut -d: -f1)
check "... CSV: 4 more columns, changed 0 in each row" \
  test "$(awk -F, -v c="${ccol:-0}" 'NR > 1 { print $c }' "$scratch/same/plans.csv" | sort -u | tr -d '\n')" = 0
check "... CSV header ends with the change columns" \
  test "$(head -1 "$scratch/same/plans.csv" | cut -d, -f$((${ccol:-2} - 1))-)" = \
  binding,changed,change,prev_samples_per_s,change_why
check "... changes.json: 0 changed of 4" grep -q '"changed": 0,' "$scratch/same/changes.json"
check "... the page has a trend per row" test "$(grep -o '<svg xmlns="http://www.w3.org/2000/svg" class="trend"' \
  "$scratch/same/index.html" | wc -l)" -eq 4
if command -v xmllint >/dev/null; then check "... and is well-formed" xmllint --noout "$scratch/same/index.html"; fi
check "... the folder holds nothing else" test -z "$(sweep_leftovers "$scratch/same")"
# Another option: every plan changes, and the cause is the option, by its values.
sweep "${args[@]}" --gbs 16 --out "$scratch/gbs" --compare "$out" >"$scratch/o21" 2>"$scratch/e21"
check "another --gbs: 4 of 4 changed" grep -q "4 of 4 cell(s) changed .*inputs that differ: the options of 4 cell" \
  "$scratch/o21"
check "... each naming the option's old and new value" \
  test "$(grep -c -E '^- gpt3-[0-9.]+b on dgx-a100-80g:[12]: plan.*why: options gbs=(64|128) -> gbs=16$' \
    "$scratch/gbs/plans.md")" -eq 4
check "... changes.json says why" test "$(grep -c '"why": "options gbs=' "$scratch/gbs/changes.json")" -eq 4
check "... rows marked changed in the page" test "$(grep -c '<tr class="chg">' "$scratch/gbs/index.html")" -eq 4
# A model file edited between two nights: the cell turns infeasible (it stands out) and the cause is the model file;
# edited back, it becomes feasible again. The preset gpt3-1.3b beside it stays the same.
cp "$(dirname "$0")/../../presets/models/gpt3-1.3b.json" "$scratch/m.json"
margs=(--models "$scratch/m.json,gpt3-1.3b" --clusters g4dn-12xlarge:1)
sweep "${margs[@]}" --out "$scratch/m1" >/dev/null 2>&1
sed -i 's/"repeat": 24/"repeat": 400/' "$scratch/m.json"
sweep "${margs[@]}" --out "$scratch/m2" --compare "$scratch/m1" >"$scratch/o22" 2>"$scratch/e22"
rc=$?
check "a sweep after the model file grew exits 0 (exit $rc; $(tail -2 "$scratch/e22"))" test $rc -eq 0
check "... 1 of 2 changed, the model named" grep -q "1 of 2 cell(s) changed .*inputs that differ: model $scratch/m.json" \
  "$scratch/o22"
check "... the cell turned infeasible, in bold, with the model file as the cause" \
  grep -q "^- \*\*$scratch/m.json on g4dn-12xlarge:1: INFEASIBLE now (samples/s [0-9.]* -> infeasible); why: model file [0-9a-f]\{16\} -> [0-9a-f]\{16\}\*\*$" \
  "$scratch/m2/plans.md"
check "... its row stands out in the page" grep -q '<tr class="lost">' "$scratch/m2/index.html"
check "... changes.json: turned_infeasible" grep -q '"turned_infeasible": true' "$scratch/m2/changes.json"
check "... the other cell is the same" grep -q '| g4dn-12xlarge:1 | 4 | .* | same |$' "$scratch/m2/plans.md"
sed -i 's/"repeat": 400/"repeat": 24/' "$scratch/m.json"
sweep "${margs[@]}" --out "$scratch/m3" --compare "$scratch/m2" >"$scratch/o23" 2>&1
check "edited back: feasible now" grep -q "on g4dn-12xlarge:1: feasible now (samples/s infeasible -> [0-9.]*); why: model" \
  "$scratch/m3/plans.md"
check "... marked in the page" grep -q '<tr class="won">' "$scratch/m3/index.html"
# A resumed folder must not mix records of two model files.
head -1 "$scratch/m3/cells.jsonl" >"$scratch/m3.keep" && cp "$scratch/m3.keep" "$scratch/m3/cells.jsonl"
sed -i 's/"repeat": 24/"repeat": 25/' "$scratch/m.json"
sweep "${margs[@]}" --out "$scratch/m3" --resume >/dev/null 2>"$scratch/e24"
check "a resume after the model file changed is refused (exit 2)" test $? -eq 2
check "... naming it" grep -q "records were searched with other inputs: model $scratch/m.json changed" "$scratch/e24"
# A previous folder of an older psearch (no sweep.json) still compares: its version and options are in its records
# and named; what it cannot know (database, models, clusters) is said to be unknown.
cp -r "$scratch/same" "$scratch/premanifest" && rm "$scratch/premanifest/sweep.json"
sed -i 's/"psearch":"[^"]*"/"psearch":"0.0.0-older"/' "$scratch/premanifest/cells.jsonl"
sweep "${args[@]}" --gbs 16 --out "$scratch/vsold" --compare "$scratch/premanifest" >"$scratch/o25" 2>&1
check "an old folder compares: its version and the option named, the rest unknown" \
  test "$(grep -c 'why: psearch 0.0.0-older -> [^;]*; options gbs=[0-9]* -> gbs=16; other cause unknown: the previous sweep did not record its inputs' \
    "$scratch/vsold/plans.md")" -eq 4
check "... the header says why unknown" \
  grep -q "premanifest has no sweep.json: made before psearch recorded its inputs" "$scratch/vsold/plans.md"
sed -i 's/"psearch":"[^"]*"/"psearch":"'"$("$psearch" --version | head -1 | awk '{print $2}')"'"/' \
  "$scratch/premanifest/cells.jsonl"
sweep "${args[@]}" --out "$scratch/vsold2" --compare "$scratch/premanifest" >/dev/null 2>&1
check "... and with nothing known to differ, 'cause unknown' alone" \
  test "$(grep -c ',cause unknown: the previous sweep did not record' "$scratch/vsold2/plans.csv")" -eq 4
# The cost database by content: two calibrations of this machine differ (every cell's samples/s moves, --change-
# threshold 0 counts any move), and the cause is the database, whatever its path.
model=$(dirname "$0")/../data/models/good/gpt2-small.json
cargs=(--models "$model" --clusters costdb --dtype fp32 --vocab-pad 256)
"$psearch" calibrate --quick --out "$scratch/c1.h5" >/dev/null 2>&1 </dev/null
"$psearch" calibrate --quick --out "$scratch/c2.h5" >/dev/null 2>&1 </dev/null
sweep "${cargs[@]}" --costdb "$scratch/c1.h5" --out "$scratch/db1" >/dev/null 2>&1
sweep "${cargs[@]}" --costdb "$scratch/c2.h5" --out "$scratch/db2" --compare "$scratch/db1" --change-threshold 0 \
  --format json >"$scratch/o26" 2>"$scratch/e26"
rc=$?
check "a sweep on a new calibration exits 0 (exit $rc; $(tail -2 "$scratch/e26"))" test $rc -eq 0
check "... the summary names the cost database" grep -q '"inputs_differ": "the cost database (its content)"' "$scratch/o26"
check "... 1 of 1 changed (threshold 0)" grep -q '"changed": 1,' "$scratch/o26"
check "... because of the cost database, not its path (an option)" \
  grep -q "why: cost database [0-9a-f]\{16\} -> [0-9a-f]\{16\} ($scratch/c2.h5)$" "$scratch/db2/plans.md"
# --history: the nights in a folder by name, the newest compared, a trend of each cell over them.
mkdir "$scratch/hist"
for night in 2026-01-01 2026-01-02 2026-01-03; do
  g=(); [[ $night == 2026-01-02 ]] && g=(--gbs 16)
  sweep "${args[@]}" "${g[@]}" --history "$scratch/hist" --nights 3 --out "$scratch/hist/$night" >"$scratch/o27" 2>&1
done
check "--history compares with the newest night" grep -q "since $scratch/hist/2026-01-02: 4 of 4 cell(s) changed" \
  "$scratch/o27"
check "... and draws 3 nights per cell" \
  test "$(grep -o '<title>3 night(s), oldest first</title>' "$scratch/hist/2026-01-03/index.html" | wc -l)" -eq 4
check "... each night a point" test "$(grep -c '<title>2026-01-01: [0-9.]* samples/s</title>' \
  "$scratch/hist/2026-01-03/index.html")" -eq 4
sweep "${args[@]}" --history "$scratch/hist" --nights 2 --out "$scratch/h2" >/dev/null 2>&1
check "--nights 2: the newest night and this one" \
  test "$(grep -o '<title>2 night(s), oldest first</title>' "$scratch/h2/index.html" | wc -l)" -eq 4
# Bad input: exit 2 naming the folder, nothing created.
sweep "${args[@]}" --out "$scratch/bad1" --compare "$scratch/nowhere" >/dev/null 2>"$scratch/e28"
check "a missing PREV_DIR exits 2" test $? -eq 2
check "... naming it" grep -q -- "--compare $scratch/nowhere: no such folder" "$scratch/e28"
check "... before the folder is made" test ! -e "$scratch/bad1"
sweep "${args[@]}" --out "$scratch/bad2" --compare "$scratch/hist" >/dev/null 2>"$scratch/e29"
check "a folder that is not a sweep's exits 2" test $? -eq 2
check "... saying so" grep -q -- "--compare $scratch/hist: not a sweep folder (it has no cells.jsonl" "$scratch/e29"
sweep "${args[@]}" --out "$scratch/bad3" --nights 3 >/dev/null 2>"$scratch/e30"
check "--nights without --compare/--history exits 2" test $? -eq 2
sweep "${args[@]}" --out "$scratch/bad4" --compare "$out" --change-threshold x >/dev/null 2>"$scratch/e31"
check "a bad --change-threshold exits 2" test $? -eq 2
check "... naming it" grep -q "change-threshold needs a percentage" "$scratch/e31"

finish

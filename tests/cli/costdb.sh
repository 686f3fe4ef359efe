#!/usr/bin/env bash
# The cost database end to end (labels cli, mpi): a --quick calibration on 2 ranks, the file read by h5dump, `costdb
# show`, the search and `estimate` using it, refusal for another device kind, merge, the refit of compute_scale and
# comm_scale from executed plans (calibrate --from-measurements) and --costdb applying it, the bad-file catalogue
# (exit 2, one error line naming the file, nothing written), and a calibration killed midway leaving the previous
# file intact.
#   costdb.sh PSEARCH TEST_COSTDB H5DUMP "MPIEXEC -n 2 ..." MODEL
set -u
psearch=$1
make_bad=$2
h5dump=$3
launch=$4
model=$5
pass=0
fail=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
db=$scratch/t.h5

ok() { pass=$((pass + 1)); }
bad() {
  fail=$((fail + 1))
  echo "FAIL $1"
  [[ -n ${2:-} ]] && echo "$2" | head -5 | sed 's/^/     | /'
}
# expect NAME CODE REGEX CMD...: exit code and a regex over stdout+stderr
expect() {
  local name=$1 code=$2 regex=$3 out rc
  shift 3
  out=$(timeout 120 "$@" 2>&1 </dev/null)
  rc=$?
  if [[ $rc -ne $code ]]; then bad "$name: exit $rc, expected $code" "$out"; return; fi
  if ! grep -Eq -- "$regex" <<<"$out"; then bad "$name: output does not match /$regex/" "$out"; return; fi
  ok
}

# shellcheck disable=SC2086 # launch is a command line
expect calibrate 0 "wrote $db" $launch "$psearch" calibrate --quick --out "$db"
[[ -s $db ]] && ok || bad "calibrate: no $db"
left=$(ls -A "$scratch" | grep -v '^t\.h5$')
[[ -z $left ]] && ok || bad "calibrate left files behind: $left"
expect h5dump 0 'GROUP "collectives"' "$h5dump" -H "$db"
expect h5dump_units 0 'ATTRIBUTE "units"' "$h5dump" -A "$db"
expect show 0 'allreduce +2 ranks in a node: busbw [0-9.]+ GB/s' "$psearch" costdb show "$db"
expect show_gemm 0 'gemm fp32 +peak [0-9.]+ GFLOP/s' "$psearch" costdb show "$db"
expect show_json 0 '"schema_version": 3' "$psearch" costdb show "$db" --format json
# the fused attention kernel exec runs on CPU ranks, timed forward and backward
expect show_attention 0 'attention +fused kernel fp32: forward [0-9.]+ GFLOP/s, backward [0-9.]+ GFLOP/s as executed' \
  "$psearch" costdb show "$db"
expect show_attention_json 0 '"attention_flops_median": \{' "$psearch" costdb show "$db" --format json
sum0=$(sha1sum "$db" | cut -c1-40)

# The search and estimate on the calibrated machine: ranks as devices, the measured tables in the cost model.
common=(--costdb "$db" --cluster costdb --model "$model" --dtype fp32 --vocab-pad 256)
expect estimate 0 '# cost database .*t\.h5: measured tables' "$psearch" estimate "${common[@]}" --tp 2
expect estimate_json 0 '"costdb": ".*t\.h5"' "$psearch" estimate "${common[@]}" --tp 2 --format json
# shellcheck disable=SC2086
expect search_mpi 0 '2 rank\(s\)' $launch "$psearch" "${common[@]}" --gbs 8 --top 3
expect search_costdb_note 0 '# cost database .*t\.h5' "$psearch" "${common[@]}" --gbs 8 --top 3
expect cluster_show 0 'cpu:' "$psearch" cluster show costdb --costdb "$db"
# ... so the calibrated CPU has a fused kernel: fused attention and context parallelism are priced there
expect cluster_fused 0 '"fused_attention": true' "$psearch" cluster show costdb --costdb "$db" --format json
expect estimate_fused 0 'attention fused' "$psearch" estimate "${common[@]}" --tp 1 --attention fused
expect estimate_cp 0 'cp 2 \(ring\)' "$psearch" estimate "${common[@]}" --tp 1 --cp 2 --cp-comm ring
# The measured tables change the prediction (the analytic model is not silently used).
t_db=$("$psearch" estimate "${common[@]}" --tp 2 --format json 2>/dev/null | grep -m1 '"iter_time_s"')
t_an=$("$psearch" estimate "${common[@]}" --tp 2 --format json --cost-param gemm_eff=0.5 2>/dev/null | grep -m1 '"iter_time_s"')
[[ -n $t_db && $t_db == "$t_an" ]] && ok || bad "gemm_eff must not matter with measured GEMMs: '$t_db' vs '$t_an'"
expect fp16_refused 2 'no fp16 tensor peak' "$psearch" estimate --costdb "$db" --cluster costdb --model "$model" \
  --dtype fp16 --vocab-pad 256 --tp 2
expect other_kind 2 "t\.h5: the cost database measured 'cpu:.*another device kind than cluster dgx-a100-80g:1" \
  "$psearch" estimate --costdb "$db" --cluster dgx-a100-80g:1 --tp 8
expect no_costdb 2 'give the database with --costdb FILE' "$psearch" estimate --cluster costdb
expect merge_self 2 'are the same file' "$psearch" costdb merge "$db" "$db" --out "$scratch/m.h5"
ln -s "$db" "$scratch/link.h5"
expect merge_self_link 2 'are the same file' "$psearch" costdb merge "$db" "$scratch/link.h5" --out "$scratch/m.h5"
rm -f "$scratch/link.h5"
[[ ! -e $scratch/m.h5 ]] && ok || bad "merge_self wrote $scratch/m.h5"
# two databases of the same machine stand for two allocations here: a copy is another file
cp "$db" "$scratch/copy.h5"
expect merge 0 'devices +4 rank\(s\) on 2 node\(s\)' "$psearch" costdb merge "$db" "$scratch/copy.h5" --out "$scratch/m.h5"
expect merged_cluster 0 'nodes +2 +GPUs 4' "$psearch" cluster show costdb --costdb "$scratch/m.h5"
# A nightly merge: tonight's calibration of the same node kind replaces the site's rows of that kind (--replace)
# instead of adding its ranks once more: the site above holds the kind twice (4 ranks), the result once (2 ranks on 1
# node), and its GEMM rows are tonight's alone (as many as one calibration has).
expect merge_replace 0 'devices +2 rank\(s\) on 1 node\(s\)' "$psearch" costdb merge "$scratch/m.h5" "$scratch/copy.h5" \
  --out "$scratch/r.h5" --replace
expect merge_replace_note 0 '4 device row\(s\) of cpu:.* replaced' "$psearch" costdb merge "$scratch/m.h5" \
  "$scratch/copy.h5" --out "$scratch/r.h5" --replace
expect replaced_cluster 0 'nodes +1 +GPUs 2' "$psearch" cluster show costdb --costdb "$scratch/r.h5"
n_gemm() { "$psearch" costdb show "$1" --format json 2>/dev/null | grep -m1 '"gemm"' | tr -dc '0-9'; }
[[ -n $(n_gemm "$db") && $(n_gemm "$scratch/r.h5") == "$(n_gemm "$db")" ]] && ok ||
  bad "merge --replace: $(n_gemm "$scratch/r.h5") GEMM rows, expected one calibration's $(n_gemm "$db")"
# without --replace the same merge adds the kind a third time (6 ranks): the replace is the option's doing
expect merge_accumulates 0 'devices +6 rank\(s\) on 3 node\(s\)' "$psearch" costdb merge "$scratch/m.h5" \
  "$scratch/copy.h5" --out "$scratch/r.h5"
expect replace_show 2 '--replace is for .costdb merge' "$psearch" costdb show "$db" --replace
rm -f "$scratch/copy.h5" "$scratch/m.h5" "$scratch/r.h5"
expect calibrate_no_out 2 'needs --out FILE.h5' $launch "$psearch" calibrate --quick

# ---- executed plans and the refit: test_costdb --add-measurements records 3 plans (what psearch exec --record does)
# of the calibrated device, computation measured 2x and communication 0.5x the prediction (medians)
expect refit_no_plans 2 't\.h5 holds no executed plans: run psearch exec --record .*t\.h5 first' \
  "$psearch" calibrate --from-measurements "$db"
[[ $(sha1sum "$db" | cut -c1-40) == "$sum0" ]] && ok || bad "refit_no_plans: $db changed"
fdb=$scratch/f.h5
cp "$db" "$fdb"
"$make_bad" --add-measurements "$fdb" || bad "test_costdb --add-measurements failed"
expect show_plans 0 'measurements 3, fit 0' "$psearch" costdb show "$fdb"
expect show_plans_err 0 'executed +3 plan\(s\) on cpu:' "$psearch" costdb show "$fdb"
fsum=$(sha1sum "$fdb" | cut -c1-40)
# --out: a copy with the fit, the database itself untouched
expect refit_out 0 'compute_scale +2 +3 ' "$psearch" calibrate --from-measurements "$fdb" --out "$scratch/g.h5"
[[ $(sha1sum "$fdb" | cut -c1-40) == "$fsum" ]] && ok || bad "refit --out changed $fdb"
expect refit_out_show 0 'fit +cpu:.* compute_scale 2 from 3 plan' "$psearch" costdb show "$scratch/g.h5"
rm -f "$scratch/g.h5"
expect refit 0 'cpu:.* +comm_scale +0\.5 +3 ' "$psearch" calibrate --from-measurements "$fdb"
expect refit_json 0 '"coefficient": "compute_scale",' "$psearch" calibrate --from-measurements "$fdb" --format json
expect show_fit 0 'fit +cpu:.* comm_scale 0\.5 from 3 plan' "$psearch" costdb show "$fdb"
expect show_fit_json 0 '"fit": 2' "$psearch" costdb show "$fdb" --format json
left=$(ls -A "$scratch" | grep -v -e '^t\.h5$' -e '^f\.h5$' -e '^bad$')
[[ -z $left ]] && ok || bad "refit left files behind: $left"
# --costdb applies the fit (the note says so); --cost-param still wins and restores the unfitted prediction
expect estimate_fit 0 '# cost database .*f\.h5: measured tables .*compute_scale 2 \(3 plan\(s\)\), comm_scale 0\.5' \
  "$psearch" estimate --costdb "$fdb" --cluster costdb --model "$model" --dtype fp32 --vocab-pad 256 --tp 2
est() { "$psearch" estimate --cluster costdb --model "$model" --dtype fp32 --vocab-pad 256 --tp 2 --format json "$@" \
  2>/dev/null | grep -m1 '"iter_time_s"'; }
t_plain=$(est --costdb "$db")
t_fit=$(est --costdb "$fdb")
t_back=$(est --costdb "$fdb" --cost-param compute_scale=1 --cost-param comm_scale=1)
[[ -n $t_plain && -n $t_fit && $t_plain != "$t_fit" ]] && ok || bad "the fit does not change the prediction: '$t_plain' vs '$t_fit'"
[[ -n $t_back && $t_back == "$t_plain" ]] && ok || bad "--cost-param does not override the fit: '$t_back' vs '$t_plain'"
# a file of executed plans only (psearch exec --record into a new file): shown, refused by --costdb until refitted
pdb=$scratch/p.h5
"$make_bad" --add-measurements "$pdb" || bad "test_costdb --add-measurements (new file) failed"
expect show_plans_only 0 'devices +none measured' "$psearch" costdb show "$pdb"
expect plans_only_refused 2 'p\.h5: .*only executed plans.*calibrate --from-measurements' \
  "$psearch" estimate --costdb "$pdb" --cluster dgx-a100-80g:1 --tp 8
rm -f "$pdb"

# ---- bad files: every one through `costdb show` and through `estimate --costdb`: exit 2, one error line naming it
bd=$scratch/bad
mkdir -p "$bd"
size=$(stat -c %s "$db")
head -c $((size / 2)) "$db" >"$bd/truncated.h5"
head -c 512 "$db" >"$bd/truncated-header.h5"
cp "$db" "$bd/corrupt.h5"
# overwrite the middle of the file (object headers and rows) with a pattern
dd if=/dev/urandom of="$bd/corrupt.h5" bs=1 seek=$((size / 3)) count=4096 conv=notrunc status=none
cp "$db" "$bd/corrupt-superblock.h5"
printf '\377\377\377\377\377\377\377\377' | dd of="$bd/corrupt-superblock.h5" bs=1 seek=24 conv=notrunc status=none
echo "this is not a cost database" >"$bd/not-hdf5.h5"
: >"$bd/empty.h5"
"$make_bad" --make-bad "$bd" "$db" || bad "test_costdb --make-bad failed"
[[ -f $bd/newer-version.h5 && -f $bd/missing-group.h5 ]] || bad "no newer-version.h5 / missing-group.h5"
out_dir=$scratch/outs
mkdir -p "$out_dir"
for f in "$bd"/*.h5 "$bd/does-not-exist.h5"; do
  for how in show estimate; do
    rm -rf "${out_dir:?}"/*
    if [[ $how == show ]]; then
      out=$("$psearch" costdb show "$f" --out "$out_dir/o" 2>&1 </dev/null)
    else
      out=$("$psearch" estimate --costdb "$f" --cluster costdb --model "$model" --dtype fp32 --out "$out_dir/o" 2>&1 </dev/null)
    fi
    rc=$?
    why=""
    [[ $rc -eq 2 ]] || why="exit $rc, expected 2"
    [[ -n $why || $(grep -c '^psearch: error: ' <<<"$out") -eq 1 ]] || why="not exactly one error line"
    [[ -n $why ]] || grep -qF "$(basename "$f")" <<<"$out" || why="message does not name the file"
    [[ -n $why || -z "$(ls -A "$out_dir")" ]] || why="left files behind"
    if [[ -z $why ]]; then ok; else bad "$how $(basename "$f"): $why" "$out"; fi
  done
done
grep -q 'newer' <<<"$("$psearch" costdb show "$bd/newer-version.h5" 2>&1)" && ok || bad "newer-version: no 'newer'"
grep -q 'group /overlap is missing' <<<"$("$psearch" costdb show "$bd/missing-group.h5" 2>&1)" && ok ||
  bad "missing-group: message does not name the group"
grep -q 'not an HDF5 file' <<<"$("$psearch" costdb show "$bd/not-hdf5.h5" 2>&1)" && ok || bad "not-hdf5: message"

# ---- interrupted calibration: kill -9 midway (full mode, slow enough), the previous t.h5 must read unchanged
# shellcheck disable=SC2086
setsid $launch "$psearch" calibrate --out "$db" >"$scratch/kill.log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 1 300); do
  compgen -G "$scratch/.t.h5.tmp-*" >/dev/null && break
  sleep 0.1
done
sleep 0.5
seen_tmp=$(compgen -G "$scratch/.t.h5.tmp-*" | head -1)
# the launcher, its ranks (its children), all by pid
kids=$(pgrep -P "$pid" 2>/dev/null || true)
grandkids=""
for k in $kids; do grandkids+=" $(pgrep -P "$k" 2>/dev/null || true)"; done
kill -9 "$pid" $kids $grandkids 2>/dev/null
wait "$pid" 2>/dev/null
[[ -n $seen_tmp ]] && ok || bad "interrupted: the calibration never created its temporary file" "$(cat "$scratch/kill.log")"
[[ $(sha1sum "$db" | cut -c1-40) == "$sum0" ]] && ok || bad "interrupted: $db changed"
expect after_kill 0 'allreduce +2 ranks' "$psearch" costdb show "$db"
# a leftover temporary is never taken for the database: it has another name, and read as one it is refused
for t in "$scratch"/.t.h5.tmp-*; do
  [[ -e $t ]] || continue
  out=$("$psearch" costdb show "$t" 2>&1)
  [[ $? -eq 2 ]] && ok || bad "interrupted: the leftover temporary reads as a database" "$out"
  rm -f "$t"
done

echo "$pass passed, $fail failed"
[[ $fail -eq 0 && $pass -gt 20 ]]

#!/usr/bin/env bash
# psearch exec end to end on 4 MPI ranks (one per GPU of p3-8xlarge:1), CPU backend, gpt2-small scaled down:
#  - plans of every shape and schedule kind run: exit 0, a result that parses, positive finite times, and every
#    micro-batch through every stage (the pass count the schedule library lists for the plan, on every rank);
#  - plans that do not fit the run (tests/data/plans/exec-*.json, too few ranks) are refused with exit 2 and one
#    message naming the problem, before any communicator is built, leaving no --out file;
#  - a GPU plan without --backend on a machine without a GPU is refused, naming --backend cpu;
#  - a dropped pipeline send (PS_EXEC_FAULT=skip-send:0) is caught by the watchdog within a bounded time; a set-up
#    failure on one rank (PS_EXEC_FAULT=fail-setup:2) fails the job at once with its cause;
#  - --record is refused for a GPU plan run on CPUs; on a calibrated CPU cluster (--cluster costdb) it appends rows a
#    second run keeps, which costdb show counts and calibrate --from-measurements refits;
#  - overlapped TP: plain, cross-pass and oases plans of one shape run on the calibrated CPU cluster; the overlapped
#    ones start their all-reduces beside the computation, and the measured and predicted gains are printed;
#  - Transformer Engine's TP overlap: an SP plan without and with te runs; te's ring steps are counted, measured and
#    predicted times printed;
#  - context parallelism (ring, a2a) and MoE expert parallelism run, their ring steps / all-to-alls and bytes as
#    counted by hand;
#  - --exec-top 2 executes and ranks the 2 best plans; with fewer ranks than GPUs it is refused before the search.
# python3 reads the JSON results; scripts/install-deps.sh installs it, so its absence is a failure, not a skip.
set -u
psearch=$1
launch4=$2 # mpiexec -n 4 ... (oversubscribed: PS_MPI_TEST_ENV)
launch2=$3 # mpiexec -n 2 ...
data=$4    # tests/data
h5dump=$5
if ! command -v python3 >/dev/null 2>&1; then
  echo "# exec: FAIL: python3 (reads the JSON results) is not installed: run scripts/install-deps.sh"
  exit 1
fi
model=$data/models/good/gpt2-small.json
plans=$data/plans
cluster=p3-8xlarge:1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=tests/cli/test_lib.sh
source "$(dirname "$0")/test_lib.sh"
# 4 ranks on 2 cores: one thread each
export OMP_NUM_THREADS=1
# shellcheck disable=SC2086 # the launcher is a command line
run4() { $launch4 "$psearch" "$@" </dev/null; }
# shellcheck disable=SC2086
run2() { $launch2 "$psearch" "$@" </dev/null; }
lacks() { ! grep -q -E -- "$@"; } # lacks REGEX FILE
secs_since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }'; }

# plan_field FILE KEY...: top-level fields of a plan file, space-separated
plan_field() {
  python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
print(" ".join(str(j.get(k, 1 if k == "vpp" else "")) for k in sys.argv[2:]))' "$@"
}

# expected_passes PLAN: sets want to the passes of one iteration on all ranks. The schedule library's pass list for
# the plan's pipeline (psearch schedule --passes) counted over its devices, times the ranks of a device (tp x dp);
# checked against the count every schedule must have: each micro-batch's forward once per stage (pp x vpp stages),
# and its backward once (gpipe, 1f1b, interleaved: B and W fused) or as B then W (zero-bubble and V schedules).
expected_passes() {
  local pp vpp tp dp mb kind vflag=() n bw
  read -r pp vpp tp dp mb kind <<<"$(plan_field "$1" pp vpp tp dp micro_batches schedule)"
  [[ $vpp -gt 1 ]] && vflag=(--vpp "$vpp")
  n=$("$psearch" schedule --kind "$kind" --stages "$pp" --micro "$mb" "${vflag[@]}" --format json --passes |
    python3 -c 'import json, sys; print(sum(len(d["passes"]) for d in json.load(sys.stdin)["per_device"]))')
  case $kind in gpipe | 1f1b | interleaved) bw=1 ;; *) bw=2 ;; esac
  if [[ "$n" == $((mb * pp * vpp * (1 + bw))) ]]; then ok; else
    bad "psearch schedule --kind $kind --stages $pp --micro $mb --vpp $vpp lists ${n:-no} passes, expected" \
      "$mb micro-batches x $((pp * vpp)) stages x $((1 + bw))"
  fi
  want=$((mb * pp * vpp * (1 + bw) * tp * dp))
}

# exec_problems RESULT ITERS PASSES: what is wrong with a psearch exec JSON result (nothing when it is right)
exec_problems() {
  python3 - "$@" <<'EOF'
import json, math, sys
path, iters, passes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    with open(path) as f:
        j = json.load(f)
except Exception as e:
    sys.exit(f"does not parse as JSON: {e}")
def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
probs = []
e = j.get("exec") or {}
m = e.get("measured") or {}
if not num(m.get("iter_time_s")):
    probs.append(f"exec.measured.iter_time_s = {m.get('iter_time_s')!r}, not a positive finite number")
its = m.get("iterations_s")
if not isinstance(its, list) or len(its) != iters or not all(num(t) for t in its):
    probs.append(f"exec.measured.iterations_s = {its!r}, expected {iters} positive finite times")
if e.get("iters") != iters:
    probs.append(f"exec.iters = {e.get('iters')!r}, expected {iters}")
if e.get("passes_per_iteration") != passes:
    probs.append(f"exec.passes_per_iteration = {e.get('passes_per_iteration')!r}, expected {passes}")
if not num((e.get("predicted") or {}).get("iter_time_s")):
    probs.append("no positive exec.predicted.iter_time_s")
if e.get("backend") != "cpu":
    probs.append(f"exec.backend = {e.get('backend')!r}, expected cpu")
print("; ".join(probs))
EOF
}

# ---- 1. plans of every shape and schedule kind, run on 4 ranks ----
mkdir -p "$scratch/plans" "$scratch/out"
good=(
  "tp2-pp2:--tp 2 --pp 2"
  "tp2-pp2-full-sp:--tp 2 --pp 2 --recompute full --seq-parallel"
  "tp2-pp2-op-sp:--tp 2 --pp 2 --recompute op --seq-parallel"
  "pp4:--pp 4"
  "dp4-zero3:--dp 4 --zero 3"
)
for kind in gpipe 1f1b interleaved zb-h1 zb-h2 v-min v-half v-zb; do
  case $kind in interleaved | v-*) v=2 ;; *) v=1 ;; esac
  good+=("$kind-pp2:--pp 2 --tp 2 --schedule $kind --vpp $v" "$kind-pp4:--pp 4 --schedule $kind --vpp $v")
done
t_all=$(date +%s.%N)
for g in "${good[@]}"; do
  label=${g%%:*}
  read -r -a flags <<<"${g#*:}"
  plan=$scratch/plans/$label.json
  out=$scratch/out/$label.json
  # 8 samples of 1: 8 micro-batches, enough for every kind at 2 and 4 stages (2 per DP rank at dp 4)
  if ! "$psearch" estimate --model "$model" --cluster $cluster "${flags[@]}" --gbs 8 --mbs 1 --vocab-pad 256 \
    --format json --out "$plan" 2>"$scratch/err"; then
    bad "$label: psearch estimate ${flags[*]} failed: $(grep -v '^psearch: note' "$scratch/err" | head -3)"
    continue
  fi
  expected_passes "$plan"
  t0=$(date +%s.%N)
  run4 exec "$plan" --model "$model" --backend cpu --iters 2 --format json --out "$out" 2>"$scratch/err"
  rc=$?
  echo "# exec $label: exit $rc in $(secs_since "$t0") s, $want passes expected"
  if [[ $rc -ne 0 ]]; then
    bad "$label: exit $rc: $(grep -v '^psearch: note' "$scratch/err" | head -3)"
    [[ -e "$out" ]] && bad "$label: $out written although the run failed"
    continue
  fi
  ok
  problems=$(exec_problems "$out" 2 "$want" 2>&1)
  if [[ -z "$problems" ]]; then ok; else bad "$label: $problems"; fi
done
echo "# ${#good[@]} plans executed in $(secs_since "$t_all") s"

# The committed plan file (tests/data/plans/exec-gpt2-tp2-pp2.json, the base of the broken ones) still runs, in the
# table format too: the broken files below are refused for what they break, not for a stale format.
committed=$plans/exec-gpt2-tp2-pp2.json
run4 exec "$committed" --model "$model" --backend cpu --iters 2 --out "$scratch/out/committed.txt" 2>"$scratch/err"
rc=$?
check "exec-gpt2-tp2-pp2.json runs (exit $rc: $(grep -v '^psearch: note' "$scratch/err" | head -2))" test $rc -eq 0
check "... and prints measured against predicted, 64 passes" \
  grep -q 'executed .*, 64 passes per iteration' "$scratch/out/committed.txt"

# ---- 2., 3. plans that do not fit the run: exit 2, one message, nothing built, nothing written ----
# refused LABEL LAUNCHER REGEX psearch-args...: in the table format, where rank 0 logs '# exec: N rank(s)' once the
# communicators and the backend exist: a refusal before them never prints it.
refused() {
  local label=$1 launcher=$2 regex=$3
  shift 3
  local out=$scratch/refused.out
  rm -f "$out"
  "$launcher" "$@" --out "$out" >"$scratch/stdout" 2>"$scratch/err"
  local rc=$?
  local msg
  msg=$(grep '^psearch: error' "$scratch/err")
  check "$label: exit $rc, expected 2 (${msg:-no message})" test $rc -eq 2
  check "$label: one error message, got $(grep -c . <<<"$msg")" test "$(grep -c . <<<"$msg")" -eq 1
  check "$label: message matches '$regex': ${msg:-none}" grep -q -E -- "$regex" <<<"$msg"
  check "$label: refused before any communicator (no '# exec:' log)" lacks '^# exec:' "$scratch/err"
  check "$label: no --out file left" test ! -e "$out"
  check "$label: nothing on stdout" test ! -s "$scratch/stdout"
}
refused missing-stage run4 "exec-missing-stage\.json: 'stages' has 3 entries; pp 2 x vpp 2 needs 4" \
  exec "$plans/exec-missing-stage.json" --model "$model" --backend cpu
refused degrees run4 "tp 2 x dp 2 x pp 2 = 8 GPUs, but cluster p3-8xlarge:1 has 4" \
  exec "$plans/exec-degrees.json" --model "$model" --backend cpu
refused two-ranks run2 "plan runs on 4 GPUs .*but this run has 2 MPI ranks.*mpirun -n 4" \
  exec "$committed" --model "$model" --backend cpu
refused eight-gpus run4 "plan runs on 8 GPUs .*p3-8xlarge:2.* but this run has 4 MPI ranks.*mpirun -n 8" \
  exec "$plans/exec-8gpus.json" --model "$model" --backend cpu
refused malformed run4 "exec-malformed\.json:[0-9]+:[0-9]+: invalid JSON" \
  exec "$plans/exec-malformed.json" --model "$model" --backend cpu
refused no-model run4 "exec-no-model\.json: no 'model' field .*give --model" \
  exec "$plans/exec-no-model.json" --backend cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "# exec: a GPU is visible (nvidia-smi): the refusal of a GPU plan without --backend is not checked"
else
  refused no-backend run4 "v100-16g GPUs of p3-8xlarge:1.*give --backend cpu" exec "$committed" --model "$model"
fi

# ---- 4. the watchdog: rank 0 drops its first pipeline send; the wait for it must fail the run, not hang ----
rm -f "$scratch/wd.json"
t0=$(date +%s.%N)
# shellcheck disable=SC2086 # the launcher is a command line
PS_EXEC_FAULT=skip-send:0 timeout -k 5 60 $launch4 "$psearch" exec "$committed" --model "$model" --backend cpu \
  --iters 2 --watchdog 3 --out "$scratch/wd.json" </dev/null >/dev/null 2>"$scratch/err"
rc=$?
el=$(secs_since "$t0")
msg=$(grep '^psearch: error' "$scratch/err")
echo "# watchdog: a dropped send ended the job in $el s with exit $rc: $msg"
check "watchdog: the job ended before the 60 s timeout" test $rc -ne 124 -a $rc -ne 137
check "watchdog: exit $rc, expected 3 (an execution failure)" test $rc -eq 3
check "watchdog: ended in $el s, expected well under 60" awk -v t="$el" 'BEGIN { exit !(t < 30) }'
wd_re='watchdog: rank [0-3] waited [0-9.]+ s for .* from rank [0-3] in pass (F|B|W|BW) of micro-batch [0-9]+'
check "watchdog: the message names the watchdog, a rank, its peer, the pass and micro-batch: ${msg:-none}" \
  grep -q -E "$wd_re.*--watchdog 3" <<<"$msg"
check "watchdog: no --out file left" test ! -e "$scratch/wd.json"
# The same hook fails rank 2's set-up alone, as out of memory: the failure is agreed before any collective, so the job
# ends at once with exit 3 and the cause named, instead of leaving the other ranks waiting (docs/exec.md).
t0=$(date +%s.%N)
# shellcheck disable=SC2086 # the launcher is a command line
PS_EXEC_FAULT=fail-setup:2 timeout -k 5 60 $launch4 "$psearch" exec "$committed" --model "$model" --backend cpu \
  --iters 2 --out "$scratch/fs.json" </dev/null >/dev/null 2>"$scratch/err"
rc=$?
el=$(secs_since "$t0")
msg=$(grep '^psearch: error' "$scratch/err")
echo "# agreement: a set-up failure on rank 2 ended the job in $el s with exit $rc: $msg"
check "agreement: exit $rc, expected 3" test $rc -eq 3
check "agreement: one error message, got $(grep -c . <<<"$msg")" test "$(grep -c . <<<"$msg")" -eq 1
check "agreement: the message names rank 2 and its cause: ${msg:-none}" \
  grep -q -E 'setting up the execution failed on rank 2: .*fail-setup:2' <<<"$msg"
check "agreement: no --out file left" test ! -e "$scratch/fs.json"

# ---- 5. --record: refused for a run not predicted for the devices that ran it; on a calibrated CPU cluster two
#      runs append two rows, the first stays as it was, and calibrate refits from them ----
run4 exec "$committed" --model "$model" --backend cpu --iters 1 --record "$scratch/gpu.h5" >/dev/null 2>"$scratch/err"
rc=$?
check "--record of a GPU plan run on the cpu backend: exit 2 (got $rc)" test $rc -eq 2
check "--record refusal names the like-for-like way: $(grep '^psearch: error' "$scratch/err")" \
  grep -q -- '--cluster costdb --costdb' "$scratch/err"
check "--record refusal writes no database" test ! -e "$scratch/gpu.h5"
db=$scratch/site.h5
run4 calibrate --quick --out "$db" >"$scratch/cal0" 2>&1
check "calibrate --quick on 4 ranks: $(tail -2 "$scratch/cal0")" test -s "$db"
cpuopt=(--cluster costdb --costdb "$db" --model "$model" --dtype fp32 --vocab-pad 256)
"$psearch" estimate "${cpuopt[@]}" --tp 2 --pp 2 --gbs 8 --format json --out "$scratch/c1.json" 2>"$scratch/err"
"$psearch" estimate "${cpuopt[@]}" --pp 4 --gbs 8 --format json --out "$scratch/c2.json" 2>>"$scratch/err"
check "plans for the calibrated machine: $(head -2 "$scratch/err")" test -s "$scratch/c1.json" -a -s "$scratch/c2.json"
rows() { "$psearch" costdb show "$1" --format json 2>/dev/null | python3 -c 'import json, sys
try: print(json.load(sys.stdin)["rows"]["measurements"])
except Exception: print("none")'; }
first_row() { "$h5dump" -d /measurements/table -s 0 -c 1 "$1" 2>&1 | sed -n '/DATA {/,/ATTRIBUTE/p'; }
run4 exec "$scratch/c1.json" "${cpuopt[@]}" --scale 8 --iters 2 --format json --record "$db" \
  --out "$scratch/rec1.json" 2>"$scratch/err"
rc=$?
check "--record: first run exit $rc: $(grep '^psearch: error' "$scratch/err")" test $rc -eq 0
check "--record: the result names the database" grep -q "\"recorded_in\": \"$db\"" "$scratch/rec1.json"
check "--record: the run is comparable" grep -q '"comparable": true' "$scratch/rec1.json"
check "--record: costdb show counts 1 measurement after the first run (got $(rows "$db"))" test "$(rows "$db")" = 1
row1=$(first_row "$db")
check "--record: h5dump reads the first row" grep -q 'pp2 tp2 dp1 z0 1f1b' <<<"$row1"
check "--record: the row names the CPU device calibration measured" grep -q '"cpu:' <<<"$row1"
run4 exec "$scratch/c2.json" "${cpuopt[@]}" --scale 8 --iters 2 --format json --record "$db" \
  --out "$scratch/rec2.json" 2>"$scratch/err"
rc=$?
check "--record: second run exit $rc: $(grep '^psearch: error' "$scratch/err")" test $rc -eq 0
check "--record: costdb show counts 2 measurements after the second run (got $(rows "$db"))" test "$(rows "$db")" = 2
check "--record: the second run kept the first row as it was" test "$row1" = "$(first_row "$db")"
check "--record: the second row is the pp 4 plan" \
  grep -q 'pp4 tp1 dp1 z0 1f1b' <<<"$("$h5dump" -d /measurements/table -s 1 -c 1 "$db" 2>&1)"
"$psearch" costdb show "$db" >"$scratch/show" 2>&1
check "costdb show of the recorded file exits 0 and lists 2 executed plans: $(tail -2 "$scratch/show")" \
  grep -q -E 'measurements 2' "$scratch/show"
"$psearch" calibrate --from-measurements "$db" >"$scratch/cal" 2>&1
rc=$?
check "calibrate --from-measurements exit $rc: $(tail -3 "$scratch/cal")" test $rc -eq 0
check "calibrate --from-measurements kept the 2 measurements (got $(rows "$db"))" test "$(rows "$db")" = 2
check "calibrate --from-measurements stored a fit" \
  python3 -c 'import json, sys; sys.exit(json.load(sys.stdin)["rows"]["fit"] < 1)' \
  <<<"$("$psearch" costdb show "$db" --format json 2>/dev/null)"

# ---- 5b. overlapped TP (Oases, issue 10): one shape (TP 4, full recomputation) planned plain, cross-pass and oases for
#      the calibrated CPU cluster and run: the overlapped plans start their all-reduces beside the computation (the
#      result counts them), the plain one starts none; the measured and predicted gains over plain are reported ----
# plan_run TAG OVERLAP KEY [ESTIMATE OPTION...]: the TP-4 shape planned with --tp-overlap OVERLAP for the calibrated
# CPU cluster and executed on 4 ranks; sets m, p and n to its measured and predicted iteration times and the exec
# result's KEY (how often the overlap ran)
plan_run() {
  local tag=$1 ov=$2 key=$3 rc
  shift 3
  "$psearch" estimate "${cpuopt[@]}" --tp 4 --gbs 16 --mbs 4 "$@" --tp-overlap "$ov" --format json \
    --out "$scratch/$tag-$ov.json" 2>"$scratch/err"
  check "$* --tp-overlap $ov: a plan for the calibrated machine: $(head -2 "$scratch/err")" \
    test -s "$scratch/$tag-$ov.json"
  run4 exec "$scratch/$tag-$ov.json" "${cpuopt[@]}" --scale 8 --iters 3 --format json --out "$scratch/$tag-$ov.out" \
    2>"$scratch/err"
  rc=$?
  check "exec of the $tag $ov plan: exit $rc: $(grep '^psearch: error' "$scratch/err")" test $rc -eq 0
  read -r m p n <<<"$(python3 -c 'import json, sys
e = json.load(open(sys.argv[1]))["exec"]
print(e["measured"]["iter_time_s"], e["predicted"]["iter_time_s"], e[sys.argv[2]])' \
    "$scratch/$tag-$ov.out" "$key" 2>/dev/null)"
}
declare -A ov_meas ov_pred
for ov in none cross-pass oases; do
  plan_run ov "$ov" overlapped_allreduces_per_iteration --recompute full
  ov_meas[$ov]=$m
  ov_pred[$ov]=$p
  if [[ $ov == none ]]; then
    check "the plain plan overlaps no all-reduce (got ${n:-none})" test "${n:-x}" = 0
  else
    check "the $ov plan overlaps its all-reduces (got ${n:-none} per iteration)" test "${n:-0}" -gt 0
  fi
done
for ov in cross-pass oases; do
  if [[ -n ${ov_meas[$ov]} && -n ${ov_meas[none]} ]]; then
    awk -v o="$ov" -v m0="${ov_meas[none]}" -v m1="${ov_meas[$ov]}" -v p0="${ov_pred[none]}" -v p1="${ov_pred[$ov]}" \
      'BEGIN { printf "# tp-overlap %s over none: measured %.4g s vs %.4g s (gain %.3f), predicted %.4g s vs %.4g s " \
               "(gain %.3f)\n", o, m1, m0, m0 / m1, p1, p0, p0 / p1 }'
  fi
done

# ---- 5c. Transformer Engine's TP overlap (te): one shape (TP 4, sequence parallelism) planned without and with te for
#      the calibrated CPU cluster and run: the te plan runs its SP collectives as ring steps beside GEMM pieces (the
#      result counts them), the plain SP one none; measured and predicted times are reported ----
declare -A te_meas te_pred
for ov in none te; do
  plan_run te "$ov" tp_ring_steps_per_iteration --seq-parallel
  te_meas[$ov]=$m
  te_pred[$ov]=$p
  if [[ $ov == none ]]; then
    check "the plain SP plan runs no ring step (got ${n:-none})" test "${n:-x}" = 0
  else
    check "the te plan runs its SP collectives as ring steps (got ${n:-none} per iteration)" test "${n:-0}" -gt 0
  fi
done
if [[ -n ${te_meas[te]} && -n ${te_meas[none]} ]]; then
  awk -v m0="${te_meas[none]}" -v m1="${te_meas[te]}" -v p0="${te_pred[none]}" -v p1="${te_pred[te]}" \
    'BEGIN { printf "# tp-overlap te over sp: measured %.4g s vs %.4g s (gain %.3f), predicted %.4g s vs %.4g s " \
             "(gain %.3f)\n", m1, m0, m0 / m1, p1, p0, p0 / p1 }'
fi

# ---- 5d. context parallelism and expert parallelism: gpt2-small planned at cp 2 (ring at tp 1 x dp 2, a2a at tp 2)
#      for 4 A100s (CP needs fused attention) and tiny-moe at tp 2 x dp 2 with its experts on ep 2 x etp 1 (the plan
#      JSON's ep/etp; sequence parallelism), run on the cpu backend: the CP ring steps / all-to-alls and the EP
#      all-to-alls and their bytes per iteration as counted by hand (docs/exec.md), measured and predicted times
#      printed ----
a100=$data/clusters/a100-x4.json
# cp_ep_run NAME JSON_KEYS... : runs $scratch/NAME.json, prints the figures and sets got to the keys' values
cp_ep_run() {
  local name=$1 mdl=$2 clu=$3
  shift 3
  run4 exec "$scratch/$name.json" --model "$mdl" --cluster "$clu" --backend cpu --iters 2 --scale "$scale" \
    --format json --out "$scratch/$name.out.json" 2>"$scratch/err"
  local rc=$?
  check "$name: exec exit $rc: $(grep '^psearch: error' "$scratch/err")" test $rc -eq 0
  got=$(python3 - "$scratch/$name.out.json" "$@" <<'EOF2'
import json, sys
try:
    j = json.load(open(sys.argv[1]))["exec"]
except Exception:
    print("unreadable")
    sys.exit()
me, pr = j.get("measured", {}), j.get("predicted", {})
print(f"# {sys.argv[1].split('/')[-1]}: CP {me.get('cp_comm_s')} s (predicted {pr.get('cp_comm_s')} s), EP "
      f"{me.get('ep_comm_s')} s (predicted {pr.get('ep_comm_s')} s), iteration {me.get('iter_time_s')} s "
      f"(predicted {pr.get('iter_time_s')} s)", file=sys.stderr)
print(" ".join(str(j.get(k)) for k in sys.argv[2:]))
EOF2
)
}
scale=16
"$psearch" estimate --cluster "$a100" --model "$model" --tp 1 --cp 2 --cp-comm ring --attention fused --gbs 8 \
  --format json --out "$scratch/cp-ring.json" 2>"$scratch/err" || bad "cp ring: estimate: $(tail -1 "$scratch/err")"
cp_ep_run cp-ring "$model" "$a100" cp_ring_steps_per_iteration cp_bytes_per_iteration
# 12 layers x 4 micro-batches x 4 ranks x 3 steps (forward 1, backward 2); a step moves K and V of 32 tokens x 12
# heads x 4 (head size 64 / 16) in bf16: 6144 bytes
check "cp ring: 576 ring steps and 3538944 bytes per iteration, got ${got:-none}" test "$got" = "576 3538944.0"
"$psearch" estimate --cluster "$a100" --model "$model" --tp 2 --cp 2 --cp-comm a2a --attention fused --gbs 8 \
  --format json --out "$scratch/cp-a2a.json" 2>"$scratch/err" || bad "cp a2a: estimate: $(tail -1 "$scratch/err")"
cp_ep_run cp-a2a "$model" "$a100" cp_alltoalls_per_iteration cp_bytes_per_iteration
# 12 layers x 8 micro-batches x 4 ranks x 4 all-to-alls; half of Q, K, V (3 x 1536 bytes) and of the output (1536)
# to the other rank, forward and backward: 6144 bytes a layer and micro-batch
check "cp a2a: 1536 all-to-alls and 2359296 bytes per iteration, got ${got:-none}" test "$got" = "1536 2359296.0"
moe=$data/models/good/tiny-moe.json
"$psearch" estimate --cluster $cluster --model "$moe" --tp 2 --dp 2 --gbs 8 --format json --out "$scratch/moe0.json" \
  2>"$scratch/err" || bad "moe: estimate failed: $(tail -1 "$scratch/err")"
python3 - "$scratch/moe0.json" "$scratch/moe-ep.json" <<'EOF2'
import json, sys
j = json.load(open(sys.argv[1]))
for d in [j] + [s for st in j["stages"] for s in st["strategies"]]:
    d.update(ep=2, etp=1, sp=True)
json.dump(j, open(sys.argv[2], "w"))
EOF2
scale=1
cp_ep_run moe-ep "$moe" $cluster ep_alltoalls_per_iteration ep_bytes_per_iteration
# 4 MoE blocks x 4 micro-batches x 4 ranks x 4 all-to-alls; a rank's dispatch buffer is 5 tokens x top-2 x 8 wide
# in fp16 (160 bytes), and an ep group of 2 sends one buffer's worth to the other member per all-to-all
check "moe ep 2: 256 all-to-alls and 20480 bytes per iteration, got ${got:-none}" test "$got" = "256 20480.0"

# ---- 5e. fused attention: gpt2-small planned with --attention fused at tp 2 for 2 A100s (a100-x4's GPUs, one node
#      of 2), run on 2 ranks on the cpu backend, which runs the fused kernel (jobs/attn_cpu.c): nothing run unfused,
#      every attention layer's kernel once forward and once backward per micro-batch and rank ----
sed -e 's/"a100-x4"/"a100-x2"/' -e 's/"gpus_per_node": 4/"gpus_per_node": 2/' "$a100" >"$scratch/a100-x2.json"
"$psearch" estimate --cluster "$scratch/a100-x2.json" --model "$model" --tp 2 --attention fused --gbs 4 \
  --format json --out "$scratch/fused.json" 2>"$scratch/err" || bad "fused: estimate: $(tail -1 "$scratch/err")"
run2 exec "$scratch/fused.json" --model "$model" --cluster "$scratch/a100-x2.json" --backend cpu --iters 2 \
  --scale 16 --format json --out "$scratch/fused.out.json" 2>"$scratch/err"
rc=$?
check "fused: exec exit $rc: $(grep '^psearch: error' "$scratch/err")" test $rc -eq 0
got=$(python3 - "$scratch/fused.out.json" <<'EOF2'
import json, sys
try:
    j = json.load(open(sys.argv[1]))["exec"]
except Exception:
    print("unreadable")
    sys.exit()
me, pr = j.get("measured", {}), j.get("predicted", {})
print(f"# fused: iteration {me.get('iter_time_s')} s (predicted {pr.get('iter_time_s')} s)", file=sys.stderr)
print(j.get("fused_attention_layers_run_unfused"), j.get("fused_attention_forwards_per_iteration"),
      j.get("fused_attention_backwards_per_iteration"))
EOF2
)
# 12 layers x 4 micro-batches x 2 ranks: 96 forwards and 96 backwards, none run unfused
check "fused: 0 layers unfused, 96 fused forwards and backwards per iteration, got ${got:-none}" test "$got" = "0 96 96"

# ---- 6. --exec-top ----
top=$scratch/top.json
t0=$(date +%s.%N)
run4 --model "$model" --cluster $cluster --gbs 16 --exec-top 2 --backend cpu --iters 2 --format json --out "$top" \
  2>"$scratch/err"
rc=$?
echo "# --exec-top 2: exit $rc in $(secs_since "$t0") s"
check "--exec-top 2: exit $rc: $(grep '^psearch: error' "$scratch/err")" test $rc -eq 0
[[ $rc -ne 0 && -e "$top" ]] && bad "--exec-top 2: $top written although the run failed"
problems=$(python3 - "$top" <<'EOF'
import json, math, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"does not parse as JSON: {e}")
    sys.exit()
ex = j.get("executed")
if not isinstance(ex, list) or len(ex) != 2:
    print(f"'executed' = {ex!r:.200}, expected 2 entries")
    sys.exit()
for k in ("measured_rank", "predicted_rank"):
    got = sorted(e.get(k, 0) for e in ex)
    if got != [1, 2]:
        print(f"{k}s {got}, expected 1 and 2")
t = {e.get("measured_rank"): (e.get("measured") or {}).get("iter_time_s") for e in ex}
if not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in t.values()):
    print(f"measured times {t}")
elif t.get(1, 0) > t.get(2, 0):
    print(f"measured rank 1 took {t.get(1)} s, rank 2 {t.get(2)} s")
for e in ex:
    if not e.get("plan") or not (e.get("passes_per_iteration") or 0) > 0:
        print(f"an entry without its plan or passes: {json.dumps(e)[:200]}")
EOF
)
check "--exec-top 2: 2 plans executed, ranked by measured time: $problems" test -z "$problems"
refused exec-top-two-ranks run2 "exec-top .*p3-8xlarge:1 has 4 GPUs but this run has 2 ranks" \
  --model "$model" --cluster $cluster --gbs 16 --exec-top 2 --backend cpu --iters 2
check "--exec-top on 2 ranks: refused before executing" lacks 'executing plan' "$scratch/err"

finish

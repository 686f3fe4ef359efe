#!/usr/bin/env bash
# The GPU paths one GPU runs (label gpu; fails where the CUDA runtime sees no GPU, as gpu_detect does):
#   - psearch calibrate on one rank: backend cuda, cuBLAS GEMM rows in fp32, fp16 and bf16, and fp8 where the GPU has
#     FP8 tensor cores (compute capability 8.9 and later, as nvidia-smi reports it), the device copy's bandwidth; the
#     collectives and the overlap say why they were not measured (they need 2 ranks);
#   - psearch exec of a one-GPU plan on the cuda backend: measured time, a measured peak device memory, comparable
#     with its prediction (the plan is for this GPU: --cluster auto); where the plan has fused attention (auto on a GPU
#     with a fused kernel), its layers run the cuda backend's fused core, none unfused, the forward twice per
#     backward (full recomputation).
#   gpu_single.sh PSEARCH
set -u
psearch=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail=0
no() { echo "FAIL $*"; fail=1; }

gpus=$("$psearch" cluster show auto --format json 2>&1 | grep -Eo '"gpus_per_node": *[0-9]+' | grep -Eo '[0-9]+$')
if [[ -z $gpus || $gpus -lt 1 ]]; then
  echo "FAIL no GPU seen by the CUDA runtime (this test is labelled gpu: run ctest -LE gpu elsewhere)"
  exit 1
fi

# ---- calibration on one GPU ----
db=$scratch/one.h5
cal=$(timeout 300 "$psearch" calibrate --quick --out "$db" 2>&1 </dev/null) || no "calibrate exit $?"
grep -q "backend cuda" <<<"$cal" || no "calibrate did not choose the cuda backend"
grep -q "# collectives: 1 rank" <<<"$cal" || no "calibrate did not say why the collectives were not measured"
grep -q "# overlap: 1 rank" <<<"$cal" || no "calibrate did not say why the overlap was not measured"
show=$("$psearch" costdb show "$db" --format json 2>&1)
want=(fp32 fp16 bf16)
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
if [[ -n $cc ]] && awk -v c="$cc" 'BEGIN {exit !(c >= 8.9)}'; then
  want+=(fp8)
else
  grep -q "fp8 not measured" <<<"$cal" || no "no fp8 on compute capability '$cc', and no word of it"
fi
for d in "${want[@]}"; do
  grep -Eq "\"$d\": *[1-9]" <<<"$show" || no "costdb show: no $d GEMM peak"
done
grep -Eq '"mem_Bps_median": *[1-9]' <<<"$show" || no "costdb show: no copy bandwidth"

# ---- a one-GPU plan executed on the cuda backend ----
plan=$scratch/plan.json
res=$scratch/exec.json
"$psearch" estimate --model gpt3-1.3b --cluster auto --mbs 2 --gbs 4 --recompute full --format json --out "$plan" ||
  no "estimate of a one-GPU plan, exit $?"
if [[ -s $plan ]]; then
  timeout 300 "$psearch" exec "$plan" --cluster auto --backend cuda --iters 2 --format json --out "$res" ||
    no "exec on the cuda backend, exit $?"
  if [[ -s $res ]]; then
    python3 - "$res" "$plan" <<'PY' || fail=1
import json, sys
e = json.load(open(sys.argv[1]))["exec"]
# the plan is uniform (estimate's flags), so its top-level "attention" is every layer's; --recompute full runs each
# fused forward twice per backward
fused = json.load(open(sys.argv[2])).get("attention") == "fused"
m, p = e["measured"], e["predicted"]
bad = []
if e["backend"] != "cuda": bad.append("backend %s" % e["backend"])
if not e["comparable"]: bad.append("not comparable with its prediction")
if not m["iter_time_s"] > 0: bad.append("no measured time")
if not (m["peak_mem_gib"] or 0) > 0: bad.append("no measured peak memory")
nf, nb = e["fused_attention_forwards_per_iteration"], e["fused_attention_backwards_per_iteration"]
if e["fused_attention_layers_run_unfused"]: bad.append("%d fused layers run unfused" % e["fused_attention_layers_run_unfused"])
if fused and not (nb > 0 and nf == 2 * nb): bad.append("fused core: %d forwards, %d backwards" % (nf, nb))
if not fused and (nf or nb): bad.append("an unfused plan ran the fused core")
print("exec: measured %.3f s, predicted %.3f s; peak %.2f GiB measured, %.2f GiB predicted"
      % (m["iter_time_s"], p["iter_time_s"], m["peak_mem_gib"] or 0, p["peak_mem_gib"]))
for b in bad: print("FAIL exec:", b)
sys.exit(1 if bad else 0)
PY
  fi
fi
if [[ $fail -ne 0 ]]; then
  tail -20 <<<"$cal" | sed 's/^/     | /'
  exit 1
fi
echo "gpu_single: ok"

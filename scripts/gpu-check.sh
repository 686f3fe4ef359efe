#!/usr/bin/env bash
# Every GPU path of psearch in one short run on a machine with at least one NVIDIA GPU (docs/gpu.md):
#   1. a Release build with CUDA, cuBLAS and NCCL (or --prebuilt DIR);
#   2. psearch cluster show auto (GPU detection through the CUDA runtime);
#   3. ctest -L gpu, within step 6 (its two-rank test shares the GPU when there is only one);
#   4. psearch exec of single-GPU plans of a ~1B model on the cuda backend, one per activation recomputation
#      (none, selective, full) and the search's own best: measured against predicted iteration time and peak memory;
#   5. psearch calibrate on the GPU: GEMMs per dtype (fp8 where the GPU has FP8 tensor cores), the device copy
#      bandwidth; the same plans predicted again with the measured tables (before / after calibration);
#   6. two ranks on one GPU: NCCL refuses two ranks of one communicator on one device ("Duplicate GPU detected"),
#      unless each rank names a host of its own (NCCL_HOSTID), which makes NCCL treat them as two nodes joined by
#      its socket transport over the loopback. That runs the 2-rank NCCL paths: the calibration's collectives and
#      GEMM/all-reduce overlap on two streams, and exec of a tensor-parallel (Oases overlap), a ZeRO-3 data-parallel
#      and a pipelined plan. Their times measure a shared GPU and a TCP loopback, not a real pair of GPUs: the run
#      checks that the code works, the figures of steps 4 and 5 are the ones to read.
# It writes DIR/report.json and DIR/report.txt (a table) and prints the time each step took. Without a GPU it stops
# before building anything: exit 3, saying why.
#
#   scripts/gpu-check.sh [--out DIR] [--prebuilt BUILD_DIR | --build-dir DIR] [--model M] [--quick]
#
# Exit 0 when every step passed, 1 when one failed (the report says which), 2 bad usage, 3 no GPU.
# GPU_CHECK_NVIDIA_SMI names the nvidia-smi to ask (tests point it at a missing GPU).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/out/gpu-check
build=$root/build-gpu
prebuilt=0
model=gpt3-1.3b
quick=0
usage() {
  sed -n '/^#   scripts/p' "${BASH_SOURCE[0]}" | sed 's/^#  /usage:/'
  echo "  --out DIR         where the report and the step outputs go [out/gpu-check]"
  echo "  --build-dir DIR   build here [build-gpu]"
  echo "  --prebuilt DIR    use this CUDA build as it is (no configure, no build)"
  echo "  --model M         the model of the single-GPU plans [gpt3-1.3b]"
  echo "  --quick           the calibration's quick mode (small shapes)"
}
while [[ $# -gt 0 ]]; do
  case $1 in
  --out) out=${2:?--out needs a folder}; shift 2 ;;
  --build-dir) build=${2:?--build-dir needs a folder}; shift 2 ;;
  --prebuilt) build=${2:?--prebuilt needs a build folder}; prebuilt=1; shift 2 ;;
  --model) model=${2:?--model needs a name}; shift 2 ;;
  --quick) quick=1; shift ;;
  -h | --help) usage; exit 0 ;;
  *) echo "gpu-check: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

refuse() {
  echo "gpu-check: $1" >&2
  echo "gpu-check: this check needs a machine with an NVIDIA GPU and its driver; nothing was built or run" >&2
  exit 3
}
smi=${GPU_CHECK_NVIDIA_SMI:-nvidia-smi}
command -v "$smi" >/dev/null 2>&1 || refuse "no GPU: '$smi' is not installed (no NVIDIA driver on this machine)"
gpu_list=$("$smi" --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1) ||
  refuse "no GPU: '$smi' failed: $(head -1 <<<"$gpu_list")"
[[ -n $gpu_list ]] || refuse "no GPU: '$smi' lists none"
n_gpus=$(grep -c . <<<"$gpu_list")

# The folder is gpu-check's own (a marker file says so): the outputs of an earlier check are replaced, anything else
# is never deleted.
if [[ -d $out && -n $(ls -A "$out") && ! -f $out/.gpu-check ]]; then
  echo "gpu-check: $out is not empty and was not written by gpu-check: give an empty or new folder to --out" >&2
  exit 2
fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
rm -f "$out"/*.json "$out"/*.log "$out"/*.h5 "$out"/steps.tsv "$out"/report.txt
touch "$out/.gpu-check"
printf '%s\n' "$gpu_list" >"$out/nvidia-smi.csv"
echo "gpu-check: $n_gpus GPU(s): $(head -1 <<<"$gpu_list"); output in $out"

# ---- steps: each timed, its output kept, its outcome a row of steps.tsv -----------------------------------------
failed=0
t_all=$(date +%s.%N)
step() { # NAME TIMEOUT_S CMD...: run, log to NAME.log, record the time and exit status
  local name=$1 limit=$2
  shift 2
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout --kill-after=10 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  local s
  s=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  printf '%s\t%s\t%s\n' "$name" "$rc" "$s" >>"$out/steps.tsv"
  if [[ $rc -eq 0 ]]; then
    printf '[gpu-check] %-22s %7.1f s  ok\n' "$name" "$s"
  else
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "# gpu-check: stopped after ${limit} s" >>"$out/$name.log"
    printf '[gpu-check] %-22s %7.1f s  FAILED (exit %d; %s)\n' "$name" "$s" "$rc" "$out/$name.log"
    tail -5 "$out/$name.log" | sed 's/^/    | /'
    failed=1
  fi
  return $rc
}

# ---- 1. build --------------------------------------------------------------------------------------------------
if [[ $prebuilt -eq 0 ]]; then
  step build 900 bash -c "cmake -S '$root' -B '$build' -DCMAKE_BUILD_TYPE=Release -DPS_WITH_CUDA=ON &&
                          cmake --build '$build' -j $(nproc)" ||
    { echo "gpu-check: the build failed ($out/build.log)"; exit 1; }
fi
psearch=$build/cli/psearch
[[ -x $psearch ]] || { echo "gpu-check: $psearch is not built" >&2; exit 2; }

# The CUDA, cuBLAS and NCCL libraries a build made elsewhere looks for may live where the loader does not look here
# (a Python environment's nvidia-* packages, the driver's own folder): add the folders that hold what is missing.
find_lib() { # SONAME: the first folder holding it
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib /usr/local/nvidia/lib64 \
    /usr/local/nvidia/lib $(python3 -c 'import glob, site, sys
for p in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    for d in glob.glob(p + "/nvidia/*/lib") + glob.glob(p + "/nvidia/lib"): print(d)' 2>/dev/null); do
    [[ -e $d/$1 ]] && { echo "$d"; return 0; }
  done
  return 1
}
for lib in $(ldd "$psearch" 2>/dev/null | awk '/not found/ {print $1}'); do
  if d=$(find_lib "$lib"); then
    export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "gpu-check: $lib from $d"
  fi
done
if ldd "$psearch" | grep -q 'not found'; then
  ldd "$psearch" | grep 'not found' | sed 's/^/gpu-check: missing /'
  echo "gpu-check: psearch cannot load its libraries" >&2
  exit 1
fi

export PSEARCH_DATA_DIR=$root/presets OPENBLAS_NUM_THREADS=1
if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none OMPI_MCA_btl=self,vader,tcp
launcher=$(command -v mpiexec || command -v mpirun || true)
# Two ranks on one GPU: a host of its own per rank for NCCL, its sockets on the loopback (see the top).
shared=()
if [[ $n_gpus -lt 2 ]]; then
  export PSEARCH_GPU_SHARE=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  shared=("$root/scripts/gpu-share.sh")
fi
"$psearch" --version >"$out/version.log" 2>&1
# what the binary says it was built with, not a guess from the build folder
grep -q 'cuBLAS yes' "$out/version.log" && ! grep -q 'NCCL *not built' "$out/version.log" ||
  echo "gpu-check: warning: $psearch was built without CUDA, cuBLAS or NCCL ($out/version.log): the GPU steps will fail"

# ---- 2. detection ----------------------------------------------------------------------------------------------
step detect 60 "$psearch" cluster show auto --format json --out "$out/cluster.json"

# ---- 4. single-GPU plans: predicted from the catalog, executed on the cuda backend ------------------------------
plans=()
for rc in none selective full; do
  if step "plan_$rc" 60 "$psearch" estimate --model "$model" --cluster auto --mbs 4 --gbs 16 --recompute "$rc" \
    --format json --out "$out/plan_$rc.json"; then
    plans+=("$rc")
  fi
done
# the search's own best plan for this GPU, and its execution (--exec-top 1)
step plan_search 120 "$psearch" --model "$model" --cluster auto --gbs 16 --format json --out "$out/search.json"
for rc in "${plans[@]}"; do
  step "exec_$rc" 120 "$psearch" exec "$out/plan_$rc.json" --cluster auto --backend cuda --iters 5 --warmup 2 \
    --format json --out "$out/exec_$rc.json"
done
step exec_search 180 "$psearch" --model "$model" --cluster auto --gbs 16 --exec-top 1 --backend cuda --iters 5 \
  --warmup 2 --format json --out "$out/exec_search.json"

# ---- 5. calibration on the GPU, then the same plans predicted with it ------------------------------------------
cal=()
[[ $quick -eq 1 ]] && cal=(--quick)
step calibrate 300 "$psearch" calibrate --out "$out/gpu.h5" --reps 5 "${cal[@]}"
step costdb_show 30 "$psearch" costdb show "$out/gpu.h5" --format json --out "$out/costdb.json"
for rc in "${plans[@]}" search; do
  src=$out/plan_$rc.json
  [[ $rc == search ]] && src=$out/search.json
  [[ -s $src ]] && step "after_$rc" 60 "$psearch" estimate --plan "$src" --cluster auto --costdb "$out/gpu.h5" \
    --format json --out "$out/after_$rc.json"
done

# ---- 6. two ranks: NCCL collectives and overlap, then ctest -L gpu, then exec of 2-GPU plans ----------------------
# (after the single-GPU figures, so that a two-rank run that hangs cannot cost them; a hang skips the other two-rank
# runs, the ctest one included, rather than wait for each in turn)
hung=0
if [[ -n $launcher ]]; then
  step calibrate_2ranks 120 "$launcher" -n 2 "${shared[@]}" "$psearch" calibrate --quick --out "$out/gpu2.h5"
  rc2=$?
  [[ $rc2 -eq 124 || $rc2 -eq 137 ]] && hung=1
  step costdb_show_2ranks 30 "$psearch" costdb show "$out/gpu2.h5" --format json --out "$out/costdb2.json"
else
  echo "gpu-check: no mpiexec: the two-rank steps are skipped"
fi
if [[ $hung -eq 1 ]]; then
  echo "gpu-check: the two-rank calibration hung: the other two-rank runs are skipped (gpu_calibrate too)"
  export PSEARCH_GPU_SHARE=0
fi
step ctest_gpu 240 ctest --test-dir "$build" -L gpu --output-on-failure
if [[ -n $launcher && $hung -eq 0 ]]; then
  # the plans' cluster: two of the detected GPU on one node (the catalog's figures for it)
  python3 - "$out/cluster.json" "$out/cluster2.json" <<'PY' || echo "gpu-check: no GPU detected: no 2-GPU cluster"
import json, sys
g = json.load(open(sys.argv[1]))["node_groups"][0]["gpu"]["name"]
json.dump({"name": "shared-2", "node_groups": [{"name": "shared", "nodes": 1, "gpus_per_node": 2, "gpu": g,
           "intra": {"kind": "nvlink4", "bw_GBps": 450, "latency_us": 3},
           "inter": {"kind": "ib-ndr", "bw_GBps": 50, "latency_us": 5}}]}, open(sys.argv[2], "w"), indent=1)
PY
  two=(--model "$model" --cluster "$out/cluster2.json" --mbs 2 --gbs 8 --vocab-pad 256)
  for p in "tp2:--tp 2 --dp 1 --recompute full --tp-overlap oases" "zero3:--tp 1 --dp 2 --zero 3" \
    "pp2:--tp 1 --dp 1 --pp 2 --schedule 1f1b" "te2:--tp 2 --dp 1 --seq-parallel --tp-overlap te"; do
    name=${p%%:*}
    # shellcheck disable=SC2086 # the plan options are words
    step "plan2_$name" 60 "$psearch" estimate "${two[@]}" ${p#*:} --format json --out "$out/plan2_$name.json" &&
      step "exec2_$name" 90 "$launcher" -n 2 "${shared[@]}" "$psearch" exec "$out/plan2_$name.json" \
        --cluster "$out/cluster2.json" --backend cuda --iters 3 --format json --out "$out/exec2_$name.json"
  done
  # context parallelism (ring and all-to-all; the attention cores of cp layers as their GEMMs in the ring's steps) and
  # an MoE block on an expert grid of 2 (NCCL grouped send/recv all-to-alls), the cuda paths of issue #21
  for p in "cp2:--tp 1 --dp 1 --cp 2 --cp-comm ring --attention fused" \
    "cpa2a:--tp 1 --dp 1 --cp 2 --cp-comm a2a --attention fused"; do
    name=${p%%:*}
    # shellcheck disable=SC2086 # the plan options are words
    step "plan2_$name" 60 "$psearch" estimate "${two[@]}" ${p#*:} --format json --out "$out/plan2_$name.json" &&
      step "exec2_$name" 90 "$launcher" -n 2 "${shared[@]}" "$psearch" exec "$out/plan2_$name.json" \
        --cluster "$out/cluster2.json" --backend cuda --iters 3 --format json --out "$out/exec2_$name.json"
  done
  moe=(--model "$root/tests/data/models/good/tiny-moe.json" --cluster "$out/cluster2.json" --gbs 8 --vocab-pad 2)
  step plan2_ep2 60 "$psearch" estimate "${moe[@]}" --tp 1 --dp 2 --ep 2 --etp 1 --format json \
    --out "$out/plan2_ep2.json" &&
    step exec2_ep2 90 "$launcher" -n 2 "${shared[@]}" "$psearch" exec "$out/plan2_ep2.json" \
      --cluster "$out/cluster2.json" --model "$root/tests/data/models/good/tiny-moe.json" --backend cuda --iters 3 \
      --format json --out "$out/exec2_ep2.json"
fi

# ---- report ------------------------------------------------------------------------------------------------------
t_end=$(date +%s.%N)
awk -v a="$t_all" -v b="$t_end" 'BEGIN {printf "total\t0\t%.1f\n", b - a}' >>"$out/steps.tsv"
if ! python3 "$root/scripts/gpu-report.py" "$out" --shared "$([[ ${#shared[@]} -gt 0 ]] && echo 1 || echo 0)"; then
  echo "gpu-check: the report could not be written"
  failed=1
fi
[[ -f $out/report.txt ]] && cat "$out/report.txt"
exit $failed

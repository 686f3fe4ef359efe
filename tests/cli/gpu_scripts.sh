#!/usr/bin/env bash
# What of the GPU check runs without a GPU (label cli): scripts/gpu-check.sh refuses a machine without one (exit 3,
# saying why, nothing written), the two-rank GPU test skips on one GPU unless told to share it and fails with none,
# scripts/gpu-report.py turns a recorded run (tests/data/gpu-check/, an H200's) into the report's figures, the PyTorch
# benchmarks (bench/gpu/*.py) exit 3 saying why without PyTorch or a GPU, and scripts/gemm-shapes-report.py reads the
# recorded bench_gemm_shapes run.
#   gpu_scripts.sh SOURCE_DIR
set -u
src=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail=0
no() { echo "FAIL $*"; fail=1; }

# ---- gpu-check.sh: the refusal ----
out=$scratch/out
msg=$(GPU_CHECK_NVIDIA_SMI=/nonexistent/nvidia-smi "$src/scripts/gpu-check.sh" --out "$out" 2>&1)
rc=$?
[[ $rc -eq 3 ]] || no "gpu-check without nvidia-smi: exit $rc, expected 3"
grep -q "no GPU: '/nonexistent/nvidia-smi' is not installed" <<<"$msg" || no "gpu-check does not say why: $msg"
grep -q "nothing was built or run" <<<"$msg" || no "gpu-check does not say that nothing ran"
[[ -e $out ]] && no "gpu-check without a GPU created $out"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver" >&2\nexit 9\n' \
  >"$scratch/smi-broken"
chmod +x "$scratch/smi-broken"
msg=$(GPU_CHECK_NVIDIA_SMI=$scratch/smi-broken "$src/scripts/gpu-check.sh" --out "$out" 2>&1)
rc=$?
[[ $rc -eq 3 ]] || no "gpu-check with a failing nvidia-smi: exit $rc, expected 3"
grep -q "could not communicate with the NVIDIA driver" <<<"$msg" || no "gpu-check hides nvidia-smi's reason: $msg"
[[ -e $out ]] && no "gpu-check with a failing nvidia-smi created $out"
"$src/scripts/gpu-check.sh" --bogus >/dev/null 2>&1
rc=$?
[[ $rc -eq 2 ]] || no "gpu-check --bogus: exit $rc, expected 2"
"$src/scripts/gpu-check.sh" --help | grep -q -- "--prebuilt" || no "gpu-check --help does not list --prebuilt"
# a folder of someone else's files is refused, not cleaned (a fake GPU gets it that far; nothing is built)
printf '#!/bin/sh\necho "NVIDIA H200, 143771 MiB, 580.159.04, 9.0"\n' >"$scratch/smi-fake"
chmod +x "$scratch/smi-fake"
mkdir -p "$scratch/mine"
echo '{"precious": true}' >"$scratch/mine/results.json"
GPU_CHECK_NVIDIA_SMI=$scratch/smi-fake "$src/scripts/gpu-check.sh" --out "$scratch/mine" --prebuilt /nonexistent \
  >/dev/null 2>"$scratch/err"
rc=$?
[[ $rc -eq 2 ]] || no "gpu-check --out a folder of other files: exit $rc, expected 2"
grep -q "not written by gpu-check" "$scratch/err" || no "gpu-check does not say why it refuses the folder"
[[ -f $scratch/mine/results.json ]] || no "gpu-check deleted a file it did not write"

# ---- gpu_calibrate.sh: the skip on one GPU, the failure on none ----
fake=$scratch/psearch-fake
printf '#!/bin/sh\necho "{\\"gpus_per_node\\": ${FAKE_GPUS}}"\n' >"$fake"
chmod +x "$fake"
msg=$(FAKE_GPUS=1 PSEARCH_GPU_SHARE=0 bash "$src/tests/hw/gpu_calibrate.sh" "$fake" "false" 2>&1)
rc=$?
[[ $rc -eq 77 ]] || no "gpu_calibrate on 1 GPU: exit $rc, expected 77 (skip)"
grep -q "SKIP 1 GPU" <<<"$msg" || no "gpu_calibrate does not say why it skips: $msg"
msg=$(FAKE_GPUS=0 bash "$src/tests/hw/gpu_calibrate.sh" "$fake" "false" 2>&1)
rc=$?
[[ $rc -eq 1 ]] || no "gpu_calibrate without a GPU: exit $rc, expected 1"

# ---- gpu-report.py: a recorded run's report ----
rec=$scratch/rec
cp -r "$src/tests/data/gpu-check/h200-2026-11-26" "$rec"
rm -f "$rec/report.json" "$rec/report.txt"
python3 "$src/scripts/gpu-report.py" "$rec" --shared 1 || no "gpu-report.py exit $?"
python3 - "$rec/report.json" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
bad = []
def near(a, b, tol=1e-6): return a is not None and abs(a - b) <= tol * max(1.0, abs(b))
c = r["calibration"]
# the figures are the database's and the catalog's, divided: bf16 918.1 of 989.4 TFLOP/s on the recorded H200
if not near(c["gemm_pct_of_catalog"]["bf16"], 100 * c["gemm_tflops"]["bf16"] / c["catalog_tflops"]["bf16"]):
    bad.append("bf16 percentage")
if not 90 < c["gemm_pct_of_catalog"]["bf16"] < 95: bad.append("bf16 %% %.1f" % c["gemm_pct_of_catalog"]["bf16"])
if "fp8" not in c["gemm_tflops"]: bad.append("no fp8 GEMM")
if not 75 < c["copy_pct_of_hbm"] < 85: bad.append("copy %% %s" % c["copy_pct_of_hbm"])
plans = {p["plan"]: p for p in r["plans"]}
for want in ("recompute none", "recompute selective", "recompute full", "search best"):
    p = plans.get(want)
    if not p or not p["executed"]: bad.append("plan %s missing" % want); continue
    if not near(p["iter_error_pct"], 100 * (p["predicted_iter_s"] - p["measured_iter_s"]) / p["measured_iter_s"]):
        bad.append("%s: time error" % want)
    if p["predicted_after_iter_s"] is None: bad.append("%s: no prediction after calibration" % want)
    if p["measured_peak_gib"] is None: bad.append("%s: no measured peak" % want)
if [p["plan"] for p in r["two_ranks"]["exec"]] != ["tp2", "zero3", "pp2"]: bad.append("two-rank plans")
if not r["two_ranks"]["exec"][0]["overlapped_allreduces"]: bad.append("tp2 ran no overlapped all-reduce")
if r["two_ranks"]["nccl_version"] != "2.28.3": bad.append("nccl version %s" % r["two_ranks"]["nccl_version"])
if r["ctest"] != {"tests": r["ctest"]["tests"], "passed": 3, "skipped": 0, "failed": 0}: bad.append("ctest counts")
if r["failed_steps"]: bad.append("failed steps %s" % r["failed_steps"])
if r["device"]["name"] != "NVIDIA H200" or not r["total_s"] > 0: bad.append("device or total")
for b in bad: print("FAIL report:", b)
sys.exit(1 if bad else 0)
PY
grep -q "^recompute none" "$rec/report.txt" || no "report.txt has no plan table"
grep -q "^bf16 " "$rec/report.txt" || no "report.txt has no GEMM table"
# ---- the PyTorch benchmarks of #20: exit 3 saying why where PyTorch or a GPU is missing (here: either) ----
for b in attn_bench small_gemm_bench; do
  msg=$(python3 "$src/bench/gpu/$b.py" 2>&1 >/dev/null)
  rc=$?
  if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    [[ $rc -eq 0 ]] || no "$b with a GPU: exit $rc"
  else
    [[ $rc -eq 3 ]] || no "$b without PyTorch or a GPU: exit $rc, expected 3"
    grep -qE "not available|no CUDA GPU" <<<"$msg" || no "$b does not say why: $msg"
  fi
done
# ---- gemm-shapes-report.py on the recorded H200 run of bench_gemm_shapes ----
rep=$(python3 "$src/scripts/gemm-shapes-report.py" "$src/tests/data/gpu-check/h200-2026-11-27/gemm_shapes.json")
rc=$?
[[ $rc -eq 0 ]] || no "gemm-shapes-report.py exit $rc"
grep -q "418 shapes" <<<"$rep" || no "gemm-shapes-report.py does not count the recorded 418 shapes"
grep -qE "^ *all +n 418 +median \|err\| +13\.5%" <<<"$rep" || no "gemm-shapes-report.py: the shape model's median is not the recorded 13.5%"
[[ $fail -eq 0 ]] && echo "gpu_scripts: ok"
exit $fail

#!/usr/bin/env bash
# The NCCL path of `psearch calibrate` (label gpu: 2 ranks, one GPU each): collectives and the overlap slowdown
# measured with NCCL on the GPUs, nccl_version in the file, no "not measured" warning. Fails where no GPU is seen (as
# gpu_detect does). On a single-GPU machine it skips (77), as NCCL refuses two ranks of one communicator on one
# device, unless PSEARCH_GPU_SHARE=1 (scripts/gpu-check.sh sets it): then each rank names a host of its own
# (NCCL_HOSTID) and NCCL joins them through its socket transport on the loopback, which runs the same code paths on
# one shared GPU (the figures are not those of two GPUs).
#   gpu_calibrate.sh PSEARCH "MPIEXEC -n 2 ..."
set -u
psearch=$1
launch=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

gpus=$("$psearch" cluster show auto --format json 2>&1 | grep -Eo '"gpus_per_node": *[0-9]+' | grep -Eo '[0-9]+$')
if [[ -z $gpus || $gpus -lt 1 ]]; then
  echo "FAIL no GPU seen by the CUDA runtime (this test is labelled gpu: run ctest -LE gpu elsewhere)"
  exit 1
fi
share=()
if [[ $gpus -lt 2 ]]; then
  if [[ ${PSEARCH_GPU_SHARE:-0} != 1 ]]; then
    echo "SKIP $gpus GPU: the NCCL calibration needs 2 (one per rank; PSEARCH_GPU_SHARE=1 shares one, see the top)"
    exit 77
  fi
  share=("$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/gpu-share.sh")
  echo "# 2 ranks on 1 GPU (PSEARCH_GPU_SHARE=1: a NCCL host per rank, sockets on the loopback)"
fi

fail=0
db=$scratch/gpu.h5
# shellcheck disable=SC2086 # launch is a command line
out=$(timeout 600 $launch "${share[@]}" "$psearch" calibrate --quick --out "$db" 2>&1 </dev/null)
rc=$?
check() { # NAME REGEX: the regex must match the calibration's output
  grep -Eq -- "$2" <<<"$out" || { echo "FAIL $1: output does not match /$2/"; fail=1; }
}
[[ $rc -eq 0 ]] || { echo "FAIL calibrate exit $rc"; fail=1; }
check "backend" "backend cuda"
check "collectives with NCCL" "# collectives \(nccl\)"
if grep -Eq "warning: (collectives|overlap).*(not measured|need NCCL)" <<<"$out"; then
  echo "FAIL a GPU allocation refused the collectives or overlap"
  fail=1
fi
show=$("$psearch" costdb show "$db" --format json 2>&1)
for re in '"nccl_version": *"[0-9]+\.[0-9]+' '"collectives": *[1-9]' '"overlap": *[1-9]' '"overlap_slowdown_median"'; do
  grep -Eq -- "$re" <<<"$show" || { echo "FAIL costdb show: no /$re/"; fail=1; }
done
if [[ $fail -ne 0 ]]; then
  echo "$out" | tail -20 | sed 's/^/     | /'
  exit 1
fi
echo "gpu_calibrate: ok ($gpus GPUs)"

#!/usr/bin/env bash
# README command 2: install what is missing, build with warnings as errors, run every test through ctest.
# GPU-labelled tests run only where a GPU is visible; elsewhere they are skipped and we say so.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DPS_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
cd "${PS_BUILD_DIR:-build}"
exclude=()
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "# test: GPU present, running gpu-labelled tests too"
else
  echo "# test: no GPU visible: skipping tests labelled 'gpu'"
  exclude=(-LE gpu)
fi
ctest --output-on-failure -j "$(nproc)" "${exclude[@]}" "$@"

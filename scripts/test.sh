#!/usr/bin/env bash
# README command 2: install what is missing, then build and run every test through ctest twice: a normal build
# (build/, warnings as errors) and an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/), MPI tests
# included. PS_TEST_SANITIZE=0 skips the second. Extra arguments go to both ctest runs (e.g. -R models).
# GPU-labelled tests run only where a GPU is visible; elsewhere they are skipped and we say so.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

exclude=()
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "# test: GPU present, running gpu-labelled tests too"
else
  echo "# test: no GPU visible: skipping tests labelled 'gpu'"
  exclude=(-LE gpu)
fi

run_suite() { # build-dir cmake-args...
  local dir=$1
  shift
  echo "# test: building $dir ($*)"
  PS_BUILD_DIR=$dir scripts/build.sh "$@"
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" "${exclude[@]}" "${ctest_args[@]}")
}

ctest_args=("$@")
run_suite build -DPS_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [[ "${PS_TEST_SANITIZE:-1}" != 0 ]]; then
  run_suite build-asan -DPS_WERROR=ON -DPS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
fi

#!/usr/bin/env bash
# README command 2: install what is missing, then build and run every test through ctest twice: a normal build
# (build/, warnings as errors) and an AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/), MPI tests
# included. PS_TEST_SANITIZE=0 skips the second. Extra arguments go to both ctest runs (e.g. -R models).
# GPU-labelled tests run only where a GPU is visible; elsewhere they are skipped and we say so.
# The sanitizer build is compiled at -O1 (AddressSanitizer's advice for usable speed) and skips the tests labelled
# 'long' (cli_exec, cli_sweep, search_determinism: many whole searches, sweeps and executed plans through code that
# the other MPI tests run under the sanitizers too: test_exec_np4, cli_sweep_groups, cli_sweep_fault, cli_cases). On
# a 2-core machine like CI's, a fresh-clone .ci/run's sanitizer half took 66 minutes at -O0 with them (2026-11-28:
# cli_exec 1143 s, cli_sweep 650 s, search_determinism 396 s; export_megatron over its 600 s), which with the normal
# half and the fuzzers went past CI's 90 minutes. `ctest -L long` in build-asan/ runs them by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh

skip=
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "# test: GPU present, running gpu-labelled tests too"
else
  echo "# test: no GPU visible: skipping tests labelled 'gpu'"
  skip=gpu
fi

run_suite() { # build-dir labels-to-skip (a ctest -LE regex, may be empty) cmake-args...
  local dir=$1 lex=$2
  shift 2
  echo "# test: building $dir ($*)"
  PS_BUILD_DIR=$dir scripts/build.sh "$@"
  local exclude=()
  [[ -z $lex ]] || exclude=(-LE "$lex")
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" "${exclude[@]}" "${ctest_args[@]}")
}

ctest_args=("$@")
run_suite build "$skip" -DPS_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
if [[ "${PS_TEST_SANITIZE:-1}" != 0 ]]; then
  echo "# test: the sanitizer build skips the tests labelled 'long' (scripts/test.sh says why)"
  run_suite build-asan "${skip:+$skip|}long" -DPS_WERROR=ON -DPS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
    "-DCMAKE_C_FLAGS_DEBUG=-g -O1"
fi

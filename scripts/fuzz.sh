#!/usr/bin/env bash
# Build the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan into build-fuzz/, replay their seeds and kept
# crash inputs, then fuzz each target for N seconds from a scratch copy of its seed corpus.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     SECONDS defaults to $PS_FUZZ_SECONDS or 60; TARGET to the default set
# Prints one line per target ("# fuzz_model_json: 123456 execs in 60 s, 0 crashes") and exits 1 when any target
# crashed, leaked, hung or ran out of memory, naming the input that did it (kept under build-fuzz/fuzz-artifacts/).
# Environment: PS_FUZZ_BUILD_DIR (build-fuzz), PS_FUZZ_TIMEOUT (seconds one input may take, 2), PS_FUZZ_JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${PS_FUZZ_SECONDS:-60}
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
build=${PS_FUZZ_BUILD_DIR:-build-fuzz}
timeout=${PS_FUZZ_TIMEOUT:-2}
# The default run: every reader of outside input (plan.json goes through the whole cost model).
all_targets=(fuzz_model_json fuzz_hf_config fuzz_layer_list fuzz_model_load fuzz_cluster_json fuzz_cli_options
                 fuzz_plan_json fuzz_costdb)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz: unknown target '$t' (targets: ${all_targets[*]})" >&2; exit 2; }
done

# ---- toolchain: the project's packages, then clang with its sanitizer/libFuzzer runtimes and OpenMP -------------------
scripts/install-deps.sh clang libclang-rt-dev libomp-dev

# ---- build: every library instrumented (coverage + ASan + UBSan), the targets linked with libFuzzer -------------------
san="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
mkdir -p "$build"
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DPS_FUZZ=ON -DPS_WITH_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$san" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target ps_fuzzers -j "${PS_FUZZ_JOBS:-$(nproc)}"

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export PSEARCH_DATA_DIR="$PWD/presets"

# ---- replay: every seed and kept crash input once (the ctest tests labelled fuzz) -------------------------------------
echo "# fuzz: replaying seeds and regressions"
ctest --test-dir "$build" -L fuzz --output-on-failure -R "^($(IFS='|'; echo "${targets[*]}"))_replay\$"

# ---- fuzz each target for $secs seconds, one at a time ---------------------------------------------------------------
[[ $build == /* ]] || build="$PWD/$build"
artifacts="$build/fuzz-artifacts"
logs="$build/fuzz-logs"
mkdir -p "$artifacts" "$logs"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/psearch-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failed=()
for t in "${targets[@]}"; do
  corpus="$scratch/$t/corpus"
  mkdir -p "$corpus" "$scratch/$t/tmp" "$artifacts/$t"
  # Seeds by content hash: two seed files with one content become one corpus entry.
  while IFS= read -r f; do
    [[ -n $f && -f $f ]] && cp "$f" "$corpus/$(sha1sum "$f" | cut -c1-40)"
  done <"$build/tests/fuzz/$t.seeds"
  dict=()
  [[ -f tests/fuzz/dict/$t.dict ]] && dict=(-dict="tests/fuzz/dict/$t.dict")
  log="$logs/$t.log"
  start=$(date +%s)
  rc=0
  TMPDIR="$scratch/$t/tmp" "$build/tests/fuzz/$t" "$corpus" "${dict[@]}" -max_total_time="$secs" \
    -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$t/" \
    >"$log" 2>&1 || rc=$?
  elapsed=$(($(date +%s) - start))
  execs=$(grep -oE '^stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n1 || true)
  [[ -n $execs ]] || execs=$(grep -oE '^#[0-9]+' "$log" | tr -d '#' | tail -n1 || true)
  crash=$(grep -oE "Test unit written to .*" "$log" | sed 's/^Test unit written to //' | tail -n1 || true)
  if ((rc == 0)); then
    echo "# $t: ${execs:-0} execs in $elapsed s, 0 crashes"
  else
    echo "# $t: ${execs:-0} execs in $elapsed s, 1 crash (exit $rc): ${crash:-see $log}"
    grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error|.*invariant broken|==[0-9]+== ERROR: libFuzzer)" "$log" |
      head -n 5 | sed 's/^/#   /'
    echo "#   replay: $build/tests/fuzz/$t ${crash:-CRASH_FILE}   log: $log"
    echo "#   once fixed, keep the input as tests/fuzz/regressions/$t/<what-it-was>"
    failed+=("$t")
  fi
done

if ((${#failed[@]})); then
  echo "# fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "# fuzz: ${#targets[@]} targets, $secs s each, no crash"

#!/usr/bin/env bash
# Build the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan into build-fuzz/, replay their seeds and kept
# crash inputs, then fuzz each target for N seconds (or N executions) from a scratch copy of its kept corpus
# (tests/fuzz/corpus/<target>/) and its seeds.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      SECONDS defaults to $PS_FUZZ_SECONDS or 60; TARGET to the default set
#   scripts/fuzz.sh --runs N [--keep] [TARGET...]
#                                              the long run: N executions per target (10000000 in docs), no time
#                                              limit; --keep merges what the run found into tests/fuzz/corpus/
#                                              (minimised by libFuzzer's -merge=1), so the next run starts there
#   scripts/fuzz.sh --runs N --jobs J ...      the long run split over J parallel libFuzzer jobs sharing one corpus,
#                                              N/J executions each (a many-core machine reaches 10^7 in minutes)
# Prints one line per target ("# fuzz_model_json: 123456 execs in 60 s, 0 crashes") and exits 1 when any target
# crashed, leaked, hung or ran out of memory, naming the input that did it (kept under build-fuzz/fuzz-artifacts/).
# Environment: PS_FUZZ_BUILD_DIR (build-fuzz), PS_FUZZ_TIMEOUT (seconds one input may take, 5), PS_FUZZ_JOBS (build
# jobs), PS_FUZZ_SCRATCH (the folder the run's scratch folder goes in: /dev/shm when writable, else ${TMPDIR:-/tmp}),
# PS_FUZZ_PREBUILT=1 (use the targets already in the build folder: no install, build or replay, for a machine without
# the toolchain that was given the built targets and their libraries).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${PS_FUZZ_SECONDS:-60}
runs=0
keep=0
jobs=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --runs needs a positive number of executions" >&2; exit 2; }
      runs=$2
      shift 2
      ;;
    --keep) keep=1; shift ;;
    --jobs)
      [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --jobs needs a positive number of parallel jobs" >&2; exit 2; }
      jobs=$2
      shift 2
      ;;
    *)
      if [[ $1 =~ ^[0-9]+$ ]]; then secs=$1; shift; else break; fi
      ;;
  esac
done
build=${PS_FUZZ_BUILD_DIR:-build-fuzz}
# 5 s: a model at the 100,000-layer limit takes 0.5-0.8 s to load under ASan on a quiet core (measured 2026-11-27) and
# over 2 s on a loaded one; a real hang still shows within the minute of CI's run
timeout=${PS_FUZZ_TIMEOUT:-5}
# The default run: every reader of outside input (plan.json goes through the whole cost model).
all_targets=(fuzz_model_json fuzz_hf_config fuzz_layer_list fuzz_model_load fuzz_cluster_json fuzz_cli_options
                 fuzz_plan_json fuzz_costdb)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
((jobs == 1 || runs > 0)) || { echo "fuzz: --jobs splits a --runs run; give --runs N too" >&2; exit 2; }
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz: unknown target '$t' (targets: ${all_targets[*]})" >&2; exit 2; }
done

if [[ ${PS_FUZZ_PREBUILT:-0} != 1 ]]; then
  # ---- toolchain: the project's packages, then clang with its sanitizer/libFuzzer runtimes and OpenMP -------------------
  scripts/install-deps.sh clang libclang-rt-dev libomp-dev

  # ---- build: every library instrumented (coverage + ASan + UBSan), the targets linked with libFuzzer -------------------
  san="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
  mkdir -p "$build"
  cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DPS_FUZZ=ON -DPS_WITH_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$san" >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
  cmake --build "$build" --target ps_fuzzers -j "${PS_FUZZ_JOBS:-$(nproc)}"
fi

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export PSEARCH_DATA_DIR="$PWD/presets"

if [[ ${PS_FUZZ_PREBUILT:-0} != 1 ]]; then
  # ---- replay: every seed and kept crash input once (the ctest tests labelled fuzz) -------------------------------------
  echo "# fuzz: replaying seeds and regressions"
  ctest --test-dir "$build" -L fuzz --output-on-failure -R "^($(IFS='|'; echo "${targets[*]}"))_replay\$"
fi

# ---- fuzz each target for $secs seconds, one at a time ---------------------------------------------------------------
[[ $build == /* ]] || build="$PWD/$build"
artifacts="$build/fuzz-artifacts"
logs="$build/fuzz-logs"
mkdir -p "$artifacts" "$logs"
# The scratch folder (corpus copies, and TMPDIR of the targets, where the path-only readers get each input written to a
# file): on /dev/shm where there is a writable one, since creating, writing and unlinking that file on a disk
# filesystem each execution was a quarter of fuzz_costdb's time (measured 2026-11-27); else ${TMPDIR:-/tmp}.
# PS_FUZZ_SCRATCH names another parent folder.
scratch_parent=${PS_FUZZ_SCRATCH:-}
if [[ -z $scratch_parent ]]; then
  scratch_parent=${TMPDIR:-/tmp}
  [[ -d /dev/shm && -w /dev/shm ]] && scratch_parent=/dev/shm
fi
scratch=$(mktemp -d "$scratch_parent/psearch-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
failed=()
for t in "${targets[@]}"; do
  corpus="$scratch/$t/corpus"
  mkdir -p "$corpus" "$scratch/$t/tmp" "$artifacts/$t"
  # Seeds by content hash: two seed files with one content become one corpus entry. The kept corpus of earlier long
  # runs (tests/fuzz/corpus/<target>/, already named by hash) starts the run where they left off.
  while IFS= read -r f; do
    [[ -n $f && -f $f ]] && cp "$f" "$corpus/$(sha1sum "$f" | cut -c1-40)"
  done <"$build/tests/fuzz/$t.seeds"
  [[ -d tests/fuzz/corpus/$t ]] && cp tests/fuzz/corpus/"$t"/* "$corpus/" 2>/dev/null || true
  dict=()
  [[ -f tests/fuzz/dict/$t.dict ]] && dict=(-dict="$PWD/tests/fuzz/dict/$t.dict")
  log="$logs/$t.log"
  start=$(date +%s)
  rc=0
  limit=(-max_total_time="$secs")
  ((runs > 0)) && limit=(-runs="$runs")
  # --jobs: libFuzzer's own parallel mode, J processes on one shared corpus folder, each writing fuzz-K.log into
  # the current folder (here the target's scratch folder) and copied into the main log as each ends; the executions
  # are their sum
  ((jobs > 1)) && limit=(-runs="$(((runs + jobs - 1) / jobs))" -jobs="$jobs" -workers="$jobs")
  (cd "$scratch/$t" && TMPDIR="$scratch/$t/tmp" "$build/tests/fuzz/$t" "$corpus" "${dict[@]}" \
    "${limit[@]}" -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$t/") \
    >"$log" 2>&1 || rc=$?
  elapsed=$(($(date +%s) - start))
  execs=$(grep -oE '^stat::number_of_executed_units: [0-9]+' "$log" | awk '{n += $2} END {if (NR) print n}' || true)
  [[ -n $execs ]] || execs=$(grep -oE '^#[0-9]+' "$log" | tr -d '#' | tail -n1 || true)
  crash=$(grep -oE "Test unit written to .*" "$log" | sed 's/^Test unit written to //' | tail -n1 || true)
  if ((rc == 0)); then
    echo "# $t: ${execs:-0} execs in $elapsed s, 0 crashes"
    if ((keep)); then
      # only the inputs that add coverage, named by content hash, beside what was kept before
      mkdir -p "tests/fuzz/corpus/$t"
      TMPDIR="$scratch/$t/tmp" "$build/tests/fuzz/$t" -merge=1 "tests/fuzz/corpus/$t" "$corpus" \
        >"$logs/$t.merge.log" 2>&1 || echo "#   corpus merge failed: $logs/$t.merge.log"
      echo "#   corpus: $(ls "tests/fuzz/corpus/$t" | wc -l) inputs kept in tests/fuzz/corpus/$t"
    fi
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
if ((runs > 0)); then
  echo "# fuzz: ${#targets[@]} targets, $runs executions each, no crash"
else
  echo "# fuzz: ${#targets[@]} targets, $secs s each, no crash"
fi

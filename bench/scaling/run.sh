#!/usr/bin/env bash
# bench/scaling for 1, 2, 4 and 8 ranks (oversubscribed on a small machine), one JSON document: {"scaling": [...]}
# with bench_scaling's document for each rank count. Usage: bench/scaling/run.sh BUILD_DIR [bench_scaling options]
# e.g. bench/scaling/run.sh build --case a. OMP_NUM_THREADS sets the threads per rank [1].
set -eu
build=${1:?usage: run.sh BUILD_DIR [--case a|b|c] [--quick]}
shift
bin=$build/bench/scaling/bench_scaling
[[ -x $bin ]] || { echo "run.sh: $bin not built (cmake --build $build --target bench_scaling)" >&2; exit 2; }
launcher=$(command -v mpiexec || command -v mpirun) || { echo "run.sh: no mpiexec on PATH" >&2; exit 2; }
# Root in containers (Open MPI refuses it otherwise); more ranks than cores; ranks waiting in MPI yield the core.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
printf '{"scaling": ['
sep=""
for n in 1 2 4 8; do
  out=$("$launcher" -n "$n" --bind-to none "$bin" "$@")
  printf '%s\n%s' "$sep" "$out"
  sep=","
done
printf '\n]}\n'

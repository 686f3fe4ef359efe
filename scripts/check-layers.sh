#!/usr/bin/env bash
# The include graph against the floors of the library folders (ctest: check_layers). A folder may include its own
# headers, the public header of a folder on a lower floor, and only the system headers of the libraries its row
# allows; anything else (a higher or same-floor folder, another folder's internal header, <mpi.h> or <hdf5.h> in a
# pure folder) is printed as file:line and the script exits 1.
#   scripts/check-layers.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

# folder     floor  public header     libraries whose headers it may include (- for none)
layers='
common       0      ps_common.h       -
models       1      ps_models.h       -
schedules    1      ps_schedules.h    -
hw           1      ps_hw.h           -
comm         1      ps_comm.h         mpi nccl
cost         2      ps_cost.h         -
search       3      ps_search.h       -
calib        3      ps_calib.h        mpi hwloc cuda nccl blas
costdb       4      ps_costdb.h       mpi hdf5 cuda nccl
mpi          4      ps_mpi.h          mpi
jobs         4      ps_jobs.h         mpi cuda nccl blas
cli          5      ps_cli.h          mpi hdf5 hwloc cuda nccl
'
# library -> the system headers that belong to it (extended regular expressions on the name inside <>)
libs='
mpi    ^mpi\.h$
hdf5   ^(hdf5|H5).*\.h$
hwloc  ^hwloc
cuda   ^(cuda|cublas|nvml)
nccl   ^nccl
blas   ^(cblas|openblas)
'

awk -v layers="$layers" -v libs="$libs" '
BEGIN {
    n = split(layers, rows, "\n")
    for (i = 1; i <= n; i++) {
        k = split(rows[i], f, /[ \t]+/)
        if (k < 4 || f[1] == "") continue
        floor[f[1]] = f[2]; public[f[3]] = f[1]
        for (j = 4; j <= k; j++) allowed[f[1], f[j]] = 1
    }
    public["ps_config.h"] = "common" # generated from cmake/ps_config.h.in
    n = split(libs, rows, "\n")
    for (i = 1; i <= n; i++)
        if (split(rows[i], f, /[ \t]+/) == 2) pattern[f[1]] = f[2]
    bad = 0
}
FNR == 1 { dir = FILENAME; sub(/\/.*/, "", dir) }
/^[ \t]*#[ \t]*include[ \t]*[<"]/ {
    line = $0
    sub(/^[ \t]*#[ \t]*include[ \t]*/, "", line)
    quote = substr(line, 1, 1)
    name = substr(line, 2); sub(/[">].*/, "", name)
    if (quote == "<") {
        for (lib in pattern)
            if (name ~ pattern[lib] && !((dir, lib) in allowed)) {
                printf "%s:%d: %s/ (floor %d) includes <%s>, a %s header it may not use\n", FILENAME, FNR, dir,
                       floor[dir], name, lib
                bad = 1
            }
        next
    }
    if ((name in public && public[name] == dir) || system("test -e " dir "/" name) == 0) next # its own header
    if (!(name in public)) {
        printf "%s:%d: %s/ includes \"%s\", no folder'"'"'s public header\n", FILENAME, FNR, dir, name
        bad = 1
    } else if (floor[public[name]] >= floor[dir]) {
        printf "%s:%d: %s/ (floor %d) includes \"%s\" of %s/ (floor %d): only lower floors may be included\n",
               FILENAME, FNR, dir, floor[dir], name, public[name], floor[public[name]]
        bad = 1
    }
}
END { exit bad }
' $(for d in $(printf '%s\n' "$layers" | awk 'NF >= 4 {print $1}'); do
      find "$d" -maxdepth 1 \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort
    done)

#!/usr/bin/env bash
# Pack what a GPU machine without psearch's dependencies needs to run a build made here: the shared libraries that
# psearch, Open MPI's launcher and its plugins load (their whole closure, as ldd resolves it on this machine), Open
# MPI's help texts and settings, as one tar.xz of absolute paths. Left out: the C and C++ runtimes (glibc, libgcc_s,
# libstdc++: the target's own are newer, and CUDA's libraries need them) and the CUDA, cuBLAS and NCCL libraries
# (hundreds of MB; the GPU machine has its own, found by scripts/gpu-check.sh).
#
# On the GPU machine, as root, unpack without replacing anything it already has:
#   tar -C / --skip-old-files -xJf BUNDLE && ldconfig
# This is how the lent GPU machines of docs/gpu.md, whose image has CUDA but no MPI nor HDF5, ran a build made here.
#
#   scripts/gpu-bundle.sh BUILD_DIR OUT.tar.xz
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: scripts/gpu-bundle.sh BUILD_DIR OUT.tar.xz" >&2
  exit 2
fi
build=$1
out=$2
psearch=$build/cli/psearch
[[ -x $psearch ]] || { echo "gpu-bundle: $psearch: not built" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "gpu-bundle: mpirun not found (scripts/install-deps.sh)" >&2; exit 2; }

ompi_lib=$(ompi_info --path libdir --parsable 2>/dev/null | sed -n 's/^path:libdir://p')
ompi_pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
ompi_data=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
ompi_etc=$(ompi_info --path sysconfdir --parsable 2>/dev/null | sed -n 's/^path:sysconfdir://p')
launcher=$(readlink -f "$(command -v mpirun)")
bindir=$(dirname "$launcher")

# The objects whose libraries travel: psearch, the launcher (mpirun, mpiexec and orterun are one program), the
# daemon, ompi_info, and every plugin and library of Open MPI's own folders.
objs=("$psearch" "$launcher")
for b in orted ompi_info; do [[ -x $bindir/$b ]] && objs+=("$bindir/$b"); done
while IFS= read -r f; do objs+=("$f"); done < <(find "$ompi_lib" "$ompi_pkglib" -maxdepth 1 -name '*.so*' -type f)

skip='^(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|libgcc_s|libstdc\+\+|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia-[a-z-]*)\.so'
# A path and every link on the way to its file (libopenblas.so.0 -> /etc/alternatives/... -> the file), each under
# its canonical folder: /lib is a link to /usr/lib on merged-/usr systems, and a tar entry through it would replace
# that link with a folder when unpacked.
chain() {
  local p=$1 t
  for _ in 1 2 3 4 5 6 7 8; do
    p="$(readlink -f "$(dirname "$p")")/$(basename "$p")"
    echo "$p"
    [[ -L $p ]] || return 0
    t=$(readlink "$p")
    [[ $t == /* ]] || t="$(dirname "$p")/$t"
    p=$t
  done
}
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for o in "${objs[@]}"; do
  [[ $o == "$psearch" ]] || chain "$o" # psearch itself comes with its build
  # ldd: "name => /path (addr)"; a library it cannot find is reported and left out (the plugin would not load here
  # either)
  ldd "$o" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    chain "$path"
  done
done | sort -u >"$list"
# the launcher's other names, and Open MPI's texts and settings
for n in mpirun mpiexec orterun; do [[ -e $bindir/$n ]] && chain "$bindir/$n"; done >>"$list"
find "$ompi_lib" "$ompi_pkglib" -maxdepth 1 -name '*.so*' >>"$list"
[[ -d $ompi_data ]] && echo "$ompi_data" >>"$list"
[[ -d $ompi_etc ]] && echo "$ompi_etc" >>"$list"
sort -u -o "$list" "$list"
tar -C / -cJf "$out" --verbatim-files-from -T <(sed 's|^/||' "$list")
echo "gpu-bundle: $(wc -l <"$list") paths, $(du -h "$out" | cut -f1) in $out"

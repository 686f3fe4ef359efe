#!/usr/bin/env bash
# Install the Debian 12 packages psearch builds and tests with, only those missing. Uses sudo when not root.
# Extra package names given as arguments are installed too (scripts/fuzz.sh adds clang and its runtimes).
# CUDA/cuBLAS/NCCL are optional and not Debian packages: the build uses them when nvcc is on PATH.
set -euo pipefail

pkgs=(
  build-essential cmake pkg-config              # toolchain
  libopenmpi-dev openmpi-bin                    # MPI (Open MPI 4.1)
  libhdf5-openmpi-dev hdf5-tools                # parallel HDF5 (cost database) and h5dump
  libhwloc-dev hwloc                            # node topology for --cluster auto
  libopenblas-dev                               # CPU GEMM microbenchmarks
  libjansson-dev                                # JSON with line:column errors
  libcmocka-dev                                 # unit tests
  slurm-wlm                                     # the 8-node local Slurm cluster of the slurm-labelled tests
  valgrind                                      # the valgrind-labelled memcheck test
  libxml2-utils                                 # xmllint: the sweep tests check index.html is well-formed
  procps                                        # pgrep: the costdb test finds the ranks it kills (absent from minimal images)
  python3                                       # the exec test reads psearch's JSON results
  strace                                        # the sweep test counts the opens of a model file
  "$@"
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "# install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 3; }
  sudo_cmd=(sudo)
fi
echo "# install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

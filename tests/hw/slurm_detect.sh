#!/bin/sh
# `--cluster auto` under the local Slurm cluster (docs notes/platform.md: emulated nodes on one host): 2 nodes, one
# rank each. Skipped (exit 77) where there is no srun or no Slurm controller answers.
exe="$1"
command -v srun >/dev/null 2>&1 || { echo "# slurm_detect: no srun: skipped"; exit 77; }
timeout 10 sinfo -h >/dev/null 2>&1 || { echo "# slurm_detect: no Slurm controller answers: skipped"; exit 77; }
# Emulated nodes share one host, so Open MPI's shared-memory transport would collide across them.
export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo
exec timeout 100 srun -N 2 -n 2 --mpi=pmix --immediate=30 "$exe" --slurm-nodes 2

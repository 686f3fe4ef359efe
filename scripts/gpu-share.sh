#!/usr/bin/env bash
# Run one MPI rank so that several ranks can share one GPU in an NCCL communicator (docs/gpu.md): NCCL refuses two
# ranks on one device of one host ("Duplicate GPU detected"), and takes the host from NCCL_HOSTID when it is set, so
# each rank names a host of its own and NCCL joins them through its socket transport on the loopback.
#   mpiexec -n 2 scripts/gpu-share.sh psearch calibrate --quick --out gpu2.h5
export NCCL_HOSTID="psearch-rank-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${SLURM_PROCID:-0}}}"
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo} NCCL_IB_DISABLE=1
exec "$@"

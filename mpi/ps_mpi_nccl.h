/* NCCL communicators bootstrapped over MPI, for the code that runs collectives on GPUs (the calibration's, hw/, and
 * the executor's cuda backend, jobs/). Built only with NCCL (PS_HAVE_NCCL); the caller links NCCL::NCCL. */
#ifndef PS_MPI_NCCL_H
#define PS_MPI_NCCL_H

#include <mpi.h>
#include <nccl.h>

#include "ps_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator of g's members: g's rank 0 makes the unique id and broadcasts it, every member joins with its rank
 * in g. `local` is a failure the calling member had before (PS_OK if none): it still takes part in the broadcast and
 * the agreement, so that no member waits alone, and every member then returns the failure. On any failure no member
 * keeps a communicator (*out NULL; one made on this member is aborted, locally). Collective over g. */
ps_status ps_mpi_nccl_comm(MPI_Comm g, ps_status local, ncclComm_t *out);

#ifdef __cplusplus
}
#endif
#endif

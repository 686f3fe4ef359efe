/* NCCL communicators bootstrapped over MPI (ps_comm.h). */
#include <string.h>

#include <nccl.h>

#include "ps_comm.h"

ps_status ps_mpi_nccl_comm(MPI_Comm g, ps_status local, ncclComm_t *out)
{
    *out = NULL;
    int n = 0, me = 0;
    PS_MPI(MPI_Comm_size(g, &n));
    PS_MPI(MPI_Comm_rank(g, &me));
    struct {
        int ok;
        ncclUniqueId id;
    } msg;
    memset(&msg, 0, sizeof msg);
    ps_status st = local;
    if (me == 0) {
        ncclResult_t e = ncclGetUniqueId(&msg.id);
        msg.ok = e == ncclSuccess;
        if (!msg.ok && st == PS_OK) st = PS_FAIL(PS_ERR_SYSTEM, "ncclGetUniqueId: %s", ncclGetErrorString(e));
    }
    PS_MPI(MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, g));
    if (st == PS_OK && !msg.ok) st = PS_FAIL(PS_ERR_SYSTEM, "the group's first rank could not make an NCCL id");
    /* agree before joining: ncclCommInitRank blocks until every member joins, and a member that failed will not */
    PS_TRY(ps_mpi_agree_status(g, st, "bootstrapping an NCCL communicator"));
    ncclResult_t e = ncclCommInitRank(out, n, msg.id, me);
    if (e != ncclSuccess) {
        *out = NULL;
        st = PS_FAIL(PS_ERR_SYSTEM, "ncclCommInitRank (%d ranks, rank %d): %s", n, me, ncclGetErrorString(e));
    }
    st = ps_mpi_agree_status(g, st, "creating an NCCL communicator");
    if (st != PS_OK && *out) {
        ncclCommAbort(*out); /* local: a peer that failed will not join a collective teardown */
        *out = NULL;
    }
    return st;
}

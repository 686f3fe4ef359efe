/* MPI error conversion and outcome agreement (see ps_mpi.h). */
#include <string.h>

#include "ps_mpi.h"

ps_status ps_mpi_status(int rc, const char *what, const char *file, int line)
{
    if (rc == MPI_SUCCESS) return PS_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error code %d", rc);
    /* Name the MPI function, not the whole argument list the macro saw. */
    char fn[64];
    ps_strlcpy(fn, what, sizeof fn);
    char *paren = strchr(fn, '(');
    if (paren) *paren = '\0';
    return ps_error_set(PS_ERR_SYSTEM, file, line, "%s failed: %s", fn, msg);
}

ps_status ps_mpi_agree(MPI_Comm comm, ps_status local, ps_status *worst, int *first_failing)
{
    int rank = 0, nranks = 1;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &nranks));
    int in[2] = {(int)local, local != PS_OK ? -rank : -nranks}, out[2];
    /* One MAX reduction carries both: the worst status, and (negated) the lowest failing rank. */
    PS_MPI(MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, comm));
    *worst = (ps_status)out[0];
    *first_failing = -out[1];
    return PS_OK;
}

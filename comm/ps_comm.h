/* comm/: the MPI floor under every part that communicates (hw detection and calibration, the cost database, the
 * distributed search, the executor): MPI return codes as ps_status, agreeing on one outcome across ranks, gathering
 * strings, one rank's input file for all, and NCCL communicators bootstrapped over MPI. No psearch logic above
 * common/. The search across ranks and the sweep records are mpi/'s. */
#ifndef PS_COMM_H
#define PS_COMM_H

#include <mpi.h>

#include "ps_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* MPI_Init_thread for the psearch command. A process started without a launcher (no mpirun, srun or PMI
 * environment) is an MPI singleton of one rank; Open MPI would still start a helper daemon for it and try every
 * point-to-point transport, which took 0.2-0.4 s of a 0.45 s single-GPU search. For such a process only, and only
 * where the user has not set them, this asks Open MPI for no daemon (ess_singleton_isolated: no MPI_Comm_spawn, which
 * psearch never calls) and the ob1 messaging layer (a singleton talks only to itself). Launched ranks of Open MPI 4
 * get a new shared-memory folder of their own for one-sided windows (/dev/shm/psearch-osc.XXXXXX, else under TMPDIR
 * or /tmp; locked while the process lives, removed at exit, and by the next start once its process is gone), unless
 * the user set OMPI_MCA_osc_rdma_backing_directory: Open MPI 4 named the windows' files so that rank groups on one
 * node opening windows at once shared one (open-mpi/ompi#9492; comm/comm.c). */
int ps_mpi_init(int *argc, char ***argv, int required, int *provided);
/* Whether this process was started by an MPI launcher (mpirun, srun with PMI/PMIx), from its environment. */
bool ps_mpi_launched(void);

/* Turn an MPI return code into PS_OK or PS_ERR_SYSTEM with "what: <MPI error string>". Needs an error handler
 * that returns (MPI_ERRORS_RETURN) on the communicator, which the psearch command installs. */
ps_status ps_mpi_status(int rc, const char *what, const char *file, int line);
#define PS_MPI(call) PS_TRY(ps_mpi_status((call), #call, __FILE__, __LINE__))
/* For functions that release resources: sets `st` and jumps to `label` on failure. */
#define PS_MPI_GOTO(st, call, label)                                                                                   \
    do {                                                                                                               \
        int ps_mpi_rc_ = (call);                                                                                       \
        if (ps_mpi_rc_ != MPI_SUCCESS) {                                                                               \
            (st) = ps_mpi_status(ps_mpi_rc_, #call, __FILE__, __LINE__);                                               \
            goto label;                                                                                                \
        }                                                                                                              \
    } while (0)

/* Every rank passes its local status; all get the worst one (PS_OK < ... < PS_ERR_SYSTEM) and the lowest rank whose
 * status is not PS_OK (nranks if none), so exactly one rank reports the error. */
ps_status ps_mpi_agree(MPI_Comm comm, ps_status local, ps_status *worst, int *first_failing);
/* ps_mpi_agree for a step that every rank must leave together: returns `local` where it failed (that rank's message
 * stands), an MPI failure of the agreement itself, or, on the ranks that succeeded while another failed, the worst
 * status with "<what> failed on rank N: <rank N's message>" naming the lowest failing rank and its cause (so the
 * cause is what the user reads whichever rank reports); PS_OK when every rank succeeded. MPI_COMM_NULL (a command run
 * without MPI, as ps_mpi_bcast_file takes it) returns `local`, so a step is written once for both.
 * The two do not stand in for each other: on a failure ps_mpi_agree_status follows its reduction with a broadcast of
 * the message, so at any one point every rank must call the same one. A rank that fails alone and goes on to
 * ps_mpi_agree while the others agree with ps_mpi_agree_status matches their reduction, then leaves them in a
 * broadcast it never joins (a hang, or mismatched collectives). A function whose steps are agreed this way agrees
 * every step that may fail on one rank alone before its next collective, so that all its ranks leave it together. */
ps_status ps_mpi_agree_status(MPI_Comm comm, ps_status local, const char *what);

/* Gather one NUL-terminated string from every rank at `root` (results of a rank's share of a search, as JSON).
 * On root, *all gets nranks heap strings in rank order (free with ps_mpi_strings_free); elsewhere NULL. */
ps_status ps_mpi_gather_strings(MPI_Comm comm, int root, const char *mine, char ***all, int *n);
void ps_mpi_strings_free(char **all, int n);

/* Read the file `path` on root and give every rank of comm its bytes, so that all ranks parse one input whatever
 * their own file system shows (an input edited during the launch, a file on one node only). *buf gets a heap copy
 * of the *len bytes followed by a NUL (free it); path matters on root only. When root cannot read the file no bytes
 * move and every rank fails alike: root with ps_read_file's error naming the file, the others with the same status
 * and "reading the input file failed on rank R: " followed by root's message, so the usual agreement prints the
 * cause once. Collective over comm; MPI_COMM_NULL (a command run without MPI) just reads the file. */
ps_status ps_mpi_bcast_file(MPI_Comm comm, int root, const char *path, char **buf, size_t *len);

/* ---- NCCL communicators over MPI (comm/nccl.c, built with NCCL only; the caller links NCCL::NCCL) ----
 * For the code that runs collectives on GPUs: the calibration's (calib/) and the executor's cuda backend (jobs/).
 * `struct ncclComm *` is NCCL's ncclComm_t, named without <nccl.h> so that this header needs no NCCL. */
struct ncclComm;
/* A communicator of g's members: g's rank 0 makes the unique id and broadcasts it, every member joins with its rank
 * in g. `local` is a failure the calling member had before (PS_OK if none): it still takes part in the broadcast and
 * the agreement, so that no member waits alone, and every member then returns the failure. On any failure no member
 * keeps a communicator (*out NULL; one made on this member is aborted, locally). Collective over g. */
ps_status ps_mpi_nccl_comm(MPI_Comm g, ps_status local, struct ncclComm **out);

#ifdef __cplusplus
}
#endif
#endif

/* The search across ranks: every rank holds the same job (the same inputs give the same unit list), the units are
 * shared out statically or handed out one by one through an MPI window, ranks share their pruning floors through the
 * same window, and a user-defined MPI_Op merges the top k in the search's total order, so rank 0's answer is
 * byte-identical for any number of ranks and threads. */
#ifndef PS_MPI_SEARCH_H
#define PS_MPI_SEARCH_H

#include <mpi.h>

#include "ps_search.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How units reach ranks.
 * DYNAMIC: self-scheduling: guided chunks of units from a counter on rank 0 (request-based RMA, prefetched);
 * STATIC:  longest-processing-time-first over the units' estimated work (ps_search_job_unit_work), no messages. */
typedef enum { PS_DIST_DYNAMIC = 0, PS_DIST_STATIC = 1 } ps_dist;
const char *ps_dist_name(ps_dist d);
int ps_dist_find(const char *name); /* -1 when unknown */

/* What one rank did (every rank fills its own). */
typedef struct {
    int64_t units;   /* units this rank searched */
    double work;     /* their estimated work, DP cells (ps_search_job_unit_work) */
    double busy_s;   /* seconds the rank spent in the search job (threads' units, and the MPI calls they made) */
    double mpi_s;    /* seconds in MPI: unit hand-out, floor sharing, and the reduction after the job */
    double source_s; /* of which unit hand-out and floor sharing, during the job */
    double wall_s;   /* whole call, window set-up to reduced result */
    int shared;      /* 1 when floors and units went through the MPI window, 0 when MPI's thread level forbade it */
} ps_mpi_search_stats;

/* Search on every rank of comm; collective. On rank 0, *all gets the merged result (top k, the even-split baseline,
 * summed counters, the binding of the plan closest to fitting); elsewhere it is left empty. A rank that fails
 * (memory, the cost model) sends its error instead of results; every rank then returns an error, rank 0 the lowest
 * failing rank's message ("rank N: ..."), the others "the search failed (rank 0 reports why)". */
ps_status ps_mpi_search(MPI_Comm comm, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                        const ps_search_opts *o, ps_dist dist, ps_search_result *all,
                        ps_mpi_search_stats *stats) PS_NODISCARD;

#ifdef __cplusplus
}
#endif
#endif

/* mpi/: the search across ranks, and sweep bookkeeping.
 * The search across ranks: every rank holds the same job (the same inputs give the same unit list), the units are
 * shared out statically or handed out one by one through an MPI window, ranks share their pruning floors through the
 * same window, and a user-defined MPI_Op merges the top k in the search's total order, so rank 0's answer is
 * byte-identical for any number of ranks and threads. */
#ifndef PS_MPI_H
#define PS_MPI_H

#include <jansson.h>
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

/* Something to call often during a long search, from the thread that takes the next work unit (calls never overlap,
 * so it may use MPI under MPI_THREAD_SERIALIZED): the sweep's rank 0 answers other groups with it while it searches a
 * cell of its own (mpi/sweep.c). */
typedef struct ps_mpi_poll {
    void (*fn)(void *arg);
    void *arg;
} ps_mpi_poll;

/* Search on every rank of comm; collective. On rank 0, *all gets the merged result (top k, the even-split baseline,
 * summed counters, the binding of the plan closest to fitting); elsewhere it is left empty. A rank that fails
 * (memory, the cost model) sends its error instead of results; every rank then returns an error, rank 0 the lowest
 * failing rank's message ("rank N: ..."), the others "the search failed (rank 0 reports why)". */
ps_status ps_mpi_search(MPI_Comm comm, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                        const ps_search_opts *o, ps_dist dist, ps_search_result *all,
                        ps_mpi_search_stats *stats) PS_NODISCARD;
/* The same, calling poll (when not NULL) before each work unit this rank takes. */
ps_status ps_mpi_search_polled(MPI_Comm comm, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                               const ps_search_opts *o, ps_dist dist, const ps_mpi_poll *poll,
                               ps_search_result *all, ps_mpi_search_stats *stats) PS_NODISCARD;

/* ---- sweep bookkeeping (mpi/sweep.c) ----
 * The record of finished cells (one JSON line per cell in an append-only file, each appended with one write and made
 * durable with fsync), resuming from it, sharing which cells are done across ranks, and the progress line rank 0
 * shows. Knows nothing of plans or cost formulas: a record is an opaque JSON object with a "cell" key. */
typedef struct ps_sweep_log ps_sweep_log;

/* Open (creating if missing) the record file `path` and read the records it holds. A last line without its newline
 * is a record torn by a kill during its append: it is dropped and the file truncated to the last whole record, so
 * the next append starts on a line of its own (*torn_bytes, if not NULL, gets the bytes dropped). A whole line that
 * is not a JSON object with a string "cell" -> PS_ERR_INPUT naming the file and line. */
ps_status ps_sweep_log_open(const char *path, ps_sweep_log **out, size_t *torn_bytes) PS_NODISCARD;
/* The sweep records (JSON objects with a "cell" string, one per line) of buf[0, len), read from `path`, appended to
 * the array recs; a last line without its newline (a torn append) is left out, blank lines skipped. Anything else:
 * PS_ERR_INPUT naming path:line, and the parser's reason in why[why_cap] (when not NULL). Shared by the sweep's own
 * log (ps_sweep_log_open) and the readers of earlier sweeps (psearch sweep --compare / --history). */
ps_status ps_sweep_records_parse(const char *path, const char *buf, size_t len, json_t *recs, char *why,
                                 size_t why_cap) PS_NODISCARD;
void ps_sweep_log_close(ps_sweep_log *lg);
int ps_sweep_log_count(const ps_sweep_log *lg);
/* Record i (0 .. count-1) in file order; borrowed, valid until the log is closed. */
const json_t *ps_sweep_log_at(const ps_sweep_log *lg, int i);
/* Append one record as one line: a single write() of the whole line (looped only if the kernel writes less), then
 * fsync, so after a crash the file holds whole records plus at most one torn last line. The record must have a
 * string "cell"; the log keeps a reference. */
ps_status ps_sweep_log_append(ps_sweep_log *lg, json_t *rec) PS_NODISCARD;

/* Root's done[n] flags to every rank of comm, so all ranks skip the same cells. Collective. */
ps_status ps_sweep_share_done(MPI_Comm comm, int root, unsigned char *done, int n) PS_NODISCARD;

/* ---- cells across rank groups (mpi/sweep.c) ----
 * A sweep's cells differ in search work by orders of magnitude, and a small one searched by every rank is mostly
 * synchronisation. So the ranks split into groups (MPI sub-communicators of consecutive ranks) and rank 0 hands the
 * cells out one at a time to whichever group asks, largest estimate first (Graham's LPT list scheduling, done
 * dynamically so that estimates need only be roughly right). A cell whose estimate exceeds the sweep's total
 * divided by the number of groups would alone outlast a group's even share: it is searched by all ranks together,
 * after the hand-out. Rank 0 searches in group 0 too, and answers the other groups between its own work units
 * (ps_mpi_poll), so no rank sits idle waiting for it; it alone calls take(), as cells finish. */
typedef struct {
    int n_groups;  /* groups of the hand-out */
    int *handed;   /* cells handed out to groups, largest estimate first (ties: lower cell first) */
    int n_handed;
    int *shared;   /* cells searched by all ranks, largest first, after the hand-out */
    int n_shared;
} ps_sweep_groups;

/* Split the cells not done[] (work[i]: cell i's estimated search work, >= 0) for nranks ranks. group_ranks: ranks
 * per group, or 0 for automatic: one rank per group when there are as many cells as ranks, else the ranks spread
 * over the cells (nranks / cells per group); ranks left over join the groups (sizes differ by at most one). */
ps_status ps_sweep_groups_make(const double *work, const unsigned char *done, int n_cells, int nranks,
                               int group_ranks, ps_sweep_groups *out) PS_NODISCARD;
void ps_sweep_groups_free(ps_sweep_groups *g);
/* The group of `rank` (consecutive ranks: rank * n_groups / nranks); group 0 holds rank 0. */
int ps_sweep_group_of(int rank, int nranks, int n_groups);

typedef struct {
    /* Search `cell` on every rank of `group` (collective over it). On the group's rank 0, *out gets malloc'ed bytes
     * for take() (NULL elsewhere); a failure is the cell's and the sweep stops. poll is NULL, or to pass to the
     * search (rank 0 of the sweep only). */
    ps_status (*run)(void *arg, int cell, MPI_Comm group, const ps_mpi_poll *poll, char **out, size_t *len);
    /* Rank 0 of the sweep: a finished cell's bytes, in the order cells finish. */
    ps_status (*take)(void *arg, int cell, const char *bytes, size_t len);
    void *arg;
} ps_sweep_cell_ops;

typedef struct {
    double busy_s;  /* seconds this rank spent in run() */
    double cpu_s;   /* CPU seconds of this process (all its threads) in run(): its share of the work, which an
                     * oversubscribed machine's wall time hides */
    double take_s;  /* rank 0: seconds in take() (records, tables) */
    int cells;      /* cells this rank's group searched, shared ones included */
    int group;      /* this rank's group in the hand-out */
    int group_size; /* ranks in it */
} ps_sweep_run_stats;

/* CPU seconds this process has used, all threads (CLOCK_PROCESS_CPUTIME_ID). */
double ps_sweep_cpu_s(void);

/* Run every cell of g; collective over comm. Returns this rank's own outcome (a rank that only learned of another's
 * failure returns PS_OK); *stop is 1 on every rank when any failed, so that the caller's agreement lets the failing
 * rank say why. */
ps_status ps_sweep_run_groups(MPI_Comm comm, const ps_sweep_groups *g, const ps_sweep_cell_ops *ops,
                              ps_sweep_run_stats *stats, int *stop) PS_NODISCARD;

/* Progress on stderr: a bar redrawn in place with cells done / total and ETA when stderr is a terminal, one plain
 * line per cell otherwise (logs of nightly jobs). Only the rank that owns it prints (rank 0). */
typedef struct {
    int total;       /* cells in the sweep */
    int done;        /* cells finished, earlier runs included */
    int run_done;    /* cells finished by this run (the ETA averages over these) */
    double t0;       /* start of this run (MPI_Wtime, s) */
    int tty;
    int enabled;
} ps_sweep_progress;

void ps_sweep_progress_start(ps_sweep_progress *p, int enabled, int total, int already_done);
/* One more cell finished; `what` says which and how it went (one line, no newline). */
void ps_sweep_progress_cell(ps_sweep_progress *p, const char *what);
/* End the bar's line (a terminal) so later output starts on a line of its own. */
void ps_sweep_progress_end(ps_sweep_progress *p);

#ifdef __cplusplus
}
#endif
#endif

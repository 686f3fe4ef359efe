/* Sweep bookkeeping: the record of finished cells (one JSON line per cell in an append-only file, each appended with
 * one write and made durable with fsync), resuming from it, sharing which cells are done across ranks, and the
 * progress line rank 0 shows. Knows nothing of plans or cost formulas: a record is an opaque JSON object with a
 * "cell" key. */
#ifndef PS_SWEEP_H
#define PS_SWEEP_H

#include <jansson.h>
#include <mpi.h>

#include "ps_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ps_sweep_log ps_sweep_log;

/* Open (creating if missing) the record file `path` and read the records it holds. A last line without its newline
 * is a record torn by a kill during its append: it is dropped and the file truncated to the last whole record, so
 * the next append starts on a line of its own (*torn_bytes, if not NULL, gets the bytes dropped). A whole line that
 * is not a JSON object with a string "cell" -> PS_ERR_INPUT naming the file and line. */
ps_status ps_sweep_log_open(const char *path, ps_sweep_log **out, size_t *torn_bytes) PS_NODISCARD;
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

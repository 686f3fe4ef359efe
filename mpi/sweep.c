/* Sweep bookkeeping (see ps_mpi.h): the append-only record of finished cells, resume, and progress. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ps_comm.h"
#include "ps_mpi.h"

struct ps_sweep_log {
    char path[PATH_MAX];
    int fd;
    json_t *recs; /* array of the records, file order */
};

/* Make the file's directory entry durable: without it a crash right after creating the file may lose the file even
 * though its records were fsync'ed. */
static ps_status fsync_dir_of(const char *path)
{
    char buf[PATH_MAX];
    ps_strlcpy(buf, path, sizeof buf);
    int dfd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (dfd < 0) return PS_FAIL(PS_ERR_SYSTEM, "%s: cannot open its folder: %s", path, strerror(errno));
    int rc = fsync(dfd);
    int err = errno;
    close(dfd);
    if (rc != 0 && err != EINVAL)
        return PS_FAIL(PS_ERR_SYSTEM, "%s: fsync of its folder failed: %s", path, strerror(err));
    return PS_OK;
}

void ps_sweep_log_close(ps_sweep_log *lg)
{
    if (!lg) return;
    if (lg->fd >= 0) close(lg->fd);
    json_decref(lg->recs);
    free(lg);
}

ps_status ps_sweep_records_parse(const char *path, const char *buf, size_t len, json_t *recs, char *why,
                                 size_t why_cap)
{
    size_t line = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        if (!nl) break; /* a torn last line: not a record */
        size_t n = (size_t)(nl - (buf + i));
        line++;
        if (n > 0) {
            json_error_t err;
            json_t *j = json_loadb(buf + i, n, 0, &err);
            if (!j || !json_is_object(j) || !json_is_string(json_object_get(j, "cell"))) {
                json_decref(j);
                if (why)
                    snprintf(why, why_cap, "%s", j ? "a JSON object with a \"cell\" string is expected" : err.text);
                return PS_FAIL(PS_ERR_INPUT, "%s:%zu: not a sweep record", path, line);
            }
            if (json_array_append_new(recs, j) != 0) return PS_FAIL(PS_ERR_SYSTEM, "out of memory reading %s", path);
        }
        i += n + 1;
    }
    return PS_OK;
}

/* Parse the whole lines of buf[0, len) into records. */
static ps_status parse_records(ps_sweep_log *lg, const char *buf, size_t len)
{
    char why[200] = "";
    ps_status st = ps_sweep_records_parse(lg->path, buf, len, lg->recs, why, sizeof why);
    if (st != PS_ERR_INPUT) return st;
    char msg[600];
    snprintf(msg, sizeof msg, "%s", ps_error_message());
    ps_error_clear();
    return PS_FAIL(PS_ERR_INPUT, "%s (%s); the file is corrupt beyond a torn last line: move it away to start the "
                                 "sweep again", msg, why);
}

/* The whole file, read through the descriptor we append to (the same file whatever happens to the path) and with no
 * size cap: a long sweep's records are data, not an input description (ps_read_file refuses those past 64 MiB). */
static ps_status read_fd(const ps_sweep_log *lg, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    struct stat sb;
    if (fstat(lg->fd, &sb) != 0) return PS_FAIL(PS_ERR_SYSTEM, "%s: fstat failed: %s", lg->path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return PS_FAIL(PS_ERR_INPUT, "%s: the sweep records are not a regular file", lg->path);
    if ((uintmax_t)sb.st_size >= SIZE_MAX) return PS_FAIL(PS_ERR_SYSTEM, "%s: too large to read", lg->path);
    size_t n = (size_t)sb.st_size;
    char *buf = ps_calloc(n + 1, 1);
    if (!buf) return PS_FAIL(PS_ERR_SYSTEM, "out of memory reading %s (%zu bytes)", lg->path, n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(lg->fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            return PS_FAIL(PS_ERR_SYSTEM, "%s: read failed: %s", lg->path, r < 0 ? strerror(errno) : "file shrank");
        }
        got += (size_t)r;
    }
    *out = buf;
    *len = n;
    return PS_OK;
}

ps_status ps_sweep_log_open(const char *path, ps_sweep_log **out, size_t *torn_bytes)
{
    *out = NULL;
    if (torn_bytes) *torn_bytes = 0;
    ps_sweep_log *lg = ps_calloc(1, sizeof *lg);
    if (!lg) return PS_ERR_SYSTEM;
    lg->fd = -1;
    ps_strlcpy(lg->path, path, sizeof lg->path);
    lg->recs = json_array();
    if (!lg->recs) {
        free(lg);
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory opening %s", path);
    }
    ps_status st = PS_OK;
    char *buf = NULL;
    struct stat sb;
    int existed = stat(path, &sb) == 0;
    /* O_APPEND: every write lands at the end even if something else appended meanwhile; no O_TRUNC, ever. */
    lg->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (lg->fd < 0) {
        st = PS_FAIL(PS_ERR_INPUT, "%s: cannot open the sweep records: %s", path, strerror(errno));
        goto fail;
    }
    /* One sweep per folder: a second one would record every cell again, and the folder could never be resumed. The
     * lock goes with the process, however it ends (a killed sweep leaves none behind). */
    PS_TRY_GOTO(st, ps_lock_fd(lg->fd, path), fail);
    if (!existed) PS_TRY_GOTO(st, fsync_dir_of(path), fail);
    size_t len = 0;
    PS_TRY_GOTO(st, read_fd(lg, &buf, &len), fail);
    size_t whole = len;
    while (whole > 0 && buf[whole - 1] != '\n') whole--;
    if (whole < len) {
        /* A torn append: the kill came between the start and the end of one write. Drop it for good. */
        if (ftruncate(lg->fd, (off_t)whole) != 0 || fsync(lg->fd) != 0) {
            st = PS_FAIL(PS_ERR_SYSTEM, "%s: cannot drop the torn last record: %s", path, strerror(errno));
            goto fail;
        }
        if (torn_bytes) *torn_bytes = len - whole;
    }
    PS_TRY_GOTO(st, parse_records(lg, buf, whole), fail);
    free(buf);
    *out = lg;
    return PS_OK;
fail:
    free(buf);
    ps_sweep_log_close(lg);
    return st;
}

int ps_sweep_log_count(const ps_sweep_log *lg) { return (int)json_array_size(lg->recs); }

const json_t *ps_sweep_log_at(const ps_sweep_log *lg, int i) { return json_array_get(lg->recs, (size_t)i); }

ps_status ps_sweep_log_append(ps_sweep_log *lg, json_t *rec)
{
    PS_CHECK_INPUT(json_is_string(json_object_get(rec, "cell")), "a sweep record needs a \"cell\" string");
    size_t n = 0;
    /* Compact: one line, which the newline ends. */
    char *line = ps_json_dumps_line(rec, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10), &n);
    if (!line) return PS_FAIL(PS_ERR_SYSTEM, "out of memory serializing a sweep record");
    char what[PATH_MAX + 32];
    snprintf(what, sizeof what, "%s: appending a record", lg->path);
    ps_status st = ps_write_all(lg->fd, line, n, what);
    free(line);
    if (st == PS_OK && fsync(lg->fd) != 0)
        st = PS_FAIL(PS_ERR_SYSTEM, "%s: fsync failed: %s", lg->path, strerror(errno));
    if (st != PS_OK) return st;
    if (json_array_append(lg->recs, rec) != 0) return PS_FAIL(PS_ERR_SYSTEM, "out of memory keeping a sweep record");
    return PS_OK;
}

ps_status ps_sweep_share_done(MPI_Comm comm, int root, unsigned char *done, int n)
{
    if (n == 0) return PS_OK;
    PS_MPI(MPI_Bcast(done, n, MPI_UNSIGNED_CHAR, root, comm));
    return PS_OK;
}

void ps_sweep_progress_start(ps_sweep_progress *p, int enabled, int total, int already_done)
{
    memset(p, 0, sizeof *p);
    p->enabled = enabled;
    p->total = total;
    p->done = already_done;
    p->t0 = MPI_Wtime();
    p->tty = enabled && isatty(STDERR_FILENO);
    if (p->enabled && already_done > 0)
        fprintf(stderr, "# sweep: %d of %d cells already recorded, skipped\n", already_done, total);
}

static void fmt_eta(double s, char *buf, size_t cap)
{
    if (s < 0 || s != s) snprintf(buf, cap, "?");
    else if (s < 100) snprintf(buf, cap, "%.0f s", s);
    else if (s < 6000) snprintf(buf, cap, "%.0f min", s / 60);
    else snprintf(buf, cap, "%.1f h", s / 3600);
}

void ps_sweep_progress_cell(ps_sweep_progress *p, const char *what)
{
    p->done++;
    p->run_done++;
    if (!p->enabled) return;
    double el = MPI_Wtime() - p->t0;
    /* Cells differ in cost by orders of magnitude; the mean of this run's cells is the estimate we have. */
    double eta = el / p->run_done * (p->total - p->done);
    char e[32];
    fmt_eta(eta, e, sizeof e);
    if (p->tty) {
        enum { W = 30 };
        int fill = p->total > 0 ? (int)((double)W * p->done / p->total) : W;
        char bar[W + 1];
        for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
        bar[W] = '\0';
        /* \r and clear-to-end: the bar is redrawn in place; the last cell's name fits a terminal line. */
        fprintf(stderr, "\r[%s] %d/%d cells, ETA %s  %.60s\033[K", bar, p->done, p->total, e, what);
    } else {
        fprintf(stderr, "# sweep: %d/%d %s (ETA %s)\n", p->done, p->total, what, e);
    }
    fflush(stderr);
}

void ps_sweep_progress_end(ps_sweep_progress *p)
{
    if (p->enabled && p->tty) fputc('\n', stderr);
}

/* ---- cells across rank groups ---- */

typedef struct {
    double w;
    int cell;
} cell_work;

/* Largest estimate first; equal estimates in cell order, so every rank builds the same list. */
static int by_cell_work_desc(const void *pa, const void *pb)
{
    const cell_work *a = pa, *b = pb;
    if (a->w != b->w) return a->w > b->w ? -1 : 1;
    return (a->cell > b->cell) - (a->cell < b->cell);
}

void ps_sweep_groups_free(ps_sweep_groups *g)
{
    if (!g) return;
    free(g->handed);
    free(g->shared);
    memset(g, 0, sizeof *g);
}

int ps_sweep_group_of(int rank, int nranks, int n_groups) { return (int)((int64_t)rank * n_groups / nranks); }

ps_status ps_sweep_groups_make(const double *work, const unsigned char *done, int n_cells, int nranks,
                               int group_ranks, ps_sweep_groups *out)
{
    memset(out, 0, sizeof *out);
    PS_CHECK_INPUT(nranks >= 1 && n_cells >= 0 && group_ranks >= 0, "sweep groups: %d ranks, %d cells", nranks,
                   n_cells);
    cell_work *cw = ps_calloc((size_t)n_cells + 1, sizeof *cw);
    out->handed = ps_calloc((size_t)n_cells + 1, sizeof *out->handed);
    out->shared = ps_calloc((size_t)n_cells + 1, sizeof *out->shared);
    if (!cw || !out->handed || !out->shared) {
        free(cw);
        ps_sweep_groups_free(out);
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory sharing out %d sweep cells", n_cells);
    }
    int n = 0;
    double total = 0;
    for (int i = 0; i < n_cells; i++)
        if (!done[i]) {
            cw[n++] = (cell_work){work[i] > 0 ? work[i] : 0, i};
            total += cw[n - 1].w;
        }
    qsort(cw, (size_t)n, sizeof *cw, by_cell_work_desc);
    /* More groups than cells would leave ranks idle: then the groups grow instead. */
    int g = group_ranks > 0 ? nranks / group_ranks : (n < nranks ? n : nranks);
    if (g < 1) g = 1;
    if (g > nranks) g = nranks;
    out->n_groups = g;
    for (int x = 0; x < n; x++) {
        /* Searched by one group, a cell above the even share per group would end after every other group (its
         * group's time alone exceeds the mean); searched by all ranks it takes about total / nranks. */
        if (g > 1 && cw[x].w * g > total) out->shared[out->n_shared++] = cw[x].cell;
        else out->handed[out->n_handed++] = cw[x].cell;
    }
    free(cw);
    return PS_OK;
}

enum { TAG_RESULT = 7301, TAG_CELL = 7302 };

/* A result as a leader sends it to rank 0: cell (-1: none yet, just asking), status, then the bytes. */
typedef struct {
    int32_t cell, status;
} result_head;

typedef struct queued {
    int cell;
    char *bytes;
    size_t len;
    struct queued *next;
} queued;

/* Rank 0's side of the hand-out. */
typedef struct {
    MPI_Comm comm;
    const ps_sweep_groups *g;
    int head;        /* next of g->handed to hand out */
    int active;      /* other groups' leaders not yet told to stop */
    int stop;        /* hand out nothing more: a cell or a take failed */
    ps_status err;   /* the first failure while answering (poll cannot return one) */
    int broken;      /* an MPI failure, or a message that could not be received: stop talking */
    double take_s;   /* in take() */
    queued *q, **q_tail;
} dispatch;

static int next_cell(dispatch *d) { return !d->stop && d->head < d->g->n_handed ? d->g->handed[d->head++] : -1; }

static void enqueue(dispatch *d, int cell, char *bytes, size_t len)
{
    queued *e = ps_calloc(1, sizeof *e);
    if (!e) {
        free(bytes);
        /* the others are still answered (with no cell), so none waits for a reply that never comes */
        if (d->err == PS_OK) d->err = PS_FAIL(PS_ERR_SYSTEM, "out of memory keeping the result of sweep cell %d", cell);
        d->stop = 1;
        return;
    }
    *e = (queued){cell, bytes, len, NULL};
    *d->q_tail = e;
    d->q_tail = &e->next;
}

/* Answer the leaders whose results are waiting (block: wait for one first): keep each result for take(), and send
 * the asker its next cell at once (-1: none; it stops). */
static void answer(dispatch *d, int block)
{
    while (!d->broken && d->active > 0) {
        MPI_Status s;
        int flag = 1, rc;
        if (block) rc = MPI_Probe(MPI_ANY_SOURCE, TAG_RESULT, d->comm, &s);
        else rc = MPI_Iprobe(MPI_ANY_SOURCE, TAG_RESULT, d->comm, &flag, &s);
        block = 0;
        if (rc != MPI_SUCCESS) {
            d->err = ps_mpi_status(rc, "MPI_Probe", __FILE__, __LINE__);
            d->broken = 1;
            break;
        }
        if (!flag) break;
        int n = 0;
        MPI_Get_count(&s, MPI_BYTE, &n);
        char *buf = ps_calloc((size_t)n + 1, 1);
        if (!buf) {
            d->err = PS_FAIL(PS_ERR_SYSTEM, "out of memory receiving a sweep result of %d bytes", n);
            d->broken = 1;
            break;
        }
        rc = MPI_Recv(buf, n, MPI_BYTE, s.MPI_SOURCE, TAG_RESULT, d->comm, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || n < (int)sizeof(result_head)) {
            free(buf);
            d->err = rc != MPI_SUCCESS ? ps_mpi_status(rc, "MPI_Recv", __FILE__, __LINE__)
                                       : PS_FAIL(PS_ERR_SYSTEM, "a sweep result of %d bytes from rank %d", n,
                                                 s.MPI_SOURCE);
            d->broken = 1;
            break;
        }
        result_head h;
        memcpy(&h, buf, sizeof h);
        if (h.cell >= 0 && h.status != PS_OK) {
            d->stop = 1; /* that leader says why; nothing more is handed out */
            free(buf);
        } else if (h.cell >= 0) {
            size_t len = (size_t)n - sizeof h;
            memmove(buf, buf + sizeof h, len);
            buf[len] = '\0';
            enqueue(d, h.cell, buf, len);
        } else {
            free(buf);
        }
        int next = next_cell(d);
        if (next < 0) d->active--;
        rc = MPI_Send(&next, 1, MPI_INT, s.MPI_SOURCE, TAG_CELL, d->comm);
        if (rc != MPI_SUCCESS) {
            d->err = ps_mpi_status(rc, "MPI_Send", __FILE__, __LINE__);
            d->broken = 1;
        }
    }
}

static void poll_answer(void *arg) { answer(arg, 0); }

/* Hand the kept results to take(), in the order they came; once this rank failed (a take, its own cell) only free
 * them. */
static ps_status flush(dispatch *d, const ps_sweep_cell_ops *ops, ps_status st)
{
    while (d->q) {
        queued *e = d->q;
        d->q = e->next;
        /* a cell another group finished is still recorded after a third one failed: a resume need not redo it */
        if (st == PS_OK) {
            double t0 = MPI_Wtime();
            st = ops->take(ops->arg, e->cell, e->bytes, e->len);
            d->take_s += MPI_Wtime() - t0;
            if (st != PS_OK) d->stop = 1;
        }
        free(e->bytes);
        free(e);
    }
    d->q_tail = &d->q;
    return st;
}

/* The message a leader sends rank 0: its last cell's outcome and bytes (cell -1: the first request). */
static ps_status send_result(MPI_Comm comm, int cell, ps_status cst, const char *bytes, size_t len)
{
    if (len > (size_t)INT32_MAX - sizeof(result_head))
        return PS_FAIL(PS_ERR_SYSTEM, "sweep cell %d: a result of %zu bytes is too large to send", cell, len);
    char *msg = ps_calloc(sizeof(result_head) + len + 1, 1);
    if (!msg) return PS_FAIL(PS_ERR_SYSTEM, "out of memory sending the result of sweep cell %d", cell);
    result_head h = {cell, (int32_t)cst};
    memcpy(msg, &h, sizeof h);
    if (len) memcpy(msg + sizeof h, bytes, len);
    int rc = MPI_Send(msg, (int)(sizeof h + len), MPI_BYTE, 0, TAG_RESULT, comm);
    free(msg);
    return ps_mpi_status(rc, "MPI_Send", __FILE__, __LINE__);
}

double ps_sweep_cpu_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One cell on `group`; busy time and count in stats. */
static ps_status run_one(const ps_sweep_cell_ops *ops, int cell, MPI_Comm group, const ps_mpi_poll *poll, char **out,
                         size_t *len, ps_sweep_run_stats *stats)
{
    *out = NULL;
    *len = 0;
    double t0 = MPI_Wtime(), c0 = ps_sweep_cpu_s();
    ps_status st = ops->run(ops->arg, cell, group, poll, out, len);
    stats->busy_s += MPI_Wtime() - t0;
    stats->cpu_s += ps_sweep_cpu_s() - c0;
    stats->cells++;
    return st;
}

/* The hand-out: rank 0 (leader of group 0), the other leaders, and the other members of every group. */
static ps_status hand_out(MPI_Comm comm, MPI_Comm group, int rank, int grank, int gsize, const ps_sweep_groups *g,
                          const ps_sweep_cell_ops *ops, ps_sweep_run_stats *stats)
{
    ps_status local = PS_OK;
    if (rank == 0) {
        dispatch d = {.comm = comm, .g = g, .active = g->n_groups - 1, .err = PS_OK};
        d.q_tail = &d.q;
        ps_mpi_poll poll = {poll_answer, &d};
        for (;;) {
            answer(&d, 0);
            local = flush(&d, ops, local);
            if (d.broken) d.stop = 1; /* group 0 is still told (-1) before rank 0 leaves */
            int cell = next_cell(&d);
            if (gsize > 1) PS_MPI(MPI_Bcast(&cell, 1, MPI_INT, 0, group));
            if (cell < 0) break;
            char *bytes = NULL;
            size_t len = 0;
            ps_status cst = run_one(ops, cell, group, g->n_groups > 1 ? &poll : NULL, &bytes, &len, stats);
            if (cst == PS_OK) enqueue(&d, cell, bytes, len);
            else {
                free(bytes);
                d.stop = 1;
                if (local == PS_OK) local = cst;
            }
        }
        /* group 0 is done: answer the others until each has been told to stop */
        while (!d.broken && d.active > 0) {
            answer(&d, 1);
            local = flush(&d, ops, local);
        }
        local = flush(&d, ops, local);
        stats->take_s += d.take_s;
        if (d.err != PS_OK && local == PS_OK) local = d.err;
        return local;
    }
    if (grank == 0) {
        int cell = -1;
        ps_status cst = PS_OK;
        char *bytes = NULL;
        size_t len = 0;
        for (;;) {
            ps_status st = send_result(comm, cell, cst, bytes, len);
            free(bytes);
            bytes = NULL;
            len = 0;
            PS_TRY(st);
            PS_MPI(MPI_Recv(&cell, 1, MPI_INT, 0, TAG_CELL, comm, MPI_STATUS_IGNORE));
            if (gsize > 1) PS_MPI(MPI_Bcast(&cell, 1, MPI_INT, 0, group));
            if (cell < 0) return local;
            cst = run_one(ops, cell, group, NULL, &bytes, &len, stats);
            if (cst != PS_OK && local == PS_OK) local = cst;
        }
    }
    for (;;) {
        int cell = -1;
        PS_MPI(MPI_Bcast(&cell, 1, MPI_INT, 0, group));
        if (cell < 0) return local;
        char *bytes = NULL;
        size_t len = 0;
        ps_status cst = run_one(ops, cell, group, NULL, &bytes, &len, stats);
        free(bytes);
        if (cst != PS_OK && local == PS_OK) local = cst;
    }
}

ps_status ps_sweep_run_groups(MPI_Comm comm, const ps_sweep_groups *g, const ps_sweep_cell_ops *ops,
                              ps_sweep_run_stats *stats, int *stop)
{
    memset(stats, 0, sizeof *stats);
    *stop = 0;
    int rank = 0, nranks = 1, grank = 0, gsize = 1;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &nranks));
    stats->group = ps_sweep_group_of(rank, nranks, g->n_groups);
    MPI_Comm group = MPI_COMM_NULL;
    PS_MPI(MPI_Comm_split(comm, stats->group, rank, &group));
    ps_status local = MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN) == MPI_SUCCESS ? PS_OK : PS_ERR_SYSTEM;
    if (local == PS_OK && (MPI_Comm_rank(group, &grank) != MPI_SUCCESS || MPI_Comm_size(group, &gsize) != MPI_SUCCESS))
        local = PS_FAIL(PS_ERR_SYSTEM, "MPI_Comm_rank on a sweep group failed");
    stats->group_size = gsize;
    if (local == PS_OK) local = hand_out(comm, group, rank, grank, gsize, g, ops, stats);
    MPI_Comm_free(&group);
    /* The shared cells, one after another on every rank, each agreed on as it ends. */
    ps_status worst = PS_OK;
    int first = 0;
    for (int x = -1; x < g->n_shared; x++) {
        if (x >= 0) {
            char *bytes = NULL;
            size_t len = 0;
            local = run_one(ops, g->shared[x], comm, NULL, &bytes, &len, stats);
            if (local == PS_OK && rank == 0) {
                double t0 = MPI_Wtime();
                local = ops->take(ops->arg, g->shared[x], bytes, len);
                stats->take_s += MPI_Wtime() - t0;
            }
            free(bytes);
        }
        PS_TRY(ps_mpi_agree(comm, local, &worst, &first));
        if (worst != PS_OK) {
            *stop = 1;
            return local;
        }
    }
    return PS_OK;
}

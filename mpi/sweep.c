/* Sweep bookkeeping (see ps_mpi.h): the append-only record of finished cells, resume, and progress. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Parse the whole lines of buf[0, len) into records. */
static ps_status parse_records(ps_sweep_log *lg, const char *buf, size_t len)
{
    size_t line = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t n = (size_t)(nl - (buf + i));
        line++;
        if (n > 0) {
            json_error_t err;
            json_t *j = json_loadb(buf + i, n, 0, &err);
            if (!j || !json_is_object(j) || !json_is_string(json_object_get(j, "cell"))) {
                json_decref(j);
                return PS_FAIL(PS_ERR_INPUT, "%s:%zu: not a sweep record (%s); the file is corrupt beyond a torn "
                                             "last line: move it away to start the sweep again",
                               lg->path, line, j ? "a JSON object with a \"cell\" string is expected" : err.text);
            }
            if (json_array_append_new(lg->recs, j) != 0)
                return PS_FAIL(PS_ERR_SYSTEM, "out of memory reading %s", lg->path);
        }
        i += n + 1;
    }
    return PS_OK;
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

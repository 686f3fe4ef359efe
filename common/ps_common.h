/* psearch common layer: the one status type, error reporting with file:line traces, checked 64-bit arithmetic,
 * atomic output files, locating installed data, and JSON field readers that name the file and field on error.
 * Every other folder builds on this; it knows nothing about models, clusters or plans. */
#ifndef PS_COMMON_H
#define PS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "ps_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The status values are the process exit codes of docs/design.md, so main() can return them unchanged. */
typedef enum {
    PS_OK = 0,
    PS_ERR_INFEASIBLE = 1, /* no feasible plan: the message names the binding constraint */
    PS_ERR_INPUT = 2,      /* bad usage or bad input: the message names the file, line/field and value */
    PS_ERR_SYSTEM = 3      /* MPI, HDF5, CUDA, I/O or out-of-memory failure */
} ps_status;

const char *ps_status_name(ps_status st);

#if defined(__GNUC__)
#define PS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define PS_NODISCARD __attribute__((warn_unused_result))
#else
#define PS_PRINTF(a, b)
#define PS_NODISCARD
#endif

/* Record a failure (message + origin) in this thread's error slot and return st. The message is what a user sees;
 * the origin chain (file:line of the failure and of every PS_TRY it passed through) is printed with --verbose. */
ps_status ps_error_set(ps_status st, const char *file, int line, const char *fmt, ...) PS_PRINTF(4, 5);
/* Append one frame to the trace of the current error and return st unchanged. */
ps_status ps_error_trace(ps_status st, const char *file, int line);
const char *ps_error_message(void);
const char *ps_error_traceback(void);
ps_status ps_error_status(void);
void ps_error_clear(void);

#define PS_FAIL(st, ...) ps_error_set((st), __FILE__, __LINE__, __VA_ARGS__)
/* Propagate a failure from a callee, adding this frame to the trace. */
#define PS_TRY(expr)                                                                                                   \
    do {                                                                                                               \
        ps_status ps_try_st_ = (expr);                                                                                 \
        if (ps_try_st_ != PS_OK) return ps_error_trace(ps_try_st_, __FILE__, __LINE__);                                \
    } while (0)
/* Same, for functions that must release resources: sets `st` and jumps to `label`. */
#define PS_TRY_GOTO(st, expr, label)                                                                                   \
    do {                                                                                                               \
        (st) = (expr);                                                                                                 \
        if ((st) != PS_OK) {                                                                                           \
            ps_error_trace((st), __FILE__, __LINE__);                                                                  \
            goto label;                                                                                                \
        }                                                                                                              \
    } while (0)
/* Always-on check of user input (never compiled out, unlike assert). */
#define PS_CHECK_INPUT(cond, ...)                                                                                      \
    do {                                                                                                               \
        if (!(cond)) return PS_FAIL(PS_ERR_INPUT, __VA_ARGS__);                                                        \
    } while (0)

/* ---- memory ---- */
/* calloc that records PS_ERR_SYSTEM on failure; returns NULL then. n*size overflow is caught. */
void *ps_calloc(size_t n, size_t size);
char *ps_strdup(const char *s);
/* Make *buf hold at least `need` elements of `elt` bytes, growing geometrically so a reused workspace stops
 * allocating after a few calls (contents kept, as realloc; new elements uninitialised). *cap counts elements.
 * PS_ERR_SYSTEM (and *buf, *cap unchanged) on failure, also when need x elt overflows. */
ps_status ps_grow(void **buf, size_t *cap, size_t need, size_t elt);

/* ---- checked 64-bit arithmetic (sizes, counts, bytes) ---- */
/* Return false on overflow; *out is then unspecified. */
bool ps_mul_i64(int64_t a, int64_t b, int64_t *out);
/* Greatest common divisor of two non-negative counts (0 with 0: the other). */
static inline int64_t ps_gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}
bool ps_add_i64(int64_t a, int64_t b, int64_t *out);

/* ---- hashing ---- */
/* FNV-1a 64 of n bytes, continuing from h (start with PS_HASH64_INIT): digests and memo keys, not cryptography. */
#define PS_HASH64_INIT 1469598103934665603ULL
uint64_t ps_hash64(const void *data, size_t n, uint64_t h);

/* ---- strings ---- */
/* Copy with truncation, always NUL-terminated. */
void ps_strlcpy(char *dst, const char *src, size_t cap);
/* Append printf-style to a NUL-terminated buffer of capacity cap, truncating (descriptions are cut, never
 * overflowed). */
void ps_strcatf(char *buf, size_t cap, const char *fmt, ...) PS_PRINTF(3, 4);
/* Parse a whole string as a base-10 integer / finite double; false if anything is left over or out of range. */
bool ps_parse_i64(const char *s, int64_t *out);
bool ps_parse_double(const char *s, double *out);
/* Format bytes with a binary unit ("1.50 GiB"), a count with an SI suffix ("64.9 B" for 6.49e10 params), into buf. */
const char *ps_fmt_bytes(double bytes, char *buf, size_t cap);
const char *ps_fmt_count(double n, char *buf, size_t cap);
/* A number as a person reads it in a table, into buf (>= 24 bytes): 4 significant digits, but plain digits from 10^4 up
 * to 10^15 ("669712", never "6.697e+05": a throughput is read, not parsed), and "0" where |v| <= 1e-9 x |scale|: the
 * rounding left of a difference of equal sums (a bubble of 8.3e-17 s beside a 10 s iteration) is no number to print.
 * scale 0: only 0 itself prints as 0. */
const char *ps_fmt_num(double v, double scale, char *buf, size_t cap);
/* A relative error (|predicted - measured| / measured) as a percentage, "12.3%"; ">1000%" from 10 on (a broken run's
 * noise, not digits to read off); "-" for no error (v < 0 or NaN: nothing was measured). Into buf (>= 8 bytes). */
const char *ps_fmt_rel_err(double v, char *buf, size_t cap);
/* Levenshtein distance, for "did you mean" suggestions. */
int ps_edit_distance(const char *a, const char *b);
/* The current time as ISO 8601 UTC, "2025-01-31T12:00:00Z" (20 characters: cap >= 21), the date every record of
 * psearch carries (cost database, fits, sweeps); "" when the clock cannot be read or cap is too small. */
void ps_utc_now_iso(char *buf, size_t cap);
/* Seconds on a monotonic clock (CLOCK_MONOTONIC), for wall times measured without MPI (MPI_Wtime needs MPI up). */
double ps_wtime(void);

/* ---- files ---- */
/* Write a whole output. A regular file, or a new name, is written atomically: a temporary file beside the file the
 * path resolves to (through symbolic links, which stay links), fsync, rename; on any failure the temporary is removed
 * and the previous content is untouched. A device, a FIFO, "-" or /dev/stdout (any /dev/fd, /proc/self/fd path) is
 * written directly as a stream: no atomicity there. A directory is refused (PS_ERR_INPUT). */
ps_status ps_write_file_atomic(const char *path, const char *data, size_t len);
/* Read a whole file into a NUL-terminated heap buffer. Missing/unreadable file, or anything but a regular file (a
 * FIFO, a device, a directory: never opened in a way that blocks) -> PS_ERR_INPUT naming it. */
ps_status ps_read_file(const char *path, char **out, size_t *len);

/* What an output path names, resolved before writing (common/paths.c). */
typedef enum {
    PS_OUTPUT_FILE,  /* a regular file or a new name: replaced atomically at `path` (links resolved, canonical) */
    PS_OUTPUT_STREAM /* a device, a FIFO or an open file of this process (fd >= 0): written in place */
} ps_output_kind;
typedef struct {
    ps_output_kind kind;
    int fd;              /* STREAM through /dev/fd/N, /proc/self/fd/N, /dev/stdout, "-": that descriptor; else -1 */
    char path[4096];     /* FILE: the canonical path of the file to replace; STREAM: the device or FIFO */
} ps_output;
/* Resolve an output path; a directory, a link loop or a missing folder -> PS_ERR_INPUT naming `path`. */
ps_status ps_output_resolve(const char *path, ps_output *out);
/* Refuse (PS_ERR_INPUT) two of n outputs (NULL entries skipped) that resolve to one file, naming both options. */
ps_status ps_outputs_distinct(const char *const *paths, const char *const *options, int n);
/* The one way inputs are opened: without ever blocking (a FIFO is refused, not waited on), and only regular files
 * (links followed). Returns a descriptor, or -1 with PS_ERR_INPUT recorded naming the path, `what` it was meant to be
 * ("the input", "the cost database") and what it is instead ("a FIFO (named pipe)", "a directory", ...). */
int ps_open_input(const char *path, const char *what);
/* Whether two existing paths name one file (links followed: same device and inode). */
bool ps_same_file(const char *a, const char *b);

/* Advisory locks (fcntl: per process, released when it ends, however it ends; they hold on local file systems, on
 * NFS v4 and v3 with lockd, and on Lustre mounted with -o flock; docs/design.md). One writer per destination. */
/* Lock the whole file fd for writing without waiting: PS_ERR_INPUT "<what> is being written by another psearch
 * (process N)" when another process holds it. */
ps_status ps_lock_fd(int fd, const char *what);
typedef struct {
    int fd;
    int cleanup_slot; /* the lock file goes on SIGTERM / SIGINT too (ps_cleanup_add) */
    char path[4096 + 16];
} ps_lock;
/* Hold "<dir>/.<name>.lock" beside a resolved output file while it is written; ps_output_unlock removes it. */
ps_status ps_output_lock(const char *resolved, ps_lock *lk);
void ps_output_unlock(ps_lock *lk);

/* Temporaries that SIGTERM, SIGINT or SIGHUP must not leave behind: ps_cleanup_install (once, in main) sets handlers
 * that remove every registered path and then end the process by the same signal. At most 8 at once; add returns a
 * slot (-1 when full: the path is then not removed on a signal). */
void ps_cleanup_install(void);
int ps_cleanup_add(const char *path);
void ps_cleanup_remove(int slot);
/* Copy the path of an input into dst (cap bytes: the path field of a model or cluster source, which every later
 * message names), or refuse it whole, since a cut path names another file: PS_ERR_INPUT saying it cannot be opened,
 * as ps_read_file would say of a missing one. */
ps_status ps_path_copy(char *dst, size_t cap, const char *path);
/* write() all len bytes to fd, retrying short writes and EINTR; PS_ERR_SYSTEM naming `what` on failure. */
ps_status ps_write_all(int fd, const void *data, size_t len, const char *what) PS_NODISCARD;
/* Remove the temporaries a kill during ps_write_file_atomic(dir/name) left beside it (dir/name.tmp.XXXXXX); with
 * name NULL, every such temporary in dir (a folder psearch alone writes). Best effort; returns how many went. */
int ps_remove_stale_temporaries(const char *dir, const char *name);

/* ---- installed data (model and cluster presets) ----
 * Search order: PSEARCH_DATA_DIR, <dir of the executable>/../share/psearch, the source tree's presets/.
 * Returns the first directory that contains `sub` (e.g. "models"). */
ps_status ps_data_dir(const char *sub, char *out, size_t cap);
/* For tests and --data-dir: override the search (NULL restores the default order). */
void ps_data_dir_override(const char *dir);

/* ---- JSON input (model files, HF config.json, cluster.json, plans), built on jansson ----
 * Errors name the file, the line:column of a syntax error, or the field path and value of a semantic one. */
/* Where a value sits: the file it came from and its field path ("layers[3].hidden"). Cheap to copy. */
typedef struct {
    const char *file;
    char path[192];
} ps_jloc;

ps_jloc ps_jloc_root(const char *file);
/* Child locations: obj.key and arr[i]. */
ps_jloc ps_jloc_key(const ps_jloc *parent, const char *key);
ps_jloc ps_jloc_idx(const ps_jloc *parent, size_t i);

/* Parse a file (or an in-memory buffer; `name` is used in messages). Syntax errors give PS_ERR_INPUT with
 * "file:line:column: text". The root must be an object. */
ps_status ps_json_load_file(const char *path, json_t **out);
ps_status ps_json_load_buffer(const char *buf, size_t len, const char *name, json_t **out);

/* Typed field readers. `obj` must be an object. When the key is absent: required -> PS_ERR_INPUT "missing field";
 * optional -> *out is left as it was (the caller's default) and PS_OK is returned. Range violations name the bounds
 * and the value. Integers must be JSON integers (or reals with an exact integer value, e.g. 1e9). */
ps_status ps_json_int(const json_t *obj, const ps_jloc *loc, const char *key, bool required, int64_t lo, int64_t hi,
                      int64_t *out);
ps_status ps_json_num(const json_t *obj, const ps_jloc *loc, const char *key, bool required, double lo, double hi,
                      double *out);
ps_status ps_json_bool(const json_t *obj, const ps_jloc *loc, const char *key, bool required, bool *out);
/* The string is copied into out[cap]; too long -> PS_ERR_INPUT. */
ps_status ps_json_str(const json_t *obj, const ps_jloc *loc, const char *key, bool required, char *out, size_t cap);
/* Reject fields not in the NULL-terminated list `known` (a misspelt field would otherwise be silently ignored). */
ps_status ps_json_known_keys(const json_t *obj, const ps_jloc *loc, const char *const *known);

/* "an integer", "a string", ... for messages that say what was found instead of what was expected. */
const char *ps_json_type_name(const json_t *v);

/* Serialize `root` and write it atomically to path ("-" = stdout), with a trailing newline. */
ps_status ps_json_write(const json_t *root, const char *path);
/* `root` serialized with jansson's `flags` plus a trailing newline, as a heap string of *len bytes (newline
 * included); NULL when out of memory. With JSON_COMPACT the text is one line (jansson escapes control characters). */
char *ps_json_dumps_line(const json_t *root, size_t flags, size_t *len);

#ifdef __cplusplus
}
#endif
#endif

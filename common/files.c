/* File I/O with the guarantees of docs/design.md: outputs appear whole or not at all; inputs are named in errors;
 * installed data is found relative to the executable so an installed psearch needs no environment. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_common.h"

/* The suffix of ps_write_file_atomic's temporaries: mkstemp replaces the six X. */
#define TMP_SUFFIX ".tmp.XXXXXX"

ps_status ps_write_all(int fd, const void *data, size_t len, const char *what)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return PS_FAIL(PS_ERR_SYSTEM, "%s: write failed: %s", what, n < 0 ? strerror(errno) : "no progress");
        p += n;
        len -= (size_t)n;
    }
    return PS_OK;
}

int ps_remove_stale_temporaries(const char *dir, const char *name)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    const size_t sl = strlen(TMP_SUFFIX), xl = 6; /* ".tmp." then mkstemp's six characters */
    size_t nl = name ? strlen(name) : 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t el = strlen(e->d_name);
        if (el < sl + 1 || memcmp(e->d_name + el - sl, TMP_SUFFIX, sl - xl) != 0) continue;
        if (name && (el != nl + sl || memcmp(e->d_name, name, nl) != 0)) continue;
        char p[PATH_MAX];
        int n = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (n > 0 && (size_t)n < sizeof p && unlink(p) == 0) removed++;
    }
    closedir(d);
    return removed;
}

static ps_status write_stream(const ps_output *o, const char *path, const char *data, size_t len)
{
    if (o->fd == 1) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
            return PS_FAIL(PS_ERR_SYSTEM, "writing to standard output failed: %s", strerror(errno));
        return PS_OK;
    }
    if (o->fd >= 0) {
        if (o->fd == 2) fflush(stderr);
        return ps_write_all(o->fd, data, len, path);
    }
    /* a device or FIFO: opened for writing in place, never created, truncated or replaced */
    int fd = open(o->path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return PS_FAIL(PS_ERR_INPUT, "%s: cannot open the output: %s", path, strerror(errno));
    ps_status st = ps_write_all(fd, data, len, path);
    if (close(fd) != 0 && st == PS_OK) st = PS_FAIL(PS_ERR_SYSTEM, "%s: close failed: %s", path, strerror(errno));
    return st;
}

ps_status ps_write_file_atomic(const char *path, const char *data, size_t len)
{
    ps_output o;
    PS_TRY(ps_output_resolve(path, &o));
    if (o.kind == PS_OUTPUT_STREAM) return write_stream(&o, path, data, len);
    /* The temporary lives in the directory of the resolved file so rename() is atomic (same file system) and a
     * symbolic link at `path` keeps pointing at the file it named. */
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s" TMP_SUFFIX, o.path);
    if (n < 0 || (size_t)n >= sizeof tmp) return PS_FAIL(PS_ERR_INPUT, "%s: output path too long", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: cannot create output file: %s", path, strerror(errno));
    int slot = ps_cleanup_add(tmp);
    ps_status st = ps_write_all(fd, data, len, path);
    if (st == PS_OK && fsync(fd) != 0) st = PS_FAIL(PS_ERR_SYSTEM, "%s: fsync failed: %s", path, strerror(errno));
    /* mkstemp creates 0600; outputs are ordinary files, readable like any other the user writes. */
    if (st == PS_OK) {
        mode_t mask = umask(0);
        umask(mask);
        if (fchmod(fd, 0666 & ~mask) != 0) st = PS_FAIL(PS_ERR_SYSTEM, "%s: chmod: %s", path, strerror(errno));
    }
    if (close(fd) != 0 && st == PS_OK) st = PS_FAIL(PS_ERR_SYSTEM, "%s: close failed: %s", path, strerror(errno));
    if (st == PS_OK && rename(tmp, o.path) != 0)
        st = PS_FAIL(PS_ERR_INPUT, "%s: cannot replace output file: %s", path, strerror(errno));
    if (st != PS_OK) unlink(tmp);
    ps_cleanup_remove(slot);
    return st;
}

ps_status ps_read_file(const char *path, char **out, size_t *len)
{
    *out = NULL;
    int fd = ps_open_input(path, "the input");
    if (fd < 0) return ps_error_trace(PS_ERR_INPUT, __FILE__, __LINE__);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return PS_FAIL(PS_ERR_SYSTEM, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        fclose(f);
        return PS_FAIL(PS_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    }
    /* Inputs are descriptions, not data sets: anything this large is a wrong path, not a model. */
    if (sb.st_size > (off_t)64 * 1024 * 1024) {
        fclose(f);
        return PS_FAIL(PS_ERR_INPUT, "%s: file is %lld bytes; inputs larger than 64 MiB are refused", path,
                       (long long)sb.st_size);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = ps_calloc(n + 1, 1);
    if (!buf) {
        fclose(f);
        return PS_ERR_SYSTEM;
    }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != n) {
        free(buf);
        return PS_FAIL(PS_ERR_INPUT, "%s: read failed", path);
    }
    buf[n] = '\0';
    /* A UTF-8 byte-order mark (EF BB BF), which some editors put first: no reader means it, and left in place it is
     * an invisible first character in every message about line 1. Dropped, as RFC 8259 lets a JSON reader do. */
    if (n >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) {
        memmove(buf, buf + 3, n - 2);
        n -= 3;
    }
    *out = buf;
    if (len) *len = n;
    return PS_OK;
}

ps_status ps_path_copy(char *dst, size_t cap, const char *path)
{
    size_t n = strlen(path);
    if (n >= cap)
        return PS_FAIL(PS_ERR_INPUT, "%.80s...: cannot open: the path is longer than %zu characters", path, cap - 1);
    memcpy(dst, path, n + 1);
    return PS_OK;
}

static char g_data_override[PATH_MAX];

void ps_data_dir_override(const char *dir)
{
    if (dir)
        ps_strlcpy(g_data_override, dir, sizeof g_data_override);
    else
        g_data_override[0] = '\0';
}

static bool has_sub(const char *dir, const char *sub, char *out, size_t cap)
{
    char p[PATH_MAX];
    int n = snprintf(p, sizeof p, "%s/%s", dir, sub);
    if (n < 0 || (size_t)n >= sizeof p) return false;
    struct stat sb;
    if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) return false;
    ps_strlcpy(out, p, cap);
    return true;
}

ps_status ps_data_dir(const char *sub, char *out, size_t cap)
{
    if (g_data_override[0]) {
        if (has_sub(g_data_override, sub, out, cap)) return PS_OK;
        return PS_FAIL(PS_ERR_INPUT, "%s: no '%s' folder in the data directory given by --data-dir", g_data_override,
                       sub);
    }
    const char *env = getenv("PSEARCH_DATA_DIR");
    if (env && *env) {
        if (has_sub(env, sub, out, cap)) return PS_OK;
        return PS_FAIL(PS_ERR_INPUT, "%s: no '%s' folder in PSEARCH_DATA_DIR", env, sub);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[PATH_MAX];
            /* installed layout: <prefix>/bin/psearch + <prefix>/share/psearch/<sub> */
            int m = snprintf(cand, sizeof cand, "%s/../%s", exe, PS_INSTALL_DATADIR_REL);
            if (m > 0 && (size_t)m < sizeof cand && has_sub(cand, sub, out, cap)) return PS_OK;
        }
    }
    /* build tree: the presets in the source checkout this binary was configured from */
    if (has_sub(PS_SOURCE_DATADIR, sub, out, cap)) return PS_OK;
    return PS_FAIL(PS_ERR_SYSTEM,
                   "cannot find the psearch data folder '%s' (looked in PSEARCH_DATA_DIR, <exe>/../%s and %s); "
                   "reinstall psearch or set PSEARCH_DATA_DIR",
                   sub, PS_INSTALL_DATADIR_REL, PS_SOURCE_DATADIR);
}

/* What a path names before psearch reads or writes it: inputs must be regular files (a FIFO or a device would block
 * or never end), outputs are resolved through symbolic links so that the link survives and its target is written,
 * devices and FIFOs are written as streams, and one writer at a time holds a destination (advisory locks). Also the
 * temporaries a signal must not leave behind. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_common.h"

/* Linux's own limit on the links one lookup follows (MAXSYMLINKS): more is a loop. */
#define LINK_HOPS_MAX 40

static const char *file_type_name(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFIFO: return "a FIFO (named pipe)";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

int ps_open_input(const char *path, const char *what)
{
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer forever; the type check below refuses it. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        PS_FAIL(PS_ERR_INPUT, "%s: cannot open %s: %s", path, what, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        PS_FAIL(PS_ERR_INPUT, "%s: cannot open %s: %s", path, what, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        PS_FAIL(PS_ERR_INPUT, "%s: %s must be a regular file; this is %s", path, what, file_type_name(sb.st_mode));
        close(fd);
        return -1;
    }
    /* a regular file never blocks; clear the flag so reads behave as usual */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* The file descriptor a path names when it goes through /dev/fd/N or /proc/self/fd/N (as /dev/stdout does), or -1.
 * Such a path is the process's own open file: reopening or replacing it would not write where the user pointed. */
static int own_fd(const char *p)
{
    static const char *const pre[] = {"/dev/fd/", "/proc/self/fd/", "/dev/stdout", "/dev/stderr"};
    char mine[64];
    snprintf(mine, sizeof mine, "/proc/%ld/fd/", (long)getpid());
    const char *num = NULL;
    if (strncmp(p, pre[0], strlen(pre[0])) == 0) num = p + strlen(pre[0]);
    else if (strncmp(p, pre[1], strlen(pre[1])) == 0) num = p + strlen(pre[1]);
    else if (strncmp(p, mine, strlen(mine)) == 0) num = p + strlen(mine);
    else if (strcmp(p, pre[2]) == 0) return 1;
    else if (strcmp(p, pre[3]) == 0) return 2;
    int64_t v;
    return num && ps_parse_i64(num, &v) && v >= 0 && v <= INT_MAX ? (int)v : -1;
}

/* `dir`/`name` made canonical through the directory (the name itself is not a link, or does not exist). */
static ps_status canonical_in_dir(const char *path, char *out, size_t cap)
{
    char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX];
    PS_TRY(ps_path_copy(a, sizeof a, path));
    PS_TRY(ps_path_copy(b, sizeof b, path));
    const char *d = dirname(a), *base = basename(b);
    if (!realpath(d, dir))
        return PS_FAIL(PS_ERR_INPUT, "%s: cannot create the output: its folder %s: %s", path, d, strerror(errno));
    int n = snprintf(out, cap, "%s/%s", strcmp(dir, "/") == 0 ? "" : dir, base);
    if (n < 0 || (size_t)n >= cap) return PS_FAIL(PS_ERR_INPUT, "%s: output path too long", path);
    return PS_OK;
}

ps_status ps_output_resolve(const char *path, ps_output *out)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    if (strcmp(path, "-") == 0) {
        out->kind = PS_OUTPUT_STREAM;
        out->fd = 1;
        ps_strlcpy(out->path, "-", sizeof out->path);
        return PS_OK;
    }
    PS_CHECK_INPUT(path[0] != '\0', "an output path is empty");
    /* Follow the links one by one: a chain through /proc/self/fd or /dev/fd names an open file of this process,
     * and a dangling link names the file to create. */
    char cur[PATH_MAX];
    PS_TRY(ps_path_copy(cur, sizeof cur, path));
    for (int hop = 0;; hop++) {
        int fd = own_fd(cur);
        if (fd >= 0) {
            out->kind = PS_OUTPUT_STREAM;
            out->fd = fd;
            ps_strlcpy(out->path, cur, sizeof out->path);
            return PS_OK;
        }
        struct stat lb;
        if (lstat(cur, &lb) != 0) {
            if (errno != ENOENT)
                return PS_FAIL(PS_ERR_INPUT, "%s: cannot write the output: %s", path, strerror(errno));
            out->kind = PS_OUTPUT_FILE; /* a new file: created through a temporary beside it */
            return canonical_in_dir(cur, out->path, sizeof out->path);
        }
        if (!S_ISLNK(lb.st_mode)) break;
        if (hop >= LINK_HOPS_MAX)
            return PS_FAIL(PS_ERR_INPUT, "%s: cannot write the output: %s", path, strerror(ELOOP));
        char target[PATH_MAX];
        ssize_t n = readlink(cur, target, sizeof target - 1);
        if (n < 0) return PS_FAIL(PS_ERR_INPUT, "%s: cannot read the link %s: %s", path, cur, strerror(errno));
        target[n] = '\0';
        if (target[0] == '/') {
            ps_strlcpy(cur, target, sizeof cur);
        } else {
            char d[PATH_MAX], next[PATH_MAX];
            ps_strlcpy(d, cur, sizeof d);
            int k = snprintf(next, sizeof next, "%s/%s", dirname(d), target);
            if (k < 0 || (size_t)k >= sizeof next) return PS_FAIL(PS_ERR_INPUT, "%s: output path too long", path);
            ps_strlcpy(cur, next, sizeof cur);
        }
    }
    struct stat sb;
    if (stat(cur, &sb) != 0) return PS_FAIL(PS_ERR_INPUT, "%s: cannot write the output: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return PS_FAIL(PS_ERR_INPUT, "%s: is a directory; give a file name for this output", path);
    if (S_ISREG(sb.st_mode)) {
        out->kind = PS_OUTPUT_FILE;
        return canonical_in_dir(cur, out->path, sizeof out->path);
    }
    out->kind = PS_OUTPUT_STREAM; /* a device, a FIFO: written in place, as a stream */
    ps_strlcpy(out->path, cur, sizeof out->path);
    return PS_OK;
}

ps_status ps_outputs_distinct(const char *const *paths, const char *const *options, int n)
{
    ps_output r[8];
    PS_CHECK_INPUT(n <= 8, "too many outputs to compare (%d)", n);
    bool ok[8] = {false};
    for (int i = 0; i < n; i++) {
        /* a path that does not resolve (a missing folder) is left to its writer, which says why where it fails */
        if (!paths[i] || !(ok[i] = ps_output_resolve(paths[i], &r[i]) == PS_OK)) {
            ps_error_clear();
            continue;
        }
        for (int j = 0; j < i; j++) {
            if (!ok[j]) continue;
            bool same = strcmp(r[i].path, r[j].path) == 0 || (r[i].fd >= 0 && r[i].fd == r[j].fd);
            if (same)
                return PS_FAIL(PS_ERR_INPUT, "%s %s and %s %s name the same file (%s): one would overwrite the other",
                               options[j], paths[j], options[i], paths[i], r[i].path);
        }
    }
    return PS_OK;
}

bool ps_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* ---- advisory locks ---- */

ps_status ps_lock_fd(int fd, const char *what)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_SETLK, &fl) == 0) return PS_OK;
    if (errno != EACCES && errno != EAGAIN) {
        /* a file system without locks (some NFS mounts without lockd): say so rather than pretend */
        return PS_FAIL(PS_ERR_SYSTEM, "%s: cannot lock it against a second writer: %s", what, strerror(errno));
    }
    struct flock q = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    long pid = fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? (long)q.l_pid : 0;
    if (pid > 0)
        return PS_FAIL(PS_ERR_INPUT, "%s is being written by another psearch (process %ld): wait for it to end or "
                                     "choose another path", what, pid);
    return PS_FAIL(PS_ERR_INPUT, "%s is being written by another psearch: wait for it to end or choose another path",
                   what);
}

ps_status ps_output_lock(const char *resolved, ps_lock *lk)
{
    lk->fd = -1;
    lk->cleanup_slot = -1;
    char a[PATH_MAX], b[PATH_MAX];
    PS_TRY(ps_path_copy(a, sizeof a, resolved));
    PS_TRY(ps_path_copy(b, sizeof b, resolved));
    int n = snprintf(lk->path, sizeof lk->path, "%s/.%s.lock", dirname(a), basename(b));
    if (n < 0 || (size_t)n >= sizeof lk->path) return PS_FAIL(PS_ERR_INPUT, "%s: output path too long", resolved);
    /* A holder removes the lock file when it ends. A process that opened the file just before that removal would lock
     * a file no longer in the folder: after locking, check that the name still leads to the locked file, else retry
     * on the new one. */
    for (int tries = 0; tries < 100; tries++) {
        int fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
            return PS_FAIL(PS_ERR_INPUT, "%s: cannot create its lock file %s: %s", resolved, lk->path,
                           strerror(errno));
        ps_status st = ps_lock_fd(fd, resolved);
        if (st != PS_OK) {
            close(fd);
            return st;
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(lk->path, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino) {
            lk->fd = fd;
            lk->cleanup_slot = ps_cleanup_add(lk->path);
            return PS_OK;
        }
        close(fd);
    }
    return PS_FAIL(PS_ERR_SYSTEM, "%s: its lock file %s keeps changing", resolved, lk->path);
}

void ps_output_unlock(ps_lock *lk)
{
    if (!lk || lk->fd < 0) return;
    /* remove the name while still holding the lock: a waiter then retries on a fresh file (ps_output_lock) */
    unlink(lk->path);
    ps_cleanup_remove(lk->cleanup_slot);
    close(lk->fd);
    lk->fd = -1;
}

/* ---- temporaries removed on SIGTERM / SIGINT ---- */

/* Fixed slots, no allocation: the handler may only call async-signal-safe functions (unlink, signal, raise). */
#define CLEANUP_SLOTS 8
static char g_cleanup[CLEANUP_SLOTS][PATH_MAX];
static volatile sig_atomic_t g_cleanup_used[CLEANUP_SLOTS];

static void on_signal(int sig)
{
    for (int i = 0; i < CLEANUP_SLOTS; i++)
        if (g_cleanup_used[i]) unlink(g_cleanup[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void ps_cleanup_install(void)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        /* a signal the user set to be ignored (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

int ps_cleanup_add(const char *path)
{
    for (int i = 0; i < CLEANUP_SLOTS; i++) {
        if (g_cleanup_used[i]) continue;
        ps_strlcpy(g_cleanup[i], path, sizeof g_cleanup[i]);
        g_cleanup_used[i] = 1;
        return i;
    }
    return -1;
}

void ps_cleanup_remove(int slot)
{
    if (slot >= 0 && slot < CLEANUP_SLOTS) g_cleanup_used[slot] = 0;
}

/* MPI error conversion and outcome agreement (see ps_comm.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ps_comm.h"

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

ps_status ps_mpi_agree_status(MPI_Comm comm, ps_status local, const char *what)
{
    if (comm == MPI_COMM_NULL) return local; /* a process alone: nobody to wait for it */
    ps_status worst = PS_OK;
    int first = 0;
    ps_status ast = ps_mpi_agree(comm, local, &worst, &first);
    if (ast != PS_OK) return local != PS_OK ? local : ast;
    if (worst == PS_OK) return PS_OK;
    /* The failing rank's message travels with the failure: the command then fails on every rank, and main prints the
     * lowest failing rank's message, which is the relay of a rank below the one that failed. Every rank knows worst,
     * so all take part. */
    int rank = 0;
    char why[512] = "";
    PS_MPI(MPI_Comm_rank(comm, &rank));
    if (rank == first) ps_strlcpy(why, ps_error_message(), sizeof why);
    int rc = MPI_Bcast(why, (int)sizeof why, MPI_CHAR, first, comm);
    if (local != PS_OK) return local;
    PS_TRY(ps_mpi_status(rc, "MPI_Bcast", __FILE__, __LINE__));
    return PS_FAIL(worst, "%s failed on rank %d: %s", what, first, why);
}

void ps_mpi_strings_free(char **all, int n)
{
    if (!all) return;
    for (int i = 0; i < n; i++) free(all[i]);
    free(all);
}

ps_status ps_mpi_gather_strings(MPI_Comm comm, int root, const char *mine, char ***all, int *n)
{
    *all = NULL;
    *n = 0;
    int rank, size;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &size));
    size_t len = strlen(mine) + 1;
    if (len > INT32_MAX) return PS_FAIL(PS_ERR_SYSTEM, "result of %zu bytes is too large to gather", len);
    int mylen = (int)len;
    int *lens = NULL, *displs = NULL;
    char *buf = NULL;
    ps_status st = PS_OK;
    if (rank == root) {
        lens = ps_calloc((size_t)size, sizeof *lens);
        displs = ps_calloc((size_t)size, sizeof *displs);
        if (!lens || !displs) st = PS_ERR_SYSTEM;
    }
    /* Every rank must enter the collectives even when root failed to allocate, or the others hang. */
    int ok = st == PS_OK, all_ok = 0;
    PS_MPI_GOTO(st, MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm), done);
    if (!all_ok) {
        st = st != PS_OK ? st : PS_FAIL(PS_ERR_SYSTEM, "out of memory on the gathering rank");
        goto done;
    }
    PS_MPI_GOTO(st, MPI_Gather(&mylen, 1, MPI_INT, lens, 1, MPI_INT, root, comm), done);
    int64_t total = 0;
    if (rank == root) {
        for (int i = 0; i < size; i++) {
            displs[i] = (int)total;
            total += lens[i];
        }
        if (total > INT32_MAX)
            st = PS_FAIL(PS_ERR_SYSTEM, "gathered results of %lld bytes are too large", (long long)total);
        else if (!(buf = ps_calloc((size_t)total, 1))) st = PS_ERR_SYSTEM;
    }
    ok = st == PS_OK;
    PS_MPI_GOTO(st, MPI_Bcast(&ok, 1, MPI_INT, root, comm), done);
    if (!ok) {
        st = st != PS_OK ? st : PS_FAIL(PS_ERR_SYSTEM, "the gathering rank could not take the results");
        goto done;
    }
    PS_MPI_GOTO(st, MPI_Gatherv(mine, mylen, MPI_CHAR, buf, lens, displs, MPI_CHAR, root, comm), done);
    if (rank == root) {
        char **v = ps_calloc((size_t)size, sizeof *v);
        if (!v) {
            st = PS_ERR_SYSTEM;
            goto done;
        }
        for (int i = 0; i < size; i++) v[i] = ps_strdup(buf + displs[i]);
        for (int i = 0; i < size; i++)
            if (!v[i]) st = PS_ERR_SYSTEM;
        if (st != PS_OK) {
            ps_mpi_strings_free(v, size);
            goto done;
        }
        *all = v;
        *n = size;
    }
done:
    free(lens);
    free(displs);
    free(buf);
    return st;
}

ps_status ps_mpi_bcast_file(MPI_Comm comm, int root, const char *path, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (comm == MPI_COMM_NULL) {
        PS_TRY(ps_read_file(path, buf, len));
        return PS_OK;
    }
    int rank = 0;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    char *data = NULL;
    size_t n = 0;
    ps_status st = rank == root ? ps_read_file(path, &data, &n) : PS_OK;
    /* Agreed before anything else moves: a root that cannot read the file must not leave the others waiting in a
     * broadcast it never joins. */
    PS_TRY_GOTO(st, ps_mpi_agree_status(comm, st, "reading the input file"), done);
    /* ps_read_file refuses inputs over 64 MiB, so the size and the bytes each fit one int-counted broadcast. */
    int count = (int)n;
    PS_MPI_GOTO(st, MPI_Bcast(&count, 1, MPI_INT, root, comm), done);
    if (rank != root && !(data = ps_calloc((size_t)count + 1, 1))) st = PS_ERR_SYSTEM;
    /* The same for a rank that cannot take the bytes. */
    PS_TRY_GOTO(st, ps_mpi_agree_status(comm, st, "receiving the input file"), done);
    PS_MPI_GOTO(st, MPI_Bcast(data, count, MPI_BYTE, root, comm), done);
    *buf = data;
    *len = (size_t)count;
    return PS_OK;
done:
    free(data);
    return st;
}

bool ps_mpi_launched(void)
{
    /* What Open MPI's mpirun (OMPI_COMM_WORLD_SIZE, PMIX_*) and Slurm's srun (--mpi=pmix: PMIX_*; pmi2: PMI_*) put
     * in every rank's environment. */
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_NAMESPACE", "PMI_RANK", "PMI_FD",
                                       "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

#if defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
/* Open MPI 4's osc/rdma backs the windows of the ranks of one node with a file named osc_rdma.<node>.<job>.<cid>
 * (osc_rdma_component.c, allocate_state_shared), and communicators split from one call share their cid, so groups of
 * ranks on one node that each open a window at once (`psearch sweep`'s rank groups, each sharing its search's work
 * units and pruning floors through MPI_Win_allocate) create, map and unlink one file: a group read the other's
 * counters, MPI_Win_allocate failed ("unlink(2) /dev/shm/osc_rdma... No such file"), or a heap was corrupted
 * (open-mpi/ompi#9492; fixed in 5.0 by #9495, not in 4.1). The leader's file goes in its backing folder and the other
 * ranks attach to the path it created, so a folder per process makes every leader's file its own: a new
 * <base>/psearch-osc.XXXXXX (mkdtemp), base /dev/shm as osc/rdma's own default (else TMPDIR or /tmp), removed at exit
 * (the files in it are unlinked as soon as the window's ranks have attached), and those of killed runs at the next
 * start. A backing folder the user set in the environment is kept (one in an MCA parameter file is not seen here and
 * is replaced). */
static char g_osc_dir[512];
static int g_osc_lock = -1;
#define OSC_PREFIX "psearch-osc."
#define OSC_LOCK ".alive"

static void osc_warn(const char *what, const char *path)
{
    fprintf(stderr, "psearch: warning: %s %s (%s): rank groups of `psearch sweep` on one node may share a one-sided "
                    "window file (Open MPI 4); set OMPI_MCA_osc_rdma_backing_directory to a folder per process\n",
            what, path, strerror(errno));
}

/* An exclusive lock on the whole of fd's file (POSIX record lock: released when the process ends, however it ends). */
static int osc_lock(int fd)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    return fcntl(fd, F_SETLK, &fl);
}

/* Every file of a folder (not below), then the folder. */
static void osc_dir_clear(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[600];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

static void osc_dir_remove(void)
{
    if (!g_osc_dir[0]) return;
    osc_dir_clear(g_osc_dir);
    if (g_osc_lock >= 0) close(g_osc_lock);
}

/* The folders of this user's killed runs in base (a process ended by a signal never reaches its exit handler), with
 * the window files a run killed between a file's creation and its unlinking left there. A folder's process holds an
 * exclusive lock on its lock file from start to exit, so a lock taken here means the process is gone, also where
 * pid namespaces differ (containers sharing /dev/shm), which kill(pid, 0) could not tell. A folder without a lock file
 * (another program's, or one being created) is left alone. */
static void osc_stale_dirs(const char *base)
{
    DIR *d = opendir(base);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, OSC_PREFIX, strlen(OSC_PREFIX)) != 0) continue;
        char dir[512], lock[600];
        struct stat sb;
        if (snprintf(dir, sizeof dir, "%s/%s", base, e->d_name) >= (int)sizeof dir) continue;
        if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid()) continue;
        snprintf(lock, sizeof lock, "%s/" OSC_LOCK, dir);
        int fd = open(lock, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        if (osc_lock(fd) == 0) osc_dir_clear(dir);
        close(fd);
    }
    closedir(d);
}

static void osc_private_dir(void)
{
    if (getenv("OMPI_MCA_osc_rdma_backing_directory")) return;
    /* osc/rdma's own default is /dev/shm; without it, Open MPI's session folder, which lives under TMPDIR or /tmp */
    const char *base = "/dev/shm";
    if (access(base, W_OK | X_OK) != 0) {
        base = getenv("TMPDIR");
        if (!base || !*base) base = "/tmp";
    }
    osc_stale_dirs(base);
    /* a new folder every time (mkdtemp: created, never reused, whatever pids other namespaces have) */
    if (snprintf(g_osc_dir, sizeof g_osc_dir, "%s/" OSC_PREFIX "XXXXXX", base) >= (int)sizeof g_osc_dir) {
        errno = ENAMETOOLONG;
        osc_warn("no one-sided folder of its own under", base);
        g_osc_dir[0] = '\0';
        return;
    }
    if (!mkdtemp(g_osc_dir)) {
        osc_warn("could not create a one-sided folder", g_osc_dir);
        g_osc_dir[0] = '\0';
        return;
    }
    /* locked under another name, then renamed: a start sweeping at the same moment finds no lock file, or a held one */
    char lock[600], tmp[620];
    snprintf(lock, sizeof lock, "%s/" OSC_LOCK, g_osc_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", lock);
    g_osc_lock = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (g_osc_lock < 0 || osc_lock(g_osc_lock) != 0 || rename(tmp, lock) != 0) {
        osc_warn("could not lock", lock);
        if (g_osc_lock >= 0) close(g_osc_lock);
        g_osc_lock = -1;
        osc_dir_clear(g_osc_dir);
        g_osc_dir[0] = '\0';
        return;
    }
    setenv("OMPI_MCA_osc_rdma_backing_directory", g_osc_dir, 1);
    atexit(osc_dir_remove);
}
#endif

int ps_mpi_init(int *argc, char ***argv, int required, int *provided)
{
#ifdef OPEN_MPI
    if (!ps_mpi_launched()) {
        setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
        setenv("OMPI_MCA_pml", "ob1", 0);
    }
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
    else {
        osc_private_dir(); /* a singleton's windows have no other rank to share a file with */
    }
#endif
#endif
    return MPI_Init_thread(argc, argv, required, provided);
}

/* One-sided windows of rank groups open at once, as `psearch sweep` runs them (each group of a split communicator
 * shares its search's work through its own MPI_Win_allocate window while the other groups do the same): every window
 * must be its group's alone. Open MPI 4's osc/rdma names the shared-memory file behind a window by job id and
 * communicator id only, and communicators split from one call share that id (open-mpi/ompi#9492, fixed in 5.0 by
 * #9495), so two groups' leaders on one node created, mapped and unlinked one file: MPI_Win_allocate failed ("unlink(2)
 * ... No such file") or the groups wrote into each other's windows, and `psearch sweep --group-ranks` died of a
 * corrupted heap about once in 30 runs. ps_mpi_init gives each process a backing folder of its own (comm/comm.c).
 *
 *   test_win_groups [--raw]      --raw: MPI_Init_thread instead of ps_mpi_init (shows the library's fault)
 *
 * Groups of two ranks; each round every rank writes a value of its own into its window, the group reads its peers'
 * values back, and all groups keep their windows open until every rank has read. Before starting MPI each rank
 * leaves a folder as a killed run does (a lock file nobody holds, a window file): ps_mpi_init removes it; after, every
 * rank has a folder of its own, still there. Those checks are skipped where the user set the backing folder. Exit 1
 * on a failure on any rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "ps_comm.h"
#include "mpi_check.h"

static int g_rank, g_failures;

enum { ROUNDS = 60 };

static int value_of(int world_rank, int round) { return 1000 * round + world_rank + 1; }

int main(int argc, char **argv)
{
    int provided = 0, size = 0;
    int raw = argc > 1 && strcmp(argv[1], "--raw") == 0;
    /* the folder of a killed run: a lock file nobody holds, a window file its run never unlinked */
    char stale[128] = "";
    int user_set = getenv("OMPI_MCA_osc_rdma_backing_directory") != NULL;
    if (!raw && !user_set && access("/dev/shm", W_OK | X_OK) == 0) {
        snprintf(stale, sizeof stale, "/dev/shm/psearch-osc.XXXXXX");
        if (!mkdtemp(stale)) stale[0] = '\0';
        const char *names[] = {".alive", "osc_rdma.vm.1.4"};
        for (int i = 0; stale[0] && i < 2; i++) {
            char f[160];
            snprintf(f, sizeof f, "%s/%s", stale, names[i]);
            FILE *fp = fopen(f, "w");
            if (fp) fclose(fp);
        }
    }
    int rc = raw ? MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided)
                 : ps_mpi_init(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "test_win_groups: MPI start-up failed\n");
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#if defined(OPEN_MPI) && defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
    if (!raw && !user_set) {
        /* every rank a folder of its own, each there (no rank's start removed another's), each locked by its rank */
        char mine[512] = "", all[4][512];
        const char *dir = getenv("OMPI_MCA_osc_rdma_backing_directory");
        if (dir) snprintf(mine, sizeof mine, "%s", dir);
        CHECK(mine[0], "no backing folder of this rank's own");
        int n = size < 4 ? size : 4;
        char *gathered = calloc((size_t)size, sizeof mine);
        MPI_Allgather(mine, (int)sizeof mine, MPI_CHAR, gathered, (int)sizeof mine, MPI_CHAR, MPI_COMM_WORLD);
        for (int r = 0; r < n; r++) memcpy(all[r], gathered + (size_t)r * sizeof mine, sizeof mine);
        free(gathered);
        for (int r = 0; r < n; r++) {
            struct stat sb;
            char lock[600];
            snprintf(lock, sizeof lock, "%.511s/.alive", all[r]);
            CHECK(all[r][0] && stat(all[r], &sb) == 0 && S_ISDIR(sb.st_mode) && stat(lock, &sb) == 0,
                  "rank %d's folder '%s' or its lock file is missing", r, all[r]);
            for (int q = 0; q < r; q++) CHECK(strcmp(all[q], all[r]) != 0, "ranks %d and %d share %s", q, r, all[r]);
        }
        struct stat sb;
        CHECK(!stale[0] || stat(stale, &sb) != 0, "%s, the folder of a killed run, is still there", stale);
    }
#endif
    if (stale[0]) { /* the test's own, where a failure left it */
        char f[160];
        snprintf(f, sizeof f, "%s/.alive", stale);
        unlink(f);
        snprintf(f, sizeof f, "%s/osc_rdma.vm.1.4", stale);
        unlink(f);
        rmdir(stale);
    }
    MPI_Comm group;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank / 2, g_rank, &group);
    MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
    int grank = 0, gsize = 0;
    MPI_Comm_rank(group, &grank);
    MPI_Comm_size(group, &gsize);
    for (int round = 0; round < ROUNDS; round++) {
        int *base = NULL, ok = 1;
        MPI_Win win = MPI_WIN_NULL;
        MPI_Barrier(MPI_COMM_WORLD); /* every group creates its window at once */
        rc = MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, group, &base, &win);
        CHECK(rc == MPI_SUCCESS, "round %d: MPI_Win_allocate failed (%d)", round, rc);
        ok = rc == MPI_SUCCESS;
        /* one outcome per group: a rank whose allocation failed must not leave its peers in the reads below */
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, group);
        if (ok) {
            MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
            MPI_Win_lock_all(0, win);
            *base = value_of(g_rank, round);
            MPI_Win_sync(win);
            MPI_Barrier(MPI_COMM_WORLD); /* every rank of every group has written */
            MPI_Win_sync(win);
            for (int p = 0; p < gsize; p++) {
                int got = -1;
                MPI_Get(&got, 1, MPI_INT, p, 0, 1, MPI_INT, win);
                MPI_Win_flush(p, win);
                int want = value_of((g_rank / 2) * 2 + p, round);
                CHECK(got == want, "round %d: group rank %d's window holds %d, not %d (another group's value?)",
                      round, p, got, want);
                if (got != want) ok = 0;
            }
            MPI_Barrier(MPI_COMM_WORLD); /* every rank has read before any window closes */
            MPI_Win_unlock_all(win);
            MPI_Win_free(&win);
        } else {
            /* a window some members hold and some do not cannot be freed (a collective): left to MPI_Finalize */
            MPI_Barrier(MPI_COMM_WORLD); /* the two barriers the other groups pass */
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
    int total = 0, fails = g_failures;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_win_groups: %d ranks in groups of 2, %d rounds (%s): %d failed check(s)\n", size, ROUNDS,
               raw ? "MPI_Init_thread" : "ps_mpi_init", total);
    MPI_Comm_free(&group);
    MPI_Finalize();
    return total ? 1 : 0;
}

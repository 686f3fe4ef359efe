/* Cells across rank groups (mpi/sweep.c): how ps_sweep_groups_make splits cells (hand-computed cases), and
 * ps_sweep_run_groups with a stand-in search on 1-4 ranks: every cell searched by exactly one group (or by all
 * ranks when shared) with the group's ranks all taking part, every cell taken once by rank 0 with its own bytes,
 * rank 0's poll called during its own cells, and a failed cell stopping every rank without a hang, the failing
 * group's ranks reporting it. Every rank runs every check; the exit code reports a failure on any rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "mpi_check.h"
#include "ps_comm.h"
#include "ps_mpi.h"

static int g_rank, g_size;
static int g_failures;

enum { N_CELLS = 12 };

static int same_list(const int *got, int n_got, const int *want, int n_want)
{
    if (n_got != n_want) return 0;
    for (int i = 0; i < n_want; i++)
        if (got[i] != want[i]) return 0;
    return 1;
}

/* ---- ps_sweep_groups_make: pure, hand-computed ---- */
static void test_make(void)
{
    ps_sweep_groups g;
    /* 4 cells to search (cell 3 done) on 2 ranks: 2 groups; total 11, no cell above 11 / 2 */
    double w1[] = {5, 1, 3, 7, 2};
    unsigned char d1[] = {0, 0, 0, 1, 0};
    CHECK(ps_sweep_groups_make(w1, d1, 5, 2, 0, &g) == PS_OK, "make 1");
    int h1[] = {0, 2, 4, 1};
    CHECK(g.n_groups == 2 && same_list(g.handed, g.n_handed, h1, 4) && g.n_shared == 0,
          "largest first, done cell left out: %d groups, %d handed, %d shared", g.n_groups, g.n_handed, g.n_shared);
    ps_sweep_groups_free(&g);

    /* 4 ranks, one big cell: 10 * 4 > 13, so it is shared; equal estimates in cell order */
    double w2[] = {1, 10, 1, 1};
    unsigned char d2[4] = {0};
    CHECK(ps_sweep_groups_make(w2, d2, 4, 4, 0, &g) == PS_OK, "make 2");
    int h2[] = {0, 2, 3}, s2[] = {1};
    CHECK(g.n_groups == 4 && same_list(g.handed, g.n_handed, h2, 3) && same_list(g.shared, g.n_shared, s2, 1),
          "a big cell on all ranks: %d groups, %d handed, %d shared", g.n_groups, g.n_handed, g.n_shared);
    ps_sweep_groups_free(&g);

    /* one group (1 rank, or --group-ranks at least the rank count): nothing shared, whatever the sizes */
    CHECK(ps_sweep_groups_make(w2, d2, 4, 1, 0, &g) == PS_OK && g.n_groups == 1 && g.n_shared == 0 &&
              g.n_handed == 4,
          "1 rank: %d groups, %d shared", g.n_groups, g.n_shared);
    ps_sweep_groups_free(&g);
    CHECK(ps_sweep_groups_make(w2, d2, 4, 8, 16, &g) == PS_OK && g.n_groups == 1 && g.n_shared == 0,
          "--group-ranks 16 on 8 ranks: %d groups", g.n_groups);
    ps_sweep_groups_free(&g);

    /* automatic: 3 cells on 8 ranks make 3 groups (3, 3, 2 ranks); --group-ranks 3 on 8 ranks makes 2 (4, 4) */
    double w3[] = {1, 1, 1};
    unsigned char d3[3] = {0};
    CHECK(ps_sweep_groups_make(w3, d3, 3, 8, 0, &g) == PS_OK && g.n_groups == 3, "3 cells, 8 ranks: %d groups",
          g.n_groups);
    ps_sweep_groups_free(&g);
    int want8of3[] = {0, 0, 0, 1, 1, 1, 2, 2};
    for (int r = 0; r < 8; r++)
        CHECK(ps_sweep_group_of(r, 8, 3) == want8of3[r], "rank %d of 8 in group %d", r, ps_sweep_group_of(r, 8, 3));
    CHECK(ps_sweep_groups_make(w3, d3, 3, 8, 3, &g) == PS_OK && g.n_groups == 2, "--group-ranks 3: %d groups",
          g.n_groups);
    ps_sweep_groups_free(&g);

    /* every cell done: nothing to hand out, one group */
    unsigned char all[3] = {1, 1, 1};
    CHECK(ps_sweep_groups_make(w3, all, 3, 4, 0, &g) == PS_OK && g.n_groups == 1 && g.n_handed == 0 &&
              g.n_shared == 0,
          "all done: %d groups, %d handed", g.n_groups, g.n_handed);
    ps_sweep_groups_free(&g);
}

/* ---- ps_sweep_run_groups with a stand-in search ---- */
typedef struct {
    int ran[N_CELLS];   /* this rank took part in the cell */
    int led[N_CELLS];   /* this rank was its group's rank 0 */
    int size[N_CELLS];  /* the group's size as this rank saw it */
    int taken[N_CELLS]; /* rank 0: take() calls per cell */
    int bad_bytes;      /* rank 0: a take() whose bytes were not the cell's */
    int polls;          /* rank 0: poll calls seen */
    int fail_cell;      /* this cell fails on every rank of its group (-1: none) */
} fake;

/* "Searches" for a while proportional to the cell's number (rank 0 calling poll throughout, as the search does
 * between work units), then the group agrees on the outcome as the search's own reduction would. */
static ps_status fake_run(void *arg, int cell, MPI_Comm group, const ps_mpi_poll *poll, char **out, size_t *len)
{
    fake *f = arg;
    int gr = 0, gs = 1;
    MPI_Comm_rank(group, &gr);
    MPI_Comm_size(group, &gs);
    f->ran[cell]++;
    f->size[cell] = gs;
    if (gr == 0) f->led[cell]++;
    double until = MPI_Wtime() + 0.002 * (cell % 4 + 1);
    while (MPI_Wtime() < until)
        if (poll) {
            poll->fn(poll->arg);
            f->polls++;
        }
    int failed = cell == f->fail_cell, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, group);
    if (any) return PS_FAIL(PS_ERR_SYSTEM, "cell %d failed", cell);
    if (gr == 0) {
        char buf[64];
        int n = snprintf(buf, sizeof buf, "cell %d", cell);
        *out = malloc((size_t)n + 1);
        if (*out) {
            memcpy(*out, buf, (size_t)n + 1);
            *len = (size_t)n;
        }
    }
    return PS_OK;
}

static ps_status fake_take(void *arg, int cell, const char *bytes, size_t len)
{
    fake *f = arg;
    char want[64];
    snprintf(want, sizeof want, "cell %d", cell);
    if (len != strlen(want) || memcmp(bytes, want, len) != 0) f->bad_bytes++;
    f->taken[cell]++;
    return PS_OK;
}

static void sum_over_ranks(int *v, int n) { MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD); }

/* One sweep of N_CELLS cells (cell 0 big enough to be shared when there are several groups). */
static void test_run(int group_ranks, int fail_cell)
{
    double w[N_CELLS];
    unsigned char done[N_CELLS] = {0};
    for (int i = 0; i < N_CELLS; i++) w[i] = 1 + i % 3;
    w[0] = 100;
    ps_sweep_groups g;
    CHECK(ps_sweep_groups_make(w, done, N_CELLS, g_size, group_ranks, &g) == PS_OK, "make");
    fake f;
    memset(&f, 0, sizeof f);
    f.fail_cell = fail_cell;
    ps_sweep_cell_ops ops = {fake_run, fake_take, &f};
    ps_sweep_run_stats rs;
    int stop = -1;
    ps_status st = ps_sweep_run_groups(MPI_COMM_WORLD, &g, &ops, &rs, &stop);
    const char *what = fail_cell < 0 ? "sweep" : "sweep with a failed cell";
    int my_group_failed = fail_cell >= 0 && f.ran[fail_cell] > 0;
    if (fail_cell < 0) {
        CHECK(st == PS_OK && stop == 0, "%s (group-ranks %d): status %d, stop %d", what, group_ranks, st, stop);
    } else {
        /* the failure is the failing group's to report; the others only stop */
        CHECK(stop == 1, "%s: stop %d", what, stop);
        CHECK((st != PS_OK) == my_group_failed, "%s: status %d, my group ran it: %d", what, st, my_group_failed);
    }
    ps_error_clear();
    int expect_size = g_size / g.n_groups; /* the groups here divide the ranks evenly */
    CHECK(rs.group_size == expect_size, "group of %d ranks, expected %d", rs.group_size, expect_size);
    int shared[N_CELLS] = {0};
    for (int x = 0; x < g.n_shared; x++) shared[g.shared[x]] = 1;
    for (int c = 0; c < N_CELLS; c++)
        if (f.ran[c]) CHECK(f.size[c] == (shared[c] ? g_size : expect_size), "cell %d on %d ranks", c, f.size[c]);
    sum_over_ranks(f.ran, N_CELLS);
    sum_over_ranks(f.led, N_CELLS);
    for (int c = 0; c < N_CELLS && fail_cell < 0; c++) {
        CHECK(f.led[c] == 1, "cell %d led %d times", c, f.led[c]);
        CHECK(f.ran[c] == (shared[c] ? g_size : expect_size), "cell %d searched by %d ranks", c, f.ran[c]);
    }
    if (fail_cell >= 0)
        for (int c = 0; c < N_CELLS; c++) CHECK(f.led[c] <= 1, "cell %d led %d times after a failure", c, f.led[c]);
    if (g_rank == 0) {
        for (int c = 0; c < N_CELLS; c++) {
            if (fail_cell < 0) CHECK(f.taken[c] == 1, "cell %d taken %d times", c, f.taken[c]);
            else CHECK(f.taken[c] <= (c != fail_cell), "cell %d taken %d times after a failure", c, f.taken[c]);
        }
        CHECK(f.bad_bytes == 0, "%d takes with another cell's bytes", f.bad_bytes);
        /* rank 0 answers the others while it searches: its poll ran whenever there were other groups */
        if (g.n_groups > 1 && fail_cell < 0) CHECK(f.polls > 0, "rank 0 never polled");
    }
    ps_sweep_groups_free(&g);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);

    test_make();
    test_run(0, -1);          /* one rank per group, cell 0 shared when there are several */
    test_run(g_size, -1);     /* one group of every rank: today's sweep */
    if (g_size % 2 == 0) test_run(2, -1); /* groups of two */
    test_run(0, 5);           /* a handed-out cell fails */
    test_run(0, 0);           /* the shared cell fails (or the only group's, on 1 rank) */

    int total = 0;
    MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("test_sweep_groups: %d ranks, %d failed checks\n", g_size, total);
    MPI_Finalize();
    return total ? 1 : 0;
}

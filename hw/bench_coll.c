/* Collectives the nccl-tests way, over MPI: all-reduce, all-gather, reduce-scatter, all-to-all and ring send/recv,
 * sizes 1 KiB up to 1 GiB in x2 steps (quick: 1 KiB to 1 MiB in x4 steps), groups of 2, 4, ... up to all ranks of
 * a node (inside a node) and one rank per node up to all nodes (across nodes). Every group of a shape runs at once,
 * as all TP or DP groups of a training job do. Reported: time (the slowest member, median over repetitions),
 * algorithm bandwidth size/time and bus bandwidth algbw x factor (ps_bench_busbw_factor). Also the overlap
 * benchmark: a GEMM and an MPI_Iallreduce together against each alone.
 * Both run on host memory with CPU GEMMs, so they measure CPU ranks only: with a GPU rank in the allocation they
 * write no rows (a warning says so) until an NCCL backend measures GPU collectives and overlap. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "bench_internal.h"
#include "ps_mpi.h"

static const char *const k_ops[] = {"allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"};
#define N_OPS 5

/* One collective of `bytes` (nccl-tests sizing) over g (n ranks). Counts are floats, rounded down to a multiple of
 * n so every rank's share is whole; The caller records the bytes of the rounded count. */
static int run_op(int op, MPI_Comm g, int n, int me, float *sbuf, float *rbuf, size_t count)
{
    switch (op) {
    case 0: return MPI_Allreduce(sbuf, rbuf, (int)count, MPI_FLOAT, MPI_SUM, g);
    case 1: return MPI_Allgather(sbuf, (int)(count / (size_t)n), MPI_FLOAT, rbuf, (int)(count / (size_t)n), MPI_FLOAT, g);
    case 2: return MPI_Reduce_scatter_block(sbuf, rbuf, (int)(count / (size_t)n), MPI_FLOAT, MPI_SUM, g);
    case 3: return MPI_Alltoall(sbuf, (int)(count / (size_t)n), MPI_FLOAT, rbuf, (int)(count / (size_t)n), MPI_FLOAT, g);
    default:
        /* a ring: every rank sends to the next and receives from the previous, as nccl-tests sendrecv does */
        return MPI_Sendrecv(sbuf, (int)count, MPI_FLOAT, (me + 1) % n, 7, rbuf, (int)count, MPI_FLOAT, (me + n - 1) % n, 7,
                            g, MPI_STATUS_IGNORE);
    }
}

typedef struct {
    int nranks, rank, node, lrank, nlocal, nnodes, max_local, min_local;
} layout;

/* Where this rank sits, from what ps_bench_device_init found (node, local rank, ranks on its node), and one MAX
 * reduction for the node count and the largest and smallest node. */
static ps_status get_layout(MPI_Comm comm, const ps_bench_results *r, layout *L)
{
    PS_MPI(MPI_Comm_size(comm, &L->nranks));
    PS_MPI(MPI_Comm_rank(comm, &L->rank));
    L->node = r->dev.node;
    L->lrank = r->dev.local_rank;
    L->nlocal = r->node_ranks;
    int v[3] = {L->node, L->nlocal, -L->nlocal}, m[3];
    PS_MPI(MPI_Allreduce(v, m, 3, MPI_INT, MPI_MAX, comm));
    L->nnodes = m[0] + 1;
    L->max_local = m[1];
    L->min_local = -m[2];
    return PS_OK;
}

/* The colour of this rank in the groups of size gs of a kind, or MPI_UNDEFINED when it sits in none. */
static int colour(const layout *L, int gs, int inter)
{
    if (!inter) {
        /* consecutive local ranks of one node; a tail that cannot fill a group sits out */
        int idx = L->lrank / gs;
        if ((idx + 1) * gs > L->nlocal) return MPI_UNDEFINED;
        return L->node * L->max_local + idx;
    }
    /* one rank per node: the same local rank on gs consecutive nodes */
    int idx = L->node / gs;
    if ((idx + 1) * gs > L->nnodes || L->lrank >= L->min_local) return MPI_UNDEFINED;
    return L->lrank * L->nnodes + idx;
}

/* Buffers and timings shared by every group of a run. */
typedef struct {
    const ps_bench_opts *o;
    ps_bench_results *r;
    const layout *L;
    float *sbuf, *rbuf;
    double *t, *tmax;
    size_t max_bytes, step;
} coll_run;

/* Every op and size on this rank's group g (n ranks, this rank me); the group's rank 0 keeps the rows. `groups`
 * groups of the shape run at once. */
static ps_status measure_group(const coll_run *c, MPI_Comm g, int n, int me, int inter, int groups)
{
    const ps_bench_opts *o = c->o;
    for (int op = 0; op < N_OPS; op++) {
        for (size_t bytes = 1024; bytes <= c->max_bytes; bytes *= c->step) {
            size_t count = bytes / sizeof(float) / (size_t)n * (size_t)n;
            if (count == 0) continue;
            for (int i = -o->warmup; i < o->reps; i++) {
                PS_MPI(MPI_Barrier(g));
                double t0 = MPI_Wtime();
                PS_MPI(run_op(op, g, n, me, c->sbuf, c->rbuf, count));
                if (i >= 0) c->t[i] = MPI_Wtime() - t0;
            }
            /* the collective ends when its slowest member is done */
            PS_MPI(MPI_Allreduce(c->t, c->tmax, o->reps, MPI_DOUBLE, MPI_MAX, g));
            if (me != 0) continue;
            ps_bench_stat s = ps_bench_stats(c->tmax, o->reps);
            ps_bench_coll row;
            memset(&row, 0, sizeof row);
            ps_strlcpy(row.op, k_ops[op], sizeof row.op);
            row.group_size = n;
            row.inter_node = inter;
            row.root_rank = c->L->rank;
            row.n_groups = groups;
            row.bytes = (double)count * sizeof(float);
            row.time_s = s.median;
            row.algbw_Bps = s.median > 0 ? row.bytes / s.median : 0;
            row.busbw_Bps = row.algbw_Bps * ps_bench_busbw_factor(k_ops[op], n);
            row.spread = s.spread;
            row.reps = o->reps;
            char what[96];
            snprintf(what, sizeof what, "%s %d ranks %s, %.0f bytes", k_ops[op], n,
                     inter ? "across nodes" : "in a node", row.bytes);
            ps_bench_check_spread(o, c->r, what, &s);
            PS_TRY(ps_bench_push((void **)&c->r->coll, &c->r->n_coll, &c->r->cap_coll, sizeof row, &row));
        }
    }
    return PS_OK;
}

/* True on every rank when every rank measures with the CPU backend. Host-memory MPI timings say nothing of NVLink or
 * InfiniBand between GPUs, nor of a CPU sgemm what GPU kernels and NCCL do to each other: written for GPU ranks they
 * would replace the cost model's analytic links and its sourced overlap slowdown with wrong numbers. */
static ps_status host_only(MPI_Comm comm, const ps_bench_results *r, const ps_bench_opts *o, const char *what,
                           bool *yes)
{
    int mine = strcmp(r->backend, "cpu") == 0, all = 0;
    PS_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm));
    *yes = all != 0;
    if (!*yes && o->log)
        fprintf(o->log, "# warning: %s of GPUs are not measured until the NCCL backend lands (docs/costdb.md, "
                        "Limits): no rows; the cost model keeps its analytic model for them\n", what);
    return PS_OK;
}

ps_status ps_bench_coll_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    bool host = false;
    PS_TRY(host_only(comm, r, o, "collectives", &host));
    if (!host) return PS_OK;
    layout L;
    PS_TRY(get_layout(comm, r, &L));
    if (L.nranks < 2) {
        if (o->log) fprintf(o->log, "# collectives: 1 rank, nothing to measure (run under mpirun/srun)\n");
        return PS_OK;
    }
    coll_run c = {.o = o, .r = r, .L = &L, .step = o->quick ? 4 : 2};
    /* Largest size: 1 GiB, or less where two buffers per rank would take more than a third of the node's memory. */
    c.max_bytes = o->quick ? (size_t)1 << 20 : (size_t)1 << 30;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages > 0 && psz > 0) {
        double cap = (double)pages * (double)psz / (6.0 * L.max_local);
        while (c.max_bytes > 4096 && (double)c.max_bytes > cap) c.max_bytes /= 2;
    }
    size_t max_count = c.max_bytes / sizeof(float);
    c.sbuf = ps_calloc(max_count, sizeof *c.sbuf);
    c.rbuf = ps_calloc(max_count, sizeof *c.rbuf);
    c.t = ps_calloc((size_t)o->reps, sizeof *c.t);
    c.tmax = ps_calloc((size_t)o->reps, sizeof *c.tmax);
    ps_status st = PS_OK;
    MPI_Comm g = MPI_COMM_NULL;
    PS_TRY_GOTO(st,
                ps_mpi_agree_status(comm, c.sbuf && c.rbuf && c.t && c.tmax ? PS_OK : PS_ERR_SYSTEM,
                                    "collective benchmark: allocation"),
                done);
    for (size_t i = 0; i < max_count; i++) c.sbuf[i] = 1.0f;
    if (o->log)
        fprintf(o->log, "# collectives: %d rank(s) on %d node(s), sizes 1 KiB .. %zu KiB x%zu, %d reps + %d warm-up\n",
                L.nranks, L.nnodes, c.max_bytes >> 10, c.step, o->reps, o->warmup);

    for (int inter = 0; inter <= 1; inter++) {
        int limit = inter ? L.nnodes : L.max_local;
        for (int gs = 2; gs <= limit; gs = gs * 2 > limit && gs != limit ? limit : gs * 2) {
            int col = colour(&L, gs, inter);
            PS_MPI_GOTO(st, MPI_Comm_split(comm, col, L.rank, &g), done);
            int n = 0, me = 0, groups = 0, root = col != MPI_UNDEFINED;
            if (g != MPI_COMM_NULL) {
                PS_MPI_GOTO(st, MPI_Comm_size(g, &n), next);
                PS_MPI_GOTO(st, MPI_Comm_rank(g, &me), next);
                root = me == 0;
            }
            PS_MPI_GOTO(st, MPI_Allreduce(&root, &groups, 1, MPI_INT, MPI_SUM, comm), next);
            if (g != MPI_COMM_NULL && n == gs) st = measure_group(&c, g, n, me, inter, groups);
        next:
            if (g != MPI_COMM_NULL) {
                int rc = MPI_Comm_free(&g);
                if (st == PS_OK && rc != MPI_SUCCESS) st = ps_mpi_status(rc, "MPI_Comm_free", __FILE__, __LINE__);
            }
            /* a rank that failed above must not leave the others waiting in the next split */
            if ((st = ps_mpi_agree_status(comm, st, "collective benchmark")) != PS_OK) goto done;
            if (gs == limit) break;
        }
    }
done:
    if (g != MPI_COMM_NULL) MPI_Comm_free(&g);
    free(c.sbuf);
    free(c.rbuf);
    free(c.t);
    free(c.tmax);
    return st;
}

/* ---- overlap ------------------------------------------------------------------------------------------------------ */

/* An n x n x n sgemm in `chunks` row blocks; between blocks MPI_Test drives a pending request (req may be NULL):
 * with MPI_THREAD_FUNNELED this is how a CPU rank progresses communication while it computes. */
static ps_status chunked_gemm(const float *a, const float *b, float *c, int n, int chunks, MPI_Request *req)
{
    int rows = n / chunks;
    for (int i = 0; i < chunks; i++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n, n, 1.0f, a + (size_t)i * rows * n, n, b, n,
                    0.0f, c + (size_t)i * rows * n, n);
        if (req && *req != MPI_REQUEST_NULL) {
            int done = 0;
            PS_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        }
    }
    return PS_OK;
}

ps_status ps_bench_overlap_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    int nranks = 0;
    PS_MPI(MPI_Comm_size(comm, &nranks));
    if (nranks < 2) return PS_OK;
    bool host = false;
    PS_TRY(host_only(comm, r, o, "overlap of computation and communication", &host));
    if (!host) return PS_OK;
    int n = o->quick ? 384 : 1024, chunks = 16;
    size_t count = (o->quick ? (size_t)1 << 20 : (size_t)1 << 23); /* floats: 4 MiB (quick), 32 MiB */
    float *a = ps_calloc((size_t)n * n, sizeof *a), *b = ps_calloc((size_t)n * n, sizeof *b);
    float *c = ps_calloc((size_t)n * n, sizeof *c);
    float *s = ps_calloc(count, sizeof *s), *d = ps_calloc(count, sizeof *d);
    double *tg = ps_calloc((size_t)o->reps, sizeof(double)), *tc = ps_calloc((size_t)o->reps, sizeof(double));
    double *tb = ps_calloc((size_t)o->reps, sizeof(double));
    ps_status st = PS_OK;
    MPI_Request req = MPI_REQUEST_NULL;
    PS_TRY_GOTO(st,
                ps_mpi_agree_status(comm, a && b && c && s && d && tg && tc && tb ? PS_OK : PS_ERR_SYSTEM,
                                    "overlap benchmark: allocation"),
                done);
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = 0.5f;
    for (size_t i = 0; i < count; i++) s[i] = 1.0f;
    for (int i = -o->warmup; i < o->reps; i++) {
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
        double t0 = MPI_Wtime();
        PS_TRY_GOTO(st, chunked_gemm(a, b, c, n, chunks, NULL), done);
        double g1 = MPI_Wtime() - t0;
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
        t0 = MPI_Wtime();
        PS_MPI_GOTO(st, MPI_Iallreduce(s, d, (int)count, MPI_FLOAT, MPI_SUM, comm, &req), done);
        PS_MPI_GOTO(st, MPI_Wait(&req, MPI_STATUS_IGNORE), done);
        double c1 = MPI_Wtime() - t0;
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
        t0 = MPI_Wtime();
        PS_MPI_GOTO(st, MPI_Iallreduce(s, d, (int)count, MPI_FLOAT, MPI_SUM, comm, &req), done);
        PS_TRY_GOTO(st, chunked_gemm(a, b, c, n, chunks, &req), done);
        PS_MPI_GOTO(st, MPI_Wait(&req, MPI_STATUS_IGNORE), done);
        double b1 = MPI_Wtime() - t0;
        if (i >= 0) {
            tg[i] = g1;
            tc[i] = c1;
            tb[i] = b1;
        }
    }
    ps_bench_stat sg = ps_bench_stats(tg, o->reps), sc = ps_bench_stats(tc, o->reps), sb = ps_bench_stats(tb, o->reps);
    ps_bench_overlap row;
    memset(&row, 0, sizeof row);
    row.rank = r->dev.rank;
    row.gemm_s = sg.median;
    row.comm_s = sc.median;
    row.both_s = sb.median;
    row.gemm_flops = 2.0 * n * (double)n * n;
    row.comm_bytes = (double)count * sizeof(float);
    double lo = fmin(sg.median, sc.median), hi = fmax(sg.median, sc.median);
    /* both = hi + (s - 1) lo, the form ps_cost_overlapped uses; values below 1 (noise) are kept as measured */
    row.slowdown = lo > 0 ? 1 + (sb.median - hi) / lo : 1;
    row.reps = o->reps;
    ps_bench_check_spread(o, r, "overlap: gemm + all-reduce together", &sb);
    st = ps_bench_push((void **)&r->ovl, &r->n_ovl, &r->cap_ovl, sizeof row, &row);
done:
    /* MPI_Request_free on a pending non-blocking collective is erroneous (MPI-3.1 sec. 5.12): the all-reduce the
     * other ranks started with this one is completed, and its outcome no longer matters. */
    if (req != MPI_REQUEST_NULL) MPI_Wait(&req, MPI_STATUS_IGNORE);
    free(a);
    free(b);
    free(c);
    free(s);
    free(d);
    free(tg);
    free(tc);
    free(tb);
    return st;
}

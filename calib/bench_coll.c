/* Collectives the nccl-tests way, on every rank of a calibration: all-reduce, all-gather, reduce-scatter, all-to-all
 * and ring send/recv, sizes 1 KiB up to 1 GiB in x2 steps (quick: 1 KiB to 1 MiB in x4 steps), groups of 2, 4, ... up
 * to all ranks of a node (inside a node) and one rank per node up to all nodes (across nodes). Every group of a shape
 * runs at once, as all TP or DP groups of a training job do. Reported: time (the slowest member, median over
 * repetitions), algorithm bandwidth size/time and bus bandwidth algbw x factor (ps_bench_busbw_factor). Also the
 * overlap benchmark: a GEMM and an all-reduce together against each alone.
 * Two backends run the single steps (ps_bench_coll_backend, ps_bench_ovl_backend): MPI on host memory with CPU sgemms
 * when every rank is a CPU rank; NCCL on device memory with cuBLAS GEMMs (bench_cuda.c) when every rank has a GPU and
 * the build has NCCL. The groups, sizes, timing, statistics and rows here are the same for both. A mixed allocation
 * (some ranks with a GPU, some without), or GPU ranks in a build without NCCL, writes no rows (a warning says so). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "bench_internal.h"
#include "ps_comm.h"

/* ---- collectives, MPI backend: host memory -------------------------------------------------------------------- */

typedef struct {
    float *sbuf, *rbuf;
} mpi_coll;

static void mpi_coll_close(void *state)
{
    mpi_coll *m = state;
    if (!m) return;
    free(m->sbuf);
    free(m->rbuf);
    free(m);
}

static ps_status mpi_coll_open(size_t bytes, void **state)
{
    mpi_coll *m = ps_calloc(1, sizeof *m);
    *state = m;
    if (!m) return PS_ERR_SYSTEM;
    size_t count = bytes / sizeof(float);
    m->sbuf = ps_calloc(count, sizeof *m->sbuf);
    m->rbuf = ps_calloc(count, sizeof *m->rbuf);
    if (!m->sbuf || !m->rbuf) return PS_ERR_SYSTEM; /* the caller closes what was made */
    for (size_t i = 0; i < count; i++) m->sbuf[i] = 1.0f;
    return PS_OK;
}

/* Counts are floats, a multiple of n (the caller rounds), so every rank's share is whole. */
static ps_status mpi_coll_run(void *state, int op, MPI_Comm g, int n, int me, size_t count)
{
    mpi_coll *m = state;
    int share = (int)(count / (size_t)n), rc;
    switch (op) {
    case PS_COLL_ALLREDUCE: rc = MPI_Allreduce(m->sbuf, m->rbuf, (int)count, MPI_FLOAT, MPI_SUM, g); break;
    case PS_COLL_ALLGATHER: rc = MPI_Allgather(m->sbuf, share, MPI_FLOAT, m->rbuf, share, MPI_FLOAT, g); break;
    case PS_COLL_REDUCESCATTER: rc = MPI_Reduce_scatter_block(m->sbuf, m->rbuf, share, MPI_FLOAT, MPI_SUM, g); break;
    case PS_COLL_ALLTOALL: rc = MPI_Alltoall(m->sbuf, share, MPI_FLOAT, m->rbuf, share, MPI_FLOAT, g); break;
    default:
        /* a ring: every rank sends to the next and receives from the previous, as nccl-tests sendrecv does */
        rc = MPI_Sendrecv(m->sbuf, (int)count, MPI_FLOAT, (me + 1) % n, 7, m->rbuf, (int)count, MPI_FLOAT,
                          (me + n - 1) % n, 7, g, MPI_STATUS_IGNORE);
        break;
    }
    return ps_mpi_status(rc, ps_coll_op_name((ps_coll_op)op), __FILE__, __LINE__);
}

static const ps_bench_coll_backend k_coll_mpi = {
    .name = "mpi", .open = mpi_coll_open, .run = mpi_coll_run, .close = mpi_coll_close};

/* ---- overlap, MPI backend: an n x n x n sgemm in row blocks and an MPI_Iallreduce on host memory ---------------- */
typedef struct {
    MPI_Comm comm;
    int n, chunks;
    size_t count;
    float *a, *b, *c, *s, *d;
    MPI_Request req;
} mpi_ovl;

/* The sgemm in `chunks` row blocks; between blocks MPI_Test drives a pending request (req may be NULL): with
 * MPI_THREAD_FUNNELED this is how a CPU rank progresses communication while it computes. */
static ps_status chunked_gemm(const mpi_ovl *m, MPI_Request *req)
{
    int rows = m->n / m->chunks, n = m->n;
    for (int i = 0; i < m->chunks; i++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n, n, 1.0f, m->a + (size_t)i * rows * n, n, m->b,
                    n, 0.0f, m->c + (size_t)i * rows * n, n);
        if (req && *req != MPI_REQUEST_NULL) {
            int done = 0;
            PS_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        }
    }
    return PS_OK;
}

static void mpi_ovl_close(void *state)
{
    mpi_ovl *m = state;
    if (!m) return;
    /* MPI_Request_free on a pending non-blocking collective is erroneous (MPI-3.1 sec. 5.12): the all-reduce the
     * other ranks started with this one is completed, and its outcome no longer matters. */
    if (m->req != MPI_REQUEST_NULL) MPI_Wait(&m->req, MPI_STATUS_IGNORE);
    free(m->a);
    free(m->b);
    free(m->c);
    free(m->s);
    free(m->d);
    free(m);
}

static ps_status mpi_ovl_open(MPI_Comm comm, const ps_bench_opts *o, void **state, double *gemm_flops,
                              double *comm_bytes)
{
    mpi_ovl *m = ps_calloc(1, sizeof *m);
    *state = m;
    ps_status st = m ? PS_OK : PS_ERR_SYSTEM;
    if (m) {
        m->comm = comm;
        m->req = MPI_REQUEST_NULL;
        m->n = o->quick ? 384 : 1024;
        m->chunks = 16;
        m->count = o->quick ? (size_t)1 << 20 : (size_t)1 << 23; /* floats: 4 MiB (quick), 32 MiB */
        size_t nn = (size_t)m->n * (size_t)m->n;
        m->a = ps_calloc(nn, sizeof *m->a);
        m->b = ps_calloc(nn, sizeof *m->b);
        m->c = ps_calloc(nn, sizeof *m->c);
        m->s = ps_calloc(m->count, sizeof *m->s);
        m->d = ps_calloc(m->count, sizeof *m->d);
        if (!m->a || !m->b || !m->c || !m->s || !m->d) st = PS_ERR_SYSTEM;
    }
    PS_TRY(ps_mpi_agree_status(comm, st, "overlap benchmark: allocation"));
    for (size_t i = 0; i < (size_t)m->n * (size_t)m->n; i++) m->a[i] = m->b[i] = 0.5f;
    for (size_t i = 0; i < m->count; i++) m->s[i] = 1.0f;
    *gemm_flops = 2.0 * m->n * (double)m->n * m->n;
    *comm_bytes = (double)m->count * sizeof(float);
    return PS_OK;
}

static ps_status mpi_ovl_gemm(void *state) { return chunked_gemm(state, NULL); }

static ps_status mpi_ovl_comm(void *state)
{
    mpi_ovl *m = state;
    PS_MPI(MPI_Iallreduce(m->s, m->d, (int)m->count, MPI_FLOAT, MPI_SUM, m->comm, &m->req));
    PS_MPI(MPI_Wait(&m->req, MPI_STATUS_IGNORE));
    return PS_OK;
}

static ps_status mpi_ovl_both(void *state)
{
    mpi_ovl *m = state;
    PS_MPI(MPI_Iallreduce(m->s, m->d, (int)m->count, MPI_FLOAT, MPI_SUM, m->comm, &m->req));
    PS_TRY(chunked_gemm(m, &m->req));
    PS_MPI(MPI_Wait(&m->req, MPI_STATUS_IGNORE));
    return PS_OK;
}

static const ps_bench_ovl_backend k_ovl_mpi = {.name = "mpi", .open = mpi_ovl_open, .gemm = mpi_ovl_gemm,
                                               .comm = mpi_ovl_comm, .both = mpi_ovl_both, .close = mpi_ovl_close};

/* ---- collectives: groups, sizes, the timing loop and the rows of both backends ---------------------------------- */

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

/* The backend, its buffers and the timings shared by every group of a run. */
typedef struct {
    const ps_bench_opts *o;
    ps_bench_results *r;
    const layout *L;
    const ps_bench_coll_backend *be;
    void *state;
    double *t, *tmax;
    size_t max_bytes, step;
} coll_run;

/* Every op and size on this rank's group g (n ranks, this rank me); the group's rank 0 keeps the rows. `groups`
 * groups of the shape run at once. */
static ps_status measure_group(const coll_run *c, MPI_Comm g, int n, int me, int inter, int groups)
{
    const ps_bench_opts *o = c->o;
    for (int op = 0; op < PS_COLL_N_OPS; op++) {
        for (size_t bytes = 1024; bytes <= c->max_bytes; bytes *= c->step) {
            size_t count = bytes / sizeof(float) / (size_t)n * (size_t)n;
            if (count == 0) continue;
            for (int i = -o->warmup; i < o->reps; i++) {
                PS_MPI(MPI_Barrier(g));
                /* the host clock on both backends: run returns once this rank's part is done (NCCL: after
                 * cudaStreamSynchronize), so a launch's cost counts as it does in training */
                double t0 = MPI_Wtime();
                PS_TRY(c->be->run(c->state, op, g, n, me, count));
                if (i >= 0) c->t[i] = MPI_Wtime() - t0;
            }
            /* the collective ends when its slowest member is done */
            PS_MPI(MPI_Allreduce(c->t, c->tmax, o->reps, MPI_DOUBLE, MPI_MAX, g));
            if (me != 0) continue;
            ps_bench_stat s = ps_bench_stats(c->tmax, o->reps);
            ps_bench_coll row;
            memset(&row, 0, sizeof row);
            ps_strlcpy(row.op, ps_coll_op_name((ps_coll_op)op), sizeof row.op);
            row.group_size = n;
            row.inter_node = inter;
            row.root_rank = c->L->rank;
            row.n_groups = groups;
            row.bytes = (double)count * sizeof(float);
            row.time_s = s.median;
            row.algbw_Bps = s.median > 0 ? row.bytes / s.median : 0;
            row.busbw_Bps = row.algbw_Bps * ps_coll_busbw_factor((ps_coll_op)op, n);
            row.spread = s.spread;
            row.reps = o->reps;
            char what[96];
            snprintf(what, sizeof what, "%s %d ranks %s, %.0f bytes", ps_coll_op_name((ps_coll_op)op), n,
                     inter ? "across nodes" : "in a node", row.bytes);
            ps_bench_check_spread(o, c->r, what, &s);
            PS_TRY(ps_bench_push((void **)&c->r->coll, &c->r->n_coll, &c->r->cap_coll, sizeof row, &row));
        }
    }
    return PS_OK;
}

/* The backends that measure this allocation, the same on every rank (NULL, NULL and a warning on log when none
 * does): MPI when every rank is a CPU rank, NCCL when every rank has a GPU (and the build has NCCL). Host-memory MPI
 * timings say nothing of NVLink or InfiniBand between GPUs, nor a CPU sgemm of what GPU kernels and NCCL do to each
 * other; and one group cannot mix NCCL and MPI members. So a mixed allocation writes no rows: written for its GPU
 * ranks, host numbers would replace the cost model's analytic links and sourced overlap slowdown with wrong ones. */
static ps_status backends_of(MPI_Comm comm, const ps_bench_results *r, FILE *log, const char *what,
                             const ps_bench_coll_backend **coll, const ps_bench_ovl_backend **ovl)
{
    *coll = NULL;
    *ovl = NULL;
    int cpu = strcmp(r->backend, "cpu") == 0, v[2] = {cpu, !cpu}, all[2] = {0, 0};
    PS_MPI(MPI_Allreduce(v, all, 2, MPI_INT, MPI_MIN, comm));
    if (all[0]) {
        *coll = &k_coll_mpi;
        *ovl = &k_ovl_mpi;
        return PS_OK;
    }
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS && PS_HAVE_NCCL
    if (all[1]) {
        *coll = &ps_bench_coll_nccl;
        *ovl = &ps_bench_ovl_nccl;
        return PS_OK;
    }
#endif
    if (log) {
        if (!all[1])
            fprintf(log, "# warning: %s are not measured on a mixed allocation (some ranks with a GPU, some "
                         "without: NCCL and MPI cannot share a group, docs/costdb.md): no rows; calibrate GPU and CPU "
                         "nodes in separate runs and `costdb merge` the files\n", what);
        else
            fprintf(log, "# warning: %s on GPUs need NCCL, and this psearch was built without it (docs/costdb.md): "
                         "no rows; the cost model keeps its analytic model for them\n", what);
    }
    return PS_OK;
}

ps_status ps_bench_coll_library(MPI_Comm comm, const ps_bench_results *r, char *version, size_t cap)
{
    const ps_bench_coll_backend *coll = NULL;
    const ps_bench_ovl_backend *ovl = NULL;
    PS_TRY(backends_of(comm, r, NULL, "collectives", &coll, &ovl)); /* the benchmarks themselves warn */
    int nranks = 0;
    PS_MPI(MPI_Comm_size(comm, &nranks));
    if (cap) version[0] = '\0';
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS && PS_HAVE_NCCL
    if (coll == &ps_bench_coll_nccl && nranks > 1) ps_bench_nccl_version(version, cap); /* 1 rank measures none */
#endif
    return PS_OK;
}

ps_status ps_bench_coll_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    const ps_bench_coll_backend *be = NULL;
    const ps_bench_ovl_backend *unused = NULL;
    PS_TRY(backends_of(comm, r, o->log, "collectives", &be, &unused));
    if (!be) return PS_OK;
    layout L;
    PS_TRY(get_layout(comm, r, &L));
    if (L.nranks < 2) {
        if (o->log) fprintf(o->log, "# collectives: 1 rank, nothing to measure (run under mpirun/srun)\n");
        return PS_OK;
    }
    coll_run c = {.o = o, .r = r, .L = &L, .be = be, .step = o->quick ? 4 : 2};
    /* Largest size: 1 GiB, or less where two buffers per rank would take more than a third of the memory they live
     * in: the node's memory shared by its ranks (MPI), the GPU's (NCCL). The smallest over ranks: every group runs
     * the same sizes. */
    c.max_bytes = o->quick ? (size_t)1 << 20 : (size_t)1 << 30;
    double cap = DBL_MAX;
    if (be == &k_coll_mpi) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psz > 0) cap = (double)pages * (double)psz / (6.0 * L.max_local);
    } else if (r->dev.mem_bytes > 0) {
        cap = r->dev.mem_bytes / 6.0;
    }
    PS_MPI(MPI_Allreduce(MPI_IN_PLACE, &cap, 1, MPI_DOUBLE, MPI_MIN, comm));
    while (c.max_bytes > 4096 && (double)c.max_bytes > cap) c.max_bytes /= 2;
    c.t = ps_calloc((size_t)o->reps, sizeof *c.t);
    c.tmax = ps_calloc((size_t)o->reps, sizeof *c.tmax);
    ps_status st = c.t && c.tmax ? be->open(c.max_bytes, &c.state) : PS_ERR_SYSTEM;
    MPI_Comm g = MPI_COMM_NULL;
    PS_TRY_GOTO(st, ps_mpi_agree_status(comm, st, "collective benchmark: allocation"), done);
    if (o->log)
        fprintf(o->log, "# collectives (%s): %d rank(s) on %d node(s), sizes 1 KiB .. %zu KiB x%zu, %d reps + %d "
                        "warm-up\n", be->name, L.nranks, L.nnodes, c.max_bytes >> 10, c.step, o->reps, o->warmup);

    for (int inter = 0; inter <= 1; inter++) {
        int limit = inter ? L.nnodes : L.max_local;
        for (int gs = 2; gs <= limit; gs = gs * 2 > limit && gs != limit ? limit : gs * 2) {
            int col = colour(&L, gs, inter);
            PS_MPI_GOTO(st, MPI_Comm_split(comm, col, L.rank, &g), done);
            int n = 0, me = 0, groups = 0, root = col != MPI_UNDEFINED;
            bool bound = false;
            if (g != MPI_COMM_NULL) {
                PS_MPI_GOTO(st, MPI_Comm_size(g, &n), next);
                PS_MPI_GOTO(st, MPI_Comm_rank(g, &me), next);
                root = me == 0;
            }
            PS_MPI_GOTO(st, MPI_Allreduce(&root, &groups, 1, MPI_INT, MPI_SUM, comm), next);
            if (g != MPI_COMM_NULL && n == gs) {
                /* agreed over g by the backend: either every member holds the group's communicator or none */
                if (be->bind) PS_TRY_GOTO(st, be->bind(c.state, g), next);
                bound = true;
                st = measure_group(&c, g, n, me, inter, groups);
            }
        next:
            if (bound && be->unbind) be->unbind(c.state);
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
    if (c.state) be->close(c.state);
    free(c.t);
    free(c.tmax);
    return st;
}

/* ---- overlap: the loop and the row of both backends ---------------------------------------------------------- */

ps_status ps_bench_overlap_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    int nranks = 0;
    PS_MPI(MPI_Comm_size(comm, &nranks));
    if (nranks < 2) {
        if (o->log) fprintf(o->log, "# overlap: 1 rank, no collective to overlap a GEMM with (needs 2 ranks)\n");
        return PS_OK;
    }
    const ps_bench_coll_backend *unused = NULL;
    const ps_bench_ovl_backend *be = NULL;
    PS_TRY(backends_of(comm, r, o->log, "overlap of computation and communication", &unused, &be));
    if (!be) return PS_OK;
    double *tg = ps_calloc((size_t)o->reps, sizeof(double)), *tc = ps_calloc((size_t)o->reps, sizeof(double));
    double *tb = ps_calloc((size_t)o->reps, sizeof(double));
    double gemm_flops = 0, comm_bytes = 0;
    void *state = NULL;
    /* open agrees over comm itself (NCCL makes a communicator there): a rank short of timings fails it too */
    ps_status st = tg && tc && tb ? PS_OK : PS_ERR_SYSTEM;
    PS_TRY_GOTO(st, ps_mpi_agree_status(comm, st, "overlap benchmark: allocation"), done);
    PS_TRY_GOTO(st, be->open(comm, o, &state, &gemm_flops, &comm_bytes), done);
    for (int i = -o->warmup; i < o->reps; i++) {
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
        double t0 = MPI_Wtime();
        PS_TRY_GOTO(st, be->gemm(state), done);
        double g1 = MPI_Wtime() - t0;
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
        t0 = MPI_Wtime();
        PS_TRY_GOTO(st, be->comm(state), done);
        double c1 = MPI_Wtime() - t0;
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
        t0 = MPI_Wtime();
        PS_TRY_GOTO(st, be->both(state), done);
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
    row.gemm_flops = gemm_flops;
    row.comm_bytes = comm_bytes;
    double lo = fmin(sg.median, sc.median), hi = fmax(sg.median, sc.median);
    /* both = hi + (s - 1) lo, the form ps_cost_overlapped uses; values below 1 (noise) are kept as measured */
    row.slowdown = lo > 0 ? 1 + (sb.median - hi) / lo : 1;
    row.reps = o->reps;
    char what[64];
    snprintf(what, sizeof what, "overlap (%s): gemm + all-reduce together", be->name);
    ps_bench_check_spread(o, r, what, &sb);
    st = ps_bench_push((void **)&r->ovl, &r->n_ovl, &r->cap_ovl, sizeof row, &row);
done:
    if (state) be->close(state);
    free(tg);
    free(tc);
    free(tb);
    return st;
}

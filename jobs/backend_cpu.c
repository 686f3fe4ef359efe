/* The CPU backend: the layer's GEMMs with OpenBLAS sgemm (fp32 whatever the plan's dtype: CPUs have no fast bf16
 * GEMM here), the elementwise work as a STREAM triad over the bytes the cost model charges for it, and MPI on host
 * buffers for every message. Memory is not measured (a CPU rank's resident set says nothing of a GPU's peak). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "ps_calib.h"
#include "exec_internal.h"

typedef struct {
    float *a, *b, *c;          /* GEMM operands */
    float *x, *y, *z;          /* triad arrays */
    size_t n_stream;           /* elements of each triad array */
    float *coll, *coll2;       /* collective buffers (full tensor each) */
    float *p2p_out, *p2p_in;
    float *ov[2];              /* the overlapped all-reduces of the two sub-batches (NULL without overlap) */
    ps_exec_icolls ic;
    ps_exec_sends sends;
    /* the fused attention core (attn_cpu.c): its tensors at the largest core's shape, the kernel's workspace */
    float *aq, *ak, *av, *ao, *ado, *adq, *adk, *adv, *alse, *aws;
    int a_threads;
} cpu_state;

static bool cpu_usable(char *why, size_t cap)
{
    (void)why;
    (void)cap;
    return true;
}

static float *falloc(double bytes)
{
    size_t n = (size_t)ceil(bytes / sizeof(float));
    if (n < 16) n = 16;
    float *p = ps_calloc(n, sizeof *p);
    if (p)
        for (size_t i = 0; i < n; i++) p[i] = 1.0f / (float)(1 + i % 7); /* finite values: no denormal slow paths */
    return p;
}

static void cpu_close(void *state)
{
    cpu_state *s = state;
    if (!s) return;
    free(s->a);
    free(s->b);
    free(s->c);
    free(s->x);
    free(s->y);
    free(s->z);
    free(s->coll);
    free(s->coll2);
    free(s->p2p_out);
    free(s->p2p_in);
    free(s->ov[0]);
    free(s->ov[1]);
    float *attn[] = {s->aq, s->ak, s->av, s->ao, s->ado, s->adq, s->adk, s->adv, s->alse, s->aws};
    for (size_t i = 0; i < sizeof attn / sizeof *attn; i++) free(attn[i]);
    ps_exec_sends_free(&s->sends);
    free(s);
}

static ps_status cpu_open(const ps_exec_need *need, ps_exec_net *net, void **state)
{
    (void)net;
    cpu_state *s = ps_calloc(1, sizeof *s);
    if (!s) return PS_ERR_SYSTEM;
    /* a triad moves 3 arrays per pass; the largest pass sets their length */
    s->n_stream = (size_t)ceil(need->stream / (3.0 * sizeof(float)));
    if (s->n_stream < 16) s->n_stream = 16;
    s->a = falloc(need->gemm_a);
    s->b = falloc(need->gemm_b);
    s->c = falloc(need->gemm_c);
    s->x = falloc((double)s->n_stream * sizeof(float));
    s->y = falloc((double)s->n_stream * sizeof(float));
    s->z = falloc((double)s->n_stream * sizeof(float));
    s->coll = falloc(need->coll + 64);
    s->coll2 = falloc(need->coll + 64);
    s->p2p_out = falloc(need->p2p + 64);
    s->p2p_in = falloc(need->p2p + 64);
    ps_exec_icolls_init(&s->ic);
    bool ov_ok = true;
    if (need->overlap) {
        s->ov[0] = falloc(need->coll + 64);
        s->ov[1] = falloc(need->coll + 64);
        ov_ok = s->ov[0] && s->ov[1];
    }
    bool sends_ok = ps_exec_sends_reserve(&s->sends, need->sends) == PS_OK;
    bool attn_ok = true;
    const ps_exec_attn *na = &need->attn;
    if (na->batch > 0) {
        /* every tensor at the largest of each dimension: one set of buffers fits every core of the rank */
        double w = 4.0 * (double)(na->d > na->dv ? na->d : na->dv), bh = (double)(na->batch * na->heads);
        double bkv = (double)(na->batch * na->kv_heads);
        /* as many threads as OpenBLAS gives the GEMMs the kernel stands beside (OPENBLAS_NUM_THREADS): ranks that
         * share a node's cores keep the share they were given, and OpenMP threads spinning beside other ranks'
         * would swamp an oversubscribed node */
        s->a_threads = openblas_get_num_threads();
        if (s->a_threads < 1) s->a_threads = 1;
        ps_attn_cpu_shape as = {.batch = na->batch, .heads = na->heads, .kv_heads = na->kv_heads, .sq = na->sq,
                                .sk = na->sk, .d = na->d, .dv = na->dv > na->d ? na->dv : na->d};
        s->aq = falloc(bh * (double)na->sq * w);
        s->ao = falloc(bh * (double)na->sq * w);
        s->ado = falloc(bh * (double)na->sq * w);
        s->adq = falloc(bh * (double)na->sq * w);
        s->ak = falloc(bkv * (double)na->sk * w);
        s->av = falloc(bkv * (double)na->sk * w);
        s->adk = falloc(bkv * (double)na->sk * w);
        s->adv = falloc(bkv * (double)na->sk * w);
        s->alse = falloc(bh * (double)na->sq * 4.0);
        s->aws = falloc(4.0 * (double)ps_attn_cpu_ws_floats(&as, s->a_threads));
        attn_ok = s->aq && s->ao && s->ado && s->adq && s->ak && s->av && s->adk && s->adv && s->alse && s->aws;
    }
    if (!attn_ok) {
        cpu_close(s);
        return PS_FAIL(PS_ERR_SYSTEM, "the cpu backend could not allocate the fused attention buffers (%lld x %lld "
                                      "heads x %lld queries, head width %lld): lower the shapes with --scale",
                       (long long)na->batch, (long long)na->heads, (long long)na->sq, (long long)na->d);
    }
    if (!ov_ok || !sends_ok || !s->a || !s->b || !s->c || !s->x || !s->y || !s->z || !s->coll || !s->coll2 ||
        !s->p2p_out || !s->p2p_in) {
        cpu_close(s);
        return PS_FAIL(PS_ERR_SYSTEM, "the cpu backend could not allocate its buffers (GEMM %.3g + %.3g + %.3g bytes, "
                                      "collectives 2 x %.3g bytes): lower the shapes with --scale",
                       need->gemm_a, need->gemm_b, need->gemm_c, need->coll);
    }
    *state = s;
    return PS_OK;
}

static ps_status cpu_gemm(void *state, int64_t m, int64_t n, int64_t k, int64_t count)
{
    cpu_state *s = state;
    if (m <= 0 || n <= 0 || k <= 0) return PS_OK;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return PS_FAIL(PS_ERR_INPUT, "GEMM %lld x %lld x %lld is too large for BLAS; use --scale", (long long)m,
                       (long long)n, (long long)k);
    for (int64_t i = 0; i < count; i++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, s->a, (int)k, s->b,
                    (int)n, 0.0f, s->c, (int)n);
    return PS_OK;
}

static ps_status cpu_attn(void *state, const ps_exec_attn *a, bool bwd)
{
    cpu_state *s = state;
    if (!s->aws) return PS_FAIL(PS_ERR_SYSTEM, "a fused attention core, but the plan had none at open");
    ps_attn_cpu_shape as = {.batch = a->batch, .heads = a->heads, .kv_heads = a->kv_heads, .sq = a->sq, .sk = a->sk,
                            .d = a->d, .dv = a->dv, .causal = a->causal};
    if (!bwd) return ps_attn_cpu_fwd(&as, s->aq, s->ak, s->av, s->ao, s->alse, s->aws, s->a_threads);
    return ps_attn_cpu_bwd(&as, s->aq, s->ak, s->av, s->ao, s->alse, s->ado, s->adq, s->adk, s->adv, s->aws,
                           s->a_threads);
}

static ps_status cpu_stream(void *state, double bytes)
{
    cpu_state *s = state;
    /* STREAM counting: a triad element moves 3 floats */
    double left = bytes / (3.0 * sizeof(float));
    while (left >= 1) {
        size_t n = left < (double)s->n_stream ? (size_t)left : s->n_stream;
        float *restrict x = s->x, *restrict y = s->y, *restrict z = s->z;
        for (size_t i = 0; i < n; i++) x[i] = y[i] + 0.5f * z[i];
        left -= (double)n;
    }
    return PS_OK;
}

static ps_status cpu_sync(void *state)
{
    (void)state;
    return PS_OK;
}

static ps_status cpu_hold(void *state, int64_t slot, double bytes)
{
    (void)state;
    (void)slot;
    (void)bytes;
    return PS_OK;
}

static void cpu_release(void *state, int64_t slot)
{
    (void)state;
    (void)slot;
}

static double cpu_peak(void *state)
{
    (void)state;
    return 0;
}

static ps_status cpu_bind(void *state, ps_exec_net *net, MPI_Comm comm)
{
    (void)state;
    (void)net;
    (void)comm;
    return PS_OK;
}

static ps_status cpu_coll(void *state, ps_exec_net *net, MPI_Comm comm, ps_exec_coll op, double bytes,
                          const ps_exec_where *where)
{
    cpu_state *s = state;
    return ps_exec_mpi_coll(net, comm, op, s->coll, s->coll2, bytes, where);
}

static ps_status cpu_send(void *state, ps_exec_net *net, int peer, int tag, double bytes, const ps_exec_where *where)
{
    cpu_state *s = state;
    return ps_exec_mpi_send(net, &s->sends, s->p2p_out, peer, tag, bytes, where);
}

static ps_status cpu_recv(void *state, ps_exec_net *net, int peer, int tag, double bytes, const ps_exec_where *where)
{
    cpu_state *s = state;
    return ps_exec_mpi_recv(net, s->p2p_in, peer, tag, bytes, where);
}

static ps_status cpu_flush(void *state, ps_exec_net *net)
{
    cpu_state *s = state;
    return ps_exec_mpi_flush(net, &s->sends);
}

static ps_status cpu_icoll(void *state, ps_exec_net *net, MPI_Comm comm, int slot, double bytes,
                           const ps_exec_where *where)
{
    (void)net;
    (void)where;
    cpu_state *s = state;
    if (!s->ov[0]) return PS_FAIL(PS_ERR_SYSTEM, "an overlapped all-reduce, but the plan had no overlapped layer");
    return ps_exec_mpi_icoll(&s->ic, comm, slot, s->ov[slot & 1], bytes);
}

static ps_status cpu_progress(void *state) { return ps_exec_mpi_progress(&((cpu_state *)state)->ic); }

static ps_status cpu_icoll_wait(void *state, ps_exec_net *net, int slot, const ps_exec_where *where)
{
    cpu_state *s = state;
    return ps_exec_mpi_icoll_wait(net, &s->ic, slot, where);
}

static ps_status cpu_ring(void *state, ps_exec_net *net, MPI_Comm comm, double bytes, const ps_exec_where *where)
{
    (void)net;
    (void)where;
    cpu_state *s = state;
    if (!s->ov[0]) return PS_FAIL(PS_ERR_SYSTEM, "a TP ring step, but the plan had no overlapped layer");
    return ps_exec_mpi_ring(&s->ic, comm, s->ov[0], s->ov[1], bytes);
}

static ps_status cpu_ring_wait(void *state, ps_exec_net *net, const ps_exec_where *where)
{
    cpu_state *s = state;
    return ps_exec_mpi_ring_wait(net, &s->ic, where);
}

static ps_status cpu_alltoall(void *state, ps_exec_net *net, MPI_Comm comm, int n, const double *sbytes,
                              const double *rbytes, const ps_exec_where *where)
{
    cpu_state *s = state;
    return ps_exec_mpi_alltoall(net, comm, n, sbytes, rbytes, s->coll, s->coll2, where);
}

const ps_exec_backend ps_exec_backend_cpu = {
    .name = "cpu",
    .usable = cpu_usable,
    .open = cpu_open,
    .close = cpu_close,
    .gemm = cpu_gemm,
    .attn = cpu_attn,
    .stream = cpu_stream,
    .sync = cpu_sync,
    .hold = cpu_hold,
    .release = cpu_release,
    .peak_bytes = cpu_peak,
    .bind = cpu_bind,
    .coll = cpu_coll,
    .send = cpu_send,
    .recv = cpu_recv,
    .flush = cpu_flush,
    .icoll = cpu_icoll,
    .progress = cpu_progress,
    .icoll_wait = cpu_icoll_wait,
    .ring = cpu_ring,
    .ring_wait = cpu_ring_wait,
    .alltoall = cpu_alltoall,
};

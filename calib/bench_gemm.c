/* CPU GEMM benchmark (OpenBLAS cblas_sgemm / cblas_dgemm): a log-spaced grid and the GEMMs of a decoder block at
 * several TP degrees and token counts, fp32 and fp64, each timed as a median of repetitions. On a CPU the block is
 * scaled down so `--quick` runs in seconds: hidden 1024, 16 heads, sequence 512 (quick: hidden 512, 8 heads,
 * sequence 256), i.e. about 1/5 (1/10) of GPT-3 13B's hidden size of 5140; docs/costdb.md states the scale. */
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "bench_internal.h"
#include "ps_comm.h"

typedef struct {
    const ps_bench_opts *o;
    ps_bench_results *r;
    const char *dtype;
    size_t elt;
    void *a, *b, *c;   /* buffers large enough for the largest shape (batch included) */
    double *times;
} gemm_ctx;

static void call(const gemm_ctx *g, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    /* Batched GEMMs (attention) are `batch` independent products on consecutive slices, as cuBLAS strided-batched
     * lays them out; OpenBLAS 0.3.21 has no batched call, so they are issued one by one. */
    for (int64_t i = 0; i < batch; i++) {
        if (g->elt == 4) {
            const float *a = (const float *)g->a + i * m * k, *b = (const float *)g->b + i * k * n;
            float *c = (float *)g->c + i * m * n;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b, (int)n,
                        0.0f, c, (int)n);
        } else {
            const double *a = (const double *)g->a + i * m * k, *b = (const double *)g->b + i * k * n;
            double *c = (double *)g->c + i * m * n;
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)n, (int)k, 1.0, a, (int)k, b, (int)n,
                        0.0, c, (int)n);
        }
    }
}

typedef struct {
    const gemm_ctx *g;
    int64_t m, n, k, batch;
} gemm_call;

static ps_status call_once(void *ctx)
{
    const gemm_call *c = ctx;
    call(c->g, c->m, c->n, c->k, c->batch);
    return PS_OK;
}

static ps_status measure(void *ctx, const char *op, int tp, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    gemm_ctx *g = ctx;
    gemm_call c = {g, m, n, k, batch};
    ps_bench_stat s;
    PS_TRY(ps_bench_time(g->o, call_once, &c, g->times, &s));
    return ps_bench_add_gemm(g->o, g->r, g->dtype, op, tp, m, n, k, batch, &s);
}

void ps_bench_cpu_shapes(bool quick, ps_bench_shapes *sh)
{
    if (quick) {
        *sh = (ps_bench_shapes){.hidden = 512, .heads = 8, .head_dim = 64, .seq = 256, .tokens = {256, 512},
                                .n_tokens = 2, .tps = {1, 2}, .n_tps = 2, .grid = {64, 128, 256, 512}, .n_grid = 4};
    } else {
        *sh = (ps_bench_shapes){.hidden = 1024, .heads = 16, .head_dim = 64, .seq = 512, .tokens = {512, 1024, 2048},
                                .n_tokens = 3, .tps = {1, 2, 4, 8}, .n_tps = 4,
                                .grid = {64, 128, 256, 512, 1024, 2048}, .n_grid = 6};
    }
}

ps_status ps_bench_cpu_gemm(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    ps_bench_shapes sh;
    ps_bench_cpu_shapes(o->quick, &sh);
    ps_bench_gemm_need need = {0, 0, 0};
    PS_TRY(ps_bench_for_shapes(&sh, ps_bench_gemm_need_of, &need));
    static const char *const dtypes[] = {"fp32", "fp64"};
    gemm_ctx g = {.o = o, .r = r};
    g.times = ps_calloc((size_t)o->reps, sizeof *g.times);
    g.a = ps_calloc(need.a, sizeof(double));
    g.b = ps_calloc(need.b, sizeof(double));
    g.c = ps_calloc(need.c, sizeof(double));
    ps_status st = PS_OK;
    if (!g.times || !g.a || !g.b || !g.c) {
        st = PS_FAIL(PS_ERR_SYSTEM, "gemm benchmark: out of memory for %zu + %zu + %zu elements", need.a, need.b,
                     need.c);
        goto done;
    }
    if (o->log)
        fprintf(o->log, "# gemm: OpenBLAS %d thread(s) per rank; block shapes at hidden %lld, %lld heads, seq %lld\n",
                openblas_get_num_threads(), (long long)sh.hidden, (long long)sh.heads, (long long)sh.seq);
    for (int d = 0; d < 2 && st == PS_OK; d++) {
        g.dtype = dtypes[d];
        g.elt = d == 0 ? 4 : 8;
        ps_bench_fill(g.a, need.a, g.elt);
        ps_bench_fill(g.b, need.b, g.elt);
        st = ps_bench_for_shapes(&sh, measure, &g);
    }
done:
    free(g.times);
    free(g.a);
    free(g.b);
    free(g.c);
    return st;
}

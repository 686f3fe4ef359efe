/* CPU fused attention benchmark: the kernel `psearch exec` runs for fused layers on the cpu backend (attn_cpu.c),
 * forward and backward, timed at the attention shapes of the scaled-down decoder block the GEMM benchmark measures
 * (bench_gemm.c: per TP degree and token count, micro-batch x heads/tp sequences of `seq` causal tokens), at head
 * widths 16 to 128: a tile's two products do 4 x head width FLOPs per score while its softmax does a fixed amount of
 * work per score, so the rate depends on the head width (16 is what `psearch exec --scale 4` makes of a head of 64,
 * 128 today's models' head width). Its rows go in the GEMM table under their own ops with the FLOPs the kernel
 * executes; the cost model prices a fused attention core on this device from them (costdb/db_model.c,
 * cost/layer_cost.c attn_time) instead of the analytic share of the peak. */
#include <stdlib.h>

#include <cblas.h>

#include "bench_internal.h"

typedef struct {
    ps_attn_cpu_shape a;
    bool bwd;
    int threads;
    float *q, *k, *v, *o, *lse, *dout, *dq, *dk, *dv, *ws;
} attn_ctx;

static ps_status run_once(void *ctx)
{
    attn_ctx *c = ctx;
    if (!c->bwd) return ps_attn_cpu_fwd(&c->a, c->q, c->k, c->v, c->o, c->lse, c->ws, c->threads);
    return ps_attn_cpu_bwd(&c->a, c->q, c->k, c->v, c->o, c->lse, c->dout, c->dq, c->dk, c->dv, c->ws, c->threads);
}

/* One shape: the forward (which also leaves the O and log-sum-exp the backward reads), then the backward. */
static ps_status measure(const ps_bench_opts *o, ps_bench_results *r, attn_ctx *c, int tp, double *times)
{
    const ps_attn_cpu_shape *a = &c->a;
    double fwd = ps_attn_cpu_flops(a);
    for (int pass = 0; pass < 2; pass++) {
        c->bwd = pass == 1;
        ps_bench_stat s;
        PS_TRY(ps_bench_time(o, run_once, c, times, &s));
        /* the backward recomputes the scores: the fused kernel's backward FLOPs, as the cost model prices them,
         * from the forward's two products (scores over d, weighted sum over dv) */
        double sf = fwd * (double)a->d / (double)(a->d + a->dv);
        PS_TRY(ps_bench_add_attn(o, r, "fp32", c->bwd, tp, a->sq, a->sk, a->d, a->batch * a->heads,
                                 c->bwd ? ps_attn_bwd_flops(PS_ATTN_FUSED, sf, fwd - sf) : fwd, &s));
    }
    return PS_OK;
}

ps_status ps_bench_cpu_attn(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    (void)comm;
    ps_bench_shapes sh;
    ps_bench_cpu_shapes(o->quick, &sh);
    /* the threads exec gives the kernel: as many as OpenBLAS has (jobs/backend_cpu.c) */
    int threads = openblas_get_num_threads();
    if (threads < 1) threads = 1;
    /* buffers for the largest shape: the most sequences (the largest token count at TP 1) */
    int64_t most = 1;
    for (int i = 0; i < sh.n_tokens; i++)
        if (sh.tokens[i] / sh.seq > most) most = sh.tokens[i] / sh.seq;
    static const int64_t widths[] = {16, 32, 64, 128};
    const int n_widths = (int)(sizeof widths / sizeof widths[0]);
    ps_attn_cpu_shape big = {.batch = most, .heads = sh.heads, .kv_heads = sh.heads, .sq = sh.seq, .sk = sh.seq,
                             .d = widths[n_widths - 1], .dv = widths[n_widths - 1], .causal = true};
    PS_TRY(ps_attn_cpu_check(&big));
    size_t n = (size_t)(big.batch * big.heads * big.sq * big.d);
    attn_ctx c = {.threads = threads};
    float **bufs[] = {&c.q, &c.k, &c.v, &c.o, &c.dout, &c.dq, &c.dk, &c.dv};
    ps_status st = PS_OK;
    bool ok = true;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ok = (*bufs[i] = ps_calloc(n, sizeof(float))) && ok;
    c.lse = ps_calloc((size_t)(big.batch * big.heads * big.sq), sizeof(float));
    c.ws = ps_calloc(ps_attn_cpu_ws_floats(&big, threads), sizeof(float));
    double *times = ps_calloc((size_t)o->reps, sizeof *times);
    if (!ok || !c.lse || !c.ws || !times) {
        st = PS_FAIL(PS_ERR_SYSTEM, "attention benchmark: out of memory for %zu floats per tensor", n);
        goto done;
    }
    /* no overflow in the scores either */
    ps_bench_fill(c.q, n, sizeof(float));
    ps_bench_fill(c.k, n, sizeof(float));
    ps_bench_fill(c.v, n, sizeof(float));
    ps_bench_fill(c.dout, n, sizeof(float));
    if (o->log)
        fprintf(o->log, "# attention: fused kernel (calib/attn_cpu.c) on %d thread(s) per rank, causal, seq %lld, "
                        "head widths 16-128\n",
                threads, (long long)sh.seq);
    /* the kernel runs batch x heads sequences alike: a (tp, tokens) pair giving a count already timed is skipped (half
     * of the full set: 16 heads over tp 1-8 at 1, 2, 4 sequences give 6 counts of 12) */
    int64_t seen[16];
    int n_seen = 0;
    for (int ti = 0; ti < sh.n_tps && st == PS_OK; ti++) {
        int tp = sh.tps[ti];
        for (int i = 0; i < sh.n_tokens && st == PS_OK; i++) {
            int64_t mbs = sh.tokens[i] / sh.seq > 0 ? sh.tokens[i] / sh.seq : 1, heads = sh.heads / tp;
            int64_t bh = mbs * (heads > 0 ? heads : 1);
            bool again = false;
            for (int q = 0; q < n_seen; q++) again = again || seen[q] == bh;
            if (again || n_seen == (int)(sizeof seen / sizeof seen[0])) continue;
            seen[n_seen++] = bh;
            for (int w = 0; w < n_widths && st == PS_OK; w++) {
                c.a = big;
                c.a.batch = mbs;
                c.a.heads = c.a.kv_heads = heads > 0 ? heads : 1;
                c.a.d = c.a.dv = widths[w];
                st = measure(o, r, &c, tp, times);
            }
        }
    }
done:
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(*bufs[i]);
    free(c.lse);
    free(c.ws);
    free(times);
    return st;
}

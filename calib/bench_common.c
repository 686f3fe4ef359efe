/* What every calibration benchmark shares: options, statistics over repetitions, growing result tables, and the
 * device a rank measures (its node, its CPU or GPU, its memory), with the backend chosen from it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

#include "bench_internal.h"
#include "ps_hw.h"
#include "ps_comm.h"

void ps_bench_opts_default(ps_bench_opts *o, bool quick)
{
    memset(o, 0, sizeof *o);
    o->quick = quick;
    o->reps = quick ? 5 : 10;
    o->warmup = quick ? 1 : 2;
    /* A psearch choice, not a number from nccl-tests or STREAM (neither flags noisy points; STREAM prints min, avg
     * and max times): beyond a 20% spread between p10 and p90, the median of 5-10 samples visibly moves with the
     * next run. */
    o->spread_warn = 0.20;
}

void ps_bench_results_free(ps_bench_results *r)
{
    free(r->gemm);
    free(r->bw);
    free(r->coll);
    free(r->ovl);
    r->gemm = NULL;
    r->bw = NULL;
    r->coll = NULL;
    r->ovl = NULL;
    r->n_gemm = r->n_bw = r->n_coll = r->n_ovl = 0;
    r->cap_gemm = r->cap_bw = r->cap_coll = r->cap_ovl = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *t, int n, double q)
{
    int i = (int)ceil(q * n) - 1;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return t[i];
}

double ps_bench_median(double *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_double);
    /* halves first: the same value as 0.5 (a + b), without overflowing for two values near DBL_MAX */
    return n % 2 ? v[n / 2] : 0.5 * v[n / 2 - 1] + 0.5 * v[n / 2];
}

ps_bench_stat ps_bench_stats(double *t, int n)
{
    ps_bench_stat s = {0, 0, 0, 0};
    if (n <= 0) return s;
    s.median = ps_bench_median(t, (size_t)n); /* sorts t, which the percentiles below need */
    s.p10 = pct(t, n, 0.10);
    s.p90 = pct(t, n, 0.90);
    s.spread = s.median > 0 ? (s.p90 - s.p10) / s.median : 0;
    return s;
}

ps_status ps_bench_push(void **rows, size_t *n, size_t *cap, size_t elt, const void *row)
{
    PS_TRY(ps_grow(rows, cap, *n + 1, elt));
    memcpy((char *)*rows + *n * elt, row, elt);
    (*n)++;
    return PS_OK;
}

void ps_bench_check_spread(const ps_bench_opts *o, ps_bench_results *r, const char *what, const ps_bench_stat *s)
{
    if (!(s->spread > o->spread_warn)) return;
    r->noisy++;
    /* the first few name the points; the command's summary counts them all */
    if (r->noisy == 6 && o->log) fprintf(o->log, "# warning: further noisy points are counted, not listed\n");
    if (o->log && r->noisy <= 5)
        fprintf(o->log, "# warning: %s: spread (p90-p10)/median = %.0f%% > %.0f%%: the machine is busy or the "
                        "point too short; rerun with more --reps or on an idle allocation\n",
                what, 100 * s->spread, 100 * o->spread_warn);
}

/* One row of the GEMM table: a GEMM (its FLOPs 2 m n k batch, its rate raising the device's peak for the dtype) or
 * a fused attention kernel (its executed FLOPs given; no peak: the peak is the GEMMs'). */
static ps_status add_row(const ps_bench_opts *o, ps_bench_results *r, const char *dtype, const char *op, int tp,
                         int64_t m, int64_t n, int64_t k, int64_t batch, double flops, bool gemm,
                         const ps_bench_stat *s)
{
    ps_bench_gemm row;
    memset(&row, 0, sizeof row);
    row.rank = r->dev.rank;
    ps_strlcpy(row.dtype, dtype, sizeof row.dtype);
    ps_strlcpy(row.op, op, sizeof row.op);
    row.tp = tp;
    row.m = m;
    row.n = n;
    row.k = k;
    row.batch = batch;
    row.flops = flops;
    row.time_s = s->median;
    row.flops_per_s = s->median > 0 ? row.flops / s->median : 0;
    row.spread = s->spread;
    row.reps = o->reps;
    char what[96];
    snprintf(what, sizeof what, "%s %s %s tp %d %lldx%lldx%lld x%lld", gemm ? "gemm" : "attention", dtype, op, tp,
             (long long)m, (long long)n, (long long)k, (long long)batch);
    ps_bench_check_spread(o, r, what, s);
    double *peak = !gemm                        ? NULL
                   : strcmp(dtype, "fp32") == 0 ? &r->dev.peak_fp32_flops
                   : strcmp(dtype, "fp16") == 0 ? &r->dev.peak_fp16_flops
                   : strcmp(dtype, "bf16") == 0 ? &r->dev.peak_bf16_flops
                                                : NULL;
    if (peak && row.flops_per_s > *peak) *peak = row.flops_per_s;
    return ps_bench_push((void **)&r->gemm, &r->n_gemm, &r->cap_gemm, sizeof row, &row);
}

ps_status ps_bench_add_gemm(const ps_bench_opts *o, ps_bench_results *r, const char *dtype, const char *op, int tp,
                            int64_t m, int64_t n, int64_t k, int64_t batch, const ps_bench_stat *s)
{
    double flops = 2.0 * (double)m * (double)n * (double)k * (double)batch;
    return add_row(o, r, dtype, op, tp, m, n, k, batch, flops, true, s);
}

ps_status ps_bench_add_attn(const ps_bench_opts *o, ps_bench_results *r, const char *dtype, bool bwd, int tp,
                            int64_t sq, int64_t sk, int64_t d, int64_t batch, double flops, const ps_bench_stat *s)
{
    return add_row(o, r, dtype, bwd ? PS_BENCH_OP_ATTN_BWD : PS_BENCH_OP_ATTN_FWD, tp, sq, sk, d, batch, flops, false,
                   s);
}

ps_status ps_bench_time(const ps_bench_opts *o, ps_status (*fn)(void *), void *ctx, double *times, ps_bench_stat *out)
{
    /* A sample must be long enough for the timer: short calls are repeated `inner` times per sample, until it lasts
     * min_sample_s, so the timer's resolution (MPI_Wtime reads a clock of ~1 us or better) and the loop's overhead
     * stay under ~1% (quick: 0.2 ms) and ~0.1% (1 ms) of it. A psearch choice: longer samples only lengthen the
     * many small points. */
    const double min_sample_s = o->quick ? 2e-4 : 1e-3;
    double t0 = MPI_Wtime();
    PS_TRY(fn(ctx));
    double once = MPI_Wtime() - t0;
    int inner = once > 0 ? (int)ceil(min_sample_s / once) : 1000;
    if (inner < 1) inner = 1;
    if (inner > 1000) inner = 1000;
    for (int w = 0; w < o->warmup; w++) PS_TRY(fn(ctx));
    for (int i = 0; i < o->reps; i++) {
        t0 = MPI_Wtime();
        for (int j = 0; j < inner; j++) PS_TRY(fn(ctx));
        times[i] = (MPI_Wtime() - t0) / inner;
    }
    *out = ps_bench_stats(times, o->reps);
    return PS_OK;
}

void ps_bench_fill(void *p, size_t n, size_t elt)
{
    /* Small values of both signs: no overflow, no denormals, and nothing a BLAS could shortcut. */
    for (size_t i = 0; i < n; i++) {
        double v = (double)((i * 7919u) % 17u) / 16.0 - 0.5;
        if (elt == 4)
            ((float *)p)[i] = (float)v;
        else
            ((double *)p)[i] = v;
    }
}

ps_status ps_bench_add_bw(const ps_bench_opts *o, ps_bench_results *r, const char *method, int threads, double bytes,
                          const ps_bench_stat *s)
{
    ps_bench_bw row;
    memset(&row, 0, sizeof row);
    row.rank = r->dev.rank;
    ps_strlcpy(row.method, method, sizeof row.method);
    row.threads = threads;
    row.bytes = bytes;
    row.time_s = s->median;
    row.Bps = s->median > 0 ? bytes / s->median : 0;
    row.spread = s->spread;
    row.reps = o->reps;
    ps_bench_check_spread(o, r, method, s);
    r->dev.mem_Bps = row.Bps;
    return ps_bench_push((void **)&r->bw, &r->n_bw, &r->cap_bw, sizeof row, &row);
}

ps_status ps_bench_gemm_need_of(void *ctx, const char *op, int tp, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    ps_bench_gemm_need *g = ctx;
    size_t bt = (size_t)batch;
    if ((size_t)(m * k) * bt > g->a) g->a = (size_t)(m * k) * bt;
    if ((size_t)(k * n) * bt > g->b) g->b = (size_t)(k * n) * bt;
    if ((size_t)(m * n) * bt > g->c) g->c = (size_t)(m * n) * bt;
    return PS_OK;
}

ps_status ps_bench_for_shapes(const ps_bench_shapes *s, ps_bench_shape_fn fn, void *ctx)
{
    /* The generic grid: (m x k).(k x n) with m and n = k each over the log-spaced sizes, square and skinny. */
    for (int i = 0; i < s->n_grid; i++)
        for (int j = 0; j < s->n_grid; j++) PS_TRY(fn(ctx, "grid", 0, s->grid[i], s->grid[j], s->grid[j], 1));
    /* A decoder block's GEMMs under Megatron TP (cost/layer_cost.c issues the same ones). */
    int64_t h = s->hidden, q = s->heads * s->head_dim, f = 4 * s->hidden;
    for (int ti = 0; ti < s->n_tps; ti++) {
        int tp = s->tps[ti];
        for (int i = 0; i < s->n_tokens; i++) {
            int64_t T = s->tokens[i], mbs = T / s->seq > 0 ? T / s->seq : 1, b = mbs * s->heads / tp;
            PS_TRY(fn(ctx, "qkv", tp, T, 3 * q / tp, h, 1));
            PS_TRY(fn(ctx, "out_proj", tp, T, h, q / tp, 1));
            PS_TRY(fn(ctx, "mlp_up", tp, T, f / tp, h, 1));
            PS_TRY(fn(ctx, "mlp_down", tp, T, h, f / tp, 1));
            PS_TRY(fn(ctx, "attn_score", tp, s->seq, s->seq, s->head_dim, b > 0 ? b : 1));
            PS_TRY(fn(ctx, "attn_ctx", tp, s->seq, s->head_dim, s->seq, b > 0 ? b : 1));
        }
    }
    return PS_OK;
}

/* "model name" of /proc/cpuinfo, else the machine name uname would give. */
static void cpu_model(char *out, size_t cap)
{
    ps_strlcpy(out, "unknown CPU", cap);
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t n = strlen(c);
        while (n > 0 && (c[n - 1] == '\n' || c[n - 1] == ' ')) c[--n] = '\0';
        if (n) ps_strlcpy(out, c, cap);
        break;
    }
    fclose(f);
}

static const ps_bench_backend k_cpu = {.name = "cpu", .gemm = ps_bench_cpu_gemm, .attn = ps_bench_cpu_attn,
                                       .mem = ps_bench_cpu_mem};
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS
static const ps_bench_backend k_cuda = {.name = "cuda", .gemm = ps_bench_cuda_gemm, .mem = ps_bench_cuda_mem};
#endif

const ps_bench_backend *ps_bench_backend_of(const ps_bench_results *r)
{
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS
    if (strcmp(r->backend, "cuda") == 0) return &k_cuda;
#endif
    return &k_cpu;
}

ps_status ps_bench_gemm_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    return ps_bench_backend_of(r)->gemm(comm, o, r);
}

ps_status ps_bench_attn_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    const ps_bench_backend *b = ps_bench_backend_of(r);
    if (b->attn) return b->attn(comm, o, r);
    if (o->log)
        fprintf(o->log, "# attention: the %s backend has no fused attention kernel of psearch's own to time: the cost "
                        "model keeps the GPU generation's fused efficiency (attn_fwd_eff, attn_bwd_eff)\n",
                b->name);
    return PS_OK;
}

ps_status ps_bench_mem_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    return ps_bench_backend_of(r)->mem(comm, o, r);
}

ps_status ps_bench_device_init(MPI_Comm comm, ps_bench_results *r)
{
    memset(r, 0, sizeof *r);
    ps_bench_device *d = &r->dev;
    ps_status st = PS_OK;
    MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    int rank = 0, lrank = 0, lsize = 1, nodeid = 0;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    /* Ranks that share memory are one node: the same split `--cluster auto` makes (calib/detect.c). */
    PS_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    PS_MPI_GOTO(st, MPI_Comm_rank(node, &lrank), done);
    PS_MPI_GOTO(st, MPI_Comm_size(node, &lsize), done);
    PS_MPI_GOTO(st, MPI_Comm_split(comm, lrank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders), done);
    if (lrank == 0) PS_MPI_GOTO(st, MPI_Comm_rank(leaders, &nodeid), done);
    PS_MPI_GOTO(st, MPI_Bcast(&nodeid, 1, MPI_INT, 0, node), done);

    d->rank = rank;
    d->node = nodeid;
    d->local_rank = lrank;
    r->node_ranks = lsize;
    char host[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    PS_MPI_GOTO(st, MPI_Get_processor_name(host, &len), done);
    ps_strlcpy(d->host, host, sizeof d->host);

    ps_strlcpy(r->backend, "cpu", sizeof r->backend);
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS
    char gname[256]; /* cudaDeviceProp.name's size: the key is made from the whole name, as calib/detect.c does */
    double gmem = 0;
    if (ps_bench_cuda_probe(lrank, gname, sizeof gname, &gmem) > 0) {
        ps_strlcpy(r->backend, "cuda", sizeof r->backend);
        ps_strlcpy(d->kind, "gpu", sizeof d->kind);
        ps_strlcpy(d->model, gname, sizeof d->model);
        /* the key `--cluster auto` gives the same GPU (calib/detect.c), or the database would not match it */
        ps_gpu_key_from_device_name(gname, d->name, sizeof d->name);
        d->mem_bytes = gmem;
    }
#endif
    if (strcmp(r->backend, "cpu") == 0) {
        ps_strlcpy(d->kind, "cpu", sizeof d->kind);
        cpu_model(d->model, sizeof d->model);
        /* "cpu:<model>", cut to the key size: the key names a kind of device, the full name is in `model` */
        ps_strlcpy(d->name, "cpu:", sizeof d->name);
        ps_strcatf(d->name, sizeof d->name, "%.*s", (int)(sizeof d->name - 5), d->model);
        d->threads = omp_get_max_threads();
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        /* The ranks of a node share its memory: each device gets its share. */
        d->mem_bytes = pages > 0 && psz > 0 ? (double)pages * (double)psz / lsize : 0;
    }
done:
    if (leaders != MPI_COMM_NULL) MPI_Comm_free(&leaders);
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
    return st;
}

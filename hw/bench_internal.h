/* Shared by the benchmark sources of hw/ (not installed): the backend table. A backend measures one device; the
 * MPI side (which ranks run at once, barriers) stays in the callers, so a backend is plain local code. */
#ifndef PS_BENCH_INTERNAL_H
#define PS_BENCH_INTERNAL_H

#include "ps_bench.h"

typedef struct {
    const char *name;
    /* GEMM rows of this rank's device (the shapes of bench_gemm.c). */
    ps_status (*gemm)(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
    /* Memory bandwidth: a barrier on comm before each timed run, so that every device of the node streams at once. */
    ps_status (*mem)(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
} ps_bench_backend;

ps_status ps_bench_cpu_gemm(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
ps_status ps_bench_cpu_mem(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS
ps_status ps_bench_cuda_gemm(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
ps_status ps_bench_cuda_mem(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
/* Number of GPUs the CUDA runtime sees (0 without a driver); the device name of the one this rank uses. */
int ps_bench_cuda_probe(int local_rank, char *name, size_t cap, double *mem_bytes);
#endif

const ps_bench_backend *ps_bench_backend_of(const ps_bench_results *r);

/* Record one row, failing with PS_ERR_SYSTEM when out of memory. */
ps_status ps_bench_push(void **rows, size_t *n, size_t *cap, size_t elt, const void *row);
/* Note a point's spread against o->spread_warn (a '#' warning line on o->log). */
void ps_bench_check_spread(const ps_bench_opts *o, ps_bench_results *r, const char *what, const ps_bench_stat *s);
/* One GEMM point of either backend: its row from the timings' statistics, the spread check, the device's peak for
 * the dtype (fp32, fp16, bf16; none for fp64), and the row recorded. */
ps_status ps_bench_add_gemm(const ps_bench_opts *o, ps_bench_results *r, const char *dtype, const char *op, int tp,
                            int64_t m, int64_t n, int64_t k, int64_t batch, const ps_bench_stat *s);
/* One memory-bandwidth point of either backend: `bytes` moved per repetition; sets the device's mem_Bps. */
ps_status ps_bench_add_bw(const ps_bench_opts *o, ps_bench_results *r, const char *method, int threads, double bytes,
                          const ps_bench_stat *s);

/* The transformer-layer GEMM shapes (op, tp, m, n, k, batch) measured at hidden size h, heads, head_dim, sequence s
 * and token counts T; `emit` gets each. Shared by the CPU and CUDA backends so both measure the same kinds. */
typedef struct {
    int64_t hidden, heads, head_dim, seq;
    int64_t tokens[4];
    int n_tokens;
    int tps[4];
    int n_tps;
    int64_t grid[8];
    int n_grid;
} ps_bench_shapes;
typedef ps_status (*ps_bench_shape_fn)(void *ctx, const char *op, int tp, int64_t m, int64_t n, int64_t k,
                                       int64_t batch);
ps_status ps_bench_for_shapes(const ps_bench_shapes *s, ps_bench_shape_fn fn, void *ctx);
/* Elements of the largest A, B and C (batch included) over the shapes: one buffer of each serves every shape. Pass a
 * zeroed ps_bench_gemm_need as ctx of ps_bench_for_shapes. */
typedef struct {
    size_t a, b, c;
} ps_bench_gemm_need;
ps_status ps_bench_gemm_need_of(void *ctx, const char *op, int tp, int64_t m, int64_t n, int64_t k, int64_t batch);

#endif

/* GPU backend of the calibration (built with CUDA + cuBLAS; chosen at run time only when the CUDA runtime sees a
 * device): cublasGemmStridedBatchedEx GEMMs in fp32, fp16 and bf16 (fp32 accumulate) over the same kinds of shapes as
 * the CPU backend at full size (hidden 8192, 64 heads, sequence 2048; quick: hidden 4096, 32 heads, sequence 1024),
 * timed with CUDA events; memory bandwidth as a device-to-device copy of 1 GiB (quick 256 MiB), 2 x size bytes moved.
 * Collectives and overlap of GPUs are not measured (no NCCL backend yet: hw/bench_coll.c writes no rows for them, and
 * the cost model keeps its analytic links and overlap slowdown; docs/costdb.md). */
#include "bench_internal.h"

#if PS_HAVE_CUDA && PS_HAVE_CUBLAS
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "ps_mpi.h"

#define CUDA_OK(call, what)                                                                                             \
    do {                                                                                                                \
        cudaError_t e_ = (call);                                                                                        \
        if (e_ != cudaSuccess) {                                                                                        \
            st = PS_FAIL(PS_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e_));                                        \
            goto done;                                                                                                  \
        }                                                                                                               \
    } while (0)
#define CUBLAS_OK(call, what)                                                                                           \
    do {                                                                                                                \
        cublasStatus_t e_ = (call);                                                                                     \
        if (e_ != CUBLAS_STATUS_SUCCESS) {                                                                              \
            st = PS_FAIL(PS_ERR_SYSTEM, "%s: cuBLAS status %d", what, (int)e_);                                         \
            goto done;                                                                                                  \
        }                                                                                                               \
    } while (0)

int ps_bench_cuda_probe(int local_rank, char *name, size_t cap, double *mem_bytes)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        cudaGetLastError(); /* no driver or no device: the CPU backend measures this rank */
        return 0;
    }
    int dev = local_rank % n;
    struct cudaDeviceProp prop;
    if (cudaSetDevice(dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return 0;
    ps_strlcpy(name, prop.name, cap);
    *mem_bytes = (double)prop.totalGlobalMem;
    return n;
}

typedef struct {
    const ps_bench_opts *o;
    ps_bench_results *r;
    cublasHandle_t h;
    cudaEvent_t e0, e1;
    void *a, *b, *c;
    const char *dtype;
    cudaDataType_t t;
    double *times; /* o->reps timings of the point being measured */
} cu_ctx;

static ps_status cu_measure(void *ctx, const char *op, int tp, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    cu_ctx *g = ctx;
    ps_status st = PS_OK;
    const float one = 1.0f, zero = 0.0f;
    /* Row-major (m x k).(k x n) is column-major (n x k).(k x m): swap the operands. */
    for (int i = -g->o->warmup; i < g->o->reps; i++) {
        CUDA_OK(cudaEventRecord(g->e0, 0), "cudaEventRecord");
        CUBLAS_OK(cublasGemmStridedBatchedEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, g->b, g->t,
                                             (int)n, (long long)(k * n), g->a, g->t, (int)k, (long long)(m * k), &zero,
                                             g->c, g->t, (int)n, (long long)(m * n), (int)batch, CUBLAS_COMPUTE_32F,
                                             CUBLAS_GEMM_DEFAULT),
                  "cublasGemmStridedBatchedEx");
        CUDA_OK(cudaEventRecord(g->e1, 0), "cudaEventRecord");
        CUDA_OK(cudaEventSynchronize(g->e1), "cudaEventSynchronize");
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, g->e0, g->e1), "cudaEventElapsedTime");
        if (i >= 0) g->times[i] = ms * 1e-3;
    }
    {
        ps_bench_stat s = ps_bench_stats(g->times, g->o->reps);
        st = ps_bench_add_gemm(g->o, g->r, g->dtype, op, tp, m, n, k, batch, &s);
    }
done:
    return st;
}

ps_status ps_bench_cuda_gemm(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    ps_bench_shapes sh;
    if (o->quick)
        sh = (ps_bench_shapes){.hidden = 4096, .heads = 32, .head_dim = 128, .seq = 1024, .tokens = {1024, 4096},
                               .n_tokens = 2, .tps = {1, 8}, .n_tps = 2, .grid = {256, 1024, 4096}, .n_grid = 3};
    else
        sh = (ps_bench_shapes){.hidden = 8192, .heads = 64, .head_dim = 128, .seq = 2048,
                               .tokens = {2048, 4096, 8192, 16384}, .n_tokens = 4, .tps = {1, 2, 4, 8}, .n_tps = 4,
                               .grid = {128, 256, 512, 1024, 2048, 4096, 8192}, .n_grid = 7};
    ps_bench_gemm_need need = {0, 0, 0};
    PS_TRY(ps_bench_for_shapes(&sh, ps_bench_gemm_need_of, &need));
    ps_status st = PS_OK;
    cu_ctx g = {.o = o, .r = r};
    bool handle = false, events = false;
    g.times = ps_calloc((size_t)o->reps, sizeof *g.times);
    if (!g.times) return PS_ERR_SYSTEM;
    CUBLAS_OK(cublasCreate(&g.h), "cublasCreate");
    handle = true;
    CUDA_OK(cudaEventCreate(&g.e0), "cudaEventCreate");
    CUDA_OK(cudaEventCreate(&g.e1), "cudaEventCreate");
    events = true;
    CUDA_OK(cudaMalloc(&g.a, need.a * 4), "cudaMalloc");
    CUDA_OK(cudaMalloc(&g.b, need.b * 4), "cudaMalloc");
    CUDA_OK(cudaMalloc(&g.c, need.c * 4), "cudaMalloc");
    /* Zeros keep every dtype finite; tensor cores do the same work whatever the values. */
    CUDA_OK(cudaMemset(g.a, 0, need.a * 4), "cudaMemset");
    CUDA_OK(cudaMemset(g.b, 0, need.b * 4), "cudaMemset");
    static const struct {
        const char *name;
        cudaDataType_t t;
    } dt[] = {{"fp32", CUDA_R_32F}, {"fp16", CUDA_R_16F}, {"bf16", CUDA_R_16BF}};
    for (size_t i = 0; i < sizeof dt / sizeof dt[0] && st == PS_OK; i++) {
        g.dtype = dt[i].name;
        g.t = dt[i].t;
        st = ps_bench_for_shapes(&sh, cu_measure, &g);
    }
done:
    if (g.a) cudaFree(g.a);
    if (g.b) cudaFree(g.b);
    if (g.c) cudaFree(g.c);
    if (events) {
        cudaEventDestroy(g.e0);
        cudaEventDestroy(g.e1);
    }
    if (handle) cublasDestroy(g.h);
    free(g.times);
    return st;
}

/* The buffers and events of the copy benchmark; what was made before a failure is left for the caller to free. */
static ps_status cuda_mem_setup(size_t bytes, void **src, void **dst, cudaEvent_t *e0, cudaEvent_t *e1)
{
    ps_status st = PS_OK;
    CUDA_OK(cudaMalloc(src, bytes), "cudaMalloc");
    CUDA_OK(cudaMalloc(dst, bytes), "cudaMalloc");
    CUDA_OK(cudaEventCreate(e0), "cudaEventCreate");
    CUDA_OK(cudaEventCreate(e1), "cudaEventCreate");
done:
    return st;
}

/* One timed device-to-device copy of `bytes` [s]. */
static ps_status cuda_copy_once(void *dst, const void *src, size_t bytes, cudaEvent_t e0, cudaEvent_t e1, double *s)
{
    ps_status st = PS_OK;
    float ms = 0;
    CUDA_OK(cudaEventRecord(e0, 0), "cudaEventRecord");
    CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    CUDA_OK(cudaEventRecord(e1, 0), "cudaEventRecord");
    CUDA_OK(cudaEventSynchronize(e1), "cudaEventSynchronize");
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    *s = ms * 1e-3;
done:
    return st;
}

ps_status ps_bench_cuda_mem(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    size_t bytes = o->quick ? (size_t)256 << 20 : (size_t)1 << 30;
    ps_status st = PS_OK;
    void *src = NULL, *dst = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double *t = ps_calloc((size_t)o->reps, sizeof *t);
    ps_status local = t ? cuda_mem_setup(bytes, &src, &dst, &e0, &e1) : PS_ERR_SYSTEM;
    /* Every rank must reach the barriers below, and CPU ranks of a mixed allocation make this same agreement before
     * theirs (ps_bench_cpu_mem): a rank whose cudaMalloc failed keeps its message, the others name it. */
    PS_TRY_GOTO(st, ps_mpi_agree_status(comm, local, "memory benchmark: allocation"), done);
    /* A copy that fails stops this rank's copies, not its barriers: leaving the loop would leave the other ranks in
     * MPI_Barrier. A per-pass agreement in place of the barrier cannot be had either, as CPU ranks of a mixed
     * allocation make plain barriers (ps_bench_cpu_mem). Every rank leaves the loop together, and the caller's
     * agreement on the outcome (calibrate) makes them fail together, this rank's message kept. */
    ps_status copy = PS_OK;
    for (int i = -o->warmup; i < o->reps; i++) {
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
        double s = 0;
        if (copy == PS_OK) copy = cuda_copy_once(dst, src, bytes, e0, e1, &s);
        if (copy == PS_OK && i >= 0) t[i] = s;
    }
    PS_TRY_GOTO(st, copy, done);
    {
        ps_bench_stat s = ps_bench_stats(t, o->reps);
        st = ps_bench_add_bw(o, r, "d2d_copy", 0, 2.0 * (double)bytes /* read + write */, &s);
    }
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (src) cudaFree(src);
    if (dst) cudaFree(dst);
    free(t);
    return st;
}
#else
/* Built without CUDA/cuBLAS: the CPU backend measures every rank. Keeps this translation unit non-empty (ISO C). */
typedef int ps_bench_cuda_unused;
#endif

/* GPU backend of the calibration (built with CUDA + cuBLAS; chosen at run time only when the CUDA runtime sees a
 * device): cublasGemmStridedBatchedEx GEMMs in fp32, fp16 and bf16 (fp32 accumulate), and on GPUs with FP8 tensor
 * cores (compute capability 8.9 and later) cuBLASLt FP8 (e4m3) GEMMs with a bf16 result, over the same kinds of shapes
 * as the CPU backend at full size (hidden 8192, 64 heads, sequence 2048; quick: hidden 4096, 32 heads, sequence 1024),
 * timed with CUDA events; memory bandwidth as a device-to-device cudaMemcpyAsync of 1 GiB (quick 256 MiB), 2 x size
 * bytes moved (on an H200 it beat a STREAM copy kernel with 16-byte loads at every size, docs/gpu.md).
 * With NCCL too, the single steps of the collective and overlap benchmarks of calib/bench_coll.c (which owns their
 * groups, sizes, timing and rows): one NCCL communicator per group, bootstrapped over MPI (the group's rank 0 makes
 * the id, MPI_Bcast, ncclCommInitRank), on the GPU ps_bench_cuda_probe chose by the rank's place on its node; each
 * collective on a stream of its own, complete at cudaStreamSynchronize; all-to-all and the send/recv ring as grouped
 * ncclSend / ncclRecv. Overlap: a bf16 cuBLAS GEMM on one stream and an NCCL all-reduce over every rank on another.
 * CI has no GPU: scripts/gpu-check.sh runs this on one (docs/gpu.md has an H200's figures). */
#include "bench_internal.h"

#if PS_HAVE_CUDA && PS_HAVE_CUBLAS
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "ps_comm.h"

#define CUDA_OK(call, what)                                                                                            \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            st = PS_FAIL(PS_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e_));                                       \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)
#define CUBLAS_OK(call, what)                                                                                          \
    do {                                                                                                               \
        cublasStatus_t e_ = (call);                                                                                    \
        if (e_ != CUBLAS_STATUS_SUCCESS) {                                                                             \
            st = PS_FAIL(PS_ERR_SYSTEM, "%s: cuBLAS status %d", what, (int)e_);                                        \
            goto done;                                                                                                 \
        }                                                                                                              \
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
    cublasLtHandle_t lt; /* FP8: cublasGemmEx has no FP8 path, cuBLASLt has */
    void *ws;            /* cuBLASLt workspace */
    size_t ws_bytes;
    cudaEvent_t e0, e1;
    void *a, *b, *c;
    const char *dtype;
    cudaDataType_t t;
    int fp8_skipped;     /* shapes cuBLASLt offered no FP8 kernel for */
    double *times;       /* o->reps timings of the point being measured */
} cu_ctx;

/* The layouts and the kernel of one FP8 shape: what cublasLtMatmul needs besides the pointers. */
typedef struct {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulHeuristicResult_t algo;
} lt_plan;

static void lt_plan_free(lt_plan *p)
{
    if (p->pref) cublasLtMatmulPreferenceDestroy(p->pref);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
}

static cublasStatus_t lt_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t batch)
{
    cublasStatus_t e = cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, rows);
    if (e != CUBLAS_STATUS_SUCCESS || batch <= 1) return e;
    int32_t count = (int32_t)batch;
    int64_t stride = rows * cols;
    e = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    return e;
}

/* Row-major C (m x n) = A (m x k) . B (k x n) is column-major C^T (n x m) = B^T . A^T. cuBLASLt's FP8 kernels on
 * Hopper take only the "TN" form (first operand transposed, second not; cuBLAS documentation, cublasLtMatmul): the
 * first is a k x n column-major matrix read transposed, the second k x m; the product is n x m in bf16 (an FP8 GEMM
 * of Transformer Engine writes bf16 or fp8; bf16 here, as C must then be bf16 too). No scale pointers: scale 1. No
 * fast accumulation: Transformer Engine uses it in the forward GEMMs only, and the two backward ones are 2/3 of the
 * FLOPs. Returns CUBLAS_STATUS_NOT_SUPPORTED when the heuristic offers no kernel for the shape. */
static cublasStatus_t lt_fp8_plan(cu_ctx *g, int64_t m, int64_t n, int64_t k, int64_t batch, lt_plan *p)
{
    memset(p, 0, sizeof *p);
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasStatus_t e = cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (e == CUBLAS_STATUS_SUCCESS) e = lt_layout(&p->la, CUDA_R_8F_E4M3, k, n, batch);
    if (e == CUBLAS_STATUS_SUCCESS) e = lt_layout(&p->lb, CUDA_R_8F_E4M3, k, m, batch);
    if (e == CUBLAS_STATUS_SUCCESS) e = lt_layout(&p->lc, CUDA_R_16BF, n, m, batch);
    if (e == CUBLAS_STATUS_SUCCESS) e = cublasLtMatmulPreferenceCreate(&p->pref);
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulPreferenceSetAttribute(p->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes,
                                                 sizeof g->ws_bytes);
    int found = 0;
    if (e == CUBLAS_STATUS_SUCCESS)
        e = cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->la, p->lb, p->lc, p->lc, p->pref, 1, &p->algo, &found);
    if (e == CUBLAS_STATUS_SUCCESS && found < 1) e = CUBLAS_STATUS_NOT_SUPPORTED;
    return e;
}

/* One GEMM of the point being measured, on the legacy stream between the caller's events. */
static ps_status cu_launch(cu_ctx *g, const lt_plan *p, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    ps_status st = PS_OK;
    const float one = 1.0f, zero = 0.0f;
    if (p) {
        CUBLAS_OK(cublasLtMatmul(g->lt, p->desc, &one, g->b, p->la, g->a, p->lb, &zero, g->c, p->lc, g->c, p->lc,
                                 &p->algo.algo, g->ws, g->ws_bytes, 0),
                  "cublasLtMatmul (fp8)");
        return PS_OK;
    }
    /* Row-major (m x k).(k x n) is column-major (n x k).(k x m): swap the operands. */
    CUBLAS_OK(cublasGemmStridedBatchedEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, g->b, g->t,
                                         (int)n, (long long)(k * n), g->a, g->t, (int)k, (long long)(m * k), &zero,
                                         g->c, g->t, (int)n, (long long)(m * n), (int)batch, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
done:
    return st;
}

static ps_status cu_measure(void *ctx, const char *op, int tp, int64_t m, int64_t n, int64_t k, int64_t batch)
{
    cu_ctx *g = ctx;
    ps_status st = PS_OK;
    lt_plan plan, *p = NULL;
    if (g->t == CUDA_R_8F_E4M3) {
        cublasStatus_t e = lt_fp8_plan(g, m, n, k, batch, &plan);
        if (e == CUBLAS_STATUS_NOT_SUPPORTED) {
            g->fp8_skipped++;
            lt_plan_free(&plan);
            return PS_OK;
        }
        p = &plan;
        CUBLAS_OK(e, "cuBLASLt FP8 matmul setup");
    }
    for (int i = -g->o->warmup; i < g->o->reps; i++) {
        CUDA_OK(cudaEventRecord(g->e0, 0), "cudaEventRecord");
        PS_TRY_GOTO(st, cu_launch(g, p, m, n, k, batch), done);
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
    if (p) lt_plan_free(p);
    return st;
}

/* FP8 tensor cores: compute capability 8.9 (Ada) and later. */
static bool cu_has_fp8(void)
{
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return false;
    return major * 10 + minor >= 89;
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
    } dt[] = {{"fp32", CUDA_R_32F}, {"fp16", CUDA_R_16F}, {"bf16", CUDA_R_16BF}, {"fp8", CUDA_R_8F_E4M3}};
    bool fp8 = cu_has_fp8();
    if (fp8) {
        CUBLAS_OK(cublasLtCreate(&g.lt), "cublasLtCreate");
        g.ws_bytes = (size_t)32 << 20; /* cuBLAS documentation: 32 MiB suits Hopper */
        CUDA_OK(cudaMalloc(&g.ws, g.ws_bytes), "cudaMalloc");
    } else if (o->log) {
        fprintf(o->log, "# gemm: fp8 not measured: this GPU has no FP8 tensor cores (compute capability < 8.9)\n");
    }
    for (size_t i = 0; i < sizeof dt / sizeof dt[0] && st == PS_OK; i++) {
        if (dt[i].t == CUDA_R_8F_E4M3 && !fp8) continue;
        g.dtype = dt[i].name;
        g.t = dt[i].t;
        st = ps_bench_for_shapes(&sh, cu_measure, &g);
    }
    if (st == PS_OK && g.fp8_skipped && o->log)
        fprintf(o->log, "# gemm: fp8: cuBLASLt offered no kernel for %d shape(s), left unmeasured\n", g.fp8_skipped);
done:
    if (g.lt) cublasLtDestroy(g.lt);
    if (g.ws) cudaFree(g.ws);
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
    CUDA_OK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0), "cudaMemcpyAsync");
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

#if PS_HAVE_NCCL
#include <nccl.h>

/* For the NCCL steps, which return at the first failure (what they made is left for their close). */
#define CUDA_TRY(call)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return PS_FAIL(PS_ERR_SYSTEM, "%s: %s", #call, cudaGetErrorString(e_));                 \
    } while (0)
#define NCCL_TRY(call)                                                                                                 \
    do {                                                                                                               \
        ncclResult_t e_ = (call);                                                                                      \
        if (e_ != ncclSuccess) return PS_FAIL(PS_ERR_SYSTEM, "%s: %s", #call, ncclGetErrorString(e_));                 \
    } while (0)

void ps_bench_nccl_version(char *out, size_t cap)
{
    int v = 0;
    if (cap) out[0] = '\0';
    /* NCCL_VERSION_CODE since 2.9: major x 10000 + minor x 100 + patch */
    if (ncclGetVersion(&v) == ncclSuccess && v > 0)
        snprintf(out, cap, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

/* ---- collectives: the steps of bench_coll.c's loop on device memory ---- */

typedef struct {
    float *sbuf, *rbuf; /* device buffers of the largest size */
    cudaStream_t stream;
    ncclComm_t comm;    /* the bound group's, NULL between groups */
} nccl_coll;

static void nccl_coll_close(void *state)
{
    nccl_coll *s = state;
    if (!s) return;
    if (s->comm) ncclCommDestroy(s->comm);
    if (s->stream) cudaStreamDestroy(s->stream);
    if (s->sbuf) cudaFree(s->sbuf);
    if (s->rbuf) cudaFree(s->rbuf);
    free(s);
}

static ps_status nccl_coll_open(size_t bytes, void **state)
{
    nccl_coll *s = ps_calloc(1, sizeof *s);
    *state = s;
    if (!s) return PS_ERR_SYSTEM;
    CUDA_TRY(cudaMalloc((void **)&s->sbuf, bytes));
    CUDA_TRY(cudaMalloc((void **)&s->rbuf, bytes));
    /* zeros: the sums stay finite, and NCCL moves the same bytes whatever the values */
    CUDA_TRY(cudaMemset(s->sbuf, 0, bytes));
    CUDA_TRY(cudaMemset(s->rbuf, 0, bytes));
    CUDA_TRY(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaDeviceSynchronize()); /* the memsets, on the legacy stream, are done before any collective */
    return PS_OK;
}

static ps_status nccl_coll_bind(void *state, MPI_Comm g)
{
    return ps_mpi_nccl_comm(g, PS_OK, &((nccl_coll *)state)->comm);
}

static void nccl_coll_unbind(void *state)
{
    nccl_coll *s = state;
    /* every member of the group unbinds after the same last collective, so the teardown meets no pending work */
    if (s->comm) ncclCommDestroy(s->comm);
    s->comm = NULL;
}

/* All-to-all as nccl-tests does it: one send and one receive of `share` floats per peer (itself included), grouped so
 * that they progress together; the ring: a send to the next rank and a receive from the previous, grouped. The group
 * is closed whatever failed inside it. */
static ncclResult_t nccl_p2p(const nccl_coll *s, int op, int n, int me, size_t count)
{
    size_t share = count / (size_t)n;
    ncclResult_t e = ncclGroupStart(), end;
    if (e != ncclSuccess) return e;
    if (op == PS_COLL_ALLTOALL) {
        for (int p = 0; p < n && e == ncclSuccess; p++) {
            e = ncclSend(s->sbuf + (size_t)p * share, share, ncclFloat32, p, s->comm, s->stream);
            if (e == ncclSuccess) e = ncclRecv(s->rbuf + (size_t)p * share, share, ncclFloat32, p, s->comm, s->stream);
        }
    } else {
        e = ncclSend(s->sbuf, count, ncclFloat32, (me + 1) % n, s->comm, s->stream);
        if (e == ncclSuccess) e = ncclRecv(s->rbuf, count, ncclFloat32, (me + n - 1) % n, s->comm, s->stream);
    }
    end = ncclGroupEnd();
    return e != ncclSuccess ? e : end;
}

static ps_status nccl_coll_run(void *state, int op, MPI_Comm g, int n, int me, size_t count)
{
    nccl_coll *s = state;
    if (!s->comm) return PS_FAIL(PS_ERR_SYSTEM, "NCCL collective benchmark: no communicator bound");
    size_t share = count / (size_t)n;
    ncclResult_t e;
    switch (op) {
    case PS_COLL_ALLREDUCE:
        e = ncclAllReduce(s->sbuf, s->rbuf, count, ncclFloat32, ncclSum, s->comm, s->stream);
        break;
    case PS_COLL_ALLGATHER: e = ncclAllGather(s->sbuf, s->rbuf, share, ncclFloat32, s->comm, s->stream); break;
    case PS_COLL_REDUCESCATTER:
        e = ncclReduceScatter(s->sbuf, s->rbuf, share, ncclFloat32, ncclSum, s->comm, s->stream);
        break;
    default: e = nccl_p2p(s, op, n, me, count); break;
    }
    if (e != ncclSuccess)
        return PS_FAIL(PS_ERR_SYSTEM, "NCCL %d-rank collective %d of %zu floats: %s", n, op, count,
                       ncclGetErrorString(e));
    CUDA_TRY(cudaStreamSynchronize(s->stream));
    return PS_OK;
}

const ps_bench_coll_backend ps_bench_coll_nccl = {.name = "nccl",
                                                  .open = nccl_coll_open,
                                                  .bind = nccl_coll_bind,
                                                  .run = nccl_coll_run,
                                                  .unbind = nccl_coll_unbind,
                                                  .close = nccl_coll_close};

/* ---- overlap: a cuBLAS GEMM and an NCCL all-reduce on two streams ---- */

typedef struct {
    cublasHandle_t h;
    bool handle;
    cudaStream_t sg, sc; /* the GEMM's stream, the all-reduce's */
    ncclComm_t comm;     /* every rank of the calibration */
    int n;
    size_t count;
    void *a, *b, *c;     /* bf16 n x n */
    float *s, *d;
} nccl_ovl;

static void nccl_ovl_close(void *state)
{
    nccl_ovl *v = state;
    if (!v) return;
    if (v->comm) ncclCommDestroy(v->comm);
    if (v->handle) cublasDestroy(v->h);
    if (v->sg) cudaStreamDestroy(v->sg);
    if (v->sc) cudaStreamDestroy(v->sc);
    void *p[] = {v->a, v->b, v->c, v->s, v->d};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) cudaFree(p[i]);
    free(v);
}

/* This rank's buffers, streams and cuBLAS handle (local). */
static ps_status nccl_ovl_local(nccl_ovl *v)
{
    size_t nn = (size_t)v->n * (size_t)v->n * 2; /* bf16 bytes */
    CUDA_TRY(cudaMalloc(&v->a, nn));
    CUDA_TRY(cudaMalloc(&v->b, nn));
    CUDA_TRY(cudaMalloc(&v->c, nn));
    CUDA_TRY(cudaMalloc((void **)&v->s, v->count * sizeof(float)));
    CUDA_TRY(cudaMalloc((void **)&v->d, v->count * sizeof(float)));
    CUDA_TRY(cudaMemset(v->a, 0, nn));
    CUDA_TRY(cudaMemset(v->b, 0, nn));
    CUDA_TRY(cudaMemset(v->s, 0, v->count * sizeof(float)));
    CUDA_TRY(cudaDeviceSynchronize());
    CUDA_TRY(cudaStreamCreateWithFlags(&v->sg, cudaStreamNonBlocking));
    CUDA_TRY(cudaStreamCreateWithFlags(&v->sc, cudaStreamNonBlocking));
    if (cublasCreate(&v->h) != CUBLAS_STATUS_SUCCESS) return PS_FAIL(PS_ERR_SYSTEM, "cublasCreate failed");
    v->handle = true;
    if (cublasSetStream(v->h, v->sg) != CUBLAS_STATUS_SUCCESS) return PS_FAIL(PS_ERR_SYSTEM, "cublasSetStream failed");
    return PS_OK;
}

static ps_status nccl_ovl_open(MPI_Comm comm, const ps_bench_opts *o, void **state, double *gemm_flops,
                               double *comm_bytes)
{
    nccl_ovl *v = ps_calloc(1, sizeof *v);
    *state = v;
    ps_status st = PS_ERR_SYSTEM;
    if (v) {
        /* Sized so that each alone takes about as long as the other on an NVLink node (bf16 GEMM ~1-2 ms full, ~0.2
         * ms quick; the all-reduce likewise), where the slowdown of the shorter one shows: Oases and Galvatron measure
         * the training kernels, tensor-core GEMMs and NCCL rings contending for SMs and memory bandwidth. */
        v->n = o->quick ? 4096 : 8192;
        v->count = o->quick ? (size_t)1 << 23 : (size_t)1 << 26; /* floats: 32 MiB (quick), 256 MiB */
        st = nccl_ovl_local(v);
    }
    PS_TRY(ps_mpi_agree_status(comm, st, "overlap benchmark: GPU buffers"));
    PS_TRY(ps_mpi_nccl_comm(comm, PS_OK, &v->comm));
    *gemm_flops = 2.0 * v->n * (double)v->n * v->n;
    *comm_bytes = (double)v->count * sizeof(float);
    return PS_OK;
}

static ps_status ovl_launch_gemm(nccl_ovl *v)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t e = cublasGemmEx(v->h, CUBLAS_OP_N, CUBLAS_OP_N, v->n, v->n, v->n, &one, v->a, CUDA_R_16BF, v->n,
                                    v->b, CUDA_R_16BF, v->n, &zero, v->c, CUDA_R_16BF, v->n, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    if (e != CUBLAS_STATUS_SUCCESS) return PS_FAIL(PS_ERR_SYSTEM, "cublasGemmEx: cuBLAS status %d", (int)e);
    return PS_OK;
}

static ps_status ovl_launch_comm(nccl_ovl *v)
{
    NCCL_TRY(ncclAllReduce(v->s, v->d, v->count, ncclFloat32, ncclSum, v->comm, v->sc));
    return PS_OK;
}

static ps_status nccl_ovl_gemm(void *state)
{
    nccl_ovl *v = state;
    PS_TRY(ovl_launch_gemm(v));
    CUDA_TRY(cudaStreamSynchronize(v->sg));
    return PS_OK;
}

static ps_status nccl_ovl_comm(void *state)
{
    nccl_ovl *v = state;
    PS_TRY(ovl_launch_comm(v));
    CUDA_TRY(cudaStreamSynchronize(v->sc));
    return PS_OK;
}

/* The all-reduce first, as the MPI backend starts its MPI_Iallreduce before the GEMM; both streams then run at once. */
static ps_status nccl_ovl_both(void *state)
{
    nccl_ovl *v = state;
    PS_TRY(ovl_launch_comm(v));
    ps_status st = ovl_launch_gemm(v);
    /* the all-reduce was launched: wait for it even when the GEMM failed, so the peers' one completes too */
    cudaError_t e = cudaStreamSynchronize(v->sc);
    PS_TRY(st);
    if (e != cudaSuccess) return PS_FAIL(PS_ERR_SYSTEM, "cudaStreamSynchronize: %s", cudaGetErrorString(e));
    CUDA_TRY(cudaStreamSynchronize(v->sg));
    return PS_OK;
}

const ps_bench_ovl_backend ps_bench_ovl_nccl = {.name = "nccl",
                                                .open = nccl_ovl_open,
                                                .gemm = nccl_ovl_gemm,
                                                .comm = nccl_ovl_comm,
                                                .both = nccl_ovl_both,
                                                .close = nccl_ovl_close};
#endif /* PS_HAVE_NCCL */
#else
/* Built without CUDA/cuBLAS: the CPU backend measures every rank. Keeps this translation unit non-empty (ISO C). */
typedef int ps_bench_cuda_unused;
#endif

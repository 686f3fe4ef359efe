/* GEMM time by shape on the GPU this process sees, against the cost model's analytic prediction for the same shape
 * (ps_cost_gemm_time, cost/layer_cost.c) with and without its tile/wave shape model, as one JSON document on stdout.
 * The sweeps expose tile quantization (a dimension just past a multiple of the tile pads a whole row or column of
 * tiles) and wave quantization (a tile count just past a multiple of the SM count runs one more, nearly empty wave):
 * NVIDIA's "Matrix Multiplication Background User's Guide", Sec. 3. scripts/gemm-shapes-report.py summarises it.
 * bf16 in and out, fp32 accumulate (CUBLAS_COMPUTE_32F), the "TN" form of a linear layer (y = x W^T, the weight
 * stored [n, k]) as PyTorch and Megatron call it; batched attention shapes through cublasGemmStridedBatchedEx.
 * Times: median of the repeats after warm-up, CUDA events around each call. Progress goes to stderr.
 *   bench_gemm_shapes [--gpu KEY] [--budget S] [--quick]
 * --gpu: catalog key the predictions use (default: the catalog entry of the device's name; none -> no predictions);
 * --budget: seconds of timed GEMMs per shape, at least 3 repeats (default 0.05); --quick: every fourth shape.
 * Exit codes: 0 done, 2 usage, 3 no GPU or a CUDA/cuBLAS failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "ps_cost.h"

typedef struct {
    const char *group; /* sweep the shape belongs to */
    int64_t m, n, k, count;
} shape;

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cuda_fail(const char *what, cudaError_t e)
{
    fprintf(stderr, "bench_gemm_shapes: %s: %s\n", what, cudaGetErrorString(e));
    return 3;
}

static int cublas_fail(const char *what, cublasStatus_t e)
{
    fprintf(stderr, "bench_gemm_shapes: %s: cuBLAS status %d\n", what, (int)e);
    return 3;
}

/* The sweeps; returns the count (fills up to cap). */
static int build_shapes(shape *s, int cap)
{
    int n = 0;
#define ADD(G, M, N, K, C)                                                                                             \
    do {                                                                                                               \
        if (n < cap) s[n++] = (shape){(G), (M), (N), (K), (C)};                                                        \
    } while (0)
    /* Square outputs in 128 steps: tiles = (m/128)^2 crosses 132 x waves at irregular places (the sawtooth). */
    for (int64_t d = 1024; d <= 8192; d += 128) ADD("square_k4096", d, d, 4096, 1);
    /* One output dimension in steps of 32 around multiples of 128 at m = k = 4096: tile quantization (n just past
     * a multiple of 128) and wave quantization (32 rows of tiles x ceil(n/128) against 132 SMs). */
    for (int64_t c = 1024; c <= 4096; c += 32) ADD("n_sweep_m4096", 4096, c, 4096, 1);
    /* Linear layers of a transformer block on one GPU of a tp-way group: tokens T = micro-batch x sequence, hidden
     * h: QKV (T, 3h/t, h), output projection (T, h, h/t), MLP up (T, 4h/t, h) and down (T, h, 4h/t). */
    static const int64_t Ts[] = {1024, 2048, 4096, 8192, 16384}, hs[] = {4096, 5120, 8192}, ts[] = {1, 2, 4, 8};
    for (size_t a = 0; a < sizeof Ts / sizeof Ts[0]; a++)
        for (size_t b = 0; b < sizeof hs / sizeof hs[0]; b++)
            for (size_t c = 0; c < sizeof ts / sizeof ts[0]; c++) {
                int64_t T = Ts[a], h = hs[b], t = ts[c];
                ADD("transformer_qkv", T, 3 * h / t, h, 1);
                ADD("transformer_proj", T, h, h / t, 1);
                ADD("transformer_mlp_up", T, 4 * h / t, h, 1);
                ADD("transformer_mlp_down", T, h, 4 * h / t, 1);
            }
    /* Attention scores Q.K^T and probabilities . V, batched over micro-batch x local heads (head dim 128). */
    static const int64_t ss[] = {1024, 2048, 4096}, bs[] = {8, 16, 32, 64};
    for (size_t a = 0; a < sizeof ss / sizeof ss[0]; a++)
        for (size_t b = 0; b < sizeof bs / sizeof bs[0]; b++) {
            ADD("attn_scores", ss[a], ss[a], 128, bs[b]);
            ADD("attn_context", ss[a], 128, ss[a], bs[b]);
        }
#undef ADD
    return n;
}

/* Bounded pseudo-random bf16 values (|x| < 1): all-zero operands draw less power and would run faster than
 * training data does. */
static void fill_bf16(uint16_t *h, size_t n, uint32_t seed)
{
    uint32_t x = seed | 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        float f = ((float)(x & 0xffff) / 65536.0f - 0.5f) * 0.5f;
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        h[i] = (uint16_t)(u >> 16);
    }
}

static int fill_device(void *d, size_t bytes, uint32_t seed)
{
    const size_t chunk = 64u << 20;
    uint16_t *h = malloc(chunk);
    if (!h) return 3;
    fill_bf16(h, chunk / 2, seed);
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t b = bytes - off < chunk ? bytes - off : chunk;
        cudaError_t e = cudaMemcpy((char *)d + off, h, b, cudaMemcpyHostToDevice);
        if (e != cudaSuccess) {
            free(h);
            return cuda_fail("cudaMemcpy", e);
        }
    }
    free(h);
    return 0;
}

static cublasStatus_t run_gemm(cublasHandle_t h, const shape *s, const void *X, const void *W, void *Y)
{
    const float one = 1.0f, zero = 0.0f;
    /* Row-major y[m, n] = x[m, k] . W[n, k]^T is column-major y^T = W . x^T: cuBLAS's (T, N) with its m = n. */
    int m = (int)s->n, n = (int)s->m, k = (int)s->k;
    if (s->count <= 1)
        return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, W, CUDA_R_16BF, k, X, CUDA_R_16BF, k, &zero, Y,
                            CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, W, CUDA_R_16BF, k,
                                      (long long)s->n * s->k, X, CUDA_R_16BF, k, (long long)s->m * s->k, &zero, Y,
                                      CUDA_R_16BF, m, (long long)s->m * s->n, (int)s->count, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT);
}

static void print_pred(const char *key, double v)
{
    if (v > 0)
        printf(", \"%s\": %.6e", key, v);
    else
        printf(", \"%s\": null", key);
}

int main(int argc, char **argv)
{
    const char *gpu_key = NULL;
    double budget = 0.05;
    int stride = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc)
            gpu_key = argv[++i];
        else if (strcmp(argv[i], "--budget") == 0 && i + 1 < argc)
            budget = atof(argv[++i]);
        else if (strcmp(argv[i], "--quick") == 0)
            stride = 4;
        else {
            fprintf(stderr, "usage: bench_gemm_shapes [--gpu KEY] [--budget S] [--quick]\n");
            return 2;
        }
    }
    if (!(budget > 0 && budget <= 10)) {
        fprintf(stderr, "bench_gemm_shapes: --budget must be in (0, 10] seconds\n");
        return 2;
    }
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev < 1) {
        fprintf(stderr, "bench_gemm_shapes: no GPU is visible to the CUDA runtime (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 3;
    }
    struct cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) return cuda_fail("cudaGetDeviceProperties", e);
    prop.name[sizeof prop.name - 1] = '\0';

    /* The model's GPU: the catalog row (its sm_count and peaks); where the catalog gives no SM count, the device's,
     * so that the shape model has one to work with. */
    ps_gpu g;
    bool have_gpu = false;
    if (!gpu_key) gpu_key = ps_gpu_match_device(prop.name);
    if (gpu_key) {
        if (ps_gpu_lookup(gpu_key, &g) != PS_OK) {
            fprintf(stderr, "bench_gemm_shapes: %s\n", ps_error_message());
            return 2;
        }
        have_gpu = true;
        if (g.sm_count <= 0) g.sm_count = prop.multiProcessorCount;
    } else {
        fprintf(stderr, "bench_gemm_shapes: device '%s' is not in the GPU catalog; no predictions (--gpu KEY)\n",
                prop.name);
    }
    ps_cost_params p_shape, p_flat, p_wide;
    ps_cost_params_default(&p_shape);
    p_flat = p_shape;
    p_flat.gemm_tile_m = 0; /* shape model off: the roofline at gemm_eff */
    p_wide = p_shape;
    p_wide.gemm_tile_n = 256; /* the 128x256 tile of large Hopper kernels, for comparison */

    static shape shapes[512];
    int n_shapes = build_shapes(shapes, (int)(sizeof shapes / sizeof shapes[0]));
    size_t max_x = 0, max_w = 0, max_y = 0;
    for (int i = 0; i < n_shapes; i += stride) {
        const shape *s = &shapes[i];
        size_t x = (size_t)(s->m * s->k * s->count), w = (size_t)(s->n * s->k * s->count),
               y = (size_t)(s->m * s->n * s->count);
        if (x > max_x) max_x = x;
        if (w > max_w) max_w = w;
        if (y > max_y) max_y = y;
    }
    void *X = NULL, *W = NULL, *Y = NULL;
    if ((e = cudaMalloc(&X, max_x * 2)) != cudaSuccess || (e = cudaMalloc(&W, max_w * 2)) != cudaSuccess ||
        (e = cudaMalloc(&Y, max_y * 2)) != cudaSuccess)
        return cuda_fail("cudaMalloc", e);
    int rc;
    if ((rc = fill_device(X, max_x * 2, 12345)) != 0 || (rc = fill_device(W, max_w * 2, 67890)) != 0) return rc;
    cublasHandle_t h;
    cublasStatus_t be = cublasCreate(&h);
    if (be != CUBLAS_STATUS_SUCCESS) return cublas_fail("cublasCreate", be);
    cudaEvent_t e0, e1;
    if ((e = cudaEventCreate(&e0)) != cudaSuccess || (e = cudaEventCreate(&e1)) != cudaSuccess)
        return cuda_fail("cudaEventCreate", e);
    enum { MAX_REPS = 50 };
    double t[MAX_REPS];

    printf("{\n  \"bench\": \"gemm_shapes\",\n  \"device\": \"%s\",\n  \"sm_count\": %d,\n  \"cc\": \"%d.%d\",\n",
           prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    printf("  \"model_gpu\": %s%s%s,\n  \"model_sm_count\": %d,\n", have_gpu ? "\"" : "", have_gpu ? g.name : "null",
           have_gpu ? "\"" : "", have_gpu ? g.sm_count : 0);
    printf("  \"model_params\": {\"gemm_eff\": %g, \"hbm_eff\": %g, \"kernel_launch_s\": %g, \"gemm_tile_m\": %g, "
           "\"gemm_tile_n\": %g},\n",
           ps_cost_gemm_eff(&p_shape, have_gpu ? &g : NULL), p_shape.hbm_eff, p_shape.kernel_launch_s,
           p_shape.gemm_tile_m, p_shape.gemm_tile_n);
    printf("  \"dtype\": \"bf16\",\n  \"predictions\": {\"pred_shape_s\": \"shape model, default tile\", "
           "\"pred_flat_s\": \"no shape model (gemm_tile_m=0)\", "
           "\"pred_tile128x256_s\": \"shape model, tile 128x256\"},"
           "\n  \"units\": \"time_s: median seconds per call (a batched call: all its GEMMs); tflops: 2mnk count / "
           "time_s / 1e12\",\n  \"shapes\": [");
    int done = 0, total = (n_shapes + stride - 1) / stride;
    for (int i = 0; i < n_shapes; i += stride) {
        const shape *s = &shapes[i];
        /* warm-up: the first call of a shape may load the kernel and pick the algorithm */
        for (int w = 0; w < 2; w++)
            if ((be = run_gemm(h, s, X, W, Y)) != CUBLAS_STATUS_SUCCESS) return cublas_fail("GEMM", be);
        if ((e = cudaDeviceSynchronize()) != cudaSuccess) return cuda_fail("warm-up", e);
        int reps = 0;
        double spent = 0;
        while (reps < MAX_REPS && (reps < 3 || spent < budget)) {
            float ms = 0;
            if ((e = cudaEventRecord(e0, NULL)) != cudaSuccess) return cuda_fail("cudaEventRecord", e);
            if ((be = run_gemm(h, s, X, W, Y)) != CUBLAS_STATUS_SUCCESS) return cublas_fail("GEMM", be);
            if ((e = cudaEventRecord(e1, NULL)) != cudaSuccess || (e = cudaEventSynchronize(e1)) != cudaSuccess ||
                (e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess)
                return cuda_fail("timing", e);
            t[reps++] = ms * 1e-3;
            spent += ms * 1e-3;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        double med = t[reps / 2];
        double flops = 2.0 * (double)s->m * (double)s->n * (double)s->k * (double)s->count;
        double m = (double)s->m, n = (double)s->n, k = (double)s->k, c = (double)s->count;
        double ps = 0, pf = 0, pw = 0;
        if (have_gpu) {
            ps = ps_cost_gemm_time(&p_shape, &g, PS_DTYPE_BF16, m, n, k, c);
            pf = ps_cost_gemm_time(&p_flat, &g, PS_DTYPE_BF16, m, n, k, c);
            pw = ps_cost_gemm_time(&p_wide, &g, PS_DTYPE_BF16, m, n, k, c);
        }
        double tiles = ceil(m / p_shape.gemm_tile_m) * ceil(n / p_shape.gemm_tile_n) * c;
        printf("%s\n    {\"group\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"count\": %lld, \"reps\": %d, "
               "\"time_s\": %.6e, \"tflops\": %.2f, \"tiles_128x128\": %.0f, \"waves\": %.0f",
               done ? "," : "", s->group, (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->count, reps,
               med, flops / med / 1e12, tiles, ceil(tiles / prop.multiProcessorCount));
        print_pred("pred_shape_s", ps);
        print_pred("pred_flat_s", pf);
        print_pred("pred_tile128x256_s", pw);
        printf("}");
        fflush(stdout);
        done++;
        if (done % 20 == 0 || done == total)
            fprintf(stderr, "bench_gemm_shapes: %d/%d shapes (last %s %lldx%lldx%lld x%lld: %.1f TFLOP/s)\n", done,
                    total, s->group, (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->count,
                    flops / med / 1e12);
    }
    printf("\n  ]\n}\n");
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cublasDestroy(h);
    cudaFree(X);
    cudaFree(W);
    cudaFree(Y);
    return 0;
}

/* The device copy's bandwidth by stream and size, as one JSON document, away from the calibration: a standalone
 * reference for the memory benchmark of `psearch calibrate` (calib/bench_cuda.c), which copies the same way
 * (cudaMemcpyAsync device to device, 1 GiB) after its GEMM sweep. On the legacy stream and on a stream of its own.
 * Bytes moved count the read and the write (2 x size), as STREAM and the calibration count them. docs/gpu.md has an
 * H200's figures, and those of a STREAM copy kernel with 16-byte loads, which was slower at every size.
 *   bench_copy [--reps N] [--sizes MiB,MiB,...]      (defaults: 20 reps; 256,1024,4096 MiB) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what, cudaError_t e)
{
    fprintf(stderr, "bench_copy: %s: %s\n", what, cudaGetErrorString(e));
    return 3;
}

int main(int argc, char **argv)
{
    int reps = 20;
    char sizes_arg[256] = "256,1024,4096";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[++i]);
        else {
            fprintf(stderr, "usage: bench_copy [--reps N] [--sizes MiB,MiB,...]\n");
            return 2;
        }
    }
    if (reps < 3 || reps > 10000) {
        fprintf(stderr, "bench_copy: --reps must be 3..10000\n");
        return 2;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        fprintf(stderr, "bench_copy: no GPU is visible to the CUDA runtime\n");
        return 3;
    }
    struct cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess) return fail("cudaGetDeviceProperties", e);
    size_t max_mib = 0;
    for (char *p = sizes_arg; *p;) {
        size_t v = strtoul(p, &p, 10);
        if (v > max_mib) max_mib = v;
        if (*p == ',')
            p++;
        else if (*p) {
            fprintf(stderr, "bench_copy: --sizes: whole MiB separated by commas\n");
            return 2;
        }
    }
    size_t max_bytes = max_mib << 20;
    void *src = NULL, *dst = NULL;
    cudaStream_t own = NULL;
    cudaEvent_t e0, e1;
    if ((e = cudaMalloc(&src, max_bytes)) != cudaSuccess || (e = cudaMalloc(&dst, max_bytes)) != cudaSuccess)
        return fail("cudaMalloc", e);
    /* written once, so no page is read before it was ever touched */
    if ((e = cudaMemset(src, 1, max_bytes)) != cudaSuccess || (e = cudaMemset(dst, 0, max_bytes)) != cudaSuccess)
        return fail("cudaMemset", e);
    if ((e = cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking)) != cudaSuccess) return fail("stream", e);
    if ((e = cudaEventCreate(&e0)) != cudaSuccess || (e = cudaEventCreate(&e1)) != cudaSuccess)
        return fail("cudaEventCreate", e);
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t) return 3;
    printf("{\n  \"bench\": \"copy\",\n  \"device\": \"%s\",\n  \"reps\": %d,\n  \"units\": \"GB/s = 2 x bytes / "
           "median time / 1e9 (read + write)\",\n  \"points\": [",
           prop.name, reps);
    int first = 1;
    for (char *p = sizes_arg; *p;) {
        size_t mib = strtoul(p, &p, 10), bytes = mib << 20;
        if (*p == ',') p++;
        for (int which = 0; which < 2; which++) {
            cudaStream_t s = which ? own : NULL;
            for (int i = -3; i < reps; i++) {
                float ms = 0;
                if ((e = cudaEventRecord(e0, s)) != cudaSuccess) return fail("cudaEventRecord", e);
                e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
                if (e != cudaSuccess) return fail("cudaMemcpyAsync", e);
                if ((e = cudaEventRecord(e1, s)) != cudaSuccess || (e = cudaEventSynchronize(e1)) != cudaSuccess ||
                    (e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess)
                    return fail("timing", e);
                if (i >= 0) t[i] = ms * 1e-3;
            }
            qsort(t, (size_t)reps, sizeof *t, cmp_d);
            double med = t[reps / 2], best = t[0];
            printf("%s\n    {\"method\": \"%s\", \"stream\": \"%s\", \"mib\": %zu, \"GBps_median\": %.1f, "
                   "\"GBps_best\": %.1f}",
                   first ? "" : ",", "cudaMemcpyAsync", which ? "own" : "legacy", mib, 2.0 * (double)bytes / med / 1e9,
                   2.0 * (double)bytes / best / 1e9);
            first = 0;
        }
    }
    printf("\n  ]\n}\n");
    free(t);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(own);
    cudaFree(src);
    cudaFree(dst);
    return 0;
}

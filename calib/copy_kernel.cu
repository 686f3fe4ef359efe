/* The device copy of the calibration's memory benchmark and of the executor's elementwise traffic: a STREAM "copy"
 * kernel (McCalpin's STREAM, as BabelStream runs it on GPUs) with 16-byte loads and stores over a grid-stride loop.
 * cudaMemcpy's device-to-device copy reached 78% of an H200's 4.8 TB/s here (docs/gpu.md), short of the fused
 * elementwise kernels a training step runs, which the memory term of the cost model stands for. */
#include <cuda_runtime.h>
#include <stdint.h>

/* declared in ps_calib.h, not included here: its C headers (MPI, the cost model) are not for nvcc */

__global__ void ps_copy16(const int4 *__restrict__ src, int4 *__restrict__ dst, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) dst[i] = src[i];
}

extern "C" int ps_cuda_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    /* cudaMalloc's pointers are 256-byte aligned; anything else goes the way of cudaMemcpyAsync */
    if (((uintptr_t)dst | (uintptr_t)src) % 16 != 0 || bytes < 16)
        return (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess) return (int)e;
    size_t n = bytes / 16;
    /* 8 blocks of 256 threads per multiprocessor: 2048 resident threads, a full SM on Ampere and Hopper */
    size_t blocks = (size_t)sms * 8, need = (n + 255) / 256;
    if (blocks > need) blocks = need;
    ps_copy16<<<(unsigned)blocks, 256, 0, s>>>((const int4 *)src, (int4 *)dst, n);
    e = cudaGetLastError();
    if (e == cudaSuccess && bytes % 16)
        e = cudaMemcpyAsync((char *)dst + n * 16, (const char *)src + n * 16, bytes % 16, cudaMemcpyDeviceToDevice, s);
    return (int)e;
}

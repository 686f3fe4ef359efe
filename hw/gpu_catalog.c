/* The GPU catalog: peak figures of the GPUs psearch knows by name, each from the vendor's datasheet or architecture
 * whitepaper, and the lookups over it (by catalog key, by the device name the CUDA runtime reports, by dtype). */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "ps_hw.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define TF 1e12
#define GBps 1e9

/* Dense peaks only: the datasheets of Ampere and later print the 2:4 structured-sparsity figure first (marked "*"),
 * which no training step reaches, so those are halved here. Memory follows the "N GB card = N GiB" convention
 * (docs/clusters.md): the marketed "80 GB" of an A100 is 80 GiB as the driver reports it.
 * fp16_flops is the tensor rate with FP32 accumulate (what mixed-precision training uses); on GeForce parts this is
 * half the FP16-accumulate figure the spec pages print.
 * fused_attn: a fused attention kernel that keeps no score matrix trains on this GPU. FlashAttention-2 supports
 * Ampere, Ada and Hopper (github.com/Dao-AILab/flash-attention README, "Installation and features": "Ampere, Ada, or
 * Hopper GPUs (e.g., A100, RTX 3090, RTX 4090, H100)"; Turing and Volta not supported); cuDNN's fused flash attention,
 * which Transformer Engine uses, needs compute capability 8.0 or later and covers Blackwell (cuDNN developer guide,
 * "Scaled Dot Product Attention" support surface). V100, T4 and TITAN RTX (7.x) have neither.
 * sm_count: the SMs the product enables (the cost model's GEMM wave quantization spreads output tiles over them).
 * A100 and A800: 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper: the A100 product enables 108 of GA100's
 * 128 SMs; the A800 datasheet gives A100's compute figures, only NVLink differs). H100 SXM5: 132 (NVIDIA H100 Tensor
 * Core GPU Architecture whitepaper, H100 SXM5 column). H200: 132, the same GH100 configuration as the H100 SXM with
 * more and faster HBM3e (the H200 datasheet gives H100 SXM's compute figures). V100 SXM2: 80 (Volta architecture
 * whitepaper, Tesla V100 column). T4: 40 (Turing architecture whitepaper, Tesla T4: 2,560 CUDA cores, 64 per SM).
 * RTX 3090: 82 (GA102 architecture whitepaper, GeForce RTX 3090 column). TITAN RTX: 72 (Turing whitepaper: the full
 * TU102, 4,608 CUDA cores). L4: 58 (L4 datasheet: 7,424 CUDA cores, 128 per Ada SM). B200 and GB200: 0 = unknown:
 * NVIDIA's datasheets and Blackwell pages give no SM count (third-party die analyses report 148, not a vendor
 * figure), so wave quantization is off for them; `--cluster auto` (calib/detect.c) takes the real count from the
 * CUDA runtime, and a cluster.json GPU may give `sm_count`.
 * gemm_eff: measured, not from a datasheet: the median over the 240 transformer-linear shapes of
 * bench/gpu/bench_gemm_shapes (bf16 cuBLAS, m 1k-16k, n and k of GPT/Llama widths / TP 1-8) of the fraction of the
 * dense peak that makes the cost model's tile/wave shape model match the measured time (0.8 x predicted / measured).
 * H100 SXM 80GB HBM3: 0.69 (quartiles 0.66-0.71), H200: 0.68 (0.66-0.70), both 2026-11-27, CUDA 12 / PyTorch 2.11
 * image, data in tests/data/gpu-check/{h100,h200}-2026-11-27/gemm_shapes.json. Both sustain well under the 80%
 * of the generic default on these shapes (power and clock limits at 700 W). Other GPUs: 0, the generic default. */
static const ps_gpu k_catalog[] = {
    {.name = "a100-40g",
     .marketing = "NVIDIA A100-SXM4-40GB",
     .mem_bytes = 40 * GiB,
     .hbm_Bps = 1555 * GBps,
     .fp32_flops = 19.5 * TF,
     .tf32_flops = 156 * TF,
     .fp16_flops = 312 * TF,
     .bf16_flops = 312 * TF,
     .fp8_flops = 0,
     .fp4_flops = 0,
     .fused_attn = true,
     .sm_count = 108,
     .source = "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM column, dense)"},
    {.name = "a100-80g",
     .marketing = "NVIDIA A100-SXM4-80GB",
     .mem_bytes = 80 * GiB,
     .hbm_Bps = 2039 * GBps,
     .fp32_flops = 19.5 * TF,
     .tf32_flops = 156 * TF,
     .fp16_flops = 312 * TF,
     .bf16_flops = 312 * TF,
     .fp8_flops = 0,
     .fp4_flops = 0,
     .fused_attn = true,
     .sm_count = 108,
     .source = "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column, dense)"},
    {.name = "a800-80g",
     .marketing = "NVIDIA A800-SXM4-80GB",
     .mem_bytes = 80 * GiB,
     .hbm_Bps = 2039 * GBps,
     .fp32_flops = 19.5 * TF,
     .tf32_flops = 156 * TF,
     .fp16_flops = 312 * TF,
     .bf16_flops = 312 * TF,
     .fp8_flops = 0,
     .fp4_flops = 0,
     .fused_attn = true,
     .sm_count = 108,
     .source = "NVIDIA A800 Tensor Core GPU datasheet (A800 80GB SXM; compute as A100, NVLink 400 GB/s)"},
    {.name = "h100",
     .marketing = "NVIDIA H100 80GB HBM3",
     .mem_bytes = 80 * GiB,
     .hbm_Bps = 3350 * GBps,
     .fp32_flops = 66.9 * TF,
     .tf32_flops = 494.7 * TF,
     .fp16_flops = 989.4 * TF,
     .bf16_flops = 989.4 * TF,
     .fp8_flops = 1978.9 * TF,
     .fp4_flops = 0,
     .fused_attn = true,
     .sm_count = 132,
     .gemm_eff = 0.69,
     .source = "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM) and Hopper architecture whitepaper, dense"},
    {.name = "h200",
     .marketing = "NVIDIA H200",
     .mem_bytes = 141 * GiB,
     .hbm_Bps = 4800 * GBps,
     .fp32_flops = 66.9 * TF,
     .tf32_flops = 494.7 * TF,
     .fp16_flops = 989.4 * TF,
     .bf16_flops = 989.4 * TF,
     .fp8_flops = 1978.9 * TF,
     .fp4_flops = 0,
     .fused_attn = true,
     .sm_count = 132,
     .gemm_eff = 0.68,
     .source = "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM, sparse figures halved)"},
    /* B200 as NVIDIA sells it on HGX/DGX B200 boards (1,000 W). The HGX B200 specifications give totals for the
     * 8-GPU board, sparse (*): FP4 144 PF, FP8/FP6 72 PF, FP16/BF16 36 PF, TF32 18 PF; dense FP32 600 TF. Per GPU:
     * / 8, tensor figures halved. Per-GPU memory from the Blackwell architecture page (HGX B200 column: 180 GB HBM3e,
     * 7.7 TB/s) and the DGX B200 user guide (8 GPUs, 1,440 GB). The DGX B200 page gives 64 TB/s for the 8 GPUs
     * (8 TB/s each); the lower per-GPU figure is kept, as a plan should not count on bandwidth a board may lack.
     * https://www.nvidia.com/en-us/data-center/hgx/
     * https://www.nvidia.com/en-us/data-center/technologies/blackwell-architecture/
     * https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html */
    {.name = "b200",
     .marketing = "NVIDIA B200",
     .mem_bytes = 180 * GiB,
     .hbm_Bps = 7700 * GBps,
     .fp32_flops = 75 * TF,
     .tf32_flops = 1125 * TF,
     .fp16_flops = 2250 * TF,
     .bf16_flops = 2250 * TF,
     .fp8_flops = 4500 * TF,
     .fp4_flops = 9000 * TF,
     .fused_attn = true,
     .sm_count = 0,
     .source = "NVIDIA HGX B200 specifications (8-GPU totals / 8, sparse halved); 180 GB, 7.7 TB/s per GPU"},
    /* One Blackwell GPU of a GB200 superchip as in GB200 NVL72 (up to 1,200 W, so faster than a B200). The GB200
     * NVL72 specifications give rack totals for 72 GPUs, sparse (*): FP4 1,440 PF, FP8/FP6 720 PF, i.e. 20 and 10 PF
     * per GPU, and a per-GPU column: FP16/BF16 5 PF*, TF32 2.5 PF*, FP32 80 TF, 186 GB HBM3e at 8 TB/s. Tensor
     * figures halved for dense.
     * https://www.nvidia.com/en-us/data-center/gb200-nvl72/
     * https://www.nvidia.com/en-us/data-center/technologies/blackwell-architecture/ */
    {.name = "gb200",
     .marketing = "NVIDIA GB200",
     .mem_bytes = 186 * GiB,
     .hbm_Bps = 8000 * GBps,
     .fp32_flops = 80 * TF,
     .tf32_flops = 1250 * TF,
     .fp16_flops = 2500 * TF,
     .bf16_flops = 2500 * TF,
     .fp8_flops = 5000 * TF,
     .fp4_flops = 10000 * TF,
     .fused_attn = true,
     .sm_count = 0,
     .source = "NVIDIA GB200 NVL72 specifications (72-GPU totals / 72 and per-GPU column, sparse halved)"},
    {.name = "v100-16g",
     .marketing = "Tesla V100-SXM2-16GB",
     .mem_bytes = 16 * GiB,
     .hbm_Bps = 900 * GBps,
     .fp32_flops = 15.7 * TF,
     .tf32_flops = 0,
     .fp16_flops = 125 * TF,
     .bf16_flops = 0,
     .fp8_flops = 0,
     .fp4_flops = 0,
     .fused_attn = false,
     .sm_count = 80,
     .source = "NVIDIA Tesla V100 GPU datasheet (V100 SXM2 16GB: 125 TFLOPS tensor, 15.7 FP32, 900 GB/s)"},
    {.name = "v100-32g",
     .marketing = "Tesla V100-SXM2-32GB",
     .mem_bytes = 32 * GiB,
     .hbm_Bps = 900 * GBps,
     .fp32_flops = 15.7 * TF,
     .tf32_flops = 0,
     .fp16_flops = 125 * TF,
     .bf16_flops = 0,
     .fp8_flops = 0,
     .fp4_flops = 0,
     .fused_attn = false,
     .sm_count = 80,
     .source = "NVIDIA Tesla V100 GPU datasheet (V100 SXM2 32GB: 125 TFLOPS tensor, 15.7 FP32, 900 GB/s)"},
    {.name = "t4",
     .marketing = "Tesla T4",
     .mem_bytes = 16 * GiB,
     .hbm_Bps = 320 * GBps,
     .fp32_flops = 8.1 * TF,
     .tf32_flops = 0,
     .fp16_flops = 65 * TF,
     .bf16_flops = 0,
     .fp8_flops = 0,
     .fp4_flops = 0,
     .fused_attn = false,
     .sm_count = 40,
     .source = "NVIDIA T4 Tensor Core GPU datasheet (65 TFLOPS mixed FP16/FP32, 8.1 FP32, 320 GB/s GDDR6)"},
    {.name = "rtx3090",
     .marketing = "NVIDIA GeForce RTX 3090",
     .mem_bytes = 24 * GiB,
     .hbm_Bps = 936 * GBps,
     .fp32_flops = 35.6 * TF,
     .tf32_flops = 35.6 * TF,
     .fp16_flops = 71 * TF,
     .bf16_flops = 71 * TF,
     .fp8_flops = 0,
     .fp4_flops = 0,
     .fused_attn = true,
     .sm_count = 82,
     .source = "NVIDIA Ampere GA102 GPU architecture whitepaper, RTX 3090 (FP16/BF16 tensor, FP32 accumulate, dense)"},
    {.name = "rtx-titan",
     .marketing = "NVIDIA TITAN RTX",
     .mem_bytes = 24 * GiB,
     .hbm_Bps = 672 * GBps,
     .fp32_flops = 16.3 * TF,
     .tf32_flops = 0,
     .fp16_flops = 130 * TF,
     .bf16_flops = 0,
     .fp8_flops = 0,
     .fp4_flops = 0,
     .fused_attn = false,
     .sm_count = 72,
     .source = "NVIDIA TITAN RTX specifications / Turing architecture whitepaper (130 TFLOPS tensor, FP32 accumulate)"},
    {.name = "l4",
     .marketing = "NVIDIA L4",
     .mem_bytes = 24 * GiB,
     .hbm_Bps = 300 * GBps,
     .fp32_flops = 30.3 * TF,
     .tf32_flops = 60 * TF,
     .fp16_flops = 121 * TF,
     .bf16_flops = 121 * TF,
     .fp8_flops = 242.5 * TF,
     .fp4_flops = 0,
     .fused_attn = true,
     .sm_count = 58,
     .source = "NVIDIA L4 Tensor Core GPU datasheet (sparse figures halved)"},
};

#define N_CATALOG ((int)(sizeof k_catalog / sizeof k_catalog[0]))

int ps_gpu_catalog_count(void) { return N_CATALOG; }

const ps_gpu *ps_gpu_catalog_at(int i) { return (i >= 0 && i < N_CATALOG) ? &k_catalog[i] : NULL; }

ps_status ps_gpu_lookup(const char *name, ps_gpu *out)
{
    if (!name) return PS_FAIL(PS_ERR_INPUT, "no GPU kind given");
    for (int i = 0; i < N_CATALOG; i++) {
        if (strcmp(k_catalog[i].name, name) == 0) {
            *out = k_catalog[i];
            return PS_OK;
        }
    }
    /* The list is short, so the whole of it fits in the message; a near miss also gets a suggestion. */
    char known[512] = "";
    const char *best = NULL;
    int best_d = 1000;
    for (int i = 0; i < N_CATALOG; i++) {
        ps_strcatf(known, sizeof known, "%s%s", i ? ", " : "", k_catalog[i].name);
        /* "a100" is better answered by what it starts ("a100-40g") than by the nearest spelling. */
        int d = strncmp(k_catalog[i].name, name, strlen(name)) == 0 ? 0 : ps_edit_distance(name, k_catalog[i].name);
        if (d < best_d) {
            best_d = d;
            best = k_catalog[i].name;
        }
    }
    if (best && best_d <= 3)
        return PS_FAIL(PS_ERR_INPUT, "unknown GPU kind '%s' (did you mean '%s'?); known GPUs: %s", name, best, known);
    return PS_FAIL(PS_ERR_INPUT, "unknown GPU kind '%s'; known GPUs: %s", name, known);
}

double ps_gpu_peak(const ps_gpu *g, ps_gpu_precision prec)
{
    if (!g) return 0;
    switch (prec) {
    case PS_GPU_FP32: return g->fp32_flops;
    case PS_GPU_TF32: return g->tf32_flops;
    case PS_GPU_FP16: return g->fp16_flops;
    case PS_GPU_BF16: return g->bf16_flops;
    case PS_GPU_FP8: return g->fp8_flops;
    }
    return 0;
}

double ps_gpu_peak_flops(const ps_gpu *g, const char *dtype)
{
    static const struct {
        const char *name;
        ps_gpu_precision prec;
    } names[] = {{"fp32", PS_GPU_FP32},    {"float32", PS_GPU_FP32}, {"tf32", PS_GPU_TF32}, {"fp16", PS_GPU_FP16},
                 {"float16", PS_GPU_FP16}, {"half", PS_GPU_FP16},    {"bf16", PS_GPU_BF16}, {"bfloat16", PS_GPU_BF16},
                 {"fp8", PS_GPU_FP8}};
    if (!g || !dtype) return 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(dtype, names[i].name) == 0) return ps_gpu_peak(g, names[i].prec);
    return 0;
}

/* Device names as the CUDA runtime spells them. Only the exact board variant maps to an entry: an A100 PCIe or an
 * H100 PCIe has lower clocks and memory bandwidth than the SXM part in the catalog, and claiming the SXM figures
 * would make every plan on it optimistic. `avoid` rules out look-alike names ("RTX 3090 Ti", "H200 NVL", and the
 * "B200" inside "GB200", whose GPU runs at a higher power limit); a row without a key names a look-alike that is in
 * no entry (the "H200" inside "GH200"), so the name is matched by nothing. */
static const struct {
    const char *contains;
    const char *avoid;
    const char *key;
} k_device_names[] = {
    {"A100-SXM4-40GB", NULL, "a100-40g"},
    {"A100-SXM4-80GB", NULL, "a100-80g"},
    {"A800-SXM4-80GB", NULL, "a800-80g"},
    {"H100 80GB HBM3", NULL, "h100"},
    {"H100-SXM5-80GB", NULL, "h100"},
    {"GH200", NULL, NULL}, /* the Grace Hopper superchip's GPU: H100 compute with 96 or 144 GB, not an H200 */
    {"H200", "NVL", "h200"},
    {"GB200", NULL, "gb200"},
    {"B200", "GB200", "b200"},
    {"V100-SXM2-16GB", NULL, "v100-16g"},
    {"V100-SXM2-32GB", NULL, "v100-32g"},
    {"Tesla T4", NULL, "t4"},
    {"RTX 3090", "Ti", "rtx3090"},
    {"TITAN RTX", NULL, "rtx-titan"},
    {"NVIDIA L4", NULL, "l4"},
};

/* Case-insensitive strstr; the runtime's capitalisation has changed between driver generations ("Tesla", "NVIDIA"). */
static const char *find_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0) return hay;
    return NULL;
}

const char *ps_gpu_match_device(const char *device_name)
{
    if (!device_name) return NULL;
    for (size_t i = 0; i < sizeof k_device_names / sizeof k_device_names[0]; i++) {
        if (!find_ci(device_name, k_device_names[i].contains)) continue;
        if (k_device_names[i].avoid && find_ci(device_name, k_device_names[i].avoid)) continue;
        if (!k_device_names[i].key) return NULL; /* a look-alike of no entry */
        /* "NVIDIA L4" is a prefix of "NVIDIA L40": require the name to end there. */
        if (strcmp(k_device_names[i].key, "l4") == 0) {
            const char *p = find_ci(device_name, "NVIDIA L4");
            if (p[strlen("NVIDIA L4")] != '\0') continue;
        }
        return k_device_names[i].key;
    }
    return NULL;
}

/* The cost model's constants: one table holds each default with its unit and its source, so --help, the JSON output
 * and docs/costmodel.md all say the same thing, and any of them can be overridden by name. */
#include <stddef.h>
#include <string.h>

#include "ps_cost.h"

typedef struct {
    const char *name;
    size_t offset;
    double def;
    double lo, hi;
    const char *unit;
    const char *source;
} param_def;

#define P(field) offsetof(ps_cost_params, field)
static const param_def k_params[] = {
    {"gemm_eff", P(gemm_eff), 0, 0, 1.0, "fraction of dense peak (0: the GPU's measured value, else 0.80)",
     "0 = the GPU's own measured value where the catalog has one (H100 0.69, H200 0.68: bench_gemm_shapes, "
     "hw/gpu_catalog.c), else 0.80: math-bound cuBLAS GEMMs reach 80-90% of tensor peak (NVIDIA Deep Learning "
     "Performance Guide, 'Matrix Multiplication Background'), the low end since training kernels are not all ideal "
     "shapes"},
    {"hbm_eff", P(hbm_eff), 0.80, 0.01, 1.0, "fraction of nominal memory bandwidth",
     "streaming kernels reach ~80% of HBM bandwidth (NVIDIA Deep Learning Performance Guide, 'GPU Performance "
     "Background': memory-limited operations)"},
    {"kernel_launch_s", P(kernel_launch_s), 5e-6, 0, 1e-3, "s",
     "CUDA kernel launch and tail cost of a few microseconds (CUDA C Best Practices Guide); one per GEMM / fused op"},
    {"elementwise_passes", P(elementwise_passes), 2.0, 0, 20, "x stored activation bytes",
     "each stored activation is written once and read once by the non-GEMM ops of the forward pass (layer norm, "
     "softmax, GeLU, dropout, residual); backward touches them twice as often"},
    {"link_eff_nvlink", P(link_eff_nvlink), 0.77, 0.01, 1.0, "fraction of nominal link bandwidth",
     "nccl-tests all_reduce bus bandwidth ~230 GB/s of 300 GB/s on DGX A100 (NVIDIA NCCL performance notes)"},
    {"link_eff_pcie", P(link_eff_pcie), 0.80, 0.01, 1.0, "fraction of nominal link bandwidth",
     "PCIe x16 DMA reaches ~80% of its raw rate after protocol overhead (PCI-SIG 128b/130b + TLP headers)"},
    {"link_eff_ib", P(link_eff_ib), 0.90, 0.01, 1.0, "fraction of nominal link bandwidth",
     "InfiniBand HDR/NDR nccl-tests bus bandwidth ~90% of line rate (NVIDIA NCCL performance notes)"},
    {"link_eff_eth", P(link_eff_eth), 0.70, 0.01, 1.0, "fraction of nominal link bandwidth",
     "TCP sockets transport of NCCL reaches ~70% of Ethernet line rate (AMP Sec. 4.3 measured 'up to' rates)"},
    {"overlap_slowdown", P(overlap_slowdown), 1.3, 1.0, 3.0, "x",
     "computation and NCCL communication running at once slow each other by 1.3x (Galvatron-BMW Sec. V)"},
    {"reserve_bytes", P(reserve_bytes), 2.0 * 1024 * 1024 * 1024, 0, 1e12, "bytes",
     "CUDA context (~0.5 GiB), NCCL buffers and caching-allocator fragmentation; PyTorch memory docs: "
     "fragmentation commonly costs 5-10% of an 80 GB GPU's memory"},
    {"grad_reduce_bytes", P(grad_reduce_bytes), 4.0, 1, 8, "bytes per element",
     "Megatron-LM reduces gradients in fp32 by default with bf16 training (--accumulate-allreduce-grads-in-fp32); "
     "PyTorch DDP with autocast keeps fp32 gradients"},
    /* Corrections refitted from executed plans (psearch calibrate --from-measurements): 1 until a plan has run. */
    {"compute_scale", P(compute_scale), 1.0, 0.05, 20, "x predicted computation time",
     "1 = the model as derived above; psearch calibrate --from-measurements sets it to the median ratio of measured to "
     "predicted computation of the plans psearch exec ran (docs/exec.md)"},
    {"comm_scale", P(comm_scale), 1.0, 0.05, 20, "x predicted communication time",
     "1 = the model as derived above; psearch calibrate --from-measurements sets it to the median ratio of measured to "
     "predicted collective time (TP, ZeRO, DP; pipeline messages are timed apart) of the plans psearch exec ran "
     "(docs/exec.md)"},
    {"attn_fwd_eff", P(attn_fwd_eff), 0, 0, 1.0, "fraction of dense peak (0: the GPU generation's)",
     "0 = by GPU generation (cost/layer_cost.c fused_eff: FlashAttention-2 paper on A100, cuDNN SDPA measured on an "
     "H200 for Hopper, with sources); a value from a measurement of the cluster's fused attention kernel replaces it"},
    {"attn_bwd_eff", P(attn_bwd_eff), 0, 0, 1.0, "fraction of dense peak (0: the GPU generation's)",
     "0 = by GPU generation, as attn_fwd_eff; the backward runs 2.5x the forward's FLOPs (scores recomputed)"},
    /* GEMM efficiency by shape (docs/costmodel.md): the analytic GEMM executes whole output tiles in whole waves over
     * the SMs. */
    {"gemm_tile_m", P(gemm_tile_m), 128, 0, 4096, "elements (0 = no shape model)",
     "output tile rows of a cuBLAS/CUTLASS tensor-core GEMM: NVIDIA 'Matrix Multiplication Background User's Guide' "
     "(Typical Tile Dimensions in cuBLAS; Tile and Wave Quantization) lists 256x128 down to 64x64 tiles, cuBLAS "
     "picking smaller ones for smaller problems; CUTLASS's Hopper (SM90) and Blackwell (SM100) GEMM examples use "
     "128x128 and 128x256 CTA tiles; 128, the common dimension, so that mid-size GEMMs are not charged a big tile's "
     "padding"},
    {"gemm_tile_n", P(gemm_tile_n), 128, 0, 4096, "elements (0 = no shape model)",
     "output tile columns: 128, as gemm_tile_m (same sources); with 128x128 and 132 SMs, an H100/H200 GEMM of 133 "
     "tiles runs two waves"},
    /* Data-parallel gradient buckets (docs/costmodel.md, "Data-parallel overlap") */
    {"dp_bucket_elems", P(dp_bucket_elems), 4e7, 1e3, 1e11, "elements",
     "Megatron-core DistributedDataParallelConfig.bucket_size default: max(40000000, 1000000 x dp_size) parameters "
     "(megatron/core/distributed/distributed_data_parallel_config.py, 'larger DP sizes need larger buckets to ensure "
     "collectives do not become latency-bound'); DeepSpeed's reduce_bucket_size default is 5e8 elements "
     "(deepspeed/runtime/zero/config.py)"},
    {"dp_bucket_elems_per_rank", P(dp_bucket_elems_per_rank), 1e6, 0, 1e10, "elements per DP rank",
     "the 1000000 x dp_size term of Megatron-core's default bucket_size (as dp_bucket_elems)"},
    /* Mixture of experts (docs/costmodel.md, "Mixture of experts") */
    {"moe_imbalance", P(moe_imbalance), 1.25, 1.0, 64, "max/mean tokens per expert",
     "the busiest routed expert's tokens over the mean (1 + MaxVio, the imbalance measure of Wang et al. 2024, "
     "Auxiliary-Loss-Free Load Balancing, arXiv 2408.15664); 1.25 = the per-batch headroom MoE training "
     "provisions: Switch Transformer (Fedus et al. 2022, Table 1) trains at capacity factor 1.25, a provision, not "
     "a measured maximum; capped by a layer's own capacity_factor. At expert-parallel degree 1 it moves tokens "
     "between the experts of one GPU (their "
     "grouped GEMM's shapes), not the layer's total work"},
};
#undef P
#define N_PARAMS ((int)(sizeof k_params / sizeof k_params[0]))

static double *field(ps_cost_params *p, const param_def *d) { return (double *)((char *)p + d->offset); }

void ps_cost_params_default(ps_cost_params *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < N_PARAMS; i++) *field(p, &k_params[i]) = k_params[i].def;
}

ps_status ps_cost_params_set(ps_cost_params *p, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    char name[64], known[1024] = "";
    size_t n = eq ? (size_t)(eq - assignment) : strlen(assignment);
    if (!eq || n == 0 || n >= sizeof name)
        return PS_FAIL(PS_ERR_INPUT, "cost parameter '%s': expected NAME=VALUE", assignment);
    memcpy(name, assignment, n);
    name[n] = '\0';
    for (int i = 0; i < N_PARAMS; i++) {
        if (strcmp(name, k_params[i].name) != 0) continue;
        double v;
        if (!ps_parse_double(eq + 1, &v) || v < k_params[i].lo || v > k_params[i].hi)
            return PS_FAIL(PS_ERR_INPUT, "cost parameter %s must be a number in [%g, %g] %s (got '%s')", name,
                           k_params[i].lo, k_params[i].hi, k_params[i].unit, eq + 1);
        *field(p, &k_params[i]) = v;
        return PS_OK;
    }
    for (int i = 0; i < N_PARAMS; i++) ps_strcatf(known, sizeof known, "%s%s", i ? ", " : "", k_params[i].name);
    return PS_FAIL(PS_ERR_INPUT, "unknown cost parameter '%s' (known: %s)", name, known);
}

bool ps_cost_param_range(const char *name, double *lo, double *hi)
{
    for (int i = 0; i < N_PARAMS; i++)
        if (strcmp(name, k_params[i].name) == 0) {
            if (lo) *lo = k_params[i].lo;
            if (hi) *hi = k_params[i].hi;
            return true;
        }
    return false;
}

const char *ps_cost_param_name(int i, double *value, const char **unit, const char **source,
                               const ps_cost_params *p)
{
    if (i < 0 || i >= N_PARAMS) return NULL;
    if (value) *value = *(const double *)((const char *)p + k_params[i].offset);
    if (unit) *unit = k_params[i].unit;
    if (source) *source = k_params[i].source;
    return k_params[i].name;
}

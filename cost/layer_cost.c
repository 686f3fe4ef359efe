/* Time and memory of one layer under one strategy for one micro-batch. Compute is a roofline per GEMM (math-bound
 * at gemm_eff of the dense peak, or memory-bound when a dimension is small: AMP Sec. 3 notes that skinny GEMMs run
 * far below peak) plus memory-bound elementwise work; communication is alpha-beta over the placement; overlap of
 * data-parallel traffic with computation pays Galvatron-BMW's slowdown (Sec. V). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ps_cost.h"

/* The devices a layer runs on: the slowest GPU of the stage sets the pace (stragglers, heterogeneous clusters). */
typedef struct dev_speed_s {
    double peak;  /* FLOP/s of the training dtype */
    double gemm_eff; /* fraction of peak the GEMMs reach on the GPU that sets the peak (ps_cost_gemm_eff) */
    double stream; /* bytes/s a streaming kernel reaches: hbm x hbm_eff, or the measured bandwidth */
    int sms;      /* SMs of the GPU that sets the peak (the GEMM shape model's waves); 0 = unknown */
    int dbdev;    /* the device kind of p->db every GPU of the stage is, or -1 (analytic) */
    ps_dtype dtype;
    bool fused_ok;  /* every GPU of the stage has a fused attention kernel */
    double attn_fwd, attn_bwd; /* fraction of the peak a fused attention kernel reaches (the stage's lowest) */
    /* FP8 training (Transformer Engine's recipe): the same stage in BF16, for everything but the blocks' linear
     * GEMMs (attention core, embeddings, heads, as Megatron-LM keeps its output layer in BF16); NULL otherwise */
    const struct dev_speed_s *bf16;
} dev_speed;

/* The device view a GEMM of layer l runs at: FP8 only for the linear layers of blocks. */
static const dev_speed *gemm_dev(const dev_speed *d, const ps_layer *l, const ps_gemm_shape *x)
{
    if (!d->bf16) return d;
    bool block = ps_layer_has_attention(l->kind);
    return block && !x->attn ? d : (const dev_speed *)d->bf16;
}

/* Fused attention kernels' share of the dense peak, by GPU generation (ps_cost_params attn_fwd_eff, attn_bwd_eff
 * replace them when set). The papers give the best shapes (long sequences, head dim 128 or more); training shapes of
 * 2k-8k tokens sit lower, so each figure is taken below the paper's maximum.
 * - Hopper (H100, H200): measured by psearch's bench/gpu/attn_bench.py on an H200 (2026-11-27, PyTorch 2.11 with
 *   cuDNN 9.19 scaled-dot-product attention, the kernel Transformer Engine picks on Hopper; BF16, head dim 128,
 *   causal, 2k-16k tokens, 16 and 32 heads; tests/data/gpu-check/h200-2026-11-27/attn.json): medians 0.55 of the
 *   dense peak forward and 0.50 backward, executed FLOPs. FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608)
 *   reports up to 0.75 forward at its best shapes; PyTorch's FlashAttention-2 build ran at 0.28-0.37 there
 *   (ps_cost_fa2_eff: the frameworks that run it).
 *   Forward 0.55, backward 0.50.
 * - Blackwell (B200, GB200: the GPUs with FP4): no published paper figure; Hopper's fractions are assumed.
 * - Every other GPU with a fused kernel (Ampere, Ada, custom GPUs): FlashAttention-2 (Dao 2023, arXiv 2307.08691),
 *   abstract: "reaching 50-73% of the theoretical maximum FLOPs/s on A100", the forward at the top of that range
 *   and the backward at its bottom: 0.70 and 0.50. */
static void fused_eff(const ps_cost_params *p, const ps_gpu *g, double *fwd, double *bwd)
{
    bool hopper = strcmp(g->name, "h100") == 0 || strcmp(g->name, "h200") == 0;
    bool blackwell = g->fp4_flops > 0;
    *fwd = hopper || blackwell ? 0.55 : 0.70;
    *bwd = 0.50;
    if (p->attn_fwd_eff > 0) *fwd = p->attn_fwd_eff;
    if (p->attn_bwd_eff > 0) *bwd = p->attn_bwd_eff;
}

void ps_cost_fa2_eff(const ps_gpu *g, double *fwd, double *bwd)
{
    /* FlashAttention-2 has no Hopper kernel (no wgmma or TMA): FlashAttention-3 (Shah et al. 2024, arXiv
     * 2407.08608, abstract) was written because it reaches "only 35% utilization on the H100 GPU". The same H200
     * run as fused_eff's Hopper figures timed PyTorch 2.11's flash backend (its FlashAttention-2 build) on the same
     * shapes: causal medians 0.32 forward and 0.28 backward of the dense peak (8 shapes each, rows "backend":
     * "flash", "causal": true of tests/data/gpu-check/h200-2026-11-27/attn.json). Blackwell: Hopper's figures
     * assumed, as in fused_eff. Elsewhere FlashAttention-2 is the default kernel already. */
    ps_cost_params d;
    ps_cost_params_default(&d);
    fused_eff(&d, g, fwd, bwd);
    if (strcmp(g->name, "h100") == 0 || strcmp(g->name, "h200") == 0 || g->fp4_flops > 0) {
        *fwd = 0.32;
        *bwd = 0.28;
    }
}

ps_attn ps_cost_attn(const ps_cluster *c, int64_t first, int64_t n, ps_attn a)
{
    if (a != PS_ATTN_AUTO) return a;
    bool ok = n > 0;
    const int64_t end = first + n;
    for (int gi = n > 0 ? ps_cluster_group_index(c, first) : -1;
         gi >= 0 && gi < c->n_groups && c->groups[gi].first_gpu < end; gi++)
        if (c->groups[gi].gpus_per_node > 0 && !c->groups[gi].gpu.fused_attn) ok = false;
    return ok ? PS_ATTN_FUSED : PS_ATTN_UNFUSED;
}

double ps_cost_stream_Bps(const ps_cost_params *p, const ps_gpu *g)
{
    if (p->db) {
        int k = ps_costdb_model_device(p->db, g->name);
        double b = k >= 0 ? ps_costdb_model_mem_Bps(p->db, k) : -1;
        if (b > 0) return b;
    }
    return g->hbm_Bps * p->hbm_eff;
}

double ps_cost_peak_flops(const ps_gpu *g, ps_dtype dtype)
{
    switch (dtype) {
    case PS_DTYPE_FP32: return ps_gpu_peak(g, PS_GPU_FP32);
    case PS_DTYPE_FP16: return ps_gpu_peak(g, PS_GPU_FP16);
    case PS_DTYPE_BF16: return ps_gpu_peak(g, PS_GPU_BF16);
    case PS_DTYPE_FP8: return ps_gpu_peak(g, PS_GPU_FP8);
    }
    return 0;
}

/* The stage's GPUs [first, first + n) group by group: they share figures within a node group. The stream bandwidth
 * is the measured one only when the database measured the one device kind of the whole stage; a stage mixing kinds
 * streams at its slowest nominal bandwidth (unlike ps_cost_stream_Bps, which answers for one device). */
static ps_status stage_speed(const ps_cost_params *p, const ps_cluster *c, ps_dtype dtype, int64_t first, int64_t n,
                             dev_speed *out)
{
    out->peak = INFINITY;
    out->stream = INFINITY;
    out->sms = 0;
    out->gemm_eff = PS_GEMM_EFF_GENERIC;
    out->dbdev = -1;
    out->bf16 = NULL;
    out->fused_ok = n > 0;
    out->attn_fwd = out->attn_bwd = 1;
    const char *dn = ps_dtype_name(dtype);
    out->dtype = dtype;
    double hbm = INFINITY;
    int kind = -2; /* -2: none seen yet; -1: some GPU the database did not measure, or two kinds */
    const int64_t end = first + n;
    for (int gi = n > 0 ? ps_cluster_group_index(c, first) : -1;
         gi >= 0 && gi < c->n_groups && c->groups[gi].first_gpu < end; gi++) {
        const ps_node_group *ng = &c->groups[gi];
        if (ng->gpus_per_node == 0) continue; /* CPU-only nodes between GPU groups hold none of the stage */
        if (p->db) {
            int k = ps_costdb_model_device(p->db, ng->gpu.name);
            kind = (kind == -2 || kind == k) ? k : -1;
        }
        double pk = ps_cost_peak_flops(&ng->gpu, dtype);
        if (!(pk > 0))
            return PS_FAIL(PS_ERR_INPUT, "GPU %s of cluster %s has no %s tensor peak; choose another --dtype",
                           ng->gpu.name, c->name, dn);
        if (pk < out->peak) {
            out->peak = pk;
            out->sms = ng->gpu.sm_count;
            out->gemm_eff = ps_cost_gemm_eff(p, &ng->gpu);
        }
        if (!ng->gpu.fused_attn) out->fused_ok = false;
        double ef, eb;
        fused_eff(p, &ng->gpu, &ef, &eb);
        out->attn_fwd = fmin(out->attn_fwd, ef);
        out->attn_bwd = fmin(out->attn_bwd, eb);
        if (ng->gpu.hbm_Bps < hbm) hbm = ng->gpu.hbm_Bps;
    }
    if (n > 0 && (first < 0 || end > c->n_gpus))
        return PS_FAIL(PS_ERR_INPUT, "GPU %lld is outside cluster %s (%lld GPUs)",
                       (long long)(first < 0 || first >= c->n_gpus ? first : c->n_gpus), c->name,
                       (long long)c->n_gpus);
    out->stream = hbm * p->hbm_eff;
    if (p->db && kind >= 0) {
        out->dbdev = kind;
        double b = ps_costdb_model_mem_Bps(p->db, kind);
        if (b > 0) out->stream = b;
    }
    return PS_OK;
}

/* GEMM efficiency by shape (docs/costmodel.md): a tensor-core GEMM computes its output in tiles of tile_m x tile_n,
 * one thread block per tile, at most one block per SM at a time for the large-tile kernels cuBLAS picks, so it runs
 * whole tiles (the last row and column of tiles padded: tile quantization) in whole waves of sm_count tiles (the
 * last wave partly idle: wave quantization), NVIDIA's "Matrix Multiplication Background User's Guide", Sec. 3. The
 * k dimension is not padded: the K tile (64 for 16-bit Hopper kernels) pads at most 63 of k, under 2% from k = 4096
 * on, and transformer k values (hidden, head dim, hidden / tp) are multiples of 64. A batched call's GEMMs share the
 * waves: their tiles add up before they are divided over the SMs. */
/* ceil(x) for 0 <= x: through an integer conversion below 2^52, where every double is exact as an int64_t. The
 * search calls the GEMM time millions of times, and without SSE4.1 ceil is a libm call: the conversion kept the
 * valgrind run of the search (tests/cli/valgrind.sh) within its time limit. */
static inline double ceil_pos(double x)
{
    if (!(x < 4503599627370496.0)) return ceil(x);
    double f = (double)(int64_t)x;
    return f < x ? f + 1 : f;
}

double ps_cost_gemm_eff(const ps_cost_params *p, const ps_gpu *g)
{
    if (p->gemm_eff > 0) return p->gemm_eff;
    return g && g->gemm_eff > 0 ? g->gemm_eff : PS_GEMM_EFF_GENERIC;
}

double ps_cost_gemm_work(const ps_cost_params *p, int sm_count, double m, double n, double k, double count)
{
    double useful = 2 * m * n * k * count;
    if (sm_count <= 0 || !(p->gemm_tile_m > 0) || !(p->gemm_tile_n > 0)) return useful;
    double tiles = ceil_pos(m / p->gemm_tile_m) * ceil_pos(n / p->gemm_tile_n) * count;
    double waves = ceil_pos(tiles / sm_count);
    /* Never below the useful work (a fractional tile size or count could make it so, and a GEMM is no faster than
     * its arithmetic). */
    return fmax(useful, waves * sm_count * 2 * p->gemm_tile_m * p->gemm_tile_n * k);
}

/* The analytic roofline of one GEMM shape on a device of `peak` FLOP/s, `stream` bytes/s and `sms` SMs. */
static double gemm_analytic(const ps_cost_params *p, double peak, double eff, double stream, int sms, double m,
                            double n, double k, double count, double elt)
{
    if (m <= 0 || n <= 0 || k <= 0 || count <= 0 || !(peak > 0)) return 0;
    double flops = 2 * m * n * k, bytes = elt * (m * k + k * n + m * n);
    if (sms <= 0 || !(p->gemm_tile_m > 0) || !(p->gemm_tile_n > 0)) {
        /* No shape model: every GEMM at gemm_eff of the peak, in exactly the arithmetic it always had, so that
         * plans and fidelity figures without it stay bit for bit what they were. */
        double t = fmax(flops / (peak * eff), bytes / stream);
        return count * (t + p->kernel_launch_s);
    }
    double t = fmax(ps_cost_gemm_work(p, sms, m, n, k, count) / (peak * eff), count * bytes / stream);
    return t + count * p->kernel_launch_s;
}

double ps_cost_gemm_time(const ps_cost_params *p, const ps_gpu *g, ps_dtype dtype, double m, double n, double k,
                         double count)
{
    return gemm_analytic(p, ps_cost_peak_flops(g, dtype), ps_cost_gemm_eff(p, g), g->hbm_Bps * p->hbm_eff,
                         g->sm_count, m, n, k, count,
                         ps_dtype_bytes(dtype));
}

/* One GEMM (m x k) . (k x n), `count` times. */
static double gemm_time(const ps_cost_params *p, const dev_speed *d, double m, double n, double k, double count,
                        double elt)
{
    if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
    if (d->dbdev >= 0) {
        /* Measured: the rate the device reached on calls of this many FLOPs (a batched call counts all of its
         * GEMMs, as the calibration timed them), never faster than streaming the operands once; the launch cost is
         * inside the measured times. */
        double flops = 2 * m * n * k, bytes = elt * (m * k + k * n + m * n);
        double F = flops * count, rate = ps_costdb_model_gemm_rate(p->db, d->dbdev, d->dtype, F);
        if (rate > 0) return fmax(F / rate, count * bytes / d->stream);
    }
    return gemm_analytic(p, d->peak, d->gemm_eff, d->stream, d->sms, m, n, k, count, elt);
}

void ps_layer_gemm_shapes(const ps_layer *l, int64_t mbs, int tp, ps_layer_gemms *out)
{
    ps_layer_gemm_shapes_cp(l, mbs, tp, 1, PS_CP_RING, out);
}

static void shapes(const ps_layer *l, int64_t mbs, int tp, int cp, ps_cp_comm kind, int ep, int etp,
                   ps_layer_gemms *out);

void ps_layer_gemm_shapes_cp(const ps_layer *l, int64_t mbs, int tp, int cp, ps_cp_comm kind, ps_layer_gemms *out)
{
    shapes(l, mbs, tp, cp, kind, 1, tp, out);
}

void ps_layer_gemm_shapes_s(const ps_layer *l, int64_t mbs, const ps_strategy *s, ps_layer_gemms *out)
{
    shapes(l, mbs, s->tp, ps_strategy_cp(s), s->cp_comm, ps_strategy_ep(s), ps_strategy_etp(s), out);
}

static void shapes(const ps_layer *l, int64_t mbs, int tp, int cp, ps_cp_comm kind, int ep, int etp,
                   ps_layer_gemms *out)
{
    memset(out, 0, sizeof *out);
    /* the MoE block on the expert grid (ps_strategy_ep_folded) */
    const bool folded = ps_layer_is_moe(l) && (ep > 1 || etp != tp);
    /* cpd: the token share of one GPU of the CP group; the attention core's queries (ring) or heads (a2a) split */
    double cpd = cp > 1 ? cp : 1, q_div = kind != PS_CP_A2A ? cpd : 1, head_div = kind == PS_CP_A2A ? cpd : 1;
    double T = (double)mbs * (double)l->seq / cpd, h = (double)l->hidden, t = tp;
    double Q = (double)(l->heads * l->head_dim), K = (double)(l->kv_heads * l->head_dim), F = (double)l->ffn_hidden;
    bool gated = l->act == PS_ACT_SWIGLU || l->act == PS_ACT_GEGLU;
    int blk = 0; /* the forward block the next GEMMs belong to (ps_gemm_shape.blk) */
    double experts = 0; /* ps_gemm_shape.experts of the next GEMMs */
    int gep = 0;        /* ps_gemm_shape.ep of the next GEMMs */
#define GEMM(M, N, K_, cnt, at)                                                                                        \
    out->g[out->n++] = (ps_gemm_shape) {                                                                               \
        .m = (M), .n = (N), .k = (K_), .count = (cnt), .attn = (at), .blk = blk, .experts = experts, .ep = gep         \
    }
    switch (l->kind) {
    case PS_LAYER_ENCODER:
    case PS_LAYER_DECODER:
    case PS_LAYER_DECODER_XATTN: {
        double ctx = (l->attn_window > 0 && l->attn_window < l->seq) ? (double)l->attn_window : (double)l->seq;
        double s = (double)l->seq / q_div, hd = (double)l->head_dim;
        bool xattn = l->kind == PS_LAYER_DECODER_XATTN;
        double vd = hd; /* the width of V and of the weighted sum per head */
        /* blocks (Megatron order, each ending in a TP collective): self-attention, [cross-attention,] MLP */
        if (ps_layer_is_mla(l)) {
            /* MLA as Megatron-core splits it: the down projections (q_a and kv_a, one GEMM over the same input) whole
             * on every TP rank, the up projections (q_b, kv_b) and the output projection split over the heads */
            double H = (double)l->heads, ql = (double)l->q_lora_rank, kl = (double)l->kv_lora_rank;
            vd = (double)l->v_head_dim;
            GEMM(T, ql + kl + (double)l->qk_rope_head_dim, h, 1, false);
            if (ql > 0)
                GEMM(T, Q / t, ql, 1, false);
            else
                GEMM(T, Q / t, h, 1, false);
            GEMM(T, H * ((double)l->qk_nope_head_dim + vd) / t, kl, 1, false);
            GEMM(T, h, H * vd / t, 1, false);
        } else {
            GEMM(T, (Q + 2 * K) / t, h, 1, false);
            GEMM(T, h, Q / t, 1, false);
        }
        blk = xattn ? 2 : 1;
        if (ps_layer_is_moe(l)) {
            /* the router (whole on every TP rank); the routed experts as one grouped GEMM of n_experts GEMMs, each
             * over its mean share of the tokens, T x top_k / n_experts (a capacity factor below 1 drops the rest),
             * split over TP like the dense MLP (expert-TP = TP at expert-parallel degree 1); the shared experts as
             * one dense MLP of their summed width */
            double E = (double)l->n_experts, fe = (double)l->expert_ffn, cf = l->capacity_factor;
            double me = T * (double)l->top_k / E * (cf > 0 && cf < 1 ? cf : 1.0);
            double fs = (double)l->n_shared_experts * (double)l->shared_ffn;
            if (folded) {
                /* the expert grid: each GPU routes its own T / tp tokens (sequence parallel), and its n_experts / ep
                 * experts, split over etp, take the tokens of ep x etp GPUs routed to them: on the mean
                 * T / tp x top_k x ep x etp / n_experts each (Megatron-core's MoEAlltoAllTokenDispatcher: all-to-all
                 * over ep, then all-gather over the expert-TP group) */
                double El = E / ep;
                me = me / t * ep * etp;
                GEMM(T / t, E, h, 1, false);
                experts = El;
                gep = ep;
                GEMM(me, fe / etp, h, El * (gated ? 2 : 1), false);
                GEMM(me, h, fe / etp, El, false);
                gep = 0;
            } else {
                GEMM(T, E, h, 1, false);
                experts = E;
                GEMM(me, fe / t, h, E * (gated ? 2 : 1), false);
                GEMM(me, h, fe / t, E, false);
            }
            experts = 0;
            if (fs > 0) {
                GEMM(T, fs / t, h, gated ? 2 : 1, false);
                GEMM(T, h, fs / t, 1, false);
            }
        } else {
            GEMM(T, F / t, h, gated ? 2 : 1, false);
            GEMM(T, h, F / t, 1, false);
        }
        blk = 0;
        /* scores Q.K^T and probabilities . V: one batched GEMM each over (micro-batch x local heads) */
        double b = (double)mbs * ((double)l->heads / t) / head_div;
        GEMM(s, ctx, hd, b, true);
        out->g[out->n - 1].scores = true;
        GEMM(s, vd, ctx, b, true);
        out->tp_colls = 2;
        if (xattn) {
            double kvT = (double)mbs * (double)l->kv_seq, kv = (double)l->kv_seq;
            blk = 1;
            GEMM(T, Q / t, h, 1, false);
            GEMM(kvT, 2 * K / t, h, 1, false);
            GEMM(T, h, Q / t, 1, false);
            GEMM(s, kv, hd, b, true);
            out->g[out->n - 1].scores = true;
            GEMM(s, hd, kv, b, true);
            out->tp_colls = 3;
        }
        /* on the expert grid, the MLP block's TP collective is its shared experts' alone (the dispatch takes the
         * sequence-parallel tokens as they are) */
        if (folded && !(l->n_shared_experts > 0 && t > 1)) out->tp_colls--;
        out->bwd_tp_colls = out->tp_colls;
        break;
    }
    case PS_LAYER_LM_HEAD:
        GEMM(T, (double)l->vocab / t, h, 1, false);
        out->bwd_tp_colls = 1; /* the input gradient of a vocabulary-parallel projection is summed over tp */
        break;
    case PS_LAYER_CLS_HEAD:
        if (l->pooler) GEMM((double)mbs, h, h, 1, false);
        GEMM((double)mbs, (double)l->n_classes, h, 1, false);
        break;
    case PS_LAYER_PATCH_EMBED: GEMM(T, h, (double)(l->channels * l->patch * l->patch), 1, false); break;
    case PS_LAYER_MERGE: GEMM(T, (double)l->out_hidden, 4 * h, 1, false); break;
    case PS_LAYER_EMBED:
        out->tp_colls = 1; /* vocabulary-parallel lookup: partial rows summed over tp */
        break;
    case PS_LAYER_KIND_COUNT: break;
    }
#undef GEMM
}

double ps_cost_ep_busy(const ps_cost_params *p, const ps_layer *l)
{
    double cf = l->capacity_factor;
    /* a capacity factor caps the busiest expert at cf x its even share; dropless (0) does not */
    double b = fmin(p->moe_imbalance, cf > 0 ? fmax(cf, 1.0) : INFINITY);
    return b > 1 ? b : 1;
}

double ps_cost_ep_rank_load(const ps_cost_params *p, const ps_layer *l, double local_experts)
{
    if (!(local_experts >= 1)) return 1;
    return (local_experts - 1 + ps_cost_ep_busy(p, l)) / local_experts;
}

/* A weight GEMM of a layer's list, timed. Routed experts (x->experts > 0) run as one grouped GEMM (Megatron-core's
 * TEGroupedMLP: one kernel for every expert's matrix, their tiles sharing the waves over the SMs) of n_experts GEMMs,
 * the mean tokens each in the list; the time puts moe_imbalance x the mean on the busiest expert (no more than the
 * layer's capacity, cf x the even share, when it has one) and spreads what is left over the others: the tokens and
 * FLOPs stay, only the tiles the GPU runs them in change. A cost database's measured rate is per FLOP, which the
 * imbalance leaves as it is. */
static double weight_gemm_time(const ps_cost_params *p, const dev_speed *d, const ps_layer *l, const ps_gemm_shape *x,
                               double elt)
{
    double E = x->experts;
    /* expert parallelism: the slowest GPU of the ep group holds the busiest expert, its other experts at the mean */
    double load = x->ep > 1 ? ps_cost_ep_rank_load(p, l, E) : 1;
    if (!(E > 0) || d->dbdev >= 0) return load * gemm_time(p, d, x->m, x->n, x->k, x->count, elt);
    if (x->m <= 0 || x->n <= 0 || x->k <= 0 || x->count <= 0 || !(d->peak > 0)) return 0;
    double per = x->count / E; /* GEMMs per expert (2 for a gated first GEMM: gate and up) */
    double cf = l->capacity_factor, even = cf > 0 && cf < 1 ? x->m / cf : x->m; /* the share before drops */
    double busy = x->m, rest = x->m;
    if (x->ep > 1) {
        busy = x->m * (1 + (load - 1) * E);
    } else if (E > 1 && p->moe_imbalance > 1) {
        busy = fmin(fmin(p->moe_imbalance * even, cf > 0 ? cf * even : INFINITY), E * x->m);
        if (busy > x->m)
            rest = (E * x->m - busy) / (E - 1);
        else
            busy = x->m; /* capped at the even share */
    }
    double useful = 2 * x->m * x->n * x->k * x->count * load,
           bytes = elt * x->count * (x->m * load * x->k + x->k * x->n + x->m * load * x->n);
    double work = useful;
    if (d->sms > 0 && p->gemm_tile_m > 0 && p->gemm_tile_n > 0) {
        double tiles = (ceil_pos(busy / p->gemm_tile_m) * per + ceil_pos(rest / p->gemm_tile_m) * per * (E - 1)) *
                       ceil_pos(x->n / p->gemm_tile_n);
        double waves = ceil_pos(tiles / d->sms);
        work = fmax(useful, waves * d->sms * 2 * p->gemm_tile_m * p->gemm_tile_n * x->k);
    }
    return fmax(work / (d->peak * d->gemm_eff), bytes / d->stream) + per * p->kernel_launch_s;
}

/* The backward FLOPs of one attention product whose forward runs f FLOPs: the scores product or the weighted sum,
 * as ps_attn_bwd_flops counts each. */
static double product_bwd_flops(ps_attn a, const ps_gemm_shape *x, double f)
{
    return x->scores ? ps_attn_bwd_flops(a, f, 0) : ps_attn_bwd_flops(a, 0, f);
}

/* The attention core's share of GEMM j of a layer run by kernel `a`, `times` forward-equivalents of it (1: the
 * forward, 2: the backward, 3: both, as ps_layer_ov_pass counts them), on the stage's slowest GPU [s]. Unfused: the
 * GEMM itself, `times` times. Fused: the kernel's forward (odd times) and backward (times / 2) over the GEMM's FLOPs as
 * executed (causal tiles skipped) at the kernel's own efficiency, never faster than reading Q, K, V and writing the
 * output once (the backward twice that). */
static double attn_time(const ps_cost_params *p, const dev_speed *d, const ps_layer *l, const ps_gemm_shape *x,
                        ps_attn a, int times, double elt)
{
    if (times <= 0) return 0;
    if (a != PS_ATTN_FUSED) return times * gemm_time(p, d, x->m, x->n, x->k, x->count, elt);
    /* the self-attention pair is block 0; cross-attention's keys are the encoder's, all attended */
    double keys = x->blk == 0 ? ps_layer_attn_keys(l, PS_ATTN_FUSED) / ps_layer_attn_keys(l, PS_ATTN_UNFUSED) : 1;
    double flops = 2 * x->m * x->n * x->k * x->count * keys;
    /* one of the pair's two GEMMs (scores: s x ctx over hd; weighted sum: s x hd over ctx), so half of the traffic
     * of Q, K, V and the output: (s + ctx) x hd per head */
    double hd = x->scores ? x->k : x->n, ctx = x->scores ? x->n : x->k;
    double io = elt * x->count * (x->m + ctx) * hd;
    /* Timed by the cost database on this device (calibrate's attn rows, the kernel exec runs): the rate at the
     * kernel's FLOPs per call (both GEMMs of the pair: twice this one's) and head width, launches included. */
    bool timed = d->dbdev >= 0 && p->db;
    double t = 0;
    if (times % 2) {
        double r = timed ? ps_costdb_model_attn_rate(p->db, d->dbdev, d->dtype, false, (int64_t)hd, 2 * flops) : -1;
        t += r > 0 ? flops / r : fmax(flops / (d->peak * d->attn_fwd), io / d->stream) + p->kernel_launch_s / 2;
    }
    if (times >= 2) {
        /* this product's share of the backward (3x for the scores, 2x for the weighted sum); the rate is looked up
         * at the call's FLOPs, its two products taken at this one's size */
        double f = product_bwd_flops(PS_ATTN_FUSED, x, flops);
        double call = ps_attn_bwd_flops(PS_ATTN_FUSED, flops, flops);
        double r = timed ? ps_costdb_model_attn_rate(p->db, d->dbdev, d->dtype, true, (int64_t)hd, call) : -1;
        double one = r > 0 ? f / r : fmax(f / (d->peak * d->attn_bwd), 2 * io / d->stream) + p->kernel_launch_s / 2;
        t += (times / 2) * one;
    }
    return t;
}

typedef struct {
    double gemm;   /* weight GEMMs of the forward pass (backward: the same again for B and again for W) */
    double attn;   /* the attention core of the forward pass (score GEMMs or the fused kernel) */
    double attn_bwd; /* its backward (unfused: twice the GEMMs; fused: the kernel's backward) */
    double flops;  /* forward FLOPs on this GPU, as the model counts them (attention unmasked) */
    double attn_flops; /* the part of flops in the attention score GEMMs (what selective recompute repeats) */
    double attn_exec;  /* the attention FLOPs the kernel executes in the forward (fused: causal tiles skipped) */
    double attn_exec_bwd; /* and in the backward (ps_attn_bwd_flops of each product) */
    int tp_colls;  /* TP collectives of the forward pass (the backward has as many) */
    int bwd_tp_colls;
} fwd_work;

/* The GEMMs of a layer on one GPU of a tp-way group, timed. */
static void layer_work(const ps_cost_params *p, const dev_speed *d, const ps_layer *l, int64_t mbs,
                       const ps_strategy *s, fwd_work *w)
{
    memset(w, 0, sizeof *w);
    ps_layer_gemms g;
    ps_attn a = s->attn;
    ps_layer_gemm_shapes_s(l, mbs, s, &g);
    double keys = ps_layer_attn_keys(l, a) / ps_layer_attn_keys(l, PS_ATTN_UNFUSED);
    for (int i = 0; i < g.n; i++) {
        const ps_gemm_shape *x = &g.g[i];
        double f = 2.0 * x->m * x->n * x->k * x->count;
        const dev_speed *dd = gemm_dev(d, l, x);
        double elt = ps_dtype_bytes(dd->dtype);
        if (x->attn) {
            w->attn += attn_time(p, dd, l, x, a, 1, elt);
            w->attn_bwd += attn_time(p, dd, l, x, a, 2, elt);
            w->attn_flops += f;
            double fe = x->blk == 0 ? f * keys : f;
            w->attn_exec += fe;
            w->attn_exec_bwd += product_bwd_flops(a, x, fe);
        } else {
            w->gemm += weight_gemm_time(p, dd, l, x, elt);
        }
        w->flops += f;
    }
    w->tp_colls = g.tp_colls;
    w->bwd_tp_colls = g.bwd_tp_colls;
}

double ps_cost_overlapped(const ps_cost_params *p, double comp, double comm)
{
    double lo = fmin(comp, comm), hi = fmax(comp, comm);
    return hi + (p->overlap_slowdown - 1) * lo;
}

double ps_cost_bucket_overlap(const ps_cost_params *p, int n, const double *compute_after_ready, const double *comm)
{
    if (n <= 0) return 0;
    /* Closed form bucket by bucket: `t` is when the communication stream is free, `done` the computation finished
     * by then (seconds of computation alone), time 0 at bucket 0's readiness. A bucket whose readiness the
     * computation has not reached waits for it, the computation running alone meanwhile; then its collective and
     * the remaining computation run together (both slowed) until one ends, the other alone after. */
    const double total = compute_after_ready[0], s = p->overlap_slowdown;
    double t = 0, done = 0;
    for (int i = 0; i < n; i++) {
        double ready = total - compute_after_ready[i];
        if (done < ready) {
            t += ready - done;
            done = ready;
        }
        double left = total - done, c = comm[i];
        if (left >= c) {
            t += c * s;
            done += c;
        } else {
            t += left * s + (c - left);
            done = total;
        }
    }
    double end = t + (total - done);
    return end - total > 0 ? end - total : 0;
}

double ps_cost_prefetch(const ps_cost_params *p, int n, const double *comp, const double *comm)
{
    double t = comm[0] + comm[n + 1];
    for (int k = 0; k < n; k++) t += ps_cost_overlapped(p, comp[k], comm[k + 1]);
    return t;
}

static const char *const k_cp_names[PS_CP_COMM_COUNT] = {"ring", "a2a", "allgather"};

const char *ps_cp_comm_name(ps_cp_comm k) { return (int)k >= 0 && k < PS_CP_COMM_COUNT ? k_cp_names[k] : "?"; }

ps_status ps_cp_comm_parse(const char *s, ps_cp_comm *k)
{
    for (int i = 0; i < PS_CP_COMM_COUNT; i++)
        if (strcmp(s, k_cp_names[i]) == 0) {
            *k = (ps_cp_comm)i;
            return PS_OK;
        }
    if (strcmp(s, "p2p") == 0) { /* Megatron-core's name of the ring */
        *k = PS_CP_RING;
        return PS_OK;
    }
    return PS_FAIL(PS_ERR_INPUT, "unknown context-parallel communication '%s' (known: ring (or p2p), a2a, allgather)",
                   s);
}

/* The reason of a refusal into why[n] (ps_cost_cp_ok, ps_cost_ep_ok): not formatted at all when n is 0 */
#define WHY(...) ((n) ? (void)snprintf(why, n, __VA_ARGS__) : (void)0)

bool ps_cost_cp_ok(const ps_layer *l, const ps_strategy *s, char *why, size_t n)
{
    int cp = ps_strategy_cp(s);
    /* the reason is formatted only for a caller that reads it: the search asks millions of times */
    char dummy[1];
    if (!why) {
        why = dummy;
        n = 0;
    }
    if (n) why[0] = '\0';
    if (cp <= 1) return true;
    const char *kn = ps_cp_comm_name(s->cp_comm);
    if (l->kind == PS_LAYER_DECODER_XATTN) {
        WHY("context parallelism does not split cross-attention's encoder tokens (cp %d)", cp);
        return false;
    }
    if (ps_overlap_is_oases(s->overlap)) {
        WHY("TP overlap %s and context parallelism (cp %d) do not combine",
                 ps_overlap_name(s->overlap), cp);
        return false;
    }
    bool chunks2 = s->cp_comm != PS_CP_A2A; /* ring and allgather: 2 x cp load-balanced chunks */
    int64_t mult = chunks2 ? 2 * (int64_t)cp : cp;
    if (l->seq % mult) {
        WHY("sequence %lld is not a multiple of %s%d (cp %d, %s)", (long long)l->seq,
                 chunks2 ? "2 x cp = " : "cp = ", (int)mult, cp, kn);
        return false;
    }
    if (s->sp && s->tp > 1 && (l->seq / cp) % s->tp) {
        WHY("sequence %lld / cp %d is not divisible by tp %d (sequence parallelism)", (long long)l->seq,
                 cp, s->tp);
        return false;
    }
    if (!ps_layer_has_attention(l->kind)) return true;
    if (chunks2 && l->attn_window > 0 && l->attn_window < l->seq) {
        WHY("%s context parallelism passes whole key/value blocks: an attention window of %lld tokens "
                         "needs cp_comm a2a", kn, (long long)l->attn_window);
        return false;
    }
    if (s->cp_comm == PS_CP_A2A) {
        int64_t hq = l->heads / s->tp, hk = l->kv_heads / s->tp > 1 ? l->kv_heads / s->tp : 1;
        if (hq % cp || hk % cp) {
            WHY("a2a context parallelism splits the heads of a TP rank cp ways: %lld query and %lld "
                             "key/value heads per TP rank (tp %d) are not both multiples of cp %d", (long long)hq,
                     (long long)hk, s->tp, cp);
            return false;
        }
    }
    return true;
}

bool ps_cost_ep_ok(const ps_layer *l, const ps_strategy *s, char *why, size_t n)
{
    /* the reason is formatted only for a caller that reads it: the search asks millions of times */
    char dummy[1];
    if (!why) {
        why = dummy;
        n = 0;
    }
    if (n) why[0] = '\0';
    int ep = ps_strategy_ep(s), etp = ps_strategy_etp(s);
    if (s->ep < 0 || s->etp < 0) {
        WHY("expert degrees must be >= 1 (ep %d, etp %d)", s->ep, s->etp);
        return false;
    }
    if (!ps_layer_is_moe(l) || !ps_strategy_ep_folded(s)) return true;
    int64_t width = ps_strategy_width(s), grid = (int64_t)ep * etp;
    if (width % grid) {
        WHY("etp %d x ep %d = %lld does not divide the stage width tp x cp x dp = %lld", etp, ep,
                 (long long)grid, (long long)width);
        return false;
    }
    if (l->n_experts % ep) {
        WHY("ep %d does not divide the layer's %lld routed experts", ep, (long long)l->n_experts);
        return false;
    }
    if (l->expert_ffn % etp) {
        WHY("etp %d does not divide the experts' width expert_ffn = %lld", etp, (long long)l->expert_ffn);
        return false;
    }
    if (s->tp > 1 && !s->sp) {
        WHY("expert parallelism (ep %d, etp %d) beside tp %d needs sequence parallelism (each TP rank "
                         "dispatches its own tokens): add sp",
                 ep, etp, s->tp);
        return false;
    }
    if (ps_overlap_is_oases(s->overlap)) {
        WHY("TP overlap %s and expert parallelism (ep %d, etp %d) do not combine",
                 ps_overlap_name(s->overlap), ep, etp);
        return false;
    }
    return true;
}

ps_status ps_cost_ep_check(const ps_layer *l, const ps_strategy *s)
{
    char why[256];
    if (ps_cost_ep_ok(l, s, why, sizeof why)) return PS_OK;
    return PS_FAIL(PS_ERR_INPUT, "%s", why);
}

ps_status ps_cost_cp_check(const ps_layer *l, const ps_strategy *s)
{
    char why[256];
    if (ps_cost_cp_ok(l, s, why, sizeof why)) return PS_OK;
    return PS_FAIL(PS_ERR_INPUT, "%s", why);
}

static const char *const k_overlap_names[PS_OVERLAP_COUNT] = {"none", "cross-pass", "oases", "te"};

const char *ps_overlap_name(ps_overlap o)
{
    return (int)o >= 0 && o < PS_OVERLAP_COUNT ? k_overlap_names[o] : "?";
}

ps_status ps_overlap_parse(const char *s, ps_overlap *o)
{
    for (int i = 0; i < PS_OVERLAP_COUNT; i++)
        if (strcmp(s, k_overlap_names[i]) == 0) {
            *o = (ps_overlap)i;
            return PS_OK;
        }
    return PS_FAIL(PS_ERR_INPUT, "unknown TP overlap '%s' (known: none, cross-pass, oases, te)", s);
}

double ps_cost_ring_overlap(const ps_cost_params *p, int steps, double comp_step, double comm_step, bool comm_first)
{
    /* all-gather + GEMM and GEMM + reduce-scatter take the same time: one piece alone (the first with the GPU's own
     * shard, or the last with its own), and steps - 1 pieces each beside one transfer; comm_first only says which
     * end the lone piece is at */
    (void)comm_first;
    if (steps < 1) return 0;
    return comp_step + (steps - 1) * ps_cost_overlapped(p, comp_step, comm_step);
}

bool ps_layer_te_pair(const ps_layer_gemms *g, int blk, int *ag, int *rs)
{
    *ag = *rs = -1;
    for (int j = 0; j < g->n; j++) {
        if (g->g[j].attn || g->g[j].blk != blk) continue;
        if (*ag < 0) *ag = j;
        *rs = j;
    }
    if (*ag < 0 || *ag == *rs) {
        *ag = *rs = -1;
        return false;
    }
    return true;
}

double ps_cost_two_stream(const ps_cost_params *p, int n_blocks, const double *comp, const double *comm)
{
    const int K = 2 * (n_blocks > 0 ? n_blocks : 0);
    for (int k = 0; k < K; k++)
        if (!isfinite(comp[k]) || !isfinite(comm[k])) return INFINITY;
    const double sig = p->overlap_slowdown > 1 ? p->overlap_slowdown : 1;
    /* kc, km: the next operation of the compute and the communication stream (every earlier one is done); rc, rm:
     * the running one's remaining time at full speed, negative when the stream is idle */
    int kc = 0, km = 0;
    double rc = -1, rm = -1, t = 0;
    while (kc < K || km < K) {
        /* a sub-batch's block needs the collective of its previous block (index k - 2); a collective needs its
         * block's computation */
        if (rc < 0 && kc < K && km > kc - 2) rc = comp[kc] > 0 ? comp[kc] : 0;
        if (rm < 0 && km < K && kc > km) rm = comm[km] > 0 ? comm[km] : 0;
        if (rc == 0) { /* nothing to run: done at once */
            rc = -1;
            kc++;
            continue;
        }
        if (rm == 0) {
            rm = -1;
            km++;
            continue;
        }
        if (rc > 0 && rm > 0) {
            /* both busy: both at 1/sig of their speed until the shorter one ends */
            bool c_first = rc <= rm;
            double d = c_first ? rc : rm;
            t += d * sig;
            rc -= d;
            rm -= d;
            if (c_first) {
                rc = -1;
                kc++;
            } else {
                rm = -1;
                km++;
            }
        } else if (rc > 0) {
            t += rc;
            rc = -1;
            kc++;
        } else if (rm > 0) {
            t += rm;
            rm = -1;
            km++;
        } else {
            break; /* unreachable: an idle pair of streams always has an operation it may start */
        }
    }
    return t;
}

void ps_layer_ov_pass(const ps_layer *l, const ps_layer_gemms *g, const ps_strategy *s, double elementwise_passes,
                      double act_full, double act_sel, double coll_bytes, int pass, ps_ov_pass *out)
{
    memset(out, 0, sizeof *out);
    out->coll_bytes = coll_bytes;
    int nf = g->tp_colls > 1 ? g->tp_colls : 1;
    if (nf > PS_OV_MAX_BLOCKS / 2) nf = PS_OV_MAX_BLOCKS / 2;
    double fstream = elementwise_passes * act_full / nf;
    if (pass == PS_OV_FWD) {
        out->n = nf;
        for (int i = 0; i < nf; i++) {
            for (int j = 0; j < g->n && j < PS_OV_MAX_GEMMS; j++) out->b[i].times[j] = g->g[j].blk == i;
            out->b[i].stream_bytes = fstream;
            out->b[i].coll = i < g->tp_colls;
        }
        return;
    }
    /* Full recomputation without the fine-grained restart repeats the forward blocks, collectives included. */
    int at = 0;
    if (s->ckpt == PS_RECOMP_FULL && s->overlap != PS_OVERLAP_OASES) {
        ps_ov_pass f;
        ps_layer_ov_pass(l, g, s, elementwise_passes, act_full, act_sel, coll_bytes, PS_OV_FWD, &f);
        for (int i = 0; i < f.n; i++) out->b[at++] = f.b[i];
    }
    int n_attn_blk = 0;
    for (int i = 0; i < nf; i++) {
        bool has = false;
        for (int j = 0; j < g->n; j++) has = has || (g->g[j].attn && g->g[j].blk == i);
        n_attn_blk += has;
    }
    for (int i = nf - 1; i >= 0; i--) {
        ps_ov_block *b = &out->b[at++];
        bool has_attn = false;
        for (int j = 0; j < g->n && j < PS_OV_MAX_GEMMS; j++) {
            if (g->g[j].blk != i) continue;
            b->times[j] = g->g[j].attn ? 2 : 1; /* input gradients: attention GEMMs twice */
            if (s->ckpt == PS_RECOMP_FULL && s->overlap == PS_OVERLAP_OASES) b->times[j] += 1; /* recompute here */
            /* selective recomputation repeats unfused score GEMMs; a fused kernel's backward recomputes its own */
            if (s->ckpt == PS_RECOMP_SELECTIVE && s->attn != PS_ATTN_FUSED && g->g[j].attn) b->times[j] += 1;
            has_attn = has_attn || g->g[j].attn;
        }
        b->stream_bytes = 2 * fstream;
        if (s->ckpt == PS_RECOMP_FULL && s->overlap == PS_OVERLAP_OASES) b->stream_bytes += fstream;
        if (s->ckpt == PS_RECOMP_SELECTIVE && has_attn)
            b->stream_bytes += elementwise_passes * (act_full - act_sel) / n_attn_blk;
        b->coll = i < g->bwd_tp_colls;
    }
    out->n = at;
}

/* Elements a layer's FP8 casts touch per micro-batch on one GPU of a tp-way group: the inputs of its linear layers
 * (forward) and their output gradients (backward). Column-parallel inputs (QKV, FC1) are whole on every TP rank,
 * row-parallel ones (projection, FC2) a 1/tp slice. */
static void fp8_cast_elems(const ps_layer *l, int64_t mbs, int tp, double *fwd, double *bwd)
{
    *fwd = *bwd = 0;
    if (!ps_layer_has_attention(l->kind)) return;
    double T = (double)mbs * (double)l->seq, h = (double)l->hidden, t = tp > 0 ? tp : 1;
    double q = (double)l->heads * (double)l->head_dim, k = (double)l->kv_heads * (double)l->head_dim;
    double f = (double)l->ffn_hidden, g = l->act == PS_ACT_SWIGLU || l->act == PS_ACT_GEGLU ? 2 : 1;
    *fwd = T * (h + q / t + h + f / t);
    *bwd = T * ((q + 2 * k) / t + h + g * f / t + h);
}

/* Parameters a GPU holds of this layer before ZeRO sharding: TP splits the big matrices of blocks, embeddings and
 * heads; norms and biases are replicated in Megatron but are a rounding error next to the matrices. */
double ps_cost_params_per_gpu(const ps_layer *l, int tp)
{
    double P = (double)ps_layer_params(l);
    switch (l->kind) {
    case PS_LAYER_CLS_HEAD:
    case PS_LAYER_PATCH_EMBED:
    case PS_LAYER_MERGE: return P;
    default: return P / tp;
    }
}

/* The computation of one Oases block on the stage's slowest GPU [s]. */
static double block_comp(const ps_cost_params *p, const dev_speed *d, const ps_layer *l, ps_attn a,
                         const ps_layer_gemms *g, const ps_ov_block *b)
{
    double t = 0;
    for (int j = 0; j < g->n && j < PS_OV_MAX_GEMMS; j++)
        if (b->times[j] > 0) {
            const dev_speed *dd = gemm_dev(d, l, &g->g[j]);
            double elt = ps_dtype_bytes(dd->dtype);
            t += g->g[j].attn ? attn_time(p, dd, l, &g->g[j], a, b->times[j], elt)
                              : b->times[j] * weight_gemm_time(p, dd, l, &g->g[j], elt);
        }
    if (b->stream_bytes > 0) t += b->stream_bytes / d->stream + p->kernel_launch_s;
    return p->compute_scale * t;
}

/* Oases (seed 003) Sec. 3 / Eq. 3: the micro-batch as two sub-batches (the larger first when it is odd), each pass
 * cut into blocks at its TP collectives and run on two streams. Fills the ov_* fields; comp and comm return the
 * passes' computation and collective time before overlap, recomp the recomputation's computation and rcomm its
 * collectives (cross-pass only). The halved GEMMs are timed at their own size, so the efficiency a small sub-batch
 * loses (AMP Sec. 3's skinny GEMMs, the measured rates of a cost database) is in the result. */
static void overlap_passes(const ps_cost_params *p, const ps_cluster *c, const dev_speed *d, const ps_layer *l,
                           ps_dtype dtype, int64_t mbs, const ps_strategy *s, int64_t first, ps_layer_cost *out,
                           double comp[2], double comm[2], double *recomp, double *rcomm)
{
    double elt = ps_act_elt_bytes(dtype);
    int64_t sub[2] = {mbs - mbs / 2, mbs / 2};
    ps_group grp = {first, s->tp, 1};
    comp[0] = comp[1] = comm[0] = comm[1] = *recomp = *rcomm = 0;
    for (int k = 0; k < 2; k++) {
        ps_layer_gemms g;
        ps_layer_gemm_shapes(l, sub[k], s->tp, &g);
        double full = ps_layer_act_bytes_attn(l, dtype, s->tp, false, PS_RECOMP_NONE, s->attn) * (double)sub[k];
        double sel = ps_layer_act_bytes_attn(l, dtype, s->tp, false, PS_RECOMP_SELECTIVE, s->attn) * (double)sub[k];
        double bytes = (double)sub[k] * (double)l->seq * (double)l->hidden * elt;
        double one = ps_coll_allreduce(p, c, &grp, bytes);
        for (int pass = 0; pass < 2; pass++) {
            ps_ov_pass ov;
            ps_layer_ov_pass(l, &g, s, p->elementwise_passes, full, sel, bytes, pass, &ov);
            out->ov_n[pass] = ov.n;
            for (int i = 0; i < ov.n; i++) {
                double tc = block_comp(p, d, l, s->attn, &g, &ov.b[i]), tm = ov.b[i].coll ? one : 0;
                out->ov_comp[pass][2 * i + k] = tc;
                out->ov_comm[pass][2 * i + k] = tm;
                comp[pass] += tc;
                comm[pass] += tm;
            }
        }
        /* the recomputation inside the backward: what the same pass costs without it */
        if (s->ckpt != PS_RECOMP_NONE) {
            ps_strategy bare = *s;
            bare.ckpt = PS_RECOMP_NONE;
            ps_ov_pass ov;
            ps_layer_ov_pass(l, &g, &bare, p->elementwise_passes, full, sel, bytes, PS_OV_BWD, &ov);
            double tc = 0, tm = 0;
            for (int i = 0; i < ov.n; i++) {
                tc += block_comp(p, d, l, s->attn, &g, &ov.b[i]);
                tm += ov.b[i].coll ? one : 0;
            }
            for (int i = 0; i < out->ov_n[PS_OV_BWD]; i++) {
                *recomp += out->ov_comp[PS_OV_BWD][2 * i + k];
                *rcomm += out->ov_comm[PS_OV_BWD][2 * i + k];
            }
            *recomp -= tc;
            *rcomm -= tm;
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        int n = out->ov_n[pass];
        double one = ps_cost_two_stream(p, n, out->ov_comp[pass], out->ov_comm[pass]);
        /* the time one more layer adds inside a run: three copies back to back, less one, halved */
        double c3[6 * PS_OV_MAX_BLOCKS], m3[6 * PS_OV_MAX_BLOCKS];
        for (int r = 0; r < 3; r++) {
            memcpy(c3 + r * 2 * n, out->ov_comp[pass], 2 * (size_t)n * sizeof *c3);
            memcpy(m3 + r * 2 * n, out->ov_comm[pass], 2 * (size_t)n * sizeof *m3);
        }
        double run = (ps_cost_two_stream(p, 3 * n, c3, m3) - one) / 2;
        if (pass == PS_OV_FWD) {
            out->fwd = one;
            out->fwd_run = run;
        } else {
            out->bwd_b = one;
            out->bwd_b_run = run;
        }
    }
}

/* PS_OVERLAP_TE on one pass of a layer, as changes to the plain SP layer: dcomp, the chunked GEMMs' computation less
 * the whole GEMMs'; coll, the SP collectives the rings replace (as the plain layer charged them); ring, the ring
 * transfers before overlap; exposed, what of the pipelines is not GEMM computation. */
typedef struct {
    double dcomp, coll, ring, exposed;
} te_pass;

/* Transformer Engine's default userbuffers methods (transformer_engine/pytorch/module/base.py, initialize_ub):
 * "ring_exchange" with num_splits = tp for qkv_fprop, fc1_fprop (all-gather + GEMM) and proj_dgrad, fc2_dgrad (the
 * output gradient's all-gather + dgrad); "pipeline" (4 splits) for proj_fprop, fc2_fprop (GEMM + reduce-scatter);
 * "bulk" for qkv_dgrad / fc1_dgrad (the input's all-gather for wgrad beside dgrad) and qkv_wgrad / fc1_wgrad (dgrad's
 * reduce-scatter beside wgrad). Modelled: every SP collective the cost model charges (an all-gather before and a
 * reduce-scatter after each block, the backward mirrored) as a ring of tp steps with its paired GEMM; the backward's
 * reduce-scatter pipelines with the dgrad GEMM, not with wgrad, so that the W pass (deferred by zero-bubble
 * schedules) stays apart, as with cuBLASMp, whose configuration TE gives ring_exchange for qkv_dgrad / fc1_dgrad. */
static void te_passes(const ps_cost_params *p, const ps_cluster *c, const dev_speed *d, const ps_layer *l,
                      int64_t mbs, const ps_strategy *s, int64_t first, double bytes, te_pass out[2])
{
    memset(out, 0, 2 * sizeof *out);
    ps_layer_gemms g;
    const int tp = s->tp;
    ps_layer_gemm_shapes_s(l, mbs, s, &g);
    ps_group grp = {first, tp, 1};
    /* the plain layer's price of each SP collective (ps_cost_layer: 2 all-gathers per TP collective) */
    double coll = ps_coll_allgather(p, c, &grp, bytes);
    /* One ring step: each GPU sends 1/tp of the tensor to its next neighbour and receives from its previous one; the
     * slowest edge sets the pace, and a step is never faster than one step of the ring collective the plain layer
     * prices (which shares a node's network among its GPUs). */
    double step = coll / (tp - 1);
    for (int k = 0; k < tp; k++) step = fmax(step, ps_p2p(p, c, first + k, first + (k + 1) % tp, bytes / tp));
    for (int pass = 0; pass < 2; pass++) {
        int n_colls = pass == 0 ? g.tp_colls : g.bwd_tp_colls;
        for (int b = 0; b < n_colls; b++) {
            int ag, rs;
            if (!ps_layer_te_pair(&g, b, &ag, &rs)) continue;
            for (int k = 0; k < 2; k++) { /* the all-gather's pair, then the reduce-scatter's */
                /* forward: AG -> ag's GEMM, rs's GEMM -> RS; backward: AG(grad) -> rs's dgrad, ag's dgrad -> RS */
                const ps_gemm_shape *x = &g.g[(k == 0) == (pass == 0) ? ag : rs];
                /* the GEMM at the precision layer_work timed it (FP8's linear layers: 1-byte operands) */
                const dev_speed *dd = gemm_dev(d, l, x);
                double e = ps_dtype_bytes(dd->dtype);
                double whole = p->compute_scale * gemm_time(p, dd, x->m, x->n, x->k, x->count, e);
                double piece = p->compute_scale * gemm_time(p, dd, x->m / tp, x->n, x->k, x->count, e);
                double t = ps_cost_ring_overlap(p, tp, piece, step, k == 0);
                out[pass].dcomp += tp * piece - whole;
                out[pass].coll += coll;
                out[pass].ring += (tp - 1) * step;
                out[pass].exposed += t - tp * piece;
            }
        }
    }
}

/* PS_RECOMP_OP: the time of the linear layers the backward recomputes (those ps_op_sac_keeps does not keep) for a
 * micro-batch of mbs samples, and their FLOPs in *flops. */
static double op_recompute_gemms(const ps_cost_params *p, const dev_speed *d, const ps_layer *l, int64_t mbs, int tp,
                                 ps_dtype dtype, double *flops)
{
    ps_linear lin[PS_LINEARS_MAX];
    int n = ps_layer_linears(l, tp, lin);
    double t = 0;
    *flops = 0;
    for (int i = 0; i < n; i++) {
        if (ps_op_sac_keeps(i, dtype)) continue;
        double m = lin[i].tokens * (double)mbs;
        t += gemm_time(p, d, m, lin[i].n_out, lin[i].k_in, 1, ps_dtype_bytes(d->dtype));
        *flops += 2 * m * lin[i].n_out * lin[i].k_in;
    }
    return t;
}

/* One step of a ring over the group g in which every member sends `bytes` to the next one at once: the slowest edge
 * sets the pace, never faster than one step of the ring all-gather (which shares a node's network among the GPUs of
 * the node that communicate at once, as every TP rank's CP ring does). */
static double ring_step(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes)
{
    if (g->n <= 1 || bytes <= 0) return 0;
    double step = ps_coll_allgather(p, c, g, bytes * (double)g->n) / (double)(g->n - 1);
    for (int64_t k = 0; k < g->n; k++)
        step = fmax(step, ps_p2p(p, c, g->first + k * g->stride, g->first + ((k + 1) % g->n) * g->stride, bytes));
    return step;
}

/* Context parallelism's attention core on one GPU (docs/costmodel.md, "Context parallelism"), read from Transformer
 * Engine's context_parallel.py (commit d0067d0, the attention Megatron-core runs with --context-parallel-size):
 * - ring (AttnFuncWithCPAndKVP2P): the forward runs cp attention steps, each beside the transfer of the next K/V
 *   block (k and v of the GPU's 1/cp of the tokens) to the next GPU of the CP ring: ps_cost_ring_overlap of cp steps
 *   of 1/cp of the attention; the backward runs cp steps too, step 0 beside a K/V transfer, the middle ones beside
 *   K/V and the dK/dV accumulated so far (the same dtype), the last beside dK/dV alone. Memory: the forward keeps
 *   every received block until it returns ((cp - 1) K/V blocks), the backward two K/V + dK/dV buffer pairs and a dQ
 *   buffer; the larger is transient.
 * - a2a (AttnFuncWithCPAndQKVOA2A): all-to-alls of Q, K, V before and of the output after the core; the backward of
 *   the output gradient before and of dQ, dK, dV after; none overlapped. Memory: one copy of Q, K, V and the output.
 * - allgather (PyTorch torch/distributed/tensor/experimental/_attention.py, read at 0123248a: _AllGatherRotater,
 *   _templated_ring_attention and its backward): the forward all-gathers the K/V blocks once, issued before the first
 *   of the cp attention steps and waited after it; the backward all-gathers them again the same way and passes the
 *   dK/dV accumulators (FP32: _ContextParallelOptions.convert_to_f32) one hop around the ring after every step, each
 *   send beside the next step and the last one waited at the end. K/V are what SDPA receives: torchtitan expands them
 *   to the query heads first (repeat_kv, torchtitan/models/llama/model.py at 9dec370), so they count heads / tp.
 *   Memory: the gathered K/V (cp blocks) and two FP32 dK/dV buffers.
 * af, ab: the attention core's forward and backward computation [s]. Returns the communication before overlap and
 * the part of it left exposed per pass, and the transient bytes. */
static void cp_attention(const ps_cost_params *p, const ps_cluster *c, const ps_layer *l, double elt, int64_t mbs,
                         const ps_strategy *s, int64_t first, double af, double ab, double comm[2], double exposed[2],
                         double *temp)
{
    int cp = ps_strategy_cp(s);
    ps_group g = {first, cp, s->tp}; /* this GPU's CP group: the same TP rank of cp consecutive TP groups */
    double t = s->tp, hd = (double)l->head_dim, tokens = (double)mbs * (double)l->seq / cp;
    double qb = tokens * (double)l->heads * hd / t * elt;
    /* key/value heads on a TP rank: a share of them, at least one (Megatron replicates them when tp exceeds them) */
    double kb = tokens * fmax((double)l->kv_heads / t, 1.0) * hd * elt;
    if (s->cp_comm == PS_CP_A2A) {
        comm[0] = ps_coll_alltoall(p, c, &g, qb + 2 * kb) + ps_coll_alltoall(p, c, &g, qb);
        comm[1] = ps_coll_alltoall(p, c, &g, qb) + ps_coll_alltoall(p, c, &g, qb + 2 * kb);
        exposed[0] = comm[0];
        exposed[1] = comm[1];
        *temp = 2 * qb + 2 * kb;
        return;
    }
    if (s->cp_comm == PS_CP_ALLGATHER) {
        double kvx = 2 * qb, dkv = 2 * qb / elt * 4, af1 = af / cp, ab1 = ab / cp;
        double ag = ps_coll_allgather(p, c, &g, kvx * cp), dstep = ring_step(p, c, &g, dkv);
        comm[0] = ag;
        exposed[0] = ps_cost_overlapped(p, af1, ag) - af1;
        comm[1] = ag + cp * dstep;
        exposed[1] = ps_cost_overlapped(p, ab1, ag) + (cp - 1) * ps_cost_overlapped(p, ab1, dstep) + dstep - ab;
        *temp = cp * kvx + 2 * dkv;
        return;
    }
    double kv = 2 * kb, step = ring_step(p, c, &g, kv);
    comm[0] = (cp - 1) * step;
    exposed[0] = ps_cost_ring_overlap(p, cp, af / cp, step, true) - af;
    double bs = ab / cp, bwd = 2 * ps_cost_overlapped(p, bs, step) + (cp - 2) * ps_cost_overlapped(p, bs, 2 * step);
    comm[1] = 2 * (cp - 1) * step;
    exposed[1] = bwd - ab;
    *temp = fmax((cp - 1) * kv, 4 * kv + qb);
}

/* An MoE block's token exchange on the expert grid, per pass (docs/costmodel.md, "Expert parallelism"), read from
 * Megatron-core's MoEAlltoAllTokenDispatcher (megatron/core/transformer/moe/token_dispatcher.py at d98e8a64): the
 * GPU's T / tp tokens, top_k copies each (a capacity factor below 1 drops the rest), go by an all-to-all over the ep
 * group (the GPUs of this etp rank at stride etp) to the GPUs of their experts, and with etp > 1 are all-gathered over
 * the etp group (consecutive GPUs); the combine runs the reduce-scatter and the all-to-all back. The backward sends
 * the gradients the same ways. The slowest GPU of the ep group moves `load` x the mean. Returns the forward's time
 * [s] and, in *temp, the dispatch buffers alive beside the experts' GEMMs: the permuted tokens and what the
 * all-to-all and all-gather return [bytes]. */
static double ep_exchange(const ps_cost_params *p, const ps_cluster *c, const ps_layer *l, double tokens, double elt,
                          const ps_strategy *s, int64_t first, double load, double *temp)
{
    int ep = ps_strategy_ep(s), etp = ps_strategy_etp(s);
    double cf = l->capacity_factor, k = (double)l->top_k;
    double buf = tokens / s->tp * k * (cf > 0 && cf < 1 ? cf : 1.0) * (double)l->hidden * elt * load;
    ps_group gep = {first, ep, etp}, gtp = {first, etp, 1};
    double a2a = ps_coll_alltoall_dedup(p, c, &gep, buf, k, l->router_groups, l->router_group_topk);
    double ag = ps_coll_allgather(p, c, &gtp, buf * etp), rs = ps_coll_reducescatter(p, c, &gtp, buf * etp);
    *temp = buf * (1 + etp);
    return 2 * a2a + ag + rs;
}

ps_status ps_cost_layer(const ps_cost_params *p, const ps_cluster *c, const ps_layer *l, ps_dtype dtype,
                        int64_t mbs, const ps_strategy *s_in, int64_t first, ps_layer_cost *out)
{
    memset(out, 0, sizeof *out);
    ps_strategy sr = *s_in; /* the strategy with its attention kernel resolved for this stage */
    const ps_strategy *s = &sr;
    PS_CHECK_INPUT(s->tp >= 1 && s->dp >= 1 && s->cp >= 0, "strategy degrees must be >= 1 (tp %d, cp %d, dp %d)",
                   s->tp, s->cp, s->dp);
    PS_CHECK_INPUT(s->zero >= 0 && s->zero <= 3, "ZeRO stage must be 0-3 (got %d)", s->zero);
    PS_CHECK_INPUT(mbs >= 1, "micro-batch size must be >= 1 (got %lld)", (long long)mbs);
    const int cp = ps_strategy_cp(s);
    PS_CHECK_INPUT((int)s->cp_comm >= 0 && s->cp_comm < PS_CP_COMM_COUNT, "unknown context-parallel kind %d",
                   (int)s->cp_comm);
    /* the layer as one GPU of the CP group sees it: 1/cp of every sample's tokens */
    ps_layer lcp = *l;
    const ps_layer *lt = &lcp;
    if (cp > 1) {
        PS_TRY(ps_cost_cp_check(l, s));
        lcp.seq = l->seq / cp;
    }
    PS_TRY(ps_cost_ep_check(l, s));
    const bool folded = ps_layer_is_moe(l) && ps_strategy_ep_folded(s);
    dev_speed d;
    PS_TRY(stage_speed(p, c, dtype, first, ps_strategy_width(s), &d));
    /* auto: what ps_cost_attn answers, from the walk over the stage's groups stage_speed just made */
    if (sr.attn == PS_ATTN_AUTO) sr.attn = d.fused_ok ? PS_ATTN_FUSED : PS_ATTN_UNFUSED;
    bool has_attn = ps_layer_has_attention(l->kind);
    /* ps_layer_linears lists a dense block's linear layers in torchtitan's order; an MoE or MLA block runs others */
    PS_CHECK_INPUT(s->ckpt != PS_RECOMP_OP || !(ps_layer_is_moe(l) || ps_layer_is_mla(l)),
                   "recompute op (torchtitan's per-op checkpointing) is modelled for dense attention blocks; an MoE "
                   "or multi-head latent attention block needs none, selective or full");
    if (sr.attn == PS_ATTN_FUSED && !d.fused_ok && has_attn)
        return PS_FAIL(PS_ERR_INPUT, "fused attention needs compute capability 8.0 or later (FlashAttention-2, cuDNN), "
                                     "and a GPU of cluster %s from GPU %lld on has none: use --attention unfused (or "
                                     "auto)", c->name, (long long)first);
    if (cp > 1 && has_attn && sr.attn != PS_ATTN_FUSED)
        return PS_FAIL(PS_ERR_INPUT, "context parallelism (cp %d) runs the attention core as fused kernels block by "
                                     "block (Megatron-core: TEDotProductAttention only): it needs --attention fused",
                       cp);
    /* elements of activations, weights and gradients: FP8 training keeps them in BF16 (ps_act_elt_bytes) */
    double elt = ps_act_elt_bytes(dtype);
    const bool fp8 = dtype == PS_DTYPE_FP8;
    dev_speed d16;
    if (fp8) {
        PS_TRY(stage_speed(p, c, PS_DTYPE_BF16, first, ps_strategy_width(s), &d16));
        d.bf16 = &d16;
    }

    fwd_work w;
    layer_work(p, &d, l, mbs, s, &w);
    bool sp = s->sp && s->tp > 1;
    /* with fused attention (what cp > 1 needs) every activation is proportional to the tokens: those of lt */
    double act_full = ps_layer_act_bytes_attn(lt, dtype, s->tp, sp, PS_RECOMP_NONE, s->attn) * (double)mbs;
    double act_sel = ps_layer_act_bytes_attn(lt, dtype, s->tp, sp, PS_RECOMP_SELECTIVE, s->attn) * (double)mbs;
    /* The expert grid moves the routed part of the activations with the tokens: a GPU keeps the permuted inputs and
     * outputs of the tokens its etp group gathered (T / tp x top_k x etp, not the T / tp the sequence-parallel
     * layout keeps of them) and the intermediates of its experts' slices (the same count as split over TP), both
     * times the slowest GPU's load. Nothing of it is kept under full recomputation. */
    double ep_load = 1, ep_act = 0;
    if (folded) {
        double tok, inner;
        /* at ep 1 every GPU holds every expert: no GPU of the group is busier than another */
        ep_load = ps_strategy_ep(s) > 1 ? ps_cost_ep_rank_load(p, l, (double)(l->n_experts / ps_strategy_ep(s))) : 1;
        ps_layer_moe_act_parts(lt, dtype, &tok, &inner);
        ep_act = (double)mbs * (tok * (ps_strategy_etp(s) * ep_load - 1) + inner * (ep_load - 1)) / s->tp;
        act_full += ep_act;
        act_sel += ep_act;
    }
    /* A fused kernel keeps no scores, so selective recomputation has nothing to drop and repeats nothing: its
     * backward already recomputes the scores (counted in attn_bwd). */
    bool sel_recomputes = s->ckpt == PS_RECOMP_SELECTIVE && s->attn != PS_ATTN_FUSED;
    double elem_f = p->elementwise_passes * act_full / d.stream + (act_full > 0 ? p->kernel_launch_s : 0);
    /* FP8: each linear layer casts its BF16 input to FP8 in the forward and its output gradient in the backward,
     * reading 2 bytes and writing 1 per element (Transformer Engine quantizes outside the GEMM) */
    double cast_f = 0, cast_b = 0;
    if (fp8) {
        fp8_cast_elems(lt, mbs, s->tp, &cast_f, &cast_b);
        cast_f = 3 * cast_f / d.stream;
        cast_b = 3 * cast_b / d.stream;
        elem_f += cast_f;
    }

    /* TP: Megatron's all-reduces (or reduce-scatter + all-gather with SP: the same bytes) of the layer output,
     * not overlapped with computation. */
    double tp_one = 0;
    out->tp_bytes = (double)mbs * (double)lt->seq * (double)l->hidden * elt;
    if (s->tp > 1) {
        ps_group g = {first, s->tp, 1};
        tp_one = sp ? 2 * ps_coll_allgather(p, c, &g, out->tp_bytes) : ps_coll_allreduce(p, c, &g, out->tp_bytes);
    }
    double tp_f = w.tp_colls * tp_one, tp_b = w.bwd_tp_colls * tp_one;

    /* compute_scale (1 unless refitted from executed plans) corrects every computation time at once */
    double comp_f = p->compute_scale * (w.gemm + w.attn + elem_f);
    double recompute = 0, recompute_comm = 0, op_gemm = 0, op_flops = 0;
    if (s->ckpt == PS_RECOMP_FULL) {
        recompute = comp_f; /* the whole forward again, its TP collectives included */
        recompute_comm = tp_f;
    } else if (sel_recomputes) {
        /* only the attention core: score GEMMs and the elementwise work on the score tensors */
        recompute = p->compute_scale * (w.attn + p->elementwise_passes * (act_full - act_sel) / d.stream);
    } else if (s->ckpt == PS_RECOMP_OP && has_attn) {
        /* torchtitan's per-op policy: the linear layers whose outputs were not kept, every elementwise operation
         * (and an unfused attention core, whose bmm and softmax are not kept either), and the collectives that
         * are not kept: the sequence-parallel all-gathers (the reduce-scatters' outputs are), or without sequence
         * parallelism the all-reduces */
        op_gemm = op_recompute_gemms(p, &d, lt, mbs, s->tp, dtype, &op_flops);
        recompute = p->compute_scale * (op_gemm + elem_f + (s->attn == PS_ATTN_FUSED ? 0 : w.attn));
        if (s->tp > 1) {
            ps_group g = {first, s->tp, 1};
            recompute_comm = w.tp_colls * (sp ? ps_coll_allgather(p, c, &g, out->tp_bytes) : tp_one);
        }
    }
    /* input gradients: dgrad GEMMs and the attention core's backward; weight gradients: wgrad GEMMs */
    double comp_b = p->compute_scale * (w.gemm + w.attn_bwd + 2 * (elem_f - cast_f) + cast_b) + recompute;
    double comp_w = p->compute_scale * w.gemm;

    /* Memory. Mixed-precision Adam: weights and gradients in the training dtype, fp32 master weights + two moments
     * (12 bytes) when training in 16 bits, two fp32 moments (8 bytes) in fp32 (ZeRO, Rajbhandari et al. Sec. 3.1:
     * 2 + 2 + 12 = 16 bytes per parameter); ZeRO stage z shards the first z of {optimizer, gradients, weights}. */
    /* ZeRO shards over the data-parallel group with context parallelism (ps_strategy_dp_cp) */
    /* The routed experts of an MoE block live on the expert grid: n_experts / ep of them, split over etp, summed and
     * ZeRO-sharded over the edp = width / (ep x etp) GPUs holding the same ones (at ep 1 and etp = tp: the P / tp and
     * dp x cp of every other parameter). Pd: the rest of the layer on this GPU, Pe: its experts. */
    double P = ps_cost_params_per_gpu(l, s->tp), dp = ps_strategy_dp_cp(s);
    const int ep = ps_strategy_ep(s), etp = ps_strategy_etp(s);
    double R = folded ? (double)ps_layer_routed_params(l) : 0, Pe = R / ((double)ep * etp), Pd = P - R / s->tp;
    double edp = (double)ps_strategy_width(s) / ((double)ep * etp);
    double opt = elt >= 4 ? 8 : 12;
    if (folded) {
        P = Pd + Pe;
        out->mem_params = Pd * elt / (s->zero >= 3 ? dp : 1) + Pe * elt / (s->zero >= 3 ? edp : 1);
        out->mem_grads = Pd * elt / (s->zero >= 2 ? dp : 1) + Pe * elt / (s->zero >= 2 ? edp : 1);
        out->mem_optim = Pd * opt / (s->zero >= 1 ? dp : 1) + Pe * opt / (s->zero >= 1 ? edp : 1);
    } else { /* the layer as a whole over dp x cp, in the arithmetic it always had */
        out->mem_params = P * elt / (s->zero >= 3 ? dp : 1);
        out->mem_grads = P * elt / (s->zero >= 2 ? dp : 1);
        out->mem_optim = P * opt / (s->zero >= 1 ? dp : 1);
    }
    out->mem_act = ps_layer_act_bytes_attn(lt, dtype, s->tp, sp, s->ckpt, s->attn) * (double)mbs +
                   (s->ckpt == PS_RECOMP_FULL ? 0 : ep_act);
    if (s->ckpt == PS_RECOMP_FULL)
        out->mem_temp = act_full; /* the recomputed layer lives until its backward is done */
    else if (s->ckpt == PS_RECOMP_SELECTIVE)
        out->mem_temp = act_full - act_sel;
    else if (s->ckpt == PS_RECOMP_OP) /* what the backward recomputes, alive until the layer's backward is done */
        out->mem_temp = fmax(0, act_full - out->mem_act);
    if (s->zero >= 3) out->mem_temp += 2 * P * elt; /* the gathered layer and the prefetched next one */
    if (fp8 && (ps_layer_has_attention(l->kind))) {
        /* Transformer Engine keeps an FP8 copy of each linear weight and, for the backward on Hopper, of its
         * transpose (2 bytes per weight), cast once per iteration and held for its micro-batches; with ZeRO-3 only
         * while the layer is gathered. Plus the scaling state: an amax history of 1024 fp32 values (DelayedScaling's
         * default amax_history_len) for the input, weight and output gradient of each of the linear GEMMs. */
        double copies = 2 * P;
        if (s->zero >= 3)
            out->mem_temp += 2 * copies;
        else
            out->mem_params += copies;
        out->mem_params += (l->kind == PS_LAYER_DECODER_XATTN ? 7 : 4) * 3 * 1024 * 4.0;
    }

    /* Data parallelism. ZeRO-3 gathers weights for forward and backward and reduce-scatters gradients every
     * micro-batch, hidden behind computation when possible (prefetch); stages 0-2 synchronise once per iteration. */
    double zero_f = 0, zero_b = 0;
    out->dp_elems = P;
    /* The gradient groups: the GPUs of this TP rank across the CP and DP groups (stride tp, cp x dp of them, tp-cp-dp
     * order) for the layer, or on the expert grid for all but its experts, whose own group is the GPUs of this
     * (etp, ep) place across edp (stride ep x etp, the expert grid's tp-ep-dp order); Megatron-core reduces the two
     * buffers one after the other. */
    ps_group groups[2] = {{first, ps_strategy_dp_cp(s), s->tp}, {first, (int64_t)llround(edp), (int64_t)ep * etp}};
    double elems[2] = {folded ? Pd : P, folded ? Pe : 0};
    for (int k = 0; k < 2; k++) {
        const ps_group *g = &groups[k];
        if (g->n <= 1 || !(elems[k] > 0)) continue;
        double wbytes = elems[k] * elt, gbytes = elems[k] * p->grad_reduce_bytes;
        if (s->zero >= 3) {
            double ag = ps_coll_allgather(p, c, g, wbytes), rs = ps_coll_reducescatter(p, c, g, gbytes);
            out->zero_gather += ag;
            out->zero_rs += rs;
            zero_f += ag; /* the backward gathers the same weights again */
            zero_b += ag + rs;
        } else if (s->zero >= 1) {
            out->dp_grad += ps_coll_reducescatter(p, c, g, gbytes);
            out->dp_param += ps_coll_allgather(p, c, g, wbytes);
        } else {
            out->dp_grad += ps_coll_allreduce(p, c, g, gbytes);
        }
    }
    out->dp_sync = out->dp_grad + out->dp_param;
    out->zero_comm = zero_f + zero_b;
    out->tp_comm = tp_f + tp_b;
    out->recompute = recompute + recompute_comm;
    /* ZeRO-3 overlapped (FSDP, DeepSpeed stage 3's default overlap_comm): each gather beside the layer's own
     * computation, the steady state of a one-ahead prefetch; ps_cost_plan adds what the stage's first gather and last
     * reduce-scatter leave exposed (ps_cost_prefetch). Not overlapped: every collective waits and blocks. */
    double bw_both = comp_b + comp_w;
    double zero_f_exposed = zero_f, bw_exposed = zero_b;
    if (!s->dp_no_overlap) {
        zero_f_exposed = zero_f > 0 ? ps_cost_overlapped(p, comp_f, zero_f) - comp_f : 0;
        bw_exposed = zero_b > 0 ? ps_cost_overlapped(p, bw_both, zero_b) - bw_both : 0;
    }
    out->zero_exposed_f = zero_f_exposed;
    out->zero_exposed_b = bw_exposed;
    out->fwd = comp_f + zero_f_exposed + tp_f;
    out->bwd_b = comp_b + tp_b + recompute_comm;
    out->bwd_w = comp_w + bw_exposed;
    out->comp_fwd = comp_f;
    out->comp_bwd_b = comp_b;
    out->comp_bwd_w = comp_w;
    out->comm_fwd = tp_f + zero_f;
    out->comm_bwd_b = tp_b + recompute_comm;
    out->comm_bwd_w = zero_b;
    if (cp > 1 && has_attn) {
        double cpc[2], cpx[2], cpt;
        cp_attention(p, c, l, elt, mbs, s, first, p->compute_scale * w.attn, p->compute_scale * w.attn_bwd, cpc, cpx,
                     &cpt);
        /* full recomputation repeats the forward, its ring or all-to-alls included */
        double rf = s->ckpt == PS_RECOMP_FULL ? 1 : 0;
        out->cp_comm[0] = cpc[0];
        out->cp_comm[1] = cpc[1] + rf * cpc[0];
        out->cp_exposed[0] = cpx[0];
        out->cp_exposed[1] = cpx[1] + rf * cpx[0];
        out->fwd += out->cp_exposed[0];
        out->bwd_b += out->cp_exposed[1];
        out->comm_fwd += out->cp_comm[0];
        out->comm_bwd_b += out->cp_comm[1];
        /* exposed communication of the layer, as the breakdown counts it */
        out->tp_comm += out->cp_exposed[0] + out->cp_exposed[1];
        out->recompute += rf * cpx[0];
        out->mem_temp += cpt;
    }
    if (folded) {
        double et, ef = ep_exchange(p, c, l, (double)mbs * (double)lt->seq, elt, s, first, ep_load, &et);
        /* full recomputation repeats the forward, its dispatch and combine included */
        double rf = s->ckpt == PS_RECOMP_FULL ? 1 : 0;
        out->ep_comm[0] = ef;
        out->ep_comm[1] = (1 + rf) * ef;
        out->fwd += ef;
        out->bwd_b += (1 + rf) * ef;
        out->comm_fwd += ef;
        out->comm_bwd_b += (1 + rf) * ef;
        out->tp_comm += (2 + rf) * ef;
        out->recompute += rf * ef;
        out->mem_temp += et;
    }
    out->fwd_run = out->fwd;
    out->bwd_b_run = out->bwd_b;
    if (s->overlap == PS_OVERLAP_TE && s->tp > 1) {
        PS_CHECK_INPUT(sp, "TP overlap te (Transformer Engine's --tp-comm-overlap) pipelines the all-gathers and "
                           "reduce-scatters of sequence parallelism with the GEMMs: it needs sp (tp %d)", s->tp);
        te_pass te[2];
        te_passes(p, c, &d, l, mbs, s, first, out->tp_bytes, te);
        /* full recomputation repeats the forward, its rings included */
        double rf = s->ckpt == PS_RECOMP_FULL ? 1 : 0;
        double df = te[0].dcomp + te[0].exposed - te[0].coll, db = te[1].dcomp + te[1].exposed - te[1].coll;
        out->comp_fwd += te[0].dcomp;
        out->comp_bwd_b += te[1].dcomp + rf * te[0].dcomp;
        out->comm_fwd += te[0].ring - te[0].coll;
        out->comm_bwd_b += te[1].ring - te[1].coll + rf * (te[0].ring - te[0].coll);
        out->te_comm[0] = te[0].ring;
        out->te_comm[1] = te[1].ring + rf * te[0].ring;
        out->te_exposed[0] = te[0].exposed;
        out->te_exposed[1] = te[1].exposed + rf * te[0].exposed;
        out->fwd += df;
        out->bwd_b += db + rf * df;
        out->fwd_run = out->fwd;
        out->bwd_b_run = out->bwd_b;
        out->tp_comm += te[0].exposed - te[0].coll + te[1].exposed - te[1].coll;
        out->recompute += rf * df;
    }
    if (ps_overlap_is_oases(s->overlap) && s->tp > 1) {
        PS_CHECK_INPUT(s->ckpt != PS_RECOMP_OP, "TP overlap %s schedules Megatron-style recomputation; torchtitan's "
                                                "per-op checkpointing (recompute op) does not combine with it",
                       ps_overlap_name(s->overlap));
        PS_CHECK_INPUT(mbs >= 2, "TP overlap splits the micro-batch into two sub-batches: it needs a micro-batch of "
                                 "at least 2 samples per replica (got %lld)", (long long)mbs);
        PS_CHECK_INPUT(!sp, "TP overlap (Oases) and sequence parallelism do not combine: choose one");
        double oc[2], om[2], rc, rm;
        overlap_passes(p, c, &d, l, dtype, mbs, s, first, out, oc, om, &rc, &rm);
        /* ZeRO-3's gathers stay hidden behind the computation as without overlap */
        out->fwd += zero_f_exposed;
        out->fwd_run += zero_f_exposed;
        out->comp_fwd = oc[PS_OV_FWD];
        out->comp_bwd_b = oc[PS_OV_BWD];
        out->comm_fwd = om[PS_OV_FWD] + zero_f;
        out->comm_bwd_b = om[PS_OV_BWD];
        /* the TP collectives left exposed when the layer runs alone */
        out->tp_comm = fmax(0, out->fwd - zero_f_exposed - oc[PS_OV_FWD]) + fmax(0, out->bwd_b - oc[PS_OV_BWD]);
        out->recompute = rc + rm;
        if (s->ckpt == PS_RECOMP_FULL && s->overlap == PS_OVERLAP_OASES && w.tp_colls > 1)
            /* fine-grained recomputation keeps every forward collective's output, not only the layer input */
            out->mem_act += (double)(w.tp_colls - 1) * out->tp_bytes;
    }
    /* executed FLOPs: the weight GEMMs three times (forward, dgrad, wgrad), the attention core forward plus its
     * backward (2x unfused; fused 3x the scores and 2x the weighted sum), and what recomputation repeats */
    double fwd_exec = w.flops - w.attn_flops + w.attn_exec;
    double rec_flops = s->ckpt == PS_RECOMP_FULL ? fwd_exec : sel_recomputes ? w.attn_exec : 0;
    if (s->ckpt == PS_RECOMP_OP) rec_flops = op_flops + (s->attn == PS_ATTN_FUSED ? 0 : w.attn_exec);
    out->hw_flops = 3 * (w.flops - w.attn_flops) + w.attn_exec + w.attn_exec_bwd + rec_flops;
    return PS_OK;
}

/* The share of a stage's micro-batch activation one GPU holds between layers under strategy s: its data-parallel
 * share tp / width, and with sequence parallelism 1 / tp of that. */
static double held(const ps_strategy *s)
{
    double width = (double)ps_strategy_width(s);
    return (s->sp && s->tp > 1 ? 1.0 : (double)s->tp) / width;
}

int ps_cost_reshard_group(const ps_layer *boundary, ps_dtype dtype, int64_t global_mb, const ps_strategy *a,
                          const ps_strategy *b, int64_t first, ps_group *g, double *bytes)
{
    bool spa = a->sp && a->tp > 1, spb = b->sp && b->tp > 1;
    *bytes = 0;
    *g = (ps_group){first, 1, 1};
    if (a->tp == b->tp && spa == spb) return 0;
    double ha = held(a), hb = held(b), full = ps_layer_boundary_bytes(boundary, dtype) * (double)global_mb;
    /* the layout holding more gathers from the GPUs of its TP group that hold its parts */
    const ps_strategy *sup = ha >= hb ? a : b;
    double hs = fmax(ha, hb), r = hs / fmin(ha, hb);
    int64_t n = llround(r);
    *bytes = hs * full;
    if (n > 1 && fabs(r - (double)n) < 1e-9 && sup->tp % n == 0) {
        *g = (ps_group){first, n, sup->tp / n};
    } else {
        /* TP degrees that do not nest (3 and 4), or equal shares arranged differently (sequence against batch
         * shards): the whole TP group of the wider layout exchanges, a bound on what moves */
        int t = a->tp > b->tp ? a->tp : b->tp;
        *g = (ps_group){first, t, 1};
    }
    if (hb > ha * (1 + 1e-9)) return PS_RESHARD_FWD;
    if (ha > hb * (1 + 1e-9)) return PS_RESHARD_BWD;
    return PS_RESHARD_FWD | PS_RESHARD_BWD;
}

void ps_cost_reshard(const ps_cost_params *p, const ps_cluster *c, const ps_layer *boundary, ps_dtype dtype,
                     int64_t global_mb, const ps_strategy *a, const ps_strategy *b, int64_t first, double *fwd,
                     double *bwd)
{
    ps_group g;
    double bytes;
    int dirs = ps_cost_reshard_group(boundary, dtype, global_mb, a, b, first, &g, &bytes);
    double t = dirs ? ps_coll_allgather(p, c, &g, bytes) : 0;
    *fwd = dirs & PS_RESHARD_FWD ? t : 0;
    *bwd = dirs & PS_RESHARD_BWD ? t : 0;
}

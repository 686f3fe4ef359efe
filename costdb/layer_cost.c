/* Time and memory of one layer under one strategy for one micro-batch. Compute is a roofline per GEMM (math-bound
 * at gemm_eff of the dense peak, or memory-bound when a dimension is small: AMP Sec. 3 notes that skinny GEMMs run
 * far below peak) plus memory-bound elementwise work; communication is alpha-beta over the placement; overlap of
 * data-parallel traffic with computation pays Galvatron-BMW's slowdown (Sec. V). */
#include <math.h>
#include <string.h>

#include "ps_cost.h"
#include "ps_costdb.h"

/* The devices a layer runs on: the slowest GPU of the stage sets the pace (stragglers, heterogeneous clusters). */
typedef struct {
    double peak;  /* FLOP/s of the training dtype */
    double stream; /* bytes/s a streaming kernel reaches: hbm x hbm_eff, or the measured bandwidth */
    int dbdev;    /* the device kind of p->db every GPU of the stage is, or -1 (analytic) */
    const char *dtype;
} dev_speed;

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
    out->dbdev = -1;
    const char *dn = ps_dtype_name(dtype);
    out->dtype = dn;
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
        if (pk < out->peak) out->peak = pk;
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

/* One GEMM (m x k) . (k x n), `count` times. */
static double gemm_time(const ps_cost_params *p, const dev_speed *d, double m, double n, double k, double count,
                        double elt)
{
    if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
    double flops = 2 * m * n * k, bytes = elt * (m * k + k * n + m * n);
    if (d->dbdev >= 0) {
        /* Measured: the rate the device reached on calls of this many FLOPs (a batched call counts all of its
         * GEMMs, as the calibration timed them), never faster than streaming the operands once; the launch cost is
         * inside the measured times. */
        double F = flops * count, rate = ps_costdb_model_gemm_rate(p->db, d->dbdev, d->dtype, F);
        if (rate > 0) return fmax(F / rate, count * bytes / d->stream);
    }
    double t = fmax(flops / (d->peak * p->gemm_eff), bytes / d->stream);
    return count * (t + p->kernel_launch_s);
}

void ps_layer_gemm_shapes(const ps_layer *l, int64_t mbs, int tp, ps_layer_gemms *out)
{
    memset(out, 0, sizeof *out);
    double T = (double)mbs * (double)l->seq, h = (double)l->hidden, t = tp;
    double Q = (double)(l->heads * l->head_dim), K = (double)(l->kv_heads * l->head_dim), F = (double)l->ffn_hidden;
    bool gated = l->act == PS_ACT_SWIGLU || l->act == PS_ACT_GEGLU;
#define GEMM(M, N, K_, cnt, at)                                                                                         \
    out->g[out->n++] = (ps_gemm_shape){.m = (M), .n = (N), .k = (K_), .count = (cnt), .attn = (at)}
    switch (l->kind) {
    case PS_LAYER_ENCODER:
    case PS_LAYER_DECODER:
    case PS_LAYER_DECODER_XATTN: {
        double ctx = (l->attn_window > 0 && l->attn_window < l->seq) ? (double)l->attn_window : (double)l->seq;
        double s = (double)l->seq, hd = (double)l->head_dim;
        GEMM(T, (Q + 2 * K) / t, h, 1, false);
        GEMM(T, h, Q / t, 1, false);
        GEMM(T, F / t, h, gated ? 2 : 1, false);
        GEMM(T, h, F / t, 1, false);
        /* scores Q.K^T and probabilities . V: one batched GEMM each over (micro-batch x local heads) */
        double b = (double)mbs * ((double)l->heads / t);
        GEMM(s, ctx, hd, b, true);
        GEMM(s, hd, ctx, b, true);
        out->tp_colls = 2;
        if (l->kind == PS_LAYER_DECODER_XATTN) {
            double kvT = (double)mbs * (double)l->kv_seq, kv = (double)l->kv_seq;
            GEMM(T, Q / t, h, 1, false);
            GEMM(kvT, 2 * K / t, h, 1, false);
            GEMM(T, h, Q / t, 1, false);
            GEMM(s, kv, hd, b, true);
            GEMM(s, hd, kv, b, true);
            out->tp_colls = 3;
        }
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

typedef struct {
    double gemm;   /* weight GEMMs of the forward pass (backward: the same again for B and again for W) */
    double attn;   /* attention score GEMMs (batched, no weights) of the forward pass; backward twice this */
    double flops;  /* forward FLOPs on this GPU */
    double attn_flops; /* the part of flops in the attention score GEMMs (what selective recompute repeats) */
    int tp_colls;  /* TP collectives of the forward pass (the backward has as many) */
    int bwd_tp_colls;
} fwd_work;

/* The GEMMs of a layer on one GPU of a tp-way group, timed. */
static void layer_work(const ps_cost_params *p, const dev_speed *d, const ps_layer *l, int64_t mbs, int tp, double elt,
                       fwd_work *w)
{
    memset(w, 0, sizeof *w);
    ps_layer_gemms g;
    ps_layer_gemm_shapes(l, mbs, tp, &g);
    for (int i = 0; i < g.n; i++) {
        const ps_gemm_shape *x = &g.g[i];
        double t = gemm_time(p, d, x->m, x->n, x->k, x->count, elt), f = 2.0 * x->m * x->n * x->k * x->count;
        if (x->attn) {
            w->attn += t;
            w->attn_flops += f;
        } else {
            w->gemm += t;
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

/* Parameters a GPU holds of this layer before ZeRO sharding: TP splits the big matrices of blocks, embeddings and
 * heads; norms and biases are replicated in Megatron but are a rounding error next to the matrices. */
static double params_per_gpu(const ps_layer *l, int tp)
{
    double P = (double)ps_layer_params(l);
    switch (l->kind) {
    case PS_LAYER_CLS_HEAD:
    case PS_LAYER_PATCH_EMBED:
    case PS_LAYER_MERGE: return P;
    default: return P / tp;
    }
}

ps_status ps_cost_layer(const ps_cost_params *p, const ps_cluster *c, const ps_layer *l, ps_dtype dtype,
                        int64_t mbs, const ps_strategy *s, int64_t first, ps_layer_cost *out)
{
    memset(out, 0, sizeof *out);
    PS_CHECK_INPUT(s->tp >= 1 && s->dp >= 1, "strategy degrees must be >= 1 (tp %d, dp %d)", s->tp, s->dp);
    PS_CHECK_INPUT(s->zero >= 0 && s->zero <= 3, "ZeRO stage must be 0-3 (got %d)", s->zero);
    PS_CHECK_INPUT(mbs >= 1, "micro-batch size must be >= 1 (got %lld)", (long long)mbs);
    dev_speed d;
    PS_TRY(stage_speed(p, c, dtype, first, (int64_t)s->tp * s->dp, &d));
    double elt = ps_dtype_bytes(dtype);

    fwd_work w;
    layer_work(p, &d, l, mbs, s->tp, elt, &w);
    bool sp = s->sp && s->tp > 1;
    double act_full = ps_layer_act_bytes(l, dtype, s->tp, sp, PS_RECOMP_NONE) * (double)mbs;
    double act_sel = ps_layer_act_bytes(l, dtype, s->tp, sp, PS_RECOMP_SELECTIVE) * (double)mbs;
    double elem_f = p->elementwise_passes * act_full / d.stream + (act_full > 0 ? p->kernel_launch_s : 0);

    /* TP: Megatron's all-reduces (or reduce-scatter + all-gather with SP: the same bytes) of the layer output,
     * not overlapped with computation. */
    double tp_one = 0;
    out->tp_bytes = (double)mbs * (double)l->seq * (double)l->hidden * elt;
    if (s->tp > 1) {
        ps_group g = {first, s->tp, 1};
        tp_one = sp ? 2 * ps_coll_allgather(p, c, &g, out->tp_bytes) : ps_coll_allreduce(p, c, &g, out->tp_bytes);
    }
    double tp_f = w.tp_colls * tp_one, tp_b = w.bwd_tp_colls * tp_one;

    /* compute_scale (1 unless refitted from executed plans) corrects every computation time at once */
    double comp_f = p->compute_scale * (w.gemm + w.attn + elem_f);
    double recompute = 0, recompute_comm = 0;
    if (s->ckpt == PS_RECOMP_FULL) {
        recompute = comp_f; /* the whole forward again, its TP collectives included */
        recompute_comm = tp_f;
    } else if (s->ckpt == PS_RECOMP_SELECTIVE)
        /* only the attention core: score GEMMs and the elementwise work on the score tensors */
        recompute = p->compute_scale * (w.attn + p->elementwise_passes * (act_full - act_sel) / d.stream);
    /* input gradients: dgrad GEMMs; weight gradients: wgrad GEMMs */
    double comp_b = p->compute_scale * (w.gemm + 2 * w.attn + 2 * elem_f) + recompute;
    double comp_w = p->compute_scale * w.gemm;

    /* Memory. Mixed-precision Adam: weights and gradients in the training dtype, fp32 master weights + two moments
     * (12 bytes) when training in 16 bits, two fp32 moments (8 bytes) in fp32 (ZeRO, Rajbhandari et al. Sec. 3.1:
     * 2 + 2 + 12 = 16 bytes per parameter); ZeRO stage z shards the first z of {optimizer, gradients, weights}. */
    double P = params_per_gpu(l, s->tp), dp = s->dp;
    double opt = elt >= 4 ? 8 : 12;
    out->mem_params = P * elt / (s->zero >= 3 ? dp : 1);
    out->mem_grads = P * elt / (s->zero >= 2 ? dp : 1);
    out->mem_optim = P * opt / (s->zero >= 1 ? dp : 1);
    out->mem_act = ps_layer_act_bytes(l, dtype, s->tp, sp, s->ckpt) * (double)mbs;
    if (s->ckpt == PS_RECOMP_FULL)
        out->mem_temp = act_full; /* the recomputed layer lives until its backward is done */
    else if (s->ckpt == PS_RECOMP_SELECTIVE)
        out->mem_temp = act_full - act_sel;
    if (s->zero >= 3) out->mem_temp += 2 * P * elt; /* the gathered layer and the prefetched next one */

    /* Data parallelism. ZeRO-3 gathers weights for forward and backward and reduce-scatters gradients every
     * micro-batch, hidden behind computation when possible (prefetch); stages 0-2 synchronise once per iteration. */
    double zero_f = 0, zero_b = 0;
    if (s->dp > 1) {
        ps_group g = {first, s->dp, s->tp};
        double wbytes = P * elt, gbytes = P * p->grad_reduce_bytes;
        if (s->zero >= 3) {
            zero_f = ps_coll_allgather(p, c, &g, wbytes); /* the backward gathers the same weights again */
            zero_b = zero_f + ps_coll_reducescatter(p, c, &g, gbytes);
        } else if (s->zero >= 1) {
            out->dp_sync = ps_coll_reducescatter(p, c, &g, gbytes) + ps_coll_allgather(p, c, &g, wbytes);
        } else {
            out->dp_sync = ps_coll_allreduce(p, c, &g, gbytes);
        }
    }
    out->zero_comm = zero_f + zero_b;
    out->tp_comm = tp_f + tp_b;
    out->recompute = recompute + recompute_comm;
    out->fwd = (zero_f > 0 ? ps_cost_overlapped(p, comp_f, zero_f) : comp_f) + tp_f;
    double bw_both = comp_b + comp_w;
    double bw_exposed = zero_b > 0 ? ps_cost_overlapped(p, bw_both, zero_b) - bw_both : 0;
    out->bwd_b = comp_b + tp_b + recompute_comm;
    out->bwd_w = comp_w + bw_exposed;
    out->comp_fwd = comp_f;
    out->comp_bwd_b = comp_b;
    out->comp_bwd_w = comp_w;
    out->comm_fwd = tp_f + zero_f;
    out->comm_bwd_b = tp_b + recompute_comm;
    out->comm_bwd_w = zero_b;
    double rec_flops = s->ckpt == PS_RECOMP_FULL ? w.flops : s->ckpt == PS_RECOMP_SELECTIVE ? w.attn_flops : 0;
    out->hw_flops = 3 * w.flops + rec_flops; /* forward, dgrad, wgrad (attention: 2x in backward, same total) */
    return PS_OK;
}

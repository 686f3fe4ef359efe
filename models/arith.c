/* Per-layer arithmetic: parameters, forward FLOPs, activation bytes kept for the backward pass, stage-boundary bytes;
 * and the names of the enums. Formulas and their sources are in docs/models.md. */
#include <stdio.h>
#include <string.h>

#include "models_internal.h"

/* ---- names ---------------------------------------------------------------------------------------------------- */

static const char *const g_kind_names[PS_LAYER_KIND_COUNT] = {
    [PS_LAYER_EMBED] = "embedding",     [PS_LAYER_PATCH_EMBED] = "patch_embed",
    [PS_LAYER_ENCODER] = "encoder",     [PS_LAYER_DECODER] = "decoder",
    [PS_LAYER_DECODER_XATTN] = "decoder_xattn", [PS_LAYER_MERGE] = "merge",
    [PS_LAYER_LM_HEAD] = "lm_head",     [PS_LAYER_CLS_HEAD] = "cls_head",
};

const char *ps_layer_kind_name(ps_layer_kind k)
{
    if ((int)k < 0 || k >= PS_LAYER_KIND_COUNT) return "?";
    return g_kind_names[k];
}

bool ps_layer_is_block(ps_layer_kind k)
{
    return k != PS_LAYER_EMBED && k != PS_LAYER_PATCH_EMBED && k != PS_LAYER_LM_HEAD && k != PS_LAYER_CLS_HEAD;
}

bool ps_layer_has_attention(ps_layer_kind k)
{
    return k == PS_LAYER_ENCODER || k == PS_LAYER_DECODER || k == PS_LAYER_DECODER_XATTN;
}

ps_status ps_layer_kind_parse(const char *s, ps_layer_kind *out)
{
    const char *best = NULL;
    int best_d = 1000;
    for (int k = 0; k < PS_LAYER_KIND_COUNT; k++) {
        if (strcmp(s, g_kind_names[k]) == 0) {
            *out = (ps_layer_kind)k;
            return PS_OK;
        }
        int d = ps_edit_distance(s, g_kind_names[k]);
        if (d < best_d) {
            best_d = d;
            best = g_kind_names[k];
        }
    }
    char hint[64] = "";
    if (best && best_d <= 3) snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
    return PS_FAIL(PS_ERR_INPUT,
                   "unknown layer kind '%s'%s; known kinds: embedding, patch_embed, encoder, decoder, decoder_xattn, "
                   "merge, lm_head, cls_head",
                   s, hint);
}

int ps_dtype_bytes(ps_dtype d)
{
    switch (d) {
    case PS_DTYPE_FP32: return 4;
    case PS_DTYPE_FP16: return 2;
    case PS_DTYPE_BF16: return 2;
    case PS_DTYPE_FP8: return 1;
    }
    return 0;
}

const char *ps_dtype_name(ps_dtype d)
{
    switch (d) {
    case PS_DTYPE_FP32: return "fp32";
    case PS_DTYPE_FP16: return "fp16";
    case PS_DTYPE_BF16: return "bf16";
    case PS_DTYPE_FP8: return "fp8";
    }
    return "?";
}

ps_status ps_dtype_parse(const char *s, ps_dtype *out)
{
    /* The long spellings are what Hugging Face configs write in "torch_dtype". */
    static const struct {
        const char *name;
        ps_dtype d;
    } names[] = {{"fp32", PS_DTYPE_FP32},     {"float32", PS_DTYPE_FP32}, {"fp16", PS_DTYPE_FP16},
                 {"float16", PS_DTYPE_FP16},  {"half", PS_DTYPE_FP16},    {"bf16", PS_DTYPE_BF16},
                 {"bfloat16", PS_DTYPE_BF16}, {"fp8", PS_DTYPE_FP8}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].d;
            return PS_OK;
        }
    }
    return PS_FAIL(PS_ERR_INPUT, "unknown dtype '%s' (known: fp32, fp16, bf16, fp8)", s);
}

const char *ps_recompute_name(ps_recompute r)
{
    switch (r) {
    case PS_RECOMP_NONE: return "none";
    case PS_RECOMP_SELECTIVE: return "selective";
    case PS_RECOMP_FULL: return "full";
    case PS_RECOMP_OP: return "op";
    case PS_RECOMP_COUNT: break;
    }
    return "?";
}

ps_status ps_recompute_parse(const char *s, ps_recompute *out)
{
    for (int r = PS_RECOMP_NONE; r < PS_RECOMP_COUNT; r++) {
        if (strcmp(s, ps_recompute_name((ps_recompute)r)) == 0) {
            *out = (ps_recompute)r;
            return PS_OK;
        }
    }
    return PS_FAIL(PS_ERR_INPUT, "unknown recompute mode '%s' (known: none, selective, full, op)", s);
}

static const char *const k_attn_names[PS_ATTN_COUNT] = {"auto", "unfused", "fused"};

const char *ps_attn_name(ps_attn a) { return (int)a >= 0 && a < PS_ATTN_COUNT ? k_attn_names[a] : "?"; }

ps_status ps_attn_parse(const char *s, ps_attn *out)
{
    for (int a = 0; a < PS_ATTN_COUNT; a++)
        if (strcmp(s, k_attn_names[a]) == 0) {
            *out = (ps_attn)a;
            return PS_OK;
        }
    return PS_FAIL(PS_ERR_INPUT, "unknown attention implementation '%s' (known: auto, fused, unfused)", s);
}

/* ---- parameters ------------------------------------------------------------------------------------------------ */

/* Checked products and sums: one overflow anywhere poisons the whole count, so the caller tests once. */
static int64_t cmul(bool *ovf, int64_t a, int64_t b)
{
    int64_t r;
    if (!ps_mul_i64(a, b, &r)) {
        *ovf = true;
        return 0;
    }
    return r;
}

static int64_t cadd(bool *ovf, int64_t a, int64_t b)
{
    int64_t r;
    if (!ps_add_i64(a, b, &r)) {
        *ovf = true;
        return 0;
    }
    return r;
}

static bool is_gated(ps_mlp_act a) { return a == PS_ACT_SWIGLU || a == PS_ACT_GEGLU; }

/* LayerNorm has a gain and a bias per channel, RMSNorm only a gain. */
static int64_t norm_params(bool *ovf, ps_norm_kind n, int64_t width)
{
    return cmul(ovf, n == PS_NORM_RMSNORM ? 1 : 2, width);
}

bool ps_layer_is_moe(const ps_layer *l) { return ps_layer_has_attention(l->kind) && l->n_experts > 0; }

bool ps_model_has_moe(const ps_model *m)
{
    for (int64_t i = 0; i < m->n_layers; i++)
        if (ps_layer_is_moe(&m->layers[i])) return true;
    return false;
}
bool ps_layer_is_mla(const ps_layer *l) { return ps_layer_has_attention(l->kind) && l->kv_lora_rank > 0; }

/* Multi-head latent attention, as DeepSeek-V3's modeling code builds it (transformers' DeepseekV3Attention): queries
 * through q_a_proj h x q_lora, its RMSNorm and q_b_proj q_lora x H*(nope+rope) (or q_proj h x H*(nope+rope) when
 * q_lora_rank is 0); keys and values from kv_a_proj_with_mqa h x (kv_lora + rope), its norm on the kv_lora part,
 * and kv_b_proj kv_lora x H*(nope+v); o_proj H*v x h. Biases (none in DeepSeek) on every projection's output. */
static int64_t mla_params(bool *ovf, const ps_layer *l)
{
    int64_t h = l->hidden, H = l->heads, ql = l->q_lora_rank, kl = l->kv_lora_rank, rope = l->qk_rope_head_dim;
    int64_t qk = cmul(ovf, H, cadd(ovf, l->qk_nope_head_dim, rope));
    int64_t kvb = cmul(ovf, H, cadd(ovf, l->qk_nope_head_dim, l->v_head_dim));
    int64_t vo = cmul(ovf, H, l->v_head_dim);
    int64_t p = ql > 0 ? cadd(ovf, cadd(ovf, cmul(ovf, h, ql), norm_params(ovf, l->norm, ql)), cmul(ovf, ql, qk))
                       : cmul(ovf, h, qk);
    p = cadd(ovf, p, cmul(ovf, h, cadd(ovf, kl, rope)));
    p = cadd(ovf, p, norm_params(ovf, l->norm, kl));
    p = cadd(ovf, p, cmul(ovf, kl, kvb));
    p = cadd(ovf, p, cmul(ovf, vo, h));
    if (l->bias) p = cadd(ovf, p, cadd(ovf, cadd(ovf, cadd(ovf, ql, qk), cadd(ovf, cadd(ovf, kl, rope), kvb)), h));
    return p;
}

/* One MLP of inner width f: 2 or 3 (gated) matrices h x f, and their biases. */
static int64_t mlp_params(bool *ovf, const ps_layer *l, int64_t f)
{
    bool gated = is_gated(l->act);
    int64_t h = l->hidden;
    int64_t p = cmul(ovf, cmul(ovf, gated ? 3 : 2, h), f);
    if (l->bias) p = cadd(ovf, p, cadd(ovf, cmul(ovf, gated ? 2 : 1, f), h));
    return p;
}

/* The router: a linear h x n_experts without bias (Mixtral, Qwen-MoE, DeepSeek-V3 alike), plus DeepSeek-V3's
 * per-expert selection bias under sigmoid routing (e_score_correction_bias). Qwen2-MoE's shared_expert_gate (h x 1)
 * is left out: h parameters next to the experts' billions. */
static int64_t router_params(bool *ovf, const ps_layer *l)
{
    int64_t p = cmul(ovf, l->hidden, l->n_experts);
    if (l->router == PS_ROUTER_SIGMOID) p = cadd(ovf, p, l->n_experts);
    return p;
}

/* The MLP part of a block: the dense MLP, or an MoE layer's router, `routed` of its routed experts and all of its
 * shared experts (routed = n_experts for the stored parameters, top_k for the ones a token uses). */
static int64_t ffn_params(bool *ovf, const ps_layer *l, int64_t routed)
{
    if (!ps_layer_is_moe(l)) return mlp_params(ovf, l, l->ffn_hidden);
    int64_t p = router_params(ovf, l);
    p = cadd(ovf, p, cmul(ovf, routed, mlp_params(ovf, l, l->expert_ffn)));
    if (l->n_shared_experts > 0) p = cadd(ovf, p, cmul(ovf, l->n_shared_experts, mlp_params(ovf, l, l->shared_ffn)));
    return p;
}

/* Wq h x Q, Wk and Wv h x K, Wo Q x h, and their biases. */
static int64_t attn_params(bool *ovf, const ps_layer *l)
{
    if (l->kv_lora_rank > 0) return mla_params(ovf, l);
    int64_t h = l->hidden;
    int64_t q = cmul(ovf, l->heads, l->head_dim);
    int64_t k = cmul(ovf, l->kv_heads, l->head_dim);
    int64_t p = cmul(ovf, h, cadd(ovf, cadd(ovf, q, q), cmul(ovf, 2, k)));
    if (l->bias) p = cadd(ovf, p, cadd(ovf, cadd(ovf, q, cmul(ovf, 2, k)), h));
    return p;
}

/* Parameters of layer l with `routed` routed experts counted (-1: all of them). */
static bool layer_params(const ps_layer *l, int64_t routed, int64_t *out)
{
    bool ovf = false;
    int64_t h = l->hidden, p = 0;
    switch (l->kind) {
    case PS_LAYER_EMBED:
        p = cmul(&ovf, cadd(&ovf, cadd(&ovf, l->vocab, l->positions), l->token_types), h);
        if (l->pooler) p = cadd(&ovf, p, norm_params(&ovf, l->norm, h)); /* BERT's embedding LayerNorm */
        break;
    case PS_LAYER_PATCH_EMBED:
        /* conv(channels*patch^2 -> h) with bias, learned positions, [CLS] */
        p = cmul(&ovf, cmul(&ovf, l->channels, cmul(&ovf, l->patch, l->patch)), h);
        p = cadd(&ovf, p, h);
        p = cadd(&ovf, p, cmul(&ovf, l->positions, h));
        if (l->cls_token) p = cadd(&ovf, p, h);
        break;
    case PS_LAYER_ENCODER:
    case PS_LAYER_DECODER:
    case PS_LAYER_DECODER_XATTN: {
        p = attn_params(&ovf, l);
        if (l->kind == PS_LAYER_DECODER_XATTN) p = cadd(&ovf, p, attn_params(&ovf, l));
        p = cadd(&ovf, p, ffn_params(&ovf, l, routed < 0 ? l->n_experts : routed));
        int norms = l->kind == PS_LAYER_DECODER_XATTN ? 3 : 2;
        p = cadd(&ovf, p, cmul(&ovf, norms, norm_params(&ovf, l->norm, h)));
        break;
    }
    case PS_LAYER_MERGE: {
        int64_t c4 = cmul(&ovf, 4, h);
        p = cadd(&ovf, norm_params(&ovf, l->norm, c4), cmul(&ovf, c4, l->out_hidden));
        break;
    }
    case PS_LAYER_LM_HEAD:
        if (l->pooler) {
            /* BERT pre-training heads (post-LN model, so no separate final norm): MLM transform dense h x h + bias,
             * its LayerNorm, the decoder bias over the vocabulary, and the pooler dense feeding NSP. */
            int64_t dense = cadd(&ovf, cmul(&ovf, h, h), h);
            p = cadd(&ovf, cadd(&ovf, cmul(&ovf, 2, dense), norm_params(&ovf, l->norm, h)), l->vocab);
        } else {
            p = norm_params(&ovf, l->norm, h);
        }
        if (!l->tied) p = cadd(&ovf, p, cmul(&ovf, l->vocab, h));
        break;
    case PS_LAYER_CLS_HEAD:
        p = norm_params(&ovf, l->norm, h);
        if (l->pooler) p = cadd(&ovf, p, cadd(&ovf, cmul(&ovf, h, h), h));
        p = cadd(&ovf, p, cadd(&ovf, cmul(&ovf, h, l->n_classes), l->n_classes));
        break;
    case PS_LAYER_KIND_COUNT: ovf = true; break;
    }
    if (ovf) return false;
    *out = p;
    return true;
}

bool ps_layer_params_checked(const ps_layer *l, int64_t *out) { return layer_params(l, -1, out); }

int64_t ps_layer_params(const ps_layer *l)
{
    int64_t p;
    /* -1 only for a layer that ps_model_validate would have refused. */
    return ps_layer_params_checked(l, &p) ? p : -1;
}

int64_t ps_layer_routed_params(const ps_layer *l)
{
    int64_t all, none;
    if (!ps_layer_is_moe(l)) return 0;
    if (!layer_params(l, -1, &all) || !layer_params(l, 0, &none)) return -1;
    return all - none;
}

int64_t ps_layer_active_params(const ps_layer *l)
{
    int64_t p;
    /* a token goes through top_k of the routed experts; dense layers use all of their parameters */
    return layer_params(l, l->top_k, &p) ? p : -1;
}

/* ---- FLOPs ----------------------------------------------------------------------------------------------------- */

/* Keys each query attends: a window (Swin, sliding-window attention) when it is shorter than the sequence. */
static double attn_ctx(const ps_layer *l)
{
    return (l->attn_window > 0 && l->attn_window < l->seq) ? (double)l->attn_window : (double)l->seq;
}

double ps_layer_fwd_flops(const ps_layer *l)
{
    double h = (double)l->hidden, s = (double)l->seq;
    switch (l->kind) {
    case PS_LAYER_EMBED: return 0.0; /* a table lookup, no multiply-adds */
    case PS_LAYER_PATCH_EMBED: {
        double patches = s - (l->cls_token ? 1.0 : 0.0);
        return 2.0 * patches * (double)l->channels * (double)l->patch * (double)l->patch * h;
    }
    case PS_LAYER_ENCODER:
    case PS_LAYER_DECODER:
    case PS_LAYER_DECODER_XATTN: {
        double q = (double)l->heads * (double)l->head_dim, k = (double)l->kv_heads * (double)l->head_dim;
        double f;
        if (ps_layer_is_mla(l)) {
            /* the projections of mla_params, each 2 FLOPs per weight per token; the scores over the head_dim =
             * nope + rope wide Q and K, the weighted sum over the v_head_dim wide V */
            double H = (double)l->heads, ql = (double)l->q_lora_rank, kl = (double)l->kv_lora_rank;
            double rope = (double)l->qk_rope_head_dim, v = H * (double)l->v_head_dim;
            double kvb = H * ((double)l->qk_nope_head_dim + (double)l->v_head_dim);
            f = 2.0 * s * (ql > 0 ? h * ql + ql * q : h * q);
            f += 2.0 * s * (h * (kl + rope) + kl * kvb + v * h);
            f += 2.0 * s * attn_ctx(l) * (q + v);
        } else {
            f = 2.0 * s * (h * (q + 2.0 * k) + q * h); /* QKV and output projections */
            f += 2.0 * 2.0 * s * attn_ctx(l) * q;       /* scores QK^T and the weighted sum over V */
        }
        double gm = is_gated(l->act) ? 3.0 : 2.0;
        if (ps_layer_is_moe(l)) {
            /* the router GEMM over every expert, then each token through top_k routed experts and every shared one
             * (model FLOPs: tokens a capacity factor drops are counted as routed, as the model defines them) */
            f += 2.0 * s * h * (double)l->n_experts;
            f += 2.0 * s * (double)l->top_k * h * (double)l->expert_ffn * gm;
            f += 2.0 * s * (double)l->n_shared_experts * h * (double)l->shared_ffn * gm;
        } else {
            f += 2.0 * s * h * (double)l->ffn_hidden * gm;
        }
        if (l->kind == PS_LAYER_DECODER_XATTN) {
            double kv = (double)l->kv_seq;
            f += 2.0 * s * h * q + 2.0 * kv * h * 2.0 * k + 2.0 * s * q * h + 2.0 * 2.0 * s * kv * q;
        }
        return f;
    }
    case PS_LAYER_MERGE: return 2.0 * (s / 4.0) * 4.0 * h * (double)l->out_hidden;
    case PS_LAYER_LM_HEAD: {
        double f = 2.0 * s * h * (double)l->vocab;
        if (l->pooler) f += 2.0 * s * h * h + 2.0 * h * h; /* MLM transform on every token, pooler on [CLS] */
        return f;
    }
    case PS_LAYER_CLS_HEAD: {
        double f = 2.0 * h * (double)l->n_classes; /* on the one pooled token */
        if (l->pooler) f += 2.0 * h * h;
        return f;
    }
    case PS_LAYER_KIND_COUNT: break;
    }
    return 0.0;
}

double ps_layer_attn_keys(const ps_layer *l, ps_attn a)
{
    double ctx = attn_ctx(l), s = (double)l->seq;
    bool causal = l->kind == PS_LAYER_DECODER || l->kind == PS_LAYER_DECODER_XATTN;
    if (a != PS_ATTN_FUSED || !causal || !(s > 0)) return ctx;
    /* query i (0-based) attends keys max(0, i - w + 1) .. i: min(i + 1, w) of them; the mean over the s queries */
    double w = ctx;
    return (w * (w + 1) / 2 + (s - w) * w) / s;
}

double ps_attn_bwd_flops(ps_attn a, double score_flops, double value_flops)
{
    return a == PS_ATTN_FUSED ? 3 * score_flops + 2 * value_flops : 2 * (score_flops + value_flops);
}

/* ---- activation memory ----------------------------------------------------------------------------------------- */

/* Bytes of one self- or cross-attention sub-block, split into the part every tensor-parallel rank keeps whole
 * (`rep`, divided by t only under sequence parallelism) and the part split across ranks (`split`, divided by t).
 * q_tokens queries attend kv_tokens keys; `scores` gets the softmax / dropout terms that selective recompute drops. */
static void attn_act(const ps_layer *l, double d, double lin, double q_tokens, double kv_tokens, double ctx,
                     bool fused, double *rep, double *split, double *scores, double *stats)
{
    double h = (double)l->hidden, a = (double)l->heads;
    /* v: V's width (the key width K with ordinary attention), o: the output projection's input (Q's width) */
    double q = a * (double)l->head_dim, k = (double)l->kv_heads * (double)l->head_dim, v = k, o = q;
    *rep += d * q_tokens * h;                   /* norm input */
    *rep += lin * q_tokens * h;                 /* Q (and for self-attention K, V) projection input */
    if (ps_layer_is_mla(l)) {
        /* MLA: the down projections' outputs are whole on every TP rank (Megatron-core's MLA keeps
         * linear_q_down_proj and linear_kv_down_proj unsplit): the q latent as its norm's input and, normed, as
         * q_b_proj's input; the kv latent likewise for kv_b_proj; the shared rotary key before rotation. Then Q and
         * K at head_dim = nope + rope per head and V at v_head_dim, split over the heads as usual. */
        double ql = (double)l->q_lora_rank, kl = (double)l->kv_lora_rank;
        *rep += (d + lin) * q_tokens * ql + (d + lin) * kv_tokens * kl + d * kv_tokens * (double)l->qk_rope_head_dim;
        v = o = a * (double)l->v_head_dim;
    }
    *split += d * (q_tokens * q + kv_tokens * k); /* Q and K, kept for the score matmul's backward */
    if (fused) {
        *stats += 4.0 * a * q_tokens; /* fp32 log-sum-exp per head and query: all the fused backward needs of them */
    } else {
        *scores += d * a * q_tokens * ctx; /* softmax output */
        if (l->dropout) *scores += a * q_tokens * ctx + d * a * q_tokens * ctx; /* dropout mask + dropout output */
    }
    *split += d * kv_tokens * v;                /* V */
    *split += lin * q_tokens * o;               /* output projection input: the heads' weighted sums of V */
    if (l->dropout) *rep += q_tokens * h;       /* residual dropout mask */
}

int ps_layer_linears(const ps_layer *l, int tp, ps_linear out[PS_LINEARS_MAX])
{
    if (!ps_layer_has_attention(l->kind)) return 0;
    double t = tp > 0 ? (double)tp : 1.0, s = (double)l->seq, h = (double)l->hidden;
    double q = (double)l->heads * (double)l->head_dim / t, k = (double)l->kv_heads * (double)l->head_dim / t;
    double f = (double)l->ffn_hidden / t;
    int n = 0;
    for (int x = 0; x < (l->kind == PS_LAYER_DECODER_XATTN ? 2 : 1); x++) {
        double kv = x ? (double)l->kv_seq : s; /* cross-attention's keys and values come from the encoder tokens */
        out[n++] = (ps_linear){s, q, h, false};
        out[n++] = (ps_linear){kv, k, h, false};
        out[n++] = (ps_linear){kv, k, h, false};
        out[n++] = (ps_linear){s, h, q, true};
    }
    out[n++] = (ps_linear){s, f, h, false};
    if (is_gated(l->act)) out[n++] = (ps_linear){s, f, h, false};
    out[n++] = (ps_linear){s, h, f, true};
    return n;
}

bool ps_op_sac_keeps(int i, ps_dtype d) { return d != PS_DTYPE_FP8 && i % 2 == 0; }

/* PS_RECOMP_OP (ps_recompute): what a block keeps per sample, as ps_layer_act_bytes_attn splits it. */
static double op_sac_bytes(const ps_layer *l, ps_dtype dtype, double d, double t, bool sp, bool fused)
{
    ps_linear lin[PS_LINEARS_MAX];
    int n = ps_layer_linears(l, (int)t, lin);
    double s = (double)l->seq, h = (double)l->hidden, a = (double)l->heads;
    double rep = d * s * h; /* the checkpoint's input */
    double split = 0, whole = 0;
    for (int i = 0; i < n; i++) {
        if (!ps_op_sac_keeps(i, dtype)) continue;
        /* a row-parallel output is the full-width partial sum, on every rank; a column-parallel one its columns */
        if (lin[i].row)
            whole += d * lin[i].tokens * lin[i].n_out;
        else
            split += d * lin[i].tokens * lin[i].n_out * t;
    }
    int blocks = l->kind == PS_LAYER_DECODER_XATTN ? 3 : 2;
    /* the fused kernel's output and fp32 log-sum-exp per head and query (in the save list); an unfused (math)
     * attention decomposes into bmm and softmax, which are not, so it keeps nothing of its own */
    if (fused) split += (blocks - 1) * (d * s * a * (double)l->head_dim + 4.0 * a * s);
    /* with sequence parallelism, each block's reduce-scatter output (its 1/t of the tokens; in the save list) */
    if (sp && t > 1) rep += blocks * d * s * h;
    return rep / (sp ? t : 1.0) + split / t + whole;
}

/* The routed half of an MoE block, per sample of s tokens, as a dropless token-dispatching MoE layer (Megatron-core's
 * MoEAlltoAllTokenDispatcher with TEGroupedMLP) keeps it for the backward:
 * - the router's probabilities, E per token (softmax's and sigmoid's backward need only their output), and the top-k
 *   selection: k routing weights in the activation dtype and k int64 expert indices per token (torch.topk's output,
 *   which the permutation's backward reuses);
 * - the permuted tokens, k copies of each token's h-wide input (the experts' first GEMM keeps them for its weight
 *   gradient), whole on every TP rank like the dense MLP's input;
 * - each expert's intermediate as for a dense MLP (the activation function's inputs, 2 gated, and the second GEMM's
 *   input), split over TP like it;
 * - the experts' h-wide outputs before the weighted combine (the routing weights' gradient is their dot product
 *   with the output gradient).
 * A capacity factor below 1 caps the tokens the experts take at cf x the even share; above 1 (or dropless) every
 * token reaches its k experts, so the count is s*k either way at most. */
static void moe_parts(const ps_layer *l, double d, double lin, double s, double *tok, double *inner)
{
    double h = (double)l->hidden, k = (double)l->top_k, fe = (double)l->expert_ffn;
    double cf = l->capacity_factor, routed = s * k * (cf > 0 && cf < 1 ? cf : 1.0);
    double g = is_gated(l->act) ? 2.0 : 1.0;
    *tok = lin * routed * h + d * routed * h; /* permuted expert inputs, expert outputs */
    *inner = g * d * routed * fe + lin * routed * fe;
}

static void moe_act(const ps_layer *l, double d, double lin, double s, double *rep, double *split)
{
    double tok, inner;
    *rep += d * s * (double)l->n_experts + (d + 8.0) * s * (double)l->top_k; /* probabilities; weights, indices */
    moe_parts(l, d, lin, s, &tok, &inner);
    *rep += tok;
    *split += inner;
}

void ps_layer_moe_act_parts(const ps_layer *l, ps_dtype dtype, double *tok, double *inner)
{
    *tok = *inner = 0;
    if (!ps_layer_is_moe(l)) return;
    double d = ps_act_elt_bytes(dtype);
    moe_parts(l, d, dtype == PS_DTYPE_FP8 ? 1.0 : d, (double)l->seq, tok, inner);
}

double ps_layer_act_bytes(const ps_layer *l, ps_dtype dtype, int tp, bool seq_parallel, ps_recompute rc)
{
    return ps_layer_act_bytes_attn(l, dtype, tp, seq_parallel, rc, PS_ATTN_UNFUSED);
}

double ps_act_elt_bytes(ps_dtype dtype)
{
    /* FP8 training (Transformer Engine's recipe) keeps activations in BF16: only the GEMMs of the linear layers read
     * FP8 copies of their inputs */
    return dtype == PS_DTYPE_FP8 ? 2.0 : (double)ps_dtype_bytes(dtype);
}

double ps_layer_act_bytes_attn(const ps_layer *l, ps_dtype dtype, int tp, bool seq_parallel, ps_recompute rc,
                               ps_attn attn)
{
    double d = ps_act_elt_bytes(dtype);
    /* the input a linear layer keeps for its weight gradient: TE saves the FP8 copy it cast for the forward GEMM
     * (transformer_engine/pytorch/module/linear.py keeps the quantized input), 1 byte; else the activation itself */
    double lin = dtype == PS_DTYPE_FP8 ? 1.0 : d;
    double t = tp > 0 ? (double)tp : 1.0;
    double rep_div = seq_parallel ? t : 1.0;
    double h = (double)l->hidden, s = (double)l->seq;
    double rep = 0.0, split = 0.0, scores = 0.0, stats = 0.0;
    bool fused = attn == PS_ATTN_FUSED;

    switch (l->kind) {
    case PS_LAYER_ENCODER:
    case PS_LAYER_DECODER:
    case PS_LAYER_DECODER_XATTN: {
        /* Full recomputation keeps only the layer input (Korthikanti et al. 2022, Sec. 4). */
        if (rc == PS_RECOMP_FULL) return d * s * h / rep_div;
        if (rc == PS_RECOMP_OP) return op_sac_bytes(l, dtype, d, t, seq_parallel, fused);
        attn_act(l, d, lin, s, s, attn_ctx(l), fused, &rep, &split, &scores, &stats);
        if (l->kind == PS_LAYER_DECODER_XATTN) {
            /* Cross-attention: queries from the decoder, K and V from kv_seq encoder tokens. The encoder output
             * itself is shared by every cross-attention layer of the stage and is counted once, at the boundary. */
            double kv = (double)l->kv_seq;
            double rep_x = 0.0;
            attn_act(l, d, lin, s, kv, kv, fused, &rep_x, &split, &scores, &stats);
            rep += rep_x;
        }
        double f = (double)l->ffn_hidden, g = is_gated(l->act) ? 2.0 : 1.0;
        rep += d * s * h;   /* MLP norm input */
        rep += lin * s * h; /* first MLP linear input (an MoE layer's router and shared experts read it too) */
        if (ps_layer_is_moe(l)) {
            moe_act(l, d, lin, s, &rep, &split);
            f = (double)l->n_shared_experts * (double)l->shared_ffn; /* the shared experts: a dense MLP as below */
        }
        /* the activation function's input (two of them gated) and the second linear's input */
        split += g * d * s * f + lin * s * f;
        if (l->dropout) rep += s * h;
        if (rc == PS_RECOMP_SELECTIVE) scores = 0.0;
        /* the statistics are split with the heads, like the scores they stand for */
        return rep / rep_div + (split + scores + stats) / t;
    }
    case PS_LAYER_EMBED:
        if (l->pooler) rep += d * s * h; /* embedding norm input */
        if (l->dropout) rep += s * h;    /* embedding dropout mask */
        return rep / rep_div;
    case PS_LAYER_PATCH_EMBED: {
        double patches = s - (l->cls_token ? 1.0 : 0.0);
        rep += d * patches * (double)l->channels * (double)l->patch * (double)l->patch; /* the image, conv input */
        if (l->dropout) rep += s * h;
        return rep / rep_div;
    }
    case PS_LAYER_MERGE:
        /* s/4 tokens of 4C channels = s*C elements, kept as norm input and as linear input */
        rep += 2.0 * d * s * h;
        return rep / rep_div;
    case PS_LAYER_LM_HEAD:
        /* final norm input and projection input; BERT's MLM transform keeps dense, GELU, norm and decoder inputs */
        rep += (l->pooler ? 4.0 : 2.0) * d * s * h;
        /* logits are kept in fp32 for the cross entropy, split over the vocabulary-parallel ranks */
        split += 4.0 * s * (double)l->vocab;
        return rep / rep_div + split / t;
    case PS_LAYER_CLS_HEAD:
        rep += d * s * h;               /* final norm input (every token) */
        rep += d * h;                   /* classifier input: the pooled token */
        if (l->pooler) rep += d * h;    /* pooler input */
        rep += 4.0 * (double)l->n_classes; /* fp32 logits */
        return rep / rep_div;
    case PS_LAYER_KIND_COUNT: break;
    }
    return 0.0;
}

double ps_layer_boundary_bytes(const ps_layer *l, ps_dtype dtype)
{
    double d = ps_act_elt_bytes(dtype);
    double s = (double)l->seq;
    switch (l->kind) {
    case PS_LAYER_MERGE: return d * (s / 4.0) * (double)l->out_hidden;
    case PS_LAYER_LM_HEAD:
    case PS_LAYER_CLS_HEAD: return 0.0; /* only the scalar loss leaves a head */
    case PS_LAYER_DECODER_XATTN:
        /* the encoder output travels with the decoder's hidden state to every later cross-attention stage */
        return d * s * (double)l->out_hidden + d * (double)l->kv_seq * (double)l->hidden;
    default: return d * s * (double)l->out_hidden;
    }
}

/* ---- whole model ----------------------------------------------------------------------------------------------- */

int64_t ps_layer_copies(const ps_model *m, int64_t i)
{
    int64_t j = i + 1;
    while (j < m->n_layers && memcmp(&m->layers[j], &m->layers[i], sizeof m->layers[i]) == 0) j++;
    return j - i;
}

/* Integer sums go run by run (count x one layer, overflow-checked, exact either way); the floating-point sums below
 * stay layer by layer so that their rounding does not depend on how a model was written down. */
int64_t ps_model_params(const ps_model *m)
{
    int64_t total = 0;
    for (int64_t i = 0, n; i < m->n_layers; i += n) {
        n = ps_layer_copies(m, i);
        int64_t p;
        if (!ps_layer_params_checked(&m->layers[i], &p) || !ps_mul_i64(p, n, &p) || !ps_add_i64(total, p, &total))
            return -1;
    }
    return total;
}

int64_t ps_model_active_params(const ps_model *m)
{
    int64_t total = 0;
    for (int64_t i = 0, n; i < m->n_layers; i += n) {
        n = ps_layer_copies(m, i);
        int64_t p = ps_layer_active_params(&m->layers[i]);
        if (p < 0 || !ps_mul_i64(p, n, &p) || !ps_add_i64(total, p, &total)) return -1;
    }
    return total;
}

double ps_model_fwd_flops(const ps_model *m)
{
    double f = 0.0;
    for (int64_t i = 0; i < m->n_layers; i++) f += ps_layer_fwd_flops(&m->layers[i]);
    return f;
}

double ps_model_train_flops(const ps_model *m) { return 3.0 * ps_model_fwd_flops(m); }


bool ps_layer_equal(const ps_layer *a, const ps_layer *b)
{
    return a->kind == b->kind && a->hidden == b->hidden && a->out_hidden == b->out_hidden && a->heads == b->heads &&
           a->kv_heads == b->kv_heads && a->head_dim == b->head_dim && a->ffn_hidden == b->ffn_hidden &&
           a->seq == b->seq && a->kv_seq == b->kv_seq && a->attn_window == b->attn_window && a->vocab == b->vocab &&
           a->positions == b->positions && a->token_types == b->token_types && a->n_classes == b->n_classes &&
           a->channels == b->channels && a->patch == b->patch && a->norm == b->norm && a->act == b->act &&
           a->bias == b->bias && a->dropout == b->dropout && a->tied == b->tied && a->pooler == b->pooler &&
           a->cls_token == b->cls_token && a->n_experts == b->n_experts && a->top_k == b->top_k &&
           a->expert_ffn == b->expert_ffn && a->n_shared_experts == b->n_shared_experts &&
           a->shared_ffn == b->shared_ffn && a->capacity_factor == b->capacity_factor && a->router == b->router &&
           a->router_groups == b->router_groups && a->router_group_topk == b->router_group_topk &&
           a->q_lora_rank == b->q_lora_rank && a->kv_lora_rank == b->kv_lora_rank &&
           a->qk_nope_head_dim == b->qk_nope_head_dim && a->qk_rope_head_dim == b->qk_rope_head_dim &&
           a->v_head_dim == b->v_head_dim;
}

/* The layer fields every reader accepts, how a layer inherits them from the model's defaults, the values implied when
 * they are absent, and the checks a concrete layer must pass. One table so that the JSON and layer-list formats
 * cannot drift apart. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

#define K(x) (1u << (x))
#define K_ATTN (K(PS_LAYER_ENCODER) | K(PS_LAYER_DECODER) | K(PS_LAYER_DECODER_XATTN))
#define K_ALL ((1u << PS_LAYER_KIND_COUNT) - 1u)
#define F(name, type, lo, kinds) {#name, type, offsetof(ps_layer, name), lo, kinds}

const ps_field_def ps_layer_fields[] = {
    F(hidden, PS_FT_INT, 1, K_ALL),
    F(out_hidden, PS_FT_INT, 1, K(PS_LAYER_MERGE)),
    F(heads, PS_FT_INT, 1, K_ATTN),
    F(kv_heads, PS_FT_INT, 1, K_ATTN),
    F(head_dim, PS_FT_INT, 1, K_ATTN),
    F(ffn_hidden, PS_FT_INT, 1, K_ATTN),
    F(seq, PS_FT_INT, 1, K_ALL),
    F(kv_seq, PS_FT_INT, 1, K(PS_LAYER_DECODER_XATTN)),
    F(attn_window, PS_FT_INT, 0, K_ATTN),
    /* 0 allowed: a position-only embedding (TransGAN adds learned positions between stages) */
    F(vocab, PS_FT_INT, 0, K(PS_LAYER_EMBED) | K(PS_LAYER_LM_HEAD)),
    F(positions, PS_FT_INT, 0, K(PS_LAYER_EMBED) | K(PS_LAYER_PATCH_EMBED)),
    F(token_types, PS_FT_INT, 0, K(PS_LAYER_EMBED)),
    F(n_classes, PS_FT_INT, 1, K(PS_LAYER_CLS_HEAD)),
    F(channels, PS_FT_INT, 1, K(PS_LAYER_PATCH_EMBED)),
    F(patch, PS_FT_INT, 1, K(PS_LAYER_PATCH_EMBED)),
    F(norm, PS_FT_NORM, 0,
      K_ATTN | K(PS_LAYER_EMBED) | K(PS_LAYER_MERGE) | K(PS_LAYER_LM_HEAD) | K(PS_LAYER_CLS_HEAD)),
    F(act, PS_FT_ACT, 0, K_ATTN),
    F(bias, PS_FT_BOOL, 0, K_ATTN),
    F(dropout, PS_FT_BOOL, 0, K_ATTN | K(PS_LAYER_EMBED) | K(PS_LAYER_PATCH_EMBED)),
    F(tied, PS_FT_BOOL, 0, K(PS_LAYER_LM_HEAD)),
    F(pooler, PS_FT_BOOL, 0, K(PS_LAYER_EMBED) | K(PS_LAYER_LM_HEAD) | K(PS_LAYER_CLS_HEAD)),
    F(cls_token, PS_FT_BOOL, 0, K(PS_LAYER_PATCH_EMBED)),
    /* mixture of experts (0 experts: a dense MLP) */
    F(n_experts, PS_FT_INT, 0, K_ATTN),
    F(top_k, PS_FT_INT, 0, K_ATTN),
    F(expert_ffn, PS_FT_INT, 0, K_ATTN),
    F(n_shared_experts, PS_FT_INT, 0, K_ATTN),
    F(shared_ffn, PS_FT_INT, 0, K_ATTN),
    F(capacity_factor, PS_FT_REAL, 0, K_ATTN),
    F(router, PS_FT_ROUTER, 0, K_ATTN),
    F(router_groups, PS_FT_INT, 0, K_ATTN),
    F(router_group_topk, PS_FT_INT, 0, K_ATTN),
    /* multi-head latent attention (kv_lora_rank 0: ordinary attention) */
    F(q_lora_rank, PS_FT_INT, 0, K_ATTN),
    F(kv_lora_rank, PS_FT_INT, 0, K_ATTN),
    F(qk_nope_head_dim, PS_FT_INT, 0, K_ATTN),
    F(qk_rope_head_dim, PS_FT_INT, 0, K_ATTN),
    F(v_head_dim, PS_FT_INT, 0, K_ATTN),
};
const char *const ps_router_names[2] = {"softmax", "sigmoid"};
const int ps_layer_field_count = (int)(sizeof ps_layer_fields / sizeof ps_layer_fields[0]);

/* Field indices used by the resolver (must follow the table's order). */
enum {
    FI_HIDDEN, FI_OUT_HIDDEN, FI_HEADS, FI_KV_HEADS, FI_HEAD_DIM, FI_FFN, FI_SEQ, FI_KV_SEQ, FI_WINDOW, FI_VOCAB,
    FI_POSITIONS, FI_TOKEN_TYPES, FI_N_CLASSES, FI_CHANNELS, FI_PATCH, FI_NORM, FI_ACT, FI_BIAS, FI_DROPOUT,
    FI_TIED, FI_POOLER, FI_CLS_TOKEN, FI_N_EXPERTS, FI_TOP_K, FI_EXPERT_FFN, FI_N_SHARED, FI_SHARED_FFN, FI_CAPACITY,
    FI_ROUTER, FI_ROUTER_GROUPS, FI_ROUTER_GROUP_TOPK, FI_Q_LORA, FI_KV_LORA, FI_QK_NOPE, FI_QK_ROPE, FI_V_HEAD_DIM,
    FI_COUNT
};
_Static_assert(FI_COUNT == sizeof ps_layer_fields / sizeof ps_layer_fields[0], "field index enum out of sync");
_Static_assert(FI_COUNT <= 64, "ps_layer_spec.set has 64 bits");

#define BIT(i) (UINT64_C(1) << (i))

int ps_field_index(const char *name)
{
    for (int i = 0; i < ps_layer_field_count; i++)
        if (strcmp(ps_layer_fields[i].name, name) == 0) return i;
    return -1;
}

const char *ps_field_suggest(const char *name)
{
    const char *best = NULL;
    int best_d = 3; /* only close misspellings: a suggestion that is far off misleads more than it helps */
    for (int i = 0; i < ps_layer_field_count; i++) {
        int d = ps_edit_distance(name, ps_layer_fields[i].name);
        if (d < best_d) {
            best_d = d;
            best = ps_layer_fields[i].name;
        }
    }
    return best;
}

static void put_raw(ps_layer *l, int field, int64_t value)
{
    const ps_field_def *f = &ps_layer_fields[field];
    char *base = (char *)l + f->offset;
    switch (f->type) {
    case PS_FT_INT: memcpy(base, &value, sizeof value); break;
    case PS_FT_BOOL: {
        bool b = value != 0;
        memcpy(base, &b, sizeof b);
        break;
    }
    case PS_FT_NORM: {
        ps_norm_kind n = (ps_norm_kind)value;
        memcpy(base, &n, sizeof n);
        break;
    }
    case PS_FT_ACT: {
        ps_mlp_act a = (ps_mlp_act)value;
        memcpy(base, &a, sizeof a);
        break;
    }
    case PS_FT_ROUTER: {
        ps_router r = (ps_router)value;
        memcpy(base, &r, sizeof r);
        break;
    }
    case PS_FT_REAL: {
        double x = (double)value;
        memcpy(base, &x, sizeof x);
        break;
    }
    }
}

static size_t field_size(ps_field_type t)
{
    switch (t) {
    case PS_FT_INT: return sizeof(int64_t);
    case PS_FT_BOOL: return sizeof(bool);
    case PS_FT_NORM: return sizeof(ps_norm_kind);
    case PS_FT_ACT: return sizeof(ps_mlp_act);
    case PS_FT_ROUTER: return sizeof(ps_router);
    case PS_FT_REAL: return sizeof(double);
    }
    return 0;
}

static void copy_field(ps_layer *dst, const ps_layer *src, int field)
{
    const ps_field_def *f = &ps_layer_fields[field];
    memcpy((char *)dst + f->offset, (const char *)src + f->offset, field_size(f->type));
}

void ps_spec_put(ps_layer_spec *s, int field, int64_t value)
{
    put_raw(&s->v, field, value);
    s->set |= BIT(field);
}

void ps_spec_put_real(ps_layer_spec *s, int field, double value)
{
    memcpy((char *)&s->v + ps_layer_fields[field].offset, &value, sizeof value);
    s->set |= BIT(field);
}

#define WFAIL(w, field, ...) where_fail((w), (field), __FILE__, __LINE__, __VA_ARGS__)

/* "<prefix><sep><field> = <what>" messages; `field` may be NULL for layer-wide problems. */
static ps_status where_fail(const ps_where *w, const char *field, const char *file, int line, const char *fmt,
                               ...) PS_PRINTF(5, 6);
static ps_status where_fail(const ps_where *w, const char *field, const char *file, int line, const char *fmt, ...)
{
    char what[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (field) return ps_error_set(PS_ERR_INPUT, file, line, "%s%s%s%s", w->prefix, w->sep, field, what);
    return ps_error_set(PS_ERR_INPUT, file, line, "%s: %s", w->prefix, what);
}

ps_status ps_layer_resolve(ps_layer_kind kind, const ps_layer_spec *defaults, const ps_layer_spec *group,
                           const ps_where *w, ps_resolve_ctx *ctx, ps_layer *out)
{
    ps_layer l;
    memset(&l, 0, sizeof l);
    l.kind = kind;
    uint64_t set = 0;
    /* Group values win over model defaults; a default that does not apply to this kind (vocab on an encoder) is
     * simply not inherited, so one set of top-level values can serve a whole encoder-decoder or vision model. */
    for (int i = 0; i < ps_layer_field_count; i++) {
        if (!(ps_layer_fields[i].kinds & K(kind))) continue;
        if (group && (group->set & BIT(i))) {
            copy_field(&l, &group->v, i);
            set |= BIT(i);
        } else if (defaults && (defaults->set & BIT(i))) {
            copy_field(&l, &defaults->v, i);
            set |= BIT(i);
        }
    }
    /* Boolean defaults that are not zero: linear layers carry biases unless told otherwise (GPT/BERT/ViT style). */
    if (!(set & BIT(FI_BIAS)) && (ps_layer_fields[FI_BIAS].kinds & K(kind))) l.bias = true;

    if (!(set & BIT(FI_HIDDEN))) return WFAIL(w, "hidden", ": missing (give it at the model level or in the layer)");
    if (!(set & BIT(FI_SEQ))) return WFAIL(w, "seq", ": missing (give it at the model level or in the layer)");

    if (K(kind) & K_ATTN) {
        /* A dense layer among MoE ones (DeepSeek-V3's first three) says n_experts = 0 and inherits nothing of the
         * experts from the model's defaults; values its own group gives are kept, for the check to name. The same
         * for ordinary attention among MLA layers. */
        static const int moe_fields[] = {FI_TOP_K,    FI_EXPERT_FFN,    FI_N_SHARED,         FI_SHARED_FFN,
                                         FI_CAPACITY, FI_ROUTER, FI_ROUTER_GROUPS, FI_ROUTER_GROUP_TOPK};
        static const int mla_fields[] = {FI_Q_LORA, FI_QK_NOPE, FI_QK_ROPE, FI_V_HEAD_DIM};
        ps_layer zero;
        memset(&zero, 0, sizeof zero);
        for (size_t i = 0; l.n_experts == 0 && i < sizeof moe_fields / sizeof moe_fields[0]; i++)
            if (!(group && (group->set & BIT(moe_fields[i])))) copy_field(&l, &zero, moe_fields[i]);
        for (size_t i = 0; l.kv_lora_rank == 0 && i < sizeof mla_fields / sizeof mla_fields[0]; i++)
            if (!(group && (group->set & BIT(mla_fields[i])))) copy_field(&l, &zero, mla_fields[i]);
        if (l.n_experts > 0) {
            if (!(set & BIT(FI_TOP_K)))
                return WFAIL(w, "top_k", ": missing (an MoE layer, n_experts = %lld, needs the experts per token)",
                             (long long)l.n_experts);
            /* Mixtral's config states the expert width as intermediate_size: ffn_hidden serves when expert_ffn is
             * not given; shared experts default to the routed ones' width */
            if (!(set & BIT(FI_EXPERT_FFN)) && (set & BIT(FI_FFN))) l.expert_ffn = l.ffn_hidden;
            if (!(set & BIT(FI_SHARED_FFN)) && l.n_shared_experts > 0) l.shared_ffn = l.expert_ffn;
            /* one canonical form (the HF import builds the same): an MoE layer's ffn_hidden is its experts' width,
             * which code that knows only dense MLPs then reads as one expert */
            if (l.expert_ffn > 0) {
                l.ffn_hidden = l.expert_ffn;
                set |= BIT(FI_FFN);
            }
        }
        if (l.kv_lora_rank > 0) {
            /* MLA: every head has its own K and V (from the shared latent), and the score width is nope + rope */
            if (!(set & BIT(FI_KV_HEADS)) && (set & BIT(FI_HEADS))) {
                l.kv_heads = l.heads;
                set |= BIT(FI_KV_HEADS);
            }
            if (!(set & BIT(FI_HEAD_DIM)) && (set & BIT(FI_HEADS))) {
                if (!ps_add_i64(l.qk_nope_head_dim, l.qk_rope_head_dim, &l.head_dim))
                    return WFAIL(w, "qk_nope_head_dim", " = %lld: too large", (long long)l.qk_nope_head_dim);
                set |= BIT(FI_HEAD_DIM);
            }
        }
        if (!(set & BIT(FI_HEADS))) {
            /* Swin-style descriptions give the per-head width and let the head count follow the stage width. */
            if (!(set & BIT(FI_HEAD_DIM)))
                return WFAIL(w, "heads", ": missing (give heads, or head_dim to derive heads = hidden / head_dim)");
            if (l.hidden % l.head_dim != 0)
                return WFAIL(w, "head_dim", " = %lld: does not divide hidden = %lld, so heads cannot be derived",
                             (long long)l.head_dim, (long long)l.hidden);
            l.heads = l.hidden / l.head_dim;
        }
        if (!(set & BIT(FI_HEAD_DIM))) {
            if (l.hidden % l.heads != 0)
                return WFAIL(w, "heads", " = %lld: does not divide hidden = %lld; give head_dim explicitly",
                             (long long)l.heads, (long long)l.hidden);
            l.head_dim = l.hidden / l.heads;
        }
        if (!(set & BIT(FI_KV_HEADS))) l.kv_heads = l.heads;
        if (!(set & BIT(FI_FFN)) && !ps_mul_i64(4, l.hidden, &l.ffn_hidden))
            return WFAIL(w, "hidden", " = %lld: 4 * hidden (the default ffn_hidden) overflows", (long long)l.hidden);
    }
    if (kind == PS_LAYER_MERGE) {
        /* Swin doubles the width at every patch merging. */
        if (!(set & BIT(FI_OUT_HIDDEN)) && !ps_mul_i64(2, l.hidden, &l.out_hidden))
            return WFAIL(w, "hidden", " = %lld: 2 * hidden (the default out_hidden) overflows", (long long)l.hidden);
    } else {
        l.out_hidden = l.hidden;
    }
    if (kind == PS_LAYER_DECODER_XATTN && !(set & BIT(FI_KV_SEQ)))
        l.kv_seq = ctx && ctx->last_encoder_seq > 0 ? ctx->last_encoder_seq : l.seq;
    if (kind == PS_LAYER_ENCODER && ctx) ctx->last_encoder_seq = l.seq;
    PS_TRY(ps_layer_check(&l, w));
    *out = l;
    return PS_OK;
}

static ps_status need_pos(const ps_where *w, const char *field, int64_t v)
{
    if (v < 1) return WFAIL(w, field, " = %lld: must be at least 1", (long long)v);
    return PS_OK;
}

static ps_status need_nonneg(const ps_where *w, const char *field, int64_t v)
{
    if (v < 0) return WFAIL(w, field, " = %lld: must not be negative", (long long)v);
    return PS_OK;
}

#define NEED_POS(field) PS_TRY(need_pos(w, #field, l->field))
#define NEED_NONNEG(field) PS_TRY(need_nonneg(w, #field, l->field))

static ps_status only_if(const ps_where *w, const char *field, int64_t v, bool applies, const char *when)
{
    if (v != 0 && !applies) return WFAIL(w, field, " = %lld: applies only to %s", (long long)v, when);
    return PS_OK;
}

static ps_status check_moe(const ps_layer *l, const ps_where *w)
{
    bool moe = l->n_experts > 0;
    const char *when = "MoE layers (n_experts > 0)";
    NEED_NONNEG(n_experts);
    PS_TRY(only_if(w, "top_k", l->top_k, moe, when));
    PS_TRY(only_if(w, "expert_ffn", l->expert_ffn, moe, when));
    PS_TRY(only_if(w, "n_shared_experts", l->n_shared_experts, moe, when));
    PS_TRY(only_if(w, "shared_ffn", l->shared_ffn, moe, when));
    PS_TRY(only_if(w, "router", (int64_t)l->router, moe, when));
    PS_TRY(only_if(w, "router_groups", l->router_groups, moe, when));
    PS_TRY(only_if(w, "router_group_topk", l->router_group_topk, moe, when));
    if (!moe && l->capacity_factor != 0)
        return WFAIL(w, "capacity_factor", " = %g: applies only to %s", l->capacity_factor, when);
    if (!moe) return PS_OK;
    NEED_POS(top_k);
    if (l->top_k > l->n_experts)
        return WFAIL(w, "top_k", " = %lld: must be at most n_experts = %lld (a token picks top_k different experts)",
                     (long long)l->top_k, (long long)l->n_experts);
    NEED_POS(expert_ffn);
    NEED_NONNEG(n_shared_experts);
    if (l->n_shared_experts > 0) NEED_POS(shared_ffn);
    PS_TRY(only_if(w, "shared_ffn", l->shared_ffn, l->n_shared_experts > 0, "layers with n_shared_experts > 0"));
    if (!(l->capacity_factor >= 0) || !(l->capacity_factor <= 1e6))
        return WFAIL(w, "capacity_factor", " = %g: must be 0 (dropless) or a positive factor", l->capacity_factor);
    if ((int)l->router < 0 || l->router > PS_ROUTER_SIGMOID)
        return WFAIL(w, "router", " = %d: unknown", (int)l->router);
    /* group-limited routing: both or neither, groups of whole experts, at most all of them chosen (Megatron-core's
     * TransformerConfig checks the same) */
    NEED_NONNEG(router_groups);
    NEED_NONNEG(router_group_topk);
    if ((l->router_groups > 0) != (l->router_group_topk > 0))
        return WFAIL(w, l->router_groups > 0 ? "router_group_topk" : "router_groups",
                     ": group-limited routing needs both router_groups and router_group_topk");
    if (l->router_groups > 0 && l->n_experts % l->router_groups)
        return WFAIL(w, "router_groups", " = %lld: must divide n_experts = %lld", (long long)l->router_groups,
                     (long long)l->n_experts);
    if (l->router_group_topk > l->router_groups)
        return WFAIL(w, "router_group_topk", " = %lld: must be at most router_groups = %lld",
                     (long long)l->router_group_topk, (long long)l->router_groups);
    return PS_OK;
}

static ps_status check_mla(const ps_layer *l, const ps_where *w)
{
    bool mla = l->kv_lora_rank > 0;
    const char *when = "multi-head latent attention (kv_lora_rank > 0)";
    NEED_NONNEG(kv_lora_rank);
    PS_TRY(only_if(w, "q_lora_rank", l->q_lora_rank, mla, when));
    PS_TRY(only_if(w, "qk_nope_head_dim", l->qk_nope_head_dim, mla, when));
    PS_TRY(only_if(w, "qk_rope_head_dim", l->qk_rope_head_dim, mla, when));
    PS_TRY(only_if(w, "v_head_dim", l->v_head_dim, mla, when));
    if (!mla) return PS_OK;
    NEED_NONNEG(q_lora_rank);
    NEED_POS(qk_nope_head_dim);
    NEED_NONNEG(qk_rope_head_dim);
    NEED_POS(v_head_dim);
    if (l->head_dim != l->qk_nope_head_dim + l->qk_rope_head_dim)
        return WFAIL(w, "head_dim", " = %lld: must be qk_nope_head_dim + qk_rope_head_dim = %lld under multi-head "
                     "latent attention (the width of Q and K per head)", (long long)l->head_dim,
                     (long long)(l->qk_nope_head_dim + l->qk_rope_head_dim));
    if (l->kv_heads != l->heads)
        return WFAIL(w, "kv_heads", " = %lld: must equal heads = %lld under multi-head latent attention (each head "
                     "gets its own K and V from the latent)", (long long)l->kv_heads, (long long)l->heads);
    return PS_OK;
}

ps_status ps_layer_check(const ps_layer *l, const ps_where *w)
{
    if ((int)l->kind < 0 || l->kind >= PS_LAYER_KIND_COUNT) return WFAIL(w, "kind", " = %d: unknown", (int)l->kind);
    NEED_POS(hidden);
    NEED_POS(out_hidden);
    NEED_POS(seq);
    switch (l->kind) {
    case PS_LAYER_ENCODER:
    case PS_LAYER_DECODER:
    case PS_LAYER_DECODER_XATTN:
        NEED_POS(heads);
        NEED_POS(kv_heads);
        NEED_POS(head_dim);
        NEED_POS(ffn_hidden);
        NEED_NONNEG(attn_window);
        if (l->heads % l->kv_heads != 0)
            return WFAIL(w, "kv_heads", " = %lld: must divide heads = %lld (each key/value head serves a whole "
                         "group of query heads)", (long long)l->kv_heads, (long long)l->heads);
        if ((int)l->norm < 0 || l->norm > PS_NORM_RMSNORM) return WFAIL(w, "norm", " = %d: unknown", (int)l->norm);
        if ((int)l->act < 0 || l->act > PS_ACT_GEGLU) return WFAIL(w, "act", " = %d: unknown", (int)l->act);
        if (l->kind == PS_LAYER_DECODER_XATTN) NEED_POS(kv_seq);
        PS_TRY(check_moe(l, w));
        PS_TRY(check_mla(l, w));
        break;
    case PS_LAYER_EMBED:
        NEED_NONNEG(vocab);
        NEED_NONNEG(positions);
        NEED_NONNEG(token_types);
        if (l->vocab == 0 && l->positions == 0 && l->token_types == 0)
            return WFAIL(w, "vocab", " = 0: an embedding needs vocab, positions or token_types");
        break;
    case PS_LAYER_PATCH_EMBED:
        NEED_POS(channels);
        NEED_POS(patch);
        NEED_NONNEG(positions);
        if (l->cls_token && l->seq < 2)
            return WFAIL(w, "seq", " = %lld: a patch embedding with a [CLS] token emits at least 2 tokens",
                         (long long)l->seq);
        break;
    case PS_LAYER_MERGE:
        if (l->seq % 4 != 0)
            return WFAIL(w, "seq", " = %lld: patch merging joins 2x2 tokens, so seq must be a multiple of 4",
                         (long long)l->seq);
        break;
    case PS_LAYER_LM_HEAD: NEED_POS(vocab); break;
    case PS_LAYER_CLS_HEAD: NEED_POS(n_classes); break;
    case PS_LAYER_KIND_COUNT: break;
    }
    int64_t p;
    if (!ps_layer_params_checked(l, &p))
        return WFAIL(w, NULL, "the parameter count of this %s layer overflows 64-bit integers (hidden = %lld); "
                     "check the sizes", ps_layer_kind_name(l->kind), (long long)l->hidden);
    return PS_OK;
}

ps_status ps_layer_vec_push(ps_layer_vec *vec, const ps_layer *l, int64_t repeat, const char *where)
{
    if (repeat < 1 || repeat > PS_MODEL_MAX_LAYERS || vec->n > PS_MODEL_MAX_LAYERS - repeat)
        return PS_FAIL(PS_ERR_INPUT, "%s: repeat = %lld makes the model longer than %d layers", where,
                       (long long)repeat, PS_MODEL_MAX_LAYERS);
    if (vec->n + repeat > vec->cap) {
        int64_t cap = vec->cap ? vec->cap : 16;
        while (cap < vec->n + repeat) cap *= 2;
        ps_layer *nv = ps_calloc((size_t)cap, sizeof *nv);
        if (!nv) return PS_ERR_SYSTEM;
        if (vec->n) memcpy(nv, vec->v, (size_t)vec->n * sizeof *nv);
        free(vec->v);
        vec->v = nv;
        vec->cap = cap;
    }
    /* The run is filled by doubling: copy what is already there onto the free space behind it, so a run of N
     * layers costs log2(N) memcpy calls rather than N struct copies (a 100,000-layer run is what the length limit
     * lets through, and the fuzzers find it). */
    ps_layer *run = vec->v + vec->n;
    run[0] = *l;
    for (int64_t done = 1; done < repeat;) {
        int64_t k = done < repeat - done ? done : repeat - done;
        memcpy(run + done, run, (size_t)k * sizeof *run);
        done += k;
    }
    vec->n += repeat;
    return PS_OK;
}

void ps_model_stem(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    ps_strlcpy(out, base, cap);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = '\0';
}

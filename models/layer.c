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
};
const int ps_layer_field_count = (int)(sizeof ps_layer_fields / sizeof ps_layer_fields[0]);

/* Field indices used by the resolver (must follow the table's order). */
enum {
    FI_HIDDEN, FI_OUT_HIDDEN, FI_HEADS, FI_KV_HEADS, FI_HEAD_DIM, FI_FFN, FI_SEQ, FI_KV_SEQ, FI_WINDOW, FI_VOCAB,
    FI_POSITIONS, FI_TOKEN_TYPES, FI_N_CLASSES, FI_CHANNELS, FI_PATCH, FI_NORM, FI_ACT, FI_BIAS, FI_DROPOUT,
    FI_TIED, FI_POOLER, FI_CLS_TOKEN, FI_COUNT
};
_Static_assert(FI_COUNT == sizeof ps_layer_fields / sizeof ps_layer_fields[0], "field index enum out of sync");
_Static_assert(FI_COUNT <= 32, "ps_layer_spec.set has 32 bits");

#define BIT(i) (1u << (i))

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
    }
}

static void copy_field(ps_layer *dst, const ps_layer *src, int field)
{
    const ps_field_def *f = &ps_layer_fields[field];
    size_t size = f->type == PS_FT_INT ? sizeof(int64_t)
                  : f->type == PS_FT_BOOL ? sizeof(bool)
                  : f->type == PS_FT_NORM ? sizeof(ps_norm_kind)
                                          : sizeof(ps_mlp_act);
    memcpy((char *)dst + f->offset, (const char *)src + f->offset, size);
}

void ps_spec_put(ps_layer_spec *s, int field, int64_t value)
{
    put_raw(&s->v, field, value);
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
    uint32_t set = 0;
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
    for (int64_t i = 0; i < repeat; i++) vec->v[vec->n++] = *l;
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

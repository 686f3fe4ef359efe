/* Import of Hugging Face config.json files: the architecture hyper-parameters of GPT-2, GPT-NeoX, Llama, Mistral,
 * BERT, T5, ViT and the mixture-of-experts decoders Mixtral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V3 and Llama 4 mapped onto
 * psearch layers. Config files carry many fields psearch does not need; only the ones
 * that fix the shapes are read, and a missing one is an error rather than a silent default. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

typedef struct {
    const json_t *root;
    ps_jloc loc;
    const char *path;
    ps_layer_vec *vec;
    int64_t seq; /* sequence length every layer is built with (the model's maximum positions) */
    double rope_theta; /* the rotary base, 0 when the architecture has none */
} hf_ctx;

/* Integer field; JSON null counts as absent (HF writes "n_inner": null for "use the default"). */
static ps_status hf_int(const hf_ctx *c, const char *key, bool required, int64_t lo, int64_t *out)
{
    json_t *v = json_object_get(c->root, key);
    if (v && json_is_null(v)) {
        if (required) return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' is null; it must be an integer", c->path, key);
        return PS_OK;
    }
    return ps_json_int(c->root, &c->loc, key, required, lo, INT64_MAX, out);
}

static ps_status hf_bool(const hf_ctx *c, const char *key, bool *out)
{
    json_t *v = json_object_get(c->root, key);
    if (!v || json_is_null(v)) return PS_OK;
    return ps_json_bool(c->root, &c->loc, key, false, out);
}

/* True when any of the listed dropout probabilities is positive; `dflt` is the library default when none is set. */
static ps_status hf_dropout(const hf_ctx *c, const char *const *keys, bool dflt, bool *out)
{
    bool any_set = false, any_pos = false;
    for (const char *const *k = keys; *k; k++) {
        json_t *v = json_object_get(c->root, *k);
        if (!v || json_is_null(v)) continue;
        double p = 0.0;
        PS_TRY(ps_json_num(c->root, &c->loc, *k, true, 0.0, 1.0, &p));
        any_set = true;
        if (p > 0.0) any_pos = true;
    }
    *out = any_set ? any_pos : dflt;
    return PS_OK;
}

static ps_status push(hf_ctx *c, const ps_layer *l, int64_t repeat, const char *what)
{
    char where[320];
    snprintf(where, sizeof where, "%s: %s", c->path, what);
    return ps_layer_vec_push(c->vec, l, repeat, where);
}

static ps_status need_divides(const hf_ctx *c, const char *a_key, int64_t a, const char *b_key, int64_t b)
{
    if (b % a != 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' = %lld does not divide '%s' = %lld", c->path, a_key,
                       (long long)a, b_key, (long long)b);
    return PS_OK;
}

static ps_layer base_layer(ps_layer_kind kind, int64_t hidden, int64_t seq)
{
    ps_layer l;
    memset(&l, 0, sizeof l);
    l.kind = kind;
    l.hidden = l.out_hidden = hidden;
    l.seq = seq;
    return l;
}

/* The decoder-only families share one shape: embedding, N blocks, final norm + LM head. */
typedef struct {
    int64_t h, layers, heads, kv_heads, head_dim, ffn, vocab, positions, window;
    ps_norm_kind norm;
    ps_mlp_act act;
    bool bias, dropout, tied, learned_positions;
} causal_shape;

/* A decoder block of a causal model's shape (dense; an MoE builder adds its experts to it). */
static ps_layer causal_decoder(const causal_shape *s, int64_t seq)
{
    ps_layer d = base_layer(PS_LAYER_DECODER, s->h, seq);
    d.heads = s->heads;
    d.kv_heads = s->kv_heads;
    d.head_dim = s->head_dim;
    d.ffn_hidden = s->ffn;
    d.attn_window = s->window;
    d.norm = s->norm;
    d.act = s->act;
    d.bias = s->bias;
    d.dropout = s->dropout;
    return d;
}

/* The output head of a causal model's shape (dense and MoE builders alike). */
static ps_status push_lm_head(hf_ctx *c, const causal_shape *s)
{
    ps_layer o = base_layer(PS_LAYER_LM_HEAD, s->h, c->seq);
    o.vocab = s->vocab;
    o.norm = s->norm;
    o.tied = s->tied;
    return push(c, &o, 1, "lm_head");
}

/* The embedding of a causal model's shape (dense and MoE builders alike). */
static ps_status push_embedding(hf_ctx *c, const causal_shape *s)
{
    ps_layer e = base_layer(PS_LAYER_EMBED, s->h, c->seq);
    e.vocab = s->vocab;
    e.positions = s->learned_positions ? s->positions : 0;
    e.dropout = s->dropout;
    e.norm = s->norm;
    return push(c, &e, 1, "embedding");
}

static ps_status build_causal(hf_ctx *c, const causal_shape *s)
{
    PS_TRY(push_embedding(c, s));
    ps_layer d = causal_decoder(s, c->seq);
    PS_TRY(push(c, &d, s->layers, "decoder layers"));
    return push_lm_head(c, s);
}

static ps_status hf_gpt2(hf_ctx *c)
{
    causal_shape s = {0};
    PS_TRY(hf_int(c, "n_embd", true, 1, &s.h));
    PS_TRY(hf_int(c, "n_layer", true, 1, &s.layers));
    PS_TRY(hf_int(c, "n_head", true, 1, &s.heads));
    PS_TRY(hf_int(c, "vocab_size", true, 1, &s.vocab));
    PS_TRY(hf_int(c, "n_ctx", false, 1, &s.positions));
    PS_TRY(hf_int(c, "n_positions", false, 1, &s.positions)); /* the newer name wins over n_ctx */
    if (s.positions == 0) return PS_FAIL(PS_ERR_INPUT, "%s: missing field 'n_positions' (or 'n_ctx')", c->path);
    PS_TRY(need_divides(c, "n_head", s.heads, "n_embd", s.h));
    if (!ps_mul_i64(4, s.h, &s.ffn)) return PS_FAIL(PS_ERR_INPUT, "%s: field 'n_embd' is too large", c->path);
    PS_TRY(hf_int(c, "n_inner", false, 1, &s.ffn)); /* null = 4 * n_embd */
    s.kv_heads = s.heads;
    s.head_dim = s.h / s.heads;
    s.norm = PS_NORM_LAYERNORM;
    s.act = PS_ACT_GELU;
    s.bias = true;
    s.tied = true;
    s.learned_positions = true;
    PS_TRY(hf_bool(c, "tie_word_embeddings", &s.tied));
    static const char *const drop[] = {"resid_pdrop", "embd_pdrop", "attn_pdrop", NULL};
    PS_TRY(hf_dropout(c, drop, true, &s.dropout)); /* GPT2Config defaults every dropout to 0.1 */
    c->seq = s.positions;
    return build_causal(c, &s);
}

static ps_status hf_gpt_neox(hf_ctx *c)
{
    causal_shape s = {0};
    PS_TRY(hf_int(c, "hidden_size", true, 1, &s.h));
    PS_TRY(hf_int(c, "num_hidden_layers", true, 1, &s.layers));
    PS_TRY(hf_int(c, "num_attention_heads", true, 1, &s.heads));
    PS_TRY(hf_int(c, "intermediate_size", true, 1, &s.ffn));
    PS_TRY(hf_int(c, "vocab_size", true, 1, &s.vocab));
    PS_TRY(hf_int(c, "max_position_embeddings", true, 1, &s.positions));
    PS_TRY(need_divides(c, "num_attention_heads", s.heads, "hidden_size", s.h));
    s.kv_heads = s.heads;
    s.head_dim = s.h / s.heads;
    s.norm = PS_NORM_LAYERNORM;
    s.act = PS_ACT_GELU;
    s.bias = true;
    s.learned_positions = false; /* rotary embeddings: no position parameters */
    PS_TRY(hf_bool(c, "tie_word_embeddings", &s.tied));
    static const char *const drop[] = {"attention_dropout", "hidden_dropout", NULL};
    PS_TRY(hf_dropout(c, drop, false, &s.dropout));
    c->seq = s.positions;
    return build_causal(c, &s);
}

/* Llama and Mistral: RMSNorm, SwiGLU MLP, no biases, rotary positions, optional grouped-query attention. */
static ps_status hf_llama(hf_ctx *c)
{
    causal_shape s = {0};
    PS_TRY(hf_int(c, "hidden_size", true, 1, &s.h));
    PS_TRY(hf_int(c, "intermediate_size", true, 1, &s.ffn));
    PS_TRY(hf_int(c, "num_hidden_layers", true, 1, &s.layers));
    PS_TRY(hf_int(c, "num_attention_heads", true, 1, &s.heads));
    PS_TRY(hf_int(c, "vocab_size", true, 1, &s.vocab));
    PS_TRY(hf_int(c, "max_position_embeddings", true, 1, &s.positions));
    s.kv_heads = s.heads;
    PS_TRY(hf_int(c, "num_key_value_heads", false, 1, &s.kv_heads));
    PS_TRY(need_divides(c, "num_key_value_heads", s.kv_heads, "num_attention_heads", s.heads));
    /* Newer configs state head_dim; older ones imply hidden_size / num_attention_heads. */
    if (json_object_get(c->root, "head_dim") && !json_is_null(json_object_get(c->root, "head_dim"))) {
        PS_TRY(hf_int(c, "head_dim", true, 1, &s.head_dim));
    } else {
        PS_TRY(need_divides(c, "num_attention_heads", s.heads, "hidden_size", s.h));
        s.head_dim = s.h / s.heads;
    }
    PS_TRY(hf_int(c, "sliding_window", false, 0, &s.window)); /* Mistral; null = full attention */
    /* transformers' LlamaConfig / MistralConfig default rope_theta: 10000 */
    c->rope_theta = 10000.0;
    json_t *theta = json_object_get(c->root, "rope_theta");
    if (theta && !json_is_null(theta))
        PS_TRY(ps_json_num(c->root, &c->loc, "rope_theta", true, 1.0, 1e12, &c->rope_theta));
    s.norm = PS_NORM_RMSNORM;
    s.act = PS_ACT_SWIGLU;
    s.bias = false;
    s.learned_positions = false;
    PS_TRY(hf_bool(c, "tie_word_embeddings", &s.tied));
    static const char *const drop[] = {"attention_dropout", NULL};
    PS_TRY(hf_dropout(c, drop, false, &s.dropout));
    c->seq = s.positions;
    return build_causal(c, &s);
}

/* ---- mixture-of-experts decoders ------------------------------------------------------------------------------ */

/* What the MoE families add to the causal shape: the experts of the sparse layers, which layers are sparse, and
 * multi-head latent attention (DeepSeek). Field names and defaults from transformers' configuration_mixtral.py,
 * configuration_qwen2_moe.py, configuration_qwen3_moe.py and configuration_deepseek_v3.py (huggingface/transformers
 * at 008e574 / 001f85b); which layers are sparse from the modeling files' decoder layers (Qwen: a layer not in
 * mlp_only_layers with (i + 1) % decoder_sparse_step == 0; DeepSeek: i >= first_k_dense_replace and
 * i % moe_layer_freq == 0, as deepseek-ai's modeling_deepseek.py). */
typedef struct {
    int64_t experts, top_k, expert_ffn, shared, shared_ffn;
    ps_router router;
    int64_t groups, group_topk;             /* DeepSeek's n_group / topk_group (0: no group limit) */
    int64_t first_dense, sparse_step, freq; /* DeepSeek's first_k_dense_replace / Qwen's step / DeepSeek's freq */
    const json_t *mlp_only;                 /* Qwen's mlp_only_layers, NULL = none */
    int64_t q_lora, kv_lora, nope, rope, v; /* MLA; kv_lora 0 = none */
} moe_shape;

static bool layer_sparse(const moe_shape *m, int64_t i)
{
    if (m->experts <= 0 || m->top_k <= 0) return false;
    if (m->mlp_only) {
        size_t k;
        json_t *v;
        json_array_foreach(m->mlp_only, k, v) if (json_integer_value(v) == i) return false;
    }
    if (m->sparse_step > 0 && (i + 1) % m->sparse_step != 0) return false;
    if (i < m->first_dense) return false;
    if (m->freq > 0 && i % m->freq != 0) return false;
    return true;
}

static ps_status build_moe(hf_ctx *c, const causal_shape *s, const moe_shape *m)
{
    PS_TRY(push_embedding(c, s));
    /* consecutive equal blocks are pushed as one run (DeepSeek-V3: 3 dense, then 58 MoE) */
    ps_layer run;
    memset(&run, 0, sizeof run);
    int64_t run_first = 0;
    for (int64_t i = 0; i < s->layers; i++) {
        ps_layer d = causal_decoder(s, c->seq);
        if (m->kv_lora > 0) {
            d.q_lora_rank = m->q_lora;
            d.kv_lora_rank = m->kv_lora;
            d.qk_nope_head_dim = m->nope;
            d.qk_rope_head_dim = m->rope;
            d.v_head_dim = m->v;
            d.kv_heads = d.heads;
            d.head_dim = m->nope + m->rope;
        }
        if (layer_sparse(m, i)) {
            d.n_experts = m->experts;
            d.top_k = m->top_k;
            d.expert_ffn = d.ffn_hidden = m->expert_ffn; /* the canonical form of ps_layer_resolve */
            d.n_shared_experts = m->shared;
            d.shared_ffn = m->shared > 0 ? m->shared_ffn : 0;
            d.router = m->router;
            d.router_groups = m->groups;
            d.router_group_topk = m->group_topk;
        }
        if (i > run_first && !ps_layer_equal(&d, &run)) {
            char what[64];
            snprintf(what, sizeof what, "decoder layers %lld-%lld", (long long)run_first, (long long)i - 1);
            PS_TRY(push(c, &run, i - run_first, what));
            run_first = i;
        }
        run = d;
    }
    if (s->layers > 0) {
        char what[64];
        snprintf(what, sizeof what, "decoder layers %lld-%lld", (long long)run_first, (long long)s->layers - 1);
        PS_TRY(push(c, &run, s->layers - run_first, what));
    }
    return push_lm_head(c, s);
}

/* The fields every MoE family shares with Llama: sizes, heads, vocabulary, positions, rope_theta, tying. */
static ps_status moe_common(hf_ctx *c, causal_shape *s, bool ffn_required)
{
    PS_TRY(hf_int(c, "hidden_size", true, 1, &s->h));
    PS_TRY(hf_int(c, "intermediate_size", ffn_required, 1, &s->ffn));
    PS_TRY(hf_int(c, "num_hidden_layers", true, 1, &s->layers));
    /* the count first: the MoE builders make (and Llama 4 marks) each block on its own, so a config asking for
     * millions of layers is refused before any is built (an embedding and a head come with them) */
    if (s->layers > PS_MODEL_MAX_LAYERS - 2)
        return PS_FAIL(PS_ERR_INPUT, "%s: field 'num_hidden_layers' = %lld: a model has at most %d layers", c->path,
                       (long long)s->layers, PS_MODEL_MAX_LAYERS);
    PS_TRY(hf_int(c, "num_attention_heads", true, 1, &s->heads));
    PS_TRY(hf_int(c, "vocab_size", true, 1, &s->vocab));
    PS_TRY(hf_int(c, "max_position_embeddings", true, 1, &s->positions));
    s->kv_heads = s->heads;
    PS_TRY(hf_int(c, "num_key_value_heads", false, 1, &s->kv_heads));
    PS_TRY(need_divides(c, "num_key_value_heads", s->kv_heads, "num_attention_heads", s->heads));
    if (json_object_get(c->root, "head_dim") && !json_is_null(json_object_get(c->root, "head_dim"))) {
        PS_TRY(hf_int(c, "head_dim", true, 1, &s->head_dim));
    } else {
        PS_TRY(need_divides(c, "num_attention_heads", s->heads, "hidden_size", s->h));
        s->head_dim = s->h / s->heads;
    }
    c->rope_theta = 10000.0; /* the configuration classes' default */
    json_t *theta = json_object_get(c->root, "rope_theta");
    if (theta && !json_is_null(theta))
        PS_TRY(ps_json_num(c->root, &c->loc, "rope_theta", true, 1.0, 1e12, &c->rope_theta));
    s->norm = PS_NORM_RMSNORM;
    s->act = PS_ACT_SWIGLU;
    s->bias = false;
    PS_TRY(hf_bool(c, "tie_word_embeddings", &s->tied));
    static const char *const drop[] = {"attention_dropout", NULL};
    PS_TRY(hf_dropout(c, drop, false, &s->dropout));
    c->seq = s->positions;
    return PS_OK;
}

/* Qwen's sliding window applies only with use_sliding_window (their configs state a window they do not use). */
static ps_status qwen_window(hf_ctx *c, causal_shape *s)
{
    bool use = false;
    PS_TRY(hf_bool(c, "use_sliding_window", &use));
    if (use) PS_TRY(hf_int(c, "sliding_window", false, 0, &s->window));
    return PS_OK;
}

static ps_status hf_mixtral(hf_ctx *c)
{
    causal_shape s = {0};
    moe_shape m = {0};
    PS_TRY(moe_common(c, &s, true));
    PS_TRY(hf_int(c, "sliding_window", false, 0, &s.window));
    PS_TRY(hf_int(c, "num_local_experts", true, 1, &m.experts));
    PS_TRY(hf_int(c, "num_experts_per_tok", true, 1, &m.top_k));
    m.expert_ffn = s.ffn; /* Mixtral's intermediate_size is each expert's */
    return build_moe(c, &s, &m);
}

static ps_status qwen_sparse_layers(hf_ctx *c, moe_shape *m, int64_t layers)
{
    m->sparse_step = 1;
    PS_TRY(hf_int(c, "decoder_sparse_step", false, 1, &m->sparse_step));
    json_t *only = json_object_get(c->root, "mlp_only_layers");
    if (only && !json_is_null(only)) {
        if (!json_is_array(only))
            return PS_FAIL(PS_ERR_INPUT, "%s: field 'mlp_only_layers' must be an array of layer indices", c->path);
        size_t k;
        json_t *v;
        json_array_foreach(only, k, v)
        {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= layers)
                return PS_FAIL(PS_ERR_INPUT, "%s: field 'mlp_only_layers[%zu]' must be a layer index from 0 to %lld",
                               c->path, k, (long long)(layers - 1));
        }
        m->mlp_only = only;
    }
    return PS_OK;
}

static ps_status hf_qwen_moe(hf_ctx *c, bool shared)
{
    causal_shape s = {0};
    moe_shape m = {0};
    PS_TRY(moe_common(c, &s, false));
    PS_TRY(qwen_window(c, &s));
    PS_TRY(hf_int(c, "num_experts", true, 1, &m.experts));
    PS_TRY(hf_int(c, "num_experts_per_tok", true, 1, &m.top_k));
    PS_TRY(hf_int(c, "moe_intermediate_size", true, 1, &m.expert_ffn));
    if (shared) {
        /* Qwen2-MoE: one shared expert of its own width (and a 1-wide gate psearch leaves out); 0 = none */
        PS_TRY(hf_int(c, "shared_expert_intermediate_size", true, 0, &m.shared_ffn));
        m.shared = m.shared_ffn > 0 ? 1 : 0;
    }
    PS_TRY(qwen_sparse_layers(c, &m, s.layers));
    /* intermediate_size is the dense layers' width: needed only when some layer is dense */
    for (int64_t i = 0; i < s.layers; i++)
        if (!layer_sparse(&m, i) && s.ffn == 0)
            return PS_FAIL(PS_ERR_INPUT, "%s: missing field 'intermediate_size' (layer %lld has a dense MLP)",
                           c->path, (long long)i);
    return build_moe(c, &s, &m);
}

static ps_status hf_qwen2_moe(hf_ctx *c) { return hf_qwen_moe(c, true); }
static ps_status hf_qwen3_moe(hf_ctx *c) { return hf_qwen_moe(c, false); }

static ps_status hf_deepseek_v3(hf_ctx *c)
{
    causal_shape s = {0};
    moe_shape m = {0};
    PS_TRY(moe_common(c, &s, true));
    PS_TRY(hf_int(c, "kv_lora_rank", true, 1, &m.kv_lora));
    PS_TRY(hf_int(c, "q_lora_rank", false, 1, &m.q_lora)); /* null: queries not compressed (DeepSeek-V2-Lite) */
    PS_TRY(hf_int(c, "qk_nope_head_dim", true, 1, &m.nope));
    PS_TRY(hf_int(c, "qk_rope_head_dim", true, 0, &m.rope));
    PS_TRY(hf_int(c, "v_head_dim", true, 1, &m.v));
    s.kv_heads = s.heads; /* MLA: num_key_value_heads is not used by the attention */
    /* num_experts_per_tok null: a dense model (the configuration class's docstring) */
    PS_TRY(hf_int(c, "num_experts_per_tok", false, 1, &m.top_k));
    if (m.top_k > 0) {
        PS_TRY(hf_int(c, "n_routed_experts", true, 1, &m.experts));
        PS_TRY(hf_int(c, "moe_intermediate_size", true, 1, &m.expert_ffn));
        m.shared = 1; /* DeepseekV3Config defaults: 1 shared expert, 3 dense layers first */
        PS_TRY(hf_int(c, "n_shared_experts", false, 0, &m.shared));
        m.shared_ffn = m.expert_ffn; /* one MLP of moe_intermediate_size x n_shared_experts: the same weights */
        m.first_dense = 3;
        PS_TRY(hf_int(c, "first_k_dense_replace", false, 0, &m.first_dense));
        m.freq = 1;
        PS_TRY(hf_int(c, "moe_layer_freq", false, 1, &m.freq));
        /* group-limited routing (DeepseekV3Config, transformers 001f85b: n_group 8, topk_group 4 by default;
         * DeepSeek-V3 report Sec. 2.1.2: a token's experts on at most 4 nodes); n_group 1 is no limit */
        m.groups = 8;
        m.group_topk = 4;
        PS_TRY(hf_int(c, "n_group", false, 1, &m.groups));
        PS_TRY(hf_int(c, "topk_group", false, 1, &m.group_topk));
        if (m.groups <= 1) m.groups = m.group_topk = 0;
        /* DeepSeek-V3 scores with a sigmoid and a selection bias (transformers' DeepseekV3TopkRouter always does);
         * deepseek-ai's configs say so in scoring_func */
        m.router = PS_ROUTER_SIGMOID;
        json_t *sf = json_object_get(c->root, "scoring_func");
        if (sf && !json_is_null(sf)) {
            char f[32];
            PS_TRY(ps_json_str(c->root, &c->loc, "scoring_func", true, f, sizeof f));
            if (!strcmp(f, "softmax"))
                m.router = PS_ROUTER_SOFTMAX;
            else if (strcmp(f, "sigmoid") != 0)
                return PS_FAIL(PS_ERR_INPUT, "%s: field 'scoring_func' = '%s' is not supported (supported: softmax, "
                               "sigmoid)", c->path, f);
        }
    }
    return build_moe(c, &s, &m);
}

/* Llama 4 (transformers' configuration_llama4.py at 008e574): the text model's fields under "text_config" (model_type
 * llama4; llama4_text has them at the top). MoE blocks are moe_layers, else every interleave_moe_layer_step-th block
 * (indices step - 1, 2 step - 1, ...); each has num_local_experts routed experts of intermediate_size, top
 * num_experts_per_tok, and one shared expert of the same width (Llama4TextMoe's shared_expert); dense blocks have an
 * MLP of intermediate_size_mlp. The router scores the top-k logits with a sigmoid and has no bias: as parameters,
 * psearch's softmax router. Left out: chunked attention on the RoPE blocks (attention_chunk_size; psearch counts full
 * causal attention, an upper bound past the chunk), the qk L2 norms (no parameters) and the vision model. */
static ps_status hf_llama4(hf_ctx *c)
{
    hf_ctx t = *c;
    json_t *tc = json_object_get(c->root, "text_config");
    if (tc) {
        if (!json_is_object(tc))
            return PS_FAIL(PS_ERR_INPUT, "%s: field 'text_config' must be an object (the text model's fields)",
                           c->path);
        t.root = tc;
        t.loc = ps_jloc_key(&c->loc, "text_config");
    }
    causal_shape s = {0};
    moe_shape m = {0};
    PS_TRY(moe_common(&t, &s, true));
    if (!json_object_get(t.root, "rope_theta")) t.rope_theta = 500000.0; /* Llama4TextConfig.default_theta */
    int64_t dense_ffn = 0;
    PS_TRY(hf_int(&t, "intermediate_size_mlp", false, 1, &dense_ffn));
    PS_TRY(hf_int(&t, "num_local_experts", true, 1, &m.experts));
    PS_TRY(hf_int(&t, "num_experts_per_tok", true, 1, &m.top_k));
    m.expert_ffn = m.shared_ffn = s.ffn;
    m.shared = 1;
    int64_t step = 1;
    PS_TRY(hf_int(&t, "interleave_moe_layer_step", false, 1, &step));
    json_t *moe_layers = json_object_get(t.root, "moe_layers");
    bool *sparse = ps_calloc((size_t)s.layers, sizeof *sparse);
    if (!sparse) return PS_ERR_SYSTEM;
    if (moe_layers && !json_is_null(moe_layers)) {
        if (!json_is_array(moe_layers)) {
            free(sparse);
            return PS_FAIL(PS_ERR_INPUT, "%s: field 'moe_layers' must be an array of layer indices", c->path);
        }
        size_t k;
        json_t *v;
        json_array_foreach(moe_layers, k, v)
        {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= s.layers) {
                free(sparse);
                return PS_FAIL(PS_ERR_INPUT, "%s: field 'moe_layers[%zu]' must be a layer index from 0 to %lld",
                               c->path, k, (long long)(s.layers - 1));
            }
            sparse[json_integer_value(v)] = true;
        }
    } else {
        for (int64_t i = step - 1; i < s.layers; i += step) sparse[i] = true;
    }
    bool any_dense = false;
    for (int64_t i = 0; i < s.layers; i++) any_dense = any_dense || !sparse[i];
    if (any_dense && dense_ffn == 0) {
        free(sparse);
        return PS_FAIL(PS_ERR_INPUT, "%s: missing field 'intermediate_size_mlp' (the dense blocks' MLP width)",
                       c->path);
    }
    /* every block built sparse (m has no rule that makes one dense), then the dense ones made dense */
    ps_layer_vec *vec = c->vec;
    int64_t n0 = vec->n;
    ps_status st = build_moe(&t, &s, &m);
    if (st == PS_OK)
        for (int64_t i = 0; i < s.layers; i++) {
            ps_layer *d = &vec->v[n0 + 1 + i];
            if (sparse[i]) continue;
            d->n_experts = d->top_k = d->expert_ffn = d->n_shared_experts = d->shared_ffn = 0;
            d->router = PS_ROUTER_SOFTMAX;
            d->ffn_hidden = dense_ffn;
        }
    free(sparse);
    c->seq = t.seq;
    c->rope_theta = t.rope_theta;
    return st;
}

static ps_status hf_bert(hf_ctx *c)
{
    int64_t h = 0, layers = 0, heads = 0, ffn = 0, vocab = 0, positions = 0, types = 2;
    PS_TRY(hf_int(c, "hidden_size", true, 1, &h));
    PS_TRY(hf_int(c, "num_hidden_layers", true, 1, &layers));
    PS_TRY(hf_int(c, "num_attention_heads", true, 1, &heads));
    PS_TRY(hf_int(c, "intermediate_size", true, 1, &ffn));
    PS_TRY(hf_int(c, "vocab_size", true, 1, &vocab));
    PS_TRY(hf_int(c, "max_position_embeddings", true, 1, &positions));
    PS_TRY(hf_int(c, "type_vocab_size", false, 0, &types));
    PS_TRY(need_divides(c, "num_attention_heads", heads, "hidden_size", h));
    bool dropout = true, tied = true;
    static const char *const drop[] = {"hidden_dropout_prob", "attention_probs_dropout_prob", NULL};
    PS_TRY(hf_dropout(c, drop, true, &dropout));
    PS_TRY(hf_bool(c, "tie_word_embeddings", &tied));
    c->seq = positions;

    ps_layer e = base_layer(PS_LAYER_EMBED, h, c->seq);
    e.vocab = vocab;
    e.positions = positions;
    e.token_types = types;
    e.pooler = true; /* the embedding LayerNorm */
    e.dropout = dropout;
    PS_TRY(push(c, &e, 1, "embedding"));
    ps_layer b = base_layer(PS_LAYER_ENCODER, h, c->seq);
    b.heads = b.kv_heads = heads;
    b.head_dim = h / heads;
    b.ffn_hidden = ffn;
    b.norm = PS_NORM_LAYERNORM;
    b.act = PS_ACT_GELU;
    b.bias = true;
    b.dropout = dropout;
    PS_TRY(push(c, &b, layers, "encoder layers"));
    /* Pre-training heads (BertForPreTraining without the 2-way NSP classifier): MLM transform + decoder bias, and
     * the pooler. */
    ps_layer o = base_layer(PS_LAYER_LM_HEAD, h, c->seq);
    o.vocab = vocab;
    o.tied = tied;
    o.pooler = true;
    o.norm = PS_NORM_LAYERNORM;
    PS_TRY(push(c, &o, 1, "lm_head"));
    return PS_OK;
}

static ps_status hf_t5(hf_ctx *c)
{
    int64_t h = 0, ffn = 0, dkv = 0, heads = 0, enc = 0, dec = -1, vocab = 0;
    PS_TRY(hf_int(c, "d_model", true, 1, &h));
    PS_TRY(hf_int(c, "d_ff", true, 1, &ffn));
    PS_TRY(hf_int(c, "d_kv", true, 1, &dkv));
    PS_TRY(hf_int(c, "num_heads", true, 1, &heads));
    PS_TRY(hf_int(c, "num_layers", true, 1, &enc));
    PS_TRY(hf_int(c, "num_decoder_layers", false, 1, &dec));
    if (dec < 0) dec = enc; /* T5Config: num_decoder_layers defaults to num_layers */
    PS_TRY(hf_int(c, "vocab_size", true, 1, &vocab));
    /* T5's relative positions have no maximum; the original configs state the pre-training length as n_positions,
     * and 512 is the input length of the T5 paper's pre-training (Raffel et al. 2020, Sec. 3.1.2). */
    int64_t seq = 512;
    PS_TRY(hf_int(c, "n_positions", false, 1, &seq));
    ps_mlp_act act = PS_ACT_RELU;
    json_t *ffp = json_object_get(c->root, "feed_forward_proj");
    if (ffp && !json_is_null(ffp)) {
        char s[32];
        PS_TRY(ps_json_str(c->root, &c->loc, "feed_forward_proj", true, s, sizeof s));
        if (!strcmp(s, "relu"))
            act = PS_ACT_RELU;
        else if (!strcmp(s, "gelu") || !strcmp(s, "gelu_new"))
            act = PS_ACT_GELU;
        else if (!strcmp(s, "gated-gelu") || !strcmp(s, "gated-gelu_new"))
            act = PS_ACT_GEGLU;
        else if (!strcmp(s, "gated-silu"))
            act = PS_ACT_SWIGLU;
        else
            return PS_FAIL(PS_ERR_INPUT,
                           "%s: field 'feed_forward_proj' = '%s' is not supported (supported: relu, gelu, gated-gelu, "
                           "gated-silu)",
                           c->path, s);
    }
    bool tied = true, dropout = true;
    PS_TRY(hf_bool(c, "tie_word_embeddings", &tied));
    static const char *const drop[] = {"dropout_rate", NULL};
    PS_TRY(hf_dropout(c, drop, true, &dropout));
    c->seq = seq;

    ps_layer e = base_layer(PS_LAYER_EMBED, h, seq);
    e.vocab = vocab; /* shared by encoder input, decoder input and (when tied) the output projection */
    e.dropout = dropout;
    e.norm = PS_NORM_RMSNORM;
    PS_TRY(push(c, &e, 1, "embedding"));
    ps_layer b = base_layer(PS_LAYER_ENCODER, h, seq);
    b.heads = b.kv_heads = heads;
    b.head_dim = dkv;
    b.ffn_hidden = ffn;
    b.norm = PS_NORM_RMSNORM;
    b.act = act;
    b.bias = false;
    b.dropout = dropout;
    PS_TRY(push(c, &b, enc, "encoder layers"));
    b.kind = PS_LAYER_DECODER_XATTN;
    b.kv_seq = seq;
    PS_TRY(push(c, &b, dec, "decoder layers"));
    ps_layer o = base_layer(PS_LAYER_LM_HEAD, h, seq);
    o.vocab = vocab;
    o.tied = tied;
    o.norm = PS_NORM_RMSNORM;
    PS_TRY(push(c, &o, 1, "lm_head"));
    return PS_OK;
}

static ps_status hf_vit(hf_ctx *c)
{
    int64_t h = 0, layers = 0, heads = 0, ffn = 0, image = 0, patch = 0, channels = 3;
    PS_TRY(hf_int(c, "hidden_size", true, 1, &h));
    PS_TRY(hf_int(c, "num_hidden_layers", true, 1, &layers));
    PS_TRY(hf_int(c, "num_attention_heads", true, 1, &heads));
    PS_TRY(hf_int(c, "intermediate_size", true, 1, &ffn));
    PS_TRY(hf_int(c, "image_size", true, 1, &image));
    PS_TRY(hf_int(c, "patch_size", true, 1, &patch));
    PS_TRY(hf_int(c, "num_channels", false, 1, &channels));
    PS_TRY(need_divides(c, "num_attention_heads", heads, "hidden_size", h));
    if (patch > image)
        return PS_FAIL(PS_ERR_INPUT, "%s: field 'patch_size' = %lld is larger than 'image_size' = %lld", c->path,
                       (long long)patch, (long long)image);
    /* ImageNet-1k classifiers list their classes in id2label; without it psearch assumes the 1000 ImageNet classes
     * (the HF default of 2 labels is a fine-tuning placeholder, not an architecture). */
    int64_t classes = 1000;
    json_t *labels = json_object_get(c->root, "id2label");
    if (labels && json_is_object(labels) && json_object_size(labels) > 0)
        classes = (int64_t)json_object_size(labels);
    else
        PS_TRY(hf_int(c, "num_labels", false, 1, &classes));
    bool bias = true, dropout = false;
    PS_TRY(hf_bool(c, "qkv_bias", &bias));
    static const char *const drop[] = {"hidden_dropout_prob", "attention_probs_dropout_prob", NULL};
    PS_TRY(hf_dropout(c, drop, false, &dropout));
    int64_t side = image / patch, tokens;
    if (!ps_mul_i64(side, side, &tokens) || !ps_add_i64(tokens, 1, &tokens))
        return PS_FAIL(PS_ERR_INPUT, "%s: field 'image_size' = %lld gives too many patches", c->path,
                       (long long)image);
    c->seq = tokens; /* patches + [CLS] */

    ps_layer p = base_layer(PS_LAYER_PATCH_EMBED, h, tokens);
    p.channels = channels;
    p.patch = patch;
    p.positions = tokens;
    p.cls_token = true;
    p.dropout = dropout;
    PS_TRY(push(c, &p, 1, "patch_embed"));
    ps_layer b = base_layer(PS_LAYER_ENCODER, h, tokens);
    b.heads = b.kv_heads = heads;
    b.head_dim = h / heads;
    b.ffn_hidden = ffn;
    b.norm = PS_NORM_LAYERNORM;
    b.act = PS_ACT_GELU;
    b.bias = bias;
    b.dropout = dropout;
    PS_TRY(push(c, &b, layers, "encoder layers"));
    ps_layer o = base_layer(PS_LAYER_CLS_HEAD, h, tokens);
    o.n_classes = classes;
    o.norm = PS_NORM_LAYERNORM;
    PS_TRY(push(c, &o, 1, "cls_head"));
    return PS_OK;
}

static const struct {
    const char *model_type;
    const char *arch_prefix; /* the class names in "architectures" start with this */
    ps_status (*build)(hf_ctx *);
} g_hf_types[] = {
    /* llama4 before llama: "Llama4ForConditionalGeneration" starts with both prefixes, the first match wins */
    {"llama4", "Llama4", hf_llama4},   {"llama4_text", "Llama4ForCausalLM", hf_llama4},
    {"gpt2", "GPT2", hf_gpt2},         {"gpt_neox", "GPTNeoX", hf_gpt_neox}, {"llama", "Llama", hf_llama},
    {"mistral", "Mistral", hf_llama}, {"bert", "Bert", hf_bert},            {"t5", "T5", hf_t5},
    {"vit", "ViT", hf_vit},           {"mixtral", "Mixtral", hf_mixtral},
    {"qwen2_moe", "Qwen2Moe", hf_qwen2_moe}, {"qwen3_moe", "Qwen3Moe", hf_qwen3_moe},
    {"deepseek_v3", "DeepseekV3", hf_deepseek_v3},
};
#define N_HF_TYPES (sizeof g_hf_types / sizeof g_hf_types[0])
#define HF_SUPPORTED                                                                                                   \
    "gpt2, gpt_neox, llama, mistral, bert, t5, vit, mixtral, qwen2_moe, qwen3_moe, deepseek_v3, llama4, llama4_text"

static int find_type(const json_t *root, const char *path, char *type, size_t cap, ps_status *st)
{
    json_t *mt = json_object_get(root, "model_type");
    if (mt) {
        ps_jloc top = ps_jloc_root(path);
        *st = ps_json_str(root, &top, "model_type", true, type, cap);
        if (*st != PS_OK) return -1;
        for (size_t i = 0; i < N_HF_TYPES; i++)
            if (!strcmp(type, g_hf_types[i].model_type)) return (int)i;
        *st = PS_FAIL(PS_ERR_INPUT, "%s: model_type '%s' is not supported (supported: " HF_SUPPORTED ")", path, type);
        return -1;
    }
    json_t *arch = json_object_get(root, "architectures");
    if (!json_is_array(arch) || json_array_size(arch) == 0) {
        *st = PS_FAIL(PS_ERR_INPUT, "%s: field 'architectures' must be a non-empty array of class names", path);
        return -1;
    }
    size_t k;
    json_t *a;
    json_array_foreach(arch, k, a)
    {
        if (!json_is_string(a)) continue;
        const char *name = json_string_value(a);
        for (size_t i = 0; i < N_HF_TYPES; i++) {
            size_t n = strlen(g_hf_types[i].arch_prefix);
            /* "GPT2LMHeadModel" but not "GPT2" inside "GPTNeoX..."; of prefixes that nest (Llama4, Llama) the table
             * lists the longer first */
            if (!strncmp(name, g_hf_types[i].arch_prefix, n)) {
                ps_strlcpy(type, g_hf_types[i].model_type, cap);
                return (int)i;
            }
        }
    }
    const char *first = json_is_string(json_array_get(arch, 0)) ? json_string_value(json_array_get(arch, 0)) : "?";
    *st = PS_FAIL(PS_ERR_INPUT, "%s: architecture '%s' is not supported (supported model types: " HF_SUPPORTED ")",
                  path, first);
    return -1;
}

static void hf_name(const json_t *root, const char *path, char *out, size_t cap)
{
    json_t *n = json_object_get(root, "_name_or_path");
    if (json_is_string(n) && json_string_length(n) > 0 && json_string_length(n) < cap) {
        ps_strlcpy(out, json_string_value(n), cap);
        return;
    }
    /* ".../Llama-2-7b-hf/config.json" is named after its folder */
    const char *base = strrchr(path, '/');
    if (base && !strcmp(base + 1, "config.json")) {
        const char *start = base;
        while (start > path && start[-1] != '/') start--;
        size_t len = (size_t)(base - start);
        if (len > 0 && len < cap) {
            memcpy(out, start, len);
            out[len] = '\0';
            return;
        }
    }
    ps_model_stem(path, out, cap);
}

ps_status ps_model_from_hf(const json_t *root, const char *path, const ps_model_opts *opts, ps_model *out)
{
    memset(out, 0, sizeof *out);
    char type[32];
    ps_status st = PS_OK;
    int ti = find_type(root, path, type, sizeof type, &st);
    if (ti < 0) return ps_error_trace(st, __FILE__, __LINE__);
    ps_layer_vec vec = {0};
    hf_ctx c = {.root = root, .loc = ps_jloc_root(path), .path = path, .vec = &vec, .seq = 0};
    hf_name(root, path, out->name, sizeof out->name);
    ps_strlcpy(out->family, type, sizeof out->family);
    snprintf(out->source, sizeof out->source, "Hugging Face config %s", path);
    /* The checkpoint's storage dtype says nothing about the training dtype; psearch plans bf16 training. */
    out->dtype = PS_DTYPE_BF16;
    PS_TRY_GOTO(st, g_hf_types[ti].build(&c), fail);
    out->seq = c.seq;
    out->rope_theta = c.rope_theta;
    PS_TRY_GOTO(st, ps_model_finish(out, &vec, opts, path), fail);
    return PS_OK;
fail:
    free(vec.v);
    ps_model_free(out);
    return st;
}

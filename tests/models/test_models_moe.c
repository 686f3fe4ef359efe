/* models/: mixture-of-experts layers and multi-head latent attention. Parameters, active parameters, forward FLOPs
 * and activation bytes of small layers against counts done by hand (the derivations are in the comments); the MoE
 * presets against their published total and active counts; the JSON and layer-list formats agree; bad values are
 * refused naming the field. */
#include <jansson.h>
#include <limits.h>
#include <math.h>

#include "models_test.h"

/* h 8, 2 heads of 4 (kv 2), RMSNorm, SwiGLU, no biases, 10 tokens. */
static ps_layer tiny_block(void)
{
    ps_layer l;
    memset(&l, 0, sizeof l);
    l.kind = PS_LAYER_DECODER;
    l.hidden = l.out_hidden = 8;
    l.heads = l.kv_heads = 2;
    l.head_dim = 4;
    l.ffn_hidden = 6;
    l.seq = 10;
    l.norm = PS_NORM_RMSNORM;
    l.act = PS_ACT_SWIGLU;
    return l;
}

/* 4 experts of 6, top 2, one shared expert of 5. */
static ps_layer tiny_moe(void)
{
    ps_layer l = tiny_block();
    l.n_experts = 4;
    l.top_k = 2;
    l.expert_ffn = 6;
    l.n_shared_experts = 1;
    l.shared_ffn = 5;
    return l;
}

/* q rank 4, kv rank 3, 2 + 1 (rope) score dims, v 3; dense MLP of 6. */
static ps_layer tiny_mla(void)
{
    ps_layer l = tiny_block();
    l.q_lora_rank = 4;
    l.kv_lora_rank = 3;
    l.qk_nope_head_dim = 2;
    l.qk_rope_head_dim = 1;
    l.v_head_dim = 3;
    l.head_dim = 3;
    return l;
}

static void test_moe_params(void **state)
{
    (void)state;
    ps_layer l = tiny_moe();
    /* attention 8 x (8 + 8 + 8 + 8) = 256, norms 2 x 8 = 16, router 8 x 4 = 32, routed 4 x 3 x 8 x 6 = 576, shared
     * 3 x 8 x 5 = 120: 1000; active: 256 + 16 + 32 + 2 x 144 + 120 = 712 */
    assert_int_equal(ps_layer_params(&l), 1000);
    assert_int_equal(ps_layer_active_params(&l), 712);
    assert_true(ps_layer_is_moe(&l));
    assert_false(ps_layer_is_mla(&l));
    /* sigmoid routing adds the 4 selection biases, which every token uses */
    l.router = PS_ROUTER_SIGMOID;
    assert_int_equal(ps_layer_params(&l), 1004);
    assert_int_equal(ps_layer_active_params(&l), 716);
    /* a dense layer: active = total; ffn_hidden 6 gives 3 x 8 x 6 = 144 */
    ps_layer d = tiny_block();
    assert_int_equal(ps_layer_params(&d), 256 + 16 + 144);
    assert_int_equal(ps_layer_active_params(&d), ps_layer_params(&d));
}

static void test_moe_flops(void **state)
{
    (void)state;
    ps_layer l = tiny_moe();
    /* per sample of 10 tokens: projections 2 x 10 x (8 x 24 + 8 x 8) = 5120, scores and weighted sum 4 x 10 x 10 x 8
     * = 3200, router 2 x 10 x 8 x 4 = 640, routed 2 x 10 x 2 x 8 x 6 x 3 = 5760, shared 2 x 10 x 8 x 5 x 3 = 2400 */
    assert_true(fabs(ps_layer_fwd_flops(&l) - 17120.0) < 1e-9);
    /* the same as 2 FLOPs per active weight per token plus the attention core */
    assert_true(fabs(ps_layer_fwd_flops(&l) - (2.0 * 10 * (712 - 16) + 3200)) < 1e-9);
}

static void test_moe_act(void **state)
{
    (void)state;
    ps_layer l = tiny_moe();
    /* bf16 (2 bytes), TP 1, no recompute, unfused, no dropout.
     * attention: norm input 160 + QKV input 160 (whole per TP rank: rep 320); Q, K 320; softmax 2 x 2 x 10 x 10 =
     * 400; V 160; projection input 160.
     * MLP: norm input 160, router / expert / shared input 160; probabilities 2 x 10 x 4 = 80; routing weights and
     * indices (2 + 8) x 10 x 2 = 200; permuted inputs and expert outputs 2 x (2 x 20 x 8) = 640 (rep: 1560 in all);
     * expert intermediate (2 x 2 + 2) x 20 x 6 = 720, shared intermediate (2 x 2 + 2) x 10 x 5 = 300.
     * rep 1560 + split 320 + 160 + 160 + 720 + 300 = 1660 + scores 400 = 3620 */
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 1, false, PS_RECOMP_NONE) - 3620.0) < 1e-9);
    /* TP 2 without SP: 1560 + (1660 + 400) / 2 */
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 2, false, PS_RECOMP_NONE) - 2590.0) < 1e-9);
    /* TP 2 with SP: (1560 + 1660 + 400) / 2 */
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 2, true, PS_RECOMP_NONE) - 1810.0) < 1e-9);
    /* full recomputation keeps the input: 2 x 10 x 8 */
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 1, false, PS_RECOMP_FULL) - 160.0) < 1e-9);
    /* capacity 0.5: the experts take 10 of the 20 routed tokens, halving 640 and 720 */
    l.capacity_factor = 0.5;
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 1, false, PS_RECOMP_NONE) - 2940.0) < 1e-9);
    /* capacity above 1 drops nothing more: as dropless */
    l.capacity_factor = 1.25;
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 1, false, PS_RECOMP_NONE) - 3620.0) < 1e-9);
}

static void test_mla(void **state)
{
    (void)state;
    ps_layer l = tiny_mla();
    assert_true(ps_layer_is_mla(&l));
    /* q: 8 x 4 + 4 (norm) + 4 x 2 x 3 = 60; kv_a 8 x (3 + 1) = 32, norm 3, kv_b 3 x 2 x (2 + 3) = 30; o 2 x 3 x 8 = 48:
     * 173; MLP 144, norms 16 */
    assert_int_equal(ps_layer_params(&l), 173 + 144 + 16);
    /* q 2 x 10 x 56 = 1120; kv and o 2 x 10 x (32 + 30 + 48) = 2200; scores over 6 and sum over 6 wide heads:
     * 2 x 10 x 10 x 12 = 2400; MLP 2 x 10 x 8 x 6 x 3 = 2880 */
    assert_true(fabs(ps_layer_fwd_flops(&l) - 8600.0) < 1e-9);
    /* rep: norm and projection inputs 320, latents (2 + 2) x 10 x 4 + (2 + 2) x 10 x 3 + 2 x 10 x 1 = 300, MLP
     * inputs 320: 940; split: Q, K 2 x 2 x 60 = 240, V 120, o input 120, MLP intermediate 360: 840; softmax 400 */
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 1, false, PS_RECOMP_NONE) - 2180.0) < 1e-9);
    /* fused: the softmax replaced by the fp32 statistics, 4 x 2 heads x 10 queries */
    assert_true(fabs(ps_layer_act_bytes_attn(&l, PS_DTYPE_BF16, 1, false, PS_RECOMP_NONE, PS_ATTN_FUSED) - 1860.0) <
                1e-9);
    /* without q compression: q_proj 8 x 6 replaces 60 with 48 */
    l.q_lora_rank = 0;
    assert_int_equal(ps_layer_params(&l), 173 - 60 + 48 + 144 + 16);
}

/* Ordinary grouped-query attention keeps what it kept before MLA came: V at the key width, the output projection's
 * input at the query width. h 8, 4 heads of 2, 1 KV head, bf16, 10 tokens: norm and projection inputs 2 x 160
 * [rep], Q and K 2 x 10 x (8 + 2) = 200, V 2 x 10 x 2 = 40, projection input 2 x 10 x 8 = 160, softmax 2 x 4 x 100 =
 * 800; MLP inputs 2 x 160 [rep], intermediate (2 x 2 + 2) x 10 x 6 = 360. */
static void test_gqa_unchanged(void **state)
{
    (void)state;
    ps_layer l = tiny_block();
    l.heads = 4;
    l.kv_heads = 1;
    l.head_dim = 2;
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 1, false, PS_RECOMP_NONE) - 2200.0) < 1e-9);
    /* TP 2: 640 + (200 + 40 + 160 + 360 + 800) / 2 */
    assert_true(fabs(ps_layer_act_bytes(&l, PS_DTYPE_BF16, 2, false, PS_RECOMP_NONE) - 1420.0) < 1e-9);
}

/* The same mixed model (dense, MoE, MLA + sigmoid + capacity) in both formats, with its totals by hand: embedding
 * 128, 2 dense blocks of 416, 3 MoE blocks of 1000, one MLA MoE block 173 + 16 + 36 + 576 + 120 = 921, tied head 8. */
static void test_formats(void **state)
{
    (void)state;
    ps_model a, b;
    load_ok(tdata("good/tiny-moe.layers"), NULL, &a);
    load_ok(tdata("good/tiny-moe.json"), NULL, &b);
    assert_int_equal(a.n_layers, b.n_layers);
    for (int64_t i = 0; i < a.n_layers; i++) assert_true(ps_layer_equal(&a.layers[i], &b.layers[i]));
    assert_int_equal(ps_model_params(&a), 4889);
    /* active: 128 + 832 + 3 x 712 + (173 + 16 + 36 + 288 + 120) + 8 */
    assert_int_equal(ps_model_active_params(&a), 3737);
    assert_true(a.published_active_params == 3737 && b.published_active_params == 3737);
    /* the dense blocks inherited nothing of the experts; the MLA block got its head_dim and kv_heads */
    assert_int_equal(a.layers[1].n_experts, 0);
    assert_int_equal(a.layers[1].top_k, 0);
    assert_int_equal(a.layers[1].shared_ffn, 0);
    assert_int_equal(a.layers[6].head_dim, 3);
    assert_int_equal(a.layers[6].kv_heads, 2);
    assert_true(a.layers[6].capacity_factor == 1.25);
    assert_int_equal(a.layers[6].router, PS_ROUTER_SIGMOID);
    /* a scaled copy keeps MLA consistent (head_dim = nope + rope) and stays valid */
    ps_model s;
    assert_int_equal(ps_model_scaled(&a, 2, 1, &s), PS_OK);
    assert_int_equal(s.layers[6].head_dim, s.layers[6].qk_nope_head_dim + s.layers[6].qk_rope_head_dim);
    ps_model_free(&s);
    ps_model_free(&a);
    ps_model_free(&b);
}

/* A number of a preset's JSON that ps_model does not keep (the published figures' rounding). */
static double preset_key(const char *name, const char *key)
{
    char dir[PATH_MAX], path[PATH_MAX + 80];
    assert_int_equal(ps_data_dir("models", dir, sizeof dir), PS_OK);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    assert_non_null(root);
    json_t *v = json_object_get(root, key);
    double x = v ? json_number_value(v) : 0.0;
    json_decref(root);
    return x;
}

/* The published figures: totals within 1%; active counts within 1% or one unit of the precision the source states
 * (Qwen3-30B-A3B's "3.3B" and DeepSeek-V3's "37B" are 1.6% and 1.5% under psearch's count; the preset notes say
 * what each counts). */
static void test_moe_presets(void **state)
{
    (void)state;
    static const char *const presets[] = {"mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b",
                                          "deepseek-v3"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        ps_model m;
        load_ok(presets[i], NULL, &m);
        double unit = preset_key(presets[i], "published_active_params_rounding");
        assert_true(unit > 0);
        double p = (double)ps_model_params(&m), a = (double)ps_model_active_params(&m);
        print_message("%-16s total %.4gB (published %.4gB)  active %.4gB (published %.4gB)\n", m.name, p / 1e9,
                      m.published_params / 1e9, a / 1e9, m.published_active_params / 1e9);
        if (fabs(rel_err(p, m.published_params)) > 0.01) fail_msg("%s: total %.0f vs %.0f", m.name, p,
                                                                  m.published_params);
        assert_true(m.published_active_params > 0);
        double tol = fmax(0.01 * m.published_active_params, unit);
        if (fabs(a - m.published_active_params) > tol)
            fail_msg("%s: active %.0f vs %.0f (tolerance %.0f)", m.name, a, m.published_active_params, tol);
        assert_true(a < p);
        ps_model_free(&m);
    }
    /* exact counts of the shapes, so a change in the arithmetic shows */
    ps_model m;
    load_ok("mixtral-8x7b", NULL, &m);
    assert_int_equal(ps_model_params(&m), 46702792704LL);
    assert_int_equal(ps_model_active_params(&m), 12879925248LL);
    /* `model show --format json` carries both, and each MoE group its experts */
    json_t *j = ps_model_to_json(&m);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "active_params")), 12879925248LL);
    assert_true(json_real_value(json_object_get(j, "published_active_params")) == 12.9e9);
    json_t *g1 = json_array_get(json_object_get(j, "layer_groups"), 1);
    assert_int_equal(json_integer_value(json_object_get(g1, "n_experts")), 8);
    assert_int_equal(json_integer_value(json_object_get(g1, "top_k")), 2);
    assert_int_equal(json_integer_value(json_object_get(g1, "active_params_each")),
                     ps_layer_active_params(&m.layers[1]));
    json_decref(j);
    ps_model_free(&m);
    load_ok("deepseek-v3", NULL, &m);
    assert_int_equal(ps_model_params(&m), 671026419200LL);
    assert_int_equal(m.n_layers, 63);
    assert_int_equal(m.layers[3].n_experts, 0); /* first_k_dense_replace = 3 */
    assert_int_equal(m.layers[3].ffn_hidden, 18432);
    assert_int_equal(m.layers[4].n_experts, 256);
    assert_int_equal(m.layers[4].head_dim, 192);
    ps_model_free(&m);
}

/* Long sequences load on every llama3 preset (the plans that fit them need context parallelism). */
static void test_long_seq(void **state)
{
    (void)state;
    const char *names[] = {"llama3-8b", "llama3-70b", "llama3-405b", "deepseek-v3", "mixtral-8x7b"};
    ps_model_opts o;
    ps_model_opts_init(&o);
    o.seq = 131072;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ps_model m;
        load_ok(names[i], &o, &m);
        assert_int_equal(m.seq, 131072);
        assert_true(ps_model_fwd_flops(&m) > 0);
        ps_model_free(&m);
    }
}

/* Each Hugging Face config imports as the preset of the same model (at the preset's sequence length: the configs
 * state the longest context, the presets the pre-training one). */
static void test_hf_equals_preset(void **state)
{
    (void)state;
    static const char *const names[] = {"mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b",
                                        "deepseek-v3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ps_model p, h;
        load_ok(names[i], NULL, &p);
        ps_model_opts o;
        ps_model_opts_init(&o);
        o.seq = p.seq;
        char rel[64];
        snprintf(rel, sizeof rel, "hf/%s.json", names[i]);
        load_ok(tdata(rel), &o, &h);
        if (h.n_layers != p.n_layers) fail_msg("%s: %lld layers imported, %lld in the preset", names[i],
                                               (long long)h.n_layers, (long long)p.n_layers);
        for (int64_t k = 0; k < p.n_layers; k++)
            if (!ps_layer_equal(&h.layers[k], &p.layers[k])) fail_msg("%s: layer %lld differs", names[i], (long long)k);
        assert_int_equal(ps_model_params(&h), ps_model_params(&p));
        assert_int_equal(ps_model_active_params(&h), ps_model_active_params(&p));
        assert_true(h.rope_theta == p.rope_theta);
        ps_model_free(&h);
        ps_model_free(&p);
    }
    /* the configs' own context */
    ps_model m;
    load_ok(tdata("hf/deepseek-v3.json"), NULL, &m);
    assert_int_equal(m.seq, 163840);
    assert_string_equal(m.family, "deepseek_v3");
    /* n_group 8, topk_group 4: node-limited routing on the MoE blocks, none on the dense ones */
    assert_int_equal(m.layers[4].router_groups, 8);
    assert_int_equal(m.layers[4].router_group_topk, 4);
    assert_int_equal(m.layers[1].router_groups, 0);
    ps_model_free(&m);
    /* Qwen1.5-MoE-A2.7B (qwen2_moe): 60 experts of 1408, 4 per token, one shared expert of 5632; the Qwen blog's
     * 14.3B total and 2.7B activated */
    load_ok(tdata("hf/qwen1.5-moe-a2.7b.json"), NULL, &m);
    assert_int_equal(m.layers[1].n_experts, 60);
    assert_int_equal(m.layers[1].n_shared_experts, 1);
    assert_int_equal(m.layers[1].shared_ffn, 5632);
    assert_int_equal(m.layers[1].attn_window, 0); /* use_sliding_window false */
    assert_true(fabs(rel_err((double)ps_model_params(&m), 14.3e9)) < 0.01);
    assert_true(fabs(rel_err((double)ps_model_active_params(&m), 2.7e9)) < 0.01);
    ps_model_free(&m);
}

/* Which layers are sparse: Qwen's mlp_only_layers and decoder_sparse_step, DeepSeek's first_k_dense_replace and
 * moe_layer_freq, written as small configs. */
static void test_hf_sparse_layers(void **state)
{
    (void)state;
    ps_model m;
    load_ok(tdata("hf/qwen-sparse-step.json"), NULL, &m);
    /* 4 layers, step 2 -> layers 1 and 3 sparse; mlp_only_layers [3] -> only layer 1 */
    assert_int_equal(m.layers[1].n_experts, 0);
    assert_int_equal(m.layers[1].ffn_hidden, 512);
    assert_int_equal(m.layers[2].n_experts, 8);
    assert_int_equal(m.layers[2].ffn_hidden, 64);
    assert_int_equal(m.layers[3].n_experts, 0);
    assert_int_equal(m.layers[4].n_experts, 0);
    ps_model_free(&m);
    load_ok(tdata("hf/deepseek-v2-lite-like.json"), NULL, &m);
    /* first_k_dense_replace 1, moe_layer_freq 2 over 5 layers: layers 2 and 4 sparse; q_lora_rank null; softmax */
    assert_int_equal(m.layers[1].n_experts, 0);
    assert_int_equal(m.layers[2].n_experts, 0);
    assert_int_equal(m.layers[3].n_experts, 16);
    assert_int_equal(m.layers[3].router, PS_ROUTER_SOFTMAX);
    assert_int_equal(m.layers[3].n_shared_experts, 2);
    assert_int_equal(m.layers[5].n_experts, 16);
    assert_int_equal(m.layers[1].q_lora_rank, 0);
    assert_int_equal(m.layers[1].kv_lora_rank, 64);
    assert_int_equal(m.layers[1].head_dim, 48);
    /* no n_group / topk_group: DeepseekV3Config's defaults, 4 of 8 groups */
    assert_int_equal(m.layers[3].router_groups, 8);
    assert_int_equal(m.layers[3].router_group_topk, 4);
    ps_model_free(&m);
}

/* Llama 4 (the text model of the llama4 config): Maverick, 128 experts on every second block, 400B total and 17B
 * active (Meta's Llama 4 announcement); Scout, 16 experts on every block, 17B active of 109B, which counts the vision
 * encoder psearch does not import (its text model: 107.8B). */
static void test_hf_llama4(void **state)
{
    (void)state;
    ps_model m;
    load_ok(tdata("hf/llama4-maverick.json"), NULL, &m);
    assert_string_equal(m.family, "llama4");
    assert_int_equal(m.n_layers, 50);
    assert_int_equal(m.layers[1].n_experts, 0); /* block 0 dense: interleave_moe_layer_step 2 -> 1, 3, 5, ... */
    assert_int_equal(m.layers[1].ffn_hidden, 16384);
    assert_int_equal(m.layers[2].n_experts, 128);
    assert_int_equal(m.layers[2].top_k, 1);
    assert_int_equal(m.layers[2].n_shared_experts, 1);
    assert_int_equal(m.layers[2].shared_ffn, 8192);
    assert_int_equal(m.layers[48].n_experts, 128);
    assert_true(m.rope_theta == 500000.0);
    assert_true(fabs(rel_err((double)ps_model_params(&m), 400e9)) < 0.01);
    assert_true(fabs((double)ps_model_active_params(&m) - 17e9) <= 1e9);
    ps_model_free(&m);
    load_ok(tdata("hf/llama4-scout.json"), NULL, &m);
    for (int64_t i = 1; i <= 48; i++) assert_int_equal(m.layers[i].n_experts, 16);
    /* 48 x (62.9M attention + 17 x 125.8M experts + 82K router + norms) + 2 x 202048 x 5120 */
    assert_int_equal(ps_model_params(&m), 107769861120LL);
    assert_true(fabs(rel_err((double)ps_model_params(&m), 109e9)) < 0.015);
    assert_true(fabs((double)ps_model_active_params(&m) - 17e9) <= 1e9);
    ps_model_free(&m);
}

static void bad(const char *file, const char *needle)
{
    ps_model m;
    ps_error_clear();
    ps_status st = ps_model_load(tdata(file), NULL, &m);
    const char *needles[] = {needle, NULL};
    expect_input_error(st, &m, needles);
}

static void test_bad(void **state)
{
    (void)state;
    bad("bad/moe-topk.json", "layers[0].top_k = 9: must be at most n_experts = 8");
    bad("bad/moe-dense-topk.layers", "moe-dense-topk.layers:2: top_k = 2: applies only to MoE layers");
    bad("bad/moe-no-topk.layers", "moe-no-topk.layers:2: top_k: missing");
    bad("bad/mla-head-dim.json", "layers[0].head_dim = 16: must be qk_nope_head_dim + qk_rope_head_dim = 12");
    bad("bad/moe-router.layers", "moe-router.layers:2:29: router=argmax: unknown router");
    bad("bad/moe-capacity.json", "field 'layers[0].capacity_factor' must be in [0, 1e+06] (got -1)");
    bad("bad/moe-groups.json", "layers[0].router_groups = 3: must divide n_experts = 8");
    bad("bad/moe-group-topk.layers",
        "moe-group-topk.layers:2: router_groups: group-limited routing needs both router_groups and router_group_topk");
    bad("bad/moe-group-many.layers",
        "moe-group-many.layers:2: router_group_topk = 5: must be at most router_groups = 4");
    bad("hf/bad/deepseek-missing-kv-lora.json", "deepseek-missing-kv-lora.json: missing field 'kv_lora_rank'");
    bad("hf/bad/qwen-mlp-only.json", "field 'mlp_only_layers[1]' must be a layer index from 0 to 1");
    bad("hf/bad/mixtral-topk.json", "layer 1 (decoder): top_k = 6: must be at most n_experts = 4");
    bad("hf/bad/deepseek-scoring.json", "field 'scoring_func' = 'argmax' is not supported");
    bad("hf/bad/llama4-no-text.json", "llama4-no-text.json: missing field 'text_config.intermediate_size'");
    /* validation of a layer built in code names the field too */
    ps_model m;
    memset(&m, 0, sizeof m);
    ps_layer l = tiny_moe();
    l.shared_ffn = 0;
    m.layers = &l;
    m.n_layers = 1;
    m.seq = 10;
    ps_error_clear();
    assert_int_equal(ps_model_validate(&m, "code"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "shared_ffn = 0: must be at least 1"));
    l = tiny_mla();
    l.kv_heads = 1;
    ps_error_clear();
    assert_int_equal(ps_model_validate(&m, "code"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "kv_heads = 1: must equal heads = 2"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moe_params),
        cmocka_unit_test(test_moe_flops),
        cmocka_unit_test(test_moe_act),
        cmocka_unit_test(test_mla),
        cmocka_unit_test(test_gqa_unchanged),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_moe_presets),
        cmocka_unit_test(test_long_seq),
        cmocka_unit_test(test_hf_equals_preset),
        cmocka_unit_test(test_hf_sparse_layers),
        cmocka_unit_test(test_hf_llama4),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

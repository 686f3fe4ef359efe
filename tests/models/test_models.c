/* models/: every preset against its published parameter count; FLOPs against Megatron's formula; activation bytes
 * against Korthikanti et al. 2022 Table 2; options; the JSON and layer-list formats on good input. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "models_test.h"

/* ---- presets --------------------------------------------------------------------------------------------------- */

/* The published figure may be rounded (GPT-3's "1.3B"): the preset says to what, and the count must round to it. */
static double preset_rounding(const char *name)
{
    char dir[PATH_MAX], path[PATH_MAX + 80];
    assert_int_equal(ps_data_dir("models", dir, sizeof dir), PS_OK);
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    assert_non_null(root);
    json_t *r = json_object_get(root, "published_params_rounding");
    double v = r ? json_number_value(r) : 0.0;
    json_decref(root);
    return v;
}

static void test_presets_all(void **state)
{
    (void)state;
    char **names = NULL;
    int n = 0;
    assert_int_equal(ps_model_list(&names, &n), PS_OK);
    assert_true(n >= 28);
    print_message("%-14s %16s %16s %8s\n", "preset", "computed", "published", "diff");
    for (int i = 0; i < n; i++) {
        ps_model m;
        load_ok(names[i], NULL, &m);
        assert_int_equal(ps_model_validate(&m, names[i]), PS_OK);
        assert_string_equal(m.name, names[i]); /* the file name is the preset name */
        assert_true(strlen(m.family) > 0);
        assert_true(strlen(m.source) > 20);
        assert_true(m.published_params > 0);
        assert_true(m.seq > 0 && m.n_layers > 0);
        int64_t p = ps_model_params(&m);
        assert_true(p > 0);
        double tol = fmax(0.01 * m.published_params, 0.5 * preset_rounding(names[i]));
        print_message("%-14s %16lld %16.0f %+7.3f%%\n", m.name, (long long)p, m.published_params,
                      100.0 * rel_err((double)p, m.published_params));
        if (fabs((double)p - m.published_params) > tol)
            fail_msg("%s: %lld parameters, published %.0f (tolerance %.0f)", m.name, (long long)p, m.published_params,
                     tol);
        /* every layer's numbers are usable by the planner */
        for (int64_t k = 0; k < m.n_layers; k++) {
            assert_true(ps_layer_params(&m.layers[k]) >= 0);
            assert_true(ps_layer_fwd_flops(&m.layers[k]) >= 0.0);
            /* 0 is legitimate: a lookup table without dropout keeps nothing for its backward pass */
            assert_true(ps_layer_act_bytes(&m.layers[k], m.dtype, 1, false, PS_RECOMP_NONE) >= 0.0);
        }
        ps_model_free(&m);
        assert_null(m.layers);
    }
    ps_model_list_free(names, n);
}

static int64_t params_of(const char *preset)
{
    ps_model m;
    load_ok(preset, NULL, &m);
    int64_t p = ps_model_params(&m);
    ps_model_free(&m);
    return p;
}

static void test_preset_exact_counts(void **state)
{
    (void)state;
    /* released checkpoints: exact */
    assert_int_equal(params_of("llama2-7b"), 6738415616LL);
    assert_int_equal(params_of("llama2-13b"), 13015864320LL);
    assert_int_equal(params_of("llama2-70b"), 68976648192LL);
    assert_int_equal(params_of("llama3-8b"), 8030261248LL);
    assert_int_equal(params_of("llama3-70b"), 70553706496LL);
    assert_true(fabs(rel_err((double)params_of("llama3-405b"), 405.9e9)) < 0.001);
    /* AMP's TransGAN: hand count of the AMP generator code, within what psearch does not model */
    assert_true(fabs(rel_err((double)params_of("amp-transgan"), 199490283.0)) < 0.001);
    /* T5-512/4 differs from T5-Large-32 only in the decoder's sequence length */
    assert_int_equal(params_of("t5-512-4-32"), params_of("t5-large-32"));
}

static void test_list_sorted(void **state)
{
    (void)state;
    char **names = NULL;
    int n = 0;
    assert_int_equal(ps_model_list(&names, &n), PS_OK);
    bool has65 = false, has_t5 = false;
    for (int i = 0; i < n; i++) {
        if (i) assert_true(strcmp(names[i - 1], names[i]) < 0);
        has65 |= strcmp(names[i], "gpt3-65b") == 0;
        has_t5 |= strcmp(names[i], "t5-512-4-32") == 0;
    }
    assert_true(has65 && has_t5);
    ps_model_list_free(names, n);
}

static void test_unknown_preset(void **state)
{
    (void)state;
    ps_model m;
    static const char *const near[] = {"unknown model 'gpt3-66b'", "did you mean 'gpt3-65b'?", "llama3-405b",
                                       "swin-huge-48", "amp-transgan", NULL};
    expect_input_error(ps_model_load("gpt3-66b", NULL, &m), &m, near);
    static const char *const far[] = {"unknown model 'zzzzzzzzzzzz'", "known presets: ", NULL};
    expect_input_error(ps_model_load("zzzzzzzzzzzz", NULL, &m), &m, far);
    assert_null(strstr(ps_error_message(), "did you mean"));
    static const char *const empty[] = {"empty model name", NULL};
    expect_input_error(ps_model_load("", NULL, &m), &m, empty);
}

/* ---- FLOPs ----------------------------------------------------------------------------------------------------- */

/* Narayanan et al. 2021 (Megatron-LM at scale), Sec. 5.1: with full recomputation one iteration costs
 * 96 B s l h^2 (1 + s/(6h) + V/(16 l h)): 4 forward passes of every transformer layer, 3 of the LM head. */
static void megatron_check(const char *preset)
{
    ps_model m;
    load_ok(preset, NULL, &m);
    double blocks = 0.0, head = 0.0, l = 0.0, h = 0.0, s = (double)m.seq, v = 0.0;
    for (int64_t i = 0; i < m.n_layers; i++) {
        const ps_layer *x = &m.layers[i];
        if (x->kind == PS_LAYER_DECODER) {
            blocks += ps_layer_fwd_flops(x);
            l += 1.0;
            h = (double)x->hidden;
        } else if (x->kind == PS_LAYER_LM_HEAD) {
            head += ps_layer_fwd_flops(x);
            v = (double)x->vocab;
        }
    }
    double megatron = 96.0 * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
    double ours = 4.0 * blocks + 3.0 * head;
    if (fabs(rel_err(ours, megatron)) > 1e-9) fail_msg("%s: %.6e vs Megatron %.6e", preset, ours, megatron);
    /* same section: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)), which leaves out the final LayerNorm (2h) */
    double p = 12.0 * l * h * h * (1.0 + 13.0 / (12.0 * h) + (v + s) / (12.0 * l * h));
    assert_true(fabs((double)ps_model_params(&m) - 2.0 * h - p) < 1.0);
    assert_true(fabs(rel_err(ps_model_train_flops(&m), 3.0 * ps_model_fwd_flops(&m))) < 1e-15);
    ps_model_free(&m);
}

static void test_megatron_flops(void **state)
{
    (void)state;
    megatron_check("gpt3-175b");
    megatron_check("gpt3-1.3b");
    megatron_check("gpt3-65b");
}

static ps_layer gpt_layer(int64_t s, int64_t h, int64_t a)
{
    ps_layer l;
    memset(&l, 0, sizeof l);
    l.kind = PS_LAYER_DECODER;
    l.hidden = l.out_hidden = h;
    l.heads = l.kv_heads = a;
    l.head_dim = h / a;
    l.ffn_hidden = 4 * h;
    l.seq = s;
    l.norm = PS_NORM_LAYERNORM;
    l.act = PS_ACT_GELU;
    l.bias = true;
    l.dropout = true;
    return l;
}

static void test_gqa_swiglu_window_flops(void **state)
{
    (void)state;
    ps_model m;
    load_ok("llama3-70b", NULL, &m);
    const ps_layer *d = &m.layers[1];
    assert_int_equal(d->kind, PS_LAYER_DECODER);
    double s = 8192, h = 8192, q = 64 * 128, k = 8 * 128, f = 28672;
    double want = 2 * s * (h * (q + 2 * k) + q * h) + 4 * s * s * q + 6 * s * h * f;
    assert_true(fabs(rel_err(ps_layer_fwd_flops(d), want)) < 1e-12);
    /* per layer: Wq, Wo h x h; Wk, Wv h x 1024; three h x F; two RMSNorm gains */
    assert_int_equal(ps_layer_params(d),
                     (int64_t)(2 * 8192LL * 8192 + 2 * 8192LL * 1024 + 3 * 8192LL * 28672 + 2 * 8192));
    ps_model_free(&m);

    /* a window shorter than the sequence bounds the score terms */
    ps_layer w = gpt_layer(4096, 1024, 16);
    double full = ps_layer_fwd_flops(&w);
    w.attn_window = 512;
    double windowed = ps_layer_fwd_flops(&w);
    assert_true(fabs((full - windowed) - 4.0 * 4096 * (4096 - 512) * 1024) < 1.0);
    w.attn_window = 8192; /* longer than the sequence: no effect */
    assert_true(ps_layer_fwd_flops(&w) == full);
}

/* ---- activation memory ----------------------------------------------------------------------------------------- */

/* Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", Table 2, per layer and
 * per sample (b = 1), 16-bit activations with dropout. */
static void test_korthikanti_table2(void **state)
{
    (void)state;
    const double s = 2048, h = 12288, a = 96, t = 8;
    ps_layer l = gpt_layer(2048, 12288, 96);
    const ps_dtype bf = PS_DTYPE_BF16;
    struct {
        int tp;
        bool sp;
        ps_recompute rc;
        double want;
    } cases[] = {
        {1, false, PS_RECOMP_NONE, s * h * (34 + 5 * a * s / h)},
        {8, false, PS_RECOMP_NONE, s * h * (10 + 24 / t + 5 * a * s / (h * t))},
        {8, true, PS_RECOMP_NONE, s * h * (34 / t + 5 * a * s / (h * t))},
        {8, false, PS_RECOMP_SELECTIVE, s * h * (10 + 24 / t)},
        {8, true, PS_RECOMP_SELECTIVE, s * h * 34 / t},
        {8, false, PS_RECOMP_FULL, 2 * s * h},
        {8, true, PS_RECOMP_FULL, 2 * s * h / t},
        {1, false, PS_RECOMP_SELECTIVE, 34 * s * h},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = ps_layer_act_bytes(&l, bf, cases[i].tp, cases[i].sp, cases[i].rc);
        if (fabs(rel_err(got, cases[i].want)) > 1e-12)
            fail_msg("case %zu (tp %d sp %d %s): %.6e bytes, Table 2 says %.6e", i, cases[i].tp, cases[i].sp,
                     ps_recompute_name(cases[i].rc), got, cases[i].want);
    }
    /* 4-byte activations double every term except the 1-byte dropout masks */
    double fp32 = ps_layer_act_bytes(&l, PS_DTYPE_FP32, 1, false, PS_RECOMP_NONE);
    assert_true(fabs(rel_err(fp32, s * h * (66 + 9 * a * s / h))) < 1e-12);
    /* without dropout the masks and dropout outputs go: 2 s h masks, 3 a s^2 */
    l.dropout = false;
    double nodrop = ps_layer_act_bytes(&l, bf, 1, false, PS_RECOMP_NONE);
    assert_true(fabs(rel_err(nodrop, s * h * (32 + 2 * a * s / h))) < 1e-12);
}

/* torchtitan's per-op checkpointing (PS_RECOMP_OP) by hand on a small Llama-style layer: s = 8, h = 16, 4 heads of
 * 4, 2 kv heads (K = 8), SwiGLU F = 24, BF16 (2 bytes). The linears run wq wk wv wo w1 w3 w2; the policy keeps the
 * 1st, 3rd, 5th and 7th (wq, wv, w1, w2), the kernel's output and statistics, the input, and with SP the two
 * reduce-scatter outputs. */
static void test_op_checkpointing(void **state)
{
    (void)state;
    ps_layer l = gpt_layer(8, 16, 4);
    l.kv_heads = 2;
    l.ffn_hidden = 24;
    l.act = PS_ACT_SWIGLU;
    l.bias = l.dropout = false;
    const ps_dtype bf = PS_DTYPE_BF16;
    ps_linear lin[PS_LINEARS_MAX];
    assert_int_equal(ps_layer_linears(&l, 1, lin), 7);
    assert_true(lin[1].n_out == 8 && lin[3].row && lin[3].k_in == 16 && lin[6].row && lin[6].k_in == 24);
    /* TP 1 fused: input 256 + wq 256 + wv 128 + w1 384 + w2 256 + kernel output 256 + fp32 log-sum-exp 4*4*8 = 128 */
    assert_true(ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_OP, PS_ATTN_FUSED) == 1664);
    /* TP 2 with SP: input 128, wq 128, wv 64, w1 192, w2 256 (a row-parallel output: the full partial sum), kernel
     * output 128, statistics 64, two reduce-scatter outputs of 128 */
    assert_true(ps_layer_act_bytes_attn(&l, bf, 2, true, PS_RECOMP_OP, PS_ATTN_FUSED) == 1216);
    /* unfused (math) attention keeps nothing of its own: 256 + 256 + 128 + 384 + 256 */
    assert_true(ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_OP, PS_ATTN_UNFUSED) == 1280);
    /* FP8 (torchao float8: torch._scaled_mm is not in the save list): the input and the kernel's output, 2-byte */
    assert_true(ps_layer_act_bytes_attn(&l, PS_DTYPE_FP8, 1, false, PS_RECOMP_OP, PS_ATTN_FUSED) == 640);
    assert_false(ps_op_sac_keeps(0, PS_DTYPE_FP8));
    assert_true(ps_op_sac_keeps(2, bf) && !ps_op_sac_keeps(3, bf));
    /* between full and none */
    double none = ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_NONE, PS_ATTN_FUSED);
    assert_true(1664 < none && 1664 > ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_FULL, PS_ATTN_FUSED));
    /* a GELU MLP has fc1 and fc2: 6 linears, heads and embeddings none */
    ps_layer g = gpt_layer(8, 16, 2);
    assert_int_equal(ps_layer_linears(&g, 1, lin), 6);
    g.kind = PS_LAYER_LM_HEAD;
    assert_int_equal(ps_layer_linears(&g, 1, lin), 0);
    ps_recompute rc;
    assert_int_equal(ps_recompute_parse("op", &rc), PS_OK);
    assert_int_equal(rc, PS_RECOMP_OP);
    assert_string_equal(ps_recompute_name(PS_RECOMP_OP), "op");
}

/* Fused attention (FlashAttention-2/3, cuDNN): Table 2's score terms (5as^2: softmax output 2as^2, dropout mask as^2,
 * dropout output 2as^2) give way to the fp32 log-sum-exp, 4as bytes; everything else of the layer stays. A small
 * layer by hand: s = 8, h = 16, a = 2, head dim 8. */
static void test_fused_attention(void **state)
{
    (void)state;
    ps_layer l = gpt_layer(8, 16, 2);
    const double s = 8, h = 16, a = 2, t = 2;
    const ps_dtype bf = PS_DTYPE_BF16;
    double unf = ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_NONE, PS_ATTN_UNFUSED);
    assert_true(fabs(rel_err(unf, s * h * 34 + 5 * a * s * s)) < 1e-12); /* 4352 + 640 = 4992 bytes */
    double fus = ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_NONE, PS_ATTN_FUSED);
    assert_true(fabs(fus - (s * h * 34 + 4 * a * s)) < 1e-9); /* 4352 + 64 = 4416 bytes */
    /* auto is the layer alone: unfused; the legacy call is unfused */
    assert_true(ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_NONE, PS_ATTN_AUTO) == unf);
    assert_true(ps_layer_act_bytes(&l, bf, 1, false, PS_RECOMP_NONE) == unf);
    /* selective recomputation drops nothing more from a fused layer; full keeps the input either way */
    assert_true(ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_SELECTIVE, PS_ATTN_FUSED) == fus);
    assert_true(ps_layer_act_bytes_attn(&l, bf, 1, false, PS_RECOMP_FULL, PS_ATTN_FUSED) == 2 * s * h);
    /* TP 2 with SP: everything / t, the statistics split with the heads */
    double tsp = ps_layer_act_bytes_attn(&l, bf, 2, true, PS_RECOMP_NONE, PS_ATTN_FUSED);
    assert_true(fabs(tsp - (s * h * 34 / t + 4 * a * s / t)) < 1e-9);
    /* executed keys: causal fused (s + 1) / 2 = 4.5; unfused and encoders all 8; a window of 4: (4*5/2 + 4*4)/8 */
    assert_true(ps_layer_attn_keys(&l, PS_ATTN_FUSED) == 4.5);
    assert_true(ps_layer_attn_keys(&l, PS_ATTN_UNFUSED) == 8);
    ps_layer e = l;
    e.kind = PS_LAYER_ENCODER;
    assert_true(ps_layer_attn_keys(&e, PS_ATTN_FUSED) == 8);
    l.attn_window = 4;
    assert_true(ps_layer_attn_keys(&l, PS_ATTN_FUSED) == (10.0 + 16.0) / 8);
    assert_true(ps_layer_attn_keys(&l, PS_ATTN_UNFUSED) == 4);
    /* backward FLOPs from the two products' forward FLOPs: fused 3x scores + 2x weighted sum (2.5x at d = dv; MLA's
     * d 192, dv 128: 3 x 192 + 2 x 128 = 832 = 2.6 x 320), unfused 2x both */
    assert_true(ps_attn_bwd_flops(PS_ATTN_FUSED, 1, 1) == 5 && ps_attn_bwd_flops(PS_ATTN_UNFUSED, 1, 1) == 4);
    assert_true(ps_attn_bwd_flops(PS_ATTN_FUSED, 192, 128) == 832);
    assert_true(ps_attn_bwd_flops(PS_ATTN_UNFUSED, 192, 128) == 640);
    /* names */
    ps_attn x;
    assert_int_equal(ps_attn_parse("fused", &x), PS_OK);
    assert_int_equal(x, PS_ATTN_FUSED);
    assert_int_equal(ps_attn_parse("flash", &x), PS_ERR_INPUT);
    ps_error_clear();
    assert_string_equal(ps_attn_name(PS_ATTN_UNFUSED), "unfused");
}

static void test_act_monotonic(void **state)
{
    (void)state;
    char **names = NULL;
    int n = 0;
    assert_int_equal(ps_model_list(&names, &n), PS_OK);
    const int tps[] = {1, 2, 4, 8, 16, 32};
    for (int i = 0; i < n; i++) {
        ps_model m;
        load_ok(names[i], NULL, &m);
        for (int64_t k = 0; k < m.n_layers; k++) {
            const ps_layer *l = &m.layers[k];
            for (int sp = 0; sp < 2; sp++) {
                for (int r = PS_RECOMP_NONE; r <= PS_RECOMP_FULL; r++) {
                    for (size_t j = 0; j < sizeof tps / sizeof tps[0]; j++) {
                        double b = ps_layer_act_bytes(l, m.dtype, tps[j], sp, (ps_recompute)r);
                        assert_true(b >= 0.0);
                        if (j > 0) /* more tensor parallelism never needs more memory per GPU */
                            assert_true(b <= ps_layer_act_bytes(l, m.dtype, tps[j - 1], sp, (ps_recompute)r));
                        if (r > PS_RECOMP_NONE) /* more recomputation never keeps more */
                            assert_true(b <= ps_layer_act_bytes(l, m.dtype, tps[j], sp, (ps_recompute)(r - 1)));
                        if (sp) /* sequence parallelism never keeps more */
                            assert_true(b <= ps_layer_act_bytes(l, m.dtype, tps[j], false, (ps_recompute)r));
                    }
                }
            }
        }
        ps_model_free(&m);
    }
    ps_model_list_free(names, n);
}

/* ---- encoder-decoder and vision models -------------------------------------------------------------------------- */

static void test_t5_512_4(void **state)
{
    (void)state;
    ps_model m;
    load_ok("t5-512-4-32", NULL, &m);
    assert_int_equal(m.n_layers, 1 + 16 + 16 + 1);
    const ps_layer *enc = &m.layers[1], *dec = &m.layers[17];
    assert_int_equal(enc->kind, PS_LAYER_ENCODER);
    assert_int_equal(dec->kind, PS_LAYER_DECODER_XATTN);
    assert_int_equal(enc->seq, 512);
    assert_int_equal(dec->seq, 4);
    assert_int_equal(dec->kv_seq, 512);
    assert_int_equal(m.layers[33].seq, 4);
    /* the decoder adds cross-attention (4 h x 1024 projections) and a third RMSNorm */
    assert_int_equal(ps_layer_params(dec) - ps_layer_params(enc), 4LL * 1024 * 1024 + 1024);
    /* the imbalance Galvatron-BMW describes: decoders keep far less activation memory than encoders */
    assert_true(ps_layer_act_bytes(dec, m.dtype, 1, false, PS_RECOMP_NONE) <
                0.1 * ps_layer_act_bytes(enc, m.dtype, 1, false, PS_RECOMP_NONE));
    /* cross-attention FLOPs: Q and output projections on 4 tokens, K and V on 512, scores 4 x 512 */
    double s = 4, kv = 512, h = 1024, q = 1024;
    double self = 2 * s * (h * 3 * q + q * h) + 4 * s * s * q + 4 * s * h * 4096;
    double cross = 2 * s * h * q + 2 * kv * h * 2 * q + 2 * s * q * h + 4 * s * kv * q;
    assert_true(fabs(rel_err(ps_layer_fwd_flops(dec), self + cross)) < 1e-12);
    /* the encoder output rides along with the decoder's stage boundary */
    assert_true(ps_layer_boundary_bytes(dec, PS_DTYPE_BF16) == 2.0 * (4 * 1024 + 512 * 1024));
    assert_true(ps_layer_boundary_bytes(&m.layers[33], PS_DTYPE_BF16) == 0.0);
    ps_model_free(&m);
}

static void test_swin(void **state)
{
    (void)state;
    ps_model m;
    load_ok("swin-huge-32", NULL, &m);
    static const ps_layer_kind want[] = {PS_LAYER_PATCH_EMBED, PS_LAYER_ENCODER, PS_LAYER_ENCODER, PS_LAYER_MERGE};
    for (int i = 0; i < 4; i++) assert_int_equal(m.layers[i].kind, want[i]);
    const ps_layer *merge = &m.layers[3];
    assert_int_equal(merge->seq, 3136);
    assert_int_equal(merge->hidden, 320);
    assert_int_equal(merge->out_hidden, 640);
    /* LayerNorm(4C) + Linear(4C -> 2C) without bias */
    assert_int_equal(ps_layer_params(merge), 2LL * 1280 + 1280LL * 640);
    assert_true(ps_layer_fwd_flops(merge) == 2.0 * 784 * 1280 * 640);
    assert_true(ps_layer_boundary_bytes(merge, PS_DTYPE_BF16) == 2.0 * 784 * 640);
    const ps_layer *b = &m.layers[1];
    assert_int_equal(b->heads, 10); /* 320 / head_dim 32 */
    assert_int_equal(b->attn_window, 49);
    /* window attention: 49 keys per query, not 3136 */
    double s = 3136, h = 320;
    double want_f = 2 * s * 4 * h * h + 4 * s * 49 * h + 16 * s * h * h;
    assert_true(fabs(rel_err(ps_layer_fwd_flops(b), want_f)) < 1e-12);
    assert_int_equal(m.layers[m.n_layers - 1].kind, PS_LAYER_CLS_HEAD);
    assert_int_equal(m.layers[m.n_layers - 1].hidden, 2560);
    ps_model_free(&m);

    /* the user-written Swin-T: default merge width doubles, heads follow head_dim; Liu et al. report 28M (plus
     * relative-position tables and the patch norm, not modelled) */
    load_ok(tdata("good/swin-tiny.json"), NULL, &m);
    assert_int_equal(m.layers[3].out_hidden, 192);
    assert_int_equal(m.layers[m.n_layers - 2].heads, 24);
    assert_true(fabs(rel_err((double)ps_model_params(&m), 28.3e6)) < 0.01);
    ps_model_free(&m);
}

static void test_vit_patch_embed(void **state)
{
    (void)state;
    ps_model m;
    load_ok("vit-huge-32", NULL, &m);
    const ps_layer *p = &m.layers[0];
    assert_int_equal(p->kind, PS_LAYER_PATCH_EMBED);
    assert_int_equal(p->seq, 257);
    assert_int_equal(ps_layer_params(p), 3LL * 14 * 14 * 1280 + 1280 + 257LL * 1280 + 1280);
    assert_true(ps_layer_fwd_flops(p) == 2.0 * 256 * 3 * 14 * 14 * 1280);
    const ps_layer *c = &m.layers[m.n_layers - 1];
    assert_int_equal(ps_layer_params(c), 2LL * 1280 + 1280LL * 1000 + 1000);
    assert_true(ps_layer_fwd_flops(c) == 2.0 * 1280 * 1000);
    ps_model_free(&m);
}

/* ---- options --------------------------------------------------------------------------------------------------- */

static void test_opts_seq(void **state)
{
    (void)state;
    ps_model_opts o;
    ps_model_opts_init(&o);
    assert_int_equal(o.dtype, -1);
    assert_int_equal(o.seq, 0);
    o.seq = 4096;
    ps_model m;
    load_ok("gpt3-1.3b", &o, &m);
    assert_int_equal(m.seq, 4096);
    for (int64_t i = 0; i < m.n_layers; i++) assert_int_equal(m.layers[i].seq, 4096);
    /* learned positions are parameters of the architecture, not of the run */
    assert_int_equal(m.layers[0].positions, 2048);
    ps_model_free(&m);

    /* encoder-decoder: the decoder keeps its share and cross-attention follows the encoder */
    o.seq = 1024;
    load_ok("t5-512-4-32", &o, &m);
    assert_int_equal(m.layers[1].seq, 1024);
    assert_int_equal(m.layers[17].seq, 8);
    assert_int_equal(m.layers[17].kv_seq, 1024);
    ps_model_free(&m);

    /* the same length as the model's is a no-op */
    o.seq = 2048;
    load_ok("gpt3-1.3b", &o, &m);
    assert_int_equal(m.layers[1].seq, 2048);
    ps_model_free(&m);
}

static void test_opts_vocab_dtype(void **state)
{
    (void)state;
    ps_model_opts o;
    ps_model_opts_init(&o);
    o.vocab_pad = 128 * 8;
    ps_model m;
    load_ok("gpt3-175b", &o, &m);
    assert_int_equal(m.layers[0].vocab, 51200);
    assert_int_equal(m.layers[m.n_layers - 1].vocab, 51200);
    /* the head is tied, so only the embedding grows */
    assert_int_equal(ps_model_params(&m) - params_of("gpt3-175b"), (51200LL - 50257) * 12288);
    ps_model_free(&m);

    o.vocab_pad = 1; /* 1 = no padding */
    o.dtype = PS_DTYPE_FP32;
    load_ok("llama2-7b", &o, &m);
    assert_int_equal(m.layers[0].vocab, 32000);
    assert_int_equal(m.dtype, PS_DTYPE_FP32);
    ps_model_free(&m);

    ps_model_opts_init(&o);
    load_ok("amp-gpt2", &o, &m);
    assert_int_equal(m.dtype, PS_DTYPE_FP16); /* the preset's own dtype when not overridden */
    ps_model_free(&m);

    o.dtype = 9;
    static const char *const bad_dtype[] = {"dtype override 9", NULL};
    expect_input_error(ps_model_load("llama2-7b", &o, &m), &m, bad_dtype);
    ps_model_opts_init(&o);
    o.vocab_pad = -4;
    static const char *const bad_pad[] = {"vocab padding = -4", NULL};
    expect_input_error(ps_model_load("llama2-7b", &o, &m), &m, bad_pad);
    ps_model_opts_init(&o);
    o.seq = -1;
    static const char *const bad_seq[] = {"sequence length override = -1", NULL};
    expect_input_error(ps_model_load("llama2-7b", &o, &m), &m, bad_seq);
}

/* ---- formats on good input ------------------------------------------------------------------------------------- */

static void assert_same_layers(const ps_model *a, const ps_model *b)
{
    assert_int_equal(a->n_layers, b->n_layers);
    assert_int_equal(a->seq, b->seq);
    for (int64_t i = 0; i < a->n_layers; i++) {
        const ps_layer *x = &a->layers[i], *y = &b->layers[i];
        assert_int_equal(x->kind, y->kind);
        assert_int_equal(x->hidden, y->hidden);
        assert_int_equal(x->out_hidden, y->out_hidden);
        assert_int_equal(x->heads, y->heads);
        assert_int_equal(x->kv_heads, y->kv_heads);
        assert_int_equal(x->head_dim, y->head_dim);
        assert_int_equal(x->ffn_hidden, y->ffn_hidden);
        assert_int_equal(x->seq, y->seq);
        assert_int_equal(x->kv_seq, y->kv_seq);
        assert_int_equal(x->attn_window, y->attn_window);
        assert_int_equal(x->vocab, y->vocab);
        assert_int_equal(x->positions, y->positions);
        assert_int_equal(x->norm, y->norm);
        assert_int_equal(x->act, y->act);
        assert_int_equal(x->bias, y->bias);
        assert_int_equal(x->dropout, y->dropout);
        assert_int_equal(x->tied, y->tied);
    }
}

static void test_json_and_layer_list_agree(void **state)
{
    (void)state;
    ps_model a, b;
    load_ok(tdata("good/gpt2-small.json"), NULL, &a);
    load_ok(tdata("good/gpt2-small.layers"), NULL, &b);
    assert_same_layers(&a, &b);
    assert_string_equal(b.name, "gpt2-small");
    assert_string_equal(b.family, "gpt2");
    assert_string_equal(b.source, "Radford et al. 2019 (GPT-2 124M)");
    assert_true(b.published_params == 124439808.0);
    assert_int_equal(b.dtype, PS_DTYPE_BF16);
    assert_int_equal(ps_model_params(&a), 124439808LL);
    /* defaults: bias on, LayerNorm, GELU, kv_heads = heads, head_dim = hidden / heads, F = 4h */
    assert_true(a.layers[1].bias);
    assert_int_equal(a.layers[1].head_dim, 64);
    assert_int_equal(a.layers[1].ffn_hidden, 3072);
    /* fields that do not apply to a kind are 0 even when given at the top level */
    assert_int_equal(a.layers[1].vocab, 0);
    assert_int_equal(a.layers[1].positions, 0);
    ps_model_free(&a);
    ps_model_free(&b);

    /* the explicit loaders agree with ps_model_load */
    assert_int_equal(ps_model_load_json(tdata("good/gpt2-small.json"), NULL, &a), PS_OK);
    assert_int_equal(ps_model_load_layer_list(tdata("good/gpt2-small.layers"), NULL, &b), PS_OK);
    assert_same_layers(&a, &b);
    ps_model_free(&a);
    ps_model_free(&b);

    load_ok(tdata("good/hetero.json"), NULL, &a);
    load_ok(tdata("good/hetero.layers"), NULL, &b);
    assert_same_layers(&a, &b);
    assert_int_equal(a.n_layers, 24);
    assert_int_equal(a.seq, 81); /* no top-level seq: the first layer's */
    assert_int_equal(a.layers[0].hidden, 1024);
    assert_int_equal(a.layers[0].head_dim, 256);
    assert_int_equal(a.layers[12].hidden, 16);
    assert_int_equal(a.layers[12].head_dim, 4);
    assert_int_equal(a.layers[12].seq, 82944);
    assert_int_equal(a.layers[12].attn_window, 324);
    assert_int_equal(a.layers[11].attn_window, 0);
    ps_model_free(&a);
    ps_model_free(&b);

    /* a layer list without the extension */
    load_ok(tdata("good/sniffed.txt"), NULL, &a);
    assert_int_equal(a.n_layers, 4);
    assert_string_equal(a.name, "sniffed");
    ps_model_free(&a);

    /* a preset given by path */
    load_ok(PS_TEST_DATA "/../../../presets/models/gpt3-65b.json", NULL, &a);
    assert_string_equal(a.name, "gpt3-65b");
    ps_model_free(&a);
}

static void test_t5_json_defaults(void **state)
{
    (void)state;
    ps_model m;
    load_ok(tdata("good/t5-small-512-4.json"), NULL, &m);
    assert_int_equal(m.layers[7].kind, PS_LAYER_DECODER_XATTN);
    assert_int_equal(m.layers[7].kv_seq, 512); /* from the preceding encoder */
    assert_int_equal(m.layers[7].seq, 4);
    assert_false(m.layers[7].bias);
    assert_int_equal(m.layers[7].norm, PS_NORM_RMSNORM);
    ps_model_free(&m);
}

/* Sizes beyond 2^31 are carried in 64 bits end to end. */
static void test_huge_sizes(void **state)
{
    (void)state;
    ps_model m;
    load_ok(tdata("good/huge-vocab.json"), NULL, &m);
    int64_t v = 3000000000LL, f = 2147483653LL, h = 8;
    int64_t embed = v * h;
    int64_t block = 4 * h * h + (h + 2 * h + h) + 2 * h * f + f + h + 2 * 2 * h;
    int64_t head = 2 * h + v * h;
    assert_int_equal(ps_layer_params(&m.layers[0]), embed);
    assert_int_equal(ps_layer_params(&m.layers[1]), block);
    assert_int_equal(ps_model_params(&m), embed + block + head);
    assert_true(ps_model_params(&m) > (int64_t)INT32_MAX * 4);
    assert_true(ps_layer_fwd_flops(&m.layers[2]) == 2.0 * 8 * 8 * 3e9);
    ps_model_free(&m);
}

/* ---- validation of models built by callers ---------------------------------------------------------------------- */

static void test_validate_api(void **state)
{
    (void)state;
    ps_layer layers[2] = {gpt_layer(1024, 768, 12), gpt_layer(1024, 768, 12)};
    ps_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "handmade");
    m.layers = layers;
    m.n_layers = 2;
    m.seq = 1024;
    m.dtype = PS_DTYPE_BF16;
    assert_int_equal(ps_model_validate(&m, "handmade"), PS_OK);
    layers[1].kv_heads = 5;
    assert_int_equal(ps_model_validate(&m, "handmade"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "handmade: layer 1 (decoder): kv_heads = 5"));
    layers[1].kv_heads = 12;
    layers[0].seq = 0;
    assert_int_equal(ps_model_validate(&m, NULL), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "handmade: layer 0 (decoder): seq = 0"));
    layers[0].seq = 1024;
    layers[0].ffn_hidden = INT64_MAX / 4; /* 2 h F overflows int64 */
    assert_int_equal(ps_layer_params(&layers[0]), -1);
    assert_int_equal(ps_model_params(&m), -1);
    assert_int_equal(ps_model_validate(&m, "handmade"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "overflows"));
    layers[0].ffn_hidden = 3072;
    /* each layer fits, the sum does not */
    layers[0].vocab = layers[1].vocab = INT64_MAX / 16;
    layers[0].kind = layers[1].kind = PS_LAYER_LM_HEAD;
    layers[0].tied = layers[1].tied = false;
    layers[0].hidden = layers[1].hidden = 10;
    assert_true(ps_layer_params(&layers[0]) > 0);
    assert_int_equal(ps_model_params(&m), -1);
    assert_int_equal(ps_model_validate(&m, "handmade"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "total parameter count overflows"));
    layers[0] = gpt_layer(1024, 768, 12);
    layers[1] = gpt_layer(1024, 768, 12);
    m.dtype = (ps_dtype)7;
    assert_int_equal(ps_model_validate(&m, "handmade"), PS_ERR_INPUT);
    m.dtype = PS_DTYPE_BF16;
    m.n_layers = 0;
    assert_int_equal(ps_model_validate(&m, "handmade"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "no layers"));
    ps_model_free(NULL);
}

/* ---- scaled copies (ps_model_scaled, which psearch exec runs on CPUs) -------------------------------------------- */

/* What ps_models.h promises a width or token count becomes: ceil(x / f) rounded up to a multiple of align; 0 (a
 * field the kind does not use) stays 0. */
static int64_t scaled_dim(int64_t x, int64_t f, int64_t align)
{
    if (x == 0) return 0;
    int64_t v = (x + f - 1) / f;
    return (v + align - 1) / align * align;
}

static void test_scaled(void **state)
{
    (void)state;
    ps_model m, s;
    load_ok(tdata("good/gpt2-small.json"), NULL, &m);

    /* f = 1: an exact copy, in layers of its own. */
    assert_int_equal(ps_model_scaled(&m, 1, 8, &s), PS_OK);
    assert_string_equal(s.name, m.name);
    assert_string_equal(s.family, m.family);
    assert_string_equal(s.source, m.source);
    assert_int_equal(s.dtype, m.dtype);
    assert_int_equal(s.seq, m.seq);
    assert_true(s.published_params == m.published_params);
    assert_int_equal(s.n_layers, m.n_layers);
    assert_true(s.layers != m.layers);
    assert_memory_equal(s.layers, m.layers, (size_t)m.n_layers * sizeof *m.layers); /* every field of every layer */
    ps_model_free(&s);

    /* f = 16, align 8: widths and token counts ceil(x / 16) rounded up to multiples of 8, head counts kept, head_dim,
     * windows and positions ceil(x / 16). */
    assert_int_equal(ps_model_scaled(&m, 16, 8, &s), PS_OK);
    assert_string_equal(s.name, "gpt2-small/16");
    assert_true(s.published_params == 0); /* the published count is the full model's */
    assert_int_equal(s.seq, 64);
    assert_int_equal(s.n_layers, m.n_layers);
    for (int64_t i = 0; i < m.n_layers; i++) {
        const ps_layer *a = &m.layers[i], *b = &s.layers[i];
        const int64_t widths[][2] = {{a->hidden, b->hidden}, {a->out_hidden, b->out_hidden},
                                     {a->ffn_hidden, b->ffn_hidden}, {a->vocab, b->vocab}, {a->seq, b->seq},
                                     {a->kv_seq, b->kv_seq}};
        for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
            assert_int_equal(widths[k][1], scaled_dim(widths[k][0], 16, 8));
            assert_int_equal(widths[k][1] % 8, 0);
        }
        assert_int_equal(b->heads, a->heads);
        assert_int_equal(b->kv_heads, a->kv_heads);
        assert_int_equal(b->head_dim, scaled_dim(a->head_dim, 16, 1));
        assert_int_equal(b->attn_window, scaled_dim(a->attn_window, 16, 1));
        assert_int_equal(b->positions, scaled_dim(a->positions, 16, 1));
        assert_int_equal(b->kind, a->kind);
        assert_int_equal(b->tied, a->tied);
    }
    /* the numbers themselves: 768 -> 48, head_dim 64 -> 4, vocab 50257 -> 3142 -> 3144, 1024 positions -> 64 */
    assert_int_equal(s.layers[1].hidden, 48);
    assert_int_equal(s.layers[1].ffn_hidden, 192);
    assert_int_equal(s.layers[1].head_dim, 4);
    assert_int_equal(s.layers[1].heads, 12);
    assert_int_equal(s.layers[0].vocab, 3144);
    assert_int_equal(s.layers[0].positions, 64);
    ps_model_free(&s);

    /* A name that fills the field keeps the suffix whole and loses its end instead. */
    memset(m.name, 'n', sizeof m.name - 1);
    m.name[sizeof m.name - 1] = '\0';
    assert_int_equal(ps_model_scaled(&m, 16, 8, &s), PS_OK);
    char want[sizeof m.name];
    snprintf(want, sizeof want, "%.*s/16", (int)(sizeof m.name - 1 - 3), m.name);
    assert_string_equal(s.name, want);
    assert_int_equal(strlen(s.name), sizeof s.name - 1);
    ps_model_free(&s);
    ps_model_free(&m);

    /* A copy that breaks a rule of the original is refused, freed and zeroed: Swin's second patch merging takes
     * 784 tokens, 49 at f = 16 without alignment, which 2x2 merging cannot join (align 8 keeps them whole: 56). */
    load_ok("swin-huge-32", NULL, &m);
    memset(&s, 0xa5, sizeof s);
    assert_int_equal(ps_model_scaled(&m, 16, 1, &s), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "swin-huge-32/16: layer"));
    assert_non_null(strstr(ps_error_message(), "(merge): seq = 49"));
    assert_null(s.layers);
    assert_int_equal(s.n_layers, 0);
    assert_string_equal(s.name, "");
    assert_int_equal(ps_model_scaled(&m, 16, 8, &s), PS_OK);
    ps_model_free(&s);

    /* f and align below 1 are refused with nothing to free. */
    assert_int_equal(ps_model_scaled(&m, 0, 8, &s), PS_ERR_INPUT);
    assert_null(s.layers);
    assert_int_equal(ps_model_scaled(&m, 2, 0, &s), PS_ERR_INPUT);
    assert_null(s.layers);
    ps_model_free(&m);
}

static void test_names(void **state)
{
    (void)state;
    for (int k = 0; k < PS_LAYER_KIND_COUNT; k++) {
        ps_layer_kind back;
        assert_int_equal(ps_layer_kind_parse(ps_layer_kind_name((ps_layer_kind)k), &back), PS_OK);
        assert_int_equal(back, k);
    }
    /* blocks: everything between the embeddings and the heads */
    for (int k = 0; k < PS_LAYER_KIND_COUNT; k++) {
        bool end = k == PS_LAYER_EMBED || k == PS_LAYER_PATCH_EMBED || k == PS_LAYER_LM_HEAD || k == PS_LAYER_CLS_HEAD;
        assert_int_equal(ps_layer_is_block((ps_layer_kind)k), !end);
    }
    ps_layer_kind kind;
    assert_int_equal(ps_layer_kind_parse("decodr", &kind), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "did you mean 'decoder'"));
    ps_dtype d;
    assert_int_equal(ps_dtype_parse("bfloat16", &d), PS_OK);
    assert_int_equal(d, PS_DTYPE_BF16);
    assert_int_equal(ps_dtype_parse("fp12", &d), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "unknown dtype 'fp12'"));
    assert_int_equal(ps_dtype_bytes(PS_DTYPE_FP8), 1);
    assert_string_equal(ps_dtype_name(PS_DTYPE_FP16), "fp16");
    ps_recompute r;
    assert_int_equal(ps_recompute_parse("selective", &r), PS_OK);
    assert_int_equal(r, PS_RECOMP_SELECTIVE);
    assert_int_equal(ps_recompute_parse("partial", &r), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "'partial'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_all),
        cmocka_unit_test(test_preset_exact_counts),
        cmocka_unit_test(test_list_sorted),
        cmocka_unit_test(test_unknown_preset),
        cmocka_unit_test(test_megatron_flops),
        cmocka_unit_test(test_gqa_swiglu_window_flops),
        cmocka_unit_test(test_korthikanti_table2),
        cmocka_unit_test(test_act_monotonic),
        cmocka_unit_test(test_t5_512_4),
        cmocka_unit_test(test_swin),
        cmocka_unit_test(test_vit_patch_embed),
        cmocka_unit_test(test_opts_seq),
        cmocka_unit_test(test_opts_vocab_dtype),
        cmocka_unit_test(test_json_and_layer_list_agree),
        cmocka_unit_test(test_t5_json_defaults),
        cmocka_unit_test(test_huge_sizes),
        cmocka_unit_test(test_validate_api),
        cmocka_unit_test(test_scaled),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_fused_attention),
        cmocka_unit_test(test_op_checkpointing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

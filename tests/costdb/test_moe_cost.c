/* The cost model on mixture-of-experts layers and multi-head latent attention at expert-parallel degree 1: the GEMM
 * list a layer has (shapes by hand), its FLOPs against the model's, the load-imbalance factor on the busiest expert
 * (tile waves by hand), and memory holding every expert's weights, gradients and optimizer states. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ps_cost.h"
#include "cost_test_util.h"

/* Mixtral 8x7B's block: h 4096, 32 / 8 heads of 128, 8 experts of 14336, top 2. */
static void test_moe_gemms(void **state)
{
    (void)state;
    ps_model m = load_model("mixtral-8x7b", 0);
    const ps_layer *l = &m.layers[1];
    ps_layer_gemms g;
    /* micro-batch 2 of 32768 tokens: T = 65536; each expert's mean share 65536 x 2 / 8 = 16384 tokens */
    ps_layer_gemm_shapes(l, 2, 4, &g);
    assert_int_equal(g.n, 7);
    shape_is(&g.g[0], 65536, (4096 + 2 * 1024) / 4.0, 4096, 1); /* QKV */
    shape_is(&g.g[1], 65536, 4096, 4096 / 4.0, 1);              /* output projection */
    shape_is(&g.g[2], 65536, 8, 4096, 1);                       /* router, whole on every TP rank */
    shape_is(&g.g[3], 16384, 14336 / 4.0, 4096, 16);            /* gate and up of 8 experts */
    shape_is(&g.g[4], 16384, 4096, 14336 / 4.0, 8);             /* down of 8 experts */
    assert_true(g.g[3].experts == 8 && g.g[4].experts == 8 && g.g[2].experts == 0);
    assert_int_equal(g.g[3].blk, 1);
    assert_true(g.g[5].attn && g.g[6].attn);
    assert_int_equal(g.tp_colls, 2);
    /* at TP 1 the list's FLOPs are the model's */
    ps_layer_gemm_shapes(l, 1, 1, &g);
    assert_close(list_flops(&g), ps_layer_fwd_flops(l), 1e-12);
    /* a capacity factor of 0.5 halves what the experts run */
    ps_layer lc = *l;
    lc.capacity_factor = 0.5;
    ps_layer_gemm_shapes(&lc, 1, 1, &g);
    shape_is(&g.g[3], 4096, 14336, 4096, 16);
    ps_model_free(&m);
}

/* DeepSeek-V3's MoE block: MLA (q rank 1536, kv rank 512, 128 heads of 128 + 64, v 128), a router over 256 experts,
 * 8 of width 2048 per token, one shared expert of 2048. */
static void test_mla_gemms(void **state)
{
    (void)state;
    ps_model m = load_model("deepseek-v3", 0);
    const ps_layer *l = &m.layers[4];
    ps_layer_gemms g;
    ps_layer_gemm_shapes(l, 1, 8, &g); /* T = 4096 */
    assert_int_equal(g.n, 11);
    shape_is(&g.g[0], 4096, 1536 + 512 + 64, 7168, 1);       /* q_a and kv_a: whole */
    shape_is(&g.g[1], 4096, 128 * 192 / 8.0, 1536, 1);       /* q_b */
    shape_is(&g.g[2], 4096, 128 * (128 + 128) / 8.0, 512, 1); /* kv_b */
    shape_is(&g.g[3], 4096, 7168, 128 * 128 / 8.0, 1);       /* o */
    shape_is(&g.g[4], 4096, 256, 7168, 1);                   /* router */
    shape_is(&g.g[5], 128, 2048 / 8.0, 7168, 512);           /* 4096 x 8 / 256 tokens per expert */
    shape_is(&g.g[6], 128, 7168, 2048 / 8.0, 256);
    shape_is(&g.g[7], 4096, 2048 / 8.0, 7168, 2);            /* the shared expert */
    shape_is(&g.g[8], 4096, 7168, 2048 / 8.0, 1);
    shape_is(&g.g[9], 4096, 4096, 192, 128 / 8.0);           /* scores over 192-wide heads */
    shape_is(&g.g[10], 4096, 128, 4096, 128 / 8.0);          /* weighted sum of 128-wide values */
    assert_true(g.g[9].scores && !g.g[10].scores);
    for (int i = 0; i < 9; i++) assert_false(g.g[i].scores);
    ps_layer_gemm_shapes(l, 1, 1, &g);
    assert_close(list_flops(&g), ps_layer_fwd_flops(l), 1e-12);
    /* the dense first layers: MLA and an MLP of 18432 */
    ps_layer_gemm_shapes(&m.layers[1], 1, 1, &g);
    assert_int_equal(g.n, 8);
    shape_is(&g.g[4], 4096, 18432, 7168, 2);
    assert_close(list_flops(&g), ps_layer_fwd_flops(&m.layers[1]), 1e-12);
    ps_model_free(&m);
}

/* MLA's fused attention core: the backward recomputes the 192-wide scores (3x that product: S, dQ, dK) and runs the
 * 128-wide weighted sum twice (dP, dV), 2.6x the pair's forward where equal widths give 2.5x. Causal: (s + 1) / 2s of
 * each product executed. */
static void test_mla_fused_flops(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_model m = load_model("deepseek-v3", 0);
    const ps_layer *l = &m.layers[1]; /* a dense MLA block */
    assert_true(l->qk_nope_head_dim + l->qk_rope_head_dim == 192 && l->v_head_dim == 128 && l->attn_window == 0);
    const double s = (double)l->seq, H = (double)l->heads, keys = (s + 1) / (2 * s);
    const double fs = 2 * s * s * 192 * H, fv = 2 * s * s * 128 * H, f = ps_layer_fwd_flops(l);
    ps_strategy st = {.tp = 1, .dp = 1, .attn = PS_ATTN_FUSED};
    ps_layer_cost lc;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &st, 0, &lc), PS_OK);
    assert_close(lc.hw_flops, 3 * (f - fs - fv) + keys * (fs + fv) + keys * (3 * fs + 2 * fv), 1e-12);
    /* unfused: 3x every GEMM, nothing skipped */
    st.attn = PS_ATTN_UNFUSED;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &st, 0, &lc), PS_OK);
    assert_close(lc.hw_flops, 3 * f, 1e-12);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* The longest list a layer has: a decoder_xattn block with MLA, an MoE MLP and cross-attention, 16 GEMMs. */
static void test_longest_list(void **state)
{
    (void)state;
    ps_model m = load_model("deepseek-v3", 0);
    ps_layer l = m.layers[4];
    l.kind = PS_LAYER_DECODER_XATTN;
    l.kv_seq = 512;
    ps_layer_gemms g;
    ps_layer_gemm_shapes(&l, 1, 8, &g);
    assert_int_equal(g.n, 16);
    assert_int_equal(g.tp_colls, 3);
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_strategy s = {.tp = 8, .dp = 1, .sp = true, .attn = PS_ATTN_FUSED, .overlap = PS_OVERLAP_TE};
    ps_layer_cost lc;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_true(lc.fwd > 0 && lc.bwd_b > 0 && lc.bwd_w > 0);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* The imbalance factor: 1.25 x the mean on one expert, the rest spread over the other 7, in one grouped GEMM whose
 * tiles share the waves. On an H100 (132 SMs, 128 x 128 tiles), Mixtral's gate/up GEMMs at 1024 tokens per expert
 * (seq 4096, top 2 of 8): balanced, 8 x 112 tiles x 16 GEMMs = 14336 tiles, 109 waves; skewed, the busy expert's 1280
 * tokens in 10 x 112 x 2 tiles and the others' 987.4 in 8 x 112 x 14: 14784 tiles, 112 waves. The down GEMMs: 8 x 32
 * x 8 = 2048 tiles (16 waves) against 10 x 32 + 8 x 32 x 7 = 2112 (16 waves): no change. Both math-bound. */
static void test_imbalance(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    assert_true(p.moe_imbalance == 1.25);
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_model m = load_model_seq("mixtral-8x7b", 4096);
    const ps_layer *l = &m.layers[1];
    const ps_gpu *gpu = &c.groups[0].gpu;
    assert_int_equal(gpu->sm_count, 132);
    /* the weight GEMM time (comp_bwd_w: the W pass runs each weight GEMM once) grows by 3 waves of the gate/up GEMMs */
    ps_strategy s = {.tp = 1, .dp = 1, .attn = PS_ATTN_FUSED};
    ps_layer_cost even, skew;
    ps_cost_params p1 = p;
    p1.moe_imbalance = 1;
    assert_int_equal(ps_cost_layer(&p1, &c, l, PS_DTYPE_BF16, 1, &s, 0, &even), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &skew), PS_OK);
    double wave = 132 * 2.0 * 128 * 128 * 4096 / (gpu->bf16_flops * ps_cost_gemm_eff(&p, gpu));
    assert_close(skew.comp_bwd_w - even.comp_bwd_w, 3 * wave, 1e-9);
    /* balanced, the grouped GEMMs are the 109 and 16 waves of their tiles, and one launch per expert matrix (gate,
     * up, down) instead of one per expert: with the plain GEMM of the same tiles (ps_cost_gemm_time, 24 launches) */
    double plain = ps_cost_gemm_time(&p, gpu, PS_DTYPE_BF16, 1024, 14336, 4096, 16) +
                   ps_cost_gemm_time(&p, gpu, PS_DTYPE_BF16, 1024, 4096, 14336, 8);
    assert_close(ps_cost_gemm_work(&p, 132, 1024, 14336, 4096, 16), 109 * 132 * 2.0 * 128 * 128 * 4096, 1e-15);
    ps_layer dense = *l;
    dense.n_experts = dense.top_k = dense.expert_ffn = 0;
    ps_layer_cost dc;
    assert_int_equal(ps_cost_layer(&p1, &c, &dense, PS_DTYPE_BF16, 1, &s, 0, &dc), PS_OK);
    /* the dense twin has the same attention and an MLP of 14336 over all 4096 tokens (3 GEMMs, 3 launches) */
    double dense_mlp = ps_cost_gemm_time(&p, gpu, PS_DTYPE_BF16, 4096, 14336, 4096, 2) +
                       ps_cost_gemm_time(&p, gpu, PS_DTYPE_BF16, 4096, 4096, 14336, 1);
    double router = ps_cost_gemm_time(&p, gpu, PS_DTYPE_BF16, 4096, 8, 4096, 1);
    assert_close(even.comp_bwd_w - dc.comp_bwd_w, plain - 21 * p.kernel_launch_s + router - dense_mlp, 1e-9);
    /* the same FLOPs either way: the tokens only move between experts */
    assert_close(skew.hw_flops, even.hw_flops, 1e-15);
    /* a capacity factor caps the busy expert: at 1.0 every expert runs its even share */
    ps_layer lc = *l;
    lc.capacity_factor = 1.0;
    ps_layer_cost capped;
    assert_int_equal(ps_cost_layer(&p, &c, &lc, PS_DTYPE_BF16, 1, &s, 0, &capped), PS_OK);
    assert_close(capped.comp_bwd_w, even.comp_bwd_w, 1e-12);
    /* the parameter is named and bounded */
    assert_int_equal(ps_cost_params_set(&p, "moe_imbalance=0.5"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "moe_imbalance must be a number in [1, 64]"));
    ps_error_clear();
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* Memory: every expert's weights (bf16), gradients (bf16) and Adam states (12 bytes), split over TP as the experts
 * are at expert-parallel degree 1: 16 bytes x all parameters / tp; the executed FLOPs 3x the model's (unfused). */
static void test_moe_memory(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_model m = load_model("mixtral-8x7b", 0);
    const ps_layer *l = &m.layers[1];
    double P = (double)ps_layer_params(l);
    assert_true(P > 1.4e9); /* 8 experts of 176M */
    ps_strategy s = {.tp = 8, .dp = 1, .attn = PS_ATTN_UNFUSED};
    ps_layer_cost lc;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_close(lc.mem_params + lc.mem_grads + lc.mem_optim, 16 * P / 8, 1e-12);
    assert_close(lc.mem_act, ps_layer_act_bytes_attn(l, PS_DTYPE_BF16, 8, false, PS_RECOMP_NONE, PS_ATTN_UNFUSED),
                 1e-12);
    s.tp = 1;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_close(lc.hw_flops, 3 * ps_layer_fwd_flops(l), 1e-12);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moe_gemms),
        cmocka_unit_test(test_mla_gemms),
        cmocka_unit_test(test_mla_fused_flops),
        cmocka_unit_test(test_longest_list),
        cmocka_unit_test(test_imbalance),
        cmocka_unit_test(test_moe_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

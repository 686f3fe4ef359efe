/* Context parallelism in the cost model against hand-computed values: what a layer costs on one GPU of a cp-way group
 * (every token-proportional quantity 1/cp, the attention core 1/cp of its work), the ring's K/V transfers and the
 * all-to-alls with their byte counts worked out here, the gradient group dp x cp, ZeRO's shards over it, the ring's
 * buffers, the plan rules and JSON round trip. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_cost.h"

#include "cost_test_util.h"

/* the first decoder layer of m */
static const ps_layer *decoder(const ps_model *m)
{
    for (int64_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].kind == PS_LAYER_DECODER) return &m->layers[i];
    fail_msg("no decoder layer");
    return NULL;
}

static ps_layer_cost cost(const ps_cost_params *p, const ps_cluster *c, const ps_layer *l, ps_dtype dt, int64_t mbs,
                          ps_strategy s)
{
    ps_layer_cost lc;
    assert_int_equal(ps_cost_layer(p, c, l, dt, mbs, &s, 0, &lc), PS_OK);
    return lc;
}

/* The GEMMs: cp splits the tokens of the linear layers and the attention core's queries (ring) or heads (a2a). */
static void test_shapes(void **state)
{
    (void)state;
    ps_model m = load_model("llama3-8b", 0);
    ps_layer l = *decoder(&m);
    l.seq = 8192;
    ps_layer_gemms g1, gr, ga;
    ps_layer_gemm_shapes(&l, 2, 2, &g1);
    ps_layer_gemm_shapes_cp(&l, 2, 2, 4, PS_CP_RING, &gr);
    ps_layer_gemm_shapes_cp(&l, 2, 2, 4, PS_CP_A2A, &ga);
    assert_int_equal(g1.n, gr.n);
    assert_int_equal(g1.n, ga.n);
    for (int i = 0; i < g1.n; i++) {
        const ps_gemm_shape *a = &g1.g[i], *r = &gr.g[i], *x = &ga.g[i];
        if (!a->attn) {
            /* T = mbs x seq tokens: 2 x 8192 / 4 */
            assert_true(a->m == 16384 && r->m == 4096 && x->m == 4096);
            assert_true(r->n == a->n && r->k == a->k && r->count == a->count);
        } else {
            /* 32 heads / tp 2 x mbs 2 = 32 batched GEMMs; ring: 2048 queries against 8192 keys; a2a: 8 of them */
            assert_true(a->m == 8192 && a->count == 32);
            assert_true(r->m == 2048 && r->count == 32 && r->n == a->n && r->k == a->k);
            assert_true(x->m == 8192 && x->count == 8 && x->n == a->n && x->k == a->k);
        }
    }
    ps_model_free(&m);
}

/* Every token-proportional cost of a layer at cp 2 is the cost of the layer with half the tokens (weight GEMMs,
 * activations), and its executed FLOPs are half of the whole layer's (the attention core load-balanced). */
static void test_token_share(void **state)
{
    (void)state;
    ps_cost_params p = params(1.2);
    ps_cluster c = load_cluster("dgx-h100:2");
    ps_model m = load_model("llama3-8b", 0);
    ps_layer l = *decoder(&m), half = l;
    l.seq = 16384;
    half.seq = 8192;
    ps_strategy s1 = {.tp = 2, .dp = 8, .sp = true, .attn = PS_ATTN_FUSED};
    ps_strategy s2 = s1;
    s2.cp = 2;
    s2.dp = 4;
    for (int k = 0; k < PS_CP_COMM_COUNT; k++) {
        s2.cp_comm = (ps_cp_comm)k;
        ps_layer_cost a = cost(&p, &c, &l, PS_DTYPE_BF16, 1, s2), h = cost(&p, &c, &half, PS_DTYPE_BF16, 1, s1),
                      w = cost(&p, &c, &l, PS_DTYPE_BF16, 1, s1);
        assert_close(a.comp_bwd_w, h.comp_bwd_w, 1e-12); /* wgrad: the weight GEMMs alone */
        assert_close(a.mem_act, h.mem_act, 1e-12);
        assert_close(a.mem_act, w.mem_act / 2, 1e-12);
        assert_close(a.tp_bytes, w.tp_bytes / 2, 1e-12);
        assert_close(a.hw_flops, w.hw_flops / 2, 1e-12);
        /* weights are not split by cp */
        assert_close(a.mem_params, w.mem_params, 1e-12);
        assert_true(a.cp_comm[0] > 0 && a.cp_comm[1] > 0);
        assert_true(w.cp_comm[0] == 0 && w.cp_exposed[1] == 0);
    }
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* Ring: cp - 1 K/V transfers forward, 2 (cp - 1) backward (K/V and dK/dV), each step the slower of one step of the
 * ring all-gather over the CP group and the slowest edge; with slowdown 1 and the attention steps longer than the
 * transfers, nothing is exposed. The buffers: max((cp - 1) K/V, 4 K/V + Q). */
static void test_ring(void **state)
{
    (void)state;
    ps_cost_params p = params(1.0);
    ps_cluster c = load_cluster("dgx-h100:2");
    ps_model m = load_model("llama3-8b", 0);
    ps_layer l = *decoder(&m);
    l.seq = 65536;
    const int cp = 4, tp = 2;
    ps_strategy s = {.tp = tp, .cp = cp, .dp = 2, .sp = true, .attn = PS_ATTN_FUSED, .cp_comm = PS_CP_RING};
    ps_layer_cost a = cost(&p, &c, &l, PS_DTYPE_BF16, 1, s);
    /* K and V of 65536 / 4 tokens, 8 kv heads / tp 2 of 128, 2 bytes */
    double kb = 16384.0 * 4 * 128 * 2, kv = 2 * kb, qb = 16384.0 * 16 * 128 * 2;
    ps_group g = {0, cp, tp};
    double step = ps_coll_allgather(&p, &c, &g, cp * kv) / (cp - 1);
    for (int k = 0; k < cp; k++) step = fmax(step, ps_p2p(&p, &c, k * tp, ((k + 1) % cp) * tp, kv));
    assert_close(a.cp_comm[0], (cp - 1) * step, 1e-12);
    assert_close(a.cp_comm[1], 2 * (cp - 1) * step, 1e-12);
    assert_true(fabs(a.cp_exposed[0]) < 1e-12 && fabs(a.cp_exposed[1]) < 1e-12);
    assert_close(a.mem_temp, fmax((cp - 1) * kv, 4 * kv + qb), 1e-12);
    /* the forward and backward hold the exposure, the communication totals hold the transfers */
    ps_strategy s0 = s;
    s0.cp_comm = PS_CP_A2A; /* same layer, other kind: the a2a's exposure replaces the ring's */
    ps_layer_cost x = cost(&p, &c, &l, PS_DTYPE_BF16, 1, s0);
    assert_close(x.fwd - x.cp_exposed[0], a.fwd - a.cp_exposed[0], 1e-12);
    assert_close(x.comm_fwd - x.cp_comm[0], a.comm_fwd - a.cp_comm[0], 1e-12);
    /* a short sequence across nodes: the transfers outrun the steps and are exposed, (cp - 1) (step - attention
     * step) forward with slowdown 1, never more than the transfers */
    ps_cluster c8 = load_cluster("dgx-h100:8");
    ps_layer sh = l;
    sh.seq = 1024;
    ps_strategy sx = {.tp = 8, .cp = 8, .dp = 1, .sp = true, .attn = PS_ATTN_FUSED};
    ps_layer_cost y = cost(&p, &c8, &sh, PS_DTYPE_BF16, 1, sx);
    assert_true(y.cp_exposed[0] > 0 && y.cp_exposed[0] < y.cp_comm[0]);
    assert_true(y.cp_exposed[1] > 0 && y.cp_exposed[1] < y.cp_comm[1]);
    ps_model_free(&m);
    ps_cluster_free(&c);
    ps_cluster_free(&c8);
}

/* allgather (PyTorch's rotation): the forward all-gathers the K/V once (expanded to the query heads, as torchtitan
 * passes them), the backward again plus a hop of the FP32 dK/dV after every step; with slowdown 1 and attention steps
 * longer than the transfers, the forward hides its all-gather behind the first step and the backward exposes the
 * last dK/dV hop. Same shapes and FLOPs as the ring; the buffers: the gathered K/V and two dK/dV. */
static void test_allgather(void **state)
{
    (void)state;
    ps_cost_params p = params(1.0);
    ps_cluster c = load_cluster("dgx-h100:2");
    ps_model m = load_model("llama3-8b", 0);
    ps_layer l = *decoder(&m);
    l.seq = 65536;
    const int cp = 4, tp = 2;
    ps_strategy s = {.tp = tp, .cp = cp, .dp = 2, .sp = true, .attn = PS_ATTN_FUSED, .cp_comm = PS_CP_ALLGATHER};
    ps_strategy r = s;
    r.cp_comm = PS_CP_RING;
    ps_layer_cost a = cost(&p, &c, &l, PS_DTYPE_BF16, 1, s), ring = cost(&p, &c, &l, PS_DTYPE_BF16, 1, r);
    /* K and V of 65536 / 4 tokens at the 32 / tp query heads of 128, 2 bytes; dK, dV in 4 bytes */
    double kvx = 2 * 16384.0 * 16 * 128 * 2, dkv = 2 * kvx;
    ps_group g = {0, cp, tp};
    double ag = ps_coll_allgather(&p, &c, &g, cp * kvx), dstep = ps_coll_allgather(&p, &c, &g, cp * dkv) / (cp - 1);
    for (int k = 0; k < cp; k++) dstep = fmax(dstep, ps_p2p(&p, &c, k * tp, ((k + 1) % cp) * tp, dkv));
    assert_close(a.cp_comm[0], ag, 1e-12);
    assert_close(a.cp_comm[1], ag + cp * dstep, 1e-12);
    assert_true(fabs(a.cp_exposed[0]) < 1e-12);
    assert_close(a.cp_exposed[1], dstep, 1e-9);
    assert_close(a.mem_temp, cp * kvx + 2 * dkv, 1e-12);
    assert_close(a.hw_flops, ring.hw_flops, 1e-12);
    assert_close(a.fwd - a.cp_exposed[0], ring.fwd - ring.cp_exposed[0], 1e-12);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* a2a: forward all-to-alls of Q, K, V then of the output, backward of the output gradient then of dQ, dK, dV, all
 * exposed; bytes are one GPU's tensors. */
static void test_a2a(void **state)
{
    (void)state;
    ps_cost_params p = params(1.2);
    ps_cluster c = load_cluster("dgx-h100:2");
    ps_model m = load_model("llama3-8b", 0);
    ps_layer l = *decoder(&m);
    l.seq = 32768;
    ps_strategy s = {.tp = 2, .cp = 4, .dp = 2, .attn = PS_ATTN_FUSED, .cp_comm = PS_CP_A2A};
    ps_layer_cost a = cost(&p, &c, &l, PS_DTYPE_BF16, 2, s);
    /* 2 x 32768 / 4 tokens; Q: 16 heads of 128 per TP rank, K and V: 4 */
    double T = 2 * 8192.0, qb = T * 16 * 128 * 2, kb = T * 4 * 128 * 2;
    ps_group g = {0, 4, 2};
    double want = ps_coll_alltoall(&p, &c, &g, qb + 2 * kb) + ps_coll_alltoall(&p, &c, &g, qb);
    assert_close(a.cp_comm[0], want, 1e-12);
    assert_close(a.cp_comm[1], want, 1e-12);
    assert_close(a.cp_exposed[0], want, 1e-12);
    assert_close(a.cp_exposed[1], want, 1e-12);
    assert_close(a.mem_temp, 2 * qb + 2 * kb, 1e-12);
    /* full recomputation repeats the forward's all-to-alls in the backward */
    s.ckpt = PS_RECOMP_FULL;
    ps_layer_cost r = cost(&p, &c, &l, PS_DTYPE_BF16, 2, s);
    assert_close(r.cp_comm[1], 2 * want, 1e-12);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* The gradient group is dp x cp (stride tp), and ZeRO shards over it. */
static void test_dp_group(void **state)
{
    (void)state;
    ps_cost_params p = params(1.2);
    ps_cluster c = load_cluster("dgx-h100:2");
    ps_model m = load_model("llama3-8b", 0);
    const ps_layer *l = decoder(&m);
    ps_strategy s = {.tp = 2, .cp = 2, .dp = 4, .zero = 1, .attn = PS_ATTN_FUSED};
    ps_layer_cost a = cost(&p, &c, l, PS_DTYPE_BF16, 1, s);
    double P = ps_cost_params_per_gpu(l, 2);
    ps_group g = {0, 8, 2};
    assert_close(a.dp_grad, ps_coll_reducescatter(&p, &c, &g, P * p.grad_reduce_bytes), 1e-12);
    assert_close(a.dp_param, ps_coll_allgather(&p, &c, &g, P * 2), 1e-12);
    assert_close(a.mem_optim, P * 12 / 8, 1e-12);
    assert_close(a.mem_grads, P * 2, 1e-12);
    s.zero = 3;
    a = cost(&p, &c, l, PS_DTYPE_BF16, 1, s);
    assert_close(a.mem_params, P * 2 / 8, 1e-12);
    assert_close(a.zero_gather, ps_coll_allgather(&p, &c, &g, P * 2), 1e-12);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* Rules: sequence multiples, heads for a2a, fused attention, one cp per plan, widths, names. */
static void test_rules(void **state)
{
    (void)state;
    ps_cluster c = load_cluster("dgx-h100:2");
    ps_model m = load_model("llama3-8b", 0);
    ps_layer l = *decoder(&m);
    l.seq = 8192;
    ps_strategy s = {.tp = 2, .cp = 4, .dp = 2, .attn = PS_ATTN_FUSED};
    char why[256];
    assert_true(ps_cost_cp_ok(&l, &s, why, sizeof why));
    l.seq = 8196; /* a multiple of 4, not of 8 */
    assert_false(ps_cost_cp_ok(&l, &s, why, sizeof why));
    assert_non_null(strstr(why, "2 x cp"));
    s.cp_comm = PS_CP_A2A;
    assert_true(ps_cost_cp_ok(&l, &s, NULL, 0));
    s.tp = 4; /* 2 kv heads per TP rank: not a multiple of 4 */
    assert_false(ps_cost_cp_ok(&l, &s, why, sizeof why));
    assert_non_null(strstr(why, "key/value heads"));
    s.tp = 2;
    s.overlap = PS_OVERLAP_CROSS;
    assert_false(ps_cost_cp_ok(&l, &s, NULL, 0));
    s.overlap = PS_OVERLAP_NONE;
    s.cp = 1; /* off: nothing to check */
    l.seq = 8191;
    assert_true(ps_cost_cp_ok(&l, &s, NULL, 0));
    ps_cp_comm k;
    assert_int_equal(ps_cp_comm_parse("p2p", &k), PS_OK);
    assert_int_equal(k, PS_CP_RING);
    assert_int_equal(ps_cp_comm_parse("a2a", &k), PS_OK);
    assert_int_equal(k, PS_CP_A2A);
    assert_int_equal(ps_cp_comm_parse("allgather", &k), PS_OK);
    assert_int_equal(k, PS_CP_ALLGATHER);
    assert_int_equal(ps_cp_comm_parse("all_gather", &k), PS_ERR_INPUT); /* Megatron's (TE's) kind: not modelled */
    ps_error_clear();
    assert_string_equal(ps_cp_comm_name(PS_CP_RING), "ring");

    /* plans: tp x cp x dp x pp must be the GPUs; cp the same for every layer; unfused refused */
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.seq = 8192;
    ps_model_free(&m);
    assert_int_equal(ps_model_load("llama3-8b", &mo, &m), PS_OK);
    ps_strategy u = {.tp = 2, .cp = 2, .dp = 4, .attn = PS_ATTN_FUSED};
    ps_plan plan;
    assert_int_equal(ps_plan_uniform(&m, 8, 1, 1, 1, "1f1b", &u, &plan), PS_OK);
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_OK);
    plan.layer[3].cp = 4;
    plan.layer[3].dp = 2;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "differs from the plan's cp 2"));
    ps_error_clear();
    plan.layer[3] = u;
    plan.layer[3].attn = PS_ATTN_UNFUSED;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_ERR_INPUT);
    ps_error_clear();
    plan.layer[3] = u;
    for (int64_t i = 0; i < m.n_layers; i++) plan.layer[i].dp = 2;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "tp 2 x cp 2 x dp 2 x pp 1 = 8 GPUs"));
    ps_error_clear();
    for (int64_t i = 0; i < m.n_layers; i++) plan.layer[i].dp = 4;

    /* the plan costs; its stages hold all 16 GPUs; JSON round trip keeps cp and its kind */
    for (int64_t i = 0; i < m.n_layers; i++) plan.layer[i].cp_comm = PS_CP_A2A;
    ps_cost_params p = params(1.2);
    ps_prediction r;
    assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &r), PS_OK);
    assert_int_equal(r.stages[0].n_gpus, 16);
    json_t *j = ps_plan_to_json(&plan, &m);
    assert_int_equal(json_integer_value(json_object_get(j, "cp")), 2);
    assert_string_equal(json_string_value(json_object_get(j, "cp_comm")), "a2a");
    ps_plan back;
    assert_int_equal(ps_plan_from_json(j, "t.json", &m, &back), PS_OK);
    for (int64_t i = 0; i < m.n_layers; i++) assert_true(ps_strategy_equal(&back.layer[i], &plan.layer[i]));
    ps_prediction r2;
    assert_int_equal(ps_cost_plan(&p, &m, &c, &back, &r2), PS_OK);
    assert_true(r2.iter_time_s == r.iter_time_s);
    /* a file without the fields: cp 1 */
    json_object_del(j, "cp");
    json_object_del(j, "cp_comm");
    json_object_del(j, "stages");
    ps_plan old;
    assert_int_equal(ps_plan_from_json(j, "t.json", &m, &old), PS_OK);
    assert_int_equal(ps_strategy_cp(&old.layer[0]), 1);
    json_decref(j);
    ps_plan_free(&old);
    ps_plan_free(&back);
    ps_prediction_free(&r);
    ps_prediction_free(&r2);
    ps_plan_free(&plan);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes), cmocka_unit_test(test_token_share), cmocka_unit_test(test_ring),
        cmocka_unit_test(test_allgather), cmocka_unit_test(test_a2a), cmocka_unit_test(test_dp_group),
        cmocka_unit_test(test_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

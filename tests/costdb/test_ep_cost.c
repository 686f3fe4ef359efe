/* The cost model of expert parallelism (an MoE block on the expert grid, ps_strategy.ep / etp): the grouped GEMMs a
 * GPU runs (shapes by hand, the same FLOPs as without the grid), the dispatch and combine all-to-alls and the etp
 * all-gather / reduce-scatter against the collectives they are made of, the hierarchical all-to-all by hand, the
 * slowest GPU's load, memory split over the grid, the rules, and ep 1 / etp = tp giving what no grid gives. */
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

/* Mixtral 8x7B's block (h 4096, 8 experts of 14336, top 2, no shared expert), micro-batch 2 of 32768 tokens on a
 * TP group of 2 with SP: each GPU routes 32768 tokens; at ep 4, etp 1 it holds 2 experts, each taking on the mean
 * 32768 x 2 x 4 x 1 / 8 = 32768 tokens, whole (etp 1); the MLP block has no TP collective left. */
static void test_ep_shapes(void **state)
{
    (void)state;
    ps_model m = load_model("mixtral-8x7b", 0);
    const ps_layer *l = &m.layers[1];
    ps_strategy s = {.tp = 2, .dp = 4, .sp = true, .ep = 4, .etp = 1, .attn = PS_ATTN_FUSED};
    ps_layer_gemms g, plain;
    ps_layer_gemm_shapes_s(l, 2, &s, &g);
    assert_int_equal(g.n, 7);
    shape_is(&g.g[2], 32768, 8, 4096, 1);          /* router over the GPU's own tokens */
    shape_is(&g.g[3], 32768, 14336, 4096, 2 * 2);  /* gate and up of 2 experts */
    shape_is(&g.g[4], 32768, 4096, 14336, 2);      /* down of 2 experts */
    assert_true(g.g[3].experts == 2 && g.g[3].ep == 4 && g.g[2].ep == 0);
    assert_int_equal(g.tp_colls, 1);
    /* the experts' FLOPs on a GPU are those of TP 2 without the grid: the tokens only move */
    ps_layer_gemm_shapes(l, 2, 2, &plain);
    assert_close(list_flops(&g) - 2.0 * 32768 * 8 * 4096, list_flops(&plain) - 2.0 * 65536 * 8 * 4096, 1e-12);
    /* etp 2 at ep 2: 4 experts of 7168, each 32768 x 2 x 2 x 2 / 8 = 32768 tokens */
    s.ep = 2;
    s.etp = 2;
    ps_layer_gemm_shapes_s(l, 2, &s, &g);
    shape_is(&g.g[3], 32768, 7168, 4096, 8);
    /* ep 1 and etp = tp: the shapes without the grid */
    s.ep = 1;
    ps_layer_gemm_shapes_s(l, 2, &s, &g);
    assert_int_equal(g.tp_colls, 2);
    assert_int_equal(memcmp(&g, &plain, sizeof g), 0);
    ps_model_free(&m);
}

/* The slowest GPU of an ep group: the busiest expert (1.25 x the mean) beside the others at the mean. */
static void test_rank_load(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_model m = load_model("mixtral-8x7b", 0);
    ps_layer l = m.layers[1];
    assert_close(ps_cost_ep_rank_load(&p, &l, 1), 1.25, 1e-15);
    assert_close(ps_cost_ep_rank_load(&p, &l, 2), (1 + 1.25) / 2, 1e-15);
    assert_close(ps_cost_ep_rank_load(&p, &l, 8), (7 + 1.25) / 8, 1e-15);
    l.capacity_factor = 1.1; /* the capacity caps the busiest expert */
    assert_close(ps_cost_ep_rank_load(&p, &l, 1), 1.1, 1e-15);
    l.capacity_factor = 0.5; /* below 1 every expert runs its (dropped to) capacity */
    assert_close(ps_cost_ep_rank_load(&p, &l, 1), 1.0, 1e-15);
    ps_model_free(&m);
}

/* Communication at ep 8, etp 1 on one H100 node (tp 1, dp 8): the forward's dispatch and combine are two all-to-alls
 * of the GPU's 4096 tokens x top 2 x h 4096 x 2 bytes x the slowest GPU's load 1.25 (one expert per GPU); at ep 4,
 * etp 2 the etp pair all-gathers and reduce-scatters twice that buffer; full recomputation repeats the forward's. */
static void test_ep_comm(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_model m = load_model_seq("mixtral-8x7b", 4096);
    const ps_layer *l = &m.layers[1];
    ps_strategy s = {.tp = 1, .dp = 8, .ep = 8, .etp = 1, .attn = PS_ATTN_FUSED};
    ps_layer_cost lc, none;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    double buf = 4096.0 * 2 * 4096 * 2 * 1.25;
    ps_group g8 = {0, 8, 1};
    double a2a = ps_coll_alltoall(&p, &c, &g8, buf);
    assert_true(a2a > 0);
    assert_close(lc.ep_comm[0], 2 * a2a, 1e-12);
    assert_close(lc.ep_comm[1], 2 * a2a, 1e-12);
    /* exposed: the forward is the grid-less forward's computation plus it (no overlap) */
    ps_strategy s1 = {.tp = 1, .dp = 8, .attn = PS_ATTN_FUSED};
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s1, 0, &none), PS_OK);
    assert_true(lc.fwd > none.fwd + 2 * a2a);
    /* ep 4 x etp 2: the ep group at stride 2, the etp pair consecutive; 2 experts per GPU */
    s.ep = 4;
    s.etp = 2;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    double b4 = 4096.0 * 2 * 4096 * 2 * (1 + 1.25) / 2;
    ps_group g4 = {0, 4, 2}, g2 = {0, 2, 1};
    double want = 2 * ps_coll_alltoall(&p, &c, &g4, b4) + ps_coll_allgather(&p, &c, &g2, 2 * b4) +
                  ps_coll_reducescatter(&p, &c, &g2, 2 * b4);
    assert_close(lc.ep_comm[0], want, 1e-12);
    s.ckpt = PS_RECOMP_FULL;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_close(lc.ep_comm[1], 2 * want, 1e-12);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* The hierarchical all-to-all over 2 nodes of 8 (ep 16), each token to top 2: a token reaches 2 (1 - 1/4) = 1.5
 * distinct nodes on the mean, 0.75 of them remote, so the network phase moves 0.75 of one copy per GPU (an all-to-all
 * of 1.5 copies between the 2 nodes' GPUs of one local rank) and NVLink fans out the whole buffer; the answer is the
 * faster of that and the plain all-to-all, whose network part is the 8 of 16 parts bound for the other node. */
static void test_alltoall_dedup(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:2");
    double bytes = 256e6, one = bytes / 2;
    ps_group g = {0, 16, 1}, inter = {0, 2, 8}, intra = {0, 8, 1};
    double flat = ps_coll_alltoall(&p, &c, &g, bytes);
    double hier = ps_coll_alltoall(&p, &c, &inter, one * 0.75 * 2) + ps_coll_alltoall(&p, &c, &intra, bytes);
    assert_close(ps_coll_alltoall_dedup(&p, &c, &g, bytes, 2, 0, 0), fmin(flat, hier), 1e-12);
    assert_true(hier < flat); /* the network carries 0.75 copies instead of 2 x 8/16 = 1 */
    /* one copy: nothing to save, the plain all-to-all */
    assert_close(ps_coll_alltoall_dedup(&p, &c, &g, bytes, 1, 0, 0), flat, 1e-15);
    /* inside one node: plain */
    assert_close(ps_coll_alltoall_dedup(&p, &c, &intra, bytes, 8, 0, 0), ps_coll_alltoall(&p, &c, &intra, bytes),
                 1e-15);
    /* the plain all-to-all across the nodes: the 8 GPUs of a node send the 8 of 16 parts bound for the other node
     * through the node's network at once (the ring link of the group: the node's 8 NICs), one NIC's worth each */
    double bw, lat;
    ps_coll_ring_link(&p, &c, &g, &bw, &lat);
    assert_close(flat, 8 * 8.0 / 16 * bytes / bw + 15 * lat, 1e-12);
    ps_cluster_free(&c);
}

/* Group-limited routing (DeepSeek-V3's node-limited): ep 64 over 8 nodes of 8, top 8. Uniform destinations reach
 * 8 (1 - (7/8)^8) = 5.25 distinct nodes a token; 4 of 8 groups (a group a node) reach at most 4, so the network phase
 * carries 4 x 7/8 = 3.5 copies of a token instead of 4.59 (an all-to-all of 4 copies among the 8 GPUs of one local
 * rank). 4 of 16 groups (two a node) and 2 of 4 (a group over two nodes) also cap it at 4; 8 of 8 does not bind. */
static void test_alltoall_groups(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:8");
    double bytes = 512e6, one = bytes / 8;
    ps_group g = {0, 64, 1}, inter = {0, 8, 8}, intra = {0, 8, 1};
    double flat = ps_coll_alltoall(&p, &c, &g, bytes), nvl = ps_coll_alltoall(&p, &c, &intra, bytes);
    double capped = ps_coll_alltoall(&p, &c, &inter, one * 4) + nvl;
    double free_ = ps_coll_alltoall(&p, &c, &inter, one * 8 * (1 - pow(7.0 / 8, 8))) + nvl;
    assert_true(capped < free_);
    assert_close(ps_coll_alltoall_dedup(&p, &c, &g, bytes, 8, 8, 4), fmin(flat, capped), 1e-12);
    assert_close(ps_coll_alltoall_dedup(&p, &c, &g, bytes, 8, 16, 4), fmin(flat, capped), 1e-12);
    assert_close(ps_coll_alltoall_dedup(&p, &c, &g, bytes, 8, 4, 2), fmin(flat, capped), 1e-12);
    assert_close(ps_coll_alltoall_dedup(&p, &c, &g, bytes, 8, 8, 8), fmin(flat, free_), 1e-12);
    assert_close(ps_coll_alltoall_dedup(&p, &c, &g, bytes, 8, 0, 0), fmin(flat, free_), 1e-12);
    ps_cluster_free(&c);
}

/* Memory at ep 8, etp 1, tp 1, dp 8, ZeRO 1: each GPU keeps 1 of the 8 experts (R / 8 parameters) and all the rest
 * (P - R); the rest's Adam states are sharded over dp 8, the expert's over edp = 8 / 8 = 1 GPU. */
static void test_ep_memory(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_model m = load_model("mixtral-8x7b", 0);
    const ps_layer *l = &m.layers[1];
    double P = (double)ps_layer_params(l), R = (double)ps_layer_routed_params(l);
    assert_close(R, 8.0 * 3 * 4096 * 14336, 1e-15);
    ps_strategy s = {.tp = 1, .dp = 8, .zero = 1, .ep = 8, .etp = 1, .attn = PS_ATTN_FUSED};
    ps_layer_cost lc;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_close(lc.mem_params, 2 * (P - R + R / 8), 1e-12);
    assert_close(lc.mem_grads, 2 * (P - R + R / 8), 1e-12);
    assert_close(lc.mem_optim, 12 * ((P - R) / 8 + R / 8), 1e-12);
    /* ep 2: edp 4 */
    s.ep = 2;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_close(lc.mem_optim, 12 * ((P - R) / 8 + R / 2 / 4), 1e-12);
    /* the activations: the permuted tokens of this GPU (etp 1) and the experts' intermediates, x the load */
    double tok, inner;
    ps_layer_moe_act_parts(l, PS_DTYPE_BF16, &tok, &inner);
    ps_strategy s0 = {.tp = 1, .dp = 8, .zero = 1, .attn = PS_ATTN_FUSED};
    ps_layer_cost base;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s0, 0, &base), PS_OK);
    double load = (3 + 1.25) / 4;
    assert_close(lc.mem_act - base.mem_act, (tok + inner) * (load - 1), 1e-9);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* ep 1 with etp != tp: every GPU holds every expert, so no GPU of the group is busier (load 1): the etp all-gather
 * and reduce-scatter move the GPU's mean tokens x top 2 x etp, and the activations gain only the etp gathering */
static void test_ep1_etp(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_model m = load_model_seq("mixtral-8x7b", 4096);
    const ps_layer *l = &m.layers[1];
    ps_strategy s = {.tp = 2, .dp = 4, .sp = true, .ep = 1, .etp = 4, .attn = PS_ATTN_FUSED};
    ps_strategy s0 = {.tp = 2, .dp = 4, .sp = true, .attn = PS_ATTN_FUSED};
    ps_layer_cost lc, base;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s0, 0, &base), PS_OK);
    double buf = 4096.0 / 2 * 2 * 4096 * 2; /* T / tp tokens x top 2 x h x 2 bytes */
    ps_group g4 = {0, 4, 1};
    assert_close(lc.ep_comm[0], ps_coll_allgather(&p, &c, &g4, 4 * buf) + ps_coll_reducescatter(&p, &c, &g4, 4 * buf),
                 1e-12);
    double tok, inner;
    ps_layer_moe_act_parts(l, PS_DTYPE_BF16, &tok, &inner);
    assert_close(lc.mem_act - base.mem_act, tok * (4 - 1) / 2, 1e-9);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* What the grid needs, named. */
static void test_ep_rules(void **state)
{
    (void)state;
    ps_model m = load_model("mixtral-8x7b", 0);
    const ps_layer *l = &m.layers[1], *emb = &m.layers[0];
    char why[256];
    ps_strategy s = {.tp = 1, .dp = 8, .ep = 3, .etp = 1};
    assert_false(ps_cost_ep_ok(l, &s, why, sizeof why));
    assert_non_null(strstr(why, "does not divide the stage width"));
    s = (ps_strategy){.tp = 1, .dp = 12, .ep = 3, .etp = 1};
    assert_false(ps_cost_ep_ok(l, &s, why, sizeof why));
    assert_non_null(strstr(why, "does not divide the layer's 8 routed experts"));
    s = (ps_strategy){.tp = 2, .dp = 4, .ep = 4, .etp = 1};
    assert_false(ps_cost_ep_ok(l, &s, why, sizeof why));
    assert_non_null(strstr(why, "needs sequence parallelism"));
    s.sp = true;
    assert_true(ps_cost_ep_ok(l, &s, why, sizeof why));
    s = (ps_strategy){.tp = 1, .dp = 8, .ep = 1, .etp = 8};
    assert_true(ps_cost_ep_ok(l, &s, why, sizeof why));
    m.layers[1].expert_ffn = 14335;
    assert_false(ps_cost_ep_ok(&m.layers[1], &s, why, sizeof why));
    assert_non_null(strstr(why, "expert_ffn"));
    /* a layer without experts ignores the grid */
    s = (ps_strategy){.tp = 1, .dp = 8, .ep = 3, .etp = 5};
    assert_true(ps_cost_ep_ok(emb, &s, why, sizeof why));
    ps_model_free(&m);
}

/* ep 1 with etp = tp is the layer without a grid, to the bit */
static void test_ep_none(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_model m = load_model("deepseek-v3", 0);
    const ps_layer *l = &m.layers[4];
    ps_strategy a = {.tp = 4, .dp = 2, .zero = 1, .sp = true, .attn = PS_ATTN_FUSED};
    ps_strategy b = a;
    b.ep = 1;
    b.etp = 4;
    ps_layer_cost la, lb;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &a, 0, &la), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &b, 0, &lb), PS_OK);
    assert_int_equal(memcmp(&la, &lb, sizeof la), 0);
    assert_true(ps_strategy_equal(&a, &b));
    ps_model_free(&m);
    ps_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ep_shapes),  cmocka_unit_test(test_rank_load), cmocka_unit_test(test_ep_comm),
        cmocka_unit_test(test_alltoall_dedup),
        cmocka_unit_test(test_alltoall_groups),
        cmocka_unit_test(test_ep_memory), cmocka_unit_test(test_ep_rules),
        cmocka_unit_test(test_ep_none),    cmocka_unit_test(test_ep1_etp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

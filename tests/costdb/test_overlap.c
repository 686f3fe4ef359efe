/* Overlapped tensor parallelism (Oases, seed 003) in the cost model: the two-stream sub-batch pipeline against hand
 * timelines and against a brute-force time-stepping reference, the blocks a layer's passes are cut into, the layer
 * and plan costs under cross-pass and fine-grained recomputation, resharding between TP layouts (Oases Eq. 4), and
 * the plan rules that refuse overlap where it cannot run. */
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

/* ---- the two-stream pipeline ---- */

static void test_two_stream_hand(void **state)
{
    (void)state;
    ps_cost_params p = params(1.0);
    /* equal computation c and collective m = c per block and sub-batch, n blocks, no slowdown: the first
     * computation and the last collective are exposed, everything else pairs up: (2n + 1) c (plain TP: 4 n c) */
    double comp[8], comm[8];
    for (int n = 1; n <= 4; n++) {
        for (int k = 0; k < 2 * n; k++) comp[k] = comm[k] = 1.5;
        assert_close(ps_cost_two_stream(&p, n, comp, comm), (2 * n + 1) * 1.5, 1e-12);
    }
    /* no collectives: the computations in a row; no computation: the collectives in a row */
    for (int k = 0; k < 8; k++) {
        comp[k] = 0.25 * (k + 1);
        comm[k] = 0;
    }
    assert_close(ps_cost_two_stream(&p, 4, comp, comm), 0.25 * 36, 1e-12);
    for (int k = 0; k < 8; k++) {
        comm[k] = comp[k];
        comp[k] = 0;
    }
    assert_close(ps_cost_two_stream(&p, 4, comp, comm), 0.25 * 36, 1e-12);
    assert_close(ps_cost_two_stream(&p, 0, comp, comm), 0, 1e-12);
    /* one block, slowdown 2: c0 = 1 alone; then c1 = 1 and m0 = 1 together at half speed (2); then m1 = 1: 4 */
    ps_cost_params q = params(2.0);
    double c1[2] = {1, 1}, m1[2] = {1, 1};
    assert_close(ps_cost_two_stream(&q, 1, c1, m1), 4, 1e-12);
    /* a long collective: c0 = 1; c1 = 1 with m0 = 3 at half speed: 2 s, m0 has 2 left, alone: 2; then m1 = 1: 6 */
    double m2[2] = {3, 1};
    assert_close(ps_cost_two_stream(&q, 1, c1, m2), 6, 1e-12);
    /* an infinite collective makes the pass infinite, not NaN */
    double m3[2] = {INFINITY, 1};
    assert_true(isinf(ps_cost_two_stream(&q, 1, c1, m3)));
}

/* Brute force: step time in small ticks; at each tick every stream whose next operation may start (its dependences
 * done) runs it at speed 1, or 1/s when both run. Independent of the event simulation's bookkeeping. */
static double stepped(double sig, int n, const double *comp, const double *comm, double dt)
{
    int K = 2 * n, kc = 0, km = 0;
    double rc = -1, rm = -1, t = 0;
    while (kc < K || km < K) {
        if (rc < 0 && kc < K && km > kc - 2) rc = comp[kc];
        if (rm < 0 && km < K && kc > km) rm = comm[km];
        bool c = rc > 1e-15, m = rm > 1e-15;
        if (rc >= 0 && !c) {
            rc = -1;
            kc++;
            continue;
        }
        if (rm >= 0 && !m) {
            rm = -1;
            km++;
            continue;
        }
        double speed = c && m ? 1 / sig : 1;
        if (c) rc -= dt * speed;
        if (m) rm -= dt * speed;
        t += dt;
        if (c && rc <= 1e-15) {
            rc = -1;
            kc++;
        }
        if (m && rm <= 1e-15) {
            rm = -1;
            km++;
        }
    }
    return t;
}

static void test_two_stream_reference(void **state)
{
    (void)state;
    srand(7);
    for (int trial = 0; trial < 60; trial++) {
        int n = 1 + rand() % 5;
        double sig = 1 + (rand() % 5) * 0.25, comp[10], comm[10], sc = 0, sm = 0;
        for (int k = 0; k < 2 * n; k++) {
            /* multiples of the tick so the stepped reference has no rounding of its own */
            comp[k] = (rand() % 9) * 0.125;
            comm[k] = (rand() % 3 == 0) ? 0 : (rand() % 9) * 0.125;
            sc += comp[k];
            sm += comm[k];
        }
        ps_cost_params p = params(sig);
        double got = ps_cost_two_stream(&p, n, comp, comm), want = stepped(sig, n, comp, comm, 1.0 / 1024);
        if (fabs(got - want) > 1e-2 * fmax(1, want))
            fail_msg("trial %d (n %d, slowdown %g): event simulation %.6g, stepped %.6g", trial, n, sig, got, want);
        /* bounds: never faster than either stream alone, never slower than both in a row times the slowdown */
        assert_true(got >= fmax(sc, sm) - 1e-9);
        assert_true(got <= sig * (sc + sm) + 1e-9);
        if (sig <= 2) assert_true(got <= sc + sm + 1e-9);
    }
}

/* ---- blocks ---- */

static void test_blocks(void **state)
{
    (void)state;
    ps_model m = load_model("gpt3-1.3b", 0);
    const ps_layer *dec = NULL;
    for (int64_t i = 0; i < m.n_layers && !dec; i++)
        if (m.layers[i].kind == PS_LAYER_DECODER) dec = &m.layers[i];
    assert_non_null(dec);
    ps_layer_gemms g;
    ps_layer_gemm_shapes(dec, 2, 4, &g);
    assert_int_equal(g.tp_colls, 2);
    ps_ov_pass f, b;
    ps_strategy s = {.tp = 4, .dp = 1, .ckpt = PS_RECOMP_NONE, .overlap = PS_OVERLAP_CROSS};
    ps_layer_ov_pass(dec, &g, &s, 2.0, 100, 60, 8, PS_OV_FWD, &f);
    /* forward: attention then MLP, each ending in an all-reduce; every GEMM exactly once */
    assert_int_equal(f.n, 2);
    assert_true(f.b[0].coll && f.b[1].coll);
    for (int j = 0; j < g.n; j++) assert_int_equal(f.b[0].times[j] + f.b[1].times[j], 1);
    for (int j = 0; j < g.n; j++) /* the attention GEMMs sit in the first block */
        if (g.g[j].attn) assert_int_equal(f.b[0].times[j], 1);
    assert_close(f.b[0].stream_bytes + f.b[1].stream_bytes, 2.0 * 100, 1e-12);
    /* backward without recomputation: MLP first, weight GEMMs once (input gradient), attention GEMMs twice */
    ps_layer_ov_pass(dec, &g, &s, 2.0, 100, 60, 8, PS_OV_BWD, &b);
    assert_int_equal(b.n, 2);
    for (int j = 0; j < g.n; j++) {
        assert_int_equal(b.b[0].times[j] + b.b[1].times[j], g.g[j].attn ? 2 : 1);
        if (g.g[j].blk == 1) assert_true(b.b[0].times[j] > 0); /* reversed order */
    }
    /* full recomputation, cross-pass: the forward blocks with their all-reduces come first (4 collectives) */
    s.ckpt = PS_RECOMP_FULL;
    ps_layer_ov_pass(dec, &g, &s, 2.0, 100, 60, 8, PS_OV_BWD, &b);
    assert_int_equal(b.n, 4);
    int colls = 0;
    for (int i = 0; i < b.n; i++) colls += b.b[i].coll;
    assert_int_equal(colls, 4);
    /* fine-grained (oases): the recomputation joins the backward blocks and issues no collective (Sec. 3.2) */
    s.overlap = PS_OVERLAP_OASES;
    ps_layer_ov_pass(dec, &g, &s, 2.0, 100, 60, 8, PS_OV_BWD, &b);
    assert_int_equal(b.n, 2);
    assert_true(b.b[0].coll && b.b[1].coll);
    for (int j = 0; j < g.n; j++) assert_int_equal(b.b[0].times[j] + b.b[1].times[j], g.g[j].attn ? 3 : 2);
    assert_close(b.b[0].stream_bytes + b.b[1].stream_bytes, 3 * 2.0 * 100, 1e-12);
    /* selective: the attention GEMMs once more and the score tensors' traffic, in the attention block */
    s.overlap = PS_OVERLAP_CROSS;
    s.ckpt = PS_RECOMP_SELECTIVE;
    ps_layer_ov_pass(dec, &g, &s, 2.0, 100, 60, 8, PS_OV_BWD, &b);
    assert_int_equal(b.n, 2);
    for (int j = 0; j < g.n; j++) assert_int_equal(b.b[0].times[j] + b.b[1].times[j], g.g[j].attn ? 3 : 1);
    assert_close(b.b[1].stream_bytes - b.b[0].stream_bytes, 2.0 * (100 - 60), 1e-12);
    ps_model_free(&m);
}

/* ---- one layer ---- */

static void test_layer(void **state)
{
    (void)state;
    ps_cost_params p = params(1.3);
    ps_cluster c = load_cluster("rtx3090-pcie:1"); /* 4 GPUs on PCIe: TP collectives are expensive */
    ps_model m = load_model("gpt3-1.3b", 512);
    const ps_layer *dec = &m.layers[1];
    assert_int_equal(dec->kind, PS_LAYER_DECODER);
    ps_strategy plain = {.tp = 4, .dp = 1, .ckpt = PS_RECOMP_FULL};
    ps_strategy cross = plain, oases = plain;
    cross.overlap = PS_OVERLAP_CROSS;
    oases.overlap = PS_OVERLAP_OASES;
    ps_layer_cost a, b, o;
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 8, &plain, 0, &a), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 8, &cross, 0, &b), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 8, &oases, 0, &o), PS_OK);
    /* overlap hides collectives: faster than plain, never faster than its computation alone */
    assert_true(b.fwd < a.fwd && b.bwd_b < a.bwd_b);
    assert_true(b.fwd >= b.comp_fwd && b.bwd_b >= b.comp_bwd_b);
    /* inside a run the ends are shared: a layer adds less than it costs alone */
    assert_true(b.fwd_run <= b.fwd && b.bwd_b_run <= b.bwd_b);
    /* the same bytes before overlap (the forward's two all-reduces), in twice as many collectives: each pays its
     * latency again, a small part of it */
    assert_true(b.comm_fwd > a.comm_fwd && b.comm_fwd < 1.05 * a.comm_fwd);
    /* fine-grained recomputation drops the recomputation's two all-reduces and keeps one more tensor per layer */
    assert_close(o.comm_bwd_b, b.comm_bwd_b / 2, 1e-9);
    assert_true(o.bwd_b < b.bwd_b);
    assert_close(o.mem_act - b.mem_act, o.tp_bytes, 1e-9);
    assert_close(b.mem_act, a.mem_act, 1e-12);
    /* halving the batch makes small GEMMs less efficient: the computation of the two halves is no less */
    assert_true(b.comp_fwd >= a.comp_fwd * (1 - 1e-9));
    /* one sample cannot be split */
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 1, &cross, 0, &b), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "at least 2 samples"));
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* ---- a plan ---- */

static void test_plan(void **state)
{
    (void)state;
    ps_cost_params p = params(1.3);
    ps_cluster c = load_cluster("rtx3090-pcie:1");
    ps_model m = load_model("gpt3-1.3b", 512);
    ps_strategy s = {.tp = 4, .dp = 1, .ckpt = PS_RECOMP_FULL, .overlap = PS_OVERLAP_OASES};
    ps_plan plan, flat;
    ps_prediction r, rp;
    assert_int_equal(ps_plan_uniform(&m, 8, 4, 1, 1, "1f1b", &s, &plan), PS_OK);
    assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &r), PS_OK);
    s.overlap = PS_OVERLAP_NONE;
    assert_int_equal(ps_plan_uniform(&m, 8, 4, 1, 1, "1f1b", &s, &flat), PS_OK);
    assert_int_equal(ps_cost_plan(&p, &m, &c, &flat, &rp), PS_OK);
    assert_true(r.samples_per_s > rp.samples_per_s);
    /* the run of 24 overlapped blocks: less than every layer alone, more than the layers' computation */
    double alone = 0, comp = 0;
    ps_layer_cost lc;
    for (int64_t i = 0; i < m.n_layers; i++) {
        assert_int_equal(ps_cost_layer(&p, &c, &m.layers[i], m.dtype, 4, &plan.layer[i], 0, &lc), PS_OK);
        alone += lc.fwd;
        comp += lc.comp_fwd;
    }
    assert_true(r.stages[0].fwd < alone);
    assert_true(r.stages[0].fwd >= comp);
    /* rules */
    plan.layer[3].overlap = PS_OVERLAP_OASES;
    plan.layer[3].ckpt = PS_RECOMP_SELECTIVE;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "needs ckpt full"));
    plan.layer[3].ckpt = PS_RECOMP_FULL;
    plan.layer[3].sp = true;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "do not combine"));
    plan.layer[3].sp = false;
    plan.layer[3].tp = 1;
    plan.layer[3].dp = 4;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "needs tp >= 2"));
    plan.layer[3].tp = 2;
    plan.layer[3].dp = 2;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_OK);
    plan.mbs = 1; /* 1 sample per replica at dp 1 */
    plan.gbs = 1;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "splits the micro-batch in two"));
    ps_prediction_free(&r);
    ps_prediction_free(&rp);
    ps_plan_free(&plan);
    ps_plan_free(&flat);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* ---- resharding ---- */

static void test_reshard(void **state)
{
    (void)state;
    ps_cost_params p = params(1.3);
    ps_cluster c = load_cluster("rtx3090-pcie:2"); /* 8 GPUs */
    ps_model m = load_model("gpt3-1.3b", 512);
    const ps_layer *dec = &m.layers[1];
    double unit = ps_layer_boundary_bytes(dec, m.dtype);
    ps_strategy t2 = {.tp = 2, .dp = 4}, t4 = {.tp = 4, .dp = 2}, t4sp = {.tp = 4, .dp = 2, .sp = true};
    ps_strategy t4ov = t4;
    t4ov.overlap = PS_OVERLAP_CROSS;
    ps_group g;
    double bytes, f, b;
    /* TP 2 -> 4: each GPU holds a quarter of the micro-batch and needs a half: the forward gathers from the other
     * TP-2 group of its TP-4 group (2 members, stride 2); the backward slices */
    assert_int_equal(ps_cost_reshard_group(dec, m.dtype, 16, &t2, &t4, 0, &g, &bytes), PS_RESHARD_FWD);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.stride, 2);
    assert_close(bytes, unit * 16 / 2, 1e-12);
    ps_cost_reshard(&p, &c, dec, m.dtype, 16, &t2, &t4, 0, &f, &b);
    assert_true(f > 0 && b == 0);
    assert_close(f, ps_coll_allgather(&p, &c, &g, bytes), 1e-12);
    /* and back: the gradient is gathered in the backward */
    assert_int_equal(ps_cost_reshard_group(dec, m.dtype, 16, &t4, &t2, 0, &g, &bytes), PS_RESHARD_BWD);
    ps_cost_reshard(&p, &c, dec, m.dtype, 16, &t4, &t2, 0, &f, &b);
    assert_true(f == 0 && b > 0);
    /* SP -> plain at one degree: the sequence shards gathered over the TP group */
    assert_int_equal(ps_cost_reshard_group(dec, m.dtype, 16, &t4sp, &t4, 0, &g, &bytes), PS_RESHARD_FWD);
    assert_int_equal(g.n, 4);
    assert_int_equal(g.stride, 1);
    /* overlap, ZeRO or recomputation alone change no layout */
    assert_int_equal(ps_cost_reshard_group(dec, m.dtype, 16, &t4, &t4ov, 0, &g, &bytes), 0);
    ps_cost_reshard(&p, &c, dec, m.dtype, 16, &t4, &t4ov, 0, &f, &b);
    assert_true(f == 0 && b == 0);
    /* a plan switching TP inside its stage pays the gather (Oases App. D: 8 layers at TP 2, then TP 4) */
    ps_plan mixed, uni;
    ps_prediction rm, ru;
    assert_int_equal(ps_plan_uniform(&m, 16, 4, 1, 1, "1f1b", &t4, &uni), PS_OK);
    assert_int_equal(ps_plan_uniform(&m, 16, 4, 1, 1, "1f1b", &t4, &mixed), PS_OK);
    for (int64_t i = 1; i <= 8; i++) mixed.layer[i] = t2;
    assert_int_equal(ps_cost_plan(&p, &m, &c, &uni, &ru), PS_OK);
    assert_int_equal(ps_cost_plan(&p, &m, &c, &mixed, &rm), PS_OK);
    ps_layer_cost l2, l4;
    /* 16 samples in micro-batches of 4 per TP-4 replica (dp 2): 8 samples per micro-batch over the stage */
    assert_int_equal(ps_plan_micro_batches(&uni), 2);
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 8 / 4, &t2, 0, &l2), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 8 / 2, &t4, 0, &l4), PS_OK);
    double f0, b0, f1, b1;
    ps_cost_reshard(&p, &c, &m.layers[0], m.dtype, 8, &t4, &t2, 0, &f0, &b0);
    ps_cost_reshard(&p, &c, &m.layers[8], m.dtype, 8, &t2, &t4, 0, &f1, &b1);
    assert_true(f0 == 0 && b0 > 0 && f1 > 0 && b1 == 0);
    /* the forward of the mixed stage: the uniform one, 8 layers swapped for their TP-2 cost, plus the gathers */
    assert_close(rm.stages[0].fwd, ru.stages[0].fwd + 8 * (l2.fwd - l4.fwd) + f0 + f1, 1e-9);
    assert_close(rm.stages[0].bwd_b, ru.stages[0].bwd_b + 8 * (l2.bwd_b - l4.bwd_b) + b0 + b1, 1e-9);
    ps_prediction_free(&rm);
    ps_prediction_free(&ru);
    ps_plan_free(&mixed);
    ps_plan_free(&uni);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_stream_hand), cmocka_unit_test(test_two_stream_reference),
        cmocka_unit_test(test_blocks),          cmocka_unit_test(test_layer),
        cmocka_unit_test(test_plan),            cmocka_unit_test(test_reshard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

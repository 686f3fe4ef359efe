/* Transformer Engine's TP overlap (PS_OVERLAP_TE) in the cost model: the ring pipeline of ps_cost_ring_overlap
 * against a brute-force two-stream timeline that knows only each piece's dependencies, the pairs of GEMMs and
 * collectives it pipelines, a layer's cost under it against plain sequence parallelism, the plan rules and names. */
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

/* ---- brute force: two streams, operations with dependencies, time stepped in small increments ---- */

enum { MAX_OPS = 64 };
typedef struct {
    double work;      /* seconds at full speed */
    int stream;       /* 0 computation, 1 communication */
    int dep[3], n_dep; /* operations that must be done before it starts */
} op;

/* Each stream runs its operations in list order, an operation once its dependencies are done; while both streams
 * run, both progress at 1/slowdown. Returns when the last operation ends. */
static double timeline(const op *ops, int n, double slowdown)
{
    double left[MAX_OPS];
    bool done[MAX_OPS] = {false};
    for (int i = 0; i < n; i++) left[i] = ops[i].work;
    double t = 0;
    for (;;) {
        int run[2] = {-1, -1};
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < n; i++) {
                if (done[i] || ops[i].stream != s) continue;
                bool ready = true;
                for (int d = 0; d < ops[i].n_dep; d++) ready = ready && done[ops[i].dep[d]];
                if (ready) run[s] = i;
                break; /* in list order: the first not done, ready or not */
            }
        if (run[0] < 0 && run[1] < 0) break;
        bool both = run[0] >= 0 && run[1] >= 0;
        double rate = both ? 1 / slowdown : 1;
        /* advance to the next end */
        double dt = INFINITY;
        for (int s = 0; s < 2; s++)
            if (run[s] >= 0) dt = fmin(dt, left[run[s]] / rate);
        t += dt;
        for (int s = 0; s < 2; s++) {
            if (run[s] < 0) continue;
            left[run[s]] -= dt * rate;
            if (left[run[s]] <= 1e-15 * fmax(1, ops[run[s]].work)) done[run[s]] = true;
        }
    }
    return t;
}

/* The step-synchronous ring as psearch exec runs it: step j posts its transfer, computes its piece, then waits for
 * the transfer; the next step starts when both are done. AG: transfer j (bringing piece j + 1) beside piece j;
 * RS: transfer j (carrying piece j's partial sum) beside piece j + 1. */
static double brute_ring(int steps, double comp, double comm, bool comm_first, double slowdown)
{
    op ops[MAX_OPS];
    int n = 0, prev_c = -1, prev_m = -1;
    for (int j = 0; j < steps; j++) {
        bool has = comm_first ? j < steps - 1 : j > 0;
        int c = n++;
        ops[c] = (op){.work = comp, .stream = 0};
        int m = -1;
        if (has) {
            m = n++;
            ops[m] = (op){.work = comm, .stream = 1};
            /* the transfer waits for the previous step to finish; RS's carries the previous piece's sum */
            if (prev_c >= 0) ops[m].dep[ops[m].n_dep++] = prev_c;
            if (prev_m >= 0) ops[m].dep[ops[m].n_dep++] = prev_m;
        }
        if (prev_c >= 0) ops[c].dep[ops[c].n_dep++] = prev_c;
        if (prev_m >= 0) ops[c].dep[ops[c].n_dep++] = prev_m;
        prev_c = c;
        prev_m = m;
    }
    return timeline(ops, n, slowdown);
}

static void test_ring_hand(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    p.overlap_slowdown = 1.5;
    /* one step: the piece alone, no transfer */
    assert_close(ps_cost_ring_overlap(&p, 1, 2, 5, true), 2, 1e-12);
    assert_close(ps_cost_ring_overlap(&p, 0, 2, 5, true), 0, 0);
    /* 4 steps, comp 1, comm 3: one lone piece, then 3 x (3 + 0.5 x 1) */
    assert_close(ps_cost_ring_overlap(&p, 4, 1, 3, true), 1 + 3 * 3.5, 1e-12);
    assert_close(ps_cost_ring_overlap(&p, 4, 1, 3, false), 1 + 3 * 3.5, 1e-12);
    /* no communication: the GEMM pieces alone */
    assert_close(ps_cost_ring_overlap(&p, 8, 0.25, 0, true), 2, 1e-12);
}

static void test_ring_reference(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    srand(20);
    const double slow[] = {1.0, 1.3, 2.0};
    for (int it = 0; it < 600; it++) {
        p.overlap_slowdown = slow[it % 3];
        int steps = 1 + it % 8;
        double comp = (double)rand() / RAND_MAX * 1e-3, comm = (double)rand() / RAND_MAX * 1e-3;
        if (it % 7 == 0) comm = 0;
        bool first = it % 2 == 0;
        double want = brute_ring(steps, comp, comm, first, p.overlap_slowdown);
        assert_close(ps_cost_ring_overlap(&p, steps, comp, comm, first), want, 1e-9);
    }
}

static void test_pairs(void **state)
{
    (void)state;
    ps_model m = load_model("gpt3-1.3b", 0);
    ps_layer_gemms g;
    ps_layer_gemm_shapes(&m.layers[1], 2, 4, &g);
    int ag, rs;
    /* attention: QKV after the all-gather, the output projection before the reduce-scatter; MLP: FC1, FC2 */
    assert_true(ps_layer_te_pair(&g, 0, &ag, &rs));
    assert_int_equal(ag, 0);
    assert_int_equal(rs, 1);
    assert_true(ps_layer_te_pair(&g, 1, &ag, &rs));
    assert_int_equal(ag, 2);
    assert_int_equal(rs, 3);
    assert_false(ps_layer_te_pair(&g, 2, &ag, &rs));
    assert_int_equal(ag, -1);
    /* the LM head has one GEMM and no forward collective: no pair */
    ps_layer_gemm_shapes(&m.layers[m.n_layers - 1], 2, 4, &g);
    assert_false(ps_layer_te_pair(&g, 0, &ag, &rs));
    ps_model_free(&m);
}

static void test_layer(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-a100-80g:1");
    ps_model m = load_model("gpt3-13b", 1024);
    /* the flat GEMM model: under the shape model the ring's 1/tp GEMM pieces (256 x 1920 x 5120 at TP 8) fill 30 of
     * the A100's 108 SMs, and that wave loss outweighs the hidden collectives (docs/costmodel.md, te) */
    p.gemm_tile_m = 0;
    const ps_layer *dec = &m.layers[1];
    ps_strategy sp = {.tp = 8, .dp = 1, .sp = true, .ckpt = PS_RECOMP_NONE};
    ps_strategy te = sp;
    te.overlap = PS_OVERLAP_TE;
    ps_layer_cost a, b;
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 1, &sp, 0, &a), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 1, &te, 0, &b), PS_OK);
    /* the rings hide most of the collectives: faster, never faster than the computation alone */
    assert_true(b.fwd < a.fwd && b.bwd_b < a.bwd_b);
    assert_true(b.fwd >= b.comp_fwd && b.bwd_b >= b.comp_bwd_b);
    assert_true(b.tp_comm < a.tp_comm);
    /* the pieces are smaller GEMMs: their computation is no less than the whole GEMMs' */
    assert_true(b.comp_fwd >= a.comp_fwd * (1 - 1e-12));
    /* the ring moves (tp - 1) / tp of each collective's bytes, as the plain ring collective does */
    assert_true(b.te_comm[0] > 0 && b.te_exposed[0] >= 0 && b.te_exposed[0] < b.te_comm[0]);
    assert_close(b.comm_fwd, b.te_comm[0], 1e-12); /* every forward collective of a decoder is in a ring */
    /* each ring step is never faster than one step of the plain collective it replaces */
    assert_true(b.comm_fwd >= a.comm_fwd * (1 - 1e-12));
    assert_close(b.comm_fwd, a.comm_fwd, 0.1);
    /* W, memory and FLOPs do not change; no run: the layer alone is what it adds */
    assert_close(b.bwd_w, a.bwd_w, 1e-12);
    assert_close(b.mem_act, a.mem_act, 1e-12);
    assert_close(b.hw_flops, a.hw_flops, 1e-12);
    assert_close(b.fwd_run, b.fwd, 1e-12);
    assert_close(b.bwd_b_run, b.bwd_b, 1e-12);
    /* full recomputation repeats the forward, rings included */
    ps_strategy tf = te, sf = sp;
    tf.ckpt = sf.ckpt = PS_RECOMP_FULL;
    ps_layer_cost af, bf;
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 1, &sf, 0, &af), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 1, &tf, 0, &bf), PS_OK);
    assert_close(bf.bwd_b - b.bwd_b, b.fwd, 1e-9);
    assert_close(bf.te_comm[1], b.te_comm[1] + b.te_comm[0], 1e-12);
    /* one sample is enough (no sub-batches) */
    assert_true(b.fwd > 0);
    /* without sp it is refused by name */
    te.sp = false;
    assert_int_equal(ps_cost_layer(&p, &c, dec, m.dtype, 1, &te, 0, &b), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "needs sp"));
    ps_error_clear();
    ps_model_free(&m);
    ps_cluster_free(&c);
}

static void test_plan_rules(void **state)
{
    (void)state;
    ps_overlap ov;
    assert_int_equal(ps_overlap_parse("te", &ov), PS_OK);
    assert_int_equal(ov, PS_OVERLAP_TE);
    assert_string_equal(ps_overlap_name(PS_OVERLAP_TE), "te");
    assert_false(ps_overlap_is_oases(PS_OVERLAP_TE));
    assert_true(ps_overlap_is_oases(PS_OVERLAP_CROSS) && ps_overlap_is_oases(PS_OVERLAP_OASES));
    ps_cluster c = load_cluster("dgx-a100-80g:1");
    ps_model m = load_model("gpt3-1.3b", 1024);
    ps_strategy s = {.tp = 4, .dp = 2, .sp = true, .overlap = PS_OVERLAP_TE};
    ps_plan plan;
    /* one sample per replica is fine: nothing is split into sub-batches */
    assert_int_equal(ps_plan_uniform(&m, 8, 1, 1, 1, "1f1b", &s, &plan), PS_OK);
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_OK);
    ps_cost_params p;
    ps_cost_params_default(&p);
    p.gemm_tile_m = 0; /* the flat GEMM model, as in test_layer */
    ps_prediction te, plain;
    assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &te), PS_OK);
    for (int64_t i = 0; i < m.n_layers; i++) plan.layer[i].overlap = PS_OVERLAP_NONE;
    assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &plain), PS_OK);
    assert_true(te.iter_time_s < plain.iter_time_s);
    assert_true(te.comm_exposed_s < plain.comm_exposed_s);
    ps_prediction_free(&te);
    ps_prediction_free(&plain);
    /* without sp, or with tp 1: refused by name */
    for (int64_t i = 0; i < m.n_layers; i++) plan.layer[i] = s;
    plan.layer[3].sp = false;
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "TP overlap te"));
    ps_error_clear();
    ps_plan_free(&plan);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_hand), cmocka_unit_test(test_ring_reference), cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_layer),     cmocka_unit_test(test_plan_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Data-parallel overlap in the cost model (docs/costmodel.md, "Data-parallel overlap"): the bucket timeline
 * (ps_cost_bucket_overlap) against hand timelines and against a brute-force event simulation on random instances,
 * the one-ahead prefetch (ps_cost_prefetch), and layer and plan costs: overlap on is never slower than off, off
 * exposes the whole synchronisation after the last backward, one bucket holding everything exposes it all too. */
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

/* |got - want| <= tol x max(1, |want|): absolute near zero, where the timelines' exposed parts often are */
static void assert_near(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * fmax(1, fabs(want)))) fail_msg("got %.15g, want %.15g", got, want);
}

#include "cost_test_util.h"

/* ---- the bucket timeline ---- */

static void test_bucket_hand(void **state)
{
    (void)state;
    ps_cost_params p1 = params(1.0), p2 = params(2.0);
    /* one bucket ready at the end of the backward: all of it exposed */
    double a0[] = {0}, c0[] = {3};
    assert_near(ps_cost_bucket_overlap(&p1, 1, a0, c0), 3, 1e-12);
    assert_near(ps_cost_bucket_overlap(&p2, 1, a0, c0), 3, 1e-12);
    /* nothing to reduce: nothing exposed */
    assert_near(ps_cost_bucket_overlap(&p1, 0, a0, c0), 0, 1e-12);
    /* ready with 10 s of backward left, 4 s of collective: hidden without slowdown; at 2x the collective takes 8 s
     * of the backward's 10 (4 s of its computation), 6 s of computation left alone: 8 + 6 - 10 = 4 s exposed */
    double a1[] = {10}, c1[] = {4};
    assert_near(ps_cost_bucket_overlap(&p1, 1, a1, c1), 0, 1e-12);
    assert_near(ps_cost_bucket_overlap(&p2, 1, a1, c1), 4, 1e-12);
    /* two buckets, 3 and 1 s of backward left, collectives of 2 s each, no slowdown: the first ends at 2 (time 0 =
     * its readiness), the second ready at 2 starts then, ends at 4; the backward ends at 3: 1 s exposed */
    double a2[] = {3, 1}, c2[] = {2, 2};
    assert_near(ps_cost_bucket_overlap(&p1, 2, a2, c2), 1, 1e-12);
    /* the second bucket waits for its readiness: collectives of 1 s, ready with 5 and 0 s left: 1 s exposed */
    double a3[] = {5, 0}, c3[] = {1, 1};
    assert_near(ps_cost_bucket_overlap(&p1, 2, a3, c3), 1, 1e-12);
}

/* Brute force: step from event to event, recomputing both streams' rates at every step. Computation has `a[0]`
 * seconds of work left at time 0; bucket i becomes ready when the work left falls to a[i]; the communication stream
 * takes ready buckets in order, one at a time. While both streams are busy each progresses at 1 / slowdown. */
static double bucket_brute(double slow, int n, const double *a, const double *c)
{
    double t = 0, left = a[0], cur = 0, end = 0;
    int next_ready = 0, next_start = 0;
    bool ready[64] = {false}, busy = false;
    for (int guard = 0; guard < 100000; guard++) {
        while (next_ready < n && left <= a[next_ready] + 1e-15) ready[next_ready++] = true;
        if (!busy && next_start < n && ready[next_start]) {
            cur = c[next_start++];
            busy = true;
        }
        if (busy && cur <= 0) { /* an empty collective ends where it starts */
            busy = false;
            end = t;
            continue;
        }
        bool comp = left > 0;
        if (!comp && !busy) break;
        double rate = comp && busy ? 1 / slow : 1;
        double dt = INFINITY;
        if (comp) {
            dt = fmin(dt, left / rate);
            if (next_ready < n && a[next_ready] < left) dt = fmin(dt, (left - a[next_ready]) / rate);
        }
        if (busy) dt = fmin(dt, cur / rate);
        t += dt;
        if (comp) left = fmax(0, left - dt * rate);
        if (busy) {
            cur -= dt * rate;
            if (cur <= 1e-15 * (1 + t)) {
                busy = false;
                end = t;
            }
        }
        if (comp && left <= 1e-15 * (1 + a[0])) left = 0;
    }
    double finish = fmax(t, end);
    return fmax(0, finish - a[0]);
}

static double urand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (double)((*s >> 8) & 0xffff) / 65536.0;
}

static void test_bucket_reference(void **state)
{
    (void)state;
    unsigned seed = 20;
    for (int trial = 0; trial < 20000; trial++) {
        int n = 1 + (int)(urand(&seed) * 12);
        double a[16], c[16], slow = trial % 4 == 0 ? 1.0 : 1 + 2 * urand(&seed);
        ps_cost_params p = params(slow);
        /* readiness: non-increasing work left; some buckets share a readiness, some collectives are empty */
        double left = 10 * urand(&seed);
        for (int i = 0; i < n; i++) {
            if (urand(&seed) > 0.2) left *= urand(&seed);
            if (i == n - 1 && urand(&seed) < 0.5) left = 0;
            a[i] = left;
            c[i] = urand(&seed) < 0.1 ? 0 : 3 * urand(&seed);
        }
        double got = ps_cost_bucket_overlap(&p, n, a, c), want = bucket_brute(slow, n, a, c);
        if (!(fabs(got - want) <= 1e-9 * fmax(1, want)))
            fail_msg("trial %d (n %d, slowdown %g): closed form %.15g, event simulation %.15g", trial, n, slow, got,
                     want);
    }
}

static void test_prefetch(void **state)
{
    (void)state;
    ps_cost_params p1 = params(1.0), p2 = params(1.5);
    /* gathers of 1 s, computations of 2 s, 3 layers: the first gather alone, each later one hidden */
    double comp[] = {2, 2, 2}, comm[] = {1, 1, 1, 0, 0};
    assert_near(ps_cost_prefetch(&p1, 3, comp, comm), 7, 1e-12);
    /* at 1.5x: 1 + (2 + 0.5) x 2 + 2 */
    assert_near(ps_cost_prefetch(&p2, 3, comp, comm), 8, 1e-12);
    /* a trailing exposed collective (ZeRO-3's last reduce-scatter) */
    double comm2[] = {1, 1, 1, 0, 0.5};
    assert_near(ps_cost_prefetch(&p1, 3, comp, comm2), 7.5, 1e-12);
    assert_near(ps_cost_prefetch(&p1, 0, comp, comm2), 2, 1e-12); /* comm2[0] + comm2[1] */
}

/* ---- layer and plan ---- */

static void test_layer(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-a100-80g:2");
    ps_model m = load_model("gpt3-1.3b", 512);
    const ps_layer *l = &m.layers[1];
    for (int zero = 0; zero <= 3; zero++) {
        ps_strategy on = {.tp = 2, .dp = 8, .zero = zero}, off = on;
        off.dp_no_overlap = true;
        ps_layer_cost a, b;
        assert_int_equal(ps_cost_layer(&p, &c, l, m.dtype, 2, &on, 0, &a), PS_OK);
        assert_int_equal(ps_cost_layer(&p, &c, l, m.dtype, 2, &off, 0, &b), PS_OK);
        assert_true(a.fwd <= b.fwd && a.bwd_w <= b.bwd_w && a.bwd_b == b.bwd_b);
        assert_near(a.dp_sync, b.dp_sync, 1e-15);
        assert_near(a.dp_sync, a.dp_grad + a.dp_param, 1e-15);
        if (zero == 3) {
            /* off: every gather and the reduce-scatter waits and blocks */
            assert_near(b.fwd, b.comp_fwd + b.comm_fwd, 1e-12);
            assert_near(b.bwd_w, b.comp_bwd_w + a.zero_gather + a.zero_rs, 1e-12);
            assert_true(a.fwd < b.fwd);
        }
    }
    ps_model_free(&m);
    ps_cluster_free(&c);
}

static void plan_time(const ps_cost_params *p, const ps_model *m, const ps_cluster *c, int tp, int pp, int zero,
                      bool off, ps_prediction *r)
{
    int64_t dp = c->n_gpus / (tp * pp);
    ps_strategy s = {.tp = tp, .dp = (int)dp, .zero = zero, .dp_no_overlap = off};
    ps_plan plan;
    assert_int_equal(ps_plan_uniform(m, 16 * dp * pp, 2, pp, 1, "1f1b", &s, &plan), PS_OK);
    assert_int_equal(ps_cost_plan(p, m, c, &plan, r), PS_OK);
    ps_plan_free(&plan);
}

static void test_plan(void **state)
{
    (void)state;
    ps_cost_params p, one;
    ps_cost_params_default(&p);
    one = p;
    one.dp_bucket_elems = 1e11; /* one bucket for the whole device: ready when the backward ends */
    ps_cluster c = load_cluster("dgx-a100-80g:2");
    ps_model m = load_model("gpt3-1.3b", 512);
    int shapes[][2] = {{1, 1}, {2, 1}, {2, 2}, {1, 4}, {8, 2}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int zero = 0; zero <= 3; zero++) {
            int tp = shapes[k][0], pp = shapes[k][1];
            ps_prediction on, off, on1;
            plan_time(&p, &m, &c, tp, pp, zero, false, &on);
            plan_time(&p, &m, &c, tp, pp, zero, true, &off);
            plan_time(&one, &m, &c, tp, pp, zero, false, &on1);
            if (!(on.iter_time_s <= off.iter_time_s * (1 + 1e-12)))
                fail_msg("tp %d pp %d zero %d: overlap on %.9g s slower than off %.9g s", tp, pp, zero,
                         on.iter_time_s, off.iter_time_s);
            for (int s = 0; s < off.n_stages; s++) {
                /* off: the stage's whole synchronisation after its last backward */
                ps_plan plan;
                int64_t dp = c.n_gpus / (tp * pp);
                ps_strategy st = {.tp = tp, .dp = (int)dp, .zero = zero};
                assert_int_equal(ps_plan_uniform(&m, 16 * dp * pp, 2, pp, 1, "1f1b", &st, &plan), PS_OK);
                double sync = 0;
                for (int64_t i = plan.cuts[s]; i < plan.cuts[s + 1]; i++) {
                    ps_layer_cost lc;
                    assert_int_equal(ps_cost_layer(&p, &c, &m.layers[i], m.dtype, 2, &st, off.stages[s].first_gpu,
                                                   &lc),
                                     PS_OK);
                    sync += lc.dp_sync;
                }
                ps_plan_free(&plan);
                assert_near(off.stages[s].dp_sync_exposed, sync, 1e-12);
                assert_true(on.stages[s].dp_sync_exposed <= sync * (1 + 1e-12));
                /* ZeRO 0 in one bucket: the all-reduce starts when the backward ends, all of it exposed */
                if (zero == 0) assert_near(on1.stages[s].dp_sync_exposed, sync, 1e-12);
                if (zero == 3 && dp > 1) assert_true(sync == 0 && on.stages[s].fwd < off.stages[s].fwd);
            }
            ps_prediction_free(&on);
            ps_prediction_free(&off);
            ps_prediction_free(&on1);
        }
    ps_model_free(&m);
    ps_cluster_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_hand), cmocka_unit_test(test_bucket_reference),
        cmocka_unit_test(test_prefetch),    cmocka_unit_test(test_layer),
        cmocka_unit_test(test_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

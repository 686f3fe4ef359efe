/* The search end to end on small problems: the winner is at least as good as every baseline computed the same way
 * (the even-split baseline is a subset of the search space, so that one is exact), the memory objective finds a plan
 * no heavier than the throughput winner or any baseline, and bad options are refused. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_schedules.h"
#include "ps_search.h"
#include "search_test_util.h"

typedef struct {
    const char *model, *cluster;
    int64_t gbs;
} scenario;

static const scenario k_cases[] = {
    {"gpt3-1.3b", "dgx-a100-40g:1", 64},
    {"gpt3-2.7b", "dgx-a100-80g:2", 128},
    {"bert-huge-32", "titan-pcie3:1", 32},
    {"t5-512-4-32", "titan-pcie3:1", 32},
};

static void load(const scenario *s, ps_model *m, ps_cluster *c) { load_as_cli(s->model, s->cluster, m, c); }

static void test_beats_baselines(void **state)
{
    (void)state;
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        ps_model m;
        ps_cluster c;
        load(&k_cases[i], &m, &c);
        ps_search_opts o;
        ps_search_opts_default(&o);
        o.gbs_lo = o.gbs_hi = k_cases[i].gbs;
        ps_search_result r;
        if (ps_search_run(&cp, &m, &c, &o, &r) != PS_OK) fail_msg("%s on %s: %s", m.name, c.name, ps_error_message());
        if (r.n_top == 0) fail_msg("%s on %s: nothing fits (%s)", m.name, c.name, r.binding);
        const ps_search_cand *best = &r.top[0];
        /* even split: part of what the search offered, so never ahead of the winner in the total order */
        assert_true(r.have_base[PS_BASE_EVEN]);
        assert_true(ps_search_cand_order(best, &r.base[PS_BASE_EVEN], PS_SEARCH_THROUGHPUT) <= 0);
        for (int k = 0; k < PS_BASE_EVEN; k++) {
            char why[160];
            assert_int_equal(ps_search_baseline(&cp, &m, &c, &o, k, &r.base[k], &r.have_base[k], why, sizeof why),
                             PS_OK);
            if (!r.have_base[k]) {
                assert_true(why[0] != '\0');
                continue;
            }
            assert_true(r.base[k].pred.fits);
            if (best->pred.samples_per_s < r.base[k].pred.samples_per_s)
                fail_msg("%s on %s: baseline %s (%.6g samples/s) beats the search (%.6g)", m.name, c.name,
                         ps_baseline_name(k), r.base[k].pred.samples_per_s, best->pred.samples_per_s);
        }
        /* the memory objective: no heavier than anything the throughput search or the baselines found */
        ps_search_opts om = o;
        om.objective = PS_SEARCH_MEMORY;
        ps_search_result rm;
        assert_int_equal(ps_search_run(&cp, &m, &c, &om, &rm), PS_OK);
        assert_true(rm.n_top > 0);
        double light = ps_prediction_peak(&rm.top[0].pred);
        for (int t = 0; t < r.n_top; t++) assert_true(light <= ps_prediction_peak(&r.top[t].pred));
        for (int k = 0; k < PS_BASE_COUNT; k++)
            if (r.have_base[k] && light > ps_prediction_peak(&r.base[k].pred))
                fail_msg("%s on %s: memory objective %.4g GiB, baseline %s %.4g GiB", m.name, c.name,
                         light / 1073741824.0, ps_baseline_name(k), ps_prediction_peak(&r.base[k].pred) / 1073741824.0);
        for (int t = 1; t < rm.n_top; t++)
            assert_true(ps_search_cand_order(&rm.top[t - 1], &rm.top[t], PS_SEARCH_MEMORY) < 0);
        ps_search_result_free(&rm);
        ps_search_result_free(&r);
        ps_model_free(&m);
        ps_cluster_free(&c);
    }
}

/* Overlapped TP (Oases) is a per-layer option the search takes where it pays: on 3090s behind PCIe (Oases' "3090"
 * cluster) a 16-layer h4096 model wants TP, and with overlap allowed the best plan overlaps its TP collectives and is
 * faster than the best plan without; with overlap off no layer has it. */
static int overlapped_layers(const ps_search_cand *c, int64_t n_layers)
{
    int k = 0;
    for (int64_t i = 0; i < n_layers; i++) k += c->plan.layer[i].overlap != PS_OVERLAP_NONE;
    return k;
}

static void test_overlap_pays(void **state)
{
    (void)state;
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    /* The flat GEMM model: under the tile/wave shape model the sub-batch halves (1024 tokens) lose more to wave
     * quantization on the 3090's 82 SMs (the output projection's 256 tiles take 4 waves, 28% idle) than the overlap
     * saves here, and the best plan without overlap wins by 0.2%. This test is about the search taking overlap where
     * the cost model says it pays. */
    cp.gemm_tile_m = 0;
    ps_cluster c;
    assert_int_equal(ps_cluster_load("rtx3090-pcie:2", &c), PS_OK);
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.vocab_pad = 128 * c.groups[0].gpus_per_node;
    ps_model m;
    assert_int_equal(ps_model_load(PS_SOURCE_DIR "/bench/fidelity/models/oases-h4096-l16.json", &mo, &m), PS_OK);
    ps_search_opts o;
    ps_search_opts_default(&o);
    o.gbs_lo = o.gbs_hi = 32;
    ps_search_result with, without;
    assert_int_equal(ps_search_run(&cp, &m, &c, &o, &with), PS_OK);
    o.overlap = 0;
    assert_int_equal(ps_search_run(&cp, &m, &c, &o, &without), PS_OK);
    assert_true(with.n_top > 0 && without.n_top > 0);
    assert_true(overlapped_layers(&with.top[0], m.n_layers) > 0);
    for (int i = 0; i < without.n_top; i++) assert_int_equal(overlapped_layers(&without.top[i], m.n_layers), 0);
    assert_true(with.top[0].pred.samples_per_s > without.top[0].pred.samples_per_s);
    ps_search_result_free(&with);
    ps_search_result_free(&without);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* The attention kernel as a search choice: given, every layer of every plan kept has it; searched (both), the best
 * plan is about as fast as the best of either alone, and on GPUs without a fused kernel only unfused exists. */
static void test_attention_choice(void **state)
{
    (void)state;
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    ps_cluster c;
    assert_int_equal(ps_cluster_load("dgx-a100-40g:1", &c), PS_OK);
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.seq = 4096; /* long enough that the scores matter */
    ps_model m;
    assert_int_equal(ps_model_load("gpt3-1.3b", &mo, &m), PS_OK);
    ps_search_opts o;
    ps_search_opts_default(&o);
    o.gbs_lo = o.gbs_hi = 32;
    o.overlap = 0;
    ps_search_result r[3];
    const int modes[3] = {PS_ATTN_UNFUSED, PS_ATTN_FUSED, PS_SEARCH_ATTN_BOTH};
    for (int k = 0; k < 3; k++) {
        o.attention = modes[k];
        assert_int_equal(ps_search_run(&cp, &m, &c, &o, &r[k]), PS_OK);
        assert_true(r[k].n_top > 0);
        for (int i = 0; i < r[k].n_top; i++)
            for (int64_t l = 0; l < m.n_layers; l++) {
                ps_attn a = r[k].top[i].plan.layer[l].attn;
                if (k < 2) assert_int_equal(a, modes[k]);
                else assert_true(a == PS_ATTN_FUSED || a == PS_ATTN_UNFUSED);
            }
    }
    double su = r[0].top[0].pred.samples_per_s, sf = r[1].top[0].pred.samples_per_s;
    assert_true(sf > su); /* 4k tokens: the unfused scores cost memory and time */
    /* searched, the per-layer DP sees both kernels; its stage objective is a proxy (README "The search"), so the
     * plan it keeps may trail the better single-kernel search by a little: 0.5% here when this was written */
    assert_true(r[2].top[0].pred.samples_per_s >= (sf > su ? sf : su) * 0.99);
    for (int k = 0; k < 3; k++) ps_search_result_free(&r[k]);
    ps_cluster_free(&c);
    /* V100: auto and both are unfused; fused is not among the choices */
    assert_int_equal(ps_cluster_load("p3-8xlarge:1", &c), PS_OK);
    ps_attn got[2];
    o.attention = PS_SEARCH_ATTN_BOTH;
    assert_int_equal(ps_search_attention(&o, &c, got), 1);
    assert_int_equal(got[0], PS_ATTN_UNFUSED);
    o.attention = PS_ATTN_AUTO;
    assert_int_equal(ps_search_attention(&o, &c, got), 1);
    assert_int_equal(got[0], PS_ATTN_UNFUSED);
    ps_cluster_free(&c);
    ps_model_free(&m);
}

static void test_bad_options(void **state)
{
    (void)state;
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    ps_model m;
    ps_cluster c;
    load(&k_cases[0], &m, &c);
    ps_search_opts o;
    ps_search_opts_default(&o);
    o.gbs_lo = o.gbs_hi = 16;
    o.objective = 7;
    ps_search_result r;
    assert_int_equal(ps_search_run(&cp, &m, &c, &o, &r), PS_ERR_INPUT);
    ps_error_clear();
    ps_search_cand b;
    int found;
    char why[64];
    assert_int_equal(ps_search_baseline(&cp, &m, &c, &o, PS_BASE_EVEN, &b, &found, why, sizeof why), PS_ERR_INPUT);
    ps_error_clear();
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* The pipeline bounds the search prunes with, against the schedule simulation: for every kind without chunks,
 * random stage times (W apart or not) and p2p latencies, the simulated makespan is never below
 * ps_search_pipeline_lb of the F + B times, which is never below ps_search_pipeline_lb_any of their sum; with equal
 * stages and no W or p2p, 1F1B's makespan (m + K - 1)(f + b) is the bound itself. */
/* "Closest to fitting" is a total order: equal shortfalls rank by work unit, so the binding message of an infeasible
 * search does not depend on which thread or rank met which plan first (2 threads named pp 4 instead of pp 2 in about
 * one run of eight for gpt3-175b on dgx-a100-40g:2 --gbs 64 --schedules interleaved,v-zb before the unit tie-break). */
static void test_over_order(void **state)
{
    (void)state;
    assert_true(ps_search_over_less(5.0, 0, 9, 1.0, 1, 0));  /* a costed plan before any bound */
    assert_false(ps_search_over_less(1.0, 1, 0, 5.0, 0, 9));
    assert_true(ps_search_over_less(1.0, 0, 9, 2.0, 0, 0));  /* then the smaller shortfall */
    assert_true(ps_search_over_less(2.0, 1, 3, 2.0, 1, 4));  /* then the earlier unit */
    assert_false(ps_search_over_less(2.0, 1, 4, 2.0, 1, 3));
    assert_false(ps_search_over_less(2.0, 0, 4, 2.0, 0, 4)); /* strict: the first of one unit stays */
    assert_true(ps_search_over_less(2.0, 0, 4, INFINITY, 1, INT64_MAX)); /* anything before "nothing tried" */
}

static void test_pipeline_lb(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    uint64_t rng = 99;
    int checked = 0;
    for (int k = 0; k < ps_sched_kind_count(); k++) {
        if (ps_sched_kind_default_chunks(k) != 1) continue;
        const char *kind = ps_sched_kind_name(k);
        for (int K = 1; K <= 6; K++)
            for (int m = 1; m <= 12; m++) {
                if (ps_sched_build(s, kind, K, m, 1) != PS_OK) {
                    ps_error_clear();
                    continue;
                }
                for (int rep = 0; rep < 20; rep++) {
                    double f[6], b[6], w[6], p2p[6], u[6], U = 0;
                    for (int d = 0; d < K; d++) {
                        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                        f[d] = 0.1 + (double)(rng >> 33 & 1023) / 256;
                        b[d] = f[d] * (1 + (double)(rng >> 20 & 7) / 4);
                        w[d] = rep % 2 ? (double)(rng >> 10 & 255) / 128 : 0;
                        p2p[d] = rep % 3 == 0 ? (double)(rng >> 45 & 63) / 64 : 0;
                        u[d] = f[d] + b[d];
                        U += u[d];
                    }
                    ps_sched_costs costs = {.f = f, .b = b, .w = w, .p2p = K > 1 ? p2p : NULL};
                    ps_sched_result r;
                    assert_int_equal(ps_sched_simulate(s, &costs, &r), PS_OK);
                    double lb = ps_search_pipeline_lb(u, K, m), any = ps_search_pipeline_lb_any(U, K, m);
                    if (r.makespan < lb * (1 - 1e-12) || lb < any * (1 - 1e-12))
                        fail_msg("%s K %d m %d: makespan %.17g, bound %.17g, bound over partitions %.17g", kind, K, m,
                                 r.makespan, lb, any);
                    checked++;
                }
                if (strcmp(kind, "1f1b") == 0) {
                    double f[6], b[6], u[6];
                    for (int d = 0; d < K; d++) f[d] = 1, b[d] = 2, u[d] = 3;
                    ps_sched_costs costs = {.f = f, .b = b};
                    ps_sched_result r;
                    assert_int_equal(ps_sched_simulate(s, &costs, &r), PS_OK);
                    assert_true(fabs(r.makespan - 3.0 * (m + K - 1)) < 1e-12);
                    assert_true(fabs(ps_search_pipeline_lb(u, K, m) - r.makespan) < 1e-12);
                }
            }
    }
    assert_true(checked > 1000);
    /* the least over partitions is reached: the geometric split meets it */
    for (int K = 1; K <= 8; K++)
        for (int m = 1; m <= 64; m *= 2) {
            double u[8], any = ps_search_pipeline_lb_any(1.0, K, m), sum = 0;
            for (int d = 0; d < K; d++) sum += u[d] = any / m * pow(1 - 1.0 / m, d);
            assert_true(fabs(sum - 1) < 1e-9 || m == 1);
            if (m > 1) assert_true(fabs(ps_search_pipeline_lb(u, K, m) - any) < 1e-9);
            /* between the busy-time bound and one stage holding everything */
            assert_true(any >= (double)m / K * (1 - 1e-12) && any <= m * (1 + 1e-12));
        }
    ps_sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_beats_baselines),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_overlap_pays),
        cmocka_unit_test(test_attention_choice),
        cmocka_unit_test(test_pipeline_lb),
        cmocka_unit_test(test_over_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

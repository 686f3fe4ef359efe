/* The search's exact shortcuts and pruning rules (docs/search.md, "Speed"), each switched off through
 * ps_search_rules_off and compared with the search that has it: the same top k in the same order (throughput and
 * index, so the same plans) and the same even-split baseline. The cases are chosen so that
 * each rule applies: clusters whose stages straddle nodes differently (non-uniform placements: stages of 3, 6 or 12
 * GPUs on 8-GPU nodes, of 3 GPUs on nodes of NVLink pairs, of 9 GPUs in 72-GPU NVLink racks). A rule that dropped or
 * changed a plan that would have been among the best fails here. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_search.h"
#include "search_test_util.h"
#include "search_internal.h"

typedef struct {
    const char *model, *cluster;
    int64_t gbs;
    int objective, pp; /* pp: fixed (0: searched), so that the plans compared have non-uniform placements */
} scenario;

static const scenario k_cases[] = {
    {"gpt3-1.3b", "dgx-a100-80g:3", 48, PS_SEARCH_THROUGHPUT, 0}, /* pp 2, 4, 8: stages of 12, 6, 3 GPUs */
    {"gpt3-1.3b", "dgx-a100-80g:3", 48, PS_SEARCH_THROUGHPUT, 2},
    {"gpt3-1.3b", "dgx-a100-80g:3", 48, PS_SEARCH_THROUGHPUT, 4},
    {"gpt3-1.3b", "dgx-a100-80g:3", 48, PS_SEARCH_MEMORY, 8},
    {"gpt3-2.7b", "rtx3090-nvlink:3", 24, PS_SEARCH_THROUGHPUT, 4}, /* NVLink pairs: stages of 3 GPUs */
    {"llama2-7b", "gb200-nvl72:2", 144, PS_SEARCH_THROUGHPUT, 16},  /* 72-GPU racks of 4-GPU trays: stages of 9 */
    /* MoE models: several expert grids per batch and pipeline degree, layers off the grid (embedding, head, a dense
     * first block) beside the MoE blocks, and stages of 12 or 6 GPUs */
    {"mixtral-8x7b", "dgx-h100:2", 64, PS_SEARCH_THROUGHPUT, 0},
    {"tests/data/models/good/tiny-moe-search.json", "dgx-a100-80g:3", 48, PS_SEARCH_THROUGHPUT, 0},
    {"tests/data/models/good/tiny-moe-search.json", "dgx-a100-80g:3", 48, PS_SEARCH_THROUGHPUT, 4},
};

static void load(const scenario *s, ps_model *m, ps_cluster *c)
{
    char path[1024];
    /* a preset by name, or a file of the source tree */
    snprintf(path, sizeof path, "%s%s%s", strchr(s->model, '/') ? PS_SOURCE_DIR : "", strchr(s->model, '/') ? "/" : "",
             s->model);
    load_as_cli(path, s->cluster, m, c);
}

static void run(const scenario *sc, const ps_model *m, const ps_cluster *c, unsigned off, ps_search_result *r)
{
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    ps_search_opts o;
    ps_search_opts_default(&o);
    o.gbs_lo = o.gbs_hi = sc->gbs;
    o.objective = sc->objective;
    o.fixed.pp = sc->pp;
    o.top_k = 8;
    ps_search_rules_off = off;
    ps_status st = ps_search_run(&cp, m, c, &o, r);
    ps_search_rules_off = 0;
    if (st != PS_OK) fail_msg("%s on %s: %s", m->name, c->name, ps_error_message());
}

static void same_cand(const char *what, const ps_search_cand *a, const ps_search_cand *b)
{
    if (a->index != b->index || a->pred.samples_per_s != b->pred.samples_per_s ||
        ps_prediction_peak(&a->pred) != ps_prediction_peak(&b->pred))
        fail_msg("%s: plan %lld at %.9g samples/s, %.9g B with the rule; %lld at %.9g, %.9g B without", what,
                 (long long)a->index, a->pred.samples_per_s, ps_prediction_peak(&a->pred), (long long)b->index,
                 b->pred.samples_per_s, ps_prediction_peak(&b->pred));
}

static void check_rule(unsigned rule, const char *name)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        ps_model m;
        ps_cluster c;
        load(&k_cases[i], &m, &c);
        ps_search_result with, without;
        run(&k_cases[i], &m, &c, 0, &with);
        run(&k_cases[i], &m, &c, rule, &without);
        char what[200];
        snprintf(what, sizeof what, "rule %s, %s on %s (%s, pp %d)", name, m.name, c.name,
                 ps_search_objective_name(k_cases[i].objective), k_cases[i].pp);
        if (with.n_top != without.n_top)
            fail_msg("%s: %d plans with the rule, %d without", what, with.n_top, without.n_top);
        assert_true(with.n_top > 0);
        for (int t = 0; t < with.n_top; t++) same_cand(what, &with.top[t], &without.top[t]);
        assert_int_equal(with.have_base[PS_BASE_EVEN], without.have_base[PS_BASE_EVEN]);
        if (with.have_base[PS_BASE_EVEN]) same_cand(what, &with.base[PS_BASE_EVEN], &without.base[PS_BASE_EVEN]);
        /* (no binding message compared: it says why nothing fits, and every case has plans; beside them the closest
         * miss among the plans tried depends on what the threads' floors pruned first) */
        ps_search_result_free(&with);
        ps_search_result_free(&without);
        ps_model_free(&m);
        ps_cluster_free(&c);
    }
}

static void test_rule_twin(void **state)
{
    (void)state;
    check_rule(PS_SEARCH_RULE_TWIN, "twin placements");
}

static void test_rule_runs(void **state)
{
    (void)state;
    check_rule(PS_SEARCH_RULE_RUNS, "stage-table runs");
}

/* Chunked plans (interleaved, V kinds: every case above searches them) with the fill bound and without, and a
 * sweep of batches (the floors then come from other batches), with a framework's chunked kinds. */
static void test_rule_fill(void **state)
{
    (void)state;
    check_rule(PS_SEARCH_RULE_FILL, "chunked fill");
}

/* Layer tables of another expert grid: only the MoE rows costed again (the MoE scenarios above). */
static void test_rule_grid(void **state)
{
    (void)state;
    check_rule(PS_SEARCH_RULE_GRID, "expert grid rows");
}

/* The bounds without the strategies a layer does not fit under alone, and the refined plans' bound. */
static void test_rule_fit(void **state)
{
    (void)state;
    check_rule(PS_SEARCH_RULE_FIT, "layer fits alone");
}

static void test_rule_refined(void **state)
{
    (void)state;
    check_rule(PS_SEARCH_RULE_REFINED, "refined plans' bound");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_fit),
        cmocka_unit_test(test_rule_refined),
        cmocka_unit_test(test_rule_grid),
        cmocka_unit_test(test_rule_twin),
        cmocka_unit_test(test_rule_runs),
        cmocka_unit_test(test_rule_fill),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

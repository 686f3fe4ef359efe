/* Shared by the brute-force search tests (test_search_brute.c, test_search_framework.c): one enumerated plan costed as
 * the brute force counts it. Include after <cmocka.h>, "ps_schedules.h" and "ps_search.h". */
#ifndef PS_TEST_BRUTE_COST_H
#define PS_TEST_BRUTE_COST_H

/* Cost plan p with `global_mb` samples per micro-batch: its micro-batch per replica follows the first layer's dp
 * (ps_plan_micro_batches counts with it), so that the plan has the micro-batch count being enumerated whichever
 * strategy its first stage got. false: p breaks a rule of plans (divisibility, the schedule's micro-batch count),
 * so it is no plan; otherwise *fits and *samples_per_s are its prediction's. Any other failure fails the test. */
static inline bool brute_cost(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, ps_sched *ws,
                              int64_t global_mb, ps_plan *p, bool *fits, double *samples_per_s)
{
    p->mbs = global_mb / p->layer[0].dp;
    ps_prediction pr;
    ps_status st = ps_cost_plan_ws(cp, m, c, p, ws, &pr);
    if (st == PS_ERR_INPUT) {
        ps_error_clear();
        return false;
    }
    if (st != PS_OK) fail_msg("ps_cost_plan: %s", ps_error_message());
    *fits = pr.fits;
    *samples_per_s = pr.samples_per_s;
    ps_prediction_free(&pr);
    return true;
}

#endif

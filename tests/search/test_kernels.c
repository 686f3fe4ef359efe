/* The search's dynamic programs against brute-force enumeration on random small instances: the same optimum (==,
 * not "close"), and a returned solution that attains it and respects the constraints. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels_internal.h"

/* Deterministic generator so failures reproduce. */
static uint64_t g_rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static double urand(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

/* Cost of one assignment, summed in the DP's order: ((c_0 + r_1) + c_1) + ... */
static double ldp_eval(const ps_ldp_problem *p, const int *ch, int64_t *mem)
{
    double t = 0;
    *mem = 0;
    for (int l = 0; l < p->n_layers; l++) {
        int s = ch[l];
        if (l > 0 && p->reshard) t = t + p->reshard[p->layout[ch[l - 1]] * p->n_layouts + p->layout[s]];
        t = t + p->time[l * p->n_strat + s];
        *mem += p->mem[l * p->n_strat + s];
    }
    return t;
}

static void test_layer_dp_brute(void **state)
{
    (void)state;
    ps_ldp_ws *ws;
    assert_int_equal(ps_ldp_create(&ws), PS_OK);
    for (int trial = 0; trial < 400; trial++) {
        int L = 1 + (int)(rnd() % 7), S = 1 + (int)(rnd() % 4), Lay = 1 + (int)(rnd() % 2);
        double time[8 * 4], resh[4];
        int64_t mem[8 * 4];
        int layout[4];
        for (int i = 0; i < L * S; i++) {
            /* a few forbidden strategies and small integers, so ties happen */
            time[i] = rnd() % 9 == 0 ? INFINITY : (double)(1 + rnd() % 5) + 0.25 * (double)(rnd() % 3);
            mem[i] = (int64_t)(rnd() % 6);
        }
        for (int s = 0; s < S; s++) layout[s] = (int)(rnd() % (uint64_t)Lay);
        for (int a = 0; a < Lay; a++)
            for (int b = 0; b < Lay; b++) resh[a * Lay + b] = a == b ? 0 : 0.5 * (double)(rnd() % 4);
        ps_ldp_problem p = {L, S, time, mem, Lay, layout, trial % 3 ? resh : NULL};
        int64_t budget = (int64_t)(rnd() % (uint64_t)(6 * L + 1));
        double best;
        int choice[8];
        assert_int_equal(ps_ldp_solve(ws, &p, budget, &best, choice), PS_OK);
        /* brute force over S^L */
        double bf = INFINITY;
        int ch[8] = {0};
        int64_t total = 1;
        for (int l = 0; l < L; l++) total *= S;
        for (int64_t code = 0; code < total; code++) {
            int64_t c = code;
            for (int l = 0; l < L; l++) {
                ch[l] = (int)(c % S);
                c /= S;
            }
            int64_t m;
            double t = ldp_eval(&p, ch, &m);
            if (m <= budget && t < bf) bf = t;
        }
        if (!(best == bf || (isinf(best) && isinf(bf))))
            fail_msg("trial %d: DP %.17g, brute force %.17g (L %d, S %d, budget %lld)", trial, best, bf, L, S,
                     (long long)budget);
        if (isfinite(best)) {
            int64_t m;
            assert_true(ldp_eval(&p, choice, &m) == best);
            assert_true(m <= budget);
        }
    }
    ps_ldp_destroy(ws);
}

/* The layer DP's memo: a workspace that has seen many problems answers every one of them, asked again in another
 * order, from copies of their inputs or with one input changed, exactly as a fresh workspace does; repeats hit. */
static void test_layer_dp_memo(void **state)
{
    (void)state;
    enum { N = 150, L = 6, S = 5, Lay = 3 };
    static double time[N][L * S], resh[N][Lay * Lay];
    static int64_t mem[N][L * S], budget[N];
    static int layout[N][S];
    for (int n = 0; n < N; n++) {
        for (int i = 0; i < L * S; i++) {
            time[n][i] = (double)(1 + rnd() % 4) + 0.5 * (double)(rnd() % 2);
            mem[n][i] = (int64_t)(rnd() % 5);
        }
        for (int s = 0; s < S; s++) layout[n][s] = (int)(rnd() % Lay);
        for (int i = 0; i < Lay * Lay; i++) resh[n][i] = i % (Lay + 1) == 0 ? 0 : 0.25 * (double)(rnd() % 3);
        budget[n] = 4 + (int64_t)(rnd() % 12);
    }
    ps_ldp_ws *ws;
    assert_int_equal(ps_ldp_create(&ws), PS_OK);
    int64_t calls = 0, hits = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int k = 0; k < N; k++) {
            int n = pass == 1 ? N - 1 - k : k;
            double t2[L * S], r2[Lay * Lay];
            int64_t m2[L * S];
            int lay2[S];
            memcpy(t2, time[n], sizeof t2);
            memcpy(m2, mem[n], sizeof m2);
            memcpy(r2, resh[n], sizeof r2);
            memcpy(lay2, layout[n], sizeof lay2);
            if (pass == 2 && k % 2) t2[(k * 7) % (L * S)] += 0.125; /* a changed input must not hit */
            if (pass == 2 && k % 3 == 0) m2[(k * 5) % (L * S)] += 1;
            ps_ldp_problem p = {L, S, t2, m2, Lay, lay2, r2};
            double best, fresh_best;
            int choice[L], fresh_choice[L];
            assert_int_equal(ps_ldp_solve(ws, &p, budget[n], &best, choice), PS_OK);
            ps_ldp_ws *fresh;
            assert_int_equal(ps_ldp_create(&fresh), PS_OK);
            assert_int_equal(ps_ldp_solve(fresh, &p, budget[n], &fresh_best, fresh_choice), PS_OK);
            ps_ldp_destroy(fresh);
            assert_true(best == fresh_best || (isinf(best) && isinf(fresh_best)));
            if (isfinite(best)) assert_memory_equal(choice, fresh_choice, sizeof choice);
            ps_ldp_stats(ws, &calls, &hits);
        }
    /* The first pass solves everything. The reversed second pass finds what the 64 slots still hold of the last
     * problems, and the third the unchanged ones the second left there: 71 with this generator. */
    assert_int_equal(calls, 3 * N);
    print_message("memo: %lld calls, %lld hits\n", (long long)calls, (long long)hits);
    assert_true(hits >= 20 && hits <= 2 * N);
    ps_ldp_destroy(ws);
}

static double pdp_eval(const ps_pdp_problem *p, const int64_t *cuts)
{
    size_t N = (size_t)p->n_layers + 1;
    double mx = 0, sum = 0;
    for (int k = 0; k < p->n_stages; k++) {
        double c = p->cost[((size_t)k * N + (size_t)cuts[k]) * N + (size_t)cuts[k + 1]];
        mx = c > mx ? c : mx;
        sum = k == 0 ? c : sum + c;
    }
    return p->weight_max * mx + sum;
}

/* Brute force for the partition DPs: every cut vector in lexicographic order, keeping the first one with the smallest
 * value of `eval` (so the best value, and the first optimum for the tie rule). */
typedef double (*cuts_eval)(const ps_pdp_problem *p, const int64_t *cuts);
typedef struct {
    cuts_eval eval;
    double best;
    int64_t cuts[9];
} brute;

static void enum_cuts(const ps_pdp_problem *p, int64_t *cuts, int k, brute *b)
{
    if (k == p->n_stages) {
        cuts[k] = p->n_layers;
        double v = b->eval(p, cuts);
        if (v < b->best) { /* strict: the first optimum in lexicographic order stays */
            b->best = v;
            memcpy(b->cuts, cuts, sizeof b->cuts);
        }
        return;
    }
    for (int64_t c = cuts[k - 1] + 1; c <= p->n_layers - (p->n_stages - k); c++) {
        cuts[k] = c;
        enum_cuts(p, cuts, k + 1, b);
    }
}

static brute brute_force(const ps_pdp_problem *p, cuts_eval eval)
{
    brute b = {eval, INFINITY, {0}};
    int64_t cuts[9] = {0};
    if (p->n_stages <= p->n_layers) enum_cuts(p, cuts, 1, &b);
    return b;
}

/* A random stage-cost table for K stages over L layers: some ranges forbidden (INFINITY), the rest growing with the
 * range; `integers` keeps values small integers, so ties are frequent. */
static double *random_table(int K, int L, bool integers)
{
    size_t N = (size_t)L + 1;
    double *cost = calloc((size_t)K * N * N, sizeof *cost);
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < N; j++)
                cost[((size_t)k * N + i) * N + j] =
                    j <= i || rnd() % 7 == 0 ? INFINITY
                    : integers              ? (double)(j - i) + (double)(rnd() % 3)
                                            : (double)(j - i) * (0.5 + urand()) + (double)(rnd() % 3);
    return cost;
}

static void check_cuts(const int64_t *cuts, int K, int L)
{
    assert_int_equal(cuts[0], 0);
    assert_int_equal(cuts[K], L);
    for (int k = 0; k < K; k++) assert_true(cuts[k + 1] > cuts[k]);
}

static void test_partition_dp_brute(void **state)
{
    (void)state;
    ps_pdp_ws *ws;
    assert_int_equal(ps_pdp_create(&ws), PS_OK);
    for (int trial = 0; trial < 400; trial++) {
        int L = 1 + (int)(rnd() % 8), K = 1 + (int)(rnd() % 4);
        double *cost = random_table(K, L, false);
        ps_pdp_problem p = {K, L, cost, (double)(rnd() % 16), INFINITY};
        double best;
        int64_t cuts[9];
        assert_int_equal(ps_pdp_solve(ws, &p, &best, cuts), PS_OK);
        brute b = brute_force(&p, pdp_eval);
        if (!(best == b.best || (isinf(best) && isinf(b.best))))
            fail_msg("trial %d: DP %.17g, brute force %.17g (K %d, L %d)", trial, best, b.best, K, L);
        if (isfinite(best)) {
            check_cuts(cuts, K, L);
            assert_true(pdp_eval(&p, cuts) == best);
            assert_true(ps_pdp_objective(&p, cuts) == best);
            /* A known objective at or above the optimum (tight included) prunes without changing the answer,
             * ties included. */
            double known[2] = {best, 2 * best + 1};
            for (int u = 0; u < 2; u++) {
                ps_pdp_problem q = p;
                q.upper = known[u];
                double best2;
                int64_t cuts2[9];
                assert_int_equal(ps_pdp_solve(ws, &q, &best2, cuts2), PS_OK);
                assert_true(best2 == best);
                assert_memory_equal(cuts2, cuts, ((size_t)K + 1) * sizeof *cuts);
            }
        }
        free(cost);
    }
    ps_pdp_destroy(ws);
}

static double minmax_eval(const ps_pdp_problem *p, const int64_t *cuts)
{
    size_t N = (size_t)p->n_layers + 1;
    double m = -INFINITY;
    for (int k = 0; k < p->n_stages; k++)
        m = fmax(m, p->cost[((size_t)k * N + (size_t)cuts[k]) * N + (size_t)cuts[k + 1]]);
    return m;
}

static void test_minmax_dp_brute(void **state)
{
    (void)state;
    ps_pdp_ws *ws;
    assert_int_equal(ps_pdp_create(&ws), PS_OK);
    for (int trial = 0; trial < 400; trial++) {
        int L = 1 + (int)(rnd() % 8), K = 1 + (int)(rnd() % 5);
        double *cost = random_table(K, L, true); /* many ties: the tie rule is exercised */
        ps_pdp_problem p = {K, L, cost, 0, INFINITY};
        double best;
        int64_t cuts[9];
        assert_int_equal(ps_pdp_minmax(ws, &p, &best, cuts), PS_OK);
        brute b = brute_force(&p, minmax_eval);
        if (!(best == b.best || (isinf(best) && isinf(b.best))))
            fail_msg("trial %d: min-max DP %.17g, brute force %.17g (K %d, L %d)", trial, best, b.best, K, L);
        if (isfinite(best))
            for (int k = 0; k <= K; k++)
                if (cuts[k] != b.cuts[k])
                    fail_msg("trial %d: cut %d is %lld, brute force's first optimum has %lld", trial, k,
                             (long long)cuts[k], (long long)b.cuts[k]);
        free(cost);
    }
    ps_pdp_destroy(ws);
}

/* The walk: from a feasible start it ends feasible, never raises the slowest stage, and no single boundary move
 * out of the slowest stage improves the end (the stopping rule the paper states). */
static void test_balance_walk(void **state)
{
    (void)state;
    for (int trial = 0; trial < 400; trial++) {
        int L = 2 + (int)(rnd() % 7), K = 1 + (int)(rnd() % 4);
        if (K > L) K = L;
        size_t N = (size_t)L + 1;
        double *cost = calloc((size_t)K * N * N, sizeof *cost);
        for (int k = 0; k < K; k++)
            for (size_t i = 0; i < N; i++)
                for (size_t j = 0; j < N; j++)
                    cost[((size_t)k * N + i) * N + j] =
                        j <= i || (j - i > 2 && rnd() % 5 == 0) ? INFINITY : (double)(j - i) * (0.5 + urand());
        ps_pdp_problem p = {K, L, cost, 0, INFINITY};
        /* start: an even-ish feasible partition, or skip the trial */
        int64_t cuts[9];
        for (int k = 0; k <= K; k++) cuts[k] = (int64_t)k * L / K;
        double before = minmax_eval(&p, cuts);
        if (!isfinite(before)) {
            free(cost);
            continue;
        }
        ps_pdp_balance_walk(&p, cuts);
        double after = minmax_eval(&p, cuts);
        assert_true(isfinite(after));
        assert_true(after <= before);
        check_cuts(cuts, K, L);
        /* local optimality at the slowest stage */
        int ks = 0;
        for (int k = 1; k < K; k++)
            if (cost[((size_t)k * N + (size_t)cuts[k]) * N + (size_t)cuts[k + 1]] >
                cost[((size_t)ks * N + (size_t)cuts[ks]) * N + (size_t)cuts[ks + 1]])
                ks = k;
        for (int dir = -1; dir <= 1; dir += 2) {
            int64_t c2[9];
            memcpy(c2, cuts, sizeof c2);
            if (dir < 0 && (ks == 0 || cuts[ks + 1] - cuts[ks] < 2)) continue;
            if (dir > 0 && (ks == K - 1 || cuts[ks + 1] - cuts[ks] < 2)) continue;
            if (dir < 0) c2[ks]++;
            else c2[ks + 1]--;
            int lo = dir < 0 ? ks - 1 : ks;
            double pair = fmax(cost[((size_t)lo * N + (size_t)c2[lo]) * N + (size_t)c2[lo + 1]],
                               cost[((size_t)(lo + 1) * N + (size_t)c2[lo + 1]) * N + (size_t)c2[lo + 2]]);
            assert_false(pair < after);
        }
        free(cost);
    }
}

/* The pipeline objective, written here from its definition: stage d waits for the stages before it once, then runs
 * every micro-batch (weight_max + 1 of them); the largest such finish over d. */
static double pipeline_eval(const ps_pdp_problem *p, const int64_t *cuts)
{
    size_t N = (size_t)p->n_layers + 1;
    double worst = 0;
    for (int d = 0; d < p->n_stages; d++) {
        double before = 0;
        for (int k = 0; k < d; k++) before += p->cost[((size_t)k * N + (size_t)cuts[k]) * N + (size_t)cuts[k + 1]];
        double c = p->cost[((size_t)d * N + (size_t)cuts[d]) * N + (size_t)cuts[d + 1]];
        if (!isfinite(c)) return INFINITY;
        worst = fmax(worst, before + (p->weight_max + 1) * c);
    }
    return worst;
}

/* The pipeline walk: from the partition DP's optimum it ends feasible, never above where it started (and below when
 * it says it moved), and no move of one boundary by one layer improves the end; the brute force's optimum is never
 * above it. A hand case: 2 stages, 2 micro-batches, stage times growing by 1 per layer except a dear last layer:
 * the DP's balanced split is left for a heavier first stage. */
static void test_pipeline_walk(void **state)
{
    (void)state;
    ps_pdp_ws *ws;
    assert_int_equal(ps_pdp_create(&ws), PS_OK);
    int moved = 0;
    for (int trial = 0; trial < 400; trial++) {
        int L = 2 + (int)(rnd() % 7), K = 2 + (int)(rnd() % 3);
        double *cost = random_table(K, L, false);
        ps_pdp_problem p = {K, L, cost, (double)(rnd() % 4), INFINITY};
        double best;
        int64_t cuts[9];
        assert_int_equal(ps_pdp_solve(ws, &p, &best, cuts), PS_OK);
        if (!isfinite(best)) {
            free(cost);
            continue;
        }
        double before = pipeline_eval(&p, cuts);
        bool m = ps_pdp_pipeline_walk(&p, cuts);
        double after = pipeline_eval(&p, cuts);
        check_cuts(cuts, K, L);
        assert_true(ps_pdp_pipeline_objective(&p, cuts) == after);
        assert_true(m ? after < before : after == before);
        moved += m;
        for (int b = 1; b < K; b++)
            for (int d = -1; d <= 1; d += 2) {
                int64_t c2[9];
                memcpy(c2, cuts, sizeof c2);
                c2[b] += d;
                if (c2[b] <= c2[b - 1] || c2[b] >= c2[b + 1]) continue;
                assert_false(pipeline_eval(&p, c2) < after);
            }
        assert_false(brute_force(&p, pipeline_eval).best > after);
        free(cost);
    }
    assert_true(moved > 0);
    /* by hand: layers cost 1, 1, 1, 3 (a stage's time is the sum), 2 stages, 2 micro-batches. The DP minimises
     * max + sum = max + 6: cuts {0, 3, 4} (3 | 3). The pipeline: {0, 3, 4}: max(2 x 3, 3 + 2 x 3) = 9; {0, 2, 4}:
     * max(4, 2 + 8) = 10; {0, 1, 4}: max(2, 1 + 10) = 11: the DP's split stays. With costs 3, 1, 1, 1 the DP's
     * {0, 1, 4} (3 | 3) gives max(6, 3 + 6) = 9, {0, 2, 4}: max(8, 4 + 4) = 8: the walk moves one layer to the
     * first stage. */
    static const double lay[2][4] = {{1, 1, 1, 3}, {3, 1, 1, 1}};
    static const int64_t want[2][3] = {{0, 3, 4}, {0, 2, 4}};
    for (int h = 0; h < 2; h++) {
        double cost[2 * 5 * 5];
        for (int k = 0; k < 2; k++)
            for (int i = 0; i <= 4; i++)
                for (int j = 0; j <= 4; j++) {
                    double t = 0;
                    for (int l = i; l < j; l++) t += lay[h][l];
                    cost[(k * 5 + i) * 5 + j] = j > i ? t : INFINITY;
                }
        ps_pdp_problem p = {2, 4, cost, 1, INFINITY};
        double best;
        int64_t cuts[3];
        assert_int_equal(ps_pdp_solve(ws, &p, &best, cuts), PS_OK);
        assert_true(best == 9);
        ps_pdp_pipeline_walk(&p, cuts);
        assert_memory_equal(cuts, want[h], sizeof cuts);
        assert_true(ps_pdp_pipeline_objective(&p, cuts) == (h ? 8 : 9));
    }
    ps_pdp_destroy(ws);
}

static void test_bad_input(void **state)
{
    (void)state;
    ps_ldp_ws *ws;
    assert_int_equal(ps_ldp_create(&ws), PS_OK);
    ps_ldp_problem p = {0, 1, NULL, NULL, 1, NULL, NULL};
    double best;
    int ch[1];
    assert_int_equal(ps_ldp_solve(ws, &p, 10, &best, ch), PS_ERR_INPUT);
    double t[1] = {1};
    int64_t m[1] = {1};
    int lay[1] = {0};
    ps_ldp_problem q = {1, 1, t, m, 1, lay, NULL};
    assert_int_equal(ps_ldp_solve(ws, &q, (int64_t)1 << 30, &best, ch), PS_ERR_INPUT);
    assert_int_equal(ps_ldp_solve(ws, &q, 0, &best, ch), PS_OK); /* does not fit: infinite, not an error */
    assert_true(isinf(best));
    assert_int_equal(ps_ldp_solve(ws, &q, 1, &best, ch), PS_OK);
    assert_true(best == 1);
    ps_ldp_destroy(ws);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layer_dp_brute),
        cmocka_unit_test(test_layer_dp_memo),
        cmocka_unit_test(test_partition_dp_brute),
        cmocka_unit_test(test_minmax_dp_brute),
        cmocka_unit_test(test_balance_walk),
        cmocka_unit_test(test_pipeline_walk),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

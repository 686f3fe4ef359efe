/* Timing of schedules/: build (generate + verify) and simulate for a few (kind, d, n, v), printing one JSON
 * document. The simulate figure is what a search loop pays per candidate cost vector once the order is built. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ps_schedules.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define REPS 51

int main(void)
{
    const struct { const char *kind; int d, n, v; } cases[] = {
        {"1f1b", 64, 1024, 1}, {"1f1b", 8, 64, 1},          {"gpipe", 64, 1024, 1},
        {"interleaved", 64, 1024, 4}, {"zb-h1", 64, 1024, 1}, {"zb-h1", 16, 256, 1},
    };
    ps_sched *s;
    if (ps_sched_create(&s) != PS_OK) return 3;
    printf("{\"benchmark\": \"schedules\", \"reps\": %d, \"clock\": \"CLOCK_MONOTONIC\", \"cases\": [", REPS);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int S = cases[c].d * cases[c].v;
        double *f = malloc(S * sizeof(double)), *b = malloc(S * sizeof(double)), *w = malloc(S * sizeof(double));
        double *p = malloc(S * sizeof(double));
        if (!f || !b || !w || !p) return 3;
        for (int i = 0; i < S; i++) f[i] = 1.0 + 0.01 * (i % 7), b[i] = 1.1, w[i] = 0.9, p[i] = 0.02;
        ps_sched_costs costs = {.f = f, .b = b, .w = w, .p2p = p};
        double tb[REPS], ts[REPS];
        ps_sched_result r = {0};
        for (int k = 0; k < REPS; k++) {
            double t0 = now_s();
            if (ps_sched_build(s, cases[c].kind, cases[c].d, cases[c].n, cases[c].v) != PS_OK) {
                fprintf(stderr, "# %s\n", ps_error_message());
                return 2;
            }
            double t1 = now_s();
            if (ps_sched_simulate(s, &costs, &r) != PS_OK) {
                fprintf(stderr, "# %s\n", ps_error_message());
                return 2;
            }
            double t2 = now_s();
            tb[k] = t1 - t0;
            ts[k] = t2 - t1;
        }
        qsort(tb, REPS, sizeof(double), cmp);
        qsort(ts, REPS, sizeof(double), cmp);
        printf("%s\n  {\"kind\": \"%s\", \"d\": %d, \"n\": %d, \"v\": %d, \"passes\": %lld, "
               "\"simulate_us\": {\"median\": %.2f, \"min\": %.2f}, \"build_verify_us\": {\"median\": %.2f, "
               "\"min\": %.2f}, \"makespan\": %.4f, \"bubble_frac\": %.6f}",
               c ? "," : "", cases[c].kind, cases[c].d, cases[c].n, cases[c].v,
               (long long)ps_sched_total_passes(s), 1e6 * ts[REPS / 2], 1e6 * ts[0], 1e6 * tb[REPS / 2],
               1e6 * tb[0], r.makespan, r.bubble_frac);
        free(f), free(b), free(w), free(p);
    }
    printf("\n]}\n");
    ps_sched_destroy(s);
    return 0;
}

/* Benchmark and paper check of schedules/, printing one JSON document:
 *  - speed: build (generate + verify) and simulate per (kind, d, n, v); "simulate_us" re-simulates one built order
 *    (what a search loop pays per candidate cost vector), "cold_simulate_us" simulates right after each build;
 *  - table1: peak activation relative to 1F1B and bubble fraction of the V-shape kinds for d in {4, 8, 16, 32},
 *    n = 4d, F = B = W = 1 per V stage (a 1F1B stage is two V stages: F = B = W = 2, twice the activation), next
 *    to Table 1 of "Pipeline Parallelism with Controllable Memory" (Qi et al. 2024);
 *  - table4: bubble rates from Table 5's profiled F / B / W times (1F1B stage; a V chunk takes half) next to the
 *    bubble rates published in Table 4 (the paper also trims a layer off the first and last stage; we do not).
 * Lines that are not data start with '#' (on stderr). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#define MAXST 128

static int fail(void)
{
    fprintf(stderr, "# %s\n", ps_error_message());
    return 2;
}

/* Build `kind` and simulate it with F, B, W per 1F1B-sized stage (a V chunk gets half, and half the activation)
 * and a p2p latency between devices. */
static int run_uniform_p2p(ps_sched *s, const char *kind, int d, int n, double f, double b, double w, double p2p,
                           ps_sched_result *r, double *peak)
{
    if (ps_sched_build(s, kind, d, n, 0) != PS_OK) return fail();
    static double cf[MAXST], cb[MAXST], cw[MAXST], ca[MAXST], cp[MAXST];
    int v = ps_sched_chunks(s), S = ps_sched_stages(s);
    if (S > MAXST) { /* the simulation reads S costs of each kind */
        fprintf(stderr, "# %s with d = %d: %d stages, more than the %d this benchmark holds\n", kind, d, S, MAXST);
        return 2;
    }
    for (int i = 0; i < S; i++) cf[i] = f / v, cb[i] = b / v, cw[i] = w / v, ca[i] = 2.0 / v, cp[i] = p2p;
    ps_sched_costs c = {.f = cf, .b = cb, .w = cw, .act = ca, .p2p = p2p > 0 ? cp : NULL};
    if (ps_sched_simulate(s, &c, r) != PS_OK) return fail();
    *peak = 0;
    for (int i = 0; i < d; i++) *peak = r->peak_act[i] > *peak ? r->peak_act[i] : *peak;
    return 0;
}

static int run_uniform(ps_sched *s, const char *kind, int d, int n, double f, double b, double w, ps_sched_result *r,
                       double *peak)
{
    return run_uniform_p2p(s, kind, d, n, f, b, w, 0, r, peak);
}

static int speed(ps_sched *s)
{
    const struct { const char *kind; int d, n, v; } cases[] = {
        {"1f1b", 64, 1024, 1},  {"1f1b", 8, 64, 1},  {"gpipe", 64, 1024, 1}, {"interleaved", 64, 1024, 4},
        {"zb-h1", 64, 1024, 1}, {"zb-h2", 64, 1024, 1}, {"v-min", 64, 1024, 2}, {"v-half", 64, 1024, 2},
        {"v-zb", 64, 1024, 2},  {"zb-h1", 16, 256, 1},
    };
    printf("\"speed\": [");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int S = cases[c].d * cases[c].v;
        double *f = malloc(S * sizeof(double)), *b = malloc(S * sizeof(double)), *w = malloc(S * sizeof(double));
        double *p = malloc(S * sizeof(double));
        if (!f || !b || !w || !p) return 3;
        for (int i = 0; i < S; i++) f[i] = 1.0 + 0.01 * (i % 7), b[i] = 1.1, w[i] = 0.9, p[i] = 0.02;
        ps_sched_costs costs = {.f = f, .b = b, .w = w, .p2p = p};
        double tb[REPS], tc[REPS], ts[REPS];
        ps_sched_result r = {0};
        for (int k = 0; k < REPS; k++) {
            double t0 = now_s();
            if (ps_sched_build(s, cases[c].kind, cases[c].d, cases[c].n, cases[c].v) != PS_OK) return fail();
            double t1 = now_s();
            if (ps_sched_simulate(s, &costs, &r) != PS_OK) return fail();
            double t2 = now_s();
            tb[k] = t1 - t0;
            tc[k] = t2 - t1;
        }
        for (int k = 0; k < REPS; k++) {
            f[k % S] += 1e-6; /* a new candidate cost vector each time, as in a search */
            double t0 = now_s();
            if (ps_sched_simulate(s, &costs, &r) != PS_OK) return fail();
            ts[k] = now_s() - t0;
        }
        qsort(tb, REPS, sizeof(double), cmp);
        qsort(tc, REPS, sizeof(double), cmp);
        qsort(ts, REPS, sizeof(double), cmp);
        printf("%s\n  {\"kind\": \"%s\", \"d\": %d, \"n\": %d, \"v\": %d, \"passes\": %lld, "
               "\"simulate_us\": {\"median\": %.2f, \"min\": %.2f}, \"cold_simulate_us\": {\"median\": %.2f, "
               "\"min\": %.2f}, \"build_verify_us\": {\"median\": %.2f, \"min\": %.2f}, \"makespan\": %.4f, "
               "\"bubble_frac\": %.6f}",
               c ? "," : "", cases[c].kind, cases[c].d, cases[c].n, cases[c].v,
               (long long)ps_sched_total_passes(s), 1e6 * ts[REPS / 2], 1e6 * ts[0], 1e6 * tc[REPS / 2],
               1e6 * tc[0], 1e6 * tb[REPS / 2], 1e6 * tb[0], r.makespan, r.bubble_frac);
        free(f), free(b), free(w), free(p);
    }
    printf("\n]");
    return 0;
}

/* Table 1: peak memory M, M/3, M/2, M and bubbles 6d, 4d, 3d, 0 (F = B = W = 1 per V stage) for 1F1B, V-Min,
 * V-Half, V-ZB; the bubble ratio to 1F1B is what "about 2/3 / 1/2 of 1F1B's bubbles" (Sec. 3.2) refers to. */
static int table1(ps_sched *s)
{
    const struct { const char *kind; double peak, bubble; } k[] = {
        {"1f1b", 1.0, 1.0}, {"v-min", 1.0 / 3, 2.0 / 3}, {"v-half", 0.5, 0.5}, {"v-zb", 1.0, 0.0},
        {"zb-h1", -1, -1},  {"zb-h2", -1, -1},
    };
    const int ds[] = {4, 8, 16, 32};
    printf(",\n\"table1\": [");
    for (int i = 0; i < 4; i++) {
        int d = ds[i], n = 4 * d;
        ps_sched_result r;
        double p1, b1, idle1;
        if (run_uniform(s, "1f1b", d, n, 2, 2, 2, &r, &p1)) return 2;
        b1 = r.bubble_frac;
        idle1 = r.bubble_frac * r.makespan; /* per device on average */
        for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
            double pk;
            if (run_uniform(s, k[j].kind, d, n, 2, 2, 2, &r, &pk)) return 2;
            printf("%s\n  {\"kind\": \"%s\", \"d\": %d, \"n\": %d, \"peak_vs_1f1b\": %.4f, \"bubble_frac\": %.4f, "
                   "\"bubble_vs_1f1b\": %.4f, \"idle_per_device\": %.2f, \"paper_peak_vs_1f1b\": ",
                   i || j ? "," : "", k[j].kind, d, n, pk / p1, r.bubble_frac,
                   b1 > 0 ? r.bubble_frac * r.makespan / idle1 : 0.0, r.bubble_frac * r.makespan);
            if (k[j].peak >= 0)
                printf("%.4f, \"paper_bubble_vs_1f1b\": %.4f}", k[j].peak, k[j].bubble);
            else
                printf("null, \"paper_bubble_vs_1f1b\": null}");
        }
    }
    printf("\n]");
    return 0;
}

/* Table 4 bubble rates (%) from Table 5's F / B / W (ms) at Table 4's micro-batch size. The paper's rates are "the
 * theoretical bubble rate reported by scheduler" (App. D.1), and that scheduler charges a p2p communication time:
 * 1F1B's published rates sit above (d-1)/(n+d-1) by an amount that grows with n, which only a latency on the
 * F/B hand-over explains (the layer trimmed off the first and last stage is there to make the stages equal). So
 * each row is simulated twice: without latency ("bubble_pct") and with one p2p latency per model fitted to the
 * paper's 1F1B row ("bubble_pct_p2p", "p2p_ms"; bisection on the row's sum, which grows with the latency). */
static int table4(ps_sched *s)
{
    const struct { const char *model; int d; double f, b, w; int n0; } m[] = {
        {"9.6B", 16, 12.96, 13.22, 9.76, 16}, {"21B", 24, 9.30, 9.47, 7.19, 24}, {"38.5B", 32, 6.72, 6.89, 5.06, 32}};
    const char *kinds[] = {"v-zb", "v-half", "1f1b", "v-min"};
    const double paper[3][4][5] = {
        {{18.7, 8.88, 4.57, 2.32, 1.16}, {40.5, 24.2, 13.8, 7.41, 3.84}, {50.1, 34.3, 21.7, 13.5, 8.76},
         {48.4, 36.5, 28.0, 23.1, 20.3}},
        {{18.9, 8.51, 4.39, 2.19, 1.09}, {41.3, 24.6, 14.0, 7.5, 3.89}, {50.5, 34.6, 21.9, 13.5, 8.67},
         {47.8, 35.8, 27.4, 21.9, 19.1}},
        {{18.7, 8.61, 4.3, 2.24, 1.14}, {42.0, 24.9, 14.3, 7.6, 3.97}, {50.7, 34.6, 21.8, 13.4, 8.44},
         {48.6, 36.5, 27.8, 22.5, 19.5}},
    };
    printf(",\n\"table4\": [");
    for (int i = 0; i < 3; i++) {
        double want = 0, lo = 0, hi = m[i].f; /* 1F1B's row (k = 2) */
        for (int j = 0; j < 5; j++) want += paper[i][2][j];
        for (int it = 0; it < 40; it++) {
            double mid = 0.5 * (lo + hi), got = 0, pk;
            ps_sched_result r;
            for (int j = 0; j < 5; j++) {
                if (run_uniform_p2p(s, "1f1b", m[i].d, m[i].n0 << j, m[i].f, m[i].b, m[i].w, mid, &r, &pk)) return 2;
                got += 100 * r.bubble_frac;
            }
            if (got < want) lo = mid; else hi = mid;
        }
        const double p2p = 0.5 * (lo + hi);
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 5; j++) {
                int n = m[i].n0 << j;
                ps_sched_result r;
                double pk, b0;
                if (run_uniform(s, kinds[k], m[i].d, n, m[i].f, m[i].b, m[i].w, &r, &pk)) return 2;
                b0 = r.bubble_frac;
                if (run_uniform_p2p(s, kinds[k], m[i].d, n, m[i].f, m[i].b, m[i].w, p2p, &r, &pk)) return 2;
                printf("%s\n  {\"model\": \"%s\", \"kind\": \"%s\", \"d\": %d, \"n\": %d, \"bubble_pct\": %.2f, "
                       "\"bubble_pct_p2p\": %.2f, \"p2p_ms\": %.3f, \"paper_bubble_pct\": %.2f}",
                       i || k || j ? "," : "", m[i].model, kinds[k], m[i].d, n, 100 * b0, 100 * r.bubble_frac, p2p,
                       paper[i][k][j]);
            }
    }
    printf("\n]");
    return 0;
}

int main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--paper") == 0; /* the paper tables only */
    ps_sched *s;
    if (ps_sched_create(&s) != PS_OK) return 3;
    printf("{\"benchmark\": \"schedules\", \"reps\": %d, \"clock\": \"CLOCK_MONOTONIC\",\n", REPS);
    int rc = quick ? (printf("\"speed\": []"), 0) : speed(s);
    if (!rc) rc = table1(s);
    if (!rc) rc = table4(s);
    printf("\n}\n");
    ps_sched_destroy(s);
    return rc;
}

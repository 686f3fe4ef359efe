/* Speed of the search (issue: "Speed, measured in a benchmark"), printing one JSON document: for each case and
 * OpenMP thread count, the wall time of ps_search_run on one rank against the target, the plans costed, the
 * candidates pruned by bounds, the nominal dynamic-programming cells (the sizes of the tables the DPs span, not
 * counted cell by cell) and their rate, whether 1 and 2 threads found the same best plan, plus this machine's memory
 * bandwidth measured in the same run (a STREAM-like triad), to tell a slow machine from a slow search.
 *   bench_search [--quick] [--no-overlap] [--case X]   --quick: case (a) only (CI-sized); --no-overlap: without
 *                                           Oases strategies; --case X: that case only
 * Cases (bench/search_cases.h, shared with bench/scaling, each with its command line there): (a) gpt3-65b on
 * dgx-a100-80g:4 with a batch sweep 64..512 step 64; (b) gpt3-175b on dgx-a100-80g:128 at gbs 1536; (c) llama3-405b
 * on dgx-h100:512 at gbs 2048; (d) mixtral-8x22b on dgx-h100:32 at seq 4096, gbs 512; (e) deepseek-v3 on
 * hgx-h800:256 at gbs 15360; (f) llama3-405b on dgx-h100:2048 at seq 131072, gbs 16; (g) gpt3-175b on
 * dgx-a100-80g:315 at gbs 2520.
 * Lines that are not data go to stderr starting with '#'. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../search_cases.h"
#include "ps_search.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Triad a = b + s*c over arrays far larger than caches, best of 5, in GB/s (STREAM counts 3 x 8 bytes per element). */
static double triad_gbs(int threads)
{
    size_t n = (size_t)1 << 25; /* 3 x 256 MiB */
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return 0;
    }
#pragma omp parallel for num_threads(threads)
    for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1, c[i] = 2;
    double best = INFINITY;
    for (int r = 0; r < 5; r++) {
        double t0 = now_s();
#pragma omp parallel for num_threads(threads)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    volatile double sink = a[n / 2];
    (void)sink;
    free(a), free(b), free(c);
    return 3.0 * 8.0 * (double)n / best / 1e9;
}

int main(int argc, char **argv)
{
    int quick = 0, overlap = 1;
    const char *only = NULL; /* --case X */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--no-overlap") == 0)
            overlap = 0; /* without overlapped TP (Oases) in the strategy set: what it costs the search */
        else {
            fprintf(stderr, "usage: bench_search [--quick] [--no-overlap] [--case a|b|c|d|e|f|g]\n");
            return 2;
        }
    }
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    printf("{\n  \"benchmark\": \"search\",\n  \"triad_GBps\": {\"1\": %.2f, \"2\": %.2f},\n  \"runs\": [",
           triad_gbs(1), triad_gbs(2));
    int first = 1, rc = 0;
    for (size_t k = 0; k < PS_SEARCH_BENCH_N_CASES && !(quick && k > 0); k++) {
        const ps_search_bench_case *bc = &ps_search_bench_cases[k];
        if (only && strcmp(only, bc->name) != 0) continue;
        ps_cluster c;
        ps_model m;
        if (ps_search_bench_load(bc, &m, &c) != PS_OK) {
            fprintf(stderr, "# %s\n", ps_error_message());
            return 2;
        }
        double best1 = 0;
        int64_t index1 = -1; /* the 1-thread winner's place in the enumeration: another plan has another one */
        for (int threads = 1; threads <= 2; threads++) {
            omp_set_num_threads(threads);
            ps_search_opts o;
            ps_search_opts_default(&o);
            o.gbs_lo = bc->gbs_lo;
            o.gbs_hi = bc->gbs_hi;
            o.gbs_step = bc->gbs_step;
            o.overlap = overlap;
            ps_search_result r;
            double t0 = now_s();
            if (ps_search_run(&cp, &m, &c, &o, &r) != PS_OK) {
                fprintf(stderr, "# %s\n", ps_error_message());
                return 3;
            }
            double wall = now_s() - t0;
            double best = r.n_top ? r.top[0].pred.samples_per_s : 0.0;
            int64_t best_index = r.n_top ? r.top[0].index : -1;
            if (threads == 1) {
                best1 = best;
                index1 = best_index;
            }
            bool same = best == best1 && best_index == index1;
            printf(
                "%s\n    {\"case\": \"%s\", \"model\": \"%s\", \"cluster\": \"%s\", \"gpus\": %lld, \"seq\": %lld, "
                "\"gbs\": [%lld, %lld, %lld], \"threads\": %d, \"tp_overlap\": %s, \"wall_s\": %.4f, \"target_s\": %g, "
                "\"meets_target\": %s, "
                "\"candidates\": %lld, \"plans_costed\": %lld, \"pruned\": %lld, \"dp_cells_nominal\": %.6g, "
                "\"dp_cells_nominal_per_s\": %.6g, \"best_samples_per_s\": %.6g, \"same_best_as_1_thread\": %s}",
                first ? "" : ",", bc->name, bc->model, bc->cluster, (long long)c.n_gpus, (long long)m.seq,
                (long long)bc->gbs_lo, (long long)bc->gbs_hi, (long long)bc->gbs_step, threads,
                overlap ? "true" : "false", wall, bc->target_s,
                bc->target_s > 0 ? (wall <= bc->target_s ? "true" : "false") : "null", (long long)r.candidates,
                (long long)r.evaluated, (long long)r.pruned, r.dp_cells, r.dp_cells / wall, best,
                same ? "true" : "false");
            if (!same) rc = 1; /* the search must not depend on the thread count */
            fflush(stdout);
            first = 0;
            if (!r.n_top) rc = 1;
            ps_search_result_free(&r);
        }
        ps_model_free(&m);
        ps_cluster_free(&c);
    }
    printf("\n  ]\n}\n");
    return rc;
}

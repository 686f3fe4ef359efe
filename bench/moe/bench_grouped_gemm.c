/* The cost model's grouped expert GEMM against measured ones (issue #21: "compare the grouped-GEMM cost model with
 * the H200 rows"), printing one JSON document. Input: a grouped_gemm.json written by bench/gpu/grouped_gemm_bench.py
 * (torch._grouped_mm over E experts of m tokens each, the experts' gate/up and down projections of a model, BF16);
 * default: the H200 rows of tests/data/gpu-check/h200-2026-11-27b. For each row, the fraction of the BF16 dense peak
 * the measured grouped GEMM reached and the fraction the model gives for the same shapes: the cost model's grouped
 * GEMM (cost/layer_cost.c, weight_gemm_time at balance) is the tile-and-wave model of ps_cost_gemm_time over all E
 * GEMMs with one launch per expert matrix, i.e. ps_cost_gemm_time(m, n, k, E) less E - 1 launches.
 *   bench_grouped_gemm [FILE.json] [--gpu NAME]   (NAME: the catalog GPU the rows ran on; default h200) */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_cost.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n == 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    const char *path = PS_SOURCE_DIR "/tests/data/gpu-check/h200-2026-11-27b/grouped_gemm.json", *gname = "h200";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0 && i + 1 < argc)
            gname = argv[++i];
        else if (argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: bench_grouped_gemm [FILE.json] [--gpu NAME]\n");
            return 2;
        }
    }
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    json_t *rows = root ? json_object_get(root, "rows") : NULL;
    if (!json_is_array(rows)) {
        fprintf(stderr, "bench_grouped_gemm: %s: %s\n", path, root ? "no 'rows' array" : err.text);
        json_decref(root);
        return 2;
    }
    ps_gpu g;
    if (ps_gpu_lookup(gname, &g) != PS_OK) {
        fprintf(stderr, "bench_grouped_gemm: %s\n", ps_error_message());
        json_decref(root);
        return 2;
    }
    ps_cost_params p;
    ps_cost_params_default(&p);
    double peak = ps_cost_peak_flops(&g, PS_DTYPE_BF16);
    size_t n = json_array_size(rows);
    double *small = calloc(n + 1, sizeof *small), *large = calloc(n + 1, sizeof *large);
    int ns = 0, nl = 0;
    printf("{\n  \"benchmark\": \"grouped_gemm_model\",\n  \"input\": \"%s\",\n  \"gpu\": \"%s\",\n  \"rows\": [", path,
           gname);
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rows, i);
        double E = json_number_value(json_object_get(r, "experts"));
        double per = json_number_value(json_object_get(r, "tokens_per_expert"));
        double nn = json_number_value(json_object_get(r, "n")), k = json_number_value(json_object_get(r, "k"));
        double flops = json_number_value(json_object_get(r, "flops"));
        double meas = json_number_value(json_object_get(r, "grouped_frac"));
        if (!(E > 0 && per > 0 && nn > 0 && k > 0 && flops > 0 && meas > 0)) continue;
        double t = ps_cost_gemm_time(&p, &g, PS_DTYPE_BF16, per, nn, k, E) - (E - 1) * p.kernel_launch_s;
        double model = flops / t / peak, ratio = model / meas;
        printf("%s\n    {\"model\": \"%s\", \"proj\": \"%s\", \"experts\": %.0f, \"tokens_per_expert\": %.0f, "
               "\"measured_frac\": %.3f, \"model_frac\": %.3f, \"model_over_measured\": %.3f}",
               i ? "," : "", json_string_value(json_object_get(r, "model")),
               json_string_value(json_object_get(r, "proj")), E, per, meas, model, ratio);
        if (per < 256)
            small[ns++] = fabs(ratio - 1);
        else
            large[nl++] = fabs(ratio - 1);
    }
    printf("\n  ],\n  \"median_abs_err_below_256_tokens\": %.3f,\n  \"median_abs_err_from_256_tokens\": %.3f,\n"
           "  \"rows_below_256\": %d,\n  \"rows_from_256\": %d\n}\n",
           median(small, ns), median(large, nl), ns, nl);
    free(small);
    free(large);
    json_decref(root);
    return 0;
}

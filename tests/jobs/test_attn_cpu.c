/* The cpu backend's fused attention kernel (calib/attn_cpu.c) against a naive reference that builds the full score
 * matrix in double: the output and the three gradients within a tolerance, on small shapes that exercise every path
 * of the tiling (causal and not, lengths not a multiple of the tile, grouped-query heads, V wider than K, queries and
 * keys of different lengths), on one and two threads. Several key blocks per query block make the online softmax's
 * rescaling matter: without it the output is off by far more than the tolerance.
 * With --bench S D H THREADS [B]: forward and backward GFLOP/s of a causal and a full core (FLOPs as executed:
 * ps_attn_cpu_flops, the backward 2.5x). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "ps_calib.h"

static int g_failures;

static float frand(unsigned *st)
{
    *st = *st * 1103515245u + 12345u;
    return ((float)((*st >> 8) & 0xFFFF) / 65535.0f - 0.5f) * 4.0f; /* [-2, 2]: scores spread enough to move the max */
}

static float *fill(size_t n, unsigned *st)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = frand(st);
    return p;
}

/* The reference of one (b, h): full S, P, O, and the gradients from dO, in double. */
static void ref_head(const ps_attn_cpu_shape *a, const float *q, const float *k, const float *v, const float *dout,
                     double *o, double *dq, double *dk, double *dvv)
{
    int64_t sq = a->sq, sk = a->sk, d = a->d, dv = a->dv;
    double scale = 1.0 / sqrt((double)d);
    double *p = calloc((size_t)(sq * sk), sizeof *p), *dp = calloc((size_t)(sq * sk), sizeof *dp);
    for (int64_t i = 0; i < sq; i++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < sk; j++) {
            double s = 0;
            for (int64_t x = 0; x < d; x++) s += (double)q[i * d + x] * k[j * d + x];
            p[i * sk + j] = a->causal && j > i ? -INFINITY : s * scale;
            mx = fmax(mx, p[i * sk + j]);
        }
        for (int64_t j = 0; j < sk; j++) sum += p[i * sk + j] = exp(p[i * sk + j] - mx);
        for (int64_t j = 0; j < sk; j++) p[i * sk + j] /= sum;
        for (int64_t x = 0; x < dv; x++) {
            double acc = 0;
            for (int64_t j = 0; j < sk; j++) acc += p[i * sk + j] * v[j * dv + x];
            o[i * dv + x] = acc;
        }
    }
    for (int64_t i = 0; i < sq; i++) {
        double row = 0;
        for (int64_t j = 0; j < sk; j++) {
            double s = 0;
            for (int64_t x = 0; x < dv; x++) s += (double)dout[i * dv + x] * v[j * dv + x];
            dp[i * sk + j] = s;
            row += s * p[i * sk + j];
        }
        for (int64_t j = 0; j < sk; j++) dp[i * sk + j] = p[i * sk + j] * (dp[i * sk + j] - row); /* dS */
    }
    for (int64_t i = 0; i < sq; i++)
        for (int64_t x = 0; x < d; x++) {
            double s = 0;
            for (int64_t j = 0; j < sk; j++) s += dp[i * sk + j] * k[j * d + x];
            dq[i * d + x] = s * scale;
        }
    for (int64_t j = 0; j < sk; j++) {
        for (int64_t x = 0; x < d; x++) {
            double s = 0;
            for (int64_t i = 0; i < sq; i++) s += dp[i * sk + j] * q[i * d + x];
            dk[j * d + x] += s * scale; /* GQA: the group's query heads add up */
        }
        for (int64_t x = 0; x < dv; x++) {
            double s = 0;
            for (int64_t i = 0; i < sq; i++) s += p[i * sk + j] * dout[i * dv + x];
            dvv[j * dv + x] += s;
        }
    }
    free(p);
    free(dp);
}

/* max |got - want| over max |want|, the relative error of a whole tensor */
static double rel_err(const float *got, const double *want, size_t n)
{
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)got[i] - want[i]));
        m = fmax(m, fabs(want[i]));
    }
    return isfinite(e) ? e / m : INFINITY;
}

static void check_case(const char *name, ps_attn_cpu_shape a)
{
    unsigned st = 12345u + (unsigned)(a.sq * 31 + a.sk * 7 + a.heads);
    size_t nq = (size_t)(a.batch * a.heads * a.sq), nk = (size_t)(a.batch * a.kv_heads * a.sk);
    float *q = fill(nq * a.d, &st), *k = fill(nk * a.d, &st), *v = fill(nk * a.dv, &st), *dout = fill(nq * a.dv, &st);
    double *ro = calloc(nq * a.dv, sizeof *ro), *rdq = calloc(nq * a.d, sizeof *rdq);
    double *rdk = calloc(nk * a.d, sizeof *rdk), *rdv = calloc(nk * a.dv, sizeof *rdv);
    int64_t g = a.heads / a.kv_heads;
    for (int64_t bh = 0; bh < a.batch * a.heads; bh++) {
        int64_t kvh = bh / g; /* (b, h) -> b * kv + h / g, batch-major */
        ref_head(&a, q + bh * a.sq * a.d, k + kvh * a.sk * a.d, v + kvh * a.sk * a.dv, dout + bh * a.sq * a.dv,
                 ro + bh * a.sq * a.dv, rdq + bh * a.sq * a.d, rdk + kvh * a.sk * a.d, rdv + kvh * a.sk * a.dv);
    }
    for (int threads = 1; threads <= 2; threads++) {
        float *o = calloc(nq * a.dv, sizeof *o), *lse = calloc(nq, sizeof *lse);
        float *dq = calloc(nq * a.d, sizeof *dq), *dk = calloc(nk * a.d, sizeof *dk), *dv = calloc(nk * a.dv, 4);
        float *ws = calloc(ps_attn_cpu_ws_floats(&a, threads), sizeof *ws);
        ps_status s1 = ps_attn_cpu_fwd(&a, q, k, v, o, lse, ws, threads);
        ps_status s2 = ps_attn_cpu_bwd(&a, q, k, v, o, lse, dout, dq, dk, dv, ws, threads);
        double eo = rel_err(o, ro, nq * a.dv), eq = rel_err(dq, rdq, nq * a.d);
        double ek = rel_err(dk, rdk, nk * a.d), ev = rel_err(dv, rdv, nk * a.dv);
        bool ok = s1 == PS_OK && s2 == PS_OK && eo < 1e-4 && eq < 1e-4 && ek < 1e-4 && ev < 1e-4;
        printf("%s %-28s threads %d: rel. error O %.2g dQ %.2g dK %.2g dV %.2g\n", ok ? "ok  " : "FAIL", name,
               threads, eo, eq, ek, ev);
        if (!ok) g_failures++;
        free(o);
        free(lse);
        free(dq);
        free(dk);
        free(dv);
        free(ws);
    }
    free(q);
    free(k);
    free(v);
    free(dout);
    free(ro);
    free(rdq);
    free(rdk);
    free(rdv);
}

static double now(void) { return omp_get_wtime(); }

static int bench(int64_t s, int64_t d, int64_t h, int threads, int64_t b)
{
    for (int causal = 0; causal <= 1; causal++) {
        ps_attn_cpu_shape a = {.batch = b, .heads = h, .kv_heads = h, .sq = s, .sk = s, .d = d, .dv = d,
                               .causal = causal};
        unsigned st = 7;
        size_t nq = (size_t)(b * h * s);
        float *q = fill(nq * d, &st), *k = fill(nq * d, &st), *v = fill(nq * d, &st), *dout = fill(nq * d, &st);
        float *o = calloc(nq * d, 4), *lse = calloc(nq, 4), *dq = calloc(nq * d, 4), *dk = calloc(nq * d, 4);
        float *dv = calloc(nq * d, 4), *ws = calloc(ps_attn_cpu_ws_floats(&a, threads), 4);
        ps_attn_cpu_fwd(&a, q, k, v, o, lse, ws, threads); /* warm-up */
        double tf = 1e30, tb = 1e30;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            ps_attn_cpu_fwd(&a, q, k, v, o, lse, ws, threads);
            double t1 = now();
            ps_attn_cpu_bwd(&a, q, k, v, o, lse, dout, dq, dk, dv, ws, threads);
            double t2 = now();
            tf = fmin(tf, t1 - t0);
            tb = fmin(tb, t2 - t1);
        }
        double f = ps_attn_cpu_flops(&a);
        printf("seq %lld head_dim %lld heads %lld batch %lld %s threads %d: fwd %.3f s %.1f GFLOP/s, bwd %.3f s "
               "%.1f GFLOP/s\n", (long long)s, (long long)d, (long long)h, (long long)b,
               causal ? "causal" : "full  ", threads, tf, f / tf / 1e9, tb, 2.5 * f / tb / 1e9);
        free(q);
        free(k);
        free(v);
        free(dout);
        free(o);
        free(lse);
        free(dq);
        free(dk);
        free(dv);
        free(ws);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 6 && strcmp(argv[1], "--bench") == 0)
        return bench(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), atoi(argv[5]), argc > 6 ? atoll(argv[6]) : 1);
    /* batch, heads, kv heads, sq, sk, d, dv, causal, tile */
    check_case("full, 37 rows, tile 16", (ps_attn_cpu_shape){2, 2, 2, 37, 37, 16, 16, false, 16});
    check_case("causal, 37 rows, tile 16", (ps_attn_cpu_shape){2, 2, 2, 37, 37, 16, 16, true, 16});
    check_case("causal, 64 rows, tile 16", (ps_attn_cpu_shape){1, 3, 3, 64, 64, 8, 8, true, 16});
    check_case("causal GQA 4/2, dv 12", (ps_attn_cpu_shape){2, 4, 2, 50, 50, 8, 12, true, 16});
    check_case("cross 33x45 GQA 2/1", (ps_attn_cpu_shape){1, 2, 1, 33, 45, 8, 8, false, 16});
    check_case("causal 150 rows, tile 128", (ps_attn_cpu_shape){1, 2, 2, 150, 150, 32, 32, true, 0});
    check_case("one row per tile", (ps_attn_cpu_shape){1, 1, 1, 5, 5, 4, 4, true, 1});
    /* the shape rules */
    ps_attn_cpu_shape bad = {1, 3, 2, 8, 8, 4, 4, false, 0};
    if (ps_attn_cpu_check(&bad) != PS_ERR_INPUT) {
        printf("FAIL 3 heads over 2 kv heads accepted\n");
        g_failures++;
    }
    printf("%d failure(s)\n", g_failures);
    return g_failures ? 1 : 0;
}

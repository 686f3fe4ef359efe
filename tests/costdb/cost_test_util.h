/* What the cost-model tests of tests/costdb share: inputs loaded or failed on the spot, constants with one overlap
 * slowdown, a relative comparison. Include after cmocka.h and ps_cost.h. */
#ifndef PS_COST_TEST_UTIL_H
#define PS_COST_TEST_UTIL_H

#include <math.h>

static inline ps_cluster load_cluster(const char *spec)
{
    ps_cluster c;
    assert_int_equal(ps_cluster_load(spec, &c), PS_OK);
    return c;
}

/* A preset with these model options (0: the model's own): vocab_pad 0 keeps the vocabulary as the model gives it */
static inline ps_model load_preset(const char *name, int64_t vocab_pad, int64_t seq)
{
    ps_model m;
    ps_model_opts o;
    ps_model_opts_init(&o);
    o.vocab_pad = vocab_pad;
    o.seq = seq;
    assert_int_equal(ps_model_load(name, &o, &m), PS_OK);
    return m;
}

static inline ps_model load_model(const char *name, int64_t vocab_pad) { return load_preset(name, vocab_pad, 0); }
static inline ps_model load_model_seq(const char *name, int64_t seq) { return load_preset(name, 0, seq); }

/* |got - want| <= tol x |want| */
static inline void assert_close(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * fmax(1e-300, fabs(want)))) fail_msg("got %.12g, want %.12g", got, want);
}

/* the default constants with the overlap slowdown set */
static inline ps_cost_params params(double slowdown)
{
    ps_cost_params p;
    ps_cost_params_default(&p);
    p.overlap_slowdown = slowdown;
    return p;
}

/* GEMM g of a layer's list is m x n x k, count times */
static inline void shape_is(const ps_gemm_shape *g, double m, double n, double k, double count)
{
    if (g->m != m || g->n != n || g->k != k || g->count != count)
        fail_msg("GEMM %g x %g x %g (x%g), want %g x %g x %g (x%g)", g->m, g->n, g->k, g->count, m, n, k, count);
}

/* the FLOPs of a layer's GEMM list */
static inline double list_flops(const ps_layer_gemms *g)
{
    double f = 0;
    for (int i = 0; i < g->n; i++) f += 2 * g->g[i].m * g->g[i].n * g->g[i].k * g->g[i].count;
    return f;
}

#endif

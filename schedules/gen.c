/* The schedule kinds: one generator per kind writing one device's pass order, and the const table that names them.
 * Devices and stages are 0-based; device i runs stage i of each chunk loop (or of the V for V placements). */
#include "sched_internal.h"

/* GPipe: every forward, then every backward, in micro-batch order (the flush at the end of each iteration). */
static void gen_gpipe(ps_sched *s, int dev)
{
    (void)dev;
    for (int m = 0; m < s->n; m++) ps_sched_emit_(s, PS_SCHED_F, m, 0);
    for (int m = 0; m < s->n; m++) ps_sched_emit_(s, PS_SCHED_BW, m, 0);
}

/* 1F1B (PipeDream-flush): d-1-i warm-up forwards, then one forward / one backward, then the remaining backwards.
 * Device i thus holds at most d-i micro-batches of activations. */
static void gen_1f1b(ps_sched *s, int dev)
{
    int n = s->n;
    int warm = s->d - 1 - dev < n ? s->d - 1 - dev : n;
    int f = 0, b = 0;
    while (f < warm) ps_sched_emit_(s, PS_SCHED_F, f++, 0);
    while (f < n) {
        ps_sched_emit_(s, PS_SCHED_F, f++, 0);
        ps_sched_emit_(s, PS_SCHED_BW, b++, 0);
    }
    while (b < n) ps_sched_emit_(s, PS_SCHED_BW, b++, 0);
}

/* Megatron-LM's interleaved 1F1B (forward_backward_pipelining_with_interleaving): virtual micro-batch k runs chunk
 * (k mod d*v) / d of micro-batch (k / d*v)*d + k mod d, backwards visit the chunks in reverse; 2(d-1-i) + (v-1)d
 * warm-up forwards (all of them when that reaches n*v), then F(warm+k) B(k) pairs, then the remaining backwards.
 * The mapping needs n to be a multiple of d, as Megatron asserts. */
static void gen_interleaved(ps_sched *s, int dev)
{
    int d = s->d, v = s->v;
    int64_t total = (int64_t)s->n * v, group = (int64_t)d * v;
    int64_t warm = (int64_t)(d - 1 - dev) * 2 + (int64_t)(v - 1) * d;
    if (warm > total) warm = total;
#define VMB(k) ((int)(((k) / group) * d + (k) % d))
#define FCH(k) ((int)(((k) % group) / d))
    for (int64_t k = 0; k < warm; k++) ps_sched_emit_(s, PS_SCHED_F, VMB(k), FCH(k));
    for (int64_t k = 0; k < total - warm; k++) {
        ps_sched_emit_(s, PS_SCHED_F, VMB(warm + k), FCH(warm + k));
        ps_sched_emit_(s, PS_SCHED_BW, VMB(k), v - 1 - FCH(k));
    }
    for (int64_t k = total - warm; k < total; k++) ps_sched_emit_(s, PS_SCHED_BW, VMB(k), v - 1 - FCH(k));
#undef VMB
#undef FCH
}

/* ZB-H1 (Qi et al. 2023): 1F1B's forwards and input-backwards, with each W held back i steps on device i so the
 * weight gradients fill the cool-down bubble of the early stages. Every device then holds at most d micro-batches
 * (1F1B's peak, now on all devices) and, with F = B = W, idles (d-1)(F+B-W) instead of 1F1B's (d-1)(F+B+W). */
static void gen_zbh1(ps_sched *s, int dev)
{
    int n = s->n;
    int warm = s->d - 1 - dev < n ? s->d - 1 - dev : n;
    int f = 0, b = 0, w = 0;
    while (f < warm) ps_sched_emit_(s, PS_SCHED_F, f++, 0);
    while (b < n) {
        if (f < n) ps_sched_emit_(s, PS_SCHED_F, f++, 0);
        ps_sched_emit_(s, PS_SCHED_B, b++, 0);
        if (b - w > dev) ps_sched_emit_(s, PS_SCHED_W, w++, 0);
    }
    while (w < n) ps_sched_emit_(s, PS_SCHED_W, w++, 0);
}

const ps_sched_kind_def ps_sched_kinds_[] = {
    {.name = "gpipe",
     .description = "GPipe: all forwards, then all backwards",
     .default_chunks = 1, .min_chunks = 1, .max_chunks = 1,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_ANY, .split_backward = false,
     .gen_device = gen_gpipe},
    {.name = "1f1b",
     .description = "1F1B / PipeDream-flush: d-1-i warm-up forwards, then one forward one backward",
     .default_chunks = 1, .min_chunks = 1, .max_chunks = 1,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_ANY, .split_backward = false,
     .gen_device = gen_1f1b},
    {.name = "interleaved",
     .description = "interleaved 1F1B (Megatron-LM) with v >= 2 chunks per device; n a multiple of d",
     .default_chunks = 2, .min_chunks = 2, .max_chunks = 1024,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_MULTIPLE_OF_D, .split_backward = false,
     .gen_device = gen_interleaved},
    {.name = "zb-h1",
     .description = "ZB-H1 zero bubble: backward split into B and W, W delayed i steps on device i",
     .default_chunks = 1, .min_chunks = 1, .max_chunks = 1,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_ANY, .split_backward = true,
     .gen_device = gen_zbh1},
};
const int ps_sched_nkinds_ = (int)(sizeof ps_sched_kinds_ / sizeof ps_sched_kinds_[0]);

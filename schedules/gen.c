/* The schedule kinds: one generator per kind writing one device's pass order, and the const table that names them.
 * Devices and stages are 0-based; device i runs stage i of each chunk loop (or of the V for V placements). */
#include <string.h>

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

/* ZB-H2 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", handcrafted schedule 2): up to 2d-1 micro-batches in
 * flight, so device i runs 2(d-1-i)+1 warm-up forwards that fill the bubble before its first B, and the W passes
 * are postponed in the tail so the layout becomes a parallelogram. We obtain that layout from the paper's own rule
 * on the unit-time grid (F = B = W = 1): at each step a device runs its next B if its inputs are there, else its
 * next F if fewer than 2d-1 micro-batches are in flight, else its oldest pending W. With any F, B, W times the
 * squeezed order then idles only (d-1)·F on the last device before its first F when n >= 2d (tested). */
static void gen_zbh2(ps_sched *s)
{
    const int d = s->d, n = s->n, S = s->stages;
    const int64_t per = 3 * (int64_t)n, limit = 2 * (int64_t)d - 1;
    int64_t *f = s->scratch, *b = f + d, *w = b + d, *pos = w + d;
    /* end_f / end_b hold the step at which the (micro-batch, stage) pass ran, -1 before */
    for (size_t i = 0; i < (size_t)S * (size_t)n; i++) s->end_f[i] = s->end_b[i] = -1;
    for (int i = 0; i < d; i++) {
        f[i] = b[i] = w[i] = 0;
        pos[i] = (int64_t)i * per;
        s->dev_off[i] = pos[i];
    }
    s->dev_off[d] = (int64_t)d * per;
    int64_t left = (int64_t)d * per;
    /* every step runs at least one pass somewhere (the pipeline cannot stall with 2d-1 slots), the bound only
     * guards against a bug turning into an endless loop: verification would then report the missing passes */
    for (int64_t t = 0; left > 0 && t <= (int64_t)d * per; t++) {
        for (int i = 0; i < d; i++) {
            ps_sched_pass *p = &s->pass[pos[i]];
            const size_t fi = (size_t)f[i] * S + (size_t)i, bi = (size_t)b[i] * S + (size_t)i;
            if (b[i] < n && s->end_f[bi] >= 0 && s->end_f[bi] < (double)t &&
                (i == d - 1 || (s->end_b[bi + 1] >= 0 && s->end_b[bi + 1] < (double)t))) {
                s->end_b[bi] = (double)t;
                *p = (ps_sched_pass){.mb = (int32_t)b[i]++, .op = PS_SCHED_B};
            } else if (f[i] < n && f[i] - w[i] < limit &&
                       (i == 0 || (s->end_f[fi - 1] >= 0 && s->end_f[fi - 1] < (double)t))) {
                s->end_f[fi] = (double)t;
                *p = (ps_sched_pass){.mb = (int32_t)f[i]++, .op = PS_SCHED_F};
            } else if (w[i] < b[i]) {
                *p = (ps_sched_pass){.mb = (int32_t)w[i]++, .op = PS_SCHED_W};
            } else {
                continue;
            }
            pos[i]++;
            left--;
        }
    }
    s->npass = (int64_t)d * per - left;
    if (left > 0) /* keep the list contiguous so verification names the first missing pass */
        for (int i = 0; i < d; i++) s->dev_off[i + 1] = pos[i];
}

/* ---- V-shape building blocks ("Pipeline Parallelism with Controllable Memory", Qi et al. 2024, Sec. 3) ----
 * Stage i and stage 2d-1-i sit on device i (chunk 0 and chunk 1). The building block of micro-batch 0 is laid on a
 * unit grid (F = B = W = 1) by the offsets of Sec. 3.1 / App. A (devices 0-based here, 1-based in the paper):
 *   F of chunk 0 walks down the devices delta0 apart, F of chunk 1 walks back up delta1 apart,
 *   B of chunk 1 walks down delta0 apart, B of chunk 0 walks back up delta1 apart (delta_F^0 = delta_B^1 = delta0,
 *   delta_F^1 = delta_B^0 = delta1, which balances memory across devices),
 * with three turn offsets: F^0 -> F^1 on the last device, F^1 -> B^1 on the first, B^1 -> B^0 on the last.
 * Micro-batch m repeats the block 6m later (T = 6: two F, two B, two W per device). App. F (Tables 8, 9) gives the
 * turn offsets for which the repetition never collides; W passes fill the empty cells, oldest first (App. F: "they
 * always fill in the empty grids left by F and B"), and those left over close the order (App. C cool-down). The
 * per-device order is the grid order; the simulation then squeezes it (Sec. 2). Peak memory follows Eq. 1-2:
 * about (delta0 + delta1)/6 of the whole model's activations, i.e. 1/3 (V-Min), 1/2 (V-Half), 1 (V-ZB) of 1F1B. */
struct ps_sched_v_offsets {
    int d0, d1;          /* delta0, delta1 */
    int ff, fb, bb;      /* delta(F_d^0, F_d^1), delta(F_1^1, B_1^1), delta(B_d^1, B_d^0) */
    int fb_every, fb_at; /* delta(F_1^1, B_1^1) is fb_at instead when d is a multiple of fb_every (0: never) */
};
/* Table 8: delta(F_1^1, B_1^1) = 3 when d = 0 mod 3 */
static const struct ps_sched_v_offsets k_vmin = {.d0 = 1, .d1 = 1, .ff = 1, .fb = 1, .bb = 1,
                                                 .fb_every = 3, .fb_at = 3};
/* Table 9: delta(F_1^1, B_1^1) = 4 when d is even */
static const struct ps_sched_v_offsets k_vhalf = {.d0 = 2, .d1 = 1, .ff = 2, .fb = 1, .bb = 1,
                                                  .fb_every = 2, .fb_at = 4};
/* Sec. 3.2: delta0 = 4, delta1 = 2 */
static const struct ps_sched_v_offsets k_vzb = {.d0 = 4, .d1 = 2, .ff = 1, .fb = 1, .bb = 1};

static void gen_v(ps_sched *s, int dev)
{
    const int d = s->d, n = s->n;
    struct ps_sched_v_offsets o = *s->kind->v;
    if (o.fb_every > 0 && d % o.fb_every == 0) o.fb = o.fb_at;
    /* grid cell of each pass of micro-batch 0 on this device; stream order F^0, F^1, B^1, B^0 breaks ties */
    const int64_t tf1_first = (int64_t)(d - 1) * o.d0 + o.ff + (int64_t)(d - 1) * o.d1; /* F^1 on device 0 */
    const int64_t tb1_last = tf1_first + o.fb + (int64_t)(d - 1) * o.d0;                  /* B^1 on device d-1 */
    const int64_t base[4] = {
        (int64_t)dev * o.d0,                                            /* F, chunk 0 */
        (int64_t)(d - 1) * o.d0 + o.ff + (int64_t)(d - 1 - dev) * o.d1, /* F, chunk 1 */
        tf1_first + o.fb + (int64_t)dev * o.d0,                         /* B, chunk 1 */
        tb1_last + o.bb + (int64_t)(d - 1 - dev) * o.d1,                /* B, chunk 0 */
    };
    static const uint8_t op[4] = {PS_SCHED_F, PS_SCHED_F, PS_SCHED_B, PS_SCHED_B};
    static const int chunk[4] = {0, 1, 1, 0};
    int m[4] = {0, 0, 0, 0};
    const int64_t first = s->npass;
    int64_t wscan = first, pending = 0, t = 0;
    /* merge the four arithmetic streams (each 6 apart) in grid order, putting a pending W in every empty cell */
    for (;;) {
        int k = -1;
        int64_t tk = 0;
        for (int j = 0; j < 4; j++) {
            int64_t tj = base[j] + 6 * (int64_t)m[j];
            if (m[j] < n && (k < 0 || tj < tk)) k = j, tk = tj;
        }
        if (k < 0) break;
        while (t < tk && pending > 0) {
            while (s->pass[wscan].op != PS_SCHED_B) wscan++;
            ps_sched_emit_(s, PS_SCHED_W, s->pass[wscan].mb, s->pass[wscan].chunk);
            wscan++, pending--, t++;
        }
        if (t < tk) t = tk;
        ps_sched_emit_(s, (ps_sched_op)op[k], m[k], chunk[k]);
        if (op[k] == PS_SCHED_B) pending++;
        m[k]++, t++;
    }
    while (pending-- > 0) {
        while (s->pass[wscan].op != PS_SCHED_B) wscan++;
        ps_sched_emit_(s, PS_SCHED_W, s->pass[wscan].mb, s->pass[wscan].chunk);
        wscan++;
    }
}

/* V-ZB ("Pipeline Parallelism with Controllable Memory", Sec. 3.2 and App. C). The delta0 = 4 / delta1 = 2
 * building block, repeated and squeezed (gen_v), has a stable phase without bubbles for any F, B, W times (App. E)
 * but leaves about 2(d-1) idle units per device in the ramps: holes before the first B (warm-up) and a tail of
 * B passes waiting on the B chain (cool-down). App. C removes them greedily, and so do we, on the unit grid
 * (F = B = W = 1), taking the building block's per-device order as the priority list:
 *  - warm-up: at each step a device runs the next pass of its list if its inputs are there; if not (a hole), it
 *    runs the first later pass of its list that is ready, "keeping all other passes unchanged" (App. C);
 *  - cool-down (after its last F): W passes can run any time after their B, so a ready B goes first and the W
 *    passes fill the holes, the rest closing the order (App. C: delete the cool-down W, squeeze, refill).
 * A pulled-forward F lengthens a lifespan, so it must keep the device under the block's peak: fewer than 2d
 * stage-micro-batches held (1F1B's peak, d micro-batches of a stage twice as deep; Eq. 1 with lifespans about
 * 12d-6i and 6i over T = 6 on device i), and for chunk 0 fewer than 2d-1-i of them, the share chunk 0 holds in
 * the stable phase, so that the chunk-1 forwards still find room to reach the turn (without this reservation the
 * warm-up fills every device with chunk-0 activations and the V stalls until the B chain comes back). The result:
 * with F = B = W each device idles d-1 units (the lower bound: the last device starts at d-1 and has 6n units of
 * work), against 1F1B's 6(d-1) — Table 1's "0" up to the small constant it ignores. */
/* d^2 n, the order of gen_vzb's steps x devices x look-ahead. Measured with `psearch schedule --kind v-zb` on the
 * 2-core development machine: d 256, n 1024 (2^26) took 1.9 s; d 512, n 1024 (2^28) 22 s; d 1024, n 2048 over
 * 120 s. The cap, 2^27, keeps a build within about 10 s; the search never comes near it (it caps micro-batches x
 * stages at 2^18, so d^2 n <= 2^18 d). */
#define VZB_MAX_WORK 134217728.0
static double vzb_work(int d, int n) { return (double)d * (double)d * (double)n; }

static void gen_vzb(ps_sched *s)
{
    const int d = s->d, n = s->n, S = s->stages;
    const int64_t per = 6 * (int64_t)n, cap = 2 * (int64_t)d;
    /* the building block's order (W passes in the cells F and B leave empty), device by device */
    s->npass = 0;
    for (int dev = 0; dev < d; dev++) gen_v(s, dev);
    memcpy(s->tmp, s->pass, (size_t)s->npass * sizeof *s->pass);
    for (int64_t k = 0; k < s->npass; k++) s->tmp[k].reserved_ = 0; /* 1: already run */
    /* per device: first list entry not run yet, next output slot, F passes left, held stage-micro-batches in all
     * and of chunk 0 */
    int64_t *cur = s->scratch, *pos = cur + d, *fleft = pos + d, *held = fleft + d, *held0 = held + d;
    for (size_t i = 0; i < (size_t)S * (size_t)n; i++) s->end_f[i] = s->end_b[i] = -1;
    for (int i = 0; i < d; i++) {
        cur[i] = pos[i] = (int64_t)i * per;
        fleft[i] = 2 * (int64_t)n;
        held[i] = held0[i] = 0;
        s->dev_off[i] = pos[i];
    }
    s->dev_off[d] = (int64_t)d * per;
    /* how far a device looks ahead in its list for a pass to pull into a hole: the warm-up pulls up to 2d-1
     * forwards that sit 6 cells apart in the block, the cool-down a B a few cells on; a bound keeps a step O(d) */
    const int64_t window = 12 * (int64_t)d + 12;
    int64_t left = (int64_t)d * per;
#define RAN(x) ((x) >= 0 && (x) < (double)t) /* the pass recorded in x ran at an earlier step */
    /* the bound only guards against a bug turning into an endless loop: verification then names the missing pass */
    for (int64_t t = 0; left > 0 && t <= 2 * (int64_t)d * per + 4 * (int64_t)d; t++) {
        for (int i = 0; i < d; i++) {
            const int64_t end = (int64_t)(i + 1) * per;
            while (cur[i] < end && s->tmp[cur[i]].reserved_) cur[i]++;
            const bool cool = fleft[i] == 0;
            int64_t pick = -1, wpick = -1;
            for (int64_t k = cur[i]; k < end && k < cur[i] + window && pick < 0; k++) {
                const ps_sched_pass *q = &s->tmp[k];
                if (q->reserved_) continue;
                const int st = q->chunk == 0 ? i : 2 * d - 1 - i;
                const size_t x = (size_t)q->mb * S + (size_t)st;
                const bool first = k == cur[i];
                bool ready;
                if (q->op == PS_SCHED_F) {
                    ready = (st == 0 || RAN(s->end_f[x - 1])) &&
                            (first || (held[i] < cap && (q->chunk == 1 || held0[i] < cap - 1 - i)));
                } else if (q->op == PS_SCHED_B) {
                    ready = RAN(s->end_f[x]) && (st == S - 1 || RAN(s->end_b[x + 1]));
                } else {
                    ready = RAN(s->end_b[x]);
                    if (ready && cool) { /* a W waits while a B can run */
                        if (wpick < 0) wpick = k;
                        ready = false;
                    }
                }
                if (ready) pick = k;
            }
            if (pick < 0) pick = wpick;
            if (pick < 0) continue;
            ps_sched_pass *q = &s->tmp[pick];
            q->reserved_ = 1;
            const int st = q->chunk == 0 ? i : 2 * d - 1 - i;
            const size_t x = (size_t)q->mb * S + (size_t)st;
            if (q->op == PS_SCHED_F) {
                s->end_f[x] = (double)t;
                fleft[i]--, held[i]++;
                if (q->chunk == 0) held0[i]++;
            } else if (q->op == PS_SCHED_B) {
                s->end_b[x] = (double)t;
            } else {
                held[i]--;
                if (q->chunk == 0) held0[i]--;
            }
            s->pass[pos[i]++] = (ps_sched_pass){.mb = q->mb, .chunk = q->chunk, .op = q->op};
            left--;
        }
    }
#undef RAN
    s->npass = (int64_t)d * per - left;
    if (left > 0) /* keep the list contiguous so verification names the first missing pass */
        for (int i = 0; i < d; i++) s->dev_off[i + 1] = pos[i];
}

const ps_sched_kind_def ps_sched_kinds_[] = {
    {.name = "gpipe",
     .description = "GPipe: all forwards, then all backwards",
     .default_chunks = 1, .min_chunks = 1, .max_chunks = 1,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_ANY,
     .gen_device = gen_gpipe},
    {.name = "1f1b",
     .description = "1F1B / PipeDream-flush: d-1-i warm-up forwards, then one forward one backward",
     .default_chunks = 1, .min_chunks = 1, .max_chunks = 1,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_ANY,
     .gen_device = gen_1f1b},
    {.name = "interleaved",
     .description = "interleaved 1F1B (Megatron-LM) with v >= 2 chunks per device; n a multiple of d",
     .default_chunks = 2, .min_chunks = 2, .max_chunks = 1024,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_MULTIPLE_OF_D,
     .gen_device = gen_interleaved},
    {.name = "zb-h1",
     .description = "ZB-H1 zero bubble: backward split into B and W, W delayed i steps on device i",
     .default_chunks = 1, .min_chunks = 1, .max_chunks = 1,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_ANY,
     .gen_device = gen_zbh1},
    {.name = "zb-h2",
     .description = "ZB-H2 zero bubble: 2(d-1-i)+1 warm-up forwards, W postponed in the tail (2d-1 in flight)",
     .default_chunks = 1, .min_chunks = 1, .max_chunks = 1,
     .place = PS_SCHED_PLACE_LOOP, .n_rule = PS_SCHED_N_ANY,
     .gen_all = gen_zbh2},
    {.name = "v-min",
     .description = "V-Min: V-shape building block, offsets 1/1, about 1/3 of 1F1B's activation memory",
     .default_chunks = 2, .min_chunks = 2, .max_chunks = 2,
     .place = PS_SCHED_PLACE_V, .n_rule = PS_SCHED_N_ANY, .v = &k_vmin,
     .gen_device = gen_v},
    {.name = "v-half",
     .description = "V-Half: V-shape building block, offsets 2/1, about 1/2 of 1F1B's activation memory",
     .default_chunks = 2, .min_chunks = 2, .max_chunks = 2,
     .place = PS_SCHED_PLACE_V, .n_rule = PS_SCHED_N_ANY, .v = &k_vhalf,
     .gen_device = gen_v},
    {.name = "v-zb",
     .description = "V-ZB: V-shape building block, offsets 4/2, warm-up/cool-down reordered; 1F1B's memory, d-1 idle",
     .default_chunks = 2, .min_chunks = 2, .max_chunks = 2,
     .place = PS_SCHED_PLACE_V, .n_rule = PS_SCHED_N_ANY, .v = &k_vzb,
     .gen_all = gen_vzb, .gen_work = vzb_work, .max_gen_work = VZB_MAX_WORK},
};
const int ps_sched_nkinds_ = (int)(sizeof ps_sched_kinds_ / sizeof ps_sched_kinds_[0]);

/* Unit tests of schedules/: every kind over d = 1..16 and n in {d, 2d, 4d, 4d+1, 64} checked by an independent
 * timing checker, closed forms against the simulation, bad input, custom orders, workspace reuse, golden timelines. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_schedules.h"

#define MAXS 64
#define EPS 1e-9

typedef struct {
    double f[MAXS], b[MAXS], w[MAXS], p2p[MAXS], act[MAXS];
    ps_sched_costs c;
} costs_buf;

static void fill_costs(costs_buf *cb, int stages, double f, double b, double w, double p2p, bool uneven)
{
    for (int s = 0; s < stages && s < MAXS; s++) {
        /* uneven: a deterministic spread like an uneven partition on mixed GPUs */
        double k = uneven ? 1.0 + 0.37 * (double)((s * 7) % 5) : 1.0;
        cb->f[s] = f * k;
        cb->b[s] = b * k;
        cb->w[s] = w * k;
        cb->p2p[s] = p2p;
        cb->act[s] = uneven ? 1.0 + (double)(s % 3) : 1.0;
    }
    cb->c = (ps_sched_costs){.f = cb->f, .b = cb->b, .w = cb->w, .p2p = p2p > 0 ? cb->p2p : NULL,
                             .act = cb->act};
}

/* Independent check of a simulated order: every dependency (stage order for F and B, F before B before W of the
 * same micro-batch and stage) holds in the timeline, passes on one device never overlap, durations are the costs,
 * and the reported makespan / busy / peaks agree with a recount. */
static void check_timeline(ps_sched *s, const ps_sched_costs *c, const ps_sched_result *r)
{
    int d = ps_sched_devices(s), n = ps_sched_micro_batches(s), S = ps_sched_stages(s);
    size_t sm = (size_t)S * n;
    double *fs = calloc(sm, sizeof(double)), *fe = calloc(sm, sizeof(double));
    double *bs = calloc(sm, sizeof(double)), *be = calloc(sm, sizeof(double));
    double *ws = calloc(sm, sizeof(double)), *we = calloc(sm, sizeof(double));
    assert_non_null(fs);
    assert_non_null(we);
    int64_t total = 0;
    double mk = 0;
    for (int dev = 0; dev < d; dev++) {
        int64_t cnt;
        const ps_sched_pass *p = ps_sched_device_passes(s, dev, &cnt);
        int64_t off = ps_sched_pass_offset(s, dev);
        double prev_end = 0, busy = 0;
        for (int64_t k = 0; k < cnt; k++) {
            int st = ps_sched_stage_of(s, dev, p[k].chunk);
            assert_true(st >= 0);
            assert_int_equal(ps_sched_device_of(s, st), dev);
            size_t i = (size_t)st * n + p[k].mb;
            double a = r->start[off + k], e = r->end[off + k];
            assert_true(a >= prev_end - EPS); /* no collision on a device */
            prev_end = e;
            busy += e - a;
            if (e > mk) mk = e;
            double w = c->w ? c->w[st] : 0;
            switch (p[k].op) {
            case PS_SCHED_F: fs[i] = a, fe[i] = e; assert_true(fabs(e - a - c->f[st]) < EPS); break;
            case PS_SCHED_B: bs[i] = a, be[i] = e; assert_true(fabs(e - a - c->b[st]) < EPS); break;
            case PS_SCHED_W: ws[i] = a, we[i] = e; assert_true(fabs(e - a - w) < EPS); break;
            default:
                /* a BW is a B whose W follows without a gap */
                bs[i] = a, be[i] = ws[i] = we[i] = e;
                assert_true(fabs(e - a - c->b[st] - w) < EPS);
                break;
            }
        }
        total += cnt;
        assert_true(fabs(busy - r->busy[dev]) < 1e-6);
    }
    assert_true(fabs(mk - r->makespan) < EPS);
    for (int st = 0; st < S; st++)
        for (int m = 0; m < n; m++) {
            size_t i = (size_t)st * n + m;
            bool cross_next = st + 1 < S && ps_sched_device_of(s, st) != ps_sched_device_of(s, st + 1);
            double l = c->p2p && cross_next ? c->p2p[st] : 0;
            if (st + 1 < S) {
                assert_true(fs[i + n] >= fe[i] + l - EPS); /* stage order of forwards */
                assert_true(bs[i] >= be[i + n] + l - EPS); /* stage order of backwards */
            }
            assert_true(bs[i] >= fe[i] - EPS); /* F before B */
            assert_true(ws[i] >= be[i] - EPS); /* B before W */
        }
    (void)total;
    free(fs), free(fe), free(bs), free(be), free(ws), free(we);
}

static const int kchunks[] = {0, 2, 3};

/* kinds that split the backward into B and W */
static bool split_kind(const char *kind)
{
    return strncmp(kind, "zb-", 3) == 0 || strncmp(kind, "v-", 2) == 0;
}

static void test_kinds_table(void **state)
{
    (void)state;
    assert_true(ps_sched_kind_count() >= 4);
    for (int i = 0; i < ps_sched_kind_count(); i++) {
        assert_int_equal(ps_sched_kind_find(ps_sched_kind_name(i)), i);
        assert_non_null(ps_sched_kind_description(i));
    }
    /* the table order is the search's enumeration order (a tie-breaker between equal plans): keep it */
    static const char *const order[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "v-min", "v-half", "v-zb"};
    assert_int_equal(ps_sched_kind_count(), (int)(sizeof order / sizeof order[0]));
    for (int i = 0; i < ps_sched_kind_count(); i++) assert_int_equal(ps_sched_kind_find(order[i]), i);
    assert_int_equal(ps_sched_kind_find("1F1B"), -1); /* case-sensitive */
    assert_int_equal(ps_sched_kind_find(NULL), -1);
    assert_int_equal(ps_sched_kind_find("nope"), -1);
    assert_null(ps_sched_kind_name(-1));
    assert_null(ps_sched_kind_name(ps_sched_kind_count()));
    /* the default chunks are what a build with v = 0 runs: 2 for the chunked kinds, 1 for the others */
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    for (int i = 0; i < ps_sched_kind_count(); i++) {
        const char *kind = ps_sched_kind_name(i);
        bool chunked = strcmp(kind, "interleaved") == 0 || strncmp(kind, "v-", 2) == 0;
        assert_int_equal(ps_sched_kind_default_chunks(i), chunked ? 2 : 1);
        assert_int_equal(ps_sched_build(s, kind, 4, 8, 0), PS_OK);
        assert_int_equal(ps_sched_chunks(s), ps_sched_kind_default_chunks(i));
    }
    ps_sched_destroy(s);
    assert_int_equal(ps_sched_kind_default_chunks(-1), 0);
    assert_int_equal(ps_sched_kind_default_chunks(ps_sched_kind_count()), 0);
    /* the list names every kind in table order, and truncates to the buffer */
    char list[256], want[256] = "";
    for (int i = 0; i < ps_sched_kind_count(); i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "", ps_sched_kind_name(i));
    assert_string_equal(ps_sched_kind_list(list, sizeof list), want);
    assert_string_equal(ps_sched_kind_list(list, 4), "gpi");
    assert_ptr_equal(ps_sched_kind_list(list, 0), list);
    assert_string_equal(ps_sched_op_name(PS_SCHED_F), "F");
    assert_string_equal(ps_sched_op_name(PS_SCHED_B), "B");
    assert_string_equal(ps_sched_op_name(PS_SCHED_W), "W");
    assert_string_equal(ps_sched_op_name(PS_SCHED_BW), "BW");
    assert_string_equal(ps_sched_op_name(4), "?");
    assert_string_equal(ps_sched_op_name(-1), "?");
}

/* Every kind, d = 1..16, n in {d, 2d, 4d, 4d+1, 64}: builds (or refuses n with PS_ERR_INPUT when the kind needs
 * n % d == 0), and the timeline under uneven costs with latency passes the independent checker. */
static void test_sweep(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    int checked = 0;
    for (int k = 0; k < ps_sched_kind_count(); k++) {
        const char *kind = ps_sched_kind_name(k);
        bool multi = strcmp(kind, "interleaved") == 0;
        for (int ci = multi ? 1 : 0; ci < (multi ? 3 : 1); ci++) {
            int v = kchunks[ci];
            for (int d = 1; d <= 16; d++) {
                int ns[] = {d, 2 * d, 4 * d, 4 * d + 1, 64};
                for (int j = 0; j < 5; j++) {
                    int n = ns[j];
                    ps_status st = ps_sched_build(s, kind, d, n, v);
                    if (multi && n % d != 0) {
                        assert_int_equal(st, PS_ERR_INPUT);
                        assert_non_null(strstr(ps_error_message(), "multiple of the devices"));
                        continue;
                    }
                    if (st != PS_OK) fail_msg("%s d=%d n=%d v=%d: %s", kind, d, n, v, ps_error_message());
                    int S = d * ps_sched_chunks(s);
                    assert_int_equal(ps_sched_stages(s), S);
                    bool split = split_kind(kind);
                    assert_int_equal(ps_sched_total_passes(s), (int64_t)S * n * (split ? 3 : 2));
                    costs_buf cb;
                    fill_costs(&cb, S, 1.0, 2.0, 0.7, 0.05, true);
                    ps_sched_result r;
                    assert_int_equal(ps_sched_simulate(s, &cb.c, &r), PS_OK);
                    check_timeline(s, &cb.c, &r);
                    checked++;
                }
            }
        }
    }
    assert_true(checked > 9 * 16 * 5 - 16 * 2 * 4);
    ps_sched_destroy(s);
}

static void sim_equal(ps_sched *s, const char *kind, int d, int n, int v, double f, double b, double w,
                      ps_sched_result *r)
{
    assert_int_equal(ps_sched_build(s, kind, d, n, v), PS_OK);
    static costs_buf cb;
    fill_costs(&cb, d * (v ? v : 1), f, b, w, 0, false);
    assert_int_equal(ps_sched_simulate(s, &cb.c, r), PS_OK);
}

static void test_closed_forms(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    ps_sched_result r;
    for (int d = 1; d <= 16; d++) {
        int ns[] = {1, d, 2 * d, 4 * d + 1, 64};
        for (int j = 0; j < 5; j++) {
            int n = ns[j];
            sim_equal(s, "1f1b", d, n, 1, 1.0, 1.3, 0.9, &r);
            assert_true(fabs(r.bubble_frac - ps_sched_bubble_1f1b(d, n)) < 1e-9);
            for (int i = 0; i < d; i++) assert_true(fabs(r.peak_act[i] - ps_sched_peak_mb_1f1b(d, n, i)) < 1e-9);
            sim_equal(s, "gpipe", d, n, 1, 1.0, 1.3, 0.9, &r);
            assert_true(fabs(r.bubble_frac - ps_sched_bubble_1f1b(d, n)) < 1e-9);
            for (int i = 0; i < d; i++) assert_true(fabs(r.peak_act[i] - n) < 1e-9);
            sim_equal(s, "zb-h1", d, n, 1, 1.0, 1.0, 1.0, &r);
            /* with fewer micro-batches than devices the W passes cannot hide the bubble */
            if (n >= d) assert_true(fabs(r.bubble_frac - ps_sched_bubble_zbh1_equal(d, n)) < 1e-9);
            /* ZB-H1 keeps 1F1B's peak (d micro-batches), now on every device */
            for (int i = 0; i < d; i++) assert_true(r.peak_act[i] <= (n < d ? n : d) + 1e-9);
            if (n % d == 0)
                for (int v = 2; v <= 4; v++) {
                    sim_equal(s, "interleaved", d, n, v, 1.0 / v, 2.0 / v, 0, &r);
                    assert_true(fabs(r.bubble_frac - ps_sched_bubble_interleaved(d, n, v)) < 1e-9);
                }
        }
    }
    /* ZB-H2: with n >= 2d the only idle time is the last device's wait for its first F, whatever F, B, W take
     * (the zero-bubble paper's parallelogram), and at most 2d-1 micro-batches are held */
    const double fbw[][3] = {{1, 1, 1}, {1, 1, 0.5}, {12.96, 13.22, 9.76}, {6.72, 6.89, 5.06}, {1.5, 1, 0.5}};
    for (int d = 1; d <= 16; d++)
        for (int n = 2 * d; n <= 4 * d + 1; n += 2 * d + 1)
            for (size_t j = 0; j < sizeof fbw / sizeof fbw[0]; j++) {
                sim_equal(s, "zb-h2", d, n, 1, fbw[j][0], fbw[j][1], fbw[j][2], &r);
                double want = ps_sched_makespan_zbh2(d, n, fbw[j][0], fbw[j][1], fbw[j][2]);
                if (fabs(r.makespan - want) > 1e-9 * want)
                    fail_msg("zb-h2 d=%d n=%d F=%g B=%g W=%g: makespan %g, closed form %g", d, n, fbw[j][0],
                             fbw[j][1], fbw[j][2], r.makespan, want);
                for (int i = 0; i < d; i++) assert_true(r.peak_act[i] <= 2 * d - 1 + 1e-9);
            }
    /* V shapes (Eq. 1-2, Table 1): peak activation in stage-micro-batches, the same on every device; 1F1B's is 2d
     * of them (d micro-batches of a stage twice as deep) */
    const char *vk[] = {"v-min", "v-half", "v-zb"};
    for (int d = 1; d <= 16; d++)
        for (int k = 0; k < 3; k++) {
            int ns[] = {d, 2 * d, 4 * d, 4 * d + 1, 64};
            for (int j = 0; j < 5; j++) {
                sim_equal(s, vk[k], d, ns[j], 2, 1.0, 1.0, 1.0, &r);
                int want = ps_sched_peak_v(vk[k], d);
                double mx = 0;
                for (int i = 0; i < d; i++) mx = r.peak_act[i] > mx ? r.peak_act[i] : mx;
                if (ns[j] >= 4 * d ? fabs(mx - want) > 1e-9 : mx > want + 1e-9)
                    fail_msg("%s d=%d n=%d: peak %g, closed form %d", vk[k], d, ns[j], mx, want);
            }
        }
    /* V-ZB (Sec. 3.2 with App. C's reordering): with F = B = W and n >= d every device idles d-1 units, the lower
     * bound (the last device starts at d-1 and has 6n units of work), and with unequal times the idle does not
     * grow with n (App. E: no repeating bubble) */
    for (int d = 1; d <= 16; d++)
        for (int n = d; n <= 4 * d + 1; n += d) {
            sim_equal(s, "v-zb", d, n, 2, 1.0, 1.0, 1.0, &r);
            if (fabs(r.makespan - (6.0 * n + d - 1)) > 1e-9)
                fail_msg("v-zb d=%d n=%d: makespan %g, want 6n+d-1 = %d", d, n, r.makespan, 6 * n + d - 1);
        }
    for (size_t j = 0; j < sizeof fbw / sizeof fbw[0]; j++)
        for (int d = 2; d <= 16; d += 7) {
            double idle[2];
            for (int k = 0; k < 2; k++) {
                int n = k ? 16 * d : 4 * d;
                sim_equal(s, "v-zb", d, n, 2, fbw[j][0], fbw[j][1], fbw[j][2], &r);
                idle[k] = r.makespan - 2.0 * n * (fbw[j][0] + fbw[j][1] + fbw[j][2]);
            }
            if (idle[1] > idle[0] + 1e-6 * idle[0] + 1e-9)
                fail_msg("v-zb d=%d F=%g B=%g W=%g: idle per device grows from %g (n=4d) to %g (n=16d)", d, fbw[j][0],
                         fbw[j][1], fbw[j][2], idle[0], idle[1]);
        }
    assert_int_equal(ps_sched_peak_v("1f1b", 4), -1);
    /* the 1F1B makespan itself: (n + d - 1)(F + B + W) */
    sim_equal(s, "1f1b", 4, 8, 1, 1.0, 1.5, 0.5, &r);
    assert_true(fabs(r.makespan - 11 * 3.0) < 1e-9);
    ps_sched_destroy(s);
}

/* Latency and uneven stages: 1F1B with d = 2, n = 1 is a chain F0 F1 B1 B0 with two sends. */
static void test_latency_uneven(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    assert_int_equal(ps_sched_build(s, "1f1b", 2, 1, 0), PS_OK);
    double f[] = {1, 2}, b[] = {3, 4}, w[] = {0.5, 0.25}, p[] = {0.1}, act[] = {10, 20};
    ps_sched_costs c = {.f = f, .b = b, .w = w, .p2p = p, .act = act};
    ps_sched_result r;
    assert_int_equal(ps_sched_simulate(s, &c, &r), PS_OK);
    assert_true(fabs(r.makespan - (1 + 0.1 + 2 + 4.25 + 0.1 + 3.5)) < 1e-12);
    assert_true(fabs(r.peak_act[0] - 10) < 1e-12 && fabs(r.peak_act[1] - 20) < 1e-12);
    /* a slow stage bounds the makespan from below by its own work */
    assert_int_equal(ps_sched_build(s, "1f1b", 4, 32, 0), PS_OK);
    double f4[] = {1, 1, 3, 1}, b4[] = {2, 2, 6, 2};
    ps_sched_costs c4 = {.f = f4, .b = b4};
    assert_int_equal(ps_sched_simulate(s, &c4, &r), PS_OK);
    assert_true(r.makespan >= 32 * 9.0 - 1e-9);
    assert_true(fabs(r.idle[2] - (r.makespan - 32 * 9.0)) < 1e-9);
    ps_sched_destroy(s);
}

static void expect_input(ps_status st, const char *needle)
{
    assert_int_equal(st, PS_ERR_INPUT);
    if (!strstr(ps_error_message(), needle)) fail_msg("message '%s' lacks '%s'", ps_error_message(), needle);
}

static void test_bad_input(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    expect_input(ps_sched_build(s, "1f1b", 0, 8, 0), "d must be >= 1");
    expect_input(ps_sched_build(s, "1f1b", 4, 0, 0), "n must be >= 1");
    expect_input(ps_sched_build(s, "gpipe", -3, 8, 0), "d must be >= 1");
    expect_input(ps_sched_build(s, "interleaved", 4, 6, 2), "multiple of the devices d (n=6, d=4)");
    expect_input(ps_sched_build(s, "interleaved", 4, 8, 1), "v in 2..");
    expect_input(ps_sched_build(s, "1f1b", 4, 8, 2), "v in 1..1");
    expect_input(ps_sched_build(s, "v-half", 4, 8, 1), "v in 2..2");
    expect_input(ps_sched_build(s, "v-zb", 4, 8, 3), "v in 2..2");
    expect_input(ps_sched_build(s, "zb-h3", 4, 8, 0), "unknown schedule kind 'zb-h3' (kinds: gpipe, 1f1b,");
    expect_input(ps_sched_build(s, NULL, 4, 8, 0), "unknown schedule kind");
    /* a failed build leaves nothing to simulate */
    double f[4] = {1, 1, 1, 1}, b[4] = {1, 1, 1, 1};
    ps_sched_costs c = {.f = f, .b = b};
    ps_sched_result r;
    expect_input(ps_sched_simulate(s, &c, &r), "no schedule built");
    assert_int_equal(ps_sched_build(s, "1f1b", 4, 8, 0), PS_OK);
    b[2] = -1;
    expect_input(ps_sched_simulate(s, &c, &r), "stage 2: B time must be finite and >= 0");
    b[2] = NAN;
    expect_input(ps_sched_simulate(s, &c, &r), "stage 2: B time");
    b[2] = 1;
    double p[3] = {0, -0.5, 0};
    c.p2p = p;
    expect_input(ps_sched_simulate(s, &c, &r), "p2p latency between stages 1 and 2");
    c.p2p = NULL;
    c.b = NULL;
    expect_input(ps_sched_simulate(s, &c, &r), "F and B times");
    ps_sched_destroy(s);
}

static void test_custom_orders(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    /* d = 2, n = 2, split backward; device 1 first does B of micro-batch 0 before its F: deadlock */
    ps_sched_pass bad[] = {
        {0, 0, PS_SCHED_F, 0}, {1, 0, PS_SCHED_F, 0}, {0, 0, PS_SCHED_B, 0}, {1, 0, PS_SCHED_B, 0},
        {0, 0, PS_SCHED_W, 0}, {1, 0, PS_SCHED_W, 0},
        {0, 0, PS_SCHED_B, 0}, {0, 0, PS_SCHED_F, 0}, {1, 0, PS_SCHED_F, 0}, {1, 0, PS_SCHED_B, 0},
        {0, 0, PS_SCHED_W, 0}, {1, 0, PS_SCHED_W, 0},
    };
    int64_t counts[] = {6, 6};
    expect_input(ps_sched_set_order(s, 2, 2, 1, PS_SCHED_PLACE_LOOP, bad, counts), "the order deadlocks: device");
    /* the same order with device 1 fixed is valid */
    ps_sched_pass good[12];
    memcpy(good, bad, sizeof good);
    good[6] = (ps_sched_pass){0, 0, PS_SCHED_F, 0};
    good[7] = (ps_sched_pass){0, 0, PS_SCHED_B, 0};
    assert_int_equal(ps_sched_set_order(s, 2, 2, 1, PS_SCHED_PLACE_LOOP, good, counts), PS_OK);
    assert_string_equal(ps_sched_kind(s), "custom");
    /* W before its B on the same device */
    ps_sched_pass wb[12];
    memcpy(wb, good, sizeof wb);
    wb[2] = (ps_sched_pass){0, 0, PS_SCHED_W, 0};
    wb[4] = (ps_sched_pass){0, 0, PS_SCHED_B, 0};
    expect_input(ps_sched_set_order(s, 2, 2, 1, PS_SCHED_PLACE_LOOP, wb, counts), "deadlocks: device 0");
    /* duplicate, missing, out of range, bad op */
    ps_sched_pass dup[12];
    memcpy(dup, good, sizeof dup);
    dup[1].mb = 0;
    expect_input(ps_sched_set_order(s, 2, 2, 1, PS_SCHED_PLACE_LOOP, dup, counts), "scheduled twice");
    int64_t short_counts[] = {5, 6};
    expect_input(ps_sched_set_order(s, 2, 2, 1, PS_SCHED_PLACE_LOOP, good, short_counts), "never scheduled");
    ps_sched_pass oor[12];
    memcpy(oor, good, sizeof oor);
    oor[3].mb = 7;
    expect_input(ps_sched_set_order(s, 2, 2, 1, PS_SCHED_PLACE_LOOP, oor, counts), "micro-batch 7 is outside 0..1");
    oor[3].mb = 1;
    oor[3].op = 9;
    expect_input(ps_sched_set_order(s, 2, 2, 1, PS_SCHED_PLACE_LOOP, oor, counts), "op 9 does not exist");
    /* a BW and a separate B of the same micro-batch collide */
    ps_sched_pass bw[12];
    memcpy(bw, good, sizeof bw);
    bw[2].op = PS_SCHED_BW;
    expect_input(ps_sched_set_order(s, 2, 2, 1, PS_SCHED_PLACE_LOOP, bw, counts), "scheduled twice");
    ps_sched_destroy(s);
}

/* ps_sched_check, ps_sched_valid and ps_sched_ensure refuse exactly what ps_sched_build refuses, with the same
 * status, over every kind and a grid of sizes that breaks each rule (n not a multiple of d, chunks out of range, too
 * many passes); what ps_sched_ensure builds is that order. */
static void test_check_matches_build(void **state)
{
    (void)state;
    ps_sched *s, *e;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    assert_int_equal(ps_sched_create(&e), PS_OK);
    const int ds[] = {0, 1, 3, 4}, ns[] = {0, 1, 6, 8, 1 << 30}, vs[] = {-1, 0, 1, 2, 3};
    int refused = 0, built = 0;
    for (int k = -1; k < ps_sched_kind_count(); k++) {
        const char *kind = k < 0 ? "no-such-kind" : ps_sched_kind_name(k);
        for (size_t a = 0; a < sizeof ds / sizeof ds[0]; a++)
            for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
                for (size_t c = 0; c < sizeof vs / sizeof vs[0]; c++) {
                    ps_status want = ps_sched_build(s, kind, ds[a], ns[b], vs[c]);
                    ps_error_clear();
                    ps_status got = ps_sched_check(kind, ds[a], ns[b], vs[c]);
                    ps_error_clear();
                    if (got != want)
                        fail_msg("%s d %d n %d v %d: check %d, build %d", kind, ds[a], ns[b], vs[c], (int)got,
                                 (int)want);
                    /* the predicate: the same answer, and no trace of it in the error slot */
                    if (ps_sched_valid(kind, ds[a], ns[b], vs[c]) != (want == PS_OK))
                        fail_msg("%s d %d n %d v %d: ps_sched_valid disagrees with build (%d)", kind, ds[a], ns[b],
                                 vs[c], (int)want);
                    assert_int_equal(ps_error_status(), PS_OK);
                    /* generate: the same refusals; the order alone is not simulated until ensure completes it */
                    assert_int_equal(ps_sched_build(e, "1f1b", 2, 4, 1), PS_OK);
                    got = ps_sched_generate(e, kind, ds[a], ns[b], vs[c]);
                    ps_error_clear();
                    assert_int_equal(got, want);
                    if (want == PS_OK) {
                        assert_int_equal(ps_sched_total_passes(e), ps_sched_total_passes(s));
                        double one[8] = {1, 1, 1, 1, 1, 1, 1, 1};
                        ps_sched_costs uc = {.f = one, .b = one};
                        ps_sched_result ur;
                        bool unit = ps_sched_stages(e) <= 8;
                        if (unit) {
                            assert_int_equal(ps_sched_simulate(e, &uc, &ur), PS_ERR_INPUT);
                            ps_error_clear();
                        }
                        assert_int_equal(ps_sched_ensure(e, kind, ds[a], ns[b], vs[c]), PS_OK);
                        if (unit) assert_int_equal(ps_sched_simulate(e, &uc, &ur), PS_OK);
                        /* held and verified: generate keeps it so */
                        assert_int_equal(ps_sched_generate(e, kind, ds[a], ns[b], vs[c]), PS_OK);
                        if (unit) assert_int_equal(ps_sched_simulate(e, &uc, &ur), PS_OK);
                    }
                    /* ensure on a workspace holding some other order (or none): the same answer, that order */
                    assert_int_equal(ps_sched_build(e, "1f1b", 2, 4, 1), PS_OK);
                    got = ps_sched_ensure(e, kind, ds[a], ns[b], vs[c]);
                    ps_error_clear();
                    assert_int_equal(got, want);
                    if (want == PS_OK) {
                        assert_string_equal(ps_sched_kind(e), kind);
                        assert_int_equal(ps_sched_devices(e), ds[a]);
                        assert_int_equal(ps_sched_micro_batches(e), ns[b]);
                        assert_int_equal(ps_sched_total_passes(e), ps_sched_total_passes(s));
                        assert_int_equal(ps_sched_ensure(e, kind, ds[a], ns[b], vs[c]), PS_OK); /* held: kept */
                    }
                    refused += want != PS_OK;
                    built += want == PS_OK;
                }
    }
    assert_true(refused > 0 && built > 0);
    ps_sched_destroy(s);
    ps_sched_destroy(e);
}

/* One workspace through growing and shrinking problems gives the same answers as fresh ones. */
/* ps_sched_peak_points against the simulation: for every kind over a grid of sizes and random per-chunk activation
 * sizes, the best point of each device is its simulated peak_act (to rounding), every point is reached by no more
 * than that peak, and no point dominates another. Also its refusals. */
static void test_peak_points(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    int pts[64 * 3], np = 0;
    assert_int_equal(ps_sched_peak_points(s, 0, pts, 64, &np), PS_ERR_INPUT); /* nothing built */
    ps_error_clear();
    uint64_t rng = 12345;
    int checked = 0, most = 0;
    for (int k = 0; k < ps_sched_kind_count(); k++) {
        const char *kind = ps_sched_kind_name(k);
        for (int d = 1; d <= 6; d++)
            for (int n = 1; n <= 13; n++)
                for (int v = 1; v <= 3; v++) {
                    if (ps_sched_build(s, kind, d, n, v) != PS_OK) {
                        ps_error_clear();
                        continue;
                    }
                    int S = d * v;
                    double f[18], b[18], w[18], act[18];
                    for (int rep = 0; rep < 3; rep++) {
                        for (int st = 0; st < S; st++) {
                            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                            f[st] = 1 + (double)(rng >> 40 & 7);
                            b[st] = 2 * f[st];
                            w[st] = f[st];
                            act[st] = rep == 0 ? 1 : 0.5 + (double)(rng >> 20 & 1023) / 64;
                        }
                        ps_sched_costs costs = {.f = f, .b = b, .w = w, .act = act};
                        ps_sched_result r;
                        assert_int_equal(ps_sched_simulate(s, &costs, &r), PS_OK);
                        for (int dev = 0; dev < d; dev++) {
                            assert_int_equal(ps_sched_peak_points(s, dev, pts, 64, &np), PS_OK);
                            assert_true(np >= 1);
                            most = np > most ? np : most;
                            double best = 0;
                            for (int i = 0; i < np; i++) {
                                double sum = 0;
                                for (int c = 0; c < v; c++) {
                                    assert_true(pts[i * v + c] >= 0 && pts[i * v + c] <= n);
                                    sum += pts[i * v + c] * act[ps_sched_stage_of(s, dev, c)];
                                }
                                best = sum > best ? sum : best;
                                for (int j = 0; j < np; j++) {
                                    bool le = j != i;
                                    for (int c = 0; c < v && le; c++) le = pts[i * v + c] <= pts[j * v + c];
                                    if (le) fail_msg("%s d %d n %d v %d dev %d: point %d is covered by point %d", kind,
                                                     d, n, v, dev, i, j);
                                }
                            }
                            if (fabs(best - r.peak_act[dev]) > 1e-9 * r.peak_act[dev])
                                fail_msg("%s d %d n %d v %d dev %d: points give %.17g, simulation %.17g", kind, d, n,
                                         v, dev, best, r.peak_act[dev]);
                            checked++;
                        }
                    }
                }
    }
    assert_true(checked > 1000);
    printf("# %d device peaks matched, at most %d points per device\n", checked, most);
    assert_int_equal(ps_sched_build(s, "1f1b", 4, 8, 1), PS_OK);
    assert_int_equal(ps_sched_peak_points(s, 4, pts, 64, &np), PS_ERR_INPUT); /* no device 4 */
    ps_error_clear();
    assert_int_equal(ps_sched_peak_points(s, 0, pts, 0, &np), PS_ERR_INPUT); /* no room */
    ps_error_clear();
    assert_int_equal(ps_sched_build(s, "interleaved", 4, 8, 3), PS_OK);
    assert_int_equal(ps_sched_peak_points(s, 0, pts, 1, &np), PS_ERR_INPUT); /* room for the scratch only */
    assert_non_null(strstr(ps_error_message(), "more than 0"));
    ps_error_clear();
    ps_sched_destroy(s);
}

static void test_reuse(void **state)
{
    (void)state;
    ps_sched *a, *b;
    assert_int_equal(ps_sched_create(&a), PS_OK);
    const struct { const char *k; int d, n, v; } cases[] = {
        {"1f1b", 8, 64, 0}, {"interleaved", 4, 8, 3}, {"zb-h1", 16, 65, 0}, {"gpipe", 2, 3, 0}, {"1f1b", 64, 1024, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(ps_sched_create(&b), PS_OK);
        int S = cases[i].d * (cases[i].v ? cases[i].v : 1);
        costs_buf *cb = malloc(sizeof *cb);
        assert_non_null(cb);
        fill_costs(cb, S, 1.0, 2.0, 0.5, 0.01, S <= MAXS);
        if (S > MAXS) {
            double *f = calloc(S, sizeof(double)), *bb = calloc(S, sizeof(double));
            for (int j = 0; j < S; j++) f[j] = 1.0, bb[j] = 2.0;
            cb->c = (ps_sched_costs){.f = f, .b = bb};
        }
        ps_sched_result ra, rb;
        assert_int_equal(ps_sched_build(a, cases[i].k, cases[i].d, cases[i].n, cases[i].v), PS_OK);
        assert_int_equal(ps_sched_simulate(a, &cb->c, &ra), PS_OK);
        assert_int_equal(ps_sched_build(b, cases[i].k, cases[i].d, cases[i].n, cases[i].v), PS_OK);
        assert_int_equal(ps_sched_simulate(b, &cb->c, &rb), PS_OK);
        assert_true(ra.makespan == rb.makespan && ra.bubble_frac == rb.bubble_frac);
        assert_memory_equal(ra.start, rb.start, (size_t)ps_sched_total_passes(a) * sizeof(double));
        if (S > MAXS) {
            free((void *)cb->c.f);
            free((void *)cb->c.b);
        } else {
            check_timeline(a, &cb->c, &ra);
        }
        free(cb);
        ps_sched_destroy(b);
    }
    ps_sched_destroy(a);
}

/* ---- golden timelines (d = 4, n = 8, F = 1, B = 1, W = 1: a BW takes 2) ---- */

static void render(ps_sched *s, const ps_sched_result *r, char *buf, size_t cap)
{
    static const char op[] = {'F', 'B', 'W', 'X'};
    buf[0] = 0;
    ps_strcatf(buf, cap, "# kind %s d=%d n=%d v=%d F=1 B=1 W=1 p2p=0; X = B and W fused; pass@start\n",
               ps_sched_kind(s), ps_sched_devices(s), ps_sched_micro_batches(s), ps_sched_chunks(s));
    ps_strcatf(buf, cap, "makespan %g bubble %.6f\n", r->makespan, r->bubble_frac);
    for (int dev = 0; dev < ps_sched_devices(s); dev++) {
        int64_t cnt;
        const ps_sched_pass *p = ps_sched_device_passes(s, dev, &cnt);
        int64_t off = ps_sched_pass_offset(s, dev);
        ps_strcatf(buf, cap, "dev %d peak %g:", dev, r->peak_act[dev]);
        for (int64_t k = 0; k < cnt; k++) {
            ps_strcatf(buf, cap, " %c%d", op[p[k].op], (int)p[k].mb);
            if (ps_sched_chunks(s) > 1) ps_strcatf(buf, cap, ".%d", (int)p[k].chunk);
            ps_strcatf(buf, cap, "@%g", r->start[off + k]);
        }
        ps_strcatf(buf, cap, "\n");
    }
}

static void test_golden(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    const struct { const char *k; int v; const char *file; } g[] = {
        {"gpipe", 1, "gpipe_d4_n8.txt"},
        {"1f1b", 1, "1f1b_d4_n8.txt"},
        {"interleaved", 2, "interleaved_v2_d4_n8.txt"},
        {"zb-h1", 1, "zb-h1_d4_n8.txt"},
        {"zb-h2", 1, "zb-h2_d4_n8.txt"},
        {"v-min", 2, "v-min_d4_n8.txt"},
        {"v-half", 2, "v-half_d4_n8.txt"},
        {"v-zb", 2, "v-zb_d4_n8.txt"},
    };
    static char buf[16384];
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        ps_sched_result r;
        assert_int_equal(ps_sched_build(s, g[i].k, 4, 8, g[i].v), PS_OK);
        costs_buf cb;
        fill_costs(&cb, 4 * g[i].v, 1.0, 1.0, 1.0, 0, false);
        assert_int_equal(ps_sched_simulate(s, &cb.c, &r), PS_OK);
        render(s, &r, buf, sizeof buf);
        char path[512];
        snprintf(path, sizeof path, "%s/%s", PS_SCHED_GOLDEN_DIR, g[i].file);
        if (getenv("PS_UPDATE_GOLDEN")) assert_int_equal(ps_write_file_atomic(path, buf, strlen(buf)), PS_OK);
        char *want = NULL;
        size_t len;
        if (ps_read_file(path, &want, &len) != PS_OK) fail_msg("%s", ps_error_message());
        if (strcmp(want, buf) != 0) fail_msg("%s differs from the simulation:\n%s", path, buf);
        free(want);
    }
    ps_sched_destroy(s);
}

/* Tags balance: every <x ...> is closed by </x> in order or self-closes; returns the number of elements. */
static int check_xml(const char *p)
{
    char stack[64][32];
    int depth = 0, elements = 0;
    while ((p = strchr(p, '<'))) {
        const char *e = strchr(p, '>');
        assert_non_null(e);
        if (p[1] == '/') {
            assert_true(depth > 0);
            size_t n = strlen(stack[depth - 1]);
            if (strncmp(p + 2, stack[depth - 1], n) != 0 || p[2 + n] != '>') fail_msg("unbalanced at %.40s", p);
            depth--;
        } else {
            char name[32];
            size_t n = strcspn(p + 1, " />");
            assert_true(n > 0 && n < sizeof name);
            memcpy(name, p + 1, n);
            name[n] = 0;
            elements++;
            if (e[-1] != '/') {
                assert_true(depth < 64);
                strcpy(stack[depth++], name);
            }
        }
        for (const char *q = p + 1; q < e; q++) assert_true(*q != '<'); /* no stray '<' inside a tag */
        p = e + 1;
    }
    assert_int_equal(depth, 0);
    return elements;
}

static int count(const char *hay, const char *needle)
{
    int c = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) c++;
    return c;
}

static void test_svg(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    const struct { const char *k; int d, n; } g[] = {{"1f1b", 4, 8}, {"v-half", 4, 8}, {"zb-h2", 6, 12},
                                                    {"interleaved", 4, 8}, {"v-zb", 1, 1}};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        assert_int_equal(ps_sched_build(s, g[i].k, g[i].d, g[i].n, 0), PS_OK);
        costs_buf cb;
        fill_costs(&cb, ps_sched_stages(s), 1.0, 1.0, 1.0, 0.05, false);
        ps_sched_result r;
        assert_int_equal(ps_sched_simulate(s, &cb.c, &r), PS_OK);
        char *svg = NULL;
        size_t len = 0;
        assert_int_equal(ps_sched_svg(s, &r, NULL, &svg, &len), PS_OK);
        assert_int_equal(len, strlen(svg));
        assert_true(strncmp(svg, "<svg ", 5) == 0);
        check_xml(svg);
        assert_int_equal(count(svg, "class=\"row\""), g[i].d);
        /* one coloured rectangle per pass, none merged: every pass is wider than a pixel here (plus row
         * backgrounds, page and legend) */
        assert_int_equal(count(svg, "class=\"pass\""), (int)ps_sched_total_passes(s));
        assert_int_equal(count(svg, "class=\"merged\""), 0);
        assert_int_equal(count(svg, "<rect"), (int)ps_sched_total_passes(s) + g[i].d + 1 + 5);
        assert_non_null(strstr(svg, ">dev 0</text>"));
        assert_non_null(strstr(svg, ">time</text>"));
        assert_non_null(strstr(svg, g[i].k));
        assert_non_null(strstr(svg, "bubble"));
        const char *dir = getenv("PS_SCHED_SVG_DIR"); /* to look at them: PS_SCHED_SVG_DIR=/tmp ctest ... */
        if (dir) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s_d%d_n%d.svg", dir, g[i].k, g[i].d, g[i].n);
            assert_int_equal(ps_write_file_atomic(path, svg, len), PS_OK);
        }
        free(svg);
    }
    ps_sched_result r = {0};
    char *svg;
    expect_input(ps_sched_svg(s, &r, NULL, &svg, NULL), "no simulated schedule");
    ps_sched_destroy(s);
}

/* The simulation of gpipe on d devices, n micro-batches, F t, B t, W t (a BW pass takes 2t), drawn. */
static char *gpipe_svg(ps_sched *s, int d, int n, double t, const ps_sched_svg_opts *o, size_t *len)
{
    assert_int_equal(ps_sched_build(s, "gpipe", d, n, 0), PS_OK);
    costs_buf cb;
    fill_costs(&cb, d, t, t, t, 0, false);
    ps_sched_result r;
    assert_int_equal(ps_sched_simulate(s, &cb.c, &r), PS_OK);
    char *svg = NULL;
    assert_int_equal(ps_sched_svg(s, &r, o, &svg, len), PS_OK);
    check_xml(svg);
    return svg;
}

/* Passes narrower than a pixel are merged (issue #22: 12,302 rectangles, 2.4 MB for gpt3-175b on 128 GPUs), and only
 * those: the figures below are worked out by hand from the 1200 px the makespan spans. */
static void test_svg_merge(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    size_t len = 0;
    /* 1 device, 100 micro-batches: makespan 300, F 4 px and BW 8 px wide: every pass drawn */
    char *svg = gpipe_svg(s, 1, 100, 1.0, NULL, &len);
    assert_int_equal(count(svg, "class=\"pass\""), 200);
    assert_int_equal(count(svg, "class=\"merged\""), 0);
    assert_null(strstr(svg, "drawn merged"));
    free(svg);
    /* 1000 micro-batches: makespan 3000, F 0.4 px and BW 0.8 px back to back: one rectangle, in BW's colour (2000 of
     * the 3000 time units), its tooltip counting the passes */
    svg = gpipe_svg(s, 1, 1000, 1.0, NULL, &len);
    assert_int_equal(count(svg, "class=\"pass\""), 0);
    assert_int_equal(count(svg, "class=\"merged\""), 1);
    assert_non_null(strstr(svg, "<rect class=\"merged\" x=\"80.00\" y=\"48.0\" width=\"1200.00\" height=\"26\" "
                                "fill=\"#e15759\"><title>2000 passes merged (each under a pixel): F 1000, B 0, W 0, "
                                "BW 1000; micro-batches 0-999; 0 - 3000</title>"));
    assert_non_null(strstr(svg, "1 blocks of consecutive passes each narrower than a pixel are drawn merged"));
    assert_true(len < 4000);
    free(svg);
    /* 2 devices: device 0 runs its F passes in [0, 1000), idles while the last micro-batch reaches device 1 and its
     * BW comes back ([1000, 1003): 1.2 px of the makespan 3003), then its BW passes to 3003; that gap splits its
     * passes into an F block and a BW block. Device 1 runs from 1 to 3001 without a gap: one block, BW's colour. */
    svg = gpipe_svg(s, 2, 1000, 1.0, NULL, &len);
    assert_int_equal(count(svg, "class=\"pass\""), 0);
    assert_int_equal(count(svg, "class=\"merged\""), 3);
    assert_int_equal(count(svg, "fill=\"#4e79a7\"><title>1000 passes merged (each under a pixel): F 1000, B 0"), 1);
    assert_int_equal(count(svg, "fill=\"#e15759\"><title>1000 passes merged (each under a pixel): F 0, B 0, W 0, "
                                "BW 1000; micro-batches 0-999; 1003 - 3003"), 1);
    assert_int_equal(count(svg, "fill=\"#e15759\"><title>2000 passes merged"), 1);
    free(svg);
    ps_sched_destroy(s);
}

/* Row labels from the caller (escaped), and an axis in seconds whose ticks take the unit their spacing suits. */
static void test_svg_labels(void **state)
{
    (void)state;
    ps_sched *s;
    assert_int_equal(ps_sched_create(&s), PS_OK);
    const char *labels[] = {"GPUs 0-15", "GPUs 16-31 <&>"};
    ps_sched_svg_opts o = {.row_labels = labels, .seconds = true};
    size_t len = 0;
    /* gpipe 2 x 4, times 1 s each: makespan 3 x (4 + 1) = 15 s, ticks 2 s apart */
    char *svg = gpipe_svg(s, 2, 4, 1.0, &o, &len);
    assert_non_null(strstr(svg, ">GPUs 0-15</text>"));
    assert_non_null(strstr(svg, ">GPUs 16-31 &lt;&amp;&gt;</text>"));
    assert_null(strstr(svg, ">dev 0<"));
    assert_non_null(strstr(svg, ">time (s)</text>"));
    assert_non_null(strstr(svg, "makespan 15 s"));
    assert_non_null(strstr(svg, "text-anchor=\"middle\">14</text>"));
    /* the label column widens for long labels (16 + 7 px a character; 80 px at least) */
    assert_non_null(strstr(svg, "<rect class=\"idle\" x=\"114\""));
    free(svg);
    /* 4000 micro-batches: makespan 12003 s, ticks every 1000 s, still in s */
    svg = gpipe_svg(s, 2, 4000, 1.0, &o, &len);
    assert_non_null(strstr(svg, ">time (s)</text>"));
    assert_non_null(strstr(svg, "text-anchor=\"middle\">12000</text>"));
    free(svg);
    /* passes of 1 ms: makespan 15 ms, ticks 0, 2, ... 14 ms */
    svg = gpipe_svg(s, 2, 4, 1e-3, &o, &len);
    assert_non_null(strstr(svg, ">time (ms)</text>"));
    assert_non_null(strstr(svg, "makespan 15 ms"));
    assert_non_null(strstr(svg, "text-anchor=\"middle\">14</text>"));
    free(svg);
    /* of 1 microsecond: in microseconds (the XML character reference of the micro sign) */
    svg = gpipe_svg(s, 2, 4, 1e-6, &o, &len);
    assert_non_null(strstr(svg, ">time (&#181;s)</text>"));
    free(svg);
    /* unitless (psearch schedule's --fbw units), with the caller's axis name and the devices' own row labels */
    ps_sched_svg_opts u = {.time_label = "time (units of --fbw)"};
    svg = gpipe_svg(s, 2, 4, 1.0, &u, &len);
    assert_non_null(strstr(svg, ">time (units of --fbw)</text>"));
    assert_non_null(strstr(svg, ">dev 1</text>"));
    assert_non_null(strstr(svg, "makespan 15, "));
    free(svg);
    ps_sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_table),  cmocka_unit_test(test_sweep),       cmocka_unit_test(test_closed_forms),
        cmocka_unit_test(test_latency_uneven), cmocka_unit_test(test_bad_input), cmocka_unit_test(test_custom_orders),
        cmocka_unit_test(test_reuse),        cmocka_unit_test(test_check_matches_build),
        cmocka_unit_test(test_peak_points),  cmocka_unit_test(test_golden),      cmocka_unit_test(test_svg),
        cmocka_unit_test(test_svg_merge),    cmocka_unit_test(test_svg_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

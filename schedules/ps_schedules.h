/* psearch pipeline schedules: the per-device order of F / B / W passes of each schedule kind (GPipe, 1F1B,
 * interleaved 1F1B, ZB-H1, ZB-H2, V-Min, V-Half, V-ZB), its verification, and an event simulation of that order
 * (makespan, idle, bubble, per-pass start/end, per-device peak activation memory). Pure computation: no MPI, no I/O.
 *
 * Use: create one workspace, then build (kind, d, n, v) and simulate with per-stage costs as often as needed; the
 * workspace keeps its buffers between calls, so a search loop allocates only when a call needs more than before.
 * Pointers handed out (pass lists, results) stay valid until the next build / set_order / simulate on the workspace.
 * A workspace is not shared between threads: give each OpenMP thread its own. */
#ifndef PS_SCHEDULES_H
#define PS_SCHEDULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One pass of one micro-batch on one chunk. BW is the whole backward (B then W fused, as 1F1B runs it); kinds that
 * split the backward (zero bubble) emit B and W separately. */
typedef enum {
    PS_SCHED_F = 0,  /* forward */
    PS_SCHED_B = 1,  /* backward for the input (activation gradient) */
    PS_SCHED_W = 2,  /* backward for the weights */
    PS_SCHED_BW = 3  /* B and W in one pass */
} ps_sched_op;

typedef struct {
    int32_t mb;    /* micro-batch, 0 .. n-1 */
    uint16_t chunk; /* model chunk on this device, 0 .. v-1 (the stage follows from device, chunk and placement) */
    uint8_t op;    /* ps_sched_op */
    uint8_t reserved_;
} ps_sched_pass;

/* How the d*v stages sit on the d devices. */
typedef enum {
    PS_SCHED_PLACE_LOOP = 0, /* stage c*d + i on device i (1F1B, interleaved: chunk c loops over the devices) */
    PS_SCHED_PLACE_V = 1     /* v = 2: stage i and stage 2d-1-i on device i (V-shape) */
} ps_sched_placement;

/* Which micro-batch counts a kind accepts. */
typedef enum {
    PS_SCHED_N_ANY = 0,         /* any n >= 1 */
    PS_SCHED_N_MULTIPLE_OF_D = 1 /* n a multiple of d (Megatron's interleaved schedule asserts it) */
} ps_sched_n_rule;

typedef struct ps_sched ps_sched;

ps_status ps_sched_create(ps_sched **out) PS_NODISCARD;
void ps_sched_destroy(ps_sched *s);

/* ---- schedule kinds (a const table, chosen by name) ---- */
int ps_sched_kind_count(void);
/* Name / one-line description of kind i (0 .. count-1); NULL when out of range. */
const char *ps_sched_kind_name(int i);
const char *ps_sched_kind_description(int i);
/* Index of a kind by name (case-sensitive), -1 when there is none. */
int ps_sched_kind_find(const char *name);
/* Chunks per device kind i runs when none are asked for (what ps_sched_build takes for v = 0: 2 for the
 * interleaved and V kinds, 1 for the others); 0 when i is out of range. */
int ps_sched_kind_default_chunks(int i);
/* The kind names, ", "-separated, into buf (truncated to cap), for messages that list what is known; returns buf. */
const char *ps_sched_kind_list(char *buf, size_t cap);
/* Name of a pass op: "F", "B", "W", "BW"; "?" for a value that is no ps_sched_op. */
const char *ps_sched_op_name(int op);

/* Generate and verify the order of `kind` for d devices, n micro-batches and v chunks per device (v = 0: the
 * kind's default). PS_ERR_INPUT names the rule broken: d < 1, n < 1, n not accepted by the kind, v out of the kind's
 * range, unknown kind. */
ps_status ps_sched_build(ps_sched *s, const char *kind, int d, int n, int v) PS_NODISCARD;

/* ps_sched_build unless `s` already holds that order (one (kind, d, n, v) is one order): what a caller costing many
 * plans of one candidate calls. */
ps_status ps_sched_ensure(ps_sched *s, const char *kind, int d, int n, int v) PS_NODISCARD;

/* The order alone, unless `s` already holds it: generated, not verified, so it serves the accessors and
 * ps_sched_peak_points but not ps_sched_simulate until ps_sched_ensure (or ps_sched_build) completes it. For a caller
 * that often needs only the order's shape (a search checking memory); the same refusals as ps_sched_build. */
ps_status ps_sched_generate(ps_sched *s, const char *kind, int d, int n, int v) PS_NODISCARD;

/* What ps_sched_build would refuse, without building: the same PS_ERR_INPUT for the same (kind, d, n, v). Cheap, for
 * a caller that may not need the order at all. */
ps_status ps_sched_check(const char *kind, int d, int n, int v) PS_NODISCARD;
/* The same rules as a predicate, with no side effect (the error slot untouched): whether ps_sched_check would accept
 * these sizes. For callers to whom a refusal is an expected answer, not a failure (the search's candidates). */
bool ps_sched_valid(const char *kind, int d, int n, int v);

/* Install an order made elsewhere (a search, a test, a recorded run): counts[i] passes of device i, concatenated in
 * `passes`. It is verified like a built one; PS_ERR_INPUT names the first pass that breaks a rule. */
ps_status ps_sched_set_order(ps_sched *s, int d, int n, int v, ps_sched_placement place, const ps_sched_pass *passes,
                             const int64_t *counts) PS_NODISCARD;

/* ---- the order (for the executor and for tests) ---- */
const char *ps_sched_kind(const ps_sched *s); /* "custom" after set_order */
int ps_sched_devices(const ps_sched *s);
int ps_sched_micro_batches(const ps_sched *s);
int ps_sched_chunks(const ps_sched *s);
int ps_sched_stages(const ps_sched *s); /* d * v */
int64_t ps_sched_total_passes(const ps_sched *s);
/* Passes of device dev in execution order; *count gets their number. Their flat index (the index into a result's
 * start/end) is ps_sched_pass_offset(s, dev) + position. */
const ps_sched_pass *ps_sched_device_passes(const ps_sched *s, int dev, int64_t *count);
int64_t ps_sched_pass_offset(const ps_sched *s, int dev);
int ps_sched_stage_of(const ps_sched *s, int dev, int chunk);
int ps_sched_device_of(const ps_sched *s, int stage);

/* What can set a device's activation peak, from the order alone (no times): at the end of every run of F passes of
 * device dev, the vector n[0..v-1] of micro-batches whose chunk-c activation the device then holds (an F takes it, the
 * W or BW of that micro-batch and chunk gives it back, as ps_sched_simulate counts). Only vectors that no other one
 * dominates are kept, so for any per-chunk activation sizes a[c] >= 0 the device's peak_act equals the largest
 * sum_c n[c] a[c] over them (up to rounding: the simulation adds pass by pass). A search can then check memory for
 * many strategies without simulating each. pts receives *n_pts vectors of v ints; one more vector of room than
 * returned is used as scratch. PS_ERR_INPUT: no order built, dev outside 0..d-1, or more than cap - 1 vectors. */
ps_status ps_sched_peak_points(const ps_sched *s, int dev, int *pts, int cap, int *n_pts) PS_NODISCARD;

/* ---- simulation ---- */
/* Per-stage costs, each array indexed by stage 0 .. d*v-1 (uneven partitions and mixed GPUs make them differ). */
typedef struct {
    const double *f;   /* forward time; required */
    const double *b;   /* backward-for-input time; required */
    const double *w;   /* backward-for-weights time; NULL: 0. A BW pass takes b + w. */
    const double *p2p; /* [stages-1]: latency of a send between stage s and s+1 (either way) when they sit on
                        * different devices; NULL: 0 */
    const double *act; /* activation bytes one micro-batch holds on the stage; NULL: 1 (peaks count micro-batches) */
} ps_sched_costs;

typedef struct {
    double makespan;    /* end of the last pass (all devices start at 0) */
    double bubble_frac; /* total idle / (d * makespan) */
    const double *busy; /* [d] compute time of each device */
    const double *idle; /* [d] makespan - busy */
    const double *peak_act; /* [d] peak activation held, counted from lifespans: F start to W (or BW) end */
    const double *start;    /* [total passes] by flat index */
    const double *end;
} ps_sched_result;

/* Run the built order: each pass starts when its device is free and its inputs have arrived (F after the previous
 * stage's F plus p2p; B after its own F and the next stage's B plus p2p; W after its B). O(total passes). */
ps_status ps_sched_simulate(ps_sched *s, const ps_sched_costs *costs, ps_sched_result *out) PS_NODISCARD;

/* ---- drawing ---- */
/* How a timeline is labelled; all-zero (or a NULL pointer) draws rows "dev 0", "dev 1", ... on a unitless axis. */
typedef struct {
    /* [devices] the row labels (the GPUs a device's stages hold, say "GPUs 0-15"); NULL, or a NULL entry: "dev i" */
    const char *const *row_labels;
    /* the times are seconds: ticks in s, ms or µs, whichever suits their spacing, the unit written on the axis */
    bool seconds;
    /* the axis's name when the times are not seconds (NULL: "time"), e.g. "time (units of --fbw)" */
    const char *time_label;
} ps_sched_svg_opts;

/* Render a simulated schedule (the last build / set_order and the simulate result r of it) as an SVG document: one
 * row per device on a shared time axis, F / B / W / BW in four colours (chunks > 0 lighter) with micro-batch
 * numbers, idle time as the grey row background, a legend, and a title with kind, d, n, v, makespan and bubble.
 * Passes are rect class="pass"; a run of consecutive passes of one device each narrower than a pixel (1200 px span
 * the makespan), with no pixel of idle between them, is one rect class="merged" coloured by the op with the most
 * time in it, so the document stays small and legible however many micro-batches there are.
 * *out gets a NUL-terminated heap buffer the caller frees, *len (if len is not NULL) its length. No I/O. */
ps_status ps_sched_svg(const ps_sched *s, const ps_sched_result *r, const ps_sched_svg_opts *opts, char **out,
                       size_t *len) PS_NODISCARD;

/* ---- closed forms (equal stage times, no p2p latency), tested against the simulation ---- */
/* Bubble fraction of 1F1B and GPipe: (d-1) / (n+d-1). */
double ps_sched_bubble_1f1b(int d, int n);
/* Interleaved 1F1B with v chunks of equal F:B ratio, n a multiple of d: (d-1) / (v*n + d-1). */
double ps_sched_bubble_interleaved(int d, int n, int v);
/* ZB-H1 with F = B = W and n >= d: (d-1) / (3n + d-1) (the bubble is (d-1)(F+B-W) per device). */
double ps_sched_bubble_zbh1_equal(int d, int n);
/* Micro-batches of activations 1F1B holds at its peak on device dev (0-based): min(d - dev, n). */
int ps_sched_peak_mb_1f1b(int d, int n, int dev);
/* ZB-H2 makespan for n >= 2d with any F, B, W times: (d-1)F + n(F+B+W), the last device's wait for its first F
 * being the only idle time (the zero-bubble paper's "zero bubble" counts the ramp as overlapped with the next
 * iteration; here every device starts at 0). */
double ps_sched_makespan_zbh2(int d, int n, double f, double b, double w);
/* Peak activation of "v-min", "v-half", "v-zb" on every device, in stage-micro-batches (one stage's activation
 * for one micro-batch), reached once n >= 4d and never exceeded: 2*floor((d+4)/3), 2*floor(d/2) + 2, 2d. 1F1B
 * holds 2d of them on its first device (d micro-batches of a stage twice as deep), hence the ratios 1/3, 1/2, 1
 * of Table 1 / Eq. 2 as d grows. -1 for another kind. */
int ps_sched_peak_v(const char *kind, int d);

#ifdef __cplusplus
}
#endif
#endif

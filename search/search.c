/* The search driver. For every (global batch, pipeline degree, schedule, micro-batch count) it
 *   1. costs each distinct layer under every strategy of the stage width (tp x dp = GPUs / pp; ZeRO 0-3;
 *      recompute none/selective/full; sequence parallelism with tp > 1),
 *   2. builds the stage table C[k][i][j]: the fastest single strategy for layers [i, j) on stage k whose memory
 *      (static + in-flight activations from the schedule + transient + reserve) fits the stage's GPUs,
 *   3. runs the partition DP (AMP Eq. 5 objective) over the cut points,
 *   4. refines every stage with the per-layer DP (Galvatron-BMW Sec. IV-A) under the stage's memory budget,
 *   5. costs the resulting plans with the full cost model (schedule simulation) and keeps the top k.
 * Chunked schedules (interleaved, V-shapes) keep Megatron's even split and search one strategy for all layers.
 * The DP objectives are proxies; the ranking uses ps_cost_plan only, so every reported number is the cost model's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ps_kernels.h"
#include "ps_schedules.h"
#include "ps_search.h"

void ps_search_opts_default(ps_search_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mbs_max = 16;
    o->top_k = 5;
    o->per_layer = 1;
    o->balance = 1;
    o->quanta = 256;
    o->overlap = 1;
}

int ps_prediction_worst_stage(const ps_prediction *p)
{
    int w = 0;
    for (int i = 1; i < p->n_stages; i++)
        if (p->stages[i].mem_peak - p->stages[i].mem_capacity > p->stages[w].mem_peak - p->stages[w].mem_capacity)
            w = i;
    return w;
}

int ps_search_max_tp(const ps_search_opts *o, const ps_cluster *c)
{
    if (o->max_tp > 0) return o->max_tp;
    return (int)(c->groups[0].gpus_per_node > 0 ? c->groups[0].gpus_per_node : 1);
}

void ps_search_explain(ps_search_result *r, const ps_search_opts *o, const ps_cluster *c)
{
    if (r->n_top > 0 || r->binding[0]) return;
    if (r->candidates == 0)
        snprintf(r->binding, sizeof r->binding,
                 "no (batch, pipeline, micro-batch) combination divides the %lld GPUs and batch %lld..%lld",
                 (long long)c->n_gpus, (long long)o->gbs_lo, (long long)o->gbs_hi);
    else
        snprintf(r->binding, sizeof r->binding,
                 "no tp x dp split of the stages divides the batch into micro-batches of at most %lld samples, "
                 "or TP degrees up to %d do not divide the heads",
                 (long long)o->mbs_max, ps_search_max_tp(o, c));
}

ps_search_key ps_search_cand_key(const ps_search_cand *c)
{
    return (ps_search_key){c->pred.samples_per_s, ps_prediction_peak(&c->pred), c->index};
}

int ps_search_key_order(const ps_search_key *a, const ps_search_key *b, int objective)
{
    double ta = a->samples_per_s, tb = b->samples_per_s, ma = a->peak, mb = b->peak;
    if (objective == PS_SEARCH_MEMORY) {
        if (ma != mb) return ma < mb ? -1 : 1;
        if (ta != tb) return ta > tb ? -1 : 1;
    } else {
        if (ta != tb) return ta > tb ? -1 : 1;
        if (ma != mb) return ma < mb ? -1 : 1;
    }
    return (a->index > b->index) - (a->index < b->index);
}

double ps_search_gain(const ps_search_cand *best, const ps_search_cand *base, int objective)
{
    if (objective == PS_SEARCH_MEMORY) return ps_prediction_peak(&base->pred) / ps_prediction_peak(&best->pred);
    return best->pred.samples_per_s / base->pred.samples_per_s;
}

int ps_search_cand_order(const ps_search_cand *a, const ps_search_cand *b, int objective)
{
    ps_search_key ka = ps_search_cand_key(a), kb = ps_search_cand_key(b);
    return ps_search_key_order(&ka, &kb, objective);
}

static void cand_free(ps_search_cand *c)
{
    ps_plan_free(&c->plan);
    ps_prediction_free(&c->pred);
}

void ps_search_result_free(ps_search_result *r)
{
    for (int i = 0; i < r->n_top; i++) cand_free(&r->top[i]);
    free(r->top);
    r->top = NULL;
    r->n_top = 0;
    for (int k = 0; k < PS_BASE_COUNT; k++)
        if (r->have_base[k]) {
            cand_free(&r->base[k]);
            r->have_base[k] = 0;
        }
}

/* ---- the candidate list ---- */
typedef struct {
    int64_t gbs, micro; /* micro-batches */
    int pp, vpp;
    const char *sched;
} outer;

/* The job: the units, and the pruning floors shared by its threads and (through the source) ranks. */
struct ps_search_job {
    const ps_cost_params *cp;
    const ps_model *m;
    const ps_cluster *c;
    ps_search_opts o;
    const char *kinds[32];
    outer *units;
    int64_t n;
    double *work;
    /* Pruning floors every thread reads and raises (omp atomic), and the source exchanges with other ranks: the best
     * k-th best samples/s and best even-split samples/s known anywhere. 0: none yet (every bound is above 0). */
    double floor_top, floor_even;
};

static int64_t count_blocks(const ps_model *m)
{
    int64_t n = 0;
    for (int64_t i = 0; i < m->n_layers; i++) n += ps_layer_is_block(m->layers[i].kind);
    return n;
}

/* ---- strategies of one stage width ---- */
/* Strategies of one stage width: tp x (sp | overlap) x ZeRO x recompute, far below this for any node size. */
#define PS_SEARCH_MAX_STRATS 512
/* At most this many layouts, i.e. 21 TP degrees per stage; wider TP choices are cut, not overrun. */
#define PS_SEARCH_MAX_LAYOUTS 64
typedef struct {
    ps_strategy s;
    int layout; /* (tp, sp, overlapped) class: a change of class costs resharding or a broken overlap */
} strat;

/* Every strategy of one stage width, grouped by layout; lay_rep[l] is a strategy of layout l (what resharding and
 * overlap depend on). Overlapped TP (Oases) joins when `overlap` is set: cross-pass with every recomputation, and
 * oases with full recomputation, for tp > 1 without SP and at least two samples per replica to split. */
static int build_strategies(int64_t width, int max_tp, int64_t global_mb, int64_t mbs_max, int overlap, strat *out,
                            int cap, int *n_layouts, ps_strategy *lay_rep)
{
    int n = 0, lay = 0;
    for (int64_t tp = 1; tp <= width && tp <= max_tp; tp++) {
        if (width % tp) continue;
        if (lay + 3 > PS_SEARCH_MAX_LAYOUTS) break; /* the per-stage tables below are sized for this many */
        int64_t dp = width / tp;
        if (global_mb % dp || global_mb / dp > mbs_max) continue;
        bool can_ov = overlap && tp > 1 && global_mb / dp >= 2;
        /* variants: 0 plain, 1 SP, 2 overlapped */
        for (int v = 0; v <= (tp > 1 ? 1 + can_ov : 0); v++) {
            bool first = true;
            for (int ov = v == 2 ? PS_OVERLAP_CROSS : PS_OVERLAP_NONE; ov <= (v == 2 ? PS_OVERLAP_OASES : PS_OVERLAP_NONE);
                 ov++)
                for (int zero = 0; zero <= (dp > 1 ? 3 : 0); zero++)
                    for (int rc = PS_RECOMP_NONE; rc <= PS_RECOMP_FULL && n < cap; rc++) {
                        if (ov == PS_OVERLAP_OASES && rc != PS_RECOMP_FULL) continue;
                        out[n].s = (ps_strategy){.tp = (int)tp, .dp = (int)dp, .zero = zero,
                                                 .ckpt = (ps_recompute)rc, .sp = v == 1, .overlap = (ps_overlap)ov};
                        out[n].layout = lay;
                        if (first) lay_rep[lay] = out[n].s;
                        first = false;
                        n++;
                    }
            lay++;
        }
    }
    *n_layouts = lay;
    return n;
}

/* The divisibility rules of ps_plan_check, per layer, so the DPs never pick a strategy the plan check refuses. */
static bool layer_allows(const ps_layer *l, const ps_strategy *s)
{
    int t = s->tp;
    if (t == 1) return true;
    if (l->heads && l->heads % t) return false;
    if (l->kv_heads && l->kv_heads % t && t % l->kv_heads) return false;
    if (l->ffn_hidden && l->ffn_hidden % t) return false;
    if (l->vocab && l->vocab % t) return false;
    if (s->sp && l->seq % t) return false;
    return true;
}

/* Candidate indices: the outer candidate's position times PS_IDX_STRIDE plus the variant below (chunked schedules use
 * the strategy's position 0..PS_SEARCH_MAX_STRATS-1), so every costed plan has its own place in the total order. */
#define PS_IDX_STRIDE 1024
/* each partition variant also takes the next index, for its per-layer refinement */
enum {
    PS_IDX_TIME = PS_SEARCH_MAX_STRATS,
    PS_IDX_EVEN = PS_IDX_TIME + 2,
    PS_IDX_BALANCED = PS_IDX_TIME + 4,
    PS_IDX_MEMORY = PS_IDX_TIME + 6,
    PS_IDX_LIGHT = PS_IDX_TIME + 8
};
_Static_assert(PS_IDX_LIGHT < PS_IDX_STRIDE, "candidate variants must fit the index stride");
/* where evaluate() offers a plan: the top k, the best even-split plan (the "even split" baseline), or both */
enum { EV_TOP = 1, EV_EVEN = 2 };

/* Room for the in-flight vectors of one device that may set its activation peak (ps_sched_peak_points); schedules
 * of this project need a handful (tests/schedules: at most 7). A device with more is not checked ahead. */
#define PS_SEARCH_PEAK_POINTS 256

/* What the memory checks need of a schedule's order: each device's peak points and the stage <-> device maps. One
 * order serves many units (the same kind, pp and micro-batch count recur for every batch of a sweep), so a worker
 * keeps the shapes of recent orders instead of generating them again. */
typedef struct {
    const char *kind; /* NULL: empty slot */
    int K, v;
    int64_t micro;
    bool too_many;    /* a device has more than PS_SEARCH_PEAK_POINTS - 1 points: no check ahead for this order */
    int *off, *stage_dev, *dev_stage, *pts; /* [K + 1], [K v], [K v], [off[K] v], in one buffer */
    int *buf;
    size_t cap;
} order_shape;

/* Direct-mapped by (kind, K, micro-batches, v). */
#define PS_SEARCH_SHAPES 2048

/* ---- per-candidate work ---- */
/* The sums of a stage table row after some layers (search_outer step 2). */
typedef struct {
    double tt, sm, am, tm, exm, sync, bwd;
    int64_t blocks;
} stage_acc;

typedef struct {
    const struct ps_search_job *job; /* the floors shared with the other threads and ranks */
    ps_ldp_ws *ldp;
    ps_pdp_ws *pdp;
    ps_sched *sched;
    /* per stage-group tables: [K][L][S] */
    double *t, *st, *act, *tmp;
    size_t cap_t, cap_st, cap_act, cap_tmp;
    bool tab_valid;  /* the layer tables below (t .. lmin) are whole, for this (batch, pp, micro-batches) */
    int64_t tab_gbs, tab_micro;
    int tab_pp;
    double *sy, *bw; /* [G][L][S] the layer's DP synchronisation per iteration and its backward per micro-batch: the
                        stage tables charge the part of a stage's synchronisation its last backward does not hide */
    size_t cap_sy, cap_bw;
    stage_acc *snap;     /* [S][L+1] the sums of a run's first stage-table row after n layers */
    int64_t *snap_n;     /* [S] how many layers that row got through (alive) */
    size_t cap_snap, cap_snap_n;
    double *ex;      /* [G][L][S] what an overlapped layer adds when it starts or ends a run: its first computation
                        and last collective, exposed (0 for plain TP) */
    size_t cap_ex;
    double *fb;      /* [G][L][S] a lower bound on the layer's fwd + bwd_b + bwd_w per micro-batch in any plan (exact
                        for plain TP; the computation alone for overlapped TP, whose collectives may all hide) */
    double *lmin;    /* [2][G][L] fastest fb of any strategy of the layer, then the fastest fb less its bwd_w (a
                        lower bound on its F + B passes, without W): the lower bounds (ps_search_pipeline_lb) */
    size_t cap_fb, cap_lmin;
    double *C, *Cm;  /* [K][L+1][L+1] fastest time / lowest memory of a fitting single strategy per stage */
    int *Carg, *Cmarg; /* the strategy reaching it */
    size_t cap_C, cap_Carg, cap_Cm, cap_Cmarg;
    int64_t *parts;  /* partitions of one candidate */
    size_t cap_parts;
    order_shape shapes[PS_SEARCH_SHAPES]; /* of recent orders (order_shape_get) */
    double *dmem;    /* chunked plans' memory check: [K] static, [K] transient per device, [K x vpp] activation per
                        stage; the pipeline bound of a partition: [K] F + B per stage */
    size_t cap_dmem;
    int even_K;      /* the even split last computed (0: none), whether it exists, and its cuts */
    bool even_ok;
    int64_t *even_cuts;
    size_t cap_even_cuts;
    double *ltime;   /* layer DP inputs [L*S] */
    int64_t *lmem;
    int *choice;
    int64_t *rows; /* refine: a stage's distinct layers */
    size_t cap_ltime, cap_lmem, cap_choice, cap_rows;
    /* results of this thread */
    ps_search_cand *top;
    int n_top;
    ps_search_cand even; /* best plan with an even split (a baseline) */
    int have_even;
    int64_t evaluated, feasible, pruned;
    double cells;
    double min_over;       /* smallest (peak - capacity) of the plans that did not fit */
    int min_over_bound;    /* min_over is a lower bound only (ps_search_result) */
    int64_t min_over_unit; /* its work unit */
    int64_t unit;          /* the work unit being searched */
    char min_over_msg[320];
    ps_status st_err;
    int64_t err_index;
    char err_msg[512];
} worker;

/* Keep the top k of this worker, ordered by ps_search_cand_order. Takes ownership of *c. */
static void offer(worker *w, int k, int objective, ps_search_cand *c)
{
    int pos = w->n_top;
    while (pos > 0 && ps_search_cand_order(c, &w->top[pos - 1], objective) < 0) pos--;
    if (pos >= k) {
        cand_free(c);
        return;
    }
    if (w->n_top == k) {
        cand_free(&w->top[k - 1]);
        w->n_top--;
    }
    memmove(&w->top[pos + 1], &w->top[pos], (size_t)(w->n_top - pos) * sizeof *w->top);
    w->top[pos] = *c;
    w->n_top++;
}

static ps_status cand_clone(const ps_search_cand *a, int64_t n_layers, ps_search_cand *b)
{
    *b = *a;
    b->plan.cuts = ps_calloc((size_t)(a->plan.pp * a->plan.vpp) + 1, sizeof *b->plan.cuts);
    b->plan.layer = ps_calloc((size_t)n_layers, sizeof *b->plan.layer);
    b->pred.stages = ps_calloc((size_t)a->pred.n_stages, sizeof *b->pred.stages);
    if (!b->plan.cuts || !b->plan.layer || !b->pred.stages) {
        cand_free(b);
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory copying a plan");
    }
    memcpy(b->plan.cuts, a->plan.cuts, ((size_t)(a->plan.pp * a->plan.vpp) + 1) * sizeof *b->plan.cuts);
    memcpy(b->plan.layer, a->plan.layer, (size_t)n_layers * sizeof *b->plan.layer);
    memcpy(b->pred.stages, a->pred.stages, (size_t)a->pred.n_stages * sizeof *b->pred.stages);
    return PS_OK;
}

bool ps_search_over_less(double a, int a_bound, int64_t a_unit, double b, int b_bound, int64_t b_unit)
{
    if (a_bound != b_bound) return a_bound < b_bound;
    if (a != b) return a < b;
    return a_unit < b_unit;
}

/* A plan that does not fit (pp stages, `s` on its first layer): `peak` bytes on its worst stage against `cap`. The
 * search reports the plan closest to fitting when none fits. stage < 0: peak is a lower bound for every stage. */
static void note_over(worker *w, int pp, const ps_strategy *s, int stage, double peak, double cap)
{
    double over = peak - cap;
    int bound = stage < 0;
    if (!ps_search_over_less(over, bound, w->unit, w->min_over, w->min_over_bound, w->min_over_unit)) return;
    w->min_over = over;
    w->min_over_bound = bound;
    w->min_over_unit = w->unit;
    int n = snprintf(w->min_over_msg, sizeof w->min_over_msg,
                     "the lightest plan tried (pp %d, tp %d x dp %d, ZeRO %d, recompute %s) needs ", pp, s->tp, s->dp,
                     s->zero, ps_recompute_name(s->ckpt));
    if (n < 0 || (size_t)n >= sizeof w->min_over_msg) return;
    if (stage >= 0)
        snprintf(w->min_over_msg + n, sizeof w->min_over_msg - (size_t)n,
                 "%.1f GiB on stage %d; its GPUs have %.1f GiB", peak / 1073741824.0, stage, cap / 1073741824.0);
    else
        snprintf(w->min_over_msg + n, sizeof w->min_over_msg - (size_t)n,
                 "at least %.1f GiB per GPU for weights, gradients and optimizer states; its GPUs have %.1f GiB",
                 peak / 1073741824.0, cap / 1073741824.0);
}

/* Cost a plan with the full model and offer it where `where` says (EV_TOP, EV_EVEN). The plan is consumed. */
static ps_status evaluate(worker *w, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                          const ps_search_opts *o, ps_plan *plan, int64_t index, int where)
{
    ps_search_cand cand = {.plan = *plan, .index = index};
    memset(plan, 0, sizeof *plan);
    ps_status st = ps_cost_plan_ws(cp, m, c, &cand.plan, w->sched, &cand.pred); /* the candidate's order, built once */
    if (st != PS_OK) {
        ps_plan_free(&cand.plan);
        return st;
    }
    w->evaluated++;
    if (!cand.pred.fits) {
        /* a plan is as far from fitting as its worst stage */
        int ws_ = ps_prediction_worst_stage(&cand.pred);
        note_over(w, cand.plan.pp, &cand.plan.layer[0], ws_, cand.pred.stages[ws_].mem_peak,
                  cand.pred.stages[ws_].mem_capacity);
        cand_free(&cand);
        return PS_OK;
    }
    w->feasible++;
    if ((where & EV_EVEN) && (!w->have_even || ps_search_cand_order(&cand, &w->even, o->objective) < 0)) {
        ps_search_cand copy;
        if (where & EV_TOP) {
            ps_status cst = cand_clone(&cand, m->n_layers, &copy);
            if (cst != PS_OK) {
                cand_free(&cand);
                return cst;
            }
        } else {
            copy = cand;
        }
        if (w->have_even) cand_free(&w->even);
        w->even = copy;
        w->have_even = 1;
        if (!(where & EV_TOP)) return PS_OK;
    } else if (!(where & EV_TOP)) {
        cand_free(&cand);
        return PS_OK;
    }
    offer(w, o->top_k, o->objective, &cand);
    return PS_OK;
}

/* All stage groups see the same GPUs and links when the cluster is one node group and a stage fills whole nodes or
 * sits inside one: then the layer tables of stage 0 serve every stage. */
static bool uniform_placement(const ps_cluster *c, int64_t width)
{
    if (c->n_groups != 1) return false;
    int64_t g = c->groups[0].gpus_per_node;
    return g > 0 && (width % g == 0 || g % width == 0);
}

/* Upper-bound pruning (throughput objective only). A plan's iteration time is at least its busiest device's compute,
 * m x sum of its layers' fwd + bwd per micro-batch (ps_cost_plan: makespan >= busy time, then the optimizer tail),
 * so gbs / that bound caps its samples/s. A plan capped below a k-th best samples/s found anywhere (this worker's,
 * another thread's or another rank's: the job's floors) cannot enter the top k, as k plans strictly faster exist (nor,
 * for even splits, beat the even-split baseline): skipping it changes no result, only the work done. The factor
 * covers rounding from summing in another order. */
static double job_floor(const ps_search_job *j, int which)
{
    double v;
    const double *p = which ? &j->floor_even : &j->floor_top;
#pragma omp atomic read
    v = *p;
    return v;
}

double ps_search_pipeline_lb(const double *u, int K, int64_t m)
{
    double lb = 0, prefix = 0;
    for (int d = 0; d < K; d++) {
        lb = fmax(lb, prefix + (double)m * u[d]);
        prefix += u[d];
    }
    return lb;
}

/* Over every partition of a total U the bound is least when all its terms are equal: u_d = (C/m)(1 - 1/m)^d, so
 * C = U / (1 - (1 - 1/m)^K) (the least of a max of linear functions over the simplex, reached where they are equal).
 * For m >> K that is about (m + (K - 1)/2) U / K: half of 1F1B's bubble on top of the busy-time bound m U / K. */
double ps_search_pipeline_lb_any(double U, int K, int64_t m)
{
    if (m <= 1) return U;
    return U / -expm1((double)K * log1p(-1.0 / (double)m)); /* (1 - 1/m)^K - 1, accurate for large m */
}

static bool prunable(const worker *w, const ps_search_opts *o, int64_t gbs, double t_lb, int where)
{
    if (o->objective != PS_SEARCH_THROUGHPUT || !(t_lb > 0)) return false;
    double ub = (double)gbs / (t_lb * (1 - 1e-9));
    if (where & EV_TOP) {
        double f = job_floor(w->job, 0);
        if (w->n_top >= o->top_k) f = fmax(f, w->top[o->top_k - 1].pred.samples_per_s);
        if (!(ub < f)) return false;
    }
    if (where & EV_EVEN) {
        double f = job_floor(w->job, 1);
        if (w->have_even) f = fmax(f, w->even.pred.samples_per_s);
        if (!(ub < f)) return false;
    }
    return true;
}

/* What the per-partition steps need of search_outer's tables. */
typedef struct {
    const strat *S;
    int nS, n_layouts;
    const ps_strategy *lay_rep;
    const double *inflight, *cap_mem;
    bool uni;
    size_t LS;
    int64_t width, global_mb, micro;
    int K;
    size_t N;
} stage_ctx;

/* Megatron's even split over K stages (ps_plan_uniform's rule). False when the model has too few layers. It depends on
 * K alone, so each worker keeps the last one instead of building a plan per candidate. */
static ps_status even_cuts(worker *w, const ps_model *m, int K, int64_t *cuts, bool *ok)
{
    if (w->even_K != K) {
        ps_plan u;
        ps_strategy s1 = {.tp = 1, .dp = 1};
        PS_TRY(ps_grow((void **)&w->even_cuts, &w->cap_even_cuts, (size_t)K + 1, sizeof(int64_t)));
        w->even_ok = ps_plan_uniform(m, 1, 1, K, 1, "1f1b", &s1, &u) == PS_OK;
        if (w->even_ok) {
            memcpy(w->even_cuts, u.cuts, ((size_t)K + 1) * sizeof *cuts);
            ps_plan_free(&u);
        } else {
            ps_error_clear();
        }
        w->even_K = K;
    }
    *ok = w->even_ok;
    if (*ok) memcpy(cuts, w->even_cuts, ((size_t)K + 1) * sizeof *cuts);
    return PS_OK;
}

static bool partition_fits(const double *C, int K, size_t N, const int64_t *cuts)
{
    for (int k = 0; k < K; k++)
        if (!isfinite(C[((size_t)k * N + (size_t)cuts[k]) * N + (size_t)cuts[k + 1]])) return false;
    return true;
}

/* The plan of a partition with each stage's strategy from a stage table's argmin. */
static ps_status plan_from_cuts(const stage_ctx *x, const ps_model *m, const outer *oc, const int64_t *cuts,
                                const int *arg, ps_plan *plan)
{
    PS_TRY(ps_plan_alloc(m, oc->gbs, 1, x->K, 1, oc->sched, &x->S[0].s, plan));
    for (int k = 0; k < x->K; k++) {
        plan->cuts[k + 1] = cuts[k + 1];
        int s = arg[((size_t)k * x->N + (size_t)cuts[k]) * x->N + (size_t)cuts[k + 1]];
        for (int64_t l = cuts[k]; l < cuts[k + 1]; l++) plan->layer[l] = x->S[s].s;
    }
    plan->mbs = x->global_mb / plan->layer[0].dp;
    return PS_OK;
}

/* Galvatron-BMW Sec. IV-A: one strategy per layer of each stage, fastest under the stage's memory budget, with
 * resharding between layouts. *changed tells whether any layer differs from `plan`. */
static ps_status refine(worker *w, const stage_ctx *x, const ps_cost_params *cp, const ps_model *m,
                        const ps_cluster *c, const ps_search_opts *o, const ps_plan *plan, ps_plan *ref,
                        bool *changed)
{
    int K = x->K, nS = x->nS, n_layouts = x->n_layouts;
    size_t LS = x->LS;
    int64_t L = m->n_layers;
    *changed = false;
    PS_TRY(ps_plan_alloc(m, plan->gbs, plan->mbs, K, 1, plan->schedule, &x->S[0].s, ref));
    memcpy(ref->cuts, plan->cuts, ((size_t)K + 1) * sizeof *ref->cuts);
    memcpy(ref->layer, plan->layer, (size_t)L * sizeof *ref->layer);
    PS_TRY(ps_grow((void **)&w->ltime, &w->cap_ltime, LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->lmem, &w->cap_lmem, LS, sizeof(int64_t)));
    PS_TRY(ps_grow((void **)&w->choice, &w->cap_choice, (size_t)L, sizeof(int)));
    PS_TRY(ps_grow((void **)&w->rows, &w->cap_rows, (size_t)L, sizeof(int64_t)));
    for (int k = 0; k < K; k++) {
        int g = x->uni ? 0 : k;
        int64_t a = plan->cuts[k], b = plan->cuts[k + 1], n = b - a;
        double f = x->inflight[k], tmax = 0;
        for (int64_t l = a; l < b; l++)
            for (int s = 0; s < nS; s++) tmax = fmax(tmax, w->tmp[(size_t)g * LS + (size_t)l * nS + (size_t)s]);
        double budget = x->cap_mem[g] - cp->reserve_bytes - tmax, q = x->cap_mem[g] / o->quanta;
        if (budget <= 0) continue;
        /* Strategies dominated inside their layout (another is no slower and no heavier on every layer of the
         * stage; on a full tie the lower index stays) never improve the optimum: resharding depends only on the
         * layout. Galvatron-BMW's Takeaways prune by rule; this prunes by the numbers. Rows of identical layers are
         * checked once. Memory is rounded up to whole quanta and the budget down: the DP can only under-use. */
        int keep[PS_SEARCH_MAX_STRATS], nk = 0;
        int64_t *rows = w->rows, nrows = 0; /* the stage's distinct rows: a run of identical layers is one */
        for (int64_t l = a; l < b; l++)
            if (l == a || !ps_layer_equal(&m->layers[l], &m->layers[l - 1])) rows[nrows++] = l;
        for (int s = 0; s < nS; s++) {
            bool dominated = false;
            for (int u = 0; u < nS && !dominated; u++) {
                if (u == s || x->S[u].layout != x->S[s].layout) continue;
                bool no_worse = true, better = false;
                for (int64_t r = 0; r < nrows && no_worse; r++) {
                    int64_t l = rows[r];
                    size_t es = (size_t)g * LS + (size_t)l * nS + (size_t)s, eu = (size_t)g * LS + (size_t)l * nS + (size_t)u;
                    double ts = w->t[es], tu = w->t[eu];
                    double ms = ceil((w->st[es] + f * w->act[es]) / q), mu = ceil((w->st[eu] + f * w->act[eu]) / q);
                    if (tu > ts || mu > ms) no_worse = false;
                    else if (tu < ts || mu < ms) better = true;
                }
                dominated = no_worse && (better || u < s);
            }
            if (!dominated) keep[nk++] = s;
        }
        for (int64_t l = 0; l < n; l++)
            for (int i = 0; i < nk; i++) {
                size_t e = (size_t)g * LS + (size_t)(a + l) * nS + (size_t)keep[i];
                w->ltime[(size_t)l * nk + (size_t)i] = w->t[e];
                w->lmem[(size_t)l * nk + (size_t)i] = (int64_t)ceil((w->st[e] + f * w->act[e]) / q);
            }
        /* Changing layout between layers: the resharding all-gather (ps_cost_reshard, Oases Eq. 4), and where an
         * overlapped run ends or starts, half of the exposure a run has at its two ends (the largest of the stage's
         * layers under that layout). The stage's own first and last run pay none here: ps_cost_plan ranks. */
        double resh[PS_SEARCH_MAX_LAYOUTS * PS_SEARCH_MAX_LAYOUTS], exl[PS_SEARCH_MAX_LAYOUTS];
        for (int u = 0; u < n_layouts; u++) exl[u] = 0;
        for (int i = 0; i < nk; i++) {
            int u = x->S[keep[i]].layout;
            for (int64_t l = a; l < b; l++)
                exl[u] = fmax(exl[u], w->ex[(size_t)g * LS + (size_t)l * nS + (size_t)keep[i]]);
        }
        const ps_layer *bl = &m->layers[a];
        /* only the layouts some kept strategy has: the DP's transitions cost layouts squared per memory level */
        int used[PS_SEARCH_MAX_LAYOUTS], nu = 0, slot[PS_SEARCH_MAX_LAYOUTS];
        for (int u = 0; u < n_layouts; u++) slot[u] = -1;
        for (int i = 0; i < nk; i++) {
            int u = x->S[keep[i]].layout;
            if (slot[u] < 0) {
                slot[u] = nu;
                used[nu++] = u;
            }
        }
        for (int i = 0; i < nu; i++)
            for (int j = 0; j < nu; j++) {
                int u = used[i], v = used[j];
                if (u == v) {
                    resh[i * nu + j] = 0;
                    continue;
                }
                double rf, rb;
                ps_cost_reshard(cp, c, bl, m->dtype, x->global_mb, &x->lay_rep[u], &x->lay_rep[v],
                                (int64_t)g * x->width, &rf, &rb);
                resh[i * nu + j] = rf + rb + (exl[u] + exl[v]) / 2;
            }
        int lay[PS_SEARCH_MAX_STRATS];
        for (int i = 0; i < nk; i++) lay[i] = slot[x->S[keep[i]].layout];
        ps_ldp_problem lp = {(int)n, nk, w->ltime, w->lmem, nu, lay, resh};
        double best;
        PS_TRY(ps_ldp_solve(w->ldp, &lp, (int64_t)floor(budget / q), &best, w->choice));
        w->cells += (double)n * (double)(o->quanta + 1) * (double)nk;
        if (!isfinite(best)) continue;
        for (int64_t l = 0; l < n; l++) w->choice[l] = keep[w->choice[l]];
        for (int64_t l = 0; l < n; l++) {
            const ps_strategy *ns = &x->S[w->choice[l]].s;
            if (!ps_strategy_equal(ns, &ref->layer[a + l])) *changed = true;
            ref->layer[a + l] = *ns;
        }
    }
    ref->mbs = x->global_mb / ref->layer[0].dp;
    return PS_OK;
}

/* Cost a partition: its stage-wise plan, and its per-layer refinement when that changes anything. */
static ps_status cost_partition(worker *w, const stage_ctx *x, const ps_cost_params *cp, const ps_model *m,
                                const ps_cluster *c, const ps_search_opts *o, const outer *oc, const int64_t *cuts,
                                int64_t index, int where)
{
    /* the busiest stage's compute, and the pipeline bound of the stages' fastest F + B passes */
    double busiest = 0, *u = w->dmem;
    size_t GL = (size_t)(x->uni ? 1 : x->K) * (size_t)m->n_layers;
    for (int k = 0; k < x->K; k++) {
        double sum = 0;
        const double *lm = w->lmin + (size_t)(x->uni ? 0 : k) * (size_t)m->n_layers, *lmb = lm + GL;
        u[k] = 0;
        for (int64_t l = cuts[k]; l < cuts[k + 1]; l++) {
            sum += lm[l];
            u[k] += lmb[l];
        }
        busiest = fmax(busiest, sum);
    }
    double lb = fmax((double)x->micro * busiest, ps_search_pipeline_lb(u, x->K, x->micro));
    if (prunable(w, o, oc->gbs, lb, where)) {
        w->pruned++;
        return PS_OK;
    }
    ps_plan plan;
    PS_TRY(plan_from_cuts(x, m, oc, cuts, w->Carg, &plan));
    if (o->per_layer) {
        ps_plan ref;
        bool changed = false;
        ps_status st = refine(w, x, cp, m, c, o, &plan, &ref, &changed);
        if (st != PS_OK) {
            ps_plan_free(&plan);
            ps_plan_free(&ref);
            return st;
        }
        if (changed) {
            st = evaluate(w, cp, m, c, o, &ref, index + 1, where);
            if (st != PS_OK) {
                ps_plan_free(&plan);
                return st;
            }
        } else {
            ps_plan_free(&ref);
        }
    }
    return evaluate(w, cp, m, c, o, &plan, index, where);
}

/* The shape of the unit's order, from the memo or generated into w->sched (unverified: a plan costed later
 * completes it). */
static ps_status order_shape_get(worker *w, const outer *oc, const order_shape **out)
{
    int K = oc->pp, v = oc->vpp;
    uint64_t h = PS_HASH64_INIT;
    const int64_t key[3] = {K, v, oc->micro};
    h = ps_hash64(oc->sched, strlen(oc->sched), h);
    h = ps_hash64(key, sizeof key, h);
    order_shape *sh = &w->shapes[h % PS_SEARCH_SHAPES];
    if (sh->kind && strcmp(sh->kind, oc->sched) == 0 && sh->K == K && sh->v == v && sh->micro == oc->micro) {
        *out = sh;
        return PS_OK;
    }
    sh->kind = NULL; /* until it is whole */
    PS_TRY(ps_sched_generate(w->sched, oc->sched, K, (int)oc->micro, v));
    size_t kv = (size_t)K * (size_t)v, fixed = (size_t)K + 1 + 2 * kv;
    PS_TRY(ps_grow((void **)&sh->buf, &sh->cap, fixed + (size_t)PS_SEARCH_PEAK_POINTS * (size_t)v, sizeof(int)));
    sh->too_many = false;
    int n = 0;
    for (int dev = 0; dev < K && !sh->too_many; dev++) {
        int np = 0;
        size_t at = fixed + (size_t)n * (size_t)v;
        PS_TRY(ps_grow((void **)&sh->buf, &sh->cap, at + (size_t)PS_SEARCH_PEAK_POINTS * (size_t)v, sizeof(int)));
        sh->buf[dev] = n;
        if (ps_sched_peak_points(w->sched, dev, sh->buf + at, PS_SEARCH_PEAK_POINTS, &np) != PS_OK) {
            ps_error_clear();
            sh->too_many = true;
        }
        n += np;
    }
    sh->buf[K] = n;
    sh->off = sh->buf;
    sh->stage_dev = sh->buf + K + 1;
    sh->dev_stage = sh->stage_dev + kv;
    sh->pts = sh->buf + fixed;
    for (int st = 0; st < (int)kv; st++) sh->stage_dev[st] = ps_sched_device_of(w->sched, st);
    for (int dev = 0; dev < K; dev++)
        for (int c = 0; c < v; c++) sh->dev_stage[(size_t)dev * v + c] = ps_sched_stage_of(w->sched, dev, c);
    sh->K = K;
    sh->v = v;
    sh->micro = oc->micro;
    sh->kind = oc->sched;
    *out = sh;
    return PS_OK;
}

/* What chunked_fits needs of search_outer's layer tables, and the unit's order shape (NULL until the first call). */
typedef struct {
    bool uni;
    int nS;
    size_t LS;
    const double *cap_mem;
    const order_shape *sh;
} chunked_mem;

/* Whether a chunked plan with one strategy (index s) fits, before costing it: each device's memory added up as
 * ps_cost_plan does (static + activation peak of the order + largest transient + reserve) from the layer tables, the
 * activation peak from the order's peak points (ps_sched_peak_points) instead of a simulation. The sums may round
 * differently from ps_cost_plan's, so only a device over its capacity by more than a relative 1e-9 counts; such a
 * plan is noted (note_over) as ps_cost_plan would have, with the same worst stage. Plans of a chunked candidate
 * mostly do not fit (case (a) of bench/search: 15,570 of 16,447 costed), and this is what they cost now. */
static ps_status chunked_fits(worker *w, const ps_cost_params *cp, chunked_mem *cm, const outer *oc,
                              const ps_plan *plan, int s, bool *fits)
{
    int K = oc->pp, v = oc->vpp, S2 = K * v;
    *fits = true;
    if (!cm->sh) {
        PS_TRY(order_shape_get(w, oc, &cm->sh));
        PS_TRY(ps_grow((void **)&w->dmem, &w->cap_dmem, (size_t)K * 2 + (size_t)S2, sizeof(double)));
    }
    const order_shape *sh = cm->sh;
    if (sh->too_many) return PS_OK;
    double *stat = w->dmem, *tmp = stat + K, *act = tmp + K;
    for (int d = 0; d < K; d++) stat[d] = tmp[d] = 0;
    for (int st = 0; st < S2; st++) {
        int dev = sh->stage_dev[st];
        size_t g = cm->uni ? 0 : (size_t)dev;
        double sst = 0, a = 0;
        for (int64_t l = plan->cuts[st]; l < plan->cuts[st + 1]; l++) {
            size_t e = g * cm->LS + (size_t)l * (size_t)cm->nS + (size_t)s;
            sst += w->st[e];
            a += w->act[e];
            tmp[dev] = fmax(tmp[dev], w->tmp[e]);
        }
        stat[dev] += sst;
        act[st] = a;
    }
    int worst = -1;
    double worst_over = 0, worst_peak = 0, worst_cap = 0;
    for (int st = 0; st < S2; st++) { /* stage order: the worst stage is the first of the worst device */
        int dev = sh->stage_dev[st];
        double cap = cm->cap_mem[cm->uni ? 0 : dev], pk = 0;
        for (int i = sh->off[dev]; i < sh->off[dev + 1]; i++) {
            const int *n = sh->pts + (size_t)i * (size_t)v;
            double sum = 0;
            for (int c = 0; c < v; c++) sum += n[c] * act[sh->dev_stage[(size_t)dev * v + c]];
            pk = fmax(pk, sum);
        }
        double peak = stat[dev] + pk + tmp[dev] + cp->reserve_bytes;
        if (peak * (1 - 1e-9) > cap && (worst < 0 || peak - cap > worst_over)) {
            worst = st;
            worst_over = peak - cap;
            worst_peak = peak;
            worst_cap = cap;
        }
    }
    if (worst >= 0) {
        *fits = false;
        note_over(w, plan->pp, &plan->layer[0], worst, worst_peak, worst_cap);
    }
    return PS_OK;
}

static ps_status search_outer(worker *w, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                              const ps_search_opts *o, const outer *oc, int64_t index)
{
    int64_t L = m->n_layers, width = c->n_gpus / oc->pp, global_mb = oc->gbs / oc->micro;
    int max_tp = ps_search_max_tp(o, c);
    w->unit = index;
    strat S[PS_SEARCH_MAX_STRATS];
    ps_strategy lay_rep[PS_SEARCH_MAX_LAYOUTS];
    int n_layouts = 0;
    int nS = build_strategies(width, max_tp, global_mb, o->mbs_max, o->overlap, S, PS_SEARCH_MAX_STRATS, &n_layouts,
                              lay_rep);
    if (nS == 0) return PS_OK;

    int K = oc->pp;
    if (K > 4096) return PS_FAIL(PS_ERR_INPUT, "pipeline degree %d is above the 4096 the search supports", K);
    /* The schedule's own rules (micro-batches vs devices, chunks) decide whether this is a candidate at all. The
     * order itself is built only when needed (in-flight counts below, or costing a plan): many candidates are
     * pruned before. */
    ps_status bst = ps_sched_check(oc->sched, K, (int)oc->micro, oc->vpp);
    if (bst == PS_ERR_INPUT) {
        ps_error_clear();
        return PS_OK;
    }
    PS_TRY(bst);

    /* 1. layer tables per stage group (one group when the placement is uniform), distinct layers costed once */
    bool uni = uniform_placement(c, width);
    int G = uni ? 1 : K;
    size_t LS = (size_t)L * (size_t)nS;
    PS_TRY(ps_grow((void **)&w->t, &w->cap_t, (size_t)G * LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->st, &w->cap_st, (size_t)G * LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->act, &w->cap_act, (size_t)G * LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->tmp, &w->cap_tmp, (size_t)G * LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->ex, &w->cap_ex, (size_t)G * LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->sy, &w->cap_sy, (size_t)G * LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->bw, &w->cap_bw, (size_t)G * LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->fb, &w->cap_fb, (size_t)G * LS, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->lmin, &w->cap_lmin, 2 * (size_t)G * (size_t)L, sizeof(double)));
    double *lminb = w->lmin + (size_t)G * (size_t)L;
    double cap_mem[4096];
    for (int g = 0; g < G; g++) {
        int64_t first = (int64_t)g * width;
        cap_mem[g] = INFINITY;
        for (int64_t x = first; x < first + width; x++)
            cap_mem[g] = fmin(cap_mem[g], ps_cluster_group_of(c, x)->gpu.mem_bytes);
    }
    /* The tables depend on (batch, pipeline degree, micro-batches) alone, not on the schedule: the schedules of one
     * such triple are neighbouring units (ps_search_job_create), so the tables a worker holds often serve. */
    bool have_tables = w->tab_valid && w->tab_gbs == oc->gbs && w->tab_pp == oc->pp && w->tab_micro == oc->micro;
    w->tab_valid = false; /* until they are whole again */
    for (int g = 0; g < G && !have_tables; g++) {
        int64_t first = (int64_t)g * width;
        for (int64_t l = 0; l < L; l++) {
            size_t row = (size_t)g * LS + (size_t)l * (size_t)nS;
            if (l > 0 && ps_layer_equal(&m->layers[l], &m->layers[l - 1])) {
                size_t prev = row - (size_t)nS;
                memcpy(w->t + row, w->t + prev, (size_t)nS * sizeof(double));
                memcpy(w->st + row, w->st + prev, (size_t)nS * sizeof(double));
                memcpy(w->act + row, w->act + prev, (size_t)nS * sizeof(double));
                memcpy(w->tmp + row, w->tmp + prev, (size_t)nS * sizeof(double));
                memcpy(w->ex + row, w->ex + prev, (size_t)nS * sizeof(double));
                memcpy(w->sy + row, w->sy + prev, (size_t)nS * sizeof(double));
                memcpy(w->bw + row, w->bw + prev, (size_t)nS * sizeof(double));
                memcpy(w->fb + row, w->fb + prev, (size_t)nS * sizeof(double));
                w->lmin[(size_t)g * (size_t)L + (size_t)l] = w->lmin[(size_t)g * (size_t)L + (size_t)l - 1];
                lminb[(size_t)g * (size_t)L + (size_t)l] = lminb[(size_t)g * (size_t)L + (size_t)l - 1];
                continue;
            }
            double lmin = INFINITY, lmb = INFINITY;
            for (int s = 0; s < nS; s++) {
                if (!layer_allows(&m->layers[l], &S[s].s)) {
                    w->fb[row + (size_t)s] = INFINITY;
                    w->t[row + (size_t)s] = INFINITY;
                    w->st[row + (size_t)s] = w->act[row + (size_t)s] = w->tmp[row + (size_t)s] = 0;
                    w->ex[row + (size_t)s] = w->sy[row + (size_t)s] = w->bw[row + (size_t)s] = 0;
                    continue;
                }
                ps_layer_cost lc;
                PS_TRY(ps_cost_layer(cp, c, &m->layers[l], m->dtype, global_mb / S[s].s.dp, &S[s].s, first, &lc));
                /* per micro-batch time; the once-per-iteration DP sync is spread over the micro-batches so the
                 * DP sees that ZeRO stages and wide DP cost something. Overlapped TP: the time inside a run of
                 * overlapped layers, its ends' exposure apart (ex). */
                w->t[row + (size_t)s] = lc.fwd_run + lc.bwd_b_run + lc.bwd_w + lc.dp_sync / (double)oc->micro;
                w->ex[row + (size_t)s] = fmax(0, lc.fwd + lc.bwd_b - lc.fwd_run - lc.bwd_b_run);
                w->sy[row + (size_t)s] = lc.dp_sync;
                w->bw[row + (size_t)s] = lc.bwd_b + lc.bwd_w;
                w->st[row + (size_t)s] = lc.mem_params + lc.mem_grads + lc.mem_optim;
                w->act[row + (size_t)s] = lc.mem_act;
                w->tmp[row + (size_t)s] = lc.mem_temp;
                w->fb[row + (size_t)s] = S[s].s.overlap != PS_OVERLAP_NONE
                                             ? lc.comp_fwd + lc.comp_bwd_b + lc.bwd_w
                                             : lc.fwd + lc.bwd_b + lc.bwd_w;
                lmin = fmin(lmin, w->fb[row + (size_t)s]);
                lmb = fmin(lmb, w->fb[row + (size_t)s] - lc.bwd_w);
            }
            w->lmin[(size_t)g * (size_t)L + (size_t)l] = lmin;
            lminb[(size_t)g * (size_t)L + (size_t)l] = fmax(0, lmb);
        }
    }
    w->tab_valid = true;
    w->tab_gbs = oc->gbs;
    w->tab_pp = oc->pp;
    w->tab_micro = oc->micro;

    /* Chunked schedules: Megatron's even split, one strategy for all layers. */
    if (oc->vpp > 1) {
        double maxcap = 0;
        for (int g = 0; g < G; g++) maxcap = fmax(maxcap, cap_mem[g]);
        chunked_mem cm = {.uni = uni, .nS = nS, .LS = LS, .cap_mem = cap_mem, .sh = NULL};
        for (int s = 0; s < nS; s++) {
            bool ok = true;
            double fbs = 0, stat = 0;
            for (int64_t l = 0; l < L && ok; l++) {
                ok = layer_allows(&m->layers[l], &S[s].s);
                double f1 = INFINITY, s1 = INFINITY;
                for (int g = 0; g < G; g++) {
                    size_t e = (size_t)g * LS + (size_t)l * (size_t)nS + (size_t)s;
                    f1 = fmin(f1, w->fb[e]);
                    s1 = fmin(s1, w->st[e]);
                }
                fbs += f1;
                stat += s1;
            }
            if (!ok) continue;
            /* The busiest device holds at least the average static memory and compute (bounds as in prunable). */
            double stat_lb = stat / (double)K * (1 - 1e-9) + cp->reserve_bytes;
            if (stat_lb > maxcap) {
                note_over(w, K, &S[s].s, -1, stat_lb, maxcap);
                w->pruned++;
                continue;
            }
            if (prunable(w, o, oc->gbs, (double)oc->micro * fbs / (double)K, EV_TOP | EV_EVEN)) {
                w->pruned++;
                continue;
            }
            ps_plan plan;
            int64_t mbs = global_mb / S[s].s.dp;
            if (ps_plan_uniform(m, oc->gbs, mbs, oc->pp, oc->vpp, oc->sched, &S[s].s, &plan) != PS_OK) {
                ps_error_clear();
                return PS_OK; /* too few layers for pp x vpp stages: not a candidate */
            }
            bool fits = true;
            ps_status mst = chunked_fits(w, cp, &cm, oc, &plan, s, &fits);
            if (mst != PS_OK || !fits) {
                ps_plan_free(&plan);
                PS_TRY(mst);
                w->pruned++;
                continue;
            }
            /* chunked schedules keep the even split: every one is also an "even split" plan */
            PS_TRY(evaluate(w, cp, m, c, o, &plan, index * PS_IDX_STRIDE + s, EV_TOP | EV_EVEN));
        }
        return PS_OK;
    }

    /* The whole candidate: its busiest stage holds at least 1/K of the fastest compute of every layer, and the
     * pipeline's fill and drain (ps_search_pipeline_lb_any) cost at least their least over every partition. */
    {
        double tot = 0, totb = 0;
        for (int64_t l = 0; l < L; l++) {
            double f1 = INFINITY, b1 = INFINITY;
            for (int g = 0; g < G; g++) {
                f1 = fmin(f1, w->lmin[(size_t)g * (size_t)L + (size_t)l]);
                b1 = fmin(b1, lminb[(size_t)g * (size_t)L + (size_t)l]);
            }
            tot += f1;
            totb += b1;
        }
        double lb = fmax((double)oc->micro * tot / (double)K, ps_search_pipeline_lb_any(totb, K, oc->micro));
        if (prunable(w, o, oc->gbs, lb, EV_TOP | EV_EVEN)) {
            w->pruned++;
            return PS_OK;
        }
    }
    /* In-flight micro-batches per stage, from the schedule's order (one chunk per device: one peak point, the most
     * micro-batches a device holds at once). */
    double inflight[4096];
    const order_shape *sh;
    PS_TRY(order_shape_get(w, oc, &sh));
    PS_TRY(ps_grow((void **)&w->dmem, &w->cap_dmem, (size_t)K, sizeof(double))); /* cost_partition's bound */
    for (int k = 0; k < K; k++) {
        int dev = sh->stage_dev[k];
        inflight[k] = sh->off[dev + 1] > sh->off[dev] ? sh->pts[sh->off[dev]] : 0;
    }

    /* 2. stage tables for [i, j) on stage k, over the strategies whose memory (static + in-flight activations +
     * transient) fits the stage's budget: C the fastest (time per micro-batch), Cm the lightest (bytes) */
    size_t N = (size_t)L + 1;
    PS_TRY(ps_grow((void **)&w->C, &w->cap_C, (size_t)K * N * N, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->Carg, &w->cap_Carg, (size_t)K * N * N, sizeof(int)));
    PS_TRY(ps_grow((void **)&w->Cm, &w->cap_Cm, (size_t)K * N * N, sizeof(double)));
    PS_TRY(ps_grow((void **)&w->Cmarg, &w->cap_Cmarg, (size_t)K * N * N, sizeof(int)));
    /* Every reader takes entries with i < j only (a stage holds a layer at least): those start as "does not fit". */
    {
        double *restrict C = w->C, *restrict Cm = w->Cm;
        for (size_t k = 0; k < (size_t)K; k++)
            for (size_t i = 0; i + 1 < N; i++) {
                size_t row = (k * N + i) * N;
                for (size_t j = i + 1; j < N; j++) C[row + j] = Cm[row + j] = INFINITY;
            }
    }
    /* The sums over [i, j) depend on the stage's placement group only: with a uniform placement every stage that may
     * start at layer i (stage 0 at 0, the others after it) shares them, and only the memory check (its in-flight
     * micro-batches) is per stage. So the stages of one group walk j together.
     * Identical layers (a model's decoder blocks): a row i inside a run of layers equal to layer i - 1 repeats row
     * i - 1 shifted by one while [i, j) stays inside the run, so those entries are copied, and its walk past the run
     * starts from the sums of the run's first row after as many layers (kept in `snap`). O(L x (K + S)) per run
     * instead of O(L^2 x S), with the same sums in the same order, so the same tables. */
    int ks[4096];
    bool live[4096];
    PS_TRY(ps_grow((void **)&w->snap, &w->cap_snap, (size_t)nS * (size_t)(L + 1), sizeof *w->snap));
    PS_TRY(ps_grow((void **)&w->snap_n, &w->cap_snap_n, (size_t)nS, sizeof *w->snap_n));
    int64_t run_first = -1, run_last = -1; /* the run of equal layers row i is in (rows >= 1) */
    for (int64_t i = 0; i < L; i++) {
        int k_lo = i == 0 ? 0 : 1, k_hi = i == 0 ? 1 : K; /* stages that may start at i */
        /* row i - 1 is a row of the same stages and run (a uniform placement: one group, so one set of sums) */
        bool in_run = uni && i >= 2 && i <= run_last;
        if (i >= 1 && !in_run) {
            run_first = i;
            run_last = i;
            while (run_last + 1 < L && ps_layer_equal(&m->layers[run_last + 1], &m->layers[i])) run_last++;
        }
        for (int k0 = k_lo; k0 < k_hi; k0 = uni ? k_hi : k0 + 1) {
            int g = uni ? 0 : k0, nk = 0;
            for (int k = k0; k < (uni ? k_hi : k0 + 1); k++) ks[nk++] = k;
            int64_t j0 = i + 1; /* the first end walked */
            if (in_run) {
                for (int q = 0; q < nk; q++) {
                    size_t at = ((size_t)ks[q] * N + (size_t)i) * N, from = ((size_t)ks[q] * N + (size_t)i - 1) * N;
                    for (int64_t j = i + 1; j <= run_last + 1; j++) {
                        w->C[at + (size_t)j] = w->C[from + (size_t)j - 1];
                        w->Carg[at + (size_t)j] = w->Carg[from + (size_t)j - 1];
                        w->Cm[at + (size_t)j] = w->Cm[from + (size_t)j - 1];
                        w->Cmarg[at + (size_t)j] = w->Cmarg[from + (size_t)j - 1];
                    }
                }
                j0 = run_last + 2;
            }
            bool record = uni && i >= 1 && i == run_first;
            for (int s = 0; s < nS; s++) {
                stage_acc a = {0};
                size_t sn = (size_t)s * (size_t)(L + 1);
                if (in_run) {
                    /* the sums of [i, run_last + 1): the run's first row after that many layers, if it got there */
                    int64_t n = run_last + 1 - i;
                    if (w->snap_n[s] < n) continue;
                    a = w->snap[sn + (size_t)n];
                } else if (record) {
                    w->snap_n[s] = 0;
                }
                int n_live = 0;
                for (int q = 0; q < nk; q++) {
                    /* memory only grows with j: a stage whose budget the sums so far exceed stays out */
                    live[q] = !(a.sm + inflight[ks[q]] * a.am + a.tm > cap_mem[g] - cp->reserve_bytes);
                    n_live += live[q];
                }
                for (int64_t j = j0; j <= L && n_live > 0; j++) {
                    size_t e = (size_t)g * LS + (size_t)(j - 1) * (size_t)nS + (size_t)s;
                    /* one run of overlapped layers: its ends exposed once (the largest layer's); the gradient
                     * synchronisation apart (below) */
                    a.tt += w->t[e] - w->sy[e] / (double)oc->micro - a.exm;
                    a.sync += w->sy[e];
                    a.bwd += w->bw[e];
                    a.exm = fmax(a.exm, w->ex[e]);
                    a.tt += a.exm;
                    a.sm += w->st[e];
                    a.am += w->act[e];
                    a.tm = fmax(a.tm, w->tmp[e]);
                    a.blocks += ps_layer_is_block(m->layers[j - 1].kind);
                    if (!isfinite(a.tt)) break;
                    if (record && j <= run_last + 1) {
                        w->snap[sn + (size_t)(j - i)] = a;
                        w->snap_n[s] = j - i;
                    }
                    /* The stage's synchronisation runs beside its last backward (ps_cost_plan, Galvatron-BMW
                     * App. C): only what that backward leaves exposed costs, once per iteration, charged per
                     * micro-batch like the rest of the table. */
                    double tc = INFINITY;
                    for (int q = 0; q < nk; q++) {
                        if (!live[q]) continue;
                        int k = ks[q];
                        w->cells += 1;
                        double mem = a.sm + inflight[k] * a.am + a.tm;
                        if (mem > cap_mem[g] - cp->reserve_bytes) {
                            live[q] = false;
                            n_live--;
                            continue;
                        }
                        if (a.blocks == 0) continue; /* an embedding or a head is never a stage alone */
                        if (tc == INFINITY)
                            tc = a.tt + (a.sync > 0 ? ps_cost_overlapped(cp, a.bwd, a.sync) - a.bwd : 0) /
                                            (double)oc->micro;
                        size_t ce = ((size_t)k * N + (size_t)i) * N + (size_t)j;
                        if (tc < w->C[ce]) {
                            w->C[ce] = tc;
                            w->Carg[ce] = s;
                        }
                        if (mem < w->Cm[ce]) {
                            w->Cm[ce] = mem;
                            w->Cmarg[ce] = s;
                        }
                    }
                }
            }
        }
    }

    /* 3. partitions worth costing (ps_cost_plan decides among them):
     *    throughput: the exact partition DP (AMP Eq. 5), Megatron's even split (also the "even split" baseline),
     *                and the end of Galvatron-BMW's bi-objective walk from the memory-balanced partition;
     *    memory:     the exact min-max partition of peak memory (CAPTURE). */
    PS_TRY(ps_grow((void **)&w->parts, &w->cap_parts, 4 * ((size_t)K + 1), sizeof(int64_t)));
    int64_t *pt = w->parts, *pe = pt + K + 1, *pb = pe + K + 1, *pm = pb + K + 1;
    ps_pdp_problem tp_prob = {K, (int)L, w->C, (double)(oc->micro - 1), INFINITY};
    ps_pdp_problem mp_prob = {K, (int)L, w->Cm, 0, INFINITY};
    double tbest = INFINITY, mbest = INFINITY;
    bool have_e = false, have_b = false;
    if (o->objective == PS_SEARCH_MEMORY) {
        PS_TRY(ps_pdp_minmax(w->pdp, &mp_prob, &mbest, pm));
        w->cells += (double)K * (double)N * (double)N / 2;
    } else {
        PS_TRY(even_cuts(w, m, K, pe, &have_e));
        have_e = have_e && partition_fits(w->C, K, N, pe);
        /* the even split's objective bounds the DP's: partial partitions already worse are dropped early */
        if (have_e) tp_prob.upper = ps_pdp_objective(&tp_prob, pe);
        PS_TRY(ps_pdp_solve(w->pdp, &tp_prob, &tbest, pt));
        w->cells += (double)K * (double)N * (double)N;
        if (o->balance && isfinite(tbest)) {
            PS_TRY(ps_pdp_minmax(w->pdp, &mp_prob, &mbest, pb));
            w->cells += (double)K * (double)N * (double)N / 2;
            if (isfinite(mbest)) {
                ps_pdp_balance_walk(&tp_prob, pb);
                have_b = memcmp(pb, pt, ((size_t)K + 1) * sizeof *pb) != 0 &&
                         !(have_e && memcmp(pb, pe, ((size_t)K + 1) * sizeof *pb) == 0);
            }
        }
    }
    if (!isfinite(tbest) && !isfinite(mbest) && !have_e) {
        /* Nothing fits: cost the lightest uniform plan so the binding constraint can be reported. */
        int light = -1;
        for (int s = nS - 1; s >= 0 && light < 0; s--) {
            bool ok = true;
            for (int64_t l = 0; l < L && ok; l++) ok = layer_allows(&m->layers[l], &S[s].s);
            if (ok) light = s;
        }
        if (light < 0) return PS_OK; /* no strategy suits every layer: divisibility, not memory, binds */
        ps_plan plan;
        if (ps_plan_uniform(m, oc->gbs, global_mb / S[light].s.dp, K, 1, oc->sched, &S[light].s, &plan) == PS_OK) {
            PS_TRY(evaluate(w, cp, m, c, o, &plan, index * PS_IDX_STRIDE + PS_IDX_LIGHT, EV_TOP));
        } else {
            ps_error_clear();
        }
        return PS_OK;
    }
    stage_ctx sc = {S, nS, n_layouts, lay_rep, inflight, cap_mem, uni, LS, width, global_mb, oc->micro, K, N};
    if (o->objective == PS_SEARCH_MEMORY) {
        if (isfinite(mbest)) {
            ps_plan plan;
            PS_TRY(plan_from_cuts(&sc, m, oc, pm, w->Cmarg, &plan));
            PS_TRY(evaluate(w, cp, m, c, o, &plan, index * PS_IDX_STRIDE + PS_IDX_MEMORY, EV_TOP));
        }
        return PS_OK;
    }
    /* The DP's partition is often the even one (identical layers): cost it once, for both lists. */
    bool same_te = have_e && isfinite(tbest) && memcmp(pe, pt, ((size_t)K + 1) * sizeof *pe) == 0;
    if (isfinite(tbest))
        PS_TRY(cost_partition(w, &sc, cp, m, c, o, oc, pt, index * PS_IDX_STRIDE + PS_IDX_TIME,
                              EV_TOP | (same_te ? EV_EVEN : 0)));
    if (have_e && !same_te)
        PS_TRY(cost_partition(w, &sc, cp, m, c, o, oc, pe, index * PS_IDX_STRIDE + PS_IDX_EVEN, EV_TOP | EV_EVEN));
    if (have_b) PS_TRY(cost_partition(w, &sc, cp, m, c, o, oc, pb, index * PS_IDX_STRIDE + PS_IDX_BALANCED, EV_TOP));
    return PS_OK;
}

static int64_t *divisors(int64_t n, int *count)
{
    int64_t *d = ps_calloc(4096, sizeof *d);
    int k = 0;
    if (!d) return NULL;
    for (int64_t x = 1; x <= n && k < 4096; x++)
        if (n % x == 0) d[k++] = x;
    *count = k;
    return d;
}


/* The work estimate of a unit, in DP cells. A schedule simulation steps through 3 x K x micro-batches x chunks events,
 * weighted as ten cells (an event costs more than a cell). Chunked schedules: per strategy, a pass over the layers and
 * one plan costed. Others: the stage tables (K x L x S x the average span L/2), the partition DPs (up to three passes
 * of K x (L+1)^2) and up to four plans costed. Only ratios matter: mpi/ balances ranks by it. */
static double unit_work(const ps_search_job *j, const outer *oc)
{
    strat S[PS_SEARCH_MAX_STRATS];
    ps_strategy lr[PS_SEARCH_MAX_LAYOUTS];
    int nl = 0;
    int64_t width = j->c->n_gpus / oc->pp;
    int nS = build_strategies(width, ps_search_max_tp(&j->o, j->c), oc->gbs / oc->micro, j->o.mbs_max, j->o.overlap,
                              S, PS_SEARCH_MAX_STRATS, &nl, lr);
    if (nS == 0) return 1;
    double K = oc->pp, L = (double)j->m->n_layers, N = L + 1;
    double sim = 10 * 3 * K * (double)oc->micro * oc->vpp;
    if (oc->vpp > 1) return 1 + nS * (L + sim);
    return 1 + K * L * nS * L / 2 + 3 * K * N * N + 4 * sim;
}

ps_status ps_search_job_create(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                               const ps_search_opts *o, ps_search_job **out)
{
    *out = NULL;
    PS_CHECK_INPUT(o->gbs_lo >= 1 && o->gbs_hi >= o->gbs_lo && (o->gbs_step >= 1 || o->gbs_lo == o->gbs_hi),
                   "global batch range %lld:%lld:%lld is empty", (long long)o->gbs_lo, (long long)o->gbs_hi,
                   (long long)o->gbs_step);
    PS_CHECK_INPUT(o->objective == PS_SEARCH_THROUGHPUT || o->objective == PS_SEARCH_MEMORY,
                   "unknown search objective %d", o->objective);
    PS_CHECK_INPUT(o->top_k >= 1 && o->top_k <= 1000, "top k must be in [1, 1000] (got %d)", o->top_k);
    PS_CHECK_INPUT(o->quanta >= 16 && o->quanta <= 65536, "memory quanta must be in [16, 65536] (got %d)", o->quanta);
    PS_CHECK_INPUT(c->n_gpus >= 1, "cluster %s has no GPUs to plan for", c->name);
    ps_search_job *j = ps_calloc(1, sizeof *j);
    if (!j) return PS_ERR_SYSTEM;
    *j = (ps_search_job){.cp = cp, .m = m, .c = c, .o = *o};
    int nk = 0;
    if (o->schedules) {
        for (int i = 0; i < o->n_schedules && nk < 32; i++) {
            if (ps_sched_kind_find(o->schedules[i]) < 0) {
                free(j);
                return PS_FAIL(PS_ERR_INPUT, "unknown pipeline schedule '%s'", o->schedules[i]);
            }
            j->kinds[nk++] = o->schedules[i];
        }
    } else {
        for (int i = 0; i < ps_sched_kind_count() && nk < 32; i++) j->kinds[nk++] = ps_sched_kind_name(i);
    }

    /* Enumerate the units in a fixed order: their index is the final tie-breaker. */
    int npp = 0;
    int64_t *pps = divisors(c->n_gpus, &npp);
    if (!pps) {
        free(j);
        return PS_ERR_SYSTEM;
    }
    int64_t blocks = count_blocks(m);
    size_t cap = 1024, n = 0;
    outer *cands = ps_calloc(cap, sizeof *cands);
    ps_status st = cands ? PS_OK : PS_ERR_SYSTEM;
    /* Largest batch first: it is usually the fastest, so the pruning floors (prunable) rise early. The order changes
     * how much is pruned, never the result. The schedules of one (batch, pipeline degree, micro-batch count) are
     * neighbours: they share the layer tables (search_outer step 1), which a worker then computes once. */
    int64_t n_gbs = o->gbs_lo == o->gbs_hi ? 1 : (o->gbs_hi - o->gbs_lo) / o->gbs_step + 1;
    for (int64_t kg = n_gbs - 1; kg >= 0 && st == PS_OK; kg--) {
        int64_t gbs = o->gbs_lo + kg * (n_gbs > 1 ? o->gbs_step : 0);
        for (int a = 0; a < npp && st == PS_OK; a++) {
            int64_t pp = pps[a];
            for (int64_t micro = 1; micro <= gbs && ps_plan_size_ok(micro, pp) && st == PS_OK; micro++) {
                if (gbs % micro) continue;
                for (int s = 0; s < nk; s++) {
                    int vpp = ps_sched_kind_default_chunks(ps_sched_kind_find(j->kinds[s])); /* chunked kinds: 2 */
                    if (pp * vpp > blocks || (pp == 1 && strcmp(j->kinds[s], "1f1b") != 0)) continue; /* pp 1: one */
                    /* beyond the caps on micro-batches (x stages) the cost model refuses a plan: not a candidate */
                    if (!ps_plan_size_ok(micro, pp * vpp)) continue;
                    if (n == cap) {
                        outer *nc = realloc(cands, 2 * cap * sizeof *cands);
                        if (!nc) {
                            st = PS_FAIL(PS_ERR_SYSTEM, "out of memory listing candidates");
                            break;
                        }
                        cands = nc;
                        cap *= 2;
                    }
                    cands[n++] = (outer){gbs, micro, (int)pp, vpp, j->kinds[s]};
                }
            }
        }
    }
    free(pps);
    j->units = cands;
    j->n = (int64_t)n;
    if (st == PS_OK && !(j->work = ps_calloc(n + 1, sizeof *j->work))) st = PS_ERR_SYSTEM;
    for (size_t i = 0; st == PS_OK && i < n; i++) j->work[i] = unit_work(j, &cands[i]);
    if (st != PS_OK) {
        ps_search_job_free(j);
        return st;
    }
    *out = j;
    return PS_OK;
}

void ps_search_job_free(ps_search_job *j)
{
    if (!j) return;
    free(j->units);
    free(j->work);
    free(j);
}

int64_t ps_search_job_units(const ps_search_job *j) { return j->n; }

double ps_search_job_unit_work(const ps_search_job *j, int64_t u) { return u >= 0 && u < j->n ? j->work[u] : 0; }

static void atomic_raise(double *p, double v)
{
    /* Only the thread holding the ps_search_source critical section writes; readers use atomic reads. */
    if (v > *p) {
#pragma omp atomic write
        *p = v;
    }
}

/* This worker's floors (k-th best and best even-split samples/s; 0 when it has fewer), raised into the job's, and,
 * through the source, exchanged with other ranks. */
static void share_floors(ps_search_job *j, const worker *w, const ps_search_source *src)
{
    double top = w->n_top >= j->o.top_k ? w->top[j->o.top_k - 1].pred.samples_per_s : 0;
    double even = w->have_even ? w->even.pred.samples_per_s : 0;
    /* the source's own critical section: its calls (MPI under SERIALIZED) never overlap */
#pragma omp critical(ps_search_source)
    {
        atomic_raise(&j->floor_top, top);
        atomic_raise(&j->floor_even, even);
        if (src && src->share) {
            double t = j->floor_top, e = j->floor_even;
            src->share(src->arg, &t, &e);
            atomic_raise(&j->floor_top, t);
            atomic_raise(&j->floor_even, e);
        }
    }
}

/* A worker's workspaces, and the results still in it (those the merge did not take). */
static void worker_free(worker *w)
{
    for (int i = 0; i < w->n_top; i++) cand_free(&w->top[i]);
    if (w->have_even) cand_free(&w->even);
    free(w->top);
    free(w->t);
    free(w->st);
    free(w->act);
    free(w->tmp);
    free(w->ex);
    free(w->sy);
    free(w->bw);
    free(w->snap);
    free(w->snap_n);
    free(w->fb);
    free(w->lmin);
    free(w->C);
    free(w->Carg);
    free(w->Cm);
    free(w->Cmarg);
    free(w->parts);
    for (int i = 0; i < PS_SEARCH_SHAPES; i++) free(w->shapes[i].buf);
    free(w->dmem);
    free(w->even_cuts);
    free(w->ltime);
    free(w->lmem);
    free(w->choice);
    free(w->rows);
    ps_ldp_destroy(w->ldp);
    ps_pdp_destroy(w->pdp);
    ps_sched_destroy(w->sched);
}

/* The source of ps_search_run: every unit, in order. */
static int64_t all_units(void *arg)
{
    int64_t *next = arg;
    return (*next)++;
}

ps_status ps_search_run(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, const ps_search_opts *o,
                        ps_search_result *out)
{
    memset(out, 0, sizeof *out);
    ps_search_job *j = NULL;
    PS_TRY(ps_search_job_create(cp, m, c, o, &j));
    int64_t next = 0;
    ps_search_source src = {.next = all_units, .arg = &next};
    ps_status st = ps_search_job_run(j, &src, out);
    ps_search_job_free(j);
    return st;
}

ps_status ps_search_job_run(ps_search_job *j, const ps_search_source *src, ps_search_result *out)
{
    memset(out, 0, sizeof *out);
    const ps_cost_params *cp = j->cp;
    const ps_model *m = j->m;
    const ps_cluster *c = j->c;
    const ps_search_opts *o = &j->o;
    int nthreads = 1;
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    worker *ws = ps_calloc((size_t)nthreads, sizeof *ws);
    if (!ws) return PS_ERR_SYSTEM;
    ps_status st = PS_OK;
    for (int t = 0; t < nthreads && st == PS_OK; t++) {
        ws[t].job = j;
        ws[t].min_over = INFINITY;
        ws[t].min_over_bound = 1;
        ws[t].min_over_unit = INT64_MAX;
        ws[t].err_index = INT64_MAX;
        ws[t].top = ps_calloc((size_t)o->top_k + 1, sizeof *ws[t].top);
        if (!ws[t].top || ps_ldp_create(&ws[t].ldp) != PS_OK || ps_pdp_create(&ws[t].pdp) != PS_OK ||
            ps_sched_create(&ws[t].sched) != PS_OK)
            st = PS_FAIL(PS_ERR_SYSTEM, "out of memory creating search workspaces");
    }
    int64_t taken = 0;
    if (st == PS_OK) {
        /* Units differ widely in cost (pp 1 vs pp 32): every thread takes the next unit from the source when it is
         * free. Each keeps its own top k and workspaces; the merge below orders by the total order, so results do
         * not depend on the thread count or on which thread (or rank) ran what. */
#pragma omp parallel num_threads(nthreads) reduction(+ : taken)
        {
            int t = 0;
#ifdef _OPENMP
            t = omp_get_thread_num();
#endif
            worker *w = &ws[t];
            for (;;) {
                int64_t i;
#pragma omp critical(ps_search_source)
                i = src->next(src->arg);
                if (i < 0 || i >= j->n) break;
                taken++;
                /* the result is an error now: take the units left without searching them, so that the other
                 * threads (and, through a shared source, ranks) reach the end and the failure sooner */
                if (w->st_err != PS_OK) continue;
                ps_status s2 = search_outer(w, cp, m, c, o, &j->units[i], i);
                if (s2 != PS_OK && i < w->err_index) {
                    w->st_err = s2;
                    w->err_index = i;
                    ps_strlcpy(w->err_msg, ps_error_message(), sizeof w->err_msg);
                }
                if (o->objective == PS_SEARCH_THROUGHPUT) share_floors(j, w, src);
            }
        }
    }
    out->candidates = taken;
    /* merge */
    out->top = ps_calloc((size_t)o->top_k + 1, sizeof *out->top);
    double min_over = INFINITY;
    int min_over_bound = 1;
    int64_t min_over_unit = INT64_MAX;
    int64_t err_index = INT64_MAX;
    ps_status err = PS_OK;
    char err_msg[512] = "";
    worker merged = {.top = out->top};
    for (int t = 0; t < nthreads; t++) {
        worker *w = &ws[t];
        out->evaluated += w->evaluated;
        out->feasible += w->feasible;
        out->pruned += w->pruned;
        out->dp_cells += w->cells;
        if (ps_search_over_less(w->min_over, w->min_over_bound, w->min_over_unit, min_over, min_over_bound,
                                min_over_unit)) {
            min_over = w->min_over;
            min_over_bound = w->min_over_bound;
            min_over_unit = w->min_over_unit;
            ps_strlcpy(out->binding, w->min_over_msg, sizeof out->binding);
        }
        if (w->st_err != PS_OK && w->err_index < err_index) {
            err_index = w->err_index;
            err = w->st_err;
            ps_strlcpy(err_msg, w->err_msg, sizeof err_msg);
        }
        if (out->top) {
            for (int i = 0; i < w->n_top; i++) offer(&merged, o->top_k, o->objective, &w->top[i]);
            w->n_top = 0;
        }
        ps_search_cand *even = &out->base[PS_BASE_EVEN];
        if (w->have_even && (!out->have_base[PS_BASE_EVEN] || ps_search_cand_order(&w->even, even, o->objective) < 0)) {
            if (out->have_base[PS_BASE_EVEN]) cand_free(even);
            *even = w->even;
            out->have_base[PS_BASE_EVEN] = 1;
            w->have_even = 0;
        }
        worker_free(w); /* and what the merge did not take */
    }
    out->n_top = merged.n_top;
    free(ws);
    if (st == PS_OK && !out->top) st = PS_FAIL(PS_ERR_SYSTEM, "out of memory merging results");
    if (st == PS_OK && err != PS_OK) st = PS_FAIL(err, "%s", err_msg);
    if (st != PS_OK) {
        ps_search_result_free(out);
        return st;
    }
    out->min_over = min_over;
    out->min_over_bound = min_over_bound;
    out->min_over_unit = min_over_unit;
    ps_search_explain(out, o, c);
    return PS_OK;
}

const char *ps_search_objective_name(int objective) { return objective == PS_SEARCH_MEMORY ? "memory" : "throughput"; }

int ps_search_objective_find(const char *name)
{
    if (strcmp(name, "throughput") == 0) return PS_SEARCH_THROUGHPUT;
    if (strcmp(name, "memory") == 0) return PS_SEARCH_MEMORY;
    return -1;
}

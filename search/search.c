/* The search driver (docs/search.md). For every (global batch, pipeline degree, schedule, micro-batch count) unit,
 * search_unit
 *   1. costs each distinct layer under every strategy of the stage width (tp x dp = GPUs / pp; ZeRO 0-3;
 *      recompute none/selective/full; sequence parallelism with tp > 1): layer_tables_build,
 *   2. for chunked schedules (interleaved, V-shapes), which keep Megatron's even split and one strategy for all
 *      layers, checks and costs those plans: search_chunked; otherwise
 *   3. builds the stage table C[k][i][j]: the fastest single strategy for layers [i, j) on stage k whose memory
 *      (static + in-flight activations from the schedule + transient + reserve) fits the stage's GPUs:
 *      stage_tables_build,
 *   4. runs the partition DPs (AMP Eq. 5 objective) over the cut points, refines every stage with the per-layer DP
 *      (Galvatron-BMW Sec. IV-A) under the stage's memory budget, and costs the resulting plans with the full cost
 *      model (schedule simulation), keeping the top k: search_partitions.
 * The DP objectives are proxies; the ranking uses ps_cost_plan only, so every reported number is the cost model's. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels_internal.h"
#include "ps_schedules.h"
#include "ps_search.h"
#include "search_internal.h"

void ps_search_opts_default(ps_search_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mbs_max = 16;
    o->top_k = 5;
    o->per_layer = 1;
    o->balance = 1;
    o->quanta = 256;
    o->overlap = 1;
    o->framework = PS_FW_ANY;
    o->fixed = (ps_search_fixed){.zero = -1, .recompute = -1};
}

void ps_search_fixed_describe(const ps_search_fixed *f, char *buf, size_t cap)
{
    if (cap) buf[0] = '\0';
#define ITEM(...) ps_strcatf(buf, cap, "%s", buf[0] ? ", " : ""), ps_strcatf(buf, cap, __VA_ARGS__)
    if (f->tp > 0) ITEM("tp %d", f->tp);
    if (f->pp > 0) ITEM("pp %d", f->pp);
    if (f->zero >= 0) ITEM("ZeRO %d", f->zero);
    if (f->recompute >= 0) ITEM("recompute %s", ps_recompute_name((ps_recompute)f->recompute));
    if (f->mbs > 0) ITEM("mbs %lld", (long long)f->mbs);
    if (f->micro > 0) ITEM("%lld micro-batches", (long long)f->micro);
    if (f->cp > 0) ITEM("cp %d", f->cp);
    if (f->cp_comm > 0) ITEM("cp_comm %s", ps_cp_comm_name((ps_cp_comm)(f->cp_comm - 1)));
    if (f->ep > 0) ITEM("ep %d", f->ep);
    if (f->etp > 0) ITEM("etp %d", f->etp);
#undef ITEM
}

/* "no plan Megatron-LM can run with tp 4 fits: ": what a binding message starts with when the search was restricted
 * (--framework, fixed fields), so that the message does not read as if no plan at all fitted; "" when it was not. */
static void restricted_prefix(const ps_search_opts *o, char *buf, size_t cap)
{
    const ps_framework_rules *r = ps_framework_get((ps_framework)o->framework);
    char fx[200];
    ps_search_fixed_describe(&o->fixed, fx, sizeof fx);
    buf[0] = '\0';
    if (!r && !fx[0]) return;
    ps_strcatf(buf, cap, "no plan");
    if (r) ps_strcatf(buf, cap, " %s can run", r->title);
    if (fx[0]) ps_strcatf(buf, cap, " with %s", fx);
    ps_strcatf(buf, cap, " fits: ");
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
    if (o->fixed.tp > 0) return o->fixed.tp;
    if (o->max_tp > 0) return o->max_tp;
    /* TP stays where GPUs talk over NVLink without the network: a node, or a GB200 NVL72 rack's 72 GPUs */
    int64_t d = ps_node_group_domain_gpus(&c->groups[0]);
    return (int)(d > 0 ? d : 1);
}

/* The largest expert tensor-parallel degree tried: --max-tp's bound, else an NVLink domain's GPUs, as for tp, but not
 * a fixed tp (etp is the experts' own degree: tp 1 with etp 2 is a plan of its own). */
static int search_max_etp(const ps_search_opts *o, const ps_cluster *c)
{
    if (o->max_tp > 0) return o->max_tp;
    int64_t d = ps_node_group_domain_gpus(&c->groups[0]);
    return (int)(d > 0 ? d : 1);
}

static int64_t search_max_cp(const ps_search_opts *o, const ps_model *m, const ps_cluster *c);

/* The generic binding constraints, when no plan was seen short of memory. */
static void explain_generic(ps_search_result *r, const ps_search_opts *o, const ps_model *m, const ps_cluster *c)
{
    int64_t mbs_max = o->fixed.mbs > 0 ? o->fixed.mbs : o->mbs_max;
    /* Two causes plain from the sizes alone, named before the generic ones. Every data-parallel replica takes at least
     * one sample, and a replica spans at most max TP x max CP x max PP GPUs (a stage holds at least one layer). */
    int max_pp = (int)(m->n_layers < PS_SEARCH_MAX_PP ? m->n_layers : PS_SEARCH_MAX_PP);
    int64_t max_cp = search_max_cp(o, m, c);
    int64_t per_replica = (int64_t)ps_search_max_tp(o, c) * max_cp * (max_pp > 0 ? max_pp : 1);
    if (o->gbs_hi > 0 && o->gbs_hi < c->n_gpus / per_replica) {
        char cps[48] = "";
        if (max_cp > 1) snprintf(cps, sizeof cps, ", CP up to %lld", (long long)max_cp);
        snprintf(r->binding, sizeof r->binding,
                 "a global batch of at most %lld samples is too small for %lld GPUs: with TP up to %d%s and at most %d "
                 "pipeline stages (one per layer) there are at least %lld data-parallel replicas, each needing a "
                 "sample", (long long)o->gbs_hi, (long long)c->n_gpus, ps_search_max_tp(o, c), cps, max_pp,
                 (long long)(c->n_gpus / per_replica));
        return;
    }
    /* the fewest micro-batches any plan needs: all GPUs data-parallel, the largest micro-batch */
    int64_t least_micro = o->gbs_lo / ((int64_t)c->n_gpus * (mbs_max > 0 ? mbs_max : 1));
    if (least_micro > PS_PLAN_MAX_MICRO_BATCHES) {
        snprintf(r->binding, sizeof r->binding,
                 "a global batch of %lld samples needs at least %lld micro-batches per iteration on %lld GPUs with "
                 "micro-batches of at most %lld samples; plans are simulated up to %d: raise --mbs-max or lower the "
                 "batch", (long long)o->gbs_lo, (long long)least_micro, (long long)c->n_gpus, (long long)mbs_max,
                 PS_PLAN_MAX_MICRO_BATCHES);
        return;
    }
    if (r->candidates == 0)
        snprintf(r->binding, sizeof r->binding,
                 "no (batch, pipeline, micro-batch) combination divides the %lld GPUs and batch %lld..%lld",
                 (long long)c->n_gpus, (long long)o->gbs_lo, (long long)o->gbs_hi);
    else
        snprintf(r->binding, sizeof r->binding,
                 "no tp x dp split of the stages divides the batch into micro-batches of at most %lld samples, "
                 "or TP degrees up to %d do not divide the heads",
                 (long long)mbs_max, ps_search_max_tp(o, c));
}

void ps_search_explain(ps_search_result *r, const ps_search_opts *o, const ps_model *m, const ps_cluster *c)
{
    if (r->n_top > 0) return;
    if (!r->binding[0]) explain_generic(r, o, m, c);
    /* A restricted search says so first, once: the merge across ranks explains the merged result again. */
    char pre[320];
    restricted_prefix(o, pre, sizeof pre);
    size_t n = strlen(pre);
    if (!n || strncmp(r->binding, pre, n) == 0) return;
    char msg[sizeof r->binding];
    ps_strlcpy(msg, pre, sizeof msg);
    ps_strcatf(msg, sizeof msg, "%s", r->binding);
    ps_strlcpy(r->binding, msg, sizeof r->binding);
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
    int kind;           /* schedule kind (schedules/: ps_sched_kind_name gives its name) */
    int strat;          /* -1: every strategy of the stage width; else only this one (its index among them), for
                           every layer: a framework that takes one strategy for all blocks (ps_search_job_create) */
    int cp;             /* the context-parallel degree of every strategy of the unit (1: none): one per plan */
    unsigned cp_kinds;  /* ... and its kinds (cp > 1): bit k for ps_cp_comm k. Ring and a2a change no layout (the
                           boundary activation is the same), so one unit holds both and the layer DP may mix them */
    int ep, etp;        /* the expert grid of every strategy of the unit (ps_strategy.ep / etp; etp 0: each
                           strategy's tp): Megatron-LM takes one --expert-model-parallel-size and one
                           --expert-tensor-parallel-size per run, so one per plan */
    int rcn;            /* 0: that strategy as it is; n >= 1 (a full-recomputation strategy, recompute_partial):
                           Megatron-LM's --recompute-method block, the strategy on the first n transformer layers of
                           every model chunk and its twin without recomputation on the rest (the unit's columns 0
                           and 1) */
} outer;

/* Schedule kinds one job tries: a list naming each kind of schedules/ once fits (it has 10); names past this are
 * dropped, as repeating a kind only repeats units. */
#define PS_SEARCH_MAX_KINDS 32
/* Pipeline degrees listed: every divisor of the GPU count. A count below 2^31 has at most 1600 divisors. */
#define PS_SEARCH_MAX_DIVISORS 4096

/* The job: the units, and the pruning floors shared by its threads and (through the source) ranks. */
struct ps_search_job {
    const ps_cost_params *cp;
    const ps_model *m;
    const ps_cluster *c;
    ps_search_opts o;
    int kinds[PS_SEARCH_MAX_KINDS];
    outer *units;
    int64_t n;
    double *work;
    /* Pruning floors every thread reads and raises (omp atomic), and the source exchanges with other ranks: the best
     * k-th best samples/s and best even-split samples/s known anywhere. 0: none yet (every bound is above 0). */
    double floor_top, floor_even;
    /* Layer rows of the layer tables: equal layers (ps_layer_equal) cost alike under every strategy, so the tables
     * hold one row per distinct layer, row[l] being layer l's and rep[r] the first layer of row r. A 96-block model
     * has 3 rows instead of 98: no row is copied or costed twice. */
    int64_t *row, *rep, n_rows;
};

static int64_t count_blocks(const ps_model *m)
{
    int64_t n = 0;
    for (int64_t i = 0; i < m->n_layers; i++) n += ps_layer_is_block(m->layers[i].kind);
    return n;
}

/* ---- strategies of one stage width ---- */
/* Strategies of one stage width: tp x (sp | overlap) x ZeRO x recompute x attention kernel; about 1000 for a 72-GPU
 * NVLink domain with te and --attention search. Their tables grow to hold them all (strategies_list); this many are
 * the most a candidate index can number (PS_IDX_STRIDE), and a unit with more is an error that says so, never a cut. */
#define PS_SEARCH_MAX_STRATS (1 << 18)
/* At most this many layouts, i.e. 21 TP degrees per stage; wider TP choices are cut, not overrun. */
#define PS_SEARCH_MAX_LAYOUTS 64
typedef struct {
    ps_strategy s;
    int layout; /* (tp, sp, overlapped) class: a change of class costs resharding or a broken overlap */
} strat;

int ps_search_attention(const ps_search_opts *o, const ps_cluster *c, ps_attn out[2])
{
    ps_attn all = ps_cost_attn(c, 0, c->n_gpus, PS_ATTN_AUTO);
    if (o->attention == PS_SEARCH_ATTN_BOTH && all == PS_ATTN_FUSED) {
        out[0] = PS_ATTN_UNFUSED;
        out[1] = PS_ATTN_FUSED;
        return 2;
    }
    out[0] = o->attention == PS_ATTN_AUTO || o->attention == PS_SEARCH_ATTN_BOTH ? all : (ps_attn)o->attention;
    return 1;
}

/* What the strategies of a unit may be: the search's options, the rules of o->framework for the unit's pipeline
 * degree (ZeRO stages with and without pp, in bf16, beside tensor or pipeline parallelism; the DP overlap each stage
 * runs with; TP overlap, SP, recomputation and attention kernels; TP degrees the model's heads and sequence take) and
 * the fields the user fixed. */
typedef struct {
    int max_tp, tp;        /* tp up to max_tp; exactly tp when > 0 */
    int64_t mbs_max, mbs;  /* samples per replica up to mbs_max; exactly mbs when > 0 */
    bool zero[4];          /* ZeRO stages with dp > 1 (dp 1: stage 0 only, ps_strategy.zero) */
    bool zero_mp[4];       /* ... beside tp > 1 or pp > 1 */
    int dp_mode[4];        /* dp > 1: the strategy's dp_no_overlap at each stage, -1: none (ps_search_fw_dp_mode) */
    bool dp_no_overlap;    /* dp 1: o->dp_no_overlap (no DP collectives to price) */
    bool pp_on;
    bool recompute[PS_RECOMP_COUNT];
    bool overlap[PS_OVERLAP_COUNT];
    bool sp, plain;        /* tp > 1 with SP / without (plain or overlapped) */
    bool fused_selective;  /* also selective recomputation with fused attention (it equals none there): only when the
                              user fixed recompute to selective, which would otherwise leave no strategy */
    const ps_search_opts *o; /* TP degrees under a framework (ps_search_fw_tp_ok): NULL when any */
    const ps_model *m;
    int cp;                /* the unit's context-parallel degree (1: none) and kinds (outer.cp_kinds) */
    unsigned cp_kinds;
    int ep, etp;           /* the unit's expert grid (outer.ep, outer.etp) */
    /* cp > 1: leave out the strategies whose replica micro-batch divides by cp. Each is dominated by the cp 1
     * strategy of the same tp and cp times the dp, which the job's cp 1 unit of the same (batch, pipeline,
     * micro-batches, kind) has: the same tokens per GPU, the same GEMMs, FLOPs, activations, gradient group and
     * hand-overs, and no CP transfers (docs/search.md, "Context parallelism"). Only when cp 1 units exist and the
     * micro-batch is not fixed. */
    bool cp_dominated_out;
    bool cp_zero[4];       /* ZeRO stages with cp > 1 (the framework's) */
} strat_filter;

static void strat_filter_of(const ps_search_opts *o, const ps_cluster *c, const ps_model *m, int pp, strat_filter *f)
{
    const ps_framework_rules *r = ps_framework_get((ps_framework)o->framework);
    *f = (strat_filter){.max_tp = ps_search_max_tp(o, c), .tp = o->fixed.tp > 0 ? o->fixed.tp : 0,
                        .mbs_max = o->mbs_max, .mbs = o->fixed.mbs > 0 ? o->fixed.mbs : 0,
                        .fused_selective = o->fixed.recompute == PS_RECOMP_SELECTIVE, .pp_on = pp > 1,
                        .dp_no_overlap = o->dp_no_overlap, .sp = !r || r->sp, .plain = !r || !r->sp_required,
                        .o = r ? o : NULL, .m = m, .cp = 1, .cp_kinds = 1,
                        .cp_dominated_out = o->fixed.cp <= 1 && o->fixed.mbs <= 0};
    /* [D] the bf16 rule of DeepSpeed's pipeline engine (ps_framework_rules.zero_pp_bf16) */
    bool bf16 = m->dtype == PS_DTYPE_BF16 || m->dtype == PS_DTYPE_FP8;
    const bool *zs = !r ? NULL : pp <= 1 ? r->zero : bf16 ? r->zero_pp_bf16 : r->zero_pp;
    for (int z = 0; z < 4; z++) {
        f->cp_zero[z] = !r || r->cp_zero[z];
        f->zero[z] = (o->fixed.zero < 0 || o->fixed.zero == z) && (!r || zs[z]);
        f->zero_mp[z] = !r || r->zero_model_parallel[z];
        f->dp_mode[z] = ps_search_fw_dp_mode(o, pp > 1, z);
    }
    /* torchtitan's per-op checkpointing (op) is one framework's own mode: tried under a framework that runs it
     * (--framework torchtitan) or when fixed (--recompute op), not in the framework-free space, whose plans take the
     * kinds every framework names (it would add a third to the strategies for a kind none of the others can launch) */
    for (int rc = PS_RECOMP_NONE; rc < PS_RECOMP_COUNT; rc++)
        f->recompute[rc] = (o->fixed.recompute < 0 || o->fixed.recompute == rc) &&
                           (r ? r->recompute[rc] : rc != PS_RECOMP_OP || o->fixed.recompute == rc);
    for (int ov = 0; ov < PS_OVERLAP_COUNT; ov++)
        f->overlap[ov] = (ov == PS_OVERLAP_NONE || o->overlap) && (!r || r->overlap[ov]);
}

int ps_search_fw_dp_mode(const ps_search_opts *o, bool pp_on, int zero)
{
    const ps_framework_rules *r = ps_framework_get((ps_framework)o->framework);
    if (!r) return o->dp_no_overlap;
    const bool *asked = (o->dp_no_overlap ? r->dp_exposed : r->dp_overlap)[pp_on];
    const bool *other = (o->dp_no_overlap ? r->dp_overlap : r->dp_exposed)[pp_on];
    if (asked[zero]) return o->dp_no_overlap;
    if (!o->dp_overlap_given && other[zero]) return !o->dp_no_overlap;
    return -1;
}

ps_strategy ps_search_fw_layer(const ps_search_opts *o, const ps_layer *l, const ps_strategy *s)
{
    ps_strategy v = *s;
    const ps_framework_rules *r = ps_framework_get((ps_framework)o->framework);
    if (r && r->recompute_blocks_only && !ps_layer_has_attention(l->kind)) v.ckpt = PS_RECOMP_NONE;
    return v;
}

bool ps_search_fw_tp_ok(const ps_search_opts *o, const ps_model *m, int tp, int cp)
{
    if (o->framework == PS_FW_ANY) return true;
    for (int64_t i = 0; i < m->n_layers; i++)
        if (!ps_framework_tp_ok((ps_framework)o->framework, &m->layers[i], tp, cp, i, NULL, 0)) return false;
    return true;
}

int ps_search_fw_attention(const ps_search_opts *o, const ps_cluster *c, ps_attn out[2])
{
    const ps_framework_rules *r = ps_framework_get((ps_framework)o->framework);
    ps_attn all[2];
    int n = ps_search_attention(o, c, all), k = 0;
    for (int a = 0; a < n; a++)
        if (!r || r->attention[all[a]]) out[k++] = all[a];
    return k;
}

/* Every strategy of one stage width that f allows, grouped by layout; lay_rep[l] is a strategy of layout l (what
 * resharding and overlap depend on). Overlapped TP (Oases): cross-pass with every recomputation, and oases with full
 * recomputation, for tp > 1 without SP and at least two samples per replica to split; and Transformer Engine's (te)
 * beside every SP strategy, in SP's layout class (it changes no layout and forms no run). Each strategy comes with
 * every attention kernel of `attn` (the kernel does not change a layer's layout); a fused layer has no selective
 * recomputation (it would equal none: no scores to drop). A layout none of whose strategies f allows is not counted.
 * out == NULL: only count them (and the layouts). */
static int build_strategies(int64_t width, int64_t global_mb, const strat_filter *f, const ps_attn *attn, int n_attn,
                            strat *out, int cap, int *n_layouts, ps_strategy *lay_rep)
{
    int n = 0, lay = 0;
    const int64_t cp = f->cp > 1 ? f->cp : 1;
    if (width % cp) {
        *n_layouts = 0;
        return 0;
    }
    /* context parallelism runs fused attention only (ps_cost_layer); a model without attention has no kernel */
    bool any_attn = false;
    for (int64_t l = 0; l < f->m->n_layers && !any_attn; l++) any_attn = ps_layer_has_attention(f->m->layers[l].kind);
    for (int64_t tp = 1; tp <= width / cp && tp <= f->max_tp; tp++) {
        if ((width / cp) % tp || (f->tp && tp != f->tp)) continue;
        if (lay + 3 > PS_SEARCH_MAX_LAYOUTS) break; /* the per-stage tables below are sized for this many */
        int64_t dp = width / cp / tp, dpc = dp * cp; /* dpc: the gradient group, what ZeRO shards over */
        if (global_mb % dp) continue;
        int64_t per = global_mb / dp;
        if (f->mbs ? per != f->mbs : per > f->mbs_max) continue;
        if (cp > 1 && f->cp_dominated_out && per % cp == 0) continue;
        if (f->o && !ps_search_fw_tp_ok(f->o, f->m, (int)tp, (int)cp)) continue;
        bool can_ov = cp == 1 && tp > 1 && per >= 2 && (f->overlap[PS_OVERLAP_CROSS] || f->overlap[PS_OVERLAP_OASES]);
        /* variants: 0 plain, 1 SP, 2 overlapped */
        for (int v = 0; v <= (tp > 1 ? 1 + can_ov : 0); v++) {
            if (tp > 1 && !(v == 1 ? f->sp : f->plain)) continue;
            bool first = true;
            int ov_lo = v == 2 ? PS_OVERLAP_CROSS : PS_OVERLAP_NONE;
            int ov_hi = v == 2 ? PS_OVERLAP_OASES : v == 1 ? 1 : PS_OVERLAP_NONE; /* SP: 1 is TE's */
            for (int ov = ov_lo; ov <= ov_hi; ov++) {
                /* SP's second pass (ov 1): Transformer Engine's overlap, in SP's layout class */
                ps_overlap kind = v == 1 && ov ? PS_OVERLAP_TE : (ps_overlap)ov;
                if (!f->overlap[kind]) continue;
                for (int zero = 0; zero <= (dpc > 1 ? 3 : 0); zero++) {
                    if (!f->zero[zero] || (cp > 1 && !f->cp_zero[zero])) continue;
                    if (dpc > 1 && ((!f->zero_mp[zero] && (tp > 1 || f->pp_on)) || f->dp_mode[zero] < 0)) continue;
                    bool no_ov = dpc > 1 ? f->dp_mode[zero] == 1 : f->dp_no_overlap;
                    for (int rc = PS_RECOMP_NONE; rc < PS_RECOMP_COUNT; rc++) {
                        if (!f->recompute[rc] || (kind == PS_OVERLAP_OASES && rc != PS_RECOMP_FULL)) continue;
                        /* torchtitan's per-op checkpointing beside Oases' overlap: the cost model refuses it */
                        if (rc == PS_RECOMP_OP && ps_overlap_is_oases(kind)) continue;
                        for (int ak = 0; ak < n_attn * PS_CP_COMM_COUNT && n < cap; ak++) {
                            int a = ak / PS_CP_COMM_COUNT, k = ak % PS_CP_COMM_COUNT;
                            if (cp > 1 ? !(f->cp_kinds >> k & 1) : k > 0) continue;
                            if (attn[a] == PS_ATTN_FUSED && rc == PS_RECOMP_SELECTIVE && !f->fused_selective) continue;
                            if (cp > 1 && any_attn && attn[a] != PS_ATTN_FUSED) continue;
                            if (out) {
                                out[n].s = (ps_strategy){.tp = (int)tp, .dp = (int)dp, .zero = zero,
                                                         .ckpt = (ps_recompute)rc, .sp = v == 1, .overlap = kind,
                                                         .attn = attn[a], .dp_no_overlap = no_ov, .cp = (int)cp,
                                                         .cp_comm = (ps_cp_comm)k, .ep = f->ep, .etp = f->etp};
                                out[n].layout = lay;
                                if (first) lay_rep[lay] = out[n].s;
                            }
                            first = false;
                            n++;
                        }
                    }
                }
            }
            if (!first) lay++;
        }
    }
    *n_layouts = lay;
    return n;
}

/* Every strategy of build_strategies into *out, grown to hold them (out == NULL: only count them into *n). More than
 * PS_SEARCH_MAX_STRATS cannot be numbered apart (the candidate indices): an input error naming what narrows them. */
static ps_status strategies_list(int64_t width, int64_t global_mb, const strat_filter *f, const ps_attn *attn,
                                 int n_attn, strat **out, size_t *cap, int *n, int *n_layouts, ps_strategy *lay_rep)
{
    int lay = 0, total = build_strategies(width, global_mb, f, attn, n_attn, NULL, INT_MAX, &lay, NULL);
    if (total > PS_SEARCH_MAX_STRATS)
        return PS_FAIL(PS_ERR_INPUT,
                       "%d strategies for stages of %lld GPUs, above the %d the search can number; narrow them "
                       "(--max-tp, --mbs-max, --tp-overlap none, --attention fused, --zero, --recompute)",
                       total, (long long)width, PS_SEARCH_MAX_STRATS);
    *n = total;
    *n_layouts = lay;
    if (!out) return PS_OK;
    PS_TRY(ps_grow((void **)out, cap, (size_t)(total > 2 ? total : 2), sizeof **out)); /* 2: block recomputation */
    *n = build_strategies(width, global_mb, f, attn, n_attn, *out, total, n_layouts, lay_rep);
    return PS_OK;
}

bool ps_search_layer_allows(const ps_layer *l, const ps_strategy *s)
{
    int t = s->tp;
    /* per-op checkpointing is modelled for dense attention blocks (ps_cost_layer refuses it on MoE and MLA ones) */
    if (s->ckpt == PS_RECOMP_OP && (ps_layer_is_moe(l) || ps_layer_is_mla(l))) return false;
    if (t == 1) return ps_cost_ep_ok(l, s, NULL, 0) && (ps_strategy_cp(s) <= 1 || ps_cost_cp_ok(l, s, NULL, 0));
    if (l->heads && l->heads % t) return false;
    if (l->kv_heads && l->kv_heads % t && t % l->kv_heads) return false;
    if (l->ffn_hidden && l->ffn_hidden % t) return false;
    if (l->vocab && l->vocab % t) return false;
    if (s->sp && l->seq % t) return false;
    if (ps_strategy_cp(s) > 1 && !ps_cost_cp_ok(l, s, NULL, 0)) return false;
    if (!ps_cost_ep_ok(l, s, NULL, 0)) return false;
    return s->ckpt != PS_RECOMP_OP || !(ps_layer_is_moe(l) || ps_layer_is_mla(l));
}

static bool model_allows(const ps_model *m, const ps_strategy *s)
{
    for (int64_t l = 0; l < m->n_layers; l++)
        if (!ps_search_layer_allows(&m->layers[l], s)) return false;
    return true;
}

/* Candidate indices: the outer candidate's position times PS_IDX_STRIDE plus the variant below (chunked schedules use
 * the strategy's position 0..PS_SEARCH_MAX_STRATS-1), so every costed plan has its own place in the total order. */
#define PS_IDX_STRIDE ((int64_t)1 << 20)
/* each partition variant also takes the next index, for its per-layer refinement; a framework's second split of the
 * layers (DeepSpeed's "type:") the strategy's position after PS_IDX_SPLIT2 */
enum {
    PS_IDX_TIME = PS_SEARCH_MAX_STRATS,
    PS_IDX_EVEN = PS_IDX_TIME + 2,
    PS_IDX_BALANCED = PS_IDX_TIME + 4,
    PS_IDX_MEMORY = PS_IDX_TIME + 6,
    PS_IDX_LIGHT = PS_IDX_TIME + 8,
    PS_IDX_PIPE = PS_IDX_TIME + 10,
    PS_IDX_SPLIT2 = PS_IDX_TIME + 12
};
_Static_assert(PS_IDX_SPLIT2 + PS_SEARCH_MAX_STRATS <= PS_IDX_STRIDE,
               "candidate variants must fit the index stride");
/* where evaluate() offers a plan: the top k, the best even-split plan (the "even split" baseline), or both */
enum { EV_TOP = 1, EV_EVEN = 2 };

/* Room for the in-flight vectors of one device that may set its activation peak (ps_sched_peak_points); schedules
 * of this project need a handful (tests/schedules: at most 7). A device with more is not checked ahead. */
#define PS_SEARCH_PEAK_POINTS 256

/* What the memory checks need of a schedule's order: each device's peak points and the stage <-> device maps. One
 * order serves many units (the same kind, pp and micro-batch count recur for every batch of a sweep), so a worker
 * keeps the shapes of recent orders instead of generating them again. */
typedef struct {
    bool whole;       /* false: an empty slot, or one being filled */
    int kind, K, v;
    int64_t micro;
    bool too_many;    /* a device has more than PS_SEARCH_PEAK_POINTS - 1 points: no check ahead for this order */
    int *off, *stage_dev, *dev_stage, *pts; /* [K + 1], [K v], [K v], [off[K] v], in one buffer */
    int *buf;
    size_t cap;
} order_shape;

/* Direct-mapped by (kind, K, micro-batches, v). */
#define PS_SEARCH_SHAPES 2048

/* Whether units a and b share their layer tables but for the expert grid (layer_tables_build's key): the same for every
 * schedule kind and block-recomputation n; a thread takes such neighbours together (ps_search_source.peek). */
static bool same_tables(const outer *a, const outer *b)
{
    return a->gbs == b->gbs && a->pp == b->pp && a->micro == b->micro && a->strat == b->strat && a->cp == b->cp &&
           a->cp_kinds == b->cp_kinds && (a->rcn > 0) == (b->rcn > 0);
}

/* ---- a worker: layer tables, scratch, caches and results ---- */
/* The layer tables of a unit (search step 1): for stage group g, layer l and strategy s, entry
 * e = (tg[g] R + row[l]) S + s of every column below (lt_at), R being the model's distinct layers (ps_search_job.row)
 * and tg[g] the group whose tables g shares (placement_twin). Each column is its own contiguous [G][R][S] array, as the
 * stage-table walk and the layer DP read a few columns along a row; this list is the only place a column is written
 * down: its storage, value where the layer does not allow the strategy (ps_search_layer_allows), and value from the
 * layer's cost (lc: ps_layer_cost, sv: the strategy, micro: micro-batches). */
#define PS_LAYER_COLUMNS(X)                                                                                            \
    /* seconds per micro-batch; the once-per-iteration DP sync spread over the micro-batches, so the DP sees that    \
     * ZeRO stages and wide DP cost something. Overlapped TP: the time inside a run of overlapped layers, its ends'  \
     * exposure apart (ex) */                                                                                        \
    X(t, INFINITY, lc.fwd_run + lc.bwd_b_run + lc.bwd_w + lc.dp_sync / micro)                                          \
    /* static bytes: parameters, gradients and optimizer states */                                                   \
    X(st, 0, lc.mem_params + lc.mem_grads + lc.mem_optim)                                                            \
    /* activation bytes of one micro-batch in flight */                                                              \
    X(act, 0, lc.mem_act)                                                                                            \
    /* transient bytes */                                                                                            \
    X(tmp, 0, lc.mem_temp)                                                                                           \
    /* what an overlapped layer adds when it starts or ends a run: its first computation and last collective,        \
     * exposed (0 for plain TP) */                                                                                   \
    X(ex, 0, fmax(0, lc.fwd + lc.bwd_b - lc.fwd_run - lc.bwd_b_run))                                                 \
    /* the layer's overlapped DP synchronisation per iteration and its backward per micro-batch: the stage tables    \
     * charge the part of a stage's synchronisation its last backward does not hide, a proxy of ps_cost_plan's       \
     * buckets; not overlapped (dp_no_overlap), 0 here: t keeps all of it */                                         \
    X(sy, 0, sv->dp_no_overlap ? 0 : lc.dp_sync)                                                                     \
    X(bw, 0, lc.bwd_b + lc.bwd_w)                                                                                    \
    /* a lower bound on the layer's fwd + bwd_b + bwd_w per micro-batch in any plan (exact for plain TP; the         \
     * computation alone for overlapped TP, whose collectives may all hide) */                                       \
    X(fb, INFINITY,                                                                                                  \
      ps_overlap_is_oases(sv->overlap) ? lc.comp_fwd + lc.comp_bwd_b + lc.bwd_w : lc.fwd + lc.bwd_b + lc.bwd_w)      \
    /* the same lower bound for the forward alone (chunked_prunable's fill) */                                       \
    X(ff, INFINITY, ps_overlap_is_oases(sv->overlap) ? lc.comp_fwd : lc.fwd)

typedef struct {
#define X(col, none, value) double *col;
    PS_LAYER_COLUMNS(X)
#undef X
    size_t cap;     /* entries of every column */
    double *lmin;   /* [2][G][L] fastest fb of any strategy of the layer, then the fastest fb less its bwd_w (a lower
                       bound on its F + B passes, without W): the lower bounds (ps_search_pipeline_lb) */
    size_t cap_lmin;
    int *tg;        /* [G] the group whose rows stage group g reads: itself, or a twin placed alike before it */
    size_t cap_tg;
    /* The tables depend on (batch, pipeline degree, micro-batches) alone, not on the schedule: the schedules of one
     * such triple are neighbouring units (ps_search_job_create), so the tables a worker holds often serve. */
    bool valid;     /* whole, for the unit `key` (what same_tables compares, and its expert grid) */
    outer key;
    int nS;         /* ... over this many strategies */
} layer_tables;

/* The sums of a stage table row after some layers (search step 3). */
typedef struct {
    double tt, sm, am, tm, exm, sync, bwd;
    int64_t blocks;
    int64_t att; /* transformer layers (ps_layer_has_attention): what Megatron's block recomputation counts */
} stage_acc;

/* A unit's scratch: nothing in it outlives the unit that wrote it. Every buffer is sized by the unit that needs it
 * and grows geometrically through SCRATCH (ps_grow: realloc, which moves a large block's pages without touching
 * them; dropping the contents with free + malloc instead faulted 650 more pages on bench_search's case (a), as the
 * allocator then hands large blocks back and maps them again). scratch_free releases them all. A buffer is one line
 * here: X(element type, name) [size]. */
#define SCRATCH_BUFFERS(X)                                                                                             \
    X(strat, S)              /* [S] the unit's strategies */                                                         \
    X(ps_strategy, lay_rep)  /* [layouts] a strategy of each layout */                                               \
    X(double, cap_mem)       /* [G] the least GPU memory of a stage group */                                          \
    X(double, inflight)      /* [K] micro-batches in flight on stage k (its order's first peak point) */              \
    X(int, ks)               /* [K] stage tables: the stages that share a row's sums */                               \
    X(bool, live)            /* [K] ... and whose budget those sums still fit */                                      \
    X(stage_acc, snap)       /* [S][L+1] the sums of a run's first stage-table row after n layers */                  \
    X(int64_t, snap_n)       /* [S] how many layers that row got through (alive) */                                   \
    X(double, C)             /* [K][L+1][L+1] fastest time of a fitting single strategy per stage */                  \
    X(int, Carg)             /* ... the strategy reaching it */                                                       \
    X(double, Cm)            /* [K][L+1][L+1] lowest memory of a fitting single strategy per stage */                 \
    X(int, Cmarg)            /* ... the strategy reaching it */                                                       \
    X(int64_t, parts)        /* [4][K+1] partitions of one unit */                                                    \
    X(double, dmem)          /* chunked plans' memory check: [K] static, [K] transient per device, [K x vpp]          \
                                activation per stage; the pipeline bound of a partition: [K] F + B per stage */       \
    X(double, ltime)         /* [L x S] layer DP inputs: time */                                                      \
    X(int64_t, lmem)         /* [L x S] ... memory in quanta */                                                       \
    X(int, choice)           /* [L] ... its answer */                                                                 \
    X(int64_t, rows)         /* [L] refine: a stage's distinct layers */                                              \
    X(int, keep)             /* [S] refine: the strategies no other of their layout dominates */                      \
    X(int, lay)              /* [S] ... their layouts, numbered among the layouts used */                             \
    X(double, resh)          /* [layouts^2] ... resharding between the layouts used */                                \
    X(double, rowmin)        /* [2][R] search_chunked: each distinct layer's least time and static bytes */          \
    X(int, ridx)             /* [L] cost_partition: each layer's strategy in the refined plan (refine writes it) */  \
    X(double, sfb)           /* [2][K] ... each stage's least F + B + W per micro-batch, plan and refined plan */

typedef struct {
#define X(type, name) type *name;
    SCRATCH_BUFFERS(X)
#undef X
#define X(type, name) size_t cap_##name;
    SCRATCH_BUFFERS(X)
#undef X
} scratch;

/* Room for n elements of scratch buffer `name` of worker w. */
#define SCRATCH(w, name, n) ps_grow((void **)&(w)->sc.name, &(w)->sc.cap_##name, (n), sizeof *(w)->sc.name)

static void scratch_free(scratch *s)
{
#define X(type, name) free(s->name);
    SCRATCH_BUFFERS(X)
#undef X
}

/* What a worker found: its top k, its best even split, the counters and the closest miss, and its first error. */
typedef struct {
    ps_search_cand *top;
    int n_top;
    ps_search_cand even; /* best plan with an even split (a baseline) */
    int have_even;
    int64_t evaluated, feasible, pruned;
    double cells;
    double min_over;       /* smallest (peak - capacity) of the plans that did not fit */
    int min_over_bound;    /* min_over is a lower bound only (ps_search_result) */
    int64_t min_over_unit; /* its work unit */
    char min_over_msg[320];
    ps_status st_err;
    int64_t err_index;
    char err_msg[512];
} worker_results;

typedef struct {
    const struct ps_search_job *job; /* the floors shared with the other threads and ranks */
    ps_ldp_ws *ldp;
    ps_pdp_ws *pdp;
    ps_sched *sched;
    layer_tables lt;
    scratch sc;
    /* caches across units */
    order_shape *shapes;   /* [PS_SEARCH_SHAPES] of recent orders (order_shape_get), allocated on first use */
    int even_K;            /* the even split last computed (0: none), whether it exists, and its cuts */
    bool even_ok;
    int64_t *even_cuts;
    size_t cap_even_cuts;
    int64_t unit; /* the work unit being searched (the tie-break of note_over) */
    worker_results r;
    /* the job's constants with this worker's own cache of ring links (ps_cost_params.memo): what it costs with */
    ps_cost_params cpw;
} worker;

/* Keep the top k of this worker, ordered by ps_search_cand_order. Takes ownership of *c. */
static void offer(worker_results *r, int k, int objective, ps_search_cand *c)
{
    int pos = r->n_top;
    while (pos > 0 && ps_search_cand_order(c, &r->top[pos - 1], objective) < 0) pos--;
    if (pos >= k) {
        cand_free(c);
        return;
    }
    if (r->n_top == k) {
        cand_free(&r->top[k - 1]);
        r->n_top--;
    }
    memmove(&r->top[pos + 1], &r->top[pos], (size_t)(r->n_top - pos) * sizeof *r->top);
    r->top[pos] = *c;
    r->n_top++;
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
    if (!ps_search_over_less(over, bound, w->unit, w->r.min_over, w->r.min_over_bound, w->r.min_over_unit)) return;
    w->r.min_over = over;
    w->r.min_over_bound = bound;
    w->r.min_over_unit = w->unit;
    int n = snprintf(w->r.min_over_msg, sizeof w->r.min_over_msg,
                     "the lightest plan tried (pp %d, tp %d x dp %d, ZeRO %d, recompute %s) needs ", pp, s->tp, s->dp,
                     s->zero, ps_recompute_name(s->ckpt));
    if (n < 0 || (size_t)n >= sizeof w->r.min_over_msg) return;
    if (stage >= 0)
        snprintf(w->r.min_over_msg + n, sizeof w->r.min_over_msg - (size_t)n,
                 "%.1f GiB on stage %d; its GPUs have %.1f GiB", peak / 1073741824.0, stage, cap / 1073741824.0);
    else
        snprintf(w->r.min_over_msg + n, sizeof w->r.min_over_msg - (size_t)n,
                 "at least %.1f GiB per GPU for weights, gradients and optimizer states; its GPUs have %.1f GiB",
                 peak / 1073741824.0, cap / 1073741824.0);
}

/* Cost a plan with the full model and offer it where `where` says (EV_TOP, EV_EVEN). The plan is consumed. */
static ps_status evaluate(worker *w, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                          const ps_search_opts *o, ps_plan *plan, int64_t index, int where)
{
    ps_search_cand cand = {.plan = *plan, .index = index};
    memset(plan, 0, sizeof *plan);
    /* every plan costed as its framework runs it: the layer tables were costed so (ps_search_fw_layer) */
    if (o->framework != PS_FW_ANY)
        for (int64_t l = 0; l < m->n_layers; l++)
            cand.plan.layer[l] = ps_search_fw_layer(o, &m->layers[l], &cand.plan.layer[l]);
    ps_status st = ps_cost_plan_ws(cp, m, c, &cand.plan, w->sched, &cand.pred); /* the candidate's order, built once */
    if (st != PS_OK) {
        ps_plan_free(&cand.plan);
        return st;
    }
    w->r.evaluated++;
    if (!cand.pred.fits) {
        /* a plan is as far from fitting as its worst stage */
        int ws_ = ps_prediction_worst_stage(&cand.pred);
        note_over(w, cand.plan.pp, &cand.plan.layer[0], ws_, cand.pred.stages[ws_].mem_peak,
                  cand.pred.stages[ws_].mem_capacity);
        cand_free(&cand);
        return PS_OK;
    }
    w->r.feasible++;
    if ((where & EV_EVEN) && (!w->r.have_even || ps_search_cand_order(&cand, &w->r.even, o->objective) < 0)) {
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
        if (w->r.have_even) cand_free(&w->r.even);
        w->r.even = copy;
        w->r.have_even = 1;
        if (!(where & EV_TOP)) return PS_OK;
    } else if (!(where & EV_TOP)) {
        cand_free(&cand);
        return PS_OK;
    }
    offer(&w->r, o->top_k, o->objective, &cand);
    return PS_OK;
}


/* All stage groups see the same GPUs and links when the cluster is one node group and a stage fills whole nodes or
 * sits inside one, and likewise for NVLink domains (a 16-GPU stage of 4-GPU trays would straddle two 72-GPU racks
 * at GPU 64): then the layer tables of stage 0 serve every stage. */
static bool uniform_placement(const ps_cluster *c, int64_t width)
{
    if (c->n_groups != 1) return false;
    int64_t g = c->groups[0].gpus_per_node, d = ps_node_group_domain_gpus(&c->groups[0]);
    return g > 0 && (width % g == 0 || g % width == 0) && (width % d == 0 || d % width == 0);
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
        if (w->r.n_top >= o->top_k) f = fmax(f, w->r.top[o->top_k - 1].pred.samples_per_s);
        if (!(ub < f)) return false;
    }
    if (where & EV_EVEN) {
        double f = job_floor(w->job, 1);
        if (w->r.have_even) f = fmax(f, w->r.even.pred.samples_per_s);
        if (!(ub < f)) return false;
    }
    return true;
}

/* One unit's problem, as the steps of search_unit share it. */
typedef struct {
    const ps_cost_params *cp;
    const ps_model *m;
    const ps_cluster *c;
    const ps_search_opts *o;
    const outer *oc;
    int64_t index;            /* the unit's position in the enumeration */
    const char *sched;        /* its schedule kind's name: what plans and schedules/ take */
    const strat *S;           /* its strategies (scratch S) */
    int nS, n_layouts;
    int nC;                   /* the candidates among them: nS, or 1 for a block-recomputation unit (rcn), whose
                                 two columns make one candidate */
    int64_t rcn;              /* outer.rcn */
    const ps_strategy *lay_rep;
    int64_t L, width, global_mb, micro;
    int K, G;                 /* stages, and stage groups with their own layer tables (1 when uni) */
    bool uni;                 /* every stage sees the same GPUs and links (uniform_placement) */
    size_t LS, N;             /* R x S: one group's layer table; L + 1: the side of a stage table */
    const int64_t *row;       /* [L] each layer's row of the layer tables (ps_search_job.row) */
    const int *tg;            /* [G] each stage group's tables (layer_tables.tg), from layer_tables_build on */
    const double *cap_mem;    /* [G] (scratch cap_mem) */
    const double *inflight;   /* [K] (scratch inflight), from the stage tables on */
} unit_ctx;

/* The first entry of layer l's row for stage group g in every layer-table column: strategy s is at + s. */
static inline size_t lt_at(const unit_ctx *x, int64_t g, int64_t l)
{
    return (size_t)x->tg[g] * x->LS + (size_t)x->row[l] * (size_t)x->nS;
}

/* The column of a layer in the unit's tables for candidate s, after `att` transformer layers of its model chunk: a
 * block-recomputation unit (rcn) runs the twin without recomputation (column 1) past the first rcn of every chunk
 * ([M] megatron/core/recompute.py checkpointed_forward, method 'block': layer_idx < recompute_num_layers of the
 * chunk's own TransformerBlock). Layers that are not transformer layers are never recomputed under the framework
 * (ps_search_fw_layer): either column prices them alike. */
static int col_of(const unit_ctx *x, int s, bool att_layer, int64_t att)
{
    return x->rcn > 0 && att_layer && att >= x->rcn ? 1 : s;
}

/* A plan of a block-recomputation unit: every chunk of plan->cuts (pp x vpp of them) past its first rcn transformer
 * layers runs the twin. Returns whether some chunk holds more than rcn of them: else the plan is the full unit's
 * (every layer recomputed), costed there, and not one of this unit. */
static bool apply_rcn(const unit_ctx *x, ps_plan *plan)
{
    bool own = false;
    for (int k = 0; k < plan->pp * plan->vpp; k++) {
        int64_t att = 0;
        for (int64_t l = plan->cuts[k]; l < plan->cuts[k + 1]; l++) {
            bool a = ps_layer_has_attention(x->m->layers[l].kind);
            if (col_of(x, 0, a, att) == 1) {
                plan->layer[l] = x->S[1].s;
                own = true;
            }
            att += a;
        }
    }
    return own;
}

/* Megatron's even split over K stages (ps_plan_uniform's rule). False when the model has too few layers. It depends on
 * K alone, so each worker keeps the last one instead of building a plan per candidate. */
static ps_status even_cuts(worker *w, const ps_model *m, int K, int64_t *cuts, bool *ok)
{
    if (w->even_K != K) {
        ps_strategy s1 = {.tp = 1, .dp = 1};
        w->even_K = 0; /* until the cuts are whole */
        PS_TRY(ps_grow((void **)&w->even_cuts, &w->cap_even_cuts, (size_t)K + 1, sizeof(int64_t)));
        w->even_ok = ps_plan_uniform_ok(m, K, 1);
        if (w->even_ok) {
            ps_plan u;
            PS_TRY(ps_plan_uniform(m, 1, 1, K, 1, "1f1b", &s1, &u));
            memcpy(w->even_cuts, u.cuts, ((size_t)K + 1) * sizeof *cuts);
            ps_plan_free(&u);
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

/* Stage k's entry of a stage-table argmin (Carg or Cmarg) for the partition `cuts`. */
static int cut_arg(const unit_ctx *x, const int *arg, const int64_t *cuts, int k)
{
    return arg[((size_t)k * x->N + (size_t)cuts[k]) * x->N + (size_t)cuts[k + 1]];
}

/* The plan of a partition with each stage's strategy from a stage table's argmin. */
static ps_status plan_from_cuts(const unit_ctx *x, const int64_t *cuts, const int *arg, ps_plan *plan)
{
    PS_TRY(ps_plan_alloc(x->m, x->oc->gbs, 1, x->K, 1, x->sched, &x->S[0].s, plan));
    for (int k = 0; k < x->K; k++) {
        plan->cuts[k + 1] = cuts[k + 1];
        int s = cut_arg(x, arg, cuts, k);
        for (int64_t l = cuts[k]; l < cuts[k + 1]; l++) plan->layer[l] = x->S[s].s;
    }
    if (x->rcn > 0) apply_rcn(x, plan);
    plan->mbs = x->global_mb / plan->layer[0].dp;
    return PS_OK;
}

/* Whether the partition gives a block-recomputation unit's plan of its own: some stage holds more than rcn transformer
 * layers (apply_rcn). Always for other units. */
static bool rcn_own(const unit_ctx *x, const int64_t *cuts)
{
    if (x->rcn <= 0) return true;
    for (int k = 0; k < x->K; k++) {
        int64_t att = 0;
        for (int64_t l = cuts[k]; l < cuts[k + 1]; l++) att += ps_layer_has_attention(x->m->layers[l].kind);
        if (att > x->rcn) return true;
    }
    return false;
}

/* Galvatron-BMW Sec. IV-A: one strategy per layer of each stage, fastest under the stage's memory budget, with
 * resharding between layouts. *changed tells whether any layer differs from `plan`. */
static ps_status refine(worker *w, const unit_ctx *x, const ps_plan *plan, ps_plan *ref, bool *changed)
{
    const ps_cost_params *cp = x->cp;
    const ps_model *m = x->m;
    int K = x->K, nS = x->nS, n_layouts = x->n_layouts;
    size_t LS = (size_t)m->n_layers * (size_t)nS; /* the layer DP's inputs: a stage's layers x strategies */
    int64_t L = m->n_layers;
    const layer_tables *lt = &w->lt;
    *changed = false;
    PS_TRY(ps_plan_alloc(m, plan->gbs, plan->mbs, K, 1, plan->schedule, &x->S[0].s, ref));
    memcpy(ref->cuts, plan->cuts, ((size_t)K + 1) * sizeof *ref->cuts);
    memcpy(ref->layer, plan->layer, (size_t)L * sizeof *ref->layer);
    PS_TRY(SCRATCH(w, ltime, LS));
    PS_TRY(SCRATCH(w, lmem, LS));
    PS_TRY(SCRATCH(w, choice, (size_t)L));
    PS_TRY(SCRATCH(w, rows, (size_t)L));
    PS_TRY(SCRATCH(w, keep, (size_t)nS));
    PS_TRY(SCRATCH(w, lay, (size_t)nS));
    PS_TRY(SCRATCH(w, resh, (size_t)n_layouts * (size_t)n_layouts));
    int *keep = w->sc.keep, *lay = w->sc.lay;
    double *resh = w->sc.resh;
    for (int k = 0; k < K; k++) {
        int g = x->uni ? 0 : k;
        int64_t a = plan->cuts[k], b = plan->cuts[k + 1], n = b - a;
        double f = x->inflight[k], tmax = 0;
        for (int64_t l = a; l < b; l++)
            for (int s = 0; s < nS; s++) tmax = fmax(tmax, lt->tmp[lt_at(x, g, l) + (size_t)s]);
        double budget = x->cap_mem[g] - cp->reserve_bytes - tmax, q = x->cap_mem[g] / x->o->quanta;
        if (budget <= 0) continue;
        /* Strategies dominated inside their layout (another is no slower and no heavier on every layer of the
         * stage; on a full tie the lower index stays) never improve the optimum: resharding depends only on the
         * layout. Galvatron-BMW's Takeaways prune by rule; this prunes by the numbers. Rows of identical layers are
         * checked once. Memory is rounded up to whole quanta and the budget down: the DP can only under-use. */
        int nk = 0;
        int64_t *rows = w->sc.rows, nrows = 0; /* the stage's distinct rows: a run of identical layers is one */
        for (int64_t l = a; l < b; l++)
            if (l == a || !ps_layer_equal(&m->layers[l], &m->layers[l - 1])) rows[nrows++] = l;
        for (int s = 0; s < nS; s++) {
            bool dominated = false;
            for (int u = 0; u < nS && !dominated; u++) {
                if (u == s || x->S[u].layout != x->S[s].layout) continue;
                bool no_worse = true, better = false;
                for (int64_t r = 0; r < nrows && no_worse; r++) {
                    int64_t l = rows[r];
                    size_t es = lt_at(x, g, l) + (size_t)s, eu = lt_at(x, g, l) + (size_t)u;
                    double ts = lt->t[es], tu = lt->t[eu];
                    double ms = ceil((lt->st[es] + f * lt->act[es]) / q), mu = ceil((lt->st[eu] + f * lt->act[eu]) / q);
                    if (tu > ts || mu > ms) no_worse = false;
                    else if (tu < ts || mu < ms) better = true;
                }
                dominated = no_worse && (better || u < s);
            }
            if (!dominated) keep[nk++] = s;
        }
        for (int64_t l = 0; l < n; l++)
            for (int i = 0; i < nk; i++) {
                size_t e = lt_at(x, g, a + l) + (size_t)keep[i];
                w->sc.ltime[(size_t)l * nk + (size_t)i] = lt->t[e];
                w->sc.lmem[(size_t)l * nk + (size_t)i] = (int64_t)ceil((lt->st[e] + f * lt->act[e]) / q);
            }
        /* Changing layout between layers: the resharding all-gather (ps_cost_reshard, Oases Eq. 4), and where an
         * overlapped run ends or starts, half of the exposure a run has at its two ends (the largest of the stage's
         * layers under that layout). The stage's own first and last run pay none here: ps_cost_plan ranks. */
        double exl[PS_SEARCH_MAX_LAYOUTS];
        for (int u = 0; u < n_layouts; u++) exl[u] = 0;
        for (int i = 0; i < nk; i++) {
            int u = x->S[keep[i]].layout;
            for (int64_t l = a; l < b; l++)
                exl[u] = fmax(exl[u], lt->ex[lt_at(x, g, l) + (size_t)keep[i]]);
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
                ps_cost_reshard(cp, x->c, bl, m->dtype, x->global_mb, &x->lay_rep[u], &x->lay_rep[v],
                                (int64_t)g * x->width, &rf, &rb);
                resh[i * nu + j] = rf + rb + (exl[u] + exl[v]) / 2;
            }
        for (int i = 0; i < nk; i++) lay[i] = slot[x->S[keep[i]].layout];
        ps_ldp_problem lp = {(int)n, nk, w->sc.ltime, w->sc.lmem, nu, lay, resh};
        double best;
        PS_TRY(ps_ldp_solve(w->ldp, &lp, (int64_t)floor(budget / q), &best, w->sc.choice));
        w->r.cells += (double)n * (double)(x->o->quanta + 1) * (double)nk;
        if (!isfinite(best)) continue;
        int *choice = w->sc.choice;
        for (int64_t l = 0; l < n; l++) choice[l] = keep[choice[l]];
        for (int64_t l = 0; l < n; l++) {
            const ps_strategy *ns = &x->S[choice[l]].s;
            w->sc.ridx[a + l] = choice[l];
            if (!ps_strategy_equal(ns, &ref->layer[a + l])) *changed = true;
            ref->layer[a + l] = *ns;
        }
    }
    ref->mbs = x->global_mb / ref->layer[0].dp;
    return PS_OK;
}

/* Whether stage k has the same strategies in plans a and b of one partition (compared by field: a strategy's padding
 * is not initialised). */
static bool stage_same(const ps_plan *a, const ps_plan *b, int k)
{
    for (int64_t l = a->cuts[k]; l < a->cuts[k + 1]; l++)
        if (!ps_strategy_equal(&a->layer[l], &b->layer[l])) return false;
    return true;
}

/* Cost a partition: its stage-wise plan, and its per-layer refinement when that changes anything. */
static ps_status cost_partition(worker *w, const unit_ctx *x, const int64_t *cuts, int64_t index, int where)
{
    const ps_model *m = x->m;
    const ps_search_opts *o = x->o;
    if (!rcn_own(x, cuts)) return PS_OK; /* the full unit's plan */
    /* the busiest stage's compute, and the pipeline bound of the stages' fastest F + B passes */
    double busiest = 0, *u = w->sc.dmem;
    size_t GL = (size_t)(x->uni ? 1 : x->K) * (size_t)m->n_layers;
    for (int k = 0; k < x->K; k++) {
        double sum = 0;
        const double *lm = w->lt.lmin + (size_t)(x->uni ? 0 : k) * (size_t)m->n_layers, *lmb = lm + GL;
        u[k] = 0;
        for (int64_t l = cuts[k]; l < cuts[k + 1]; l++) {
            sum += lm[l];
            u[k] += lmb[l];
        }
        busiest = fmax(busiest, sum);
    }
    double lb = fmax((double)x->micro * busiest, ps_search_pipeline_lb(u, x->K, x->micro));
    if (prunable(w, o, x->oc->gbs, lb, where)) {
        w->r.pruned++;
        return PS_OK;
    }
    ps_plan plan;
    PS_TRY(plan_from_cuts(x, cuts, w->sc.Carg, &plan));
    if (o->per_layer) {
        ps_plan ref;
        bool changed = false;
        PS_TRY(SCRATCH(w, ridx, (size_t)m->n_layers));
        PS_TRY(SCRATCH(w, sfb, 2 * (size_t)x->K));
        for (int k = 0; k < x->K; k++) /* refine's answer starts as the plan's strategies */
            for (int64_t l = cuts[k]; l < cuts[k + 1]; l++)
                w->sc.ridx[l] = cut_arg(x, w->sc.Carg, cuts, k);
        ps_status st = refine(w, x, &plan, &ref, &changed);
        if (st != PS_OK) {
            ps_plan_free(&plan);
            ps_plan_free(&ref);
            return st;
        }
        if (changed) {
            /* each stage's refinement alone, before the whole (which evaluate takes over): the per-layer DP ranks a
             * layer by its time per micro-batch, blind to what only the schedule simulation sees, so the refinement
             * of one stage can win where that of another loses */
            int n_changed = 0;
            for (int k = 0; k < x->K; k++) n_changed += !stage_same(&plan, &ref, k);
            /* A plan's makespan is at least the busiest device's passes, micro-batches x its stage's F + B + W, each
             * layer's at least its fb (the layer tables): a bound per plan, so that the refined plans (one stage
             * refined, or all) already below the floors are not costed. */
            double *sb = w->sc.sfb, *sr = sb + x->K, busy_r = 0;
            bool bound = !(ps_search_rules_off & PS_SEARCH_RULE_REFINED);
            for (int k = 0; k < x->K; k++) {
                int sk = cut_arg(x, w->sc.Carg, cuts, k);
                sb[k] = sr[k] = 0;
                for (int64_t l = cuts[k]; l < cuts[k + 1]; l++) {
                    size_t e = lt_at(x, x->uni ? 0 : k, l);
                    sb[k] += w->lt.fb[e + (size_t)sk];
                    sr[k] += w->lt.fb[e + (size_t)w->sc.ridx[l]];
                }
                busy_r = fmax(busy_r, sr[k]);
            }
            for (int k = 0; k < x->K && n_changed > 1 && st == PS_OK; k++) {
                size_t n = (size_t)(plan.cuts[k + 1] - plan.cuts[k]);
                if (stage_same(&plan, &ref, k)) continue;
                double busy = sr[k];
                for (int q = 0; q < x->K; q++)
                    if (q != k) busy = fmax(busy, sb[q]);
                if (bound && prunable(w, o, x->oc->gbs, (double)x->micro * busy, where)) {
                    w->r.pruned++;
                    continue;
                }
                ps_plan one;
                st = plan_from_cuts(x, cuts, w->sc.Carg, &one);
                if (st != PS_OK) break;
                memcpy(one.layer + one.cuts[k], ref.layer + ref.cuts[k], n * sizeof *one.layer);
                one.mbs = x->global_mb / one.layer[0].dp;
                st = evaluate(w, x->cp, m, x->c, o, &one, index + 1, where);
            }
            if (st == PS_OK && bound && prunable(w, o, x->oc->gbs, (double)x->micro * busy_r, where)) {
                w->r.pruned++;
                ps_plan_free(&ref);
            } else if (st == PS_OK) {
                st = evaluate(w, x->cp, m, x->c, o, &ref, index + 1, where);
            } else {
                ps_plan_free(&ref); /* evaluate takes the plans it is given; this one it was never given */
            }
            if (st != PS_OK) {
                ps_plan_free(&plan);
                return st;
            }
        } else {
            ps_plan_free(&ref);
        }
    }
    return evaluate(w, x->cp, m, x->c, o, &plan, index, where);
}

/* The shape of the unit's order, from the memo or generated into w->sched (unverified: a plan costed later
 * completes it). */
static ps_status order_shape_get(worker *w, const unit_ctx *x, const order_shape **out)
{
    const outer *oc = x->oc;
    int K = oc->pp, v = oc->vpp;
    if (!w->shapes && !(w->shapes = ps_calloc(PS_SEARCH_SHAPES, sizeof *w->shapes)))
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory for the schedule shapes");
    const int64_t key[4] = {oc->kind, K, v, oc->micro};
    order_shape *sh = &w->shapes[ps_hash64(key, sizeof key, PS_HASH64_INIT) % PS_SEARCH_SHAPES];
    if (sh->whole && sh->kind == oc->kind && sh->K == K && sh->v == v && sh->micro == oc->micro) {
        *out = sh;
        return PS_OK;
    }
    sh->whole = false;
    PS_TRY(ps_sched_generate(w->sched, x->sched, K, (int)oc->micro, v));
    size_t kv = (size_t)K * (size_t)v, fixed = (size_t)K + 1 + 2 * kv;
    PS_TRY(ps_grow((void **)&sh->buf, &sh->cap, fixed + (size_t)PS_SEARCH_PEAK_POINTS * (size_t)v, sizeof(int)));
    sh->too_many = false;
    int n = 0;
    for (int dev = 0; dev < K && !sh->too_many; dev++) {
        int np = 0;
        size_t at = fixed + (size_t)n * (size_t)v;
        PS_TRY(ps_grow((void **)&sh->buf, &sh->cap, at + (size_t)PS_SEARCH_PEAK_POINTS * (size_t)v, sizeof(int)));
        sh->buf[dev] = n;
        /* schedules/ has no predicate for "more points than room": that refusal (PS_ERR_INPUT) is the expected case
         * here, any other failure is passed up */
        ps_status pst = ps_sched_peak_points(w->sched, dev, sh->buf + at, PS_SEARCH_PEAK_POINTS, &np);
        if (pst == PS_ERR_INPUT) {
            ps_error_clear();
            sh->too_many = true;
        } else {
            PS_TRY(pst);
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
    sh->kind = oc->kind;
    sh->K = K;
    sh->v = v;
    sh->micro = oc->micro;
    sh->whole = true;
    *out = sh;
    return PS_OK;
}

/* Whether a chunked plan with one strategy (index s; in a block-recomputation unit, its twin past the first rcn
 * transformer layers of every chunk) fits, before costing it: each device's memory added up as
 * ps_cost_plan does (static + activation peak of the order + largest transient + reserve) from the layer tables, the
 * activation peak from the order's peak points (ps_sched_peak_points) instead of a simulation. The sums may round
 * differently from ps_cost_plan's, so only a device over its capacity by more than a relative 1e-9 counts; such a
 * plan is noted (note_over) as ps_cost_plan would have, with the same worst stage. Plans of a chunked candidate
 * mostly do not fit (case (a) of bench/search: 15,570 of 16,447 costed), and this is what they cost now. *sh: the
 * unit's order shape, NULL until the first call. */
static ps_status chunked_fits(worker *w, const unit_ctx *x, const order_shape **shp, const ps_plan *plan, int s,
                              bool *fits)
{
    int K = x->K, v = x->oc->vpp, S2 = K * v;
    const layer_tables *lt = &w->lt;
    *fits = true;
    if (!*shp) {
        PS_TRY(order_shape_get(w, x, shp));
        PS_TRY(SCRATCH(w, dmem, (size_t)K * 2 + (size_t)S2));
    }
    const order_shape *sh = *shp;
    if (sh->too_many) return PS_OK;
    double *stat = w->sc.dmem, *tmp = stat + K, *act = tmp + K;
    for (int d = 0; d < K; d++) stat[d] = tmp[d] = 0;
    for (int st = 0; st < S2; st++) {
        int dev = sh->stage_dev[st];
        size_t g = x->uni ? 0 : (size_t)dev;
        double sst = 0, a = 0;
        int64_t att = 0;
        for (int64_t l = plan->cuts[st]; l < plan->cuts[st + 1]; l++) {
            bool at = ps_layer_has_attention(x->m->layers[l].kind);
            size_t e = lt_at(x, (int64_t)g, l) + (size_t)col_of(x, s, at, att);
            att += at;
            sst += lt->st[e];
            a += lt->act[e];
            tmp[dev] = fmax(tmp[dev], lt->tmp[e]);
        }
        stat[dev] += sst;
        act[st] = a;
    }
    int worst = -1;
    double worst_over = 0, worst_peak = 0, worst_cap = 0;
    for (int st = 0; st < S2; st++) { /* stage order: the worst stage is the first of the worst device */
        int dev = sh->stage_dev[st];
        double cap = x->cap_mem[x->uni ? 0 : dev], pk = 0;
        for (int i = sh->off[dev]; i < sh->off[dev + 1]; i++) {
            const int *n = sh->pts + (size_t)i * (size_t)v;
            double sum = 0;
            for (int c = 0; c < v; c++) sum += n[c] * act[sh->dev_stage[(size_t)dev * v + c]];
            pk = fmax(pk, sum);
        }
        double peak = stat[dev] + pk + tmp[dev] + x->cp->reserve_bytes;
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

/* Step 1: the layer tables of every stage group (one group when the placement is uniform), each distinct layer
 * costed once under every strategy; kept while (batch, pipeline degree, micro-batches) stays the same. */
unsigned ps_search_rules_off = 0;

/* An earlier stage group whose layer tables are stage g's, or -1. In a cluster of one node group every cost of a
 * stage depends on its GPUs' placement relative to each other only: which share a node, an NVLink island or domain
 * (links, the NICs a node's members share, measured collectives per device kind and inside or across domains),
 * never on which node it is. So two stages whose first GPUs differ by a multiple of an NVLink domain's GPUs (a
 * node's, without a larger domain) see the same links in the same order and have the same tables: a 2520-GPU
 * cluster's 90 stages of 28 GPUs fall into 2 such classes, and each is costed once. */
static int placement_twin(const unit_ctx *x, int g)
{
    if (x->uni || x->c->n_groups != 1 || (ps_search_rules_off & PS_SEARCH_RULE_TWIN)) return -1;
    int64_t period = ps_node_group_domain_gpus(&x->c->groups[0]);
    if (period <= 0) return -1;
    for (int t = 0; t < g; t++)
        if ((int64_t)(g - t) * x->width % period == 0) return t;
    return -1;
}

static ps_status layer_tables_build(worker *w, const unit_ctx *x)
{
    layer_tables *lt = &w->lt;
    const outer *oc = x->oc;
    bool same_but_grid = lt->valid && same_tables(&lt->key, oc) && lt->nS == x->nS;
    if (same_but_grid && lt->key.ep == oc->ep && lt->key.etp == oc->etp) return PS_OK;
    /* Another expert grid, all else the same: the strategies are the same list but for their ep and etp
     * (build_strategies), which price MoE layers only (ps_cost_layer: a layer off the grid keeps its arithmetic), so
     * only the rows of MoE layers are costed again. A model's grids are neighbouring units (ps_search_job_create). */
    bool moe_only = same_but_grid && !(ps_search_rules_off & PS_SEARCH_RULE_GRID);
    lt->valid = false; /* until they are whole again */
    size_t n = (size_t)x->G * x->LS, GL = (size_t)x->G * (size_t)x->L;
    /* nothing in the tables survives a new key, so growing drops the old contents */
    if (n > lt->cap) {
        lt->cap = 0;
#define X(col, none, value) free(lt->col), lt->col = NULL;
        PS_LAYER_COLUMNS(X)
#undef X
        size_t cap = 0;
#define X(col, none, value)                                                                                            \
    cap = 0;                                                                                                           \
    PS_TRY(ps_grow((void **)&lt->col, &cap, n, sizeof(double)));
        PS_LAYER_COLUMNS(X)
#undef X
        lt->cap = cap; /* ps_grow sized every column alike */
    }
    PS_TRY(ps_grow((void **)&lt->lmin, &lt->cap_lmin, 2 * GL, sizeof(double)));
    PS_TRY(ps_grow((void **)&lt->tg, &lt->cap_tg, (size_t)x->G, sizeof(int)));
    double *lminb = lt->lmin + GL, micro = (double)oc->micro;
    int nS = x->nS;
    const ps_search_job *j = w->job;
    for (int g = 0; g < x->G; g++) {
        int64_t first = (int64_t)g * x->width;
        int twin = placement_twin(x, g);
        if (twin >= 0) {
            /* the twin's rows serve (it is placed alike), and its bounds */
            lt->tg[g] = lt->tg[twin];
            memcpy(lt->lmin + (size_t)g * (size_t)x->L, lt->lmin + (size_t)twin * (size_t)x->L,
                   (size_t)x->L * sizeof *lt->lmin);
            memcpy(lminb + (size_t)g * (size_t)x->L, lminb + (size_t)twin * (size_t)x->L,
                   (size_t)x->L * sizeof *lminb);
            continue;
        }
        lt->tg[g] = g;
        double cap = x->cap_mem[g];
        for (int64_t r = 0; r < j->n_rows; r++) {
            size_t row = (size_t)g * x->LS + (size_t)r * (size_t)nS;
            const ps_layer *ly = &x->m->layers[j->rep[r]];
            if (moe_only && !ps_layer_is_moe(ly)) continue;
            double lmin = INFINITY, lmb = INFINITY;
            for (int s = 0; s < nS; s++) {
                size_t e = row + (size_t)s;
                const ps_strategy *sv = &x->S[s].s;
                if (!ps_search_layer_allows(ly, sv)) {
#define X(col, none, value) lt->col[e] = none;
                    PS_LAYER_COLUMNS(X)
#undef X
                    continue;
                }
                /* the layer's own strategy under the framework (no recomputation outside transformer layers) */
                ps_strategy sl = ps_search_fw_layer(x->o, ly, sv);
                sv = &sl;
                ps_layer_cost lc;
                PS_TRY(ps_cost_layer(x->cp, x->c, ly, x->m->dtype, x->global_mb / sv->dp, sv, first, &lc));
#define X(col, none, value) lt->col[e] = value;
                PS_LAYER_COLUMNS(X)
#undef X
                /* The bounds take the strategies the layer fits under on its own: a stage holding it needs at least
                 * its static and transient bytes and the reserve (ps_cost_plan's peak only adds), so a strategy
                 * above its GPUs' memory is in no plan that fits (a 671B model's experts unsharded, say) */
                if (lt->st[e] + lt->tmp[e] > (cap - x->cp->reserve_bytes) * (1 + 1e-9) &&
                    !(ps_search_rules_off & PS_SEARCH_RULE_FIT))
                    continue;
                lmin = fmin(lmin, lt->fb[e]);
                lmb = fmin(lmb, lt->fb[e] - lc.bwd_w);
            }
            /* every layer of the row has these bounds (written below, once the row's minima are known) */
            for (int64_t l = 0; l < x->L; l++)
                if (j->row[l] == r) {
                    lt->lmin[(size_t)g * (size_t)x->L + (size_t)l] = lmin;
                    lminb[(size_t)g * (size_t)x->L + (size_t)l] = fmax(0, lmb);
                }
        }
    }
    lt->valid = true;
    lt->key = *oc;
    lt->nS = x->nS;
    return PS_OK;
}

/* The partition a framework makes itself (PS_FW_PART_UNIFORM: DeepSpeed's partition_uniform over every layer) into
 * the plan's pp x vpp stages, replacing Megatron's even split of ps_plan_uniform. */
static bool framework_split(const ps_search_opts *o)
{
    const ps_framework_rules *r = ps_framework_get((ps_framework)o->framework);
    return r && r->partition == PS_FW_PART_UNIFORM;
}

static void framework_cuts(const ps_model *m, int stages, int64_t *cuts)
{
    for (int s = 0; s <= stages; s++) cuts[s] = ps_framework_uniform_cut(m->n_layers, stages, s);
}

/* The splits a framework that splits the layers itself offers (ps_framework_fixed_cuts: DeepSpeed's "uniform" and,
 * where part_blocks_balanced, its "type:" balance of the transformer layers) into `stages` stages: cuts[k (stages +
 * 1) ...], k < the count returned; a second split equal to the first is left out. */
static ps_status framework_splits(worker *w, const ps_search_opts *o, const ps_model *m, int stages, int *n)
{
    size_t row = (size_t)stages + 1;
    PS_TRY(SCRATCH(w, parts, 2 * row));
    *n = 0;
    for (int k = 0; k < 2; k++) {
        int64_t *cuts = w->sc.parts + (size_t)*n * row;
        if (!ps_framework_fixed_cuts((ps_framework)o->framework, k, m, stages, cuts)) continue;
        if (*n == 1 && memcmp(cuts, w->sc.parts, row * sizeof *cuts) == 0) continue;
        (*n)++;
    }
    if (*n == 0) return PS_FAIL(PS_ERR_SYSTEM, "out of memory splitting %d stages", stages);
    return PS_OK;
}

/* A chunked plan's makespan (ps_sched_simulate) is at least, on every device d, the forwards of one micro-batch
 * through the stages before d's first stage f(d) and then all of d's own passes: every pass on d needs a forward of
 * one of d's stages first, all of them f(d) or later (interleaved: d, d + K; V: d, 2K - 1 - d; read from the order's
 * device map), and a micro-batch's forward reaches stage f(d) only through stages 0..f(d)-1 one after another. Each
 * pass lasts at least the layer tables' lower bounds (ff, fb, as prunable's); transfers and the optimizer tail only
 * add. So max_d (sum_{k<f(d)} F_k + m busy_d) bounds the iteration time from below, tighter than the average busy
 * time where stages differ (embedding, head) and by the fill. */
static ps_status chunked_prunable(worker *w, const unit_ctx *x, const order_shape *sh, const ps_plan *plan, int s,
                                  int where, bool *out)
{
    *out = false;
    if (!sh || (ps_search_rules_off & PS_SEARCH_RULE_FILL)) return PS_OK;
    int K = x->K, S2 = K * x->oc->vpp;
    PS_TRY(SCRATCH(w, dmem, (size_t)K * 2 + (size_t)S2));
    /* busy[d], the forwards of every stage (fwd[st]) and each device's first stage (first[d]: the order's device
     * map, so that no layout is assumed) */
    double *busy = w->sc.dmem, *first = busy + K, *fwd = first + K, lb = 0, prefix = 0;
    for (int d = 0; d < K; d++) busy[d] = 0, first[d] = S2;
    for (int st = 0; st < S2; st++) {
        int dev = sh->stage_dev[st];
        size_t g = x->uni ? 0 : (size_t)dev;
        double f = 0, b = 0;
        int64_t att = 0;
        for (int64_t l = plan->cuts[st]; l < plan->cuts[st + 1]; l++) {
            bool at = ps_layer_has_attention(x->m->layers[l].kind);
            size_t e = lt_at(x, (int64_t)g, l) + (size_t)col_of(x, s, at, att);
            att += at;
            f += w->lt.ff[e];
            b += w->lt.fb[e];
        }
        busy[dev] += (double)x->micro * b;
        fwd[st] = f;
        first[dev] = fmin(first[dev], st);
    }
    for (int st = 0; st < S2; st++) {
        for (int d = 0; d < K; d++)
            if (first[d] == st) lb = fmax(lb, prefix + busy[d]);
        prefix += fwd[st];
    }
    *out = prunable(w, x->o, x->oc->gbs, lb, where);
    return PS_OK;
}

/* Step 2, chunked schedules: Megatron's even split, one strategy for all layers. Also every unit of a framework that
 * splits the layers itself and takes one strategy for all blocks (DeepSpeed): its split instead, with any schedule. */
static ps_status search_chunked(worker *w, const unit_ctx *x)
{
    const ps_model *m = x->m;
    const outer *oc = x->oc;
    const layer_tables *lt = &w->lt;
    int K = x->K;
    double maxcap = 0;
    for (int g = 0; g < x->G; g++) maxcap = fmax(maxcap, x->cap_mem[g]);
    const order_shape *sh = NULL;
    /* the framework's own splits (DeepSpeed: two), else Megatron's even split (ps_plan_uniform's) */
    int n_split = 1, stages = oc->pp * oc->vpp;
    if (framework_split(x->o)) PS_TRY(framework_splits(w, x->o, m, stages, &n_split));
    int64_t R = w->job->n_rows;
    PS_TRY(SCRATCH(w, rowmin, 2 * (size_t)R));
    double *rf = w->sc.rowmin, *rs = rf + R;
    for (int s = 0; s < x->nC; s++) {
        const ps_strategy *sv = &x->S[s].s;
        bool ok = true;
        /* each distinct layer's least time and static bytes over the stage groups, then summed layer by layer */
        for (int64_t r = 0; r < R && ok; r++) {
            int64_t l = w->job->rep[r];
            /* what ps_search_layer_allows answers, as the layer tables recorded it (t: INFINITY where not allowed,
             * whatever the placement): asking the rules again for every layer was a fifth of a large search */
            ok = isfinite(lt->t[lt_at(x, 0, l) + (size_t)s]);
            double f1 = INFINITY, s1 = INFINITY;
            for (int g = 0; g < x->G; g++)
                for (int c = s; c <= (x->rcn > 0 ? 1 : s); c++) { /* a block-recomputation unit: either column */
                    size_t e = lt_at(x, (int64_t)g, l) + (size_t)c;
                    f1 = fmin(f1, lt->fb[e]);
                    s1 = fmin(s1, lt->st[e]);
                }
            rf[r] = f1;
            rs[r] = s1;
        }
        if (!ok) continue;
        double fbs = 0, stat = 0;
        for (int64_t l = 0; l < x->L; l++) {
            fbs += rf[x->row[l]];
            stat += rs[x->row[l]];
        }
        /* The busiest device holds at least the average static memory and compute (bounds as in prunable). */
        double stat_lb = stat / (double)K * (1 - 1e-9) + x->cp->reserve_bytes;
        if (stat_lb > maxcap) {
            note_over(w, K, sv, -1, stat_lb, maxcap);
            w->r.pruned++;
            continue;
        }
        if (prunable(w, x->o, oc->gbs, (double)oc->micro * fbs / (double)K, EV_TOP | EV_EVEN)) {
            w->r.pruned++;
            continue;
        }
        if (!ps_plan_uniform_ok(m, oc->pp, oc->vpp)) return PS_OK; /* too few layers for pp x vpp stages */
        for (int k = 0; k < n_split; k++) {
            ps_plan plan;
            PS_TRY(ps_plan_uniform(m, oc->gbs, x->global_mb / sv->dp, oc->pp, oc->vpp, x->sched, sv, &plan));
            if (framework_split(x->o))
                memcpy(plan.cuts, w->sc.parts + (size_t)k * (size_t)(stages + 1),
                       (size_t)(stages + 1) * sizeof *plan.cuts);
            if (x->rcn > 0 && !apply_rcn(x, &plan)) { /* no chunk holds more than rcn: the full unit's plan */
                ps_plan_free(&plan);
                continue;
            }
            bool fits = true;
            ps_status mst = chunked_fits(w, x, &sh, &plan, s, &fits);
            if (mst != PS_OK || !fits) {
                ps_plan_free(&plan);
                PS_TRY(mst);
                w->r.pruned++;
                continue;
            }
            bool cut = false;
            mst = chunked_prunable(w, x, sh, &plan, s, k == 0 ? EV_TOP | EV_EVEN : EV_TOP, &cut);
            if (mst != PS_OK || cut) {
                ps_plan_free(&plan);
                PS_TRY(mst);
                w->r.pruned++;
                continue;
            }
            /* chunked schedules keep the even split: every one is also an "even split" plan; a framework's second
             * split (DeepSpeed's "type:") is not even, and takes its own index */
            int64_t at = x->index * PS_IDX_STRIDE + (k == 0 ? s : PS_IDX_SPLIT2 + s);
            PS_TRY(evaluate(w, x->cp, m, x->c, x->o, &plan, at, k == 0 ? EV_TOP | EV_EVEN : EV_TOP));
        }
    }
    return PS_OK;
}

/* The whole unit: its busiest stage holds at least 1/K of the fastest compute of every layer, and the pipeline's
 * fill and drain (ps_search_pipeline_lb_any) cost at least their least over every partition. */
static bool unit_prunable(const worker *w, const unit_ctx *x)
{
    const double *lmin = w->lt.lmin, *lminb = lmin + (size_t)x->G * (size_t)x->L;
    double tot = 0, totb = 0;
    for (int64_t l = 0; l < x->L; l++) {
        double f1 = INFINITY, b1 = INFINITY;
        for (int g = 0; g < x->G; g++) {
            f1 = fmin(f1, lmin[(size_t)g * (size_t)x->L + (size_t)l]);
            b1 = fmin(b1, lminb[(size_t)g * (size_t)x->L + (size_t)l]);
        }
        tot += f1;
        totb += b1;
    }
    double lb = fmax((double)x->micro * tot / (double)x->K, ps_search_pipeline_lb_any(totb, x->K, x->micro));
    return prunable(w, x->o, x->oc->gbs, lb, EV_TOP | EV_EVEN);
}

/* Step 3: stage tables for [i, j) on stage k, over the strategies whose memory (static + in-flight activations +
 * transient) fits the stage's budget: C the fastest (time per micro-batch), Cm the lightest (bytes). */
static ps_status stage_tables_build(worker *w, const unit_ctx *x)
{
    const ps_model *m = x->m;
    const layer_tables *lt = &w->lt;
    int K = x->K, nS = x->nS;
    int64_t L = x->L;
    size_t N = x->N;
    double micro = (double)x->micro, reserve = x->cp->reserve_bytes;
    const double *inflight = x->inflight, *cap_mem = x->cap_mem;
    PS_TRY(SCRATCH(w, C, (size_t)K * N * N));
    PS_TRY(SCRATCH(w, Carg, (size_t)K * N * N));
    PS_TRY(SCRATCH(w, Cm, (size_t)K * N * N));
    PS_TRY(SCRATCH(w, Cmarg, (size_t)K * N * N));
    PS_TRY(SCRATCH(w, ks, (size_t)K));
    PS_TRY(SCRATCH(w, live, (size_t)K));
    PS_TRY(SCRATCH(w, snap, (size_t)nS * (size_t)(L + 1)));
    PS_TRY(SCRATCH(w, snap_n, (size_t)nS));
    double *C = w->sc.C, *Cm = w->sc.Cm;
    int *Carg = w->sc.Carg, *Cmarg = w->sc.Cmarg, *ks = w->sc.ks;
    bool *live = w->sc.live;
    stage_acc *snap = w->sc.snap;
    int64_t *snap_n = w->sc.snap_n;
    /* Only the entries some partition uses are read (ps_pdp_problem): stage k >= 1 starting at i in [k, L - K + k]
     * (a layer for every stage before and after it), stage 0 at 0, and ending at j <= jmax(k), the K - 1 - k later
     * stages a layer each. Those start as "does not fit"; the rest are never written. A pipeline of 90 stages over
     * 98 layers has about 45 ends per stage instead of 4,900. With a uniform placement the rows i < k of stage k are
     * filled too: the next row copies them along runs of equal layers (below). */
    bool uni = x->uni;
#define JMAX(k) (L - (int64_t)(K - 1 - (k)))
#define IHI(k) ((k) == 0 ? 0 : L - (int64_t)(K - (k)))
#define ILO(k) ((k) == 0 ? 0 : uni ? 1 : (int64_t)(k))
    for (int k = 0; k < K; k++)
        for (int64_t i = ILO(k); i <= IHI(k); i++) {
            size_t row = ((size_t)k * N + (size_t)i) * N;
            for (int64_t j = i + 1; j <= JMAX(k); j++) C[row + (size_t)j] = Cm[row + (size_t)j] = INFINITY;
        }
    /* The sums over [i, j) depend on the stage's placement group only: with a uniform placement every stage that may
     * start at layer i (stage 0 at 0, the others after it) shares them, and only the memory check (its in-flight
     * micro-batches) is per stage. So the stages of one group walk j together.
     * Identical layers (a model's decoder blocks): a row i inside a run of layers equal to layer i - 1 repeats row
     * i - 1 shifted by one while [i, j) stays inside the run, so those entries are copied, and its walk past the run
     * starts from the sums of the run's first row after as many layers (kept in `snap`). O(L x (K + S)) per run
     * instead of O(L^2 x S), with the same sums in the same order, so the same tables.
     * Without a uniform placement each stage is its own group: its rows are walked together (stage 0's row 0, then
     * stage 1's rows 1..L-1, stage 2's, ...), so that `snap` holds one group's sums and the runs are copied as above:
     * O(K x L x S) instead of O(K x L^2 x S) (a 2520-GPU cluster's stages of 28, 30 or 36 GPUs straddle nodes
     * differently). The same tables: each entry's sums are the same additions in the same order. */
    int64_t run_first = -1, run_last = -1; /* the run of equal layers row i is in (rows >= 1) */
    for (int kr = 0; kr < (uni ? 1 : K); kr++) /* without uniform placement: the rows of stage kr */
    for (int64_t i = ILO(kr), i_end = uni ? L - 1 : IHI(kr); i <= i_end; i++) {
        if (i == ILO(kr)) run_first = run_last = -1; /* a new stage's rows */
        /* the stages that may start at i: stage 0 at 0; with a uniform placement every stage k >= 1 whose last
         * start is not before i (its rows i < k feed the copies) */
        int k_lo = i == 0 ? 0 : uni ? (int)(i - (L - K) > 1 ? i - (L - K) : 1) : kr;
        int k_hi = i == 0 ? 1 : uni ? K : kr + 1;
        if (k_lo >= k_hi) continue;
        /* row i - 1 is a row of the same stages and run (one group, so one set of sums) */
        bool in_run = i >= 2 && i > ILO(kr) && i <= run_last && (uni || !(ps_search_rules_off & PS_SEARCH_RULE_RUNS));
        if (i >= 1 && !in_run) {
            run_first = i;
            run_last = i;
            while (run_last + 1 < L && ps_layer_equal(&m->layers[run_last + 1], &m->layers[i])) run_last++;
        }
        for (int k0 = k_lo; k0 < k_hi; k0 = k_hi) {
            int g = uni ? 0 : k0, nk = 0;
            for (int k = k0; k < k_hi; k++) ks[nk++] = k;
            int64_t j0 = i + 1; /* the first end walked */
            if (in_run) {
                for (int q = 0; q < nk; q++) {
                    /* [i + 1, run_last + 1] of row i from [i, run_last] of row i - 1, within the stage's ends */
                    size_t at = ((size_t)ks[q] * N + (size_t)i) * N + (size_t)i + 1;
                    size_t from = ((size_t)ks[q] * N + (size_t)i - 1) * N + (size_t)i;
                    int64_t hi = run_last + 1 < JMAX(ks[q]) ? run_last + 1 : JMAX(ks[q]);
                    size_t n = hi > i ? (size_t)(hi - i) : 0;
                    memcpy(C + at, C + from, n * sizeof *C);
                    memcpy(Carg + at, Carg + from, n * sizeof *Carg);
                    memcpy(Cm + at, Cm + from, n * sizeof *Cm);
                    memcpy(Cmarg + at, Cmarg + from, n * sizeof *Cmarg);
                }
                j0 = run_last + 2;
            }
            bool record = i >= 1 && i == run_first;
            for (int s = 0; s < x->nC; s++) {
                stage_acc a = {0};
                size_t sn = (size_t)s * (size_t)(L + 1);
                if (in_run) {
                    /* the sums of [i, run_last + 1): the run's first row after that many layers, if it got there */
                    int64_t n = run_last + 1 - i;
                    if (snap_n[s] < n) continue;
                    a = snap[sn + (size_t)n];
                } else if (record) {
                    snap_n[s] = 0;
                }
                int n_live = 0;
                for (int q = 0; q < nk; q++) {
                    /* memory only grows with j: a stage whose budget the sums so far exceed stays out */
                    live[q] = !(a.sm + inflight[ks[q]] * a.am + a.tm > cap_mem[g] - reserve);
                    n_live += live[q];
                }
                for (int64_t j = j0; j <= JMAX(ks[nk - 1]) && n_live > 0; j++) {
                    bool att = ps_layer_has_attention(m->layers[j - 1].kind);
                    size_t e = lt_at(x, g, j - 1) + (size_t)col_of(x, s, att, a.att);
                    /* one run of overlapped layers: its ends exposed once (the largest layer's); the gradient
                     * synchronisation apart (below) */
                    a.tt += lt->t[e] - lt->sy[e] / micro - a.exm;
                    a.sync += lt->sy[e];
                    a.bwd += lt->bw[e];
                    a.exm = fmax(a.exm, lt->ex[e]);
                    a.tt += a.exm;
                    a.sm += lt->st[e];
                    a.am += lt->act[e];
                    a.tm = fmax(a.tm, lt->tmp[e]);
                    a.blocks += ps_layer_is_block(m->layers[j - 1].kind);
                    a.att += att;
                    if (!isfinite(a.tt)) break;
                    if (record && j <= run_last + 1) {
                        snap[sn + (size_t)(j - i)] = a;
                        snap_n[s] = j - i;
                    }
                    /* The stage's synchronisation runs beside its last backward (ps_cost_plan, Galvatron-BMW
                     * App. C): only what that backward leaves exposed costs, once per iteration, charged per
                     * micro-batch like the rest of the table. */
                    double tc = INFINITY;
                    for (int q = 0; q < nk; q++) {
                        if (!live[q]) continue;
                        int k = ks[q];
                        w->r.cells += 1;
                        double mem = a.sm + inflight[k] * a.am + a.tm;
                        if (mem > cap_mem[g] - reserve || j > JMAX(k)) { /* no room, or past the stage's ends */
                            live[q] = false;
                            n_live--;
                            continue;
                        }
                        if (a.blocks == 0) continue; /* an embedding or a head is never a stage alone */
                        if (tc == INFINITY)
                            tc = a.tt + (a.sync > 0 ? ps_cost_overlapped(x->cp, a.bwd, a.sync) - a.bwd : 0) / micro;
                        size_t ce = ((size_t)k * N + (size_t)i) * N + (size_t)j;
                        if (tc < C[ce]) {
                            C[ce] = tc;
                            Carg[ce] = s;
                        }
                        if (mem < Cm[ce]) {
                            Cm[ce] = mem;
                            Cmarg[ce] = s;
                        }
                    }
                }
            }
        }
    }
#undef JMAX
#undef IHI
#undef ILO
    return PS_OK;
}

/* Step 4: partitions worth costing (ps_cost_plan decides among them):
 *    throughput: the exact partition DP (AMP Eq. 5), Megatron's even split (also the "even split" baseline), and the
 *                end of Galvatron-BMW's bi-objective walk from the memory-balanced partition;
 *    memory:     the exact min-max partition of peak memory (CAPTURE).
 * When none fits, the lightest uniform plan is costed so that the binding constraint can be reported. */
static ps_status search_partitions(worker *w, const unit_ctx *x)
{
    const ps_model *m = x->m;
    const ps_search_opts *o = x->o;
    int K = x->K;
    size_t N = x->N;
    int64_t base = x->index * PS_IDX_STRIDE;
    PS_TRY(SCRATCH(w, parts, 5 * ((size_t)K + 1)));
    int64_t *pt = w->sc.parts, *pe = pt + K + 1, *pb = pe + K + 1, *pm = pb + K + 1, *pw = pm + K + 1;
    ps_pdp_problem tp_prob = {K, (int)x->L, w->sc.C, (double)(x->micro - 1), INFINITY};
    ps_pdp_problem mp_prob = {K, (int)x->L, w->sc.Cm, 0, INFINITY};
    double tbest = INFINITY, mbest = INFINITY;
    bool have_e = false, have_b = false, have_w = false;
    bool fw_split = framework_split(o);
    if (fw_split) {
        /* a framework that splits the layers itself: its split is the only partition (and its "even split") */
        framework_cuts(m, K, pe);
        if (o->objective == PS_SEARCH_MEMORY) {
            if (partition_fits(w->sc.Cm, K, N, pe)) {
                ps_plan plan;
                PS_TRY(plan_from_cuts(x, pe, w->sc.Cmarg, &plan));
                return evaluate(w, x->cp, m, x->c, o, &plan, base + PS_IDX_MEMORY, EV_TOP);
            }
        } else {
            have_e = partition_fits(w->sc.C, K, N, pe);
        }
    } else if (o->objective == PS_SEARCH_MEMORY) {
        PS_TRY(ps_pdp_minmax(w->pdp, &mp_prob, &mbest, pm));
        w->r.cells += (double)K * (double)N * (double)N / 2;
    } else {
        PS_TRY(even_cuts(w, m, K, pe, &have_e));
        have_e = have_e && partition_fits(w->sc.C, K, N, pe);
        /* the even split's objective bounds the DP's: partial partitions already worse are dropped early */
        if (have_e) tp_prob.upper = ps_pdp_objective(&tp_prob, pe);
        PS_TRY(ps_pdp_solve(w->pdp, &tp_prob, &tbest, pt));
        w->r.cells += (double)K * (double)N * (double)N;
        if (o->balance && isfinite(tbest)) {
            PS_TRY(ps_pdp_minmax(w->pdp, &mp_prob, &mbest, pb));
            w->r.cells += (double)K * (double)N * (double)N / 2;
            if (isfinite(mbest)) {
                ps_pdp_balance_walk(&tp_prob, pb);
                have_b = memcmp(pb, pt, ((size_t)K + 1) * sizeof *pb) != 0 &&
                         !(have_e && memcmp(pb, pe, ((size_t)K + 1) * sizeof *pb) == 0);
            }
        }
        if (isfinite(tbest) && K > 1) {
            /* the DP's objective charges every stage's fill; the pipeline's makespan only the stages before the
             * busiest one (ps_pdp_pipeline_objective): from the DP's partition, the walk that lowers the latter */
            memcpy(pw, pt, ((size_t)K + 1) * sizeof *pw);
            size_t row = ((size_t)K + 1) * sizeof *pw;
            have_w = ps_pdp_pipeline_walk(&tp_prob, pw) && !(have_e && memcmp(pw, pe, row) == 0) &&
                     !(have_b && memcmp(pw, pb, row) == 0);
        }
    }
    if (!isfinite(tbest) && !isfinite(mbest) && !have_e) {
        if (x->rcn > 0) return PS_OK; /* the full unit costs its lightest plan */
        int light = -1;
        for (int s = x->nS - 1; s >= 0 && light < 0; s--)
            if (model_allows(m, &x->S[s].s)) light = s;
        if (light < 0) return PS_OK; /* no strategy suits every layer: divisibility, not memory, binds */
        if (!ps_plan_uniform_ok(m, K, 1)) return PS_OK;
        const ps_strategy *sv = &x->S[light].s;
        ps_plan plan;
        PS_TRY(ps_plan_uniform(m, x->oc->gbs, x->global_mb / sv->dp, K, 1, x->sched, sv, &plan));
        if (fw_split) framework_cuts(m, K, plan.cuts);
        return evaluate(w, x->cp, m, x->c, o, &plan, base + PS_IDX_LIGHT, EV_TOP);
    }
    if (o->objective == PS_SEARCH_MEMORY) {
        if (isfinite(mbest) && rcn_own(x, pm)) {
            ps_plan plan;
            PS_TRY(plan_from_cuts(x, pm, w->sc.Cmarg, &plan));
            PS_TRY(evaluate(w, x->cp, m, x->c, o, &plan, base + PS_IDX_MEMORY, EV_TOP));
        }
        return PS_OK;
    }
    PS_TRY(SCRATCH(w, dmem, (size_t)K)); /* cost_partition's bound */
    /* The DP's partition is often the even one (identical layers): cost it once, for both lists. */
    bool same_te = have_e && isfinite(tbest) && memcmp(pe, pt, ((size_t)K + 1) * sizeof *pe) == 0;
    if (isfinite(tbest))
        PS_TRY(cost_partition(w, x, pt, base + PS_IDX_TIME, EV_TOP | (same_te ? EV_EVEN : 0)));
    if (have_e && !same_te) PS_TRY(cost_partition(w, x, pe, base + PS_IDX_EVEN, EV_TOP | EV_EVEN));
    if (have_b) PS_TRY(cost_partition(w, x, pb, base + PS_IDX_BALANCED, EV_TOP));
    if (have_w) PS_TRY(cost_partition(w, x, pw, base + PS_IDX_PIPE, EV_TOP));
    return PS_OK;
}

/* Whether no stage holding more than rcn transformer layers fits its GPUs, so that every plan of a block-recomputation
 * unit is the full unit's: such a stage holds rcn + 1 of them, one at least without recomputation, so it needs at
 * least (rcn + 1) x the least static + in-flight activation bytes of a recomputed one, plus the least extra
 * activations of one not recomputed, plus the reserve (its other layers only add). Skipping such units keeps the n
 * tried to those a stage can exceed (a 405B model's pp 32 stages fit about 5 layers, not the 94 the layer count
 * allows). The factor keeps a stage the stage tables' sums would let fit. */
static bool rcn_beyond_fit(const worker *w, const unit_ctx *x)
{
    const layer_tables *lt = &w->lt;
    double per = INFINITY, more = INFINITY, cap = 0, f = INFINITY;
    for (int k = 0; k < x->K; k++) f = fmin(f, x->inflight[k]);
    for (int g = 0; g < x->G; g++) {
        cap = fmax(cap, x->cap_mem[g]);
        for (int64_t l = 0; l < x->L; l++) {
            if (!ps_layer_has_attention(x->m->layers[l].kind)) continue;
            size_t e = lt_at(x, g, l);
            per = fmin(per, lt->st[e] + f * lt->act[e]);
            more = fmin(more, fmax(0, f * (lt->act[e + 1] - lt->act[e])));
        }
    }
    if (!(per > 0) || !isfinite(per) || !isfinite(more)) return false;
    return ((double)x->rcn + 1) * per + more > (cap - x->cp->reserve_bytes) * (1 + 1e-9);
}

/* Whether some stage holding more than rcn transformer layers fits, by the stage tables (finite entries): else every
 * partition the DPs can return is the full unit's (rcn_own), and they are not run. */
static bool rcn_stage_fits(const worker *w, const unit_ctx *x)
{
    size_t N = x->N;
    int K = x->K;
    int64_t L = x->L;
    for (int64_t i = 0; i < L; i++) {
        int64_t att = 0;
        for (int64_t j = i + 1; j <= L; j++) {
            att += ps_layer_has_attention(x->m->layers[j - 1].kind);
            if (att <= x->rcn) continue;
            for (int k = 0; k < K; k++) {
                /* the entries a partition uses (stage_tables_build) */
                if (ps_pdp_entry_used(K, L, k, i, j) && isfinite(w->sc.C[((size_t)k * N + (size_t)i) * N + (size_t)j]))
                    return true;
            }
        }
    }
    return false;
}

/* A block-recomputation unit's own plans (rcn_own) have a chunk of more than rcn transformer layers, so a device
 * computes at least rcn recomputed ones and one more per micro-batch, and every other chunk recomputes at least one:
 * rcn + chunks - 1 recomputed layers in all, each costing at least the least extra time of recomputation. Bounds as in
 * prunable (each layer's fastest over stage groups); large n, whose chunk alone outlasts the plans found, go here. */
static bool rcn_prunable(const worker *w, const unit_ctx *x)
{
    const layer_tables *lt = &w->lt;
    double full = INFINITY, none = INFINITY, extra = INFINITY, tot = 0;
    const double *lmin = lt->lmin;
    for (int64_t l = 0; l < x->L; l++) {
        double f1 = INFINITY;
        for (int g = 0; g < x->G; g++) f1 = fmin(f1, lmin[(size_t)g * (size_t)x->L + (size_t)l]);
        tot += f1;
        if (!ps_layer_has_attention(x->m->layers[l].kind)) continue;
        for (int g = 0; g < x->G; g++) {
            size_t e = lt_at(x, g, l);
            full = fmin(full, lt->fb[e]);
            none = fmin(none, lt->fb[e + 1]);
            extra = fmin(extra, fmax(0, lt->fb[e] - lt->fb[e + 1]));
        }
    }
    double chunks = (double)x->K * x->oc->vpp, n = (double)x->rcn;
    double lb = fmax(n * full + none, (tot + (n + chunks - 1) * extra) / (double)x->K);
    return isfinite(lb) && prunable(w, x->o, x->oc->gbs, (double)x->micro * lb, EV_TOP | EV_EVEN);
}

/* Search one unit (a batch, pipeline degree, schedule and micro-batch count): its strategies, then the steps above. */
static ps_status search_unit(worker *w, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                             const ps_search_opts *o, const outer *oc, int64_t index)
{
    unit_ctx x = {.cp = cp, .m = m, .c = c, .o = o, .oc = oc, .index = index, .sched = ps_sched_kind_name(oc->kind),
                  .L = m->n_layers, .width = c->n_gpus / oc->pp, .global_mb = oc->gbs / oc->micro,
                  .micro = oc->micro, .K = oc->pp};
    PS_TRY(SCRATCH(w, lay_rep, PS_SEARCH_MAX_LAYOUTS));
    w->unit = index;
    ps_attn attn[2];
    int n_attn = ps_search_fw_attention(o, c, attn);
    strat_filter f;
    strat_filter_of(o, c, m, oc->pp, &f);
    f.cp = oc->cp;
    f.cp_kinds = oc->cp_kinds;
    f.ep = oc->ep;
    f.etp = oc->etp;
    PS_TRY(strategies_list(x.width, x.global_mb, &f, attn, n_attn, &w->sc.S, &w->sc.cap_S, &x.nS, &x.n_layouts,
                           w->sc.lay_rep));
    if (oc->strat >= 0) {
        /* one strategy for every layer (a framework's rule): this unit's only; the partition is still searched */
        if (oc->strat >= x.nS) return PS_OK;
        w->sc.S[0] = (strat){.s = w->sc.S[oc->strat].s, .layout = 0};
        w->sc.lay_rep[0] = w->sc.S[0].s;
        x.nS = x.n_layouts = 1;
        if (oc->rcn > 0) {
            /* Megatron-LM's block recomputation: the twin without recomputation, in the same layout (column 1) */
            if (w->sc.S[0].s.ckpt != PS_RECOMP_FULL) return PS_OK;
            w->sc.S[1] = w->sc.S[0];
            w->sc.S[1].s.ckpt = PS_RECOMP_NONE;
            x.nS = 2;
            x.rcn = oc->rcn;
        }
    }
    if (x.nS == 0) return PS_OK;
    x.nC = x.rcn > 0 ? 1 : x.nS;
    /* --dp-overlap off: the same space, priced for a framework that does not overlap its DP collectives; under a
     * framework, each strategy as the framework runs it (build_strategies set dp_no_overlap) */
    x.S = w->sc.S;
    x.lay_rep = w->sc.lay_rep;
    if (x.K > PS_SEARCH_MAX_PP)
        return PS_FAIL(PS_ERR_INPUT, "pipeline degree %d is above the %d the search supports", x.K, PS_SEARCH_MAX_PP);
    /* The schedule's own rules (micro-batches vs devices, chunks) decide whether this is a candidate at all. The
     * order itself is built only when needed (in-flight counts below, or costing a plan): many candidates are
     * pruned before. */
    if (!ps_sched_valid(x.sched, x.K, (int)oc->micro, oc->vpp)) return PS_OK;

    x.uni = uniform_placement(c, x.width);
    x.G = x.uni ? 1 : x.K;
    x.LS = (size_t)w->job->n_rows * (size_t)x.nS;
    x.row = w->job->row;
    x.N = (size_t)x.L + 1;
    PS_TRY(SCRATCH(w, cap_mem, (size_t)x.G));
    for (int g = 0; g < x.G; g++) {
        /* the node groups the stage's GPUs [first, first + width) fall in (groups are consecutive GPU ranges): one
         * lookup per group instead of one per GPU, which on 2048 GPUs was 3% of a search */
        int64_t first = (int64_t)g * x.width, end = first + x.width;
        w->sc.cap_mem[g] = INFINITY;
        for (int64_t d = first; d < end;) {
            ps_gpu_place pl;
            if (!ps_cluster_place(c, d, &pl)) break;
            const ps_node_group *ng = &c->groups[pl.group];
            w->sc.cap_mem[g] = fmin(w->sc.cap_mem[g], ng->gpu.mem_bytes);
            d = ng->first_gpu + ng->nodes * ng->gpus_per_node; /* the next group's first GPU */
        }
    }
    x.cap_mem = w->sc.cap_mem;
    PS_TRY(layer_tables_build(w, &x));
    x.tg = w->lt.tg;
    if (x.rcn > 0 && rcn_prunable(w, &x)) {
        w->r.pruned++;
        return PS_OK;
    }
    if (oc->vpp > 1) return search_chunked(w, &x);
    const ps_framework_rules *fw = ps_framework_get((ps_framework)o->framework);
    if (fw && fw->uniform && fw->partition == PS_FW_PART_UNIFORM) return search_chunked(w, &x);
    if (unit_prunable(w, &x)) {
        w->r.pruned++;
        return PS_OK;
    }
    /* In-flight micro-batches per stage, from the schedule's order (one chunk per device: one peak point, the most
     * micro-batches a device holds at once). */
    const order_shape *sh;
    PS_TRY(order_shape_get(w, &x, &sh));
    PS_TRY(SCRATCH(w, inflight, (size_t)x.K));
    for (int k = 0; k < x.K; k++) {
        int dev = sh->stage_dev[k];
        w->sc.inflight[k] = sh->off[dev + 1] > sh->off[dev] ? sh->pts[sh->off[dev]] : 0;
    }
    x.inflight = w->sc.inflight;
    if (x.rcn > 0 && rcn_beyond_fit(w, &x)) return PS_OK;
    PS_TRY(stage_tables_build(w, &x));
    if (x.rcn > 0 && !rcn_stage_fits(w, &x)) return PS_OK;
    return search_partitions(w, &x);
}

/* The fewest tokens of a sequence chunk the search splits a sequence into (2 x cp chunks, ring's load balancing; the
 * same bound for a2a): fused attention kernels tile queries and keys in blocks of 64 or 128 rows (FlashAttention-2,
 * Dao 2023, arXiv 2307.08691), and a shorter chunk leaves its kernel's tiles partly empty, which the cost model does
 * not price. A fixed --cp is taken as given. */
#define PS_SEARCH_CP_MIN_CHUNK 128

/* An upper bound on the context-parallel degree of any plan the search makes (for the binding message): the fixed
 * one, else the most 2 x cp chunks of PS_SEARCH_CP_MIN_CHUNK tokens the shortest sequence holds, where the cluster
 * has fused attention and the framework runs a kind; 1 otherwise. */
static int64_t search_max_cp(const ps_search_opts *o, const ps_model *m, const ps_cluster *c)
{
    if (o->fixed.cp > 0) return o->fixed.cp;
    const ps_framework_rules *r = ps_framework_get((ps_framework)o->framework);
    if (r && !r->cp[PS_CP_RING] && !r->cp[PS_CP_A2A]) return 1;
    ps_attn attn[2];
    int n_attn = ps_search_fw_attention(o, c, attn);
    bool fused = false;
    for (int a = 0; a < n_attn; a++) fused = fused || attn[a] == PS_ATTN_FUSED;
    int64_t seq = 0;
    for (int64_t l = 0; l < m->n_layers; l++)
        if (ps_layer_has_attention(m->layers[l].kind) && (seq == 0 || m->layers[l].seq < seq)) seq = m->layers[l].seq;
    int64_t most = seq / (2 * PS_SEARCH_CP_MIN_CHUNK);
    return fused && most > 1 ? most : 1;
}

/* One context-parallel choice of a unit. */
typedef struct {
    int cp;
    unsigned kinds; /* bit k: ps_cp_comm k */
} cp_choice;

/* The context-parallel choices for stages of `width` GPUs, into out (room for 2 x the divisors of the GPU count + 2):
 * cp 1 unless another is fixed, then each divisor cp > 1 of the width with the kinds the framework runs that every
 * layer takes at tp 1 (the sequence multiples; a2a: heads; a necessary condition for every tp, whose own rules
 * ps_search_layer_allows applies), where the cluster has fused attention. The fixed fields choose among them. */
static ps_status cp_choices(const ps_search_opts *o, const ps_model *m, const ps_cluster *c, int64_t width,
                            cp_choice *out, int *n)
{
    *n = 0;
    const ps_framework_rules *r = ps_framework_get((ps_framework)o->framework);
    if (o->fixed.cp <= 1) out[(*n)++] = (cp_choice){1, 1};
    if (o->fixed.cp == 1) return PS_OK;
    ps_attn attn[2];
    int n_attn = ps_search_fw_attention(o, c, attn);
    bool fused = false, any_attn = false;
    for (int a = 0; a < n_attn; a++) fused = fused || attn[a] == PS_ATTN_FUSED;
    for (int64_t l = 0; l < m->n_layers; l++) any_attn = any_attn || ps_layer_has_attention(m->layers[l].kind);
    if (!fused || !any_attn) return PS_OK;
    int64_t seq = 0; /* the shortest sequence of a layer with attention */
    for (int64_t l = 0; l < m->n_layers; l++)
        if (ps_layer_has_attention(m->layers[l].kind) && (seq == 0 || m->layers[l].seq < seq)) seq = m->layers[l].seq;
    for (int64_t cp = 2; cp <= width && cp <= INT32_MAX; cp++) {
        if (width % cp || (o->fixed.cp > 1 && cp != o->fixed.cp)) continue;
        /* no chunk shorter than a fused kernel's query tile (PS_SEARCH_CP_MIN_CHUNK): the cost model prices a ring
         * step as 1/cp of the attention, which a kernel running mostly empty tiles does not reach */
        if (o->fixed.cp <= 1 && seq / (2 * cp) < PS_SEARCH_CP_MIN_CHUNK) break;
        unsigned kinds = 0;
        for (int k = 0; k < PS_CP_COMM_COUNT; k++) {
            if ((o->fixed.cp_comm > 0 && k != o->fixed.cp_comm - 1) || (r && !r->cp[k])) continue;
            /* PyTorch's all-gather rotation moves what the ring moves, less overlapped: a plan names it (a source
             * states it), the search never picks it on its own */
            if (k == PS_CP_ALLGATHER && o->fixed.cp_comm != PS_CP_ALLGATHER + 1) continue;
            ps_strategy s = {.tp = 1, .dp = 1, .cp = (int)cp, .cp_comm = (ps_cp_comm)k, .attn = PS_ATTN_FUSED};
            bool ok = true;
            for (int64_t l = 0; l < m->n_layers && ok; l++) {
                ok = ps_cost_cp_ok(&m->layers[l], &s, NULL, 0);
                if (r && r->cp_seq_multiple > 1) ok = ok && m->layers[l].seq % (r->cp_seq_multiple * cp) == 0;
            }
            if (ok) kinds |= 1u << k;
        }
        if (kinds) out[(*n)++] = (cp_choice){(int)cp, kinds};
    }
    return PS_OK;
}

/* One expert grid of a unit (outer.ep, outer.etp). */
typedef struct {
    int ep, etp;
} ep_choice;

/* The expert grids for stages of `width` GPUs, into out (room for PS_SEARCH_MAX_EP): for a model without MoE layers
 * none (ep 1, etp 0); else every ep dividing the width and every MoE layer's expert count, each with every etp up to
 * the largest TP degree (TP stays inside an NVLink domain) that divides width / ep and every MoE layer's expert width
 * (the fixed ones alone where given). Always an explicit etp: etp = tp on a layer at ep 1 is the experts split over TP
 * like a dense MLP, so the grids never repeat a plan, and one etp for every layer is what Megatron-LM and torchtitan
 * take. More than PS_SEARCH_MAX_EP grids (a model of thousands of experts in wide NVLink domains) is -1: the caller
 * says so and what to fix, instead of searching a cut list (realistic models have about 100: 384 experts, 112). */
#define PS_SEARCH_MAX_EP 512
static int ep_choices(const ps_search_opts *o, const ps_model *m, const ps_cluster *c, int64_t width, ep_choice *out)
{
    int n = 0, fe = o->fixed.ep, ft = o->fixed.etp;
    if (!ps_model_has_moe(m)) {
        out[n++] = (ep_choice){1, 0};
        return n;
    }
    int max_tp = search_max_etp(o, c);
    for (int64_t ep = 1; ep <= width && ep <= INT32_MAX; ep++) {
        if (width % ep || (fe > 0 && ep != fe)) continue;
        bool ok = true;
        for (int64_t l = 0; l < m->n_layers && ok; l++)
            ok = !ps_layer_is_moe(&m->layers[l]) || m->layers[l].n_experts % ep == 0;
        for (int64_t etp = 1; ok && etp <= width / ep && etp <= max_tp; etp++) {
            if ((width / ep) % etp || (ft > 0 && etp != ft)) continue;
            bool div = true;
            for (int64_t l = 0; l < m->n_layers && div; l++)
                div = !ps_layer_is_moe(&m->layers[l]) || m->layers[l].expert_ffn % etp == 0;
            if (!div) continue;
            if (n == PS_SEARCH_MAX_EP) return -1;
            out[n++] = (ep_choice){(int)ep, (int)etp};
        }
    }
    return n;
}

static int64_t *divisors(int64_t n, int *count)
{
    int64_t *d = ps_calloc(PS_SEARCH_MAX_DIVISORS, sizeof *d);
    int k = 0;
    if (!d) return NULL;
    for (int64_t x = 1; x <= n && k < PS_SEARCH_MAX_DIVISORS; x++)
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
    int nl = 0;
    int64_t width = j->c->n_gpus / oc->pp;
    ps_attn attn[2];
    int n_attn = ps_search_fw_attention(&j->o, j->c, attn);
    strat_filter f;
    strat_filter_of(&j->o, j->c, j->m, oc->pp, &f);
    f.cp = oc->cp;
    f.cp_kinds = oc->cp_kinds;
    f.ep = oc->ep;
    f.etp = oc->etp;
    int nS = build_strategies(width, oc->gbs / oc->micro, &f, attn, n_attn, NULL, INT_MAX, &nl, NULL);
    if (nS == 0) return 1;
    if (oc->strat >= 0) nS = 1;
    double K = oc->pp, L = (double)j->m->n_layers, N = L + 1;
    double sim = 10 * 3 * K * (double)oc->micro * oc->vpp;
    if (oc->vpp > 1) return 1 + nS * (L + sim);
    return 1 + K * L * nS * L / 2 + 3 * K * N * N + 4 * sim;
}

/* Whether framework fw (NULL: any) runs schedule kind `kind` as the search builds it (with its default chunks);
 * else why not. */
static bool framework_runs_kind(const ps_framework_rules *fw, int kind, char *why, size_t cap)
{
    if (!fw) return true;
    const char *name = ps_sched_kind_name(kind);
    bool listed = ps_framework_has_schedule(fw, name);
    int chunks = ps_sched_kind_default_chunks(kind);
    if (!listed) {
        char known[160] = "";
        for (const char *const *k = fw->schedules; *k; k++)
            ps_strcatf(known, sizeof known, "%s%s", known[0] ? ", " : "", *k);
        snprintf(why, cap, "%s runs no pipeline schedule '%s' (it runs: %s)", fw->title, name, known);
    } else if (chunks > fw->max_vpp)
        snprintf(why, cap, "%s takes at most %d model chunk(s) per device; schedule '%s' runs %d", fw->title,
                 fw->max_vpp, name, chunks);
    return listed && chunks <= fw->max_vpp;
}

ps_status ps_search_fixed_check(const ps_search_opts *o, const ps_cluster *c)
{
    const ps_search_fixed *f = &o->fixed;
    int64_t g = c->n_gpus;
    /* named as the command line gives them (the fields are the user's: ps_search_fixed) */
    if (f->tp > 0) {
        PS_CHECK_INPUT(g % f->tp == 0, "option --tp %d does not divide the %lld GPUs of %s", f->tp, (long long)g,
                       c->name);
        PS_CHECK_INPUT(o->max_tp <= 0 || f->tp <= o->max_tp, "option --tp %d is above --max-tp %d", f->tp, o->max_tp);
    }
    if (f->pp > 0) {
        PS_CHECK_INPUT(g % f->pp == 0, "option --pp %d does not divide the %lld GPUs of %s", f->pp, (long long)g,
                       c->name);
        PS_CHECK_INPUT(f->pp <= PS_SEARCH_MAX_PP, "option --pp %d is above the %d pipeline stages the search takes",
                       f->pp, PS_SEARCH_MAX_PP);
        PS_CHECK_INPUT(f->tp <= 0 || g % ((int64_t)f->tp * f->pp) == 0,
                       "options --tp %d x --pp %d = %lld GPUs per replica do not divide the %lld GPUs of %s", f->tp,
                       f->pp, (long long)f->tp * f->pp, (long long)g, c->name);
    }
    PS_CHECK_INPUT(f->zero <= 3, "ZeRO stage %d: expected 0-3", f->zero);
    PS_CHECK_INPUT(f->recompute < PS_RECOMP_COUNT, "recompute kind %d: expected none, selective, full or op",
                   f->recompute);
    if (f->micro > 0) {
        PS_CHECK_INPUT(f->micro <= PS_PLAN_MAX_MICRO_BATCHES, "option --micro %lld: plans are simulated with at "
                       "most %d micro-batches per iteration", (long long)f->micro, PS_PLAN_MAX_MICRO_BATCHES);
        PS_CHECK_INPUT(o->gbs_lo != o->gbs_hi || o->gbs_lo % f->micro == 0, "option --micro %lld does not divide the "
                       "global batch of %lld samples (--gbs)", (long long)f->micro, (long long)o->gbs_lo);
    }
    return PS_OK;
}

ps_status ps_search_opts_check(const ps_search_opts *o, const ps_cluster *c)
{
    PS_CHECK_INPUT(o->framework >= PS_FW_ANY && o->framework < PS_FW_COUNT, "unknown framework %d", o->framework);
    const ps_search_fixed *f = &o->fixed;
    const ps_framework_rules *fw = ps_framework_get((ps_framework)o->framework);
    PS_TRY(ps_search_fixed_check(o, c));
    if (!fw) return PS_OK;
    if (f->zero >= 0) {
        bool with = fw->zero_pp[f->zero] && f->pp != 1, without = fw->zero[f->zero] && f->pp <= 1;
        PS_CHECK_INPUT(with || without, "%s does not run ZeRO stage %d%s", fw->title, f->zero,
                       f->pp > 1 ? " with pipeline parallelism" : f->pp == 1 ? " without pipeline parallelism" : "");
    }
    PS_CHECK_INPUT(f->recompute < 0 || fw->recompute[f->recompute], "%s has no %s recomputation", fw->title,
                   ps_recompute_name((ps_recompute)f->recompute));
    for (int i = 0; o->schedules && i < o->n_schedules; i++) {
        int kind = ps_sched_kind_find(o->schedules[i]);
        char why[200];
        if (kind < 0) return PS_FAIL(PS_ERR_INPUT, "unknown pipeline schedule '%s'", o->schedules[i]);
        if (!framework_runs_kind(fw, kind, why, sizeof why)) return PS_FAIL(PS_ERR_INPUT, "%s", why);
    }
    /* the DP overlap the user chose, where the framework runs no ZeRO stage that way (torchtitan always overlaps) */
    bool any_way = false;
    for (int pp_on = 0; pp_on < 2; pp_on++)
        for (int z = 0; z < 4; z++) any_way = any_way || ps_search_fw_dp_mode(o, pp_on, z) >= 0;
    PS_CHECK_INPUT(any_way, "%s runs no data-parallel training with its collectives %s", fw->title,
                   o->dp_no_overlap ? "after the backward (--dp-overlap off)" : "overlapped (--dp-overlap on)");
    ps_attn attn[2];
    PS_CHECK_INPUT(ps_search_fw_attention(o, c, attn) > 0, "%s runs %s attention kernels only; %s", fw->title,
                   fw->attention[PS_ATTN_FUSED] ? "fused" : "unfused",
                   o->attention == PS_ATTN_AUTO || o->attention == PS_SEARCH_ATTN_BOTH
                       ? "some GPUs of the cluster have none"
                       : "the search was asked for another (--attention)");
    return PS_OK;
}

ps_status ps_search_model_check(const ps_search_opts *o, const ps_model *m, const ps_cluster *c)
{
    PS_TRY(ps_search_opts_check(o, c));
    const ps_framework_rules *fw = ps_framework_get((ps_framework)o->framework);
    if (o->fixed.cp > 1) {
        /* a fixed context-parallel degree no plan can have is a wrong input: name what it needs */
        PS_CHECK_INPUT(c->n_gpus % o->fixed.cp == 0, "context-parallel degree %d does not divide the %lld GPUs of %s",
                       o->fixed.cp, (long long)c->n_gpus, c->name);
        PS_CHECK_INPUT(!fw || fw->cp[PS_CP_RING] || fw->cp[PS_CP_A2A], "%s runs no context parallelism (cp %d)",
                       fw ? fw->title : "", o->fixed.cp);
        ps_attn attn[2];
        int n_attn = ps_search_fw_attention(o, c, attn);
        bool fused = false;
        for (int a = 0; a < n_attn; a++) fused = fused || attn[a] == PS_ATTN_FUSED;
        PS_CHECK_INPUT(fused, "context parallelism (cp %d) needs fused attention, which the search does not try on %s "
                       "(--attention, or GPUs without a fused kernel)", o->fixed.cp, c->name);
    }
    if (o->fixed.ep > 1 || o->fixed.etp > 0) {
        /* a fixed expert grid no plan can have: name what it needs (ep 1 is none, which every model has) */
        PS_CHECK_INPUT(ps_model_has_moe(m), "ep / etp fixed (ep %d, etp %d), but %s has no mixture-of-experts layer",
                       o->fixed.ep, o->fixed.etp, m->name);
        int64_t grid = (int64_t)(o->fixed.ep > 0 ? o->fixed.ep : 1) * (o->fixed.etp > 0 ? o->fixed.etp : 1);
        PS_CHECK_INPUT(c->n_gpus % grid == 0, "etp x ep = %lld does not divide the %lld GPUs of %s", (long long)grid,
                       (long long)c->n_gpus, c->name);
        for (int64_t i = 0; i < m->n_layers; i++) {
            const ps_layer *l = &m->layers[i];
            if (!ps_layer_is_moe(l)) continue;
            PS_CHECK_INPUT(o->fixed.ep <= 0 || l->n_experts % o->fixed.ep == 0,
                           "ep %d does not divide the %lld routed experts of layer %lld", o->fixed.ep,
                           (long long)l->n_experts, (long long)i);
            PS_CHECK_INPUT(o->fixed.etp <= 0 || l->expert_ffn % o->fixed.etp == 0,
                           "etp %d does not divide the expert width %lld of layer %lld", o->fixed.etp,
                           (long long)l->expert_ffn, (long long)i);
        }
        PS_CHECK_INPUT(o->fixed.etp <= search_max_etp(o, c), "etp %d is above the largest TP degree searched (%d: "
                       "TP stays inside an NVLink domain; --max-tp)", o->fixed.etp, search_max_etp(o, c));
    }
    if (!fw) return PS_OK;
    char why[320];
    if (fw->model_runs && !fw->model_runs(m, why, sizeof why)) return PS_FAIL(PS_ERR_INPUT, "%s", why);
    PS_CHECK_INPUT((unsigned)m->dtype < 4 && fw->dtype[m->dtype], "%s does not train in %s (the dtype %s is planned "
                   "in)", fw->title, ps_dtype_name(m->dtype), m->name);
    bool block = false;
    for (int64_t i = 0; i < m->n_layers && !block; i++) block = ps_layer_has_attention(m->layers[i].kind);
    PS_CHECK_INPUT(block, "%s: %s has no transformer layer", fw->title, m->name);
    return PS_OK;
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
    PS_TRY(ps_search_model_check(o, m, c));
    const ps_framework_rules *fw = ps_framework_get((ps_framework)o->framework);
    ps_search_job *j = ps_calloc(1, sizeof *j);
    if (!j) return PS_ERR_SYSTEM;
    *j = (ps_search_job){.cp = cp, .m = m, .c = c, .o = *o};
    /* one strategy for every block: the per-layer refinement has nothing to choose */
    if (fw && fw->uniform) j->o.per_layer = 0;
    int nk = 0;
    for (int i = 0; i < (o->schedules ? o->n_schedules : ps_sched_kind_count()) && nk < PS_SEARCH_MAX_KINDS; i++) {
        int kind = o->schedules ? ps_sched_kind_find(o->schedules[i]) : i;
        if (kind < 0) {
            free(j);
            return PS_FAIL(PS_ERR_INPUT, "unknown pipeline schedule '%s'", o->schedules[i]);
        }
        char why[200];
        if (!framework_runs_kind(fw, kind, why, sizeof why)) {
            if (!o->schedules) continue; /* the kinds it runs, of all */
            free(j);
            return PS_FAIL(PS_ERR_INPUT, "%s", why); /* a kind the user named */
        }
        j->kinds[nk++] = kind;
    }
    /* A framework that takes one strategy for every block and any partition: a unit per strategy of the stage
     * width, so that the stage tables and partition DPs of each unit see that strategy alone (chunked kinds take
     * one strategy for all layers already). */
    bool per_strat = fw && fw->uniform && fw->partition == PS_FW_PART_ANY;
    /* Megatron-LM's --recompute-method block (ps_framework_rules.recompute_partial): beside every full-recomputation
     * strategy's units, one per n, its first n transformer layers of every model chunk recomputed and the rest not
     * (not with a fixed recomputation, which every layer must have) */
    bool partial = per_strat && fw->recompute_partial && o->fixed.recompute < 0;
    strat *sv = NULL; /* grown by strategies_list */
    size_t cap_sv = 0;
    ps_strategy lay[PS_SEARCH_MAX_LAYOUTS];
    ps_attn attn[2];
    int n_attn = ps_search_fw_attention(o, c, attn);
    const int k_1f1b = ps_sched_kind_find("1f1b"); /* the one kind tried without a pipeline */

    /* Enumerate the units in a fixed order: their index is the final tie-breaker. */
    int npp = 0;
    int64_t *pps = divisors(c->n_gpus, &npp);
    if (!pps) {
        free(sv);
        free(j);
        return PS_ERR_SYSTEM;
    }
    int64_t blocks = count_blocks(m), att = 0;
    for (int64_t i = 0; i < m->n_layers; i++) att += ps_layer_has_attention(m->layers[i].kind);
    /* the context-parallel choices of a pipeline degree: cp 1 first, then every degree and kind that may run */
    cp_choice *cpc = ps_calloc(2 * (size_t)npp + 2, sizeof *cpc);
    if (!cpc) {
        free(pps);
        free(sv);
        free(j);
        return PS_ERR_SYSTEM;
    }
    ep_choice epc[PS_SEARCH_MAX_EP];
    size_t cap = 1024, n = 0;
    outer *cands = ps_calloc(cap, sizeof *cands);
    ps_status st = cands ? PS_OK : PS_ERR_SYSTEM;
    /* Largest batch first: it is usually the fastest, so the pruning floors (prunable) rise early. The order changes
     * how much is pruned, never the result. The schedules of one (batch, pipeline degree, micro-batch count) are
     * neighbours: they share the layer tables (search_outer step 1), which a worker then computes once. */
    int64_t n_gbs = o->gbs_lo == o->gbs_hi ? 1 : (o->gbs_hi - o->gbs_lo) / o->gbs_step + 1;
    /* Two passes: every unit without context parallelism, then every unit with it. The plans without it set the
     * pruning floors first, so that the units with it, which rarely win at short sequences, are mostly pruned by
     * their bound (unit_prunable) before their stage tables. */
    for (int pass = 0; pass < 2 && st == PS_OK; pass++)
    for (int64_t kg = n_gbs - 1; kg >= 0 && st == PS_OK; kg--) {
        int64_t gbs = o->gbs_lo + kg * (n_gbs > 1 ? o->gbs_step : 0);
        for (int a = 0; a < npp && st == PS_OK; a++) {
            int64_t pp = pps[a];
            if (o->fixed.pp > 0 && pp != o->fixed.pp) continue;
            strat_filter f;
            strat_filter_of(o, c, m, (int)pp, &f);
            int ncp = 0, nep = ep_choices(o, m, c, c->n_gpus / pp, epc);
            if (nep < 0) {
                st = PS_FAIL(PS_ERR_INPUT,
                             "stages of %lld GPUs allow more than %d expert grids (ep x etp) for %s: fix --ep or --etp",
                             (long long)(c->n_gpus / pp), PS_SEARCH_MAX_EP, m->name);
                break;
            }
            st = cp_choices(o, m, c, c->n_gpus / pp, cpc, &ncp);
            for (int64_t micro = 1; micro <= gbs && ps_plan_size_ok(micro, pp) && st == PS_OK; micro++) {
                if (gbs % micro || (o->fixed.micro > 0 && micro != o->fixed.micro)) continue;
              for (int ci = 0; ci < ncp && st == PS_OK; ci++)
              for (int ei = 0; ei < nep && st == PS_OK; ei++) {
                if ((cpc[ci].cp > 1) != (pass == 1)) continue;
                f.cp = cpc[ci].cp;
                f.cp_kinds = cpc[ci].kinds;
                f.ep = epc[ei].ep;
                f.etp = epc[ei].etp;
                int n_strat = 1, nl = 0;
                if (per_strat || f.cp > 1) {
                    st = strategies_list(c->n_gpus / pp, gbs / micro, &f, attn, n_attn, &sv, &cap_sv, &n_strat, &nl,
                                         lay);
                    if (st != PS_OK) break;
                    /* context parallelism no strategy of which can win here (strat_filter.cp_dominated_out) */
                    if (n_strat < 1 && f.cp > 1) continue;
                    if (n_strat < 1 || !per_strat) n_strat = 1; /* one unit still, which finds no strategy */
                }
                /* per strategy, its units of every kind, then (block recomputation) its units of every n: units
                 * of one strategy share the layer tables, those of its n their pair of columns */
                for (int k = 0; k < n_strat * 2 * nk && st == PS_OK; k++) {
                    int s = k % nk, one = per_strat ? k / (2 * nk) : -1, rpass = k / nk % 2;
                    int vpp = ps_sched_kind_default_chunks(j->kinds[s]); /* chunked kinds: 2 */
                    if (pp * vpp > blocks || (pp == 1 && j->kinds[s] != k_1f1b)) continue; /* pp 1: one */
                    /* beyond the caps on micro-batches (x stages) the cost model refuses a plan: not a candidate */
                    if (!ps_plan_size_ok(micro, pp * vpp)) continue;
                    int64_t n_lo = 0, n_hi = 0; /* the unit's rcn: 0, or block recomputation of n_lo..n_hi */
                    if (rpass == 1) {
                        if (!partial || one < 0 || sv[one].s.ckpt != PS_RECOMP_FULL) continue;
                        /* n below the transformer layers of the largest chunk a split can make: every other
                         * chunk holds one (any partition), or Megatron's even split (chunked kinds, whose
                         * split is that) */
                        int64_t chunks = pp * vpp;
                        n_lo = 1;
                        n_hi = vpp > 1 ? (att + chunks - 1) / chunks - 1 : att - chunks;
                    } else {
                        /* chunked kinds search every strategy (each for all layers) in one unit */
                        if (vpp > 1 && one > 0) continue;
                        if (vpp > 1) one = -1;
                    }
                    for (int64_t rn = n_lo; rn <= n_hi && st == PS_OK; rn++) {
                        if (n == cap) {
                            outer *nc = realloc(cands, 2 * cap * sizeof *cands);
                            if (!nc) {
                                st = PS_FAIL(PS_ERR_SYSTEM, "out of memory listing candidates");
                                break;
                            }
                            cands = nc;
                            cap *= 2;
                        }
                        cands[n++] = (outer){gbs,    micro,     (int)pp, vpp,   j->kinds[s], one,
                                             f.cp,   f.cp_kinds, f.ep,    f.etp, (int)rn};
                    }
                }
              }
            }
        }
    }
    free(pps);
    free(cpc);
    free(sv);
    j->units = cands;
    j->n = (int64_t)n;
    if (st == PS_OK && !(j->work = ps_calloc(n + 1, sizeof *j->work))) st = PS_ERR_SYSTEM;
    for (size_t i = 0; st == PS_OK && i < n; i++) j->work[i] = unit_work(j, &cands[i]);
    if (st == PS_OK && !(j->row = ps_calloc(2 * (size_t)m->n_layers, sizeof *j->row))) st = PS_ERR_SYSTEM;
    if (st == PS_OK) j->rep = j->row + m->n_layers;
    for (int64_t l = 0; st == PS_OK && l < m->n_layers; l++) {
        int64_t r = l > 0 && ps_layer_equal(&m->layers[l], &m->layers[l - 1]) ? j->row[l - 1] : -1;
        for (int64_t q = 0; q < j->n_rows && r < 0; q++)
            if (ps_layer_equal(&m->layers[l], &m->layers[j->rep[q]])) r = q;
        if (r < 0) j->rep[r = j->n_rows++] = l;
        j->row[l] = r;
    }
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
    free(j->row);
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
    double top = w->r.n_top >= j->o.top_k ? w->r.top[j->o.top_k - 1].pred.samples_per_s : 0;
    double even = w->r.have_even ? w->r.even.pred.samples_per_s : 0;
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
    for (int i = 0; i < w->r.n_top; i++) cand_free(&w->r.top[i]);
    if (w->r.have_even) cand_free(&w->r.even);
    free(w->r.top);
#define X(col, none, value) free(w->lt.col);
    PS_LAYER_COLUMNS(X)
#undef X
    free(w->lt.lmin);
    free(w->lt.tg);
    scratch_free(&w->sc);
    if (w->shapes)
        for (int i = 0; i < PS_SEARCH_SHAPES; i++) free(w->shapes[i].buf);
    free(w->shapes);
    free(w->even_cuts);
    ps_ldp_destroy(w->ldp);
    ps_pdp_destroy(w->pdp);
    ps_sched_destroy(w->sched);
    ps_coll_memo_free(w->cpw.memo);
}

/* The source of ps_search_run: every unit, in order. */
static int64_t all_units(void *arg)
{
    int64_t *next = arg;
    return (*next)++;
}

static int64_t all_units_peek(void *arg) { return *(const int64_t *)arg; }

/* At most this many units taken at once: the schedule kinds x expert grids of one batch, micro-batch count and
 * context-parallel degree (36 grids x 4 kinds for DeepSeek-V3 on 2048 GPUs) */
#define PS_SEARCH_BATCH 256

ps_status ps_search_run(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, const ps_search_opts *o,
                        ps_search_result *out)
{
    memset(out, 0, sizeof *out);
    ps_search_job *j = NULL;
    PS_TRY(ps_search_job_create(cp, m, c, o, &j));
    int64_t next = 0;
    ps_search_source src = {.next = all_units, .peek = all_units_peek, .arg = &next};
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
        ws[t].r.min_over = INFINITY;
        ws[t].r.min_over_bound = 1;
        ws[t].r.min_over_unit = INT64_MAX;
        ws[t].r.err_index = INT64_MAX;
        ws[t].r.top = ps_calloc((size_t)o->top_k + 1, sizeof *ws[t].r.top);
        ws[t].cpw = *cp;
        ws[t].cpw.memo = ps_coll_memo_create(); /* NULL: every ring walked, the same answers */
        if (!ws[t].r.top || ps_ldp_create(&ws[t].ldp) != PS_OK || ps_pdp_create(&ws[t].pdp) != PS_OK ||
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
                int64_t batch[PS_SEARCH_BATCH];
                int nb = 0;
#pragma omp critical(ps_search_source)
                {
                    int64_t i = src->next(src->arg);
                    if (i >= 0 && i < j->n) batch[nb++] = i;
                    while (nb > 0 && nb < PS_SEARCH_BATCH && src->peek) {
                        int64_t p = src->peek(src->arg);
                        if (p < 0 || p >= j->n || !same_tables(&j->units[p], &j->units[batch[0]])) break;
                        batch[nb++] = src->next(src->arg);
                    }
                }
                if (nb == 0) break;
                for (int b = 0; b < nb; b++) {
                    int64_t i = batch[b];
                    taken++;
                    /* the result is an error now: take the units left without searching them, so that the other
                     * threads (and, through a shared source, ranks) reach the end and the failure sooner */
                    if (w->r.st_err != PS_OK) continue;
                    ps_status s2 = search_unit(w, &w->cpw, m, c, o, &j->units[i], i);
                    if (s2 != PS_OK && i < w->r.err_index) {
                        w->r.st_err = s2;
                        w->r.err_index = i;
                        ps_strlcpy(w->r.err_msg, ps_error_message(), sizeof w->r.err_msg);
                    }
                    if (o->objective == PS_SEARCH_THROUGHPUT) share_floors(j, w, src);
                }
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
    worker_results merged = {.top = out->top};
    for (int t = 0; t < nthreads; t++) {
        worker *w = &ws[t];
        out->evaluated += w->r.evaluated;
        out->feasible += w->r.feasible;
        out->pruned += w->r.pruned;
        out->dp_cells += w->r.cells;
        if (ps_search_over_less(w->r.min_over, w->r.min_over_bound, w->r.min_over_unit, min_over, min_over_bound,
                                min_over_unit)) {
            min_over = w->r.min_over;
            min_over_bound = w->r.min_over_bound;
            min_over_unit = w->r.min_over_unit;
            ps_strlcpy(out->binding, w->r.min_over_msg, sizeof out->binding);
        }
        if (w->r.st_err != PS_OK && w->r.err_index < err_index) {
            err_index = w->r.err_index;
            err = w->r.st_err;
            ps_strlcpy(err_msg, w->r.err_msg, sizeof err_msg);
        }
        if (out->top) {
            for (int i = 0; i < w->r.n_top; i++) offer(&merged, o->top_k, o->objective, &w->r.top[i]);
            w->r.n_top = 0;
        }
        ps_search_cand *even = &out->base[PS_BASE_EVEN];
        if (w->r.have_even &&
            (!out->have_base[PS_BASE_EVEN] || ps_search_cand_order(&w->r.even, even, o->objective) < 0)) {
            if (out->have_base[PS_BASE_EVEN]) cand_free(even);
            *even = w->r.even;
            out->have_base[PS_BASE_EVEN] = 1;
            w->r.have_even = 0;
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
    ps_search_explain(out, o, m, c);
    st = ps_search_result_check(o, m, out);
    if (st != PS_OK) ps_search_result_free(out);
    return st;
}

bool ps_search_plan_allowed(const ps_search_opts *o, const ps_model *m, const ps_plan *p, char *why, size_t cap)
{
    if (!ps_framework_runs((ps_framework)o->framework, m, p, why, cap)) return false;
    const ps_search_fixed *f = &o->fixed;
#define NO(...)                                                                                                        \
    do {                                                                                                               \
        if (why && cap) snprintf(why, cap, __VA_ARGS__);                                                               \
        return false;                                                                                                  \
    } while (0)
    if (f->pp > 0 && p->pp != f->pp) NO("pp %d, not the fixed %d", p->pp, f->pp);
    if (f->mbs > 0 && p->mbs != f->mbs) NO("mbs %lld, not the fixed %lld", (long long)p->mbs, (long long)f->mbs);
    if (f->micro > 0 && ps_plan_micro_batches(p) != f->micro)
        NO("%lld micro-batches, not the fixed %lld", (long long)ps_plan_micro_batches(p), (long long)f->micro);
    bool listed = !o->schedules;
    for (int i = 0; o->schedules && i < o->n_schedules; i++)
        listed = listed || strcmp(o->schedules[i], p->schedule) == 0;
    if (!listed) NO("schedule %s, which the search was not to try", p->schedule);
    for (int64_t i = 0; i < m->n_layers; i++) {
        const ps_strategy *s = &p->layer[i];
        if (f->tp > 0 && s->tp != f->tp) NO("layer %lld: tp %d, not the fixed %d", (long long)i, s->tp, f->tp);
        if (f->zero >= 0 && s->zero != f->zero)
            NO("layer %lld: ZeRO %d, not the fixed %d", (long long)i, s->zero, f->zero);
        if (f->cp > 0 && ps_strategy_cp(s) != f->cp)
            NO("layer %lld: cp %d, not the fixed %d", (long long)i, ps_strategy_cp(s), f->cp);
        bool moe = ps_layer_is_moe(&m->layers[i]); /* the expert grid is an MoE layer's */
        if (moe && f->ep > 0 && ps_strategy_ep(s) != f->ep)
            NO("layer %lld: ep %d, not the fixed %d", (long long)i, ps_strategy_ep(s), f->ep);
        if (moe && f->etp > 0 && ps_strategy_etp(s) != f->etp)
            NO("layer %lld: etp %d, not the fixed %d", (long long)i, ps_strategy_etp(s), f->etp);
        if (f->cp_comm > 0 && ps_strategy_cp(s) > 1 && (int)s->cp_comm != f->cp_comm - 1)
            NO("layer %lld: cp_comm %s, not the fixed %s", (long long)i, ps_cp_comm_name(s->cp_comm),
               ps_cp_comm_name((ps_cp_comm)(f->cp_comm - 1)));
        /* a framework that recomputes transformer layers only runs the others without (ps_search_fw_layer): the
         * fixed recomputation is that of its transformer layers */
        ps_strategy want = {.ckpt = (ps_recompute)(f->recompute >= 0 ? f->recompute : 0)};
        want = ps_search_fw_layer(o, &m->layers[i], &want);
        if (f->recompute >= 0 && s->ckpt != want.ckpt)
            NO("layer %lld: recompute %s, not the fixed %s", (long long)i, ps_recompute_name(s->ckpt),
               ps_recompute_name(want.ckpt));
    }
#undef NO
    return true;
}

ps_status ps_search_result_check(const ps_search_opts *o, const ps_model *m, const ps_search_result *r)
{
    char why[320];
    const char *fw = ps_framework_name((ps_framework)o->framework);
    for (int i = 0; i < r->n_top; i++)
        if (!ps_search_plan_allowed(o, m, &r->top[i].plan, why, sizeof why))
            return PS_FAIL(PS_ERR_SYSTEM, "internal error: plan %d of the search (framework %s) breaks its "
                                          "restriction: %s", i + 1, fw, why);
    for (int k = 0; k < PS_BASE_COUNT; k++) {
        if (!r->have_base[k]) continue;
        bool ok = k == PS_BASE_EVEN ? ps_search_plan_allowed(o, m, &r->base[k].plan, why, sizeof why)
                                    : ps_framework_runs((ps_framework)o->framework, m, &r->base[k].plan, why,
                                                        sizeof why);
        if (!ok)
            return PS_FAIL(PS_ERR_SYSTEM, "internal error: the %s baseline (framework %s) breaks its restriction: %s",
                           ps_baseline_name(k), fw, why);
    }
    return PS_OK;
}

const char *ps_search_objective_name(int objective) { return objective == PS_SEARCH_MEMORY ? "memory" : "throughput"; }

int ps_search_objective_find(const char *name)
{
    if (strcmp(name, "throughput") == 0) return PS_SEARCH_THROUGHPUT;
    if (strcmp(name, "memory") == 0) return PS_SEARCH_MEMORY;
    return -1;
}

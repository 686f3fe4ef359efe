/* Plans: building and checking them, and predicting a whole iteration: per-stage times from the layer costs, the
 * pipeline from the schedule simulator (schedules/), the data-parallel synchronisation of the last micro-batch that
 * is not hidden (Galvatron-BMW App. C), the optimizer step, and per-GPU peak memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_cost.h"
#include "ps_schedules.h"

static bool is_prefix_layer(ps_layer_kind k) { return k == PS_LAYER_EMBED || k == PS_LAYER_PATCH_EMBED; }
static bool is_suffix_layer(ps_layer_kind k) { return k == PS_LAYER_LM_HEAD || k == PS_LAYER_CLS_HEAD; }

void ps_plan_free(ps_plan *p)
{
    free(p->cuts);
    free(p->layer);
    p->cuts = NULL;
    p->layer = NULL;
}

ps_status ps_plan_alloc(const ps_model *m, int64_t gbs, int64_t mbs, int pp, int vpp, const char *schedule,
                        const ps_strategy *s, ps_plan *out)
{
    memset(out, 0, sizeof *out);
    PS_CHECK_INPUT(pp >= 1 && vpp >= 1, "pipeline degree and chunks must be >= 1 (pp %d, vpp %d)", pp, vpp);
    int64_t stages = (int64_t)pp * vpp, n = m->n_layers;
    if (n < stages)
        return PS_FAIL(PS_ERR_INPUT, "%s has %lld layers, fewer than the %lld pipeline stages (pp %d x vpp %d)",
                       m->name, (long long)n, (long long)stages, pp, vpp);
    out->cuts = ps_calloc((size_t)stages + 1, sizeof *out->cuts);
    out->layer = ps_calloc((size_t)n, sizeof *out->layer);
    if (!out->cuts || !out->layer) {
        ps_plan_free(out);
        return PS_ERR_SYSTEM;
    }
    out->gbs = gbs;
    out->mbs = mbs;
    out->pp = pp;
    out->vpp = vpp;
    ps_strlcpy(out->schedule, schedule, sizeof out->schedule);
    for (int64_t i = 0; i < n; i++) out->layer[i] = *s;
    out->cuts[stages] = n;
    return PS_OK;
}

/* The layers [*lo, *hi) between the embedding and the head: what ps_plan_uniform splits evenly. */
static void uniform_blocks(const ps_model *m, int64_t *lo, int64_t *hi)
{
    int64_t n = m->n_layers;
    *lo = 0;
    *hi = n;
    while (*lo < n && is_prefix_layer(m->layers[*lo].kind)) ++*lo;
    while (*hi > *lo && is_suffix_layer(m->layers[*hi - 1].kind)) --*hi;
}

bool ps_plan_uniform_ok(const ps_model *m, int pp, int vpp)
{
    int64_t lo, hi;
    if (pp < 1 || vpp < 1) return false;
    uniform_blocks(m, &lo, &hi);
    return hi - lo >= (int64_t)pp * vpp;
}

ps_status ps_plan_uniform(const ps_model *m, int64_t gbs, int64_t mbs, int pp, int vpp, const char *schedule,
                          const ps_strategy *s, ps_plan *out)
{
    memset(out, 0, sizeof *out);
    PS_CHECK_INPUT(pp >= 1 && vpp >= 1, "pipeline degree and chunks must be >= 1 (pp %d, vpp %d)", pp, vpp);
    int64_t lo, hi;
    uniform_blocks(m, &lo, &hi);
    int64_t stages = (int64_t)pp * vpp, blocks = hi - lo;
    if (blocks < stages)
        return PS_FAIL(PS_ERR_INPUT, "%s has %lld transformer layers, fewer than the %lld pipeline stages (pp %d x "
                                     "vpp %d)", m->name, (long long)blocks, (long long)stages, pp, vpp);
    PS_TRY(ps_plan_alloc(m, gbs, mbs, pp, vpp, schedule, s, out));
    /* Megatron's split: blocks evenly, the remainder to the later stages; embedding joins the first stage and the
     * head the last. */
    int64_t base = blocks / stages, extra = blocks % stages, at = lo;
    for (int64_t st = 0; st + 1 < stages; st++) {
        at += base + (st >= stages - extra ? 1 : 0);
        out->cuts[st + 1] = at;
    }
    return PS_OK;
}

int64_t ps_plan_micro_batches(const ps_plan *p)
{
    int64_t per;
    if (!ps_mul_i64(p->mbs, p->layer ? p->layer[0].dp : 1, &per) || per <= 0) return 0;
    return p->gbs / per;
}

double ps_cost_dp_bucket_elems(const ps_cost_params *p, int dp)
{
    return fmax(p->dp_bucket_elems, p->dp_bucket_elems_per_rank * dp);
}

bool ps_strategy_equal(const ps_strategy *a, const ps_strategy *b)
{
    int cp = ps_strategy_cp(a);
    return a->tp == b->tp && a->dp == b->dp && a->zero == b->zero && a->ckpt == b->ckpt && a->sp == b->sp &&
           a->overlap == b->overlap && a->attn == b->attn && a->dp_no_overlap == b->dp_no_overlap &&
           cp == ps_strategy_cp(b) && (cp == 1 || a->cp_comm == b->cp_comm) && ps_strategy_ep(a) == ps_strategy_ep(b) &&
           ps_strategy_etp(a) == ps_strategy_etp(b);
}

void ps_plan_resolve_attention(ps_plan *p, int64_t n_layers, const ps_cluster *c, ps_attn a)
{
    ps_attn r = ps_cost_attn(c, 0, c->n_gpus, a);
    for (int64_t i = 0; i < n_layers; i++)
        if (p->layer[i].attn == PS_ATTN_AUTO) p->layer[i].attn = r;
}

bool ps_plan_is_uniform(const ps_plan *p, int64_t n_layers)
{
    for (int64_t i = 1; i < n_layers; i++)
        if (!ps_strategy_equal(&p->layer[0], &p->layer[i])) return false;
    return true;
}

static bool divides_or_divided(int64_t a, int64_t t) { return a % t == 0 || (a > 0 && t % a == 0); }

ps_status ps_plan_check(const ps_plan *p, const ps_model *m, const ps_cluster *c)
{
    PS_CHECK_INPUT(p->pp >= 1 && p->vpp >= 1, "pipeline degree and chunks must be >= 1 (pp %d, vpp %d)", p->pp,
                   p->vpp);
    PS_CHECK_INPUT(p->gbs >= 1 && p->mbs >= 1, "global and micro-batch size must be >= 1 (gbs %lld, mbs %lld)",
                   (long long)p->gbs, (long long)p->mbs);
    int ki = ps_sched_kind_find(p->schedule);
    if (ki < 0) {
        char known[512];
        return PS_FAIL(PS_ERR_INPUT, "unknown pipeline schedule '%s' (known: %s)", p->schedule,
                       ps_sched_kind_list(known, sizeof known));
    }
    int64_t stages = (int64_t)p->pp * p->vpp, n = m->n_layers;
    PS_CHECK_INPUT(p->cuts[0] == 0 && p->cuts[stages] == n,
                   "the stages must cover layers 0..%lld of %s (they cover %lld..%lld)", (long long)n - 1, m->name,
                   (long long)p->cuts[0], (long long)p->cuts[stages] - 1);
    for (int64_t s = 0; s < stages; s++)
        PS_CHECK_INPUT(p->cuts[s + 1] > p->cuts[s],
                       "stage %lld holds no layer (layer ranges must increase: %lld, %lld)", (long long)s,
                       (long long)p->cuts[s], (long long)p->cuts[s + 1]);
    const ps_strategy *s0 = &p->layer[0];
    PS_CHECK_INPUT(s0->tp >= 1 && s0->dp >= 1 && s0->cp >= 0, "tp, cp and dp must be >= 1 (tp %d, cp %d, dp %d)",
                   s0->tp, s0->cp, s0->dp);
    const int cp0 = ps_strategy_cp(s0);
    int64_t width = ps_strategy_width(s0), gpus;
    if (!ps_mul_i64(width, p->pp, &gpus) || gpus != c->n_gpus) {
        if (cp0 > 1)
            return PS_FAIL(PS_ERR_INPUT, "tp %d x cp %d x dp %d x pp %d = %.0f GPUs, but cluster %s has %lld", s0->tp,
                           cp0, s0->dp, p->pp, (double)width * p->pp, c->name, (long long)c->n_gpus);
        return PS_FAIL(PS_ERR_INPUT, "tp %d x dp %d x pp %d = %.0f GPUs, but cluster %s has %lld", s0->tp, s0->dp,
                       p->pp, (double)width * p->pp, c->name, (long long)c->n_gpus);
    }
    int64_t per_mb;
    if (!ps_mul_i64(p->mbs, s0->dp, &per_mb))
        return PS_FAIL(PS_ERR_INPUT, "micro-batch %lld x dp %d overflows", (long long)p->mbs, s0->dp);
    if (p->gbs % per_mb != 0)
        return PS_FAIL(PS_ERR_INPUT, "global batch %lld is not a multiple of micro-batch %lld x dp %d",
                       (long long)p->gbs, (long long)p->mbs, s0->dp);
    int64_t mb = p->gbs / per_mb, global_mb = p->gbs / mb;
    /* The schedule is simulated pass by pass: millions of micro-batches per iteration is a wrong batch, not a plan
     * (and would take minutes and gigabytes to simulate). */
    if (mb > PS_PLAN_MAX_MICRO_BATCHES)
        return PS_FAIL(PS_ERR_INPUT, "global batch %lld / (micro-batch %lld x dp %d) = %lld micro-batches; at most %d "
                                     "per iteration", (long long)p->gbs, (long long)p->mbs, s0->dp, (long long)mb,
                       PS_PLAN_MAX_MICRO_BATCHES);
    if (!ps_plan_size_ok(mb, stages))
        return PS_FAIL(PS_ERR_INPUT, "%lld micro-batches x %lld stages (pp %d x vpp %d) = %lld forward passes per "
                                     "iteration; at most %d (fewer micro-batches: a larger --mbs, or fewer stages)",
                       (long long)mb, (long long)stages, p->pp, p->vpp, (long long)(mb * stages),
                       PS_PLAN_MAX_STAGE_PASSES);
    for (int64_t i = 0; i < n; i++) {
        const ps_strategy *s = &p->layer[i];
        const ps_layer *l = &m->layers[i];
        const char *kn = ps_layer_kind_name(l->kind);
        PS_CHECK_INPUT(s->tp >= 1 && s->dp >= 1 && s->cp >= 0,
                       "layer %lld (%s): tp, cp and dp must be >= 1 (tp %d, cp %d, dp %d)", (long long)i, kn, s->tp,
                       s->cp, s->dp);
        /* tokens are split along the whole stage: one CP degree for every layer (the pipeline's boundary
         * activations and the data loader's split are per sequence shard) */
        if (ps_strategy_cp(s) != cp0)
            return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): cp %d differs from the plan's cp %d (one context-parallel "
                                         "degree for every layer)", (long long)i, kn, ps_strategy_cp(s), cp0);
        if (ps_strategy_width(s) != width)
            return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): tp %d x cp %d x dp %d = %lld differs from the stage width "
                                         "%lld", (long long)i, kn, s->tp, cp0, s->dp,
                           (long long)ps_strategy_width(s), (long long)width);
        if ((int)s->cp_comm < 0 || s->cp_comm >= PS_CP_COMM_COUNT)
            return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): unknown context-parallel communication %d", (long long)i,
                           kn, (int)s->cp_comm);
        if (cp0 > 1) {
            char why[256];
            if (!ps_cost_cp_ok(l, s, why, sizeof why))
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): %s", (long long)i, kn, why);
            if (s->attn == PS_ATTN_UNFUSED && ps_layer_has_attention(l->kind))
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): context parallelism (cp %d) needs fused attention "
                                             "(Megatron-core runs it in TEDotProductAttention only)", (long long)i,
                               kn, cp0);
        }
        PS_CHECK_INPUT(s->zero >= 0 && s->zero <= 3, "layer %lld (%s): ZeRO stage must be 0-3 (got %d)", (long long)i,
                       kn, s->zero);
        if (global_mb % s->dp != 0)
            return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): a micro-batch of %lld samples does not split over dp %d",
                           (long long)i, kn, (long long)global_mb, s->dp);
        if (s->tp > 1) {
            if (l->heads && l->heads % s->tp)
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): %lld attention heads are not divisible by tp %d",
                               (long long)i, kn, (long long)l->heads, s->tp);
            if (l->kv_heads && !divides_or_divided(l->kv_heads, s->tp))
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): %lld key/value heads and tp %d: neither divides the "
                                             "other", (long long)i, kn, (long long)l->kv_heads, s->tp);
            if (l->ffn_hidden && l->ffn_hidden % s->tp)
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): MLP width %lld is not divisible by tp %d", (long long)i,
                               kn, (long long)l->ffn_hidden, s->tp);
            if (l->vocab && l->vocab % s->tp)
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): vocabulary %lld is not divisible by tp %d (pad it: "
                                             "--vocab-pad %d)", (long long)i, kn, (long long)l->vocab, s->tp,
                               128 * s->tp);
            if (s->sp && l->seq % s->tp)
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): sequence %lld is not divisible by tp %d (sequence "
                                             "parallelism)", (long long)i, kn, (long long)l->seq, s->tp);
        }
        if ((int)s->overlap < 0 || s->overlap >= PS_OVERLAP_COUNT)
            return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): unknown TP overlap %d", (long long)i, kn, (int)s->overlap);
        if (s->overlap == PS_OVERLAP_TE && !(s->tp >= 2 && s->sp))
            return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): TP overlap te (Transformer Engine's --tp-comm-overlap) "
                                         "pipelines sequence parallelism's collectives: it needs tp >= 2 and sp (tp "
                                         "%d, sp %s)", (long long)i, kn, s->tp, s->sp ? "on" : "off");
        if (ps_overlap_is_oases(s->overlap)) {
            const char *on = ps_overlap_name(s->overlap);
            if (s->tp < 2)
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): TP overlap %s needs tp >= 2 (tp %d has no TP "
                                             "collective to overlap)", (long long)i, kn, on, s->tp);
            if (s->sp)
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): TP overlap %s and sequence parallelism do not combine",
                               (long long)i, kn, on);
            if (global_mb / s->dp < 2)
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): TP overlap %s splits the micro-batch in two, but dp %d "
                                             "leaves %lld sample(s) per replica", (long long)i, kn, on, s->dp,
                               (long long)(global_mb / s->dp));
            if (s->overlap == PS_OVERLAP_OASES && s->ckpt != PS_RECOMP_FULL)
                return PS_FAIL(PS_ERR_INPUT, "layer %lld (%s): TP overlap oases is cross-pass with fine-grained full "
                                             "recomputation: it needs ckpt full (got %s; use cross-pass)", (long long)i,
                               kn, ps_recompute_name(s->ckpt));
        }
    }
    /* The schedule's own rules on pp, micro-batches and chunks are checked when it is built (ps_sched_build). */
    return PS_OK;
}

void ps_prediction_free(ps_prediction *r)
{
    free(r->stages);
    r->stages = NULL;
}

double ps_prediction_peak(const ps_prediction *r)
{
    double m = 0;
    for (int i = 0; i < r->n_stages; i++) m = fmax(m, r->stages[i].mem_peak);
    return m;
}

/* A run of consecutive overlapped layers of one stage being collected: the forward blocks in layer order, the
 * backward blocks per layer (the backward visits the layers in reverse), and what the layers cost outside the TP
 * pipeline (ZeRO-3 gathers). */
typedef struct {
    int64_t n, cap;          /* layers in the run; room for */
    int nf;                  /* forward blocks so far */
    double *fc, *fm; /* [cap * 2 * PS_OV_MAX_BLOCKS] forward computation / collectives, ps_cost_two_stream order */
    double *bc, *bm;         /* [cap][2 * PS_OV_MAX_BLOCKS] backward, per layer */
    int *bn;                 /* [cap] backward blocks per layer */
    double extra_f;          /* forward time outside the pipeline (ZeRO-3 exposure) */
} run_buf;

static ps_status run_buf_alloc(run_buf *r, int64_t layers)
{
    size_t n = (size_t)(layers > 0 ? layers : 1) * 2 * PS_OV_MAX_BLOCKS;
    r->cap = layers > 0 ? layers : 1;
    r->fc = ps_calloc(4 * n, sizeof *r->fc);
    r->bn = ps_calloc((size_t)r->cap, sizeof *r->bn);
    if (!r->fc || !r->bn) {
        free(r->fc);
        free(r->bn);
        r->fc = NULL;
        r->bn = NULL;
        return PS_ERR_SYSTEM;
    }
    r->fm = r->fc + n;
    r->bc = r->fm + n;
    r->bm = r->bc + n;
    return PS_OK;
}

static void run_buf_free(run_buf *r)
{
    free(r->fc);
    free(r->bn);
    r->fc = NULL;
    r->bn = NULL;
}

static void run_add(const ps_cost_params *p, run_buf *r, const ps_layer_cost *lc)
{
    const int B = 2 * PS_OV_MAX_BLOCKS;
    int nf = lc->ov_n[PS_OV_FWD], nb = lc->ov_n[PS_OV_BWD];
    memcpy(r->fc + 2 * r->nf, lc->ov_comp[PS_OV_FWD], 2 * (size_t)nf * sizeof *r->fc);
    memcpy(r->fm + 2 * r->nf, lc->ov_comm[PS_OV_FWD], 2 * (size_t)nf * sizeof *r->fm);
    r->nf += nf;
    memcpy(r->bc + r->n * B, lc->ov_comp[PS_OV_BWD], 2 * (size_t)nb * sizeof *r->bc);
    memcpy(r->bm + r->n * B, lc->ov_comm[PS_OV_BWD], 2 * (size_t)nb * sizeof *r->bm);
    r->bn[r->n] = nb;
    /* lc->fwd is the layer alone plus its ZeRO-3 exposure: keep the exposure */
    r->extra_f += lc->fwd - ps_cost_two_stream(p, nf, lc->ov_comp[PS_OV_FWD], lc->ov_comm[PS_OV_FWD]);
    r->n++;
}

/* The run's passes on the stage: the forward blocks, then the backward blocks of its layers last to first, each
 * through the two-stream pipeline; the collectives it leaves exposed join the TP breakdown. */
static void run_close(const ps_cost_params *p, run_buf *r, ps_stage_pred *sp, double *tp_exposed)
{
    const int B = 2 * PS_OV_MAX_BLOCKS;
    double tf = ps_cost_two_stream(p, r->nf, r->fc, r->fm), comp_f = 0;
    for (int k = 0; k < 2 * r->nf; k++) comp_f += r->fc[k];
    /* the backward blocks, reversed by layer, into the forward arrays (no longer needed) */
    int nb = 0;
    for (int64_t l = r->n - 1; l >= 0; l--) {
        memcpy(r->fc + 2 * nb, r->bc + l * B, 2 * (size_t)r->bn[l] * sizeof *r->fc);
        memcpy(r->fm + 2 * nb, r->bm + l * B, 2 * (size_t)r->bn[l] * sizeof *r->fm);
        nb += r->bn[l];
    }
    double tb = ps_cost_two_stream(p, nb, r->fc, r->fm), comp_b = 0;
    for (int k = 0; k < 2 * nb; k++) comp_b += r->fc[k];
    sp->fwd += tf + r->extra_f;
    sp->bwd_b += tb;
    *tp_exposed += fmax(0, tf - comp_f) + fmax(0, tb - comp_b);
    r->n = 0;
    r->nf = 0;
    r->extra_f = 0;
}

/* ---- data-parallel overlap (docs/costmodel.md, "Data-parallel overlap") ---- */
/* Per layer of the plan, in columns of one buffer: its backward and forward per micro-batch, the once-per-iteration
 * gradient collective and parameter gather it takes part in overlapped (0 when not overlapped or not ZeRO 0-2), its
 * parameters and DP degree (the bucket rule), and for ZeRO-3 its computation, gather, reduce-scatter and the exposure
 * its layer cost already holds; then four scratch rows of L + 2 for the bucket and prefetch timelines. */
enum { DPL_BW, DPL_FW, DPL_GRAD, DPL_PARAM, DPL_ELEMS, DPL_DP, DPL_ZCF, DPL_ZCB, DPL_ZG, DPL_ZRS, DPL_ZXF, DPL_ZXB,
       DPL_N };
typedef struct {
    double *v; /* [DPL_N][L], then scratch [4][L + 2] */
    int64_t L;
} dp_layers;

static double *dpl(const dp_layers *d, int col) { return d->v + (size_t)col * (size_t)d->L; }

static void dp_layer_record(dp_layers *d, int64_t i, const ps_strategy *s, const ps_layer_cost *lc)
{
    bool ov = !s->dp_no_overlap;
    dpl(d, DPL_BW)[i] = lc->bwd_b + lc->bwd_w;
    dpl(d, DPL_FW)[i] = lc->fwd;
    dpl(d, DPL_GRAD)[i] = ov ? lc->dp_grad : 0;
    dpl(d, DPL_PARAM)[i] = ov ? lc->dp_param : 0;
    dpl(d, DPL_ELEMS)[i] = lc->dp_elems;
    /* the bucket rule's DP size: Megatron-core sizes buckets by its data-parallel group without context parallelism
     * (distributed_data_parallel.py: max(40000000, 1000000 x dp_group.size()), d98e8a64), though the gradients are
     * reduced over dp x cp */
    dpl(d, DPL_DP)[i] = s->dp;
    /* ZeRO-3 not overlapped is exposed in its layer's cost already: its collectives join the computation here */
    dpl(d, DPL_ZCF)[i] = lc->comp_fwd + (ov ? 0 : lc->zero_exposed_f);
    dpl(d, DPL_ZCB)[i] = lc->comp_bwd_b + lc->comp_bwd_w + (ov ? 0 : lc->zero_exposed_b);
    dpl(d, DPL_ZG)[i] = ov ? lc->zero_gather : 0;
    dpl(d, DPL_ZRS)[i] = ov ? lc->zero_rs : 0;
    dpl(d, DPL_ZXF)[i] = ov ? lc->zero_exposed_f : 0;
    dpl(d, DPL_ZXB)[i] = ov ? lc->zero_exposed_b : 0;
}

/* ZeRO-3 overlapped over the stage's layers [a, b): a one-ahead prefetch (ps_cost_prefetch) in each pass. The
 * forward gathers layer k + 1 while layer k computes, the first gather alone; the backward, in reverse, gathers the
 * next layer and reduce-scatters the previous one's gradients beside each layer's computation, the first gather and
 * the last reduce-scatter alone. Each layer's cost already holds its gathers beside its own computation (the steady
 * state); the stage adds what the pipeline's ends expose beyond that, never less than 0 (so that the layer costs stay
 * a lower bound of the stage, as the search's bounds need), per micro-batch. */
static void zero3_stage_ends(const ps_cost_params *p, const dp_layers *d, int64_t a, int64_t b, ps_stage_pred *sp)
{
    const double *g = dpl(d, DPL_ZG), *rs = dpl(d, DPL_ZRS);
    bool any = false;
    for (int64_t i = a; i < b && !any; i++) any = g[i] > 0;
    if (!any) return;
    int n = (int)(b - a);
    double *comp = d->v + (size_t)DPL_N * (size_t)d->L, *comm = comp + d->L + 2, have = 0;
    for (int k = 0; k < n; k++) {
        comp[k] = dpl(d, DPL_ZCF)[a + k];
        comm[k] = g[a + k];
        have += comp[k] + dpl(d, DPL_ZXF)[a + k];
    }
    comm[n] = comm[n + 1] = 0;
    sp->fwd += fmax(0, ps_cost_prefetch(p, n, comp, comm) - have);
    have = 0;
    comm[0] = g[b - 1];
    for (int k = 0; k < n; k++) {
        int64_t l = b - 1 - k; /* the layer of backward step k */
        comp[k] = dpl(d, DPL_ZCB)[l];
        comm[k + 1] = (l - 1 >= a ? g[l - 1] : 0) + (k >= 1 ? rs[l + 1] : 0);
        have += comp[k] + dpl(d, DPL_ZXB)[l];
    }
    comm[n + 1] = rs[a];
    sp->bwd_w += fmax(0, ps_cost_prefetch(p, n, comp, comm) - have);
}

/* What device `dev`'s overlapped ZeRO 0-2 synchronisation leaves exposed per iteration. Megatron-core buckets the
 * gradients in reverse layer order, a bucket closing at max(dp_bucket_elems, dp_bucket_elems_per_rank x dp)
 * parameters; a bucket is ready when the last micro-batch's backward of all its layers is done and its collective
 * runs then (ps_cost_bucket_overlap). The device's stages are walked as one backward, last stage first (an interleaved
 * device's chunks run their last backwards with other devices' work between: taken as back to back). The parameter
 * all-gather of ZeRO 1-2 (--overlap-param-gather) runs bucket by bucket one ahead of the next iteration's first
 * forward (ps_cost_prefetch): the first bucket's gather exposed. */
static double dp_exposed(const ps_cost_params *p, const dp_layers *d, const ps_plan *plan, const ps_sched *sch,
                         int dev)
{
    const double *bw = dpl(d, DPL_BW), *fw = dpl(d, DPL_FW), *gr = dpl(d, DPL_GRAD), *pa = dpl(d, DPL_PARAM),
                 *el = dpl(d, DPL_ELEMS), *dp = dpl(d, DPL_DP);
    /* scratch per bucket: readiness, collective, parameter gather, forward */
    double *car = d->v + (size_t)DPL_N * (size_t)d->L, *bcomm = car + d->L + 2, *bpar = bcomm + d->L + 2,
           *bfw = bpar + d->L + 2;
    double left = 0;
    int S = plan->pp * plan->vpp;
    for (int s = 0; s < S; s++)
        if (ps_sched_device_of(sch, s) == dev)
            for (int64_t i = plan->cuts[s]; i < plan->cuts[s + 1]; i++) left += bw[i];
    int nb = 0;
    double elems = 0, comm = 0, par = 0, fwd = 0, cap = 0;
    bool open = false;
    for (int s = S - 1; s >= 0; s--) {
        if (ps_sched_device_of(sch, s) != dev) continue;
        for (int64_t i = plan->cuts[s + 1] - 1; i >= plan->cuts[s]; i--) {
            left -= bw[i];
            fwd += fw[i];
            if (gr[i] <= 0 && pa[i] <= 0) continue;
            open = true;
            elems += el[i];
            comm += gr[i];
            par += pa[i];
            cap = fmax(cap, ps_cost_dp_bucket_elems(p, dp[i]));
            if (elems >= cap) {
                car[nb] = fmax(0, left);
                bcomm[nb] = comm;
                bpar[nb] = par;
                bfw[nb++] = fwd;
                elems = comm = par = fwd = cap = 0;
                open = false;
            }
        }
    }
    if (open) {
        car[nb] = 0;
        bcomm[nb] = comm;
        bpar[nb] = par;
        bfw[nb++] = fwd;
    } else if (nb > 0) {
        bfw[nb - 1] += fwd; /* layers before the first bucket's (in forward order) run in its forward step */
    }
    if (nb == 0) return 0;
    double exposed = ps_cost_bucket_overlap(p, nb, car, bcomm);
    /* forward order: bucket nb - 1 first; the gather of bucket j + 1 beside the forward of bucket j */
    double have = 0, t = bpar[nb - 1];
    for (int j = 0; j < nb; j++) {
        int k = nb - 1 - j;
        t += ps_cost_overlapped(p, bfw[k], k > 0 ? bpar[k - 1] : 0);
        have += bfw[k];
    }
    return exposed + fmax(0, t - have);
}

ps_status ps_cost_plan(const ps_cost_params *p, const ps_model *m, const ps_cluster *c, const ps_plan *plan,
                       ps_prediction *out)
{
    return ps_cost_plan_ws(p, m, c, plan, NULL, out);
}

ps_status ps_cost_plan_ws(const ps_cost_params *p, const ps_model *m, const ps_cluster *c, const ps_plan *plan,
                          ps_sched *ws, ps_prediction *out)
{
    memset(out, 0, sizeof *out);
    PS_TRY(ps_plan_check(plan, m, c));
    int64_t n_mb = ps_plan_micro_batches(plan), global_mb = plan->gbs / n_mb;
    int d = plan->pp, S = plan->pp * plan->vpp;
    int64_t width = ps_strategy_width(&plan->layer[0]);
    if (n_mb > INT32_MAX) return PS_FAIL(PS_ERR_INPUT, "%lld micro-batches is too many", (long long)n_mb);

    ps_status st = PS_OK;
    run_buf rb = {0};
    ps_sched *own = NULL, *sch = ws;
    double *buf = NULL;
    if (!sch) {
        PS_TRY(ps_sched_create(&own));
        sch = own;
    }
    /* A search builds (kind, d, n, v) once for all the plans of a candidate: the order is then the same, and so
     * are its verification and dependency record. */
    PS_TRY_GOTO(st, ps_sched_ensure(sch, plan->schedule, d, (int)n_mb, plan->vpp), done);
    /* per stage: f, b, w, act, p2p; per device: static, temp, sync, bwd, exposed sync, recompute, capacity, TP,
     * optimizer, sync not overlapped; per layer: what the data-parallel overlap needs (dp_layers) */
    int64_t L = m->n_layers;
    buf = ps_calloc((size_t)S * 5 + (size_t)d * 9 + (size_t)L * DPL_N + 4 * ((size_t)L + 2), sizeof *buf);
    out->stages = ps_calloc((size_t)S, sizeof *out->stages);
    if (!buf || !out->stages) {
        st = PS_ERR_SYSTEM;
        goto done;
    }
    double *f = buf, *b = f + S, *w = b + S, *act = w + S, *p2p = act + S;
    double *dstatic = p2p + S, *dtemp = dstatic + d, *dsync = dtemp + d, *dexposed = dsync + d,
           *drec = dexposed + d, *dcap = drec + d, *dtp = dcap + d, *dopt = dtp + d, *dsoff = dopt + d;
    dp_layers dl = {dsoff + d, L};
    for (int i = 0; i < d; i++) dcap[i] = INFINITY;
    out->n_stages = S;

    /* the blocks of a run of overlapped layers: forward in layer order, backward per layer (reversed at the end) */
    int64_t most = 0;
    for (int s = 0; s < S; s++)
        most = plan->cuts[s + 1] - plan->cuts[s] > most ? plan->cuts[s + 1] - plan->cuts[s] : most;
    PS_TRY_GOTO(st, run_buf_alloc(&rb, most), done);

    double hw_flops_mb = 0; /* summed over stages: one micro-batch through the whole model, per GPU of a stage */
    for (int s = 0; s < S; s++) {
        ps_stage_pred *sp = &out->stages[s];
        int dev = ps_sched_device_of(sch, s);
        sp->first_gpu = (int64_t)dev * width;
        sp->n_gpus = width;
        ps_layer_cost lc;
        rb.n = 0;
        for (int64_t i = plan->cuts[s]; i < plan->cuts[s + 1]; i++) {
            const ps_strategy *ls = &plan->layer[i];
            /* 80 identical decoder blocks under one strategy cost the same: cost the first of a run only */
            if (i == plan->cuts[s] || !ps_layer_equal(&m->layers[i], &m->layers[i - 1]) ||
                !ps_strategy_equal(ls, &plan->layer[i - 1]))
                PS_TRY_GOTO(st, ps_cost_layer(p, c, &m->layers[i], m->dtype, global_mb / ls->dp, ls, sp->first_gpu,
                                              &lc),
                            done);
            if (i > plan->cuts[s]) {
                /* a change of TP layout inside the stage: one all-gather, forward or backward (Oases Eq. 4) */
                double rf, rbw;
                ps_cost_reshard(p, c, &m->layers[i - 1], m->dtype, global_mb, &plan->layer[i - 1], ls, sp->first_gpu,
                                &rf, &rbw);
                sp->fwd += rf;
                sp->bwd_b += rbw;
                dtp[dev] += rf + rbw;
            }
            /* Overlapped layers of one TP group in a row run as one sub-batch pipeline: only its first computation
             * and last collective are exposed, not every layer's (Oases Eq. 3). */
            bool ov = ps_overlap_is_oases(ls->overlap) && ls->tp > 1;
            if (rb.n > 0 && !(ov && ls->tp == plan->layer[i - 1].tp)) run_close(p, &rb, sp, &dtp[dev]);
            if (ov) {
                run_add(p, &rb, &lc);
            } else {
                sp->fwd += lc.fwd;
                sp->bwd_b += lc.bwd_b;
                dtp[dev] += lc.tp_comm;
            }
            sp->bwd_w += lc.bwd_w;
            sp->mem_static += lc.mem_params + lc.mem_grads + lc.mem_optim;
            sp->mem_act_per_mb += lc.mem_act;
            if (lc.mem_temp > sp->mem_temp) sp->mem_temp = lc.mem_temp;
            dp_layer_record(&dl, i, ls, &lc);
            if (ls->dp_no_overlap)
                dsoff[dev] += lc.dp_sync;
            else
                dsync[dev] += lc.dp_sync;
            drec[dev] += lc.recompute;
            hw_flops_mb += lc.hw_flops;
        }
        if (rb.n > 0) run_close(p, &rb, sp, &dtp[dev]);
        zero3_stage_ends(p, &dl, plan->cuts[s], plan->cuts[s + 1], sp);
        f[s] = sp->fwd;
        b[s] = sp->bwd_b;
        w[s] = sp->bwd_w;
        act[s] = sp->mem_act_per_mb;
        dstatic[dev] += sp->mem_static;
        if (sp->mem_temp > dtemp[dev]) dtemp[dev] = sp->mem_temp;
        /* the stage's capacity: its smallest GPU, node group by node group (CPU-only groups hold none of it) */
        for (int gi = ps_cluster_group_index(c, sp->first_gpu);
             gi >= 0 && gi < c->n_groups && c->groups[gi].first_gpu < sp->first_gpu + width; gi++) {
            const ps_node_group *ng = &c->groups[gi];
            if (ng->gpus_per_node > 0 && ng->gpu.mem_bytes < dcap[dev]) dcap[dev] = ng->gpu.mem_bytes;
        }
        if (s + 1 < S) {
            /* Megatron scatters the boundary activation over the TP group: each GPU sends 1/tp of its CP shard (1/cp
             * of the tokens), all GPUs of the stage at once, so across the network (another node, or another NVLink
             * domain where nodes share one) they share the node's NICs; inside a domain each GPU has its own
             * NVLink. */
            const ps_layer *last = &m->layers[plan->cuts[s + 1] - 1];
            const ps_strategy *ls = &plan->layer[plan->cuts[s + 1] - 1];
            double bytes = ps_layer_boundary_bytes(last, m->dtype) * (double)(global_mb / ls->dp) / ls->tp /
                           ps_strategy_cp(ls);
            sp->p2p_bytes = bytes;
            int64_t a = sp->first_gpu, nb = (int64_t)ps_sched_device_of(sch, s + 1) * width;
            if (ps_cluster_domain_of(c, a) != ps_cluster_domain_of(c, nb)) {
                const ps_node_group *ng = ps_cluster_group_of(c, a);
                int64_t k = width < ng->gpus_per_node ? width : ng->gpus_per_node;
                bytes *= (double)k;
            }
            p2p[s] = ps_p2p(p, c, a, nb, bytes);
            sp->p2p = p2p[s];
        }
    }

    ps_sched_costs costs = {.f = f, .b = b, .w = w, .p2p = S > 1 ? p2p : NULL, .act = act};
    ps_sched_result r;
    PS_TRY_GOTO(st, ps_sched_simulate(sch, &costs, &r), done);

    /* Each device synchronises gradients (ZeRO 0-2) once per iteration: overlapped, in buckets during its last
     * backward and the parameter gather during the next first forward (dp_exposed); not overlapped, all of it after
     * the last backward. Then it steps the optimizer: a memory-bound pass over weights, gradients and optimizer
     * states (read and written). */
    double tail = 0;
    int crit = 0;
    for (int i = 0; i < d; i++) {
        const ps_node_group *ng = ps_cluster_group_of(c, (int64_t)i * width);
        dexposed[i] = dsoff[i] + (dsync[i] > 0 ? dp_exposed(p, &dl, plan, sch, i) : 0);
        dopt[i] = p->compute_scale * 2 * dstatic[i] / ps_cost_stream_Bps(p, &ng->gpu);
        if (dexposed[i] + dopt[i] > tail) tail = dexposed[i] + dopt[i];
        if (r.busy[i] > r.busy[crit]) crit = i;
    }
    out->iter_time_s = r.makespan + tail;
    out->bubble_frac = r.bubble_frac;
    out->fits = true;
    for (int s = 0; s < S; s++) {
        ps_stage_pred *sp = &out->stages[s];
        int dev = ps_sched_device_of(sch, s);
        sp->dp_sync_exposed = dexposed[dev];
        sp->opt_s = dopt[dev];
        sp->mem_peak = dstatic[dev] + r.peak_act[dev] + dtemp[dev] + p->reserve_bytes;
        sp->mem_capacity = dcap[dev];
        sp->in_flight = act[s] > 0 ? (int)lround(r.peak_act[dev] / act[s]) : 0;
        if (sp->mem_peak > sp->mem_capacity) out->fits = false;
    }

    double model_flops = ps_model_train_flops(m) * (double)plan->gbs;
    double peak_sum = 0;
    for (int gi = 0; gi < c->n_groups; gi++) {
        const ps_node_group *ng = &c->groups[gi];
        peak_sum += (double)(ng->nodes * ng->gpus_per_node) * ps_cost_peak_flops(&ng->gpu, m->dtype);
    }
    out->samples_per_s = (double)plan->gbs / out->iter_time_s;
    out->tokens_per_s = out->samples_per_s * (double)m->seq;
    out->tflops_per_gpu = model_flops / out->iter_time_s / (double)c->n_gpus / 1e12;
    out->hw_tflops_per_gpu = hw_flops_mb * (double)n_mb / (double)d / out->iter_time_s / 1e12;
    out->mfu = model_flops / out->iter_time_s / peak_sum;

    /* Breakdown of the busiest device's iteration. */
    double tpc = dtp[crit] * (double)n_mb, rec = drec[crit] * (double)n_mb;
    out->comm_exposed_s = tpc + dexposed[crit];
    out->recompute_s = rec;
    out->compute_s = r.busy[crit] - tpc - rec + (tail - dexposed[crit]);
    out->bubble_s = out->iter_time_s - r.busy[crit] - tail;
    if (out->bubble_s < 0) out->bubble_s = 0;

done:
    run_buf_free(&rb);
    free(buf);
    ps_sched_destroy(own);
    if (st != PS_OK) ps_prediction_free(out);
    return st;
}

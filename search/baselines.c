/* Baselines: the plans people pick without a search, costed with the same model as the search, so every table shows
 * what the search gained. The even-split baseline comes out of the search itself (ps_search_result.base[PS_BASE_EVEN]);
 * this file computes the three that follow a rule:
 *  - Megatron heuristic: TP inside a node, the smallest TP x PP that fits, an even layer split, 1F1B, sequence
 *    parallelism with TP (Megatron-LM's recommended setting), no ZeRO; recompute none, selective or full and the
 *    micro-batch size are then picked for speed, as a user tuning those two flags would (Narayanan et al., SC'21,
 *    Sec. 3.3 takeaways: TP up to the node size, then PP);
 *  - data parallel only (PyTorch DDP): every GPU holds the whole model;
 *  - ZeRO-3 only (FSDP / DeepSpeed stage 3): parameters, gradients and optimizer states sharded over all GPUs.
 * Under --framework each rule keeps to what the framework runs (its recomputation kinds, ZeRO stages, schedules and
 * layer split), and is missing, with the reason, where the framework cannot run it at all. The fields the user fixed
 * do not apply: a baseline is what the search is measured against.
 * Pure: no MPI, no I/O. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ps_search.h"
#include "search_internal.h"

static const char *const k_names[PS_BASE_COUNT] = {"megatron", "dp-only", "zero3-only", "even-split"};
static const char *const k_desc[PS_BASE_COUNT] = {
    "Megatron heuristic: TP inside a node, smallest TP x PP that fits, even split, 1F1B",
    "data parallel only (DDP)",
    "ZeRO-3 only (FSDP)",
    "psearch restricted to even layer splits",
};

const char *ps_baseline_name(int kind) { return kind >= 0 && kind < PS_BASE_COUNT ? k_names[kind] : "?"; }
const char *ps_baseline_desc(int kind) { return kind >= 0 && kind < PS_BASE_COUNT ? k_desc[kind] : "?"; }

typedef struct {
    ps_search_cand best;
    int found;
    double min_over;     /* smallest shortfall of memory among plans that did not fit, bytes */
    double min_need, cap; /* that plan's peak and capacity */
    int64_t tried;
} base_acc;

/* Cost one uniform plan; keep it when it fits and beats the current best. A shape the model cannot take (too few
 * layers for pp stages, a layer tp does not divide) is skipped: try_layout sets the batch, micro-batch and degrees so
 * that these are the only rules of ps_plan_check such a plan can break, so any failure after them is a real one. */
static ps_status try_plan(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, const ps_search_opts *o,
                          int64_t gbs, int64_t mbs, int pp, const ps_strategy *s, int64_t index, base_acc *acc)
{
    if (!ps_plan_uniform_ok(m, pp, 1)) return PS_OK;
    for (int64_t l = 0; l < m->n_layers; l++)
        if (!ps_search_layer_allows(&m->layers[l], s)) return PS_OK;
    ps_search_cand cand = {.index = index};
    PS_TRY(ps_plan_uniform(m, gbs, mbs, pp, 1, "1f1b", s, &cand.plan));
    const ps_framework_rules *fw = ps_framework_get((ps_framework)o->framework);
    if (fw && fw->partition == PS_FW_PART_UNIFORM) /* the framework's own split of the layers */
        for (int k = 0; k <= pp; k++) cand.plan.cuts[k] = ps_framework_uniform_cut(m->n_layers, pp, k);
    /* each layer as the framework runs it (no recomputation outside transformer layers); a plan it still cannot run
     * (a TP degree its heads or sequence do not take, a ZeRO stage beside model parallelism) is not this rule's */
    for (int64_t l = 0; fw && l < m->n_layers; l++) cand.plan.layer[l] = ps_search_fw_layer(o, &m->layers[l], s);
    if (fw && !ps_framework_runs((ps_framework)o->framework, m, &cand.plan, NULL, 0)) {
        ps_plan_free(&cand.plan);
        return PS_OK;
    }
    ps_status st = ps_plan_check(&cand.plan, m, c);
    if (st == PS_OK) st = ps_cost_plan(cp, m, c, &cand.plan, &cand.pred);
    if (st != PS_OK) {
        ps_plan_free(&cand.plan);
        return st;
    }
    acc->tried++;
    if (!cand.pred.fits) {
        const ps_stage_pred *sp = &cand.pred.stages[ps_prediction_worst_stage(&cand.pred)];
        if (sp->mem_peak - sp->mem_capacity < acc->min_over) {
            acc->min_over = sp->mem_peak - sp->mem_capacity;
            acc->min_need = sp->mem_peak;
            acc->cap = sp->mem_capacity;
        }
        ps_plan_free(&cand.plan);
        ps_prediction_free(&cand.pred);
        return PS_OK;
    }
    if (acc->found && ps_search_cand_order(&cand, &acc->best, o->objective) >= 0) {
        ps_plan_free(&cand.plan);
        ps_prediction_free(&cand.pred);
        return PS_OK;
    }
    if (acc->found) {
        ps_plan_free(&acc->best.plan);
        ps_prediction_free(&acc->best.pred);
    }
    acc->best = cand;
    acc->found = 1;
    return PS_OK;
}

/* Every recompute mode and micro-batch size of one (tp, pp, zero) layout, over the batch range. */
static ps_status try_layout(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, const ps_search_opts *o,
                            int tp, int pp, int zero, bool sp, int64_t *index, base_acc *acc)
{
    /* the rules run one attention kernel: the search's, auto resolved; with both, the last of ps_search_attention's
     * (fused, the cluster's default) */
    ps_attn attn[2];
    int n_attn = ps_search_fw_attention(o, c, attn);
    if (n_attn == 0) return PS_OK;
    ps_attn a = attn[n_attn - 1];
    int64_t dp = c->n_gpus / ((int64_t)tp * pp);
    if (dp < 1 || dp > INT32_MAX) return PS_OK;
    const ps_framework_rules *fw = ps_framework_get((ps_framework)o->framework);
    /* a ZeRO stage the framework does not run with this pp, dtype, tp and dp is left to try_plan's ps_framework_runs:
     * the rules in one place (zero, zero_pp, zero_pp_bf16, zero_model_parallel) */
    /* SP as the framework runs TP (DeepSpeed: none; torchtitan: always), the DP overlap as it runs that stage */
    if (fw) sp = fw->sp_required || (sp && fw->sp);
    int no_ov = dp > 1 ? ps_search_fw_dp_mode(o, pp > 1, zero) : o->dp_no_overlap;
    if (no_ov < 0) return PS_OK;
    for (int64_t gbs = o->gbs_lo; gbs <= o->gbs_hi; gbs += o->gbs_step > 0 ? o->gbs_step : 1) {
        if (gbs % dp == 0) {
            int64_t per = gbs / dp;
            for (int64_t mbs = 1; mbs <= per && mbs <= o->mbs_max; mbs++) {
                if (per % mbs || !ps_plan_size_ok(per / mbs, pp)) continue;
                for (int rc = PS_RECOMP_NONE; rc <= PS_RECOMP_FULL; rc++) {
                    if (fw && !fw->recompute[rc]) continue;
                    ps_strategy s = {.tp = tp, .dp = (int)dp, .zero = dp > 1 ? zero : 0, .ckpt = (ps_recompute)rc,
                                     .sp = sp && tp > 1, .attn = a, .dp_no_overlap = no_ov == 1};
                    PS_TRY(try_plan(cp, m, c, o, gbs, mbs, pp, &s, (*index)++, acc));
                }
            }
        }
        if (o->gbs_lo == o->gbs_hi) break;
    }
    return PS_OK;
}

/* Whether framework fw runs the rule of baseline `kind` at all (its schedule, its ZeRO stage, its overlap); else
 * why not. The rule's choices it runs only in part (recomputation kinds, ZeRO with pp) are narrowed in try_layout. */
static bool fw_runs_rule(const ps_framework_rules *fw, int kind, char *why, size_t cap)
{
    bool sched = ps_framework_has_schedule(fw, "1f1b");
    int zero = kind == PS_BASE_ZERO3 ? 3 : 0;
    if (!sched)
        snprintf(why, cap, "%s runs no 1F1B schedule", fw->title);
    else if (!fw->overlap[PS_OVERLAP_NONE])
        snprintf(why, cap, "%s runs no TP without overlap", fw->title);
    else if (!fw->zero[zero] && !fw->zero_pp[zero])
        snprintf(why, cap, "%s does not run ZeRO stage %d", fw->title, zero);
    else if (!fw->recompute[PS_RECOMP_NONE] && !fw->recompute[PS_RECOMP_SELECTIVE] && !fw->recompute[PS_RECOMP_FULL])
        snprintf(why, cap, "%s runs no recomputation kind", fw->title);
    else
        return true;
    return false;
}

ps_status ps_search_baseline(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                             const ps_search_opts *o, int kind, ps_search_cand *out, int *found, char *why,
                             size_t why_cap)
{
    PS_CHECK_INPUT(kind >= 0 && kind < PS_BASE_EVEN, "baseline %d is not computed by rule", kind);
    base_acc acc = {.min_over = INFINITY};
    int64_t index = 0;
    ps_status st = PS_OK;
    *found = 0;
    /* the rules' own choices, not the fields the user fixed (ps_search_max_tp would return a fixed tp) */
    ps_search_opts ob = *o;
    ob.fixed = (ps_search_fixed){.zero = -1, .recompute = -1};
    o = &ob;
    const ps_framework_rules *fw = ps_framework_get((ps_framework)o->framework);
    char fw_why[200];
    if (fw && !fw_runs_rule(fw, kind, fw_why, sizeof fw_why)) {
        snprintf(why, why_cap, "%s", fw_why);
        return PS_OK;
    }
    if (kind == PS_BASE_DP || kind == PS_BASE_ZERO3) {
        st = try_layout(cp, m, c, o, 1, 1, kind == PS_BASE_ZERO3 ? 3 : 0, false, &index, &acc);
    } else {
        int node = (int)(c->groups[0].gpus_per_node > 0 ? c->groups[0].gpus_per_node : 1);
        int max_tp = ps_search_max_tp(o, c);
        /* products tp x pp in increasing order; the first one with a fitting plan wins */
        for (int64_t prod = 1; prod <= c->n_gpus && !acc.found && st == PS_OK; prod++) {
            if (c->n_gpus % prod) continue;
            for (int tp = 1; tp <= max_tp && tp <= node && st == PS_OK; tp++) {
                if (prod % tp || node % tp) continue;
                int64_t pp = prod / tp;
                if (pp > m->n_layers || pp > PS_SEARCH_MAX_PP) continue;
                st = try_layout(cp, m, c, o, tp, (int)pp, 0, true, &index, &acc);
            }
        }
    }
    if (st != PS_OK) {
        if (acc.found) {
            ps_plan_free(&acc.best.plan);
            ps_prediction_free(&acc.best.pred);
        }
        return st;
    }
    *found = acc.found;
    if (acc.found) {
        *out = acc.best;
        why[0] = '\0';
    } else if (isfinite(acc.min_over)) {
        snprintf(why, why_cap, "does not fit: its lightest plan needs %.1f GiB per GPU, GPUs have %.1f GiB",
                 acc.min_need / 1073741824.0, acc.cap / 1073741824.0);
    } else {
        snprintf(why, why_cap, "no plan of this kind divides the model, the GPUs and the batch");
    }
    return PS_OK;
}

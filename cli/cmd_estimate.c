/* `psearch estimate`: predict one plan given by flags or plan.json with the cost model the search uses, and print
 * it as a table or as the plan JSON of docs/design.md (plan fields + `predicted`). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_cost.h"
#include "ps_schedules.h"
#include "ps_search.h"

/* What estimate chose for the user, said with its output: table lines "note ...", JSON "notes". */
typedef struct {
    char text[2][320];
    int n;
} est_notes;

static void PS_PRINTF(2, 3) add_note(est_notes *nt, const char *fmt, ...)
{
    if (nt->n >= (int)(sizeof nt->text / sizeof nt->text[0])) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nt->text[nt->n++], sizeof nt->text[0], fmt, ap);
    va_end(ap);
}

static ps_status plan_from_flags(const ps_cli_opts *o, const ps_model *m, const ps_cluster *c, ps_plan *plan,
                                 est_notes *nt)
{
    int64_t tp = o->tp ? o->tp : 1, pp = o->pp ? o->pp : 1, cp = o->cp ? o->cp : 1, tcp = 0;
    if (tp > INT32_MAX || cp > INT32_MAX || pp > INT32_MAX || !ps_mul_i64(tp, cp, &tcp) || !ps_mul_i64(tcp, pp, &tcp))
        return PS_FAIL(PS_ERR_INPUT, "degrees are too large (tp %lld, cp %lld, pp %lld)", (long long)tp,
                       (long long)cp, (long long)pp);
    if (c->n_gpus % tcp != 0 && !o->dp) {
        if (cp > 1)
            return PS_FAIL(PS_ERR_INPUT, "tp %lld x cp %lld x pp %lld = %lld does not divide the %lld GPUs of %s; give "
                                         "--dp or other degrees", (long long)tp, (long long)cp, (long long)pp,
                           (long long)tcp, (long long)c->n_gpus, c->name);
        return PS_FAIL(PS_ERR_INPUT, "tp %lld x pp %lld = %lld does not divide the %lld GPUs of %s; give --dp or "
                                     "other degrees", (long long)tp, (long long)pp, (long long)(tp * pp),
                       (long long)c->n_gpus, c->name);
    }
    if (o->cp_comm && cp == 1)
        return PS_FAIL(PS_ERR_INPUT, "option --cp-comm %s: context parallelism is off (give --cp N, N > 1)",
                       o->cp_comm);
    int64_t dp = o->dp ? o->dp : c->n_gpus / tcp;
    int64_t mbs = o->mbs ? o->mbs : 1, gbs = o->gbs;
    if (!gbs && (!ps_mul_i64(mbs, dp, &gbs) || !ps_mul_i64(gbs, 4 * pp, &gbs)))
        return PS_FAIL(PS_ERR_INPUT, "the default global batch mbs %lld x dp %lld x 4 x pp %lld overflows; give --gbs",
                       (long long)mbs, (long long)dp, (long long)pp);
    const char *sched = o->schedule ? o->schedule : "1f1b";
    /* --vpp N > 1 alone means Megatron-LM's interleaved 1F1B: Megatron runs it whenever a virtual pipeline size is
     * set (get_forward_backward_func, megatron/core/pipeline_parallel/schedules.py, Megatron-LM d98e8a64), and plain
     * 1F1B has one chunk per device. */
    if (!o->schedule && o->vpp > 1) {
        sched = "interleaved";
        add_note(nt, "--vpp %lld without --schedule: interleaved 1F1B, as Megatron-LM runs a virtual pipeline",
                 (long long)o->vpp);
    }
    /* The kind's own chunks per device unless told otherwise (2 for interleaved and V), as the search takes them; an
     * unknown kind gets 1 here and is refused by name when the plan is costed. */
    int chunks = ps_sched_kind_default_chunks(ps_sched_kind_find(sched));
    int64_t vpp = o->vpp ? o->vpp : (chunks > 0 ? chunks : 1);
    ps_strategy s = {.tp = (int)tp, .dp = (int)dp, .zero = o->zero > 0 ? o->zero : 0, .sp = o->seq_parallel != 0,
                     .cp = (int)cp};
    if (o->cp_comm) PS_TRY(ps_cp_comm_parse(o->cp_comm, &s.cp_comm));
    if (o->ep > INT32_MAX || o->etp > INT32_MAX)
        return PS_FAIL(PS_ERR_INPUT, "expert degrees are too large (ep %lld, etp %lld)", (long long)o->ep,
                       (long long)o->etp);
    if ((o->ep > 1 || o->etp) && !ps_model_has_moe(m))
        return PS_FAIL(PS_ERR_INPUT, "options --ep / --etp: model %s has no mixture-of-experts layer", m->name);
    s.ep = (int)o->ep;
    s.etp = (int)o->etp;
    if (o->recompute) PS_TRY(ps_recompute_parse(o->recompute, &s.ckpt));
    if (o->tp_overlap && strcmp(o->tp_overlap, "auto") == 0)
        return PS_FAIL(PS_ERR_INPUT, "option --tp-overlap: estimate costs one plan: none, cross-pass, oases or te "
                                     "(auto is for the search)");
    if (o->tp_overlap) PS_TRY(ps_overlap_parse(o->tp_overlap, &s.overlap));
    s.dp_no_overlap = o->dp_overlap == 0;
    if (tp > INT32_MAX || dp > INT32_MAX || pp > INT32_MAX || vpp > 1024)
        return PS_FAIL(PS_ERR_INPUT, "degrees are too large (tp %lld, dp %lld, pp %lld, vpp %lld)", (long long)tp,
                       (long long)dp, (long long)pp, (long long)vpp);
    PS_TRY(ps_plan_uniform(m, gbs, mbs, (int)pp, (int)vpp, sched, &s, plan));
    /* Flags given for a framework's launch (--export) mean what the framework's flags mean: its recomputation covers
     * the transformer layers, never the embedding or the head (search/framework.c, recompute_blocks_only). */
    int fw = o->export_kind ? ps_framework_find(o->export_kind) : -1;
    const ps_framework_rules *r = fw > PS_FW_ANY ? ps_framework_get((ps_framework)fw) : NULL;
    for (int64_t i = 0; r && r->recompute_blocks_only && i < m->n_layers; i++)
        if (!ps_layer_has_attention(m->layers[i].kind)) plan->layer[i].ckpt = PS_RECOMP_NONE;
    return PS_OK;
}

static double gib(double b) { return b / (1024.0 * 1024 * 1024); }

bool ps_cli_blocks_uniform(const ps_model *m, const ps_plan *plan, const ps_strategy **ref, int64_t *block_n)
{
    *ref = NULL;
    *block_n = 0;
    for (int64_t i = 0; i < m->n_layers && !*ref; i++)
        if (ps_layer_has_attention(m->layers[i].kind)) *ref = &plan->layer[i];
    if (!*ref) return false;
    int64_t n = ps_framework_recompute_block_n(m, plan);
    if (n < 0) return false;
    for (int64_t i = 0; i < m->n_layers; i++) {
        ps_strategy s = plan->layer[i];
        if (!ps_layer_has_attention(m->layers[i].kind)) {
            if (s.ckpt != PS_RECOMP_NONE) return false;
            s.ckpt = (*ref)->ckpt;
        } else if (n > 0) {
            s.ckpt = (*ref)->ckpt; /* the block pattern: full or none, as ps_framework_recompute_block_n read it */
        }
        if (!ps_strategy_equal(&s, *ref)) return false;
    }
    *block_n = n;
    return true;
}

void ps_prediction_table(FILE *f, const ps_model *m, const ps_cluster *c, const ps_plan *plan,
                             const ps_prediction *r)
{
    const ps_strategy *s = &plan->layer[0], *blk = NULL;
    bool uni = ps_plan_is_uniform(plan, m->n_layers);
    int64_t block_n = 0;
    bool blocks_only = !uni && ps_cli_blocks_uniform(m, plan, &blk, &block_n);
    if (blocks_only) {
        s = blk;
        uni = true;
    }
    /* context parallelism only where there is some, so that every other plan reads as it always did */
    char cps[48] = "";
    if (ps_strategy_cp(s) > 1) snprintf(cps, sizeof cps, " x cp %d (%s)", s->cp, ps_cp_comm_name(s->cp_comm));
    char eps[64] = ""; /* the expert grid, for models with experts */
    if (ps_model_has_moe(m))
        snprintf(eps, sizeof eps, "; experts ep %d x etp %d x edp %lld", ps_strategy_ep(s), ps_strategy_etp(s),
                 (long long)(ps_strategy_width(s) / ((int64_t)ps_strategy_ep(s) * ps_strategy_etp(s))));
    char rc[160];
    if (block_n > 0)
        snprintf(rc, sizeof rc, "full on the first %lld transformer layers of every model chunk (block), none on the "
                 "rest", (long long)block_n);
    else
        snprintf(rc, sizeof rc, "%s%s", ps_recompute_name(s->ckpt),
                 blocks_only && s->ckpt != PS_RECOMP_NONE ? " (transformer layers; the others none)" : "");
    fprintf(f,
            "plan        tp %d%s x dp %d x pp %d%s, mbs %lld, gbs %lld (%lld micro-batches), schedule %s, vpp %d%s\n",
            s->tp, cps, s->dp, plan->pp, uni ? "" : " (per-layer strategies vary)", (long long)plan->mbs,
            (long long)plan->gbs, (long long)ps_plan_micro_batches(plan), plan->schedule, plan->vpp, eps);
    if (uni)
        fprintf(f, "            zero %d, recompute %s, sequence parallel %s, TP overlap %s, attention %s, DP "
                   "overlap %s\n", s->zero, rc, s->sp ? "on" : "off", ps_overlap_name(s->overlap),
                ps_attn_name(s->attn), s->dp_no_overlap ? "off" : "on");
    if (m->dtype == PS_DTYPE_FP8)
        fprintf(f, "dtype       fp8, Transformer Engine's recipe: FP8 GEMMs in the blocks' linear layers (E4M3 "
                   "forward, E5M2 gradients), BF16\n            attention, activations, weights and gradients, "
                   "FP32 master weights and Adam states, FP8 weight copies;\n            MFU against the FP8 peak\n");
    /* numbers to read: plain digits, and the rounding of a difference of equal sums (a bubble of 8e-17 s) as 0
     * (ps_fmt_num), and a bubble fraction of that size as 0.0%, not -0.0% */
    const double it = r->iter_time_s;
    char n[4][32];
    fprintf(f, "predicted   %s s per iteration, %s samples/s, %s tokens/s\n", ps_fmt_num(it, 0, n[0], sizeof n[0]),
            ps_fmt_num(r->samples_per_s, 0, n[1], sizeof n[1]), ps_fmt_num(r->tokens_per_s, 0, n[2], sizeof n[2]));
    fprintf(f, "            %.1f TFLOP/s per GPU (model FLOPs; %.1f executed, recompute included), MFU %.1f%%, "
               "bubble %.1f%%\n",
            r->tflops_per_gpu, r->hw_tflops_per_gpu, 100 * r->mfu,
            fabs(r->bubble_frac) <= 1e-9 ? 0.0 : 100 * r->bubble_frac);
    fprintf(f, "breakdown   compute %s s, exposed communication %s s, bubble %s s, of which recompute %s s\n",
            ps_fmt_num(r->compute_s, it, n[0], sizeof n[0]), ps_fmt_num(r->comm_exposed_s, it, n[1], sizeof n[1]),
            ps_fmt_num(r->bubble_s, it, n[2], sizeof n[2]), ps_fmt_num(r->recompute_s, it, n[3], sizeof n[3]));
    fprintf(f, "\n%5s %11s %11s %9s %9s %9s %9s %9s %10s %9s %9s\n", "stage", "layers", "GPUs", "fwd/mb", "bwd/mb",
            "p2p", "dp sync", "static", "act/mb", "in-flight", "peak");
    for (int i = 0; i < r->n_stages; i++) {
        const ps_stage_pred *sp = &r->stages[i];
        char lay[32], gp[32];
        snprintf(lay, sizeof lay, "%lld-%lld", (long long)plan->cuts[i], (long long)plan->cuts[i + 1] - 1);
        snprintf(gp, sizeof gp, "%lld-%lld", (long long)sp->first_gpu, (long long)(sp->first_gpu + sp->n_gpus - 1));
        fprintf(f, "%5d %11s %11s %8.2fms %8.2fms %8.2fms %8.2fms %7.2fGiB %8.3fGiB %9d %5.1f/%.0fGiB%s\n", i, lay, gp,
                1e3 * sp->fwd, 1e3 * (sp->bwd_b + sp->bwd_w), 1e3 * sp->p2p, 1e3 * sp->dp_sync_exposed,
                gib(sp->mem_static), gib(sp->mem_act_per_mb), sp->in_flight, gib(sp->mem_peak),
                gib(sp->mem_capacity), sp->mem_peak > sp->mem_capacity ? "  DOES NOT FIT" : "");
    }
    fprintf(f, "(peak = static (weights, gradients, optimizer) + activations of the in-flight micro-batches + "
               "transient buffers + reserve; times per micro-batch)\n");
}

/* Without --vocab-pad, the vocabulary padded as Megatron-LM pads it for the plan's TP (128 x TP: ps_cli_vocab_pad,
 * the search's padding with another TP): a multiple of 128 x the least common multiple of the TP degrees of the
 * layers that hold the vocabulary (one TP in a uniform plan). Said in a note when it changes the vocabulary. */
static ps_status pad_for_plan(const ps_cli_opts *o, const ps_cluster *c, const ps_plan *plan, ps_model *m,
                              est_notes *nt, int64_t *used)
{
    /* used: the padding unit the model ends with, from which an export's --make-vocab-size-divisible-by follows */
    *used = o->mopts.vocab_pad;
    if (o->mopts.vocab_pad) return PS_OK; /* padded while loading, as the user said */
    int64_t tp = 1, before = 0;
    for (int64_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].vocab > 0) {
            int64_t t = plan->layer[i].tp > 0 ? plan->layer[i].tp : 1;
            /* a TP beyond the cluster is refused by ps_plan_check, which names it: no padding for it */
            if (!ps_mul_i64(tp / ps_gcd64(tp, t), t, &tp) || tp > c->n_gpus) return PS_OK;
            if (!before) before = m->layers[i].vocab;
        }
    if (!before) return PS_OK;
    int64_t pad = ps_cli_vocab_pad(o, tp);
    PS_TRY(ps_model_pad_vocab(m, pad, m->name));
    *used = pad;
    int64_t after = 0;
    for (int64_t i = 0; i < m->n_layers && !after; i++) after = m->layers[i].vocab;
    if (after != before)
        add_note(nt, "vocabulary padded %lld -> %lld, a multiple of %d x tp %lld as Megatron-LM pads it "
                     "(--vocab-pad 1: none)",
                 (long long)before, (long long)after, PS_VOCAB_DIVISIBLE_BY, (long long)tp);
    return PS_OK;
}

/* --model and --cluster: the ones given, else the plan file's own (as psearch exec takes them), else the defaults */
static const char *input_spec(const char *given, const json_t *root, const char *key, const char *fallback)
{
    const char *v = root ? json_string_value(json_object_get(root, key)) : NULL;
    return given ? given : v && *v ? v : fallback;
}

ps_status ps_cmd_estimate(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    /* Runs on this process alone, but --cluster auto describes the MPI job it runs in (comm is MPI_COMM_NULL when
     * MPI was not started: any other cluster is read without it). */
    ps_cost_params cp;
    ps_model m;
    ps_cluster c;
    ps_plan plan;
    ps_prediction r;
    memset(&m, 0, sizeof m);
    memset(&c, 0, sizeof c);
    memset(&plan, 0, sizeof plan);
    memset(&r, 0, sizeof r);
    ps_costdb_model *db = NULL;
    json_t *root = NULL;
    est_notes nt = {.n = 0};
    int64_t vocab_pad = 0;
    if (o->plan) {
        if (o->tp || o->pp || o->dp || o->mbs || o->gbs || o->vpp || o->zero >= 0 || o->recompute || o->schedule ||
            o->seq_parallel || o->tp_overlap || o->cp || o->cp_comm || o->ep || o->etp)
            return PS_FAIL(PS_ERR_INPUT, "--plan %s: give the plan either as a file or as flags, not both", o->plan);
        PS_TRY(ps_json_load_file(o->plan, &root));
    }
    ps_cli_opts lo = *o;
    lo.model = input_spec(o->model, root, "model", PS_DEFAULT_MODEL);
    lo.cluster = input_spec(o->cluster, root, "cluster", PS_DEFAULT_CLUSTER);
    /* a plan file keeps the vocabulary padding it was planned with (the search pads for a node's TP, estimate for the
     * plan's): without --vocab-pad it is priced, and exported, with that vocabulary again */
    const json_t *jpad = root ? json_object_get(root, "vocab_pad") : NULL;
    json_int_t file_pad = json_is_integer(jpad) ? json_integer_value(jpad) : -1;
    if (!o->mopts.vocab_pad && file_pad >= 0 && file_pad <= (1 << 20)) {
        lo.mopts.vocab_pad = file_pad > 1 ? (int64_t)file_pad : 1;
        if (file_pad > 1)
            add_note(&nt, "vocabulary padded as the plan file was planned (vocab_pad %lld; --vocab-pad N for another)",
                     (long long)file_pad);
    }
    ps_status st;
    /* a CPU-only allocation describes no GPU to predict for */
    PS_TRY_GOTO(st, ps_cli_load_cluster(&lo, lo.cluster, comm, strcmp(lo.cluster, "auto") == 0, &c), done);
    /* padded as --vocab-pad asks, or for the plan's TP once the plan is known (pad_for_plan) */
    PS_TRY_GOTO(st, ps_cli_load_model(&lo, lo.model, &c, false, MPI_COMM_NULL, &m), done);
    PS_TRY_GOTO(st, ps_cli_cost_model(&lo, MPI_COMM_NULL, &c, &cp, &db), done);
    if (root) {
        PS_TRY_GOTO(st, ps_plan_from_json(root, o->plan, &m, &plan), done);
        /* --dp-overlap with a plan file reprices it for a framework that does (not) overlap */
        for (int64_t i = 0; o->dp_overlap >= 0 && i < m.n_layers; i++) plan.layer[i].dp_no_overlap = !o->dp_overlap;
    } else
        PS_TRY_GOTO(st, plan_from_flags(&lo, &m, &c, &plan, &nt), done);
    PS_TRY_GOTO(st, pad_for_plan(&lo, &c, &plan, &m, &nt, &vocab_pad), done);
    ps_attn attn = PS_ATTN_AUTO;
    if (o->attention && strcmp(o->attention, "search") == 0)
        PS_TRY_GOTO(st, PS_FAIL(PS_ERR_INPUT, "option --attention: estimate costs one plan: fused, unfused or auto "
                                              "(search is for the search)"), done);
    if (o->attention) PS_TRY_GOTO(st, ps_attn_parse(o->attention, &attn), done);
    ps_plan_resolve_attention(&plan, m.n_layers, &c, attn);
    PS_TRY_GOTO(st, ps_cost_plan(&cp, &m, &c, &plan, &r), done);
    /* the export first: a plan its framework cannot run is refused before any file is written */
    if (o->export_kind)
        PS_TRY_GOTO(st, ps_plan_export(out, o->export_kind, &m, &c, &plan, &r, &cp, vocab_pad), done);
    if (o->svg) {
        char *svg = NULL;
        size_t len = 0;
        st = ps_plan_svg(&plan, &r, &svg, &len);
        if (st == PS_OK) st = ps_write_file_atomic(o->svg, svg, len);
        free(svg);
        if (st != PS_OK) goto done;
    }
    /* the launch instead of the prediction (its notes quote the prediction) */
    if (o->export_kind) goto done;
    if (o->format == PS_FMT_JSON) {
        json_t *j = ps_prediction_json(&m, &c, &plan, &r, &cp), *na = json_array();
        for (int i = 0; i < nt.n; i++) json_array_append_new(na, json_string(nt.text[i]));
        if (j && nt.n) json_object_set_new(j, "notes", na);
        else json_decref(na);
        if (j) json_object_set_new(j, "vocab_pad", json_integer(vocab_pad > 1 ? vocab_pad : 0));
        PS_TRY_GOTO(st, ps_out_json(out, j), done);
    } else {
        fprintf(out->f, "# psearch %s estimate: %s on %s (%lld GPUs)\n", PS_VERSION, m.name, c.name,
                (long long)c.n_gpus);
        for (int i = 0; i < nt.n; i++) fprintf(out->f, "note        %s\n", nt.text[i]);
        ps_prediction_table(out->f, &m, &c, &plan, &r);
        ps_cli_costdb_note(out->f, &cp, &c);
    }
    if (!r.fits) {
        int worst = ps_prediction_worst_stage(&r);
        const ps_stage_pred *sp = &r.stages[worst];
        st = PS_FAIL(PS_ERR_INFEASIBLE,
                     "the plan does not fit: stage %d needs %.1f GiB per GPU (static %.1f, activations %.1f x %d "
                     "in flight, reserve %.1f) but its GPUs have %.1f GiB",
                     worst, gib(sp->mem_peak), gib(sp->mem_static), gib(sp->mem_act_per_mb), sp->in_flight,
                     gib(cp.reserve_bytes), gib(sp->mem_capacity));
    }
done:
    json_decref(root);
    ps_prediction_free(&r);
    ps_plan_free(&plan);
    ps_model_free(&m);
    ps_cluster_free(&c);
    ps_costdb_model_free(db);
    return st;
}

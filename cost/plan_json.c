/* plan.json: reading a plan (what `psearch --format json` and `psearch estimate --format json` write) and writing
 * one. The layout is docs/design.md's: batch and pipeline fields at the top, stages with their layer ranges and
 * per-layer strategies, and the summary tp/dp/zero/ckpt/sp when the strategy is uniform. */
#include <string.h>

#include "ps_cost.h"

/* A strategy field naming something unknown: the file, the field and the names it takes (the parser's own message
 * is dropped: it does not know the field). */
static ps_status bad_name(const ps_jloc *loc, const char *key, const char *known, const char *got)
{
    ps_error_clear();
    ps_jloc fl = ps_jloc_key(loc, key);
    return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be %s (got '%s')", loc->file, fl.path, known, got);
}

static ps_status read_strategy(const json_t *o, const ps_jloc *loc, ps_strategy *s)
{
    int64_t v;
    v = s->tp;
    PS_TRY(ps_json_int(o, loc, "tp", false, 1, 1 << 20, &v));
    s->tp = (int)v;
    v = s->dp;
    PS_TRY(ps_json_int(o, loc, "dp", false, 1, 1 << 24, &v));
    s->dp = (int)v;
    v = s->zero;
    PS_TRY(ps_json_int(o, loc, "zero", false, 0, 3, &v));
    s->zero = (int)v;
    char rc[16] = "";
    PS_TRY(ps_json_str(o, loc, "ckpt", false, rc, sizeof rc));
    if (rc[0] && ps_recompute_parse(rc, &s->ckpt) != PS_OK)
        return bad_name(loc, "ckpt", "none, selective, full or op", rc);
    PS_TRY(ps_json_bool(o, loc, "sp", false, &s->sp));
    char ov[16] = "";
    PS_TRY(ps_json_str(o, loc, "overlap", false, ov, sizeof ov));
    if (ov[0] && ps_overlap_parse(ov, &s->overlap) != PS_OK)
        return bad_name(loc, "overlap", "none, cross-pass, oases or te", ov);
    /* "dp_overlap": the data-parallel collectives overlapped as the frameworks do (docs/costmodel.md, "Data-parallel
     * overlap"). Absent: on, the default of every plan psearch makes. Plans written before the field existed were
     * priced with the sync overlapped with the last backward as a whole; they are priced with the bucketed overlap
     * now, which is what a run with the exported --overlap-grad-reduce does. */
    bool dpo = !s->dp_no_overlap;
    PS_TRY(ps_json_bool(o, loc, "dp_overlap", false, &dpo));
    s->dp_no_overlap = !dpo;
    /* absent: auto, the kernel the stage's GPUs have (plans written before the field existed were unfused; an
     * estimate of one on GPUs with fused kernels now prices them fused unless the file says "unfused") */
    char at[16] = "";
    PS_TRY(ps_json_str(o, loc, "attention", false, at, sizeof at));
    if (at[0] && ps_attn_parse(at, &s->attn) != PS_OK) return bad_name(loc, "attention", "fused, unfused or auto", at);
    /* context parallelism; absent (plans written before it existed): cp 1, ring */
    v = ps_strategy_cp(s);
    PS_TRY(ps_json_int(o, loc, "cp", false, 1, 1 << 20, &v));
    s->cp = (int)v;
    char cc[16] = "";
    PS_TRY(ps_json_str(o, loc, "cp_comm", false, cc, sizeof cc));
    if (cc[0] && ps_cp_comm_parse(cc, &s->cp_comm) != PS_OK)
        return bad_name(loc, "cp_comm", "ring, a2a or allgather", cc);
    /* expert parallelism; absent (plans written before it existed, or dense models): ep 1, etp = tp */
    v = ps_strategy_ep(s);
    PS_TRY(ps_json_int(o, loc, "ep", false, 1, 1 << 20, &v));
    s->ep = (int)v;
    v = s->etp;
    if (json_object_get(o, "etp")) PS_TRY(ps_json_int(o, loc, "etp", false, 1, 1 << 20, &v));
    s->etp = (int)v;
    return PS_OK;
}

ps_status ps_plan_from_json(const json_t *root, const char *file, const ps_model *m, ps_plan *out)
{
    memset(out, 0, sizeof *out);
    ps_jloc loc = ps_jloc_root(file);
    /* A plan file written by psearch carries its prediction and inputs too; they are read elsewhere or ignored. */
    static const char *const known[] = {"psearch_version", "model", "cluster", "gpus", "gbs", "mbs", "micro_batches",
                                        "pp", "vpp", "schedule", "tp", "dp", "zero", "ckpt", "sp", "overlap",
                                        "dp_overlap", "attention", "cp", "cp_comm", "ep", "etp", "stages", "predicted",
                                        "flops_convention",
                                        "cost_params", "note", "notes", /* estimate: what it chose for the user */
                                        /* the search's result document and a --costdb estimate add these */
                                        "top", "search", "objective", "baselines", "binding", "costdb",
                                        /* ... and a restricted search its restriction (--framework, fixed fields) */
                                        "framework", "fixed",
                                        /* the vocabulary padding unit it was planned with (0: none), for the CLI */
                                        "vocab_pad", NULL};
    PS_TRY(ps_json_known_keys(root, &loc, known));
    int64_t gbs = 0, mbs = 1, pp = 1, vpp = 1;
    PS_TRY(ps_json_int(root, &loc, "gbs", true, 1, INT32_MAX, &gbs));
    PS_TRY(ps_json_int(root, &loc, "mbs", true, 1, INT32_MAX, &mbs));
    PS_TRY(ps_json_int(root, &loc, "pp", true, 1, 1 << 20, &pp));
    PS_TRY(ps_json_int(root, &loc, "vpp", false, 1, 1024, &vpp));
    char sched[24] = "1f1b";
    PS_TRY(ps_json_str(root, &loc, "schedule", false, sched, sizeof sched));
    ps_strategy base = {.tp = 1, .dp = 1};
    PS_TRY(read_strategy(root, &loc, &base));

    json_t *stages = json_object_get(root, "stages");
    if (!stages) {
        /* Summary fields only: Megatron's even split. Without stages and without any degree the plan says nothing
         * about its strategy; tp 1 x dp 1 would then be blamed on the cluster's GPU count, not on the file. */
        if (!json_object_get(root, "tp") && !json_object_get(root, "dp") && !json_object_get(root, "cp"))
            return PS_FAIL(PS_ERR_INPUT, "%s: the plan has no 'stages' and no 'tp' or 'dp': give the stages with their "
                                         "layers and strategies (as psearch --format json writes them), or the "
                                         "uniform fields tp, dp (and pp, zero, ckpt, sp)", file);
        PS_TRY(ps_plan_uniform(m, gbs, mbs, (int)pp, (int)vpp, sched, &base, out));
        return PS_OK;
    }
    ps_jloc sl = ps_jloc_key(&loc, "stages");
    if (!json_is_array(stages))
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be an array", file, sl.path);
    int64_t S = pp * vpp;
    if ((int64_t)json_array_size(stages) != S)
        return PS_FAIL(PS_ERR_INPUT, "%s: '%s' has %zu entries; pp %lld x vpp %lld needs %lld", file, sl.path,
                       json_array_size(stages), (long long)pp, (long long)vpp, (long long)S);
    PS_TRY(ps_plan_alloc(m, gbs, mbs, (int)pp, (int)vpp, sched, &base, out));
    ps_status st = PS_OK;
    for (int64_t s = 0; s < S && st == PS_OK; s++) {
        json_t *so = json_array_get(stages, (size_t)s);
        ps_jloc il = ps_jloc_idx(&sl, (size_t)s);
        if (!json_is_object(so)) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: '%s' must be an object", file, il.path);
            break;
        }
        json_t *lr = json_object_get(so, "layers");
        ps_jloc ll = ps_jloc_key(&il, "layers");
        if (!json_is_array(lr) || json_array_size(lr) != 2 || !json_is_integer(json_array_get(lr, 0)) ||
            !json_is_integer(json_array_get(lr, 1))) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: '%s' must be [first, end) as two integers", file, ll.path);
            break;
        }
        int64_t a = json_integer_value(json_array_get(lr, 0)), b = json_integer_value(json_array_get(lr, 1));
        int64_t expect = s == 0 ? 0 : out->cuts[s];
        if (a != expect || b <= a || b > m->n_layers) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: '%s' = [%lld, %lld): stages must be contiguous, non-empty and within the "
                                       "%lld layers of %s (expected first = %lld)", file, ll.path, (long long)a,
                         (long long)b, (long long)m->n_layers, m->name, (long long)expect);
            break;
        }
        out->cuts[s + 1] = b;
        json_t *strs = json_object_get(so, "strategies");
        if (!strs) continue;
        ps_jloc tl = ps_jloc_key(&il, "strategies");
        if (!json_is_array(strs)) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: '%s' must be an array", file, tl.path);
            break;
        }
        if (json_array_size(strs) == 0) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: '%s' is empty: list the stage's layer ranges with their strategies, or "
                                       "leave the field out to give every layer the plan's summary strategy", file,
                         tl.path);
            break;
        }
        /* The ranges tile the stage in order: each starts where the one before ended (an overlap would give a layer
         * two strategies, a gap none). */
        int64_t next = a;
        for (size_t k = 0; k < json_array_size(strs) && st == PS_OK; k++) {
            json_t *g = json_array_get(strs, k);
            ps_jloc gl = ps_jloc_idx(&tl, k);
            json_t *glr = json_is_object(g) ? json_object_get(g, "layers") : NULL;
            if (!json_is_array(glr) || json_array_size(glr) != 2) {
                st = PS_FAIL(PS_ERR_INPUT, "%s: '%s.layers' must be [first, end)", file, gl.path);
                break;
            }
            int64_t ga = json_integer_value(json_array_get(glr, 0)), gb = json_integer_value(json_array_get(glr, 1));
            if (!json_is_integer(json_array_get(glr, 0)) || !json_is_integer(json_array_get(glr, 1))) {
                st = PS_FAIL(PS_ERR_INPUT, "%s: '%s.layers' must be [first, end) as two integers", file, gl.path);
                break;
            }
            if (ga < a || gb > b || gb <= ga) {
                st = PS_FAIL(PS_ERR_INPUT, "%s: '%s.layers' = [%lld, %lld) is not inside the stage's [%lld, %lld)",
                             file, gl.path, (long long)ga, (long long)gb, (long long)a, (long long)b);
                break;
            }
            if (ga != next) {
                st = PS_FAIL(PS_ERR_INPUT, "%s: '%s.layers' = [%lld, %lld) %s: the ranges of a stage must follow each "
                                           "other from its first layer (%lld expected)", file, gl.path,
                             (long long)ga, (long long)gb,
                             ga < next ? "overlaps the range before it" : "leaves a gap after the range before it",
                             (long long)next);
                break;
            }
            next = gb;
            ps_strategy gs = base;
            st = read_strategy(g, &gl, &gs);
            for (int64_t i = ga; i < gb && st == PS_OK; i++) out->layer[i] = gs;
        }
        if (st == PS_OK && next != b)
            st = PS_FAIL(PS_ERR_INPUT, "%s: '%s' covers layers [%lld, %lld) of the stage's [%lld, %lld): layers %lld.. "
                                       "have no strategy", file, tl.path, (long long)a, (long long)next, (long long)a,
                         (long long)b, (long long)next);
    }
    if (st == PS_OK && out->cuts[S] != m->n_layers)
        st = PS_FAIL(PS_ERR_INPUT, "%s: the stages end at layer %lld; %s has %lld layers", file,
                     (long long)out->cuts[S], m->name, (long long)m->n_layers);
    if (st != PS_OK) ps_plan_free(out);
    return st;
}
/* The fields of one strategy, as read_strategy reads them. */
static void put_strategy(json_t *j, const ps_strategy *s)
{
    json_object_set_new(j, "tp", json_integer(s->tp));
    json_object_set_new(j, "dp", json_integer(s->dp));
    json_object_set_new(j, "zero", json_integer(s->zero));
    json_object_set_new(j, "ckpt", json_string(ps_recompute_name(s->ckpt)));
    json_object_set_new(j, "sp", json_boolean(s->sp));
    json_object_set_new(j, "overlap", json_string(ps_overlap_name(s->overlap)));
    json_object_set_new(j, "attention", json_string(ps_attn_name(s->attn)));
    json_object_set_new(j, "dp_overlap", json_boolean(!s->dp_no_overlap));
    json_object_set_new(j, "cp", json_integer(ps_strategy_cp(s)));
    json_object_set_new(j, "cp_comm", json_string(ps_cp_comm_name(ps_strategy_cp(s) > 1 ? s->cp_comm : PS_CP_RING)));
    json_object_set_new(j, "ep", json_integer(ps_strategy_ep(s)));
    json_object_set_new(j, "etp", json_integer(ps_strategy_etp(s)));
}


json_t *ps_plan_to_json(const ps_plan *p, const ps_model *m)
{
    json_t *j = json_object();
    json_object_set_new(j, "gbs", json_integer(p->gbs));
    json_object_set_new(j, "mbs", json_integer(p->mbs));
    json_object_set_new(j, "micro_batches", json_integer(ps_plan_micro_batches(p)));
    json_object_set_new(j, "pp", json_integer(p->pp));
    json_object_set_new(j, "vpp", json_integer(p->vpp));
    json_object_set_new(j, "schedule", json_string(p->schedule));
    if (ps_plan_is_uniform(p, m->n_layers)) {
        put_strategy(j, &p->layer[0]);
    }
    json_t *stages = json_array();
    int64_t S = (int64_t)p->pp * p->vpp;
    for (int64_t s = 0; s < S; s++) {
        json_t *so = json_object();
        json_object_set_new(so, "layers", json_pack("[II]", (json_int_t)p->cuts[s], (json_int_t)p->cuts[s + 1]));
        json_t *strs = json_array();
        /* runs of identical strategies */
        for (int64_t i = p->cuts[s]; i < p->cuts[s + 1];) {
            int64_t k = i + 1;
            const ps_strategy *a = &p->layer[i];
            while (k < p->cuts[s + 1] && ps_strategy_equal(&p->layer[k], a)) k++;
            json_t *g = json_object();
            json_object_set_new(g, "layers", json_pack("[II]", (json_int_t)i, (json_int_t)k));
            put_strategy(g, a);
            json_array_append_new(strs, g);
            i = k;
        }
        json_object_set_new(so, "strategies", strs);
        json_array_append_new(stages, so);
    }
    json_object_set_new(j, "stages", stages);
    return j;
}

static double gib(double b) { return b / (1024.0 * 1024 * 1024); }

json_t *ps_prediction_json(const ps_model *m, const ps_cluster *c, const ps_plan *plan, const ps_prediction *r,
                           const ps_cost_params *cp)
{
    json_t *j = json_object();
    json_object_set_new(j, "psearch_version", json_string(PS_VERSION));
    json_object_set_new(j, "model", json_string(m->name));
    json_object_set_new(j, "cluster", json_string(c->name));
    json_object_set_new(j, "gpus", json_integer(c->n_gpus));
    json_t *pj = ps_plan_to_json(plan, m);
    json_object_update(j, pj);
    json_decref(pj);
    /* the stages gain their devices */
    json_t *stages = json_object_get(j, "stages");
    for (int s = 0; s < r->n_stages; s++) {
        json_t *so = json_array_get(stages, (size_t)s);
        json_object_set_new(so, "devices", json_pack("[II]", (json_int_t)r->stages[s].first_gpu,
                                                     (json_int_t)(r->stages[s].first_gpu + r->stages[s].n_gpus)));
    }
    json_t *pr = json_object();
    json_object_set_new(pr, "iter_time_s", json_real(r->iter_time_s));
    json_object_set_new(pr, "samples_per_s", json_real(r->samples_per_s));
    json_object_set_new(pr, "tokens_per_s", json_real(r->tokens_per_s));
    json_object_set_new(pr, "tflops_per_gpu", json_real(r->tflops_per_gpu));
    json_object_set_new(pr, "hw_tflops_per_gpu", json_real(r->hw_tflops_per_gpu));
    json_object_set_new(pr, "mfu", json_real(r->mfu));
    json_object_set_new(pr, "bubble_frac", json_real(r->bubble_frac));
    json_object_set_new(pr, "fits", json_boolean(r->fits));
    json_t *mem = json_array(), *cap = json_array(), *st = json_array();
    for (int s = 0; s < r->n_stages; s++) {
        const ps_stage_pred *sp = &r->stages[s];
        json_array_append_new(mem, json_real(gib(sp->mem_peak)));
        json_array_append_new(cap, json_real(gib(sp->mem_capacity)));
        json_t *so = json_object();
        json_object_set_new(so, "fwd_s", json_real(sp->fwd));
        json_object_set_new(so, "bwd_b_s", json_real(sp->bwd_b));
        json_object_set_new(so, "bwd_w_s", json_real(sp->bwd_w));
        json_object_set_new(so, "p2p_s", json_real(sp->p2p));
        json_object_set_new(so, "dp_sync_exposed_s", json_real(sp->dp_sync_exposed));
        json_object_set_new(so, "mem_static_gib", json_real(gib(sp->mem_static)));
        json_object_set_new(so, "mem_act_per_mb_gib", json_real(gib(sp->mem_act_per_mb)));
        json_object_set_new(so, "in_flight", json_integer(sp->in_flight));
        json_object_set_new(so, "mem_temp_gib", json_real(gib(sp->mem_temp)));
        json_array_append_new(st, so);
    }
    json_object_set_new(pr, "peak_mem_gib", mem);
    json_object_set_new(pr, "mem_capacity_gib", cap);
    json_object_set_new(pr, "reserve_gib", json_real(gib(cp->reserve_bytes)));
    json_t *bd = json_object();
    json_object_set_new(bd, "compute_s", json_real(r->compute_s));
    json_object_set_new(bd, "comm_exposed_s", json_real(r->comm_exposed_s));
    json_object_set_new(bd, "bubble_s", json_real(r->bubble_s));
    json_object_set_new(bd, "recompute_s", json_real(r->recompute_s));
    json_object_set_new(pr, "breakdown", bd);
    json_object_set_new(pr, "stages", st);
    json_object_set_new(j, "predicted", pr);
    json_object_set_new(j, "flops_convention",
                        json_string("tflops_per_gpu and mfu count model FLOPs (forward + backward = 3 x forward, "
                                    "no recompute, attention s^2 terms included); hw_tflops_per_gpu counts hardware "
                                    "FLOPs including recomputation; peaks are dense tensor peaks of the dtype"));
    json_t *params = json_object();
    double v;
    const char *name;
    for (int i = 0; (name = ps_cost_param_name(i, &v, NULL, NULL, cp)) != NULL; i++)
        json_object_set_new(params, name, json_real(v));
    json_object_set_new(j, "cost_params", params);
    if (cp->db) json_object_set_new(j, "costdb", json_string(ps_costdb_model_path(cp->db)));
    return j;
}

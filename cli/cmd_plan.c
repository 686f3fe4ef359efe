/* The default command: search the best plans for a model on a cluster. Every rank searches its share of the
 * candidates (search/ takes rank and size), sends its best plans to rank 0 as JSON, and rank 0 re-costs them with the
 * same cost model and keeps the top k in the search's total order, so the answer is the same for any number of ranks
 * and threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_json.h"
#include "ps_mpi.h"
#include "ps_plan_json.h"
#include "ps_search.h"

/* This rank's results as one JSON text: its counters, the binding constraint, and its best plans. */
static char *rank_json(const ps_search_result *r, const ps_model *m)
{
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:f, s:s}", "candidates", (json_int_t)r->candidates, "evaluated",
                          (json_int_t)r->evaluated, "feasible", (json_int_t)r->feasible, "pruned",
                          (json_int_t)r->pruned, "dp_cells", r->dp_cells, "binding", r->binding);
    /* JSON has no infinity: no shortfall seen is no field */
    if (isfinite(r->min_over)) json_object_set_new(j, "min_over", json_real(r->min_over));
    json_t *a = json_array();
    for (int i = 0; i < r->n_top; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "index", json_integer(r->top[i].index));
        json_object_set_new(e, "plan", ps_plan_to_json(&r->top[i].plan, m));
        json_array_append_new(a, e);
    }
    json_object_set_new(j, "plans", a);
    if (r->have_base[PS_BASE_EVEN])
        json_object_set_new(j, "even", json_pack("{s:I, s:o}", "index", (json_int_t)r->base[PS_BASE_EVEN].index,
                                                 "plan", ps_plan_to_json(&r->base[PS_BASE_EVEN].plan, m)));
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

/* Re-cost a plan sent by a rank (rank 0 trusts no number it did not compute itself). */
static ps_status recost(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, json_t *e,
                        ps_search_cand *cd)
{
    cd->index = json_integer_value(json_object_get(e, "index"));
    PS_TRY(ps_plan_from_json(json_object_get(e, "plan"), "search results", m, &cd->plan));
    ps_status st = ps_cost_plan(cp, m, c, &cd->plan, &cd->pred);
    if (st != PS_OK) ps_plan_free(&cd->plan);
    return st;
}

static ps_status collect(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                         char **texts, int n, const ps_search_opts *so, ps_search_result *all)
{
    int top_k = so->top_k, objective = so->objective;
    memset(all, 0, sizeof *all);
    all->min_over = INFINITY;
    /* A rank whose share failed sent its error instead of results: the lowest such rank's message is the answer. */
    for (int r = 0; r < n; r++) {
        json_t *j = NULL;
        PS_TRY(ps_json_load_buffer(texts[r], strlen(texts[r]), "search results", &j));
        json_t *err = json_object_get(j, "error");
        if (err) {
            ps_status est = (ps_status)json_integer_value(err);
            ps_status st = PS_FAIL(est > PS_OK && est <= PS_ERR_SYSTEM ? est : PS_ERR_SYSTEM, "rank %d: %s", r,
                                   json_string_value(json_object_get(j, "message")));
            json_decref(j);
            return st;
        }
        json_decref(j);
    }
    all->top = ps_calloc((size_t)n * (size_t)top_k + 1, sizeof *all->top);
    if (!all->top) return PS_ERR_SYSTEM;
    ps_status st = PS_OK;
    for (int r = 0; r < n && st == PS_OK; r++) {
        json_t *j = NULL;
        st = ps_json_load_buffer(texts[r], strlen(texts[r]), "search results", &j);
        if (st != PS_OK) break;
        all->candidates += json_integer_value(json_object_get(j, "candidates"));
        all->evaluated += json_integer_value(json_object_get(j, "evaluated"));
        all->feasible += json_integer_value(json_object_get(j, "feasible"));
        all->pruned += json_integer_value(json_object_get(j, "pruned"));
        all->dp_cells += json_number_value(json_object_get(j, "dp_cells"));
        /* the binding of the plan closest to fitting, whichever rank tried it: the same for any rank count */
        json_t *mo = json_object_get(j, "min_over");
        if (mo && json_number_value(mo) < all->min_over) {
            all->min_over = json_number_value(mo);
            ps_strlcpy(all->binding, json_string_value(json_object_get(j, "binding")), sizeof all->binding);
        }
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(j, "plans"), i, e)
        {
            st = recost(cp, m, c, e, &all->top[all->n_top]);
            if (st != PS_OK) break;
            all->n_top++;
        }
        json_t *ev = json_object_get(j, "even");
        if (st == PS_OK && ev) {
            ps_search_cand cd;
            st = recost(cp, m, c, ev, &cd);
            if (st == PS_OK) {
                ps_search_cand *eb = &all->base[PS_BASE_EVEN];
                if (!all->have_base[PS_BASE_EVEN] || ps_search_cand_order(&cd, eb, objective) < 0) {
                    if (all->have_base[PS_BASE_EVEN]) {
                        ps_plan_free(&eb->plan);
                        ps_prediction_free(&eb->pred);
                    }
                    *eb = cd;
                    all->have_base[PS_BASE_EVEN] = 1;
                } else {
                    ps_plan_free(&cd.plan);
                    ps_prediction_free(&cd.pred);
                }
            }
        }
        json_decref(j);
    }
    if (st != PS_OK) return st;
    ps_search_explain(all, so, c); /* nothing fits and no shortfall was seen: say why, from the merged counts */
    /* the search's total order, then keep k */
    for (int i = 1; i < all->n_top; i++)
        for (int k = i; k > 0 && ps_search_cand_order(&all->top[k], &all->top[k - 1], objective) < 0; k--) {
            ps_search_cand t = all->top[k];
            all->top[k] = all->top[k - 1];
            all->top[k - 1] = t;
        }
    while (all->n_top > top_k) {
        all->n_top--;
        ps_plan_free(&all->top[all->n_top].plan);
        ps_prediction_free(&all->top[all->n_top].pred);
    }
    return PS_OK;
}

/* "pp 4 x tp 4 x dp 2, ZeRO 2, recompute none, SP, v-zb, mbs 1 x 128" (+ "per-layer" when layers differ). */
static void plan_summary(char *buf, size_t cap, const ps_plan *p, int64_t n_layers)
{
    const ps_strategy *s = &p->layer[0];
    snprintf(buf, cap, "pp %d x tp %d x dp %d, ZeRO %d, recompute %s%s, %s, mbs %lld x %lld%s", p->pp, s->tp, s->dp,
             s->zero, ps_recompute_name(s->ckpt), s->sp && s->tp > 1 ? ", SP" : "", p->schedule, (long long)p->mbs,
             (long long)ps_plan_micro_batches(p), ps_plan_is_uniform(p, n_layers) ? "" : ", per-layer");
}

/* How much better the winner is than a baseline under the objective: throughput ratio, or memory ratio. */
static double gain(const ps_search_cand *best, const ps_search_cand *base, bool memory)
{
    if (memory) return ps_prediction_peak(&base->pred) / ps_prediction_peak(&best->pred);
    return best->pred.samples_per_s / base->pred.samples_per_s;
}

static json_t *baselines_json(const ps_search_result *r, const ps_model *m, bool memory)
{
    json_t *a = json_array();
    for (int k = 0; k < PS_BASE_COUNT; k++) {
        json_t *b = json_pack("{s:s, s:s, s:b}", "name", ps_baseline_name(k), "description", ps_baseline_desc(k),
                              "found", r->have_base[k]);
        if (r->have_base[k]) {
            const ps_search_cand *c = &r->base[k];
            char sum[256];
            plan_summary(sum, sizeof sum, &c->plan, m->n_layers);
            json_object_set_new(b, "plan", json_string(sum));
            json_object_set_new(b, "samples_per_s", json_real(c->pred.samples_per_s));
            json_object_set_new(b, "mfu", json_real(c->pred.mfu));
            json_object_set_new(b, "peak_mem_gib", json_real(ps_prediction_peak(&c->pred) / 1073741824.0));
            if (r->n_top) json_object_set_new(b, "gain", json_real(gain(&r->top[0], c, memory)));
        } else {
            json_object_set_new(b, "reason", json_string(r->base_why[k]));
        }
        json_array_append_new(a, b);
    }
    return a;
}

static void baselines_table(FILE *f, const ps_search_result *r, const ps_model *m, bool memory)
{
    fprintf(f, "\n# baselines (same cost model); gain = %s\n%-11s %12s %7s %7s %7s  %s\n",
            memory ? "baseline peak memory / psearch peak memory" : "psearch samples/s / baseline samples/s",
            "baseline", "samples/s", "MFU", "peak", "gain", "plan");
    for (int k = 0; k < PS_BASE_COUNT; k++) {
        if (!r->have_base[k]) {
            fprintf(f, "%-11s %12s %7s %7s %7s  %s\n", ps_baseline_name(k), "-", "-", "-", "-", r->base_why[k]);
            continue;
        }
        const ps_search_cand *c = &r->base[k];
        char sum[256];
        plan_summary(sum, sizeof sum, &c->plan, m->n_layers);
        fprintf(f, "%-11s %12.4g %6.1f%% %6.1fG %6.2fx  %s\n", ps_baseline_name(k), c->pred.samples_per_s,
                100 * c->pred.mfu, ps_prediction_peak(&c->pred) / 1073741824.0, r->n_top ? gain(&r->top[0], c, memory) : 0,
                sum);
    }
}

static ps_status print_result(const ps_cli_opts *o, ps_out *out, const ps_cost_params *cp, const ps_model *m,
                         const ps_cluster *c, const ps_search_result *r, int nranks, double seconds)
{
    bool memory = o->objective && strcmp(o->objective, "memory") == 0;
    if (o->format == PS_FMT_JSON) {
        json_t *j = r->n_top ? ps_prediction_json(m, c, &r->top[0].plan, &r->top[0].pred, cp) : json_object();
        json_t *top = json_array();
        for (int i = 0; i < r->n_top; i++)
            json_array_append_new(top, ps_prediction_json(m, c, &r->top[i].plan, &r->top[i].pred, cp));
        json_object_set_new(j, "top", top);
        json_object_set_new(j, "search", json_pack("{s:I, s:I, s:I, s:I, s:f, s:i, s:f}", "candidates",
                                                   (json_int_t)r->candidates, "evaluated", (json_int_t)r->evaluated,
                                                   "feasible", (json_int_t)r->feasible, "pruned",
                                                   (json_int_t)r->pruned, "dp_cells", r->dp_cells, "ranks", nranks,
                                                   "wall_s", seconds));
        if (!r->n_top) json_object_set_new(j, "binding", json_string(r->binding));
        json_object_set_new(j, "objective", json_string(memory ? "memory" : "throughput"));
        json_object_set_new(j, "baselines", baselines_json(r, m, memory));
        return ps_out_json(out, j);
    }
    fprintf(out->f, "# psearch %s: %s on %s (%lld GPUs); %lld candidates, %lld plans costed, %lld fit, %lld pruned "
                    "by bounds; %d rank(s), %.2f s\n",
            PS_VERSION, m->name, c->name, (long long)c->n_gpus, (long long)r->candidates, (long long)r->evaluated,
            (long long)r->feasible, (long long)r->pruned, nranks, seconds);
    if (!r->n_top) return PS_OK;
    fprintf(out->f, "# best plan (objective: %s)\n", memory ? "lowest peak memory per GPU" : "highest samples/s");
    ps_prediction_table(out->f, m, c, &r->top[0].plan, &r->top[0].pred);
    ps_cli_costdb_note(out->f, cp, c);
    if (r->n_top > 1) {
        fprintf(out->f, "\n# top %d\n%4s %12s %8s %6s %4s %4s %4s %5s %5s %5s %-12s %9s %6s\n", r->n_top, "rank",
                "samples/s", "MFU", "bubble", "pp", "tp", "dp", "zero", "mbs", "m", "schedule", "ckpt", "peak");
        for (int i = 0; i < r->n_top; i++) {
            const ps_plan *p = &r->top[i].plan;
            const ps_prediction *q = &r->top[i].pred;
            double peak = ps_prediction_peak(q);
            bool uni = ps_plan_is_uniform(p, m->n_layers);
            fprintf(out->f, "%4d %12.4g %7.1f%% %5.1f%% %4d %4d %4d %5d %5lld %5lld %-12s %9s %5.1fG%s\n", i + 1,
                    q->samples_per_s, 100 * q->mfu, 100 * q->bubble_frac, p->pp, p->layer[0].tp, p->layer[0].dp,
                    p->layer[0].zero, (long long)p->mbs, (long long)ps_plan_micro_batches(p), p->schedule,
                    ps_recompute_name(p->layer[0].ckpt), peak / 1073741824.0, uni ? "" : "  (per-layer)");
        }
    }
    baselines_table(out->f, r, m, memory);
    return PS_OK;
}

ps_status ps_cli_search(const ps_cli_opts *o, MPI_Comm comm, const ps_cost_params *cp, const ps_model *m,
                        const ps_cluster *c, ps_search_result *all, double *seconds)
{
    memset(all, 0, sizeof *all);
    int rank = 0, nranks = 1;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &nranks));
    ps_search_result mine;
    ps_cli_search_opts setup;
    double t0 = MPI_Wtime();
    ps_status st = ps_cli_search_setup(o, c, &setup);
    ps_search_opts so = setup.so; /* its schedule list still points into setup, which outlives the search */
    so.rank = rank;
    so.nranks = nranks;
    if (st == PS_OK) st = ps_search_run(cp, m, c, &so, &mine);
    char *txt = NULL;
    if (st == PS_OK) {
        txt = rank_json(&mine, m);
        ps_search_result_free(&mine);
        if (!txt) st = PS_FAIL(PS_ERR_SYSTEM, "out of memory serializing search results");
    }
    /* A rank whose share failed (memory, a cost-model error) still takes part in the gather, sending its error, so
     * no rank waits for it and rank 0 reports the real cause (collect). */
    static const char oom[] = "{\"error\": 3, \"message\": \"out of memory reporting an error\"}";
    if (st != PS_OK) {
        json_t *e = json_pack("{s:i, s:s}", "error", (int)st, "message", ps_error_message());
        txt = e ? json_dumps(e, JSON_COMPACT) : NULL;
        json_decref(e);
        ps_error_clear();
        st = PS_OK;
    }
    const char *send = txt ? txt : oom;
    char **texts = NULL;
    int nt = 0;
    st = ps_mpi_gather_strings(comm, 0, send, &texts, &nt);
    free(txt);
    if (st != PS_OK) return st;
    if (rank == 0) {
        st = collect(cp, m, c, texts, nt, &so, all);
        ps_mpi_strings_free(texts, nt);
        /* The rule-based baselines are a few hundred plans: rank 0 costs them while the others wait. */
        for (int k = 0; k < PS_BASE_EVEN && st == PS_OK; k++)
            st = ps_search_baseline(cp, m, c, &so, k, &all->base[k], &all->have_base[k], all->base_why[k],
                                    sizeof all->base_why[k]);
        if (st == PS_OK && !all->have_base[PS_BASE_EVEN])
            snprintf(all->base_why[PS_BASE_EVEN], sizeof all->base_why[PS_BASE_EVEN],
                     "no even split of the layers fits");
    }
    *seconds = MPI_Wtime() - t0;
    return st;
}

ps_status ps_cmd_plan(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    for (int i = 0; i < o->n_cost_params; i++) PS_TRY(ps_cost_params_set(&cp, o->cost_params[i]));
    int rank = 0, nranks = 1;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &nranks));
    ps_model m;
    ps_cluster c;
    PS_TRY(ps_cli_load_inputs(o, comm, &m, &c));
    ps_search_result all;
    memset(&all, 0, sizeof all);
    double secs = 0;
    ps_costdb_model *db = NULL;
    ps_status st = ps_cli_costdb_attach(o, &c, &cp, &db);
    if (st == PS_OK) st = ps_cli_search(o, comm, &cp, &m, &c, &all, &secs);
    if (st == PS_OK && rank == 0 && all.n_top && o->svg) {
        char *svg = NULL;
        size_t len = 0;
        st = ps_plan_svg(&all.top[0].plan, &all.top[0].pred, &svg, &len);
        if (st == PS_OK) st = ps_write_file_atomic(o->svg, svg, len);
        free(svg);
    }
    if (st == PS_OK && rank == 0 && all.n_top && o->export_kind) {
        st = ps_plan_export(out, o->export_kind, &m, &all.top[0].plan);
    } else if (st == PS_OK && rank == 0) {
        st = print_result(o, out, &cp, &m, &c, &all, nranks, secs);
        if (st == PS_OK && all.n_top == 0)
            st = PS_FAIL(PS_ERR_INFEASIBLE, "no feasible plan for %s on %s: %s", m.name, c.name, all.binding);
    }
    ps_search_result_free(&all);
    ps_model_free(&m);
    ps_cluster_free(&c);
    ps_costdb_model_free(db);
    return st;
}

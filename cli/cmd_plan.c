/* The default command: search the best plans for a model on a cluster. The ranks share the search (mpi/search.c:
 * work units handed out through an MPI window, pruning floors shared, a deterministic top-k reduction), so the answer
 * is the same for any number of ranks and threads; rank 0 adds the baselines and prints. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_comm.h"
#include "ps_mpi.h"
#include "ps_search.h"

/* "pp 4 x tp 4 x dp 2, ZeRO 2, recompute none, SP, v-zb, mbs 1 x 128" (+ "per-layer" when layers differ). A plan of
 * one strategy for the transformer layers, the others without recomputation, is one strategy: the transformer
 * layers' (ps_cli_blocks_uniform; "recompute block 2" for Megatron-LM's block pattern). */
static void plan_summary(char *buf, size_t cap, const ps_plan *p, const ps_model *m)
{
    const ps_strategy *s = &p->layer[0];
    int64_t block_n = 0;
    bool uni = ps_plan_is_uniform(p, m->n_layers);
    if (!uni) uni = ps_cli_blocks_uniform(m, p, &s, &block_n);
    if (!uni) s = &p->layer[0];
    char rc[32];
    if (block_n > 0)
        snprintf(rc, sizeof rc, "block %lld", (long long)block_n);
    else
        snprintf(rc, sizeof rc, "%s", ps_recompute_name(s->ckpt));
    char cps[40] = ""; /* only where there is context parallelism, so other plans read as they always did */
    if (ps_strategy_cp(s) > 1) snprintf(cps, sizeof cps, " x cp %d (%s)", s->cp, ps_cp_comm_name(s->cp_comm));
    snprintf(buf, cap, "pp %d x tp %d%s x dp %d, ZeRO %d, recompute %s%s%s%s, %s, mbs %lld x %lld%s", p->pp, s->tp,
             cps, s->dp, s->zero, rc, s->sp && s->tp > 1 ? ", SP" : "",
             s->overlap != PS_OVERLAP_NONE ? ", TP overlap " : "",
             s->overlap != PS_OVERLAP_NONE ? ps_overlap_name(s->overlap) : "", p->schedule, (long long)p->mbs,
             (long long)ps_plan_micro_batches(p), uni ? "" : ", per-layer");
}

static json_t *baselines_json(const ps_search_result *r, const ps_model *m, int objective)
{
    json_t *a = json_array();
    for (int k = 0; k < PS_BASE_COUNT; k++) {
        json_t *b = json_pack("{s:s, s:s, s:b}", "name", ps_baseline_name(k), "description", ps_baseline_desc(k),
                              "found", r->have_base[k]);
        if (r->have_base[k]) {
            const ps_search_cand *c = &r->base[k];
            char sum[256];
            plan_summary(sum, sizeof sum, &c->plan, m);
            json_object_set_new(b, "plan", json_string(sum));
            json_object_set_new(b, "samples_per_s", json_real(c->pred.samples_per_s));
            json_object_set_new(b, "mfu", json_real(c->pred.mfu));
            json_object_set_new(b, "peak_mem_gib", json_real(ps_prediction_peak(&c->pred) / 1073741824.0));
            if (r->n_top) json_object_set_new(b, "gain", json_real(ps_search_gain(&r->top[0], c, objective)));
        } else {
            json_object_set_new(b, "reason", json_string(r->base_why[k]));
        }
        json_array_append_new(a, b);
    }
    return a;
}

static void baselines_table(FILE *f, const ps_search_result *r, const ps_model *m, int objective)
{
    fprintf(f, "\n# baselines (same cost model); gain = %s\n%-11s %12s %7s %7s %7s  %s\n",
            objective == PS_SEARCH_MEMORY ? "baseline peak memory / psearch peak memory"
                                          : "psearch samples/s / baseline samples/s",
            "baseline", "samples/s", "MFU", "peak", "gain", "plan");
    for (int k = 0; k < PS_BASE_COUNT; k++) {
        if (!r->have_base[k]) {
            fprintf(f, "%-11s %12s %7s %7s %7s  %s\n", ps_baseline_name(k), "-", "-", "-", "-", r->base_why[k]);
            continue;
        }
        const ps_search_cand *c = &r->base[k];
        char sum[256];
        plan_summary(sum, sizeof sum, &c->plan, m);
        char sps[32];
        fprintf(f, "%-11s %12s %6.1f%% %6.1fG %6.2fx  %s\n", ps_baseline_name(k),
                ps_fmt_num(c->pred.samples_per_s, 0, sps, sizeof sps),
                100 * c->pred.mfu, ps_prediction_peak(&c->pred) / 1073741824.0,
                r->n_top ? ps_search_gain(&r->top[0], c, objective) : 0, sum);
    }
}

/* --exec-top K: the K best plans, sent from rank 0 to all as plan JSON, executed one after another on every rank
 * (jobs/), then ranked by measured iteration time. */
typedef struct {
    int n;
    ps_cli_exec_run *run;
    int *order; /* plans by measured time, fastest first */
} exec_top;

/* Rank 0's plan i on every rank, as plan JSON. Every rank passes every collective and agrees on the outcome before
 * the next, so a failure on one rank (memory) fails all of them alike. */
static ps_status bcast_plan(MPI_Comm comm, const ps_model *m, const ps_plan *mine, int idx, ps_plan *out)
{
    memset(out, 0, sizeof *out);
    int rank = 0;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    char *txt = NULL;
    long long len = 0;
    ps_status st = PS_OK;
    if (rank == 0) {
        json_t *j = ps_plan_to_json(mine, m);
        txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (txt)
            len = (long long)strlen(txt);
        else
            st = PS_FAIL(PS_ERR_SYSTEM, "out of memory writing plan %d", idx + 1);
    }
    PS_MPI(MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, comm));
    if (st == PS_OK && rank != 0 && !(txt = ps_calloc((size_t)len + 1, 1))) st = PS_ERR_SYSTEM;
    st = ps_mpi_agree_status(comm, st, "sending the plans to execute");
    if (st == PS_OK)
        st = ps_mpi_status(MPI_Bcast(txt, (int)len, MPI_CHAR, 0, comm), "MPI_Bcast", __FILE__, __LINE__);
    json_t *root = NULL;
    char name[64];
    snprintf(name, sizeof name, "plan %d of the search", idx + 1);
    if (st == PS_OK) st = ps_json_load_buffer(txt, (size_t)len, name, &root);
    free(txt);
    if (st == PS_OK) st = ps_plan_from_json(root, name, m, out);
    json_decref(root);
    ps_status ast = ps_mpi_agree_status(comm, st, "reading the plans to execute");
    if (ast != PS_OK && st == PS_OK) ps_plan_free(out);
    return ast;
}

static ps_status run_exec_top(const ps_cli_opts *o, MPI_Comm comm, const ps_cost_params *cp, const ps_model *m,
                              const ps_cluster *c, const ps_search_result *all, exec_top *x)
{
    int rank = 0;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    int n = rank == 0 ? (all->n_top < o->exec_top ? all->n_top : o->exec_top) : 0;
    PS_MPI(MPI_Bcast(&n, 1, MPI_INT, 0, comm));
    x->run = ps_calloc((size_t)n + 1, sizeof *x->run);
    x->order = ps_calloc((size_t)n + 1, sizeof *x->order);
    if (!x->run || !x->order) return PS_ERR_SYSTEM;
    for (int i = 0; i < n; i++) {
        ps_plan p;
        PS_TRY(bcast_plan(comm, m, rank == 0 ? &all->top[i].plan : NULL, i, &p));
        if (rank == 0 && o->format != PS_FMT_JSON) fprintf(stderr, "# executing plan %d of %d\n", i + 1, n);
        ps_status st = ps_cli_exec(o, comm, m, c, cp, &p, &x->run[i]);
        ps_plan_free(&p);
        PS_TRY(st);
        x->n++;
        /* rank 0 writes; every rank learns the outcome before the next plan's broadcast */
        st = rank == 0 && o->record ? ps_costdb_add_measurements(o->record, &x->run[i].row, 1) : PS_OK;
        PS_TRY(ps_mpi_agree_status(comm, st, "recording the measurement"));
    }
    /* measured order; ties keep the search's order */
    for (int i = 0; i < n; i++) x->order[i] = i;
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && x->run[x->order[k]].r.median_s < x->run[x->order[k - 1]].r.median_s; k--) {
            int t = x->order[k];
            x->order[k] = x->order[k - 1];
            x->order[k - 1] = t;
        }
    return PS_OK;
}

static void exec_top_free(exec_top *x)
{
    for (int i = 0; i < x->n; i++) ps_cli_exec_run_free(&x->run[i]);
    free(x->run);
    free(x->order);
    memset(x, 0, sizeof *x);
}

static void exec_top_table(FILE *f, const exec_top *x, const ps_search_result *all, const ps_model *m,
                           const ps_cluster *c)
{
    if (!x->n) return;
    fprintf(f, "\n# executed the %d best plans on this allocation (backend %s%s), ranked by measured time\n", x->n,
            x->run[0].backend, x->run[0].scale > 1 ? ", scaled shapes" : "");
    fprintf(f, "%8s %9s %12s %12s %9s %8s  %s\n", "measured", "predicted", "pred s/iter", "meas s/iter", "error",
            "spread", "plan");
    for (int i = 0; i < x->n; i++) {
        int k = x->order[i];
        const ps_exec_result *r = &x->run[k].r;
        char sum[256];
        plan_summary(sum, sizeof sum, &all->top[k].plan, m);
        fprintf(f, "%8d %9d %12.4g %12.4g %+8.1f%% %7.0f%%  %s\n", i + 1, k + 1, r->predicted_s, r->median_s,
                ps_cli_err_pct(r->median_s, r->predicted_s), 100 * r->spread, sum);
    }
    if (!x->run[0].comparable)
        fprintf(f, "# the predictions are for the %s of %s; the times were measured with the %s backend (see "
                   "psearch exec --help)\n", c->groups[0].gpu.name, c->name, x->run[0].backend);
    if (x->run[0].scale > 1)
        fprintf(f, "# executed model %s: every width and token count divided by %lld, predicted the same way\n",
                x->run[0].model.name, (long long)x->run[0].scale);
}

static json_t *exec_top_json(const exec_top *x, const ps_search_result *all, const ps_model *m)
{
    json_t *a = json_array();
    for (int i = 0; i < x->n; i++) {
        int k = x->order[i];
        char sum[256];
        plan_summary(sum, sizeof sum, &all->top[k].plan, m);
        json_t *e = ps_cli_exec_json(&x->run[k]);
        json_object_set_new(e, "predicted_rank", json_integer(k + 1));
        json_object_set_new(e, "measured_rank", json_integer(i + 1));
        json_object_set_new(e, "plan", json_string(sum));
        json_array_append_new(a, e);
    }
    return a;
}

/* The search's restriction as the output states it: the framework (NULL for any) and the fixed fields, with a fixed
 * schedule ("" when nothing is fixed). */
static const ps_framework_rules *restriction(const ps_search_opts *so, char *fixed, size_t cap)
{
    ps_search_fixed_describe(&so->fixed, fixed, cap);
    if (so->schedules && so->n_schedules == 1)
        ps_strcatf(fixed, cap, "%sschedule %s", fixed[0] ? ", " : "", so->schedules[0]);
    return ps_framework_get((ps_framework)so->framework);
}

static json_t *fixed_json(const ps_search_opts *so)
{
    const ps_search_fixed *f = &so->fixed;
    json_t *j = json_object();
    if (f->tp > 0) json_object_set_new(j, "tp", json_integer(f->tp));
    if (f->pp > 0) json_object_set_new(j, "pp", json_integer(f->pp));
    if (f->zero >= 0) json_object_set_new(j, "zero", json_integer(f->zero));
    if (f->recompute >= 0) json_object_set_new(j, "recompute", json_string(ps_recompute_name(f->recompute)));
    if (f->mbs > 0) json_object_set_new(j, "mbs", json_integer(f->mbs));
    if (f->micro > 0) json_object_set_new(j, "micro_batches", json_integer(f->micro));
    if (f->cp > 0) json_object_set_new(j, "cp", json_integer(f->cp));
    if (f->cp_comm > 0) json_object_set_new(j, "cp_comm", json_string(ps_cp_comm_name((ps_cp_comm)(f->cp_comm - 1))));
    if (f->ep > 0) json_object_set_new(j, "ep", json_integer(f->ep));
    if (f->etp > 0) json_object_set_new(j, "etp", json_integer(f->etp));
    if (so->schedules && so->n_schedules == 1) json_object_set_new(j, "schedule", json_string(so->schedules[0]));
    return j;
}

static ps_status print_result(const ps_cli_opts *o, const ps_search_opts *so, ps_out *out, const ps_cost_params *cp,
                              const ps_model *m, const ps_cluster *c, const ps_search_result *r, int nranks,
                              double seconds, const exec_top *xt)
{
    bool memory = o->objective == PS_SEARCH_MEMORY;
    char fixed[256];
    const ps_framework_rules *fw = restriction(so, fixed, sizeof fixed);
    if (o->format == PS_FMT_JSON) {
        json_t *j = r->n_top ? ps_prediction_json(m, c, &r->top[0].plan, &r->top[0].pred, cp) : json_object();
        json_t *top = json_array();
        for (int i = 0; i < r->n_top; i++)
            json_array_append_new(top, ps_prediction_json(m, c, &r->top[i].plan, &r->top[i].pred, cp));
        json_object_set_new(j, "top", top);
        /* the padding the search loaded the model with, so that estimate --plan prices this vocabulary again */
        int64_t pad = ps_cli_vocab_pad(o, c->groups[0].gpus_per_node);
        json_object_set_new(j, "vocab_pad", json_integer(pad > 1 ? pad : 0));
        json_object_set_new(j, "search", json_pack("{s:I, s:I, s:I, s:I, s:f, s:i, s:f}", "candidates",
                                                   (json_int_t)r->candidates, "evaluated", (json_int_t)r->evaluated,
                                                   "feasible", (json_int_t)r->feasible, "pruned",
                                                   (json_int_t)r->pruned, "dp_cells", r->dp_cells, "ranks", nranks,
                                                   "wall_s", seconds));
        if (!r->n_top) json_object_set_new(j, "binding", json_string(r->binding));
        json_object_set_new(j, "objective", json_string(ps_search_objective_name(o->objective)));
        if (fw)
            json_object_set_new(j, "framework", json_pack("{s:s, s:s, s:s}", "name", fw->name, "title", fw->title,
                                                          "version", fw->version));
        if (fixed[0]) json_object_set_new(j, "fixed", fixed_json(so));
        json_object_set_new(j, "baselines", baselines_json(r, m, o->objective));
        if (xt) json_object_set_new(j, "executed", exec_top_json(xt, r, m));
        return ps_out_json(out, j);
    }
    fprintf(out->f, "# psearch %s: %s on %s (%lld GPUs); %lld candidates, %lld plans costed, %lld fit, %lld pruned "
                    "by bounds; %d rank(s), %.2f s\n",
            PS_VERSION, m->name, c->name, (long long)c->n_gpus, (long long)r->candidates, (long long)r->evaluated,
            (long long)r->feasible, (long long)r->pruned, nranks, seconds);
    if (fw) fprintf(out->f, "# framework: only plans %s runs as exported (rules of %s)\n", fw->title, fw->version);
    if (fixed[0]) fprintf(out->f, "# fixed: %s; the rest searched\n", fixed);
    if (!r->n_top) return PS_OK;
    fprintf(out->f, "# best plan (objective: %s)\n", memory ? "lowest peak memory per GPU" : "highest samples/s");
    ps_prediction_table(out->f, m, c, &r->top[0].plan, &r->top[0].pred);
    ps_cli_costdb_note(out->f, cp, c);
    if (r->n_top > 1) {
        /* a cp column where some plan has context parallelism (the table of every other search stays as it was) */
        bool any_cp = false;
        for (int i = 0; i < r->n_top; i++) any_cp = any_cp || ps_strategy_cp(&r->top[i].plan.layer[0]) > 1;
        /* ep and etp columns for a model with experts */
        bool moe = ps_model_has_moe(m);
        fprintf(out->f, "\n# top %d\n%4s %12s %8s %6s %4s %4s%s %4s%s %5s %5s %5s %-12s %9s %-10s %6s\n", r->n_top,
                "rank", "samples/s", "MFU", "bubble", "pp", "tp", any_cp ? "       cp" : "", "dp",
                moe ? "   ep  etp" : "", "zero", "mbs", "m", "schedule", "ckpt", "tp-overlap", "peak");
        for (int i = 0; i < r->n_top; i++) {
            const ps_plan *p = &r->top[i].plan;
            const ps_prediction *q = &r->top[i].pred;
            double peak = ps_prediction_peak(q);
            /* one strategy for the transformer layers, the others without recomputation (a framework's plan) is
             * one strategy here too, and its recomputation the transformer layers': alike, or Megatron-LM's block
             * pattern ("block 2": the first 2 of every chunk); anything else varies per layer */
            const ps_strategy *ref = &p->layer[0];
            int64_t block_n = 0;
            bool uni = ps_plan_is_uniform(p, m->n_layers);
            if (!uni) uni = ps_cli_blocks_uniform(m, p, &ref, &block_n);
            if (!uni) ref = &p->layer[0];
            char ck[32], sps[32], cps[24] = "", eps[24] = "";
            if (block_n > 0)
                snprintf(ck, sizeof ck, "block %lld", (long long)block_n);
            else
                snprintf(ck, sizeof ck, "%s", ps_recompute_name(ref->ckpt));
            const ps_strategy *s0 = &p->layer[0];
            if (any_cp)
                snprintf(cps, sizeof cps, " %4d %-4s", ps_strategy_cp(s0),
                         ps_strategy_cp(s0) > 1 ? ps_cp_comm_name(s0->cp_comm) : "");
            for (int64_t l = 0; moe && l < m->n_layers; l++)
                if (ps_layer_is_moe(&m->layers[l])) {
                    snprintf(eps, sizeof eps, " %4d %4d", ps_strategy_ep(&p->layer[l]), ps_strategy_etp(&p->layer[l]));
                    break;
                }
            fprintf(out->f, "%4d %12s %7.1f%% %5.1f%% %4d %4d%s %4d%s %5d %5lld %5lld %-12s %9s %-10s %5.1fG%s\n",
                    i + 1, ps_fmt_num(q->samples_per_s, 0, sps, sizeof sps), 100 * q->mfu,
                    fabs(q->bubble_frac) <= 1e-9 ? 0.0 : 100 * q->bubble_frac, p->pp, p->layer[0].tp, cps,
                    p->layer[0].dp, eps, p->layer[0].zero, (long long)p->mbs, (long long)ps_plan_micro_batches(p),
                    p->schedule, ck, ps_overlap_name(p->layer[0].overlap),
                    peak / 1073741824.0, uni ? "" : "  (per-layer)");
        }
    }
    baselines_table(out->f, r, m, o->objective);
    if (xt) exec_top_table(out->f, xt, r, m, c);
    return PS_OK;
}

ps_status ps_cli_search(MPI_Comm comm, const ps_search_opts *so, int dist, const ps_mpi_poll *poll,
                        const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, ps_search_result *all,
                        double *seconds)
{
    memset(all, 0, sizeof *all);
    int rank = 0;
    if (comm != MPI_COMM_NULL) PS_MPI(MPI_Comm_rank(comm, &rank));
    double t0 = ps_wtime();
    ps_status st;
    if (comm == MPI_COMM_NULL) {
        /* one process, no launcher: the same search (the same total order decides), without MPI */
        st = ps_search_run(cp, m, c, so, all);
    } else {
        ps_mpi_search_stats stats;
        st = ps_mpi_search_polled(comm, cp, m, c, so, (ps_dist)dist, poll, all, &stats);
    }
    if (st == PS_OK && rank == 0) {
        /* The rule-based baselines are a few hundred plans: rank 0 costs them while the others wait. */
        for (int k = 0; k < PS_BASE_EVEN && st == PS_OK; k++)
            st = ps_search_baseline(cp, m, c, so, k, &all->base[k], &all->have_base[k], all->base_why[k],
                                    sizeof all->base_why[k]);
        if (st == PS_OK && !all->have_base[PS_BASE_EVEN])
            snprintf(all->base_why[PS_BASE_EVEN], sizeof all->base_why[PS_BASE_EVEN],
                     "no even split of the layers fits");
        /* what every rank sent and rank 0 re-costed, and the baselines: the search's guarantee, checked once more */
        if (st == PS_OK) st = ps_search_result_check(so, m, all);
    }
    *seconds = ps_wtime() - t0;
    return st;
}

ps_status ps_cmd_plan(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    ps_cost_params cp;
    int rank = 0, nranks = 1;
    if (comm != MPI_COMM_NULL) {
        PS_MPI(MPI_Comm_rank(comm, &rank));
        PS_MPI(MPI_Comm_size(comm, &nranks));
    }
    ps_model m;
    ps_cluster c;
    PS_TRY(ps_cli_load_inputs(o, comm, &m, &c));
    ps_search_result all;
    memset(&all, 0, sizeof all);
    double secs = 0;
    ps_costdb_model *db = NULL;
    ps_status st = ps_cli_cost_model(o, comm, &c, &cp, &db);
    /* --exec-top runs one rank per GPU: refuse another count before the search, not after it */
    if (st == PS_OK && o->exec_top && c.n_gpus != nranks)
        st = PS_FAIL(PS_ERR_INPUT,
                     "--exec-top runs the plans on this allocation, one MPI rank per GPU: %s has %lld GPUs "
                     "but this run has %d rank%s (mpirun -n %lld psearch ... --exec-top %d)",
                     c.name, (long long)c.n_gpus, nranks, nranks == 1 ? "" : "s", (long long)c.n_gpus, o->exec_top);
    exec_top xt;
    memset(&xt, 0, sizeof xt);
    /* The same options on every rank, so the same check fails everywhere: no agreement needed. */
    ps_cli_search_opts setup;
    if (st == PS_OK) st = ps_cli_search_setup(o, &c, &setup);
    if (st == PS_OK) st = ps_cli_search_model_check(o, &setup.so, &m, &c);
    if (st == PS_OK) st = ps_cli_search(comm, &setup.so, o->distribute, NULL, &cp, &m, &c, &all, &secs);
    if (st == PS_OK && o->exec_top) st = run_exec_top(o, comm, &cp, &m, &c, &all, &xt);
    /* the export first: a plan its framework cannot run fails the command before any file is written */
    bool exported = st == PS_OK && rank == 0 && all.n_top && o->export_kind;
    if (exported)
        st = ps_plan_export(out, o->export_kind, &m, &c, &all.top[0].plan, &all.top[0].pred, &cp,
                            ps_cli_vocab_pad(o, c.groups[0].gpus_per_node));
    if (st == PS_OK && rank == 0 && all.n_top && o->svg) {
        char *svg = NULL;
        size_t len = 0;
        st = ps_plan_svg(&all.top[0].plan, &all.top[0].pred, &svg, &len);
        if (st == PS_OK) st = ps_write_file_atomic(o->svg, svg, len);
        free(svg);
    }
    if (st == PS_OK && rank == 0 && !exported) {
        st = print_result(o, &setup.so, out, &cp, &m, &c, &all, nranks, secs, o->exec_top ? &xt : NULL);
        if (st == PS_OK && all.n_top == 0)
            st = PS_FAIL(PS_ERR_INFEASIBLE, "no feasible plan for %s on %s: %s", m.name, c.name, all.binding);
    }
    exec_top_free(&xt);
    ps_search_result_free(&all);
    ps_model_free(&m);
    ps_cluster_free(&c);
    ps_costdb_model_free(db);
    return st;
}

/* `psearch sweep`: every (model, cluster) cell searched, the ranks split into groups that rank 0 hands cells to,
 * largest estimated search work first (mpi/sweep.c); each finished cell appended by rank 0 to DIR/cells.jsonl as it
 * finishes, whichever group searched it, and the plan tables re-rendered from those records in grid order
 * (sweep_tables.c), so the tables do not depend on the ranks or groups, and a sweep killed at any moment resumes with
 * --resume, losing at most the cells in progress. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ps_comm.h"
#include "ps_mpi.h"
#include "ps_schedules.h"
#include "sweep_tables.h"

/* Cells in one sweep: far more than any nightly table shows, small enough to keep every cell's model in memory. */
#define SWEEP_MAX_CELLS 4096

static bool all_digits(const char *s)
{
    if (!*s) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

static ps_status push(char ***v, int *n, const char *s, const char *opt)
{
    if (*n >= SWEEP_MAX_CELLS)
        return PS_FAIL(PS_ERR_INPUT, "option --%s lists more than %d items", opt, SWEEP_MAX_CELLS);
    for (int i = 0; i < *n; i++)
        if (strcmp((*v)[i], s) == 0) return PS_FAIL(PS_ERR_INPUT, "option --%s lists '%s' twice", opt, s);
    char **nv = realloc(*v, (size_t)(*n + 1) * sizeof *nv);
    if (!nv) return PS_FAIL(PS_ERR_SYSTEM, "out of memory parsing --%s", opt);
    *v = nv;
    if (!(nv[*n] = ps_strdup(s))) return PS_ERR_SYSTEM;
    (*n)++;
    return PS_OK;
}

/* Split a comma list into its items; an empty item is a typo ("a,,b"), not something to skip. */
static ps_status split_list(const char *list, const char *opt, char ***items, int *n)
{
    *items = NULL;
    *n = 0;
    ps_status st = PS_OK;
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char tok[1024];
        if (len == 0) {
            st = PS_FAIL(PS_ERR_INPUT, "option --%s: item %d of '%s' is empty", opt, *n + 1, list);
            break;
        }
        if (len >= sizeof tok) {
            st = PS_FAIL(PS_ERR_INPUT, "option --%s: item %d is longer than %zu characters", opt, *n + 1,
                         sizeof tok - 1);
            break;
        }
        memcpy(tok, p, len);
        tok[len] = '\0';
        if ((st = push(items, n, tok, opt)) != PS_OK) break;
        if (!e) return PS_OK;
        p = e + 1;
    }
    ps_mpi_strings_free(*items, *n);
    *items = NULL;
    *n = 0;
    return st;
}

/* --clusters: items are PRESET[:NODES], cluster files (a '/' or a .json ending, as ps_cluster_load tells them
 * apart), auto or costdb (the machine --costdb measured); an item of digits alone is one more node count for the preset
 * item before it, so "dgx-a100-80g:1,2,4" is the shorthand (docs/design.md) for
 * dgx-a100-80g:1,dgx-a100-80g:2,dgx-a100-80g:4. A preset name is never all digits and a file named by digits is written
 * ./8, so the two readings never collide. */
static ps_status parse_clusters(const char *list, char ***out, int *n)
{
    char **raw = NULL;
    int nraw = 0;
    *out = NULL;
    *n = 0;
    PS_TRY(split_list(list, "clusters", &raw, &nraw));
    ps_status st = PS_OK;
    char base[512] = "";
    char **v = NULL;
    int nv = 0;
    for (int i = 0; i < nraw && st == PS_OK; i++) {
        const char *t = raw[i];
        char spec[1100];
        if (all_digits(t)) {
            if (!base[0]) {
                st = PS_FAIL(PS_ERR_INPUT, "option --clusters: '%s' is a node count but no preset comes before it "
                                           "(write PRESET:%s, or ./%s for a cluster file of that name)", t, t, t);
                break;
            }
            snprintf(spec, sizeof spec, "%s:%s", base, t);
        } else {
            ps_strlcpy(spec, t, sizeof spec);
            size_t len = strlen(t);
            bool file = strchr(t, '/') || (len >= 5 && strcmp(t + len - 5, ".json") == 0);
            if (file || strcmp(t, "auto") == 0 || strcmp(t, "costdb") == 0) {
                base[0] = '\0'; /* nothing for a later bare number to continue */
            } else {
                ps_strlcpy(base, t, sizeof base);
                char *colon = strrchr(base, ':');
                if (colon) *colon = '\0';
            }
        }
        st = push(&v, &nv, spec, "clusters");
    }
    ps_mpi_strings_free(raw, nraw);
    if (st != PS_OK) {
        ps_mpi_strings_free(v, nv);
        return st;
    }
    *out = v;
    *n = nv;
    return PS_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The search options a cell on cluster c ran with, resolved as the search resolves them (the batch sizes, the largest
 * TP degree, the schedule kinds sorted), plus the model and cost options given, in one canonical line. Records carry
 * it, and --resume refuses records made with another: a table must not mix plans searched under different settings,
 * while spelling the same settings differently (--gbs 64 for the default on 8 GPUs, --schedules b,a) changes
 * nothing. */
static char *options_line(const ps_cli_opts *o, const ps_cluster *c, const ps_search_opts *so)
{
    char buf[8192] = "";
    if (so->gbs_lo == so->gbs_hi) ps_strcatf(buf, sizeof buf, "gbs=%lld", (long long)so->gbs_lo);
    else ps_strcatf(buf, sizeof buf, "gbs-range=%lld:%lld:%lld", (long long)so->gbs_lo, (long long)so->gbs_hi,
                    (long long)so->gbs_step);
    ps_strcatf(buf, sizeof buf, " mbs-max=%lld max-tp=%d schedules=", (long long)so->mbs_max, ps_search_max_tp(so, c));
    const char *kinds[64];
    int nk = 0;
    if (so->schedules)
        for (int i = 0; i < so->n_schedules && nk < 64; i++) kinds[nk++] = so->schedules[i];
    else
        for (int i = 0; i < ps_sched_kind_count() && nk < 64; i++) kinds[nk++] = ps_sched_kind_name(i);
    qsort(kinds, (size_t)nk, sizeof kinds[0], cmp_str);
    for (int i = 0; i < nk; i++)
        if (i == 0 || strcmp(kinds[i], kinds[i - 1]) != 0) ps_strcatf(buf, sizeof buf, "%s%s", i ? "," : "", kinds[i]);
    ps_strcatf(buf, sizeof buf, " objective=%s tp-overlap=%s", ps_search_objective_name(so->objective),
               so->overlap ? "auto" : "none");
    if (so->dp_no_overlap) ps_strcatf(buf, sizeof buf, " dp-overlap=off");
    /* the attention kernel changes every cell: a resume under another one must not mix its records in */
    if (so->attention != PS_ATTN_AUTO)
        ps_strcatf(buf, sizeof buf, " attention=%s",
                   so->attention == PS_SEARCH_ATTN_BOTH ? "search" : ps_attn_name((ps_attn)so->attention));
    /* a framework's restriction and fixed plan fields change every cell likewise (a fixed schedule is in schedules=) */
    if (so->framework != PS_FW_ANY)
        ps_strcatf(buf, sizeof buf, " framework=%s", ps_framework_name((ps_framework)so->framework));
    const ps_search_fixed *f = &so->fixed;
    if (f->tp > 0) ps_strcatf(buf, sizeof buf, " tp=%d", f->tp);
    if (f->pp > 0) ps_strcatf(buf, sizeof buf, " pp=%d", f->pp);
    if (f->zero >= 0) ps_strcatf(buf, sizeof buf, " zero=%d", f->zero);
    if (f->recompute >= 0) ps_strcatf(buf, sizeof buf, " recompute=%s", ps_recompute_name((ps_recompute)f->recompute));
    if (f->mbs > 0) ps_strcatf(buf, sizeof buf, " mbs=%lld", (long long)f->mbs);
    if (f->micro > 0) ps_strcatf(buf, sizeof buf, " micro=%lld", (long long)f->micro);
    if (f->cp > 0) ps_strcatf(buf, sizeof buf, " cp=%d", f->cp);
    if (f->cp_comm > 0) ps_strcatf(buf, sizeof buf, " cp-comm=%s", ps_cp_comm_name((ps_cp_comm)(f->cp_comm - 1)));
    if (o->mopts.seq) ps_strcatf(buf, sizeof buf, " seq=%lld", (long long)o->mopts.seq);
    if (o->mopts.vocab_pad) ps_strcatf(buf, sizeof buf, " vocab-pad=%lld", (long long)o->mopts.vocab_pad);
    if (o->mopts.dtype >= 0) ps_strcatf(buf, sizeof buf, " dtype=%s", ps_dtype_name((ps_dtype)o->mopts.dtype));
    for (int i = 0; i < o->n_cost_params; i++) ps_strcatf(buf, sizeof buf, " cost-param=%s", o->cost_params[i]);
    if (o->costdb) ps_strcatf(buf, sizeof buf, " costdb=%s", o->costdb);
    return ps_strdup(buf);
}

/* Agree on one outcome. Returns PS_OK with *stop = 0 when every rank is fine. Otherwise *stop = 1 and this rank's
 * own status: ranks that were fine return PS_OK, so main's agreement lets the rank that failed say why, once. */
static ps_status agree(MPI_Comm comm, ps_status local, int *stop)
{
    ps_status worst = PS_OK;
    int first = 0;
    ps_status st = ps_mpi_agree(comm, local, &worst, &first);
    if (st != PS_OK) {
        *stop = 1;
        return st;
    }
    *stop = worst != PS_OK;
    return local;
}

/* Create DIR when missing (its parent must exist: a typo in a path should not grow a tree of folders). */
static ps_status make_dir(const char *dir)
{
    if (mkdir(dir, 0777) == 0) return PS_OK;
    struct stat sb;
    if (errno == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return PS_OK;
    if (errno == EEXIST) return PS_FAIL(PS_ERR_INPUT, "--out: %s exists and is not a folder", dir);
    return PS_FAIL(PS_ERR_INPUT, "--out: cannot create the folder %s: %s", dir, strerror(errno));
}

/* Rank 0: open the records and check they belong to this sweep; fill done[] and the grid's record index. */
static ps_status open_records(const ps_cli_opts *o, ps_sweep_grid *g, ps_sweep_log **lg, unsigned char *done)
{
    char path[4096];
    PS_TRY(make_dir(o->sweep_dir));
    snprintf(path, sizeof path, "%s/%s", o->sweep_dir, PS_SWEEP_TIMELINES);
    PS_TRY(make_dir(path));
    snprintf(path, sizeof path, "%s/cells.jsonl", o->sweep_dir);
    size_t torn = 0;
    PS_TRY(ps_sweep_log_open(path, lg, &torn));
    int n = ps_sweep_log_count(*lg);
    if (n > 0 && !o->resume) {
        ps_sweep_log_close(*lg);
        *lg = NULL;
        return PS_FAIL(PS_ERR_INPUT, "--out %s already holds %d finished cell(s) of a sweep (%s): add --resume to "
                                     "continue it, or choose another folder", o->sweep_dir, n, path);
    }
    if (torn) fprintf(stderr, "# sweep: dropped a torn last record of %zu bytes from %s\n", torn, path);
    int missing = 0;
    for (int i = 0; i < n; i++) {
        const json_t *r = ps_sweep_log_at(*lg, i);
        ps_status st = PS_OK;
        int mi = -1, ci = -1;
        for (int k = 0; k < g->n_models; k++)
            if (strcmp(g->models[k], ps_sweep_str(r, "model")) == 0) mi = k;
        for (int k = 0; k < g->n_clusters; k++)
            if (strcmp(g->clusters[k], ps_sweep_str(r, "cluster")) == 0) ci = k;
        if (mi < 0 || ci < 0)
            st = PS_FAIL(PS_ERR_INPUT, "--resume: %s holds cell '%s', which --models/--clusters do not list; a "
                                       "resumed sweep must cover every recorded cell (list it, or use another folder)",
                         path, ps_sweep_str(r, "cell"));
        else if (strcmp(ps_sweep_str(r, "options"), g->options[ci]) != 0)
            st = PS_FAIL(PS_ERR_INPUT, "--resume: %s record %d (%s) was searched with other options:\n  recorded: "
                                       "%s\n  now:      %s\nrerun with the recorded options, or use another folder",
                         path, i + 1, ps_sweep_str(r, "cell"), ps_sweep_str(r, "options"), g->options[ci]);
        else if (strcmp(ps_sweep_str(r, "psearch"), PS_VERSION) != 0)
            st = PS_FAIL(PS_ERR_INPUT,
                         "--resume: %s record %d (%s) was searched by psearch %s, this is psearch %s: "
                         "its cost model may differ; finish the sweep with that version, or use "
                         "another folder",
                         path, i + 1, ps_sweep_str(r, "cell"), ps_sweep_str(r, "psearch"), PS_VERSION);
        else if (done[mi * g->n_clusters + ci])
            st = PS_FAIL(PS_ERR_INPUT, "%s: cell '%s' is recorded twice (line %d)", path, ps_sweep_str(r, "cell"),
                         i + 1);
        else {
            done[mi * g->n_clusters + ci] = 1;
            g->rec[mi * g->n_clusters + ci] = r;
            g->n_done++;
            /* Written before its record, so missing only when removed since: the page says so (the record keeps the
             * plan's numbers, not the stage times a timeline is drawn from). */
            const char *rel = ps_sweep_str(r, "timeline_svg");
            char tl[4200];
            snprintf(tl, sizeof tl, "%s/%s", o->sweep_dir, rel);
            if (strcmp(ps_sweep_str(r, "status"), "ok") == 0 && (!rel[0] || access(tl, R_OK) != 0)) {
                g->timeline_missing[mi * g->n_clusters + ci] = 1;
                missing++;
            }
        }
        if (st != PS_OK) {
            ps_sweep_log_close(*lg);
            *lg = NULL;
            return st;
        }
    }
    if (missing)
        fprintf(stderr, "# sweep: %d recorded cell(s) lost their timeline in %s/%s; index.html says so\n", missing,
                o->sweep_dir, PS_SWEEP_TIMELINES);
    ps_sweep_remove_temporaries(o->sweep_dir);
    return PS_OK;
}

/* ---- one cell's record ---- */

static json_t *cell_record(const char *key, const char *model, const char *cluster, const char *opts,
                           const ps_model *m, const ps_cluster *c, const ps_search_result *r, int objective,
                           const char *timeline, int nranks, double secs)
{
    json_t *j = json_object();
    json_object_set_new(j, "cell", json_string(key));
    json_object_set_new(j, "model", json_string(model));
    json_object_set_new(j, "cluster", json_string(cluster));
    json_object_set_new(j, "options", json_string(opts));
    json_object_set_new(j, "model_name", json_string(m->name));
    json_object_set_new(j, "dtype", json_string(ps_dtype_name(m->dtype))); /* fp16 where the cluster lacks bf16 */
    json_object_set_new(j, "cluster_name", json_string(c->name));
    json_object_set_new(j, "gpus", json_integer(c->n_gpus));
    json_object_set_new(j, "status", json_string(r->n_top ? "ok" : "infeasible"));
    if (!r->n_top) {
        json_object_set_new(j, "binding", json_string(r->binding));
    } else {
        const ps_plan *p = &r->top[0].plan;
        const ps_prediction *q = &r->top[0].pred;
        const ps_strategy *s0 = &p->layer[0];
        /* what the per-layer fields do beyond the first layer's, for plans.csv ("tp 2-4; ckpt none/full") */
        char varies[512] = "";
        if (ps_sweep_plan_varies(p, m->n_layers, varies, sizeof varies) != PS_OK) {
            json_decref(j);
            return NULL;
        }
        json_object_set_new(j, "plan",
                            json_pack("{s:i, s:i, s:i, s:i, s:s, s:i, s:i, s:s, s:b, s:b, s:s, s:s, s:I, s:I, s:I}",
                                      "pp", p->pp, "vpp", p->vpp, "tp", s0->tp, "cp", ps_strategy_cp(s0), "cp_comm",
                                      ps_cp_comm_name(ps_strategy_cp(s0) > 1 ? s0->cp_comm : PS_CP_RING), "dp",
                                      s0->dp, "zero", s0->zero, "ckpt",
                                      ps_recompute_name(s0->ckpt), "sp", s0->sp, "uniform",
                                      ps_plan_is_uniform(p, m->n_layers), "varies", varies, "schedule", p->schedule,
                                      "gbs", (json_int_t)p->gbs, "mbs", (json_int_t)p->mbs, "micro_batches",
                                      (json_int_t)ps_plan_micro_batches(p)));
        /* the expert grid of the first MoE layer (one per plan); absent for a dense model */
        for (int64_t i = 0; i < m->n_layers; i++)
            if (ps_layer_is_moe(&m->layers[i])) {
                json_t *pl = json_object_get(j, "plan");
                json_object_set_new(pl, "ep", json_integer(ps_strategy_ep(&p->layer[i])));
                json_object_set_new(pl, "etp", json_integer(ps_strategy_etp(&p->layer[i])));
                break;
            }
        /* The fullest GPU's peak, and the capacity of the GPU with the least room left (the same GPU unless the
         * cluster mixes memory sizes). */
        double peak = ps_prediction_peak(q), cap = q->stages[ps_prediction_worst_stage(q)].mem_capacity;
        json_object_set_new(j, "predicted",
                            json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "iter_time_s", q->iter_time_s,
                                      "samples_per_s", q->samples_per_s, "tokens_per_s", q->tokens_per_s,
                                      "tflops_per_gpu", q->tflops_per_gpu, "mfu", q->mfu, "bubble_frac",
                                      q->bubble_frac, "peak_mem_gib", peak / 1073741824.0, "mem_capacity_gib",
                                      cap / 1073741824.0));
        if (r->have_base[PS_BASE_MEGATRON]) {
            const ps_search_cand *b = &r->base[PS_BASE_MEGATRON];
            json_object_set_new(j, "megatron_samples_per_s", json_real(b->pred.samples_per_s));
            json_object_set_new(j, "megatron_peak_mem_gib", json_real(ps_prediction_peak(&b->pred) / 1073741824.0));
            json_object_set_new(j, "gain_over_megatron", json_real(ps_search_gain(&r->top[0], b, objective)));
        } else {
            json_object_set_new(j, "megatron_samples_per_s", json_null());
            json_object_set_new(j, "gain_over_megatron", json_null());
            json_object_set_new(j, "megatron_why", json_string(r->base_why[PS_BASE_MEGATRON]));
        }
        json_object_set_new(j, "timeline_svg", json_string(timeline));
    }
    json_object_set_new(j, "search", json_pack("{s:f, s:i, s:I, s:I, s:I}", "wall_s", secs, "ranks", nranks,
                                               "candidates", (json_int_t)r->candidates, "evaluated",
                                               (json_int_t)r->evaluated, "feasible", (json_int_t)r->feasible));
    char when[32];
    ps_utc_now_iso(when, sizeof when);
    json_object_set_new(j, "finished", json_string(when));
    json_object_set_new(j, "psearch", json_string(PS_VERSION));
    return j;
}

/* ---- the command ---- */

/* One column of the grid: a cluster and what every cell on it shares. */
typedef struct {
    ps_cluster c;
    ps_cli_search_opts setup; /* the search options resolved for it, checked before any cell runs */
    ps_cost_params cp;        /* --cost-param values, and --costdb's tables attached to this cluster */
    ps_costdb_model *db;
} sweep_cluster;

typedef struct {
    ps_sweep_grid g;
    sweep_cluster *cols;  /* [n_clusters] */
    ps_model *models;     /* [n_models * n_clusters]: the vocabulary padding and dtype depend on the cluster */
    char (*model_digest)[17]; /* [n_models]: of the bytes read, for the manifest (sweep_compare.c) */
    int n_loaded_clusters, n_loaded_models;
} sweep_inputs;

static void inputs_free(sweep_inputs *in)
{
    for (int i = 0; i < in->n_loaded_models; i++) ps_model_free(&in->models[i]);
    for (int i = 0; i < in->n_loaded_clusters; i++) {
        ps_cluster_free(&in->cols[i].c);
        ps_costdb_model_free(in->cols[i].db);
    }
    free(in->models);
    free(in->model_digest);
    free(in->cols);
    ps_mpi_strings_free(in->g.models, in->g.n_models);
    free(in->g.rec);
    free(in->g.timeline_missing);
    ps_mpi_strings_free(in->g.options, in->g.n_clusters);
    ps_mpi_strings_free(in->g.clusters, in->g.n_clusters);
}

/* Rank-local: parse both lists and allocate the grid. */
static ps_status prepare_grid(const ps_cli_opts *o, sweep_inputs *in)
{
    PS_TRY(split_list(o->models, "models", &in->g.models, &in->g.n_models));
    PS_TRY(parse_clusters(o->clusters, &in->g.clusters, &in->g.n_clusters));
    if ((int64_t)in->g.n_models * in->g.n_clusters > SWEEP_MAX_CELLS)
        return PS_FAIL(PS_ERR_INPUT, "the sweep has %d x %d cells; at most %d are allowed", in->g.n_models,
                       in->g.n_clusters, SWEEP_MAX_CELLS);
    in->cols = ps_calloc((size_t)in->g.n_clusters, sizeof *in->cols);
    in->g.options = ps_calloc((size_t)in->g.n_clusters, sizeof *in->g.options);
    in->models = ps_calloc((size_t)in->g.n_models * (size_t)in->g.n_clusters, sizeof *in->models);
    in->g.rec = ps_calloc((size_t)in->g.n_models * (size_t)in->g.n_clusters + 1, sizeof *in->g.rec);
    in->g.timeline_missing = ps_calloc((size_t)in->g.n_models * (size_t)in->g.n_clusters + 1, 1);
    in->model_digest = ps_calloc((size_t)in->g.n_models, sizeof *in->model_digest);
    if (!in->cols || !in->g.options || !in->models || !in->g.rec || !in->g.timeline_missing || !in->model_digest)
        return PS_ERR_SYSTEM;
    return PS_OK;
}

/* Parse both lists and load every cluster (with its search options and cost database) and every (model, cluster)
 * model, on this rank, before any cell runs: a bad name or option in the last cell fails the sweep now, not hours
 * into it, and before the folder is made.
 * Collective, and every rank leaves it at the same point: loading is a chain of agreements (ps_mpi_agree_status) and
 * ps_cmd_sweep agrees next with ps_mpi_agree, which does not match them, so a step that can fail on one rank alone
 * (memory, a database only some nodes see) is agreed before the next collective step, or comes after the last. */
static ps_status load_inputs(const ps_cli_opts *o, MPI_Comm comm, sweep_inputs *in)
{
    PS_TRY(ps_mpi_agree_status(comm, prepare_grid(o, in), "setting up the sweep"));
    for (int k = 0; k < in->g.n_clusters; k++) {
        sweep_cluster *col = &in->cols[k];
        PS_TRY(ps_cli_load_cluster(o, in->g.clusters[k], comm, true, &col->c));
        in->n_loaded_clusters++;
        /* The search options of this cluster column (--gbs default, --gbs-range, --schedules), resolved and checked
         * before any cell runs; every cell of the column searches with them. Then, as the plan command costs:
         * --cost-param values, then --costdb's tables (refused for other devices). One agreement for the three: the
         * options' checks fail alike on every rank (the same options, the same cluster, nothing allocated), while
         * every rank reads the database itself, which may fail on one rank alone. */
        ps_status st = ps_cli_search_setup(o, &col->c, &col->setup);
        if (st == PS_OK) st = ps_cli_cost_model(o, MPI_COMM_NULL, &col->c, &col->cp, &col->db);
        PS_TRY(ps_mpi_agree_status(comm, st, "reading the cost database"));
    }
    /* As the plan command loads them: padded for TP up to a node, in fp16 where the cluster has no bf16. Each model's
     * file is read once and its bytes parsed for every cluster: only the parse depends on the cluster, and reading
     * again per column could give two columns two models of a file edited meanwhile. */
    for (int i = 0; i < in->g.n_models; i++) {
        ps_cli_model_file f;
        PS_TRY(ps_cli_model_file_read(in->g.models[i], comm, &f));
        ps_sweep_digest(f.text ? f.text : "", f.text ? f.len : 0, in->model_digest[i]);
        ps_status st = PS_OK;
        for (int k = 0; k < in->g.n_clusters && st == PS_OK; k++) {
            st = ps_cli_model_from_file(o, &f, &in->cols[k].c, true, comm, &in->models[i * in->g.n_clusters + k]);
            if (st == PS_OK) in->n_loaded_models = i * in->g.n_clusters + k + 1;
        }
        ps_cli_model_file_free(&f);
        PS_TRY(st);
    }
    /* every cell the search's restriction leaves no plan for (a model --framework's framework does not build, a dtype
     * it does not train in) refused before any cell runs: the same inputs on every rank, so the same answer */
    for (int i = 0; i < in->g.n_models; i++)
        for (int k = 0; k < in->g.n_clusters; k++)
            PS_TRY(ps_cli_search_model_check(o, &in->cols[k].setup.so, &in->models[i * in->g.n_clusters + k],
                                             &in->cols[k].c));
    /* Rank-local and after the last collective step: ps_cmd_sweep's agreement covers it. */
    for (int k = 0; k < in->g.n_clusters; k++)
        if (!(in->g.options[k] = options_line(o, &in->cols[k].c, &in->cols[k].setup.so))) return PS_ERR_SYSTEM;
    return PS_OK;
}

static void cell_line(const json_t *rec, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s: ", ps_sweep_str(rec, "cell"));
    const json_t *q = json_object_get(rec, "predicted"), *p = json_object_get(rec, "plan");
    char sps[32];
    if (q && p)
        ps_strcatf(buf, cap, "%s samples/s, MFU %.1f%%, pp %lld tp %lld dp %lld %s",
                   ps_fmt_num(json_real_value(json_object_get(q, "samples_per_s")), 0, sps, sizeof sps),
                   100 * json_real_value(json_object_get(q, "mfu")),
                   (long long)json_integer_value(json_object_get(p, "pp")),
                   (long long)json_integer_value(json_object_get(p, "tp")),
                   (long long)json_integer_value(json_object_get(p, "dp")), ps_sweep_str(p, "schedule"));
    else
        ps_strcatf(buf, cap, "infeasible (%s)", ps_sweep_str(rec, "binding"));
    ps_strcatf(buf, cap, " [%.2f s]", json_real_value(json_object_get(json_object_get(rec, "search"), "wall_s")));
}

/* Rank 0, before the folder is touched: this sweep's manifest (the digests of its inputs, DIR/sweep.json), and with
 * --compare / --history the earlier sweep the tables compare with (a bad PREV_DIR fails here, exit 2). */
static ps_status compare_setup(const ps_cli_opts *o, sweep_inputs *in, json_t **manifest, ps_sweep_compare **cmp)
{
    char (*cd)[17] = ps_calloc((size_t)in->g.n_clusters + 1, sizeof *cd);
    char dbd[17] = "";
    if (!cd) return PS_ERR_SYSTEM;
    ps_status st = PS_OK;
    /* a cluster by its description as psearch read it (presets, files, auto and costdb alike) */
    for (int k = 0; k < in->g.n_clusters && st == PS_OK; k++) {
        json_t *cj = ps_cluster_to_json(&in->cols[k].c);
        char *txt = cj ? json_dumps(cj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (txt) ps_sweep_digest(txt, strlen(txt), cd[k]);
        else st = PS_FAIL(PS_ERR_SYSTEM, "out of memory describing cluster %s", in->g.clusters[k]);
        free(txt);
        json_decref(cj);
    }
    if (st == PS_OK && o->costdb) st = ps_sweep_file_digest(o->costdb, dbd);
    if (st == PS_OK && !(*manifest = ps_sweep_manifest_new(&in->g, in->model_digest, cd, o->costdb, dbd)))
        st = PS_FAIL(PS_ERR_SYSTEM, "out of memory building the sweep's manifest");
    free(cd);
    if (st == PS_OK && (o->sweep_compare || o->sweep_history)) {
        ps_sweep_compare_args a = {o->sweep_compare, o->sweep_history, o->sweep_nights, o->sweep_threshold_pct,
                                   o->sweep_dir};
        st = ps_sweep_compare_open(&a, &in->g, *manifest, cmp);
        if (st == PS_OK) in->g.cmp = *cmp;
    }
    return st;
}

/* ---- cells across rank groups ---- */

typedef struct {
    const ps_cli_opts *o;
    sweep_inputs *in;
    ps_sweep_log *lg;       /* rank 0 */
    ps_sweep_progress *prog;
    double *work;           /* [cells] the estimates the hand-out ordered by */
    int searched;           /* rank 0: cells recorded by this run */
} sweep_run;

/* Each cell's estimated search work, known before searching: the sum over the search's work units of their
 * estimated DP cells (ps_search_job_unit_work; the static distribution balances units with the same figure). Listing
 * the units is a small part of a search; the ranks list a share of the cells each and add up. Done cells: 0. */
static ps_status cell_estimates(MPI_Comm comm, const sweep_inputs *in, const unsigned char *done, double **out)
{
    int rank = 0, nranks = 1, n = in->g.n_models * in->g.n_clusters;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &nranks));
    double *w = ps_calloc((size_t)n + 1, sizeof *w);
    ps_status st = w ? PS_OK : PS_FAIL(PS_ERR_SYSTEM, "out of memory for %d cell estimates", n);
    for (int cell = rank; cell < n && st == PS_OK; cell += nranks) {
        if (done[cell]) continue;
        const sweep_cluster *col = &in->cols[cell % in->g.n_clusters];
        ps_search_job *job = NULL;
        st = ps_search_job_create(&col->cp, &in->models[cell], &col->c, &col->setup.so, &job);
        int64_t units = st == PS_OK ? ps_search_job_units(job) : 0;
        for (int64_t u = 0; u < units; u++) w[cell] += ps_search_job_unit_work(job, u);
        ps_search_job_free(job);
    }
    st = ps_mpi_agree_status(comm, st, "estimating the cells' search work");
    /* one rank holds each cell's figure and the others 0: the sum is that figure exactly, the same on every rank */
    if (st == PS_OK && n > 0) st = ps_mpi_status(MPI_Allreduce(MPI_IN_PLACE, w, n, MPI_DOUBLE, MPI_SUM, comm),
                                                 "MPI_Allreduce", __FILE__, __LINE__);
    if (st != PS_OK) {
        free(w);
        return st;
    }
    *out = w;
    return PS_OK;
}

/* A group searches one cell; its rank 0 draws the best plan's timeline and builds the record, and sends both to the
 * sweep's rank 0 as one buffer: the record's JSON text (reals to 17 digits: rank 0 reads back the same doubles), a
 * NUL, the SVG (nothing for an infeasible cell). */
static ps_status run_cell(void *arg, int cell, MPI_Comm group, const ps_mpi_poll *poll, char **out, size_t *len)
{
    sweep_run *r = arg;
    const sweep_inputs *in = r->in;
    int mi = cell / in->g.n_clusters, ci = cell % in->g.n_clusters, grank = 0, gsize = 1;
    PS_MPI(MPI_Comm_rank(group, &grank));
    PS_MPI(MPI_Comm_size(group, &gsize));
    const sweep_cluster *col = &in->cols[ci];
    const ps_model *m = &in->models[cell];
    ps_search_result all;
    double secs = 0, cpu0 = ps_sweep_cpu_s();
    ps_status sst = ps_cli_search(group, &col->setup.so, r->o->distribute, poll, &col->cp, m, &col->c, &all, &secs);
    double cpu = ps_sweep_cpu_s() - cpu0;
    if (sst != PS_OK) {
        ps_search_result_free(&all);
        return sst;
    }
    if (grank != 0) {
        ps_search_result_free(&all);
        return PS_OK;
    }
    char key[2100], timeline[256] = "", *svg = NULL;
    size_t svg_len = 0;
    ps_sweep_cell_key(in->g.models[mi], in->g.clusters[ci], key, sizeof key);
    ps_status st = PS_OK;
    if (all.n_top) {
        ps_sweep_timeline_name(key, timeline, sizeof timeline);
        st = ps_plan_svg(&all.top[0].plan, &all.top[0].pred, &svg, &svg_len);
    }
    json_t *rec = st != PS_OK ? NULL
                              : cell_record(key, in->g.models[mi], in->g.clusters[ci], in->g.options[ci], m, &col->c,
                                            &all, col->setup.so.objective, timeline, gsize, secs);
    if (st == PS_OK && !rec) st = PS_FAIL(PS_ERR_SYSTEM, "out of memory building the record of %s", key);
    if (st == PS_OK) {
        /* what the hand-out ordered by, and this rank's CPU seconds (bench/scaling replays the hand-out with them) */
        json_t *sj = json_object_get(rec, "search");
        json_object_set_new(sj, "cpu_s", json_real(cpu));
        json_object_set_new(sj, "work_estimate", json_real(r->work[cell]));
    }
    char *txt = rec ? json_dumps(rec, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    if (st == PS_OK && !txt) st = PS_FAIL(PS_ERR_SYSTEM, "out of memory serializing the record of %s", key);
    if (st == PS_OK) {
        size_t tl = strlen(txt);
        char *buf = malloc(tl + 1 + svg_len + 1);
        if (!buf) {
            st = PS_FAIL(PS_ERR_SYSTEM, "out of memory sending the record of %s", key);
        } else {
            memcpy(buf, txt, tl + 1);
            if (svg_len) memcpy(buf + tl + 1, svg, svg_len);
            buf[tl + 1 + svg_len] = '\0';
            *out = buf;
            *len = tl + 1 + svg_len;
        }
    }
    free(txt);
    free(svg);
    json_decref(rec);
    ps_search_result_free(&all);
    return st;
}

/* Rank 0: a finished cell, from whichever group: its timeline written (atomically) before the record that names it,
 * the record appended, the tables re-rendered, a progress line. */
static ps_status take_cell(void *arg, int cell, const char *bytes, size_t len)
{
    sweep_run *r = arg;
    const char *dir = r->o->sweep_dir;
    size_t rl = strnlen(bytes, len);
    const char *svg = rl < len ? bytes + rl + 1 : "";
    size_t svg_len = rl < len ? len - rl - 1 : 0;
    json_t *rec = NULL;
    PS_TRY(ps_json_load_buffer(bytes, rl, "a sweep cell's record", &rec));
    ps_status st = PS_OK;
    const char *rel = ps_sweep_str(rec, "timeline_svg");
    if (svg_len && rel[0]) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, rel);
        st = ps_write_file_atomic(path, svg, svg_len);
    }
    if (st == PS_OK) st = ps_sweep_log_append(r->lg, rec);
    if (st == PS_OK) {
        r->in->g.rec[cell] = rec; /* the log keeps a reference */
        r->in->g.n_done++;
        r->searched++;
        st = ps_sweep_render(dir, &r->in->g);
    }
    if (st == PS_OK) {
        char line[512];
        cell_line(rec, line, sizeof line);
        ps_sweep_progress_cell(r->prog, line);
    }
    json_decref(rec);
    return st;
}

ps_status ps_cmd_sweep(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    /* psearch runs sweep under MPI always (ps_cli_needs_mpi), so comm is a communicator, never MPI_COMM_NULL. */
    int rank = 0, nranks = 1, stop = 0;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &nranks));
    double t0 = MPI_Wtime();
    sweep_inputs in;
    memset(&in, 0, sizeof in);
    ps_sweep_log *lg = NULL;
    unsigned char *done = NULL;
    json_t *manifest = NULL;
    ps_sweep_compare *cmp = NULL;

    ps_status st = load_inputs(o, comm, &in);
    int n_cells = in.g.n_models * in.g.n_clusters;
    if (st == PS_OK && !(done = ps_calloc((size_t)n_cells + 1, 1))) st = PS_ERR_SYSTEM;
    st = agree(comm, st, &stop);
    if (stop) goto end;

    /* Rank 0 owns the folder: records, tables, progress. */
    if (rank == 0) {
        st = compare_setup(o, &in, &manifest, &cmp);
        if (st == PS_OK) st = open_records(o, &in.g, &lg, done);
        if (st == PS_OK) st = ps_sweep_manifest_write(o->sweep_dir, manifest, in.g.n_done);
        if (st == PS_OK) st = ps_sweep_render(o->sweep_dir, &in.g);
    }
    st = agree(comm, st, &stop);
    if (stop) goto end;
    PS_TRY_GOTO(st, ps_sweep_share_done(comm, 0, done, n_cells), end);

    int already = 0;
    for (int i = 0; i < n_cells; i++) already += done[i];
    ps_sweep_progress prog;
    ps_sweep_progress_start(&prog, rank == 0, n_cells, already);
    sweep_run run = {.o = o, .in = &in, .lg = lg, .prog = &prog};
    ps_sweep_groups groups;
    memset(&groups, 0, sizeof groups);
    ps_sweep_run_stats rs;
    memset(&rs, 0, sizeof rs);
    /* every rank's busy seconds, for the summary and bench/scaling */
    double *busy = NULL, setup_s = 0;
    st = cell_estimates(comm, &in, done, &run.work);
    if (st == PS_OK) st = ps_sweep_groups_make(run.work, done, n_cells, nranks, o->group_ranks, &groups);
    if (st == PS_OK && rank == 0 && !(busy = ps_calloc(2 * (size_t)nranks, sizeof *busy))) st = PS_ERR_SYSTEM;
    st = agree(comm, st, &stop);
    setup_s = MPI_Wtime() - t0;
    if (!stop) {
        ps_sweep_cell_ops ops = {run_cell, take_cell, &run};
        st = ps_sweep_run_groups(comm, &groups, &ops, &rs, &stop);
    }
    ps_sweep_progress_end(&prog);
    int searched = run.searched;
    double mine[2] = {rs.busy_s, rs.cpu_s}; /* busy[2 r], busy[2 r + 1]: rank r's wall and CPU seconds */
    if (!stop && MPI_Gather(mine, 2, MPI_DOUBLE, busy, 2, MPI_DOUBLE, 0, comm) != MPI_SUCCESS)
        st = PS_FAIL(PS_ERR_SYSTEM, "MPI_Gather of the ranks' busy time failed");
    free(run.work);
    if (stop || st != PS_OK) {
        free(busy);
        ps_sweep_groups_free(&groups);
        goto end;
    }

    if (rank == 0) {
        int inf_total = 0;
        for (int i = 0; i < n_cells; i++)
            inf_total += in.g.rec[i] && strcmp(ps_sweep_str(in.g.rec[i], "status"), "infeasible") == 0;
        double wall = MPI_Wtime() - t0, bmax = 0, bsum = 0, cmax = 0, csum = 0;
        for (int r = 0; r < nranks; r++) {
            bmax = fmax(bmax, busy[2 * r]);
            bsum += busy[2 * r];
            cmax = fmax(cmax, busy[2 * r + 1]);
            csum += busy[2 * r + 1];
        }
        double balance = bsum > 0 ? bmax / (bsum / nranks) : 1, cbalance = csum > 0 ? cmax / (csum / nranks) : 1;
        int n_changed = 0, n_compared = 0;
        for (int i = 0; i < n_cells; i++) {
            ps_sweep_change ch;
            ps_sweep_cell_change(&in.g, i, &ch);
            n_compared += ch.compared;
            n_changed += ch.changed;
        }
        bool compared = cmp && ps_sweep_compare_prev(cmp)[0];
        if (o->format == PS_FMT_JSON) {
            json_t *opts = json_object(); /* cluster -> the options its cells ran with */
            for (int k = 0; k < in.g.n_clusters; k++)
                json_object_set_new(opts, in.g.clusters[k], json_string(in.g.options[k]));
            json_t *b = json_array(), *bc = json_array();
            for (int r = 0; r < nranks; r++) {
                json_array_append_new(b, json_real(busy[2 * r]));
                json_array_append_new(bc, json_real(busy[2 * r + 1]));
            }
            json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:o, s:[s,s,s], s:s}", "out", o->sweep_dir,
                                  "cells", n_cells, "searched", searched, "from_records", already, "infeasible",
                                  inf_total, "ranks", nranks, "wall_s", wall, "options", opts, "tables", "plans.md",
                                  "plans.csv", "index.html", "records", "cells.jsonl");
            /* how the cells were shared out and how evenly the ranks worked (docs/search.md, bench/scaling) */
            json_t *gj = json_pack("{s:i, s:i, s:f, s:f, s:o, s:f, s:o, s:f}", "groups", groups.n_groups,
                                   "shared_cells", groups.n_shared, "setup_s", setup_s, "take_s", rs.take_s,
                                   "busy_s", b, "busy_max_over_mean", balance, "busy_cpu_s", bc,
                                   "busy_cpu_max_over_mean", cbalance);
            if (j && gj) json_object_update(j, gj);
            json_decref(gj);
            /* with --compare / --history: what changed, in brief (changes.json has every cell) */
            if (j && compared)
                json_object_set_new(j, "changes",
                                    json_pack("{s:s, s:i, s:i, s:s, s:s}", "compared_with",
                                              ps_sweep_compare_prev(cmp), "changed", n_changed, "compared",
                                              n_compared, "file", PS_SWEEP_CHANGES, "inputs_differ",
                                              ps_sweep_compare_inputs_note(cmp)));
            st = ps_out_json(out, j);
        } else {
            fprintf(out->f, "# psearch sweep: %d cells (%d searched now, %d from earlier records, %d infeasible); "
                            "%d rank(s), %.2f s\n", n_cells, searched, already, inf_total, nranks, wall);
            fprintf(out->f, "# tables: %s/plans.md %s/plans.csv %s/index.html; records: %s/cells.jsonl\n",
                    o->sweep_dir, o->sweep_dir, o->sweep_dir, o->sweep_dir);
            if (searched)
                fprintf(out->f, "# %d group(s) of ranks took %d cell(s), %d cell(s) searched by all ranks; busy "
                                "time max/mean over the ranks %.2f\n", groups.n_groups, groups.n_handed,
                        groups.n_shared, balance);
            if (compared)
                fprintf(out->f, "# since %s: %d of %d cell(s) changed (%s/%s); inputs that differ: %s\n",
                        ps_sweep_compare_prev(cmp), n_changed, n_compared, o->sweep_dir, PS_SWEEP_CHANGES,
                        ps_sweep_compare_inputs_note(cmp)[0] ? ps_sweep_compare_inputs_note(cmp) : "none");
        }
    }
    free(busy);
    ps_sweep_groups_free(&groups);
end:
    ps_sweep_log_close(lg);
    ps_sweep_compare_free(cmp);
    json_decref(manifest);
    free(done);
    inputs_free(&in);
    return st;
}

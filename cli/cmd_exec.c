/* `psearch exec PLAN.json` and the execution step of `psearch --exec-top K`: resolve the backend and the shape
 * scale, run the plan with jobs/ on every rank, print measured beside predicted, and append the measurement to a
 * cost database (--record). docs/exec.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_costdb.h"
#include "ps_jobs.h"
#include "ps_comm.h"

#define GIB (1024.0 * 1024 * 1024)

/* A cluster described by a CPU calibration (--cluster costdb on a CPU machine): its "GPUs" are CPU ranks. */
static bool cluster_is_cpu(const ps_cluster *c)
{
    for (int g = 0; g < c->n_groups; g++)
        if (c->groups[g].gpus_per_node > 0 && strncmp(c->groups[g].gpu.name, "cpu:", 4) != 0) return false;
    return true;
}

/* The backend every rank can use: cuda only when every rank sees a GPU. */
static ps_status resolve_backend(const ps_cli_opts *o, MPI_Comm comm, const ps_cluster *c, const char **out)
{
    char why[256] = "";
    int have = ps_exec_backend_usable("cuda", why, sizeof why) ? 1 : 0, all = 0;
    PS_MPI(MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_MIN, comm));
    if (all == 0 && have) snprintf(why, sizeof why, "some ranks see no GPU");
    const char *want = o->backend ? o->backend : "auto";
    if (strcmp(want, "cpu") == 0 || (strcmp(want, "auto") == 0 && !all && cluster_is_cpu(c))) {
        *out = "cpu";
        return PS_OK;
    }
    if (all) {
        *out = "cuda";
        return PS_OK;
    }
    if (strcmp(want, "cuda") == 0) return PS_FAIL(PS_ERR_INPUT, "--backend cuda: %s", why);
    return PS_FAIL(PS_ERR_INPUT, "the plan is for the %s GPUs of %s, but %s; run it on the machines it plans for, or "
                                 "give --backend cpu to run its work on the CPUs with shapes scaled down (--scale)",
                   c->groups[0].gpu.name, c->name, why);
}


/* FNV-1a 64 of the plan's canonical JSON: the same plan gives the same digest in every record. */
static void plan_digest(const ps_plan *p, const ps_model *m, char *out, size_t cap)
{
    json_t *j = ps_plan_to_json(p, m);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    uint64_t h = ps_hash64(s ? s : "", s ? strlen(s) : 0, PS_HASH64_INIT);
    free(s);
    json_decref(j);
    const ps_strategy *t = &p->layer[0];
    snprintf(out, cap, "%016llx pp%d tp%d dp%d z%d %s", (unsigned long long)h, p->pp, t->tp, t->dp, t->zero,
             p->schedule);
}

ps_status ps_cli_exec(const ps_cli_opts *o, MPI_Comm comm, const ps_model *m, const ps_cluster *c,
                      const ps_cost_params *cp, const ps_plan *plan, ps_cli_exec_run *run)
{
    memset(run, 0, sizeof *run);
    int nranks = 1, rank = 0;
    PS_MPI(MPI_Comm_size(comm, &nranks));
    PS_MPI(MPI_Comm_rank(comm, &rank));
    /* Everything that can refuse the plan does so before a communicator exists. */
    PS_TRY(ps_exec_check(plan, m, c, nranks));
    PS_TRY(resolve_backend(o, comm, c, &run->backend));
    bool cpu = strcmp(run->backend, "cpu") == 0;
    run->comparable = cpu == cluster_is_cpu(c);
    /* A record feeds the refit of the devices that ran it; a CPU run of a GPU plan would fit the CPU's speed into
     * the GPU's coefficients. */
    if (o->record && !run->comparable)
        return PS_FAIL(PS_ERR_INPUT,
                       "--record keeps runs predicted for the devices that ran them, but this plan is for "
                       "the %s of %s and runs on the %s backend: on CPUs, plan and execute with "
                       "--cluster costdb --costdb site.h5 (psearch calibrate; docs/exec.md)",
                       c->groups[0].gpu.name, c->name, run->backend);
    run->scale = o->scale > 0 ? o->scale : (cpu && !cluster_is_cpu(c) ? 16 : 1);
    /* widths stay multiples of every TP degree of the plan (and of 8, for sane GEMM shapes) */
    int64_t align = 8;
    for (int64_t i = 0; i < m->n_layers; i++)
        align = align / ps_gcd64(align, plan->layer[i].tp) * plan->layer[i].tp;
    PS_TRY(ps_model_scaled(m, run->scale, run->scale > 1 ? align : 1, &run->model));
    ps_exec_opts eo;
    ps_exec_opts_default(&eo);
    eo.backend = run->backend;
    if (o->iters) eo.iters = o->iters;
    if (o->warmup >= 0) eo.warmup = o->warmup;
    if (o->watchdog > 0) eo.watchdog_s = o->watchdog;
    eo.log = rank == 0 && o->format != PS_FMT_JSON ? stderr : NULL;
    ps_exec_fault_parse(getenv("PS_EXEC_FAULT"), &eo.fault); /* tests' fault injection, no user option (docs/exec.md) */
    /* a backend without a fused attention kernel would run the attention core as its two GEMMs, so a fused layer is
     * run and predicted as an unfused one there: measured and predicted then describe the same work, and the count is
     * reported. Both backends have one (cpu: calib/attn_cpu.c; cuda: the kernel's tile products on cuBLAS) and keep
     * the plan as it is. */
    bool has_fused = ps_exec_backend_fused_attn(run->backend);
    ps_plan run_plan;
    ps_status st = ps_plan_alloc(m, plan->gbs, plan->mbs, plan->pp, plan->vpp, plan->schedule, &plan->layer[0],
                                 &run_plan);
    if (st != PS_OK) {
        ps_model_free(&run->model);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    memcpy(run_plan.cuts, plan->cuts, ((size_t)plan->pp * plan->vpp + 1) * sizeof *run_plan.cuts);
    run->fused_layers = has_fused ? 0 : ps_exec_fused_layers(plan, m, c);
    for (int64_t i = 0; i < m->n_layers; i++) {
        run_plan.layer[i] = plan->layer[i];
        /* under context parallelism the cost model prices only the fused core; exec runs it as its GEMMs in the
         * ring's or the all-to-all's steps (docs/exec.md) */
        if (ps_strategy_cp(&plan->layer[i]) <= 1 && !has_fused) run_plan.layer[i].attn = PS_ATTN_UNFUSED;
    }
    /* ps_exec_run checks the scaled plan again (scaling keeps every rule: widths stay multiples of the TP degrees) */
    st = ps_exec_run(comm, &run_plan, &run->model, c, cp, &eo, &run->r);
    ps_plan_free(&run_plan);
    if (st != PS_OK) {
        ps_model_free(&run->model);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    run->warmup = eo.warmup;

    ps_bench_measurement *w = &run->row;
    const ps_exec_result *r = &run->r;
    plan_digest(plan, m, w->plan, sizeof w->plan);
    ps_strlcpy(w->model, m->name, sizeof w->model);
    ps_strlcpy(w->cluster, c->name, sizeof w->cluster);
    /* the ranks are the cluster's devices (a record is refused otherwise): its key is the one calibration and the
     * refit group by */
    ps_strlcpy(w->device, c->groups[0].gpu.name, sizeof w->device);
    ps_strlcpy(w->backend, run->backend, sizeof w->backend);
    w->ranks = nranks;
    w->iters = r->iters;
    w->scale = (double)run->scale;
    w->compute_scale = cp->compute_scale;
    w->comm_scale = cp->comm_scale;
    w->predicted_s = r->predicted_s;
    w->measured_s = r->median_s;
    w->spread = r->spread;
    w->predicted_compute_s = r->pred_compute_s;
    w->measured_compute_s = r->compute_s;
    w->predicted_comm_s = r->pred_comm_s;
    w->measured_comm_s = r->comm_s;
    w->predicted_peak_bytes = r->pred_peak_bytes;
    w->measured_peak_bytes = r->peak_bytes;
    /* the date is stamped by ps_costdb_add_measurements when the row is written */
    return PS_OK;
}

void ps_cli_exec_run_free(ps_cli_exec_run *run)
{
    ps_exec_result_free(&run->r);
    ps_model_free(&run->model);
}

double ps_cli_err_pct(double measured, double predicted)
{
    return predicted > 0 ? 100 * (measured - predicted) / predicted : 0;
}

json_t *ps_cli_exec_json(const ps_cli_exec_run *run)
{
    const ps_exec_result *r = &run->r;
    json_t *j = json_object();
    json_object_set_new(j, "backend", json_string(run->backend));
    json_object_set_new(j, "scale", json_integer(run->scale));
    json_object_set_new(j, "executed_model", json_string(run->model.name));
    json_object_set_new(j, "fused_attention_layers_run_unfused", json_integer(run->fused_layers));
    json_object_set_new(j, "iters", json_integer(r->iters));
    json_object_set_new(j, "warmup", json_integer(run->warmup));
    json_object_set_new(j, "passes_per_iteration", json_integer(r->passes));
    json_object_set_new(j, "overlapped_allreduces_per_iteration", json_integer(r->ov_colls));
    json_object_set_new(j, "reshard_allgathers_per_iteration", json_integer(r->reshards));
    json_object_set_new(j, "tp_ring_steps_per_iteration", json_integer(r->ring_steps));
    json_object_set_new(j, "fused_attention_forwards_per_iteration", json_integer(r->fused_fwd));
    json_object_set_new(j, "fused_attention_backwards_per_iteration", json_integer(r->fused_bwd));
    json_object_set_new(j, "cp_ring_steps_per_iteration", json_integer(r->cp_ring_steps));
    json_object_set_new(j, "cp_alltoalls_per_iteration", json_integer(r->cp_alltoalls));
    json_object_set_new(j, "ep_alltoalls_per_iteration", json_integer(r->ep_alltoalls));
    json_object_set_new(j, "cp_bytes_per_iteration", json_real(r->cp_bytes));
    json_object_set_new(j, "ep_bytes_per_iteration", json_real(r->ep_bytes));
    json_object_set_new(j, "comparable", json_boolean(run->comparable));
    json_t *it = json_array();
    for (int i = 0; i < r->iters; i++) json_array_append_new(it, json_real(r->iter_s[i]));
    json_t *me = json_object();
    json_object_set_new(me, "iter_time_s", json_real(r->median_s));
    json_object_set_new(me, "p10_s", json_real(r->p10_s));
    json_object_set_new(me, "p90_s", json_real(r->p90_s));
    json_object_set_new(me, "spread", json_real(r->spread));
    json_object_set_new(me, "iterations_s", it);
    json_object_set_new(me, "compute_s", json_real(r->compute_s));
    json_object_set_new(me, "comm_s", json_real(r->comm_s));
    json_object_set_new(me, "cp_comm_s", json_real(r->cp_s));
    json_object_set_new(me, "ep_comm_s", json_real(r->ep_s));
    json_object_set_new(me, "pipeline_wait_s", json_real(r->wait_s));
    json_object_set_new(me, "peak_mem_gib", r->peak_bytes > 0 ? json_real(r->peak_bytes / GIB) : json_null());
    json_object_set_new(j, "measured", me);
    json_t *pr = json_object();
    json_object_set_new(pr, "iter_time_s", json_real(r->predicted_s));
    json_object_set_new(pr, "compute_s", json_real(r->pred_compute_s));
    json_object_set_new(pr, "comm_s", json_real(r->pred_comm_s));
    json_object_set_new(pr, "cp_comm_s", json_real(r->pred_cp_s));
    json_object_set_new(pr, "ep_comm_s", json_real(r->pred_ep_s));
    json_object_set_new(pr, "peak_mem_gib", json_real(r->pred_peak_bytes / GIB));
    json_object_set_new(j, "predicted", pr);
    json_object_set_new(j, "error_pct", json_real(ps_cli_err_pct(r->median_s, r->predicted_s)));
    json_t *st = json_array();
    for (int s = 0; s < r->n_stages; s++) {
        const ps_exec_stage *e = &r->stages[s];
        json_array_append_new(st, json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "stage", s, "fwd_s", e->f,
                                            "bwd_b_s", e->b, "bwd_w_s", e->w, "pred_fwd_s", e->pred_f, "pred_bwd_b_s",
                                            e->pred_b, "pred_bwd_w_s", e->pred_w));
    }
    json_object_set_new(j, "stages", st);
    json_object_set_new(j, "units", json_string("seconds per iteration (compute_s, comm_s, cp_comm_s, ep_comm_s, "
                                                "pipeline_wait_s: mean over ranks); stage times per micro-batch, "
                                                "slowest rank of the stage; bytes per iteration sent to other ranks, "
                                                "all ranks"));
    return j;
}

void ps_cli_exec_table(FILE *f, const ps_cli_exec_run *run, const ps_cluster *c)
{
    const ps_exec_result *r = &run->r;
    fprintf(f, "executed    %s, backend %s%s, %d timed iteration(s) after %d warm-up, %lld passes per iteration\n",
            run->model.name, run->backend,
            run->scale > 1 ? " (every width and token count divided by the scale; the prediction is of the same "
                             "scaled model)" : "",
            r->iters, run->warmup, (long long)r->passes);
    if (run->fused_layers)
        fprintf(f, "attention   %lld layer(s) of the plan use fused attention; the %s backend has no fused kernel and "
                   "runs (and predicts) them unfused\n", (long long)run->fused_layers, run->backend);
    fprintf(f, "%-24s %12s %12s %9s\n", "", "predicted", "measured", "error");
    fprintf(f, "%-24s %11.4gs %11.4gs %+8.1f%%   (p10 %.4g s, p90 %.4g s, spread %.0f%%)\n", "iteration",
            r->predicted_s, r->median_s, ps_cli_err_pct(r->median_s, r->predicted_s), r->p10_s, r->p90_s,
            100 * r->spread);
    fprintf(f, "%-24s %11.4gs %11.4gs %+8.1f%%\n", "computation per rank", r->pred_compute_s, r->compute_s,
            ps_cli_err_pct(r->compute_s, r->pred_compute_s));
    fprintf(f, "%-24s %11.4gs %11.4gs %+8.1f%%\n", "collectives per rank", r->pred_comm_s, r->comm_s,
            ps_cli_err_pct(r->comm_s, r->pred_comm_s));
    /* parts of the collectives above: context parallelism's (ring: its exposed part) and the expert grid's */
    if (r->cp_ring_steps + r->cp_alltoalls > 0)
        fprintf(f, "%-24s %11.4gs %11.4gs %+8.1f%%   (%lld %s per iteration, %.4g MB sent)\n", "  of which CP",
                r->pred_cp_s, r->cp_s, ps_cli_err_pct(r->cp_s, r->pred_cp_s),
                (long long)(r->cp_ring_steps ? r->cp_ring_steps : r->cp_alltoalls),
                r->cp_ring_steps ? "ring steps beside the attention core, exposed part" : "all-to-alls",
                r->cp_bytes / 1e6);
    if (r->ep_s > 0 || r->ep_alltoalls > 0)
        fprintf(f, "%-24s %11.4gs %11.4gs %+8.1f%%   (%lld dispatch/combine all-to-alls per iteration, %.4g MB sent)\n",
                "  of which EP", r->pred_ep_s, r->ep_s, ps_cli_err_pct(r->ep_s, r->pred_ep_s),
                (long long)r->ep_alltoalls, r->ep_bytes / 1e6);
    fprintf(f, "%-24s %12s %11.4gs\n", "pipeline waits per rank", "-", r->wait_s);
    if (r->ov_colls > 0)
        fprintf(f, "%-24s %12s %12lld   (Oases: two sub-batches, the all-reduce of one beside the other's "
                   "computation; collectives above are their exposed part)\n",
                "overlapped all-reduces", "-", (long long)r->ov_colls);
    if (r->ring_steps > 0)
        fprintf(f, "%-24s %12s %12lld   (te: SP collectives as ring send/receive steps beside GEMM pieces; "
                   "collectives above are their exposed part)\n",
                "TP ring steps", "-", (long long)r->ring_steps);
    if (r->reshards > 0)
        fprintf(f, "%-24s %12s %12lld   (all-gathers between layers of different TP layouts)\n", "reshard all-gathers",
                "-", (long long)r->reshards);
    if (r->peak_bytes > 0)
        fprintf(f, "%-24s %9.2fGiB %9.2fGiB %+8.1f%%\n", "peak memory per GPU", r->pred_peak_bytes / GIB,
                r->peak_bytes / GIB, ps_cli_err_pct(r->peak_bytes, r->pred_peak_bytes));
    else
        fprintf(f, "%-24s %9.2fGiB %12s\n", "peak memory per GPU", r->pred_peak_bytes / GIB, "not measured");
    fprintf(f, "\n%5s %10s %10s %10s %10s %10s %10s\n", "stage", "fwd pred", "fwd meas", "bwd pred", "bwd meas",
            "wgt pred", "wgt meas");
    for (int s = 0; s < r->n_stages; s++) {
        const ps_exec_stage *e = &r->stages[s];
        fprintf(f, "%5d %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms\n", s, 1e3 * e->pred_f, 1e3 * e->f,
                1e3 * e->pred_b, 1e3 * e->b, 1e3 * e->pred_w, 1e3 * e->w);
    }
    fprintf(f, "(stage times per micro-batch, slowest rank of the stage; pipeline waits include the bubble)\n");
    if (!run->comparable)
        fprintf(f, "# note: the prediction is for the %s of %s, the times were measured with the %s backend: the "
                   "error says how far this machine is from that one. For a like-for-like check, calibrate this "
                   "machine (psearch calibrate --out site.h5) and run with --cluster costdb --costdb site.h5.\n",
                c->groups[0].gpu.name, c->name, run->backend);
}

/* The plan file: read by rank 0, broadcast, parsed on every rank (messages name the file and the field). */
static ps_status read_plan_root(const ps_cli_opts *o, MPI_Comm comm, json_t **root)
{
    char *buf = NULL;
    size_t len = 0;
    PS_TRY(ps_mpi_bcast_file(comm, 0, o->exec_plan, &buf, &len));
    ps_status st = ps_json_load_buffer(buf, len, o->exec_plan, root);
    free(buf);
    /* the same bytes parse alike everywhere, but memory may fail on one rank: agree before the next collective */
    ps_status ast = ps_mpi_agree_status(comm, st, "reading the plan file");
    if (ast != PS_OK && st == PS_OK) {
        json_decref(*root);
        *root = NULL;
    }
    return ast;
}

static ps_status spec_from_plan(const json_t *root, const char *file, const char *key, const char *given,
                                const char **out)
{
    if (given) {
        *out = given;
        return PS_OK;
    }
    const char *v = json_string_value(json_object_get(root, key));
    if (!v || !*v)
        return PS_FAIL(PS_ERR_INPUT, "%s: no '%s' field to take the %s from; give --%s", file, key, key, key);
    *out = v;
    return PS_OK;
}

ps_status ps_cmd_exec(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    int rank = 0;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    ps_cost_params cp;
    json_t *root = NULL;
    PS_TRY(read_plan_root(o, comm, &root));
    const char *mspec = NULL, *cspec = NULL;
    ps_status st = spec_from_plan(root, o->exec_plan, "model", o->model, &mspec);
    if (st == PS_OK) st = spec_from_plan(root, o->exec_plan, "cluster", o->cluster, &cspec);
    if (st != PS_OK) {
        json_decref(root);
        return st;
    }
    ps_cli_opts lo = *o;
    lo.model = mspec;
    lo.cluster = cspec;
    ps_model m;
    ps_cluster c;
    ps_plan plan;
    ps_costdb_model *db = NULL;
    ps_cli_exec_run run;
    memset(&m, 0, sizeof m);
    memset(&c, 0, sizeof c);
    memset(&plan, 0, sizeof plan);
    memset(&run, 0, sizeof run);
    bool have_run = false;
    PS_TRY_GOTO(st, ps_cli_load_inputs(&lo, comm, &m, &c), done);
    PS_TRY_GOTO(st, ps_cli_cost_model(&lo, comm, &c, &cp, &db), done);
    PS_TRY_GOTO(st, ps_plan_from_json(root, o->exec_plan, &m, &plan), done);
    PS_TRY_GOTO(st, ps_cli_exec(&lo, comm, &m, &c, &cp, &plan, &run), done);
    have_run = true;
    if (rank == 0 && o->record) st = ps_costdb_add_measurements(o->record, &run.row, 1);
    st = ps_mpi_agree_status(comm, st, "recording the measurement");
    if (st != PS_OK) goto done;
    if (rank == 0) {
        if (o->format == PS_FMT_JSON) {
            json_t *j = json_object();
            json_object_set_new(j, "psearch_version", json_string(PS_VERSION));
            json_object_set_new(j, "model", json_string(m.name));
            json_object_set_new(j, "cluster", json_string(c.name));
            json_object_set_new(j, "gpus", json_integer(c.n_gpus));
            json_t *pj = ps_plan_to_json(&plan, &m);
            json_object_update(j, pj);
            json_decref(pj);
            json_object_set_new(j, "exec", ps_cli_exec_json(&run));
            if (o->record) json_object_set_new(j, "recorded_in", json_string(o->record));
            st = ps_out_json(out, j);
        } else {
            fprintf(out->f, "# psearch %s exec %s: %s on %s (%lld GPUs)\n", PS_VERSION, o->exec_plan, m.name, c.name,
                    (long long)c.n_gpus);
            const ps_strategy *s = &plan.layer[0];
            char cpx[48] = "", epx[48] = "";
            if (ps_strategy_cp(s) > 1)
                snprintf(cpx, sizeof cpx, " x cp %d (%s)", ps_strategy_cp(s), ps_cp_comm_name(s->cp_comm));
            if (ps_strategy_ep_folded(s))
                snprintf(epx, sizeof epx, ", experts ep %d x etp %d", ps_strategy_ep(s), ps_strategy_etp(s));
            fprintf(out->f,
                    "plan        tp %d%s x dp %d x pp %d%s%s, mbs %lld, gbs %lld (%lld micro-batches), schedule %s, "
                    "vpp %d\n",
                    s->tp, cpx, s->dp, plan.pp, epx,
                    ps_plan_is_uniform(&plan, m.n_layers) ? "" : " (per-layer strategies)",
                    (long long)plan.mbs, (long long)plan.gbs, (long long)ps_plan_micro_batches(&plan), plan.schedule,
                    plan.vpp);
            ps_cli_exec_table(out->f, &run, &c);
            ps_cli_costdb_note(out->f, &cp, &c);
            if (o->record) fprintf(out->f, "# measurement appended to %s\n", o->record);
        }
    }
done:
    if (have_run) ps_cli_exec_run_free(&run);
    ps_plan_free(&plan);
    ps_model_free(&m);
    ps_cluster_free(&c);
    ps_costdb_model_free(db);
    json_decref(root);
    return st;
}

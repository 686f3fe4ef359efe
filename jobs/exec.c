/* The executor: a plan's roles, communicators and pass order on the ranks of one MPI job, each pass doing its layers'
 * work through a backend, timed apart as computation, collectives and pipeline waits, beside the cost model's
 * prediction of the same work (docs/exec.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"
#include "ps_bench.h"
#include "ps_mpi.h"

static const ps_exec_backend *const k_backends[] = {
    &ps_exec_backend_cpu,
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS && PS_HAVE_NCCL
    &ps_exec_backend_cuda,
#endif
};
#define N_BACKENDS ((int)(sizeof k_backends / sizeof k_backends[0]))

int ps_exec_backend_count(void) { return N_BACKENDS; }

const char *ps_exec_backend_name(int i) { return i >= 0 && i < N_BACKENDS ? k_backends[i]->name : NULL; }

static const ps_exec_backend *find_backend(const char *name)
{
    for (int i = 0; i < N_BACKENDS; i++)
        if (strcmp(k_backends[i]->name, name) == 0) return k_backends[i];
    return NULL;
}

bool ps_exec_backend_usable(const char *name, char *why, size_t cap)
{
    const ps_exec_backend *b = find_backend(name);
    if (!b) {
        if (strcmp(name, "cuda") == 0)
            snprintf(why, cap, "psearch was built without the cuda backend (it needs CUDA, cuBLAS and NCCL)");
        else
            snprintf(why, cap, "there is no backend '%s' (known: cpu, cuda)", name);
        return false;
    }
    return b->usable(why, cap);
}

void ps_exec_opts_default(ps_exec_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "cpu";
    o->iters = 5;
    o->warmup = 1;
    o->watchdog_s = 60;
}

void ps_exec_result_free(ps_exec_result *r)
{
    free(r->iter_s);
    free(r->stages);
    free(r->trace);
    free(r->trace_from);
    free(r->trace_to);
    memset(r, 0, sizeof *r);
}

ps_status ps_exec_check(const ps_plan *plan, const ps_model *m, const ps_cluster *c, int nranks)
{
    PS_TRY(ps_plan_check(plan, m, c));
    if (c->n_gpus != nranks)
        return PS_FAIL(PS_ERR_INPUT, "the plan runs on %lld GPUs (tp %d x dp %d x pp %d on %s) but this run has %d MPI "
                                     "rank%s: start one rank per GPU (mpirun -n %lld psearch exec ...)",
                       (long long)c->n_gpus, plan->layer[0].tp, plan->layer[0].dp, plan->pp, c->name, nranks,
                       nranks == 1 ? "" : "s", (long long)c->n_gpus);
    int64_t n_mb = ps_plan_micro_batches(plan);
    ps_sched *s = NULL;
    PS_TRY(ps_sched_create(&s));
    ps_status st = ps_sched_build(s, plan->schedule, plan->pp, (int)n_mb, plan->vpp);
    ps_sched_destroy(s);
    return st;
}

/* ---- one rank's view of the plan ---- */

typedef struct {
    ps_layer_gemms g;
    ps_layer_cost pred;
    const ps_strategy *s;
    int tpi;            /* index of s->tp in the run's TP degrees */
    double act_full;    /* activation bytes of the layer without recomputation (elementwise traffic) */
    double act_sel;     /* with selective recomputation */
    double param_bytes; /* the layer's weights on one GPU of its TP group, unsharded by ZeRO */
    double grad_bytes;  /* its gradients as reduced */
} layer_job;

typedef struct {
    const ps_plan *plan;
    const ps_model *m;
    const ps_cost_params *cp;
    const ps_exec_backend *be;
    void *bs;
    ps_exec_net net;
    ps_sched *sch;
    int dev, local, width, S;
    layer_job *lj;       /* [n_layers] */
    int n_tp;
    int tps[32];
    MPI_Comm tp_comm[32], dp_comm[32];
    double *boundary;    /* [S] bytes a stage sends to the next (its last layer's output for one micro-batch) */
    double *act_mb;      /* [S] activation bytes of one micro-batch on the stage */
    /* measured in the current iteration */
    double t_comp, t_comm, t_wait;
    double *st_sum;      /* [S x 3] F, B, W pass times (computation + collectives) */
    int64_t *st_n;       /* [S x 3] */
    /* the trace of the iteration being run */
    ps_sched_pass *trace;
    int *from, *to;
    int64_t n_trace;
} exec_ctx;

static double now(void) { return MPI_Wtime(); }

static ps_status do_gemm(exec_ctx *x, const ps_gemm_shape *g, int times)
{
    double t0 = now();
    for (int i = 0; i < times; i++)
        PS_TRY(x->be->gemm(x->bs, llround(g->m), llround(g->n), llround(g->k), llround(g->count)));
    x->t_comp += now() - t0;
    return PS_OK;
}

static ps_status do_stream(exec_ctx *x, double bytes)
{
    if (bytes <= 0) return PS_OK;
    double t0 = now();
    PS_TRY(x->be->stream(x->bs, bytes));
    x->t_comp += now() - t0;
    return PS_OK;
}

static ps_status do_coll(exec_ctx *x, MPI_Comm comm, ps_exec_coll op, double bytes, const ps_exec_where *w)
{
    if (bytes <= 0) return PS_OK;
    double t0 = now();
    PS_TRY(x->be->coll(x->bs, &x->net, comm, op, bytes, w));
    x->t_comm += now() - t0;
    return PS_OK;
}

/* Megatron's TP collective of a layer output: an all-reduce, or with sequence parallelism a reduce-scatter and an
 * all-gather of the same bytes (the cost model's 2 x all-gather). */
static ps_status tp_collective(exec_ctx *x, const layer_job *l, const ps_exec_where *w)
{
    if (l->s->tp <= 1) return PS_OK;
    MPI_Comm c = x->tp_comm[l->tpi];
    if (l->s->sp && l->s->tp > 1) {
        PS_TRY(do_coll(x, c, PS_EXEC_REDUCESCATTER, l->pred.tp_bytes, w));
        return do_coll(x, c, PS_EXEC_ALLGATHER, l->pred.tp_bytes, w);
    }
    return do_coll(x, c, PS_EXEC_ALLREDUCE, l->pred.tp_bytes, w);
}

static bool zero3(const layer_job *l) { return l->s->zero >= 3 && l->s->dp > 1; }

static ps_status layer_forward(exec_ctx *x, const layer_job *l, bool recompute, ps_exec_where *w)
{
    const ps_cost_params *cp = x->cp;
    if (zero3(l) && !recompute) {
        w->what = "a ZeRO-3 weight all-gather";
        PS_TRY(do_coll(x, x->dp_comm[l->tpi], PS_EXEC_ALLGATHER, l->param_bytes, w));
    }
    for (int i = 0; i < l->g.n; i++) PS_TRY(do_gemm(x, &l->g.g[i], 1));
    PS_TRY(do_stream(x, cp->elementwise_passes * l->act_full));
    w->what = "a TP collective of the forward";
    for (int i = 0; i < l->g.tp_colls; i++) PS_TRY(tp_collective(x, l, w));
    return PS_OK;
}

static ps_status layer_backward_b(exec_ctx *x, const layer_job *l, ps_exec_where *w)
{
    const ps_cost_params *cp = x->cp;
    if (l->s->ckpt == PS_RECOMP_FULL) {
        PS_TRY(layer_forward(x, l, true, w));
    } else if (l->s->ckpt == PS_RECOMP_SELECTIVE) {
        for (int i = 0; i < l->g.n; i++)
            if (l->g.g[i].attn) PS_TRY(do_gemm(x, &l->g.g[i], 1));
        PS_TRY(do_stream(x, cp->elementwise_passes * (l->act_full - l->act_sel)));
    }
    /* input gradients: each weight GEMM once more (dgrad), the attention GEMMs twice */
    for (int i = 0; i < l->g.n; i++) PS_TRY(do_gemm(x, &l->g.g[i], l->g.g[i].attn ? 2 : 1));
    PS_TRY(do_stream(x, 2 * cp->elementwise_passes * l->act_full));
    w->what = "a TP collective of the backward";
    for (int i = 0; i < l->g.bwd_tp_colls; i++) PS_TRY(tp_collective(x, l, w));
    return PS_OK;
}

static ps_status layer_backward_w(exec_ctx *x, const layer_job *l, ps_exec_where *w)
{
    for (int i = 0; i < l->g.n; i++)
        if (!l->g.g[i].attn) PS_TRY(do_gemm(x, &l->g.g[i], 1)); /* weight gradients (wgrad) */
    if (zero3(l)) {
        w->what = "a ZeRO-3 weight all-gather of the backward";
        PS_TRY(do_coll(x, x->dp_comm[l->tpi], PS_EXEC_ALLGATHER, l->param_bytes, w));
        w->what = "a ZeRO-3 gradient reduce-scatter";
        PS_TRY(do_coll(x, x->dp_comm[l->tpi], PS_EXEC_REDUCESCATTER, l->grad_bytes, w));
    }
    return PS_OK;
}

static int peer_rank(const exec_ctx *x, int stage) { return ps_sched_device_of(x->sch, stage) * x->width + x->local; }

static int msg_tag(const exec_ctx *x, int mb, int stage, int dir) { return (mb * x->S + stage) * 2 + dir; }

/* One pass of the schedule: receive its input, run its layers, send its output. */
static ps_status run_pass(exec_ctx *x, const ps_sched_pass *p)
{
    const ps_plan *plan = x->plan;
    int s = ps_sched_stage_of(x->sch, x->dev, p->chunk);
    int64_t lo = plan->cuts[s], hi = plan->cuts[s + 1];
    ps_exec_where w = {.op = p->op, .mb = p->mb, .chunk = p->chunk, .stage = s, .peer = -1};
    int from = -1, to = -1;
    int64_t slot = (int64_t)p->mb * ps_sched_chunks(x->sch) + p->chunk;
    bool prev_remote = s > 0 && ps_sched_device_of(x->sch, s - 1) != x->dev;
    bool next_remote = s + 1 < x->S && ps_sched_device_of(x->sch, s + 1) != x->dev;

    if (p->op == PS_SCHED_F && prev_remote) {
        from = peer_rank(x, s - 1);
        w.what = "the forward activation";
        w.peer = from;
        double t0 = now();
        PS_TRY(x->be->recv(x->bs, &x->net, from, msg_tag(x, p->mb, s, 0), x->boundary[s - 1], &w));
        x->t_wait += now() - t0;
        w.peer = -1;
    }
    if ((p->op == PS_SCHED_B || p->op == PS_SCHED_BW) && next_remote) {
        from = peer_rank(x, s + 1);
        w.what = "the activation gradient";
        w.peer = from;
        double t0 = now();
        PS_TRY(x->be->recv(x->bs, &x->net, from, msg_tag(x, p->mb, s, 1), x->boundary[s], &w));
        x->t_wait += now() - t0;
        w.peer = -1;
    }

    double c0 = x->t_comp + x->t_comm;
    if (p->op == PS_SCHED_F) {
        PS_TRY(x->be->hold(x->bs, slot, x->act_mb[s]));
        for (int64_t i = lo; i < hi; i++) PS_TRY(layer_forward(x, &x->lj[i], false, &w));
    }
    if (p->op == PS_SCHED_B || p->op == PS_SCHED_BW) {
        for (int64_t i = hi - 1; i >= lo; i--) PS_TRY(layer_backward_b(x, &x->lj[i], &w));
    }
    double c1 = x->t_comp + x->t_comm;
    if (p->op == PS_SCHED_W || p->op == PS_SCHED_BW) {
        for (int64_t i = hi - 1; i >= lo; i--) PS_TRY(layer_backward_w(x, &x->lj[i], &w));
        x->be->release(x->bs, slot);
    }
    double c2 = x->t_comp + x->t_comm;
    if (p->op == PS_SCHED_F) {
        x->st_sum[s * 3 + 0] += c1 - c0;
        x->st_n[s * 3 + 0]++;
    } else {
        if (p->op != PS_SCHED_W) {
            x->st_sum[s * 3 + 1] += c1 - c0;
            x->st_n[s * 3 + 1]++;
        }
        if (p->op != PS_SCHED_B) {
            x->st_sum[s * 3 + 2] += c2 - c1;
            x->st_n[s * 3 + 2]++;
        }
    }

    if (p->op == PS_SCHED_F && next_remote) {
        to = peer_rank(x, s + 1);
        w.what = "sending the forward activation";
        double t0 = now();
        PS_TRY(x->be->send(x->bs, &x->net, to, msg_tag(x, p->mb, s + 1, 0), x->boundary[s], &w));
        x->t_wait += now() - t0; /* pipeline traffic: apart from the collectives, as in the prediction */
    }
    if ((p->op == PS_SCHED_B || p->op == PS_SCHED_BW) && prev_remote) {
        to = peer_rank(x, s - 1);
        w.what = "sending the activation gradient";
        double t0 = now();
        PS_TRY(x->be->send(x->bs, &x->net, to, msg_tag(x, p->mb, s - 1, 1), x->boundary[s - 1], &w));
        x->t_wait += now() - t0;
    }
    x->trace[x->n_trace] = *p;
    x->from[x->n_trace] = from;
    x->to[x->n_trace] = to;
    x->n_trace++;
    return PS_OK;
}

/* After the last backward: data-parallel gradient synchronisation of every layer the rank holds (ZeRO 0: all-reduce;
 * 1-2: reduce-scatter of gradients and all-gather of the updated weights; 3 did it per micro-batch), then the
 * optimizer's pass over weights, gradients and states. */
static ps_status iteration_tail(exec_ctx *x, double static_bytes)
{
    ps_exec_where w = {.what = "the data-parallel gradient synchronisation", .op = -1, .peer = -1};
    for (int c = 0; c < ps_sched_chunks(x->sch); c++) {
        int s = ps_sched_stage_of(x->sch, x->dev, c);
        for (int64_t i = x->plan->cuts[s]; i < x->plan->cuts[s + 1]; i++) {
            const layer_job *l = &x->lj[i];
            if (l->s->dp <= 1 || l->s->zero >= 3) continue;
            MPI_Comm dc = x->dp_comm[l->tpi];
            if (l->s->zero == 0) {
                PS_TRY(do_coll(x, dc, PS_EXEC_ALLREDUCE, l->grad_bytes, &w));
            } else {
                PS_TRY(do_coll(x, dc, PS_EXEC_REDUCESCATTER, l->grad_bytes, &w));
                PS_TRY(do_coll(x, dc, PS_EXEC_ALLGATHER, l->param_bytes, &w));
            }
        }
    }
    return do_stream(x, 2 * static_bytes);
}

/* ---- set-up ---- */

static ps_status build_layers(exec_ctx *x, const ps_cluster *c, const ps_prediction *pred)
{
    const ps_plan *plan = x->plan;
    const ps_model *m = x->m;
    int64_t n_mb = ps_plan_micro_batches(plan), global_mb = plan->gbs / n_mb;
    double elt = ps_dtype_bytes(m->dtype);
    x->lj = ps_calloc((size_t)m->n_layers, sizeof *x->lj);
    x->boundary = ps_calloc((size_t)x->S, sizeof *x->boundary);
    x->act_mb = ps_calloc((size_t)x->S, sizeof *x->act_mb);
    if (!x->lj || !x->boundary || !x->act_mb) return PS_ERR_SYSTEM;
    for (int s = 0; s < x->S; s++) {
        int64_t first = (int64_t)ps_sched_device_of(x->sch, s) * x->width;
        x->act_mb[s] = pred->stages[s].mem_act_per_mb;
        for (int64_t i = plan->cuts[s]; i < plan->cuts[s + 1]; i++) {
            layer_job *l = &x->lj[i];
            const ps_layer *ly = &m->layers[i];
            l->s = &plan->layer[i];
            int64_t mbs = global_mb / l->s->dp;
            ps_layer_gemm_shapes(ly, mbs, l->s->tp, &l->g);
            PS_TRY(ps_cost_layer(x->cp, c, ly, m->dtype, mbs, l->s, first, &l->pred));
            bool sp = l->s->sp && l->s->tp > 1;
            l->act_full = ps_layer_act_bytes(ly, m->dtype, l->s->tp, sp, PS_RECOMP_NONE) * (double)mbs;
            l->act_sel = ps_layer_act_bytes(ly, m->dtype, l->s->tp, sp, PS_RECOMP_SELECTIVE) * (double)mbs;
            /* the cost model's weights per GPU, before the ZeRO-3 shard it divides them by */
            l->param_bytes = l->pred.mem_params * (l->s->zero >= 3 ? l->s->dp : 1);
            l->grad_bytes = l->param_bytes / elt * x->cp->grad_reduce_bytes;
            l->tpi = -1;
            for (int k = 0; k < x->n_tp; k++)
                if (x->tps[k] == l->s->tp) l->tpi = k;
            if (l->tpi < 0) return PS_FAIL(PS_ERR_SYSTEM, "layer %lld: TP degree %d has no communicator", (long long)i,
                                           l->s->tp);
        }
        x->boundary[s] = pred->stages[s].p2p_bytes; /* the cost model's message, 0 after the last stage */
    }
    return PS_OK;
}

/* The largest buffers of this rank's layers. */
static void rank_needs(const exec_ctx *x, ps_exec_need *need, double *static_bytes)
{
    memset(need, 0, sizeof *need);
    *static_bytes = 0;
    for (int c = 0; c < ps_sched_chunks(x->sch); c++) {
        int s = ps_sched_stage_of(x->sch, x->dev, c);
        if (s > 0 && x->boundary[s - 1] > need->p2p) need->p2p = x->boundary[s - 1];
        if (x->boundary[s] > need->p2p) need->p2p = x->boundary[s];
        for (int64_t i = x->plan->cuts[s]; i < x->plan->cuts[s + 1]; i++) {
            const layer_job *l = &x->lj[i];
            for (int g = 0; g < l->g.n; g++) {
                const ps_gemm_shape *sh = &l->g.g[g];
                need->gemm_a = fmax(need->gemm_a, 4 * sh->m * sh->k);
                need->gemm_b = fmax(need->gemm_b, 4 * sh->k * sh->n);
                need->gemm_c = fmax(need->gemm_c, 4 * sh->m * sh->n);
            }
            need->stream = fmax(need->stream, 2 * x->cp->elementwise_passes * l->act_full);
            need->coll = fmax(need->coll, fmax(l->pred.tp_bytes, fmax(l->param_bytes, l->grad_bytes)));
            *static_bytes += l->pred.mem_params + l->pred.mem_grads + l->pred.mem_optim;
        }
    }
    /* the optimizer's pass streams its states in chunks of the triad arrays: no need to size them to the states */
    need->stream = fmax(need->stream, 1 << 20);
    /* a collective's element count is rounded up to a multiple of its group (every member a whole shard, comm_mpi.c):
     * room for one more element per member of the largest group, the stage */
    need->coll += 4.0 * x->width;
    need->static_bytes = *static_bytes;
}

static ps_status make_comms(exec_ctx *x)
{
    /* free_ctx frees every handle of the n_tp degrees seen, also when a split below fails */
    for (int k = 0; k < (int)(sizeof x->tps / sizeof x->tps[0]); k++) x->tp_comm[k] = x->dp_comm[k] = MPI_COMM_NULL;
    const ps_plan *plan = x->plan;
    for (int64_t i = 0; i < x->m->n_layers; i++) {
        int t = plan->layer[i].tp, k = 0;
        while (k < x->n_tp && x->tps[k] != t) k++;
        if (k == x->n_tp) {
            if (x->n_tp == (int)(sizeof x->tps / sizeof x->tps[0]))
                return PS_FAIL(PS_ERR_INPUT, "the plan uses more than %d TP degrees", x->n_tp);
            x->tps[x->n_tp++] = t;
        }
    }
    /* ascending, so every rank creates the communicators in one order (MPI_Comm_split is collective) */
    for (int a = 1; a < x->n_tp; a++)
        for (int b = a; b > 0 && x->tps[b - 1] > x->tps[b]; b--) {
            int t = x->tps[b];
            x->tps[b] = x->tps[b - 1];
            x->tps[b - 1] = t;
        }
    for (int k = 0; k < x->n_tp; k++) {
        int t = x->tps[k];
        /* TP innermost: t consecutive ranks of a stage; DP: the ranks of the stage at stride t (the cost model's
         * placement, ps_cost_layer) */
        PS_MPI(MPI_Comm_split(x->net.world, x->net.rank / t, x->net.rank, &x->tp_comm[k]));
        PS_MPI(MPI_Comm_split(x->net.world, x->dev * t + x->local % t, x->net.rank, &x->dp_comm[k]));
        PS_MPI(MPI_Comm_set_errhandler(x->tp_comm[k], MPI_ERRORS_RETURN));
        PS_MPI(MPI_Comm_set_errhandler(x->dp_comm[k], MPI_ERRORS_RETURN));
    }
    return PS_OK;
}

static void free_ctx(exec_ctx *x)
{
    if (x->be && x->bs) x->be->close(x->bs);
    for (int k = 0; k < x->n_tp; k++) {
        if (x->tp_comm[k] != MPI_COMM_NULL) MPI_Comm_free(&x->tp_comm[k]);
        if (x->dp_comm[k] != MPI_COMM_NULL) MPI_Comm_free(&x->dp_comm[k]);
    }
    if (x->net.world != MPI_COMM_NULL) MPI_Comm_free(&x->net.world);
    ps_sched_destroy(x->sch);
    free(x->lj);
    free(x->boundary);
    free(x->act_mb);
    free(x->st_sum);
    free(x->st_n);
    free(x->trace);
    free(x->from);
    free(x->to);
}

/* The cost model's computation and collectives for this rank's passes of one iteration, its DP synchronisation and
 * its optimizer pass: the work run_pass and iteration_tail do, priced instead of run. */
static void predict_rank(const exec_ctx *x, const ps_sched_pass *passes, int64_t count, double opt_s, double *comp,
                         double *comm)
{
    *comp = opt_s;
    *comm = 0;
    for (int64_t k = 0; k < count; k++) {
        const ps_sched_pass *p = &passes[k];
        int s = ps_sched_stage_of(x->sch, x->dev, p->chunk);
        for (int64_t i = x->plan->cuts[s]; i < x->plan->cuts[s + 1]; i++) {
            const ps_layer_cost *c = &x->lj[i].pred;
            if (p->op == PS_SCHED_F) {
                *comp += c->comp_fwd;
                *comm += c->comm_fwd;
            }
            if (p->op == PS_SCHED_B || p->op == PS_SCHED_BW) {
                *comp += c->comp_bwd_b;
                *comm += c->comm_bwd_b;
            }
            if (p->op == PS_SCHED_W || p->op == PS_SCHED_BW) {
                *comp += c->comp_bwd_w;
                *comm += c->comm_bwd_w;
            }
        }
    }
    for (int ch = 0; ch < ps_sched_chunks(x->sch); ch++) {
        int s = ps_sched_stage_of(x->sch, x->dev, ch);
        for (int64_t i = x->plan->cuts[s]; i < x->plan->cuts[s + 1]; i++) *comm += x->lj[i].pred.dp_sync;
    }
}

static ps_status run_iteration(exec_ctx *x, const ps_sched_pass *passes, int64_t count, double static_bytes,
                               double *dt)
{
    ps_exec_where w = {.what = "every rank to start the iteration (a barrier)", .op = -1, .peer = -1};
    MPI_Request req;
    PS_MPI(MPI_Ibarrier(x->net.world, &req));
    PS_TRY(ps_exec_mpi_wait(&x->net, &req, &w));
    x->n_trace = 0;
    double t0 = now();
    for (int64_t i = 0; i < count; i++) PS_TRY(run_pass(x, &passes[i]));
    double f0 = now();
    PS_TRY(x->be->flush(x->bs, &x->net));
    x->t_wait += now() - f0;
    PS_TRY(iteration_tail(x, static_bytes));
    PS_TRY(x->be->sync(x->bs));
    *dt = now() - t0;
    return PS_OK;
}

ps_status ps_exec_run(MPI_Comm comm, const ps_plan *plan, const ps_model *m, const ps_cluster *c,
                      const ps_cost_params *cp, const ps_exec_opts *o, ps_exec_result *r)
{
    memset(r, 0, sizeof *r);
    exec_ctx X, *x = &X;
    memset(x, 0, sizeof *x);
    x->net.world = MPI_COMM_NULL;
    x->plan = plan;
    x->m = m;
    x->cp = cp;
    x->be = find_backend(o->backend);
    if (!x->be) return PS_FAIL(PS_ERR_INPUT, "unknown exec backend '%s'", o->backend);
    int nranks = 0, rank = 0;
    PS_MPI(MPI_Comm_size(comm, &nranks));
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_TRY(ps_exec_check(plan, m, c, nranks));

    ps_status st = PS_OK;
    ps_prediction pred;
    memset(&pred, 0, sizeof pred);
    PS_TRY_GOTO(st, ps_sched_create(&x->sch), done);
    /* the prediction builds the schedule into x->sch: the order run below is the one the prediction simulated */
    PS_TRY_GOTO(st, ps_cost_plan_ws(cp, m, c, plan, x->sch, &pred), done);
    PS_MPI_GOTO(st, MPI_Comm_dup(comm, &x->net.world), done);
    PS_MPI_GOTO(st, MPI_Comm_set_errhandler(x->net.world, MPI_ERRORS_RETURN), done);
    x->net.rank = rank;
    x->net.nranks = nranks;
    x->net.watchdog_s = o->watchdog_s > 0 ? o->watchdog_s : 60;
    x->net.fault_skip_send = -1;
    const char *fault = getenv("PS_EXEC_FAULT");
    if (fault && strncmp(fault, "skip-send:", 10) == 0) x->net.fault_skip_send = atoi(fault + 10);
    x->width = plan->layer[0].tp * plan->layer[0].dp;
    x->dev = rank / x->width;
    x->local = rank % x->width;
    x->S = plan->pp * plan->vpp;
    {
        int64_t n_mb = ps_plan_micro_batches(plan);
        void *ub = NULL;
        int flag = 0;
        PS_MPI_GOTO(st, MPI_Comm_get_attr(x->net.world, MPI_TAG_UB, &ub, &flag), done);
        int64_t top = (n_mb * x->S) * 2 + 2;
        if (flag && top > *(int *)ub) {
            st = PS_FAIL(PS_ERR_INPUT, "%lld micro-batches x %d stages need message tags up to %lld; this MPI allows %d",
                         (long long)n_mb, x->S, (long long)top, *(int *)ub);
            goto done;
        }
    }
    PS_TRY_GOTO(st, make_comms(x), done);
    /* From here every failure is agreed before the next collective, so no rank is left waiting in one. */
    st = build_layers(x, c, &pred);
    ps_exec_need need;
    double static_bytes = 0;
    int64_t count = 0;
    const ps_sched_pass *passes = ps_sched_device_passes(x->sch, x->dev, &count);
    if (st == PS_OK) {
        rank_needs(x, &need, &static_bytes);
        need.dtype = (int)m->dtype;
        x->st_sum = ps_calloc((size_t)x->S * 3, sizeof *x->st_sum);
        x->st_n = ps_calloc((size_t)x->S * 3, sizeof *x->st_n);
        x->trace = ps_calloc((size_t)count + 1, sizeof *x->trace);
        x->from = ps_calloc((size_t)count + 1, sizeof *x->from);
        x->to = ps_calloc((size_t)count + 1, sizeof *x->to);
        r->iter_s = ps_calloc((size_t)o->iters + 1, sizeof *r->iter_s);
        r->stages = ps_calloc((size_t)x->S, sizeof *r->stages);
        if (!x->st_sum || !x->st_n || !x->trace || !x->from || !x->to || !r->iter_s || !r->stages)
            st = PS_ERR_SYSTEM;
    }
    /* A backend that cannot open on one rank (memory) fails the run on all, before any pass. */
    if (st == PS_OK) st = x->be->open(&need, &x->net, &x->bs);
    PS_TRY_GOTO(st, ps_mpi_agree_status(x->net.world, st, "setting up the execution"), done);
    /* binding is collective per communicator (the cuda backend builds an NCCL communicator): agree after each */
    for (int k = 0; k < 2 * x->n_tp; k++) {
        MPI_Comm cm = k % 2 ? x->dp_comm[k / 2] : x->tp_comm[k / 2];
        PS_TRY_GOTO(st, ps_mpi_agree_status(x->net.world, x->be->bind(x->bs, &x->net, cm), "binding a communicator"),
                    done);
    }

    double p_comp = 0, p_comm = 0;
    {
        predict_rank(x, passes, count, pred.stages[ps_sched_stage_of(x->sch, x->dev, 0)].opt_s, &p_comp, &p_comm);
    }

    if (o->log && rank == 0)
        fprintf(o->log, "# exec: %d rank(s), backend %s, %d warm-up + %d timed iteration(s), %lld passes on rank 0\n",
                nranks, x->be->name, o->warmup, o->iters, (long long)count);
    double comp = 0, comm_t = 0, wait = 0;
    for (int it = 0; it < o->warmup + o->iters && st == PS_OK; it++) {
        bool timed = it >= o->warmup;
        x->t_comp = x->t_comm = x->t_wait = 0;
        double dt = 0;
        st = run_iteration(x, passes, count, static_bytes, &dt);
        if (st != PS_OK) break;
        if (timed) {
            comp += x->t_comp;
            comm_t += x->t_comm;
            wait += x->t_wait;
            r->iter_s[it - o->warmup] = dt;
            if (o->log && rank == 0) fprintf(o->log, "# iteration %d: %.4g s on rank 0\n", it - o->warmup + 1, dt);
        } else { /* warm-up passes do not count in the stage times */
            memset(x->st_sum, 0, (size_t)x->S * 3 * sizeof *x->st_sum);
            memset(x->st_n, 0, (size_t)x->S * 3 * sizeof *x->st_n);
        }
    }
    /* A rank that failed (its watchdog, MPI) stopped; the others stop at their own watchdog or finish: all meet here. */
    PS_TRY_GOTO(st, ps_mpi_agree_status(x->net.world, st, "executing the plan"), done);
    /* an iteration's time is its slowest rank's */
    PS_MPI_GOTO(st, MPI_Allreduce(MPI_IN_PLACE, r->iter_s, o->iters, MPI_DOUBLE, MPI_MAX, x->net.world), done);

    /* ---- results on every rank ---- */
    r->iters = o->iters;
    {
        double *sorted = ps_calloc((size_t)o->iters, sizeof *sorted);
        if (!sorted) {
            st = PS_ERR_SYSTEM;
            goto done;
        }
        memcpy(sorted, r->iter_s, (size_t)o->iters * sizeof *sorted);
        /* the calibration's statistics: median, p10, p90 and spread = (p90 - p10) / median */
        ps_bench_stat bs = ps_bench_stats(sorted, o->iters);
        r->median_s = bs.median;
        r->p10_s = bs.p10;
        r->p90_s = bs.p90;
        r->spread = bs.spread;
        free(sorted);
    }
    double mine[5] = {comp / o->iters, comm_t / o->iters, wait / o->iters, p_comp, p_comm};
    double sum[5];
    PS_MPI_GOTO(st, MPI_Allreduce(mine, sum, 5, MPI_DOUBLE, MPI_SUM, x->net.world), done);
    r->compute_s = sum[0] / nranks;
    r->comm_s = sum[1] / nranks;
    r->wait_s = sum[2] / nranks;
    r->pred_compute_s = sum[3] / nranks;
    r->pred_comm_s = sum[4] / nranks;
    r->predicted_s = pred.iter_time_s;
    r->pred_peak_bytes = ps_prediction_peak(&pred);
    double peak = x->be->peak_bytes(x->bs), peak_all = 0;
    PS_MPI_GOTO(st, MPI_Allreduce(&peak, &peak_all, 1, MPI_DOUBLE, MPI_MAX, x->net.world), done);
    r->peak_bytes = peak_all;
    {
        double *mean = ps_calloc((size_t)x->S * 3 * 2, sizeof *mean);
        if (!mean) {
            st = PS_ERR_SYSTEM;
            goto done;
        }
        for (int i = 0; i < x->S * 3; i++) mean[i] = x->st_n[i] ? x->st_sum[i] / (double)x->st_n[i] : 0;
        PS_MPI_GOTO(st, MPI_Allreduce(mean, mean + x->S * 3, x->S * 3, MPI_DOUBLE, MPI_MAX, x->net.world), done_mean);
        r->n_stages = x->S;
        for (int s = 0; s < x->S; s++) {
            ps_exec_stage *e = &r->stages[s];
            e->f = mean[x->S * 3 + s * 3];
            e->b = mean[x->S * 3 + s * 3 + 1];
            e->w = mean[x->S * 3 + s * 3 + 2];
            e->pred_f = pred.stages[s].fwd;
            e->pred_b = pred.stages[s].bwd_b;
            e->pred_w = pred.stages[s].bwd_w;
        }
    done_mean:
        free(mean);
        if (st != PS_OK) goto done;
    }
    int64_t n_all = 0, mine_n = x->n_trace;
    PS_MPI_GOTO(st, MPI_Allreduce(&mine_n, &n_all, 1, MPI_INT64_T, MPI_SUM, x->net.world), done);
    r->passes = n_all;
    r->device = x->dev;
    r->local = x->local;
    r->n_trace = x->n_trace;
    r->trace = x->trace;
    r->trace_from = x->from;
    r->trace_to = x->to;
    x->trace = NULL;
    x->from = x->to = NULL;

done:
    ps_prediction_free(&pred);
    free_ctx(x);
    if (st != PS_OK) {
        ps_exec_result_free(r);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

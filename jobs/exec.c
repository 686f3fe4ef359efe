/* The executor: a plan's roles, communicators and pass order on the ranks of one MPI job, each pass doing its layers'
 * work through a backend, timed apart as computation, collectives and pipeline waits, beside the cost model's
 * prediction of the same work (docs/exec.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec_internal.h"
#include "ps_calib.h"
#include "ps_comm.h"

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

bool ps_exec_backend_fused_attn(const char *name)
{
    const ps_exec_backend *b = find_backend(name);
    return b && b->attn;
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

void ps_exec_fault_parse(const char *spec, ps_exec_fault *f)
{
    static const struct {
        const char *prefix;
        ps_exec_fault_kind kind;
    } k_faults[] = {
        {"skip-send:", PS_EXEC_FAULT_SKIP_SEND},
        {"fail-setup:", PS_EXEC_FAULT_SETUP},
        {"fail-open:", PS_EXEC_FAULT_OPEN},
    };
    f->kind = PS_EXEC_FAULT_NONE;
    f->rank = -1;
    for (size_t i = 0; spec && i < sizeof k_faults / sizeof k_faults[0]; i++) {
        size_t n = strlen(k_faults[i].prefix);
        if (strncmp(spec, k_faults[i].prefix, n) == 0) {
            f->kind = k_faults[i].kind;
            f->rank = atoi(spec + n);
        }
    }
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

int64_t ps_exec_fused_layers(const ps_plan *plan, const ps_model *m, const ps_cluster *c)
{
    int64_t n = 0;
    /* a context-parallel layer needs the fused kernel (the cost model prices nothing else under cp): exec runs its
     * core as the two GEMMs, split in the ring's or the all-to-all's way (docs/exec.md) */
    for (int64_t i = 0; i < m->n_layers; i++)
        n += ps_layer_has_attention(m->layers[i].kind) && ps_strategy_cp(&plan->layer[i]) <= 1 &&
             ps_cost_attn(c, 0, c->n_gpus, plan->layer[i].attn) == PS_ATTN_FUSED;
    return n;
}

ps_status ps_exec_check(const ps_plan *plan, const ps_model *m, const ps_cluster *c, int nranks)
{
    PS_TRY(ps_plan_check(plan, m, c));
    if (c->n_gpus != nranks)
        return PS_FAIL(PS_ERR_INPUT, "the plan runs on %lld GPUs (tp %d x cp %d x dp %d x pp %d on %s) but this run "
                                     "has %d MPI rank%s: start one rank per GPU (mpirun -n %lld psearch exec ...)",
                       (long long)c->n_gpus, plan->layer[0].tp, ps_strategy_cp(&plan->layer[0]), plan->layer[0].dp,
                       plan->pp, c->name, nranks,
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
    int c_tp, c_dp;     /* its TP and DP groups: indices in exec_ctx.comm */
    int c_ov;           /* the duplicate of its TP group for overlapped all-reduces and te's ring steps, -1: not
                           overlapped */
    double act_full;    /* activation bytes of the layer without recomputation (elementwise traffic) */
    double act_sel;     /* with selective recomputation */
    /* recompute op (torchtitan's per-op checkpointing): the linear layers whose outputs were not kept, as the
     * backward recomputes them (ps_op_sac_keeps) */
    ps_gemm_shape op_rec[PS_LINEARS_MAX];
    int n_op_rec;
    double param_bytes; /* the layer's weights on one GPU of its TP group, unsharded by ZeRO */
    double grad_bytes;  /* its gradients as reduced */
    /* overlapped TP (Oases): the two sub-batches' shapes and their blocks of the forward and the backward */
    bool ov;
    bool te;            /* Transformer Engine's TP overlap: SP collectives as ring steps between GEMM pieces */
    ps_layer_gemms og[2];
    ps_ov_pass ovp[2][2]; /* [sub-batch][PS_OV_FWD / PS_OV_BWD] */
    /* resharding from the previous layer of the stage (ps_cost_reshard_group): passes, payload, communicator
     * (index in exec_ctx.comm, -1: none), and the cost model's times of the forward and backward all-gather */
    int rs_dirs, c_rs;
    double rs_bytes, rs_pf, rs_pb;
    /* context parallelism (cp > 1, an attention layer): its core on the CP group (cp members at stride tp), as
     * cp_attention (cost/layer_cost.c) prices it: ring: cp steps, each 1/cp of the core beside one K/V (backward:
     * K/V and dK/dV) transfer to the next member; a2a: all-to-alls of Q, K, V and of the output around the core */
    int cp;             /* 1: none */
    bool cp_a2a;
    bool fused;         /* priced as the fused kernel (what cp needs): selective recomputation repeats nothing */
    /* outside cp, a fused layer's attention pairs run as the backend's fused kernel (its attn op): local heads,
     * local key/value heads (grouped-query attention when they divide the heads, else as many as the heads: the same
     * FLOPs), and the causal mask of the self-attention pair */
    bool fused_core;
    int64_t a_heads, a_kv;
    bool a_causal;
    int c_cp;
    double cp_kv;       /* ring: one K/V block, k and v of the GPU's tokens [bytes] */
    double cp_qkv, cp_o; /* a2a: a GPU's buffer of Q, K, V and of the output [bytes] */
    /* expert parallelism (an MoE block on the expert grid, ps_strategy_ep_folded): dispatch and combine over the ep
     * group (ep members at stride etp), all-gather and reduce-scatter over the etp group, expert gradients over the
     * edp group (stride ep x etp) */
    bool ep_on;
    int ep, etp, edp, ep_idx; /* ep_idx: this rank's place in its ep group */
    int c_ep, c_etp, c_edp;
    double ep_mean;     /* the mean GPU's dispatch buffer (ep_exchange's buf before the load) [bytes] */
    double ep_load;     /* the busiest rank's share over the mean (ps_cost_ep_rank_load), at most ep */
    double eparam_bytes, egrad_bytes; /* the experts' weights and gradients on this GPU (param/grad_bytes: the rest) */
} layer_job;

/* Named limits of one plan: the distinct TP degrees and resharding group shapes it may use, so that the
 * communicators' records fit in the context without an allocation. */
enum { MAX_TP_DEGREES = 32, MAX_GROUP_SHAPES = 32, MAX_COMMS = 3 * MAX_TP_DEGREES + MAX_GROUP_SHAPES };

/* What a communicator is for. Per TP degree of the plan: its TP group, its DP group and, when an overlapped layer has
 * that degree, a duplicate of the TP group for the overlapped all-reduces (Oases' second stream: NCCL runs one
 * communicator's work in order, so a separate one runs beside the TP group's); per group shape (n members at a
 * stride) that a resharding (ps_cost_reshard_group), a CP group or a group of the expert grid (ep, etp, edp) needs:
 * its group, one communicator for every use of the shape. */
typedef enum { COMM_TP, COMM_DP, COMM_TP_OV, COMM_GROUP } comm_kind;

/* One communicator: what it is for, how it is made, its handle. plan_comms fills the records (local: every rank
 * holds the same records in the same order, only the colors differ); create_comms makes them in array order and the
 * backend binds them in that order (both collective); free_ctx frees them in that order. */
typedef struct {
    comm_kind kind;
    int tp;        /* the TP degree (TP, DP, overlapped TP) */
    int n, stride; /* the group's shape: members, and their distance in ranks (COMM_GROUP) */
    int dup_of;    /* the record this one duplicates, or -1: a split of the world by color */
    int color;     /* this rank's group (key: its world rank) */
    MPI_Comm comm; /* MPI_COMM_NULL until created */
} exec_comm;

typedef struct {
    const ps_plan *plan;
    const ps_model *m;
    const ps_cost_params *cp;
    const ps_exec_backend *be;
    ps_exec_fault fault; /* the test hook (ps_exec_opts) */
    void *bs;
    ps_exec_net net;
    ps_sched *sch;
    ps_prediction pred;  /* the cost model's for the plan, built with sch */
    int dev, local, width, S;
    layer_job *lj;       /* [n_layers] */
    exec_comm comm[MAX_COMMS];
    int n_comm;
    double *boundary;    /* [S] bytes a stage sends to the next (its last layer's output for one micro-batch) */
    double *act_mb;      /* [S] activation bytes of one micro-batch on the stage */
    /* this rank's work: its passes, the buffers they need, the cost model's computation and collectives for them */
    const ps_sched_pass *passes;
    int64_t count;
    ps_exec_need need;
    double static_bytes;
    double p_comp, p_comm;
    /* measured in the current iteration */
    double t_comp, t_comm, t_wait;
    int64_t n_icoll, n_reshard; /* overlapped all-reduces started, resharding all-gathers run */
    int64_t n_ring;             /* te's ring steps started */
    double t_cp, t_ep;          /* the part of t_comm that is CP's, EP's */
    int64_t n_cp_ring, n_cp_a2a, n_ep_a2a;
    int64_t n_fused_f, n_fused_b; /* fused attention kernels run, forward and backward */
    double stream_b;              /* elementwise and optimizer bytes streamed (do_stream) */
    double cp_bytes, ep_bytes, ep_recv; /* sent to other ranks; received by the EP all-to-alls */
    double cp_t, ep_t;          /* t_cp, t_ep summed over the timed iterations */
    double p_cp, p_ep;          /* the cost model's for this rank's passes */
    double *st_sum;      /* [S x 3] F, B, W pass times (computation + collectives) */
    int64_t *st_n;       /* [S x 3] */
    /* summed over the timed iterations */
    double comp, comm_t, wait;
    /* the trace of the iteration being run */
    ps_sched_pass *trace;
    int *from, *to;
    int64_t n_trace;
    /* the reduction's scratch, allocated in the set-up: [iters] sorted iteration times, [S x 3 x 2] stage means */
    double *sorted, *mean;
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

/* The fused kernel's core for the attention pair whose scores GEMM (s x ctx over hd, count = batch x local heads) is
 * sh and whose weighted sum is ctx_sh (s x vd over ctx). */
static ps_exec_attn attn_shape(const layer_job *l, const ps_gemm_shape *sh, const ps_gemm_shape *ctx_sh)
{
    int64_t bh = llround(sh->count), h = l->a_heads > 0 && bh % l->a_heads == 0 ? l->a_heads : 1;
    int64_t kv = h == l->a_heads ? l->a_kv : 1;
    return (ps_exec_attn){.batch = bh / h, .heads = h, .kv_heads = kv, .sq = llround(sh->m), .sk = llround(sh->n),
                          .d = llround(sh->k), .dv = llround(ctx_sh->n), .causal = l->a_causal && sh->blk == 0};
}

/* GEMM i of g, `times` forward-equivalents of it (1: forward, 2: backward, 3: both; ps_layer_ov_pass's count). The
 * attention pair of a fused layer (outside cp) is one kernel, run at its scores GEMM (the first of the pair; the
 * weighted sum's turn does nothing): its forward for an odd count, its backward (which recomputes the scores) once
 * per two, as attn_time (cost/layer_cost.c) prices it, timed as computation like the GEMMs it replaces. */
static ps_status run_gemm(exec_ctx *x, const layer_job *l, const ps_layer_gemms *g, int i, int times)
{
    const ps_gemm_shape *sh = &g->g[i];
    if (!sh->attn || !l->fused_core) return do_gemm(x, sh, times);
    if (llround(sh->count) <= 0) return PS_OK; /* Oases' second sub-batch of a one-sample micro-batch: nothing */
    int before = 0; /* attention GEMMs before i: pairs, scores first (ps_layer_gemm_shapes) */
    for (int j = 0; j < i; j++) before += g->g[j].attn;
    if (before % 2 || i + 1 >= g->n || !g->g[i + 1].attn) return PS_OK;
    ps_exec_attn a = attn_shape(l, sh, &g->g[i + 1]);
    double t0 = now();
    if (times % 2) PS_TRY(x->be->attn(x->bs, &a, false));
    for (int k = 0; k < times / 2; k++) PS_TRY(x->be->attn(x->bs, &a, true));
    x->n_fused_f += times % 2;
    x->n_fused_b += times / 2;
    x->t_comp += now() - t0;
    return PS_OK;
}

static ps_status do_stream(exec_ctx *x, double bytes)
{
    if (bytes <= 0) return PS_OK;
    double t0 = now();
    PS_TRY(x->be->stream(x->bs, bytes));
    x->t_comp += now() - t0;
    x->stream_b += bytes;
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
    MPI_Comm c = x->comm[l->c_tp].comm;
    if (l->s->sp && l->s->tp > 1) {
        PS_TRY(do_coll(x, c, PS_EXEC_REDUCESCATTER, l->pred.tp_bytes, w));
        return do_coll(x, c, PS_EXEC_ALLGATHER, l->pred.tp_bytes, w);
    }
    return do_coll(x, c, PS_EXEC_ALLREDUCE, l->pred.tp_bytes, w);
}

/* ZeRO-3 shards over the data-parallel group (dp x cp GPUs) and an MoE block's experts over their edp */
static bool zero3(const layer_job *l) { return l->s->zero >= 3 && (ps_strategy_dp_cp(l->s) > 1 || l->edp > 1); }

/* A data-parallel collective of the layer's weights (grads false) or gradients: its dense part over the DP group (the
 * GPUs of this TP rank across CP and DP), then on the expert grid its experts' over their edp group, one after the
 * other as Megatron-core reduces its two buffers (the cost model's groups[2], ps_cost_layer). */
static ps_status dp_coll(exec_ctx *x, const layer_job *l, ps_exec_coll op, bool grads, const ps_exec_where *w)
{
    if (ps_strategy_dp_cp(l->s) > 1)
        PS_TRY(do_coll(x, x->comm[l->c_dp].comm, op, grads ? l->grad_bytes : l->param_bytes, w));
    if (l->edp > 1) PS_TRY(do_coll(x, x->comm[l->c_edp].comm, op, grads ? l->egrad_bytes : l->eparam_bytes, w));
    return PS_OK;
}

static ps_status progress(exec_ctx *x);
static ps_status cp_core(exec_ctx *x, const layer_job *l, bool bwd, ps_exec_where *w);

/* ---- Transformer Engine's TP overlap (te) ---- */

/* One GEMM and one SP collective as TE's ring exchange runs them (transformer_engine/pytorch/module/base.py,
 * "ring_exchange", num_splits = tp): tp steps, step j computing 1/tp of the GEMM's rows while one ring step moves
 * 1/tp of the tensor to the next GPU of the group (ps_cost_ring_overlap's order). comm_first (all-gather + GEMM):
 * step j's transfer brings the piece step j + 1 computes, so steps 0..tp-2 have one; else (GEMM + reduce-scatter)
 * step j's transfer carries piece j - 1's partial sum on, so steps 1..tp-1 have one. Each piece runs in a few row
 * blocks with progress between them: Open MPI moves a non-blocking transfer only inside MPI calls. */
static ps_status te_ring(exec_ctx *x, const layer_job *l, const ps_gemm_shape *sh, bool comm_first, ps_exec_where *w)
{
    enum { PIECES = 4, MIN_ROWS = 64 };
    int n = l->s->tp;
    double bytes = l->pred.tp_bytes / n;
    int64_t m = llround(sh->m), nn = llround(sh->n), k = llround(sh->k), cnt = llround(sh->count);
    MPI_Comm comm = x->comm[l->c_ov].comm;
    for (int j = 0; j < n; j++) {
        bool has = comm_first ? j < n - 1 : j > 0;
        if (has) {
            w->what = "starting a TP ring step (te)";
            double t0 = now();
            PS_TRY(x->be->ring(x->bs, &x->net, comm, bytes, w));
            x->t_comm += now() - t0;
            x->n_ring++;
        }
        int64_t rows = m * (j + 1) / n - m * j / n;
        int64_t sub = rows / MIN_ROWS < PIECES ? rows / MIN_ROWS : PIECES;
        if (sub < 1) sub = 1;
        for (int64_t q = 0; q < sub; q++) {
            double t0 = now();
            PS_TRY(x->be->gemm(x->bs, rows * (q + 1) / sub - rows * q / sub, nn, k, cnt));
            x->t_comp += now() - t0;
            if (has) PS_TRY(progress(x));
        }
        if (has) {
            w->what = "a TP ring step (te)";
            double t0 = now();
            PS_TRY(x->be->ring_wait(x->bs, &x->net, w));
            x->t_comm += now() - t0; /* the step's exposed part: what its GEMM piece did not hide */
        }
    }
    return PS_OK;
}

/* A te layer's GEMMs and SP collectives in the forward (PS_OV_FWD) or input-gradient backward (PS_OV_BWD) pass, the
 * pairs of ps_layer_te_pair as rings (forward: all-gather -> ag's GEMM, rs's GEMM -> reduce-scatter; backward: the
 * gradient's all-gather -> rs's dgrad, ag's dgrad -> reduce-scatter), every other GEMM as it is (the backward's
 * attention GEMMs twice), a collective without a pair as plain SP; the elementwise traffic as the plain pass's. */
static ps_status te_pass(exec_ctx *x, const layer_job *l, int pass, ps_exec_where *w)
{
    const ps_layer_gemms *g = &l->g;
    int n_colls = pass == PS_OV_FWD ? g->tp_colls : g->bwd_tp_colls;
    bool paired[PS_OV_MAX_GEMMS] = {false};
    int n_plain = 0;
    for (int b = 0; b < n_colls; b++) {
        int ag, rs;
        if (!ps_layer_te_pair(g, b, &ag, &rs)) {
            n_plain++;
            continue;
        }
        paired[ag] = paired[rs] = true;
    }
    bool core_done = false;
    for (int i = 0; i < g->n && i < PS_OV_MAX_GEMMS; i++) {
        int ag = -1, rs = -1;
        bool pair = paired[i] && ps_layer_te_pair(g, g->g[i].blk, &ag, &rs);
        if (!pair && l->cp > 1 && g->g[i].attn) { /* a CP layer's attention core: its ring or all-to-alls */
            if (!core_done) PS_TRY(cp_core(x, l, pass == PS_OV_BWD, w));
            core_done = true;
            continue;
        }
        if (!pair) {
            PS_TRY(run_gemm(x, l, g, i, pass == PS_OV_BWD && g->g[i].attn ? 2 : 1));
            continue;
        }
        /* the forward's all-gather feeds ag, the backward's feeds rs (its dgrad); the other one feeds a
         * reduce-scatter */
        bool comm_first = (i == ag) == (pass == PS_OV_FWD);
        PS_TRY(te_ring(x, l, &g->g[i], comm_first, w));
    }
    PS_TRY(do_stream(x, (pass == PS_OV_FWD ? 1 : 2) * x->cp->elementwise_passes * l->act_full));
    w->what = pass == PS_OV_FWD ? "a TP collective of the forward" : "a TP collective of the backward";
    for (int i = 0; i < n_plain; i++) PS_TRY(tp_collective(x, l, w));
    return PS_OK;
}

/* ---- context parallelism ---- */

/* An all-to-all over comm (n members, this rank member `me`), timed as a collective; bytes sent to the other members
 * into *sent. */
static ps_status do_a2a(exec_ctx *x, MPI_Comm comm, int n, int me, const double *sb, const double *rb,
                        const ps_exec_where *w, double *sent)
{
    double t0 = now();
    PS_TRY(x->be->alltoall(x->bs, &x->net, comm, n, sb, rb, w));
    x->t_comm += now() - t0;
    for (int p = 0; p < n; p++)
        if (p != me) *sent += sb[p];
    return PS_OK;
}

/* The a2a kind's all-to-all of a GPU's buffer of `bytes` over the CP group: 1/cp to every member (itself included),
 * as ps_coll_alltoall prices it. */
static ps_status cp_alltoall(exec_ctx *x, const layer_job *l, double bytes, const ps_exec_where *w)
{
    double b[PS_EXEC_A2A_MAX];
    for (int p = 0; p < l->cp; p++) b[p] = bytes / l->cp;
    int me = x->local / l->s->tp % l->cp;
    x->n_cp_a2a++;
    return do_a2a(x, x->comm[l->c_cp].comm, l->cp, me, b, b, w, &x->cp_bytes);
}

/* The attention core of a CP layer (the attn GEMMs of ps_layer_gemm_shapes_s, already 1/cp of the work), forward or
 * input-gradient backward (each GEMM twice), as cp_attention prices it from Transformer Engine's context_parallel.py
 * (commit d0067d0). a2a (AttnFuncWithCPAndQKVOA2A): the all-to-all of Q, K, V, the core, the all-to-all of the
 * output; the backward: the output gradient's, the core, dQ, dK, dV's. ring (AttnFuncWithCPAndKVP2P): cp steps, each
 * 1/cp of the core's rows beside one ring transfer to the next member of the CP group; the forward's steps
 * 0..cp-2 carry the next K/V block, the backward's step 0 K/V, its middle steps K/V and the dK/dV summed so far,
 * its last dK/dV. A step's computation runs in row blocks with progress between them (Open MPI moves a transfer only
 * inside MPI calls), and the next step starts once the transfer is done: the exposed part is measured. */
static ps_status cp_core(exec_ctx *x, const layer_job *l, bool bwd, ps_exec_where *w)
{
    enum { PIECES = 4, MIN_ROWS = 16 };
    const ps_layer_gemms *g = &l->g;
    double c0 = x->t_comm;
    int times = bwd ? 2 : 1;
    if (l->cp_a2a) {
        w->what = bwd ? "a CP all-to-all of the output gradient" : "a CP all-to-all of Q, K and V";
        PS_TRY(cp_alltoall(x, l, bwd ? l->cp_o : l->cp_qkv, w));
        for (int i = 0; i < g->n; i++)
            if (g->g[i].attn) PS_TRY(do_gemm(x, &g->g[i], times));
        w->what = bwd ? "a CP all-to-all of dQ, dK and dV" : "a CP all-to-all of the attention output";
        PS_TRY(cp_alltoall(x, l, bwd ? l->cp_qkv : l->cp_o, w));
        x->t_cp += x->t_comm - c0;
        return PS_OK;
    }
    int n = l->cp;
    MPI_Comm comm = x->comm[l->c_cp].comm;
    for (int j = 0; j < n; j++) {
        double bytes = !bwd ? (j < n - 1 ? l->cp_kv : 0) : (j == 0 || j == n - 1 ? l->cp_kv : 2 * l->cp_kv);
        if (bytes > 0) {
            w->what = "starting a CP ring step";
            double t0 = now();
            PS_TRY(x->be->ring(x->bs, &x->net, comm, bytes, w));
            x->t_comm += now() - t0;
            x->n_cp_ring++;
            x->cp_bytes += bytes;
        }
        for (int i = 0; i < g->n; i++) {
            const ps_gemm_shape *sh = &g->g[i];
            if (!sh->attn) continue;
            int64_t m = llround(sh->m), nn = llround(sh->n), k = llround(sh->k), cnt = llround(sh->count);
            int64_t rows = m * (j + 1) / n - m * j / n;
            int64_t sub = rows / MIN_ROWS < PIECES ? rows / MIN_ROWS : PIECES;
            if (sub < 1) sub = 1;
            for (int t = 0; t < times; t++)
                for (int64_t q = 0; q < sub; q++) {
                    double t0 = now();
                    PS_TRY(x->be->gemm(x->bs, rows * (q + 1) / sub - rows * q / sub, nn, k, cnt));
                    x->t_comp += now() - t0;
                    if (bytes > 0) PS_TRY(progress(x));
                }
        }
        if (bytes > 0) {
            w->what = bwd ? "a CP ring step (K/V, dK/dV)" : "a CP ring step (K/V)";
            double t0 = now();
            PS_TRY(x->be->ring_wait(x->bs, &x->net, w));
            x->t_comm += now() - t0;
        }
    }
    x->t_cp += x->t_comm - c0;
    return PS_OK;
}

/* ---- expert parallelism ---- */

/* The share of the mean GPU's tokens that member p of an ep group receives. The cost model prices the slowest GPU of
 * the group, the one holding the busiest expert beside experts at the mean (ps_cost_ep_rank_load: `load` x the mean);
 * exec makes member 0 that GPU: every member sends it load / ep of its dispatch buffer and (ep - load) / (ep - 1) / ep
 * to each other member, so every member still sends its mean buffer, member 0 receives load x the mean (and sends it
 * back in the combine) and runs load x the mean tokens through its experts, the others less. */
static double ep_share(const layer_job *l, int p)
{
    if (l->ep <= 1) return l->ep_load;
    return p == 0 ? l->ep_load : (l->ep - l->ep_load) / (l->ep - 1);
}

/* An MoE block's token exchange on the expert grid in one pass (ep_exchange in cost/layer_cost.c, from Megatron-core's
 * MoEAlltoAllTokenDispatcher): the dispatch all-to-all over the ep group, the all-gather over the etp group, the
 * reduce-scatter back and the combine all-to-all (the dispatch reversed). The backward moves the gradients the same
 * ways. */
static ps_status ep_exchange(exec_ctx *x, const layer_job *l, ps_exec_where *w)
{
    double c0 = x->t_comm;
    double sb[PS_EXEC_A2A_MAX], rb[PS_EXEC_A2A_MAX], mine = ep_share(l, l->ep_idx);
    for (int p = 0; p < l->ep; p++) {
        sb[p] = l->ep_mean / l->ep * ep_share(l, p);
        rb[p] = l->ep_mean / l->ep * mine;
    }
    MPI_Comm comm = l->ep > 1 ? x->comm[l->c_ep].comm : MPI_COMM_NULL;
    if (l->ep > 1) {
        w->what = "an MoE dispatch all-to-all";
        PS_TRY(do_a2a(x, comm, l->ep, l->ep_idx, sb, rb, w, &x->ep_bytes));
        x->ep_recv += l->ep_mean * mine;
        x->n_ep_a2a++;
    }
    if (l->etp > 1) {
        MPI_Comm tc = x->comm[l->c_etp].comm;
        w->what = "an expert-TP all-gather of the dispatched tokens";
        PS_TRY(do_coll(x, tc, PS_EXEC_ALLGATHER, l->ep_mean * mine * l->etp, w));
        w->what = "an expert-TP reduce-scatter of the experts' output";
        PS_TRY(do_coll(x, tc, PS_EXEC_REDUCESCATTER, l->ep_mean * mine * l->etp, w));
    }
    if (l->ep > 1) {
        w->what = "an MoE combine all-to-all";
        PS_TRY(do_a2a(x, comm, l->ep, l->ep_idx, rb, sb, w, &x->ep_bytes));
        x->ep_recv += l->ep_mean;
        x->n_ep_a2a++;
    }
    x->t_ep += x->t_comm - c0;
    return PS_OK;
}

/* A layer's GEMMs in the forward or the input-gradient backward (the attention GEMMs twice there), those of a CP
 * layer's attention core as cp_core (once, at the first of them). */
static ps_status layer_gemms(exec_ctx *x, const layer_job *l, bool bwd, ps_exec_where *w)
{
    bool core_done = false;
    for (int i = 0; i < l->g.n; i++) {
        const ps_gemm_shape *sh = &l->g.g[i];
        if (l->cp > 1 && sh->attn) {
            if (!core_done) PS_TRY(cp_core(x, l, bwd, w));
            core_done = true;
            continue;
        }
        PS_TRY(run_gemm(x, l, &l->g, i, bwd && sh->attn ? 2 : 1));
    }
    return PS_OK;
}

static ps_status layer_forward(exec_ctx *x, const layer_job *l, bool recompute, ps_exec_where *w)
{
    const ps_cost_params *cp = x->cp;
    if (zero3(l) && !recompute) {
        w->what = "a ZeRO-3 weight all-gather";
        PS_TRY(dp_coll(x, l, PS_EXEC_ALLGATHER, false, w));
    }
    if (l->te) return te_pass(x, l, PS_OV_FWD, w);
    PS_TRY(layer_gemms(x, l, false, w));
    PS_TRY(do_stream(x, cp->elementwise_passes * l->act_full));
    w->what = "a TP collective of the forward";
    for (int i = 0; i < l->g.tp_colls; i++) PS_TRY(tp_collective(x, l, w));
    if (l->ep_on) PS_TRY(ep_exchange(x, l, w));
    return PS_OK;
}

static ps_status layer_backward_b(exec_ctx *x, const layer_job *l, ps_exec_where *w)
{
    const ps_cost_params *cp = x->cp;
    if (l->s->ckpt == PS_RECOMP_FULL) {
        PS_TRY(layer_forward(x, l, true, w));
    } else if (l->s->ckpt == PS_RECOMP_SELECTIVE && !l->fused) { /* a fused kernel keeps no scores to drop */
        for (int i = 0; i < l->g.n; i++)
            if (l->g.g[i].attn) PS_TRY(do_gemm(x, &l->g.g[i], 1));
        PS_TRY(do_stream(x, cp->elementwise_passes * (l->act_full - l->act_sel)));
    } else if (l->s->ckpt == PS_RECOMP_OP && l->n_op_rec > 0) {
        /* as ps_cost_layer prices it: the linear layers not kept, an unfused attention core (its bmm and softmax are
         * not kept; a fused kernel's backward recomputes its own scores), every elementwise operation, and the
         * collectives not kept (the SP all-gathers, or the all-reduces) */
        for (int i = 0; i < l->n_op_rec; i++) PS_TRY(do_gemm(x, &l->op_rec[i], 1));
        for (int i = 0; i < l->g.n; i++)
            if (l->g.g[i].attn && !l->fused) PS_TRY(do_gemm(x, &l->g.g[i], 1));
        PS_TRY(do_stream(x, cp->elementwise_passes * l->act_full));
        if (l->s->tp > 1) {
            w->what = "a TP collective recomputed by the backward";
            bool sp = l->s->sp && l->s->tp > 1;
            for (int i = 0; i < l->g.tp_colls; i++)
                PS_TRY(do_coll(x, x->comm[l->c_tp].comm, sp ? PS_EXEC_ALLGATHER : PS_EXEC_ALLREDUCE,
                               l->pred.tp_bytes, w));
        }
    }
    if (l->te) return te_pass(x, l, PS_OV_BWD, w);
    /* input gradients: each weight GEMM once more (dgrad), the attention GEMMs twice */
    PS_TRY(layer_gemms(x, l, true, w));
    PS_TRY(do_stream(x, 2 * cp->elementwise_passes * l->act_full));
    w->what = "a TP collective of the backward";
    for (int i = 0; i < l->g.bwd_tp_colls; i++) PS_TRY(tp_collective(x, l, w));
    if (l->ep_on) PS_TRY(ep_exchange(x, l, w));
    return PS_OK;
}

static ps_status layer_backward_w(exec_ctx *x, const layer_job *l, ps_exec_where *w)
{
    for (int i = 0; i < l->g.n; i++)
        if (!l->g.g[i].attn) PS_TRY(do_gemm(x, &l->g.g[i], 1)); /* weight gradients (wgrad) */
    if (zero3(l)) {
        w->what = "a ZeRO-3 weight all-gather of the backward";
        PS_TRY(dp_coll(x, l, PS_EXEC_ALLGATHER, false, w));
        w->what = "a ZeRO-3 gradient reduce-scatter";
        PS_TRY(dp_coll(x, l, PS_EXEC_REDUCESCATTER, true, w));
    }
    return PS_OK;
}

/* ---- overlapped TP (Oases) ---- */

static ps_status progress(exec_ctx *x)
{
    double t0 = now();
    PS_TRY(x->be->progress(x->bs));
    x->t_comm += now() - t0;
    return PS_OK;
}

/* One Oases block of one sub-batch: its GEMMs (each `times` times) and elementwise traffic, in pieces with the
 * collectives in flight progressed between them. Open MPI moves a non-blocking collective only inside MPI calls: one
 * long GEMM without them would leave the other sub-batch's all-reduce standing until the next wait, and the overlap
 * would be measured as none. */
static ps_status ov_block(exec_ctx *x, const layer_job *l, const ps_layer_gemms *g, const ps_ov_block *b)
{
    enum { PIECES = 4, MIN_ROWS = 64 };
    for (int j = 0; j < g->n && j < PS_OV_MAX_GEMMS; j++) {
        if (g->g[j].attn && l->fused_core) { /* the fused kernel, whole: the collectives in flight progressed after */
            PS_TRY(run_gemm(x, l, g, j, b->times[j]));
            PS_TRY(progress(x));
            continue;
        }
        for (int t = 0; t < b->times[j]; t++) {
            const ps_gemm_shape *sh = &g->g[j];
            int64_t m = llround(sh->m), n = llround(sh->n), k = llround(sh->k), cnt = llround(sh->count);
            /* a batch of attention GEMMs by its entries, one weight GEMM by rows */
            bool by_count = cnt >= PIECES;
            int64_t total = by_count ? cnt : m;
            int64_t pieces = by_count ? PIECES : m / MIN_ROWS < PIECES ? m / MIN_ROWS : PIECES;
            if (pieces < 1) pieces = 1;
            for (int64_t q = 0; q < pieces; q++) {
                int64_t part = total * (q + 1) / pieces - total * q / pieces;
                double t0 = now();
                PS_TRY(x->be->gemm(x->bs, by_count ? m : part, n, k, by_count ? part : cnt));
                x->t_comp += now() - t0;
                PS_TRY(progress(x));
            }
        }
    }
    for (int q = 0; q < PIECES && b->stream_bytes > 0; q++) {
        PS_TRY(do_stream(x, b->stream_bytes / PIECES));
        PS_TRY(progress(x));
    }
    return PS_OK;
}

static ps_status ov_wait(exec_ctx *x, int slot, ps_exec_where *w)
{
    w->what = "an overlapped TP all-reduce";
    double t0 = now();
    PS_TRY(x->be->icoll_wait(x->bs, &x->net, slot, w));
    x->t_comm += now() - t0; /* the collective's exposed part: what the computation did not hide */
    return PS_OK;
}

/* Layer `e` continues the overlapped run of layer e - 1: both overlapped, one TP group, nothing to reshard (the rule
 * ps_cost_plan prices runs by). */
static bool ov_joins(const exec_ctx *x, int64_t e)
{
    const layer_job *l = &x->lj[e], *p = &x->lj[e - 1];
    return l->ov && p->ov && l->s->tp == p->s->tp && l->rs_dirs == 0;
}

/* Oases' sub-batch pipeline (seed 003, Sec. 3) over the overlapped layers a..b of a stage, forward in layer order or
 * backward last to first: the blocks of both sub-batches alternate on the computation, each block's all-reduce starts
 * when it is done and runs while the other sub-batch computes, and a sub-batch's next block waits for its previous
 * all-reduce (ps_cost_two_stream's order and dependencies). */
static ps_status ov_run(exec_ctx *x, int64_t a, int64_t b, int pass, ps_exec_where *w)
{
    bool busy[2] = {false, false};
    for (int64_t j = 0; j <= b - a; j++) {
        const layer_job *l = &x->lj[pass == PS_OV_FWD ? a + j : b - j];
        if (pass == PS_OV_FWD && zero3(l)) {
            w->what = "a ZeRO-3 weight all-gather";
            PS_TRY(dp_coll(x, l, PS_EXEC_ALLGATHER, false, w));
        }
        for (int i = 0; i < l->ovp[0][pass].n; i++)
            for (int k = 0; k < 2; k++) {
                const ps_ov_pass *op = &l->ovp[k][pass];
                if (busy[k]) PS_TRY(ov_wait(x, k, w));
                busy[k] = false;
                PS_TRY(ov_block(x, l, &l->og[k], &op->b[i]));
                if (op->b[i].coll && l->s->tp > 1) {
                    w->what = "starting an overlapped TP all-reduce";
                    double t0 = now();
                    PS_TRY(x->be->icoll(x->bs, &x->net, x->comm[l->c_ov].comm, k, op->coll_bytes, w));
                    x->t_comm += now() - t0;
                    busy[k] = true;
                    x->n_icoll++;
                }
            }
    }
    for (int k = 0; k < 2; k++)
        if (busy[k]) PS_TRY(ov_wait(x, k, w));
    return PS_OK;
}

/* The all-gather between layer l's TP layout and its predecessor's (Oases Eq. 4), in the pass dir that runs it. */
static ps_status reshard(exec_ctx *x, const layer_job *l, int dir, ps_exec_where *w)
{
    if (!(l->rs_dirs & dir)) return PS_OK;
    w->what = "a resharding all-gather between TP layouts";
    x->n_reshard++;
    return do_coll(x, x->comm[l->c_rs].comm, PS_EXEC_ALLGATHER, l->rs_bytes, w);
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
        for (int64_t i = lo; i < hi;) {
            if (i > lo) PS_TRY(reshard(x, &x->lj[i], PS_RESHARD_FWD, &w));
            int64_t e = i + 1; /* the layers i..e-1 run together */
            if (x->lj[i].ov) {
                while (e < hi && ov_joins(x, e)) e++;
                PS_TRY(ov_run(x, i, e - 1, PS_OV_FWD, &w));
            } else {
                PS_TRY(layer_forward(x, &x->lj[i], false, &w));
            }
            i = e;
        }
    }
    if (p->op == PS_SCHED_B || p->op == PS_SCHED_BW) {
        for (int64_t i = hi - 1; i >= lo;) {
            int64_t e = i; /* the layers e..i run together, last to first */
            if (x->lj[i].ov) {
                while (e > lo && ov_joins(x, e)) e--;
                PS_TRY(ov_run(x, e, i, PS_OV_BWD, &w));
            } else {
                PS_TRY(layer_backward_b(x, &x->lj[i], &w));
            }
            if (e > lo) PS_TRY(reshard(x, &x->lj[e], PS_RESHARD_BWD, &w));
            i = e - 1;
        }
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
            if (l->s->zero >= 3) continue;
            if (l->s->zero == 0) {
                PS_TRY(dp_coll(x, l, PS_EXEC_ALLREDUCE, true, &w));
            } else {
                PS_TRY(dp_coll(x, l, PS_EXEC_REDUCESCATTER, true, &w));
                PS_TRY(dp_coll(x, l, PS_EXEC_ALLGATHER, false, &w));
            }
        }
    }
    return do_stream(x, 2 * static_bytes);
}

/* ---- set-up ---- */

static int find_comm(const exec_ctx *x, comm_kind kind, int tp, int n, int stride)
{
    for (int i = 0; i < x->n_comm; i++) {
        const exec_comm *e = &x->comm[i];
        if (e->kind == kind && e->tp == tp && e->n == n && e->stride == stride) return i;
    }
    return -1;
}

static int add_comm(exec_ctx *x, exec_comm e)
{
    e.comm = MPI_COMM_NULL;
    x->comm[x->n_comm] = e;
    return x->n_comm++;
}

/* The record of a group of n members at a stride (the stage's ranks cut into blocks of n x stride, members a stride
 * apart: this rank's group holds the ranks of its block at its offset modulo the stride), added once per shape.
 * what: the group's use, for the message. */
static ps_status add_group(exec_ctx *x, int64_t n, int64_t stride, int64_t layer, const char *what)
{
    if (find_comm(x, COMM_GROUP, 0, (int)n, (int)stride) >= 0) return PS_OK;
    int64_t blk = n * stride;
    if (blk <= 0 || x->width % blk != 0)
        return PS_FAIL(PS_ERR_INPUT, "layer %lld: %s of %lld GPUs at stride %lld does not tile a stage of %d",
                       (long long)layer, what, (long long)n, (long long)stride, x->width);
    int shapes = 0;
    for (int i = 0; i < x->n_comm; i++) shapes += x->comm[i].kind == COMM_GROUP;
    if (shapes == MAX_GROUP_SHAPES)
        return PS_FAIL(PS_ERR_INPUT, "the plan needs groups of more than %d shapes (resharding, CP, expert grid)",
                       shapes);
    int color = (int)(x->dev * x->width + x->local / blk * blk + x->local % stride);
    add_comm(x, (exec_comm){.kind = COMM_GROUP, .n = (int)n, .stride = (int)stride, .dup_of = -1, .color = color});
    return PS_OK;
}

/* The communicators of the plan as records (exec_comm), in the order every rank creates them: per TP degree,
 * ascending, its TP group (t consecutive ranks of a stage: TP innermost), its DP group (the ranks of the stage at
 * stride t: the cost model's placement, ps_cost_layer) and the overlapped duplicate when a layer needs it; then
 * every resharding group shape of the plan in the plan's order, also those only other stages use (the stage's ranks
 * cut into blocks of n x stride, members a stride apart). Local: fails, on every rank alike, with PS_ERR_INPUT for a
 * plan past the limits or a resharding group that does not tile a stage. */
static ps_status plan_comms(exec_ctx *x)
{
    const ps_plan *plan = x->plan;
    int tps[MAX_TP_DEGREES], n_tp = 0;
    for (int64_t i = 0; i < x->m->n_layers; i++) {
        int t = plan->layer[i].tp, k = 0;
        while (k < n_tp && tps[k] != t) k++;
        if (k == n_tp) {
            if (n_tp == MAX_TP_DEGREES) return PS_FAIL(PS_ERR_INPUT, "the plan uses more than %d TP degrees", n_tp);
            tps[n_tp++] = t;
        }
    }
    for (int a = 1; a < n_tp; a++)
        for (int b = a; b > 0 && tps[b - 1] > tps[b]; b--) {
            int t = tps[b];
            tps[b] = tps[b - 1];
            tps[b - 1] = t;
        }
    int rank = x->net.rank;
    for (int k = 0; k < n_tp; k++) {
        int t = tps[k];
        int tp = add_comm(x, (exec_comm){.kind = COMM_TP, .tp = t, .dup_of = -1, .color = rank / t});
        add_comm(x, (exec_comm){.kind = COMM_DP, .tp = t, .dup_of = -1, .color = x->dev * t + x->local % t});
        bool ov = false;
        for (int64_t i = 0; i < x->m->n_layers; i++)
            ov = ov || (plan->layer[i].tp == t && plan->layer[i].overlap != PS_OVERLAP_NONE && t > 1);
        if (ov) add_comm(x, (exec_comm){.kind = COMM_TP_OV, .tp = t, .dup_of = tp});
    }
    int64_t n_mb = ps_plan_micro_batches(plan), global_mb = plan->gbs / n_mb;
    /* the CP groups (the same TP rank of cp consecutive TP groups) and the expert grid's (etp fastest, then ep,
     * then edp), in layer order */
    for (int64_t i = 0; i < x->m->n_layers; i++) {
        const ps_strategy *t = &plan->layer[i];
        int cpd = ps_strategy_cp(t), ep = ps_strategy_ep(t), etp = ps_strategy_etp(t);
        if (cpd > PS_EXEC_A2A_MAX || ep > PS_EXEC_A2A_MAX)
            return PS_FAIL(PS_ERR_INPUT, "layer %lld: exec runs all-to-alls over at most %d GPUs (cp %d, ep %d)",
                           (long long)i, PS_EXEC_A2A_MAX, cpd, ep);
        if (cpd > 1 && ps_layer_has_attention(x->m->layers[i].kind))
            PS_TRY(add_group(x, cpd, t->tp, i, "a CP group"));
        if (ps_layer_is_moe(&x->m->layers[i]) && ps_strategy_ep_folded(t)) {
            int64_t edp = x->width / ((int64_t)ep * etp);
            if (ep > 1) PS_TRY(add_group(x, ep, etp, i, "an expert-parallel group"));
            if (etp > 1) PS_TRY(add_group(x, etp, 1, i, "an expert-TP group"));
            if (edp > 1) PS_TRY(add_group(x, edp, (int64_t)ep * etp, i, "an expert-DP group"));
        }
    }
    for (int s = 0; s < x->S; s++)
        for (int64_t i = plan->cuts[s] + 1; i < plan->cuts[s + 1]; i++) {
            ps_group g;
            double bytes;
            if (!ps_cost_reshard_group(&x->m->layers[i - 1], x->m->dtype, global_mb, &plan->layer[i - 1],
                                       &plan->layer[i], 0, &g, &bytes))
                continue;
            PS_TRY(add_group(x, g.n, g.stride, i, "a resharding group"));
        }
    return PS_OK;
}

/* Layer l's GEMMs (ps_layer_gemm_shapes_s: context and expert parallelism) and its CP and expert-grid work, with their
 * communicators from plan_comms. */
static ps_status cp_ep_job(exec_ctx *x, const ps_layer *ly, int64_t mbs, layer_job *l)
{
    const ps_strategy *s = l->s;
    double elt = ps_act_elt_bytes(x->m->dtype);
    ps_layer_gemm_shapes_s(ly, mbs, s, &l->g);
    l->cp = ps_layer_has_attention(ly->kind) ? ps_strategy_cp(s) : 1;
    l->a_heads = ly->heads / s->tp;
    l->a_kv = ly->kv_heads / s->tp;
    if (l->a_kv < 1 || l->a_heads % l->a_kv) l->a_kv = l->a_heads;
    l->a_causal = ly->kind == PS_LAYER_DECODER || ly->kind == PS_LAYER_DECODER_XATTN;
    l->c_cp = l->c_ep = l->c_etp = l->c_edp = -1;
    l->ep = l->etp = 1;
    l->ep_load = 1;
    if (l->cp > 1) {
        /* cp_attention's buffers (cost/layer_cost.c): q and k/v of the GPU's tokens, k/v heads at least one */
        double t = s->tp, hd = (double)ly->head_dim, tokens = (double)mbs * (double)ly->seq / l->cp;
        double qb = tokens * (double)ly->heads * hd / t * elt;
        double kb = tokens * fmax((double)ly->kv_heads / t, 1) * hd * elt;
        /* exec runs Megatron-core's kinds; PyTorch's all-gather rotation is priced only (cost/layer_cost.c) */
        if (s->cp_comm == PS_CP_ALLGATHER)
            return PS_FAIL(PS_ERR_INPUT, "psearch exec runs context parallelism as ring or a2a, not %s",
                           ps_cp_comm_name(s->cp_comm));
        l->cp_a2a = s->cp_comm == PS_CP_A2A;
        l->cp_kv = 2 * kb;
        l->cp_qkv = qb + 2 * kb;
        l->cp_o = qb;
        l->c_cp = find_comm(x, COMM_GROUP, 0, l->cp, s->tp);
        if (l->c_cp < 0) return PS_FAIL(PS_ERR_SYSTEM, "no communicator for a CP group of %d", l->cp);
    }
    l->ep_on = ps_layer_is_moe(ly) && ps_strategy_ep_folded(s);
    if (!l->ep_on) return PS_OK;
    l->ep = ps_strategy_ep(s);
    l->etp = ps_strategy_etp(s);
    l->edp = x->width / (l->ep * l->etp);
    l->ep_idx = x->local / l->etp % l->ep;
    /* no member can take more than every token: load <= ep */
    l->ep_load = fmin(ps_cost_ep_rank_load(x->cp, ly, (double)(ly->n_experts / l->ep)), l->ep);
    double cf = ly->capacity_factor;
    l->ep_mean = (double)mbs * (double)ly->seq / ps_strategy_cp(s) / s->tp * (double)ly->top_k *
                 (cf > 0 && cf < 1 ? cf : 1.0) * (double)ly->hidden * elt;
    /* this rank's experts run its share of the tokens (ep_share), the cost model's slowest GPU on member 0 */
    for (int i = 0; i < l->g.n; i++)
        if (l->g.g[i].ep > 1) l->g.g[i].m *= ep_share(l, l->ep_idx);
    if (l->ep > 1) l->c_ep = find_comm(x, COMM_GROUP, 0, l->ep, l->etp);
    if (l->etp > 1) l->c_etp = find_comm(x, COMM_GROUP, 0, l->etp, 1);
    if (l->edp > 1) l->c_edp = find_comm(x, COMM_GROUP, 0, l->edp, l->ep * l->etp);
    if ((l->ep > 1 && l->c_ep < 0) || (l->etp > 1 && l->c_etp < 0) || (l->edp > 1 && l->c_edp < 0))
        return PS_FAIL(PS_ERR_SYSTEM, "no communicator for a group of the expert grid (ep %d, etp %d)", l->ep, l->etp);
    return PS_OK;
}

/* The work of every layer of the plan, with its communicators from plan_comms. Local. */
static ps_status build_layers(exec_ctx *x, const ps_cluster *c)
{
    const ps_prediction *pred = &x->pred;
    const ps_plan *plan = x->plan;
    const ps_model *m = x->m;
    int64_t n_mb = ps_plan_micro_batches(plan), global_mb = plan->gbs / n_mb;
    /* activations, weights and gradients: FP8 training keeps them in BF16 (ps_act_elt_bytes), as the cost model */
    double elt = ps_act_elt_bytes(m->dtype);
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
            PS_TRY(ps_cost_layer(x->cp, c, ly, m->dtype, mbs, l->s, first, &l->pred));
            PS_TRY(cp_ep_job(x, ly, mbs, l));
            /* auto resolves as ps_cost_layer resolves it, on the stage's GPUs */
            l->fused = ps_cost_attn(c, first, ps_strategy_width(l->s), l->s->attn) == PS_ATTN_FUSED;
            l->fused_core = l->fused && l->cp <= 1 && ps_layer_has_attention(ly->kind);
            bool sp = l->s->sp && l->s->tp > 1;
            /* the layer as one GPU of its CP group sees it: 1/cp of every sample's tokens (ps_cost_layer's lt) */
            ps_layer lt = *ly;
            lt.seq = ly->seq / l->cp;
            /* the elementwise traffic of the kernel the layer runs, as ps_cost_layer prices it: a fused layer has no
             * scores, softmax or dropout mask to stream (before 2026-11-27 exec streamed the unfused layer's for it,
             * work the prediction rightly left out) */
            ps_attn ak = l->fused ? PS_ATTN_FUSED : PS_ATTN_UNFUSED;
            l->act_full = ps_layer_act_bytes_attn(&lt, m->dtype, l->s->tp, sp, PS_RECOMP_NONE, ak);
            l->act_sel = ps_layer_act_bytes_attn(&lt, m->dtype, l->s->tp, sp, PS_RECOMP_SELECTIVE, ak);
            l->act_full *= (double)mbs;
            l->act_sel *= (double)mbs;
            if (l->ep_on) {
                /* the routed activations move with the tokens: the cost model's ep_act (ps_cost_layer), at the
                 * slowest GPU's load as it prices every GPU's elementwise traffic */
                double tok, inner;
                ps_layer_moe_act_parts(&lt, m->dtype, &tok, &inner);
                double ep_act = (double)mbs * (tok * (l->etp * l->ep_load - 1) + inner * (l->ep_load - 1)) / l->s->tp;
                l->act_full += ep_act;
                l->act_sel += ep_act;
            }
            if (l->s->ckpt == PS_RECOMP_OP) {
                ps_linear lin[PS_LINEARS_MAX];
                int n = ps_layer_linears(&lt, l->s->tp, lin);
                for (int j = 0; j < n; j++)
                    if (!ps_op_sac_keeps(j, m->dtype))
                        l->op_rec[l->n_op_rec++] =
                            (ps_gemm_shape){.m = lin[j].tokens * (double)mbs, .n = lin[j].n_out, .k = lin[j].k_in,
                                            .count = 1};
            }
            /* the layer's weights on one GPU of its TP group (as the cost model counts them: the big matrices split
             * over tp), in the training dtype's element; not mem_params, which under FP8 also holds the FP8 copies */
            double P = ps_cost_params_per_gpu(ly, l->s->tp), Pe = 0;
            if (l->ep_on) { /* the experts live on the expert grid: n_experts / ep of them, split over etp */
                double R = (double)ps_layer_routed_params(ly);
                Pe = R / ((double)l->ep * l->etp);
                P -= R / l->s->tp;
            }
            l->param_bytes = P * elt;
            l->grad_bytes = P * x->cp->grad_reduce_bytes;
            l->eparam_bytes = Pe * elt;
            l->egrad_bytes = Pe * x->cp->grad_reduce_bytes;
            l->c_tp = find_comm(x, COMM_TP, l->s->tp, 0, 0);
            l->c_dp = find_comm(x, COMM_DP, l->s->tp, 0, 0);
            if (l->c_tp < 0 || l->c_dp < 0)
                return PS_FAIL(PS_ERR_SYSTEM, "layer %lld: TP degree %d has no communicator", (long long)i, l->s->tp);
            /* the cost model's sub-batches (the larger first) and blocks: exec runs the work it priced */
            l->ov = ps_overlap_is_oases(l->s->overlap) && l->s->tp > 1;
            l->te = l->s->overlap == PS_OVERLAP_TE && l->s->tp > 1 && l->s->sp;
            l->c_ov = -1;
            if (l->te || l->ov) { /* the second stream's communicator: te's ring steps, Oases' all-reduces */
                l->c_ov = find_comm(x, COMM_TP_OV, l->s->tp, 0, 0);
                if (l->c_ov < 0)
                    return PS_FAIL(PS_ERR_SYSTEM, "layer %lld: no communicator for its %s", (long long)i,
                                   l->te ? "TP ring steps" : "overlapped all-reduces");
            }
            if (l->ov) {
                int64_t sub[2] = {mbs - mbs / 2, mbs / 2};
                for (int k = 0; k < 2; k++) {
                    ps_layer_gemm_shapes(ly, sub[k], l->s->tp, &l->og[k]);
                    double full = ps_layer_act_bytes_attn(ly, m->dtype, l->s->tp, false, PS_RECOMP_NONE, ak) *
                                  (double)sub[k];
                    double sel = ps_layer_act_bytes_attn(ly, m->dtype, l->s->tp, false, PS_RECOMP_SELECTIVE, ak) *
                                 (double)sub[k];
                    double bytes = (double)sub[k] * (double)ly->seq * (double)ly->hidden * elt;
                    for (int pass = 0; pass < 2; pass++)
                        ps_layer_ov_pass(ly, &l->og[k], l->s, x->cp->elementwise_passes, full, sel, bytes, pass,
                                         &l->ovp[k][pass]);
                }
            }
            l->c_rs = -1;
            if (i > plan->cuts[s]) {
                ps_group g;
                l->rs_dirs = ps_cost_reshard_group(&m->layers[i - 1], m->dtype, global_mb, &plan->layer[i - 1], l->s,
                                                   first, &g, &l->rs_bytes);
                ps_cost_reshard(x->cp, c, &m->layers[i - 1], m->dtype, global_mb, &plan->layer[i - 1], l->s, first,
                                &l->rs_pf, &l->rs_pb);
                if (l->rs_dirs) l->c_rs = find_comm(x, COMM_GROUP, 0, (int)g.n, (int)g.stride);
                if (l->rs_dirs && l->c_rs < 0)
                    return PS_FAIL(PS_ERR_SYSTEM, "layer %lld: no communicator for its resharding group", (long long)i);
            }
        }
        x->boundary[s] = pred->stages[s].p2p_bytes; /* the cost model's message, 0 after the last stage */
    }
    return PS_OK;
}

/* Every field of *n at least a's. */
static void need_attn(ps_exec_attn *n, ps_exec_attn a)
{
    int64_t *dst[] = {&n->batch, &n->heads, &n->kv_heads, &n->sq, &n->sk, &n->d, &n->dv};
    int64_t src[] = {a.batch, a.heads, a.kv_heads, a.sq, a.sk, a.d, a.dv};
    for (int i = 0; i < 7; i++)
        if (src[i] > *dst[i]) *dst[i] = src[i];
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
            for (int k = 0; k < 2; k++) { /* the fused kernel's cores, of the layer and of Oases' sub-batches */
                const ps_layer_gemms *g = k == 0 ? &l->g : l->ov ? &l->og[0] : NULL;
                for (int j = 0; g && l->fused_core && j + 1 < g->n; j++)
                    if (g->g[j].attn && g->g[j + 1].attn)
                        need_attn(&need->attn, attn_shape(l, &g->g[j], &g->g[j + 1]));
            }
            need->stream = fmax(need->stream, 2 * x->cp->elementwise_passes * l->act_full);
            need->coll = fmax(need->coll, fmax(l->pred.tp_bytes, fmax(l->param_bytes, l->grad_bytes)));
            if (l->rs_dirs) need->coll = fmax(need->coll, l->rs_bytes);
            if (l->cp > 1) /* an a2a buffer; the ring's steps send from and receive into the overlap buffers */
                need->coll = fmax(need->coll, l->cp_a2a ? l->cp_qkv : 2 * l->cp_kv);
            if (l->ep_on) /* the busiest member's all-to-all receive and its etp all-gather */
                need->coll = fmax(need->coll, l->ep_mean * l->ep_load * l->etp);
            for (int e = 0; e < 2; e++)
                need->coll = fmax(need->coll, e ? l->egrad_bytes : l->eparam_bytes);
            need->overlap = need->overlap || l->ov || l->te || (l->cp > 1 && !l->cp_a2a);
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

/* The cost model's time of the overlapped run a..b (ps_cost_plan's run: the layers' blocks in one two-stream pipeline)
 * and its computation, for pass PS_OV_FWD or PS_OV_BWD. scratch: 4 x (b - a + 1) x PS_OV_MAX_BLOCKS doubles. */
static void ov_run_pred(const exec_ctx *x, int64_t a, int64_t b, int pass, double *scratch, double *time,
                        double *comp)
{
    double *c = scratch, *m = scratch + 2 * (b - a + 1) * PS_OV_MAX_BLOCKS;
    int n = 0;
    *comp = 0;
    for (int64_t j = 0; j <= b - a; j++) {
        const ps_layer_cost *lc = &x->lj[pass == PS_OV_FWD ? a + j : b - j].pred;
        int nb = lc->ov_n[pass];
        memcpy(c + 2 * n, lc->ov_comp[pass], 2 * (size_t)nb * sizeof *c);
        memcpy(m + 2 * n, lc->ov_comm[pass], 2 * (size_t)nb * sizeof *m);
        for (int k = 0; k < 2 * nb; k++) *comp += lc->ov_comp[pass][k];
        n += nb;
    }
    *time = ps_cost_two_stream(x->cp, n, c, m);
}

/* The cost model's computation and collectives for this rank's passes of one iteration, its DP synchronisation and
 * its optimizer pass: the work run_pass and iteration_tail do, priced instead of run. An overlapped run's collectives
 * count what its computation leaves exposed, the part exec measures as waits. */
static ps_status predict_rank(const exec_ctx *x, const ps_sched_pass *passes, int64_t count, double opt_s,
                              double *comp, double *comm, double *p_cp, double *p_ep)
{
    *comp = opt_s;
    *comm = *p_cp = *p_ep = 0;
    int64_t most = 1;
    for (int s = 0; s < x->S; s++)
        if (x->plan->cuts[s + 1] - x->plan->cuts[s] > most) most = x->plan->cuts[s + 1] - x->plan->cuts[s];
    double *scratch = ps_calloc(4 * (size_t)most * PS_OV_MAX_BLOCKS, sizeof *scratch);
    if (!scratch) return PS_ERR_SYSTEM;
    for (int64_t k = 0; k < count; k++) {
        const ps_sched_pass *p = &passes[k];
        int s = ps_sched_stage_of(x->sch, x->dev, p->chunk);
        int64_t lo = x->plan->cuts[s], hi = x->plan->cuts[s + 1];
        bool f = p->op == PS_SCHED_F, b = p->op == PS_SCHED_B || p->op == PS_SCHED_BW;
        for (int64_t i = lo; i < hi;) {
            const layer_job *l = &x->lj[i];
            int64_t e = i + 1;
            if (i > lo) *comm += (f ? l->rs_pf : 0) + (b ? l->rs_pb : 0);
            if (l->ov && (f || b)) {
                while (e < hi && ov_joins(x, e)) e++;
                int pass = f ? PS_OV_FWD : PS_OV_BWD;
                double t, c;
                ov_run_pred(x, i, e - 1, pass, scratch, &t, &c);
                *comp += c;
                *comm += fmax(0, t - c);
                for (int64_t j = i; j < e; j++) {
                    const ps_layer_cost *lc = &x->lj[j].pred;
                    double ov_comm = 0; /* the run's collectives; the rest of comm_fwd is ZeRO-3's gather */
                    for (int q = 0; q < 2 * lc->ov_n[pass]; q++) ov_comm += lc->ov_comm[pass][q];
                    if (f) *comm += fmax(0, lc->comm_fwd - ov_comm);
                }
            } else {
                const ps_layer_cost *c = &l->pred;
                /* te's and CP's ring transfers count what the GEMM pieces leave exposed (te_comm, te_exposed, cp_comm,
                 * cp_exposed: 0 otherwise; a2a: all exposed) */
                for (int q = 0; q < 2; q++) {
                    if (!(q ? b : f)) continue;
                    *comp += q ? c->comp_bwd_b : c->comp_fwd;
                    *comm += (q ? c->comm_bwd_b : c->comm_fwd) - c->te_comm[q] + c->te_exposed[q] - c->cp_comm[q] +
                             c->cp_exposed[q];
                    *p_cp += c->cp_exposed[q];
                    *p_ep += c->ep_comm[q];
                }
            }
            for (int64_t j = i; j < e; j++)
                if (p->op == PS_SCHED_W || p->op == PS_SCHED_BW) {
                    *comp += x->lj[j].pred.comp_bwd_w;
                    *comm += x->lj[j].pred.comm_bwd_w;
                }
            i = e;
        }
    }
    free(scratch);
    for (int ch = 0; ch < ps_sched_chunks(x->sch); ch++) {
        int s = ps_sched_stage_of(x->sch, x->dev, ch);
        for (int64_t i = x->plan->cuts[s]; i < x->plan->cuts[s + 1]; i++) *comm += x->lj[i].pred.dp_sync;
    }
    return PS_OK;
}

static bool fault_here(const exec_ctx *x, ps_exec_fault_kind kind)
{
    return x->fault.kind == kind && x->fault.rank == x->net.rank;
}

/* Every buffer the run and the reduction use, so that neither allocates: a rank that could not would leave alone
 * while the others wait for it in a collective. */
static ps_status alloc_buffers(exec_ctx *x, int iters, ps_exec_result *r)
{
    size_t S3 = (size_t)x->S * 3, n = (size_t)x->count + 1;
    x->st_sum = ps_calloc(S3, sizeof *x->st_sum);
    x->st_n = ps_calloc(S3, sizeof *x->st_n);
    x->trace = ps_calloc(n, sizeof *x->trace);
    x->from = ps_calloc(n, sizeof *x->from);
    x->to = ps_calloc(n, sizeof *x->to);
    x->sorted = ps_calloc((size_t)iters, sizeof *x->sorted);
    x->mean = ps_calloc(S3 * 2, sizeof *x->mean);
    r->iter_s = ps_calloc((size_t)iters + 1, sizeof *r->iter_s);
    r->stages = ps_calloc((size_t)x->S, sizeof *r->stages);
    if (!x->st_sum || !x->st_n || !x->trace || !x->from || !x->to || !x->sorted || !x->mean || !r->iter_s ||
        !r->stages)
        return PS_ERR_SYSTEM; /* ps_calloc said what */
    if (fault_here(x, PS_EXEC_FAULT_SETUP))
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory allocating the execution's buffers (injected by the test hook "
                                      "fail-setup:%d)", x->net.rank);
    return PS_OK;
}

/* What the set-up does on this rank alone: the schedule and the cost model's prediction, the communicators' records,
 * the layers' work, the backend's needs, this rank's predicted work and every buffer of the later phases. */
static ps_status setup_local(exec_ctx *x, const ps_cluster *c, int iters, ps_exec_result *r)
{
    const ps_plan *plan = x->plan;
    PS_TRY(ps_sched_create(&x->sch));
    /* the prediction builds the schedule into x->sch: the order run below is the one the prediction simulated */
    PS_TRY(ps_cost_plan_ws(x->cp, x->m, c, plan, x->sch, &x->pred));
    int64_t n_mb = ps_plan_micro_batches(plan);
    void *ub = NULL;
    int flag = 0;
    /* MPI_TAG_UB is an attribute of MPI_COMM_WORLD, the same for every communicator of the job */
    PS_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag));
    int64_t top = (n_mb * x->S) * 2 + 2;
    if (flag && top > *(int *)ub)
        return PS_FAIL(PS_ERR_INPUT, "%lld micro-batches x %d stages need message tags up to %lld; this MPI allows %d",
                       (long long)n_mb, x->S, (long long)top, *(int *)ub);
    PS_TRY(plan_comms(x));
    PS_TRY(build_layers(x, c));
    x->passes = ps_sched_device_passes(x->sch, x->dev, &x->count);
    rank_needs(x, &x->need, &x->static_bytes);
    x->need.dtype = (int)x->m->dtype;
    x->need.sends = x->count; /* a pass sends at most one message */
    PS_TRY(alloc_buffers(x, iters, r));
    double opt_s = x->pred.stages[ps_sched_stage_of(x->sch, x->dev, 0)].opt_s;
    return predict_rank(x, x->passes, x->count, opt_s, &x->p_comp, &x->p_comm, &x->p_cp, &x->p_ep);
}

/* Set-up. Collective over comm, and the first collective of the run: everything a rank may fail at alone before the
 * passes (memory, most likely) happens here, and one agreement at the end makes such a failure every rank's before
 * any other collective. Fails with PS_ERR_INPUT the same on every rank (a plan past this MPI's tags or the limits of
 * plan_comms) or PS_ERR_SYSTEM (memory), in both cases on every rank. The caller frees x (free_ctx) and r
 * (ps_exec_result_free) whatever it returns. */
static ps_status exec_setup(exec_ctx *x, MPI_Comm comm, const ps_cluster *c, int iters, ps_exec_result *r)
{
    return ps_mpi_agree_status(comm, setup_local(x, c, iters, r), "setting up the execution");
}

/* ---- binding ---- */

/* Every communicator of x->comm, in array order (MPI_Comm_split and MPI_Comm_dup are collective over their parent). */
static ps_status create_comms(exec_ctx *x)
{
    for (int i = 0; i < x->n_comm; i++) {
        exec_comm *e = &x->comm[i];
        if (e->dup_of >= 0)
            PS_MPI(MPI_Comm_dup(x->comm[e->dup_of].comm, &e->comm));
        else
            PS_MPI(MPI_Comm_split(x->net.world, e->color, x->net.rank, &e->comm));
        PS_MPI(MPI_Comm_set_errhandler(e->comm, MPI_ERRORS_RETURN));
    }
    return PS_OK;
}

/* Bind: the communicators and the backend. Collective over comm: duplicates it into x->net.world, learns this rank's
 * place on its node, creates the communicators, opens the backend (local: a rank that fails to, out of device
 * memory, fails every rank by the agreement after it) and binds every communicator to it (collective per
 * communicator, NCCL's bootstrap for the cuda backend: agreed after each). May fail with an MPI failure of a
 * collective, which MPI reports where it happens, or with an agreed failure of the backend, on every rank. */
static ps_status exec_bind(exec_ctx *x, MPI_Comm comm)
{
    PS_MPI(MPI_Comm_dup(comm, &x->net.world));
    PS_MPI(MPI_Comm_set_errhandler(x->net.world, MPI_ERRORS_RETURN));
    MPI_Comm node;
    PS_MPI(MPI_Comm_split_type(x->net.world, MPI_COMM_TYPE_SHARED, x->net.rank, MPI_INFO_NULL, &node));
    int rc = MPI_Comm_rank(node, &x->net.node_rank);
    MPI_Comm_free(&node);
    PS_TRY(ps_mpi_status(rc, "MPI_Comm_rank", __FILE__, __LINE__));
    PS_TRY(create_comms(x));
    ps_status st = fault_here(x, PS_EXEC_FAULT_OPEN)
                       ? PS_FAIL(PS_ERR_SYSTEM, "the %s backend could not allocate its buffers (injected by the test "
                                                "hook fail-open:%d)", x->be->name, x->net.rank)
                       : x->be->open(&x->need, &x->net, &x->bs);
    PS_TRY(ps_mpi_agree_status(x->net.world, st, "setting up the execution"));
    for (int i = 0; i < x->n_comm; i++)
        PS_TRY(ps_mpi_agree_status(x->net.world, x->be->bind(x->bs, &x->net, x->comm[i].comm),
                                   "binding a communicator"));
    return PS_OK;
}

/* ---- running ---- */

static ps_status run_iteration(exec_ctx *x, double *dt)
{
    ps_exec_where w = {.what = "every rank to start the iteration (a barrier)", .op = -1, .peer = -1};
    MPI_Request req;
    PS_MPI(MPI_Ibarrier(x->net.world, &req));
    PS_TRY(ps_exec_mpi_wait(&x->net, &req, &w));
    x->n_trace = 0;
    double t0 = now();
    for (int64_t i = 0; i < x->count; i++) PS_TRY(run_pass(x, &x->passes[i]));
    double f0 = now();
    PS_TRY(x->be->flush(x->bs, &x->net));
    x->t_wait += now() - f0;
    PS_TRY(iteration_tail(x, x->static_bytes));
    PS_TRY(x->be->sync(x->bs));
    *dt = now() - t0;
    return PS_OK;
}

/* Run: the warm-up and timed iterations, this rank's times into r->iter_s and the sums of x. Collective over
 * x->net.world: a rank that fails (its watchdog, MPI, the backend) stops; the others stop at their own watchdog, every
 * wait of an iteration being under it, or finish; all meet in one agreement at the end, so a failure here is every
 * rank's before the reduction. */
static ps_status exec_iterate(exec_ctx *x, const ps_exec_opts *o, ps_exec_result *r)
{
    if (o->log && x->net.rank == 0)
        fprintf(o->log, "# exec: %d rank(s), backend %s, %d warm-up + %d timed iteration(s), %lld passes on rank 0\n",
                x->net.nranks, x->be->name, o->warmup, o->iters, (long long)x->count);
    ps_status st = PS_OK;
    for (int it = 0; it < o->warmup + o->iters && st == PS_OK; it++) {
        bool timed = it >= o->warmup;
        x->t_comp = x->t_comm = x->t_wait = 0;
        x->n_icoll = x->n_reshard = x->n_ring = x->n_cp_ring = x->n_cp_a2a = x->n_ep_a2a = 0;
        x->n_fused_f = x->n_fused_b = 0;
        x->stream_b = 0;
        x->t_cp = x->t_ep = x->cp_bytes = x->ep_bytes = x->ep_recv = 0;
        double dt = 0;
        st = run_iteration(x, &dt);
        if (st != PS_OK) break;
        if (timed) {
            x->comp += x->t_comp;
            x->comm_t += x->t_comm;
            x->wait += x->t_wait;
            x->cp_t += x->t_cp;
            x->ep_t += x->t_ep;
            r->iter_s[it - o->warmup] = dt;
            if (o->log && x->net.rank == 0)
                fprintf(o->log, "# iteration %d: %.4g s on rank 0\n", it - o->warmup + 1, dt);
        } else { /* warm-up passes do not count in the stage times */
            memset(x->st_sum, 0, (size_t)x->S * 3 * sizeof *x->st_sum);
            memset(x->st_n, 0, (size_t)x->S * 3 * sizeof *x->st_n);
        }
    }
    return ps_mpi_agree_status(x->net.world, st, "executing the plan");
}

/* ---- the reduction ---- */

/* Reduce: the results every rank gets. Collective over x->net.world, and nothing else: the buffers came from the
 * set-up, so only an MPI failure of a collective, which MPI reports where it happens, can end it. Moves this rank's
 * trace into r. */
static ps_status exec_reduce(exec_ctx *x, int iters, ps_exec_result *r)
{
    int nranks = x->net.nranks, S3 = x->S * 3;
    /* an iteration's time is its slowest rank's */
    PS_MPI(MPI_Allreduce(MPI_IN_PLACE, r->iter_s, iters, MPI_DOUBLE, MPI_MAX, x->net.world));
    r->iters = iters;
    memcpy(x->sorted, r->iter_s, (size_t)iters * sizeof *x->sorted);
    /* the calibration's statistics: median, p10, p90 and spread = (p90 - p10) / median */
    ps_bench_stat bs = ps_bench_stats(x->sorted, iters);
    r->median_s = bs.median;
    r->p10_s = bs.p10;
    r->p90_s = bs.p90;
    r->spread = bs.spread;
    double mine[5] = {x->comp / iters, x->comm_t / iters, x->wait / iters, x->p_comp, x->p_comm};
    double sum[5];
    PS_MPI(MPI_Allreduce(mine, sum, 5, MPI_DOUBLE, MPI_SUM, x->net.world));
    r->compute_s = sum[0] / nranks;
    r->comm_s = sum[1] / nranks;
    r->wait_s = sum[2] / nranks;
    r->pred_compute_s = sum[3] / nranks;
    r->pred_comm_s = sum[4] / nranks;
    r->predicted_s = x->pred.iter_time_s;
    r->pred_peak_bytes = ps_prediction_peak(&x->pred);
    double peak = x->be->peak_bytes(x->bs), peak_all = 0;
    PS_MPI(MPI_Allreduce(&peak, &peak_all, 1, MPI_DOUBLE, MPI_MAX, x->net.world));
    r->peak_bytes = peak_all;
    double *mean = x->mean;
    for (int i = 0; i < S3; i++) mean[i] = x->st_n[i] ? x->st_sum[i] / (double)x->st_n[i] : 0;
    PS_MPI(MPI_Allreduce(mean, mean + S3, S3, MPI_DOUBLE, MPI_MAX, x->net.world));
    r->n_stages = x->S;
    for (int s = 0; s < x->S; s++) {
        ps_exec_stage *e = &r->stages[s];
        e->f = mean[S3 + s * 3];
        e->b = mean[S3 + s * 3 + 1];
        e->w = mean[S3 + s * 3 + 2];
        e->pred_f = x->pred.stages[s].fwd;
        e->pred_b = x->pred.stages[s].bwd_b;
        e->pred_w = x->pred.stages[s].bwd_w;
    }
    /* the last iteration's passes, overlapped all-reduces, resharding all-gathers, ring steps and all-to-alls, and the
     * bytes of CP and EP, summed over the ranks */
    int64_t n_all[9] = {0}, mine_n[9] = {x->n_trace, x->n_icoll, x->n_reshard, x->n_ring, x->n_cp_ring, x->n_cp_a2a,
                                         x->n_ep_a2a, x->n_fused_f, x->n_fused_b};
    PS_MPI(MPI_Allreduce(mine_n, n_all, 9, MPI_INT64_T, MPI_SUM, x->net.world));
    r->fused_fwd = n_all[7];
    r->fused_bwd = n_all[8];
    r->cp_ring_steps = n_all[4];
    r->cp_alltoalls = n_all[5];
    r->ep_alltoalls = n_all[6];
    double mine_c[7] = {x->cp_t / iters, x->ep_t / iters, x->p_cp, x->p_ep, x->cp_bytes, x->ep_bytes, x->stream_b};
    double sum_c[7];
    PS_MPI(MPI_Allreduce(mine_c, sum_c, 7, MPI_DOUBLE, MPI_SUM, x->net.world));
    r->stream_bytes = sum_c[6];
    r->cp_s = sum_c[0] / nranks;
    r->ep_s = sum_c[1] / nranks;
    r->pred_cp_s = sum_c[2] / nranks;
    r->pred_ep_s = sum_c[3] / nranks;
    r->cp_bytes = sum_c[4];
    r->ep_bytes = sum_c[5];
    PS_MPI(MPI_Allreduce(&x->ep_recv, &r->ep_max_recv_bytes, 1, MPI_DOUBLE, MPI_MAX, x->net.world));
    r->passes = n_all[0];
    r->ov_colls = n_all[1];
    r->reshards = n_all[2];
    r->ring_steps = n_all[3];
    r->device = x->dev;
    r->local = x->local;
    r->n_trace = x->n_trace;
    r->trace = x->trace;
    r->trace_from = x->from;
    r->trace_to = x->to;
    x->trace = NULL;
    x->from = x->to = NULL;
    return PS_OK;
}

/* Frees what the phases made, the communicators in the order every rank made them (MPI_Comm_free is collective). */
static void free_ctx(exec_ctx *x)
{
    if (x->be && x->bs) x->be->close(x->bs);
    for (int i = 0; i < x->n_comm; i++)
        if (x->comm[i].comm != MPI_COMM_NULL) MPI_Comm_free(&x->comm[i].comm);
    if (x->net.world != MPI_COMM_NULL) MPI_Comm_free(&x->net.world);
    ps_prediction_free(&x->pred);
    ps_sched_destroy(x->sch);
    free(x->lj);
    free(x->boundary);
    free(x->act_mb);
    free(x->st_sum);
    free(x->st_n);
    free(x->trace);
    free(x->from);
    free(x->to);
    free(x->sorted);
    free(x->mean);
}

/* The phases in order, each agreed on every rank before the next begins: a failure in any of them is every rank's,
 * so all leave together (docs/exec.md, "Phases and the agreement rule"). */
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
    x->fault = o->fault;
    x->be = find_backend(o->backend);
    if (!x->be) return PS_FAIL(PS_ERR_INPUT, "unknown exec backend '%s'", o->backend);
    int nranks = 0, rank = 0;
    PS_MPI(MPI_Comm_size(comm, &nranks));
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_TRY(ps_exec_check(plan, m, c, nranks));
    /* a backend without the fused kernel would run a fused layer's core as its two GEMMs, measured against work it
     * does not do (psearch exec hands such plans over with their layers unfused and says so) */
    int64_t n_fused = ps_exec_fused_layers(plan, m, c);
    if (n_fused > 0 && !x->be->attn)
        return PS_FAIL(PS_ERR_INPUT, "%lld layer(s) run fused attention, which the %s backend has no kernel for: give "
                                     "it the plan with attention unfused", (long long)n_fused, x->be->name);
    x->net.rank = rank;
    x->net.nranks = nranks;
    x->net.watchdog_s = o->watchdog_s > 0 ? o->watchdog_s : 60;
    x->net.skip_first_send = fault_here(x, PS_EXEC_FAULT_SKIP_SEND);
    x->width = (int)ps_strategy_width(&plan->layer[0]); /* tp x cp x dp */
    x->dev = rank / x->width;
    x->local = rank % x->width;
    x->S = plan->pp * plan->vpp;

    ps_status st = exec_setup(x, comm, c, o->iters, r);
    if (st == PS_OK) st = exec_bind(x, comm);
    if (st == PS_OK) st = exec_iterate(x, o, r);
    if (st == PS_OK) st = exec_reduce(x, o->iters, r);
    free_ctx(x);
    if (st != PS_OK) {
        ps_exec_result_free(r);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

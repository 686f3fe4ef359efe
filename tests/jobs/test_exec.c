/* MPI test of the executor (jobs/, 4 ranks = the 4 GPUs of p3-8xlarge:1): plans with PP x TP, PP alone, DP with
 * ZeRO-3, per-layer TP degrees with recomputation and sequence parallelism, and every schedule kind run to the end
 * (no deadlock), with each rank's executed passes compared with an order built here independently from the schedules
 * library, the peer of every pipeline message checked against the placement rule (device of the neighbouring stage,
 * same index in the stage), and the measured times positive and finite. With --faults instead: one rank failing
 * alone (the fault hook) fails every rank alike, without a hang. Every rank runs every check; the exit code reports a
 * failure on any rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "mpi_check.h"
#include "ps_cost.h"
#include "ps_hw.h"
#include "ps_jobs.h"
#include "ps_models.h"
#include "ps_schedules.h"

static int g_rank, g_size;
static int g_failures;

typedef struct {
    const char *name;
    int tp, dp, pp, vpp, zero;
    const char *sched;
    int64_t gbs;
    ps_recompute ckpt;
    bool sp;
    bool mixed; /* layers of the first half at tp x dp, the rest at (tp*dp) x 1: per-layer TP degrees */
    int mbs;    /* samples per micro-batch and replica (0: 1) */
    ps_overlap ov, ov2; /* TP overlap of the layers (ov2: of the second half of a mixed plan) */
} exec_case;

/* The overlapped all-reduces and resharding all-gathers one iteration of the plan runs on all ranks, from the layers'
 * TP collectives and the resharding rule: every micro-batch's forward and backward on every rank of its stage, each
 * overlapped layer's collectives once per sub-batch (two), a cross-pass layer under full recomputation repeating its
 * forward ones in the backward. */
static void expected_counts(const ps_plan *plan, const ps_model *m, int64_t *ov, int64_t *rs, int64_t *ring)
{
    int64_t n_mb = ps_plan_micro_batches(plan), global_mb = plan->gbs / n_mb;
    int64_t width = (int64_t)plan->layer[0].tp * plan->layer[0].dp;
    *ov = *rs = *ring = 0;
    for (int s = 0; s < plan->pp * plan->vpp; s++)
        for (int64_t i = plan->cuts[s]; i < plan->cuts[s + 1]; i++) {
            const ps_strategy *t = &plan->layer[i];
            if (t->overlap == PS_OVERLAP_TE && t->tp > 1) {
                /* te: each paired SP collective is tp - 1 ring steps (full recomputation repeats the forward's) */
                ps_layer_gemms g;
                ps_layer_gemm_shapes(&m->layers[i], global_mb / t->dp, t->tp, &g);
                int64_t pairs[2] = {0, 0};
                for (int pass = 0; pass < 2; pass++)
                    for (int b = 0; b < (pass ? g.bwd_tp_colls : g.tp_colls); b++) {
                        int ag, rs_;
                        pairs[pass] += 2 * ps_layer_te_pair(&g, b, &ag, &rs_);
                    }
                int64_t per = pairs[0] + pairs[1] + (t->ckpt == PS_RECOMP_FULL ? pairs[0] : 0);
                *ring += per * (t->tp - 1) * n_mb * width;
            }
            if (ps_overlap_is_oases(t->overlap) && t->tp > 1) {
                ps_layer_gemms g;
                ps_layer_gemm_shapes(&m->layers[i], global_mb / t->dp, t->tp, &g);
                int per = g.tp_colls + g.bwd_tp_colls;
                if (t->ckpt == PS_RECOMP_FULL && t->overlap == PS_OVERLAP_CROSS) per += g.tp_colls;
                *ov += 2 * per * n_mb * width;
            }
            if (i > plan->cuts[s]) {
                ps_group g;
                double bytes;
                int d = ps_cost_reshard_group(&m->layers[i - 1], m->dtype, global_mb, &plan->layer[i - 1], t, 0, &g,
                                              &bytes);
                *rs += ((d & PS_RESHARD_FWD) != 0) + ((d & PS_RESHARD_BWD) != 0);
            }
        }
    *rs *= n_mb * width;
}

static void check_case(const exec_case *k, const ps_model *m, const ps_cluster *c, const ps_cost_params *cp)
{
    ps_strategy s = {.tp = k->tp, .dp = k->dp, .zero = k->zero, .ckpt = k->ckpt, .sp = k->sp, .overlap = k->ov};
    ps_plan plan;
    ps_status st = ps_plan_uniform(m, k->gbs, k->mbs > 0 ? k->mbs : 1, k->pp, k->vpp, k->sched, &s, &plan);
    CHECK(st == PS_OK, "%s: plan: %s", k->name, ps_error_message());
    if (st != PS_OK) return;
    if (k->mixed)
        for (int64_t i = m->n_layers / 2; i < m->n_layers; i++) {
            plan.layer[i].tp = k->tp * k->dp;
            plan.layer[i].dp = 1;
            plan.layer[i].ckpt = PS_RECOMP_FULL;
            plan.layer[i].overlap = k->ov2;
        }
    ps_exec_opts o;
    ps_exec_opts_default(&o);
    o.iters = 2;
    o.warmup = 1;
    o.watchdog_s = 60;
    ps_exec_result r;
    double t0 = MPI_Wtime();
    st = ps_exec_run(MPI_COMM_WORLD, &plan, m, c, cp, &o, &r);
    double el = MPI_Wtime() - t0;
    CHECK(st == PS_OK, "%s: exec: %s", k->name, ps_error_message());
    if (st != PS_OK) {
        ps_plan_free(&plan);
        return;
    }
    if (g_rank == 0) printf("# %-24s median %.4g s (predicted %.4g s), %lld passes, %.2f s in all\n", k->name,
                            r.median_s, r.predicted_s, (long long)r.passes, el);

    /* the order, built here from the library alone */
    int width = k->tp * k->dp, dev = g_rank / width, local = g_rank % width;
    int64_t n_mb = k->gbs / ((int64_t)k->dp * (k->mbs > 0 ? k->mbs : 1));
    ps_sched *ref = NULL;
    CHECK(ps_sched_create(&ref) == PS_OK, "sched");
    st = ps_sched_build(ref, k->sched, k->pp, (int)n_mb, k->vpp);
    CHECK(st == PS_OK, "%s: reference schedule: %s", k->name, ps_error_message());
    if (st == PS_OK) {
        int64_t n = 0;
        const ps_sched_pass *want = ps_sched_device_passes(ref, dev, &n);
        CHECK(r.n_trace == n, "%s: rank %d ran %lld passes, the schedule gives device %d %lld", k->name, g_rank,
              (long long)r.n_trace, dev, (long long)n);
        CHECK(r.device == dev && r.local == local, "%s: rank %d placed at device %d index %d", k->name, g_rank,
              r.device, r.local);
        CHECK(r.passes == ps_sched_total_passes(ref) * width, "%s: %lld passes in all, expected %lld", k->name,
              (long long)r.passes, (long long)(ps_sched_total_passes(ref) * width));
        int S = k->pp * ps_sched_chunks(ref);
        for (int64_t i = 0; i < n && i < r.n_trace; i++) {
            const ps_sched_pass *a = &r.trace[i], *b = &want[i];
            if (a->mb != b->mb || a->chunk != b->chunk || a->op != b->op) {
                CHECK(0, "%s: rank %d pass %lld is %s mb %d chunk %d, the schedule says %s mb %d chunk %d", k->name,
                      g_rank, (long long)i, ps_sched_op_name(a->op), a->mb, a->chunk, ps_sched_op_name(b->op), b->mb,
                      b->chunk);
                break;
            }
            /* the message partners: the same index in the neighbouring stage's device, when that is another one */
            int stg = ps_sched_stage_of(ref, dev, b->chunk);
            int prev = stg > 0 ? ps_sched_device_of(ref, stg - 1) : -1;
            int next = stg + 1 < S ? ps_sched_device_of(ref, stg + 1) : -1;
            int from = -1, to = -1;
            if (b->op == PS_SCHED_F) {
                if (prev >= 0 && prev != dev) from = prev * width + local;
                if (next >= 0 && next != dev) to = next * width + local;
            } else if (b->op == PS_SCHED_B || b->op == PS_SCHED_BW) {
                if (next >= 0 && next != dev) from = next * width + local;
                if (prev >= 0 && prev != dev) to = prev * width + local;
            }
            if (r.trace_from[i] != from || r.trace_to[i] != to) {
                CHECK(0, "%s: rank %d pass %lld (%s mb %d stage %d): from %d to %d, expected from %d to %d", k->name,
                      g_rank, (long long)i, ps_sched_op_name(b->op), b->mb, stg, r.trace_from[i], r.trace_to[i], from,
                      to);
                break;
            }
        }
        /* Every message a rank sent is one another rank received, in the pass that takes it: gather all traces and
         * pair them. A mismatch here is a message that went to the wrong rank or into the wrong pass (which could
         * only work by accident of sizes and tags). */
        int mine = (int)r.n_trace, *counts = calloc((size_t)g_size, sizeof *counts),
            *displs = calloc((size_t)g_size, sizeof *displs);
        int row[5 * 1024], *all = NULL;
        int n_mine = mine < 1024 ? mine : 1024;
        for (int i = 0; i < n_mine; i++) {
            const ps_sched_pass *a = &r.trace[i];
            int v[5] = {a->mb, a->chunk, a->op, r.trace_from[i], r.trace_to[i]};
            memcpy(row + 5 * i, v, sizeof v);
        }
        CHECK(mine <= 1024, "%s: %d passes on rank %d, the test pairs at most 1024", k->name, mine, g_rank);
        int cnt = 5 * n_mine;
        MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
        int total = 0;
        if (g_rank == 0)
            for (int q = 0; q < g_size; q++) {
                displs[q] = total;
                total += counts[q];
            }
        if (g_rank == 0) all = calloc((size_t)total + 1, sizeof *all);
        MPI_Gatherv(row, cnt, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
        if (g_rank == 0 && all) {
            int sends = 0, recvs = 0;
            for (int q = 0; q < g_size; q++)
                for (int i = displs[q]; i < displs[q] + counts[q]; i += 5) {
                    int *e = all + i, to = e[4];
                    if (e[3] >= 0) recvs++;
                    if (to < 0) continue;
                    sends++;
                    int stg = ps_sched_stage_of(ref, q / width, e[1]), dst = e[2] == PS_SCHED_F ? stg + 1 : stg - 1;
                    int found = 0;
                    for (int j = displs[to]; j < displs[to] + counts[to] && !found; j += 5) {
                        int *f = all + j;
                        bool same_dir =
                            e[2] == PS_SCHED_F ? f[2] == PS_SCHED_F : (f[2] == PS_SCHED_B || f[2] == PS_SCHED_BW);
                        found =
                            same_dir && f[0] == e[0] && f[3] == q && ps_sched_stage_of(ref, to / width, f[1]) == dst;
                    }
                    CHECK(found,
                          "%s: rank %d's %s of micro-batch %d (stage %d) to rank %d is received by no pass there",
                          k->name, q, ps_sched_op_name(e[2]), e[0], stg, to);
                }
            CHECK(sends == recvs, "%s: %d messages sent, %d received", k->name, sends, recvs);
            if (k->pp > 1) CHECK(sends > 0, "%s: a pipeline of %d stages sent no message", k->name, k->pp);
        }
        free(all);
        free(counts);
        free(displs);
    }
    ps_sched_destroy(ref);

    int64_t want_ov = 0, want_rs = 0, want_ring = 0;
    expected_counts(&plan, m, &want_ov, &want_rs, &want_ring);
    CHECK(r.ring_steps == want_ring, "%s: %lld TP ring steps per iteration, expected %lld", k->name,
          (long long)r.ring_steps, (long long)want_ring);
    if (k->ov == PS_OVERLAP_TE) CHECK(want_ring > 0, "%s: no ring step", k->name);
    CHECK(r.ov_colls == want_ov, "%s: %lld overlapped all-reduces per iteration, expected %lld", k->name,
          (long long)r.ov_colls, (long long)want_ov);
    CHECK(r.reshards == want_rs, "%s: %lld resharding all-gathers per iteration, expected %lld", k->name,
          (long long)r.reshards, (long long)want_rs);
    if (ps_overlap_is_oases(k->ov) || ps_overlap_is_oases(k->ov2))
        CHECK(want_ov > 0, "%s: nothing overlapped", k->name);
    if (k->mixed) CHECK(want_rs > 0, "%s: nothing resharded", k->name);
    CHECK(isfinite(r.median_s) && r.median_s > 0, "%s: median %g", k->name, r.median_s);
    for (int i = 0; i < r.iters; i++)
        CHECK(isfinite(r.iter_s[i]) && r.iter_s[i] > 0, "%s: iteration %d took %g", k->name, i, r.iter_s[i]);
    CHECK(r.compute_s > 0 && r.pred_compute_s > 0, "%s: computation measured %g, predicted %g", k->name, r.compute_s,
          r.pred_compute_s);
    CHECK(r.median_s >= r.compute_s * 0.5, "%s: an iteration (%g s) shorter than half its computation (%g s)",
          k->name, r.median_s, r.compute_s);
    if (k->tp > 1 || k->dp > 1)
        CHECK(r.comm_s > 0 && r.pred_comm_s > 0, "%s: collectives measured %g, predicted %g", k->name, r.comm_s,
              r.pred_comm_s);
    /* the per-stage prediction is the cost model's for the plan */
    ps_prediction p;
    if (ps_cost_plan(cp, m, c, &plan, &p) == PS_OK) {
        CHECK(r.n_stages == p.n_stages, "%s: %d stages, predicted %d", k->name, r.n_stages, p.n_stages);
        CHECK(fabs(r.predicted_s - p.iter_time_s) <= 1e-12 * p.iter_time_s, "%s: predicted %g vs %g", k->name,
              r.predicted_s, p.iter_time_s);
        for (int si = 0; si < r.n_stages && si < p.n_stages; si++)
            CHECK(r.stages[si].pred_f == p.stages[si].fwd && r.stages[si].f > 0, "%s: stage %d forward %g (pred %g)",
                  k->name, si, r.stages[si].f, r.stages[si].pred_f);
        ps_prediction_free(&p);
    }
    ps_exec_result_free(&r);
    ps_plan_free(&plan);
}

/* One rank fails alone at one point of the run (the fault hook of ps_exec_opts): every rank must return an error, the
 * same status, with the failing rank's cause in its message, and without hanging (the ctest timeout ends a hang). A
 * failure of the set-up or of the backend's open is agreed before any other collective, so no rank waits for the
 * watchdog there; a dropped message is caught by it. A clean run after each shows that all ranks left together,
 * freeing the same communicators. */
static void check_faults(const ps_model *m, const ps_cluster *c, const ps_cost_params *cp)
{
    static const struct {
        const char *spec, *want; /* the hook, and what every rank's message must contain */
        double watchdog_s, most_s; /* the watchdog, and the longest the failed run may take */
    } faults[] = {
        {"fail-setup:2", "fail-setup:2", 60, 20},
        {"fail-open:1", "fail-open:1", 60, 20},
        {"fail-setup:0", "fail-setup:0", 60, 20},
        {"skip-send:0", "watchdog: rank", 2, 30},
    };
    ps_strategy s = {.tp = 2, .dp = 1};
    ps_plan plan;
    ps_status st = ps_plan_uniform(m, 8, 1, 2, 1, "1f1b", &s, &plan);
    CHECK(st == PS_OK, "fault plan: %s", ps_error_message());
    if (st != PS_OK) return;
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        for (int clean = 0; clean < 2; clean++) {
            ps_exec_opts o;
            ps_exec_opts_default(&o);
            o.iters = 1;
            o.warmup = 0;
            o.watchdog_s = clean ? 60 : faults[i].watchdog_s; /* a slow machine (valgrind) must not fail a clean run */
            if (!clean) ps_exec_fault_parse(faults[i].spec, &o.fault);
            ps_exec_result r;
            double t0 = MPI_Wtime();
            st = ps_exec_run(MPI_COMM_WORLD, &plan, m, c, cp, &o, &r);
            double el = MPI_Wtime() - t0;
            int lo = 0, hi = 0, mine = (int)st;
            MPI_Allreduce(&mine, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
            MPI_Allreduce(&mine, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (clean) {
                CHECK(st == PS_OK, "a clean run after %s: %s", faults[i].spec, ps_error_message());
                if (st == PS_OK) ps_exec_result_free(&r);
                continue;
            }
            if (g_rank == 0)
                printf("# fault %-14s status %d on every rank: %s, in %.2f s\n", faults[i].spec, hi,
                       lo == hi ? "yes" : "NO", el);
            CHECK(st == PS_ERR_SYSTEM, "%s: rank %d returned %d (%s)", faults[i].spec, g_rank, (int)st,
                  st == PS_OK ? "success" : ps_error_message());
            CHECK(lo == hi, "%s: the ranks returned different statuses (%d to %d)", faults[i].spec, lo, hi);
            CHECK(st == PS_OK || strstr(ps_error_message(), faults[i].want) != NULL,
                  "%s: rank %d's message lacks '%s': %s", faults[i].spec, g_rank, faults[i].want, ps_error_message());
            CHECK(el < faults[i].most_s, "%s: rank %d took %.1f s to fail (at most %g)", faults[i].spec, g_rank, el,
                  faults[i].most_s);
            if (st == PS_OK) ps_exec_result_free(&r);
        }
    }
    ps_plan_free(&plan);
}

/* ---- context parallelism and the expert grid (--cp-ep) ---- */

typedef struct {
    const char *name;
    int tp, cp, dp;
    ps_cp_comm kind;
    ps_recompute ckpt;
    int ep, etp; /* 0: no expert grid */
    bool te;     /* Transformer Engine's TP overlap (with sequence parallelism) */
} cp_ep_case;

/* Executes the plan of strategy s on every layer of m (pp 1, gbs 8, mbs micro-batch size, 1F1B) on c, 2 iterations
 * after 1 warm-up; false (checked and reported under `name`) when it could not be made or run. */
static bool exec_uniform(const char *name, const ps_strategy *s, int64_t mbs, const ps_model *m, const ps_cluster *c,
                         const ps_cost_params *cp, ps_exec_result *r)
{
    ps_plan plan;
    ps_status st = ps_plan_uniform(m, 8, mbs, 1, 1, "1f1b", s, &plan);
    CHECK(st == PS_OK, "%s: plan: %s", name, ps_error_message());
    if (st != PS_OK) return false;
    ps_exec_opts o;
    ps_exec_opts_default(&o);
    o.iters = 2;
    o.warmup = 1;
    st = ps_exec_run(MPI_COMM_WORLD, &plan, m, c, cp, &o, r);
    CHECK(st == PS_OK, "%s: exec: %s", name, ps_error_message());
    ps_plan_free(&plan);
    return st == PS_OK;
}

/* Runs one plan of m on c (every layer the same strategy, pp 1, gbs 8, mbs 1) and checks the CP ring steps or
 * all-to-alls and the EP all-to-alls, their bytes and the busiest rank's received bytes against counts made here from
 * the model's fields and the rules of docs/exec.md (cp_attention's and ep_exchange's buffers). */
static void check_cp_ep(const cp_ep_case *k, const ps_model *m, const ps_cluster *c, const ps_cost_params *cp)
{
    ps_strategy s = {.tp = k->tp, .cp = k->cp, .dp = k->dp, .cp_comm = k->kind, .ckpt = k->ckpt, .ep = k->ep,
                     .etp = k->etp, .sp = k->tp > 1 && (k->ep > 0 || k->te),
                     .overlap = k->te ? PS_OVERLAP_TE : PS_OVERLAP_NONE,
                     .attn = k->cp > 1 ? PS_ATTN_FUSED : PS_ATTN_UNFUSED};
    ps_exec_result r;
    if (!exec_uniform(k->name, &s, 1, m, c, cp, &r)) return;
    /* by hand: every rank runs every micro-batch's forward and backward of every layer (pp 1) */
    int ranks = g_size, n_mb = 8 / k->dp, rf = k->ckpt == PS_RECOMP_FULL;
    double elt = 2; /* fp16 */
    int64_t steps = 0, a2a = 0, ep_a2a = 0;
    double cp_bytes = 0, ep_bytes = 0, ep_recv = 0;
    for (int64_t i = 0; i < m->n_layers; i++) {
        const ps_layer *l = &m->layers[i];
        if (k->cp > 1 && ps_layer_has_attention(l->kind)) {
            double tok = (double)l->seq / k->cp;
            double qb = tok * (double)l->heads / k->tp * (double)l->head_dim * elt;
            double kb = tok * fmax((double)l->kv_heads / k->tp, 1) * (double)l->head_dim * elt;
            if (k->kind == PS_CP_RING) {
                /* forward: cp - 1 K/V steps; backward: cp steps, K/V first, K/V + dK/dV between, dK/dV last */
                steps += (k->cp - 1) * (1 + rf) + k->cp;
                cp_bytes += 2 * kb * ((k->cp - 1) * (1 + rf) + 2 * (k->cp - 1));
            } else {
                /* Q, K, V and the output, forward and backward, (cp - 1) / cp of each to the other ranks */
                a2a += 4 + 2 * rf;
                cp_bytes += (2 + rf) * (qb + 2 * kb + qb) * (k->cp - 1) / k->cp;
            }
        }
        if (k->ep > 0 && ps_layer_is_moe(l)) {
            double cf = l->capacity_factor;
            double mean = (double)l->seq / k->cp / k->tp * (double)l->top_k * (cf > 0 && cf < 1 ? cf : 1) *
                          (double)l->hidden * elt;
            /* ps_cost_ep_rank_load: the busiest expert (moe_imbalance, capped by the capacity factor) beside the
             * other experts of its GPU at the mean */
            double busy = fmax(1, fmin(cp->moe_imbalance, cf > 0 ? fmax(cf, 1) : INFINITY));
            double el = (double)l->n_experts / k->ep, load = (el - 1 + busy) / el;
            int passes = 2 + rf;
            if (k->ep > 1) {
                ep_a2a += 2 * passes;
                /* each member sends its mean buffer; (ep - 1) x mean leaves an ep group per all-to-all */
                ep_bytes += 2 * passes * (double)ranks * mean * (k->ep - 1) / k->ep;
                /* the busiest member gets load x the mean in the dispatch and its mean back in the combine */
                ep_recv += passes * (load + 1) * mean;
            }
        }
    }
    int64_t want_steps = steps * n_mb * ranks, want_a2a = a2a * n_mb * ranks, want_ep = ep_a2a * n_mb * ranks;
    cp_bytes *= (double)n_mb * ranks;
    ep_bytes *= (double)n_mb;
    ep_recv *= (double)n_mb;
    if (g_rank == 0)
        printf("# %-24s median %.4g s (predicted %.4g s); CP %.4g s (predicted %.4g s), %lld ring steps, %lld "
               "all-to-alls, %.6g bytes; EP %.4g s (predicted %.4g s), %lld all-to-alls, %.6g bytes, busiest rank "
               "received %.6g\n",
               k->name, r.median_s, r.predicted_s, r.cp_s, r.pred_cp_s, (long long)r.cp_ring_steps,
               (long long)r.cp_alltoalls, r.cp_bytes, r.ep_s, r.pred_ep_s, (long long)r.ep_alltoalls, r.ep_bytes,
               r.ep_max_recv_bytes);
    CHECK(!k->te || r.ring_steps > 0, "%s: te ran no TP ring step", k->name);
    CHECK(r.cp_ring_steps == want_steps, "%s: %lld CP ring steps, expected %lld", k->name,
          (long long)r.cp_ring_steps, (long long)want_steps);
    CHECK(r.cp_alltoalls == want_a2a, "%s: %lld CP all-to-alls, expected %lld", k->name, (long long)r.cp_alltoalls,
          (long long)want_a2a);
    CHECK(fabs(r.cp_bytes - cp_bytes) <= 1e-9 * cp_bytes + 0.5, "%s: CP sent %.6g bytes, expected %.6g", k->name,
          r.cp_bytes, cp_bytes);
    CHECK(r.ep_alltoalls == want_ep, "%s: %lld EP all-to-alls, expected %lld", k->name, (long long)r.ep_alltoalls,
          (long long)want_ep);
    CHECK(fabs(r.ep_bytes - ep_bytes) <= 1e-9 * ep_bytes + 0.5, "%s: EP sent %.6g bytes, expected %.6g", k->name,
          r.ep_bytes, ep_bytes);
    CHECK(fabs(r.ep_max_recv_bytes - ep_recv) <= 1e-9 * ep_recv + 0.5,
          "%s: the busiest rank received %.6g bytes, expected %.6g", k->name, r.ep_max_recv_bytes, ep_recv);
    /* times: measured where there is work, the prediction's part of the collectives where it prices some */
    bool has_cp = want_steps + want_a2a > 0, has_ep = k->ep > 0 && (k->ep > 1 || k->etp > 1);
    CHECK(has_cp == (r.cp_s > 0) && has_cp == (r.pred_cp_s > 0), "%s: CP time %g, predicted %g", k->name, r.cp_s,
          r.pred_cp_s);
    CHECK(has_ep == (r.ep_s > 0) && has_ep == (r.pred_ep_s > 0), "%s: EP time %g, predicted %g", k->name, r.ep_s,
          r.pred_ep_s);
    CHECK(r.cp_s + r.ep_s <= r.comm_s * (1 + 1e-9) && isfinite(r.median_s) && r.median_s > 0,
          "%s: CP %g + EP %g s beyond the collectives' %g s", k->name, r.cp_s, r.ep_s, r.comm_s);
    ps_exec_result_free(&r);
}

/* A plan of m priced with fused attention outside cp runs on the cpu backend with its kernel (calib/attn_cpu.c): every
 * attention layer of every micro-batch (of each of Oases' two sub-batches) once forward (twice under full
 * recomputation) and once backward, on every rank (pp 1), and nothing refused. */
static void check_fused(const char *name, int tp, int dp, int mbs, ps_recompute ckpt, ps_overlap ov, const ps_model *m,
                        const ps_cluster *c, const ps_cost_params *cp)
{
    ps_strategy s = {.tp = tp, .dp = dp, .ckpt = ckpt, .sp = ov == PS_OVERLAP_TE, .overlap = ov,
                     .attn = PS_ATTN_FUSED};
    ps_exec_result r;
    if (!exec_uniform(name, &s, mbs, m, c, cp, &r)) return;
    int64_t attn = 0, n_mb = 8 / dp / mbs, rf = ckpt == PS_RECOMP_FULL;
    int64_t subs = ps_overlap_is_oases(ov) && mbs > 1 ? 2 : 1; /* a sub-batch of no sample runs nothing */
    for (int64_t i = 0; i < m->n_layers; i++) attn += ps_layer_has_attention(m->layers[i].kind);
    int64_t want_b = attn * n_mb * subs * g_size, want_f = want_b * (1 + rf);
    if (g_rank == 0)
        printf("# %-24s median %.4g s (predicted %.4g s), computation %.4g s (predicted %.4g s), %lld fused "
               "forwards, %lld backwards\n", name, r.median_s, r.predicted_s, r.compute_s, r.pred_compute_s,
               (long long)r.fused_fwd, (long long)r.fused_bwd);
    CHECK(r.fused_fwd == want_f && r.fused_bwd == want_b, "%s: %lld fused forwards and %lld backwards, expected "
          "%lld and %lld", name, (long long)r.fused_fwd, (long long)r.fused_bwd, (long long)want_f, (long long)want_b);
    CHECK(r.compute_s > 0 && isfinite(r.compute_s) && r.pred_compute_s > 0, "%s: computation %g s (predicted %g s)",
          name, r.compute_s, r.pred_compute_s);
    if (ckpt == PS_RECOMP_NONE && (ov == PS_OVERLAP_NONE || ps_overlap_is_oases(ov))) {
        /* the elementwise traffic is the fused kernel's, as priced: against the same plan unfused, every attention
         * layer of every micro-batch on every rank streams elementwise_passes x (unfused - fused activation bytes)
         * less, forward once and backward twice (exec before 2026-11-27 streamed the unfused layer's either way) */
        ps_strategy su = s;
        su.attn = PS_ATTN_UNFUSED;
        ps_exec_result ru;
        if (exec_uniform(name, &su, mbs, m, c, cp, &ru)) {
            double less = 0;
            for (int64_t i = 0; i < m->n_layers; i++) {
                const ps_layer *l = &m->layers[i];
                if (!ps_layer_has_attention(l->kind)) continue;
                less += ps_layer_act_bytes_attn(l, m->dtype, tp, false, PS_RECOMP_NONE, PS_ATTN_UNFUSED) -
                        ps_layer_act_bytes_attn(l, m->dtype, tp, false, PS_RECOMP_NONE, PS_ATTN_FUSED);
            }
            less *= 3 * cp->elementwise_passes * (double)mbs * (double)n_mb * g_size;
            CHECK(less > 0 && fabs((ru.stream_bytes - r.stream_bytes) - less) <= 1e-9 * ru.stream_bytes,
                  "%s: streamed %.6g bytes fused, %.6g unfused: %.6g less, expected %.6g", name, r.stream_bytes,
                  ru.stream_bytes, ru.stream_bytes - r.stream_bytes, less);
            ps_exec_result_free(&ru);
        }
    }
    ps_exec_result_free(&r);
}

static void run_cp_ep(const char *dense_path, const char *moe_path, const char *cluster_path)
{
    ps_model full, m, moe;
    ps_cluster a100, v100;
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.dtype = PS_DTYPE_FP16;
    int ok = ps_model_load(dense_path, &mo, &full) == PS_OK;
    CHECK(ok, "model: %s", ps_error_message());
    int okm = ok && ps_model_scaled(&full, 16, 8, &m) == PS_OK;
    int okt = ps_model_load(moe_path, &mo, &moe) == PS_OK;
    CHECK(okt, "MoE model: %s", ps_error_message());
    int oka = ps_cluster_load(cluster_path, &a100) == PS_OK, okv = ps_cluster_load("p3-8xlarge:1", &v100) == PS_OK;
    CHECK(oka && okv, "cluster: %s", ps_error_message());
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    /* context parallelism needs fused attention, which the V100s of p3-8xlarge lack: 4 A100s */
    const cp_ep_case cps[] = {
        {"tp1 cp2 dp2, ring", 1, 2, 2, PS_CP_RING, PS_RECOMP_NONE, 0, 0, false},
        {"tp2 cp2, ring, full", 2, 2, 1, PS_CP_RING, PS_RECOMP_FULL, 0, 0, false},
        {"tp1 cp4, ring", 1, 4, 1, PS_CP_RING, PS_RECOMP_NONE, 0, 0, false},
        {"tp2 cp2, a2a", 2, 2, 1, PS_CP_A2A, PS_RECOMP_NONE, 0, 0, false},
        {"tp2 cp2, ring, sp, te", 2, 2, 1, PS_CP_RING, PS_RECOMP_NONE, 0, 0, true},
    };
    const cp_ep_case eps[] = {
        {"tp2 dp2, ep2 etp1", 2, 1, 2, PS_CP_RING, PS_RECOMP_NONE, 2, 1, false},
        {"tp2 dp2, ep2 etp2", 2, 1, 2, PS_CP_RING, PS_RECOMP_NONE, 2, 2, false},
        {"tp1 dp4, ep2 etp1, full", 1, 1, 4, PS_CP_RING, PS_RECOMP_FULL, 2, 1, false},
    };
    if (okm && oka)
        for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) check_cp_ep(&cps[i], &m, &a100, &cp);
    if (okt && okv)
        for (size_t i = 0; i < sizeof eps / sizeof eps[0]; i++) check_cp_ep(&eps[i], &moe, &v100, &cp);
    if (okm && oka) { /* fused attention outside cp: the A100s have it */
        check_fused("tp2 dp2, fused", 2, 2, 1, PS_RECOMP_NONE, PS_OVERLAP_NONE, &m, &a100, &cp);
        check_fused("tp2 dp2, fused, selective", 2, 2, 1, PS_RECOMP_SELECTIVE, PS_OVERLAP_NONE, &m, &a100, &cp);
        check_fused("tp1 dp4, fused, full", 1, 4, 1, PS_RECOMP_FULL, PS_OVERLAP_NONE, &m, &a100, &cp);
        check_fused("tp2 dp2, fused, sp, te", 2, 2, 1, PS_RECOMP_NONE, PS_OVERLAP_TE, &m, &a100, &cp);
        check_fused("tp2 dp2 mbs 2, fused, oases, full", 2, 2, 2, PS_RECOMP_FULL, PS_OVERLAP_OASES, &m, &a100, &cp);
        check_fused("tp4 mbs 2, fused, cross", 4, 1, 2, PS_RECOMP_NONE, PS_OVERLAP_CROSS, &m, &a100, &cp);
    }
    if (oka) ps_cluster_free(&a100);
    if (okv) ps_cluster_free(&v100);
    if (okm) ps_model_free(&m);
    if (ok) ps_model_free(&full);
    if (okt) ps_model_free(&moe);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    bool faults = argc > 2 && strcmp(argv[2], "--faults") == 0;
    if (argc == 5 && strcmp(argv[2], "--cp-ep") == 0 && g_size == 4) {
        run_cp_ep(argv[1], argv[3], argv[4]);
        int all = 0;
        MPI_Allreduce(&g_failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (g_rank == 0) printf("%s: %d failed check(s) over %d ranks\n", all ? "FAIL" : "ok", all, g_size);
        MPI_Finalize();
        return all ? 1 : 0;
    }
    if (argc < 2 || g_size != 4) {
        if (g_rank == 0) fprintf(stderr, "usage: mpiexec -n 4 test_exec MODEL.json [--faults]\n");
        MPI_Finalize();
        return 2;
    }
    ps_model full, m;
    ps_cluster c;
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.vocab_pad = 256;
    mo.dtype = PS_DTYPE_FP16;
    int ok = ps_model_load(argv[1], &mo, &full) == PS_OK;
    CHECK(ok, "model: %s", ps_error_message());
    ok = ok && ps_model_scaled(&full, 16, 8, &m) == PS_OK;
    CHECK(ok, "scaled model: %s", ps_error_message());
    int okc = ps_cluster_load("p3-8xlarge:1", &c) == PS_OK;
    CHECK(okc, "cluster: %s", ps_error_message());
    if (ok && okc) {
        ps_cost_params cp;
        ps_cost_params_default(&cp);
        const exec_case cases[] = {
            {"pp2 x tp2, 1f1b", 2, 1, 2, 1, 0, "1f1b", 8, PS_RECOMP_NONE, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"pp4, 1f1b", 1, 1, 4, 1, 0, "1f1b", 8, PS_RECOMP_NONE, false, false, 0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"dp4, zero-3", 1, 4, 1, 1, 3, "1f1b", 8, PS_RECOMP_NONE, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"dp2 x tp2, zero-1, sel.", 2, 2, 1, 1, 1, "1f1b", 8, PS_RECOMP_SELECTIVE, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"per-layer tp 2/4, sp", 2, 2, 1, 1, 0, "1f1b", 8, PS_RECOMP_NONE, true, true,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"pp2 x dp2, gpipe", 1, 2, 2, 1, 2, "gpipe", 8, PS_RECOMP_FULL, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"pp4, interleaved", 1, 1, 4, 2, 0, "interleaved", 8, PS_RECOMP_NONE, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"pp4, zb-h1", 1, 1, 4, 1, 0, "zb-h1", 8, PS_RECOMP_NONE, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"pp4, zb-h2", 1, 1, 4, 1, 0, "zb-h2", 8, PS_RECOMP_NONE, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"pp2 x tp2, v-min", 2, 1, 2, 2, 0, "v-min", 8, PS_RECOMP_NONE, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"pp4, v-half", 1, 1, 4, 2, 0, "v-half", 8, PS_RECOMP_NONE, false, false,
             0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            {"pp4, v-zb", 1, 1, 4, 2, 0, "v-zb", 8, PS_RECOMP_NONE, false, false, 0, PS_OVERLAP_NONE, PS_OVERLAP_NONE},
            /* overlapped TP (Oases): whole model, under a pipeline, and App. D's shape (TP 2 cross-pass, then TP 4
             * with the fine-grained recomputation, resharding between them) */
            {"tp4, oases", 4, 1, 1, 1, 0, "1f1b", 8, PS_RECOMP_FULL, false, false, 2, PS_OVERLAP_OASES,
             PS_OVERLAP_NONE},
            {"pp2 x tp2, cross-pass", 2, 1, 2, 1, 0, "1f1b", 8, PS_RECOMP_NONE, false, false, 2, PS_OVERLAP_CROSS,
             PS_OVERLAP_NONE},
            {"tp 2/4, cross-pass/oases", 2, 2, 1, 1, 0, "1f1b", 8, PS_RECOMP_FULL, false, true, 2, PS_OVERLAP_CROSS,
             PS_OVERLAP_OASES},
            /* Transformer Engine's TP overlap (te): SP collectives as ring steps, alone and under a pipeline with
             * full recomputation (the recomputed forward rings again) */
            {"tp4, sp, te", 4, 1, 1, 1, 0, "1f1b", 8, PS_RECOMP_NONE, true, false, 0, PS_OVERLAP_TE, PS_OVERLAP_NONE},
            {"pp2 x tp2, sp, te, full", 2, 1, 2, 1, 0, "1f1b", 8, PS_RECOMP_FULL, true, false, 0, PS_OVERLAP_TE,
             PS_OVERLAP_NONE},
        };
        int kinds_seen = 0;
        if (faults) check_faults(&m, &c, &cp);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !faults; i++) check_case(&cases[i], &m, &c, &cp);
        for (int kk = 0; kk < ps_sched_kind_count(); kk++)
            for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
                if (strcmp(cases[i].sched, ps_sched_kind_name(kk)) == 0) {
                    kinds_seen++;
                    break;
                }
        CHECK(faults || kinds_seen == ps_sched_kind_count(), "the cases run %d of the %d schedule kinds", kinds_seen,
              ps_sched_kind_count());

        /* refused locally, before any communicator: another rank count, a plan the cluster cannot hold */
        ps_strategy s = {.tp = 2, .dp = 1};
        ps_plan bad;
        if (ps_plan_uniform(&m, 8, 1, 2, 1, "1f1b", &s, &bad) == PS_OK) {
            CHECK(ps_exec_check(&bad, &m, &c, 2) == PS_ERR_INPUT, "a 4-GPU plan accepted on 2 ranks");
            CHECK(strstr(ps_error_message(), "2 MPI rank") != NULL, "message: %s", ps_error_message());
            bad.layer[0].tp = 4; /* tp x dp no longer the stage width of the other layers */
            CHECK(ps_exec_check(&bad, &m, &c, 4) == PS_ERR_INPUT, "mixed stage widths accepted");
            ps_plan_free(&bad);
        }
        /* a plan priced with fused attention on the V100s of p3-8xlarge is refused on every rank, before any
         * communicator: they have no fused kernel (the A100 runs of --cp-ep execute fused plans) */
        if (!faults && ps_plan_uniform(&m, 8, 1, 2, 1, "1f1b", &s, &bad) == PS_OK) {
            int64_t want = 0;
            for (int64_t i = 0; i < m.n_layers; i++)
                if (ps_layer_has_attention(m.layers[i].kind)) {
                    bad.layer[i].attn = PS_ATTN_FUSED;
                    want++;
                }
            CHECK(want > 0 && ps_exec_fused_layers(&bad, &m, &c) == want, "fused layers counted %lld of %lld",
                  (long long)ps_exec_fused_layers(&bad, &m, &c), (long long)want);
            ps_exec_opts o;
            ps_exec_opts_default(&o);
            ps_exec_result r;
            ps_status st = ps_exec_run(MPI_COMM_WORLD, &bad, &m, &c, &cp, &o, &r);
            CHECK(st == PS_ERR_INPUT && strstr(ps_error_message(), "fused attention") != NULL,
                  "a fused plan ran (status %d: %s)", (int)st, st == PS_OK ? "ok" : ps_error_message());
            if (st == PS_OK) ps_exec_result_free(&r);
            ps_plan_free(&bad);
        }
        ps_cluster_free(&c);
    }
    if (ok) ps_model_free(&m);
    ps_model_free(&full);
    int all = 0;
    MPI_Allreduce(&g_failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("%s: %d failed check(s) over %d ranks\n", all ? "FAIL" : "ok", all, g_size);
    MPI_Finalize();
    return all ? 1 : 0;
}

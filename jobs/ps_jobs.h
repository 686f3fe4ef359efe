/* Executing a plan on the allocation (`psearch exec`, docs/exec.md): every MPI rank takes its place in the plan
 * (pipeline device, tensor-parallel rank, data-parallel rank), builds the TP, DP and pipeline communicators, and runs
 * its device's passes in the order the schedules library gives, each with the real work of its layers: the matrix
 * multiplies of the layer's shapes at its TP degree, the elementwise memory traffic, the TP collectives, ZeRO gathers
 * and reduce-scatters, pipeline sends of the boundary activations and gradients, and once per iteration the data-
 * parallel gradient synchronisation and the optimizer's pass over its states. Measured times come back beside the
 * cost model's prediction of the same plan.
 *
 * Backends are a const table chosen at run time: "cpu" (OpenBLAS sgemm, a STREAM-like pass, MPI) always, "cuda"
 * (cuBLAS, device buffers whose peak is measured, NCCL over MPI-exchanged ids) when built with CUDA, cuBLAS and
 * NCCL. */
#ifndef PS_JOBS_H
#define PS_JOBS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "ps_common.h"
#include "ps_cost.h"
#include "ps_schedules.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backends ---- */
int ps_exec_backend_count(void);
/* Name of backend i ("cpu", "cuda"), NULL past the end. */
const char *ps_exec_backend_name(int i);
/* Whether backend `name` can run here: built in, and (cuda) a GPU visible to this process. On false, why is filled
 * with the reason ("psearch was built without CUDA", "no GPU visible to the CUDA runtime"). Local, no MPI. */
bool ps_exec_backend_usable(const char *name, char *why, size_t cap);
/* Whether backend `name` runs fused attention (cpu: calib/attn_cpu.c; cuda: not yet). */
bool ps_exec_backend_fused_attn(const char *name);

/* ---- checks before anything is built ---- */
/* Refuse, with PS_ERR_INPUT naming the problem, a plan this run cannot execute: the plan's rules against the model
 * and cluster (ps_plan_check), its schedule (built and verified), and its GPU count against `nranks`. Local: every
 * rank reaches the same verdict from the same inputs, so a refusal happens before any communicator exists. */
ps_status ps_exec_check(const ps_plan *plan, const ps_model *m, const ps_cluster *c, int nranks);
/* Attention blocks of the plan outside context parallelism whose kernel is (or resolves on c to) fused: a backend
 * without a fused kernel (ps_exec_backend_fused_attn) refuses a plan with any; psearch exec then runs them unfused and
 * reports how many. */
int64_t ps_exec_fused_layers(const ps_plan *plan, const ps_model *m, const ps_cluster *c);

/* ---- running ---- */
/* A fault injected on purpose, for tests only (no user option sets it; docs/exec.md, "Phases and the agreement
 * rule"): rank `rank` fails alone at one point of the run, so a test can see every other rank fail with it instead
 * of hanging. */
typedef enum {
    PS_EXEC_FAULT_NONE = 0,
    PS_EXEC_FAULT_SKIP_SEND, /* "skip-send:R": R drops its first pipeline message; its peer's watchdog must catch it */
    PS_EXEC_FAULT_SETUP,     /* "fail-setup:R": R's set-up fails as out of memory after allocating its buffers */
    PS_EXEC_FAULT_OPEN,      /* "fail-open:R": R's backend fails to open, as out of device memory */
} ps_exec_fault_kind;

typedef struct {
    ps_exec_fault_kind kind;
    int rank;
} ps_exec_fault;

/* A fault from its spec ("skip-send:R", "fail-setup:R", "fail-open:R"); NULL or any other text: none. */
void ps_exec_fault_parse(const char *spec, ps_exec_fault *f);

typedef struct {
    const char *backend; /* "cpu" or "cuda" (resolved by the caller) */
    int iters;           /* timed iterations */
    int warmup;          /* untimed iterations first */
    double watchdog_s;   /* a wait longer than this fails the run, naming the rank, the pass and the peer */
    FILE *log;           /* progress '#' lines (rank 0), or NULL */
    ps_exec_fault fault; /* tests only: none by default */
} ps_exec_opts;

void ps_exec_opts_default(ps_exec_opts *o);

/* One stage's measured and predicted times per micro-batch (the mean over its passes and iterations, the slowest rank
 * of the stage), seconds. */
typedef struct {
    double f, b, w;             /* measured: forward, backward-for-input (recompute included), backward-for-weights */
    double pred_f, pred_b, pred_w;
} ps_exec_stage;

typedef struct {
    int iters;
    double *iter_s;             /* [iters] iteration times: the slowest rank's, barrier to barrier */
    double median_s, p10_s, p90_s, spread;
    /* per iteration, mean over ranks */
    double compute_s, comm_s, wait_s; /* computation; collectives (TP, ZeRO, DP); pipeline sends and receives
                                       * (transfers and the bubble) */
    double pred_compute_s, pred_comm_s; /* the cost model's for the same work (comm: collectives only) */
    double predicted_s;         /* the cost model's iteration time (ps_cost_plan) */
    double pred_peak_bytes;     /* largest per-GPU peak the cost model predicts */
    double peak_bytes;          /* largest device memory in use on any rank during the run; 0 when not measured */
    int n_stages;
    ps_exec_stage *stages;      /* [pp x vpp] */
    int64_t passes;             /* passes run per iteration, all ranks */
    int64_t ov_colls;           /* overlapped TP all-reduces started per iteration, all ranks (Oases layers) */
    int64_t reshards;           /* all-gathers between layers of different TP layouts per iteration, all ranks */
    int64_t ring_steps;         /* TP ring steps (te layers: send + receive beside a GEMM piece) per iteration, all
                                   ranks */
    /* context parallelism (cp > 1) and MoE expert parallelism (an MoE block on the expert grid), per iteration:
     * time (mean over ranks; inside comm_s) against the cost model's (ring: the exposed part, cp_exposed; a2a and
     * ep: all of it, ep_comm), counts and bytes over all ranks (bytes a rank sends to other ranks) */
    double cp_s, pred_cp_s, ep_s, pred_ep_s;
    int64_t cp_ring_steps;      /* CP ring steps (K/V, dK/dV to the next member of the CP group) started */
    int64_t cp_alltoalls;       /* all-to-alls of the a2a kind */
    int64_t ep_alltoalls;       /* dispatch and combine all-to-alls */
    double cp_bytes, ep_bytes;  /* bytes sent to other ranks by the CP ring steps or all-to-alls, by the EP ones */
    double ep_max_recv_bytes;   /* the most all-to-all bytes one rank received (its own part included): the busiest
                                   expert's rank */
    int64_t fused_fwd, fused_bwd; /* fused attention kernels (outside cp) run per iteration, all ranks: forwards
                                     (recomputation's included) and backwards */
    double stream_bytes;        /* bytes streamed for elementwise work and the optimizer step in the last iteration,
                                   all ranks (the memory-bound work the cost model prices over the stream bandwidth) */
    /* this rank */
    int device, local;          /* pipeline device, index in its stage */
    int64_t n_trace;
    ps_sched_pass *trace;       /* the passes this rank ran in its last iteration, in order */
    int *trace_from, *trace_to; /* [n_trace] rank a pass received its input from / sent its output to; -1: none */
} ps_exec_result;

void ps_exec_result_free(ps_exec_result *r);

/* Run `plan` of model m for cluster c on every rank of comm (one rank per GPU of the plan; ps_exec_check first).
 * cp predicts the same plan. Collective over comm, in four phases (set-up, binding, iterations, reduction), each
 * agreed on every rank before the next: on failure every rank returns an error (the failing rank its own, the others
 * "<phase> failed on rank N: <its message>"); a rank whose wait exceeds o->watchdog_s fails with PS_ERR_SYSTEM naming
 * itself, the pass and the peer. Results are complete on every rank (the rank-local fields describe the calling
 * rank); free them with ps_exec_result_free (on failure r holds nothing). */
ps_status ps_exec_run(MPI_Comm comm, const ps_plan *plan, const ps_model *m, const ps_cluster *c,
                      const ps_cost_params *cp, const ps_exec_opts *o, ps_exec_result *r);

#ifdef __cplusplus
}
#endif
#endif

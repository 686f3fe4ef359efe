/* calib/: what psearch measures on the allocation it runs on (MPI, hwloc, CUDA, BLAS, NCCL allowed here, not in
 * hw/): the description of the allocation (`--cluster auto`, calib/detect.c), and the calibration microbenchmarks
 * (`psearch calibrate`): GEMMs of the shapes transformer layers issue, memory bandwidth,
 * collectives the nccl-tests way, and the slowdown of computation and communication that overlap. Each result is a
 * plain row struct: costdb/ stores these rows in its HDF5 tables (docs/costdb.md), so the layout here is the schema.
 * Backends: CPU (OpenBLAS + OpenMP + MPI) always; CUDA (cuBLAS, device copies; NCCL for collectives and overlap)
 * when built with it and a GPU is seen. Collectives and overlap need one backend on every rank: an allocation mixing
 * GPU and CPU ranks gets no rows for them. */
#ifndef PS_CALIB_H
#define PS_CALIB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "ps_common.h"
#include "ps_cost.h"
#include "ps_hw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- rows (one struct per HDF5 table; strings are fixed-size and NUL-terminated) ---- */

/* One rank = one device: a GPU, or on a CPU-only node the cores the rank runs on. */
typedef struct {
    int32_t rank;            /* MPI rank in the calibration run (renumbered by `costdb merge`) */
    int32_t node;            /* node index in the calibration run */
    int32_t local_rank;      /* rank inside its node */
    int32_t threads;         /* OpenMP / BLAS threads of the rank (CPU), 0 on GPU */
    char host[64];
    char kind[8];            /* "cpu" or "gpu" */
    char name[32];           /* device key, compared with the GPU name of the cluster planned ("cpu:<model>" on CPU,
                                the GPU catalog key on GPU) */
    char model[64];          /* the full device name (CPU model name, CUDA device name) */
    double mem_bytes;        /* memory of the device; CPU: the node's memory divided by its ranks [bytes] */
    double peak_fp32_flops;  /* best fp32 GEMM rate measured [FLOP/s] */
    double peak_fp16_flops;  /* best fp16 / bf16 GEMM rate measured, 0 when not measured (CPU) [FLOP/s] */
    double peak_bf16_flops;
    double mem_Bps;          /* median memory bandwidth measured (CPU triad, GPU device copy) [bytes/s] */
} ps_bench_device;

/* ops of the GEMM table's fused attention rows (costdb/db_model.c keeps them out of the GEMM curves) */
#define PS_BENCH_OP_ATTN_FWD "attn_fwd"
#define PS_BENCH_OP_ATTN_BWD "attn_bwd"

typedef struct {
    int32_t rank;
    char dtype[8];           /* fp32, fp64 (CPU); fp32, fp16, bf16 (GPU) */
    char op[16];             /* grid, qkv, out_proj, mlp_up, mlp_down, attn_score, attn_ctx; or the fused attention
                                kernel exec runs (PS_BENCH_OP_ATTN_FWD / _BWD: m queries, n keys, k head width, batch
                                sequences x heads, flops as executed), which is not a GEMM (schema 3) */
    int32_t tp;              /* tensor-parallel degree the shape is for; 0 for the generic grid */
    int64_t m, n, k;         /* (m x k) . (k x n) */
    int64_t batch;           /* GEMMs of that shape per call (attention: micro-batch x local heads) */
    double flops;            /* 2 m n k batch [FLOP] */
    double time_s;           /* median time of one call [s] */
    double flops_per_s;      /* flops / time_s [FLOP/s] */
    double spread;           /* (p90 - p10) / median of the repetitions [1] */
    int32_t reps;
} ps_bench_gemm;

typedef struct {
    int32_t rank;
    char method[16];         /* "triad" (CPU, STREAM a = b + s c) or "d2d_copy" (GPU) */
    int32_t threads;
    double bytes;            /* bytes moved per repetition (STREAM counting: 3 arrays x 8 bytes x N) [bytes] */
    double time_s;           /* median [s] */
    double Bps;              /* bytes / time_s [bytes/s] */
    double spread;
    int32_t reps;
} ps_bench_bw;

typedef struct {
    char op[16];             /* allreduce, allgather, reducescatter, alltoall, sendrecv */
    int32_t group_size;
    int32_t inter_node;      /* 0: every member on one node; 1: one member per node, across nodes */
    int32_t root_rank;       /* lowest world rank of the group (the rank that wrote the row) */
    int32_t n_groups;        /* groups of this shape running at once (as every TP / DP group does in training) */
    double bytes;            /* nccl-tests size: allreduce/reducescatter/alltoall the send buffer, allgather the
                                receive buffer, sendrecv the message [bytes] */
    double time_s;           /* median over repetitions of the slowest member [s] */
    double algbw_Bps;        /* bytes / time_s [bytes/s] */
    double busbw_Bps;        /* algbw x the nccl-tests factor of docs/costdb.md [bytes/s] */
    double spread;
    int32_t reps;
} ps_bench_coll;

typedef struct {
    int32_t rank;
    double gemm_s;           /* the GEMM alone (median) [s] */
    double comm_s;           /* the all-reduce alone [s] */
    double both_s;           /* both launched together [s] */
    double gemm_flops;       /* [FLOP] */
    double comm_bytes;       /* [bytes] */
    double slowdown;         /* s solving both = max + (s - 1) min (the cost model's overlap form) [1] */
    int32_t reps;
} ps_bench_overlap;

/* Written by `psearch exec --record DB` (jobs/, docs/exec.md): one executed plan, predicted against measured. The
 * predictions are the cost model's with the compute_scale / comm_scale it ran with (kept here, so a refit divides
 * them out); computation and communication are the per-rank means over the ranks of the run, per iteration. */
typedef struct {
    char plan[64];           /* plan digest: 16 hex digits (FNV-1a 64 of the plan JSON), then a short summary */
    char model[64];
    char cluster[64];
    char device[32];         /* device key of the ranks that ran it: "cpu:<model>" or the GPU catalog name */
    char backend[8];         /* "cpu" or "cuda" */
    int32_t ranks;
    int32_t iters;           /* timed iterations (after warm-up) */
    double scale;            /* every GEMM dimension and message divided by this (1: the plan's real shapes) [1] */
    double compute_scale;    /* the cost model's compute_scale when it predicted [1] */
    double comm_scale;       /* the cost model's comm_scale when it predicted [1] */
    double predicted_s;      /* predicted iteration time [s] */
    double measured_s;       /* measured median iteration time [s] */
    double spread;           /* (p90 - p10) / median of the measured iterations [1] */
    double predicted_compute_s; /* computation per iteration, mean over ranks [s] */
    double measured_compute_s;
    /* collectives issued per iteration (TP, ZeRO, DP; not pipeline messages), mean over ranks [s] */
    double predicted_comm_s;
    double measured_comm_s;  /* time spent in them, waits for the slowest member included */
    double predicted_peak_bytes; /* largest per-GPU peak memory predicted [bytes] */
    double measured_peak_bytes;  /* largest per-rank peak measured; 0 where not measured (CPU backend) [bytes] */
    char date[32];           /* ISO 8601 UTC */
} ps_bench_measurement;

/* ---- describing the allocation (calib/detect.c) ---- */
/* `--cluster auto`: the allocation of comm's ranks as a cluster: nodes and ranks from MPI (or Slurm's node ids),
 * cores and NUMA domains from hwloc, GPUs from the CUDA runtime, links from the GPU model and sysfs. Every rank ends
 * with the same description. Needs MPI initialized. Collective over comm. */
ps_status ps_cluster_detect(MPI_Comm comm, ps_cluster *out);

/* ---- running the benchmarks ---- */
typedef struct {
    bool quick;              /* CI-sized: small shapes and sizes, few repetitions (docs/costdb.md gives both) */
    int reps;                /* timed repetitions per point (after warm-up) */
    int warmup;
    double spread_warn;      /* a point whose (p90-p10)/median exceeds this is reported as noisy [1] */
    FILE *log;               /* progress and warnings, '#' lines (rank 0), or NULL */
} ps_bench_opts;

void ps_bench_opts_default(ps_bench_opts *o, bool quick);

/* Results of one rank, grown as benchmarks run. */
typedef struct {
    ps_bench_device dev;
    ps_bench_gemm *gemm;
    size_t n_gemm, cap_gemm;
    ps_bench_bw *bw;
    size_t n_bw, cap_bw;
    ps_bench_coll *coll;
    size_t n_coll, cap_coll;
    ps_bench_overlap *ovl;
    size_t n_ovl, cap_ovl;
    int noisy;               /* points above spread_warn */
    char backend[8];         /* "cpu" or "cuda" */
    int node_ranks;          /* ranks on this rank's node (ps_bench_device_init) */
} ps_bench_results;

void ps_bench_results_free(ps_bench_results *r);

/* Median and spread of n timings (sorted in place). */
typedef struct {
    double median, p10, p90, spread;
} ps_bench_stat;
ps_bench_stat ps_bench_stats(double *t, int n);
/* The median of n values, sorted in place: the middle one, or the mean of the middle two when n is even; 0 when
 * n is 0. The one median of calibration, the cost database's tables and `costdb show`. */
double ps_bench_median(double *v, size_t n);

/* This rank's device and place (node, local rank, host) in comm; picks the backend: a GPU when CUDA sees one, else
 * the CPU. Collective over comm. */
ps_status ps_bench_device_init(MPI_Comm comm, ps_bench_results *r);
/* GEMMs on this rank's device (every rank at once: each device measured while its neighbours work, as in training). */
ps_status ps_bench_gemm_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
/* The fused attention kernel of this rank's backend (cpu: calib/attn_cpu.c, the kernel `psearch exec` runs),
 * forward and backward, causal, at the decoder shapes of the GEMMs, all ranks at once; rows in r->gemm. A backend
 * without one (cuda) adds no rows and says so on o->log. */
ps_status ps_bench_attn_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
/* Memory bandwidth of this rank's device, all ranks at once. */
ps_status ps_bench_mem_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
/* Collectives over groups of 2..ranks inside nodes and across nodes; the lowest rank of each group keeps the row. MPI
 * on host memory when every rank is a CPU rank, NCCL on device memory when every rank has a GPU (a build with NCCL);
 * otherwise no rows, and a warning on o->log. */
ps_status ps_bench_coll_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
/* A GEMM and an all-reduce over every rank, alone and together: CPU sgemm + MPI_Iallreduce on CPU ranks, cuBLAS +
 * NCCL on two streams on GPU ranks. Needs >= 2 ranks, all of one kind (no rows otherwise). */
ps_status ps_bench_overlap_run(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
/* The version of the library ps_bench_coll_run will measure collectives with when it is NCCL ("2.28.9"), else ""
 * (MPI, or nothing measured): the cost database's nccl_version. Collective over comm. */
ps_status ps_bench_coll_library(MPI_Comm comm, const ps_bench_results *r, char *version, size_t cap);

/* ---- the CPU fused attention kernel (calib/attn_cpu.c) ----
 * softmax(Q K^T / sqrt(d) [+ causal mask]) V over batch x heads, forward and backward, tiled the FlashAttention-2 way
 * (Dao 2023, arXiv 2307.08691): query blocks against key blocks with an online softmax (running row max and sum, the
 * partial output rescaled), the backward recomputing each tile's scores from the saved log-sum-exp. No s x s matrix
 * exists at any time: the working set is a few tiles per thread, taken from a workspace the caller allocates once
 * (ps_attn_cpu_ws_floats), so running it allocates nothing. Tile products go through cblas_sgemm (OpenBLAS held to
 * one thread inside the kernel's OpenMP region). fp32. Here, in calib/'s public header, because the cpu backend of
 * `psearch exec` runs it (jobs/backend_cpu.c) and `psearch calibrate` times it (bench_attn.c), so that the cost
 * database prices the kernel exec runs. */
/* Row-major, contiguous: Q [batch][heads][sq][d], K [batch][kv_heads][sk][d], V [batch][kv_heads][sk][dv],
 * O and dO [batch][heads][sq][dv], the log-sum-exp [batch][heads][sq]; gradients shaped as their tensors. Query head
 * h reads key/value head h / (heads / kv_heads) (grouped-query attention; kv_heads == heads: ordinary). */
typedef struct {
    int64_t batch, heads, kv_heads;
    int64_t sq, sk;  /* queries and keys per sequence */
    int64_t d, dv;   /* head width of Q and K, of V and O */
    bool causal;     /* query i attends keys 0 .. i only (self-attention, sq == sk) */
    int64_t tile;    /* query and key block rows; 0: PS_ATTN_CPU_TILE */
} ps_attn_cpu_shape;

enum { PS_ATTN_CPU_TILE = 128 };

/* The shape's rules (positive sizes, heads a multiple of kv_heads, sizes BLAS takes), PS_ERR_INPUT naming the one
 * broken. */
ps_status ps_attn_cpu_check(const ps_attn_cpu_shape *a);
/* Workspace floats the forward and the backward need on `threads` OpenMP threads. */
size_t ps_attn_cpu_ws_floats(const ps_attn_cpu_shape *a, int threads);
/* O and the log-sum-exp of every query row (what the backward needs besides Q, K, V, O). */
ps_status ps_attn_cpu_fwd(const ps_attn_cpu_shape *a, const float *q, const float *k, const float *v, float *o,
                          float *lse, float *ws, int threads);
/* dQ, dK, dV (overwritten) from dO, the forward's inputs, O and lse. Parallel over batch x kv_heads: each thread owns
 * a key/value head's dK, dV and its query heads' dQ, so nothing is added across threads. */
ps_status ps_attn_cpu_bwd(const ps_attn_cpu_shape *a, const float *q, const float *k, const float *v, const float *o,
                          const float *lse, const float *dout, float *dq, float *dk, float *dvv, float *ws,
                          int threads);
/* FLOPs the forward executes (two tile products per visited tile, causal tiles above the diagonal skipped at the
 * row level: what ps_layer_attn_keys counts); the backward executes 2.5 times as many. */
double ps_attn_cpu_flops(const ps_attn_cpu_shape *a);

#ifdef __cplusplus
}
#endif
#endif

/* Shared by the benchmark sources of calib/ (not installed): the backend tables. A GEMM / memory backend measures one
 * device; the MPI side (which ranks run at once, barriers) stays in the callers, so it is plain local code. The
 * collective and overlap backends run one step on this rank; the loops around them are bench_coll.c's. */
#ifndef PS_BENCH_INTERNAL_H
#define PS_BENCH_INTERNAL_H

#include "ps_calib.h"

typedef struct {
    const char *name;
    /* GEMM rows of this rank's device (the shapes of bench_gemm.c). */
    ps_status (*gemm)(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
    /* Fused attention rows (op PS_BENCH_OP_ATTN_FWD / _BWD) of the kernel exec runs on this backend; NULL where exec
     * has none (cuda): no rows, and the cost model keeps its analytic fused efficiency for that device. */
    ps_status (*attn)(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
    /* Memory bandwidth: a barrier on comm before each timed run, so that every device of the node streams at once. */
    ps_status (*mem)(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
} ps_bench_backend;

ps_status ps_bench_cpu_gemm(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
ps_status ps_bench_cpu_mem(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
ps_status ps_bench_cpu_attn(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS
ps_status ps_bench_cuda_gemm(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
ps_status ps_bench_cuda_mem(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r);
/* Number of GPUs the CUDA runtime sees (0 without a driver); the device name of the one this rank uses. */
int ps_bench_cuda_probe(int local_rank, char *name, size_t cap, double *mem_bytes);
#endif

const ps_bench_backend *ps_bench_backend_of(const ps_bench_results *r);

/* How one rank runs collectives: MPI on host memory (CPU ranks) or NCCL on device memory (GPU ranks). bench_coll.c
 * owns the rest, shared by both: the groups, sizes, timing loop (barrier, host clock, the slowest member), statistics
 * and rows. Every function returns with this rank's part complete, so a host clock around `run` times it. */
typedef struct {
    const char *name;     /* "mpi" or "nccl" */
    /* Send and receive buffers of `bytes` each on this rank's device, and what the backend needs besides. Local. */
    ps_status (*open)(size_t bytes, void **state);
    /* Ready collectives over g (NCCL: a communicator of its members). Collective over g, agreed over g. */
    ps_status (*bind)(void *state, MPI_Comm g);
    /* One collective `op` (a ps_coll_op) of `count` floats (a multiple of n, nccl-tests sizing) over the bound group
     * g of n ranks, this rank being me; complete on this rank at return. */
    ps_status (*run)(void *state, int op, MPI_Comm g, int n, int me, size_t count);
    void (*unbind)(void *state);
    void (*close)(void *state);
} ps_bench_coll_backend;

/* Computation against communication (bench_coll.c's overlap loop and row): a GEMM and an all-reduce over every rank,
 * each alone and both at once; each call returns when its work is complete on this rank. */
typedef struct {
    const char *name;     /* "mpi" (sgemm in row blocks + MPI_Iallreduce) or "nccl" (cuBLAS + NCCL, two streams) */
    /* Buffers, and for NCCL a communicator over comm (collective over comm, agreed); the work's size for the row. */
    ps_status (*open)(MPI_Comm comm, const ps_bench_opts *o, void **state, double *gemm_flops, double *comm_bytes);
    ps_status (*gemm)(void *state);
    ps_status (*comm)(void *state);
    ps_status (*both)(void *state);
    void (*close)(void *state);
} ps_bench_ovl_backend;

#if PS_HAVE_CUDA && PS_HAVE_CUBLAS && PS_HAVE_NCCL
/* bench_cuda.c: NCCL on the GPU this rank uses (ps_bench_cuda_probe set it). */
extern const ps_bench_coll_backend ps_bench_coll_nccl;
extern const ps_bench_ovl_backend ps_bench_ovl_nccl;
/* The NCCL library's version, "major.minor.patch" ("" when it cannot say). */
void ps_bench_nccl_version(char *out, size_t cap);
#endif

/* Record one row, failing with PS_ERR_SYSTEM when out of memory. */
ps_status ps_bench_push(void **rows, size_t *n, size_t *cap, size_t elt, const void *row);
/* Note a point's spread against o->spread_warn (a '#' warning line on o->log). */
void ps_bench_check_spread(const ps_bench_opts *o, ps_bench_results *r, const char *what, const ps_bench_stat *s);
/* One GEMM point of either backend: its row from the timings' statistics, the spread check, the device's peak for
 * the dtype (fp32, fp16, bf16; none for fp64), and the row recorded. */
ps_status ps_bench_add_gemm(const ps_bench_opts *o, ps_bench_results *r, const char *dtype, const char *op, int tp,
                            int64_t m, int64_t n, int64_t k, int64_t batch, const ps_bench_stat *s);
/* One fused attention point: the kernel's forward or backward over batch sequences of sq queries against sk keys of
 * head width d, its executed FLOPs given (causal tiles skipped; the backward 2.5x the forward's); the device's peak is
 * left to the GEMMs. */
ps_status ps_bench_add_attn(const ps_bench_opts *o, ps_bench_results *r, const char *dtype, bool bwd, int tp,
                            int64_t sq, int64_t sk, int64_t d, int64_t batch, double flops, const ps_bench_stat *s);
/* Time one call fn(ctx) as every CPU calibration point is timed: one call sizes the sample (short calls repeated
 * until a sample lasts 0.2 ms, 1 ms without --quick, at most 1000 per sample), o->warmup calls, then o->reps samples
 * into times[o->reps]; their statistics in *out. fn's failure is returned. */
ps_status ps_bench_time(const ps_bench_opts *o, ps_status (*fn)(void *), void *ctx, double *times, ps_bench_stat *out);
/* n elements of elt bytes (4: float, else double) of small values of both signs, for a benchmark's operands. */
void ps_bench_fill(void *p, size_t n, size_t elt);
/* One memory-bandwidth point of either backend: `bytes` moved per repetition; sets the device's mem_Bps. */
ps_status ps_bench_add_bw(const ps_bench_opts *o, ps_bench_results *r, const char *method, int threads, double bytes,
                          const ps_bench_stat *s);

/* The transformer-layer GEMM shapes (op, tp, m, n, k, batch) measured at hidden size h, heads, head_dim, sequence s
 * and token counts T; `emit` gets each. Shared by the CPU and CUDA backends so both measure the same kinds. */
typedef struct {
    int64_t hidden, heads, head_dim, seq;
    int64_t tokens[4];
    int n_tokens;
    int tps[4];
    int n_tps;
    int64_t grid[8];
    int n_grid;
} ps_bench_shapes;
typedef ps_status (*ps_bench_shape_fn)(void *ctx, const char *op, int tp, int64_t m, int64_t n, int64_t k,
                                       int64_t batch);
ps_status ps_bench_for_shapes(const ps_bench_shapes *s, ps_bench_shape_fn fn, void *ctx);
/* The scaled-down decoder block the CPU benchmarks measure (the GEMMs and the fused attention; bench_gemm.c). */
void ps_bench_cpu_shapes(bool quick, ps_bench_shapes *sh);
/* Elements of the largest A, B and C (batch included) over the shapes: one buffer of each serves every shape. Pass a
 * zeroed ps_bench_gemm_need as ctx of ps_bench_for_shapes. */
typedef struct {
    size_t a, b, c;
} ps_bench_gemm_need;
ps_status ps_bench_gemm_need_of(void *ctx, const char *op, int tp, int64_t m, int64_t n, int64_t k, int64_t batch);

#endif

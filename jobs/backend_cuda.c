/* The CUDA backend (built with CUDA, cuBLAS and NCCL; chosen at run time when the rank sees a GPU): GEMMs with
 * cublasGemmEx in the plan's dtype (fp32 accumulate) on device buffers, the elementwise traffic as a device-to-device
 * copy of the same bytes, activations of every in-flight micro-batch allocated on the device from its forward to its
 * last backward (so the measured peak holds what the schedule keeps), the TP / DP collectives with NCCL on
 * communicators bootstrapped over MPI (rank 0 of each group broadcasts the unique id), and the pipeline messages
 * through MPI from host staging buffers (a device-to-host copy first): NCCL send/recv on one stream would serialize
 * a device's sends behind receives its peer posts later, which deadlocks the 1F1B exchange Megatron avoids with
 * batched p2p. Overlapped TP layers (Oases) run their all-reduces with NCCL on a second stream, each ordered after its
 * block's computation by an event; te layers' ring steps (NCCL send + receive in one group) run on that stream too.
 * Waits poll the stream or the event, so the watchdog applies here too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "exec_internal.h"
#include "ps_comm.h"

typedef struct {
    MPI_Comm mpi;
    ncclComm_t nccl;
} bound_comm;

typedef struct {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    cudaDataType_t t;
    ncclDataType_t nt;
    size_t elt;
    void *a, *b, *c, *s0, *s1, *coll, *coll2, *p2p;
    double a_elems, b_elems, c_elems; /* elements the GEMM operands hold (one matrix each: batches reuse them) */
    size_t stream_bytes;
    float *h_out, *h_in;      /* pipeline staging (host) */
    /* Activations: a pool of device buffers, each either held by a micro-batch slot or free. A slot takes a free
     * buffer large enough, else a new one: after the warm-up iteration the pool holds what the schedule keeps in
     * flight at once, and the timed iterations allocate nothing. */
    struct act_buf {
        void *p;
        double bytes;
        int64_t slot; /* -1: free */
    } *pool;
    size_t n_pool, cap_pool;
    void *statics;            /* weights, gradients and optimizer states of the rank */
    size_t base_used;         /* device memory in use when the backend opened (context, other processes) */
    double peak;
    /* overlapped TP (Oases): the all-reduces of the two sub-batches on a second stream, each ordered after the
     * computation that produced it and finished when its event is */
    cudaStream_t ostream;
    cudaEvent_t ready, ev[2];
    void *ov[2];
    ncclComm_t *ov_comm[2]; /* the communicator of the slot's collective in flight, NULL: none */
    /* te's ring step: NCCL send + receive on the second stream, in one group, from ov[0] into ov[1] */
    cudaEvent_t ring_ev;
    ncclComm_t *ring_comm;  /* the communicator of the step in flight, NULL: none */
    bound_comm *comms;
    int n_comms;
    size_t cap_comms;
    ps_exec_sends sends;
} cuda_state;

static ps_status cuda_fail(cudaError_t e, const char *what)
{
    return PS_FAIL(PS_ERR_SYSTEM, "%s: %s", what, cudaGetErrorString(e));
}
#define CU(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return cuda_fail(e_, #call);                                                            \
    } while (0)
#define NC(call)                                                                                                       \
    do {                                                                                                               \
        ncclResult_t r_ = (call);                                                                                      \
        if (r_ != ncclSuccess) return PS_FAIL(PS_ERR_SYSTEM, "%s: %s", #call, ncclGetErrorString(r_));                 \
    } while (0)

static bool cuda_usable(char *why, size_t cap)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= 0) {
        cudaGetLastError();
        snprintf(why, cap, "no GPU is visible to the CUDA runtime on this machine");
        return false;
    }
    return true;
}

static void note_peak(cuda_state *s)
{
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) == cudaSuccess) {
        double used = (double)(total - free_b) - (double)s->base_used;
        if (used > s->peak) s->peak = used;
    }
}

static void cuda_close(void *state)
{
    cuda_state *s = state;
    if (!s) return;
    for (int i = 0; i < s->n_comms; i++)
        if (s->comms[i].nccl) ncclCommDestroy(s->comms[i].nccl); /* NULL once the watchdog aborted it */
    free(s->comms);
    for (size_t i = 0; i < s->n_pool; i++) cudaFree(s->pool[i].p);
    free(s->pool);
    cudaFree(s->statics);
    void *dev[] = {s->a, s->b, s->c, s->s0, s->s1, s->coll, s->coll2, s->p2p};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) cudaFree(dev[i]);
    cudaFreeHost(s->h_out);
    cudaFreeHost(s->h_in);
    cudaFree(s->ov[0]);
    cudaFree(s->ov[1]);
    if (s->ready) cudaEventDestroy(s->ready);
    if (s->ev[0]) cudaEventDestroy(s->ev[0]);
    if (s->ev[1]) cudaEventDestroy(s->ev[1]);
    if (s->ring_ev) cudaEventDestroy(s->ring_ev);
    if (s->ostream) cudaStreamDestroy(s->ostream);
    if (s->blas) cublasDestroy(s->blas);
    if (s->stream) cudaStreamDestroy(s->stream);
    ps_exec_sends_free(&s->sends);
    free(s);
}

static ps_status dalloc(void **p, double bytes)
{
    size_t n = (size_t)ceil(bytes) + 256;
    CU(cudaMalloc(p, n));
    CU(cudaMemset(*p, 0, n));
    return PS_OK;
}

static ps_status cuda_open_inner(cuda_state *s, const ps_exec_need *need, ps_exec_net *net)
{
    /* one GPU per rank of a node, by the rank's place on its node */
    int count = 0;
    CU(cudaGetDeviceCount(&count));
    s->device = net->node_rank % count;
    CU(cudaSetDevice(s->device));
    CU(cudaFree(NULL)); /* create the context before measuring what is already in use */
    size_t free_b = 0, total = 0;
    CU(cudaMemGetInfo(&free_b, &total));
    s->base_used = total - free_b;
    CU(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    if (cublasCreate(&s->blas) != CUBLAS_STATUS_SUCCESS) return PS_FAIL(PS_ERR_SYSTEM, "cublasCreate failed");
    if (cublasSetStream(s->blas, s->stream) != CUBLAS_STATUS_SUCCESS)
        return PS_FAIL(PS_ERR_SYSTEM, "cublasSetStream failed");
    switch ((ps_dtype)need->dtype) {
    case PS_DTYPE_FP32: s->t = CUDA_R_32F; s->nt = ncclFloat32; s->elt = 4; break;
    case PS_DTYPE_FP16: s->t = CUDA_R_16F; s->nt = ncclFloat16; s->elt = 2; break;
    default: s->t = CUDA_R_16BF; s->nt = ncclBfloat16; s->elt = 2; break; /* bf16, and fp8 computed as bf16 */
    }
    /* need's GEMM sizes count 4 bytes per element; the operands here are of the plan's dtype, and their bytes count
     * in the measured peak as a training step's would */
    double of_dtype = (double)s->elt / 4.0;
    PS_TRY(dalloc(&s->a, need->gemm_a * of_dtype));
    PS_TRY(dalloc(&s->b, need->gemm_b * of_dtype));
    PS_TRY(dalloc(&s->c, need->gemm_c * of_dtype));
    s->a_elems = need->gemm_a / 4;
    s->b_elems = need->gemm_b / 4;
    s->c_elems = need->gemm_c / 4;
    /* The elementwise traffic is copied in pieces (cuda_stream): 256 MiB a piece, several times the L2 cache (50 MB
     * on an H100, 60 MB on an H200), keeps every copy in HBM while the buffers stay out of the measured peak, which
     * a training step's elementwise kernels do not add to (they work in the activations held). */
    s->stream_bytes = (size_t)fmin(ceil(need->stream / 2), (double)((size_t)256 << 20)) + 256;
    PS_TRY(dalloc(&s->s0, (double)s->stream_bytes));
    PS_TRY(dalloc(&s->s1, (double)s->stream_bytes));
    PS_TRY(dalloc(&s->coll, need->coll));
    PS_TRY(dalloc(&s->coll2, need->coll));
    PS_TRY(dalloc(&s->p2p, need->p2p));
    PS_TRY(dalloc(&s->statics, need->static_bytes));
    if (need->overlap) {
        /* a stream of its own, so NCCL runs beside the GEMMs (Oases Sec. 3: communication and computation streams) */
        CU(cudaStreamCreateWithFlags(&s->ostream, cudaStreamNonBlocking));
        CU(cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming));
        CU(cudaEventCreateWithFlags(&s->ev[0], cudaEventDisableTiming));
        CU(cudaEventCreateWithFlags(&s->ev[1], cudaEventDisableTiming));
        CU(cudaEventCreateWithFlags(&s->ring_ev, cudaEventDisableTiming));
        PS_TRY(dalloc(&s->ov[0], need->coll));
        PS_TRY(dalloc(&s->ov[1], need->coll));
    }
    PS_TRY(ps_exec_sends_reserve(&s->sends, need->sends));
    CU(cudaMallocHost((void **)&s->h_out, (size_t)ceil(need->p2p) + 256));
    CU(cudaMallocHost((void **)&s->h_in, (size_t)ceil(need->p2p) + 256));
    note_peak(s);
    return PS_OK;
}

static ps_status cuda_open(const ps_exec_need *need, ps_exec_net *net, void **state)
{
    cuda_state *s = ps_calloc(1, sizeof *s);
    if (!s) return PS_ERR_SYSTEM;
    ps_status st = cuda_open_inner(s, need, net);
    if (st != PS_OK) {
        cuda_close(s);
        return st;
    }
    *state = s;
    return PS_OK;
}

/* (m x k).(k x n), count times, queued on the stream: row-major (m x k).(k x n) is column-major (n x k).(k x m);
 * the batch reuses one operand set (stride 0) */
static ps_status gemm_enqueue(cuda_state *s, int64_t m, int64_t n, int64_t k, int64_t count)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t e = cublasGemmStridedBatchedEx(s->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one,
                                                  s->b, s->t, (int)n, 0, s->a, s->t, (int)k, 0, &zero, s->c, s->t,
                                                  (int)n, 0, (int)count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (e != CUBLAS_STATUS_SUCCESS) return PS_FAIL(PS_ERR_SYSTEM, "cublasGemmStridedBatchedEx: status %d", (int)e);
    return PS_OK;
}

static ps_status cuda_gemm(void *state, int64_t m, int64_t n, int64_t k, int64_t count)
{
    cuda_state *s = state;
    if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return PS_OK;
    PS_TRY(gemm_enqueue(s, m, n, k, count));
    /* complete before returning: the executor reads the host clock around each call, so computation and the
     * collectives are timed apart (launch queueing is given up, as in a per-kernel profile) */
    CU(cudaStreamSynchronize(s->stream));
    return PS_OK;
}

/* One tile product of the fused attention core, its operands checked against the buffers (sized from the layer's
 * attention GEMMs: Q K^T's A and B, the scores' s x s for P and dS, so every tile product of that core fits). */
static ps_status attn_gemm(cuda_state *s, int64_t m, int64_t n, int64_t k, int64_t count)
{
    if ((double)m * (double)k > s->a_elems || (double)k * (double)n > s->b_elems || (double)m * (double)n > s->c_elems)
        return PS_FAIL(PS_ERR_SYSTEM, "fused attention: a %lld x %lld x %lld tile product exceeds the GEMM buffers "
                                      "(%.0f, %.0f, %.0f elements)", (long long)m, (long long)n, (long long)k,
                       s->a_elems, s->b_elems, s->c_elems);
    return gemm_enqueue(s, m, n, k, count);
}

/* The fused attention core (exec's attn op): the tensor-core products of FlashAttention-2's loop (Dao 2023, arXiv
 * 2307.08691, Algorithms 1 and 2) on cuBLAS, in the plan's dtype. Query blocks of ATTN_TILE rows meet the keys they
 * attend: all of them, or under the causal mask those up to the block's last row (whole blocks, the diagonal one
 * included, as the kernel visits them); with a sliding window of sk keys as well, the blocks from the one holding the
 * first row's first key to the diagonal one, sk + ATTN_TILE keys at most (each row attends sk; the block's rows
 * together span sk + ATTN_TILE - 1). Forward: S = Q K^T, O = P V. Backward: S again (recomputed, no scores were
 * kept), dP = dO V^T, dV += P^T dO, dQ = dS K, dK += dS^T Q: 3 times the scores product and 2 times the weighted sum,
 * as the cost model prices it (ps_attn_bwd_flops; 2.5 times the forward at equal head widths). Batched over batch x
 * heads on one operand set, as cuda_gemm.
 * What a fused kernel does that this does not: the softmax's exponentials and row statistics, which it computes in
 * registers between its tensor-core products (no memory traffic); so this times the kernel's matrix work at cuBLAS's
 * efficiency, not cuDNN's or FlashAttention's kernel. What it keeps is the fused kernel's: no s x s matrix outlives a
 * tile product, the layer holds Q, K, V, O and the row statistics. */
enum { ATTN_TILE = 128 };

static ps_status cuda_attn(void *state, const ps_exec_attn *a, bool bwd)
{
    cuda_state *s = state;
    int64_t bh = a->batch * a->heads;
    if (bh <= 0 || a->sq <= 0 || a->sk <= 0 || a->d <= 0 || a->dv <= 0) return PS_OK;
    for (int64_t r0 = 0; r0 < a->sq; r0 += ATTN_TILE) {
        int64_t t = a->sq - r0 < ATTN_TILE ? a->sq - r0 : ATTN_TILE;
        /* without a window sk >= sq, so the second bound only bites under one */
        int64_t kt = a->sk;
        if (a->causal) kt = r0 + t < a->sk + ATTN_TILE ? r0 + t : a->sk + ATTN_TILE;
        PS_TRY(attn_gemm(s, t, kt, a->d, bh)); /* S = Q K^T */
        if (!bwd) {
            PS_TRY(attn_gemm(s, t, a->dv, kt, bh)); /* O = P V */
            continue;
        }
        PS_TRY(attn_gemm(s, t, kt, a->dv, bh)); /* dP = dO V^T */
        PS_TRY(attn_gemm(s, kt, a->dv, t, bh)); /* dV += P^T dO */
        PS_TRY(attn_gemm(s, t, a->d, kt, bh));  /* dQ = dS K */
        PS_TRY(attn_gemm(s, kt, a->d, t, bh));  /* dK += dS^T Q */
    }
    CU(cudaStreamSynchronize(s->stream)); /* timed as computation, like the GEMMs */
    return PS_OK;
}

static ps_status cuda_stream(void *state, double bytes)
{
    cuda_state *s = state;
    /* a copy reads and writes: bytes / 2 copied moves `bytes` */
    double left = bytes / 2;
    while (left >= 1) {
        size_t n = left < (double)s->stream_bytes ? (size_t)left : s->stream_bytes;
        CU(cudaMemcpyAsync(s->s1, s->s0, n, cudaMemcpyDeviceToDevice, s->stream));
        left -= (double)n;
    }
    CU(cudaStreamSynchronize(s->stream)); /* timed as computation, like the GEMMs */
    return PS_OK;
}

static ps_status cuda_sync(void *state)
{
    cuda_state *s = state;
    CU(cudaStreamSynchronize(s->stream));
    return PS_OK;
}

static ps_status cuda_hold(void *state, int64_t slot, double bytes)
{
    cuda_state *s = state;
    if (bytes <= 0) return PS_OK;
    for (size_t i = 0; i < s->n_pool; i++)
        if (s->pool[i].slot < 0 && s->pool[i].bytes >= bytes) {
            s->pool[i].slot = slot;
            return PS_OK;
        }
    PS_TRY(ps_grow((void **)&s->pool, &s->cap_pool, s->n_pool + 1, sizeof *s->pool));
    struct act_buf *b = &s->pool[s->n_pool];
    CU(cudaMalloc(&b->p, (size_t)ceil(bytes)));
    b->bytes = bytes;
    b->slot = slot;
    s->n_pool++;
    note_peak(s);
    return PS_OK;
}

static void cuda_release(void *state, int64_t slot)
{
    cuda_state *s = state;
    for (size_t i = 0; i < s->n_pool; i++)
        if (s->pool[i].slot == slot) s->pool[i].slot = -1;
}

static double cuda_peak(void *state) { return ((cuda_state *)state)->peak; }

static ps_status cuda_bind(void *state, ps_exec_net *net, MPI_Comm comm)
{
    (void)net;
    cuda_state *s = state;
    /* a failure to grow the list joins the bootstrap's agreement, so no member waits in it alone */
    ps_status st = ps_grow((void **)&s->comms, &s->cap_comms, (size_t)s->n_comms + 1, sizeof *s->comms);
    ncclComm_t c = NULL;
    PS_TRY(ps_mpi_nccl_comm(comm, st, &c));
    s->comms[s->n_comms].mpi = comm;
    s->comms[s->n_comms].nccl = c;
    s->n_comms++;
    return PS_OK;
}

/* Poll the compute stream (ev NULL) or an event so the watchdog can end a collective a peer never joins. */
static ps_status wait_done(cuda_state *s, ps_exec_net *net, cudaEvent_t ev, ncclComm_t *c, const ps_exec_where *where)
{
    double t0 = MPI_Wtime();
    for (;;) {
        cudaError_t e = ev ? cudaEventQuery(ev) : cudaStreamQuery(s->stream);
        if (e == cudaSuccess) return PS_OK;
        if (e != cudaErrorNotReady) return cuda_fail(e, where->what);
        double waited = MPI_Wtime() - t0;
        if (waited > net->watchdog_s) {
            if (c && *c) {
                ncclCommAbort(*c);
                *c = NULL; /* aborted: cuda_close must not destroy it again */
            }
            return ps_exec_watchdog_fail(net, where, waited);
        }
    }
}

static ps_status wait_stream(cuda_state *s, ps_exec_net *net, ncclComm_t *c, const ps_exec_where *where)
{
    return wait_done(s, net, NULL, c, where);
}

static ncclComm_t *find_comm(cuda_state *s, MPI_Comm comm)
{
    for (int i = 0; i < s->n_comms; i++)
        if (s->comms[i].mpi == comm) return &s->comms[i].nccl;
    return NULL;
}

static ps_status cuda_coll(void *state, ps_exec_net *net, MPI_Comm comm, ps_exec_coll op, double bytes,
                           const ps_exec_where *where)
{
    cuda_state *s = state;
    ncclComm_t *cp = find_comm(s, comm);
    if (!cp || !*cp) return PS_FAIL(PS_ERR_SYSTEM, "a collective on a communicator the cuda backend does not hold");
    ncclComm_t c = *cp;
    int n = 1;
    NC(ncclCommCount(c, &n));
    if (n <= 1) return PS_OK;
    size_t count = (size_t)ceil(bytes / (double)s->elt);
    count = (count + (size_t)n - 1) / (size_t)n * (size_t)n;
    switch (op) {
    case PS_EXEC_ALLREDUCE: NC(ncclAllReduce(s->coll, s->coll, count, s->nt, ncclSum, c, s->stream)); break;
    case PS_EXEC_ALLGATHER: NC(ncclAllGather(s->coll, s->coll2, count / (size_t)n, s->nt, c, s->stream)); break;
    case PS_EXEC_REDUCESCATTER:
        NC(ncclReduceScatter(s->coll, s->coll2, count / (size_t)n, s->nt, ncclSum, c, s->stream));
        break;
    }
    return wait_stream(s, net, cp, where);
}

static ps_status cuda_send(void *state, ps_exec_net *net, int peer, int tag, double bytes, const ps_exec_where *where)
{
    cuda_state *s = state;
    /* The boundary activation leaves the device once its producer is done. Sends still in flight read the same
     * staging buffer: its content is not what is measured, the copy's cost is. */
    CU(cudaMemcpyAsync(s->h_out, s->p2p, (size_t)ceil(bytes), cudaMemcpyDeviceToHost, s->stream));
    PS_TRY(wait_stream(s, net, NULL, where));
    return ps_exec_mpi_send(net, &s->sends, s->h_out, peer, tag, bytes, where);
}

static ps_status cuda_recv(void *state, ps_exec_net *net, int peer, int tag, double bytes, const ps_exec_where *where)
{
    cuda_state *s = state;
    PS_TRY(ps_exec_mpi_recv(net, s->h_in, peer, tag, bytes, where));
    CU(cudaMemcpyAsync(s->p2p, s->h_in, (size_t)ceil(bytes), cudaMemcpyHostToDevice, s->stream));
    return PS_OK;
}

static ps_status cuda_flush(void *state, ps_exec_net *net)
{
    cuda_state *s = state;
    return ps_exec_mpi_flush(net, &s->sends);
}

static ps_status cuda_icoll(void *state, ps_exec_net *net, MPI_Comm comm, int slot, double bytes,
                            const ps_exec_where *where)
{
    (void)net;
    (void)where;
    cuda_state *s = state;
    ncclComm_t *cp = find_comm(s, comm);
    if (!s->ostream || !cp || !*cp || slot < 0 || slot > 1 || s->ov_comm[slot])
        return PS_FAIL(PS_ERR_SYSTEM, "an overlapped all-reduce the cuda backend cannot start (slot %d)", slot);
    int n = 1;
    NC(ncclCommCount(*cp, &n));
    if (n <= 1) return PS_OK;
    size_t count = (size_t)ceil(bytes / (double)s->elt);
    /* after the computation that produced the sub-batch's output, whatever the host has seen of it */
    CU(cudaEventRecord(s->ready, s->stream));
    CU(cudaStreamWaitEvent(s->ostream, s->ready, 0));
    NC(ncclAllReduce(s->ov[slot], s->ov[slot], count, s->nt, ncclSum, *cp, s->ostream));
    CU(cudaEventRecord(s->ev[slot], s->ostream));
    s->ov_comm[slot] = cp;
    return PS_OK;
}

static ps_status cuda_progress(void *state)
{
    (void)state; /* NCCL's kernels progress on the device */
    return PS_OK;
}

static ps_status cuda_icoll_wait(void *state, ps_exec_net *net, int slot, const ps_exec_where *where)
{
    cuda_state *s = state;
    if (slot < 0 || slot > 1 || !s->ov_comm[slot]) return PS_OK;
    ncclComm_t *cp = s->ov_comm[slot];
    s->ov_comm[slot] = NULL;
    return wait_done(s, net, s->ev[slot], cp, where);
}

/* te's ring step (Transformer Engine's userbuffers ring exchange, transformer_engine/pytorch/module/base.py
 * "ring_exchange", done here with NCCL point to point): on the second stream after the computation issued so far, the
 * send to the next member and the receive from the previous one in one NCCL group, so neither waits for the other. */
static ps_status cuda_ring(void *state, ps_exec_net *net, MPI_Comm comm, double bytes, const ps_exec_where *where)
{
    (void)net;
    (void)where;
    cuda_state *s = state;
    ncclComm_t *cp = find_comm(s, comm);
    if (!s->ostream || !cp || !*cp || s->ring_comm)
        return PS_FAIL(PS_ERR_SYSTEM, "a TP ring step the cuda backend cannot start");
    int n = 1, r = 0;
    NC(ncclCommCount(*cp, &n));
    NC(ncclCommUserRank(*cp, &r));
    if (n <= 1) return PS_OK;
    size_t count = (size_t)ceil(bytes / (double)s->elt);
    CU(cudaEventRecord(s->ready, s->stream));
    CU(cudaStreamWaitEvent(s->ostream, s->ready, 0));
    NC(ncclGroupStart());
    ncclResult_t e1 = ncclSend(s->ov[0], count, s->nt, (r + 1) % n, *cp, s->ostream);
    ncclResult_t e2 = ncclRecv(s->ov[1], count, s->nt, (r + n - 1) % n, *cp, s->ostream);
    NC(ncclGroupEnd()); /* closed whatever the two calls returned, so the group does not stay open */
    NC(e1);
    NC(e2);
    CU(cudaEventRecord(s->ring_ev, s->ostream));
    s->ring_comm = cp;
    return PS_OK;
}

static ps_status cuda_ring_wait(void *state, ps_exec_net *net, const ps_exec_where *where)
{
    cuda_state *s = state;
    if (!s->ring_comm) return PS_OK;
    ncclComm_t *cp = s->ring_comm;
    s->ring_comm = NULL;
    return wait_done(s, net, s->ring_ev, cp, where);
}

/* An all-to-all (context parallelism's a2a kind, an MoE block's dispatch and combine) as NCCL runs one: a send and a
 * receive per member in one group (NCCL has no all-to-all call; its documentation's "point-to-point communication"
 * pattern, what Megatron-core's MoE all-to-all and Transformer Engine's CP a2a reach through torch.distributed), on
 * the stream of the other collectives, counted in bytes (ncclInt8: nothing is reduced). Polled under the watchdog. */
static ps_status cuda_alltoall(void *state, ps_exec_net *net, MPI_Comm comm, int n, const double *sbytes,
                               const double *rbytes, const ps_exec_where *where)
{
    cuda_state *s = state;
    if (n <= 1) return PS_OK;
    ncclComm_t *cp = find_comm(s, comm);
    if (!cp || !*cp) return PS_FAIL(PS_ERR_SYSTEM, "an all-to-all on a communicator the cuda backend does not hold");
    size_t so = 0, ro = 0;
    ncclResult_t e = ncclSuccess;
    NC(ncclGroupStart());
    for (int p = 0; p < n && e == ncclSuccess; p++) {
        size_t sc = (size_t)llround(sbytes[p]), rc = (size_t)llround(rbytes[p]);
        if (sc > 0) e = ncclSend((char *)s->coll + so, sc, ncclInt8, p, *cp, s->stream);
        if (rc > 0 && e == ncclSuccess) e = ncclRecv((char *)s->coll2 + ro, rc, ncclInt8, p, *cp, s->stream);
        so += sc;
        ro += rc;
    }
    NC(ncclGroupEnd()); /* closed whatever the calls returned, so the group does not stay open */
    if (e != ncclSuccess)
        return PS_FAIL(PS_ERR_SYSTEM, "ncclSend/ncclRecv of an all-to-all: %s", ncclGetErrorString(e));
    return wait_stream(s, net, cp, where);
}

const ps_exec_backend ps_exec_backend_cuda = {
    .name = "cuda",
    .usable = cuda_usable,
    .open = cuda_open,
    .close = cuda_close,
    .gemm = cuda_gemm,
    .attn = cuda_attn,
    .stream = cuda_stream,
    .sync = cuda_sync,
    .hold = cuda_hold,
    .release = cuda_release,
    .peak_bytes = cuda_peak,
    .bind = cuda_bind,
    .coll = cuda_coll,
    .send = cuda_send,
    .recv = cuda_recv,
    .flush = cuda_flush,
    .icoll = cuda_icoll,
    .progress = cuda_progress,
    .icoll_wait = cuda_icoll_wait,
    .ring = cuda_ring,
    .ring_wait = cuda_ring_wait,
    .alltoall = cuda_alltoall,
};

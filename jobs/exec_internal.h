/* Shared by the sources of jobs/ (not installed): the executor's context and the backend table. A backend owns the
 * device side (buffers, matrix multiplies, memory traffic, what it measures of memory) and the transport of the
 * collectives and pipeline messages; the executor (exec.c) owns the plan: roles, communicators, pass order, timing. */
#ifndef PS_EXEC_INTERNAL_H
#define PS_EXEC_INTERNAL_H

#include "ps_jobs.h"

/* One fused attention core (the backend's attn op): softmax(Q K^T / sqrt(d) [+ causal mask]) V over batch x heads,
 * query head h reading key/value head h / (heads / kv_heads). */
typedef struct {
    int64_t batch, heads, kv_heads;
    int64_t sq, sk; /* queries, keys per sequence (a window: sk = the window, what the kernel's FLOPs match) */
    int64_t d, dv;  /* head width of Q and K, of V */
    bool causal;
} ps_exec_attn;

/* The largest buffers a rank needs, in bytes, known before the first pass so nothing is allocated while timing. */
typedef struct {
    double gemm_a, gemm_b, gemm_c; /* one operand of the largest GEMM (batched GEMMs reuse it per batch entry) */
    double stream;                 /* the largest elementwise pass (read + write) */
    double coll;                   /* the largest collective payload (the full tensor, not a shard) */
    double p2p;                    /* the largest pipeline message */
    double static_bytes;           /* weights + gradients + optimizer states of this rank */
    int dtype;                     /* ps_dtype of the plan (the cuda backend computes and reduces in it) */
    bool overlap;                  /* some layer of the rank runs overlapped TP (Oases or te): buffers for two
                                      sub-batches' icoll, which te's ring steps send from and receive into */
    int64_t sends;                 /* pipeline messages one iteration sends at most (the sends list's length) */
    ps_exec_attn attn;             /* every field the largest of the rank's fused attention cores (0: none): the
                                      attn op's buffers are sized from it */
} ps_exec_need;

typedef enum { PS_EXEC_ALLREDUCE = 0, PS_EXEC_ALLGATHER, PS_EXEC_REDUCESCATTER } ps_exec_coll;

/* Where a wait is, for the watchdog's message. */
typedef struct {
    const char *what; /* "the forward activation", "a TP all-reduce", ... */
    int op, mb, chunk, stage; /* the pass (op -1: outside the passes) */
    int peer;                 /* the rank waited on, -1 for a collective */
} ps_exec_where;

typedef struct ps_exec_backend ps_exec_backend;

typedef struct {
    MPI_Comm world;      /* a duplicate of the caller's comm: pipeline messages and barriers */
    int rank, nranks;
    double watchdog_s;
    int node_rank;        /* this rank's index among the ranks of its node (the cuda backend's GPU) */
    bool skip_first_send; /* the test hook PS_EXEC_FAULT_SKIP_SEND on this rank: its first send is dropped */
    bool sent_once;
} ps_exec_net;

struct ps_exec_backend {
    const char *name;
    bool (*usable)(char *why, size_t cap);
    /* every buffer the run needs; local (no communication), so the executor can agree on its outcome */
    ps_status (*open)(const ps_exec_need *need, ps_exec_net *net, void **state);
    void (*close)(void *state);
    /* (m x k) . (k x n), count times */
    ps_status (*gemm)(void *state, int64_t m, int64_t n, int64_t k, int64_t count);
    /* elementwise work moving `bytes` through memory */
    ps_status (*stream)(void *state, double bytes);
    /* Optional (NULL: exec refuses a plan with fused attention outside context parallelism): the fused attention
     * kernel on a core of shape a, its forward (bwd false: O and the log-sum-exp) or its backward (dQ, dK, dV, the
     * scores recomputed from the saved log-sum-exp), on buffers sized by ps_exec_need.attn. */
    ps_status (*attn)(void *state, const ps_exec_attn *a, bool bwd);
    /* wait for queued device work, so the clock can be read */
    ps_status (*sync)(void *state);
    /* activation memory of one micro-batch held from its forward to its last backward (the GPU allocates it, so
     * the measured peak holds what the schedule keeps in flight); slot = micro-batch x chunks + chunk */
    ps_status (*hold)(void *state, int64_t slot, double bytes);
    void (*release)(void *state, int64_t slot);
    double (*peak_bytes)(void *state); /* 0: not measured */
    /* every TP and DP communicator, in one order on every rank, before the first pass (NCCL communicators are
     * built from them: collective) */
    ps_status (*bind)(void *state, ps_exec_net *net, MPI_Comm comm);
    /* communication: collectives over comm (a TP or DP group) and pipeline messages over net->world, each
     * complete on return or failed by the watchdog naming `where` */
    ps_status (*coll)(void *state, ps_exec_net *net, MPI_Comm comm, ps_exec_coll op, double bytes,
                      const ps_exec_where *where);
    ps_status (*send)(void *state, ps_exec_net *net, int peer, int tag, double bytes, const ps_exec_where *where);
    ps_status (*recv)(void *state, ps_exec_net *net, int peer, int tag, double bytes, const ps_exec_where *where);
    /* complete every send posted (end of an iteration) */
    ps_status (*flush)(void *state, ps_exec_net *net);
    /* Overlapped TP (Oases): an all-reduce of `bytes` over comm (a TP group's own duplicate, bound like the others)
     * started beside the computation, into the buffer of sub-batch `slot` (0 or 1), one in flight per slot;
     * progress lets a transport the host drives (MPI) move it between computations; icoll_wait returns once the
     * slot's collective is complete, or fails by the watchdog naming `where`. */
    ps_status (*icoll)(void *state, ps_exec_net *net, MPI_Comm comm, int slot, double bytes,
                       const ps_exec_where *where);
    ps_status (*progress)(void *state);
    ps_status (*icoll_wait)(void *state, ps_exec_net *net, int slot, const ps_exec_where *where);
    /* Transformer Engine's TP overlap (te): one ring step over comm (the same duplicate of the TP group as icoll's)
     * started beside a GEMM piece: `bytes` to the next member of the group, as many from the previous one; one step in
     * flight; progress moves it, ring_wait returns once both halves are complete or fails by the watchdog. */
    ps_status (*ring)(void *state, ps_exec_net *net, MPI_Comm comm, double bytes, const ps_exec_where *where);
    ps_status (*ring_wait)(void *state, ps_exec_net *net, const ps_exec_where *where);
    /* An all-to-all over comm (context parallelism's a2a kind, an MoE block's dispatch and combine), complete on
     * return or failed by the watchdog: sbytes[p] bytes to member p, rbytes[p] from it (n members, at most
     * PS_EXEC_A2A_MAX; the sums within ps_exec_need.coll). */
    ps_status (*alltoall)(void *state, ps_exec_net *net, MPI_Comm comm, int n, const double *sbytes,
                          const double *rbytes, const ps_exec_where *where);
};

/* The largest group an all-to-all runs over: its per-member counts live on the stack, so that running one allocates
 * nothing (a larger group is refused at set-up). */
enum { PS_EXEC_A2A_MAX = 1024 };

extern const ps_exec_backend ps_exec_backend_cpu;
#if PS_HAVE_CUDA && PS_HAVE_CUBLAS && PS_HAVE_NCCL
extern const ps_exec_backend ps_exec_backend_cuda;
#endif

/* MPI transport with the watchdog (comm_mpi.c), for backends whose buffers are host memory. */
ps_status ps_exec_mpi_wait(ps_exec_net *net, MPI_Request *req, const ps_exec_where *where);
ps_status ps_exec_mpi_coll(ps_exec_net *net, MPI_Comm comm, ps_exec_coll op, void *buf, void *buf2, double bytes,
                           const ps_exec_where *where);
/* An all-to-all of bytes (the payload is not reduced, so its element type does not matter): MPI_Ialltoall when every
 * count is the same, else MPI_Ialltoallv; sbuf and rbuf hold the sums. Completed under the watchdog. */
ps_status ps_exec_mpi_alltoall(ps_exec_net *net, MPI_Comm comm, int n, const double *sbytes, const double *rbytes,
                               void *sbuf, void *rbuf, const ps_exec_where *where);
/* Pipeline sends stay in flight until ps_exec_mpi_flush; receives complete before returning. */
typedef struct {
    MPI_Request *req;
    size_t n, cap;
} ps_exec_sends;
ps_status ps_exec_mpi_send(ps_exec_net *net, ps_exec_sends *s, const void *buf, int peer, int tag, double bytes,
                           const ps_exec_where *where);
ps_status ps_exec_mpi_recv(ps_exec_net *net, void *buf, int peer, int tag, double bytes, const ps_exec_where *where);
ps_status ps_exec_mpi_flush(ps_exec_net *net, ps_exec_sends *s);
/* Room for n sends in flight, reserved at open so that sending allocates nothing. */
ps_status ps_exec_sends_reserve(ps_exec_sends *s, int64_t n);
/* The overlapped all-reduces of the two sub-batches on host buffers: MPI_Iallreduce, progressed by MPI_Test (Open
 * MPI moves a non-blocking collective only inside MPI calls), completed under the watchdog. */
typedef struct {
    MPI_Request req[2];
    MPI_Request ring[2]; /* te's ring step in flight: its receive and its send */
} ps_exec_icolls;
void ps_exec_icolls_init(ps_exec_icolls *ic);
ps_status ps_exec_mpi_icoll(ps_exec_icolls *ic, MPI_Comm comm, int slot, void *buf, double bytes);
ps_status ps_exec_mpi_progress(ps_exec_icolls *ic);
ps_status ps_exec_mpi_icoll_wait(ps_exec_net *net, ps_exec_icolls *ic, int slot, const ps_exec_where *where);
/* te's ring step on host buffers: MPI_Irecv from the previous member of comm and MPI_Isend to the next, progressed
 * with the all-reduces by ps_exec_mpi_progress, completed under the watchdog by ps_exec_mpi_ring_wait. */
ps_status ps_exec_mpi_ring(ps_exec_icolls *ic, MPI_Comm comm, void *sbuf, void *rbuf, double bytes);
ps_status ps_exec_mpi_ring_wait(ps_exec_net *net, ps_exec_icolls *ic, const ps_exec_where *where);
void ps_exec_sends_free(ps_exec_sends *s);
/* "rank R waited S s for WHAT (pass ...)" into the error, PS_ERR_SYSTEM. */
ps_status ps_exec_watchdog_fail(const ps_exec_net *net, const ps_exec_where *where, double waited);

#endif

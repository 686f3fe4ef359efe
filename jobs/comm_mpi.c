/* The MPI transport of the executor: non-blocking collectives and pipeline messages completed by polling, so that a
 * wait that never ends (a peer gone, an order that deadlocks) fails after the watchdog's limit with a message naming
 * the rank, the pass and the peer, instead of hanging the allocation. */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "exec_internal.h"
#include "ps_comm.h"

static const char *op_name(int op) { return op < 0 ? "" : ps_sched_op_name(op); }

ps_status ps_exec_watchdog_fail(const ps_exec_net *net, const ps_exec_where *where, double waited)
{
    char peer[48] = "";
    if (where->peer >= 0) snprintf(peer, sizeof peer, " from rank %d", where->peer);
    if (where->op >= 0)
        return PS_FAIL(PS_ERR_SYSTEM,
                       "watchdog: rank %d waited %.1f s for %s%s in pass %s of micro-batch %d, chunk %d (stage %d); "
                       "a peer failed or the order deadlocks (limit --watchdog %g s)",
                       net->rank, waited, where->what, peer, op_name(where->op), where->mb, where->chunk, where->stage,
                       net->watchdog_s);
    return PS_FAIL(PS_ERR_SYSTEM, "watchdog: rank %d waited %.1f s for %s%s; a peer failed (limit --watchdog %g s)",
                   net->rank, waited, where->what, peer, net->watchdog_s);
}

ps_status ps_exec_mpi_wait(ps_exec_net *net, MPI_Request *req, const ps_exec_where *where)
{
    double t0 = MPI_Wtime();
    for (long spin = 0;; spin++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return ps_mpi_status(rc, where->what, __FILE__, __LINE__);
        if (done) return PS_OK;
        /* Ranks often outnumber cores (tests, a CPU node standing in for GPUs): give the core to the rank being
         * waited for, first by yielding, then by short sleeps once the wait is clearly not short. */
        if (spin < 2000) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
        if ((spin & 63) == 0) {
            double waited = MPI_Wtime() - t0;
            if (waited > net->watchdog_s) {
                /* A receive that nothing will match is cancelled, so the request does not outlive the run. */
                if (where->peer >= 0 && MPI_Cancel(req) == MPI_SUCCESS) MPI_Request_free(req);
                return ps_exec_watchdog_fail(net, where, waited);
            }
        }
    }
}

/* Elements of 4 bytes (fp32: the CPU backend computes and reduces in fp32) for a payload of `bytes`, at least one
 * per member so every rank has a shard, a multiple of n so reduce-scatter splits evenly. */
static ps_status count_of(double bytes, int n, int *count)
{
    double e = bytes / 4;
    if (e < n) e = n;
    e = (double)((long long)((e + n - 1) / n)) * n;
    if (e > INT_MAX) return PS_FAIL(PS_ERR_INPUT, "a message of %.4g bytes is too large for one MPI call", bytes);
    *count = (int)e;
    return PS_OK;
}

ps_status ps_exec_mpi_coll(ps_exec_net *net, MPI_Comm comm, ps_exec_coll op, void *buf, void *buf2, double bytes,
                           const ps_exec_where *where)
{
    int n = 1;
    PS_MPI(MPI_Comm_size(comm, &n));
    if (n <= 1) return PS_OK;
    int count = 0;
    PS_TRY(count_of(bytes, n, &count));
    MPI_Request req;
    switch (op) {
    case PS_EXEC_ALLREDUCE:
        PS_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, comm, &req));
        break;
    case PS_EXEC_ALLGATHER: /* each member contributes 1/n of the tensor */
        PS_MPI(MPI_Iallgather(buf, count / n, MPI_FLOAT, buf2, count / n, MPI_FLOAT, comm, &req));
        break;
    case PS_EXEC_REDUCESCATTER: /* each member keeps the sum of its 1/n */
        PS_MPI(MPI_Ireduce_scatter_block(buf, buf2, count / n, MPI_FLOAT, MPI_SUM, comm, &req));
        break;
    default: return PS_FAIL(PS_ERR_SYSTEM, "unknown collective %d", (int)op);
    }
    return ps_exec_mpi_wait(net, &req, where);
}

ps_status ps_exec_mpi_send(ps_exec_net *net, ps_exec_sends *s, const void *buf, int peer, int tag, double bytes,
                           const ps_exec_where *where)
{
    (void)where;
    if (net->skip_first_send && !net->sent_once) {
        net->sent_once = true; /* the test hook: this message is never sent, and the peer's watchdog must say so */
        return PS_OK;
    }
    net->sent_once = true;
    int count = 0;
    PS_TRY(count_of(bytes, 1, &count));
    PS_TRY(ps_grow((void **)&s->req, &s->cap, s->n + 1, sizeof *s->req));
    /* One send buffer serves every message in flight: MPI lets concurrent sends read the same memory, and the
     * content is not what is measured. */
    PS_MPI(MPI_Isend(buf, count, MPI_FLOAT, peer, tag, net->world, &s->req[s->n]));
    s->n++;
    return PS_OK;
}

ps_status ps_exec_mpi_recv(ps_exec_net *net, void *buf, int peer, int tag, double bytes, const ps_exec_where *where)
{
    int count = 0;
    PS_TRY(count_of(bytes, 1, &count));
    MPI_Request req;
    PS_MPI(MPI_Irecv(buf, count, MPI_FLOAT, peer, tag, net->world, &req));
    return ps_exec_mpi_wait(net, &req, where);
}

ps_status ps_exec_mpi_flush(ps_exec_net *net, ps_exec_sends *s)
{
    ps_exec_where w = {.what = "the peers to receive this rank's pipeline messages", .op = -1, .peer = -1};
    for (size_t i = 0; i < s->n; i++) PS_TRY(ps_exec_mpi_wait(net, &s->req[i], &w));
    s->n = 0;
    return PS_OK;
}

ps_status ps_exec_sends_reserve(ps_exec_sends *s, int64_t n)
{
    return ps_grow((void **)&s->req, &s->cap, n > 0 ? (size_t)n : 1, sizeof *s->req);
}

void ps_exec_sends_free(ps_exec_sends *s)
{
    free(s->req);
    s->req = NULL;
    s->n = s->cap = 0;
}

void ps_exec_icolls_init(ps_exec_icolls *ic) { ic->req[0] = ic->req[1] = ic->ring[0] = ic->ring[1] = MPI_REQUEST_NULL; }

ps_status ps_exec_mpi_icoll(ps_exec_icolls *ic, MPI_Comm comm, int slot, void *buf, double bytes)
{
    if (slot < 0 || slot > 1 || ic->req[slot] != MPI_REQUEST_NULL)
        return PS_FAIL(PS_ERR_SYSTEM, "overlapped all-reduce on sub-batch slot %d while one is in flight", slot);
    int n = 1;
    PS_MPI(MPI_Comm_size(comm, &n));
    if (n <= 1) return PS_OK;
    int count = 0;
    PS_TRY(count_of(bytes, n, &count));
    PS_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, comm, &ic->req[slot]));
    return PS_OK;
}

ps_status ps_exec_mpi_progress(ps_exec_icolls *ic)
{
    for (int k = 0; k < 2; k++) {
        if (ic->req[k] == MPI_REQUEST_NULL) continue;
        int done = 0; /* a completed request becomes MPI_REQUEST_NULL: icoll_wait then returns at once */
        int rc = MPI_Test(&ic->req[k], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return ps_mpi_status(rc, "progressing an overlapped all-reduce", __FILE__, __LINE__);
    }
    for (int k = 0; k < 2; k++) {
        if (ic->ring[k] == MPI_REQUEST_NULL) continue;
        int done = 0;
        int rc = MPI_Test(&ic->ring[k], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return ps_mpi_status(rc, "progressing a TP ring step", __FILE__, __LINE__);
    }
    return PS_OK;
}

/* A tag of its own: the communicator is the TP group's duplicate, which carries nothing else point to point. */
enum { RING_TAG = 20 };

ps_status ps_exec_mpi_ring(ps_exec_icolls *ic, MPI_Comm comm, void *sbuf, void *rbuf, double bytes)
{
    if (ic->ring[0] != MPI_REQUEST_NULL || ic->ring[1] != MPI_REQUEST_NULL)
        return PS_FAIL(PS_ERR_SYSTEM, "a TP ring step while one is in flight");
    int n = 1, r = 0;
    PS_MPI(MPI_Comm_size(comm, &n));
    PS_MPI(MPI_Comm_rank(comm, &r));
    if (n <= 1) return PS_OK;
    int count = 0;
    PS_TRY(count_of(bytes, 1, &count));
    PS_MPI(MPI_Irecv(rbuf, count, MPI_FLOAT, (r + n - 1) % n, RING_TAG, comm, &ic->ring[0]));
    PS_MPI(MPI_Isend(sbuf, count, MPI_FLOAT, (r + 1) % n, RING_TAG, comm, &ic->ring[1]));
    return PS_OK;
}

ps_status ps_exec_mpi_ring_wait(ps_exec_net *net, ps_exec_icolls *ic, const ps_exec_where *where)
{
    for (int k = 0; k < 2; k++)
        if (ic->ring[k] != MPI_REQUEST_NULL) PS_TRY(ps_exec_mpi_wait(net, &ic->ring[k], where));
    return PS_OK;
}

ps_status ps_exec_mpi_icoll_wait(ps_exec_net *net, ps_exec_icolls *ic, int slot, const ps_exec_where *where)
{
    if (slot < 0 || slot > 1 || ic->req[slot] == MPI_REQUEST_NULL) return PS_OK;
    return ps_exec_mpi_wait(net, &ic->req[slot], where);
}

ps_status ps_exec_mpi_alltoall(ps_exec_net *net, MPI_Comm comm, int n, const double *sbytes, const double *rbytes,
                               void *sbuf, void *rbuf, const ps_exec_where *where)
{
    if (n <= 1) return PS_OK;
    if (n > PS_EXEC_A2A_MAX) return PS_FAIL(PS_ERR_SYSTEM, "an all-to-all over %d ranks (at most %d)", n,
                                            PS_EXEC_A2A_MAX);
    int sc[PS_EXEC_A2A_MAX], rc[PS_EXEC_A2A_MAX], sd[PS_EXEC_A2A_MAX], rd[PS_EXEC_A2A_MAX];
    double st = 0, rt = 0;
    bool uniform = true;
    for (int p = 0; p < n; p++) {
        /* MPI counts and displacements are ints: the whole buffer must fit one */
        if (st + fmax(0, sbytes[p]) > INT_MAX || rt + fmax(0, rbytes[p]) > INT_MAX)
            return PS_FAIL(PS_ERR_INPUT, "an all-to-all of more than %d bytes is too large for one MPI call",
                           INT_MAX);
        sc[p] = (int)llround(fmax(0, sbytes[p]));
        rc[p] = (int)llround(fmax(0, rbytes[p]));
        sd[p] = (int)st;
        rd[p] = (int)rt;
        st += sc[p];
        rt += rc[p];
        uniform = uniform && sc[p] == sc[0] && rc[p] == sc[0];
    }
    MPI_Request req;
    if (uniform)
        PS_MPI(MPI_Ialltoall(sbuf, sc[0], MPI_BYTE, rbuf, sc[0], MPI_BYTE, comm, &req));
    else
        PS_MPI(MPI_Ialltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, comm, &req));
    return ps_exec_mpi_wait(net, &req, where);
}

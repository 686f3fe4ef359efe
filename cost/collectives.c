/* Alpha-beta costs of collectives and point-to-point transfers over the real placement of a group of GPUs.
 * Ring algorithms follow the bus-bandwidth convention of nccl-tests: all-reduce moves 2(n-1)/n of the payload over
 * the slowest ring edge, all-gather and reduce-scatter (n-1)/n. The slowest edge decides (AMP Eq. 3). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ps_cost.h"

/* The measured time of `op` over the group when the cost database measured every member's device (one kind), with
 * the group inside one NVLink domain (one node, or the nodes of a GB200 NVL72 rack) or across the network; negative
 * when there is no database or no such measurement. A group spanning trays of one rack is looked up as inside a
 * node: it runs on NVLink, which the database measured inside a node, never on the network its "across nodes"
 * rows measured. */
static double db_coll(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, ps_coll_op op, double bytes)
{
    if (!p->db) return -1;
    int kind = -1;
    bool inter = false;
    int64_t dom0 = -1; /* the first member's NVLink domain */
    int last = -1;
    for (int64_t i = 0; i < g->n; i++) {
        ps_gpu_place pl;
        if (!ps_cluster_place(c, g->first + i * g->stride, &pl)) return -1;
        if (i == 0) dom0 = pl.domain;
        if (pl.group != last) {
            int k = ps_costdb_model_device(p->db, c->groups[pl.group].gpu.name);
            if (k < 0 || (kind >= 0 && k != kind)) return -1;
            kind = k;
            last = pl.group;
        }
        if (pl.domain != dom0) inter = true;
    }
    return ps_costdb_model_coll_time(p->db, kind, op, g->n, inter, bytes);
}

static const char *const k_coll_names[PS_COLL_N_OPS] = {"allreduce", "allgather", "reducescatter", "alltoall",
                                                         "sendrecv"};

const char *ps_coll_op_name(ps_coll_op op) { return op >= 0 && op < PS_COLL_N_OPS ? k_coll_names[op] : "?"; }

bool ps_coll_op_parse(const char *name, ps_coll_op *op)
{
    for (int i = 0; i < PS_COLL_N_OPS; i++)
        if (strcmp(name, k_coll_names[i]) == 0) {
            *op = (ps_coll_op)i;
            return true;
        }
    return false;
}

double ps_coll_busbw_factor(ps_coll_op op, int n)
{
    if (n < 1) return 0;
    double f = (double)(n - 1) / n;
    switch (op) {
    case PS_COLL_ALLREDUCE: return 2 * f;
    case PS_COLL_ALLGATHER:
    case PS_COLL_REDUCESCATTER:
    case PS_COLL_ALLTOALL: return f;
    case PS_COLL_SENDRECV: return 1;
    case PS_COLL_N_OPS: break;
    }
    return 0;
}

static double link_eff(const ps_cost_params *p, ps_link_class cls)
{
    switch (cls) {
    /* --cluster costdb describes its links by the bandwidth a send/recv reached (costdb/db_model.c): already what
     * the link achieves, so derating it again would count the protocol overhead twice */
    case PS_LINK_MEASURED: return 1.0;
    case PS_LINK_NVLINK: return p->link_eff_nvlink;
    case PS_LINK_IB: return p->link_eff_ib;
    case PS_LINK_ETHERNET: return p->link_eff_eth;
    case PS_LINK_PCIE:
    case PS_LINK_NONE: break; /* no link ("none", "self"): the commonest inside-node path, as ever */
    }
    return p->link_eff_pcie;
}

/* Members of the group on the node of member i: they share that node's network in a collective. GPU indices grow
 * with i and nodes with GPU indices, so a node's members are one run of consecutive i: walk out from i both ways.
 * O(run), so a ring costs O(n) in all, not O(n^2) (a 4096-GPU data-parallel ring is costed thousands of times per
 * search). */
static int64_t members_on_node(const ps_cluster *c, const ps_group *g, int64_t i, int64_t node)
{
    int64_t lo = i, hi = i + 1;
    while (lo > 0 && ps_cluster_node_of(c, g->first + (lo - 1) * g->stride) == node) lo--;
    while (hi < g->n && ps_cluster_node_of(c, g->first + hi * g->stride) == node) hi++;
    return hi - lo;
}

/* Direct-mapped: a group whose slot another holds is walked again (and takes the slot). */
#define PS_COLL_MEMO_SLOTS 4096
typedef struct {
    const ps_cluster *c;
    int64_t first, n, stride;
    double bw, lat;
    int64_t per; /* group_per_node's answer; -1 until asked */
} memo_slot;
struct ps_coll_memo {
    memo_slot slot[PS_COLL_MEMO_SLOTS];
};

ps_coll_memo *ps_coll_memo_create(void) { return calloc(1, sizeof(ps_coll_memo)); }
void ps_coll_memo_free(ps_coll_memo *m) { free(m); }

static memo_slot *memo_find(ps_coll_memo *m, const ps_cluster *c, const ps_group *g)
{
    uint64_t h = (uint64_t)g->first * 0x9E3779B97F4A7C15u ^ (uint64_t)g->n * 0xC2B2AE3D27D4EB4Fu ^
                 (uint64_t)g->stride * 0x165667B19E3779F9u ^ (uint64_t)(uintptr_t)c;
    return &m->slot[(h ^ (h >> 29)) % PS_COLL_MEMO_SLOTS];
}

static void ring_link_walk(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double *bw, double *lat);

void ps_coll_ring_link(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double *bw, double *lat)
{
    *bw = INFINITY;
    *lat = 0;
    if (g->n <= 1) return;
    if (!p->memo) {
        ring_link_walk(p, c, g, bw, lat);
        return;
    }
    memo_slot *s = memo_find(p->memo, c, g);
    if (s->c != c || s->first != g->first || s->n != g->n || s->stride != g->stride) {
        ring_link_walk(p, c, g, bw, lat);
        *s = (memo_slot){c, g->first, g->n, g->stride, *bw, *lat, -1};
        return;
    }
    *bw = s->bw;
    *lat = s->lat;
}

static void ring_link_walk(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double *bw, double *lat)
{
    /* each edge's far end is the next edge's near end: one placement per member */
    ps_gpu_place pa, pb;
    if (!ps_cluster_place(c, g->first, &pa)) goto invalid;
    for (int64_t i = 0; i < g->n; i++) {
        if (!ps_cluster_place(c, g->first + ((i + 1) % g->n) * g->stride, &pb)) goto invalid;
        ps_link l = ps_cluster_link_placed(c, &pa, &pb);
        double e = l.bw_Bps * link_eff(p, l.cls);
        if (pa.domain != pb.domain) {
            /* The edge crosses the network (nodes of one NVLink domain talk over NVLink, per GPU, shared by none).
             * Every GPU of the node runs the same kind of collective at the same time in a uniform plan (the other
             * DP or TP groups), so the node's NICs are shared: this group gets its members' share of the node. */
            const ps_node_group *ng = &c->groups[pa.group];
            double share =
                (double)members_on_node(c, g, i, pa.node) / (double)(ng->gpus_per_node > 0 ? ng->gpus_per_node : 1);
            e *= share > 1 ? 1 : share;
        }
        if (e < *bw) *bw = e;
        if (l.latency_s > *lat) *lat = l.latency_s;
        pa = pb;
    }
    return;
invalid:
    /* No such GPU: a link nothing can cross (ps_cluster_link's "invalid"), and no other edge can be slower. */
    *bw = 0;
    *lat = INFINITY;
}

double ps_coll_allreduce(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes)
{
    if (g->n <= 1 || bytes <= 0) return 0;
    double t = db_coll(p, c, g, PS_COLL_ALLREDUCE, bytes);
    if (t >= 0) return p->comm_scale * t;
    double bw, lat, n = (double)g->n;
    ps_coll_ring_link(p, c, g, &bw, &lat);
    double ring = 2 * (n - 1) / n * bytes / bw + 2 * (n - 1) * lat;
    /* Double binary tree (NCCL): every byte goes up and down once at link speed, but only log2(n) latency steps,
     * which wins for small payloads on many GPUs. */
    double tree = 2 * bytes / bw + 2 * ceil(log2(n)) * lat;
    return p->comm_scale * (ring < tree ? ring : tree);
}

/* The analytic all-gather, which reduce-scatter and all-to-all share. */
static double ring_gather(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes)
{
    if (g->n <= 1 || bytes <= 0) return 0;
    double bw, lat, n = (double)g->n;
    ps_coll_ring_link(p, c, g, &bw, &lat);
    return (n - 1) / n * bytes / bw + (n - 1) * lat;
}

double ps_coll_allgather(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes)
{
    if (g->n <= 1 || bytes <= 0) return 0;
    double t = db_coll(p, c, g, PS_COLL_ALLGATHER, bytes);
    return p->comm_scale * (t >= 0 ? t : ring_gather(p, c, g, bytes));
}

double ps_coll_reducescatter(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes)
{
    if (g->n <= 1 || bytes <= 0) return 0;
    double t = db_coll(p, c, g, PS_COLL_REDUCESCATTER, bytes);
    return p->comm_scale * (t >= 0 ? t : ring_gather(p, c, g, bytes)); /* the same traffic pattern, reversed */
}

double ps_coll_alltoall(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes)
{
    if (g->n <= 1 || bytes <= 0) return 0;
    double t = db_coll(p, c, g, PS_COLL_ALLTOALL, bytes);
    if (t >= 0) return p->comm_scale * t;
    /* Each GPU keeps 1/n of its buffer and sends the rest, one peer per step. Across nodes, the n - m parts bound for
     * other nodes (m: the group's members on the first member's node) cross the network while the m - 1 for the
     * node's own GPUs go over NVLink at the same time, far faster: the network sets the time. Unlike a ring, whose
     * one edge per node crosses, all m members send across at once through the node's share of the network that
     * ps_coll_ring_link gives the group (m / GPUs per node of it): m x (n - m) / n of a buffer through it. Inside one
     * node, n - 1 parts over the slowest NVLink edge. */
    double bw, lat, n = (double)g->n;
    ps_coll_ring_link(p, c, g, &bw, &lat);
    int64_t node0 = ps_cluster_node_of(c, g->first);
    double m = (double)members_on_node(c, g, 0, node0);
    double cross = m < n ? m * (n - m) : n - 1;
    return p->comm_scale * (cross / n * bytes / bw + (n - 1) * lat);
}

/* The members of group g on each of its nodes when every node holds the same number (> 1, and fewer than all), else
 * 0: members_on_node counts runs of consecutive members, one per node. O(n) placements, so kept beside the group's
 * ring link in p->memo (an expert all-to-all over 256 GPUs is costed for every strategy of every expert grid). */
static int64_t group_per_node(const ps_cost_params *p, const ps_cluster *c, const ps_group *g)
{
    memo_slot *s = p->memo ? memo_find(p->memo, c, g) : NULL;
    bool mine = s && s->c == c && s->first == g->first && s->n == g->n && s->stride == g->stride;
    if (mine && s->per >= 0) return s->per;
    int64_t per = members_on_node(c, g, 0, ps_cluster_node_of(c, g->first));
    if (per <= 1 || per >= g->n || g->n % per) per = 0;
    for (int64_t i = per; per > 0 && i < g->n; i += per)
        if (members_on_node(c, g, i, ps_cluster_node_of(c, g->first + i * g->stride)) != per) per = 0;
    if (mine) s->per = per;
    return per;
}

double ps_coll_alltoall_dedup(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes,
                              double copies, int64_t groups, int64_t group_topk)
{
    double flat = ps_coll_alltoall(p, c, g, bytes);
    if (g->n <= 1 || bytes <= 0 || !(copies > 1)) return flat;
    int64_t per = group_per_node(p, c, g);
    if (per == 0) return flat;
    double N = (double)(g->n / per);
    /* Hierarchical (DeepEP's internode kernels; Megatron-core's "flex" dispatcher): a token crosses the network once
     * per distinct remote node among the nodes of its `copies` destinations, then fans out over NVLink. With
     * destinations uniform over the N nodes, a token reaches N (1 - (1 - 1/N)^copies) distinct nodes on the mean,
     * (N - 1) / N of them remote. The network phase is an all-to-all among the GPUs of one local rank across the
     * nodes; the NVLink phase one among the node's GPUs. */
    double reach = N * (1 - pow(1 - 1 / N, copies));
    /* Group-limited routing (DeepSeek-V3 Sec. 2.1.2: node-limited to M = 4 nodes; Megatron-core group_limited_topk):
     * the chosen groups hold every copy, and group_topk groups of consecutive members span at most
     * group_topk x max(1, N / groups) of the N nodes (a group over several nodes, or several groups in a node) */
    if (groups > 0 && group_topk > 0)
        reach = fmin(reach, (double)group_topk * fmax(1.0, N / (double)groups));
    double one = bytes / copies, remote = reach * (N - 1) / N;
    ps_group inter = {g->first, (int64_t)N, g->stride * per}, intra = {g->first, per, g->stride};
    double hier = ps_coll_alltoall(p, c, &inter, one * remote * N / (N - 1)) + ps_coll_alltoall(p, c, &intra, bytes);
    return hier < flat ? hier : flat;
}

double ps_p2p(const ps_cost_params *p, const ps_cluster *c, int64_t a, int64_t b, double bytes)
{
    if (a == b || bytes <= 0) return 0;
    if (p->db) {
        ps_group pair = {a, 2, b - a};
        double t = db_coll(p, c, &pair, PS_COLL_SENDRECV, bytes);
        if (t >= 0) return p->comm_scale * t;
    }
    ps_link l = ps_cluster_link(c, a, b);
    return p->comm_scale * (l.latency_s + bytes / (l.bw_Bps * link_eff(p, l.cls)));
}

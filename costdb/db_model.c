/* The measured tables as the cost model uses them, one set per device kind of the file:
 * - GEMM: achieved rate vs FLOPs per call, per dtype; rows of equal FLOPs (ranks, shapes) give their median; log-log
 *   linear between points, the end rate beyond them (a GEMM bigger than any measured runs at the largest one's rate,
 *   a smaller one at the smallest one's rate).
 * - collectives: bus bandwidth vs size per (op, group size, inside / across nodes); the slowest of the concurrent
 *   groups; log-log linear in size; above the largest size the largest size's busbw, below the smallest size the
 *   smallest size's time (latency floor); the nearest measured group size (in log2) stands for the one asked, busbw
 *   being nearly independent of group size (that is what the nccl-tests factor normalises).
 * - memory bandwidth and overlap slowdown: medians over the kind's ranks.
 * A GPU kind takes no collective nor overlap row: psearch measures those with MPI on host memory and CPU GEMMs (no
 * NCCL backend yet), which says nothing of NVLink, InfiniBand or GPU kernels; files written before calibrate stopped
 * writing such rows for GPU ranks still have them. The analytic links and overlap slowdown stay for GPUs.
 * Pure computation: no I/O, no MPI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_costdb.h"

typedef struct {
    char dtype[8];
    int n;
    double *flops, *rate;
} gemm_curve;

typedef struct {
    char op[16];
    int gs, inter, n;
    double *bytes, *busbw;
    double t0; /* time at the smallest size: the latency floor below it [s] */
} coll_curve;

typedef struct {
    char name[32];
    bool gpu; /* a /devices row of this key has kind "gpu": its collective and overlap rows are not used */
    gemm_curve *gemm;
    int n_gemm;
    coll_curve *coll;
    int n_coll;
    double mem_Bps, overlap;
} dev_kind;

struct ps_costdb_model {
    char path[512];
    dev_kind *kind;
    int n_kind;
    char note[512]; /* which node groups of the cluster last attached use the tables (ps_costdb_attach) */
};

/* The median of n values (sorted in place); -1, the model's "not measured", when there are none. */
static double median(double *v, int n) { return n > 0 ? ps_bench_median(v, (size_t)n) : -1; }

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double x, y;
} pt;

static int cmp_pt(const void *a, const void *b)
{
    const pt *p = a, *q = b;
    return (p->x > q->x) - (p->x < q->x);
}

/* Sort points by x and fold equal x (relative 1e-9) into one, whose y is `fold` of theirs (median or minimum). */
static int fold_points(pt *p, int n, bool use_min, double *scratch)
{
    qsort(p, (size_t)n, sizeof *p, cmp_pt);
    int out = 0;
    for (int i = 0; i < n;) {
        int j = i, k = 0;
        while (j < n && fabs(p[j].x - p[i].x) <= 1e-9 * p[i].x) scratch[k++] = p[j++].y;
        double y = scratch[0];
        if (use_min) {
            for (int q = 1; q < k; q++) y = fmin(y, scratch[q]);
        } else {
            y = median(scratch, k);
        }
        p[out].x = p[i].x;
        p[out].y = y;
        out++;
        i = j;
    }
    return out;
}

/* log-log interpolation of y at x over sorted points; the end values beyond them. */
static double interp(const double *xs, const double *ys, int n, double x)
{
    if (n <= 0) return -1;
    if (x <= xs[0]) return ys[0];
    if (x >= xs[n - 1]) return ys[n - 1];
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (xs[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    double dx = log(xs[hi]) - log(xs[lo]);
    if (!(dx > 0)) return ys[lo]; /* equal abscissae (sizes that round together): no slope to follow */
    double f = (log(x) - log(xs[lo])) / dx;
    double v = exp(log(ys[lo]) + f * (log(ys[hi]) - log(ys[lo])));
    /* Extreme but valid rows (1e-300 next to 1e300) over/underflow the log-log form: take the slower neighbour,
     * the conservative side for a rate or a bandwidth (found by fuzz_costdb). */
    if (!isfinite(v) || !(v > 0)) v = fmin(ys[lo], ys[hi]);
    return v;
}

void ps_costdb_model_free(ps_costdb_model *m)
{
    if (!m) return;
    for (int k = 0; k < m->n_kind; k++) {
        dev_kind *d = &m->kind[k];
        for (int i = 0; i < d->n_gemm; i++) {
            free(d->gemm[i].flops);
            free(d->gemm[i].rate);
        }
        for (int i = 0; i < d->n_coll; i++) {
            free(d->coll[i].bytes);
            free(d->coll[i].busbw);
        }
        free(d->gemm);
        free(d->coll);
    }
    free(m->kind);
    free(m);
}

/* rank -> device kind, sorted by rank (then by /devices row, so that the first row of a rank decides). */
typedef struct {
    int32_t rank;
    int kind;
    size_t row;
} rank_kind;

static int cmp_rank_kind(const void *a, const void *b)
{
    const rank_kind *p = a, *q = b;
    if (p->rank != q->rank) return (p->rank > q->rank) - (p->rank < q->rank);
    return (p->row > q->row) - (p->row < q->row);
}

static int cmp_rank(const void *a, const void *b)
{
    int32_t x = ((const rank_kind *)a)->rank, y = ((const rank_kind *)b)->rank;
    return (x > y) - (x < y);
}

/* The device kind of a rank, or -1; idx holds one entry per rank, sorted. */
static int kind_of_rank(const rank_kind *idx, size_t n, int32_t rank)
{
    rank_kind key = {rank, -1, 0};
    const rank_kind *hit = bsearch(&key, idx, n, sizeof *idx, cmp_rank);
    return hit ? hit->kind : -1;
}

/* The device kind of every row of every measured table, looked up once: the curves below then scan plain arrays
 * (a 2048-rank file has ~10^6 rows; a scan of /devices per row made reading it quadratic). */
typedef struct {
    int *gemm, *bw, *coll, *ovl;
} row_kinds;

static void row_kinds_free(row_kinds *rk)
{
    free(rk->gemm);
    free(rk->bw);
    free(rk->coll);
    free(rk->ovl);
}

static ps_status row_kinds_build(const ps_costdb *db, const ps_costdb_model *m, row_kinds *rk)
{
    memset(rk, 0, sizeof *rk);
    rank_kind *idx = ps_calloc(db->n_dev + 1, sizeof *idx);
    rk->gemm = ps_calloc(db->n_gemm + 1, sizeof *rk->gemm);
    rk->bw = ps_calloc(db->n_bw + 1, sizeof *rk->bw);
    rk->coll = ps_calloc(db->n_coll + 1, sizeof *rk->coll);
    rk->ovl = ps_calloc(db->n_ovl + 1, sizeof *rk->ovl);
    if (!idx || !rk->gemm || !rk->bw || !rk->coll || !rk->ovl) {
        free(idx);
        row_kinds_free(rk);
        return PS_ERR_SYSTEM;
    }
    for (size_t i = 0; i < db->n_dev; i++)
        idx[i] = (rank_kind){db->dev[i].rank, ps_costdb_model_device(m, db->dev[i].name), i};
    qsort(idx, db->n_dev, sizeof *idx, cmp_rank_kind);
    size_t n = 0; /* one entry per rank: its first row */
    for (size_t i = 0; i < db->n_dev; i++)
        if (n == 0 || idx[n - 1].rank != idx[i].rank) idx[n++] = idx[i];
    for (size_t i = 0; i < db->n_gemm; i++) rk->gemm[i] = kind_of_rank(idx, n, db->gemm[i].rank);
    for (size_t i = 0; i < db->n_bw; i++) rk->bw[i] = kind_of_rank(idx, n, db->bw[i].rank);
    for (size_t i = 0; i < db->n_coll; i++) rk->coll[i] = kind_of_rank(idx, n, db->coll[i].root_rank);
    for (size_t i = 0; i < db->n_ovl; i++) rk->ovl[i] = kind_of_rank(idx, n, db->ovl[i].rank);
    free(idx);
    return PS_OK;
}

static ps_status build_kind(const ps_costdb *db, const row_kinds *rk, ps_costdb_model *m, int k, pt *pts,
                            double *scratch)
{
    dev_kind *d = &m->kind[k];
    /* GEMM curves: one per dtype of this kind */
    for (size_t i = 0; i < db->n_gemm; i++) {
        if (rk->gemm[i] != k) continue;
        int c = 0;
        while (c < d->n_gemm && strcmp(d->gemm[c].dtype, db->gemm[i].dtype) != 0) c++;
        if (c < d->n_gemm) continue; /* already built */
        int n = 0;
        for (size_t j = i; j < db->n_gemm; j++)
            if (rk->gemm[j] == k && strcmp(db->gemm[j].dtype, db->gemm[i].dtype) == 0)
                pts[n++] = (pt){db->gemm[j].flops, db->gemm[j].flops / db->gemm[j].time_s};
        n = fold_points(pts, n, false, scratch);
        gemm_curve *gc = &d->gemm[d->n_gemm];
        ps_strlcpy(gc->dtype, db->gemm[i].dtype, sizeof gc->dtype);
        gc->flops = ps_calloc((size_t)n, sizeof(double));
        gc->rate = ps_calloc((size_t)n, sizeof(double));
        if (!gc->flops || !gc->rate) {
            free(gc->flops);
            free(gc->rate);
            return PS_ERR_SYSTEM;
        }
        for (int q = 0; q < n; q++) {
            gc->flops[q] = pts[q].x;
            gc->rate[q] = pts[q].y;
        }
        gc->n = n;
        d->n_gemm++;
    }
    /* collective curves: one per (op, group size, inside/across) */
    for (size_t i = 0; i < db->n_coll && !d->gpu; i++) {
        const ps_bench_coll *r = &db->coll[i];
        if (rk->coll[i] != k) continue;
        int c = 0;
        while (c < d->n_coll && !(strcmp(d->coll[c].op, r->op) == 0 && d->coll[c].gs == r->group_size &&
                                  d->coll[c].inter == r->inter_node))
            c++;
        if (c < d->n_coll) continue;
        int n = 0;
        for (size_t j = i; j < db->n_coll; j++) {
            const ps_bench_coll *q = &db->coll[j];
            if (rk->coll[j] == k && q->group_size == r->group_size && q->inter_node == r->inter_node &&
                strcmp(q->op, r->op) == 0)
                pts[n++] = (pt){q->bytes, q->busbw_Bps};
        }
        /* concurrent groups of one shape: the slowest decides, as every group must finish before the step does */
        n = fold_points(pts, n, true, scratch);
        coll_curve *cc = &d->coll[d->n_coll];
        ps_strlcpy(cc->op, r->op, sizeof cc->op);
        cc->gs = r->group_size;
        cc->inter = r->inter_node;
        cc->bytes = ps_calloc((size_t)n, sizeof(double));
        cc->busbw = ps_calloc((size_t)n, sizeof(double));
        if (!cc->bytes || !cc->busbw) {
            free(cc->bytes);
            free(cc->busbw);
            return PS_ERR_SYSTEM;
        }
        for (int q = 0; q < n; q++) {
            cc->bytes[q] = pts[q].x;
            cc->busbw[q] = pts[q].y;
        }
        cc->t0 = pts[0].x * ps_bench_busbw_factor(r->op, r->group_size) / pts[0].y;
        cc->n = n;
        d->n_coll++;
    }
    int n = 0;
    for (size_t i = 0; i < db->n_bw; i++)
        if (rk->bw[i] == k) scratch[n++] = db->bw[i].Bps;
    d->mem_Bps = median(scratch, n);
    n = 0;
    for (size_t i = 0; i < db->n_ovl && !d->gpu; i++)
        if (rk->ovl[i] == k) scratch[n++] = db->ovl[i].slowdown;
    d->overlap = median(scratch, n);
    return PS_OK;
}

ps_status ps_costdb_model_build(const ps_costdb *db, ps_costdb_model **out)
{
    *out = NULL;
    ps_costdb_model *m = ps_calloc(1, sizeof *m);
    if (!m) return PS_ERR_SYSTEM;
    ps_strlcpy(m->path, db->path, sizeof m->path);
    size_t most = db->n_gemm > db->n_coll ? db->n_gemm : db->n_coll;
    if (db->n_bw > most) most = db->n_bw;
    if (db->n_ovl > most) most = db->n_ovl;
    m->kind = ps_calloc(db->n_dev, sizeof *m->kind);
    pt *pts = ps_calloc(most + 1, sizeof *pts);
    double *scratch = ps_calloc(most + 1, sizeof *scratch);
    ps_status st = PS_OK;
    if (!m->kind || !pts || !scratch) {
        st = PS_ERR_SYSTEM;
        goto done;
    }
    for (size_t i = 0; i < db->n_dev; i++) {
        int k = ps_costdb_model_device(m, db->dev[i].name);
        if (k < 0) {
            k = m->n_kind++;
            ps_strlcpy(m->kind[k].name, db->dev[i].name, sizeof m->kind[0].name);
        }
        if (strcmp(db->dev[i].kind, "gpu") == 0) m->kind[k].gpu = true;
    }
    row_kinds rk;
    if ((st = row_kinds_build(db, m, &rk)) != PS_OK) goto done;
    for (int k = 0; k < m->n_kind && st == PS_OK; k++) {
        dev_kind *d = &m->kind[k];
        /* at most one curve per row: enough room whatever the rows hold */
        d->gemm = ps_calloc(db->n_gemm + 1, sizeof *d->gemm);
        d->coll = ps_calloc(db->n_coll + 1, sizeof *d->coll);
        if (!d->gemm || !d->coll) {
            st = PS_ERR_SYSTEM;
            break;
        }
        st = build_kind(db, &rk, m, k, pts, scratch);
    }
    row_kinds_free(&rk);
done:
    free(pts);
    free(scratch);
    if (st != PS_OK) {
        ps_costdb_model_free(m);
        return st;
    }
    *out = m;
    return PS_OK;
}

int ps_costdb_model_n_devices(const ps_costdb_model *m) { return m->n_kind; }
const char *ps_costdb_model_device_name(const ps_costdb_model *m, int dev)
{
    return dev >= 0 && dev < m->n_kind ? m->kind[dev].name : "";
}
const char *ps_costdb_model_path(const ps_costdb_model *m) { return m->path; }

int ps_costdb_model_device(const ps_costdb_model *m, const char *gpu_name)
{
    for (int k = 0; k < m->n_kind; k++)
        if (strcmp(m->kind[k].name, gpu_name) == 0) return k;
    return -1;
}

double ps_costdb_model_gemm_rate(const ps_costdb_model *m, int dev, const char *dtype, double flops)
{
    if (dev < 0 || dev >= m->n_kind || !(flops > 0)) return -1;
    const dev_kind *d = &m->kind[dev];
    for (int i = 0; i < d->n_gemm; i++)
        if (strcmp(d->gemm[i].dtype, dtype) == 0) return interp(d->gemm[i].flops, d->gemm[i].rate, d->gemm[i].n, flops);
    return -1;
}

double ps_costdb_model_coll_time(const ps_costdb_model *m, int dev, const char *op, int64_t n, bool inter,
                                 double bytes)
{
    if (dev < 0 || dev >= m->n_kind) return -1;
    if (n <= 1 || bytes <= 0) return 0;
    const dev_kind *d = &m->kind[dev];
    const coll_curve *best = NULL;
    double bestd = INFINITY, ln = log2((double)n);
    for (int i = 0; i < d->n_coll; i++) {
        const coll_curve *c = &d->coll[i];
        if (strcmp(c->op, op) != 0 || c->inter != (int)inter || c->n < 1) continue;
        double dist = fabs(log2((double)c->gs) - ln);
        /* ties go to the larger group: its busbw is the more conservative */
        if (dist < bestd - 1e-12 || (fabs(dist - bestd) <= 1e-12 && best && c->gs > best->gs)) {
            best = c;
            bestd = dist;
        }
    }
    if (!best) return -1;
    if (bytes <= best->bytes[0]) return best->t0; /* latency floor */
    double bw = interp(best->bytes, best->busbw, best->n, bytes);
    return bytes * ps_bench_busbw_factor(op, (int)(n > 1 << 24 ? 1 << 24 : n)) / bw;
}

double ps_costdb_model_mem_Bps(const ps_costdb_model *m, int dev)
{
    return dev >= 0 && dev < m->n_kind ? m->kind[dev].mem_Bps : -1;
}

double ps_costdb_model_overlap(const ps_costdb_model *m, int dev)
{
    return dev >= 0 && dev < m->n_kind ? m->kind[dev].overlap : -1;
}

/* ---- using it for a cluster ------------------------------------------------------------------------------------ */

ps_status ps_costdb_attach(ps_costdb_model *m, const ps_cluster *c, ps_cost_params *p)
{
    int used = 0;
    double slow = -1;
    char have[256] = "", groups[384] = "";
    for (int g = 0; g < c->n_groups; g++) {
        int k = ps_costdb_model_device(m, c->groups[g].gpu.name);
        ps_strcatf(have, sizeof have, "%s'%s'", g ? ", " : "", c->groups[g].gpu.name);
        if (k < 0) continue;
        used++;
        ps_strcatf(groups, sizeof groups, "%s%s", used > 1 ? ", " : "", c->groups[g].name);
        /* one slowdown for the whole plan: the worst measured among the kinds it uses */
        double o = m->kind[k].overlap;
        if (o > slow) slow = o;
    }
    if (used == 0) {
        char known[256] = "";
        for (int k = 0; k < m->n_kind; k++) ps_strcatf(known, sizeof known, "%s'%s'", k ? ", " : "", m->kind[k].name);
        return PS_FAIL(PS_ERR_INPUT, "%s: the cost database measured %s, another device kind than cluster %s (%s): "
                                     "plan for the calibrated machine with --cluster costdb, or calibrate on this "
                                     "cluster (docs/costdb.md)", m->path, known, c->name, have);
    }
    snprintf(m->note, sizeof m->note, "measured tables for node group(s): %s%s%s", groups,
             used < c->n_groups ? "; the analytic model for the others" : "",
             slow > 0 ? "" : "; overlap slowdown not measured");
    p->db = m;
    /* The overlap form's slowdown is bounded like the --cost-param of the same name ([1, 3], costdb/params.c, which
     * has no accessor for its bounds): a measurement below 1 is noise (overlap cannot make both faster), above 3 a
     * broken run. */
    if (slow > 0) p->overlap_slowdown = slow < 1 ? 1 : slow > 3 ? 3 : slow;
    return PS_OK;
}

const char *ps_costdb_model_note(const ps_costdb_model *m) { return m->note; }

ps_status ps_costdb_cluster(const ps_costdb *db, ps_cluster *out)
{
    memset(out, 0, sizeof *out);
    ps_costdb_model *m = NULL;
    PS_TRY(ps_costdb_model_build(db, &m));
    int nk = m->n_kind;
    out->groups = ps_calloc((size_t)nk, sizeof *out->groups);
    if (!out->groups) {
        ps_costdb_model_free(m);
        return PS_ERR_SYSTEM;
    }
    out->n_groups = nk;
    const char *base = strrchr(db->path, '/');
    base = base ? base + 1 : db->path;
    snprintf(out->name, sizeof out->name, "costdb:%.50s", base);
    out->source[0] = '\0';
    ps_strcatf(out->source, sizeof out->source, "the devices measured by psearch calibrate in %s (%s)", db->path,
               db->prov.created);
    ps_status st = PS_OK;
    bool links_assumed = false;
    /* the kind of each row of /devices, once */
    int *dkind = ps_calloc(db->n_dev + 1, sizeof *dkind);
    int32_t *nodeids = ps_calloc(db->n_dev + 1, sizeof *nodeids);
    if (!dkind || !nodeids) st = PS_ERR_SYSTEM;
    for (size_t i = 0; i < db->n_dev && st == PS_OK; i++) dkind[i] = ps_costdb_model_device(m, db->dev[i].name);
    for (int k = 0; k < nk && st == PS_OK; k++) {
        ps_node_group *g = &out->groups[k];
        /* nodes of this kind and ranks on each, from the rows of /devices sorted by node */
        int32_t nodes = 0;
        int64_t per = -1, nrow = 0;
        double mem = INFINITY, peak32 = 0, peak16 = 0, peakbf = 0;
        const ps_bench_device *any = NULL;
        for (size_t i = 0; i < db->n_dev; i++) {
            const ps_bench_device *d = &db->dev[i];
            if (dkind[i] != k) continue;
            nodeids[nrow++] = d->node;
            any = d;
            if (d->mem_bytes < mem) mem = d->mem_bytes;
            peak32 = fmax(peak32, d->peak_fp32_flops);
            peak16 = fmax(peak16, d->peak_fp16_flops);
            peakbf = fmax(peakbf, d->peak_bf16_flops);
        }
        qsort(nodeids, (size_t)nrow, sizeof *nodeids, cmp_i32);
        for (int64_t i = 0; i < nrow && st == PS_OK;) {
            int64_t j = i;
            while (j < nrow && nodeids[j] == nodeids[i]) j++;
            if (per >= 0 && per != j - i)
                st = PS_FAIL(PS_ERR_INPUT, "%s: nodes of device '%s' ran different numbers of ranks (%lld and %lld): "
                                           "--cluster costdb needs the same count on every node", db->path,
                             m->kind[k].name, (long long)per, (long long)(j - i));
            per = j - i;
            nodes++;
            i = j;
        }
        if (st != PS_OK) break;
        if (!any || !(peak32 > 0) || !(mem > 0) || !(m->kind[k].mem_Bps > 0)) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: device '%s' lacks a measured fp32 GEMM rate, memory size or memory "
                                       "bandwidth: --cluster costdb cannot describe it", db->path, m->kind[k].name);
            break;
        }
        snprintf(g->name, sizeof g->name, "%.40s", any->host);
        g->nodes = nodes;
        g->gpus_per_node = per;
        ps_strlcpy(g->gpu.name, m->kind[k].name, sizeof g->gpu.name);
        ps_strlcpy(g->gpu.marketing, any->model, sizeof g->gpu.marketing);
        g->gpu.mem_bytes = mem;
        g->gpu.hbm_Bps = m->kind[k].mem_Bps;
        /* The measured best rates are the peaks: MFU is then against what this machine reaches, not a datasheet. */
        g->gpu.fp32_flops = peak32;
        g->gpu.fp16_flops = peak16;
        g->gpu.bf16_flops = peakbf;
        snprintf(g->gpu.source, sizeof g->gpu.source, "measured: %.100s", base);
        /* Links from the largest and smallest ring send/recv: only the analytic fallback reads them (the tables
         * answer collectives themselves). Inside and across nodes stand for each other when one is missing. With
         * neither (one rank per node, or GPU ranks, whose collectives are not measured yet), a psearch choice
         * stands in: the measured memory bandwidth [bytes/s], the most any copy between two ranks can move, and
         * 1e-6 s latency, a shared-memory message between ranks of a node (MPI ping-pong: ~1 us). Both are
         * optimistic for GPUs (HBM is several times NVLink): the cluster's source says so, and docs/costdb.md
         * suggests describing GPU links with a preset or cluster.json. */
        const double k_fallback_latency_s = 1e-6;
        double bw[2] = {0, 0}, lat[2] = {0, 0};
        for (int inter = 0; inter <= 1; inter++) {
            double t = ps_costdb_model_coll_time(m, k, "sendrecv", 2, inter, 1e12);
            double t0 = ps_costdb_model_coll_time(m, k, "sendrecv", 2, inter, 1);
            if (t > 0 && t0 > 0) {
                bw[inter] = 1e12 / t;
                lat[inter] = t0;
            }
        }
        if (!(bw[0] > 0) && !(bw[1] > 0)) links_assumed = true;
        if (!(bw[0] > 0)) {
            bw[0] = bw[1] > 0 ? bw[1] : g->gpu.hbm_Bps;
            lat[0] = bw[1] > 0 ? lat[1] : k_fallback_latency_s;
        }
        if (!(bw[1] > 0)) {
            bw[1] = bw[0];
            lat[1] = lat[0];
        }
        g->intra = (ps_link){.kind = "measured", .bw_Bps = bw[0], .latency_s = lat[0]};
        g->inter = (ps_link){.kind = "measured", .bw_Bps = bw[1] * (double)per, .latency_s = lat[1]};
        g->cores_per_node = 0; /* unknown: ranks may share cores (oversubscribed) */
    }
    free(dkind);
    free(nodeids);
    ps_costdb_model_free(m);
    if (links_assumed)
        ps_strcatf(out->source, sizeof out->source, "; links not measured: memory bandwidth and 1 us stand in");
    /* ps_cluster_finish asks every GPU for an fp16 peak (the catalog's GPUs all have one). A CPU has no fp16
     * measurement: it passes the check with its fp32 rate and gets 0 back, so planning it in fp16 is refused by the
     * cost model ("no fp16 tensor peak") instead of being priced with fp32 numbers. */
    bool *lent = ps_calloc((size_t)nk + 1, sizeof *lent);
    if (!lent) st = PS_ERR_SYSTEM;
    for (int k = 0; k < nk && st == PS_OK; k++)
        if (!(out->groups[k].gpu.fp16_flops > 0)) {
            out->groups[k].gpu.fp16_flops = out->groups[k].gpu.fp32_flops;
            lent[k] = true;
        }
    if (st == PS_OK) st = ps_cluster_finish(out, out->name);
    for (int k = 0; k < nk && lent; k++)
        if (lent[k]) out->groups[k].gpu.fp16_flops = 0;
    free(lent);
    if (st != PS_OK) {
        ps_cluster_free(out);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

/* The measured tables the cost model reads (ps_costdb_model, cost/ps_cost.h; its queries are cost/measured.c), built
 * from a database's rows, one set per device kind of the file, names parsed into enums once here:
 * - GEMM: achieved rate vs FLOPs per call, per training dtype (fp64 rows, which no plan asks for, make no curve);
 *   rows of equal FLOPs (ranks, shapes) give their median.
 * - fused attention (the GEMM table's rows of op attn_fwd / attn_bwd, schema 3): the same, per dtype, pass and head
 *   width (the row's k), over the FLOPs the kernel executes; never mixed into the GEMM curves.
 * - collectives: bus bandwidth vs size per (op, group size, inside / across nodes); the slowest of the concurrent
 *   groups.
 * - memory bandwidth and overlap slowdown: medians over the kind's ranks.
 * A GPU kind takes its collective and overlap rows only from a file whose nccl_version is set: NCCL measured them
 * (calib/bench_cuda.c). Without it they are MPI-on-host numbers, which say nothing of NVLink, InfiniBand or GPU kernels
 * (files written before calibrate stopped writing such rows for GPU ranks still have them): the analytic links and
 * overlap slowdown stay for that GPU kind.
 * The refit of compute_scale / comm_scale from executed plans (ps_costdb_refit) and its use on attach live here too.
 * Pure computation: no I/O, no MPI. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_costdb.h"

/* The median of n values (sorted in place); -1, the model's "not measured", when there are none. */
static double median(double *v, int n) { return n > 0 ? ps_bench_median(v, (size_t)n) : -1; }

/* What a row of the GEMM table times: a GEMM, or the fused attention kernel's forward or backward (schema 3). */
enum { GEMM_ROW, ATTN_FWD_ROW, ATTN_BWD_ROW };
static int row_class(const char *op)
{
    if (strcmp(op, PS_BENCH_OP_ATTN_FWD) == 0) return ATTN_FWD_ROW;
    if (strcmp(op, PS_BENCH_OP_ATTN_BWD) == 0) return ATTN_BWD_ROW;
    return GEMM_ROW;
}

/* The training dtype a GEMM row measured; false for one no plan is costed in (fp64, measured on CPUs). */
static bool training_dtype(const char *name, ps_dtype *out)
{
    for (int d = PS_DTYPE_FP32; d <= PS_DTYPE_FP8; d++)
        if (strcmp(name, ps_dtype_name((ps_dtype)d)) == 0) {
            *out = (ps_dtype)d;
            return true;
        }
    return false;
}

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

void ps_costdb_model_free(ps_costdb_model *m)
{
    if (!m) return;
    for (int k = 0; k < m->n_kind; k++) {
        ps_costdb_kind *d = &m->kind[k];
        for (int i = 0; i < d->n_gemm; i++) {
            free(d->gemm[i].flops);
            free(d->gemm[i].rate);
        }
        for (int i = 0; i < d->n_attn; i++) {
            free(d->attn[i].flops);
            free(d->attn[i].rate);
        }
        free(d->attn);
        for (int i = 0; i < d->n_coll; i++) {
            free(d->coll[i].bytes);
            free(d->coll[i].busbw);
        }
        free(d->gemm);
        free(d->coll);
    }
    free(m->kind);
    free(m->fit);
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
    ps_costdb_kind *d = &m->kind[k];
    /* GEMM curves: one per dtype of this kind; fused attention curves: one per dtype, pass and head width (their rows
     * share the GEMM table, told apart by op) */
    for (size_t i = 0; i < db->n_gemm; i++) {
        ps_dtype dt;
        if (rk->gemm[i] != k || !training_dtype(db->gemm[i].dtype, &dt)) continue;
        int cls = row_class(db->gemm[i].op);
        ps_costdb_gemm_curve *curves = cls == GEMM_ROW ? d->gemm : d->attn;
        int *n_curves = cls == GEMM_ROW ? &d->n_gemm : &d->n_attn;
        int c = 0;
        /* attention: one curve per head width too (the row's k), on which the kernel's rate depends */
        int64_t hd = cls == GEMM_ROW ? 0 : db->gemm[i].k;
        while (c < *n_curves &&
               !(curves[c].dtype == dt && curves[c].bwd == (cls == ATTN_BWD_ROW) && curves[c].hd == hd))
            c++;
        if (c < *n_curves) continue; /* already built */
        int n = 0;
        for (size_t j = i; j < db->n_gemm; j++)
            if (rk->gemm[j] == k && strcmp(db->gemm[j].dtype, db->gemm[i].dtype) == 0 &&
                row_class(db->gemm[j].op) == cls && (cls == GEMM_ROW || db->gemm[j].k == hd))
                pts[n++] = (pt){db->gemm[j].flops, db->gemm[j].flops / db->gemm[j].time_s};
        n = fold_points(pts, n, false, scratch);
        /* counted once complete: ps_costdb_model_free frees the counted curves' arrays */
        ps_costdb_gemm_curve *gc = &curves[*n_curves];
        gc->dtype = dt;
        gc->bwd = cls == ATTN_BWD_ROW;
        gc->hd = hd;
        gc->flops = ps_calloc((size_t)n, sizeof(double));
        gc->rate = ps_calloc((size_t)n, sizeof(double));
        if (!gc->flops || !gc->rate) {
            free(gc->flops);
            free(gc->rate);
            gc->flops = gc->rate = NULL;
            return PS_ERR_SYSTEM;
        }
        (*n_curves)++;
        for (int q = 0; q < n; q++) {
            gc->flops[q] = pts[q].x;
            gc->rate[q] = pts[q].y;
        }
        gc->n = n;
    }
    /* collective curves: one per (op, group size, inside/across) */
    for (size_t i = 0; i < db->n_coll && !d->gpu; i++) {
        const ps_bench_coll *r = &db->coll[i];
        ps_coll_op op;
        if (rk->coll[i] != k || !ps_coll_op_parse(r->op, &op)) continue; /* the reader refuses unknown ops */
        int c = 0;
        while (c < d->n_coll && !(d->coll[c].op == op && d->coll[c].gs == r->group_size &&
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
        ps_costdb_coll_curve *cc = &d->coll[d->n_coll];
        cc->op = op;
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
        cc->t0 = pts[0].x * ps_coll_busbw_factor(op, r->group_size) / pts[0].y;
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
    /* + 1: a file of executed plans and fits only has no device */
    m->kind = ps_calloc(db->n_dev + 1, sizeof *m->kind);
    m->fit = ps_calloc(db->n_fit + 1, sizeof *m->fit);
    pt *pts = ps_calloc(most + 1, sizeof *pts);
    double *scratch = ps_calloc(most + 1, sizeof *scratch);
    ps_status st = PS_OK;
    if (!m->kind || !m->fit || !pts || !scratch) {
        st = PS_ERR_SYSTEM;
        goto done;
    }
    if (db->n_fit) memcpy(m->fit, db->fit, db->n_fit * sizeof *m->fit);
    m->n_fit = db->n_fit;
    for (size_t i = 0; i < db->n_dev; i++) {
        int k = ps_costdb_model_device(m, db->dev[i].name);
        if (k < 0) {
            k = m->n_kind++;
            ps_strlcpy(m->kind[k].name, db->dev[i].name, sizeof m->kind[0].name);
        }
        if (strcmp(db->dev[i].kind, "gpu") == 0 && db->prov.nccl_version[0] == '\0') m->kind[k].gpu = true;
    }
    row_kinds rk;
    if ((st = row_kinds_build(db, m, &rk)) != PS_OK) goto done;
    for (int k = 0; k < m->n_kind && st == PS_OK; k++) {
        ps_costdb_kind *d = &m->kind[k];
        /* at most one curve per row: enough room whatever the rows hold */
        d->gemm = ps_calloc(db->n_gemm + 1, sizeof *d->gemm);
        d->attn = ps_calloc(db->n_gemm + 1, sizeof *d->attn);
        d->coll = ps_calloc(db->n_coll + 1, sizeof *d->coll);
        if (!d->gemm || !d->attn || !d->coll) {
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

/* ---- using it for a cluster ------------------------------------------------------------------------------------ */

/* The fitted value of `coef` for device `dev`, or -1; *n its rows used. Several rows (files merged by hand) name the
 * same pair only if a tool other than psearch wrote them: the last one, as the newest, wins. */
static double fit_value(const ps_costdb_model *m, const char *dev, const char *coef, int32_t *n)
{
    double v = -1;
    for (size_t i = 0; i < m->n_fit; i++)
        if (strcmp(m->fit[i].device, dev) == 0 && strcmp(m->fit[i].coefficient, coef) == 0) {
            v = m->fit[i].value;
            if (n) *n = m->fit[i].n;
        }
    return v;
}

static bool has_fit(const ps_costdb_model *m, const char *dev)
{
    for (size_t i = 0; i < m->n_fit; i++)
        if (strcmp(m->fit[i].device, dev) == 0) return true;
    return false;
}

/* The comma-separated list of ps_costdb_list_add (exact entries: "a100" is not inside "a100-80g") as the messages
 * name devices: "'a', 'b'". */
static void quote_list(const char *list, char *out, size_t cap)
{
    out[0] = '\0';
    for (const char *t = list; *t;) {
        size_t n = strcspn(t, ",");
        ps_strcatf(out, cap, "%s'%.*s'", out[0] ? ", " : "", (int)n, t);
        t += n + (t[n] == ',');
    }
}

/* ps_costdb_attach without the overrides; changes nothing on failure. */
static ps_status attach_tables(ps_costdb_model *m, const ps_cluster *c, ps_cost_params *p)
{
    int used = 0, fit_group = -1;
    double slow = -1;
    char have[256] = "", groups[384] = "", ignored[160] = ""; /* ignored: a ps_costdb_list_add list */
    for (int g = 0; g < c->n_groups; g++) {
        const char *gpu = c->groups[g].gpu.name;
        int k = ps_costdb_model_device(m, gpu);
        ps_strcatf(have, sizeof have, "%s'%s'", g ? ", " : "", gpu);
        /* One compute_scale and one comm_scale price the whole plan: the first group with a fit gives them; a
         * group of another kind with its own fit is named in the note, not silently dropped. */
        if (has_fit(m, gpu)) {
            if (fit_group < 0)
                fit_group = g;
            else if (strcmp(gpu, c->groups[fit_group].gpu.name) != 0)
                ps_costdb_list_add(ignored, sizeof ignored, gpu);
        }
        if (k < 0) continue;
        used++;
        ps_strcatf(groups, sizeof groups, "%s%s", used > 1 ? ", " : "", c->groups[g].name);
        /* one slowdown for the whole plan: the worst measured among the kinds it uses */
        double o = m->kind[k].overlap;
        if (o > slow) slow = o;
    }
    if (used == 0 && fit_group < 0) {
        char known[256] = "", fit_devs[256] = "", fits[256];
        for (int k = 0; k < m->n_kind; k++) ps_strcatf(known, sizeof known, "%s'%s'", k ? ", " : "", m->kind[k].name);
        for (size_t i = 0; i < m->n_fit; i++) ps_costdb_list_add(fit_devs, sizeof fit_devs, m->fit[i].device);
        quote_list(fit_devs, fits, sizeof fits);
        if (m->n_kind == 0 && m->n_fit == 0)
            return PS_FAIL(PS_ERR_INPUT, "%s: the cost database holds only executed plans, no measured tables and no "
                                         "fit: run psearch calibrate --from-measurements %s first (docs/costdb.md)",
                           m->path, m->path);
        if (m->n_kind == 0)
            return PS_FAIL(PS_ERR_INPUT, "%s: the cost database has fits for %s, another device kind than cluster %s "
                                         "(%s): plan a cluster of the devices the plans ran on (docs/costdb.md)",
                           m->path, fits, c->name, have);
        return PS_FAIL(PS_ERR_INPUT, "%s: the cost database measured %s%s%s, another device kind than cluster %s (%s): "
                                     "plan for the calibrated machine with --cluster costdb, or calibrate on this "
                                     "cluster (docs/costdb.md)", m->path, known, fits[0] ? " and has fits for " : "",
                       fits, c->name, have);
    }
    if (used > 0)
        snprintf(m->note, sizeof m->note, "measured tables for node group(s): %s%s%s", groups,
                 used < c->n_groups ? "; the analytic model for the others" : "",
                 slow > 0 ? "" : "; overlap slowdown not measured");
    else
        snprintf(m->note, sizeof m->note, "no measured tables for the devices of this cluster (the analytic model)");
    if (fit_group >= 0) {
        const char *gpu = c->groups[fit_group].gpu.name;
        int32_t nc = 0, nm = 0;
        double kc = fit_value(m, gpu, "compute_scale", &nc), km = fit_value(m, gpu, "comm_scale", &nm);
        /* The reader checked the range; a value is set only where the file has one (else the caller's stays). */
        if (kc > 0) p->compute_scale = kc;
        if (km > 0) p->comm_scale = km;
        ps_strcatf(m->note, sizeof m->note, "; refitted from the executed plans on '%s' (node group %s):", gpu,
                   c->groups[fit_group].name);
        if (kc > 0) ps_strcatf(m->note, sizeof m->note, " compute_scale %.4g (%d plan(s))", kc, (int)nc);
        if (km > 0) ps_strcatf(m->note, sizeof m->note, "%s comm_scale %.4g (%d plan(s))", kc > 0 ? "," : "", km,
                               (int)nm);
        if (ignored[0]) {
            char q[2 * sizeof ignored]; /* room for the quotes */
            quote_list(ignored, q, sizeof q);
            ps_strcatf(m->note, sizeof m->note, "; the fits of %s are not used (one per plan)", q);
        }
    }
    p->db = m;
    /* The overlap form's slowdown is bounded like the --cost-param of the same name (cost/params.c: [1, 3]): a
     * measurement below 1 is noise (overlap cannot make both faster), above 3 a broken run. */
    double lo = 1, hi = 1;
    ps_cost_param_range("overlap_slowdown", &lo, &hi);
    if (slow > 0) p->overlap_slowdown = slow < lo ? lo : slow > hi ? hi : slow;
    return PS_OK;
}

ps_status ps_costdb_attach(ps_costdb_model *m, const ps_cluster *c, const char *const *overrides, int n_overrides,
                           ps_cost_params *p)
{
    ps_cost_params before = *p;
    ps_status st = attach_tables(m, c, p);
    /* What the user set by name wins over what the file measured or fitted (overlap_slowdown, compute_scale,
     * comm_scale): the attach may have replaced them, so they are set again, last. */
    for (int i = 0; i < n_overrides && st == PS_OK; i++) st = ps_cost_params_set(p, overrides[i]);
    if (st != PS_OK) {
        *p = before; /* no half-applied file: the parameters are as the caller gave them */
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

ps_status ps_costdb_cluster(const ps_costdb *db, ps_cluster *out)
{
    memset(out, 0, sizeof *out);
    if (db->n_dev == 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: /devices/table is empty (the file holds executed plans or fits only): "
                                     "--cluster costdb needs a file written by psearch calibrate", db->path);
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
        /* A fused attention kernel: one the file timed on this kind (the cpu backend's, calibrate's attn rows), or
         * the catalog's word for a GPU of that name (calibrate times no GPU attention kernel). */
        ps_gpu cat;
        g->gpu.fused_attn = ps_costdb_model_has_attn(m, k) ||
                            (strcmp(any->kind, "gpu") == 0 && ps_gpu_lookup(m->kind[k].name, &cat) == PS_OK &&
                             cat.fused_attn);
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
            double t = ps_costdb_model_coll_time(m, k, PS_COLL_SENDRECV, 2, inter, 1e12);
            double t0 = ps_costdb_model_coll_time(m, k, PS_COLL_SENDRECV, 2, inter, 1);
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
        g->intra = (ps_link){.kind = "measured", .cls = PS_LINK_MEASURED, .bw_Bps = bw[0], .latency_s = lat[0]};
        g->inter = (ps_link){.kind = "measured", .cls = PS_LINK_MEASURED, .bw_Bps = bw[1] * (double)per,
                             .latency_s = lat[1]};
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

/* ---- refitting compute_scale and comm_scale from executed plans -------------------------------------------------- */

/* |predicted - measured| / measured, measured > 0; an overflow stays finite (the /fit columns must be). */
static double rel_err(double predicted, double measured)
{
    return fmin(fabs(predicted - measured) / measured, DBL_MAX);
}

/* A fitted coefficient in the range --cost-param accepts for it (cost/params.c), so a fit is always a value the
 * user could have set, and the reader's check of /fit holds. */
static double clamp_fit(double v, const char *coef)
{
    double lo = 0, hi = 0;
    ps_cost_param_range(coef, &lo, &hi);
    if (!(v >= lo)) return lo; /* also NaN, which finite rows cannot give */
    return v > hi ? hi : v;
}

/* The predicted and measured time of a measurement row's computation (part 0) or communication (part 1), and the
 * coefficient the prediction ran with. */
static void part_of(const ps_bench_measurement *r, int part, double *pred, double *meas, double *used)
{
    *pred = part ? r->predicted_comm_s : r->predicted_compute_s;
    *meas = part ? r->measured_comm_s : r->measured_compute_s;
    *used = part ? r->comm_scale : r->compute_scale;
}

/* One coefficient of one device: the rows from `first` on with its device key. part 0 = computation, 1 =
 * communication. Returns false when no row has both parts > 0. v, e0, e1: scratch of n_meas doubles; idx: of n_meas
 * row indices (the rows the filter kept, so the errors, which need the median first, do not filter again). */
static bool fit_part(const ps_costdb *db, size_t first, int part, ps_costdb_fit *f, double *v, double *e0, double *e1,
                     size_t *idx)
{
    const char *dev = db->meas[first].device, *coef = part ? "comm_scale" : "compute_scale";
    size_t k = 0;
    double pred, meas, used;
    for (size_t j = first; j < db->n_meas; j++) {
        const ps_bench_measurement *r = &db->meas[j];
        part_of(r, part, &pred, &meas, &used);
        /* nothing predicted (one rank: no communication) or nothing timed: no ratio to take */
        if (strcmp(r->device, dev) != 0 || !(pred > 0) || !(meas > 0)) continue;
        idx[k] = j;
        v[k++] = meas / (pred / used);
    }
    if (k == 0) return false;
    double value = clamp_fit(ps_bench_median(v, k), coef);
    for (size_t q = 0; q < k; q++) {
        part_of(&db->meas[idx[q]], part, &pred, &meas, &used);
        e0[q] = rel_err(pred, meas);
        e1[q] = rel_err(pred * (value / used), meas);
    }
    ps_strlcpy(f->device, dev, sizeof f->device);
    ps_strlcpy(f->coefficient, coef, sizeof f->coefficient);
    f->value = value;
    f->n = (int32_t)k;
    f->err_before = ps_bench_median(e0, k);
    f->err_after = ps_bench_median(e1, k);
    return true;
}

ps_status ps_costdb_refit(const ps_costdb *db, ps_costdb_fit **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    if (db->n_meas == 0)
        return PS_FAIL(PS_ERR_INPUT, "%s holds no executed plans: run psearch exec --record %s first", db->path,
                       db->path);
    ps_costdb_fit *out = ps_calloc(2 * db->n_meas, sizeof *out);
    double *v = ps_calloc(db->n_meas, sizeof *v), *e0 = ps_calloc(db->n_meas, sizeof *e0),
           *e1 = ps_calloc(db->n_meas, sizeof *e1);
    size_t *idx = ps_calloc(db->n_meas, sizeof *idx);
    /* out of memory: no device is fitted, and the one exit below frees what was allocated */
    ps_status st = !out || !v || !e0 || !e1 || !idx ? PS_ERR_SYSTEM : PS_OK;
    char date[32];
    ps_utc_now_iso(date, sizeof date);
    size_t k = 0;
    for (size_t i = 0; i < db->n_meas && st == PS_OK; i++) {
        const char *dev = db->meas[i].device;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = strcmp(db->meas[j].device, dev) == 0;
        if (seen) continue;
        size_t k0 = k;
        for (int part = 0; part <= 1; part++)
            if (fit_part(db, i, part, &out[k], v, e0, e1, idx)) k++;
        if (k == k0) {
            size_t rows_dev = 0;
            for (size_t j = i; j < db->n_meas; j++) rows_dev += strcmp(db->meas[j].device, dev) == 0;
            st = PS_FAIL(PS_ERR_INPUT, "%s: the %zu executed plan(s) of device '%s' in /measurements/table have no "
                                       "computation nor communication time to compare (predicted or measured 0 in "
                                       "every one): nothing to refit", db->path, rows_dev, dev);
            break;
        }
        /* The iteration time with both coefficients refitted, without rerunning the cost model: predicted_s scaled
         * by the plan's own shares of computation and communication, each by its new / used factor. Exact when one
         * part is 0 or both factors are equal (every time of the model is one or the other, so the schedule scales
         * with them); otherwise an approximation, as the parts overlap and wait on each other in the schedule. A
         * coefficient not refitted is 1 after the refit (its earlier fit row goes with the device's). */
        double kc = 1, km = 1;
        for (size_t q = k0; q < k; q++) {
            if (strcmp(out[q].coefficient, "compute_scale") == 0) kc = out[q].value;
            else km = out[q].value;
        }
        size_t q = 0;
        for (size_t j = i; j < db->n_meas; j++) {
            const ps_bench_measurement *r = &db->meas[j];
            if (strcmp(r->device, dev) != 0 || !(r->measured_s > 0)) continue;
            double pc = r->predicted_compute_s, pm = r->predicted_comm_s;
            double num = (pc > 0 ? pc * (kc / r->compute_scale) : 0) + (pm > 0 ? pm * (km / r->comm_scale) : 0);
            double f = pc + pm > 0 ? num / (pc + pm) : 1;
            e0[q] = rel_err(r->predicted_s, r->measured_s);
            e1[q] = rel_err(r->predicted_s * f, r->measured_s);
            q++;
        }
        /* the device's iteration errors, once: every fit row of the device carries them */
        double before = ps_bench_median(e0, q), after = ps_bench_median(e1, q);
        for (size_t p = k0; p < k; p++) {
            out[p].iter_n = (int32_t)q;
            out[p].iter_err_before = before;
            out[p].iter_err_after = after;
            ps_strlcpy(out[p].date, date, sizeof out[p].date);
        }
    }
    free(v);
    free(e0);
    free(e1);
    free(idx);
    if (st != PS_OK) {
        free(out);
        return st;
    }
    *rows = out;
    *n = k;
    return PS_OK;
}

/* The query side of a cost database's measured tables (ps_costdb_model, ps_cost.h), as the cost functions read
 * them: device lookup and log-log interpolation over the curves costdb/db_model.c built from the file's rows.
 * - GEMM: achieved rate vs FLOPs per call, per dtype; log-log linear between points, the end rate beyond them (a
 *   GEMM bigger than any measured runs at the largest one's rate, a smaller one at the smallest one's rate).
 * - fused attention: the same, per dtype, pass (forward, backward) and head width, over the FLOPs the kernel
 *   executes; between two timed head widths log-log in the head width.
 * - collectives: bus bandwidth vs size per (op, group size, inside / across nodes); log-log linear in size; above
 *   the largest size the largest size's busbw, below the smallest size the smallest size's time (latency floor); the
 *   nearest measured group size (in log2) stands for the one asked, busbw being nearly independent of group size
 *   (that is what the nccl-tests factor normalises).
 * Pure computation: no I/O, no MPI, no HDF5. */
#include <math.h>
#include <string.h>

#include "ps_cost.h"

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

int ps_costdb_model_n_devices(const ps_costdb_model *m) { return m->n_kind; }
const char *ps_costdb_model_device_name(const ps_costdb_model *m, int dev)
{
    return dev >= 0 && dev < m->n_kind ? m->kind[dev].name : "";
}
const char *ps_costdb_model_path(const ps_costdb_model *m) { return m->path; }
const char *ps_costdb_model_note(const ps_costdb_model *m) { return m->note; }

int ps_costdb_model_device(const ps_costdb_model *m, const char *gpu_name)
{
    for (int k = 0; k < m->n_kind; k++)
        if (strcmp(m->kind[k].name, gpu_name) == 0) return k;
    return -1;
}

double ps_costdb_model_gemm_rate(const ps_costdb_model *m, int dev, ps_dtype dtype, double flops)
{
    if (dev < 0 || dev >= m->n_kind || !(flops > 0)) return -1;
    const ps_costdb_kind *d = &m->kind[dev];
    for (int i = 0; i < d->n_gemm; i++)
        if (d->gemm[i].dtype == dtype) return interp(d->gemm[i].flops, d->gemm[i].rate, d->gemm[i].n, flops);
    return -1;
}

double ps_costdb_model_attn_rate(const ps_costdb_model *m, int dev, ps_dtype dtype, bool bwd, int64_t hd,
                                 double flops)
{
    if (dev < 0 || dev >= m->n_kind || !(flops > 0) || hd < 1) return -1;
    const ps_costdb_kind *d = &m->kind[dev];
    /* the curves of the nearest head widths at or below hd and at or above it */
    const ps_costdb_gemm_curve *lo = NULL, *hi = NULL;
    for (int i = 0; i < d->n_attn; i++) {
        const ps_costdb_gemm_curve *c = &d->attn[i];
        if (c->dtype != dtype || c->bwd != bwd) continue;
        if (c->hd <= hd && (!lo || c->hd > lo->hd)) lo = c;
        if (c->hd >= hd && (!hi || c->hd < hi->hd)) hi = c;
    }
    if (!lo && !hi) return -1;
    if (!lo || !hi || lo == hi) {
        const ps_costdb_gemm_curve *c = lo ? lo : hi;
        return interp(c->flops, c->rate, c->n, flops);
    }
    double xs[2] = {(double)lo->hd, (double)hi->hd};
    double ys[2] = {interp(lo->flops, lo->rate, lo->n, flops), interp(hi->flops, hi->rate, hi->n, flops)};
    return interp(xs, ys, 2, (double)hd);
}

bool ps_costdb_model_has_attn(const ps_costdb_model *m, int dev)
{
    if (dev < 0 || dev >= m->n_kind) return false;
    const ps_costdb_kind *d = &m->kind[dev];
    for (int i = 0; i < d->n_attn; i++)
        for (int j = 0; j < d->n_attn; j++)
            if (d->attn[i].dtype == d->attn[j].dtype && !d->attn[i].bwd && d->attn[j].bwd) return true;
    return false;
}

double ps_costdb_model_coll_time(const ps_costdb_model *m, int dev, ps_coll_op op, int64_t n, bool inter,
                                 double bytes)
{
    if (dev < 0 || dev >= m->n_kind) return -1;
    if (n <= 1 || bytes <= 0) return 0;
    const ps_costdb_kind *d = &m->kind[dev];
    const ps_costdb_coll_curve *best = NULL;
    double bestd = INFINITY, ln = log2((double)n);
    for (int i = 0; i < d->n_coll; i++) {
        const ps_costdb_coll_curve *c = &d->coll[i];
        if (c->op != op || c->inter != (int)inter || c->n < 1) continue;
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
    return bytes * ps_coll_busbw_factor(op, (int)(n > 1 << 24 ? 1 << 24 : n)) / bw;
}

double ps_costdb_model_mem_Bps(const ps_costdb_model *m, int dev)
{
    return dev >= 0 && dev < m->n_kind ? m->kind[dev].mem_Bps : -1;
}

double ps_costdb_model_overlap(const ps_costdb_model *m, int dev)
{
    return dev >= 0 && dev < m->n_kind ? m->kind[dev].overlap : -1;
}

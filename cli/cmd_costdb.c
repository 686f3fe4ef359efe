/* `psearch costdb show|merge`, and --costdb / --cluster costdb for the search and `psearch estimate`: reading a cost
 * database, summarizing it, combining two, and putting its tables into the cost model. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_comm.h"

ps_status ps_cli_costdb_cluster(const ps_cli_opts *o, ps_cluster *c)
{
    if (!o->costdb)
        return PS_FAIL(PS_ERR_INPUT, "--cluster costdb plans for the machine a cost database measured: give the "
                                     "database with --costdb FILE");
    ps_costdb db;
    PS_TRY(ps_costdb_read(o->costdb, &db));
    ps_status st = ps_costdb_cluster(&db, c);
    ps_costdb_free(&db);
    return st;
}

ps_status ps_cli_costdb_attach(const ps_cli_opts *o, const ps_cluster *c, ps_cost_params *cp, ps_costdb_model **out)
{
    *out = NULL;
    if (!o->costdb) return PS_OK;
    ps_costdb db;
    PS_TRY(ps_costdb_read(o->costdb, &db));
    ps_costdb_model *m = NULL;
    ps_status st = ps_costdb_model_build(&db, &m);
    ps_costdb_free(&db);
    PS_TRY(st);
    /* --cost-param wins over the file: costdb/'s rule (the overrides are applied last, or nothing is) */
    st = ps_costdb_attach(m, c, o->cost_params, o->n_cost_params, cp);
    if (st != PS_OK) {
        ps_costdb_model_free(m);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    *out = m;
    return PS_OK;
}

ps_status ps_cli_cost_model(const ps_cli_opts *o, MPI_Comm comm, const ps_cluster *c, ps_cost_params *cp,
                           ps_costdb_model **db)
{
    *db = NULL;
    ps_cost_params_default(cp);
    ps_status st = PS_OK;
    for (int i = 0; i < o->n_cost_params && st == PS_OK; i++) st = ps_cost_params_set(cp, o->cost_params[i]);
    if (st == PS_OK) st = ps_cli_costdb_attach(o, c, cp, db);
    /* Every rank reads the database for itself: agree, so that a rank that cannot read it does not leave while the
     * others go on into the command's collectives. */
    ps_status ast = ps_mpi_agree_status(comm, st, "reading the cost database");
    if (ast != PS_OK && st == PS_OK) {
        ps_costdb_model_free(*db);
        *db = NULL;
    }
    return ast;
}

void ps_cli_costdb_note(FILE *f, const ps_cost_params *cp, const ps_cluster *c)
{
    (void)c; /* the note was made when ps_cli_costdb_attach attached the tables to this cluster */
    if (!cp->db) return;
    fprintf(f, "# cost database %s: %s (overlap slowdown %.3g)\n", ps_costdb_model_path(cp->db),
            ps_costdb_model_note(cp->db), cp->overlap_slowdown);
}

/* ---- summary ----------------------------------------------------------------------------------------------------- */

json_t *ps_cli_fit_json(const ps_costdb_fit *f)
{
    /* /fit stores 0 for the iteration errors of a device with no measured iteration (its columns must be numbers):
     * that is no error of 0, so null */
    bool it = f->iter_n > 0;
    return json_pack("{s:s, s:s, s:f, s:i, s:f, s:f, s:i, s:o, s:o, s:s}", "device", f->device, "coefficient",
                     f->coefficient, "value", f->value, "n", (int)f->n, "err_before", f->err_before, "err_after",
                     f->err_after, "iter_n", (int)f->iter_n, "iter_err_before",
                     it ? json_real(f->iter_err_before) : json_null(), "iter_err_after",
                     it ? json_real(f->iter_err_after) : json_null(), "date", f->date);
}

typedef struct {
    char dtype[8];
    double best;
    const ps_bench_gemm *at;
} gemm_peak;

/* All-reduce bus bandwidth at the largest size of each (group size, inside/across), slowest group. */
typedef struct {
    int gs, inter;
    double bytes, busbw, time;
} ar_head;

/* The fused attention kernel's rows (op attn_fwd / attn_bwd): median rate of each pass over the file's rows. */
typedef struct {
    size_t n[2];    /* rows: forward, backward */
    double med[2];  /* [FLOP/s] */
    char dtype[8];  /* of the first row */
} attn_head;

static bool is_attn(const ps_bench_gemm *g, int *bwd)
{
    *bwd = strcmp(g->op, PS_BENCH_OP_ATTN_BWD) == 0;
    return *bwd || strcmp(g->op, PS_BENCH_OP_ATTN_FWD) == 0;
}

static int summarize(const ps_costdb *db, gemm_peak *pk, int *npk, attn_head *at, ar_head *ar, int *nar,
                     double *bw_med, double *bw_min, double *ovl_med)
{
    *npk = 0;
    memset(at, 0, sizeof *at);
    double *rates = ps_calloc(db->n_gemm + 1, sizeof *rates);
    if (!rates) return -1;
    for (int pass = 0; pass < 2; pass++) {
        size_t k = 0;
        for (size_t i = 0; i < db->n_gemm; i++) {
            int bwd;
            if (!is_attn(&db->gemm[i], &bwd) || bwd != pass) continue;
            if (!at->dtype[0]) ps_strlcpy(at->dtype, db->gemm[i].dtype, sizeof at->dtype);
            rates[k++] = db->gemm[i].flops_per_s;
        }
        at->n[pass] = k;
        at->med[pass] = ps_bench_median(rates, k);
    }
    free(rates);
    for (size_t i = 0; i < db->n_gemm; i++) {
        const ps_bench_gemm *g = &db->gemm[i];
        int bwd;
        if (is_attn(g, &bwd)) continue; /* not a GEMM: its own line */
        int k = 0;
        while (k < *npk && strcmp(pk[k].dtype, g->dtype) != 0) k++;
        if (k == *npk) {
            if (k >= 8) continue;
            ps_strlcpy(pk[k].dtype, g->dtype, sizeof pk[k].dtype);
            pk[k].best = 0;
            (*npk)++;
        }
        if (g->flops_per_s > pk[k].best) {
            pk[k].best = g->flops_per_s;
            pk[k].at = g;
        }
    }
    *nar = 0;
    for (size_t i = 0; i < db->n_coll; i++) {
        const ps_bench_coll *c = &db->coll[i];
        if (strcmp(c->op, "allreduce") != 0) continue;
        int k = 0;
        while (k < *nar && !(ar[k].gs == c->group_size && ar[k].inter == c->inter_node)) k++;
        if (k == *nar) {
            if (k >= 64) continue;
            ar[k] = (ar_head){c->group_size, c->inter_node, 0, 0, 0};
            (*nar)++;
        }
        if (c->bytes > ar[k].bytes || (c->bytes == ar[k].bytes && c->busbw_Bps < ar[k].busbw)) {
            ar[k].bytes = c->bytes;
            ar[k].busbw = c->busbw_Bps;
            ar[k].time = c->time_s;
        }
    }
    size_t nb = db->n_bw > db->n_ovl ? db->n_bw : db->n_ovl;
    double *v = ps_calloc(nb + 1, sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < db->n_bw; i++) v[i] = db->bw[i].Bps;
    *bw_med = ps_bench_median(v, db->n_bw);
    *bw_min = db->n_bw ? v[0] : 0; /* sorted by the median */
    for (size_t i = 0; i < db->n_ovl; i++) v[i] = db->ovl[i].slowdown;
    *ovl_med = ps_bench_median(v, db->n_ovl);
    free(v);
    return 0;
}

static ps_status show(const ps_costdb *db, ps_format fmt, ps_out *out)
{
    gemm_peak pk[8];
    attn_head at;
    ar_head ar[64];
    int npk = 0, nar = 0;
    double bw_med = 0, bw_min = 0, ovl = 0;
    if (summarize(db, pk, &npk, &at, ar, &nar, &bw_med, &bw_min, &ovl) != 0) return PS_ERR_SYSTEM;
    const ps_costdb_prov *p = &db->prov;
    /* the executed plans at a glance: their devices, and how far the predictions they ran with were off */
    char meas_devs[256] = "";
    double meas_err = -1; /* none: no plan with a measured iteration time */
    if (db->n_meas) {
        double *e = ps_calloc(db->n_meas, sizeof *e);
        if (!e) return PS_ERR_SYSTEM;
        size_t k = 0;
        for (size_t i = 0; i < db->n_meas; i++) {
            const ps_bench_measurement *r = &db->meas[i];
            ps_costdb_list_add(meas_devs, sizeof meas_devs, r->device);
            if (r->measured_s > 0) e[k++] = fabs(r->predicted_s - r->measured_s) / r->measured_s;
        }
        if (k) meas_err = ps_bench_median(e, k);
        free(e);
    }
    if (fmt == PS_FMT_JSON) {
        json_t *j = json_object();
        json_object_set_new(j, "file", json_string(db->path));
        json_t *pj = json_object();
        json_object_set_new(pj, "schema_version", json_integer(p->schema_version));
        json_object_set_new(pj, "psearch_version", json_string(p->psearch_version));
        json_object_set_new(pj, "created", json_string(p->created));
        json_object_set_new(pj, "hosts", json_string(p->hosts));
        json_object_set_new(pj, "devices", json_string(p->devices));
        json_object_set_new(pj, "mpi_version", json_string(p->mpi_version));
        json_object_set_new(pj, "hdf5_version", json_string(p->hdf5_version));
        if (p->cuda_version[0]) json_object_set_new(pj, "cuda_version", json_string(p->cuda_version));
        if (p->nccl_version[0]) json_object_set_new(pj, "nccl_version", json_string(p->nccl_version));
        json_object_set_new(pj, "backend", json_string(p->backend));
        json_object_set_new(pj, "mode", json_string(p->mode));
        if (p->merged_from[0]) json_object_set_new(pj, "merged_from", json_string(p->merged_from));
        json_object_set_new(pj, "n_nodes", json_integer(p->n_nodes));
        json_object_set_new(pj, "n_ranks", json_integer(p->n_ranks));
        json_object_set_new(j, "provenance", pj);
        json_t *dv = json_array();
        for (size_t i = 0; i < db->n_dev; i++) {
            const ps_bench_device *d = &db->dev[i];
            json_array_append_new(dv, json_pack("{s:i, s:i, s:s, s:s, s:s, s:f, s:f, s:f}", "rank", d->rank, "node",
                                                d->node, "host", d->host, "name", d->name, "model", d->model,
                                                "mem_bytes", d->mem_bytes, "peak_fp32_flops", d->peak_fp32_flops,
                                                "mem_Bps", d->mem_Bps));
        }
        json_object_set_new(j, "devices", dv);
        json_object_set_new(j, "rows", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "devices",
                                                 (json_int_t)db->n_dev, "gemm", (json_int_t)db->n_gemm, "bandwidth",
                                                 (json_int_t)db->n_bw, "collectives", (json_int_t)db->n_coll,
                                                 "overlap", (json_int_t)db->n_ovl, "measurements",
                                                 (json_int_t)db->n_meas, "fit", (json_int_t)db->n_fit));
        if (db->n_meas)
            json_object_set_new(j, "measurements_iter_err_median", meas_err >= 0 ? json_real(meas_err) : json_null());
        json_t *fa = json_array();
        for (size_t i = 0; i < db->n_fit; i++) json_array_append_new(fa, ps_cli_fit_json(&db->fit[i]));
        json_object_set_new(j, "fit", fa);
        json_t *g = json_object();
        for (int i = 0; i < npk; i++) json_object_set_new(g, pk[i].dtype, json_real(pk[i].best));
        json_object_set_new(j, "gemm_peak_flops", g);
        if (at.n[0] || at.n[1])
            json_object_set_new(j, "attention_flops_median",
                                json_pack("{s:s, s:f, s:f, s:I, s:I}", "dtype", at.dtype, "fwd", at.med[0], "bwd",
                                          at.med[1], "fwd_rows", (json_int_t)at.n[0], "bwd_rows",
                                          (json_int_t)at.n[1]));
        json_object_set_new(j, "mem_Bps_median", json_real(bw_med));
        json_object_set_new(j, "mem_Bps_min", json_real(bw_min));
        json_t *a = json_array();
        for (int i = 0; i < nar; i++)
            json_array_append_new(a, json_pack("{s:i, s:b, s:f, s:f, s:f}", "group_size", ar[i].gs, "inter_node",
                                               ar[i].inter, "bytes", ar[i].bytes, "busbw_Bps", ar[i].busbw, "time_s",
                                               ar[i].time));
        json_object_set_new(j, "allreduce_largest", a);
        if (db->n_ovl) json_object_set_new(j, "overlap_slowdown_median", json_real(ovl));
        return ps_out_json(out, j);
    }
    FILE *f = out->f;
    fprintf(f, "# psearch cost database %s: schema %d, written by psearch %s on %s (%s, backend %s)\n", db->path,
            p->schema_version, p->psearch_version, p->created, p->mode, p->backend);
    fprintf(f, "# hosts %s; MPI %s; HDF5 %s%s%s%s%s\n", p->hosts, p->mpi_version, p->hdf5_version,
            p->cuda_version[0] ? "; CUDA " : "", p->cuda_version, p->nccl_version[0] ? "; NCCL " : "",
            p->nccl_version);
    if (p->merged_from[0]) fprintf(f, "# merged from %s\n", p->merged_from);
    if (db->n_dev)
        fprintf(f, "devices      %zu rank(s) on %d node(s): %s\n", db->n_dev, p->n_nodes, p->devices);
    else
        fprintf(f, "devices      none measured (executed plans and fits only)\n");
    fprintf(f, "rows         devices %zu, gemm %zu, bandwidth %zu, collectives %zu, overlap %zu, measurements %zu, "
               "fit %zu\n", db->n_dev, db->n_gemm, db->n_bw, db->n_coll, db->n_ovl, db->n_meas, db->n_fit);
    char e0[16], e1[16];
    if (db->n_meas)
        fprintf(f, "executed     %zu plan(s) on %s: iteration time predicted within %s of measured (median)\n",
                db->n_meas, meas_devs, ps_fmt_rel_err(meas_err, e0, sizeof e0));
    for (size_t i = 0; i < db->n_fit; i++)
        fprintf(f, "fit          %s %s %.4g from %d plan(s) (error of its part %s -> %s; %s)\n", db->fit[i].device,
                db->fit[i].coefficient, db->fit[i].value, (int)db->fit[i].n,
                ps_fmt_rel_err(db->fit[i].err_before, e0, sizeof e0),
                ps_fmt_rel_err(db->fit[i].err_after, e1, sizeof e1), db->fit[i].date);
    for (int i = 0; i < npk; i++)
        fprintf(f, "gemm %-7s peak %.4g GFLOP/s (%s tp %d, %lldx%lldx%lld x%lld)\n", pk[i].dtype, pk[i].best / 1e9,
                pk[i].at->op, pk[i].at->tp, (long long)pk[i].at->m, (long long)pk[i].at->n, (long long)pk[i].at->k,
                (long long)pk[i].at->batch);
    if (at.n[0] && at.n[1])
        fprintf(f, "attention    fused kernel %s: forward %.4g GFLOP/s, backward %.4g GFLOP/s as executed (medians of "
                   "%zu and %zu rows: ranks x shapes x head widths)\n",
                at.dtype, at.med[0] / 1e9, at.med[1] / 1e9, at.n[0], at.n[1]);
    else if (at.n[0] || at.n[1])
        fprintf(f, "attention    fused kernel %s: only its %s timed (%zu rows): not used by the cost model\n", at.dtype,
                at.n[0] ? "forward" : "backward", at.n[0] + at.n[1]);
    if (db->n_bw)
        fprintf(f, "memory       %.4g GB/s per rank (median of %zu; slowest %.4g GB/s; %s)\n", bw_med / 1e9, db->n_bw,
                bw_min / 1e9, db->bw[0].method);
    for (int i = 0; i < nar; i++)
        fprintf(f, "allreduce    %d ranks %s: busbw %.4g GB/s at %.0f bytes (%.3g ms)\n", ar[i].gs,
                ar[i].inter ? "across nodes" : "in a node", ar[i].busbw / 1e9, ar[i].bytes, 1e3 * ar[i].time);
    if (db->n_ovl) fprintf(f, "overlap      slowdown %.3g (median of %zu ranks)\n", ovl, db->n_ovl);
    return PS_OK;
}

ps_status ps_cli_costdb_show(const ps_costdb *db, ps_format fmt, ps_out *out) { return show(db, fmt, out); }

ps_status ps_cmd_costdb(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    (void)comm; /* runs on this process alone */
    if (strcmp(o->sub, "show") == 0) {
        ps_costdb db;
        PS_TRY(ps_costdb_read(o->db_args[0], &db));
        ps_status st = show(&db, o->format, out);
        ps_costdb_free(&db);
        return st;
    }
    /* merge */
    if (!o->db_out) return PS_FAIL(PS_ERR_INPUT, "'costdb merge' needs --out FILE.h5 (the merged database)");
    /* A database merged with itself would count its ranks and rows twice, as if two allocations had been measured. */
    if (ps_same_file(o->db_args[0], o->db_args[1]))
        return PS_FAIL(PS_ERR_INPUT, "'costdb merge': %s and %s are the same file; merge databases of different "
                       "allocations", o->db_args[0], o->db_args[1]);
    ps_costdb a, b, m;
    PS_TRY(ps_costdb_read(o->db_args[0], &a));
    ps_status st = ps_costdb_read(o->db_args[1], &b);
    if (st != PS_OK) {
        ps_costdb_free(&a);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    if (o->db_replace) {
        /* --replace: B is a newer calibration of node kinds A already holds; without it their ranks would be added
         * again as more nodes of the same kind, and the interpolation would mix both nights' measurements */
        ps_costdb kept;
        size_t dropped = 0;
        st = ps_costdb_without_kinds(&a, &b, &kept, &dropped);
        if (st == PS_OK) {
            fprintf(stderr, "# costdb merge --replace: %zu device row(s) of %s in %s replaced by %s's\n", dropped,
                    b.prov.devices, a.path, b.path);
            ps_costdb_free(&a);
            a = kept;
        }
    }
    if (st == PS_OK) st = ps_costdb_merge(&a, &b, &m);
    ps_costdb_free(&a);
    ps_costdb_free(&b);
    PS_TRY(st);
    st = ps_costdb_write(o->db_out, &m);
    ps_costdb_free(&m);
    PS_TRY(st);
    /* Show what was written, read back: the merged file is checked like any input. */
    PS_TRY(ps_costdb_read(o->db_out, &m));
    st = show(&m, o->format, out);
    ps_costdb_free(&m);
    return st;
}

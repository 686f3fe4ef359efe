/* `psearch calibrate`: run the microbenchmarks of hw/ on every rank of the allocation and write them, as they
 * finish, into one HDF5 cost database with parallel HDF5 (each rank its own rows). The file is built under a
 * temporary name and renamed at the end, so an interrupted calibration leaves the previous database as it was.
 * `psearch calibrate --from-measurements DB.h5` instead refits compute_scale and comm_scale from the plans `psearch
 * exec --record` stored in DB.h5, serially and without MPI, and writes them into its /fit (docs/costdb.md). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_comm.h"

/* Every rank learns the worst outcome; the lowest failing rank's message is the one main() prints. */
static ps_status agree(MPI_Comm comm, ps_status st) { return ps_mpi_agree_status(comm, st, "calibration"); }

/* Distinct entries of fixed-size strings from every rank, comma-separated, on every rank. */
static ps_status distinct(MPI_Comm comm, const char *mine, size_t width, char *out, size_t cap)
{
    int n = 0;
    PS_MPI(MPI_Comm_size(comm, &n));
    char *all = ps_calloc((size_t)n, width);
    if (!all) return PS_ERR_SYSTEM;
    char *buf = ps_calloc(1, width);
    if (!buf) {
        free(all);
        return PS_ERR_SYSTEM;
    }
    ps_strlcpy(buf, mine, width);
    int rc = MPI_Allgather(buf, (int)width, MPI_CHAR, all, (int)width, MPI_CHAR, comm);
    free(buf);
    if (rc != MPI_SUCCESS) {
        free(all);
        return ps_mpi_status(rc, "MPI_Allgather", __FILE__, __LINE__);
    }
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        char *s = all + (size_t)i * width;
        s[width - 1] = '\0';
        ps_costdb_list_add(out, cap, s);
    }
    free(all);
    return PS_OK;
}

/* ---- --from-measurements ----------------------------------------------------------------------------------------- */

static ps_status print_fit(const ps_cli_opts *o, const ps_costdb *db, const char *dst, const ps_costdb_fit *fit,
                           size_t n, ps_out *out)
{
    if (o->format == PS_FMT_JSON) {
        json_t *j = json_object(), *a = json_array();
        json_object_set_new(j, "file", json_string(db->path));
        json_object_set_new(j, "written", json_string(dst));
        json_object_set_new(j, "measurements", json_integer((json_int_t)db->n_meas));
        json_object_set_new(j, "error", json_string("median over the plans of |predicted - measured| / measured: "
                                                    "err_* of the part the coefficient scales, iter_err_* of the "
                                                    "iteration time (after: predicted_s scaled by each plan's "
                                                    "computation and communication shares, docs/costdb.md)"));
        for (size_t i = 0; i < n; i++) json_array_append_new(a, ps_cli_fit_json(&fit[i]));
        json_object_set_new(j, "fit", a);
        return ps_out_json(out, j);
    }
    FILE *f = out->f;
    fprintf(f, "# psearch calibrate --from-measurements: %zu executed plan(s) in %s; fit written to %s\n", db->n_meas,
            db->path, dst);
    /* the ranges are --cost-param's (cost/params.c): one line when the two coefficients share it */
    double lc = 0, hc = 0, lm = 0, hm = 0;
    ps_cost_param_range("compute_scale", &lc, &hc);
    ps_cost_param_range("comm_scale", &lm, &hm);
    char range[96];
    if (lc == lm && hc == hm)
        snprintf(range, sizeof range, "[%g, %g]", lc, hc);
    else
        snprintf(range, sizeof range, "[%g, %g] (compute_scale), [%g, %g] (comm_scale)", lc, hc, lm, hm);
    fprintf(f, "# value: median of measured / predicted (the scale the plan ran with divided out), clamped to %s; "
               "--costdb %s applies it\n", range, dst);
    fprintf(f, "# errors: median of |predicted - measured| / measured; part = the time the coefficient scales; "
               "iteration after = predicted_s scaled by each plan's computation / communication shares (an "
               "approximation, docs/costdb.md)\n");
    fprintf(f, "%-31s %-14s %8s %6s %12s %8s %12s %8s\n", "device", "coefficient", "value", "plans", "part before",
            "after", "iter before", "after");
    for (size_t i = 0; i < n; i++) {
        /* the errors as `costdb show` prints them; "-" for the iteration when no plan of the device measured one */
        char b0[16], b1[16], b2[16], b3[16];
        bool it = fit[i].iter_n > 0;
        fprintf(f, "%-31s %-14s %8.4g %6d %12s %8s %12s %8s\n", fit[i].device, fit[i].coefficient, fit[i].value,
                (int)fit[i].n, ps_fmt_rel_err(fit[i].err_before, b0, sizeof b0),
                ps_fmt_rel_err(fit[i].err_after, b1, sizeof b1),
                ps_fmt_rel_err(it ? fit[i].iter_err_before : -1, b2, sizeof b2),
                ps_fmt_rel_err(it ? fit[i].iter_err_after : -1, b3, sizeof b3));
    }
    return PS_OK;
}

/* Refit from DB.h5's /measurements and store /fit in DB.h5 (or a copy at --out): one read, one atomic write. */
static ps_status refit(const ps_cli_opts *o, ps_out *out)
{
    const char *dst = o->db_out ? o->db_out : o->from_meas;
    ps_costdb db;
    PS_TRY(ps_costdb_read(o->from_meas, &db));
    ps_costdb_fit *fit = NULL;
    size_t n = 0;
    ps_status st = ps_costdb_refit(&db, &fit, &n);
    /* the fit replaces the earlier one of the devices it saw; other devices' fits stay */
    if (st == PS_OK) st = ps_costdb_fit_replace(&db, fit, n);
    if (st == PS_OK) st = ps_costdb_write(dst, &db);
    if (st == PS_OK) st = print_fit(o, &db, dst, fit, n, out);
    free(fit);
    ps_costdb_free(&db);
    PS_TRY(st);
    return PS_OK;
}

ps_status ps_cmd_calibrate(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    if (o->from_meas) return refit(o, out);
    if (!o->db_out) return PS_FAIL(PS_ERR_INPUT, "psearch calibrate needs --out FILE.h5 (the cost database to write)");
    if (comm == MPI_COMM_NULL) return PS_FAIL(PS_ERR_SYSTEM, "psearch calibrate runs under MPI");
    int rank = 0, nranks = 1;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &nranks));
    ps_bench_opts bo;
    ps_bench_opts_default(&bo, o->quick != 0);
    if (o->reps) bo.reps = o->reps;
    /* Progress goes to stderr as it happens (a full calibration takes minutes); the summary to stdout / --out. */
    bo.log = rank == 0 ? stderr : NULL;

    ps_bench_results r;
    ps_costdb_writer *w = NULL;
    ps_status st = agree(comm, ps_bench_device_init(comm, &r));
    if (st != PS_OK) goto done;

    ps_costdb_prov prov;
    ps_costdb_prov_init(&prov, r.backend, o->quick ? "quick" : "full");
    int node_max = r.dev.node, nodes = 0;
    PS_MPI_GOTO(st, MPI_Allreduce(&node_max, &nodes, 1, MPI_INT, MPI_MAX, comm), done);
    prov.n_nodes = nodes + 1;
    prov.n_ranks = nranks;
    PS_TRY_GOTO(st, agree(comm, distinct(comm, r.dev.host, sizeof r.dev.host, prov.hosts, sizeof prov.hosts)), done);
    PS_TRY_GOTO(st, agree(comm, distinct(comm, r.dev.name, sizeof r.dev.name, prov.devices, sizeof prov.devices)),
                done);
    /* set when NCCL measures the collectives and overlap (every rank a GPU rank): the cost model uses a GPU kind's
     * rows only then (costdb/db_model.c) */
    PS_TRY_GOTO(st, agree(comm, ps_bench_coll_library(comm, &r, prov.nccl_version, sizeof prov.nccl_version)), done);
    /* Every rank writes the same root attributes: rank 0's date and versions. */
    PS_MPI_GOTO(st, MPI_Bcast(&prov, (int)sizeof prov, MPI_BYTE, 0, comm), done);
    if (bo.log)
        fprintf(bo.log, "# psearch %s calibrate (%s): %d rank(s) on %d node(s), backend %s, %d reps + %d warm-up; "
                        "writing %s\n# devices: %s\n",
                PS_VERSION, prov.mode, nranks, prov.n_nodes, r.backend, bo.reps, bo.warmup, o->db_out, prov.devices);

    PS_TRY_GOTO(st, agree(comm, ps_costdb_create(o->db_out, comm, &prov, &w)), done);
    if (bo.log) fprintf(bo.log, "# temporary file %s (renamed at the end)\n", ps_costdb_temp_path(w));

    /* Each table is written as soon as it is measured: the temporary file shows how far a run got. */
    PS_TRY_GOTO(st, agree(comm, ps_bench_gemm_run(comm, &bo, &r)), done);
    /* the fused attention kernel's rows join the GEMM table (their own ops: costdb/db_model.c) */
    PS_TRY_GOTO(st, agree(comm, ps_bench_attn_run(comm, &bo, &r)), done);
    PS_TRY_GOTO(st, agree(comm, ps_costdb_write_rows(w, PS_COSTDB_GEMM, r.gemm, r.n_gemm)), done);
    if (bo.log) fprintf(bo.log, "# gemm: %zu rows per rank (GEMM shapes and fused attention), peak fp32 %.4g "
                        "GFLOP/s on rank 0\n", r.n_gemm, r.dev.peak_fp32_flops / 1e9);
    PS_TRY_GOTO(st, agree(comm, ps_bench_mem_run(comm, &bo, &r)), done);
    PS_TRY_GOTO(st, agree(comm, ps_costdb_write_rows(w, PS_COSTDB_BANDWIDTH, r.bw, r.n_bw)), done);
    if (bo.log) fprintf(bo.log, "# memory: %.4g GB/s on rank 0\n", r.dev.mem_Bps / 1e9);
    PS_TRY_GOTO(st, agree(comm, ps_bench_coll_run(comm, &bo, &r)), done);
    PS_TRY_GOTO(st, agree(comm, ps_costdb_write_rows(w, PS_COSTDB_COLLECTIVES, r.coll, r.n_coll)), done);
    PS_TRY_GOTO(st, agree(comm, ps_bench_overlap_run(comm, &bo, &r)), done);
    PS_TRY_GOTO(st, agree(comm, ps_costdb_write_rows(w, PS_COSTDB_OVERLAP, r.ovl, r.n_ovl)), done);
    PS_TRY_GOTO(st, agree(comm, ps_costdb_write_rows(w, PS_COSTDB_DEVICES, &r.dev, 1)), done);
    /* executed plans and their fit come later (psearch exec --record, calibrate --from-measurements) */
    PS_TRY_GOTO(st, agree(comm, ps_costdb_write_rows(w, PS_COSTDB_MEASUREMENTS, NULL, 0)), done);
    PS_TRY_GOTO(st, agree(comm, ps_costdb_write_rows(w, PS_COSTDB_FIT, NULL, 0)), done);
    int noisy = r.noisy, all_noisy = 0;
    PS_MPI_GOTO(st, MPI_Reduce(&noisy, &all_noisy, 1, MPI_INT, MPI_SUM, 0, comm), done);
    st = ps_costdb_commit(w);
    w = NULL;
    if (st != PS_OK) goto done;

    /* Rank 0 reads the database back, which checks it as any reader would, and prints its summary. */
    if (rank == 0) {
        ps_costdb db;
        st = ps_costdb_read(o->db_out, &db);
        if (st == PS_OK) {
            if (o->format != PS_FMT_JSON) {
                fprintf(out->f, "# psearch calibrate: wrote %s\n", o->db_out);
                if (all_noisy)
                    fprintf(out->f, "# warning: %d point(s) had a spread above %.0f%% (see the '# warning' lines on "
                                    "stderr): the machine was busy; rerun on an idle allocation or with more --reps\n",
                            all_noisy, 100 * bo.spread_warn);
            }
            st = ps_cli_costdb_show(&db, o->format, out);
            ps_costdb_free(&db);
        }
    }
done:
    if (w) ps_costdb_abort(w);
    ps_bench_results_free(&r);
    return st;
}

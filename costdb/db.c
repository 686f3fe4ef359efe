/* The cost database file: schema (one compound table per group, units and method as attributes, provenance at the
 * root), collective writing with parallel HDF5 into a temporary file renamed at the end, and a reader that checks
 * every HDF5 return and every value so a broken, truncated, foreign or newer file is an input error, never a crash.
 * docs/costdb.md documents the layout for h5dump and h5py users. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "ps_costdb.h"
#include "ps_comm.h"

#if PS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if PS_HAVE_NCCL
#include <nccl.h>
#endif

/* ---- schema ------------------------------------------------------------------------------------------------------ */

typedef enum { COL_I32, COL_I64, COL_F64, COL_STR } col_kind;
typedef struct {
    const char *name;
    size_t off;
    col_kind kind;
    size_t size;
    const char *unit;
} col;

#define CI(S, f, u) {#f, offsetof(S, f), COL_I32, sizeof(int32_t), u}
#define CL(S, f, u) {#f, offsetof(S, f), COL_I64, sizeof(int64_t), u}
#define CF(S, f, u) {#f, offsetof(S, f), COL_F64, sizeof(double), u}
#define CS(S, f, u) {#f, offsetof(S, f), COL_STR, sizeof(((S *)0)->f), u}

static const col k_dev_cols[] = {
    CI(ps_bench_device, rank, "1"), CI(ps_bench_device, node, "1"), CI(ps_bench_device, local_rank, "1"),
    CI(ps_bench_device, threads, "1"), CS(ps_bench_device, host, "text"), CS(ps_bench_device, kind, "text"),
    CS(ps_bench_device, name, "text"), CS(ps_bench_device, model, "text"), CF(ps_bench_device, mem_bytes, "bytes"),
    CF(ps_bench_device, peak_fp32_flops, "FLOP/s"), CF(ps_bench_device, peak_fp16_flops, "FLOP/s"),
    CF(ps_bench_device, peak_bf16_flops, "FLOP/s"), CF(ps_bench_device, mem_Bps, "bytes/s"),
};
static const col k_gemm_cols[] = {
    CI(ps_bench_gemm, rank, "1"), CS(ps_bench_gemm, dtype, "text"), CS(ps_bench_gemm, op, "text"),
    CI(ps_bench_gemm, tp, "1"), CL(ps_bench_gemm, m, "elements"), CL(ps_bench_gemm, n, "elements"),
    CL(ps_bench_gemm, k, "elements"), CL(ps_bench_gemm, batch, "1"), CF(ps_bench_gemm, flops, "FLOP"),
    CF(ps_bench_gemm, time_s, "s"), CF(ps_bench_gemm, flops_per_s, "FLOP/s"),
    CF(ps_bench_gemm, spread, "1 ((p90-p10)/median)"), CI(ps_bench_gemm, reps, "1"),
};
static const col k_bw_cols[] = {
    CI(ps_bench_bw, rank, "1"), CS(ps_bench_bw, method, "text"), CI(ps_bench_bw, threads, "1"),
    CF(ps_bench_bw, bytes, "bytes"), CF(ps_bench_bw, time_s, "s"), CF(ps_bench_bw, Bps, "bytes/s"),
    CF(ps_bench_bw, spread, "1 ((p90-p10)/median)"), CI(ps_bench_bw, reps, "1"),
};
static const col k_coll_cols[] = {
    CS(ps_bench_coll, op, "text"), CI(ps_bench_coll, group_size, "ranks"), CI(ps_bench_coll, inter_node, "0|1"),
    CI(ps_bench_coll, root_rank, "1"), CI(ps_bench_coll, n_groups, "1"), CF(ps_bench_coll, bytes, "bytes"),
    CF(ps_bench_coll, time_s, "s"), CF(ps_bench_coll, algbw_Bps, "bytes/s"), CF(ps_bench_coll, busbw_Bps, "bytes/s"),
    CF(ps_bench_coll, spread, "1 ((p90-p10)/median)"), CI(ps_bench_coll, reps, "1"),
};
static const col k_ovl_cols[] = {
    CI(ps_bench_overlap, rank, "1"), CF(ps_bench_overlap, gemm_s, "s"), CF(ps_bench_overlap, comm_s, "s"),
    CF(ps_bench_overlap, both_s, "s"), CF(ps_bench_overlap, gemm_flops, "FLOP"),
    CF(ps_bench_overlap, comm_bytes, "bytes"), CF(ps_bench_overlap, slowdown, "1"), CI(ps_bench_overlap, reps, "1"),
};
static const col k_meas_cols[] = {
    CS(ps_bench_measurement, plan, "text"), CS(ps_bench_measurement, model, "text"),
    CS(ps_bench_measurement, cluster, "text"), CS(ps_bench_measurement, device, "text"),
    CS(ps_bench_measurement, backend, "text"), CI(ps_bench_measurement, ranks, "1"),
    CI(ps_bench_measurement, iters, "1"), CF(ps_bench_measurement, scale, "1 (shapes divided by it)"),
    CF(ps_bench_measurement, compute_scale, "1"), CF(ps_bench_measurement, comm_scale, "1"),
    CF(ps_bench_measurement, predicted_s, "s"), CF(ps_bench_measurement, measured_s, "s"),
    CF(ps_bench_measurement, spread, "1 ((p90-p10)/median)"), CF(ps_bench_measurement, predicted_compute_s, "s"),
    CF(ps_bench_measurement, measured_compute_s, "s"), CF(ps_bench_measurement, predicted_comm_s, "s"),
    CF(ps_bench_measurement, measured_comm_s, "s"), CF(ps_bench_measurement, predicted_peak_bytes, "bytes"),
    CF(ps_bench_measurement, measured_peak_bytes, "bytes"), CS(ps_bench_measurement, date, "ISO 8601 UTC"),
};
static const col k_fit_cols[] = {
    CS(ps_costdb_fit, device, "text"), CS(ps_costdb_fit, coefficient, "text"), CF(ps_costdb_fit, value, "1"),
    CI(ps_costdb_fit, n, "rows"), CF(ps_costdb_fit, err_before, "1"), CF(ps_costdb_fit, err_after, "1"),
    CI(ps_costdb_fit, iter_n, "rows"), CF(ps_costdb_fit, iter_err_before, "1"),
    CF(ps_costdb_fit, iter_err_after, "1"), CS(ps_costdb_fit, date, "ISO 8601 UTC"),
};

typedef struct {
    const char *group;
    size_t elt;
    const col *cols;
    int ncols;
    const char *method;
} table_def;

#define T(g, S, c, m) {g, sizeof(S), c, (int)(sizeof c / sizeof c[0]), m}
static const table_def k_tables[PS_COSTDB_N_TABLES] = {
    T("/devices", ps_bench_device, k_dev_cols,
      "one row per MPI rank of the calibration: the device it measured (CPU: the cores of the rank; GPU: one device) "
      "with its best GEMM rate and median memory bandwidth"),
    T("/gemm", ps_bench_gemm, k_gemm_cols,
      "(m x k).(k x n) row-major GEMMs, batch of them per call; OpenBLAS cblas_sgemm/dgemm on CPU, cuBLAS on GPU; "
      "every rank at once; median of reps timed calls after warm-up; op grid = log-spaced generic grid, other ops = "
      "a decoder block's GEMMs at tensor-parallel degree tp; except op attn_fwd / attn_bwd (schema 3): the fused "
      "attention kernel psearch exec runs (CPU: calib/attn_cpu.c), forward / backward, m queries, n keys, k head "
      "width, batch sequences x heads, flops as executed (causal tiles skipped, the backward 2.5x the forward)"),
    T("/bandwidth", ps_bench_bw, k_bw_cols,
      "CPU: STREAM triad a = b + s c with OpenMP, bytes = 3 x 8 x N (no write-allocate); GPU: device-to-device copy, "
      "bytes = 2 x size; all ranks at once; median of reps after warm-up"),
    T("/collectives", ps_bench_coll, k_coll_cols,
      "collectives the nccl-tests way, MPI on host memory (CPU ranks) or NCCL on device memory (GPU ranks, "
      "nccl_version set; no rows when the calibration mixed both): time = median over reps of the slowest member; "
      "algbw = bytes / time; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n (allgather, reducescatter, alltoall), "
      "1 (sendrecv ring); every group of the shape at once; inter_node 0 = one node, 1 = one rank per node"),
    T("/overlap", ps_bench_overlap, k_ovl_cols,
      "CPU ranks: an OpenBLAS sgemm in row blocks and an MPI_Iallreduce on host memory (MPI_Test between blocks "
      "progresses it); GPU ranks: a bf16 cuBLAS GEMM and an NCCL all-reduce on two streams; all ranks, each alone "
      "and together (no rows when the calibration mixed both); slowdown s solves both = max(gemm, comm) + (s - 1) "
      "min(gemm, comm)"),
    T("/measurements", ps_bench_measurement, k_meas_cols,
      "executed plans (psearch exec --record, docs/exec.md): predicted against measured iteration time, computation "
      "and communication (per-rank means per iteration) and peak memory, with the compute_scale / comm_scale the "
      "prediction used; empty after calibration"),
    T("/fit", ps_costdb_fit, k_fit_cols,
      "psearch calibrate --from-measurements: per device key, compute_scale (comm_scale) = median over the executed "
      "plans of measured / (predicted / the scale it used) computation (communication), clamped to the range "
      "--cost-param accepts for it (the ranges end this text); err = median |predicted - measured| / measured of that "
      "part (err_*) and of the iteration time (iter_err_*, after: predicted_s scaled by the plan's computation and "
      "communication shares); empty after calibration"),
};
#undef T

const char *ps_costdb_table_group(ps_costdb_table t)
{
    return t >= 0 && t < PS_COSTDB_N_TABLES ? k_tables[t].group : "?";
}

/* ---- HDF5 helpers --------------------------------------------------------------------------------------------- */

/* The innermost HDF5 error description (the most specific reason), for messages. */
static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    char *out = data;
    if (n == 0 && e->desc) ps_strlcpy(out, e->desc, 160);
    return 0;
}

/* Copies the reason into buf (160 bytes) and returns it. Every HDF5 API call starts by clearing the error stack, so
 * this must run right after the call that failed, before any close. */
static const char *h5_detail(char *buf)
{
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, buf);
    H5Eclear2(H5E_DEFAULT);
    if (!buf[0]) ps_strlcpy(buf, "no detail from HDF5", 160);
    return buf;
}

static void h5_quiet(void)
{
    /* Errors come back as return codes we word ourselves; HDF5's own stack dump would only confuse users. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static hid_t mem_type(const table_def *t)
{
    hid_t tid = H5Tcreate(H5T_COMPOUND, t->elt);
    if (tid < 0) return -1;
    for (int i = 0; i < t->ncols; i++) {
        const col *c = &t->cols[i];
        hid_t m = -1;
        bool own = false;
        switch (c->kind) {
        case COL_I32: m = H5T_NATIVE_INT32; break;
        case COL_I64: m = H5T_NATIVE_INT64; break;
        case COL_F64: m = H5T_NATIVE_DOUBLE; break;
        case COL_STR:
            m = H5Tcopy(H5T_C_S1);
            own = true;
            if (m < 0 || H5Tset_size(m, c->size) < 0 || H5Tset_strpad(m, H5T_STR_NULLTERM) < 0) {
                if (m >= 0) H5Tclose(m);
                H5Tclose(tid);
                return -1;
            }
            break;
        }
        herr_t rc = H5Tinsert(tid, c->name, c->off, m);
        if (own) H5Tclose(m);
        if (rc < 0) {
            H5Tclose(tid);
            return -1;
        }
    }
    return tid;
}

static ps_status put_str_attr(hid_t obj, const char *name, const char *value, const char *where)
{
    char d[160];
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    herr_t rc = -1;
    if (t >= 0 && sp >= 0 && H5Tset_size(t, strlen(value) + 1) >= 0 && H5Tset_strpad(t, H5T_STR_NULLTERM) >= 0 &&
        (a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0)
        rc = H5Awrite(a, t, value);
    if (rc < 0) h5_detail(d);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (rc < 0) return PS_FAIL(PS_ERR_SYSTEM, "%s: cannot write attribute '%s': %s", where, name, d);
    return PS_OK;
}

static ps_status put_int_attr(hid_t obj, const char *name, int32_t value, const char *where)
{
    char d[160];
    hid_t sp = H5Screate(H5S_SCALAR), a = -1;
    herr_t rc = -1;
    if (sp >= 0) a = H5Acreate2(obj, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) rc = H5Awrite(a, H5T_NATIVE_INT32, &value);
    if (rc < 0) h5_detail(d);
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (rc < 0) return PS_FAIL(PS_ERR_SYSTEM, "%s: cannot write attribute '%s': %s", where, name, d);
    return PS_OK;
}

/* ---- provenance -------------------------------------------------------------------------------------------------- */

void ps_costdb_versions_get(ps_costdb_versions *v)
{
    memset(v, 0, sizeof *v);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
        lib[strcspn(lib, "\n")] = '\0';
        ps_strlcpy(v->mpi, lib, sizeof v->mpi);
    }
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
    snprintf(v->hdf5, sizeof v->hdf5, "%u.%u.%u", maj, min, rel);
#if PS_HAVE_CUDA
    int rt = 0, drv = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (drv)
        snprintf(v->cuda, sizeof v->cuda, "runtime %d.%d, driver %d.%d", rt / 1000, (rt % 1000) / 10, drv / 1000,
                 (drv % 1000) / 10);
    else
        snprintf(v->cuda, sizeof v->cuda, "runtime %d.%d, driver none (no GPU)", rt / 1000, (rt % 1000) / 10);
#endif
#if PS_HAVE_NCCL
    int nv = 0;
    if (ncclGetVersion(&nv) == ncclSuccess)
        snprintf(v->nccl, sizeof v->nccl, "%d.%d.%d", nv / 10000, (nv / 100) % 100, nv % 100);
#endif
}

void ps_costdb_prov_init(ps_costdb_prov *p, const char *backend, const char *mode)
{
    memset(p, 0, sizeof *p);
    p->schema_version = PS_COSTDB_SCHEMA_VERSION;
    ps_strlcpy(p->psearch_version, PS_VERSION, sizeof p->psearch_version);
    ps_utc_now_iso(p->created, sizeof p->created);
    ps_costdb_versions v;
    ps_costdb_versions_get(&v);
    ps_strlcpy(p->mpi_version, v.mpi, sizeof p->mpi_version);
    ps_strlcpy(p->hdf5_version, v.hdf5, sizeof p->hdf5_version);
    ps_strlcpy(p->cuda_version, v.cuda, sizeof p->cuda_version);
    /* nccl_version names the library that measured the collectives: empty here (MPI), set by calibrate when NCCL
     * measures them (ps_bench_coll_library), so even a build linked with NCCL leaves it empty on CPU ranks. */
    ps_strlcpy(p->backend, backend, sizeof p->backend);
    ps_strlcpy(p->mode, mode, sizeof p->mode);
}

/* ---- writing ----------------------------------------------------------------------------------------------------- */

struct ps_costdb_writer {
    hid_t file, dxpl;
    MPI_Comm comm;
    int rank;
    char path[512];   /* as the user gave it: messages name it */
    char target[4096]; /* the file it resolves to (through links): the temporary goes beside it, then replaces it */
    char tmp[4200];
    ps_lock lock;     /* rank 0: one writer per database file */
    int cleanup_slot; /* the temporary, removed on SIGTERM / SIGINT (ps_cleanup_add) */
};

const char *ps_costdb_temp_path(const ps_costdb_writer *w) { return w->tmp; }

/* Where the database goes: the regular file (or new name) the path resolves to through links, never a device, a FIFO
 * or a directory, since HDF5 writes a whole file and it only takes its name once complete. The temporary is
 * "<dir>/.<name>.tmp-<pid>": hidden, beside the target (same file system, so rename is atomic), and never a name a
 * user would pass as the database. Holds the target's lock (ps_output_lock) on success. */
static ps_status writer_target(ps_costdb_writer *w, bool lock)
{
    ps_output o;
    PS_TRY(ps_output_resolve(w->path, &o));
    if (o.kind != PS_OUTPUT_FILE)
        return PS_FAIL(PS_ERR_INPUT, "%s: a cost database is written whole and then renamed into place: give the path "
                                     "of a regular file, not a device, FIFO or standard output", w->path);
    ps_strlcpy(w->target, o.path, sizeof w->target);
    char a[4096], b[4096];
    ps_strlcpy(a, o.path, sizeof a);
    ps_strlcpy(b, o.path, sizeof b);
    int n = snprintf(w->tmp, sizeof w->tmp, "%s/.%s.tmp-%ld", dirname(a), basename(b), (long)getpid());
    if (n < 0 || (size_t)n >= sizeof w->tmp) return PS_FAIL(PS_ERR_INPUT, "%s: path too long", w->path);
    return lock ? ps_output_lock(w->target, &w->lock) : PS_OK;
}

static ps_status write_prov(hid_t f, const ps_costdb_prov *p, const char *where)
{
    /* The writer knows one layout, the current one: a database read from an older file is written upgraded. */
    PS_TRY(put_int_attr(f, "schema_version", PS_COSTDB_SCHEMA_VERSION, where));
    PS_TRY(put_str_attr(f, "description", "psearch cost database: measured GEMM, memory bandwidth, collective and "
                                          "overlap tables, executed plans and the coefficients refitted from them; "
                                          "schema in docs/costdb.md", where));
    PS_TRY(put_str_attr(f, "psearch_version", p->psearch_version, where));
    PS_TRY(put_str_attr(f, "created", p->created, where));
    PS_TRY(put_str_attr(f, "hosts", p->hosts, where));
    PS_TRY(put_str_attr(f, "devices", p->devices, where));
    PS_TRY(put_str_attr(f, "mpi_version", p->mpi_version, where));
    PS_TRY(put_str_attr(f, "hdf5_version", p->hdf5_version, where));
    if (p->cuda_version[0]) PS_TRY(put_str_attr(f, "cuda_version", p->cuda_version, where));
    if (p->nccl_version[0]) PS_TRY(put_str_attr(f, "nccl_version", p->nccl_version, where));
    PS_TRY(put_str_attr(f, "backend", p->backend, where));
    PS_TRY(put_str_attr(f, "mode", p->mode, where));
    if (p->merged_from[0]) PS_TRY(put_str_attr(f, "merged_from", p->merged_from, where));
    PS_TRY(put_int_attr(f, "n_nodes", p->n_nodes, where));
    PS_TRY(put_int_attr(f, "n_ranks", p->n_ranks, where));
    return PS_OK;
}

/* A parallel create leaves each step on every rank together, or a rank that failed alone would wait in a collective
 * (a barrier, a close) that the others never enter: the failing rank keeps its message, the others name it. */
static ps_status create_agree(MPI_Comm comm, const char *path, ps_status st)
{
    if (comm == MPI_COMM_NULL) return st;
    char what[600];
    snprintf(what, sizeof what, "%s: creating the cost database", path);
    return ps_mpi_agree_status(comm, st, what);
}

/* The file's root attributes, groups and transfer property list, once the file exists. */
static ps_status create_layout(ps_costdb_writer *w, const ps_costdb_prov *prov)
{
    char d[160];
    w->dxpl = H5Pcreate(H5P_DATASET_XFER);
    /* Collective transfers: the MPI-IO layer aggregates every rank's rows into few large writes. */
    if (w->dxpl < 0 || (w->comm != MPI_COMM_NULL && H5Pset_dxpl_mpio(w->dxpl, H5FD_MPIO_COLLECTIVE) < 0))
        return PS_FAIL(PS_ERR_SYSTEM, "%s: HDF5 failed while creating the cost database: %s", w->path, h5_detail(d));
    PS_TRY(write_prov(w->file, prov, w->path));
    for (int t = 0; t < PS_COSTDB_N_TABLES; t++) {
        hid_t g = H5Gcreate2(w->file, k_tables[t].group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (g < 0)
            return PS_FAIL(PS_ERR_SYSTEM, "%s: cannot create group %s: %s", w->path, k_tables[t].group, h5_detail(d));
        H5Gclose(g);
    }
    return PS_OK;
}

/* lock false: the caller already holds the target's lock (a read-modify-write, ps_costdb_add_measurements). */
static ps_status create_writer(const char *path, MPI_Comm comm, const ps_costdb_prov *prov, bool lock,
                               ps_costdb_writer **out)
{
    char d[160];
    *out = NULL;
    h5_quiet();
    ps_costdb_writer *w = ps_calloc(1, sizeof *w);
    ps_status st = w ? PS_OK : PS_ERR_SYSTEM;
    if (w) {
        w->lock.fd = w->lock.cleanup_slot = -1;
        w->cleanup_slot = -1;
        w->file = w->dxpl = -1;
        w->comm = comm;
        ps_strlcpy(w->path, path, sizeof w->path);
    }
    if (st == PS_OK && comm != MPI_COMM_NULL) st = ps_mpi_status(MPI_Comm_rank(comm, &w->rank), "MPI_Comm_rank",
                                                                 __FILE__, __LINE__);
    /* Rank 0 decides where the file goes and holds it against a second writer until the rename. */
    if (st == PS_OK && w->rank == 0) st = writer_target(w, lock);
    if ((st = create_agree(comm, path, st)) != PS_OK) {
        if (w) ps_output_unlock(&w->lock);
        free(w);
        return st;
    }
    if (comm != MPI_COMM_NULL) {
        /* Every rank must open the same name: rank 0's pid names it. */
        int rc = MPI_Bcast(w->tmp, (int)sizeof w->tmp, MPI_CHAR, 0, comm);
        if (rc != MPI_SUCCESS) {
            ps_output_unlock(&w->lock);
            free(w);
            return ps_mpi_status(rc, "MPI_Bcast of the temporary name", __FILE__, __LINE__);
        }
    }
    w->cleanup_slot = ps_cleanup_add(w->tmp);
    /* The 1.8+ file format checksums its metadata (superblock v2+, object headers v2): a reader then detects a
     * damaged header before parsing it, which HDF5 1.10 does not survive for the old format (fuzz_costdb). */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || (comm != MPI_COMM_NULL && H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) < 0) ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) < 0)
        st = PS_FAIL(PS_ERR_SYSTEM, "%s: HDF5 failed while creating the cost database: %s", path, h5_detail(d));
    /* H5Fcreate is collective: every rank has its property list first. */
    if ((st = create_agree(comm, path, st)) == PS_OK) {
        w->file = H5Fcreate(w->tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        if (w->file < 0)
            st = PS_FAIL(PS_ERR_INPUT, "%s: cannot create the cost database (temporary %s): %s", path, w->tmp,
                         h5_detail(d));
        /* MPI_File_open under H5Fcreate fails on all ranks or none, so no rank is left holding a file here */
        st = create_agree(comm, path, st);
    }
    if (fapl >= 0) H5Pclose(fapl);
    if (st != PS_OK) {
        if (w->file >= 0) H5Fclose(w->file);
        ps_cleanup_remove(w->cleanup_slot);
        ps_output_unlock(&w->lock);
        free(w);
        return st;
    }
    /* The root attributes and groups are collective metadata writes: every rank then closes and removes the
     * temporary together when one failed. */
    if ((st = create_agree(comm, path, create_layout(w, prov))) != PS_OK) {
        ps_costdb_abort(w);
        return st;
    }
    *out = w;
    return PS_OK;
}

/* A table's "method" attribute. /fit's states the ranges its values were clamped to, taken from cost/params.c
 * (the one place they are written down), so an h5dump shows them. */
static void method_text(ps_costdb_table t, char *buf, size_t cap)
{
    ps_strlcpy(buf, k_tables[t].method, cap);
    if (t != PS_COSTDB_FIT) return;
    static const char *const coefs[] = {"compute_scale", "comm_scale"};
    for (size_t i = 0; i < sizeof coefs / sizeof coefs[0]; i++) {
        double lo = 0, hi = 0;
        if (ps_cost_param_range(coefs[i], &lo, &hi))
            ps_strcatf(buf, cap, "%s%s in [%g, %g]", i ? ", " : "; ranges: ", coefs[i], lo, hi);
    }
}

ps_status ps_costdb_create(const char *path, MPI_Comm comm, const ps_costdb_prov *prov, ps_costdb_writer **out)
{
    return create_writer(path, comm, prov, true, out);
}

ps_status ps_costdb_write_rows(ps_costdb_writer *w, ps_costdb_table t, const void *rows, size_t n)
{
    char d[160];
    const table_def *td = &k_tables[t];
    unsigned long long mine = n, off = 0, total = n;
    if (w->comm != MPI_COMM_NULL) {
        /* Each rank's rows go after the rows of the ranks before it. */
        PS_MPI(MPI_Exscan(&mine, &off, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, w->comm));
        if (w->rank == 0) off = 0;
        PS_MPI(MPI_Allreduce(&mine, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, w->comm));
    }
    ps_status st = PS_OK;
    hid_t mt = mem_type(td), fs = -1, ms = -1, dcpl = -1, ds = -1, g = -1;
    hsize_t dims[1] = {total}, maxd[1] = {H5S_UNLIMITED}, chunk[1] = {total < 1 ? 1 : total > 4096 ? 4096 : total};
    hsize_t start[1] = {off}, cnt[1] = {mine}, one[1] = {1};
    const char *what = "build the row type";
    if (mt < 0) goto h5fail;
    what = "open the group";
    g = H5Gopen2(w->file, td->group, H5P_DEFAULT);
    if (g < 0) goto h5fail;
    /* Chunked and unlimited: `psearch exec` appends rows to /measurements, and a table may be empty. */
    what = "create the dataset";
    fs = H5Screate_simple(1, dims, maxd);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (fs < 0 || dcpl < 0 || H5Pset_chunk(dcpl, 1, chunk) < 0) goto h5fail;
    ds = H5Dcreate2(g, "table", mt, fs, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds < 0) goto h5fail;
    what = "write the attributes";
    {
        char units[1024] = "";
        for (int i = 0; i < td->ncols; i++)
            ps_strcatf(units, sizeof units, "%s%s [%s]", i ? "; " : "", td->cols[i].name, td->cols[i].unit);
        PS_TRY_GOTO(st, put_str_attr(ds, "units", units, w->path), done);
        char method[1024];
        method_text(t, method, sizeof method);
        PS_TRY_GOTO(st, put_str_attr(ds, "method", method, w->path), done);
    }
    what = "select this rank's rows";
    ms = H5Screate_simple(1, mine ? cnt : one, NULL);
    if (ms < 0) goto h5fail;
    if (mine) {
        if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, cnt, NULL) < 0) goto h5fail;
    } else if (H5Sselect_none(fs) < 0 || H5Sselect_none(ms) < 0) {
        goto h5fail;
    }
    what = "write the rows";
    {
        /* A rank with no rows still takes part in the collective write, with an empty selection. */
        static const char dummy[1024];
        if (H5Dwrite(ds, mt, ms, fs, w->dxpl, mine ? rows : (const void *)dummy) < 0) goto h5fail;
    }
    goto done;
h5fail:
    st = PS_FAIL(PS_ERR_SYSTEM, "%s: cannot %s of %s/table: %s", w->path, what, td->group, h5_detail(d));
done:
    if (ms >= 0) H5Sclose(ms);
    if (ds >= 0) H5Dclose(ds);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (fs >= 0) H5Sclose(fs);
    if (g >= 0) H5Gclose(g);
    if (mt >= 0) H5Tclose(mt);
    return st;
}

/* Closes the file; false on failure, with HDF5's reason of the first failed close in d (160 bytes). */
static bool writer_close(ps_costdb_writer *w, char *d)
{
    bool ok = true;
    if (w->dxpl >= 0 && H5Pclose(w->dxpl) < 0) {
        h5_detail(d);
        ok = false;
    }
    if (w->file >= 0 && H5Fclose(w->file) < 0 && ok) {
        h5_detail(d);
        ok = false;
    }
    w->dxpl = w->file = -1;
    return ok;
}

void ps_costdb_abort(ps_costdb_writer *w)
{
    if (!w) return;
    char d[160];
    writer_close(w, d);
    if (w->comm != MPI_COMM_NULL) MPI_Barrier(w->comm);
    if (w->rank == 0) unlink(w->tmp);
    ps_cleanup_remove(w->cleanup_slot);
    ps_output_unlock(&w->lock);
    free(w);
}

ps_status ps_costdb_commit(ps_costdb_writer *w)
{
    char d[160];
    ps_status st = PS_OK;
    if (!writer_close(w, d)) st = PS_FAIL(PS_ERR_SYSTEM, "%s: closing the cost database failed: %s", w->path, d);
    if (w->comm != MPI_COMM_NULL) {
        /* Every rank's data is in the file once all have closed it; only then may it take the final name. */
        char what[600];
        snprintf(what, sizeof what, "%s: closing the file", w->path);
        st = ps_mpi_agree_status(w->comm, st, what);
    }
    int ok = st == PS_OK;
    if (w->rank == 0 && ok) {
        /* Data on disk before the name points at it: a crash after the rename never shows a half-written file. */
        int fd = open(w->tmp, O_RDONLY);
        if (fd < 0 || fsync(fd) != 0 || rename(w->tmp, w->target) != 0) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: cannot put the cost database in place (from %s): %s", w->path, w->tmp,
                         strerror(errno));
            ok = 0;
        }
        if (fd >= 0) close(fd);
        if (!ok) unlink(w->tmp);
    } else if (w->rank == 0) {
        unlink(w->tmp);
    }
    if (w->comm != MPI_COMM_NULL) {
        /* Others learn whether the rename happened: the command's outcome is the same everywhere. */
        int r = MPI_Bcast(&ok, 1, MPI_INT, 0, w->comm);
        if (r != MPI_SUCCESS && st == PS_OK) st = ps_mpi_status(r, "MPI_Bcast", __FILE__, __LINE__);
        if (!ok && st == PS_OK) st = PS_FAIL(PS_ERR_SYSTEM, "%s: rank 0 could not put the cost database in place",
                                             w->path);
    }
    ps_cleanup_remove(w->cleanup_slot);
    ps_output_unlock(&w->lock);
    free(w);
    return st;
}

static ps_status write_db(const char *path, const ps_costdb *db, bool lock)
{
    ps_costdb_writer *w = NULL;
    PS_TRY(create_writer(path, MPI_COMM_NULL, &db->prov, lock, &w));
    const void *rows[PS_COSTDB_N_TABLES] = {db->dev, db->gemm, db->bw, db->coll, db->ovl, db->meas, db->fit};
    size_t n[PS_COSTDB_N_TABLES] = {db->n_dev, db->n_gemm, db->n_bw, db->n_coll, db->n_ovl, db->n_meas, db->n_fit};
    for (int t = 0; t < PS_COSTDB_N_TABLES; t++) {
        ps_status st = ps_costdb_write_rows(w, (ps_costdb_table)t, rows[t], n[t]);
        if (st != PS_OK) {
            ps_costdb_abort(w);
            return ps_error_trace(st, __FILE__, __LINE__);
        }
    }
    PS_TRY(ps_costdb_commit(w));
    return PS_OK;
}

ps_status ps_costdb_write(const char *path, const ps_costdb *db) { return write_db(path, db, true); }

/* ---- reading ----------------------------------------------------------------------------------------------------- */

void ps_costdb_free(ps_costdb *db)
{
    free(db->dev);
    free(db->gemm);
    free(db->bw);
    free(db->coll);
    free(db->ovl);
    free(db->meas);
    free(db->fit);
    memset(db, 0, sizeof *db);
}

/* A string attribute into buf (cut to cap); absent and optional -> "", absent and required -> error. */
static ps_status get_str_attr(hid_t obj, const char *name, char *buf, size_t cap, bool required, const char *file)
{
    char d[160];
    buf[0] = '\0';
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: cannot read the attributes of the root group: %s", file, h5_detail(d));
    if (ex == 0) {
        if (required) return PS_FAIL(PS_ERR_INPUT, "%s: attribute '%s' is missing at the root", file, name);
        return PS_OK;
    }
    ps_status st = PS_OK;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), t = -1, mt = -1, sp = -1;
    char *tmp = NULL;
    if (a < 0 || (t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0) goto bad;
    if (H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t) != 0 || H5Sget_simple_extent_npoints(sp) != 1) {
        st = PS_FAIL(PS_ERR_INPUT, "%s: attribute '%s' must be one fixed-length string", file, name);
        goto done;
    }
    size_t sz = H5Tget_size(t);
    if (sz == 0 || sz > 65536) goto bad;
    tmp = ps_calloc(sz + 1, 1);
    mt = H5Tcopy(H5T_C_S1);
    if (!tmp || mt < 0 || H5Tset_size(mt, sz) < 0 || H5Aread(a, mt, tmp) < 0) goto bad;
    tmp[sz] = '\0';
    ps_strlcpy(buf, tmp, cap);
    goto done;
bad:
    if (st == PS_OK) st = PS_FAIL(PS_ERR_INPUT, "%s: attribute '%s' cannot be read: %s", file, name, h5_detail(d));
done:
    free(tmp);
    if (mt >= 0) H5Tclose(mt);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return st;
}

static ps_status get_int_attr(hid_t obj, const char *name, int32_t *v, bool required, const char *file)
{
    char d[160];
    *v = 0;
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: cannot read the attributes of the root group: %s", file, h5_detail(d));
    if (ex == 0) {
        if (required)
            return PS_FAIL(PS_ERR_INPUT, "%s: attribute '%s' is missing at the root: not a psearch cost database "
                                         "(docs/costdb.md)", file, name);
        return PS_OK;
    }
    ps_status st = PS_OK;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), t = -1, sp = -1;
    if (a < 0 || (t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0 || H5Tget_class(t) != H5T_INTEGER ||
        H5Sget_simple_extent_npoints(sp) != 1 || H5Aread(a, H5T_NATIVE_INT32, v) < 0)
        st = PS_FAIL(PS_ERR_INPUT, "%s: attribute '%s' must be one integer: %s", file, name, h5_detail(d));
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return st;
}

/* More ranks than any machine has: bounds every rank-like number, so renumbering in a merge cannot overflow. */
#define PS_COSTDB_MAX_RANK (1 << 24)

static bool finite_ge(double v, double lo) { return isfinite(v) && v >= lo; }
static bool finite_gt(double v, double lo) { return isfinite(v) && v > lo; }
/* A rate or bandwidth the cost model divides by: at least 1 per second. A positive one below that is no
 * measurement, and a subnormal one (2e-317 B/s, found by fuzz_costdb) turns a megabyte's time into infinity and a
 * layer's into NaN. */
static bool rate_ok(double v) { return isfinite(v) && v >= 1; }
/* ... or 0 where the file may say "unknown" (a device's peaks and memory bandwidth) */
static bool rate_or_0(double v) { return v == 0 || rate_ok(v); }

/* Values a table row must hold for the cost model to use it; NULL when the row is fine, else the failed rule (a
 * constant, or written into buf when it names a bound). */
static const char *check_row(ps_costdb_table t, const void *row, char *buf, size_t cap)
{
    switch (t) {
    case PS_COSTDB_DEVICES: {
        const ps_bench_device *r = row;
        if (r->rank < 0 || r->node < 0 || r->local_rank < 0 || r->rank > PS_COSTDB_MAX_RANK ||
            r->node > PS_COSTDB_MAX_RANK || r->local_rank > PS_COSTDB_MAX_RANK)
            return "rank, node and local_rank must be in [0, 2^24]";
        if (strcmp(r->kind, "cpu") != 0 && strcmp(r->kind, "gpu") != 0) return "kind must be 'cpu' or 'gpu'";
        if (!r->name[0]) return "name must not be empty";
        if (!finite_ge(r->mem_bytes, 0) || !rate_or_0(r->peak_fp32_flops) || !rate_or_0(r->peak_fp16_flops) ||
            !rate_or_0(r->peak_bf16_flops) || !rate_or_0(r->mem_Bps))
            return "memory must be a finite number >= 0, peaks and bandwidth 0 (unknown) or finite numbers >= 1";
        return NULL;
    }
    case PS_COSTDB_GEMM: {
        const ps_bench_gemm *r = row;
        if (!r->dtype[0]) return "dtype must not be empty";
        if (r->m < 1 || r->n < 1 || r->k < 1 || r->batch < 1) return "m, n, k and batch must be >= 1";
        if (!finite_gt(r->flops, 0) || !finite_gt(r->time_s, 0) || !rate_ok(r->flops_per_s))
            return "flops and time_s must be finite numbers > 0, flops_per_s a finite number >= 1";
        /* the rate the cost model uses is flops / time_s (costdb/db_model.c): 1e-300 FLOPs in a second passed the
         * rules above and made every GEMM of a plan take forever (fuzz_costdb) */
        if (!rate_ok(r->flops / r->time_s)) return "flops / time_s must be at least 1 FLOP/s";
        if (!finite_ge(r->spread, 0)) return "spread must be a finite number >= 0";
        return NULL;
    }
    case PS_COSTDB_BANDWIDTH: {
        const ps_bench_bw *r = row;
        if (!finite_gt(r->bytes, 0) || !finite_gt(r->time_s, 0) || !rate_ok(r->Bps))
            return "bytes and time_s must be finite numbers > 0, Bps a finite number >= 1";
        return NULL;
    }
    case PS_COSTDB_COLLECTIVES: {
        const ps_bench_coll *r = row;
        ps_coll_op op;
        if (!ps_coll_op_parse(r->op, &op))
            return "op must be allreduce, allgather, reducescatter, alltoall or sendrecv";
        if (r->group_size < 2 || r->group_size > PS_COSTDB_MAX_RANK) return "group_size must be in [2, 2^24]";
        if (r->inter_node != 0 && r->inter_node != 1) return "inter_node must be 0 or 1";
        if (!finite_gt(r->bytes, 0) || !finite_gt(r->time_s, 0) || !rate_ok(r->busbw_Bps) || !rate_ok(r->algbw_Bps))
            return "bytes and time_s must be finite numbers > 0, algbw_Bps and busbw_Bps finite numbers >= 1";
        return NULL;
    }
    case PS_COSTDB_OVERLAP: {
        const ps_bench_overlap *r = row;
        if (!finite_gt(r->gemm_s, 0) || !finite_gt(r->comm_s, 0) || !finite_gt(r->both_s, 0) ||
            !isfinite(r->slowdown))
            return "gemm_s, comm_s and both_s must be finite numbers > 0 and slowdown finite";
        return NULL;
    }
    case PS_COSTDB_MEASUREMENTS: {
        const ps_bench_measurement *r = row;
        if (!r->device[0]) return "device must not be empty";
        if (r->ranks < 1 || r->ranks > PS_COSTDB_MAX_RANK) return "ranks must be in [1, 2^24]";
        if (r->iters < 1) return "iters must be >= 1";
        if (!(isfinite(r->scale) && r->scale >= 1)) return "scale must be a finite number >= 1";
        /* a refit divides by them: the cost model never runs with a scale of 0 (--cost-param refuses one) */
        if (!finite_gt(r->compute_scale, 0) || !finite_gt(r->comm_scale, 0))
            return "compute_scale and comm_scale must be finite numbers > 0";
        if (!finite_ge(r->predicted_s, 0) || !finite_ge(r->measured_s, 0) || !finite_ge(r->spread, 0) ||
            !finite_ge(r->predicted_compute_s, 0) || !finite_ge(r->measured_compute_s, 0) ||
            !finite_ge(r->predicted_comm_s, 0) || !finite_ge(r->measured_comm_s, 0) ||
            !finite_ge(r->predicted_peak_bytes, 0) || !finite_ge(r->measured_peak_bytes, 0))
            return "times, spread and peak bytes must be finite numbers >= 0";
        return NULL;
    }
    case PS_COSTDB_FIT: {
        const ps_costdb_fit *r = row;
        if (!r->device[0]) return "device must not be empty";
        if (strcmp(r->coefficient, "compute_scale") != 0 && strcmp(r->coefficient, "comm_scale") != 0)
            return "coefficient must be 'compute_scale' or 'comm_scale'";
        /* the range --cost-param accepts for the coefficient: a fit is a value the user could have set */
        double lo = 0, hi = 0;
        if (!ps_cost_param_range(r->coefficient, &lo, &hi)) return "coefficient is not a cost parameter";
        if (!(isfinite(r->value) && r->value >= lo && r->value <= hi)) {
            snprintf(buf, cap, "value must be a finite number in [%g, %g]", lo, hi);
            return buf;
        }
        if (r->n < 1 || r->iter_n < 0) return "n must be >= 1 and iter_n >= 0";
        if (!finite_ge(r->err_before, 0) || !finite_ge(r->err_after, 0) || !finite_ge(r->iter_err_before, 0) ||
            !finite_ge(r->iter_err_after, 0))
            return "errors must be finite numbers >= 0";
        return NULL;
    }
    case PS_COSTDB_N_TABLES: break;
    }
    return "unknown table";
}

/* The storage of a table as psearch writes it: chunked, one dimension, no filters, no user fill value, and every
 * chunk allocated, of its nominal size, inside the file. Anything else -> PS_ERR_INPUT. */
static ps_status check_layout(hid_t ds, hid_t space, const char *fname, const char *dpath, size_t fsz,
                              hsize_t rows, hsize_t file_size)
{
    ps_status st = PS_OK;
    hid_t dcpl = H5Dget_create_plist(ds);
    hsize_t cdim[1] = {0}, nchunks = 0;
    H5D_fill_value_t fill = H5D_FILL_VALUE_ERROR;
    const char *why = NULL;
    if (dcpl < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED || H5Pget_chunk(dcpl, 1, cdim) != 1 || cdim[0] == 0)
        why = "its storage is not the 1-D chunked layout psearch writes";
    else if (H5Pget_nfilters(dcpl) != 0)
        why = "it has filters psearch never writes";
    else if (H5Pfill_value_defined(dcpl, &fill) < 0 || fill == H5D_FILL_VALUE_USER_DEFINED)
        why = "it has a fill value psearch never writes";
    else if (H5Dget_num_chunks(ds, space, &nchunks) < 0 || nchunks != (rows + cdim[0] - 1) / cdim[0])
        why = "its chunks do not cover its rows";
    for (hsize_t i = 0; i < nchunks && !why; i++) {
        hsize_t off[1];
        unsigned mask = 0;
        haddr_t addr = 0;
        hsize_t size = 0;
        if (H5Dget_chunk_info(ds, space, i, off, &mask, &addr, &size) < 0 || size != cdim[0] * fsz ||
            addr == HADDR_UNDEF || addr > file_size || size > file_size - addr)
            why = "a chunk is damaged (size or place)";
    }
    if (why) {
        H5Eclear2(H5E_DEFAULT);
        st = PS_FAIL(PS_ERR_INPUT, "%s: dataset %s: %s (corrupt file?)", fname, dpath, why);
    }
    if (dcpl >= 0) H5Pclose(dcpl);
    return st;
}

/* Text columns end inside their field and hold printable ASCII (names end up in JSON and on terminals), then the
 * table's own rules; NULL when the row is fine. buf: room for a message that names a bound. */
static const char *row_problem(ps_costdb_table t, const void *row, char *buf, size_t cap)
{
    const table_def *td = &k_tables[t];
    for (int i = 0; i < td->ncols; i++) {
        if (td->cols[i].kind != COL_STR) continue;
        const char *str = (const char *)row + td->cols[i].off;
        if (!memchr(str, '\0', td->cols[i].size)) return "a text column is not NUL-terminated in its field";
        for (const char *c = str; *c; c++)
            if (*c < 0x20 || *c > 0x7e) return "text columns must hold printable ASCII";
    }
    return check_row(t, row, buf, cap);
}

static ps_status read_table(hid_t file, const char *fname, ps_costdb_table t, hsize_t file_size, void **rows,
                            size_t *n)
{
    char d[160];
    const table_def *td = &k_tables[t];
    *rows = NULL;
    *n = 0;
    htri_t ex = H5Lexists(file, td->group, H5P_DEFAULT);
    if (ex <= 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: group %s is missing (docs/costdb.md lists the groups)", fname, td->group);
    char dpath[64];
    snprintf(dpath, sizeof dpath, "%s/table", td->group);
    ex = H5Lexists(file, dpath, H5P_DEFAULT);
    if (ex <= 0) return PS_FAIL(PS_ERR_INPUT, "%s: dataset %s is missing", fname, dpath);

    ps_status st = PS_OK;
    hid_t ds = H5Dopen2(file, dpath, H5P_DEFAULT), ft = -1, sp = -1, mt = -1;
    void *buf = NULL;
    if (ds < 0 || (ft = H5Dget_type(ds)) < 0 || (sp = H5Dget_space(ds)) < 0) {
        st = PS_FAIL(PS_ERR_INPUT, "%s: dataset %s cannot be opened (corrupt file?): %s", fname, dpath, h5_detail(d));
        goto done;
    }
    if (H5Tget_class(ft) != H5T_COMPOUND) {
        st = PS_FAIL(PS_ERR_INPUT, "%s: dataset %s must be a table of compound rows", fname, dpath);
        goto done;
    }
    /* Every column the reader needs must be in the file, with the right kind of value. */
    for (int i = 0; i < td->ncols; i++) {
        int idx = H5Tget_member_index(ft, td->cols[i].name);
        H5T_class_t want = td->cols[i].kind == COL_STR ? H5T_STRING
                         : td->cols[i].kind == COL_F64 ? H5T_FLOAT
                                                       : H5T_INTEGER;
        if (idx < 0 || H5Tget_member_class(ft, (unsigned)idx) != want) {
            H5Eclear2(H5E_DEFAULT);
            st = PS_FAIL(PS_ERR_INPUT, "%s: dataset %s lacks column '%s' (or it has another type)", fname, dpath,
                         td->cols[i].name);
            goto done;
        }
    }
    hsize_t dims[1] = {0};
    if (H5Sget_simple_extent_ndims(sp) != 1 || H5Sget_simple_extent_dims(sp, dims, NULL) != 1) {
        st = PS_FAIL(PS_ERR_INPUT, "%s: dataset %s must be one-dimensional", fname, dpath);
        goto done;
    }
    /* A corrupt header may claim any size: no table can hold more rows than the file has bytes for. */
    size_t fsz = H5Tget_size(ft);
    /* psearch's rows are a few hundred bytes; a damaged type claiming more would size HDF5's conversion buffers */
    if (fsz == 0 || fsz > 4096) {
        st = PS_FAIL(PS_ERR_INPUT, "%s: dataset %s has rows of %zu bytes: not a psearch table (corrupt file?)", fname,
                     dpath, fsz);
        goto done;
    }
    if (dims[0] > file_size / fsz + 1) {
        st = PS_FAIL(PS_ERR_INPUT, "%s: dataset %s claims %llu rows, more than the file holds (truncated or corrupt)",
                     fname, dpath, (unsigned long long)dims[0]);
        goto done;
    }
    /* HDF5 1.10 trusts a damaged layout: a chunk shorter than its nominal size, or a fill value of another size
     * than the row type, is copied past the end of its buffer (found by fuzz_costdb). psearch writes unfiltered 1-D
     * chunks with the default fill, every chunk whole: check exactly that before HDF5 reads a byte of data. */
    if (dims[0] > 0 && (st = check_layout(ds, sp, fname, dpath, fsz, dims[0], file_size)) != PS_OK) goto done;
    if (dims[0] > 0) {
        buf = ps_calloc((size_t)dims[0], td->elt);
        if (!buf) {
            st = PS_ERR_SYSTEM;
            goto done;
        }
        mt = mem_type(td);
        if (mt < 0 || H5Dread(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: the rows of %s cannot be read (truncated or corrupt file): %s", fname,
                         dpath, h5_detail(d));
            goto done;
        }
    }
    for (hsize_t r = 0; r < dims[0]; r++) {
        char *row = (char *)buf + r * td->elt;
        /* a file's string fills its field when written by another tool: cut it to what the struct holds */
        for (int i = 0; i < td->ncols; i++)
            if (td->cols[i].kind == COL_STR) row[td->cols[i].off + td->cols[i].size - 1] = '\0';
        char wb[128];
        const char *why = row_problem(t, row, wb, sizeof wb);
        if (why) {
            st = PS_FAIL(PS_ERR_INPUT, "%s: %s row %llu: %s", fname, dpath, (unsigned long long)r, why);
            goto done;
        }
    }
    *rows = buf;
    *n = (size_t)dims[0];
    buf = NULL;
done:
    free(buf);
    if (mt >= 0) H5Tclose(mt);
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    if (ds >= 0) H5Dclose(ds);
    return st;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static bool has_rank(const int32_t *sorted, size_t n, int32_t rank)
{
    return bsearch(&rank, sorted, n, sizeof *sorted, cmp_i32) != NULL;
}

/* Rows of the measurement tables belong to a device of /devices: one sorted copy of the device ranks, searched per
 * row (a scan of /devices per row made a 2048-rank file, ~10^6 rows, take seconds). */
static ps_status check_ranks(const ps_costdb *db, const char *fname)
{
    int32_t *ranks = ps_calloc(db->n_dev, sizeof *ranks);
    if (!ranks) return PS_ERR_SYSTEM;
    for (size_t i = 0; i < db->n_dev; i++) ranks[i] = db->dev[i].rank;
    qsort(ranks, db->n_dev, sizeof *ranks, cmp_i32);
    size_t n = db->n_dev;
    ps_status st = PS_OK;
    for (size_t i = 0; i < db->n_gemm && st == PS_OK; i++)
        if (!has_rank(ranks, n, db->gemm[i].rank))
            st = PS_FAIL(PS_ERR_INPUT, "%s: /gemm/table row %zu: rank %d has no row in /devices/table", fname, i,
                         db->gemm[i].rank);
    for (size_t i = 0; i < db->n_bw && st == PS_OK; i++)
        if (!has_rank(ranks, n, db->bw[i].rank))
            st = PS_FAIL(PS_ERR_INPUT, "%s: /bandwidth/table row %zu: rank %d has no row in /devices/table", fname,
                         i, db->bw[i].rank);
    for (size_t i = 0; i < db->n_coll && st == PS_OK; i++)
        if (!has_rank(ranks, n, db->coll[i].root_rank))
            st = PS_FAIL(PS_ERR_INPUT, "%s: /collectives/table row %zu: root_rank %d has no row in /devices/table",
                         fname, i, db->coll[i].root_rank);
    for (size_t i = 0; i < db->n_ovl && st == PS_OK; i++)
        if (!has_rank(ranks, n, db->ovl[i].rank))
            st = PS_FAIL(PS_ERR_INPUT, "%s: /overlap/table row %zu: rank %d has no row in /devices/table", fname, i,
                         db->ovl[i].rank);
    free(ranks);
    return st;
}

static ps_status read_open(hid_t file, const char *fname, ps_costdb *db)
{
    char d[160];
    ps_costdb_prov *p = &db->prov;
    hsize_t fsize = 0;
    if (H5Fget_filesize(file, &fsize) < 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: cannot get the file size: %s", fname, h5_detail(d));
    hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
    if (root < 0) return PS_FAIL(PS_ERR_INPUT, "%s: the root group cannot be opened: %s", fname, h5_detail(d));
    ps_status st = get_int_attr(root, "schema_version", &p->schema_version, true, fname);
    if (st == PS_OK && p->schema_version > PS_COSTDB_SCHEMA_VERSION)
        st = PS_FAIL(PS_ERR_INPUT, "%s: schema_version %d is newer than this psearch reads (%d): upgrade psearch or "
                                   "recalibrate", fname, p->schema_version, PS_COSTDB_SCHEMA_VERSION);
    if (st == PS_OK && p->schema_version < 1)
        st = PS_FAIL(PS_ERR_INPUT, "%s: schema_version %d is not a valid version (>= 1)", fname, p->schema_version);
    struct {
        const char *name;
        char *buf;
        size_t cap;
        bool req;
    } s[] = {
        {"psearch_version", p->psearch_version, sizeof p->psearch_version, true},
        {"created", p->created, sizeof p->created, true},
        {"hosts", p->hosts, sizeof p->hosts, true},
        {"devices", p->devices, sizeof p->devices, true},
        {"mpi_version", p->mpi_version, sizeof p->mpi_version, false},
        {"hdf5_version", p->hdf5_version, sizeof p->hdf5_version, false},
        {"cuda_version", p->cuda_version, sizeof p->cuda_version, false},
        {"nccl_version", p->nccl_version, sizeof p->nccl_version, false},
        {"backend", p->backend, sizeof p->backend, true},
        {"mode", p->mode, sizeof p->mode, false},
        {"merged_from", p->merged_from, sizeof p->merged_from, false},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0] && st == PS_OK; i++)
        st = get_str_attr(root, s[i].name, s[i].buf, s[i].cap, s[i].req, fname);
    if (st == PS_OK) st = get_int_attr(root, "n_nodes", &p->n_nodes, true, fname);
    if (st == PS_OK) st = get_int_attr(root, "n_ranks", &p->n_ranks, true, fname);
    H5Gclose(root);
    PS_TRY(st);

    void **rows[PS_COSTDB_N_TABLES] = {(void **)&db->dev, (void **)&db->gemm, (void **)&db->bw, (void **)&db->coll,
                                       (void **)&db->ovl, (void **)&db->meas, (void **)&db->fit};
    size_t *n[PS_COSTDB_N_TABLES] = {&db->n_dev, &db->n_gemm, &db->n_bw, &db->n_coll, &db->n_ovl, &db->n_meas,
                                     &db->n_fit};
    for (int t = 0; t < PS_COSTDB_N_TABLES; t++) {
        /* Schema 1 had a /measurements of another row type that nothing ever wrote a row into, and no /fit: both
         * read as empty, so calibrations made before schema 2 stay usable. */
        if (p->schema_version < 2 && (t == PS_COSTDB_MEASUREMENTS || t == PS_COSTDB_FIT)) continue;
        PS_TRY(read_table(file, fname, (ps_costdb_table)t, fsize, rows[t], n[t]));
    }
    /* `psearch exec --record` may create a file of executed plans only; a file with nothing at all is no database. */
    if (db->n_dev == 0 && db->n_meas == 0 && db->n_fit == 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: /devices/table is empty: the file describes no device (and holds no "
                                     "executed plan nor fit)", fname);
    return check_ranks(db, fname);
}

/* The signature and a superblock version with checksums (2 or 3), checked on the bytes before HDF5 parses anything:
 * psearch writes only that format, and HDF5's parser of unchecksummed metadata is not safe on damaged files. */
static ps_status check_head(const unsigned char *head, size_t n, const char *fname)
{
    if (n < 9 || memcmp(head, "\211HDF\r\n\032\n", 8) != 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: not an HDF5 file (a cost database is written by psearch calibrate)", fname);
    if (head[8] != 2 && head[8] != 3)
        return PS_FAIL(PS_ERR_INPUT, "%s: HDF5 superblock version %u: a cost database is written with checksummed "
                                     "metadata (version 2 or 3, HDF5 1.8+ format); recalibrate or convert it with "
                                     "h5repack --latest (docs/costdb.md)", fname, (unsigned)head[8]);
    return PS_OK;
}

static ps_status read_fid(hid_t file, const char *fname, ps_costdb *db)
{
    ps_status st = read_open(file, fname, db);
    if (H5Fclose(file) < 0 && st == PS_OK) {
        char d[160];
        st = PS_FAIL(PS_ERR_INPUT, "%s: closing the file failed: %s", fname, h5_detail(d));
    }
    if (st != PS_OK) ps_costdb_free(db);
    ps_strlcpy(db->path, fname, sizeof db->path);
    return st;
}

ps_status ps_costdb_read(const char *path, ps_costdb *db)
{
    char d[160];
    memset(db, 0, sizeof *db);
    h5_quiet();
    unsigned char head[9];
    int fd = ps_open_input(path, "the cost database");
    if (fd < 0) return ps_error_trace(PS_ERR_INPUT, __FILE__, __LINE__);
    ssize_t r;
    size_t got = 0;
    while (got < sizeof head && ((r = read(fd, head + got, sizeof head - got)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0) got += (size_t)r;
    close(fd);
    PS_TRY(check_head(head, got, path));
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: the HDF5 file cannot be opened (truncated or corrupt): %s", path,
                       h5_detail(d));
    PS_TRY(read_fid(f, path, db));
    return PS_OK;
}

/* ---- merge ------------------------------------------------------------------------------------------------------- */

static ps_status cat(void **out, const void *a, size_t na, const void *b, size_t nb, size_t elt)
{
    *out = NULL;
    if (na + nb == 0) return PS_OK;
    *out = ps_calloc(na + nb, elt);
    if (!*out) return PS_ERR_SYSTEM;
    if (na) memcpy(*out, a, na * elt);
    if (nb) memcpy((char *)*out + na * elt, b, nb * elt);
    return PS_OK;
}

static bool list_has(const char *list, const char *entry, size_t n)
{
    for (const char *t = list; *t;) {
        size_t m = strcspn(t, ",");
        if (m == n && memcmp(t, entry, n) == 0) return true;
        t += m + (t[m] == ',');
    }
    return false;
}

void ps_costdb_list_add(char *dst, size_t cap, const char *add)
{
    for (const char *t = add; *t;) {
        size_t n = strcspn(t, ",");
        if (n > 0 && !list_has(dst, t, n)) ps_strcatf(dst, cap, "%s%.*s", dst[0] ? "," : "", (int)n, t);
        t += n + (t[n] == ',');
    }
}

/* db->fit without the rows that `add` replaces, then `add`. whole_device: a row of add replaces every row of its
 * device (a refit saw all of that device's plans); else only the row of its device and coefficient (a merge). */
static ps_status fit_merge(ps_costdb *db, const ps_costdb_fit *add, size_t n_add, bool whole_device)
{
    ps_costdb_fit *all = ps_calloc(db->n_fit + n_add + 1, sizeof *all);
    if (!all) return PS_ERR_SYSTEM;
    size_t k = 0;
    for (size_t i = 0; i < db->n_fit; i++) {
        bool replaced = false;
        for (size_t j = 0; j < n_add && !replaced; j++)
            replaced = strcmp(db->fit[i].device, add[j].device) == 0 &&
                       (whole_device || strcmp(db->fit[i].coefficient, add[j].coefficient) == 0);
        if (!replaced) all[k++] = db->fit[i];
    }
    for (size_t j = 0; j < n_add; j++) all[k++] = add[j];
    free(db->fit);
    db->fit = all;
    db->n_fit = k;
    return PS_OK;
}

ps_status ps_costdb_fit_replace(ps_costdb *db, const ps_costdb_fit *fit, size_t n)
{
    return fit_merge(db, fit, n, true);
}

ps_status ps_costdb_merge(const ps_costdb *a, const ps_costdb *b, ps_costdb *out)
{
    memset(out, 0, sizeof *out);
    /* Both were read into the current schema (ps_costdb_read upgrades older files); the writer writes the current
     * version whatever prov.schema_version holds, so the merge leaves it as a's. */
    out->prov = a->prov;
    ps_strlcpy(out->prov.mode, strcmp(a->prov.mode, b->prov.mode) == 0 ? a->prov.mode : "mixed", sizeof out->prov.mode);
    if (strcmp(a->prov.backend, b->prov.backend) != 0)
        snprintf(out->prov.backend, sizeof out->prov.backend, "mixed");
    ps_costdb_list_add(out->prov.hosts, sizeof out->prov.hosts, b->prov.hosts);
    ps_costdb_list_add(out->prov.devices, sizeof out->prov.devices, b->prov.devices);
    out->prov.merged_from[0] = '\0';
    ps_strcatf(out->prov.merged_from, sizeof out->prov.merged_from, "%s,%s", a->path, b->path);
    if (out->prov.cuda_version[0] == '\0')
        ps_strlcpy(out->prov.cuda_version, b->prov.cuda_version, sizeof out->prov.cuda_version);
    if (out->prov.nccl_version[0] == '\0')
        ps_strlcpy(out->prov.nccl_version, b->prov.nccl_version, sizeof out->prov.nccl_version);
    /* b's ranks and nodes come after a's, so every row still names its own device. */
    int32_t rank_off = 0, node_off = 0;
    for (size_t i = 0; i < a->n_dev; i++) {
        if (a->dev[i].rank + 1 > rank_off) rank_off = a->dev[i].rank + 1;
        if (a->dev[i].node + 1 > node_off) node_off = a->dev[i].node + 1;
    }
    out->prov.n_nodes = a->prov.n_nodes + b->prov.n_nodes;
    out->prov.n_ranks = a->prov.n_ranks + b->prov.n_ranks;
    ps_status st = PS_OK;
    if ((st = cat((void **)&out->dev, a->dev, a->n_dev, b->dev, b->n_dev, sizeof *a->dev)) != PS_OK ||
        (st = cat((void **)&out->gemm, a->gemm, a->n_gemm, b->gemm, b->n_gemm, sizeof *a->gemm)) != PS_OK ||
        (st = cat((void **)&out->bw, a->bw, a->n_bw, b->bw, b->n_bw, sizeof *a->bw)) != PS_OK ||
        (st = cat((void **)&out->coll, a->coll, a->n_coll, b->coll, b->n_coll, sizeof *a->coll)) != PS_OK ||
        (st = cat((void **)&out->ovl, a->ovl, a->n_ovl, b->ovl, b->n_ovl, sizeof *a->ovl)) != PS_OK ||
        (st = cat((void **)&out->meas, a->meas, a->n_meas, b->meas, b->n_meas, sizeof *a->meas)) != PS_OK ||
        /* One fit per device and coefficient: b's, as if b's refit had run after a's. */
        (st = fit_merge(out, a->fit, a->n_fit, false)) != PS_OK ||
        (st = fit_merge(out, b->fit, b->n_fit, false)) != PS_OK) {
        ps_costdb_free(out);
        return st;
    }
    out->n_dev = a->n_dev + b->n_dev;
    out->n_gemm = a->n_gemm + b->n_gemm;
    out->n_bw = a->n_bw + b->n_bw;
    out->n_coll = a->n_coll + b->n_coll;
    out->n_ovl = a->n_ovl + b->n_ovl;
    out->n_meas = a->n_meas + b->n_meas;
    for (size_t i = a->n_dev; i < out->n_dev; i++) {
        out->dev[i].rank += rank_off;
        out->dev[i].node += node_off;
    }
    for (size_t i = a->n_gemm; i < out->n_gemm; i++) out->gemm[i].rank += rank_off;
    for (size_t i = a->n_bw; i < out->n_bw; i++) out->bw[i].rank += rank_off;
    for (size_t i = a->n_coll; i < out->n_coll; i++) out->coll[i].root_rank += rank_off;
    for (size_t i = a->n_ovl; i < out->n_ovl; i++) out->ovl[i].rank += rank_off;
    return PS_OK;
}

/* The index of old rank r in a's kept ranks, -1 when dropped or not a device row's rank. */
static int32_t map_rank(const int32_t *map, int32_t n, int32_t r) { return r >= 0 && r < n ? map[r] : -1; }

ps_status ps_costdb_without_kinds(const ps_costdb *a, const ps_costdb *b, ps_costdb *out, size_t *n_dropped)
{
    memset(out, 0, sizeof *out);
    *n_dropped = 0;
    ps_strlcpy(out->path, a->path, sizeof out->path);
    out->prov = a->prov;
    int32_t max_rank = -1, max_node = -1;
    for (size_t i = 0; i < a->n_dev; i++) {
        if (a->dev[i].rank > max_rank) max_rank = a->dev[i].rank;
        if (a->dev[i].node > max_node) max_node = a->dev[i].node;
    }
    /* old rank -> new rank, old node -> new node: the kept ones numbered 0.. in their old order, so the rows stay in
     * the order the reader expects and b's ranks and nodes follow right after them in the merge */
    int32_t *rmap = ps_calloc((size_t)max_rank + 2, sizeof *rmap);
    int32_t *nmap = ps_calloc((size_t)max_node + 2, sizeof *nmap);
    bool *keep = ps_calloc(a->n_dev + 1, sizeof *keep);
    ps_status st = PS_OK;
    if (!rmap || !nmap || !keep) st = PS_ERR_SYSTEM;
    for (int32_t r = 0; st == PS_OK && r <= max_rank; r++) rmap[r] = -1;
    for (int32_t k = 0; st == PS_OK && k <= max_node; k++) nmap[k] = -1;
    for (size_t i = 0; st == PS_OK && i < a->n_dev; i++) {
        keep[i] = true;
        for (size_t j = 0; j < b->n_dev && keep[i]; j++) keep[i] = strcmp(a->dev[i].name, b->dev[j].name) != 0;
        if (!keep[i]) (*n_dropped)++;
    }
    if (st == PS_OK) {
        int32_t nr = 0, nn = 0;
        for (int32_t r = 0; r <= max_rank; r++)
            for (size_t i = 0; i < a->n_dev; i++)
                if (keep[i] && a->dev[i].rank == r) rmap[r] = nr++;
        for (int32_t k = 0; k <= max_node; k++)
            for (size_t i = 0; i < a->n_dev; i++)
                if (keep[i] && a->dev[i].node == k && nmap[k] < 0) nmap[k] = nn++;
        /* an allocation of 0 nodes (a file of executed plans only) stays 0; else the kept nodes and ranks */
        if (a->n_dev) {
            out->prov.n_ranks = nr;
            out->prov.n_nodes = nn;
        }
    }
    if (st == PS_OK &&
        (!(out->dev = ps_calloc(a->n_dev + 1, sizeof *out->dev)) ||
         !(out->gemm = ps_calloc(a->n_gemm + 1, sizeof *out->gemm)) ||
         !(out->bw = ps_calloc(a->n_bw + 1, sizeof *out->bw)) ||
         !(out->coll = ps_calloc(a->n_coll + 1, sizeof *out->coll)) ||
         !(out->ovl = ps_calloc(a->n_ovl + 1, sizeof *out->ovl))))
        st = PS_ERR_SYSTEM;
    /* executed plans and fits are records of runs, not of the node rows: they stay (a merge keeps b's fit) */
    if (st == PS_OK) st = cat((void **)&out->meas, a->meas, a->n_meas, NULL, 0, sizeof *a->meas);
    if (st == PS_OK) st = cat((void **)&out->fit, a->fit, a->n_fit, NULL, 0, sizeof *a->fit);
    if (st != PS_OK) {
        free(rmap);
        free(nmap);
        free(keep);
        ps_costdb_free(out);
        return st == PS_ERR_SYSTEM ? PS_FAIL(PS_ERR_SYSTEM, "out of memory replacing node kinds of %s", a->path) : st;
    }
    out->n_meas = a->n_meas;
    out->n_fit = a->n_fit;
    int32_t n_map = max_rank + 1;
    out->prov.hosts[0] = out->prov.devices[0] = '\0';
    for (size_t i = 0; i < a->n_dev; i++)
        if (keep[i]) {
            ps_bench_device d = a->dev[i];
            d.rank = rmap[d.rank];
            d.node = nmap[d.node];
            out->dev[out->n_dev++] = d;
            ps_costdb_list_add(out->prov.hosts, sizeof out->prov.hosts, d.host);
            ps_costdb_list_add(out->prov.devices, sizeof out->prov.devices, d.name);
        }
    /* every table's rows of a dropped rank go with it; a collective goes with the rank that wrote it (its group's
     * lowest rank: groups are measured within one calibration, whose ranks are all of one file) */
#define KEEP_ROWS(tab, n, field)                                                                                       \
    for (size_t i = 0; i < a->n; i++) {                                                                                \
        int32_t r = map_rank(rmap, n_map, a->tab[i].field);                                                            \
        if (r < 0) continue;                                                                                           \
        out->tab[out->n] = a->tab[i];                                                                                  \
        out->tab[out->n++].field = r;                                                                                  \
    }
    KEEP_ROWS(gemm, n_gemm, rank)
    KEEP_ROWS(bw, n_bw, rank)
    KEEP_ROWS(coll, n_coll, root_rank)
    KEEP_ROWS(ovl, n_ovl, rank)
#undef KEEP_ROWS
    free(rmap);
    free(nmap);
    free(keep);
    return PS_OK;
}

/* ---- executed plans ---------------------------------------------------------------------------------------------- */

static ps_status record_locked(const char *path, const ps_bench_measurement *rows, size_t n);

ps_status ps_costdb_add_measurements(const char *path, const ps_bench_measurement *rows, size_t n)
{
    if (n == 0) return PS_OK;
    for (size_t i = 0; i < n; i++) {
        char wb[128];
        const char *why = row_problem(PS_COSTDB_MEASUREMENTS, &rows[i], wb, sizeof wb);
        if (why) return PS_FAIL(PS_ERR_INPUT, "%s: measurement %zu to record: %s", path, i, why);
    }
    /* One writer from the read to the rename: two runs recording at once would each write back the rows they read,
     * and the first one's would be lost. */
    ps_output o;
    PS_TRY(ps_output_resolve(path, &o));
    if (o.kind != PS_OUTPUT_FILE)
        return PS_FAIL(PS_ERR_INPUT, "%s: measurements are recorded into a cost database file: give the path of a "
                                     "regular file, not a device, FIFO or standard output", path);
    ps_lock lock;
    PS_TRY(ps_output_lock(o.path, &lock));
    ps_status st = record_locked(path, rows, n);
    ps_output_unlock(&lock);
    return st;
}

static ps_status record_locked(const char *path, const ps_bench_measurement *rows, size_t n)
{
    ps_costdb db;
    struct stat sb;
    if (stat(path, &sb) == 0) {
        /* Read as any reader would: rows are never appended to a file psearch could not read back. */
        PS_TRY(ps_costdb_read(path, &db));
    } else if (errno == ENOENT) {
        memset(&db, 0, sizeof db);
        /* n_nodes and n_ranks describe the calibrated allocation: none here (0), whatever the plans ran on, or a
         * merge with a calibration would count the exec ranks as calibrated devices */
        ps_costdb_prov_init(&db.prov, rows[0].backend, "exec");
        ps_strlcpy(db.path, path, sizeof db.path);
    } else {
        return PS_FAIL(PS_ERR_INPUT, "%s: cannot open the cost database: %s", path, strerror(errno));
    }
    ps_bench_measurement *all = ps_calloc(db.n_meas + n, sizeof *all);
    if (!all) {
        ps_costdb_free(&db);
        return PS_ERR_SYSTEM;
    }
    if (db.n_meas) memcpy(all, db.meas, db.n_meas * sizeof *all);
    memcpy(all + db.n_meas, rows, n * sizeof *all);
    /* a row without a date ran now: callers need not format one */
    char now[sizeof all->date];
    ps_utc_now_iso(now, sizeof now);
    for (size_t i = db.n_meas; i < db.n_meas + n; i++)
        if (!all[i].date[0]) ps_strlcpy(all[i].date, now, sizeof all[i].date);
    free(db.meas);
    db.meas = all;
    db.n_meas += n;
    /* The whole file again, through a temporary and a rename: an interrupted append leaves the old file. */
    ps_status st = write_db(path, &db, false);
    ps_costdb_free(&db);
    PS_TRY(st);
    return PS_OK;
}

/* costdb/: the HDF5 cost database (docs/costdb.md): one file per calibrated allocation, written collectively by
 * `psearch calibrate` (parallel HDF5, each rank its own rows), read and validated here, merged across node kinds, and
 * turned into the measured tables the cost model reads (ps_costdb_model, cost/ps_cost.h; ps_cost_params.db).
 * `psearch exec --record` appends the plans it ran (/measurements); `psearch calibrate --from-measurements` refits
 * compute_scale and comm_scale from them (/fit), which --costdb then applies. */
#ifndef PS_COSTDB_H
#define PS_COSTDB_H

#include <stddef.h>

#include <mpi.h>

#include "ps_calib.h"
#include "ps_common.h"
#include "ps_cost.h"
#include "ps_hw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a table or attribute changes meaning; a reader refuses files with a larger number. 2: /measurements has
 * the columns of ps_bench_measurement, and /fit exists. 3: /gemm may hold rows of the fused attention kernel (op
 * attn_fwd / attn_bwd), which are not GEMMs: an older reader would mix them into its GEMM curves, so it must refuse
 * the file. Version 1 files are still read: their /measurements was always empty (nothing wrote it) and is skipped,
 * and they have no /fit; version 2 files have no attention rows. A writer always writes the current version. */
#define PS_COSTDB_SCHEMA_VERSION 3

/* One refitted cost-model coefficient (/fit, `psearch calibrate --from-measurements`): for the ranks of one device
 * key, the median over the executed plans of measured / predicted (the prediction with the scale it ran with divided
 * out). Errors are medians over the device's rows of |predicted - measured| / measured [1]. */
typedef struct ps_costdb_fit {
    char device[32];      /* device key of the measurement rows (ps_bench_measurement.device) */
    char coefficient[32]; /* "compute_scale" or "comm_scale" */
    double value;         /* in the coefficient's --cost-param range (ps_cost_param_range) [1] */
    int32_t n;            /* measurement rows used (their predicted and measured part both > 0) */
    double err_before;    /* of the part the coefficient scales (computation or communication), as predicted [1] */
    double err_after;     /* the same with `value` in place of the coefficient the rows ran with [1] */
    int32_t iter_n;       /* rows of the device with a measured iteration time > 0 */
    double iter_err_before; /* of the iteration time, as predicted [1] */
    double iter_err_after;  /* of the iteration time with both coefficients of the device refitted, approximated by
                               scaling predicted_s with the plan's computation and communication shares
                               (docs/costdb.md) [1] */
    char date[32];        /* ISO 8601 UTC */
} ps_costdb_fit;

/* Root attributes: where and how the numbers were measured. */
typedef struct {
    int32_t schema_version;
    int32_t n_nodes, n_ranks;
    char psearch_version[32];
    char created[32];         /* ISO 8601 UTC */
    char hosts[512];          /* distinct host names, comma-separated */
    char devices[256];        /* distinct device keys */
    char mpi_version[256];    /* MPI_Get_library_version, first line */
    char hdf5_version[32];
    char cuda_version[64];    /* empty when psearch was built without CUDA */
    char nccl_version[32];    /* the NCCL that measured the collectives; empty when MPI did */
    char backend[16];         /* "cpu" or "cuda" */
    char mode[16];            /* "quick" or "full" */
    char merged_from[512];    /* `costdb merge`: the input files; empty otherwise */
} ps_costdb_prov;

typedef struct {
    char path[512];
    ps_costdb_prov prov;
    ps_bench_device *dev;
    size_t n_dev;
    ps_bench_gemm *gemm;
    size_t n_gemm;
    ps_bench_bw *bw;
    size_t n_bw;
    ps_bench_coll *coll;
    size_t n_coll;
    ps_bench_overlap *ovl;
    size_t n_ovl;
    ps_bench_measurement *meas;
    size_t n_meas;
    ps_costdb_fit *fit;
    size_t n_fit;
} ps_costdb;

typedef enum {
    PS_COSTDB_DEVICES = 0,
    PS_COSTDB_GEMM,
    PS_COSTDB_BANDWIDTH,
    PS_COSTDB_COLLECTIVES,
    PS_COSTDB_OVERLAP,
    PS_COSTDB_MEASUREMENTS,
    PS_COSTDB_FIT,
    PS_COSTDB_N_TABLES
} ps_costdb_table;

/* "/gemm" etc.: the group of a table (its rows are the dataset "<group>/table"). */
const char *ps_costdb_table_group(ps_costdb_table t);

/* ---- writing: a temporary file beside `path`, renamed over it by ps_costdb_commit ----
 * comm != MPI_COMM_NULL: parallel HDF5 over comm, every call collective, each rank passing its own rows;
 * MPI_COMM_NULL: serial HDF5 in this process (merge, tests). */
typedef struct ps_costdb_writer ps_costdb_writer;
ps_status ps_costdb_create(const char *path, MPI_Comm comm, const ps_costdb_prov *prov, ps_costdb_writer **w);
ps_status ps_costdb_write_rows(ps_costdb_writer *w, ps_costdb_table t, const void *rows, size_t n);
/* Close, then (lowest rank) rename the temporary over `path`; frees w. On failure the temporary is removed. */
ps_status ps_costdb_commit(ps_costdb_writer *w);
/* Close and remove the temporary; `path` keeps its previous content. Frees w. */
void ps_costdb_abort(ps_costdb_writer *w);
const char *ps_costdb_temp_path(const ps_costdb_writer *w);
/* A whole database in one call (serial): create, every table, commit. */
ps_status ps_costdb_write(const char *path, const ps_costdb *db);
/* The provenance of this process: versions, date, host (n_nodes, n_ranks, hosts, devices left to the caller). */
void ps_costdb_prov_init(ps_costdb_prov *p, const char *backend, const char *mode);
/* Appends to the comma-separated list dst (hosts, devices) each comma-separated entry of `add` it lacks. */
void ps_costdb_list_add(char *dst, size_t cap, const char *add);
/* The libraries this process runs with, as the provenance and `psearch --version` state them. Callable before
 * MPI_Init (MPI_Get_library_version is). */
typedef struct {
    char mpi[256];  /* MPI_Get_library_version, first line */
    char hdf5[32];  /* H5get_libversion: "1.10.8" */
    char cuda[64];  /* "runtime 12.4, driver 12.4", or "..., driver none (no GPU)"; "" when built without CUDA */
    char nccl[32];  /* ncclGetVersion: "2.21.5"; "" when built without NCCL */
} ps_costdb_versions;
void ps_costdb_versions_get(ps_costdb_versions *v);

/* ---- reading: anything but a valid file -> PS_ERR_INPUT naming the file and what is wrong ----
 * A file may have no /devices rows when it holds executed plans or fits (what ps_costdb_add_measurements creates);
 * one with neither is refused. */
ps_status ps_costdb_read(const char *path, ps_costdb *db);
void ps_costdb_free(ps_costdb *db);
/* a's rows then b's, b's ranks and nodes renumbered after a's; /fit: b's rows replace a's of the same device and
 * coefficient. Files of any readable schema merge (they are read into the current one). */
ps_status ps_costdb_merge(const ps_costdb *a, const ps_costdb *b, ps_costdb *out);
/* `costdb merge --replace`: a copy of a without the node kinds (device keys) b measured: their /devices rows and
 * every GEMM, bandwidth, collective and overlap row of their ranks; the kept ranks and nodes renumbered from 0 in
 * their order, hosts, devices, n_ranks and n_nodes recounted. Executed plans and fits stay (records of runs: the merge
 * then keeps b's fit per device and coefficient). *n_dropped: the device rows removed. Merging the result with b
 * replaces yesterday's calibration of a node kind with tonight's instead of adding its ranks a second time. */
ps_status ps_costdb_without_kinds(const ps_costdb *a, const ps_costdb *b, ps_costdb *out, size_t *n_dropped);

/* ---- executed plans and the fit (serial, no MPI) ---- */
/* Append n rows to the database at `path` (`psearch exec --record`): read it (ps_costdb_read), append, write it all
 * again through a temporary and a rename (ps_costdb_write), so a failure leaves the previous file as it was. A
 * missing file is created holding only the measurements, with the provenance of this process (backend of rows[0],
 * mode "exec", n_nodes = n_ranks = 0 as no allocation was calibrated, no hosts nor devices). A row whose date is
 * empty is stamped with the current time (ps_utc_now_iso). Rows are checked as a reader checks them (PS_ERR_INPUT
 * naming the path and the row). Two processes appending to one file at once: the last rename wins. n == 0 changes
 * nothing. */
ps_status ps_costdb_add_measurements(const char *path, const ps_bench_measurement *rows, size_t n);
/* The fit of db's measurement rows, one row per device key and coefficient that has a usable row, in the order the
 * devices first appear (docs/costdb.md): compute_scale = median of measured_compute_s / (predicted_compute_s /
 * compute_scale), comm_scale likewise, each clamped to its --cost-param range (ps_cost_param_range); rows whose
 * predicted or measured part is 0 are skipped for that coefficient. PS_ERR_INPUT naming db->path when it holds no
 * measurement, or a device none of whose rows can be used. *rows is malloc'ed (free it); date is now. Pure: no I/O. */
ps_status ps_costdb_refit(const ps_costdb *db, ps_costdb_fit **rows, size_t *n);
/* db->fit with every row of the devices in `fit` replaced by those rows (a refit replaces the earlier fit of the
 * devices it saw and keeps the others). */
ps_status ps_costdb_fit_replace(ps_costdb *db, const ps_costdb_fit *fit, size_t n);

/* ---- the measured tables the cost model reads (ps_costdb_model, cost/ps_cost.h; built in costdb/db_model.c) ---- */
/* The tables of every device kind of /devices, and a copy of /fit (a file of only measurements and fits builds a model
 * of no device kind). */
ps_status ps_costdb_model_build(const ps_costdb *db, ps_costdb_model **out);
void ps_costdb_model_free(ps_costdb_model *m);

/* Use the model for cluster c: refuses (PS_ERR_INPUT) a cluster none of whose node groups has a device the file
 * measured nor a /fit row for its GPU; otherwise sets p->db, the measured overlap slowdown, and p->compute_scale /
 * p->comm_scale from the /fit rows of the first node group whose GPU has some (the whole plan runs with one of each;
 * the note names the device used and says when other kinds' fits were ignored). Groups of other devices keep the
 * analytic model. Then the n_overrides assignments ("name=value", ps_cost_params_set: --cost-param) are set again,
 * last: a constant the user set by name wins over the file's. On any failure *p is left as it was. The model keeps a
 * line saying which groups use the file: ps_costdb_model_note. */
ps_status ps_costdb_attach(ps_costdb_model *m, const ps_cluster *c, const char *const *overrides, int n_overrides,
                           ps_cost_params *p);
/* The calibrated allocation as a cluster (`--cluster costdb`): one node group per device kind, its ranks as the
 * devices, measured peak, memory, bandwidth and links. PS_ERR_INPUT for a file without /devices rows (executed
 * plans and fits only). */
ps_status ps_costdb_cluster(const ps_costdb *db, ps_cluster *out);

#ifdef __cplusplus
}
#endif
#endif

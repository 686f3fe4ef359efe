/* The HDF5 cost database (docs/costdb.md): one file per calibrated allocation, written collectively by `psearch
 * calibrate` (parallel HDF5, each rank its own rows), read and validated here, merged across node kinds, and turned
 * into the interpolation tables the cost model consumes (ps_cost_params.db). */
#ifndef PS_COSTDB_H
#define PS_COSTDB_H

#include <stddef.h>

#include <mpi.h>

#include "ps_bench.h"
#include "ps_common.h"
#include "ps_cost.h"
#include "ps_hw.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a table or attribute changes meaning; a reader refuses files with a larger number. */
#define PS_COSTDB_SCHEMA_VERSION 1

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
    char nccl_version[32];    /* the NCCL that measured the collectives; empty when MPI did (today always) */
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
} ps_costdb;

typedef enum {
    PS_COSTDB_DEVICES = 0,
    PS_COSTDB_GEMM,
    PS_COSTDB_BANDWIDTH,
    PS_COSTDB_COLLECTIVES,
    PS_COSTDB_OVERLAP,
    PS_COSTDB_MEASUREMENTS,
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

/* ---- reading: anything but a valid file -> PS_ERR_INPUT naming the file and what is wrong ---- */
ps_status ps_costdb_read(const char *path, ps_costdb *db);
void ps_costdb_free(ps_costdb *db);
/* a's rows then b's, b's ranks and nodes renumbered after a's; PS_ERR_INPUT when the schemas differ. */
ps_status ps_costdb_merge(const ps_costdb *a, const ps_costdb *b, ps_costdb *out);

/* ---- the tables the cost model interpolates (costdb/db_model.c) ---- */
typedef struct ps_costdb_model ps_costdb_model;
ps_status ps_costdb_model_build(const ps_costdb *db, ps_costdb_model **out);
void ps_costdb_model_free(ps_costdb_model *m);
int ps_costdb_model_n_devices(const ps_costdb_model *m);
const char *ps_costdb_model_device_name(const ps_costdb_model *m, int dev);
/* Index of the device kind whose key is `gpu_name`, or -1. */
int ps_costdb_model_device(const ps_costdb_model *m, const char *gpu_name);
/* Achieved GEMM rate [FLOP/s] at `flops` per call, log-log interpolated over the device's table for the dtype
 * ("fp32", "bf16", ...); -1 when the file has no GEMM of that dtype for the device. */
double ps_costdb_model_gemm_rate(const ps_costdb_model *m, int dev, const char *dtype, double flops);
/* Time [s] of a collective ("allreduce", "allgather", "reducescatter", "alltoall", "sendrecv") of `bytes` over n
 * devices, inside one node or across nodes; -1 when the file has no such measurement (a GPU kind never has one). */
double ps_costdb_model_coll_time(const ps_costdb_model *m, int dev, const char *op, int64_t n, bool inter,
                                 double bytes);
/* Measured memory bandwidth [bytes/s], overlap slowdown [1]; -1 when absent (a GPU kind's overlap always is). */
double ps_costdb_model_mem_Bps(const ps_costdb_model *m, int dev);
double ps_costdb_model_overlap(const ps_costdb_model *m, int dev);
const char *ps_costdb_model_path(const ps_costdb_model *m);

/* Use the model for cluster c: refuses (PS_ERR_INPUT) a cluster none of whose node groups has a device the file
 * measured; otherwise sets p->db and the measured overlap slowdown. Groups of other devices keep the analytic
 * model. The model keeps a line saying which groups use the file: ps_costdb_model_note. */
ps_status ps_costdb_attach(ps_costdb_model *m, const ps_cluster *c, ps_cost_params *p);
/* "measured tables for node group(s): ..." from the last successful ps_costdb_attach; "" before one. */
const char *ps_costdb_model_note(const ps_costdb_model *m);
/* The calibrated allocation as a cluster (`--cluster costdb`): one node group per device kind, its ranks as the
 * devices, measured peak, memory, bandwidth and links. */
ps_status ps_costdb_cluster(const ps_costdb *db, ps_cluster *out);

#ifdef __cplusplus
}
#endif
#endif

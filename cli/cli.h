/* psearch command line: options shared by every subcommand, and the subcommand entry points. */
#ifndef PS_CLI_H
#define PS_CLI_H

#include <jansson.h>
#include <mpi.h>

#include "ps_common.h"
#include "ps_hw.h"
#include "ps_models.h"

#define PS_DEFAULT_MODEL "gpt3-65b"
/* Galvatron-BMW Table VI's setting: 4 DGX A100 80 GB nodes, 32 GPUs. */
#define PS_DEFAULT_CLUSTER "dgx-a100-80g:4"

typedef enum { PS_FMT_TABLE = 0, PS_FMT_JSON } ps_format;

typedef struct {
    const char *cmd;      /* "plan" (default), "model", "cluster", "estimate", "schedule", "sweep" */
    const char *sub;      /* model/cluster: "list" or "show" */
    const char *model;    /* --model or positional of `model show` */
    const char *cluster;  /* --cluster or positional of `cluster show` */
    ps_model_opts mopts;  /* --seq, --vocab-pad, --dtype */
    ps_format format;
    const char *out;      /* --out FILE: write the output there (atomically) instead of stdout */
    const char *data_dir; /* --data-dir */
    int verbose;
    int help;
    int version;
    /* estimate: the plan given by flags (0 = default) or by --plan */
    const char *plan;
    int64_t tp, pp, dp, mbs, gbs, vpp;
    int zero;             /* -1 = default (0) */
    const char *recompute;
    int seq_parallel;
    const char *tp_overlap; /* --tp-overlap: estimate none|cross-pass|oases; plan and sweep auto|none (NULL: default) */
    const char *schedule;
    const char *cost_params[16];
    int n_cost_params;
    /* search */
    const char *gbs_range;
    int top;
    int64_t mbs_max;
    int64_t max_tp;
    const char *schedules;
    int objective;  /* --objective: PS_SEARCH_THROUGHPUT (0, the default) or PS_SEARCH_MEMORY */
    int distribute; /* --distribute: a ps_dist (mpi/ps_mpi_search.h), PS_DIST_DYNAMIC (0) by default */
    const char *export_kind; /* --export megatron|deepspeed */
    /* schedule */
    const char *sched_kind;
    int64_t stages, micro;
    const char *fbw, *times, *svg;
    int passes;
    /* cost database (docs/costdb.md) */
    const char *costdb;   /* --costdb FILE: measured tables for the search and estimate */
    int quick;            /* calibrate --quick */
    int reps;             /* calibrate --reps N (0 = the mode's default) */
    const char *db_out;   /* calibrate / costdb merge: the database written (their --out) */
    const char *db_args[2]; /* costdb show FILE / costdb merge A B */
    int n_db_args;
    /* sweep */
    const char *models;    /* --models LIST */
    const char *clusters;  /* --clusters LIST */
    const char *sweep_dir; /* --out DIR of `sweep` (o->out stays NULL: the summary goes to stdout) */
    int resume;
    /* exec (docs/exec.md): psearch exec PLAN, and psearch --exec-top K after a search */
    const char *exec_plan; /* the plan file (positional) */
    int exec_top;          /* --exec-top K: execute the K best plans of the search and re-rank them */
    int iters;             /* --iters N (0 = default) */
    int warmup;            /* --warmup W (-1 = default; 0 is a valid choice) */
    int64_t scale;         /* --scale F: every width and token count divided by F (0 = default) */
    const char *backend;   /* --backend auto|cpu|cuda (NULL = auto) */
    const char *record;    /* --record DB.h5: append the measurements to this cost database */
    double watchdog;       /* --watchdog S: a wait longer than this fails the run naming the pass (0 = default) */
    /* calibrate --from-measurements DB.h5: refit compute_scale / comm_scale from the executed plans in DB */
    const char *from_meas;
} ps_cli_opts;

/* Parse argv. On bad usage returns PS_ERR_INPUT with the message set. */
ps_status ps_cli_parse(int argc, char **argv, ps_cli_opts *o);
void ps_cli_usage(FILE *f, const char *cmd);
/* True when the command needs MPI (searching, describing the allocation). */
int ps_cli_needs_mpi(const ps_cli_opts *o);

/* Output sink: text or JSON collected in memory, then written atomically to --out or stdout by rank 0. */
typedef struct {
    char *buf;
    size_t len;
    FILE *f;
} ps_out;
ps_status ps_out_open(ps_out *o);
ps_status ps_out_commit(ps_out *o, const char *path);
void ps_out_discard(ps_out *o);
/* Print one JSON document (indented, keys in order) and release it; NULL means an allocation failed. */
ps_status ps_out_json(ps_out *o, json_t *j);

ps_status ps_cmd_model(const ps_cli_opts *o, ps_out *out);
ps_status ps_cmd_cluster(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_plan(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_estimate(const ps_cli_opts *o, ps_out *out);
ps_status ps_cmd_schedule(const ps_cli_opts *o, ps_out *out);
ps_status ps_cmd_sweep(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
void ps_cmd_version(FILE *f);
ps_status ps_cmd_calibrate(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_costdb(const ps_cli_opts *o, ps_out *out);
ps_status ps_cmd_exec(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);

#include "ps_search.h"
/* cli/inputs.c: inputs read the same way by every planning command. With a communicator the two loaders below are
 * collective: rank 0 finds and reads the model or cluster file and every rank parses those bytes (one file, one
 * reading, whatever each node's file system shows); MPI_COMM_NULL reads on this process alone.
 * The cluster SPEC (PRESET:NODES, cluster.json, auto, or costdb: the machine --costdb measured); need_gpus refuses
 * one without GPUs (planning) rather than describing it (cluster show). */
ps_status ps_cli_load_cluster(const ps_cli_opts *o, const char *spec, MPI_Comm comm, bool need_gpus, ps_cluster *c);
/* The model SPEC for cluster c: the vocabulary padded to 128 x GPUs per node when pad_for_node and --vocab-pad is not
 * given (the search may put TP across a node), and, without --dtype, fp16 (or fp32) where c lacks the model's dtype,
 * said once on stderr by rank 0 of comm. */
ps_status ps_cli_load_model(const ps_cli_opts *o, const char *spec, const ps_cluster *c, bool pad_for_node,
                            MPI_Comm comm, ps_model *m);
/* For a command that plans one model for several clusters (the sweep): the model file read once, by rank 0 for
 * every rank, and those bytes parsed for each cluster (the vocabulary padding and the dtype depend on it), so that no
 * edit of the file between two clusters gives them two different models. ps_cli_load_model is the three in one. */
/* A model file as rank 0 of the communicator found and read it. */
typedef struct {
    ps_model_source src;
    char *text; /* its bytes, NUL-terminated */
    size_t len;
} ps_cli_model_file;

/* Find the model SPEC names and read its file on rank 0; every rank of comm gets rank 0's answer and bytes, or fails
 * with rank 0's status (collective; MPI_COMM_NULL: this process finds and reads). On failure f holds nothing. */
ps_status ps_cli_model_file_read(const char *spec, MPI_Comm comm, ps_cli_model_file *f);
/* ps_cli_load_model from f instead of SPEC: the model for cluster c, from the bytes every rank holds. Collective. */
ps_status ps_cli_model_from_file(const ps_cli_opts *o, const ps_cli_model_file *f, const ps_cluster *c,
                                 bool pad_for_node, MPI_Comm comm, ps_model *m);
void ps_cli_model_file_free(ps_cli_model_file *f);

/* --model and --cluster for the search: the two above. (The cost model follows: ps_cli_cost_model.) */
ps_status ps_cli_load_inputs(const ps_cli_opts *o, MPI_Comm comm, ps_model *m, ps_cluster *c);
/* The search options of o for cluster c (--gbs [8 x GPUs], --gbs-range, --top, --mbs-max, --max-tp, --schedules
 * checked against the schedule kinds, --objective). so.schedules points into the struct: do not copy it apart. */
typedef struct {
    ps_search_opts so;
    const char *kinds[32];
    char kbuf[512];
} ps_cli_search_opts;
ps_status ps_cli_search_setup(const ps_cli_opts *o, const ps_cluster *c, ps_cli_search_opts *s);
/* Search m on c with the resolved search options so on every rank of comm, shared out as dist says (MPI is running:
 * plan and sweep need it). On rank 0, *all holds the merged, re-costed top k in the search's total order (n_top 0:
 * nothing fits, all->binding says why) and the baselines; on other ranks it is empty. Collective over comm. */
ps_status ps_cli_search(MPI_Comm comm, const ps_search_opts *so, int dist, const ps_cost_params *cp,
                        const ps_model *m, const ps_cluster *c, ps_search_result *all, double *seconds);

/* cli/cmd_exec.c: one plan executed on every rank of comm (jobs/), shared by `psearch exec` and --exec-top: the
 * backend (auto: cuda where every rank sees a GPU; a GPU plan without GPUs is refused unless --backend cpu), the
 * shape scale (--scale; cpu backend on a GPU cluster: 16), the scaled model run and predicted, and the measurement
 * row --record appends. Collective over comm. */
#include "ps_bench.h"
#include "ps_jobs.h"
typedef struct {
    const char *backend;
    int64_t scale;
    int warmup;
    bool comparable;          /* the prediction is of the devices that ran it (GPU plan on GPUs, CPU plan on CPUs) */
    ps_model model;           /* the model as executed (scaled) */
    ps_exec_result r;
    ps_bench_measurement row; /* what --record appends */
} ps_cli_exec_run;
ps_status ps_cli_exec(const ps_cli_opts *o, MPI_Comm comm, const ps_model *m, const ps_cluster *c,
                      const ps_cost_params *cp, const ps_plan *plan, ps_cli_exec_run *run);
void ps_cli_exec_run_free(ps_cli_exec_run *run);
json_t *ps_cli_exec_json(const ps_cli_exec_run *run);
/* 100 (measured - predicted) / predicted; 0 without a prediction. */
double ps_cli_err_pct(double measured, double predicted);
void ps_cli_exec_table(FILE *f, const ps_cli_exec_run *run, const ps_cluster *c);

/* JSON and table renderings shared by several commands. */
#include "ps_cost.h"
#include "ps_costdb.h"
/* --cluster costdb: the allocation --costdb FILE measured. */
ps_status ps_cli_costdb_cluster(const ps_cli_opts *o, ps_cluster *c);
/* --costdb FILE: read it, refuse it for a cluster of other devices, put its tables into cp (the --cost-param values
 * still win). *db is NULL without --costdb; free it with ps_costdb_model_free after the last use of cp. */
ps_status ps_cli_costdb_attach(const ps_cli_opts *o, const ps_cluster *c, ps_cost_params *cp, ps_costdb_model **db);
/* A command's cost model, in one order for all: the documented defaults, --cost-param, --costdb's tables and fit for
 * cluster c (ps_cli_costdb_attach), and --cost-param again over what the file set. Every rank reads the database
 * itself; the outcome is agreed over comm (MPI_COMM_NULL: this process alone). */
ps_status ps_cli_cost_model(const ps_cli_opts *o, MPI_Comm comm, const ps_cluster *c, ps_cost_params *cp,
                           ps_costdb_model **db);
/* "# cost database FILE: ..." for the table outputs; nothing without a database. */
void ps_cli_costdb_note(FILE *f, const ps_cost_params *cp, const ps_cluster *c);
/* The summary `costdb show` prints (provenance, devices, rows, headline numbers). */
ps_status ps_cli_costdb_show(const ps_costdb *db, ps_format fmt, ps_out *out);
/* One /fit row as `costdb show` and `calibrate --from-measurements` print it in JSON: its columns, the iteration
 * errors null when no plan of the device measured an iteration (iter_n 0). NULL when out of memory. */
json_t *ps_cli_fit_json(const ps_costdb_fit *f);
json_t *ps_prediction_json(const ps_model *m, const ps_cluster *c, const ps_plan *plan, const ps_prediction *r,
                           const ps_cost_params *cp);
void ps_prediction_table(FILE *f, const ps_model *m, const ps_cluster *c, const ps_plan *plan,
                         const ps_prediction *r);
/* The plan as Megatron-LM arguments (text) or a DeepSpeed config (JSON); unknown kind -> PS_ERR_INPUT. */
ps_status ps_plan_export(ps_out *out, const char *kind, const ps_model *m, const ps_plan *p);
/* The plan's pipeline timeline as an SVG document (malloc'd), from the per-stage times of its prediction. */
ps_status ps_plan_svg(const ps_plan *p, const ps_prediction *r, char **svg, size_t *len);
json_t *ps_model_to_json(const ps_model *m);
json_t *ps_cluster_to_json(const ps_cluster *c);
void ps_model_print(FILE *f, const ps_model *m);
void ps_cluster_print(FILE *f, const ps_cluster *c);

#endif

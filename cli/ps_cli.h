/* The psearch command line as a library (ps_cli): the parsed options, the parser, the help, the command table's run,
 * and the output sink the commands write to. cli/main.c is the process around it (MPI, agreement, exit code). */
#ifndef PS_CLI_H
#define PS_CLI_H

#include <stdio.h>

#include <mpi.h>

#include "ps_common.h"
#include "ps_models.h"

#define PS_DEFAULT_MODEL "gpt3-65b"
/* Galvatron-BMW Table VI's setting: 4 DGX A100 80 GB nodes, 32 GPUs. */
#define PS_DEFAULT_CLUSTER "dgx-a100-80g:4"

typedef enum { PS_FMT_TABLE = 0, PS_FMT_JSON } ps_format;

/* What the command line says. Each option's field is named by its row of the option table (cli/options.c), which
 * also holds its parsing, the commands it applies to and its help. */
typedef struct {
    const char *cmd;      /* a command of the command table (cli/commands.c): "plan" (no command word), "model", ... */
    const char *sub;      /* model/cluster: "list" or "show"; costdb: "show" or "merge" */
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
    int64_t cp;            /* --cp: context-parallel degree (0 = not given: 1 for estimate, searched for the search) */
    const char *cp_comm;   /* --cp-comm ring|a2a (NULL: not given: ring for estimate, searched for the search) */
    int64_t ep;            /* --ep: expert-parallel degree of MoE layers (0 = not given: 1 for estimate, searched) */
    int64_t etp;           /* --etp: expert tensor-parallel degree (0 = not given: tp for estimate, searched) */
    int zero;             /* -1 = default (0) */
    const char *recompute;
    int seq_parallel;
    const char *tp_overlap; /* --tp-overlap: estimate none|cross-pass|oases; plan and sweep auto|none (NULL: default) */
    int dp_overlap;         /* --dp-overlap on|off: 1, 0; -1 = not given (on) */
    const char *attention;  /* --attention: auto|fused|unfused, plan and sweep also search (NULL: auto) */
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
    int distribute; /* --distribute: a ps_dist (mpi/ps_mpi.h), PS_DIST_DYNAMIC (0) by default */
    const char *export_kind; /* --export megatron|deepspeed */
    int framework;           /* --framework: a ps_framework (search/ps_search.h); -1: not given (--export's, or any) */
    /* The search also takes tp, pp, mbs, zero, recompute, schedule and micro (below): each fixes that field of every
     * plan it returns (ps_search_fixed) */
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
    int db_replace;       /* costdb merge --replace: B's node kinds replace A's rows of the same device keys */
    /* sweep */
    const char *models;    /* --models LIST */
    const char *clusters;  /* --clusters LIST */
    const char *sweep_dir; /* --out DIR of `sweep` (o->out stays NULL: the summary goes to stdout) */
    int resume;
    const char *sweep_compare;   /* --compare PREV_DIR: the earlier sweep the tables say what changed since */
    const char *sweep_history;   /* --history DIR: earlier nights' sweep folders (the trend; the default PREV_DIR) */
    int sweep_nights;            /* --nights N: the nights a trend shows, tonight included (0 = default) */
    const char *change_threshold; /* --change-threshold PCT, as given (sweep_finish parses it) */
    double sweep_threshold_pct;   /* ... parsed, or the default */
    int group_ranks;       /* --group-ranks N: ranks per group of cells (0 = automatic) */
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

/* Parse argv. On bad usage returns PS_ERR_INPUT with the message set. The strings of o point into argv. */
ps_status ps_cli_parse(int argc, char **argv, ps_cli_opts *o);
/* The help of command cmd (`psearch CMD --help`); "plan" or an unknown name: `psearch --help`. */
void ps_cli_usage(FILE *f, const char *cmd);
/* True when the command needs MPI (searching, describing the allocation). */
int ps_cli_needs_mpi(const ps_cli_opts *o);
/* `psearch --version`: psearch and the versions of the libraries it was built with. */
void ps_cmd_version(FILE *f);

/* Output sink: text or JSON collected in memory, then written atomically to --out or stdout by rank 0. */
typedef struct {
    char *buf;
    size_t len;
    FILE *f;
} ps_out;
ps_status ps_out_open(ps_out *o);
ps_status ps_out_commit(ps_out *o, const char *path);
void ps_out_discard(ps_out *o);

/* Run the parsed command on comm (MPI_COMM_NULL when ps_cli_needs_mpi is false), its output into out. Collective
 * over comm for the commands that need MPI; each rank returns its own status (main agrees on them). */
ps_status ps_cli_run(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);

#endif

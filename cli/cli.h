/* The inside of the ps_cli library (cli/ps_cli.h is its public face): the command and option tables, the commands,
 * and the helpers the commands share. Tests of single commands' pieces include it too. */
#ifndef PS_CLI_INTERNAL_H
#define PS_CLI_INTERNAL_H

#include <jansson.h>
#include <mpi.h>

#include "ps_cli.h"
#include "ps_common.h"
#include "ps_hw.h"
#include "ps_models.h"

/* Print one JSON document (indented, keys in order) and release it; NULL means an allocation failed. */
ps_status ps_out_json(ps_out *o, json_t *j);

/* One row of the command table (cli/commands.c): everything the parser, the help, main's MPI start and the
 * dispatch need to know of a command. */
typedef struct ps_cli_command {
    const char *name;
    /* The command the parser takes without a command word (the search); its name is no command word. */
    bool implicit;
    /* The words after the command word (subcommand, file names), from argv[2] on; *first is set to the index of the
     * first word getopt_long is to see. NULL: none. */
    ps_status (*words)(int argc, char **argv, ps_cli_opts *o, int *first);
    /* Checks and rewrites once every option is read (a subcommand required, --out redirected, ...); NULL: none. */
    ps_status (*finish)(ps_cli_opts *o);
    /* exec: --model and --cluster default to the plan file's own, not to PS_DEFAULT_MODEL / PS_DEFAULT_CLUSTER. */
    bool inputs_from_plan;
    /* Whether the run needs MPI started; NULL: never. */
    bool (*needs_mpi)(const ps_cli_opts *o);
    ps_status (*run)(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
    /* Help: the command's line in `psearch --help` (what follows "psearch ", and what it does), the text of
     * `psearch CMD --help` before and after its list of options (the option rows that name this command in their
     * help), the column that list's texts start at, and whether it shows short options ("-m, "). */
    const char *synopsis, *summary;
    const char *usage, *usage_end;
    int help_col;
    bool short_col;
} ps_cli_command;

/* The command named name (the implicit one for "plan"), or NULL. */
const ps_cli_command *ps_cli_command_find(const char *name);
/* The rows, in the order `psearch --help` lists them; ps_cli_commands()[i] for i < *n. */
const ps_cli_command *ps_cli_commands(int *n);
/* `psearch CMD --help`'s list of options (cli/options.c). */
void ps_cli_options_help(FILE *f, const ps_cli_command *cmd);
/* The option table's own rules (tests/cli/test_cli_tables.c): names and letters unique, a parser exactly for OPT_FN,
 * a value name exactly for options with a value, scopes naming commands of the table, help lines only for commands
 * that list options and that the option applies to. PS_ERR_INPUT naming the first row that breaks one. */
ps_status ps_cli_options_check(void);

ps_status ps_cmd_model(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_cluster(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_plan(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_estimate(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_schedule(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_sweep(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_calibrate(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
ps_status ps_cmd_costdb(const ps_cli_opts *o, MPI_Comm comm, ps_out *out);
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
/* The vocabulary padding a planning command uses: --vocab-pad when given, else Megatron-LM's, a multiple of 128 x tp
 * (its --make-vocab-size-divisible-by default). The search passes the GPUs per node as tp, estimate the plan's TP;
 * both hand the unit they padded with to ps_plan_export, whose --make-vocab-size-divisible-by reproduces it. */
#define PS_VOCAB_DIVISIBLE_BY 128
int64_t ps_cli_vocab_pad(const ps_cli_opts *o, int64_t tp);
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
/* The search's restriction (so->framework) against model m on cluster c before searching (ps_search_model_check): a
 * model the framework does not build, a dtype it does not train in: PS_ERR_INPUT naming --framework or --export. */
ps_status ps_cli_search_model_check(const ps_cli_opts *o, const ps_search_opts *so, const ps_model *m,
                                    const ps_cluster *c) PS_NODISCARD;
/* Search m on c with the resolved search options so on every rank of comm, shared out as dist says (MPI is running:
 * plan and sweep need it). On rank 0, *all holds the merged, re-costed top k in the search's total order (n_top 0:
 * nothing fits, all->binding says why) and the baselines; on other ranks it is empty. Collective over comm. poll:
 * NULL, or called before each work unit this rank takes (ps_mpi_poll in mpi/ps_mpi.h: the sweep's rank 0). */
struct ps_mpi_poll;
ps_status ps_cli_search(MPI_Comm comm, const ps_search_opts *so, int dist, const struct ps_mpi_poll *poll,
                        const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, ps_search_result *all,
                        double *seconds);

/* cli/cmd_exec.c: one plan executed on every rank of comm (jobs/), shared by `psearch exec` and --exec-top: the
 * backend (auto: cuda where every rank sees a GPU; a GPU plan without GPUs is refused unless --backend cpu), the
 * shape scale (--scale; cpu backend on a GPU cluster: 16), the scaled model run and predicted, and the measurement
 * row --record appends. Collective over comm. */
#include "ps_calib.h"
#include "ps_jobs.h"
typedef struct {
    const char *backend;
    int64_t scale;
    int warmup;
    bool comparable;          /* the prediction is of the devices that ran it (GPU plan on GPUs, CPU plan on CPUs) */
    ps_model model;           /* the model as executed (scaled) */
    ps_exec_result r;
    ps_bench_measurement row; /* what --record appends */
    int64_t fused_layers;     /* layers the plan gave fused attention: run and predicted unfused on a backend without
                                 a fused attention kernel (cuda for now; docs/exec.md), 0 on cpu */
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
void ps_prediction_table(FILE *f, const ps_model *m, const ps_cluster *c, const ps_plan *plan,
                         const ps_prediction *r);
/* Whether plan runs one strategy on every transformer layer but for recomputation, and the same on the other layers
 * without recomputation (a framework's plan: search/framework.c), with its transformer layers' recomputation alike
 * (*block_n 0) or Megatron-LM's block pattern, full on the first *block_n of every model chunk and none on the rest
 * (ps_framework_recompute_block_n). *ref: the first transformer layer's strategy. What the tables print as one
 * strategy. */
bool ps_cli_blocks_uniform(const ps_model *m, const ps_plan *plan, const ps_strategy **ref, int64_t *block_n);
/* The --export kinds, NULL-terminated ("megatron", "deepspeed", "torchtitan"), and what each writes, with its article
 * ("Megatron-LM arguments", "a DeepSpeed config", "a torchtitan job config"; NULL for another word): one table
 * (cli/export.c) for the option, the refusals and the export's notes. */
extern const char *const ps_plan_export_kinds[];
const char *ps_plan_export_what(const char *kind);
/* The plan as the launch of framework `kind` (megatron: arguments, deepspeed: config JSON, torchtitan: TOML job
 * config; docs/exports.md), refused with PS_ERR_INPUT naming the rule when the framework cannot run it as planned
 * (ps_framework_runs), with PS_ERR_INFEASIBLE when it does not fit; nothing is written then. r: its prediction (the
 * notes quote it); cp: the constants it was priced with; vocab_pad: the padding unit the model was loaded with (0:
 * none), from which Megatron's --make-vocab-size-divisible-by follows. */
ps_status ps_plan_export(ps_out *out, const char *kind, const ps_model *m, const ps_cluster *c, const ps_plan *p,
                         const ps_prediction *r, const ps_cost_params *cp, int64_t vocab_pad);
/* The plan's pipeline timeline as an SVG document (malloc'd), from the per-stage times of its prediction. */
ps_status ps_plan_svg(const ps_plan *p, const ps_prediction *r, char **svg, size_t *len);

#endif

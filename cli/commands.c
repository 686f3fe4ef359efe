/* The command table: one row per psearch command with its words, its checks, whether it needs MPI, its entry point
 * and its help. The parser (cli/options.c), main's MPI start and the dispatch all read these rows. */
#include <string.h>

#include "cli.h"
#include "sweep_tables.h"
#include "ps_comm.h"

static bool mpi_always(const ps_cli_opts *o)
{
    (void)o;
    return true;
}

/* A search or an estimate started without a launcher is one process: the pure search (OpenMP) needs no MPI, and
 * MPI's singleton start-up cost more than a small search (issue #19, item 9). --cluster auto describes the MPI job it
 * runs in, and --exec-top (the search's) runs plans on ranks. */
static bool estimate_needs_mpi(const ps_cli_opts *o)
{
    return ps_mpi_launched() || (o->cluster && strcmp(o->cluster, "auto") == 0);
}
static bool plan_needs_mpi(const ps_cli_opts *o) { return o->exec_top > 0 || estimate_needs_mpi(o); }

/* calibrate measures the MPI job it runs in; refitting from recorded measurements reads a file */
static bool calibrate_needs_mpi(const ps_cli_opts *o) { return o->from_meas == NULL; }

/* Describing the allocation gathers facts from every rank. */
static bool cluster_needs_mpi(const ps_cli_opts *o)
{
    return o->sub && strcmp(o->sub, "show") == 0 && strcmp(o->cluster, "auto") == 0;
}

/* model|cluster list|show [NAME]: NAME goes to *name. */
static ps_status list_show_words(int argc, char **argv, ps_cli_opts *o, int *first, const char **name)
{
    const char *c = argv[1];
    if (argc > 2 && argv[2][0] != '-') {
        o->sub = argv[2];
        *first = 3;
        if (strcmp(o->sub, "list") != 0 && strcmp(o->sub, "show") != 0)
            return PS_FAIL(PS_ERR_INPUT, "unknown '%s' subcommand '%s' (expected list or show)", c, o->sub);
        if (argc > 3 && argv[3][0] != '-') {
            if (strcmp(o->sub, "list") == 0)
                return PS_FAIL(PS_ERR_INPUT, "'%s list' takes no name (got '%s')", c, argv[3]);
            *name = argv[3];
            *first = 4;
        }
    }
    return PS_OK;
}

static ps_status model_words(int argc, char **argv, ps_cli_opts *o, int *first)
{
    return list_show_words(argc, argv, o, first, &o->model);
}

static ps_status cluster_words(int argc, char **argv, ps_cli_opts *o, int *first)
{
    return list_show_words(argc, argv, o, first, &o->cluster);
}

/* psearch costdb show FILE | merge A B */
static ps_status costdb_words(int argc, char **argv, ps_cli_opts *o, int *first)
{
    if (argc > 2 && argv[2][0] != '-') {
        o->sub = argv[2];
        *first = 3;
        if (strcmp(o->sub, "show") != 0 && strcmp(o->sub, "merge") != 0)
            return PS_FAIL(PS_ERR_INPUT, "unknown 'costdb' subcommand '%s' (expected show or merge)", o->sub);
        int want = strcmp(o->sub, "show") == 0 ? 1 : 2;
        while (*first < argc && argv[*first][0] != '-' && o->n_db_args < want)
            o->db_args[o->n_db_args++] = argv[(*first)++];
        if (o->n_db_args < want)
            return PS_FAIL(PS_ERR_INPUT, "'costdb %s' needs %s", o->sub,
                           want == 1 ? "a FILE" : "two files: A.h5 B.h5 (and --out C.h5)");
    }
    return PS_OK;
}

/* psearch exec PLAN.json [options] */
static ps_status exec_words(int argc, char **argv, ps_cli_opts *o, int *first)
{
    if (argc > 2 && argv[2][0] != '-') {
        o->exec_plan = argv[2];
        *first = 3;
    }
    return PS_OK;
}

/* Options that would silently drop one another are refused, naming the one to drop (issue #22). */
static ps_status batch_finish(const ps_cli_opts *o)
{
    if (o->gbs && o->gbs_range)
        return PS_FAIL(PS_ERR_INPUT, "--gbs %lld and --gbs-range %s both set the global batch: drop one (--gbs for one "
                                     "batch, --gbs-range to search several)", (long long)o->gbs, o->gbs_range);
    return PS_OK;
}

/* --export prints a launch instead of the command's table or JSON: with --format json one would be dropped. */
static ps_status export_format(const ps_cli_opts *o, const char *what)
{
    if (o->export_kind && o->format == PS_FMT_JSON)
        return PS_FAIL(PS_ERR_INPUT, "--export %s prints the %s as %s instead of the %s table or JSON: drop --format "
                                     "json (or --export, for the JSON)", o->export_kind, what,
                       ps_plan_export_what(o->export_kind) ? ps_plan_export_what(o->export_kind) : "a launch",
                       strcmp(what, "plan") == 0 ? "estimate's" : "search's");
    return PS_OK;
}

static ps_status estimate_finish(ps_cli_opts *o) { return export_format(o, "plan"); }

static ps_status plan_finish(ps_cli_opts *o)
{
    PS_TRY(batch_finish(o));
    PS_TRY(export_format(o, "best plan"));
    if (!o->exec_top && (o->iters || o->warmup >= 0 || o->scale > 0 || o->backend || o->record || o->watchdog > 0))
        return PS_FAIL(PS_ERR_INPUT, "--iters, --warmup, --scale, --backend, --record and --watchdog apply to executed "
                                     "plans: give --exec-top K (or use psearch exec plan.json)");
    if (o->exec_top && o->export_kind)
        return PS_FAIL(PS_ERR_INPUT, "--exec-top and --export do not go together: export the plan, or execute it");
    return PS_OK;
}

static ps_status list_show_finish(ps_cli_opts *o)
{
    if (!o->sub && !o->help) return PS_FAIL(PS_ERR_INPUT, "'psearch %s' needs a subcommand: list or show", o->cmd);
    return PS_OK;
}

/* calibrate and costdb merge write a database, not their printed summary, to --out. */
static void out_is_database(ps_cli_opts *o)
{
    o->db_out = o->out;
    o->out = NULL;
}

static ps_status calibrate_finish(ps_cli_opts *o)
{
    out_is_database(o);
    return PS_OK;
}

static ps_status costdb_finish(ps_cli_opts *o)
{
    if (!o->sub && !o->help) return PS_FAIL(PS_ERR_INPUT, "'psearch costdb' needs a subcommand: show or merge");
    if (o->sub && strcmp(o->sub, "merge") == 0) out_is_database(o);
    if (o->sub && strcmp(o->sub, "show") == 0 && o->db_replace)
        return PS_FAIL(PS_ERR_INPUT, "option --replace is for 'costdb merge' (B's node kinds replace A's), not show");
    return PS_OK;
}

static ps_status sweep_finish(ps_cli_opts *o)
{
    if (o->help) return PS_OK;
    PS_TRY(batch_finish(o));
    /* --out names the sweep's folder, not a file the command's output is committed to. */
    o->sweep_dir = o->out;
    o->out = NULL;
    if (!o->models || !o->clusters || !o->sweep_dir)
        return PS_FAIL(PS_ERR_INPUT, "'psearch sweep' needs --models LIST, --clusters LIST and --out DIR "
                                     "(see psearch sweep --help)");
    /* --compare / --history (docs/nightly.md): their two tuning options mean nothing without one of them */
    if ((o->sweep_nights || o->change_threshold) && !o->sweep_compare && !o->sweep_history)
        return PS_FAIL(PS_ERR_INPUT, "option --%s needs --compare PREV_DIR or --history DIR (what to compare with)",
                       o->sweep_nights ? "nights" : "change-threshold");
    if (o->sweep_nights == 0) o->sweep_nights = PS_SWEEP_NIGHTS;
    o->sweep_threshold_pct = PS_SWEEP_THRESHOLD_PCT;
    if (o->change_threshold &&
        (!ps_parse_double(o->change_threshold, &o->sweep_threshold_pct) || o->sweep_threshold_pct < 0 ||
         o->sweep_threshold_pct > 1000))
        return PS_FAIL(PS_ERR_INPUT, "option --change-threshold needs a percentage from 0 to 1000 (got '%s')",
                       o->change_threshold);
    return PS_OK;
}

static ps_status exec_finish(ps_cli_opts *o)
{
    if (!o->exec_plan && !o->help)
        return PS_FAIL(PS_ERR_INPUT,
                       "'psearch exec' needs a plan file: psearch exec plan.json (see psearch exec --help)");
    return PS_OK;
}

/* The order of `psearch --help`'s lines and of the command list in "unknown command". */
static const ps_cli_command k_commands[] = {
    {
        .name = "plan",
        .implicit = true,
        .finish = plan_finish,
        .needs_mpi = plan_needs_mpi,
        .run = ps_cmd_plan,
        .synopsis = "[OPTIONS]",
        .summary = "search the fastest plan for MODEL on CLUSTER",
        .usage = "       psearch --version                  versions of psearch and the libraries it uses\n"
                 "\n"
                 "Options (defaults in brackets):\n",
        .usage_end = "\n"
                     "Exit codes: 0 done; 1 no feasible plan; 2 bad usage or input; "
                     "3 system failure (MPI, HDF5, I/O).\n"
                     "Under MPI (srun -N 8 psearch ...) rank 0 prints; every rank takes part in the search.\n",
        .help_col = 23,
        .short_col = true,
    },
    {
        .name = "model",
        .words = model_words,
        .finish = list_show_finish,
        .run = ps_cmd_model,
        .synopsis = "model list|show [NAME]",
        .summary = "model presets and their derived numbers",
        .usage = "usage: psearch model list [--format table|json]\n"
                 "       psearch model show [NAME|FILE] [--seq N] [--vocab-pad N] [--dtype T] "
                 "[--format table|json]\n"
                 "\n"
                 "NAME is a preset (psearch model list); FILE is a psearch model JSON, a Hugging Face config.json\n"
                 "or a plain layer list (*.layers). Default: " PS_DEFAULT_MODEL ".\n",
    },
    {
        .name = "cluster",
        .words = cluster_words,
        .finish = list_show_finish,
        .needs_mpi = cluster_needs_mpi,
        .run = ps_cmd_cluster,
        .synopsis = "cluster list|show [SPEC]",
        .summary = "cluster presets and their derived numbers",
        .usage = "usage: psearch cluster list [--format table|json]\n"
                 "       psearch cluster show [SPEC] [--format table|json]\n"
                 "\n"
                 "SPEC is PRESET:NODES (e.g. dgx-a100-80g:4; NODES defaults to 1), a cluster.json file, or 'auto'\n"
                 "(describe the allocation psearch runs on, e.g. under srun). Default: " PS_DEFAULT_CLUSTER ".\n",
    },
    {
        .name = "estimate",
        .inputs_from_plan = true, /* with --plan; ps_cmd_estimate applies the defaults */
        .finish = estimate_finish,
        .needs_mpi = estimate_needs_mpi,
        .run = ps_cmd_estimate,
        .synopsis = "estimate [PLAN OPTIONS]",
        .summary = "predict one plan (psearch estimate --help)",
        .usage = "usage: psearch estimate [--model M] [--cluster C] (--plan plan.json | PLAN OPTIONS)\n"
                 "\n"
                 "Predict one plan with the cost model the search uses: iteration time, samples/s, tokens/s,\n"
                 "TFLOP/s per GPU, MFU, bubble, per-stage peak memory and a time breakdown.\n"
                 "\n"
                 "Plan options (defaults in brackets):\n",
        .usage_end = "\n"
                     "Model options: --seq N, --vocab-pad N [a multiple of 128 x the plan's TP, as Megatron-LM\n"
                     "pads it; 1: none], --dtype T [the model's own; fp16 on GPUs without bf16]. Output: --format\n"
                     "table|json, --out FILE. What estimate chose for you is said in its 'note' lines.\n"
                     "\n"
                     "Exit 1 when the plan does not fit in memory (the memory breakdown is still printed);\n"
                     "exit 2 when it breaks a rule (degrees vs GPUs, divisibility of heads, vocabulary, batch).\n",
        .help_col = 19,
    },
    {
        .name = "schedule",
        .run = ps_cmd_schedule,
        .synopsis = "schedule --kind K ...",
        .summary = "simulate a pipeline schedule (psearch schedule --help)",
        .usage = "usage: psearch schedule --kind K [--stages D] [--micro N] [--vpp V] [--fbw F,B,W | --times FILE]\n"
                 "                        [--format table|json] [--passes] [--svg FILE]\n"
                 "\n"
                 "Build pipeline schedule K for D devices and N micro-batches, simulate it and print the makespan,\n"
                 "the bubble fraction and each device's peak activation memory; --svg draws the timeline.\n"
                 "\n",
        .help_col = 18,
    },
    {
        .name = "calibrate",
        .finish = calibrate_finish,
        .needs_mpi = calibrate_needs_mpi,
        .run = ps_cmd_calibrate,
        .synopsis = "calibrate --out FILE.h5",
        .summary = "measure this allocation into a cost database (under mpirun)",
        .usage = "usage: mpirun -n N psearch calibrate --out FILE.h5 [--quick] [--reps N]\n"
                 "       srun -N 8 psearch calibrate --out site.h5\n"
                 "\n"
                 "Measure this allocation into a cost database (docs/costdb.md): GEMMs of transformer-layer shapes\n"
                 "and a generic grid, memory bandwidth, collectives over groups inside and across nodes, and the\n"
                 "slowdown of overlapping computation and communication. Each MPI rank is one device.\n"
                 "\n",
        .usage_end = "\n"
                     "       psearch calibrate --from-measurements DB.h5 [--out FILE.h5]\n"
                     "\n"
                     "Refit the cost model's compute_scale and comm_scale from the executed plans recorded in DB.h5\n"
                     "(psearch exec --record DB.h5) and store them in the database "
                     "(DB.h5 itself, or a copy at --out),\n"
                     "so that --costdb applies them (docs/exec.md). No MPI needed.\n",
        .help_col = 15,
    },
    {
        .name = "costdb",
        .words = costdb_words,
        .finish = costdb_finish,
        .run = ps_cmd_costdb,
        .synopsis = "costdb show|merge ...",
        .summary = "summarize or merge cost databases (psearch costdb --help)",
        .usage = "usage: psearch costdb show FILE [--format table|json]\n"
                 "       psearch costdb merge A.h5 B.h5 --out C.h5 [--replace]\n"
                 "\n"
                 "show: provenance, devices, table sizes, peak GEMM rate, memory bandwidth, all-reduce bus bandwidth.\n"
                 "merge: one database from files calibrated on different node kinds (heterogeneous clusters).\n"
                 "  --replace: B's node kinds replace A's rows of the same kinds (a nightly re-calibration)\n"
                 "Use a database with: psearch --costdb FILE --cluster costdb ... (the calibrated machine) or with\n"
                 "a cluster of the devices it measured (docs/costdb.md).\n",
    },
    {
        .name = "sweep",
        .finish = sweep_finish,
        .needs_mpi = mpi_always,
        .run = ps_cmd_sweep,
        .synopsis = "sweep --models L --clusters L --out DIR",
        .summary = "plan tables (psearch sweep --help)",
        .usage = "usage: psearch sweep --models LIST --clusters LIST --out DIR [--resume]\n"
                 "                     [--compare PREV_DIR] [--history DIR] [SEARCH OPTIONS]\n"
                 "\n"
                 "Search every (model, cluster) cell, the ranks in groups that take the largest cells first\n"
                 "(--group-ranks), and publish plan tables in DIR: plans.md, plans.csv and index.html (one\n"
                 "table per model, with each plan's schedule timeline). Each finished cell is appended to\n"
                 "DIR/cells.jsonl as it completes.\n"
                 "\n",
        .usage_end = "  search options as for `psearch --help`: --gbs, --gbs-range, --mbs-max, --max-tp, --schedules,\n"
                     "  --seq, --vocab-pad, --dtype, --cost-param, --costdb, --objective, --distribute, --tp-overlap,\n"
                     "  --attention, --dp-overlap, --framework, and the fixed plan fields --tp, --pp, --zero,\n"
                     "  --recompute, --mbs, --micro, --schedule (--gbs default: 8 x GPUs of each cluster)\n"
                     "\n"
                     "Exit 0 when every cell is recorded (infeasible cells too, with their binding constraint);\n"
                     "2 on a bad model or cluster (before any cell runs), a folder holding another sweep, or a\n"
                     "PREV_DIR / history folder that holds no sweep.\n",
        .help_col = 19,
    },
    {
        .name = "exec",
        .words = exec_words,
        .finish = exec_finish,
        .inputs_from_plan = true,
        .needs_mpi = mpi_always,
        .run = ps_cmd_exec,
        .synopsis = "exec PLAN.json",
        .summary = "run a plan on this allocation, measured vs predicted\n"
                   "(under mpirun, one rank per GPU; psearch exec --help)",
        .usage = "usage: mpirun -n GPUS psearch exec PLAN.json [--iters N] [--warmup W] [--backend B] [--scale F]\n"
                 "                                  [--record DB.h5] [--costdb DB.h5] [--watchdog S]\n"
                 "       mpirun -n GPUS psearch --model M --cluster C --exec-top K [the same options]\n"
                 "\n"
                 "Run a plan on this allocation, one MPI rank per GPU of the plan: every rank takes its place\n"
                 "(pipeline stage, tensor-parallel rank, data-parallel rank), runs its stage's passes in the\n"
                 "schedule's order with the layers' matrix multiplies, tensor-parallel collectives, ZeRO gathers,\n"
                 "pipeline sends and the data-parallel gradient synchronisation, and reports measured against\n"
                 "predicted iteration time (docs/exec.md). --exec-top K searches, then runs the K best plans and\n"
                 "ranks them by measured time.\n"
                 "\n",
        .usage_end = "\n"
                     "Exit 2 for a plan that does not fit this run (degrees, ranks, stages), before any communicator\n"
                     "is built; 3 when the execution fails (the watchdog, MPI).\n",
        .help_col = 18,
    },
};

const ps_cli_command *ps_cli_commands(int *n)
{
    *n = (int)(sizeof k_commands / sizeof k_commands[0]);
    return k_commands;
}

const ps_cli_command *ps_cli_command_find(const char *name)
{
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (strcmp(k_commands[i].name, name) == 0) return &k_commands[i];
    return NULL;
}

int ps_cli_needs_mpi(const ps_cli_opts *o)
{
    if (o->help || o->version) return 0;
    const ps_cli_command *c = ps_cli_command_find(o->cmd);
    return c && c->needs_mpi && c->needs_mpi(o);
}

ps_status ps_cli_run(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    const ps_cli_command *c = ps_cli_command_find(o->cmd);
    if (!c) return PS_FAIL(PS_ERR_INPUT, "unknown command '%s'", o->cmd);
    if (o->data_dir) ps_data_dir_override(o->data_dir);
    return c->run(o, comm, out);
}

/* Command-line parsing for every psearch subcommand: one option table, errors that name the option and value. */
#include <getopt.h>
#include <string.h>

#include "cli.h"
#include "ps_mpi_search.h"

enum {
    OPT_SEQ = 256,
    OPT_VOCAB_PAD,
    OPT_DTYPE,
    OPT_FORMAT,
    OPT_OUT,
    OPT_DATA_DIR,
    OPT_VERSION,
    OPT_TP,
    OPT_PP,
    OPT_DP,
    OPT_MBS,
    OPT_GBS,
    OPT_VPP,
    OPT_ZERO,
    OPT_RECOMPUTE,
    OPT_SEQ_PARALLEL,
    OPT_SCHEDULE,
    OPT_PLAN,
    OPT_COST_PARAM,
    OPT_KIND,
    OPT_STAGES,
    OPT_MICRO,
    OPT_FBW,
    OPT_TIMES,
    OPT_SVG,
    OPT_PASSES,
    OPT_GBS_RANGE,
    OPT_TOP,
    OPT_MBS_MAX,
    OPT_MAX_TP,
    OPT_SCHEDULES,
    OPT_MODELS,
    OPT_CLUSTERS,
    OPT_RESUME,
    OPT_OBJECTIVE,
    OPT_EXPORT,
    OPT_COSTDB,
    OPT_QUICK,
    OPT_REPS,
    OPT_DISTRIBUTE,
    OPT_EXEC_TOP,
    OPT_ITERS,
    OPT_WARMUP,
    OPT_SCALE,
    OPT_BACKEND,
    OPT_RECORD,
    OPT_WATCHDOG,
    OPT_FROM_MEAS,
    OPT_TP_OVERLAP,
};

static const struct option g_long[] = {
    {"model", required_argument, NULL, 'm'},
    {"cluster", required_argument, NULL, 'c'},
    {"seq", required_argument, NULL, OPT_SEQ},
    {"vocab-pad", required_argument, NULL, OPT_VOCAB_PAD},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"out", required_argument, NULL, OPT_OUT},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"tp", required_argument, NULL, OPT_TP},
    {"pp", required_argument, NULL, OPT_PP},
    {"dp", required_argument, NULL, OPT_DP},
    {"mbs", required_argument, NULL, OPT_MBS},
    {"gbs", required_argument, NULL, OPT_GBS},
    {"vpp", required_argument, NULL, OPT_VPP},
    {"zero", required_argument, NULL, OPT_ZERO},
    {"recompute", required_argument, NULL, OPT_RECOMPUTE},
    {"seq-parallel", no_argument, NULL, OPT_SEQ_PARALLEL},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"plan", required_argument, NULL, OPT_PLAN},
    {"cost-param", required_argument, NULL, OPT_COST_PARAM},
    {"kind", required_argument, NULL, OPT_KIND},
    {"stages", required_argument, NULL, OPT_STAGES},
    {"micro", required_argument, NULL, OPT_MICRO},
    {"fbw", required_argument, NULL, OPT_FBW},
    {"times", required_argument, NULL, OPT_TIMES},
    {"svg", required_argument, NULL, OPT_SVG},
    {"passes", no_argument, NULL, OPT_PASSES},
    {"gbs-range", required_argument, NULL, OPT_GBS_RANGE},
    {"top", required_argument, NULL, OPT_TOP},
    {"mbs-max", required_argument, NULL, OPT_MBS_MAX},
    {"max-tp", required_argument, NULL, OPT_MAX_TP},
    {"schedules", required_argument, NULL, OPT_SCHEDULES},
    {"models", required_argument, NULL, OPT_MODELS},
    {"clusters", required_argument, NULL, OPT_CLUSTERS},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"objective", required_argument, NULL, OPT_OBJECTIVE},
    {"distribute", required_argument, NULL, OPT_DISTRIBUTE},
    {"export", required_argument, NULL, OPT_EXPORT},
    {"costdb", required_argument, NULL, OPT_COSTDB},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"reps", required_argument, NULL, OPT_REPS},
    {"exec-top", required_argument, NULL, OPT_EXEC_TOP},
    {"iters", required_argument, NULL, OPT_ITERS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"scale", required_argument, NULL, OPT_SCALE},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"record", required_argument, NULL, OPT_RECORD},
    {"watchdog", required_argument, NULL, OPT_WATCHDOG},
    {"from-measurements", required_argument, NULL, OPT_FROM_MEAS},
    {"tp-overlap", required_argument, NULL, OPT_TP_OVERLAP},
    {NULL, 0, NULL, 0},
};

void ps_cli_usage(FILE *f, const char *cmd)
{
    if (cmd && strcmp(cmd, "model") == 0) {
        fprintf(f, "usage: psearch model list [--format table|json]\n"
                   "       psearch model show [NAME|FILE] [--seq N] [--vocab-pad N] [--dtype T] [--format table|json]\n"
                   "\n"
                   "NAME is a preset (psearch model list); FILE is a psearch model JSON, a Hugging Face config.json\n"
                   "or a plain layer list (*.layers). Default: " PS_DEFAULT_MODEL ".\n");
        return;
    }
    if (cmd && strcmp(cmd, "estimate") == 0) {
        fprintf(f, "usage: psearch estimate [--model M] [--cluster C] (--plan plan.json | PLAN OPTIONS)\n"
                   "\n"
                   "Predict one plan with the cost model the search uses: iteration time, samples/s, tokens/s,\n"
                   "TFLOP/s per GPU, MFU, bubble, per-stage peak memory and a time breakdown.\n"
                   "\n"
                   "Plan options (defaults in brackets):\n"
                   "  --tp N           tensor-parallel degree [1]\n"
                   "  --pp N           pipeline stages [1]\n"
                   "  --dp N           data-parallel degree [GPUs / (tp x pp)]\n"
                   "  --mbs N          micro-batch size per data-parallel replica [1]\n"
                   "  --gbs N          global batch size [mbs x dp x 4 x pp: enough micro-batches for a short bubble]\n"
                   "  --vpp N          model chunks per device [1; 2 for interleaved and V schedules]\n"
                   "  --zero N         ZeRO stage 0-3 of the data-parallel group [0]\n"
                   "  --recompute R    activation recomputation: none, selective, full [none]\n"
                   "  --seq-parallel   Megatron sequence parallelism (with tp > 1)\n"
                   "  --tp-overlap O   TP collectives overlapped with computation (Oases): none, cross-pass, or\n"
                   "                   oases (cross-pass + fine-grained recomputation; needs --recompute full) [none]\n"
                   "  --schedule K     pipeline schedule (see docs/schedules.md) [1f1b]\n"
                   "  --plan FILE      read the plan from a plan.json (what --format json prints) instead\n"
                   "  --cost-param NAME=VALUE   override a cost-model constant (repeatable; docs/costmodel.md)\n"
                   "  --costdb FILE    use the measured tables of a cost database (psearch calibrate)\n"
                   "\n"
                   "Model options: --seq N, --vocab-pad N [no padding], --dtype T [the model's own; fp16 on GPUs\n"
                   "without bf16]. Output: --format table|json, --out FILE.\n"
                   "\n"
                   "Exit 1 when the plan does not fit in memory (the memory breakdown is still printed);\n"
                   "exit 2 when it breaks a rule (degrees vs GPUs, divisibility of heads, vocabulary, batch).\n");
        return;
    }
    if (cmd && strcmp(cmd, "schedule") == 0) {
        fprintf(f, "usage: psearch schedule --kind K [--stages D] [--micro N] [--vpp V] [--fbw F,B,W | --times FILE]\n"
                   "                        [--format table|json] [--passes] [--svg FILE]\n"
                   "\n"
                   "Build pipeline schedule K for D devices and N micro-batches, simulate it and print the makespan,\n"
                   "the bubble fraction and each device's peak activation memory; --svg draws the timeline.\n"
                   "\n"
                   "  --kind K        gpipe, 1f1b, interleaved, zb-h1, zb-h2, v-min, v-half, v-zb (docs/schedules.md)\n"
                   "  --stages D      pipeline devices [4]\n"
                   "  --micro N       micro-batches [4 x D]\n"
                   "  --vpp V         chunks per device for interleaved [the kind's default: 2 for interleaved and V]\n"
                   "  --fbw F,B,W     times of one micro-batch's forward, input-backward and weight-backward over a\n"
                   "                  device's whole share of layers; chunks split them evenly [1,1,1]\n"
                   "  --times FILE    per-stage times instead: one line 'F B W [ACT]' per stage (D x V lines)\n"
                   "  --passes        with --format json, list every pass with its start and end\n"
                   "  --svg FILE      write the timeline as SVG (atomically)\n");
        return;
    }
    if (cmd && strcmp(cmd, "calibrate") == 0) {
        fprintf(f, "usage: mpirun -n N psearch calibrate --out FILE.h5 [--quick] [--reps N]\n"
                   "       srun -N 8 psearch calibrate --out site.h5\n"
                   "\n"
                   "Measure this allocation into a cost database (docs/costdb.md): GEMMs of transformer-layer shapes\n"
                   "and a generic grid, memory bandwidth, collectives over groups inside and across nodes, and the\n"
                   "slowdown of overlapping computation and communication. Each MPI rank is one device.\n"
                   "\n"
                   "  --out FILE   the database to write (atomically: a temporary beside it, renamed at the end)\n"
                   "  --quick      small shapes and sizes (1 KiB .. 1 MiB collectives), seconds on a CPU\n"
                   "  --reps N     timed repetitions per point [10; 5 with --quick]\n"
                   "\n"
                   "       psearch calibrate --from-measurements DB.h5 [--out FILE.h5]\n"
                   "\n"
                   "Refit the cost model's compute_scale and comm_scale from the executed plans recorded in DB.h5\n"
                   "(psearch exec --record DB.h5) and store them in the database (DB.h5 itself, or a copy at --out),\n"
                   "so that --costdb applies them (docs/exec.md). No MPI needed.\n");
        return;
    }
    if (cmd && strcmp(cmd, "exec") == 0) {
        fprintf(f, "usage: mpirun -n GPUS psearch exec PLAN.json [--iters N] [--warmup W] [--backend B] [--scale F]\n"
                   "                                  [--record DB.h5] [--costdb DB.h5] [--watchdog S]\n"
                   "       mpirun -n GPUS psearch --model M --cluster C --exec-top K [the same options]\n"
                   "\n"
                   "Run a plan on this allocation, one MPI rank per GPU of the plan: every rank takes its place\n"
                   "(pipeline stage, tensor-parallel rank, data-parallel rank), runs its stage's passes in the\n"
                   "schedule's order with the layers' matrix multiplies, tensor-parallel collectives, ZeRO gathers,\n"
                   "pipeline sends and the data-parallel gradient synchronisation, and reports measured against\n"
                   "predicted iteration time (docs/exec.md). --exec-top K searches, then runs the K best plans and\n"
                   "ranks them by measured time.\n"
                   "\n"
                   "  --iters N       timed iterations [5]\n"
                   "  --warmup W      iterations run first and not timed [1]\n"
                   "  --backend B     auto, cpu or cuda [auto: cuda when every rank sees a GPU; a plan for GPUs\n"
                   "                  is refused on a machine without one unless --backend cpu is given]\n"
                   "  --scale F       divide every width and token count by F and predict that scaled model too\n"
                   "                  [16 for a GPU plan on the cpu backend, else 1]\n"
                   "  --record DB.h5  append the measurements to this cost database (created if missing); only\n"
                   "                  runs predicted for the devices that ran them (not a GPU plan on CPUs)\n"
                   "  --costdb DB.h5  predict with its measured tables (and its refitted coefficients)\n"
                   "  --cluster C     the cluster the plan is for [the plan file's \"cluster\"]; --model likewise\n"
                   "  --watchdog S    a wait for a message or collective longer than S seconds fails the run,\n"
                   "                  naming the rank, the pass and the peer [60]\n"
                   "\n"
                   "Exit 2 for a plan that does not fit this run (degrees, ranks, stages), before any communicator\n"
                   "is built; 3 when the execution fails (the watchdog, MPI).\n");
        return;
    }
    if (cmd && strcmp(cmd, "costdb") == 0) {
        fprintf(f, "usage: psearch costdb show FILE [--format table|json]\n"
                   "       psearch costdb merge A.h5 B.h5 --out C.h5\n"
                   "\n"
                   "show: provenance, devices, table sizes, peak GEMM rate, memory bandwidth, all-reduce bus bandwidth.\n"
                   "merge: one database from files calibrated on different node kinds (heterogeneous clusters).\n"
                   "Use a database with: psearch --costdb FILE --cluster costdb ... (the calibrated machine) or with\n"
                   "a cluster of the devices it measured (docs/costdb.md).\n");
        return;
    }
    if (cmd && strcmp(cmd, "sweep") == 0) {
        fprintf(f, "usage: psearch sweep --models LIST --clusters LIST --out DIR [--resume] [SEARCH OPTIONS]\n"
                   "\n"
                   "Search every (model, cluster) cell with all ranks, one cell after another, and publish plan\n"
                   "tables in DIR: plans.md, plans.csv and index.html (one table per model, with each plan's\n"
                   "schedule timeline). Each finished cell is appended to DIR/cells.jsonl as it completes.\n"
                   "\n"
                   "  --models LIST    comma-separated models: presets or files (gpt3-1.3b,gpt3-65b)\n"
                   "  --clusters LIST  comma-separated clusters: PRESET:NODES, cluster.json files or auto. A bare\n"
                   "                   number continues the preset before it with another node count:\n"
                   "                   dgx-a100-80g:1,2,4,8 is dgx-a100-80g:1,dgx-a100-80g:2,... (write ./8 for a\n"
                   "                   file named 8)\n"
                   "  --out DIR        where the tables and records go (created if missing)\n"
                   "  --resume         continue the sweep recorded in DIR: finished cells are skipped; refused\n"
                   "                   when DIR's records were made with other search options or other cells\n"
                   "  search options as for `psearch --help`: --gbs, --gbs-range, --mbs-max, --max-tp, --schedules,\n"
                   "  --seq, --vocab-pad, --dtype, --cost-param, --costdb, --objective, --distribute (--gbs default:\n"
                   "  8 x GPUs of each cluster)\n"
                   "\n"
                   "Exit 0 when every cell is recorded (infeasible cells too, with their binding constraint);\n"
                   "2 on a bad model or cluster (before any cell runs) or a folder holding another sweep.\n");
        return;
    }
    if (cmd && strcmp(cmd, "cluster") == 0) {
        fprintf(f, "usage: psearch cluster list [--format table|json]\n"
                   "       psearch cluster show [SPEC] [--format table|json]\n"
                   "\n"
                   "SPEC is PRESET:NODES (e.g. dgx-a100-80g:4; NODES defaults to 1), a cluster.json file, or 'auto'\n"
                   "(describe the allocation psearch runs on, e.g. under srun). Default: " PS_DEFAULT_CLUSTER ".\n");
        return;
    }
    fprintf(f,
            "usage: psearch [OPTIONS]                  search the fastest plan for MODEL on CLUSTER\n"
            "       psearch model list|show [NAME]     model presets and their derived numbers\n"
            "       psearch cluster list|show [SPEC]   cluster presets and their derived numbers\n"
            "       psearch estimate [PLAN OPTIONS]     predict one plan (psearch estimate --help)\n"
            "       psearch schedule --kind K ...      simulate a pipeline schedule (psearch schedule --help)\n"
            "       psearch calibrate --out FILE.h5    measure this allocation into a cost database (under mpirun)\n"
            "       psearch costdb show|merge ...      summarize or merge cost databases (psearch costdb --help)\n"
            "       psearch sweep --models L --clusters L --out DIR   plan tables (psearch sweep --help)\n"            "       psearch exec PLAN.json             run a plan on this allocation, measured vs predicted\n"
            "                                          (under mpirun, one rank per GPU; psearch exec --help)\n"
            "       psearch --version                  versions of psearch and the libraries it uses\n"
            "\n"
            "Options (defaults in brackets):\n"
            "  -m, --model M        model: preset name, psearch model JSON, HF config.json or *.layers file\n"
            "                       [" PS_DEFAULT_MODEL "]\n"
            "  -c, --cluster C      cluster: PRESET:NODES, cluster.json, or 'auto' for this allocation\n"
            "                       [" PS_DEFAULT_CLUSTER "]\n"
            "      --seq N          sequence length in tokens [the model's own]\n"
            "      --vocab-pad N    pad the vocabulary up to a multiple of N [search: 128 x GPUs per node, as\n"
            "                       Megatron pads to 128 x TP; model show / estimate: no padding]\n"
            "      --dtype T        training dtype: fp32, fp16, bf16, fp8 [the model's own, bf16 for presets]\n"
            "      --gbs N          global batch size [8 x GPUs]\n"
            "      --gbs-range L:H:S  search the global batch too: L, L+S, ..., H\n"
            "      --top K          plans to show [5]\n"
            "      --mbs-max N      largest micro-batch per data-parallel replica tried [16]\n"
            "      --max-tp N       largest tensor-parallel degree tried [GPUs per node]\n"
            "      --schedules A,B  pipeline schedules tried [all: gpipe, 1f1b, interleaved, zb-h1, zb-h2, v-min,\n"
            "                       v-half, v-zb]\n"
            "      --objective O    throughput (highest samples/s) or memory (lowest peak memory per GPU)\n"
            "                       [throughput]\n"
            "      --tp-overlap O   auto: per layer, also try TP with its collectives overlapped (Oases: cross-pass,\n"
            "                       and oases with fine-grained recomputation); none: plain Megatron TP only [auto]\n"
            "      --distribute D   how ranks share the search: dynamic (guided chunks of work units from a counter\n"
            "                       on rank 0, one-sided MPI) or static (by estimated work) [dynamic]\n"
            "      --cost-param NAME=VALUE  override a cost-model constant (docs/costmodel.md)\n"
            "      --costdb FILE    measured cost database (psearch calibrate); --cluster costdb plans for the\n"
            "                       machine it measured (docs/costdb.md)\n"
            "      --format F       output: table or json [table]\n"
            "      --export K       print the best plan as megatron (Megatron-LM arguments) or deepspeed (config JSON)\n"
            "                       instead of the table\n"
            "      --svg FILE       also write the best plan's pipeline timeline as SVG (atomically)\n"
            "      --exec-top K     then execute the K best plans on this allocation and rank them by measured\n"
            "                       time (one rank per GPU; psearch exec --help for --iters, --backend, ...)\n"
            "      --out FILE       write the output to FILE (atomically: all or nothing) [standard output]\n"
            "      --data-dir DIR   folder holding models/ and clusters/ presets [installed share/psearch]\n"
            "  -v, --verbose        on errors, also print where in psearch they were raised\n"
            "  -h, --help           this help; `psearch model --help`, `psearch cluster --help` for those\n"
            "      --version        version and library versions\n"
            "\n"
            "Exit codes: 0 done; 1 no feasible plan; 2 bad usage or input; 3 system failure (MPI, HDF5, I/O).\n"
            "Under MPI (srun -N 8 psearch ...) rank 0 prints; every rank takes part in the search.\n");
}

/* The commands an option means something to; options not listed here (--model, --cluster, --format, --out, --seq,
 * --dtype, ...) apply everywhere. An option given to a command that ignores it is refused, not silently dropped:
 * `psearch --tp 8` is a search, and a search chooses its own TP. */
static const struct {
    int opt;
    const char *cmds; /* space-separated */
} k_scope[] = {
    {OPT_TP, "estimate"},       {OPT_PP, "estimate"},         {OPT_DP, "estimate"},
    {OPT_MBS, "estimate"},      {OPT_ZERO, "estimate"},       {OPT_RECOMPUTE, "estimate"},
    {OPT_SEQ_PARALLEL, "estimate"}, {OPT_SCHEDULE, "estimate"}, {OPT_PLAN, "estimate"},
    {OPT_VPP, "estimate schedule"}, {OPT_GBS, "plan estimate sweep"},
    {OPT_GBS_RANGE, "plan sweep"}, {OPT_TOP, "plan sweep"},   {OPT_MBS_MAX, "plan sweep"},
    {OPT_MAX_TP, "plan sweep"}, {OPT_SCHEDULES, "plan sweep"}, {OPT_OBJECTIVE, "plan sweep"},
    {OPT_DISTRIBUTE, "plan sweep"}, {OPT_TP_OVERLAP, "plan estimate sweep"},
    {OPT_EXPORT, "plan"},       {OPT_SVG, "plan schedule"},
    {OPT_KIND, "schedule"},     {OPT_STAGES, "schedule"},     {OPT_MICRO, "schedule"},
    {OPT_FBW, "schedule"},      {OPT_TIMES, "schedule"},      {OPT_PASSES, "schedule"},
    {OPT_QUICK, "calibrate"},   {OPT_REPS, "calibrate"},
    {OPT_MODELS, "sweep"},      {OPT_CLUSTERS, "sweep"},      {OPT_RESUME, "sweep"},
    {OPT_COSTDB, "plan estimate sweep cluster exec"}, {OPT_COST_PARAM, "plan estimate sweep exec"},
    {OPT_EXEC_TOP, "plan"},     {OPT_ITERS, "exec plan"},     {OPT_WARMUP, "exec plan"},
    {OPT_SCALE, "exec plan"},   {OPT_BACKEND, "exec plan"},   {OPT_RECORD, "exec plan"},
    {OPT_WATCHDOG, "exec plan"}, {OPT_FROM_MEAS, "calibrate"},
};

static ps_status check_scope(int opt, const char *cmd)
{
    for (size_t i = 0; i < sizeof k_scope / sizeof k_scope[0]; i++) {
        if (k_scope[i].opt != opt) continue;
        size_t n = strlen(cmd);
        for (const char *w = k_scope[i].cmds; (w = strstr(w, cmd)) != NULL; w += n)
            if ((w == k_scope[i].cmds || w[-1] == ' ') && (w[n] == ' ' || w[n] == '\0')) return PS_OK;
        const char *name = "?";
        for (const struct option *l = g_long; l->name; l++)
            if (l->val == opt) name = l->name;
        return PS_FAIL(PS_ERR_INPUT, "option --%s does not apply to 'psearch%s%s' (it is an option of: %s)", name,
                       strcmp(cmd, "plan") ? " " : "", strcmp(cmd, "plan") ? cmd : "",
                       k_scope[i].cmds);
    }
    return PS_OK;
}

static ps_status parse_pos_int(const char *opt, const char *val, int64_t *out)
{
    int64_t v;
    if (!ps_parse_i64(val, &v) || v <= 0)
        return PS_FAIL(PS_ERR_INPUT, "option --%s needs a positive integer (got '%s')", opt, val);
    *out = v;
    return PS_OK;
}

ps_status ps_cli_parse(int argc, char **argv, ps_cli_opts *o)
{
    memset(o, 0, sizeof *o);
    o->cmd = "plan";
    o->zero = -1;
    o->warmup = -1;
    ps_model_opts_init(&o->mopts);

    /* The subcommand and its positional words come first: psearch model show gpt3-65b --format json. */
    int first = 1;
    if (argc > 1 && argv[1][0] != '-') {
        const char *c = argv[1];
        if (strcmp(c, "model") == 0 || strcmp(c, "cluster") == 0) {
            o->cmd = c;
            first = 2;
            if (argc > 2 && argv[2][0] != '-') {
                o->sub = argv[2];
                first = 3;
                if (strcmp(o->sub, "list") != 0 && strcmp(o->sub, "show") != 0)
                    return PS_FAIL(PS_ERR_INPUT, "unknown '%s' subcommand '%s' (expected list or show)", c, o->sub);
                if (argc > 3 && argv[3][0] != '-') {
                    if (strcmp(o->sub, "list") == 0)
                        return PS_FAIL(PS_ERR_INPUT, "'%s list' takes no name (got '%s')", c, argv[3]);
                    if (strcmp(c, "model") == 0)
                        o->model = argv[3];
                    else
                        o->cluster = argv[3];
                    first = 4;
                }
            }
        } else if (strcmp(c, "estimate") == 0 || strcmp(c, "schedule") == 0 || strcmp(c, "calibrate") == 0 ||
                   strcmp(c, "sweep") == 0) {
            o->cmd = c;
            first = 2;
        } else if (strcmp(c, "costdb") == 0) {
            /* psearch costdb show FILE | merge A B */
            o->cmd = c;
            first = 2;
            if (argc > 2 && argv[2][0] != '-') {
                o->sub = argv[2];
                first = 3;
                if (strcmp(o->sub, "show") != 0 && strcmp(o->sub, "merge") != 0)
                    return PS_FAIL(PS_ERR_INPUT, "unknown 'costdb' subcommand '%s' (expected show or merge)", o->sub);
                int want = strcmp(o->sub, "show") == 0 ? 1 : 2;
                while (first < argc && argv[first][0] != '-' && o->n_db_args < want) o->db_args[o->n_db_args++] = argv[first++];
                if (o->n_db_args < want)
                    return PS_FAIL(PS_ERR_INPUT, "'costdb %s' needs %s", o->sub,
                                   want == 1 ? "a FILE" : "two files: A.h5 B.h5 (and --out C.h5)");
            }
        } else if (strcmp(c, "exec") == 0) {
            /* psearch exec PLAN.json [options] */
            o->cmd = c;
            first = 2;
            if (argc > 2 && argv[2][0] != '-') {
                o->exec_plan = argv[2];
                first = 3;
            }
        } else if (strcmp(c, "help") == 0) {
            o->help = 1;
            first = 2;
        } else {
            return PS_FAIL(PS_ERR_INPUT, "unknown command '%s' (commands: model, cluster, estimate, schedule, calibrate, "
                                         "costdb, sweep, exec; see psearch --help)", c);
        }
    }

    /* getopt_long sees argv without the subcommand words. opterr = 0: we word the messages ourselves. optind = 0,
     * not 1: glibc then also forgets where it was inside a cluster of short options ("-vx" stopped at x), which
     * otherwise points into the argv of the previous call (found by tests/fuzz/fuzz_cli_options). */
    int n = argc - first + 1;
    char **av = argv + first - 1;
    opterr = 0;
    optind = 0;
    int ch;
    while ((ch = getopt_long(n, av, ":m:c:vh", g_long, NULL)) != -1) {
        /* getopt takes the next word as the value even when it is another option ("--model --format json"). */
        /* The option is the word before a separate value, or the word itself when the value is attached
         * ("--model=--format", "-m--format"). */
        if (optarg && optarg[0] == '-' && optarg[1] == '-')
            return PS_FAIL(PS_ERR_INPUT, "option '%s' needs a value (got the option '%s')",
                           optarg == av[optind - 1] ? av[optind - 2] : av[optind - 1], optarg);
        if (ch >= OPT_SEQ) PS_TRY(check_scope(ch, o->cmd));
        switch (ch) {
        case 'm': o->model = optarg; break;
        case 'c': o->cluster = optarg; break;
        case OPT_SEQ: PS_TRY(parse_pos_int("seq", optarg, &o->mopts.seq)); break;
        case OPT_VOCAB_PAD: PS_TRY(parse_pos_int("vocab-pad", optarg, &o->mopts.vocab_pad)); break;
        case OPT_DTYPE: {
            ps_dtype d;
            if (ps_dtype_parse(optarg, &d) != PS_OK)
                return PS_FAIL(PS_ERR_INPUT, "option --dtype: unknown dtype '%s' (expected fp32, fp16, bf16, fp8)",
                               optarg);
            o->mopts.dtype = (int)d;
            break;
        }
        case OPT_FORMAT:
            if (strcmp(optarg, "table") == 0)
                o->format = PS_FMT_TABLE;
            else if (strcmp(optarg, "json") == 0)
                o->format = PS_FMT_JSON;
            else
                return PS_FAIL(PS_ERR_INPUT, "option --format: unknown format '%s' (expected table or json)", optarg);
            break;
        case OPT_OUT:
            if (!*optarg) return PS_FAIL(PS_ERR_INPUT, "option --out needs a file name");
            o->out = optarg;
            break;
        case OPT_DATA_DIR: o->data_dir = optarg; break;
        case OPT_TP: PS_TRY(parse_pos_int("tp", optarg, &o->tp)); break;
        case OPT_PP: PS_TRY(parse_pos_int("pp", optarg, &o->pp)); break;
        case OPT_DP: PS_TRY(parse_pos_int("dp", optarg, &o->dp)); break;
        case OPT_MBS: PS_TRY(parse_pos_int("mbs", optarg, &o->mbs)); break;
        case OPT_GBS: PS_TRY(parse_pos_int("gbs", optarg, &o->gbs)); break;
        case OPT_VPP: PS_TRY(parse_pos_int("vpp", optarg, &o->vpp)); break;
        case OPT_ZERO: {
            int64_t z;
            if (!ps_parse_i64(optarg, &z) || z < 0 || z > 3)
                return PS_FAIL(PS_ERR_INPUT, "option --zero needs a ZeRO stage 0, 1, 2 or 3 (got '%s')", optarg);
            o->zero = (int)z;
            break;
        }
        case OPT_RECOMPUTE: {
            ps_recompute r;
            if (ps_recompute_parse(optarg, &r) != PS_OK)
                return PS_FAIL(PS_ERR_INPUT, "option --recompute: expected none, selective or full (got '%s')",
                               optarg);
            o->recompute = optarg;
            break;
        }
        case OPT_SEQ_PARALLEL: o->seq_parallel = 1; break;
        case OPT_TP_OVERLAP: {
            /* the search takes auto or none, estimate a strategy's overlap: both checked where the command is known */
            ps_overlap ov;
            if (strcmp(optarg, "auto") != 0 && ps_overlap_parse(optarg, &ov) != PS_OK)
                return PS_FAIL(PS_ERR_INPUT, "option --tp-overlap: expected auto, none, cross-pass or oases (got '%s')",
                               optarg);
            o->tp_overlap = optarg;
            break;
        }
        case OPT_SCHEDULE: o->schedule = optarg; break;
        case OPT_PLAN: o->plan = optarg; break;
        case OPT_COST_PARAM:
            if (o->n_cost_params >= (int)(sizeof o->cost_params / sizeof o->cost_params[0]))
                return PS_FAIL(PS_ERR_INPUT, "option --cost-param given more than %zu times",
                               sizeof o->cost_params / sizeof o->cost_params[0]);
            o->cost_params[o->n_cost_params++] = optarg;
            break;
        case OPT_KIND: o->sched_kind = optarg; break;
        case OPT_STAGES: PS_TRY(parse_pos_int("stages", optarg, &o->stages)); break;
        case OPT_MICRO: PS_TRY(parse_pos_int("micro", optarg, &o->micro)); break;
        case OPT_FBW: o->fbw = optarg; break;
        case OPT_TIMES: o->times = optarg; break;
        case OPT_SVG:
            if (!*optarg) return PS_FAIL(PS_ERR_INPUT, "option --svg needs a file name");
            o->svg = optarg;
            break;
        case OPT_PASSES: o->passes = 1; break;
        case OPT_GBS_RANGE: o->gbs_range = optarg; break;
        case OPT_TOP: {
            int64_t t = 0;
            PS_TRY(parse_pos_int("top", optarg, &t));
            if (t > 1000) return PS_FAIL(PS_ERR_INPUT, "option --top must be at most 1000 (got %lld)", (long long)t);
            o->top = (int)t;
            break;
        }
        case OPT_MBS_MAX: PS_TRY(parse_pos_int("mbs-max", optarg, &o->mbs_max)); break;
        case OPT_MAX_TP: PS_TRY(parse_pos_int("max-tp", optarg, &o->max_tp)); break;
        case OPT_SCHEDULES: o->schedules = optarg; break;
        case OPT_MODELS: o->models = optarg; break;
        case OPT_CLUSTERS: o->clusters = optarg; break;
        case OPT_RESUME: o->resume = 1; break;
        case OPT_OBJECTIVE:
            o->objective = ps_search_objective_find(optarg);
            if (o->objective < 0) return PS_FAIL(PS_ERR_INPUT, "unknown --objective '%s' (known: throughput, memory)", optarg);
            break;
        case OPT_DISTRIBUTE:
            o->distribute = ps_dist_find(optarg);
            if (o->distribute < 0)
                return PS_FAIL(PS_ERR_INPUT, "unknown --distribute '%s' (known: dynamic, static)", optarg);
            break;
        case OPT_EXPORT:
            if (strcmp(optarg, "megatron") != 0 && strcmp(optarg, "deepspeed") != 0)
                return PS_FAIL(PS_ERR_INPUT, "unknown --export '%s' (known: megatron, deepspeed)", optarg);
            o->export_kind = optarg;
            break;
        case OPT_COSTDB:
            if (!*optarg) return PS_FAIL(PS_ERR_INPUT, "option --costdb needs a file name");
            o->costdb = optarg;
            break;
        case OPT_QUICK: o->quick = 1; break;
        case OPT_REPS: {
            int64_t r = 0;
            PS_TRY(parse_pos_int("reps", optarg, &r));
            if (r > 10000) return PS_FAIL(PS_ERR_INPUT, "option --reps must be at most 10000 (got %lld)", (long long)r);
            o->reps = (int)r;
            break;
        }
        case OPT_EXEC_TOP: {
            int64_t k = 0;
            PS_TRY(parse_pos_int("exec-top", optarg, &k));
            if (k > 100) return PS_FAIL(PS_ERR_INPUT, "option --exec-top must be at most 100 (got %lld)", (long long)k);
            o->exec_top = (int)k;
            break;
        }
        case OPT_ITERS: {
            int64_t k = 0;
            PS_TRY(parse_pos_int("iters", optarg, &k));
            if (k > 100000) return PS_FAIL(PS_ERR_INPUT, "option --iters must be at most 100000 (got %lld)", (long long)k);
            o->iters = (int)k;
            break;
        }
        case OPT_WARMUP: {
            int64_t k = 0;
            if (!ps_parse_i64(optarg, &k) || k < 0 || k > 100000)
                return PS_FAIL(PS_ERR_INPUT, "option --warmup needs an integer in [0, 100000] (got '%s')", optarg);
            o->warmup = (int)k;
            break;
        }
        case OPT_SCALE:
            PS_TRY(parse_pos_int("scale", optarg, &o->scale));
            if (o->scale > 1000000)
                return PS_FAIL(PS_ERR_INPUT, "option --scale must be at most 1000000 (got %lld)", (long long)o->scale);
            break;
        case OPT_BACKEND:
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0)
                return PS_FAIL(PS_ERR_INPUT, "unknown --backend '%s' (known: auto, cpu, cuda)", optarg);
            o->backend = optarg;
            break;
        case OPT_RECORD:
            if (!*optarg) return PS_FAIL(PS_ERR_INPUT, "option --record needs a file name");
            o->record = optarg;
            break;
        case OPT_WATCHDOG:
            if (!ps_parse_double(optarg, &o->watchdog) || !(o->watchdog > 0) || o->watchdog > 86400)
                return PS_FAIL(PS_ERR_INPUT, "option --watchdog needs seconds in (0, 86400] (got '%s')", optarg);
            break;
        case OPT_FROM_MEAS:
            if (!*optarg) return PS_FAIL(PS_ERR_INPUT, "option --from-measurements needs a file name");
            o->from_meas = optarg;
            break;
        case 'v': o->verbose = 1; break;
        case 'h': o->help = 1; break;
        case OPT_VERSION: o->version = 1; break;
        case ':': return PS_FAIL(PS_ERR_INPUT, "option '%s' needs a value", av[optind - 1]);
        default:
            /* An unknown letter inside "-xv" leaves optind on that word: name the letter, not the word before.
             * optopt is that letter (a char: negative past ASCII); a long option sets it to 0 or to its own value. */
            if (optopt != 0 && optopt < 256 && !(optopt > 0 && strchr("mcvh", optopt)))
                return PS_FAIL(PS_ERR_INPUT, "unknown option '-%c' (see psearch --help)", (char)optopt);
            return PS_FAIL(PS_ERR_INPUT, "unknown option '%s' (see psearch --help)", av[optind - 1]);
        }
    }
    if (optind < n) return PS_FAIL(PS_ERR_INPUT, "unexpected argument '%s' (see psearch --help)", av[optind]);
    if ((strcmp(o->cmd, "model") == 0 || strcmp(o->cmd, "cluster") == 0) && !o->sub && !o->help)
        return PS_FAIL(PS_ERR_INPUT, "'psearch %s' needs a subcommand: list or show", o->cmd);
    if (strcmp(o->cmd, "costdb") == 0 && !o->sub && !o->help)
        return PS_FAIL(PS_ERR_INPUT, "'psearch costdb' needs a subcommand: show or merge");
    /* calibrate and costdb merge write a database, not their printed summary, to --out. */
    if (strcmp(o->cmd, "calibrate") == 0 || (strcmp(o->cmd, "costdb") == 0 && o->sub && strcmp(o->sub, "merge") == 0)) {
        o->db_out = o->out;
        o->out = NULL;
    }
    if (strcmp(o->cmd, "sweep") == 0 && !o->help) {
        /* --out names the sweep's folder, not a file the command's output is committed to. */
        o->sweep_dir = o->out;
        o->out = NULL;
        if (!o->models || !o->clusters || !o->sweep_dir)
            return PS_FAIL(PS_ERR_INPUT, "'psearch sweep' needs --models LIST, --clusters LIST and --out DIR "
                                         "(see psearch sweep --help)");
    }
    if (strcmp(o->cmd, "exec") == 0 && !o->exec_plan && !o->help)
        return PS_FAIL(PS_ERR_INPUT, "'psearch exec' needs a plan file: psearch exec plan.json (see psearch exec --help)");
    if (strcmp(o->cmd, "plan") == 0 && !o->exec_top &&
        (o->iters || o->warmup >= 0 || o->scale > 0 || o->backend || o->record || o->watchdog > 0))
        return PS_FAIL(PS_ERR_INPUT, "--iters, --warmup, --scale, --backend, --record and --watchdog apply to executed "
                                     "plans: give --exec-top K (or use psearch exec plan.json)");
    if (o->exec_top && o->export_kind)
        return PS_FAIL(PS_ERR_INPUT, "--exec-top and --export do not go together: export the plan, or execute it");
    /* exec's model and cluster default to the plan file's own (ps_cmd_exec); the search's to the presets. */
    if (strcmp(o->cmd, "exec") == 0) return PS_OK;
    if (!o->model) o->model = PS_DEFAULT_MODEL;
    if (!o->cluster) o->cluster = PS_DEFAULT_CLUSTER;
    return PS_OK;
}

int ps_cli_needs_mpi(const ps_cli_opts *o)
{
    if (o->help || o->version) return 0;
    if (strcmp(o->cmd, "plan") == 0 || strcmp(o->cmd, "sweep") == 0 || strcmp(o->cmd, "exec") == 0) return 1;
    /* calibrate measures the MPI job it runs in; refitting from recorded measurements reads a file */
    if (strcmp(o->cmd, "calibrate") == 0) return o->from_meas == NULL;
    /* Describing the allocation gathers facts from every rank. */
    if (strcmp(o->cmd, "cluster") == 0 && o->sub && strcmp(o->sub, "show") == 0 && strcmp(o->cluster, "auto") == 0)
        return 1;
    return 0;
}

/* Command-line parsing for every psearch subcommand and the help: one option table, whose rows give getopt_long its
 * options, the scope check its commands, the values their parsing and target field, and each command's --help its
 * lines. Errors name the option and the value. */
#include <getopt.h>
#include <stddef.h>
#include <string.h>

#include "cli.h"
#include "ps_mpi.h"

typedef enum {
    OPT_FLAG, /* no value: the int field becomes 1 */
    OPT_STR,  /* the value as given (checked where it is used) */
    OPT_FILE, /* a file or folder name: not empty */
    OPT_I64,  /* a positive integer into an int64_t field, at most max (0: no limit) */
    OPT_INT,  /* the same into an int field */
    OPT_FN,   /* the row's own parser */
} opt_type;

/* One line of a command's --help: the command ("plan": psearch --help), the value's name there (NULL: the row's),
 * the text ('\n' where it wraps) and the default shown after it in brackets (NULL: none). */
typedef struct {
    const char *cmd, *arg, *text, *dflt;
} opt_help;

typedef struct opt_row opt_row;
struct opt_row {
    const char *name;
    char letter; /* the short option, 0 for none */
    opt_type type;
    const char *arg; /* the value's name in the help; NULL for a flag */
    size_t field;    /* offsetof(ps_cli_opts, ...) */
    /* The commands the option means something to (space-separated; NULL: every command). An option given to a
     * command that ignores it is refused, not silently dropped: `psearch --dp 8` is a search, and a search derives
     * dp from the GPUs, tp and pp. */
    const char *cmds;
    int64_t max;
    ps_status (*parse)(const opt_row *r, const char *val, ps_cli_opts *o); /* OPT_FN */
    opt_help help[3];
};

#define FIELD(o, r, type) ((type *)(void *)((char *)(o) + (r)->field))
#define AT(member) offsetof(ps_cli_opts, member)

static ps_status parse_pos_int(const char *opt, const char *val, int64_t *out)
{
    int64_t v;
    if (!ps_parse_i64(val, &v) || v <= 0)
        return PS_FAIL(PS_ERR_INPUT, "option --%s needs a positive integer (got '%s')", opt, val);
    *out = v;
    return PS_OK;
}

static ps_status parse_dtype(const opt_row *r, const char *val, ps_cli_opts *o)
{
    ps_dtype d;
    if (ps_dtype_parse(val, &d) != PS_OK)
        return PS_FAIL(PS_ERR_INPUT, "option --dtype: unknown dtype '%s' (expected fp32, fp16, bf16, fp8)", val);
    *FIELD(o, r, int) = (int)d;
    return PS_OK;
}

static ps_status parse_format(const opt_row *r, const char *val, ps_cli_opts *o)
{
    if (strcmp(val, "table") == 0)
        *FIELD(o, r, ps_format) = PS_FMT_TABLE;
    else if (strcmp(val, "json") == 0)
        *FIELD(o, r, ps_format) = PS_FMT_JSON;
    else
        return PS_FAIL(PS_ERR_INPUT, "option --format: unknown format '%s' (expected table or json)", val);
    return PS_OK;
}

static ps_status parse_zero(const opt_row *r, const char *val, ps_cli_opts *o)
{
    int64_t z;
    if (!ps_parse_i64(val, &z) || z < 0 || z > 3)
        return PS_FAIL(PS_ERR_INPUT, "option --zero needs a ZeRO stage 0, 1, 2 or 3 (got '%s')", val);
    *FIELD(o, r, int) = (int)z;
    return PS_OK;
}

static ps_status parse_recompute(const opt_row *r, const char *val, ps_cli_opts *o)
{
    ps_recompute rc;
    if (ps_recompute_parse(val, &rc) != PS_OK)
        return PS_FAIL(PS_ERR_INPUT, "option --recompute: expected none, selective, full or op (got '%s')", val);
    *FIELD(o, r, const char *) = val;
    return PS_OK;
}

/* the search takes auto or none, estimate a strategy's overlap: both checked where the command is known */
static ps_status parse_tp_overlap(const opt_row *r, const char *val, ps_cli_opts *o)
{
    ps_overlap ov;
    if (strcmp(val, "auto") != 0 && ps_overlap_parse(val, &ov) != PS_OK)
        return PS_FAIL(PS_ERR_INPUT, "option --tp-overlap: expected auto, none, cross-pass, oases or te (got '%s')",
                       val);
    *FIELD(o, r, const char *) = val;
    return PS_OK;
}

static ps_status parse_cp_comm(const opt_row *r, const char *val, ps_cli_opts *o)
{
    ps_cp_comm k;
    if (ps_cp_comm_parse(val, &k) != PS_OK) {
        ps_error_clear();
        return PS_FAIL(PS_ERR_INPUT, "option --cp-comm: expected ring, a2a or allgather (got '%s')", val);
    }
    *FIELD(o, r, const char *) = val;
    return PS_OK;
}

static ps_status parse_dp_overlap(const opt_row *r, const char *val, ps_cli_opts *o)
{
    if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0)
        return PS_FAIL(PS_ERR_INPUT, "option --dp-overlap: expected on or off (got '%s')", val);
    *FIELD(o, r, int) = strcmp(val, "on") == 0;
    return PS_OK;
}

/* estimate takes one kernel, the search also `search` (both, per layer): checked where the command is known */
static ps_status parse_attention(const opt_row *r, const char *val, ps_cli_opts *o)
{
    ps_attn a;
    if (strcmp(val, "search") != 0 && ps_attn_parse(val, &a) != PS_OK) {
        ps_error_clear();
        return PS_FAIL(PS_ERR_INPUT, "option --attention: expected auto, fused, unfused or search (got '%s')", val);
    }
    *FIELD(o, r, const char *) = val;
    return PS_OK;
}

static ps_status parse_cost_param(const opt_row *r, const char *val, ps_cli_opts *o)
{
    (void)r;
    if (o->n_cost_params >= (int)(sizeof o->cost_params / sizeof o->cost_params[0]))
        return PS_FAIL(PS_ERR_INPUT, "option --cost-param given more than %zu times",
                       sizeof o->cost_params / sizeof o->cost_params[0]);
    o->cost_params[o->n_cost_params++] = val;
    return PS_OK;
}

/* A name looked up by find (-1: unknown) into an int field. */
static ps_status parse_named(const opt_row *r, const char *val, ps_cli_opts *o, int (*find)(const char *),
                             const char *known)
{
    int v = find(val);
    if (v < 0) return PS_FAIL(PS_ERR_INPUT, "unknown --%s '%s' (known: %s)", r->name, val, known);
    *FIELD(o, r, int) = v;
    return PS_OK;
}

static ps_status parse_objective(const opt_row *r, const char *val, ps_cli_opts *o)
{
    return parse_named(r, val, o, ps_search_objective_find, "throughput, memory");
}

static ps_status parse_framework(const opt_row *r, const char *val, ps_cli_opts *o)
{
    return parse_named(r, val, o, ps_framework_find, "megatron, deepspeed, torchtitan, any");
}

static ps_status parse_distribute(const opt_row *r, const char *val, ps_cli_opts *o)
{
    return parse_named(r, val, o, ps_dist_find, "dynamic, static");
}

/* One of words (NULL-terminated) into a string field. */
static ps_status parse_word(const opt_row *r, const char *val, ps_cli_opts *o, const char *const *words)
{
    char known[128] = "";
    for (int i = 0; words[i]; i++) {
        if (strcmp(val, words[i]) == 0) {
            *FIELD(o, r, const char *) = val;
            return PS_OK;
        }
        ps_strcatf(known, sizeof known, "%s%s", i ? ", " : "", words[i]);
    }
    return PS_FAIL(PS_ERR_INPUT, "unknown --%s '%s' (known: %s)", r->name, val, known);
}

static ps_status parse_export(const opt_row *r, const char *val, ps_cli_opts *o)
{
    return parse_word(r, val, o, ps_plan_export_kinds);
}

static ps_status parse_backend(const opt_row *r, const char *val, ps_cli_opts *o)
{
    static const char *const words[] = {"auto", "cpu", "cuda", NULL};
    return parse_word(r, val, o, words);
}

static ps_status parse_warmup(const opt_row *r, const char *val, ps_cli_opts *o)
{
    int64_t k = 0;
    if (!ps_parse_i64(val, &k) || k < 0 || k > 100000)
        return PS_FAIL(PS_ERR_INPUT, "option --warmup needs an integer in [0, 100000] (got '%s')", val);
    *FIELD(o, r, int) = (int)k;
    return PS_OK;
}

static ps_status parse_watchdog(const opt_row *r, const char *val, ps_cli_opts *o)
{
    double *s = FIELD(o, r, double);
    if (!ps_parse_double(val, s) || !(*s > 0) || *s > 86400)
        return PS_FAIL(PS_ERR_INPUT, "option --watchdog needs seconds in (0, 86400] (got '%s')", val);
    return PS_OK;
}

/* The options in the order every command's --help lists them. */
static const opt_row k_options[] = {
    {"model", 'm', OPT_STR, "M", AT(model), NULL, 0, NULL,
     {{"plan", NULL, "model: preset name, psearch model JSON, HF config.json or *.layers file\n", PS_DEFAULT_MODEL}}},
    {"cluster", 'c', OPT_STR, "C", AT(cluster), NULL, 0, NULL,
     {{"plan", NULL, "cluster: PRESET:NODES, cluster.json, or 'auto' for this allocation\n", PS_DEFAULT_CLUSTER},
      {"exec", NULL, "the cluster the plan is for [the plan file's \"cluster\"]; --model likewise", NULL}}},
    {"seq", 0, OPT_I64, "N", AT(mopts.seq), NULL, 0, NULL,
     {{"plan", NULL, "sequence length in tokens", "the model's own"}}},
    /* at most 2^20: a pad is 128 x TP (Megatron's make-vocab-size-divisible-by), 8192 at TP 64; a value past the
     * largest vocabularies (about 2.6 x 10^5) is a typo, and the padded vocabulary x hidden would overflow */
    {"vocab-pad", 0, OPT_I64, "N", AT(mopts.vocab_pad), NULL, 1 << 20, NULL,
     {{"plan", NULL, "pad the vocabulary up to a multiple of N (1: no padding)",
       "search: 128 x GPUs per\nnode, as Megatron pads to 128 x TP; estimate: 128 x the plan's TP; model show: none"}}},
    {"dtype", 0, OPT_FN, "T", AT(mopts.dtype), NULL, 0, parse_dtype,
     {{"plan", NULL, "training dtype: fp32, fp16, bf16, fp8", "the model's own, bf16 for presets"}}},
    /* Plan fields: estimate's plan; on the search (plan, sweep) each fixes that field of every plan returned and the
     * rest is searched (ps_search_fixed). */
    {"tp", 0, OPT_I64, "N", AT(tp), "estimate plan sweep", 0, NULL,
     {{"estimate", NULL, "tensor-parallel degree", "1"},
      {"plan", NULL, "fix the tensor-parallel degree of every layer; the rest is searched", "searched"}}},
    {"pp", 0, OPT_I64, "N", AT(pp), "estimate plan sweep", 0, NULL,
     {{"estimate", NULL, "pipeline stages", "1"}, {"plan", NULL, "fix the pipeline degree", "searched"}}},
    {"cp", 0, OPT_I64, "N", AT(cp), "estimate plan sweep", 0, NULL,
     {{"estimate", NULL, "context-parallel degree: every sequence split over N GPUs", "1"},
      {"plan", NULL, "fix the context-parallel degree of every plan (1: none)", "searched"}}},
    {"cp-comm", 0, OPT_FN, "K", AT(cp_comm), "estimate plan sweep", 0, parse_cp_comm,
     {{"estimate", NULL, "context parallelism's attention: ring (K/V passed around, Megatron p2p), a2a\n"
                         "(Ulysses all-to-alls) or allgather (PyTorch's all-gather rotation, torchtitan)", "ring"},
      {"plan", NULL, "fix context parallelism's attention: ring, a2a or allgather (searched: ring, a2a)",
       "searched"}}},
    {"ep", 0, OPT_I64, "N", AT(ep), "estimate plan sweep", 0, NULL,
     {{"estimate", NULL, "expert-parallel degree of the MoE layers: their routed experts split over N GPUs", "1"},
      {"plan", NULL, "fix the expert-parallel degree of every plan (1: none)", "searched"}}},
    {"etp", 0, OPT_I64, "N", AT(etp), "estimate plan sweep", 0, NULL,
     {{"estimate", NULL, "expert tensor-parallel degree: each routed expert's matrices split over N GPUs", "tp"},
      {"plan", NULL, "fix the expert tensor-parallel degree of every plan", "searched"}}},
    {"dp", 0, OPT_I64, "N", AT(dp), "estimate", 0, NULL,
     {{"estimate", NULL, "data-parallel degree", "GPUs / (tp x cp x pp)"}}},
    {"mbs", 0, OPT_I64, "N", AT(mbs), "estimate plan sweep", 0, NULL,
     {{"estimate", NULL, "micro-batch size per data-parallel replica", "1"},
      {"plan", NULL, "fix the micro-batch size per data-parallel replica (not with --mbs-max)", "searched"}}},
    {"gbs", 0, OPT_I64, "N", AT(gbs), "plan estimate sweep", 0, NULL,
     {{"plan", NULL, "global batch size", "8 x GPUs"},
      {"estimate", NULL, "global batch size", "mbs x dp x 4 x pp: enough micro-batches for a short bubble"}}},
    {"kind", 0, OPT_STR, "K", AT(sched_kind), "schedule", 0, NULL,
     {{"schedule", NULL, "gpipe, 1f1b, interleaved, zb-h1, zb-h2, v-min, v-half, v-zb (docs/schedules.md)", NULL}}},
    {"stages", 0, OPT_I64, "D", AT(stages), "schedule", 0, NULL, {{"schedule", NULL, "pipeline devices", "4"}}},
    {"micro", 0, OPT_I64, "N", AT(micro), "schedule plan sweep", 0, NULL,
     {{"schedule", NULL, "micro-batches", "4 x D"},
      {"plan", NULL, "fix the number of micro-batches per iteration (Galvatron's settle_chunk)", "searched"}}},
    {"vpp", 0, OPT_I64, "N", AT(vpp), "estimate schedule", 0, NULL,
     {{"estimate", NULL, "model chunks per device; N > 1 alone means --schedule\ninterleaved",
       "1; 2 for interleaved and V schedules"},
      {"schedule", "V", "chunks per device for interleaved", "the kind's default: 2 for interleaved and V"}}},
    {"zero", 0, OPT_FN, "N", AT(zero), "estimate plan sweep", 0, parse_zero,
     {{"estimate", NULL, "ZeRO stage 0-3 of the data-parallel group", "0"},
      {"plan", NULL, "fix the ZeRO stage 0-3 of every layer (above 0: data-parallel plans only)", "searched"}}},
    {"recompute", 0, OPT_FN, "R", AT(recompute), "estimate plan sweep", 0, parse_recompute,
     {{"estimate", NULL, "activation recomputation: none, selective, full, op (torchtitan per-op)", "none"},
      {"plan", NULL, "fix the activation recomputation of every layer: none, selective, full, op\n"
                     "(op, torchtitan's per-op checkpointing, is searched under --framework torchtitan)",
       "searched"}}},
    {"seq-parallel", 0, OPT_FLAG, NULL, AT(seq_parallel), "estimate", 0, NULL,
     {{"estimate", NULL, "Megatron sequence parallelism (with tp > 1)", NULL}}},
    {"fbw", 0, OPT_STR, "F,B,W", AT(fbw), "schedule", 0, NULL,
     {{"schedule", NULL,
       "times of one micro-batch's forward, input-backward and weight-backward over a\n"
       "device's whole share of layers; chunks split them evenly",
       "1,1,1"}}},
    {"times", 0, OPT_STR, "FILE", AT(times), "schedule", 0, NULL,
     {{"schedule", NULL, "per-stage times instead: one line 'F B W [ACT]' per stage (D x V lines)", NULL}}},
    {"passes", 0, OPT_FLAG, NULL, AT(passes), "schedule", 0, NULL,
     {{"schedule", NULL, "with --format json, list every pass with its start and end", NULL}}},
    {"models", 0, OPT_STR, "LIST", AT(models), "sweep", 0, NULL,
     {{"sweep", NULL, "comma-separated models: presets or files (gpt3-1.3b,gpt3-65b)", NULL}}},
    {"clusters", 0, OPT_STR, "LIST", AT(clusters), "sweep", 0, NULL,
     {{"sweep", NULL,
       "comma-separated clusters: PRESET:NODES, cluster.json files or auto. A bare\n"
       "number continues the preset before it with another node count:\n"
       "dgx-a100-80g:1,2,4,8 is dgx-a100-80g:1,dgx-a100-80g:2,... (write ./8 for a\n"
       "file named 8)",
       NULL}}},
    {"gbs-range", 0, OPT_STR, "L:H:S", AT(gbs_range), "plan sweep", 0, NULL,
     {{"plan", NULL, "search the global batch too: L, L+S, ..., H", NULL}}},
    {"top", 0, OPT_INT, "K", AT(top), "plan sweep", 1000, NULL, {{"plan", NULL, "plans to show", "5"}}},
    {"mbs-max", 0, OPT_I64, "N", AT(mbs_max), "plan sweep", 0, NULL,
     {{"plan", NULL, "largest micro-batch per data-parallel replica tried", "16"}}},
    {"max-tp", 0, OPT_I64, "N", AT(max_tp), "plan sweep", 0, NULL,
     {{"plan", NULL, "largest tensor-parallel degree tried", "GPUs per node or NVLink domain"}}},
    {"schedules", 0, OPT_STR, "A,B", AT(schedules), "plan sweep", 0, NULL,
     {{"plan", NULL, "pipeline schedules tried",
       "all: gpipe, 1f1b, interleaved, zb-h1, zb-h2, v-min,\nv-half, v-zb"}}},
    {"objective", 0, OPT_FN, "O", AT(objective), "plan sweep", 0, parse_objective,
     {{"plan", NULL, "throughput (highest samples/s) or memory (lowest peak memory per GPU)\n", "throughput"}}},
    {"tp-overlap", 0, OPT_FN, "O", AT(tp_overlap), "plan estimate sweep", 0, parse_tp_overlap,
     {{"plan", NULL,
       "auto: per layer, also try TP with its collectives overlapped (Oases: cross-pass,\n"
       "and oases with fine-grained recomputation; with SP, Transformer Engine's te);\n"
       "none: plain Megatron TP only",
       "auto"},
      {"estimate", NULL,
       "TP collectives overlapped with computation: none, cross-pass (Oases), oases\n"
       "(cross-pass + fine-grained recomputation; needs --recompute full), or te\n"
       "(Transformer Engine's --tp-comm-overlap rings; needs --seq-parallel)",
       "none"}}},
    {"dp-overlap", 0, OPT_FN, "on|off", AT(dp_overlap), "plan estimate sweep", 0, parse_dp_overlap,
     {{"plan", NULL,
       "data-parallel collectives overlapped with computation as the frameworks do\n"
       "it (Megatron --overlap-grad-reduce/--overlap-param-gather, DeepSpeed\n"
       "overlap_comm, FSDP prefetch): on; off prices a run without it (all exposed)",
       "on"},
      {"estimate", NULL,
       "data-parallel collectives overlapped as the frameworks do (on), or all\n"
       "exposed (off)",
       "on"}}},
    {"attention", 0, OPT_FN, "A", AT(attention), "plan estimate sweep", 0, parse_attention,
     {{"plan", NULL,
       "attention kernel of every layer: fused (FlashAttention-2/3, cuDNN: no score\n"
       "matrix kept, scores recomputed in the backward), unfused (scores, softmax and\n"
       "dropout mask kept), auto (fused where every GPU has a fused kernel: compute\n"
       "capability 8.0+), or search (both, chosen per layer)",
       "auto"},
      {"estimate", NULL,
       "attention kernel: fused, unfused, or auto (fused where the GPUs have a\n"
       "fused kernel); with --plan, for the layers the file leaves auto",
       "auto"}}},
    {"distribute", 0, OPT_FN, "D", AT(distribute), "plan sweep", 0, parse_distribute,
     {{"plan", NULL,
       "how ranks share the search: dynamic (guided chunks of work units from a counter\n"
       "on rank 0, one-sided MPI) or static (by estimated work)",
       "dynamic"}}},
    {"schedule", 0, OPT_STR, "K", AT(schedule), "estimate plan sweep", 0, NULL,
     {{"estimate", NULL, "pipeline schedule (see docs/schedules.md)", "1f1b; interleaved with --vpp N > 1"},
      {"plan", NULL, "fix the pipeline schedule (--schedules K; not with --schedules)", "searched"}}},
    {"plan", 0, OPT_STR, "FILE", AT(plan), "estimate", 0, NULL,
     {{"estimate", NULL, "read the plan from a plan.json (what --format json prints) instead", NULL}}},
    {"iters", 0, OPT_INT, "N", AT(iters), "exec plan", 100000, NULL, {{"exec", NULL, "timed iterations", "5"}}},
    {"warmup", 0, OPT_FN, "W", AT(warmup), "exec plan", 0, parse_warmup,
     {{"exec", NULL, "iterations run first and not timed", "1"}}},
    {"backend", 0, OPT_FN, "B", AT(backend), "exec plan", 0, parse_backend,
     {{"exec", NULL, "auto, cpu or cuda",
       "auto: cuda when every rank sees a GPU; a plan for GPUs\n"
       "is refused on a machine without one unless --backend cpu is given"}}},
    {"scale", 0, OPT_I64, "F", AT(scale), "exec plan", 1000000, NULL,
     {{"exec", NULL, "divide every width and token count by F and predict that scaled model too\n",
       "16 for a GPU plan on the cpu backend, else 1"}}},
    {"record", 0, OPT_FILE, "DB.h5", AT(record), "exec plan", 0, NULL,
     {{"exec", NULL,
       "append the measurements to this cost database (created if missing); only\n"
       "runs predicted for the devices that ran them (not a GPU plan on CPUs)",
       NULL}}},
    {"cost-param", 0, OPT_FN, "NAME=VALUE", AT(cost_params), "plan estimate sweep exec", 0, parse_cost_param,
     {{"plan", NULL, "override a cost-model constant (docs/costmodel.md)", NULL},
      {"estimate", NULL, "override a cost-model constant (repeatable; docs/costmodel.md)", NULL}}},
    {"costdb", 0, OPT_FILE, "FILE", AT(costdb), "plan estimate sweep cluster exec", 0, NULL,
     {{"plan", NULL,
       "measured cost database (psearch calibrate); --cluster costdb plans for the\n"
       "machine it measured (docs/costdb.md)",
       NULL},
      {"estimate", NULL, "use the measured tables of a cost database (psearch calibrate)", NULL},
      {"exec", "DB.h5", "predict with its measured tables (and its refitted coefficients)", NULL}}},
    {"watchdog", 0, OPT_FN, "S", AT(watchdog), "exec plan", 0, parse_watchdog,
     {{"exec", NULL,
       "a wait for a message or collective longer than S seconds fails the run,\n"
       "naming the rank, the pass and the peer",
       "60"}}},
    {"format", 0, OPT_FN, "F", AT(format), NULL, 0, parse_format,
     {{"plan", NULL, "output: table or json", "table"}}},
    {"export", 0, OPT_FN, "K", AT(export_kind), "plan estimate", 0, parse_export,
     {{"plan", NULL,
       "print the best plan as the launch of framework K instead of the table: megatron\n(Megatron-LM arguments), "
       "deepspeed (config JSON) or torchtitan (TOML job config);\nimplies --framework K (docs/exports.md)",
       NULL},
      {"estimate", NULL,
       "print the plan as the launch of framework K (megatron, deepspeed, torchtitan)\ninstead of the prediction; "
       "with plan options, --recompute applies to the\ntransformer layers, as the frameworks recompute; exit 2 when "
       "K cannot run it",
       NULL}}},
    {"framework", 0, OPT_FN, "F", AT(framework), "plan sweep", 0, parse_framework,
     {{"plan", NULL,
       "search only plans framework F runs as exported, at the release docs/search.md\n"
       "names: megatron (Megatron-LM), deepspeed, torchtitan, or any",
       "any; --export K's framework"}}},
    {"svg", 0, OPT_FILE, "FILE", AT(svg), "plan schedule estimate", 0, NULL,
     {{"plan", NULL, "also write the best plan's pipeline timeline as SVG (atomically)", NULL},
      {"schedule", NULL, "write the timeline as SVG (atomically)", NULL},
      {"estimate", NULL, "also write the plan's pipeline timeline as SVG (atomically)", NULL}}},
    {"exec-top", 0, OPT_INT, "K", AT(exec_top), "plan", 100, NULL,
     {{"plan", NULL,
       "then execute the K best plans on this allocation and rank them by measured\n"
       "time (one rank per GPU; psearch exec --help for --iters, --backend, ...)",
       NULL}}},
    {"out", 0, OPT_FILE, "FILE", AT(out), NULL, 0, NULL,
     {{"plan", NULL, "write the output to FILE (atomically: all or nothing)", "standard output"},
      {"calibrate", NULL, "the database to write (atomically: a temporary beside it, renamed at the end)", NULL},
      {"sweep", "DIR", "where the tables and records go (created if missing)", NULL}}},
    {"quick", 0, OPT_FLAG, NULL, AT(quick), "calibrate", 0, NULL,
     {{"calibrate", NULL, "small shapes and sizes (1 KiB .. 1 MiB collectives), seconds on a CPU", NULL}}},
    {"reps", 0, OPT_INT, "N", AT(reps), "calibrate", 10000, NULL,
     {{"calibrate", NULL, "timed repetitions per point", "10; 5 with --quick"}}},
    /* costdb --help tells of it in its usage (the command lists no options) */
    {"replace", 0, OPT_FLAG, NULL, AT(db_replace), "costdb", 0, NULL, {{NULL, NULL, NULL, NULL}}},
    {"resume", 0, OPT_FLAG, NULL, AT(resume), "sweep", 0, NULL,
     {{"sweep", NULL,
       "continue the sweep recorded in DIR: finished cells are skipped; refused\n"
       "when DIR's records were made with other search options or other cells",
       NULL}}},
    {"compare", 0, OPT_FILE, "PREV_DIR", AT(sweep_compare), "sweep", 0, NULL,
     {{"sweep", NULL,
       "say in every table which cells changed since the sweep in PREV_DIR\n"
       "(plan, feasibility, samples/s) and why; without it, the newest folder\n"
       "of --history (docs/nightly.md)",
       NULL}}},
    {"history", 0, OPT_FILE, "DIR", AT(sweep_history), "sweep", 0, NULL,
     {{"sweep", NULL, "folder of earlier nights' sweep folders, by name in date order: each\n"
                      "cell's trend in index.html", NULL}}},
    {"nights", 0, OPT_INT, "N", AT(sweep_nights), "sweep", 366, NULL,
     {{"sweep", NULL, "nights a trend shows, tonight included", "14"}}},
    {"change-threshold", 0, OPT_STR, "PCT", AT(change_threshold), "sweep", 0, NULL,
     {{"sweep", NULL, "a change of the predicted samples/s above PCT percent counts", "2"}}},
    {"group-ranks", 0, OPT_INT, "N", AT(group_ranks), "sweep", 1000000, NULL,
     {{"sweep", NULL,
       "ranks per group: groups search cells side by side, the largest first;\n"
       "a cell larger than a group's share is searched by all ranks",
       "ranks / cells, at least 1"}}},
    {"data-dir", 0, OPT_STR, "DIR", AT(data_dir), NULL, 0, NULL,
     {{"plan", NULL, "folder holding models/ and clusters/ presets", "installed share/psearch"}}},
    {"verbose", 'v', OPT_FLAG, NULL, AT(verbose), NULL, 0, NULL,
     {{"plan", NULL, "on errors, also print where in psearch they were raised", NULL}}},
    {"help", 'h', OPT_FLAG, NULL, AT(help), NULL, 0, NULL,
     {{"plan", NULL, "this help; `psearch model --help`, `psearch cluster --help` for those", NULL}}},
    {"version", 0, OPT_FLAG, NULL, AT(version), NULL, 0, NULL,
     {{"plan", NULL, "version and library versions", NULL}}},
    /* calibrate --help tells of it in a paragraph of its own */
    {"from-measurements", 0, OPT_FILE, "DB.h5", AT(from_meas), "calibrate", 0, NULL, {{NULL, NULL, NULL, NULL}}},
};

enum { N_OPTIONS = sizeof k_options / sizeof k_options[0], OPT_LONG_ONLY = 256 };

/* Whether the space-separated list has the word w. */
static bool has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; n && (p = strstr(p, w)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

static ps_status check_scope(const opt_row *r, const char *cmd)
{
    if (!r->cmds || has_word(r->cmds, cmd)) return PS_OK;
    return PS_FAIL(PS_ERR_INPUT, "option --%s does not apply to 'psearch%s%s' (it is an option of: %s)", r->name,
                   strcmp(cmd, "plan") ? " " : "", strcmp(cmd, "plan") ? cmd : "", r->cmds);
}

static ps_status set_value(const opt_row *r, const char *val, ps_cli_opts *o)
{
    int64_t v = 0;
    switch (r->type) {
    case OPT_FLAG: *FIELD(o, r, int) = 1; return PS_OK;
    case OPT_STR: *FIELD(o, r, const char *) = val; return PS_OK;
    case OPT_FILE:
        if (!*val) return PS_FAIL(PS_ERR_INPUT, "option --%s needs a file name", r->name);
        *FIELD(o, r, const char *) = val;
        return PS_OK;
    case OPT_I64:
    case OPT_INT:
        PS_TRY(parse_pos_int(r->name, val, &v));
        if (r->max && v > r->max)
            return PS_FAIL(PS_ERR_INPUT, "option --%s must be at most %lld (got %lld)", r->name, (long long)r->max,
                           (long long)v);
        if (r->type == OPT_INT)
            *FIELD(o, r, int) = (int)v;
        else
            *FIELD(o, r, int64_t) = v;
        return PS_OK;
    case OPT_FN: return r->parse(r, val, o);
    }
    return PS_FAIL(PS_ERR_INPUT, "option --%s: no parser", r->name);
}

static ps_status unknown_command(const char *c)
{
    char names[256] = "";
    int n = 0;
    const ps_cli_command *cmds = ps_cli_commands(&n);
    for (int i = 0; i < n; i++)
        if (!cmds[i].implicit) ps_strcatf(names, sizeof names, "%s%s", names[0] ? ", " : "", cmds[i].name);
    return PS_FAIL(PS_ERR_INPUT, "unknown command '%s' (commands: %s; see psearch --help)", c, names);
}

ps_status ps_cli_parse(int argc, char **argv, ps_cli_opts *o)
{
    memset(o, 0, sizeof *o);
    o->cmd = "plan";
    o->zero = -1;
    o->framework = -1;
    o->dp_overlap = -1;
    o->warmup = -1;
    ps_model_opts_init(&o->mopts);

    /* The subcommand and its positional words come first: psearch model show gpt3-65b --format json. */
    int first = 1;
    if (argc > 1 && argv[1][0] != '-') {
        const ps_cli_command *c = ps_cli_command_find(argv[1]);
        first = 2;
        if (strcmp(argv[1], "help") == 0) {
            o->help = 1;
        } else {
            if (!c || c->implicit) return unknown_command(argv[1]);
            o->cmd = c->name;
            if (c->words) PS_TRY(c->words(argc, argv, o, &first));
        }
    }
    const ps_cli_command *cmd = ps_cli_command_find(o->cmd);

    /* getopt_long's view of the table: long-only options are told apart by OPT_LONG_ONLY + their row. */
    struct option longs[N_OPTIONS + 1];
    char shorts[2 * N_OPTIONS + 2] = ":", letters[N_OPTIONS + 1] = "";
    size_t ns = 1, nl = 0;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_row *r = &k_options[i];
        longs[i] = (struct option){r->name, r->type == OPT_FLAG ? no_argument : required_argument, NULL,
                                   r->letter ? r->letter : OPT_LONG_ONLY + (int)i};
        if (!r->letter) continue;
        letters[nl++] = r->letter;
        shorts[ns++] = r->letter;
        if (r->type != OPT_FLAG) shorts[ns++] = ':';
    }
    longs[N_OPTIONS] = (struct option){NULL, 0, NULL, 0};
    shorts[ns] = '\0';
    letters[nl] = '\0';

    /* getopt_long sees argv without the subcommand words. opterr = 0: we word the messages ourselves. optind = 0,
     * not 1: glibc then also forgets where it was inside a cluster of short options ("-vx" stopped at x), which
     * otherwise points into the argv of the previous call (found by tests/fuzz/fuzz_cli_options). */
    int n = argc - first + 1;
    char **av = argv + first - 1;
    opterr = 0;
    optind = 0;
    int ch;
    while ((ch = getopt_long(n, av, shorts, longs, NULL)) != -1) {
        /* getopt takes the next word as the value even when it is another option ("--model --format json"). */
        /* The option is the word before a separate value, or the word itself when the value is attached
         * ("--model=--format", "-m--format"). */
        if (optarg && optarg[0] == '-' && optarg[1] == '-')
            return PS_FAIL(PS_ERR_INPUT, "option '%s' needs a value (got the option '%s')",
                           optarg == av[optind - 1] ? av[optind - 2] : av[optind - 1], optarg);
        if (ch == ':') return PS_FAIL(PS_ERR_INPUT, "option '%s' needs a value", av[optind - 1]);
        const opt_row *r = NULL;
        if (ch >= OPT_LONG_ONLY && ch < OPT_LONG_ONLY + N_OPTIONS)
            r = &k_options[ch - OPT_LONG_ONLY];
        else
            for (size_t i = 0; ch != '?' && i < N_OPTIONS && !r; i++)
                if (k_options[i].letter == ch) r = &k_options[i];
        if (!r) {
            /* An unknown letter inside "-xv" leaves optind on that word: name the letter, not the word before.
             * optopt is that letter (a char: negative past ASCII); a long option sets it to 0 or to its own value. */
            if (optopt != 0 && optopt < OPT_LONG_ONLY && !(optopt > 0 && strchr(letters, optopt)))
                return PS_FAIL(PS_ERR_INPUT, "unknown option '-%c' (see psearch --help)", (char)optopt);
            return PS_FAIL(PS_ERR_INPUT, "unknown option '%s' (see psearch --help)", av[optind - 1]);
        }
        PS_TRY(check_scope(r, o->cmd));
        PS_TRY(set_value(r, optarg, o));
    }
    if (optind < n) return PS_FAIL(PS_ERR_INPUT, "unexpected argument '%s' (see psearch --help)", av[optind]);
    if (cmd->finish) PS_TRY(cmd->finish(o));
    /* exec's model and cluster default to the plan file's own (ps_cmd_exec); the search's to the presets. */
    if (cmd->inputs_from_plan) return PS_OK;
    if (!o->model) o->model = PS_DEFAULT_MODEL;
    if (!o->cluster) o->cluster = PS_DEFAULT_CLUSTER;
    return PS_OK;
}

ps_status ps_cli_options_check(void)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_row *r = &k_options[i];
        for (size_t j = 0; j < i; j++)
            if (strcmp(r->name, k_options[j].name) == 0 || (r->letter && r->letter == k_options[j].letter))
                return PS_FAIL(PS_ERR_INPUT, "option --%s: name or letter taken by --%s", r->name, k_options[j].name);
        if ((r->type == OPT_FN) != (r->parse != NULL))
            return PS_FAIL(PS_ERR_INPUT, "option --%s: a parser exactly when its type is OPT_FN", r->name);
        if ((r->type == OPT_FLAG) != (r->arg == NULL))
            return PS_FAIL(PS_ERR_INPUT, "option --%s: a value name exactly when it takes a value", r->name);
        for (const char *w = r->cmds; w && *w;) {
            char cmd[32];
            size_t n = strcspn(w, " ");
            ps_strlcpy(cmd, w, n + 1 < sizeof cmd ? n + 1 : sizeof cmd);
            if (!ps_cli_command_find(cmd))
                return PS_FAIL(PS_ERR_INPUT, "option --%s applies to an unknown command '%s'", r->name, cmd);
            w += n + (w[n] == ' ');
        }
        for (size_t k = 0; k < sizeof r->help / sizeof r->help[0] && r->help[k].cmd; k++) {
            const ps_cli_command *c = ps_cli_command_find(r->help[k].cmd);
            if (!c || !c->help_col)
                return PS_FAIL(PS_ERR_INPUT, "option --%s: help for '%s', which lists no options", r->name,
                               r->help[k].cmd);
            if (r->cmds && !has_word(r->cmds, c->name))
                return PS_FAIL(PS_ERR_INPUT, "option --%s: help for '%s', to which it does not apply", r->name,
                               c->name);
        }
    }
    return PS_OK;
}

/* Text with line breaks, each continued at column col. */
static void put_indented(FILE *f, const char *s, int col)
{
    for (; *s; s++) {
        fputc(*s, f);
        if (*s == '\n' && s[1]) fprintf(f, "%*s", col, "");
    }
}

/* Spaces from column w to col, and at least min of them. */
static void pad(FILE *f, int w, int col, int min) { fprintf(f, "%*s", w + min > col ? min : col - w, ""); }

void ps_cli_options_help(FILE *f, const ps_cli_command *cmd)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_row *r = &k_options[i];
        for (size_t k = 0; k < sizeof r->help / sizeof r->help[0] && r->help[k].cmd; k++) {
            const opt_help *h = &r->help[k];
            if (strcmp(h->cmd, cmd->name) != 0) continue;
            int w = cmd->short_col ? (r->letter ? fprintf(f, "  -%c, --%s", r->letter, r->name)
                                                : fprintf(f, "      --%s", r->name))
                                   : fprintf(f, "  --%s", r->name);
            const char *arg = h->arg ? h->arg : r->arg;
            if (arg) w += fprintf(f, " %s", arg);
            pad(f, w, cmd->help_col, 2);
            /* the default follows the text, on the next line when the text ends with one */
            char line[512];
            size_t len = strlen(h->text);
            if (h->dflt)
                snprintf(line, sizeof line, "%s%s[%s]", h->text, len && h->text[len - 1] == '\n' ? "" : " ", h->dflt);
            else
                ps_strlcpy(line, h->text, sizeof line);
            put_indented(f, line, cmd->help_col);
            fputc('\n', f);
        }
    }
}

/* psearch --help: one line per command, then the search's own options. */
static void usage_main(FILE *f, const ps_cli_command *plan)
{
    enum { col = 42 }; /* where the commands' summaries start */
    int n = 0;
    const ps_cli_command *cmds = ps_cli_commands(&n);
    for (int i = 0; i < n; i++) {
        int w = fprintf(f, "%spsearch %s", i == 0 ? "usage: " : "       ", cmds[i].synopsis);
        pad(f, w, col, 3);
        put_indented(f, cmds[i].summary, col);
        fputc('\n', f);
    }
    fputs(plan->usage, f);
    ps_cli_options_help(f, plan);
    fputs(plan->usage_end, f);
}

void ps_cli_usage(FILE *f, const char *cmd)
{
    const ps_cli_command *c = cmd ? ps_cli_command_find(cmd) : NULL;
    if (!c || c->implicit) {
        usage_main(f, ps_cli_command_find("plan"));
        return;
    }
    fputs(c->usage, f);
    if (c->help_col) ps_cli_options_help(f, c);
    if (c->usage_end) fputs(c->usage_end, f);
}

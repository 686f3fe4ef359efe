/* The plan search: global batch x pipeline degree x schedule x micro-batch count x partition x strategies, each
 * candidate costed with the cost model (costdb/) and the best ones kept. Pure: no MPI and no I/O here; mpi/ drives a
 * job's work units from several ranks through a ps_search_source and reduces the results. */
#ifndef PS_SEARCH_H
#define PS_SEARCH_H

#include <stdint.h>

#include "ps_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Baselines printed beside the winner (search/baselines.c). */
enum { PS_BASE_MEGATRON = 0, PS_BASE_DP, PS_BASE_ZERO3, PS_BASE_EVEN, PS_BASE_COUNT };

/* What "best" means: highest samples/s (the default), or lowest peak memory per GPU (CAPTURE's objective). */
enum { PS_SEARCH_THROUGHPUT = 0, PS_SEARCH_MEMORY = 1 };
/* "throughput" / "memory": the objective's name on the command line, in the JSON and in sweep records. */
const char *ps_search_objective_name(int objective);
int ps_search_objective_find(const char *name); /* -1 when unknown */

/* Plan fields fixed by the user (Galvatron's settle_chunk and its kin): every plan the search returns has these values,
 * and the rest of the plan is searched. Counts are fixed when positive (0: searched); zero and recompute, whose 0 is a
 * value, when >= 0 (-1: searched). A fixed schedule is a one-kind ps_search_opts.schedules list. */
typedef struct {
    int tp;          /* tensor-parallel degree of every layer */
    int pp;          /* pipeline degree */
    int zero;        /* ZeRO stage of every layer (with dp 1 there is no ZeRO: such plans are left out) */
    int recompute;   /* ps_recompute of every layer */
    int64_t mbs;     /* micro-batch size per data-parallel replica (instead of the range up to mbs_max) */
    int64_t micro;   /* micro-batches per iteration */
    int cp;          /* context-parallel degree (1: none) */
    int cp_comm;     /* context parallelism's kind + 1 (ps_cp_comm: 1 ring, 2 a2a); 0: searched */
    int ep;          /* expert-parallel degree of the MoE layers (1: none) */
    int etp;         /* their expert tensor-parallel degree */
} ps_search_fixed;
/* "tp 4, 8 micro-batches": the fixed fields as the output and the binding message name them ("" when none). */
void ps_search_fixed_describe(const ps_search_fixed *f, char *buf, size_t cap);

typedef struct {
    int64_t gbs_lo, gbs_hi, gbs_step; /* global batch sizes tried: lo, lo+step, ..., hi (lo == hi: fixed) */
    int64_t mbs_max;                  /* largest micro-batch per data-parallel replica tried [16] */
    int max_tp;                       /* largest tensor-parallel degree; 0 = the GPUs of a node, or of an NVLink
                                         domain where nodes share one (TP stays off the network: Galvatron-BMW
                                         Takeaway #1, Megatron practice) */
    const char *const *schedules;     /* schedule kinds tried; NULL = every kind of schedules/ */
    int n_schedules;
    int top_k;                        /* plans kept [5] */
    int per_layer;                    /* refine each candidate's stages with the per-layer strategy DP [1] */
    int balance;                      /* also cost Galvatron-BMW's bi-objective (memory/time balanced) partition [1] */
    int objective;                    /* PS_SEARCH_THROUGHPUT or PS_SEARCH_MEMORY [throughput] */
    int quanta;                       /* memory levels of the per-layer DP [256] */
    int overlap;                      /* also try TP with overlapped collectives (Oases: cross-pass, oases; Transformer
                                         Engine's te beside SP) [1] */
    bool dp_no_overlap;               /* every strategy's DP collectives not overlapped (ps_strategy.dp_no_overlap):
                                         a framework run without overlap [false] */
    bool dp_overlap_given;            /* the user chose dp_no_overlap (--dp-overlap): under a framework, strategies it
                                         runs only the other way are left out; else each takes the way the framework
                                         runs it (ps_framework_rules.dp_overlap / dp_exposed) [false] */
    int attention;                    /* the attention kernel of every layer (a ps_attn; PS_ATTN_AUTO: fused when every
                                         GPU of the cluster has one, ps_search_attention), or PS_SEARCH_ATTN_BOTH: fused
                                         and unfused, chosen per layer [auto] */
    int framework;                    /* a ps_framework: only plans that framework runs as exported are searched
                                         (ps_framework_rules, docs/search.md "Frameworks") [PS_FW_ANY: every plan] */
    ps_search_fixed fixed;            /* plan fields the user fixed; the rest is searched [none] */
} ps_search_opts;
#define PS_SEARCH_ATTN_BOTH ((int)PS_ATTN_COUNT)
/* The attention kernels the search tries on cluster c under o->attention: auto resolved for the whole cluster (fused
 * when every GPU has a fused kernel), both only where the cluster has fused kernels. Returns how many (1 or 2). */
int ps_search_attention(const ps_search_opts *o, const ps_cluster *c, ps_attn out[2]);

void ps_search_opts_default(ps_search_opts *o);

/* The largest pipeline degree the search and the baselines take. Every stage holds at least one transformer layer
 * and the largest models here have a few hundred, so a degree above this is a wrong input, not a plan; the search's
 * workspaces are sized by the unit's degree, not by this. */
#define PS_SEARCH_MAX_PP 4096

typedef struct {
    ps_plan plan;
    ps_prediction pred;
    int64_t index;        /* position in the enumeration: the last tie-breaker, so results do not depend on ranks or
                             threads */
} ps_search_cand;

typedef struct {
    ps_search_cand *top;  /* best first in ps_search_cand_order for the objective */
    int n_top;
    /* baselines (PS_BASE_*): ps_search_run fills PS_BASE_EVEN, the best plan whose stages split the layers evenly;
     * the caller adds the rule-based ones with ps_search_baseline. why: the reason a missing one is missing. */
    ps_search_cand base[PS_BASE_COUNT];
    int have_base[PS_BASE_COUNT];
    char base_why[PS_BASE_COUNT][160];
    int64_t candidates;   /* (batch, pp, schedule, micro-batches) combinations (work units) this run searched */
    int64_t evaluated;    /* plans costed with the full model (schedule simulation) */
    int64_t feasible;     /* of those, plans that fit in memory */
    int64_t pruned;       /* plans and candidates skipped because an upper bound on their samples/s could not reach
                             the top k: evaluated and pruned depend on the order the work was done in (threads,
                             ranks); the results do not */
    double dp_cells;      /* dynamic-programming cells visited (stage tables, partition fronts, layer DPs) */
    char binding[512];    /* when nothing fits: the constraint that bound (memory, divisibility, batch) */
    double min_over;      /* bytes the plan closest to fitting lacks on its worst stage (INFINITY: none tried);
                             merging results keeps the binding of the smallest, so it does not depend on ranks */
    int min_over_bound;   /* 1: min_over is only a lower bound (a plan skipped by its static memory, never costed);
                             a costed plan's shortfall always ranks first (ps_search_over_less) */
    int64_t min_over_unit; /* the work unit of that plan: equal shortfalls rank by unit, so the binding message names
                              the same plan whichever thread or rank searched it */
} ps_search_result;

/* A lower bound on the makespan of an unchunked pipeline (stage d on device d) with m micro-batches, from each stage's
 * F + B pass times u[d] for one micro-batch (B without W where the kind splits W off): under ps_sched_simulate's rules
 * device d's first pass is a forward after the first micro-batch's forwards on every stage before it, its last B (or
 * BW) comes after all of its m F and m B passes, and that micro-batch's backward then still runs through every stage
 * before it. So makespan >= max_d (sum_{k<d} u[k] + m u[d]) for every schedule kind without chunks. It only grows
 * with each u[d], so lower bounds of the u[d] give a lower bound. The search prunes with it (tests/search). */
double ps_search_pipeline_lb(const double *u, int K, int64_t m);
/* The least of ps_search_pipeline_lb over every split of a total U into K stage times: a bound before a partition. */
double ps_search_pipeline_lb_any(double U, int K, int64_t m);

/* The order of "closest to fitting" when results merge: a costed plan's shortfall (bound 0) before any lower bound's
 * (bound 1), then the smaller shortfall, then the earlier work unit (plans of one unit are tried in a fixed order by
 * one thread, the first kept). */
bool ps_search_over_less(double a, int a_bound, int64_t a_unit, double b, int b_bound, int64_t b_unit);

/* Search. PS_OK with n_top == 0 when nothing is feasible (binding says why): the caller turns that into exit 1. */
ps_status ps_search_run(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, const ps_search_opts *o,
                        ps_search_result *out) PS_NODISCARD;

/* ---- the search as a job of work units, for a driver that shares them out (mpi/) ----
 * A unit is one (global batch, pipeline degree, schedule, micro-batch count) combination; its position in the
 * enumeration is the first part of every plan index, so the total order does not depend on who searched it. */
typedef struct ps_search_job ps_search_job;
/* Check the options and list the units. cp, m and c must outlive the job; o is copied (its schedule list is not). */
ps_status ps_search_job_create(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                               const ps_search_opts *o, ps_search_job **job) PS_NODISCARD;
void ps_search_job_free(ps_search_job *job);
int64_t ps_search_job_units(const ps_search_job *job);
/* Estimated work of unit u, in DP cells (stage tables, partition DPs, schedule simulations): for static balancing;
 * only ratios between units mean anything. */
double ps_search_job_unit_work(const ps_search_job *job, int64_t u);

typedef struct {
    /* The next unit to search, or -1 when there is none left. Called by one thread at a time (the search serializes
     * the calls), so it may communicate under MPI_THREAD_SERIALIZED. */
    int64_t (*next)(void *arg);
    /* Optional: the unit next() would return now, without taking it, or -1 when that is not known. A thread then
     * takes the following units that share its unit's layer tables with it (same batch, pipeline degree,
     * micro-batches and context parallelism: its schedule kinds and expert grids), so that one worker builds them. */
    int64_t (*peek)(void *arg);
    /* Optional. Called by one thread at a time after each unit of the throughput objective with the floors known on
     * this rank (*top: a k-th best samples/s, *even: a best even-split samples/s; 0 when none yet); it may raise them
     * to values known elsewhere. A raised floor must be a samples/s of plans that exist (k of them for *top), so that
     * pruning below it changes no result. */
    void (*share)(void *arg, double *top, double *even);
    void *arg;
} ps_search_source;
/* Search the units the source hands out, with OpenMP threads; out holds this share's top k, even-split best,
 * counters and binding, as ps_search_run's. */
ps_status ps_search_job_run(ps_search_job *job, const ps_search_source *src, ps_search_result *out) PS_NODISCARD;
void ps_search_result_free(ps_search_result *r);

/* The total order of results. Throughput: a before b when it is faster, then lighter (peak memory per GPU), then
 * earlier in the enumeration (index). Memory: lighter, then faster, then earlier. <0, 0 (same index), >0. */
int ps_search_cand_order(const ps_search_cand *a, const ps_search_cand *b, int objective);
/* How much better `best` is than `base` under the objective: the samples/s ratio (throughput), or base's peak memory
 * per GPU over best's (memory). The gain printed beside every baseline and recorded by sweeps. */
double ps_search_gain(const ps_search_cand *best, const ps_search_cand *base, int objective);
/* The fields that order compares, as fixed-size data: mpi/ reduces them with an MPI_Op, which sees bytes, not plans,
 * and orders them with ps_search_key_order, so ranks and the search cannot disagree on the order. */
typedef struct {
    double samples_per_s;
    double peak;          /* ps_prediction_peak */
    int64_t index;
} ps_search_key;
ps_search_key ps_search_cand_key(const ps_search_cand *c);
int ps_search_key_order(const ps_search_key *a, const ps_search_key *b, int objective);
/* The stage furthest over (or least under) its GPUs' memory. */
int ps_prediction_worst_stage(const ps_prediction *p);
/* The largest TP degree the search tries: --max-tp, or the GPUs of a node or NVLink domain (group 0's). */
int ps_search_max_tp(const ps_search_opts *o, const ps_cluster *c);
/* When nothing fits and no memory shortfall was seen, say what else bound: a batch smaller than the fewest
 * data-parallel replicas, more micro-batches than plans are simulated with, no divisible combination, no TP split. */
void ps_search_explain(ps_search_result *r, const ps_search_opts *o, const ps_model *m, const ps_cluster *c);

/* ---- frameworks (search/framework.c): what a training framework, at a stated version, can run as exported ----
 * The search restricted with --framework X only returns plans X runs, and `--export X` writes exactly that plan. */
typedef enum { PS_FW_ANY = 0, PS_FW_MEGATRON, PS_FW_DEEPSPEED, PS_FW_TORCHTITAN, PS_FW_COUNT } ps_framework;
/* "Transformer layers" below are the layers with an attention core (ps_layer_has_attention): what the frameworks'
 * recomputation, kernels and pipeline splits count as layers; embeddings, heads and Swin's merges are not. */
/* How a framework's pipeline flags can split the layers. */
typedef enum {
    PS_FW_PART_ANY = 0,  /* any partition (Megatron-LM --pipeline-model-parallel-layout, torchtitan's module lists) */
    PS_FW_PART_UNIFORM,  /* only the framework's own even split (DeepSpeed partition_method "uniform") */
} ps_fw_partition;
typedef struct {
    const char *name;         /* "megatron", ... (the --framework / --export word) */
    const char *title;        /* "Megatron-LM" */
    const char *version;      /* the release whose rules are coded here, with the source read */
    bool uniform;             /* one strategy (tp, sp, zero, recompute, overlap, attention, dp overlap) for every
                                 transformer block; embeddings and heads follow the blocks' tp */
    const char *const *schedules; /* schedule kinds (schedules/) it runs; NULL-terminated */
    ps_fw_partition partition;
    int max_vpp;              /* model chunks per device it takes (1: none) */
    bool zero[4];             /* ZeRO stages it runs with pp == 1 */
    bool zero_pp[4];          /* ... and with pp > 1 */
    bool overlap[PS_OVERLAP_COUNT]; /* TP overlap kinds */
    bool recompute[PS_RECOMP_COUNT]; /* ps_recompute kinds, of the transformer layers (ps_framework_effective_ckpt) */
    /* ---- added with the exports (#22); ps_framework_runs checks every one ---- */
    bool sp;                  /* Megatron sequence parallelism with tp > 1 */
    bool sp_required;         /* tp > 1 only with sequence parallelism (torchtitan's TP plan shards the sequence) */
    bool attention[PS_ATTN_COUNT]; /* attention kernels of the transformer layers (AUTO: left to the caller) */
    bool recompute_blocks_only; /* embeddings and heads never recomputed: their effective ckpt must be none */
    bool recompute_partial;   /* also full recomputation of the first n blocks of every model chunk and none on the
                                 rest, the same n everywhere (Megatron --recompute-method block; ..._block_n) */
    bool part_blocks_balanced; /* PS_FW_PART_UNIFORM: also its split balancing the transformer layers alone
                                  (DeepSpeed partition_method "type:"); ps_framework_fixed_cuts gives both */
    bool dtype[4];            /* ps_dtype values it trains in */
    bool zero_pp_bf16[4];     /* ZeRO stages with pp > 1 when training in bf16 or fp8 (replaces zero_pp there) */
    bool zero_model_parallel[4]; /* ZeRO stages it runs with dp > 1 beside tp > 1 or pp > 1 */
    bool dp_overlap[2][4];    /* [pp > 1][zero], dp > 1: runs the DP collectives overlapped (dp_no_overlap false) */
    bool dp_exposed[2][4];    /* [pp > 1][zero], dp > 1: runs them after the backward (dp_no_overlap true) */
    bool kv_heads_div_tp;     /* key/value heads must divide by tp (no replication of kv heads) */
    bool cp[PS_CP_COMM_COUNT]; /* context-parallel kinds it runs with cp > 1 (none: no context parallelism) */
    int cp_seq_multiple;      /* cp > 1: every layer's sequence a multiple of this x cp (Megatron-LM: 2, for either
                                 kind) */
    bool cp_zero[4];          /* ZeRO stages it runs with cp > 1 */
    int seq_tp_multiple;      /* > 1: every layer's sequence a multiple of this x tp */
    bool (*model_runs)(const ps_model *m, char *why, size_t cap); /* the models it builds; NULL: any */
} ps_framework_rules;
const ps_framework_rules *ps_framework_get(ps_framework f); /* NULL for PS_FW_ANY */
/* Whether r lists schedule kind `name` among those it runs. */
bool ps_framework_has_schedule(const ps_framework_rules *r, const char *name);
int ps_framework_find(const char *name);                    /* a ps_framework, or -1 when unknown */
const char *ps_framework_name(ps_framework f);              /* "any", "megatron", "deepspeed", "torchtitan" */
/* true when framework f runs plan p of model m exactly as planned; else false with the first rule it breaks in
 * why (a sentence naming the plan field and what the framework takes). PS_FW_ANY runs everything. */
bool ps_framework_runs(ps_framework f, const ps_model *m, const ps_plan *p, char *why, size_t cap);
/* Whether framework f shards layer l (index i, for the message) with tensor-parallel degree tp: whole key/value heads
 * per rank (kv_heads_div_tp), the sequence a multiple of seq_tp_multiple x tp (x cp), and of cp_seq_multiple x cp
 * with context parallelism (cp > 1); else false with why. The rule
 * ps_framework_runs applies to every layer and the search to the TP degrees it tries (PS_FW_ANY: any tp >= 1). */
bool ps_framework_tp_ok(ps_framework f, const ps_layer *l, int tp, int cp, int64_t i, char *why, size_t cap);
/* Boundary s (0..parts) of n layers split into `parts` stages by DeepSpeed's partition_uniform: the split a
 * PS_FW_PART_UNIFORM framework makes, which the search then takes as the only partition. */
int64_t ps_framework_uniform_cut(int64_t n, int parts, int s);
/* The restriction of o (framework, fixed fields, schedules named) against itself and cluster c: what no plan can have
 * (a TP degree that does not divide the GPUs, a ZeRO stage or schedule the framework does not run) is a wrong input,
 * PS_ERR_INPUT, not an infeasible search. ps_search_job_create checks it; a caller may first, to name its options. */
ps_status ps_search_opts_check(const ps_search_opts *o, const ps_cluster *c) PS_NODISCARD;
/* The part of ps_search_opts_check that needs no framework: o->fixed against cluster c, o->max_tp and a fixed global
 * batch (a tp or pp that does not divide the GPUs, a micro-batch count that does not divide the batch or that plans
 * are not simulated with), PS_ERR_INPUT naming the option as the command line spells it (--tp, --pp, --micro). */
ps_status ps_search_fixed_check(const ps_search_opts *o, const ps_cluster *c) PS_NODISCARD;
/* Model m and cluster c against o's framework, before searching: a model the framework does not build, a dtype it
 * does not train in, or a cluster without the attention kernel it runs (o->attention included) leaves no plan, so it
 * is a wrong input, PS_ERR_INPUT naming the rule. ps_search_job_create checks it; a caller may first. */
ps_status ps_search_model_check(const ps_search_opts *o, const ps_model *m, const ps_cluster *c) PS_NODISCARD;
/* Whether the search under o may return plan p of model m: o->framework runs it (ps_framework_runs) and it has every
 * field o->fixed fixes; else false with the first rule it breaks in why. */
bool ps_search_plan_allowed(const ps_search_opts *o, const ps_model *m, const ps_plan *p, char *why, size_t cap);
/* The search's guarantee, checked on what it returns: every top-k plan and the even-split baseline pass
 * ps_search_plan_allowed, and every rule-based baseline ps_framework_runs (baselines keep their own rules, not the
 * fixed fields). A failure is a bug of the search: PS_ERR_SYSTEM naming the plan and the rule. */
ps_status ps_search_result_check(const ps_search_opts *o, const ps_model *m, const ps_search_result *r) PS_NODISCARD;
/* The splits a PS_FW_PART_UNIFORM framework computes itself for `stages` stages of m: k = 0 its uniform split of the
 * layer list, k = 1 (part_blocks_balanced) its balanced split of the transformer layers. Fills cuts[stages + 1];
 * false when k names no split of f (or memory ran out). */
bool ps_framework_fixed_cuts(ps_framework f, int k, const ps_model *m, int stages, int64_t *cuts);
/* The recomputation layer l runs under s as the cost model prices it: selective on a layer without attention or
 * with a fused kernel repeats nothing, so it is none. */
ps_recompute ps_framework_effective_ckpt(const ps_layer *l, const ps_strategy *s);
/* Megatron's --recompute-method block: n >= 1 when p fully recomputes the first n transformer layers of every model
 * chunk (all of a chunk's when it holds at most n) and none of the rest, and not all layers alike; 0 when every
 * transformer layer is recomputed alike (or none); -1 for any other pattern. */
int64_t ps_framework_recompute_block_n(const ps_model *m, const ps_plan *p);
/* The torchtitan llama3 flavor ("8B", ...) whose shape m has, or NULL. */
const char *ps_framework_torchtitan_flavor(const ps_model *m);

/* ---- baselines (search/baselines.c) ---- */
const char *ps_baseline_name(int kind); /* "megatron", "dp-only", "zero3-only", "even-split" */
const char *ps_baseline_desc(int kind);
/* The best plan of a rule-based baseline (PS_BASE_MEGATRON, PS_BASE_DP, PS_BASE_ZERO3) over the batch range and
 * micro-batch sizes of o, in the objective's order, costed with ps_cost_plan. *found = 0 and `why` says what stopped
 * it when nothing fits. (PS_BASE_EVEN comes from ps_search_run.) */
ps_status ps_search_baseline(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                             const ps_search_opts *o, int kind, ps_search_cand *out, int *found, char *why,
                             size_t why_cap) PS_NODISCARD;

#ifdef __cplusplus
}
#endif
#endif

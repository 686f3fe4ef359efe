/* cost/: the cost model: time and memory of one layer under one strategy on concrete devices, of collectives and p2p
 * transfers over the real placement, and of a whole plan (pipeline schedule included); plan.json. Shared by the
 * search, `psearch estimate` and `psearch exec`. Pure computation: no MPI, no HDF5, no I/O but plan JSON. Numbers
 * come from the GPU catalog and documented constants (ps_cost_params); a cost database's measured tables
 * (ps_costdb_model, built by costdb/ from --costdb) replace them for its devices. */
#ifndef PS_COST_H
#define PS_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "ps_common.h"
#include "ps_hw.h"
#include "ps_models.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- constants: every default has a unit and a source (cost/params.c, docs/costmodel.md) ---- */
typedef struct {
    double gemm_eff;          /* fraction of dense tensor peak a large, math-bound GEMM reaches [1]; 0: by GPU
                                 (ps_cost_gemm_eff) */
    double hbm_eff;           /* fraction of nominal memory bandwidth a streaming kernel reaches [1] */
    double kernel_launch_s;   /* fixed cost per GEMM / fused elementwise kernel [s] */
    double elementwise_passes; /* memory traffic of the non-GEMM work, in multiples of the activation bytes stored
                                  by the layer (forward; backward is twice this) [1] */
    double link_eff_nvlink;   /* achievable NCCL bus bandwidth as a fraction of the nominal link bandwidth [1] */
    double link_eff_pcie;
    double link_eff_ib;
    double link_eff_eth;
    double overlap_slowdown;  /* compute and communication running at once both slow down by this factor [1] */
    double reserve_bytes;     /* per-GPU memory psearch never plans into: CUDA context, NCCL buffers, allocator
                                 fragmentation [bytes] */
    double grad_reduce_bytes; /* bytes per gradient element in the data-parallel reduction [bytes] */
    double compute_scale;     /* every computation time (GEMMs, elementwise, optimizer) is multiplied by this [1] */
    double comm_scale;        /* every collective and point-to-point time is multiplied by this [1] */
    /* Fused attention kernels: the fraction of the dense tensor peak their forward and backward reach. 0 (the
     * default): the figure of the GPU's generation (cost/layer_cost.c, fused_eff, with sources) [1] */
    double attn_fwd_eff;
    double attn_bwd_eff;
    double gemm_tile_m;       /* output tile of the analytic GEMM shape model (ps_cost_gemm_time): rows and columns a
                                 thread block computes [elements]; 0 in either turns the shape model off [1] */
    double gemm_tile_n;
    /* Data-parallel gradient buckets (docs/costmodel.md, "Data-parallel overlap"): a bucket closes once it holds
     * max(dp_bucket_elems, dp_bucket_elems_per_rank x dp) parameters of the GPU (Megatron-core's default rule) */
    double dp_bucket_elems;          /* [elements] */
    double dp_bucket_elems_per_rank; /* [elements per data-parallel rank] */
    /* Mixture of experts: tokens of the busiest routed expert over the mean, max/mean [1] (cost/params.c) */
    double moe_imbalance;
    /* Measured tables (ps_costdb_model below, built by costdb/, docs/costdb.md) that replace the analytic GEMM,
     * memory-bandwidth and collective formulas for the devices they measured; NULL (the default): analytic model
     * only. Not a named constant: ps_cost_param_name does not list it. */
    const struct ps_costdb_model *db;
    /* The ring links ps_coll_ring_link already found (ps_coll_memo_create), or NULL (the default): none kept. One
     * thread's own, for clusters and link_eff_* constants that do not change while it is set (the search gives each
     * worker one). Not a named constant either. */
    struct ps_coll_memo *memo;
} ps_cost_params;

void ps_cost_params_default(ps_cost_params *p);
/* Set one constant by name ("overlap_slowdown=1.2"); unknown name or bad value -> PS_ERR_INPUT listing the names. */
ps_status ps_cost_params_set(ps_cost_params *p, const char *assignment);
/* The range [lo, hi] ps_cost_params_set accepts for the constant `name` (what a value measured or fitted for it is
 * clamped to, so it is always one --cost-param would accept); false for an unknown name (lo, hi untouched). */
bool ps_cost_param_range(const char *name, double *lo, double *hi);
/* Iterate the constants (for --help, docs and JSON output): NULL past the end. */
const char *ps_cost_param_name(int i, double *value, const char **unit, const char **source,
                               const ps_cost_params *p);

/* ---- strategy and plan ---- */
/* How a layer's TP collectives meet its computation (Oases, seed 003, Sec. 3). */
typedef enum {
    PS_OVERLAP_NONE = 0, /* Megatron: every TP collective waits for its computation and blocks the next */
    PS_OVERLAP_CROSS,    /* Oases Sec. 3.1: the micro-batch runs as two sub-batches, one's collective while the other
                            computes, recomputation and backward scheduled together across the pass barrier */
    PS_OVERLAP_OASES,    /* + Sec. 3.2 fine-grained recomputation: recomputation restarts after each forward
                            collective, whose output is kept, so recomputation issues none (needs ckpt full) */
    PS_OVERLAP_TE,       /* Transformer Engine / Megatron-core --tp-comm-overlap (needs sp, tp > 1): each SP all-gather
                            and reduce-scatter split into tp chunks passed around the TP ring while the GEMM it feeds
                            (or is fed by) computes chunk by chunk (ps_cost_ring_overlap; docs/costmodel.md) */
    PS_OVERLAP_COUNT
} ps_overlap;
const char *ps_overlap_name(ps_overlap o); /* "none", "cross-pass", "oases", "te" */
/* Oases' kinds: the micro-batch as two sub-batches on two streams, consecutive layers forming one run (ps_cost_plan,
 * exec). PS_OVERLAP_TE is not one: it overlaps inside each GEMM and leaves the layer's layout SP. */
static inline bool ps_overlap_is_oases(ps_overlap o) { return o == PS_OVERLAP_CROSS || o == PS_OVERLAP_OASES; }
/* Parse a name of ps_overlap_name; unknown -> PS_ERR_INPUT listing the names. */
ps_status ps_overlap_parse(const char *s, ps_overlap *o);

/* Context parallelism's communication (Megatron-core --cp-comm-type, Transformer Engine's context_parallel.py):
 * PS_CP_RING ("p2p"): each GPU keeps its queries and passes its key/value block around the CP ring, cp attention steps
 * with the next block's transfer beside each, the sequence in 2 x cp chunks (GPU i holds chunks i and 2cp - 1 - i) so
 * every GPU does the same causal work; the backward passes K/V and their gradients around again. PS_CP_A2A ("a2a",
 * DeepSpeed-Ulysses): all-to-alls of Q, K, V before and of the output after the attention core give each GPU the
 * whole sequence for heads / cp of its heads (the backward: the output gradient before, dQ, dK, dV after).
 * PS_CP_ALLGATHER ("allgather", PyTorch's context_parallel with set_rotate_method("allgather"), torchtitan's default
 * --experimental.context_parallel_rotate_method): the same 2 x cp chunks and causal work as the ring, but the key/value
 * blocks all-gathered once per pass, waited after the first attention step, and in the backward the FP32 dK/dV
 * accumulators passed around the ring; the keys and values are those the attention op receives, which torchtitan
 * expands to the query heads (repeat_kv) first. Never chosen by the search unless asked (--cp-comm allgather). */
typedef enum { PS_CP_RING = 0, PS_CP_A2A, PS_CP_ALLGATHER, PS_CP_COMM_COUNT } ps_cp_comm;
const char *ps_cp_comm_name(ps_cp_comm k); /* "ring", "a2a", "allgather" */
/* Parse a name of ps_cp_comm_name (also Megatron's "p2p" for ring); unknown -> PS_ERR_INPUT listing the names. */
ps_status ps_cp_comm_parse(const char *s, ps_cp_comm *k);

typedef struct {
    int tp;           /* tensor-parallel degree */
    int dp;           /* data-parallel degree (sharded when zero > 0) */
    int zero;         /* ZeRO stage 0-3: 1 shards optimizer states, 2 also gradients, 3 also parameters */
    ps_recompute ckpt;
    bool sp;          /* Megatron sequence parallelism (needs tp > 1 to matter) */
    ps_overlap overlap; /* TP collectives overlapped with computation (Oases kinds: tp > 1, no sp, micro-batch >= 2
                           samples; te: tp > 1 with sp) */
    ps_attn attn;     /* attention kernel; PS_ATTN_AUTO: fused where the stage's GPUs have one (ps_cost_attn) */
    /* Data-parallel collectives NOT overlapped with computation (a framework run without Megatron's
     * --overlap-grad-reduce / --overlap-param-gather, DeepSpeed's overlap_comm, FSDP's prefetch): every gradient
     * reduction, parameter gather and ZeRO-3 gather is exposed. false (the zero value, so that every strategy built
     * with designated initializers gets it) = overlapped as the frameworks do (docs/costmodel.md, "Data-parallel
     * overlap"); plan JSON "dp_overlap" is its negation. */
    bool dp_no_overlap;
    /* Context parallelism (docs/costmodel.md, "Context parallelism"): the sequence of every sample split over cp
     * GPUs, each running 1/cp of the tokens through every layer. 0 or 1 = off (the zero value, so that every strategy
     * built with designated initializers has none; ps_strategy_cp reads it). The stage width is tp x cp x dp, ranks
     * laid out tp fastest, then cp, then dp (Megatron-core's order "tp-cp-ep-dp-pp", megatron/core/parallel_state.py
     * at d98e8a64). Every layer of a stage has the same cp: its tokens are split along the whole stage. */
    int cp;
    ps_cp_comm cp_comm; /* how attention sees the whole sequence when cp > 1 (ps_cp_comm) */
    /* Expert parallelism (docs/costmodel.md, "Expert parallelism"; Megatron-core's MoE parallel folding): the routed
     * experts of an MoE block run on their own grid over the same stage of tp x cp x dp GPUs, etp x ep x edp, ranks
     * laid out etp fastest, then ep, then edp (megatron/core/parallel_state.py at d98e8a64, order "tp-ep-dp" of the
     * expert grid). ep splits the experts (n_experts / ep on each GPU), etp splits each expert's matrices, and the
     * edp = width / (etp x ep) GPUs holding the same experts sum their gradients and shard them under ZeRO. Tokens
     * reach their experts by an all-to-all over the ep group (dispatch) and return by another (combine). Both 0 (the
     * zero value, so every strategy built with designated initializers has none): ep 1 and etp = tp, the experts
     * split over TP like a dense MLP. Dense layers ignore both. Read them with ps_strategy_ep / ps_strategy_etp. */
    int ep;
    int etp; /* 0: the same as tp */
} ps_strategy;

/* The expert-parallel degree of s (1 when off) and its expert tensor-parallel degree (tp when not given). */
static inline int ps_strategy_ep(const ps_strategy *s) { return s->ep > 1 ? s->ep : 1; }
static inline int ps_strategy_etp(const ps_strategy *s) { return s->etp >= 1 ? s->etp : s->tp; }
/* Whether an MoE block of s runs the expert grid (dispatch and combine all-to-alls, its own gradient group) rather
 * than the experts split over TP like a dense MLP (ep 1 and etp = tp). */
static inline bool ps_strategy_ep_folded(const ps_strategy *s)
{
    return ps_strategy_ep(s) > 1 || ps_strategy_etp(s) != s->tp;
}

/* The context-parallel degree of s: 1 when off (cp 0 or 1). */
static inline int ps_strategy_cp(const ps_strategy *s) { return s->cp > 1 ? s->cp : 1; }
/* GPUs of one stage under s: tp x cp x dp. */
static inline int64_t ps_strategy_width(const ps_strategy *s)
{
    return (int64_t)s->tp * ps_strategy_cp(s) * s->dp;
}
/* The GPUs one data-parallel gradient is summed and ZeRO-sharded over: dp x cp (Megatron-core's data-parallel group
 * "with_context_parallel", megatron/core/distributed/param_and_grad_buffer.py and optimizer.py at d98e8a64; torchtitan
 * v0.2.2 shards FSDP over dp_shard x cp). */
static inline int ps_strategy_dp_cp(const ps_strategy *s) { return s->dp * ps_strategy_cp(s); }

/* The attention kernel a layer of strategy s runs on the GPUs [first, first + n) of c: s->attn when given, else fused
 * when every one of them has a fused kernel (ps_gpu.fused_attn). */
ps_attn ps_cost_attn(const ps_cluster *c, int64_t first, int64_t n, ps_attn a);

bool ps_strategy_equal(const ps_strategy *a, const ps_strategy *b);
/* Whether layer l can run under s's context parallelism (always when cp <= 1): no cross-attention; ring: the
 * sequence a multiple of 2 x cp (the load-balanced chunks) and no attention window shorter than it; a2a: the
 * sequence a multiple of cp, and the query heads and key/value heads of a TP rank (at least one) multiples of cp
 * (Transformer Engine's AttnFuncWithCPAndQKVOA2A asserts both); not with Oases' overlapped TP (cross-pass, oases),
 * whose sub-batch blocks have no CP step. The fused-attention requirement is the layer cost's (it depends on the
 * GPUs). False with the reason in why[n] (when why is not NULL). A predicate, for the search. */
bool ps_cost_cp_ok(const ps_layer *l, const ps_strategy *s, char *why, size_t n);
/* ps_cost_cp_ok as a status: PS_ERR_INPUT with the reason. */
ps_status ps_cost_cp_check(const ps_layer *l, const ps_strategy *s);
/* Whether MoE block l can run under s's expert grid (always for a layer without routed experts, which ignores ep
 * and etp, and for ep 1 with etp = tp): etp x ep divides the stage width tp x cp x dp, ep divides n_experts, etp
 * divides expert_ffn, and with tp > 1 sequence parallelism (each TP rank routes its own tokens; Megatron-core asserts
 * it for MoE with tensor parallelism, megatron/training/arguments.py at d98e8a64); not with Oases' overlapped TP,
 * whose sub-batch blocks have no dispatch. False with the reason in why[n] (when not NULL). */
bool ps_cost_ep_ok(const ps_layer *l, const ps_strategy *s, char *why, size_t n);
ps_status ps_cost_ep_check(const ps_layer *l, const ps_strategy *s);
/* The busiest routed expert's tokens over the mean, moe_imbalance capped by the layer's capacity factor (at least 1),
 * and the tokens of the slowest GPU of an ep group holding local_experts experts over the mean GPU's: the busiest
 * expert beside local_experts - 1 at the mean, (local_experts - 1 + busy) / local_experts [1]. */
double ps_cost_ep_busy(const ps_cost_params *p, const ps_layer *l);
double ps_cost_ep_rank_load(const ps_cost_params *p, const ps_layer *l, double local_experts);

typedef struct {
    int64_t gbs;      /* global batch (samples per iteration) */
    int64_t mbs;      /* micro-batch size per data-parallel replica */
    int pp;           /* pipeline stages */
    int vpp;          /* model chunks per device (interleaved schedules); 1 otherwise */
    char schedule[24];
    int64_t *cuts;    /* [pp*vpp + 1] layer boundaries: stage s holds layers [cuts[s], cuts[s+1]) */
    ps_strategy *layer; /* [n_layers] per-layer strategy; tp*cp*dp is the same for every layer (the stage width),
                           and so is cp */
} ps_plan;

/* Uniform plan: every layer the same strategy, layers split evenly over pp*vpp stages (the first stage takes the
 * embedding, the last the head; the remainder goes to the later stages). */
ps_status ps_plan_uniform(const ps_model *m, int64_t gbs, int64_t mbs, int pp, int vpp, const char *schedule,
                          const ps_strategy *s, ps_plan *out);
/* Whether ps_plan_uniform can split m over pp x vpp stages (pp, vpp >= 1, and a transformer layer per stage at
 * least), without side effects: a caller that tries many shapes checks this first, so that a failure of
 * ps_plan_uniform is a real one. */
bool ps_plan_uniform_ok(const ps_model *m, int pp, int vpp);
/* Give every layer whose attention kernel is PS_ATTN_AUTO the kernel `a`, or when `a` is auto too the cluster's
 * (fused when every GPU of c has a fused kernel, as the search resolves it), so that a plan printed or exported says
 * which kernel it was costed with. */
void ps_plan_resolve_attention(ps_plan *p, int64_t n_layers, const ps_cluster *c, ps_attn a);
/* A plan with room for its cuts and per-layer strategies (all set to *s), cuts left for the caller to fill:
 * for partitions given explicitly (plan.json, the search). */
ps_status ps_plan_alloc(const ps_model *m, int64_t gbs, int64_t mbs, int pp, int vpp, const char *schedule,
                        const ps_strategy *s, ps_plan *out);
void ps_plan_free(ps_plan *p);
/* Check the plan against the model and cluster: degrees multiply to the GPU count, micro-batches divide, heads and
 * vocabulary divide by tp, stages cover the layers. Violations -> PS_ERR_INPUT naming the rule and the values. */
ps_status ps_plan_check(const ps_plan *p, const ps_model *m, const ps_cluster *c);
int64_t ps_plan_micro_batches(const ps_plan *p);
/* Upper bounds that ps_plan_check accepts: micro-batches per iteration, and micro-batches x stages (pp x vpp), the
 * number of forward passes the schedule simulation steps through. A plan beyond either is a wrong batch, not a plan:
 * 65536 micro-batches on 28 interleaved stages took 2.2 s to simulate in the fuzz build, over libFuzzer's 2 s; at
 * this cap the slowest schedule (v-zb) takes 0.76 s there, 0.2 s in a release build. The search and the baselines
 * skip such (batch, pipeline) combinations instead of failing on them (ps_plan_size_ok). */
#define PS_PLAN_MAX_MICRO_BATCHES 65536
#define PS_PLAN_MAX_STAGE_PASSES (1 << 18)
static inline bool ps_plan_size_ok(int64_t micro_batches, int64_t stages)
{
    return micro_batches >= 1 && stages >= 1 && micro_batches <= PS_PLAN_MAX_MICRO_BATCHES &&
           stages <= PS_PLAN_MAX_STAGE_PASSES / micro_batches;
}
/* True when every layer has the same strategy (the plan JSON then also carries the summary fields). */
bool ps_plan_is_uniform(const ps_plan *p, int64_t n_layers);

/* ---- collectives: alpha-beta over a group of GPUs ---- */
/* The collectives the cost model prices and a cost database measures. Names ("allreduce", "allgather",
 * "reducescatter", "alltoall", "sendrecv") are for I/O only: a database's rows are parsed into these once. */
typedef enum {
    PS_COLL_ALLREDUCE = 0,
    PS_COLL_ALLGATHER,
    PS_COLL_REDUCESCATTER,
    PS_COLL_ALLTOALL,
    PS_COLL_SENDRECV,
    PS_COLL_N_OPS
} ps_coll_op;
const char *ps_coll_op_name(ps_coll_op op);
/* False (and *op untouched) for a name not among ps_coll_op_name's. */
bool ps_coll_op_parse(const char *name, ps_coll_op *op);
/* nccl-tests bus-bandwidth factor of a collective over n ranks: allreduce 2(n-1)/n, allgather, reducescatter and
 * alltoall (n-1)/n, sendrecv 1; 0 for n < 1 or no such op. */
double ps_coll_busbw_factor(ps_coll_op op, int n);

/* A group: `n` GPUs first, first+stride, ... (global indices into the cluster). */
typedef struct {
    int64_t first;
    int64_t n;
    int64_t stride;
} ps_group;

/* Effective bus bandwidth [bytes/s] and per-step latency [s] of a ring over the group: the slowest link between
 * ring neighbours (AMP Eq. 3), where a node's network is shared by the GPUs of the node that communicate at once. */
void ps_coll_ring_link(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double *bw, double *lat);
/* A cache of ps_coll_ring_link's answers by (cluster, group), for ps_cost_params.memo: the same groups recur across
 * the strategies and layers a search costs (every strategy of one tp has the same DP ring), and walking a ring of
 * thousands of GPUs is most of the cost of a layer on a large cluster. Exact: it returns what the walk returned. */
typedef struct ps_coll_memo ps_coll_memo;
ps_coll_memo *ps_coll_memo_create(void); /* NULL when out of memory (then nothing is cached) */
void ps_coll_memo_free(ps_coll_memo *m);
/* Times in seconds for `bytes` of payload (the full tensor, not a shard). */
double ps_coll_allreduce(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes);
double ps_coll_allgather(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes);
double ps_coll_reducescatter(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes);
double ps_coll_alltoall(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes);
/* An all-to-all in which each GPU's buffer of `bytes` holds `copies` copies of its tokens bound for different GPUs
 * (an MoE dispatch: top_k): the plain all-to-all, or where it is faster, the hierarchical one that sends a token over
 * the network once per distinct remote node and fans it out over NVLink (collectives.c says how) [s]. With
 * `groups` > 0 a token's copies go to members of at most `group_topk` of `groups` equal runs of consecutive members
 * (group-limited routing); 0: to any. */
double ps_coll_alltoall_dedup(const ps_cost_params *p, const ps_cluster *c, const ps_group *g, double bytes,
                              double copies, int64_t groups, int64_t group_topk);
double ps_p2p(const ps_cost_params *p, const ps_cluster *c, int64_t a, int64_t b, double bytes);

/* Streaming memory bandwidth [bytes/s] of a device: the measured one when p->db measured it, else the nominal
 * bandwidth times hbm_eff. */
double ps_cost_stream_Bps(const ps_cost_params *p, const ps_gpu *g);

/* Dense tensor peak [FLOP/s] of a device in a training dtype; 0 when it has none. */
double ps_cost_peak_flops(const ps_gpu *g, ps_dtype dtype);

/* Analytic time [s] of a GEMM (m x k) . (k x n), `count` times (a batched call's GEMMs), on one GPU g in `dtype`: the
 * formula the cost model uses without measured tables (docs/costmodel.md, "GEMM efficiency by shape"), a roofline
 *   max(W / (peak * ps_cost_gemm_eff), count * bytes / (hbm * hbm_eff)) + count * kernel_launch_s
 * whose compute work W is what the GPU executes: with g->sm_count > 0 and both gemm_tile_m and gemm_tile_n > 0,
 * W = waves * sm_count * 2 * tile_m * tile_n * k, where tiles = ceil(m / tile_m) * ceil(n / tile_n) * count and
 * waves = ceil(tiles / sm_count) (tile and wave quantization); otherwise W = 2 m n k count, the useful work.
 * 0 for an empty GEMM or a dtype without a peak. Ignores p->db (the measured branch is the layer cost's). */
/* The fraction of g's dense peak a large GEMM reaches: --cost-param gemm_eff when given (> 0), else the GPU's
 * measured value (ps_gpu.gemm_eff), else PS_GEMM_EFF_GENERIC. */
#define PS_GEMM_EFF_GENERIC 0.80
double ps_cost_gemm_eff(const ps_cost_params *p, const ps_gpu *g);
/* The fractions of g's dense peak a FlashAttention-2 kernel reaches, forward and backward (PyTorch's
 * scaled_dot_product_attention flash backend, the flash-attn 2 package): below the default fused kernel's on Hopper
 * and Blackwell, which it has no kernel for; the default's elsewhere. For a framework that runs it, these go into
 * ps_cost_params attn_fwd_eff and attn_bwd_eff (cost/layer_cost.c, with the measurement). */
void ps_cost_fa2_eff(const ps_gpu *g, double *fwd, double *bwd);
double ps_cost_gemm_time(const ps_cost_params *p, const ps_gpu *g, ps_dtype dtype, double m, double n, double k,
                         double count);
/* The executed work W of ps_cost_gemm_time in FLOPs (shape model or useful work, as above), for sm_count SMs. */
double ps_cost_gemm_work(const ps_cost_params *p, int sm_count, double m, double n, double k, double count);

/* Galvatron-BMW Sec. V: computation and communication that overlap both run overlap_slowdown times slower while
 * they overlap; the longer one finishes alone. Returns the time of the two together. */
double ps_cost_overlapped(const ps_cost_params *p, double comp, double comm);

/* Oases' sub-batch pipeline (seed 003, Sec. 3, Algorithms 1-2) on a compute stream and a communication stream: block i
 * of sub-batch s computes comp[2i + s] seconds, then issues a collective of comm[2i + s] seconds (0: none). The
 * compute stream runs (block 0, sub-batch 0), (0, 1), (1, 0), (1, 1), ...; a block of a sub-batch waits for the
 * collective of its previous block; collectives run one at a time in issue order. While both streams are busy, both
 * progress overlap_slowdown times slower (the form of ps_cost_overlapped, exact here for any interleaving). Returns
 * the time from the first computation to the last collective's end: the first block's computation and the last
 * collective are exposed (Oases Eq. 3's first and last nodes). n_blocks >= 0. */
double ps_cost_two_stream(const ps_cost_params *p, int n_blocks, const double *comp, const double *comm);

/* Transformer Engine's split-pipelined TP overlap (PS_OVERLAP_TE) of one GEMM and one SP collective, cut into `steps`
 * (tp) pieces, step by step as TE's ring exchange runs it (transformer_engine/pytorch/module/base.py initialize_ub:
 * "ring_exchange" with num_splits = tp): every step computes comp_step seconds of GEMM while at most one ring
 * transfer of comm_step seconds runs, and the next step starts when both are done. comm_first (all-gather + GEMM):
 * the transfers feed the GEMM pieces: piece 0 is the GPU's own shard, transfer j brings piece j + 1 while piece j
 * computes. !comm_first (GEMM + reduce-scatter): the GEMM pieces feed the transfers: transfer j carries the partial
 * sum of piece j on while piece j + 1 computes, and the last piece, the GPU's own shard, adds the last transfer's.
 * Either way steps - 1 transfers each beside one piece, at overlap_slowdown while both run (ps_cost_overlapped), and
 * one piece alone: comp_step + (steps - 1) ps_cost_overlapped(comp_step, comm_step). steps < 1: 0. */
double ps_cost_ring_overlap(const ps_cost_params *p, int steps, double comp_step, double comm_step, bool comm_first);
/* Gradient buckets reduced during the last backward (Megatron --overlap-grad-reduce, DeepSpeed overlap_comm) on one
 * communication stream: bucket i (in the order the backward makes them ready) becomes ready when the backward has
 * compute_after_ready[i] seconds of computation left (non-increasing in i, >= 0); its collective of comm[i] seconds
 * starts when it is ready and bucket i - 1's has ended. While both streams are busy both progress overlap_slowdown
 * times slower (ps_cost_overlapped's form). Returns the exposed time: when the last of computation and collectives
 * ends, counted from bucket 0's readiness, less compute_after_ready[0] (the computation alone); >= 0. n >= 0. */
double ps_cost_bucket_overlap(const ps_cost_params *p, int n, const double *compute_after_ready, const double *comm);
/* Prefetch one ahead (FSDP / ZeRO-3 gathers, Megatron's --overlap-param-gather): comm[0] runs alone, then step k
 * computes comp[k] while comm[k + 1] runs (issued together; the step ends when both have), then comm[n + 1] runs
 * alone. comm has n + 2 entries. Returns the total time: comm[0] + sum_k ps_cost_overlapped(comp[k], comm[k + 1]) +
 * comm[n + 1]. */
double ps_cost_prefetch(const ps_cost_params *p, int n, const double *comp, const double *comm);

/* ---- one layer ---- */
/* The matrix multiplies of one layer's forward pass on one GPU of a tp-way group, for a micro-batch of mbs samples:
 * (m x k) . (k x n), `count` times (attention: batched over micro-batch x local heads). The backward runs each
 * twice (input gradient in B, weight gradient in W; attention GEMMs, which have no weights, twice in B). The cost
 * model times these and `psearch exec` runs them, so both see the same shapes. */
typedef struct {
    double m, n, k, count;
    bool attn; /* attention score / context GEMM (no weights; what selective recomputation repeats) */
    bool scores; /* attention: the first of the pair, the scores Q.K^T over the head width (k); else P.V (k: keys) */
    int blk;   /* the forward block it belongs to: the computation before the layer's blk-th TP collective
                  (attention, [cross-attention,] MLP; 0 for layers with one block or none) */
    double experts; /* routed experts: the n_experts GEMMs the count spans (count / experts per expert), m the mean
                       tokens per expert (T x top_k / n_experts, capped by a capacity factor); 0 for other GEMMs.
                       The cost model moves moe_imbalance x m of them to the busiest expert */
    int ep;         /* routed experts under expert parallelism of this degree (> 1): `experts` is the GPU's share
                       n_experts / ep, and the GEMM is timed on the slowest GPU of the ep group, the one holding the
                       busiest expert beside experts at the mean (its tokens are not taken from its neighbours) */
} ps_gemm_shape;
typedef struct {
    /* at most 16: a decoder_xattn block with MLA (4 weight GEMMs), an MoE MLP (5), cross-attention (3) and the two
     * attention pairs (4) */
    ps_gemm_shape g[16];
    int n;
    int tp_colls;     /* TP collectives of the layer output in the forward pass */
    int bwd_tp_colls; /* in the backward pass */
} ps_layer_gemms;
void ps_layer_gemm_shapes(const ps_layer *l, int64_t mbs, int tp, ps_layer_gemms *out);
/* The same on one GPU of a tp x cp group (context parallelism, ps_cp_comm): every token-proportional GEMM has 1/cp of
 * the tokens; the self-attention core, ring: 1/cp of the queries against every key (the causal half skipped as
 * load-balanced, ps_layer_attn_keys of the whole layer); a2a: every query and key for 1/cp of the local heads. Either
 * way 1/cp of the attention work. cp <= 1: ps_layer_gemm_shapes. */
void ps_layer_gemm_shapes_cp(const ps_layer *l, int64_t mbs, int tp, int cp, ps_cp_comm kind, ps_layer_gemms *out);
/* The same under strategy s (context and expert parallelism): an MoE block on the expert grid (ps_strategy_ep_folded)
 * routes the GPU's own tokens (T / tp with sequence parallelism), runs n_experts / ep experts each over
 * T / tp x top_k x etp x ep / n_experts tokens on the mean, their matrices split over etp, and its MLP block has a TP
 * collective only for shared experts (the dispatch replaces the sequence-parallel all-gather and reduce-scatter). */
void ps_layer_gemm_shapes_s(const ps_layer *l, int64_t mbs, const ps_strategy *s, ps_layer_gemms *out);
/* PS_OVERLAP_TE's pairs in forward block `blk` of g (blk < g->tp_colls): *ag, the GEMM the SP all-gather before
 * the block feeds (its first weight GEMM: QKV, FC1, cross-attention's Q; column parallel), and *rs, the GEMM whose
 * output the reduce-scatter after the block sums (its last weight GEMM: the output projection, FC2; row parallel);
 * false (both -1) when the block has no such pair of distinct GEMMs, whose collectives then run as plain SP. The
 * backward mirrors them: the all-gather of the output gradient feeds *rs's dgrad, *ag's dgrad feeds the
 * reduce-scatter. */
bool ps_layer_te_pair(const ps_layer_gemms *g, int blk, int *ag, int *rs);

/* ---- Oases blocks: a layer pass cut at its TP collectives ---- */
/* One block: computation (GEMMs of ps_layer_gemm_shapes, each run `times` times, and elementwise memory traffic),
 * then optionally one TP all-reduce of the sub-batch's layer output. The cost model times these and `psearch exec`
 * runs them (two sub-batches, the collective non-blocking), so both see the same work. */
#define PS_OV_MAX_GEMMS 16 /* as ps_layer_gemms.g */
#define PS_OV_MAX_BLOCKS 8
typedef struct {
    int times[PS_OV_MAX_GEMMS]; /* how often GEMM j of ps_layer_gemms.g (the sub-batch's shapes) runs in the block */
    double stream_bytes;        /* elementwise traffic [bytes] */
    bool coll;                  /* an all-reduce of ps_ov_pass.coll_bytes follows the computation */
} ps_ov_block;
typedef struct {
    ps_ov_block b[PS_OV_MAX_BLOCKS];
    int n;
    double coll_bytes; /* payload of one collective: the sub-batch's layer output (the full tensor) [bytes] */
} ps_ov_pass;
enum { PS_OV_FWD = 0, PS_OV_BWD = 1 };
/* The blocks of layer l's forward (PS_OV_FWD) or input-gradient backward (PS_OV_BWD, recomputation first as the
 * strategy's ckpt and overlap say) for one sub-batch of `sub` samples under strategy s, whose GEMM shapes `g` are
 * (ps_layer_gemm_shapes(l, sub, s->tp)). Forward: one block per TP collective, the layer's elementwise traffic split
 * evenly over them. Backward: the blocks in reverse, each the input-gradient GEMMs (attention twice) and twice its
 * traffic, then the backward collective; full recomputation under PS_OVERLAP_CROSS first repeats the forward blocks
 * with their collectives, under PS_OVERLAP_OASES merges each forward block's computation into its backward block
 * with no collective (Sec. 3.2); selective recomputation joins the attention block. */
void ps_layer_ov_pass(const ps_layer *l, const ps_layer_gemms *g, const ps_strategy *s, double elementwise_passes,
                      double act_full, double act_sel, double coll_bytes, int pass, ps_ov_pass *out);

typedef struct {
    /* times per micro-batch on one GPU, seconds; communication already counted as exposed where noted */
    double fwd;           /* forward compute + exposed TP communication + exposed ZeRO-3 gather */
    double bwd_b;         /* input-gradient backward + recompute + exposed TP communication */
    double bwd_w;         /* weight-gradient backward (+ exposed ZeRO-3 gradient reduce-scatter) */
    double recompute;     /* part of bwd_b that is recomputation */
    double tp_comm;       /* TP collectives per micro-batch, fwd + bwd (all exposed: Megatron does not overlap them) */
    double zero_comm;     /* ZeRO-3 gathers and reduce-scatters per micro-batch before overlap */
    double dp_sync;       /* data-parallel gradient synchronisation once per iteration, before overlap:
                             dp_grad + dp_param */
    double dp_grad;       /* its gradient all-reduce (ZeRO 0) or reduce-scatter (ZeRO 1-2) [s] */
    double dp_param;      /* its parameter all-gather after the optimizer step (ZeRO 1-2) [s] */
    double dp_elems;      /* parameters of the layer on one GPU (what a gradient bucket counts) [elements] */
    double zero_gather;   /* ZeRO-3: one all-gather of the layer's weights [s] */
    double zero_rs;       /* ZeRO-3: the reduce-scatter of its gradients [s] */
    double zero_exposed_f; /* ZeRO-3 gather time fwd holds, and bwd_w holds of the backward gathers and reduce-scatter:
                              the layer's own collectives beside its own computation [s] */
    double zero_exposed_b;
    double hw_flops;      /* hardware FLOPs per micro-batch on this GPU, recompute included */
    /* the same passes split into computation and the communication they issue (before any overlap), per
     * micro-batch: what `psearch exec` times separately. comp_bwd_b includes the recomputation; comm_fwd holds the
     * TP collectives and ZeRO-3 gather of the forward, comm_bwd_b the TP collectives of the backward, comm_bwd_w the
     * ZeRO-3 gather and gradient reduce-scatter. */
    double comp_fwd, comp_bwd_b, comp_bwd_w;
    double comm_fwd, comm_bwd_b, comm_bwd_w;
    double tp_bytes;      /* payload of one TP collective of the layer output (the full tensor) */
    /* Overlapped TP (s->overlap): the Oases blocks of the forward and the input-gradient backward, in
     * ps_cost_two_stream's layout (comp[2i + sub-batch], comm likewise; n blocks), TP collectives only. fwd and
     * bwd_b above are the layer alone (its first computation and last collective exposed); ps_cost_plan runs
     * consecutive overlapped layers of one TP group as one sub-batch pipeline. *_run: the time the layer adds inside
     * such a run (ps_cost_two_stream of three copies minus one, halved) [s]. */
    int ov_n[2];
    double ov_comp[2][2 * PS_OV_MAX_BLOCKS], ov_comm[2][2 * PS_OV_MAX_BLOCKS];
    double fwd_run, bwd_b_run;
    /* PS_OVERLAP_TE: the ring transfers of the forward [0] and the input-gradient backward [1] (recomputation
     * included) before overlap, inside comm_fwd / comm_bwd_b, and the part of them the GEMM pieces leave exposed,
     * the part `psearch exec` measures as waits [s]; 0 otherwise. */
    double te_comm[2], te_exposed[2];
    /* Context parallelism (cp > 1): the attention core's communication of the forward [0] and the input-gradient
     * backward [1] (recomputation included) before overlap: ring: the K/V (and dK/dV) transfers, a2a: the
     * all-to-alls; inside comm_fwd / comm_bwd_b; and what of it is exposed (ring: beside the attention steps; a2a:
     * all of it) [s]; 0 otherwise. */
    double cp_comm[2], cp_exposed[2];
    /* Expert parallelism (an MoE block on the expert grid, ps_strategy_ep_folded): the token dispatch and combine
     * all-to-alls over the ep group and, with etp > 1, the all-gather and reduce-scatter of the dispatched tokens over
     * the etp group, of the forward [0] and the input-gradient backward [1] (recomputation included); none overlapped
     * (Megatron-core's MoEAlltoAllTokenDispatcher), inside comm_fwd / comm_bwd_b and tp_comm [s]; 0 otherwise. */
    double ep_comm[2];
    /* memory on one GPU, bytes */
    double mem_params;
    double mem_grads;
    double mem_optim;
    double mem_act;       /* activations kept per in-flight micro-batch */
    double mem_temp;      /* transient peak inside the layer's backward (recompute buffers, gathered parameters) */
} ps_layer_cost;

/* Parameters one GPU of a tp-way group holds of layer l before ZeRO sharding: TP splits the matrices of blocks,
 * embeddings and heads; the classifier head, patch embedding and Swin merge are replicated. */
double ps_cost_params_per_gpu(const ps_layer *l, int tp);
/* Elements of one gradient bucket of a dp-way data-parallel group: max(dp_bucket_elems, dp_bucket_elems_per_rank x dp)
 * (Megatron-core's rule); what ps_cost_plan prices and the DeepSpeed export writes. */
double ps_cost_dp_bucket_elems(const ps_cost_params *p, int dp);

/* Cost of layer `l` for one micro-batch of `mbs` samples under strategy `s`, the stage's GPUs starting at global
 * GPU `first` (TP innermost: consecutive GPUs; DP across them with stride tp). */
ps_status ps_cost_layer(const ps_cost_params *p, const ps_cluster *c, const ps_layer *l, ps_dtype dtype,
                        int64_t mbs, const ps_strategy *s, int64_t first, ps_layer_cost *out);

/* Resharding between consecutive layers a and b of a stage whose strategies differ in TP degree or sequence
 * parallelism (the stage width fixed): each GPU holds the boundary activation of its data-parallel share (and its
 * sequence shard with SP); when b needs more of it than a left on the GPU, the forward all-gathers it over the GPUs
 * that hold the parts, and when it needs less, the forward slices and the backward all-gathers the gradient
 * (Oases Eq. 4: one all-gather, forward or backward, which no computation hides). Times in seconds for a stage whose
 * GPUs start at `first`, `global_mb` samples per micro-batch over the stage; 0 and 0 when the layouts match. */
void ps_cost_reshard(const ps_cost_params *p, const ps_cluster *c, const ps_layer *boundary, ps_dtype dtype,
                     int64_t global_mb, const ps_strategy *a, const ps_strategy *b, int64_t first, double *fwd,
                     double *bwd);
/* The group the all-gather of ps_cost_reshard runs over (n members at a stride, inside the stage from GPU `first`),
 * its payload [bytes], and the passes that run it: PS_RESHARD_FWD | PS_RESHARD_BWD bits, 0 when the layouts match
 * (nothing moves; both bits when the parts are arranged differently, SP's sequence shards against batch shards).
 * exec runs the same collective. */
enum { PS_RESHARD_FWD = 1, PS_RESHARD_BWD = 2 };
int ps_cost_reshard_group(const ps_layer *boundary, ps_dtype dtype, int64_t global_mb, const ps_strategy *a,
                          const ps_strategy *b, int64_t first, ps_group *g, double *bytes);

/* ---- measured tables: a cost database as the cost functions read it ----
 * One set of curves per device kind the database measured. costdb/ builds and frees it from the file's rows
 * (ps_costdb_model_build, ps_costdb_model_free, ps_costdb_attach in ps_costdb.h); the functions below only read it.
 * The fields are public for costdb/'s builder; nothing else writes them. */
typedef struct {
    ps_dtype dtype;
    int n;
    double *flops, *rate; /* [n] sorted by flops: FLOPs per call [FLOP], achieved rate [FLOP/s] */
    bool bwd;             /* fused attention curves only: the kernel's backward (else its forward) */
    int64_t hd;           /* fused attention curves only: the head width timed (the rate depends on it) */
} ps_costdb_gemm_curve;
typedef struct {
    ps_coll_op op;
    int gs, inter, n;     /* group size; 0 inside one node, 1 across nodes; points */
    double *bytes, *busbw; /* [n] sorted by bytes [bytes], [bytes/s] */
    double t0;            /* time at the smallest size: the latency floor below it [s] */
} ps_costdb_coll_curve;
typedef struct {
    char name[32];        /* device key, compared with the cluster's GPU names */
    bool gpu;             /* a GPU kind whose collectives NCCL did not measure: its collective and overlap rows are
                             not used (costdb/db_model.c) */
    ps_costdb_gemm_curve *gemm;
    int n_gemm;
    ps_costdb_gemm_curve *attn; /* the fused attention kernel (rows of op attn_fwd / attn_bwd): executed FLOPs per
                                   call against the rate, per dtype, pass and head width */
    int n_attn;
    ps_costdb_coll_curve *coll;
    int n_coll;
    double mem_Bps, overlap; /* medians over the kind's ranks; -1 when not measured */
} ps_costdb_kind;
struct ps_costdb_fit;
typedef struct ps_costdb_model {
    char path[512];
    ps_costdb_kind *kind;
    int n_kind;
    struct ps_costdb_fit *fit; /* /fit as read (costdb/'s rows; the cost functions do not read them) */
    size_t n_fit;
    char note[512]; /* which node groups of the cluster last attached use the tables and the fit (ps_costdb_attach) */
} ps_costdb_model;

/* 0 for a file of executed plans and fits only. */
int ps_costdb_model_n_devices(const ps_costdb_model *m);
const char *ps_costdb_model_device_name(const ps_costdb_model *m, int dev);
/* Index of the device kind whose key is `gpu_name`, or -1. */
int ps_costdb_model_device(const ps_costdb_model *m, const char *gpu_name);
/* Achieved GEMM rate [FLOP/s] at `flops` per call, log-log interpolated over the device's table for the dtype; -1
 * when the file has no GEMM of that dtype for the device. */
double ps_costdb_model_gemm_rate(const ps_costdb_model *m, int dev, ps_dtype dtype, double flops);
/* The fused attention kernel's rate at `flops` executed FLOPs per call and head width hd (its forward, or its
 * backward when bwd) on device kind dev in dtype [FLOP/s]: along each timed head width's curve as the GEMM rate is,
 * then log-log between the two nearest head widths around hd (the nearest one's beyond them); -1 when the file
 * timed no such kernel there. */
double ps_costdb_model_attn_rate(const ps_costdb_model *m, int dev, ps_dtype dtype, bool bwd, int64_t hd,
                                 double flops);
/* Whether the file timed a fused attention kernel (forward and backward, some dtype) on device kind dev. */
bool ps_costdb_model_has_attn(const ps_costdb_model *m, int dev);
/* Time [s] of a collective of `bytes` over n devices, inside one node or across nodes; -1 when the file has no such
 * measurement (a GPU kind never has one without NCCL's). */
double ps_costdb_model_coll_time(const ps_costdb_model *m, int dev, ps_coll_op op, int64_t n, bool inter,
                                 double bytes);
/* Measured memory bandwidth [bytes/s], overlap slowdown [1]; -1 when absent (a GPU kind's overlap always is). */
double ps_costdb_model_mem_Bps(const ps_costdb_model *m, int dev);
double ps_costdb_model_overlap(const ps_costdb_model *m, int dev);
const char *ps_costdb_model_path(const ps_costdb_model *m);
/* "measured tables for node group(s): ..." (or "no measured tables for this cluster ..."), then the fit applied, from
 * the last successful ps_costdb_attach; "" before one. */
const char *ps_costdb_model_note(const ps_costdb_model *m);

/* ---- a whole plan ---- */
typedef struct {
    double fwd, bwd_b, bwd_w;   /* per micro-batch, seconds */
    double p2p;                 /* send to the next stage per micro-batch, seconds */
    double dp_sync_exposed;     /* gradient synchronisation left after the last backward, seconds */
    double mem_static;          /* params + grads + optimizer states, bytes */
    double mem_act_per_mb;      /* bytes per in-flight micro-batch */
    double mem_temp;
    double mem_peak;            /* static + in-flight activations + temp + reserve, bytes */
    double mem_capacity;        /* GPU memory of the stage's smallest device, bytes */
    int in_flight;              /* peak in-flight micro-batches on the stage's device (from the schedule) */
    double p2p_bytes;           /* one GPU's send to the next stage per micro-batch (1/tp of the boundary activation) */
    double opt_s;               /* the optimizer's pass over the device's weights, gradients and states, seconds */
    int64_t first_gpu, n_gpus;
} ps_stage_pred;

typedef struct {
    double iter_time_s;
    double samples_per_s;
    double tokens_per_s;
    double tflops_per_gpu;      /* model FLOPs (no recompute) per second per GPU, 1e12 */
    double hw_tflops_per_gpu;   /* hardware FLOPs (recompute included) */
    double mfu;                 /* model FLOPs utilisation against the dense peak of the plan's dtype */
    double bubble_frac;
    double compute_s, comm_exposed_s, bubble_s, recompute_s; /* breakdown of the critical device's iteration */
    bool fits;                  /* every stage's peak within its GPUs' memory */
    int n_stages;
    ps_stage_pred *stages;      /* [pp*vpp] */
} ps_prediction;

ps_status ps_cost_plan(const ps_cost_params *p, const ps_model *m, const ps_cluster *c, const ps_plan *plan,
                       ps_prediction *out);
/* ps_cost_plan with the caller's schedule workspace (schedules/ps_schedules.h; NULL: a private one, as
 * ps_cost_plan). When ws already holds the plan's schedule kind built for pp devices, its micro-batches and vpp
 * chunks, the build and its verification are skipped; otherwise the schedule is built into ws. Either way ws then
 * holds that order and this plan's simulation results. */
struct ps_sched;
ps_status ps_cost_plan_ws(const ps_cost_params *p, const ps_model *m, const ps_cluster *c, const ps_plan *plan,
                          struct ps_sched *ws, ps_prediction *out);
void ps_prediction_free(ps_prediction *r);
/* Highest per-GPU peak memory over the stages [bytes]: what a plan needs of its fullest device (the search's memory
 * objective, the tables of plan and sweep, and what exec compares its measured peak with). */
double ps_prediction_peak(const ps_prediction *r);

/* ---- plan.json (cost/plan_json.c) ---- */
/* Read a plan for model `m` from a parsed plan.json; errors name `file` and the field path. */
ps_status ps_plan_from_json(const json_t *root, const char *file, const ps_model *m, ps_plan *out);
/* The plan's fields (batch, pipeline, stages with per-layer strategies, uniform summary). */
json_t *ps_plan_to_json(const ps_plan *p, const ps_model *m);
/* A predicted plan as `psearch estimate --format json` and the search print it: the plan's fields, the devices of
 * each stage, `predicted` (times, rates, memory per stage, breakdown) and the cost parameters used. */
json_t *ps_prediction_json(const ps_model *m, const ps_cluster *c, const ps_plan *plan, const ps_prediction *r,
                           const ps_cost_params *cp);

#ifdef __cplusplus
}
#endif
#endif

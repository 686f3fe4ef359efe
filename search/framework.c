/* What each training framework can run as exported, at the release named in its rules: the search restricted with
 * --framework keeps to these rules, and the exports (cli/export.c) refuse a plan that breaks them, so the exported
 * launch is the plan that was priced. Every rule names the framework's own check, flag or code it comes from, read at
 * these commits:
 *   Megatron-LM  NVIDIA/Megatron-LM d98e8a64ddf3 (2026-08-22, megatron-core 0.20.0)  [M]
 *   DeepSpeed    deepspeedai/DeepSpeed edaa72212672 (2026-08-22, 0.19.6 in development)  [D]
 *   torchtitan   pytorch/torchtitan v0.2.2 = 73a0e6979dd1 (2026-02-20), the last release with TOML job configs
 *                (main replaced them with Python configs on 2026-02-23, 9810191bb), with torch.distributed.pipelining
 *                of pytorch/pytorch 00722e648b74  [T]
 * Pure data and checks: no I/O. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_search.h"

/* [M] megatron/core/pipeline_parallel/schedules.py: forward_backward_pipelining_without_interleaving (1F1B) and
 * _with_interleaving, whose warm-up (2 (pp - rank - 1) + (vpp - 1) x microbatch_group_size_per_vp_stage, the group
 * defaulting to pp) is psearch's interleaved order. No zero-bubble or V schedule. */
static const char *const k_megatron_sched[] = {"1f1b", "interleaved", NULL};
/* [D] deepspeed/runtime/pipe/schedule.py: TrainSchedule is 1F1B (PipelineEngine.train_batch runs it). */
static const char *const k_deepspeed_sched[] = {"1f1b", NULL};
/* [T] torchtitan/distributed/pipeline_parallel.py builds torch's schedules by name: ScheduleGPipe, Schedule1F1B
 * (warm-up min(n, pp - rank) forwards, then backward-forward pairs: psearch's 1f1b order) and
 * ScheduleInterleaved1F1B (_get_warmup_ops: (stages per rank - 1) x microbatches per round + 2 (pp - 1 - rank), the
 * same order as Megatron's for n a multiple of pp, which psearch's interleaved needs). Its ScheduleZBVZeroBubble
 * runs a fixed order of the zero-bubble paper's ZB-V (warm-up 2 (pp - rank) - 1 forwards of chunk 0, ...), not the
 * order psearch's v-zb simulates (Pipeline Parallelism with Controllable Memory, App. C's greedy reordering): the
 * two differ from pp 2 on (tests/export checks every order), so a v-zb plan is not what torchtitan would run. */
static const char *const k_torchtitan_sched[] = {"gpipe", "1f1b", "interleaved", NULL};

/* A GPT-style model: one embedding, identical decoder blocks, one LM head, in that order. *blk = the first block. */
static bool gpt_shape(const ps_model *m, const ps_layer **blk, char *why, size_t cap, const char *who)
{
#define NO(...)                                                                                                        \
    do {                                                                                                               \
        if (why && cap) snprintf(why, cap, __VA_ARGS__);                                                               \
        return false;                                                                                                  \
    } while (0)
    if (m->n_layers < 3 || m->layers[0].kind != PS_LAYER_EMBED || m->layers[m->n_layers - 1].kind != PS_LAYER_LM_HEAD)
        NO("%s builds GPT-style models (embedding, decoder layers, LM head); %s is not one", who, m->name);
    const ps_layer *b = &m->layers[1], *dense = NULL, *moe = NULL;
    for (int64_t i = 1; i < m->n_layers - 1; i++) {
        const ps_layer *l = &m->layers[i];
        if (l->kind != PS_LAYER_DECODER)
            NO("%s builds decoder-only models; layer %lld of %s is not a causal decoder layer", who, (long long)i,
               m->name);
        if (l->hidden != b->hidden || l->heads != b->heads || l->kv_heads != b->kv_heads ||
            l->head_dim != b->head_dim || l->seq != b->seq || l->norm != b->norm || l->act != b->act ||
            l->bias != b->bias || l->dropout != b->dropout || l->attn_window != b->attn_window ||
            l->q_lora_rank != b->q_lora_rank || l->kv_lora_rank != b->kv_lora_rank ||
            l->qk_nope_head_dim != b->qk_nope_head_dim || l->qk_rope_head_dim != b->qk_rope_head_dim ||
            l->v_head_dim != b->v_head_dim)
            NO("%s builds identical transformer layers; layer %lld of %s differs from layer 1", who, (long long)i,
               m->name);
        /* [M] one MLP width for the dense layers (--ffn-hidden-size) and one MoE block for the expert layers
         * (--num-experts, --moe-ffn-hidden-size, ...: transformer_config.py has one value of each), placed by
         * --moe-layer-freq */
        if (!ps_layer_is_moe(l)) {
            if (!dense) dense = l;
            if (l->ffn_hidden != dense->ffn_hidden)
                NO("%s builds one MLP width for the dense layers; layer %lld of %s differs from layer %lld", who,
                   (long long)i, m->name, (long long)(dense - m->layers));
        } else {
            if (!moe) moe = l;
            if (l->n_experts != moe->n_experts || l->top_k != moe->top_k || l->expert_ffn != moe->expert_ffn ||
                l->n_shared_experts != moe->n_shared_experts || l->shared_ffn != moe->shared_ffn ||
                l->capacity_factor != moe->capacity_factor || l->router != moe->router)
                NO("%s builds one mixture-of-experts block for every expert layer; layer %lld of %s differs from "
                   "layer %lld", who, (long long)i, m->name, (long long)(moe - m->layers));
        }
    }
    if (b->attn_window) NO("%s: sliding-window attention (layer 1 of %s) is not exported", who, m->name);
    if (m->layers[0].token_types || m->layers[0].pooler)
        NO("%s's GPT model has no token-type embeddings or embedding norm (%s has them)", who, m->name);
    *blk = b;
    return true;
}

/* [M] megatron/training/arguments.py _add_network_size_args: GeLU by default, --swiglu (SiLU GLU); --squared-relu and
 * --quick-geglu are other functions than ReLU and GeGLU. megatron/training/models/gpt.py builds the GPT model. */
static bool megatron_model(const ps_model *m, char *why, size_t cap)
{
    const ps_layer *b = NULL;
    if (!gpt_shape(m, &b, why, cap, "Megatron-LM")) return false;
    if (b->act != PS_ACT_GELU && b->act != PS_ACT_SWIGLU)
        NO("Megatron-LM trains GeLU or SwiGLU MLPs (--swiglu); %s uses %s", m->name,
           b->act == PS_ACT_RELU ? "ReLU" : "GeGLU");
    return true;
}

/* [T] torchtitan/models/llama3/__init__.py llama3_args: the flavors its llama3 model builds (RMSNorm, SwiGLU, rotary
 * positions, no biases, untied output, vocab_size 128256 by default in model/args.py), the MLP width from
 * model/model.py FeedForward: int(2 x 4 dim / 3), x ffn_dim_multiplier, rounded up to multiple_of. */
typedef struct {
    const char *name;
    int64_t dim, layers, heads, kv_heads, vocab;
    int multiple_of;
    double ffn_mult; /* 0: none */
} tt_flavor;
static const tt_flavor k_tt_flavors[] = {
    {"debugmodel", 256, 6, 16, 16, 2048, 256, 0},
    {"8B", 4096, 32, 32, 8, 128256, 1024, 1.3},
    {"70B", 8192, 80, 64, 8, 128256, 4096, 1.3},
    {"405B", 16384, 126, 128, 8, 128256, 4096, 1.2},
};

static int64_t tt_ffn(const tt_flavor *f)
{
    int64_t h = (int64_t)(2.0 * (double)(4 * f->dim) / 3.0);
    if (f->ffn_mult > 0) h = (int64_t)(f->ffn_mult * (double)h);
    return f->multiple_of * ((h + f->multiple_of - 1) / f->multiple_of);
}

const char *ps_framework_torchtitan_flavor(const ps_model *m)
{
    if (m->n_layers < 3) return NULL;
    const ps_layer *b = &m->layers[1], *head = &m->layers[m->n_layers - 1];
    for (size_t k = 0; k < sizeof k_tt_flavors / sizeof k_tt_flavors[0]; k++) {
        const tt_flavor *f = &k_tt_flavors[k];
        if (m->n_layers - 2 == f->layers && b->hidden == f->dim && b->heads == f->heads && b->kv_heads == f->kv_heads &&
            b->head_dim * f->heads == f->dim && b->ffn_hidden == tt_ffn(f) && m->layers[0].vocab == f->vocab &&
            head->vocab == f->vocab)
            return f->name;
    }
    return NULL;
}

/* The first layer of m with routed experts / latent attention, or -1. */
static int64_t first_moe_or_mla(const ps_model *m, bool mla)
{
    for (int64_t l = 0; l < m->n_layers; l++)
        if (mla ? ps_layer_is_mla(&m->layers[l]) : ps_layer_is_moe(&m->layers[l])) return l;
    return -1;
}

/* [D] DeepSpeed's config has no mixture-of-experts key: deepspeed/moe/layer.py MoE(hidden_size, expert, num_experts,
 * ep_size, k, capacity_factor, ..., drop_tokens, enable_expert_tensor_parallelism) is built by the model code, its
 * expert groups by deepspeed/utils/groups.py from ep_size, and its gating (deepspeed/moe/sharded_moe.py: softmax
 * top-1 / top-2 / top-k gating with capacity and token dropping by default) runs the local experts one by one
 * (deepspeed/moe/experts.py), not the grouped GEMMs, dropless dispatch, sigmoid routing or shared experts psearch
 * prices. Latent attention it has none. So a config would launch another model or another plan: refused. */
static bool deepspeed_model(const ps_model *m, char *why, size_t cap)
{
    int64_t l = first_moe_or_mla(m, false);
    if (l >= 0)
        NO("DeepSpeed's config cannot describe mixture-of-experts layers (layer %lld of %s): deepspeed.moe.layer.MoE "
           "and its ep_size live in the model code (Megatron-DeepSpeed: --num-experts, --ep-world-size), whose "
           "gating runs each local expert on its own with capacity-based dropping, not the grouped, dropless "
           "experts psearch prices; export this plan with --export megatron", (long long)l, m->name);
    l = first_moe_or_mla(m, true);
    if (l >= 0)
        NO("DeepSpeed has no multi-head latent attention (layer %lld of %s): the model code's, not a config key; "
           "export this plan with --export megatron", (long long)l, m->name);
    return true;
}

static bool torchtitan_model(const ps_model *m, char *why, size_t cap)
{
    const ps_layer *b = NULL;
    /* [T] v0.2.2 has MoE models of its own (models/deepseek_v3, qwen3, llama4, with [parallelism]
     * expert_parallel_degree and expert_tensor_parallel_degree 1 or tp, distributed/parallel_dims.py), each with
     * its own flavors, router and load-balancing code; psearch's torchtitan export writes the llama3 model only */
    int64_t l = first_moe_or_mla(m, false);
    if (l < 0) l = first_moe_or_mla(m, true);
    if (l >= 0)
        NO("the torchtitan export writes its llama3 model only; layer %lld of %s is %s (torchtitan v0.2.2's own "
           "deepseek_v3 / qwen3 / llama4 models are not exported yet); export this plan with --export megatron",
           (long long)l, m->name, ps_layer_is_moe(&m->layers[l]) ? "a mixture-of-experts layer" : "latent attention");
    if (!gpt_shape(m, &b, why, cap, "torchtitan's llama3 model")) return false;
    const ps_layer *e = &m->layers[0], *h = &m->layers[m->n_layers - 1];
    if (b->norm != PS_NORM_RMSNORM || b->act != PS_ACT_SWIGLU || b->bias || e->positions || h->tied || b->dropout)
        NO("torchtitan's llama3 model is RMSNorm, SwiGLU, rotary, without biases, dropout or tied output; %s is not",
           m->name);
    /* [T] model/args.py: rope_theta is the flavor's (500000 for every llama3 flavor) */
    if (m->rope_theta > 0 && m->rope_theta != 500000)
        NO("torchtitan's llama3 flavors use rotary base 500000; %s has %g", m->name, m->rope_theta);
    if (!ps_framework_torchtitan_flavor(m))
        NO("%s matches no llama3 flavor of torchtitan (debugmodel, 8B, 70B, 405B: layers, width, heads, key/value "
           "heads, MLP width and the unpadded vocabulary 128256 (2048 for debugmodel); plan with --vocab-pad 1)",
           m->name);
    return true;
}
#undef NO

static const ps_framework_rules k_rules[PS_FW_COUNT] = {
    [PS_FW_MEGATRON] =
        {
            .name = "megatron",
            .title = "Megatron-LM",
            .version = "Megatron-LM d98e8a64ddf3 (megatron-core 0.20.0, 2026-08-22)",
            .uniform = true, /* [M] one TransformerConfig for every layer */
            .schedules = k_megatron_sched,
            /* [M] --pipeline-model-parallel-layout (megatron/core/transformer/pipeline_parallel_layer_layout.py:
             * "E|t*n|...|L", one entry per virtual stage, stage s = chunk s / pp on device s % pp) places every
             * layer; the embedding must open the first entry and the loss close the last, as psearch plans them */
            .partition = PS_FW_PART_ANY,
            /* [M] the layout's length is pp x vpp; arguments.py puts no bound on vpp. 64 keeps the export's layout
             * string and the schedule simulation small. */
            .max_vpp = 64,
            /* [M] 0: DistributedDataParallel; 1: --use-distributed-optimizer; 2 / 3: Megatron-FSDP
             * (--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads / optim_grads_params) */
            .zero = {true, true, true, true},
            /* [M] Megatron-FSDP with pipeline parallelism: arguments.py refuses torch FSDP2 with pp > 1 and
             * mcore_fsdp_adapter.py refuses Megatron-FSDP v2 with pp > 1; v1 is not refused, but its documentation
             * (docs/user-guide/features/megatron_fsdp.md), examples and functional tests all run pp 1, so psearch does
             * not export it with pp > 1 */
            .zero_pp = {true, true, false, false},
            /* [M] --tp-comm-overlap: Transformer Engine's userbuffer rings, for every layer or none */
            .overlap = {[PS_OVERLAP_NONE] = true, [PS_OVERLAP_TE] = true},
            /* [M] transformer_config.py: --recompute-granularity selective (core_attn) or full */
            .recompute = {true, true, true},
            .sp = true, /* [M] --sequence-parallel */
            .sp_required = false,
            /* [M] --attention-backend (transformer/enums.py AttnBackend): fused / flash keep no scores; unfused does */
            .attention = {[PS_ATTN_UNFUSED] = true, [PS_ATTN_FUSED] = true},
            /* [M] recompute.py: only the TransformerBlock's layers are checkpointed; the embedding and the output
             * layer live outside it */
            .recompute_blocks_only = true,
            /* [M] recompute.py, recompute_method 'block': the first recompute_num_layers layers of each model chunk
             * fully recomputed, the rest not */
            .recompute_partial = true,
            .part_blocks_balanced = false,
            /* [M] --fp16, --bf16, fp32 by default; FP8 through Transformer Engine (--fp8-format) */
            .dtype = {true, true, true, true},
            .zero_pp_bf16 = {true, true, false, false},
            .zero_model_parallel = {true, true, true, true},
            /* [M] distributed_data_parallel_config.py: overlap_grad_reduce / overlap_param_gather on or off (off by
             * default), for DDP, the distributed optimizer and Megatron-FSDP alike */
            .dp_overlap = {{true, true, true, true}, {true, true, false, false}},
            .dp_exposed = {{true, true, true, true}, {true, true, false, false}},
            /* [M] transformer_config.py: num_query_groups a multiple or a divisor of tp (psearch's own rule) */
            .kv_heads_div_tp = false,
            .seq_tp_multiple = 0,
            /* [M] --context-parallel-size with --cp-comm-type p2p (the ring) or a2a (transformer_config.py
             * cp_comm_type; "all_gather" and the hierarchical "a2a+p2p" are not planned); arguments.py: "seq-length
             * should be a multiple of 2 * context-parallel-size" whatever the kind; dot_product_attention.py: "Context
             * parallelism is only supported by TEDotProductAttention" (fused kernels: the cost model's rule); the
             * distributed optimizer and Megatron-FSDP shard over the data-parallel group with context parallelism */
            .cp = {[PS_CP_RING] = true, [PS_CP_A2A] = true},
            .cp_seq_multiple = 2,
            .cp_zero = {true, true, true, true},
            .model_runs = megatron_model,
        },
    [PS_FW_DEEPSPEED] =
        {
            .name = "deepspeed",
            .title = "DeepSpeed",
            .version = "DeepSpeed edaa72212672 (0.19.6 in development, 2026-08-22)",
            .uniform = true, /* the model code builds one kind of block */
            .schedules = k_deepspeed_sched,
            /* [D] runtime/pipe/module.py PipelineModule._partition_layers: "uniform" (runtime/utils.py
             * partition_uniform over the layer specs) or "type:<regex>" (partition_balanced over 0/1 weights of the
             * layers whose class matches); "parameters" balances parameter counts that depend on the model code */
            .partition = PS_FW_PART_UNIFORM,
            .max_vpp = 1, /* one stage per pipeline rank */
            .zero = {true, true, true, true},
            /* [D] runtime/pipe/engine.py PipelineEngine.__init__: "ZeRO-2 and ZeRO-3 are incompatible with pipeline
             * parallelism" */
            .zero_pp = {true, true, false, false},
            .overlap = {[PS_OVERLAP_NONE] = true},
            /* checkpointing is the model's (PipelineModule activation_checkpoint_interval, deepspeed.checkpointing):
             * whole layers only, no selective recomputation */
            .recompute = {true, false, true},
            /* DeepSpeed's sequence_parallel_size is Ulysses (heads split across ranks), not Megatron's */
            .sp = false,
            .sp_required = false,
            .attention = {[PS_ATTN_UNFUSED] = true, [PS_ATTN_FUSED] = true}, /* the model code's kernel */
            /* [D] module.py: activation_checkpoint_interval 1 with checkpointable_layers naming the block class */
            .recompute_blocks_only = true,
            .recompute_partial = false,
            .part_blocks_balanced = true,
            /* [D] runtime/config.py: fp16 / bf16 sections; no FP8 training key */
            .dtype = {true, true, true, false},
            /* [D] engine.py _do_optimizer_sanity_check: bf16 with pipeline parallelism and ZeRO stage 0 returns
             * BFLOAT16, i.e. runtime/bf16_optimizer.py, which partitions the fp32 master weights and optimizer states
             * over the data-parallel group: a ZeRO-1 plan, not a stage-0 one */
            .zero_pp_bf16 = {false, true, false, false},
            .zero_model_parallel = {true, true, true, true},
            /* [D] engine.py: stage 0 all-reduces the gradients after the backward (allreduce_gradients); ZeRO-1/2
             * reduce buckets during it with overlap_comm (zero/stage_1_and_2.py backward hooks), ZeRO-3 also
             * prefetches parameters; the pipeline engine reduces after the last micro-batch (_exec_reduce_grads) */
            .dp_overlap = {{false, true, true, true}, {false, false, false, false}},
            /* ZeRO-3 without overlap: overlap_comm false and stage3_prefetch_bucket_size 0 (gathers on demand) */
            .dp_exposed = {{true, true, true, true}, {true, true, false, false}},
            .kv_heads_div_tp = false,
            .seq_tp_multiple = 0,
            /* [D] no context parallelism in the config: Ulysses (deepspeed/sequence/layer.py DistributedAttention,
             * runtime/sequence_parallel/ulysses_sp.py) takes its sequence-parallel group from the model code's mpu
             * (Megatron-DeepSpeed) or UlyssesSPAttentionHF, and runtime/config.py reads "sequence_parallel_size"
             * only to size zero.init's world; ring attention it has none */
            .cp = {false, false},
            .cp_seq_multiple = 0,
            .cp_zero = {false, false, false, false},
            .model_runs = deepspeed_model, /* PipelineModule takes any layer list, but no MoE from the config */
        },
    [PS_FW_TORCHTITAN] =
        {
            .name = "torchtitan",
            .title = "torchtitan",
            .version = "torchtitan v0.2.2 (73a0e6979dd1, 2026-02-20)",
            .uniform = true,
            .schedules = k_torchtitan_sched,
            /* [T] parallelism.module_fqns_per_model_part: the modules of every (virtual) stage */
            .partition = PS_FW_PART_ANY,
            .max_vpp = 64,
            /* [T] models/llama3/infra/parallelize.py: FSDP2 (data_parallel_shard_degree; ZeRO-3 with
             * fsdp_reshard_after_forward "always", apply_fsdp) or DDP (data_parallel_replicate_degree); no
             * optimizer-only or gradient sharding */
            .zero = {true, false, false, true},
            .zero_pp = {true, false, false, true},
            .overlap = {[PS_OVERLAP_NONE] = true},
            /* [T] job_config.py ActivationCheckpoint.mode: "full" wraps each TransformerBlock; "selective" is
             * op-level (selective_ac_option "op": PS_RECOMP_OP) or every-n-th-layer checkpointing, not Megatron's
             * attention-core recomputation */
            .recompute = {true, false, true, true},
            /* [T] apply_tp: SequenceParallel on the norms, the embedding's output sharded on the sequence */
            .sp = true,
            .sp_required = true,
            /* [T] model attn_type "sdpa" (or flex): fused kernels only */
            .attention = {[PS_ATTN_FUSED] = true},
            .recompute_blocks_only = true, /* [T] activation_checkpoint.py wraps model.layers only */
            .recompute_partial = false,
            .part_blocks_balanced = false,
            /* [T] training.mixed_precision_param bfloat16 or float32 (no fp16); FP8 through the float8 converter */
            .dtype = {true, false, true, true},
            .zero_pp_bf16 = {true, false, false, true},
            /* [T] parallelize_llama: "DDP has not supported > 1D parallelism" */
            .zero_model_parallel = {false, true, true, true},
            /* [T] DDP and FSDP2 always overlap (no knob) */
            .dp_overlap = {{true, false, false, true}, {true, false, false, true}},
            .dp_exposed = {{false, false, false, false}, {false, false, false, false}},
            /* [T] model.py Attention: wk / wv column-sharded by whole heads (view(-1, head_dim)) */
            .kv_heads_div_tp = true,
            /* [T] parallel_dims.py seq_len_divisor: tp x 2 x cp */
            .seq_tp_multiple = 2,
            /* [T] [parallelism] context_parallel_degree: PyTorch's ring attention over SDPA (context_parallel.py
             * apply_cp_to_attention_module), K/V shards rotated step by step with context_parallel_rotate_method
             * "alltoall" (PS_CP_RING), or all gathered after the first block with the default "allgather"
             * (PS_CP_ALLGATHER, searched only when --cp-comm allgather fixes it: it moves what the ring moves, less
             * overlapped); no Ulysses. parallel_dims.py: fsdp_enabled whenever cp_enabled, FSDP over dp_shard x cp:
             * ZeRO-3 */
            .cp = {[PS_CP_RING] = true, [PS_CP_ALLGATHER] = true},
            .cp_seq_multiple = 2,
            .cp_zero = {false, false, false, true},
            .model_runs = torchtitan_model,
        },
};

const ps_framework_rules *ps_framework_get(ps_framework f)
{
    return f > PS_FW_ANY && f < PS_FW_COUNT ? &k_rules[f] : NULL;
}

bool ps_framework_has_schedule(const ps_framework_rules *r, const char *name)
{
    for (const char *const *k = r->schedules; *k; k++)
        if (strcmp(*k, name) == 0) return true;
    return false;
}

const char *ps_framework_name(ps_framework f)
{
    return f == PS_FW_ANY ? "any" : f > PS_FW_ANY && f < PS_FW_COUNT ? k_rules[f].name : "?";
}

int ps_framework_find(const char *name)
{
    if (!name) return -1;
    if (strcmp(name, "any") == 0) return PS_FW_ANY;
    for (int f = PS_FW_ANY + 1; f < PS_FW_COUNT; f++)
        if (strcmp(name, k_rules[f].name) == 0) return f;
    return -1;
}

/* [D] runtime/utils.py partition_uniform: chunk = n / parts, the first n % parts parts one more (n <= parts: one
 * item each, then empty parts). */
static int64_t uniform_cut(int64_t n, int parts, int s)
{
    if (n <= parts) return s < n ? s : n;
    int64_t chunk = n / parts, residual = n % parts;
    return s * chunk + (s < residual ? s : residual);
}

/* [D] runtime/utils.py partition_balanced: for every prefix i and part count j, the split k minimising the spread
 * (max - min) of the part sums, the last k of equal spread winning (>=); the walk back from (n, parts) gives the
 * cuts. Weights here are 0 / 1, so the sums are exact in double. The numpy arrays start at +inf, and dp_min of
 * (0, 0) too: min over an empty prefix is inf, so the first part's min is its own sum. */
static bool balanced_cuts(const double *w, int64_t n, int parts, int64_t *cuts)
{
    if (n <= parts) {
        for (int s = 0; s <= parts; s++) cuts[s] = uniform_cut(n, parts, s);
        return true;
    }
    size_t cells = (size_t)(n + 1) * (size_t)(parts + 1);
    double *mx = ps_calloc(cells, sizeof *mx), *mn = ps_calloc(cells, sizeof *mn);
    double *cost = ps_calloc(cells, sizeof *cost);
    int64_t *pos = ps_calloc(cells, sizeof *pos);
    double *pre = ps_calloc((size_t)n + 1, sizeof *pre);
    bool ok = mx && mn && cost && pos && pre;
    if (ok) {
        for (size_t c = 0; c < cells; c++) mx[c] = mn[c] = cost[c] = INFINITY;
        for (int64_t i = 0; i < n; i++) pre[i + 1] = pre[i] + w[i];
#define AT(i, j) ((size_t)(i) * (size_t)(parts + 1) + (size_t)(j))
        mx[AT(0, 0)] = 0;
        cost[AT(0, 0)] = 0;
        for (int64_t i = 1; i <= n; i++)
            for (int j = 1; j <= (i < parts ? i : parts); j++)
                for (int64_t k = 0; k < i; k++) {
                    double part = pre[i] - pre[k];
                    double hi = fmax(mx[AT(k, j - 1)], part), lo = fmin(mn[AT(k, j - 1)], part);
                    double c = hi - lo;
                    /* numpy: inf - x is inf, and inf >= inf holds, so an unreachable k still records its position */
                    if (cost[AT(i, j)] >= c) {
                        cost[AT(i, j)] = c;
                        mx[AT(i, j)] = hi;
                        mn[AT(i, j)] = lo;
                        pos[AT(i, j)] = k;
                    }
                }
        cuts[parts] = n;
        for (int j = parts; j >= 1; j--) cuts[j - 1] = pos[AT(cuts[j], j)];
#undef AT
    }
    free(mx);
    free(mn);
    free(cost);
    free(pos);
    free(pre);
    return ok;
}

bool ps_framework_fixed_cuts(ps_framework f, int k, const ps_model *m, int stages, int64_t *cuts)
{
    const ps_framework_rules *r = ps_framework_get(f);
    if (!r || r->partition != PS_FW_PART_UNIFORM || stages < 1) return false;
    if (k == 0) {
        for (int s = 0; s <= stages; s++) cuts[s] = uniform_cut(m->n_layers, stages, s);
        return true;
    }
    if (k != 1 || !r->part_blocks_balanced) return false;
    double *w = ps_calloc((size_t)m->n_layers, sizeof *w);
    if (!w) return false;
    for (int64_t i = 0; i < m->n_layers; i++) w[i] = ps_layer_has_attention(m->layers[i].kind) ? 1 : 0;
    bool ok = balanced_cuts(w, m->n_layers, stages, cuts);
    free(w);
    return ok;
}

ps_recompute ps_framework_effective_ckpt(const ps_layer *l, const ps_strategy *s)
{
    /* Selective recomputation repeats the attention core's score work; a layer without attention, or with a fused
     * kernel (which keeps no scores), has none: the cost model prices it exactly as none. */
    if (s->ckpt == PS_RECOMP_SELECTIVE && (!ps_layer_has_attention(l->kind) || s->attn == PS_ATTN_FUSED))
        return PS_RECOMP_NONE;
    /* per-op checkpointing applies to transformer blocks (ps_layer_linears); other layers keep what none keeps */
    if (s->ckpt == PS_RECOMP_OP && !ps_layer_has_attention(l->kind)) return PS_RECOMP_NONE;
    return s->ckpt;
}

int64_t ps_framework_recompute_block_n(const ps_model *m, const ps_plan *p)
{
    int S = p->pp * p->vpp;
    int64_t n = -1, most_whole = 0;
    int first = -1;
    bool alike = true;
    for (int64_t i = 0; i < m->n_layers; i++) {
        if (!ps_layer_has_attention(m->layers[i].kind)) continue;
        int e = (int)ps_framework_effective_ckpt(&m->layers[i], &p->layer[i]);
        if (first < 0) first = e;
        alike = alike && e == first;
    }
    if (alike) return 0;
    for (int s = 0; s < S; s++) {
        int64_t lead = 0, blocks = 0;
        for (int64_t i = p->cuts[s]; i < p->cuts[s + 1]; i++) {
            if (!ps_layer_has_attention(m->layers[i].kind)) continue;
            ps_recompute e = ps_framework_effective_ckpt(&m->layers[i], &p->layer[i]);
            if (e == PS_RECOMP_SELECTIVE || (e == PS_RECOMP_FULL && lead < blocks)) return -1;
            lead += e == PS_RECOMP_FULL;
            blocks++;
        }
        if (lead == blocks) {
            most_whole = lead > most_whole ? lead : most_whole;
        } else {
            if (n >= 0 && lead != n) return -1; /* every chunk stopping early stops after the same n */
            n = lead;
        }
    }
    /* mixed full and none: a chunk recomputed whole holds at most n blocks */
    return n >= 1 && most_whole <= n ? n : -1;
}

bool ps_framework_tp_ok(ps_framework f, const ps_layer *l, int tp, int cp, int64_t i, char *why, size_t cap)
{
    const ps_framework_rules *r = ps_framework_get(f);
    if (!r) return true;
    if (cp < 1) cp = 1;
    if (r->kv_heads_div_tp && ps_layer_has_attention(l->kind) && l->kv_heads % tp) {
        if (why && cap)
            snprintf(why, cap, "%s shards whole key/value heads: %lld of them do not divide by tp %d (layer %lld)",
                     r->title, (long long)l->kv_heads, tp, (long long)i);
        return false;
    }
    if (r->seq_tp_multiple > 1 && l->seq % ((int64_t)r->seq_tp_multiple * tp * cp)) {
        if (why && cap)
            snprintf(why, cap, "%s needs the sequence (%lld) to be a multiple of %d x tp %d%s (layer %lld)", r->title,
                     (long long)l->seq, r->seq_tp_multiple, tp, cp > 1 ? " x cp" : "", (long long)i);
        return false;
    }
    if (cp > 1 && r->cp_seq_multiple > 1 && l->seq % ((int64_t)r->cp_seq_multiple * cp)) {
        if (why && cap)
            snprintf(why, cap, "%s needs the sequence (%lld) to be a multiple of %d x cp %d (layer %lld)", r->title,
                     (long long)l->seq, r->cp_seq_multiple, cp, (long long)i);
        return false;
    }
    return true;
}

#define NO(...)                                                                                                        \
    do {                                                                                                               \
        if (why && cap) snprintf(why, cap, __VA_ARGS__);                                                               \
        return false;                                                                                                  \
    } while (0)
/* Expert parallelism as the frameworks take it: one --expert-model-parallel-size and --expert-tensor-parallel-size
 * for the whole model ([M] arguments.py; only Megatron-LM's rules reach here with MoE layers, the others refuse the
 * model). The degrees of the MoE layers count; a dense layer ignores them (the cost model does), but a plan with an
 * expert grid on a model without experts is refused rather than dropped: [M] arguments.py asserts "num_experts must
 * be non None to use expert model parallelism", and such a plan file says something about the model that is not so. */
static bool expert_rules(const ps_framework_rules *r, const ps_model *m, const ps_plan *p, char *why, size_t cap)
{
    const ps_strategy *ref = NULL;
    const ps_layer *ref_l = NULL;
    for (int64_t i = 0; i < m->n_layers; i++) {
        const ps_strategy *st = &p->layer[i];
        const ps_layer *l = &m->layers[i];
        if (!ps_layer_is_moe(l)) continue;
        if (!ref) {
            ref = st;
            ref_l = l;
        }
        if (ps_strategy_ep(st) != ps_strategy_ep(ref) || ps_strategy_etp(st) != ps_strategy_etp(ref))
            NO("%s takes one expert-parallel layout for every MoE layer; layer %lld has ep %d, etp %d, layer %lld ep "
               "%d, etp %d", r->title, (long long)i, ps_strategy_ep(st), ps_strategy_etp(st),
               (long long)(ref_l - m->layers), ps_strategy_ep(ref), ps_strategy_etp(ref));
        /* [M] megatron/core/transformer/moe/moe_layer.py MoELayer.forward raises in training when the attention's TP
         * group is larger than 1 without sequence parallelism (whatever ep) */
        if (st->tp > 1 && !st->sp)
            NO("%s runs MoE layers with tensor parallelism only with sequence parallelism (layer %lld: tp %d without "
               "sp; moe_layer.py)", r->title, (long long)i, st->tp);
        /* [M] transformer_config.py: "Bias in Moe is only supported when ETP==1" */
        if (l->bias && ps_strategy_etp(st) != 1)
            NO("%s runs MoE layers with biases only with expert tensor parallelism 1 (layer %lld: etp %d)", r->title,
               (long long)i, ps_strategy_etp(st));
    }
    if (ref) return true;
    for (int64_t i = 0; i < m->n_layers; i++) {
        const ps_strategy *st = &p->layer[i];
        if (ps_strategy_ep(st) > 1 || ps_strategy_etp(st) != st->tp)
            NO("%s has no mixture-of-experts layer: the plan's expert grid (layer %lld: ep %d, etp %d, tp %d) is "
               "not for this model (plan ep 1 and etp = tp, or leave \"ep\" / \"etp\" out of the plan file)",
               m->name, (long long)i, ps_strategy_ep(st), ps_strategy_etp(st), st->tp);
    }
    return true;
}

bool ps_framework_runs(ps_framework f, const ps_model *m, const ps_plan *p, char *why, size_t cap)
{
    const ps_framework_rules *r = ps_framework_get(f);
    if (why && cap) why[0] = '\0';
    if (!r) return true;
    if (r->model_runs && !r->model_runs(m, why, cap)) return false;
    if (!expert_rules(r, m, p, why, cap)) return false;
    if ((unsigned)m->dtype >= 4 || !r->dtype[m->dtype])
        NO("%s does not train in %s", r->title, ps_dtype_name(m->dtype));
    if (!ps_framework_has_schedule(r, p->schedule)) NO("%s runs no schedule '%s'", r->title, p->schedule);
    if (p->vpp > r->max_vpp) NO("%s takes at most %d model chunks per device (plan: vpp %d)", r->title, r->max_vpp,
                                p->vpp);
    if (p->vpp > 1 && p->pp < 2)
        NO("%s runs model chunks only across pipeline stages: vpp %d needs pp >= 2 (plan: pp %d)", r->title, p->vpp,
           p->pp);
    int S = p->pp * p->vpp;
    if (r->partition == PS_FW_PART_UNIFORM && S > 1) {
        int64_t *cuts = ps_calloc((size_t)S + 1, sizeof *cuts);
        if (!cuts) NO("out of memory checking %s's partition", r->title);
        bool match = false;
        for (int k = 0; k < 2 && !match; k++) {
            if (!ps_framework_fixed_cuts(f, k, m, S, cuts)) continue;
            match = memcmp(cuts, p->cuts, ((size_t)S + 1) * sizeof *cuts) == 0;
        }
        int64_t u1 = uniform_cut(m->n_layers, S, 1);
        free(cuts);
        if (!match)
            NO("%s splits the %lld layers its own way (partition_method \"uniform\": stage 1 from layer %lld; or "
               "\"type:\" over the transformer layers%s); the plan's split differs", r->title, (long long)m->n_layers,
               (long long)u1, r->part_blocks_balanced ? "" : ", not offered here");
    }
    const ps_strategy *ref = NULL;
    const ps_layer *ref_l = NULL;
    for (int64_t i = 0; i < m->n_layers && !ref; i++)
        if (ps_layer_has_attention(m->layers[i].kind)) {
            ref = &p->layer[i];
            ref_l = &m->layers[i];
        }
    if (!ref) NO("%s: %s has no transformer layer", r->title, m->name);
    bool pp_on = p->pp > 1;
    bool bf16 = m->dtype == PS_DTYPE_BF16 || m->dtype == PS_DTYPE_FP8;
    for (int64_t i = 0; i < m->n_layers; i++) {
        const ps_strategy *st = &p->layer[i];
        const ps_layer *l = &m->layers[i];
        bool block = ps_layer_has_attention(l->kind); /* a transformer layer (Swin's merges are not) */
        if (st->zero < 0 || st->zero > 3) NO("layer %lld: ZeRO stage %d", (long long)i, st->zero);
        /* the data-parallel group of gradients and ZeRO: dp x cp */
        const int dpc = ps_strategy_dp_cp(st), cp = ps_strategy_cp(st);
        /* (the bf16 rule shards over the data-parallel group: nothing to shard over one replica) */
        const bool *zs = !pp_on ? r->zero : bf16 && dpc > 1 ? r->zero_pp_bf16 : r->zero_pp;
        if (!zs[st->zero])
            NO("%s does not run ZeRO stage %d%s (layer %lld)%s", r->title, st->zero,
               pp_on ? " with pipeline parallelism" : "", (long long)i,
               zs == r->zero_pp_bf16 && r->zero_pp[st->zero] ? ": in bf16 its pipeline engine shards the optimizer "
                                                              "states (ZeRO-1)" : "");
        if (st->zero == 3 && dpc == 1)
            NO("ZeRO-3 over one data-parallel replica shards nothing (layer %lld): plan zero 0", (long long)i);
        if (dpc > 1 && (st->tp > 1 || pp_on) && !r->zero_model_parallel[st->zero])
            NO("%s runs ZeRO stage %d over dp > 1 only without tensor or pipeline parallelism (plan: tp %d, pp %d)",
               r->title, st->zero, st->tp, p->pp);
        if (cp > 1) {
            if ((unsigned)st->cp_comm >= PS_CP_COMM_COUNT || !r->cp[st->cp_comm]) {
                char kinds[64] = "";
                for (int k = 0; k < PS_CP_COMM_COUNT; k++)
                    if (r->cp[k])
                        snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s", kinds[0] ? ", " : "",
                                 ps_cp_comm_name((ps_cp_comm)k));
                if (!kinds[0])
                    NO("%s runs no context parallelism%s (plan: cp %d)", r->title,
                       f == PS_FW_DEEPSPEED ? ": its config has no key for it (Ulysses is set up by the model code's "
                                              "mpu, as Megatron-DeepSpeed does, not by the config)" : "", cp);
                NO("%s runs no %s context parallelism (plan: cp %d; it runs %s)", r->title,
                   ps_cp_comm_name(st->cp_comm), cp, kinds);
            }
            if (!r->cp_zero[st->zero])
                NO("%s runs context parallelism (cp %d) with ZeRO stage%s %s only (layer %lld: zero %d)", r->title, cp,
                   r->cp_zero[0] ? "s" : "", r->cp_zero[0] ? "0-3" : "3 (FSDP over dp x cp)", (long long)i,
                   st->zero);
            /* the sequence against 2 x cp chunks: ps_framework_tp_ok below */
        }
        if (dpc > 1 && !(st->dp_no_overlap ? r->dp_exposed : r->dp_overlap)[pp_on][st->zero])
            NO("%s cannot run ZeRO stage %d%s with its data-parallel collectives %s (layer %lld; --dp-overlap %s "
               "plans the other way)", r->title, st->zero, pp_on ? " with pipeline parallelism" : "",
               st->dp_no_overlap ? "after the backward" : "overlapped with the backward", (long long)i,
               st->dp_no_overlap ? "on" : "off");
        if ((unsigned)st->overlap >= PS_OVERLAP_COUNT) NO("layer %lld: unknown TP overlap", (long long)i);
        /* TP overlap te pairs SP collectives with the GEMMs around attention and MLP: a layer without them prices
         * te as none (ps_layer_te_pair), so only the blocks' choice matters */
        bool ov_ok = r->overlap[st->overlap] || (!ps_layer_has_attention(l->kind) && st->overlap == PS_OVERLAP_TE);
        if (!ov_ok) NO("%s has no TP overlap '%s' (layer %lld)", r->title, ps_overlap_name(st->overlap), (long long)i);
        if ((unsigned)st->ckpt >= PS_RECOMP_COUNT) NO("layer %lld: unknown recomputation", (long long)i);
        ps_recompute eff = ps_framework_effective_ckpt(l, st);
        if (!r->recompute[eff])
            NO("%s has no %s recomputation (layer %lld%s)", r->title, ps_recompute_name(eff), (long long)i,
               eff == PS_RECOMP_SELECTIVE ? ", unfused attention" : "");
        if (!block && r->recompute_blocks_only && eff != PS_RECOMP_NONE)
            NO("%s recomputes transformer layers only; layer %lld (%s) is planned with %s recomputation (give it "
               "\"ckpt\": \"none\")", r->title, (long long)i, ps_layer_kind_name(l->kind), ps_recompute_name(eff));
        bool sp = st->sp && st->tp > 1;
        if (sp && !r->sp) NO("%s has no Megatron sequence parallelism (layer %lld: tp %d with sp)", r->title,
                             (long long)i, st->tp);
        if (!sp && st->tp > 1 && r->sp_required)
            NO("%s runs tensor parallelism with sequence parallelism only (layer %lld: tp %d without sp)", r->title,
               (long long)i, st->tp);
        if (block && ps_layer_has_attention(l->kind) && st->attn != PS_ATTN_AUTO &&
            ((unsigned)st->attn >= PS_ATTN_COUNT || !r->attention[st->attn]))
            NO("%s has no %s attention kernel (layer %lld)", r->title, ps_attn_name(st->attn), (long long)i);
        if (!ps_framework_tp_ok(f, l, st->tp, cp, i, why, cap)) return false;
        if (!r->uniform) continue;
        /* one setting for the whole model: the layout (tp, sp), the sharding and the DP overlap of every layer;
         * kernel, TP overlap and recomputation of the blocks (embeddings and heads have no attention to tune) */
        if (st->tp != ref->tp || sp != (ref->sp && ref->tp > 1) || st->zero != ref->zero ||
            st->dp_no_overlap != ref->dp_no_overlap)
            NO("%s takes one strategy for the whole model; layer %lld (%s) differs from the first transformer layer "
               "(tp %d vs %d, sp %s vs %s, zero %d vs %d, dp overlap %s vs %s)", r->title, (long long)i,
               ps_layer_kind_name(l->kind), st->tp, ref->tp, sp ? "on" : "off", ref->sp && ref->tp > 1 ? "on" : "off",
               st->zero, ref->zero, st->dp_no_overlap ? "off" : "on", ref->dp_no_overlap ? "off" : "on");
        if (!block) continue;
        if (cp > 1 && st->cp_comm != ref->cp_comm)
            NO("%s takes one context-parallel kind for the whole model; layer %lld has %s, the first %s", r->title,
               (long long)i, ps_cp_comm_name(st->cp_comm), ps_cp_comm_name(ref->cp_comm));
        if (st->overlap != ref->overlap || st->attn != ref->attn)
            NO("%s takes one setting for every transformer layer; layer %lld differs from the first (TP overlap %s vs "
               "%s, attention %s vs %s)", r->title, (long long)i, ps_overlap_name(st->overlap),
               ps_overlap_name(ref->overlap), ps_attn_name(st->attn), ps_attn_name(ref->attn));
        if (eff != ps_framework_effective_ckpt(ref_l, ref) && !r->recompute_partial)
            NO("%s recomputes every transformer layer alike; layer %lld has %s recomputation, the first %s", r->title,
               (long long)i, ps_recompute_name(eff), ps_recompute_name(ps_framework_effective_ckpt(ref_l, ref)));
    }
    if (r->recompute_partial && ps_framework_recompute_block_n(m, p) < 0)
        NO("%s recomputes either every transformer layer alike or the first n of every model chunk "
           "(--recompute-method block); the plan's recomputation follows neither", r->title);
#undef NO
    return true;
}

int64_t ps_framework_uniform_cut(int64_t n, int parts, int s) { return uniform_cut(n, parts, s); }

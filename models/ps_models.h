/* Model descriptions: a transformer as a sequence of layers, from presets, Hugging Face config.json files or plain
 * layer lists; per-layer parameters, forward FLOPs and activation bytes. Knows nothing of clusters or strategies. */
#ifndef PS_MODELS_H
#define PS_MODELS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PS_LAYER_EMBED = 0,     /* token (+ learned position, + token type) embedding; vocab x hidden */
    PS_LAYER_PATCH_EMBED,   /* ViT/Swin patch embedding: conv(channels*patch^2 -> hidden), + positions, + [CLS] */
    PS_LAYER_ENCODER,       /* self-attention (bidirectional) + MLP */
    PS_LAYER_DECODER,       /* causal self-attention + MLP (GPT, Llama) */
    PS_LAYER_DECODER_XATTN, /* causal self-attention + cross-attention over the encoder output + MLP (T5 decoder) */
    PS_LAYER_MERGE,         /* Swin patch merging: norm(4C) + linear 4C -> out_hidden, tokens / 4 */
    PS_LAYER_LM_HEAD,       /* final norm + vocabulary projection (+ loss) */
    PS_LAYER_CLS_HEAD,      /* final norm + (optional pooler) + classifier to n_classes */
    PS_LAYER_KIND_COUNT
} ps_layer_kind;

typedef enum { PS_NORM_LAYERNORM = 0, PS_NORM_RMSNORM } ps_norm_kind;
typedef enum { PS_ACT_GELU = 0, PS_ACT_RELU, PS_ACT_SWIGLU, PS_ACT_GEGLU } ps_mlp_act; /* *GLU = gated, 3 matrices */
/* How a mixture-of-experts router scores the experts: softmax over the expert logits (Mixtral, Qwen-MoE), or a
 * sigmoid per expert with a learned bias that steers the top-k choice (DeepSeek-V3's auxiliary-loss-free balancing:
 * DeepSeek-V3 report Sec. 2.1.2; the bias is n_experts parameters more). */
typedef enum { PS_ROUTER_SOFTMAX = 0, PS_ROUTER_SIGMOID } ps_router;
typedef enum { PS_DTYPE_FP32 = 0, PS_DTYPE_FP16, PS_DTYPE_BF16, PS_DTYPE_FP8 } ps_dtype;
/* Activation recomputation (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
 * Models"): none, selective (Megatron-LM: the attention core only), full (the layer keeps its input).
 * PS_RECOMP_OP: torchtitan's per-operator selective checkpointing (`[activation_checkpoint] mode = "selective",
 * selective_ac_option = "op"`; torchtitan v0.2.2 torchtitan/distributed/activation_checkpoint.py, _apply_op_sac, and
 * the save list of torchtitan/models/llama3/infra/parallelize.py, unchanged since 9dec370 of 2024-12): the layer is
 * checkpointed, but the outputs of every other linear layer (the 1st, 3rd, ... aten.mm of the layer's forward), of
 * the attention kernel and of the sequence-parallel reduce-scatters are kept; the backward recomputes the other
 * linear layers, every elementwise operation and the all-gathers (ps_layer_linears lists the linear layers in that
 * order). */
typedef enum { PS_RECOMP_NONE = 0, PS_RECOMP_SELECTIVE, PS_RECOMP_FULL, PS_RECOMP_OP, PS_RECOMP_COUNT } ps_recompute;
/* How the attention core (scores, softmax, dropout, weighted sum) runs.
 * PS_ATTN_UNFUSED: two batched GEMMs around elementwise kernels that write the s x ctx scores, the softmax and the
 *   dropout mask to memory (Megatron-LM of 2021; Korthikanti et al. 2022 count these bytes).
 * PS_ATTN_FUSED: one kernel keeps each tile of scores on chip (FlashAttention-2/3, cuDNN fused attention): the layer
 *   keeps Q, K, V, the output and the softmax statistics (fp32 log-sum-exp per head and query), no scores, no dropout
 *   mask (the kernel regenerates it from the RNG state), and the backward recomputes the scores from Q and K
 *   (FlashAttention-2, Dao 2023, Sec. 3.1.2). Causal masking skips the tiles above the diagonal.
 * PS_ATTN_AUTO: fused where every GPU of the stage has a fused kernel (ps_gpu.fused_attn), unfused elsewhere; the
 *   cost model and the search resolve it, plans they print carry the resolved choice. */
typedef enum { PS_ATTN_AUTO = 0, PS_ATTN_UNFUSED, PS_ATTN_FUSED, PS_ATTN_COUNT } ps_attn;
const char *ps_attn_name(ps_attn a);            /* "auto", "unfused", "fused" */
ps_status ps_attn_parse(const char *s, ps_attn *out);

/* One layer. Sizes are int64 so that products never overflow in 32 bits. Fields that do not apply to a kind are 0. */
typedef struct {
    ps_layer_kind kind;
    int64_t hidden;      /* h: width of the residual stream entering the layer */
    int64_t out_hidden;  /* width leaving the layer (differs from hidden only for MERGE) */
    int64_t heads;       /* a: query heads */
    int64_t kv_heads;    /* key/value heads (GQA/MQA); == heads for multi-head attention */
    int64_t head_dim;    /* per-head width; heads*head_dim need not equal hidden (T5, GPT-3 2.7B) */
    int64_t ffn_hidden;  /* MLP inner width F */
    int64_t seq;         /* s: tokens per sample entering the layer */
    int64_t kv_seq;      /* tokens of the encoder output attended by cross-attention (DECODER_XATTN) */
    int64_t attn_window; /* keys attended per query: 0 = all (seq); Swin windows / sliding-window attention */
    int64_t vocab;       /* EMBED / LM_HEAD: vocabulary (already padded) */
    int64_t positions;   /* EMBED / PATCH_EMBED: learned position embeddings (0 = rotary/relative, no params) */
    int64_t token_types; /* EMBED: BERT token-type embeddings */
    int64_t n_classes;   /* CLS_HEAD */
    int64_t channels;    /* PATCH_EMBED: input image channels */
    int64_t patch;       /* PATCH_EMBED: patch edge in pixels */
    ps_norm_kind norm;
    ps_mlp_act act;
    bool bias;           /* linear layers carry biases (GPT-2/3, BERT, ViT) or not (Llama, T5) */
    bool dropout;        /* dropout masks are stored (GPT/BERT training) */
    bool tied;           /* LM_HEAD: weights shared with the embedding (adds no parameters) */
    bool pooler;         /* CLS_HEAD: BERT pooler dense h x h before the classifier; EMBED: adds an embedding norm */
    bool cls_token;      /* PATCH_EMBED: learned [CLS] token */
    /* Mixture of experts (blocks only; n_experts 0 = a dense MLP of ffn_hidden, and the fields below are 0). The MoE
     * block replaces the MLP: a router (h x n_experts), n_experts routed experts of width expert_ffn of which each
     * token uses top_k, and n_shared_experts experts of width shared_ffn every token uses (DeepSeek, Qwen2-MoE);
     * ffn_hidden is then unused. Each expert is an MLP of the layer's act (gated: 3 matrices). */
    int64_t n_experts;        /* routed experts */
    int64_t top_k;            /* routed experts per token */
    int64_t expert_ffn;       /* inner width of one routed expert */
    int64_t n_shared_experts; /* experts every token goes through */
    int64_t shared_ffn;       /* inner width of one shared expert */
    double capacity_factor;   /* tokens an expert takes at most, x its even share T*top_k/n_experts; 0 = dropless */
    ps_router router;
    /* Group-limited routing (DeepSeek-V2's device-limited, DeepSeek-V3's node-limited; Megatron-core's
     * moe_router_num_groups / moe_router_group_topk, HF n_group / topk_group): the experts in router_groups equal
     * groups of consecutive experts, a token's top_k chosen inside its best router_group_topk groups. 0: none. */
    int64_t router_groups;
    int64_t router_group_topk;
    /* Multi-head latent attention (DeepSeek-V2/V3; kv_lora_rank 0 = ordinary attention and the fields below are 0).
     * Keys and values come from one compressed latent of kv_lora_rank (plus a shared rotary key of qk_rope_head_dim),
     * queries from a q_lora_rank latent (0: a plain h x heads*(nope+rope) projection, DeepSeek-V2-Lite). heads
     * query/key/value heads; head_dim = qk_nope_head_dim + qk_rope_head_dim (the score width), kv_heads = heads. */
    int64_t q_lora_rank;
    int64_t kv_lora_rank;
    int64_t qk_nope_head_dim;
    int64_t qk_rope_head_dim;
    int64_t v_head_dim;       /* value and output width per head */
} ps_layer;

typedef struct {
    char name[64];        /* preset or file-derived name, e.g. "gpt3-65b" */
    char family[32];      /* "gpt3", "llama2", "bert", ... */
    char source[256];     /* where the numbers come from (paper / config), shown by `model show` */
    ps_dtype dtype;       /* training compute dtype (bf16 default) */
    int64_t seq;          /* default sequence length (tokens per sample) */
    int64_t n_layers;
    ps_layer *layers;
    double published_params; /* parameter count stated by the source, 0 if none (checked in tests, within 1%) */
    double published_active_params; /* active parameters per token stated by the source (MoE), 0 if none */
    double rope_theta;    /* base of the rotary position embedding ("rope_theta"), 0 when the source states none;
                             no cost depends on it: the exports pass it on (Megatron-LM --rotary-base) */
} ps_model;

/* Options applied while building a model from any source. 0 / NULL = keep the source's value. */
typedef struct {
    int64_t seq;         /* override sequence length (rescales every layer's seq; kv_seq of decoders follows the
                            encoder) */
    int64_t vocab_pad;   /* pad vocabulary up to a multiple of this (Megatron: 128 * tp); 0/1 = no padding */
    int dtype;           /* -1 = keep, else a ps_dtype */
} ps_model_opts;

void ps_model_opts_init(ps_model_opts *o);

/* Load by name or path. `spec` is a preset name ("gpt3-65b"), or a path to: a psearch model JSON, a Hugging Face
 * config.json (detected by "model_type"/"architectures"), or a plain layer-list file (*.layers, see docs/models.md).
 * Unknown preset -> PS_ERR_INPUT listing the known presets (and the nearest name). ps_model_locate, ps_read_file and
 * ps_model_parse in one call. */
ps_status ps_model_load(const char *spec, const ps_model_opts *opts, ps_model *out);

/* ps_model_load in two halves, so that an MPI program can find and read the file on one rank and have every rank
 * parse the same bytes (cli/inputs.c): ranks then never build different models from a file edited during the
 * launch or seen on one node only. */
typedef enum {
    PS_MODEL_FILE_ANY = 0, /* a user's file: a layer list, a psearch model JSON or a Hugging Face config.json, told
                              apart by its name and content */
    PS_MODEL_FILE_PRESET   /* an installed preset: a psearch model JSON */
} ps_model_file_kind;
typedef struct {
    char path[PATH_MAX + 96]; /* the file to read; every message about its content names it */
    ps_model_file_kind kind;
} ps_model_source;
/* Which file `spec` names, as ps_model_load resolves it (preset, path, a Hugging Face model folder's config.json, a
 * bare file name in the working directory), without reading it; the same errors for a spec that names nothing. */
ps_status ps_model_locate(const char *spec, ps_model_source *src);
/* The model in src's file, from its content: `len` bytes at `text` followed by a NUL, as ps_read_file gives them.
 * Messages name src->path with the line or field, exactly as ps_model_load's. */
ps_status ps_model_parse(const ps_model_source *src, const char *text, size_t len, const ps_model_opts *opts,
                         ps_model *out);
ps_status ps_model_load_hf_config(const char *path, const ps_model_opts *opts, ps_model *out);
ps_status ps_model_load_layer_list(const char *path, const ps_model_opts *opts, ps_model *out);
ps_status ps_model_load_json(const char *path, const ps_model_opts *opts, ps_model *out);
void ps_model_free(ps_model *m);
/* Pad the vocabulary of every embedding and head up to a multiple of `multiple` (what ps_model_opts.vocab_pad does
 * while loading), for a caller that learns the multiple later (estimate: from the plan's TP). 0 or 1: unchanged.
 * PS_ERR_INPUT, the model unchanged, when a padded vocabulary would overflow or multiple < 0; `where` names it. */
ps_status ps_model_pad_vocab(ps_model *m, int64_t multiple, const char *where) PS_NODISCARD;

/* Preset names, sorted; *names is a heap array of heap strings, free with ps_model_list_free. */
ps_status ps_model_list(char ***names, int *count);
void ps_model_list_free(char **names, int count);

/* ---- per-layer arithmetic (all per sample, i.e. micro-batch size 1) ---- */
/* -1 when the count overflows int64 (ps_model_validate refuses such layers, so a loaded model never gives -1).
 * Every routed expert counts: the weights a checkpoint stores. */
int64_t ps_layer_params(const ps_layer *l);
/* The parameters one token's forward pass uses: a dense layer's all, an MoE layer's top_k routed experts, its shared
 * experts, the router and the attention (what "active parameters" means in the Mixtral, Qwen3 and DeepSeek-V3
 * reports). -1 on overflow, as ps_layer_params. */
int64_t ps_layer_active_params(const ps_layer *l);
/* The parameters of an MoE layer's routed experts (0 for other layers): what expert parallelism splits. -1 on
 * overflow, as ps_layer_params. */
int64_t ps_layer_routed_params(const ps_layer *l);
/* Of what an MoE block keeps per sample (ps_layer_act_bytes_attn, no recomputation): *tok, the permuted expert inputs
 * and the experts' outputs, whole on every TP rank, and *inner, the experts' intermediates, split over TP [bytes];
 * both 0 for other layers. Expert parallelism moves these with the tokens (cost/layer_cost.c). */
void ps_layer_moe_act_parts(const ps_layer *l, ps_dtype dtype, double *tok, double *inner);
/* The layer has routed experts (n_experts > 0) / multi-head latent attention (kv_lora_rank > 0). */
bool ps_layer_is_moe(const ps_layer *l);
/* Some layer of m has routed experts. */
bool ps_model_has_moe(const ps_model *m);
bool ps_layer_is_mla(const ps_layer *l);
/* Forward matmul FLOPs per sample, 2 FLOPs per multiply-add, attention s*ctx terms included (Megatron convention:
 * causal masking is not discounted). Backward = 2x forward (input + weight gradient). These are model FLOPs (what
 * MFU and TFLOP/s per GPU count), whatever kernel runs the attention. */
double ps_layer_fwd_flops(const ps_layer *l);
/* Keys a query of the layer's self-attention is scored against on average, as a kernel executes it: the context
 * (window or sequence) for an unfused kernel, which computes every score and masks afterwards; for a fused kernel
 * on a causal layer only the keys up to the query (within its window): (s + 1) / 2 without a window. Encoders and
 * cross-attention attend to every key either way. */
double ps_layer_attn_keys(const ps_layer *l, ps_attn a);
/* Backward FLOPs of the attention core, from the forward FLOPs of its two products: the scores S = Q K^T (over the
 * query/key head width d) and the weighted sum O = P V (over the value width dv). Unfused: twice each (the input
 * gradients dQ, dK of the first and dP, dV of the second). Fused: the scores are recomputed first (no s x s matrix was
 * kept), so 3x the scores product (S, dQ = dS K, dK = dS^T Q) and 2x the weighted sum (dP = dO V^T, dV = P^T dO):
 * 2.5x the forward at d = dv, FlashAttention-2's count (Dao 2023, Sec. 4.1), 2.6x for DeepSeek's MLA (d 192,
 * dv 128). */
double ps_attn_bwd_flops(ps_attn a, double score_flops, double value_flops);
/* Activation bytes kept for the backward pass, per sample, on one GPU of a tp-way tensor-parallel group, with or
 * without sequence parallelism, under a recomputation mode. dtype gives the element size; dropout masks are 1 byte.
 * Reduces to Korthikanti et al. Table 2 for a GPT layer: sbh(34+5as/h) (tp=1), sbh(10+24/t+5as/(ht)) (TP),
 * sbh(34/t+5as/(ht)) (TP+SP), 34sbh/t (TP+SP+selective), 2sbh (full; /t with SP). */
double ps_layer_act_bytes(const ps_layer *l, ps_dtype dtype, int tp, bool seq_parallel, ps_recompute rc);
/* The same for an attention implementation (PS_ATTN_AUTO counts as unfused: the layer alone does not know the GPU).
 * Fused: the score terms (5as^2/t per sample for GPT with dropout) become the fp32 softmax statistics, 4as/t bytes,
 * for none and selective recomputation alike (selective recomputation has no scores left to drop); full
 * recomputation keeps the layer input either way. */
double ps_layer_act_bytes_attn(const ps_layer *l, ps_dtype dtype, int tp, bool seq_parallel, ps_recompute rc,
                               ps_attn a);
/* The linear layers (weight GEMMs) of a transformer block's forward in the order torchtitan's modules run them,
 * which decides what PS_RECOMP_OP keeps: self-attention wq, wk, wv, wo; cross-attention the same over the encoder
 * tokens for k and v; the MLP w1, w3, w2 (gated) or fc1, fc2. Per sample on one GPU of a tp-way group: `tokens`
 * rows, n_out output columns (already / tp for the column-parallel ones), k_in input columns; `row`: row parallel
 * (wo, w2, fc2: a partial sum of the full width before its reduction). At most PS_LINEARS_MAX; 0 for other kinds.
 * Dense blocks only: an MoE or MLA block's linear layers are others (the cost model refuses recompute op there). */
#define PS_LINEARS_MAX 11
typedef struct {
    double tokens, n_out, k_in;
    bool row;
} ps_linear;
int ps_layer_linears(const ps_layer *l, int tp, ps_linear out[PS_LINEARS_MAX]);
/* Whether PS_RECOMP_OP keeps linear layer i (0-based, ps_layer_linears' order) under dtype d: every other one from
 * the first (the policy counts aten.mm calls and recomputes the even ones); none under FP8, whose linear layers run
 * torch._scaled_mm (torchao float8), which is not in the save list. */
bool ps_op_sac_keeps(int i, ps_dtype d);
/* Bytes of one activation element in training dtype d: its size, but 2 for FP8, whose recipe (Transformer Engine)
 * keeps activations, weights and gradients in BF16 and runs only the linear layers' GEMMs in FP8. Under FP8,
 * ps_layer_act_bytes counts the inputs the linear layers keep for their weight gradient at 1 byte (the FP8 copies
 * the forward GEMMs read), every other activation at 2. */
double ps_act_elt_bytes(ps_dtype d);
/* Bytes of the activation leaving the layer per sample (what a pipeline stage boundary sends). */
double ps_layer_boundary_bytes(const ps_layer *l, ps_dtype dtype);

/* Same shape in every field (consecutive equal layers are shown as one row and costed once). */
bool ps_layer_equal(const ps_layer *a, const ps_layer *b);

int64_t ps_model_params(const ps_model *m); /* -1 on int64 overflow, as ps_layer_params */
int64_t ps_model_active_params(const ps_model *m); /* the sum of ps_layer_active_params; -1 on overflow */
double ps_model_fwd_flops(const ps_model *m);
/* Model FLOPs of one training iteration per sample (fwd + bwd = 3x forward, no recompute). */
double ps_model_train_flops(const ps_model *m);

int ps_dtype_bytes(ps_dtype d);
const char *ps_dtype_name(ps_dtype d);
ps_status ps_dtype_parse(const char *s, ps_dtype *out);
const char *ps_layer_kind_name(ps_layer_kind k);
ps_status ps_layer_kind_parse(const char *s, ps_layer_kind *out);
/* A layer between the model's ends: not an embedding (token or patch) nor a head. Blocks are what a pipeline split
 * divides evenly and what frameworks count as layers (Megatron-LM's --num-layers); Swin's merge layers are blocks. */
bool ps_layer_is_block(ps_layer_kind k);
/* A transformer block with an attention core (encoder, decoder, decoder with cross-attention): what an attention
 * kernel and FP8's linear layers apply to. */
bool ps_layer_has_attention(ps_layer_kind k);
const char *ps_recompute_name(ps_recompute r);
ps_status ps_recompute_parse(const char *s, ps_recompute *out);

/* A copy of m with every width and token count divided by f (rounded up to a multiple of align: the largest
 * tensor-parallel degree that must still divide them) and the head counts kept, so a GEMM has about 1/f^3 of the
 * FLOPs and a tensor about 1/f^2 of the bytes; named "NAME/f". f = 1: an exact copy. `psearch exec` runs such a
 * copy on CPUs and predicts the same copy, so measured and predicted describe one model. */
ps_status ps_model_scaled(const ps_model *m, int64_t f, int64_t align, ps_model *out);

/* Check the invariants every consumer relies on (sizes > 0, heads divide, kv_heads divides heads, ...).
 * `where` names the file for the message. */
ps_status ps_model_validate(const ps_model *m, const char *where);

/* models/render.c: the model as `psearch model show` prints it, in JSON (NULL when out of memory) and as a table;
 * runs of identical layers are one group. (struct json_t is jansson's json_t, named so that this header needs no
 * jansson.h.) */
struct json_t *ps_model_to_json(const ps_model *m);
void ps_model_print(FILE *f, const ps_model *m);

#ifdef __cplusplus
}
#endif
#endif

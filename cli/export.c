/* What a chosen plan becomes outside psearch: the launch of a training framework that runs exactly that plan
 * (Megatron-LM arguments, a DeepSpeed config, a torchtitan job config), and the pipeline timeline as SVG. A plan the
 * framework cannot run as planned is refused with the rule it breaks (search/framework.c, which also names the
 * framework sources every rule comes from), never bent into another plan. The formats are in docs/exports.md. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_schedules.h"
#include "ps_search.h"

typedef struct {
    const ps_model *m;
    const ps_cluster *c;
    const ps_plan *p;
    const ps_prediction *r;
    const ps_cost_params *cp;
    int64_t vocab_pad;         /* the padding unit the model was loaded with (0 or 1: none) */
    const ps_framework_rules *fw;
    int S;                     /* pp x vpp stages */
    int64_t *blocks;           /* [S] transformer layers per stage */
    int64_t n_blocks;
    const ps_layer *emb, *blk, *head;
    const ps_strategy *s;      /* the first transformer layer's strategy: the model's (the rules checked it) */
    const ps_layer *dense;     /* the first transformer layer without routed experts (NULL: none) */
    const ps_layer *moe;       /* the first MoE layer (NULL: a dense model) */
    const ps_strategy *moe_s;  /* its strategy: the expert grid of every MoE layer (the rules checked it) */
    ps_recompute ckpt;         /* its effective recomputation */
    int64_t dp, micro;
    int64_t dpc;               /* the gradient group: dp x cp */
} exp_ctx;

/* A growing list of lines (flags, notes), each malloc'd. */
typedef struct {
    char **v;
    int n, cap;
    bool oom;
} lines;

static void add(lines *L, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (s) vsnprintf(s, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
    if (s && L->n == L->cap) {
        int cap = L->cap ? 2 * L->cap : 32;
        char **v = realloc(L->v, (size_t)cap * sizeof *v);
        if (v) {
            L->v = v;
            L->cap = cap;
        }
    }
    if (!s || L->n == L->cap) {
        free(s);
        L->oom = true;
        return;
    }
    L->v[L->n++] = s;
}

static void lines_free(lines *L)
{
    for (int i = 0; i < L->n; i++) free(L->v[i]);
    free(L->v);
    memset(L, 0, sizeof *L);
}

static ps_status ctx_init(exp_ctx *x, ps_framework f, const ps_model *m, const ps_cluster *c, const ps_plan *p,
                          const ps_prediction *r, const ps_cost_params *cp, int64_t vocab_pad)
{
    memset(x, 0, sizeof *x);
    char why[512];
    x->fw = ps_framework_get(f);
    /* Mixture-of-experts and latent-attention models: the framework's rules say which run them (Megatron-LM does;
     * DeepSpeed's config and psearch's torchtitan export cannot describe them and refuse with the reason) */
    if (!ps_framework_runs(f, m, p, why, sizeof why))
        return PS_FAIL(PS_ERR_INPUT, "--export %s: %s cannot run this plan as planned: %s (%s; docs/exports.md)",
                       x->fw->name, x->fw->title, why, x->fw->version);
    if (!r->fits)
        return PS_FAIL(PS_ERR_INFEASIBLE, "--export %s: the plan does not fit in memory; nothing to launch",
                       x->fw->name);
    *x = (exp_ctx){.m = m, .c = c, .p = p, .r = r, .cp = cp, .vocab_pad = vocab_pad, .fw = x->fw,
                   .S = p->pp * p->vpp};
    x->blocks = ps_calloc((size_t)x->S, sizeof *x->blocks);
    if (!x->blocks) return PS_FAIL(PS_ERR_SYSTEM, "out of memory");
    for (int s = 0; s < x->S; s++)
        for (int64_t l = p->cuts[s]; l < p->cuts[s + 1]; l++) x->blocks[s] += ps_layer_has_attention(m->layers[l].kind);
    for (int s = 0; s < x->S; s++) x->n_blocks += x->blocks[s];
    for (int64_t l = 0; l < m->n_layers; l++) {
        const ps_layer *ly = &m->layers[l];
        if (ly->kind == PS_LAYER_EMBED && !x->emb) x->emb = ly;
        if (ly->kind == PS_LAYER_LM_HEAD) x->head = ly;
        if (ps_layer_has_attention(ly->kind) && !x->blk) {
            x->blk = ly;
            x->s = &p->layer[l];
        }
        if (ps_layer_has_attention(ly->kind) && !ps_layer_is_moe(ly) && !x->dense) x->dense = ly;
        if (ps_layer_is_moe(ly) && !x->moe) {
            x->moe = ly;
            x->moe_s = &p->layer[l];
        }
    }
    x->ckpt = ps_framework_effective_ckpt(x->blk, x->s);
    x->dp = x->s->dp;
    x->dpc = ps_strategy_dp_cp(x->s);
    x->micro = ps_plan_micro_batches(p);
    return PS_OK;
}

static void ctx_free(exp_ctx *x) { free(x->blocks); }

static bool all_equal(const int64_t *v, int from, int to)
{
    for (int i = from + 1; i < to; i++)
        if (v[i] != v[from]) return false;
    return true;
}


/* The notes every export opens with: what was planned and what it predicts. */
/* The export kinds: the --export word (a framework's ps_framework_name) and what it writes, with and without its
 * article (the refusals say "as a DeepSpeed config", the notes start "DeepSpeed config for ..."). */
static const struct {
    ps_framework fw;
    const char *what, *noun;
} k_exports[] = {
    {PS_FW_MEGATRON, "Megatron-LM arguments", "Megatron-LM arguments"},
    {PS_FW_DEEPSPEED, "a DeepSpeed config", "DeepSpeed config"},
    {PS_FW_TORCHTITAN, "a torchtitan job config", "torchtitan job config"},
};
#define N_EXPORTS (sizeof k_exports / sizeof k_exports[0])
const char *const ps_plan_export_kinds[] = {"megatron", "deepspeed", "torchtitan", NULL};
_Static_assert(sizeof ps_plan_export_kinds / sizeof ps_plan_export_kinds[0] == N_EXPORTS + 1,
               "one --export word per export kind");

static int export_find(const char *kind)
{
    int f = kind ? ps_framework_find(kind) : -1;
    for (size_t i = 0; i < N_EXPORTS; i++)
        if ((int)k_exports[i].fw == f && strcmp(ps_plan_export_kinds[i], kind) == 0) return (int)i;
    return -1;
}

const char *ps_plan_export_what(const char *kind)
{
    int i = export_find(kind);
    return i < 0 ? NULL : k_exports[i].what;
}

static void plan_notes(lines *N, const exp_ctx *x)
{
    int k = export_find(x->fw->name);
    const char *what = k < 0 ? "launch" : k_exports[k].noun;
    const ps_plan *p = x->p;
    char cps[48] = "";
    if (ps_strategy_cp(x->s) > 1)
        snprintf(cps, sizeof cps, " x cp %d (%s)", x->s->cp, ps_cp_comm_name(x->s->cp_comm));
    char eps[64] = "";
    if (x->moe)
        snprintf(eps, sizeof eps, " (experts: etp %d x ep %d x edp %lld)", ps_strategy_etp(x->moe_s),
                 ps_strategy_ep(x->moe_s),
                 (long long)(ps_strategy_width(x->moe_s) / ((int64_t)ps_strategy_etp(x->moe_s) *
                                                            ps_strategy_ep(x->moe_s))));
    add(N, "%s for the psearch plan of %s on %s (%lld GPUs): tp %d%s x pp %d x dp %lld%s, schedule %s, vpp %d, "
        "micro-batch %lld, global batch %lld (%lld micro-batches), %s", what, x->m->name, x->c->name,
        (long long)x->c->n_gpus, x->s->tp, cps, p->pp, (long long)x->dp, eps, p->schedule, p->vpp, (long long)p->mbs,
        (long long)p->gbs,
        (long long)x->micro, ps_dtype_name(x->m->dtype));
    add(N, "read against %s; rules and sources: search/framework.c, docs/exports.md", x->fw->version);
    char its[32], sps[32], tps[32];
    /* as the tables print them: plain digits, and the rounding left of a zero bubble as 0 */
    double bubble = fabs(x->r->bubble_frac) <= 1e-9 ? 0.0 : 100 * x->r->bubble_frac;
    add(N, "predicted by psearch %s: %s s per iteration, %s samples/s, %s tokens/s, MFU %.1f%%, bubble %.1f%%, "
        "peak memory %.1f GiB per GPU", PS_VERSION, ps_fmt_num(x->r->iter_time_s, 0, its, sizeof its),
        ps_fmt_num(x->r->samples_per_s, 0, sps, sizeof sps), ps_fmt_num(x->r->tokens_per_s, 0, tps, sizeof tps),
        100 * x->r->mfu, bubble, ps_prediction_peak(x->r) / (1024.0 * 1024 * 1024));
    char buf[512] = "";
    for (int s = 0; s < x->S && strlen(buf) < sizeof buf - 24; s++)
        ps_strcatf(buf, sizeof buf, "%s%lld", s ? " " : "", (long long)x->blocks[s]);
    add(N, "transformer layers per %sstage: %s%s (the embedding with the first, the head with the last)",
        p->vpp > 1 ? "virtual " : "", buf, strlen(buf) >= sizeof buf - 24 ? " ..." : "");
}

/* ---- Megatron-LM ---- */

/* --make-vocab-size-divisible-by D: Megatron pads the tokenizer's vocabulary to a multiple of D x tp
 * (megatron/training/vocab_utils.py). The model here is padded to a multiple of `pad` already (V); the smallest D
 * with D x tp >= pad and dividing V pads the original (V - pad < orig <= V) to exactly V. Without padding, V is the
 * original: the largest D <= 128 (Megatron's default) with D x tp dividing V keeps it. */
static int64_t megatron_vocab_div(int64_t V, int64_t pad, int tp)
{
    if (pad > 1) {
        for (int64_t d = (pad + tp - 1) / tp; d * tp <= V; d++)
            if (V % (d * tp) == 0) return d;
        return V / tp;
    }
    for (int64_t d = 128; d > 1; d--)
        if (V % (d * tp) == 0) return d;
    return 1;
}

/* --moe-layer-freq (arguments.py moe_freq_type, megatron/core/models/gpt/gpt_layer_specs.py): an int N puts experts
 * on the transformer layers i with i % N == 0; otherwise a python list expression of 0 (dense) and 1 (MoE), one per
 * transformer layer, of the characters arguments.py _eval_pattern admits (digits , [ ] ( ) + *), written as runs,
 * "([0]*3+[1]*58)", and as a repeated period where there is one, "([0]+[1])*24". Empty when every layer is MoE
 * (the default 1). The caller frees *out. */
static bool megatron_moe_freq(const exp_ctx *x, char **out)
{
    *out = NULL;
    int64_t L = x->n_blocks, k = 0;
    char *pat = malloc((size_t)L + 1);
    if (!pat) return false;
    for (int64_t l = 0; l < x->m->n_layers; l++)
        if (ps_layer_has_attention(x->m->layers[l].kind)) pat[k++] = ps_layer_is_moe(&x->m->layers[l]) ? '1' : '0';
    pat[k] = '\0';
    if (!strchr(pat, '0')) {
        free(pat);
        return true;
    }
    int64_t every = 0;
    for (int64_t n = 2; n <= L && !every; n++) {
        bool ok = true;
        for (int64_t i = 0; i < L && ok; i++) ok = (pat[i] == '1') == (i % n == 0);
        if (ok) every = n;
    }
    int64_t period = L;
    for (int64_t q = 1; q < L && period == L; q++) {
        if (L % q) continue;
        bool ok = true;
        for (int64_t i = q; i < L && ok; i++) ok = pat[i] == pat[i - q];
        if (ok) period = q;
    }
    size_t cap = (size_t)period * 32 + 64;
    char *s = malloc(cap);
    if (!s) {
        free(pat);
        return false;
    }
    if (every) {
        snprintf(s, cap, "%lld", (long long)every);
    } else {
        s[0] = '\0';
        ps_strcatf(s, cap, "(");
        for (int64_t i = 0; i < period;) {
            int64_t j = i;
            while (j < period && pat[j] == pat[i]) j++;
            ps_strcatf(s, cap, "%s[%c]", i ? "+" : "", pat[i]);
            if (j - i > 1) ps_strcatf(s, cap, "*%lld", (long long)(j - i));
            i = j;
        }
        ps_strcatf(s, cap, ")");
        if (period < L) ps_strcatf(s, cap, "*%lld", (long long)(L / period));
    }
    free(pat);
    *out = s;
    return true;
}

static void megatron_flags(lines *F, lines *N, const exp_ctx *x)
{
    const ps_model *m = x->m;
    const ps_plan *p = x->p;
    const ps_strategy *s = x->s;
    const ps_layer *b = x->blk;
    bool sp = s->sp && s->tp > 1;
    /* parallelism (megatron/training/arguments.py _add_distributed_args; megatron/core/model_parallel_config.py) */
    add(F, "--tensor-model-parallel-size %d", s->tp);
    add(F, "--pipeline-model-parallel-size %d", p->pp);
    const ps_layer *moe = x->moe;
    const ps_strategy *ms = x->moe_s;
    if (moe) {
        /* the routed experts' grid (megatron/core/parallel_state.py: etp x ep x edp over the world / pp, the
         * expert grid without cp): named even at 1 / tp, Megatron's defaults, so the launch states the plan */
        add(F, "--expert-model-parallel-size %d", ps_strategy_ep(ms));
        add(F, "--expert-tensor-parallel-size %d", ps_strategy_etp(ms));
    }
    if (ps_strategy_cp(s) > 1) {
        /* arguments.py --context-parallel-size; --cp-comm-type p2p (the ring of K/V blocks) or a2a (Ulysses),
         * transformer_config.py cp_comm_type */
        add(F, "--context-parallel-size %d", s->cp);
        add(F, "--cp-comm-type %s", s->cp_comm == PS_CP_A2A ? "a2a" : "p2p");
    }
    if (x->S > 1) {
        bool even = all_equal(x->blocks, 0, x->S);
        if (even && p->vpp > 1) {
            add(F, "--num-virtual-stages-per-pipeline-rank %d", p->vpp);
        } else if (!even && p->vpp == 1 && (p->pp == 2 || all_equal(x->blocks, 1, p->pp - 1))) {
            /* transformer_block.py get_num_layers_to_build: the first / last stage as given, the stages between
             * splitting the rest evenly */
            int64_t mid = p->pp > 2 ? x->blocks[1] : -1;
            if (x->blocks[0] != mid) add(F, "--decoder-first-pipeline-num-layers %lld", (long long)x->blocks[0]);
            if (x->blocks[p->pp - 1] != mid)
                add(F, "--decoder-last-pipeline-num-layers %lld", (long long)x->blocks[p->pp - 1]);
        } else if (!even) {
            /* pipeline_parallel_layer_layout.py parse_str_to_list: E embedding, t transformer layer, L loss (the
             * output layer's stage), '|' between stages in virtual-stage order (s = chunk x pp + device), x*n for n
             * of x; quoted for the shell */
            size_t cap = (size_t)x->S * 32 + 8;
            char *lay = malloc(cap);
            if (!lay) {
                F->oom = true;
                return;
            }
            lay[0] = '\0';
            for (int st = 0; st < x->S; st++)
                ps_strcatf(lay, cap, "%s%s%s%lld%s", st ? "|" : "", st == 0 ? "E" : "", "t*", (long long)x->blocks[st],
                           st == x->S - 1 ? "L" : "");
            add(F, "--pipeline-model-parallel-layout '%s'", lay);
            free(lay);
        }
    }
    if (sp) add(F, "--sequence-parallel");
    if (s->overlap == PS_OVERLAP_TE) add(F, "--tp-comm-overlap");
    add(F, "--micro-batch-size %lld", (long long)p->mbs);
    add(F, "--global-batch-size %lld", (long long)p->gbs);
    /* the model (megatron/core/transformer/transformer_config.py, arguments.py _add_network_size_args); Megatron's
     * defaults are GPT-2's: learned positions, LayerNorm, GeLU, biases, tied embeddings, dropout 0.1 */
    add(F, "--num-layers %lld", (long long)x->n_blocks);
    add(F, "--hidden-size %lld", (long long)b->hidden);
    /* the dense layers' MLP; a model of MoE layers only has none, and Megatron takes --ffn-hidden-size as the
     * experts' width where --moe-ffn-hidden-size is not given (arguments.py): the experts' width, named twice */
    add(F, "--ffn-hidden-size %lld", (long long)(x->dense ? x->dense->ffn_hidden : moe->expert_ffn));
    add(F, "--num-attention-heads %lld", (long long)b->heads);
    if (b->kv_heads && b->kv_heads != b->heads) {
        add(F, "--group-query-attention");
        add(F, "--num-query-groups %lld", (long long)b->kv_heads);
    }
    const bool mla = ps_layer_is_mla(b);
    /* latent attention sizes its heads with its own flags below (kv_channels is not read by MLA) */
    if (!mla && b->head_dim && b->heads * b->head_dim != b->hidden)
        add(F, "--kv-channels %lld", (long long)b->head_dim);
    if (mla) {
        /* arguments.py _add_mla_args, transformer_config.py MLATransformerConfig: a query latent of q_lora_rank
         * (none given: a plain query projection), a key/value latent of kv_lora_rank, per head qk_head_dim
         * unrotated + qk_pos_emb_head_dim rotary query/key widths and v_head_dim values. MLA's rope_type defaults to
         * YaRN (rotary_scaling_factor 40, a context extension): the model's plain rotary is --rope-type rope */
        add(F, "--multi-latent-attention");
        if (b->q_lora_rank > 0) add(F, "--q-lora-rank %lld", (long long)b->q_lora_rank);
        add(F, "--kv-lora-rank %lld", (long long)b->kv_lora_rank);
        add(F, "--qk-head-dim %lld", (long long)b->qk_nope_head_dim);
        add(F, "--qk-pos-emb-head-dim %lld", (long long)b->qk_rope_head_dim);
        add(F, "--v-head-dim %lld", (long long)b->v_head_dim);
        add(F, "--rope-type rope");
    }
    if (moe) {
        /* arguments.py _add_moe_args and the MoE fields of transformer_config.py */
        add(F, "--num-experts %lld", (long long)moe->n_experts);
        char *freq = NULL;
        if (!megatron_moe_freq(x, &freq)) {
            F->oom = true;
            return;
        }
        if (freq) add(F, "--moe-layer-freq '%s'", freq);
        free(freq);
        add(F, "--moe-ffn-hidden-size %lld", (long long)moe->expert_ffn);
        add(F, "--moe-router-topk %lld", (long long)moe->top_k);
        /* "num_shared_experts * ffn_size_of_each_shared_expert" (transformer_config.py): one MLP of that width */
        if (moe->n_shared_experts > 0)
            add(F, "--moe-shared-expert-intermediate-size %lld", (long long)(moe->n_shared_experts * moe->shared_ffn));
        if (moe->router == PS_ROUTER_SIGMOID) {
            /* sigmoid scores with the learned selection bias (transformer_config.py: expert bias needs sigmoid) */
            add(F, "--moe-router-score-function sigmoid");
            add(F, "--moe-router-enable-expert-bias");
        } else {
            add(F, "--moe-router-score-function softmax");
            /* transformer_config.py: "Please use --moe-router-pre-softmax when topk is 1" */
            if (moe->top_k == 1) add(F, "--moe-router-pre-softmax");
        }
        /* group-limited routing (transformer_config.py moe_router_num_groups / moe_router_group_topk; the
         * all-to-all is priced with it, collectives.c) */
        if (moe->router_groups > 0) {
            add(F, "--moe-router-num-groups %lld", (long long)moe->router_groups);
            add(F, "--moe-router-group-topk %lld", (long long)moe->router_group_topk);
        }
        /* the experts of a GPU as grouped GEMMs, as priced (cost/layer_cost.c) */
        add(F, "--moe-grouped-gemm");
        /* token_dispatcher.py: on the expert grid the tokens reach their experts by all-to-all over ep (then gathered
         * over etp), as priced; without one (ep 1, etp = tp) the MoE block is priced like a sequence-parallel MLP:
         * all-gather the hidden states over tp, reduce-scatter after, Megatron's allgather dispatcher */
        add(F, "--moe-token-dispatcher-type %s", ps_strategy_ep_folded(ms) ? "alltoall" : "allgather");
        /* dropless unless the model caps the experts' tokens (transformer_config.py moe_expert_capacity_factor:
         * None = dropless) */
        if (moe->capacity_factor > 0) add(F, "--moe-expert-capacity-factor %g", moe->capacity_factor);
    }
    add(F, "--seq-length %lld", (long long)b->seq);
    int64_t positions = x->emb->positions ? x->emb->positions : b->seq;
    add(F, "--max-position-embeddings %lld", (long long)(positions > b->seq ? positions : b->seq));
    if (x->emb->positions == 0) {
        add(F, "--position-embedding-type rope");
        if (m->rope_theta > 0) add(F, "--rotary-base %.0f", m->rope_theta);
    }
    if (b->norm == PS_NORM_RMSNORM) add(F, "--normalization RMSNorm");
    if (b->act == PS_ACT_SWIGLU) add(F, "--swiglu");
    if (!b->bias) add(F, "--disable-bias-linear");
    if (!x->head->tied) add(F, "--untie-embeddings-and-output-weights");
    if (!b->dropout) {
        /* no dropout masks are kept (the activation memory planned) */
        add(F, "--hidden-dropout 0.0");
        add(F, "--attention-dropout 0.0");
    }
    int64_t V = x->emb->vocab, D = megatron_vocab_div(V, x->vocab_pad, s->tp);
    add(F, "--make-vocab-size-divisible-by %lld", (long long)D);
    /* transformer/enums.py AttnBackend: fused (cuDNN) keeps no scores like the plan's fused kernel; unfused (TE's
     * score-materialising path) is what an unfused plan was priced with */
    add(F, "--attention-backend %s", s->attn == PS_ATTN_UNFUSED ? "unfused" : "fused");
    int64_t n = ps_framework_recompute_block_n(m, p);
    if (n > 0) {
        add(F, "--recompute-granularity full");
        add(F, "--recompute-method block");
        add(F, "--recompute-num-layers %lld", (long long)n);
    } else if (x->ckpt == PS_RECOMP_FULL) {
        /* every layer's input kept, its forward repeated in the backward: uniform groups of one layer */
        add(F, "--recompute-granularity full");
        add(F, "--recompute-method uniform");
        add(F, "--recompute-num-layers 1");
    } else if (x->ckpt == PS_RECOMP_SELECTIVE) {
        add(F, "--recompute-granularity selective"); /* recompute_modules' default: core_attn */
    }
    if (s->zero >= 1) add(F, "--use-distributed-optimizer");
    if (s->zero >= 2) {
        /* Megatron-FSDP (docs/user-guide/features/megatron_fsdp.md): v1 runs over the distributed optimizer;
         * arguments.py requires its checkpoint format */
        add(F, "--use-megatron-fsdp");
        add(F, "--data-parallel-sharding-strategy %s", s->zero == 2 ? "optim_grads" : "optim_grads_params");
        add(F, "--ckpt-format fsdp_dtensor");
    }
    /* distributed_data_parallel_config.py: both off by default; the plan was priced with Megatron-core's bucketed
     * reduction during the backward and, with sharding, the parameter gathers beside the next forward */
    if (x->dpc > 1 && !s->dp_no_overlap) {
        add(F, "--overlap-grad-reduce");
        if (s->zero >= 1) add(F, "--overlap-param-gather");
    }
    if (m->dtype == PS_DTYPE_BF16 || m->dtype == PS_DTYPE_FP8) add(F, "--bf16");
    if (m->dtype == PS_DTYPE_FP16) add(F, "--fp16");
    if (m->dtype == PS_DTYPE_FP8) {
        /* TransformerConfig.fp8 'hybrid' (E4M3 forward, E5M2 gradients) with delayed scaling over Transformer Engine's
         * default history of 1024 amax values, the scaling state the plan's memory counts (Megatron's default
         * history is 1) */
        add(F, "--fp8-format hybrid");
        add(F, "--fp8-recipe delayed");
        add(F, "--fp8-amax-history-len 1024");
    }
    add(F, "--transformer-impl transformer_engine");

    plan_notes(N, x);
    int64_t per_node = x->c->groups[0].gpus_per_node > 0 ? x->c->groups[0].gpus_per_node : 1;
    add(N, "launch: torchrun --nnodes %lld --nproc-per-node %lld pretrain_gpt.py <the arguments above> <data, "
        "tokenizer, optimizer, learning-rate and iteration flags>", (long long)x->c->n_nodes, (long long)per_node);
    if (s->zero >= 2)
        add(N, "environment: leave CUDA_DEVICE_MAX_CONNECTIONS unset (arguments.py: Megatron-FSDP requires it > 1)");
    else if (s->tp > 1)
        add(N, "environment: CUDA_DEVICE_MAX_CONNECTIONS=1 (arguments.py requires it for tensor parallelism before "
            "Blackwell)");
    add(N, "vocabulary: %lld entries as planned: --make-vocab-size-divisible-by %lld x tp %d pads the tokenizer's to "
        "it", (long long)V, (long long)D, s->tp);
    if (s->ckpt == PS_RECOMP_SELECTIVE && x->ckpt == PS_RECOMP_NONE)
        add(N, "selective recomputation with a fused attention kernel repeats nothing (the plan prices it as none): "
            "no recompute flags");
    if (n > 0)
        add(N, "recomputation: the first %lld transformer layers of every model chunk, none of the rest", (long long)n);
    if (s->overlap == PS_OVERLAP_TE)
        add(N, "--tp-comm-overlap: Transformer Engine's userbuffer rings for every transformer layer (TE built with "
            "userbuffers)");
    if (x->dpc > 1 && !s->dp_no_overlap)
        add(N, "data-parallel overlap priced with Megatron-core's default buckets (--ddp-bucket-size unset: max(4e7, "
            "1e6 x dp) parameters)");
    if (x->dpc > 1 && s->dp_no_overlap)
        add(N, "data-parallel collectives after the backward, as planned (--dp-overlap off): no --overlap-grad-reduce "
            "or --overlap-param-gather");
    if (moe) {
        add(N, "experts: %lld routed of width %lld, %lld per token%s, %s router, %s; %d per GPU (ep %d), each split "
            "over etp %d; load-balancing losses, router groups and scaling are the run's own (psearch prices the "
            "busiest expert at moe_imbalance x the mean)", (long long)moe->n_experts, (long long)moe->expert_ffn,
            (long long)moe->top_k, moe->n_shared_experts > 0 ? " plus shared" : "",
            moe->router == PS_ROUTER_SIGMOID ? "sigmoid (selection bias)" : "softmax",
            moe->capacity_factor > 0 ? "capacity-limited" : "dropless",
            (int)(moe->n_experts / ps_strategy_ep(ms)), ps_strategy_ep(ms), ps_strategy_etp(ms));
        if (x->dense)
            add(N, "dense transformer layers (MLP %lld wide) where --moe-layer-freq has 0",
                (long long)x->dense->ffn_hidden);
    }
    if (m->dtype == PS_DTYPE_FP8) add(N, "FP8 as planned is Transformer Engine's delayed scaling; Blackwell GPUs run "
                                         "--fp8-recipe mxfp8 instead, which this plan was not priced with");
}

/* ---- DeepSpeed ---- */

static json_t *deepspeed_config(const exp_ctx *x, lines *N)
{
    const ps_model *m = x->m;
    const ps_plan *p = x->p;
    const ps_strategy *s = x->s;
    json_t *j = json_object();
    /* runtime/config.py: train_batch_size = micro x accumulation x dp (engine.py and pipe/engine.py assert it) */
    json_object_set_new(j, "train_batch_size", json_integer(p->gbs));
    json_object_set_new(j, "train_micro_batch_size_per_gpu", json_integer(p->mbs));
    json_object_set_new(j, "gradient_accumulation_steps", json_integer(x->micro));
    if (m->dtype == PS_DTYPE_BF16) json_object_set_new(j, "bf16", json_pack("{s:b}", "enabled", 1));
    if (m->dtype == PS_DTYPE_FP16) json_object_set_new(j, "fp16", json_pack("{s:b}", "enabled", 1));
    /* runtime/zero/config.py DeepSpeedZeroConfig (extra keys are refused there). Buckets as the plan was priced:
     * Megatron-core's max(4e7, 1e6 x dp) elements, not DeepSpeed's 5e8. */
    json_int_t bucket = (json_int_t)ps_cost_dp_bucket_elems(x->cp, (int)x->dp);
    json_t *z = json_pack("{s:i, s:b, s:I, s:I}", "stage", s->zero, "overlap_comm", !s->dp_no_overlap,
                          "reduce_bucket_size", bucket, "allgather_bucket_size", bucket);
    if (s->zero == 3)
        /* prefetching the next layers' parameters is the overlap; 0 fetches each layer when it runs */
        json_object_set_new(z, "stage3_prefetch_bucket_size", json_integer(s->dp_no_overlap ? 0 : bucket));
    json_object_set_new(j, "zero_optimization", z);
    if (x->ckpt == PS_RECOMP_FULL)
        /* activation_checkpointing/config.py: deepspeed.checkpointing keeps each checkpointed layer's input whole on
         * every TP rank (partition_activations false), as the plan prices it without sequence parallelism */
        json_object_set_new(j, "activation_checkpointing",
                            json_pack("{s:b, s:b, s:b}", "partition_activations", 0, "contiguous_memory_optimization",
                                      0, "cpu_checkpointing", 0));

    /* What DeepSpeed takes in the training script, not in the config: the pipeline module, its topology and the
     * model-parallel unit. Under one key DeepSpeed's config reader does not look at. */
    json_t *ps = json_object();
    json_object_set_new(ps, "framework", json_string(x->fw->version));
    json_object_set_new(ps, "model", json_string(m->name));
    json_object_set_new(ps, "cluster", json_string(x->c->name));
    json_object_set_new(ps, "gpus", json_integer(x->c->n_gpus));
    json_t *specs = json_array();
    for (int64_t i = 0; i < m->n_layers;) {
        int64_t k = i;
        while (k < m->n_layers && m->layers[k].kind == m->layers[i].kind) k++;
        json_array_append_new(specs, json_pack("{s:s, s:I}", "kind", ps_layer_kind_name(m->layers[i].kind), "count",
                                               (json_int_t)(k - i)));
        i = k;
    }
    json_object_set_new(ps, "layer_specs", specs);
    /* the model code's vocabulary, padded as planned */
    json_object_set_new(ps, "vocab_size", json_integer(x->emb ? x->emb->vocab : 0));
    if (p->pp > 1) {
        /* runtime/pipe/topology.py PipeModelDataParallelTopology(num_pp, num_mp, num_dp) */
        json_object_set_new(ps, "topology", json_pack("{s:i, s:i, s:I}", "num_pp", p->pp, "num_mp", s->tp, "num_dp",
                                                      (json_int_t)x->dp));
        int64_t *cuts = ps_calloc((size_t)x->S + 1, sizeof *cuts);
        bool uniform = cuts && ps_framework_fixed_cuts(PS_FW_DEEPSPEED, 0, m, x->S, cuts) &&
                       memcmp(cuts, p->cuts, ((size_t)x->S + 1) * sizeof *cuts) == 0;
        free(cuts);
        json_t *pm = json_pack("{s:i, s:s}", "num_stages", p->pp, "partition_method",
                               uniform ? "uniform" : "type:TransformerLayer");
        json_object_set_new(pm, "activation_checkpoint_interval", json_integer(x->ckpt == PS_RECOMP_FULL ? 1 : 0));
        if (x->ckpt == PS_RECOMP_FULL)
            json_object_set_new(pm, "checkpointable_layers", json_pack("[s]", "TransformerLayer"));
        json_object_set_new(ps, "PipelineModule", pm);
        json_t *parts = json_array();
        for (int st = 0; st <= x->S; st++) json_array_append_new(parts, json_integer(p->cuts[st]));
        json_object_set_new(ps, "parts", parts);
    } else {
        json_object_set_new(ps, "mpu", json_pack("{s:i, s:I}", "tensor_model_parallel_size", s->tp,
                                                 "data_parallel_size", (json_int_t)x->dp));
    }
    json_object_set_new(ps, "attention", json_string(ps_attn_name(s->attn)));
    json_object_set_new(ps, "recompute", json_string(ps_recompute_name(x->ckpt)));
    json_object_set_new(j, "_psearch", ps);

    plan_notes(N, x);
    if (p->pp > 1)
        add(N, "the training script builds PipelineModule(layers=<one LayerSpec per layer_specs entry, in order, the "
            "transformer layers of class TransformerLayer>, topology=PipeModelDataParallelTopology(**topology), "
            "**PipelineModule); 'parts' is the split DeepSpeed computes from them, the plan's");
    else
        add(N, "the training script passes deepspeed.initialize(..., mpu=<a model-parallel unit of tp %d>) and %s",
            s->tp,
            x->ckpt == PS_RECOMP_FULL ? "checkpoints every transformer layer with deepspeed.checkpointing.checkpoint"
                                      : "checkpoints nothing");
    if (s->tp > 1)
        add(N, "tensor parallelism is the model's own (Megatron-style column / row-parallel layers, "
            "vocabulary-parallel embedding and head: the layout the plan prices); DeepSpeed's AutoTP "
            "(tensor_parallel.autotp_size) gathers the logits and keeps tied embeddings whole, which the plan does not "
            "price");
    add(N, "attention kernel: %s (the model code's choice)", ps_attn_name(s->attn));
    return j;
}

/* ---- torchtitan ---- */

static const char *tt_schedule(const char *kind)
{
    /* torch.distributed.pipelining get_schedule_class names */
    if (strcmp(kind, "gpipe") == 0) return "GPipe";
    if (strcmp(kind, "interleaved") == 0) return "Interleaved1F1B";
    return "1F1B";
}

static void tt_fqns(FILE *f, const exp_ctx *x)
{
    /* models/llama3/model/model.py: tok_embeddings, layers.<i>, norm, output (the final norm is part of psearch's
     * LM head layer) */
    fprintf(f, "module_fqns_per_model_part = [\n");
    int64_t blk = 0;
    for (int s = 0; s < x->S; s++) {
        fprintf(f, "    [");
        bool first = true;
        for (int64_t l = x->p->cuts[s]; l < x->p->cuts[s + 1]; l++) {
            ps_layer_kind k = x->m->layers[l].kind;
            if (k == PS_LAYER_EMBED) fprintf(f, "%s\"tok_embeddings\"", first ? "" : ", ");
            if (ps_layer_has_attention(k)) fprintf(f, "%s\"layers.%lld\"", first ? "" : ", ", (long long)blk++);
            if (k == PS_LAYER_LM_HEAD) fprintf(f, "%s\"norm\", \"output\"", first ? "" : ", ");
            first = false;
        }
        fprintf(f, "]%s\n", s + 1 < x->S ? "," : "");
    }
    fprintf(f, "]\n");
}

static void torchtitan_toml(FILE *f, lines *N, const exp_ctx *x)
{
    const ps_model *m = x->m;
    const ps_plan *p = x->p;
    const ps_strategy *s = x->s;
    /* config/job_config.py at v0.2.2: sections and keys */
    fprintf(f, "[job]\ndescription = \"psearch plan: %s on %s\"\n\n", m->name, x->c->name);
    fprintf(f, "[model]\nname = \"llama3\"\nflavor = \"%s\"\n", ps_framework_torchtitan_flavor(m));
    /* components/quantization/float8.py registers its converter as "quantize.linear.float8" (the "float8" of
     * some example TOML files names no registered converter at v0.2.2) */
    if (m->dtype == PS_DTYPE_FP8) fprintf(f, "converters = [\"quantize.linear.float8\"]\n");
    /* train.py: gradient accumulation = global / (local x dp); pipeline_parallel.py: micro-batches = local /
     * pipeline_parallel_microbatch_size. With pipelining the whole per-replica batch is one schedule step. */
    fprintf(f, "\n[training]\nlocal_batch_size = %lld\nglobal_batch_size = %lld\nseq_len = %lld\n",
            (long long)(p->pp > 1 ? p->mbs * x->micro : p->mbs), (long long)p->gbs, (long long)x->blk->seq);
    fprintf(f, "mixed_precision_param = \"%s\"\n", m->dtype == PS_DTYPE_FP32 ? "float32" : "bfloat16");
    fprintf(f, "\n[parallelism]\n");
    /* FSDP shards over dp_shard x cp (parallel_dims.py: fsdp_enabled whenever cp_enabled), as ZeRO-3 over dp x cp
     * was planned */
    const int cp = ps_strategy_cp(s);
    bool shard = s->zero == 3 && x->dp * cp > 1;
    fprintf(f, "data_parallel_replicate_degree = %lld\n", (long long)(shard ? 1 : x->dp));
    fprintf(f, "data_parallel_shard_degree = %lld\n", (long long)(shard ? x->dp : 1));
    /* models/llama3/infra/parallelize.py apply_fsdp: "default" keeps the parameters gathered from the forward to the
     * backward with pipelining (and for the final norm and output always); ZeRO-3 as planned gathers each layer for
     * its forward and again for its backward, every micro-batch: "always" */
    if (shard) fprintf(f, "fsdp_reshard_after_forward = \"always\"\n");
    fprintf(f, "tensor_parallel_degree = %d\n", s->tp);
    fprintf(f, "disable_loss_parallel = false\n");
    fprintf(f, "context_parallel_degree = %d\n", cp);
    /* K/V shards passed step by step beside the attention blocks, the ring as planned ("alltoall"), or gathered
     * after the first block (the default "allgather", PS_CP_ALLGATHER) */
    if (cp > 1)
        fprintf(f, "context_parallel_rotate_method = \"%s\"\n",
                s->cp_comm == PS_CP_ALLGATHER ? "allgather" : "alltoall");
    fprintf(f, "pipeline_parallel_degree = %d\n", p->pp);
    if (p->pp > 1) {
        fprintf(f, "pipeline_parallel_schedule = \"%s\"\n", tt_schedule(p->schedule));
        fprintf(f, "pipeline_parallel_microbatch_size = %lld\n", (long long)p->mbs);
        tt_fqns(f, x);
    }
    fprintf(f, "\n[activation_checkpoint]\nmode = \"%s\"\n",
            x->ckpt == PS_RECOMP_FULL ? "full" : x->ckpt == PS_RECOMP_OP ? "selective" : "none");
    /* [T] activation_checkpoint.py _apply_ac_to_transformer_block: "op" picks per-op SAC */
    if (x->ckpt == PS_RECOMP_OP) fprintf(f, "selective_ac_option = \"op\"\n");
    if (m->dtype == PS_DTYPE_FP8) fprintf(f, "\n[quantize.linear.float8]\nrecipe_name = \"tensorwise\"\n");

    plan_notes(N, x);
    int64_t per_node = x->c->groups[0].gpus_per_node > 0 ? x->c->groups[0].gpus_per_node : 1;
    add(N, "launch: torchrun --nnodes %lld --nproc-per-node %lld -m torchtitan.train --job.config_file <this file> "
        "(plus [job], [optimizer], [lr_scheduler], [training] dataset and steps, [checkpoint] as the run needs)",
        (long long)x->c->n_nodes, (long long)per_node);
    add(N, "tensor parallelism in torchtitan shards the sequence between blocks (sequence parallelism) and the loss "
        "(loss parallel), as planned");
    if (s->ckpt == PS_RECOMP_SELECTIVE && x->ckpt == PS_RECOMP_NONE)
        add(N, "selective recomputation with a fused attention kernel repeats nothing (priced as none): mode none");
    if (m->dtype == PS_DTYPE_FP8)
        add(N, "FP8: torchao's float8 linears (tensorwise scaling) for the plan's FP8 GEMMs; the plan's memory counts "
            "Transformer Engine's FP8 weight copies, which torchao does not keep: it needs less than planned");
    add(N, "torchtitan main replaced TOML job configs with Python configs on 2026-02-23; this file is for v0.2.2");
}

ps_status ps_plan_export(ps_out *out, const char *kind, const ps_model *m, const ps_cluster *c, const ps_plan *p,
                         const ps_prediction *r, const ps_cost_params *cp, int64_t vocab_pad)
{
    if (export_find(kind) < 0) {
        char known[128] = "";
        for (size_t i = 0; i < N_EXPORTS; i++)
            ps_strcatf(known, sizeof known, "%s%s", i ? ", " : "", ps_plan_export_kinds[i]);
        return PS_FAIL(PS_ERR_INPUT, "unknown --export '%s' (known: %s)", kind, known);
    }
    int f = ps_framework_find(kind);
    exp_ctx x;
    PS_TRY(ctx_init(&x, (ps_framework)f, m, c, p, r, cp, vocab_pad));
    lines F = {0}, N = {0};
    ps_status st = PS_OK;
    if (f == PS_FW_MEGATRON) {
        megatron_flags(&F, &N, &x);
        if (!F.oom && !N.oom) {
            /* one flag per line, each but the last continued for the shell; the notes after a blank line */
            for (int i = 0; i < F.n; i++) fprintf(out->f, "%s%s\n", F.v[i], i + 1 < F.n ? " \\" : "");
            fprintf(out->f, "\n");
        }
    } else if (f == PS_FW_DEEPSPEED) {
        json_t *j = deepspeed_config(&x, &N);
        if (j && !N.oom) {
            json_t *notes = json_array();
            for (int i = 0; i < N.n; i++) json_array_append_new(notes, json_string(N.v[i]));
            json_object_set_new(json_object_get(j, "_psearch"), "notes", notes);
        }
        /* the notes live inside the JSON (no comments in JSON) */
        if (N.oom) {
            json_decref(j);
            st = PS_FAIL(PS_ERR_SYSTEM, "out of memory writing the export");
        } else
            st = ps_out_json(out, j);
    } else {
        torchtitan_toml(out->f, &N, &x);
        fprintf(out->f, "\n");
    }
    if (st == PS_OK && (F.oom || N.oom)) st = PS_FAIL(PS_ERR_SYSTEM, "out of memory writing the export");
    if (st == PS_OK && f != PS_FW_DEEPSPEED)
        for (int i = 0; i < N.n; i++) fprintf(out->f, "# %s\n", N.v[i]);
    lines_free(&F);
    lines_free(&N);
    ctx_free(&x);
    return st;
}

/* Row label of each pipeline device: the GPUs its stages hold ("GPUs 16-31"), from the prediction's placement; a
 * device whose chunks sat on different GPUs lists each range. labels[dev] points into text (64 bytes a row). */
static void svg_row_labels(const ps_sched *s, const ps_prediction *r, char *text, const char **labels)
{
    const int d = ps_sched_devices(s), v = ps_sched_chunks(s);
    for (int dev = 0; dev < d; dev++) {
        char *t = text + (size_t)dev * 64;
        t[0] = '\0';
        for (int c = 0; c < v; c++) {
            const ps_stage_pred *sp = &r->stages[ps_sched_stage_of(s, dev, c)];
            char one[48];
            if (sp->n_gpus == 1)
                snprintf(one, sizeof one, "%lld", (long long)sp->first_gpu);
            else
                snprintf(one, sizeof one, "%lld-%lld", (long long)sp->first_gpu,
                         (long long)(sp->first_gpu + sp->n_gpus - 1));
            if (!strstr(t, one)) ps_strcatf(t, 64, "%s%s", t[0] ? ", " : sp->n_gpus == 1 ? "GPU " : "GPUs ", one);
        }
        labels[dev] = t;
    }
}

ps_status ps_plan_svg(const ps_plan *p, const ps_prediction *r, char **svg, size_t *len)
{
    ps_sched *s = NULL;
    ps_status st = PS_OK;
    double *buf = NULL;
    char *text = NULL;
    const char **labels = NULL;
    *svg = NULL;
    PS_TRY(ps_sched_create(&s));
    PS_TRY_GOTO(st, ps_sched_build(s, p->schedule, p->pp, (int)ps_plan_micro_batches(p), p->vpp), done);
    int S = ps_sched_stages(s);
    if (S != r->n_stages) {
        st = PS_FAIL(PS_ERR_SYSTEM, "schedule %s has %d stages, the prediction %d", p->schedule, S, r->n_stages);
        goto done;
    }
    buf = ps_calloc((size_t)S * 4, sizeof *buf);
    text = ps_calloc((size_t)p->pp, 64);
    labels = ps_calloc((size_t)p->pp, sizeof *labels);
    if (!buf || !text || !labels) {
        st = PS_ERR_SYSTEM;
        goto done;
    }
    for (int k = 0; k < S; k++) {
        buf[k] = r->stages[k].fwd;
        buf[S + k] = r->stages[k].bwd_b;
        buf[2 * S + k] = r->stages[k].bwd_w;
        buf[3 * S + k] = r->stages[k].p2p;
    }
    ps_sched_costs costs = {.f = buf, .b = buf + S, .w = buf + 2 * S, .p2p = S > 1 ? buf + 3 * S : NULL};
    ps_sched_result res;
    PS_TRY_GOTO(st, ps_sched_simulate(s, &costs, &res), done);
    svg_row_labels(s, r, text, labels);
    ps_sched_svg_opts so = {.row_labels = labels, .seconds = true};
    PS_TRY_GOTO(st, ps_sched_svg(s, &res, &so, svg, len), done);
done:
    free(labels);
    free(text);
    free(buf);
    ps_sched_destroy(s);
    return st;
}

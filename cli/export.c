/* What a chosen plan becomes outside psearch: launch arguments for Megatron-LM, a DeepSpeed config, and the pipeline
 * timeline as SVG. Where a framework cannot express part of the plan (per-layer strategies, uneven splits, ZeRO-2/3
 * in Megatron-LM, zero-bubble and V schedules), the output says so in a comment instead of silently changing it. */
#include <math.h>
#include <string.h>

#include "cli.h"
#include "ps_schedules.h"

/* Transformer blocks per pipeline stage (what frameworks count as "layers"). */
static void blocks_per_stage(const ps_model *m, const ps_plan *p, int64_t *out)
{
    int S = p->pp * p->vpp;
    for (int s = 0; s < S; s++) {
        out[s] = 0;
        for (int64_t l = p->cuts[s]; l < p->cuts[s + 1]; l++) out[s] += ps_layer_is_block(m->layers[l].kind);
    }
}

/* The first block layer: its shape is what Megatron-LM's model flags describe. */
static const ps_layer *first_block(const ps_model *m)
{
    for (int64_t l = 0; l < m->n_layers; l++)
        if (ps_layer_is_block(m->layers[l].kind)) return &m->layers[l];
    return &m->layers[0];
}

static void megatron(FILE *f, const ps_model *m, const ps_plan *p)
{
    int S = p->pp * p->vpp;
    int64_t blocks[4096 * 2], total = 0;
    blocks_per_stage(m, p, blocks);
    for (int s = 0; s < S; s++) total += blocks[s];
    const ps_strategy *s0 = &p->layer[0];
    const ps_layer *b = first_block(m);
    bool uni = ps_plan_is_uniform(p, m->n_layers);
    fprintf(f, "# Megatron-LM arguments for the psearch plan of %s (psearch %s)\n", m->name, PS_VERSION);
    /* blocks under Transformer Engine's TP overlap, which Megatron-LM runs for all or none (embeddings and heads have
     * no SP collective pair to overlap, so their strategy does not count) */
    int64_t n_te = 0, n_att = 0;
    for (int64_t i = 0; i < m->n_layers; i++)
        if (ps_layer_has_attention(m->layers[i].kind)) {
            n_att++;
            n_te += p->layer[i].overlap == PS_OVERLAP_TE;
        }
    for (int64_t i = 0; i < m->n_layers; i++)
        if (ps_overlap_is_oases(p->layer[i].overlap)) {
            /* no Megatron-LM flag runs Oases' sub-batch schedule: say so rather than drop it silently */
            fprintf(f,
                    "# NOTE: the plan overlaps TP collectives with computation (Oases, %s) on some layers; Megatron-LM "
                    "has no such schedule:\n#       its predicted time needs an Oases-style implementation.\n",
                    ps_overlap_name(p->layer[i].overlap));
            break;
        }
    if (!uni)
        fprintf(f, "# NOTE: the plan sets tp/zero/recompute per layer; Megatron-LM takes one setting for all layers.\n"
                   "#       The arguments below use the first layer's strategy (tp %d, recompute %s).\n",
                s0->tp, ps_recompute_name(s0->ckpt));
    fprintf(f, "--num-layers %lld --hidden-size %lld --num-attention-heads %lld", (long long)total,
            (long long)b->hidden, (long long)b->heads);
    if (b->kv_heads && b->kv_heads != b->heads)
        fprintf(f, " --group-query-attention --num-query-groups %lld", (long long)b->kv_heads);
    if (b->ffn_hidden) fprintf(f, " --ffn-hidden-size %lld", (long long)b->ffn_hidden);
    fprintf(f, " --seq-length %lld", (long long)m->seq);
    /* the model's shape as Megatron-LM spells it: its defaults are GPT-2's (learned positions, LayerNorm, GeLU,
     * biases, tied embeddings), so every difference is a flag */
    const ps_layer *emb = NULL, *head = NULL;
    for (int64_t l = 0; l < m->n_layers; l++) {
        if (m->layers[l].kind == PS_LAYER_EMBED && !emb) emb = &m->layers[l];
        if (m->layers[l].kind == PS_LAYER_LM_HEAD) head = &m->layers[l];
    }
    int64_t positions = emb && emb->positions ? emb->positions : m->seq;
    fprintf(f, " --max-position-embeddings %lld\n", (long long)(positions > m->seq ? positions : m->seq));
    if (emb && emb->positions == 0) fprintf(f, "--position-embedding-type rope\n");
    if (b->heads && b->head_dim && b->heads * b->head_dim != b->hidden)
        fprintf(f, "--kv-channels %lld\n", (long long)b->head_dim);
    if (b->norm == PS_NORM_RMSNORM) fprintf(f, "--normalization RMSNorm\n");
    if (b->act == PS_ACT_SWIGLU) fprintf(f, "--swiglu\n");
    if (b->act == PS_ACT_RELU || b->act == PS_ACT_GEGLU)
        fprintf(f, "# NOTE: the MLP activation (%s) has no Megatron-LM flag; Megatron-LM trains GeLU or SwiGLU\n",
                b->act == PS_ACT_RELU ? "ReLU" : "GeGLU");
    if (!b->bias) fprintf(f, "--disable-bias-linear\n");
    if (head && !head->tied) fprintf(f, "--untie-embeddings-and-output-weights\n");
    if (emb)
        fprintf(f, "# vocabulary as planned: %lld entries (padded); Megatron-LM pads to --make-vocab-size-divisible-by "
                   "x TP\n", (long long)emb->vocab);
    fprintf(f, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d\n", s0->tp, p->pp);
    if (p->vpp > 1) fprintf(f, "--num-layers-per-virtual-pipeline-stage %lld\n", (long long)(total / S));
    if (s0->sp && s0->tp > 1) fprintf(f, "--sequence-parallel\n");
    /* Megatron-core's --tp-comm-overlap (TE userbuffers) needs --sequence-parallel, which every te layer has */
    if (n_te > 0 && n_te == n_att)
        fprintf(f, "--tp-comm-overlap\n# (TP overlap te: Transformer Engine userbuffers, --transformer-impl "
                   "transformer_engine)\n");
    else if (n_te > 0)
        fprintf(f, "# NOTE: TP overlap te on %lld of %lld layers; Megatron-LM's --tp-comm-overlap is for all layers "
                   "or none (left out)\n", (long long)n_te, (long long)n_att);
    fprintf(f, "--micro-batch-size %lld --global-batch-size %lld\n", (long long)p->mbs, (long long)p->gbs);
    if (s0->ckpt == PS_RECOMP_SELECTIVE) fprintf(f, "--recompute-granularity selective\n");
    if (s0->ckpt == PS_RECOMP_FULL)
        fprintf(f, "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1\n");
    if (s0->zero == 1) fprintf(f, "--use-distributed-optimizer\n");
    /* Megatron-core's TransformerConfig.attention_backend (megatron/core/transformer/enums.py AttnBackend): "fused" is
     * Transformer Engine's cuDNN fused attention, which keeps no scores like FlashAttention ("flash") does; "unfused"
     * is the score-materialising path the plan was costed with. */
    int64_t n_fused = 0;
    for (int64_t i = 0; i < m->n_layers; i++) n_fused += p->layer[i].attn == PS_ATTN_FUSED;
    int64_t n_blk = 0;
    for (int64_t i = 0; i < m->n_layers; i++) n_blk += ps_layer_is_block(m->layers[i].kind);
    if (n_fused > 0 && n_fused < n_blk)
        fprintf(f, "# NOTE: the plan runs fused attention on %lld of %lld layers; Megatron-LM takes one attention "
                   "backend: fused for all\n", (long long)n_fused, (long long)n_blk);
    if (n_fused > 0) fprintf(f, "--attention-backend fused\n");
    else if (s0->attn == PS_ATTN_UNFUSED) fprintf(f, "--attention-backend unfused\n");
    if (s0->zero >= 2)
        fprintf(f,
                "# NOTE: ZeRO stage %d has no Megatron-LM flag; --use-distributed-optimizer shards only the optimizer "
                "states (ZeRO-1)\n--use-distributed-optimizer\n",
                s0->zero);
    /* Data-parallel overlap (docs/costmodel.md, "Data-parallel overlap"): the plan was priced with Megatron-core's
     * bucketed gradient reduction during the backward and, with the distributed optimizer, the parameter gather
     * during the next forward; both are off by default in Megatron-LM (DistributedDataParallelConfig). */
    if (s0->dp > 1 && !s0->dp_no_overlap)
        fprintf(f, "--overlap-grad-reduce%s\n# (priced with Megatron-core's default --ddp-bucket-size: max(4e7, 1e6 x "
                   "dp) parameters)\n", s0->zero >= 1 ? " --overlap-param-gather" : "");
    else if (s0->dp > 1)
        fprintf(f, "# NOTE: the plan was priced without data-parallel overlap (--dp-overlap off): no "
                   "--overlap-grad-reduce / --overlap-param-gather\n");
    if (m->dtype == PS_DTYPE_BF16) fprintf(f, "--bf16\n");
    if (m->dtype == PS_DTYPE_FP16) fprintf(f, "--fp16\n");
    /* FP8 GEMMs inside BF16 training (TransformerConfig.fp8 'hybrid': E4M3 forward, E5M2 gradients), with Megatron's
     * default delayed-scaling recipe; Blackwell runs MXFP8 blocks instead */
    if (m->dtype == PS_DTYPE_FP8)
        fprintf(f, "--bf16 --fp8-format hybrid --fp8-recipe delayed\n"
                   "# (on Blackwell GPUs Megatron-LM trains FP8 as --fp8-recipe mxfp8)\n");
    bool even = true;
    for (int s = 1; s < S; s++) even = even && blocks[s] == blocks[0];
    if (!even) {
        fprintf(f, "# NOTE: uneven pipeline split (blocks per stage:");
        for (int s = 0; s < S; s++) fprintf(f, " %lld", (long long)blocks[s]);
        /* Megatron-LM can set the first and last stage apart; the stages between must be even */
        bool middle_even = true;
        for (int s = 2; s < S - 1; s++) middle_even = middle_even && blocks[s] == blocks[1];
        if (middle_even && p->vpp == 1)
            fprintf(f, "); give the first and last stage their counts with --decoder-first-pipeline-num-layers %lld "
                       "--decoder-last-pipeline-num-layers %lld\n", (long long)blocks[0], (long long)blocks[S - 1]);
        else
            fprintf(f, "); Megatron-LM splits the stages between the first and the last evenly: this split needs a "
                       "custom pipeline layout\n");
    }
    if (strcmp(p->schedule, "1f1b") != 0 && strcmp(p->schedule, "interleaved") != 0)
        fprintf(f, "# NOTE: schedule %s is not one of Megatron-LM's own (1F1B, interleaved 1F1B); it needs an "
                   "implementation of %s\n", p->schedule, p->schedule);
}

static json_t *deepspeed(const ps_model *m, const ps_plan *p, const ps_cost_params *cp)
{
    const ps_strategy *s0 = &p->layer[0];
    int64_t dp = s0->dp, micro = ps_plan_micro_batches(p);
    json_t *j = json_object();
    json_object_set_new(j, "train_batch_size", json_integer(p->gbs));
    json_object_set_new(j, "train_micro_batch_size_per_gpu", json_integer(p->mbs));
    json_object_set_new(j, "gradient_accumulation_steps", json_integer(micro));
    /* overlap_comm as the plan was priced (DeepSpeed's own default: true for stage 3 only), and the buckets it was
     * priced with: Megatron-core's max(4e7, 1e6 x dp) elements, not DeepSpeed's 5e8 (docs/costmodel.md) */
    json_int_t bucket = (json_int_t)ps_cost_dp_bucket_elems(cp, (int)dp);
    json_object_set_new(j, "zero_optimization",
                        json_pack("{s:i, s:b, s:I, s:I}", "stage", s0->zero, "overlap_comm", !s0->dp_no_overlap,
                                  "reduce_bucket_size", bucket, "allgather_bucket_size", bucket));
    if (m->dtype == PS_DTYPE_BF16) json_object_set_new(j, "bf16", json_pack("{s:b}", "enabled", 1));
    if (m->dtype == PS_DTYPE_FP16) json_object_set_new(j, "fp16", json_pack("{s:b}", "enabled", 1));
    if (s0->ckpt != PS_RECOMP_NONE)
        json_object_set_new(j, "activation_checkpointing",
                            json_pack("{s:b, s:b}", "partition_activations", s0->sp && s0->tp > 1,
                                      "contiguous_memory_optimization", 0));
    /* DeepSpeed reads the pipeline and TP layout from the model code (PipelineModule, Megatron-DeepSpeed flags), not
     * from this file: psearch puts it beside the config, under a key DeepSpeed ignores. */
    int S = p->pp * p->vpp;
    int64_t blocks[4096 * 2];
    blocks_per_stage(m, p, blocks);
    json_t *parts = json_array();
    for (int s = 0; s <= S; s++) json_array_append_new(parts, json_integer(p->cuts[s]));
    json_t *ps = json_object();
    bool even = true;
    for (int s = 1; s < S; s++) even = even && blocks[s] == blocks[0];
    json_object_set_new(ps, "PipelineModule", json_pack("{s:i, s:s, s:o}", "num_stages", p->pp, "partition_method",
                                                        even ? "uniform" : "custom: layer_boundaries",
                                                        "layer_boundaries", parts));
    json_object_set_new(ps, "tensor_model_parallel_size", json_integer(s0->tp));
    json_object_set_new(ps, "data_parallel_size", json_integer(dp));
    json_object_set_new(ps, "schedule", json_string(p->schedule));
    json_object_set_new(ps, "uniform_strategy", json_boolean(ps_plan_is_uniform(p, m->n_layers)));
    /* DeepSpeed's config has no attention kernel: the model code picks it (FlashAttention in Megatron-DeepSpeed:
     * --use-flash-attn-v2) */
    json_object_set_new(ps, "attention", json_string(ps_attn_name(s0->attn)));
    if (m->dtype == PS_DTYPE_FP8)
        json_object_set_new(ps, "fp8", json_string("planned with Transformer Engine's FP8 recipe (FP8 GEMMs in the "
                                                   "linear layers, BF16 elsewhere): DeepSpeed's config has no FP8 "
                                                   "key; the model code must use te.Linear under fp8_autocast"));
    /* DeepSpeed has no counterpart of Transformer Engine's TP overlap (te): the note says so, JSON having no
     * comments */
    bool te = false;
    for (int64_t i = 0; i < m->n_layers; i++) te = te || p->layer[i].overlap == PS_OVERLAP_TE;
    char note[768];
    snprintf(note, sizeof note,
             "layer_boundaries are psearch layer indices (embedding and head included); DeepSpeed's PipelineModule "
             "takes them through a custom partition; DeepSpeed runs 1F1B: other schedules need their own "
             "implementation%s%s",
             s0->zero >= 2 && p->pp > 1 ? "; DeepSpeed's pipeline engine refuses ZeRO-2/3 with pipeline parallelism "
                                          "(stage 1 is the most it combines with pp > 1)"
                                        : "",
             te ? "; TP overlap te (Transformer Engine's userbuffers, Megatron-core --tp-comm-overlap) has no "
                  "DeepSpeed equivalent: its predicted time needs Megatron-core with Transformer Engine"
                : "");
    json_object_set_new(ps, "note", json_string(note));
    json_object_set_new(j, "_psearch", ps);
    return j;
}

ps_status ps_plan_export(ps_out *out, const char *kind, const ps_model *m, const ps_plan *p,
                         const ps_cost_params *cp)
{
    if (strcmp(kind, "megatron") == 0) {
        megatron(out->f, m, p);
        return PS_OK;
    }
    if (strcmp(kind, "deepspeed") == 0) return ps_out_json(out, deepspeed(m, p, cp));
    return PS_FAIL(PS_ERR_INPUT, "unknown --export '%s' (known: megatron, deepspeed)", kind);
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

/* search/framework.c: the rules of Megatron-LM, DeepSpeed and torchtitan. DeepSpeed's own splits against values
 * derived independently (tests/export/fwlib.py re-derives deepspeed/runtime/utils.py partition_uniform and
 * partition_balanced) and against brute force (no split of the blocks has a smaller spread than the balanced one);
 * the recomputation patterns; a plan each framework runs and the ones it refuses, rule by rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps_search.h"

static void load(const char *model, int64_t pad, ps_model *m)
{
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.vocab_pad = pad;
    if (ps_model_load(model, &mo, m) != PS_OK) fail_msg("%s: %s", model, ps_error_message());
}

/* a plan of m: pp stages of the given transformer layers each (the embedding with the first, the head with the last),
 * strategy s everywhere but the embedding and head, which get no recomputation */
static void plan_of(const ps_model *m, int pp, int vpp, const char *sched, const int64_t *blocks, const ps_strategy *s,
                    int64_t gbs, ps_plan *p)
{
    assert_int_equal(ps_plan_alloc(m, gbs, 1, pp, vpp, sched, s, p), PS_OK);
    int S = pp * vpp;
    p->cuts[0] = 0;
    for (int k = 0; k < S; k++) p->cuts[k + 1] = p->cuts[k] + blocks[k] + (k == 0) + (k == S - 1);
    assert_int_equal(p->cuts[S], m->n_layers);
    p->layer[0].ckpt = p->layer[m->n_layers - 1].ckpt = PS_RECOMP_NONE;
}

static void expect(ps_framework f, const ps_model *m, const ps_plan *p, const char *substr)
{
    char why[512];
    bool ok = ps_framework_runs(f, m, p, why, sizeof why);
    if (!substr) {
        if (!ok) fail_msg("%s refused a plan it runs: %s", ps_framework_name(f), why);
    } else if (ok || !strstr(why, substr)) {
        fail_msg("%s: wanted a refusal naming '%s', got %s", ps_framework_name(f), substr, ok ? "acceptance" : why);
    }
}

static void test_deepspeed_splits(void **state)
{
    (void)state;
    ps_model m;
    load("gpt3-1.3b", 0, &m); /* embedding, 24 blocks, head */
    int64_t cuts[8];
    assert_true(ps_framework_fixed_cuts(PS_FW_DEEPSPEED, 0, &m, 4, cuts));
    const int64_t u4[] = {0, 7, 14, 20, 26};
    assert_memory_equal(cuts, u4, sizeof u4);
    assert_true(ps_framework_fixed_cuts(PS_FW_DEEPSPEED, 1, &m, 4, cuts));
    const int64_t b4[] = {0, 7, 13, 19, 26};
    assert_memory_equal(cuts, b4, sizeof b4);
    assert_true(ps_framework_fixed_cuts(PS_FW_DEEPSPEED, 1, &m, 3, cuts));
    const int64_t b3[] = {0, 9, 17, 26};
    assert_memory_equal(cuts, b3, sizeof b3);
    /* brute force over every 3-stage split of the 26 layers: none has a smaller spread of blocks per stage */
    int64_t best = INT64_MAX;
    for (int64_t a = 1; a < 26; a++)
        for (int64_t b = a + 1; b < 26; b++) {
            int64_t n[3] = {a - 1, b - a, 25 - b}, hi = 0, lo = INT64_MAX;
            for (int k = 0; k < 3; k++) {
                hi = n[k] > hi ? n[k] : hi;
                lo = n[k] < lo ? n[k] : lo;
            }
            best = hi - lo < best ? hi - lo : best;
        }
    assert_int_equal(best, 0); /* 8, 8, 8 */
    assert_int_equal(ps_framework_fixed_cuts(PS_FW_MEGATRON, 0, &m, 4, cuts), false);
    assert_int_equal(ps_framework_fixed_cuts(PS_FW_DEEPSPEED, 2, &m, 4, cuts), false);
    ps_model_free(&m);
    load("llama3-8b", 0, &m); /* 32 blocks in 4: the remainder-free case of the export tests */
    assert_true(ps_framework_fixed_cuts(PS_FW_DEEPSPEED, 1, &m, 4, cuts));
    const int64_t l4[] = {0, 9, 17, 25, 34};
    assert_memory_equal(cuts, l4, sizeof l4);
    ps_model_free(&m);
}

static void test_recompute_patterns(void **state)
{
    (void)state;
    ps_model m;
    load("gpt3-1.3b", 1024, &m);
    ps_strategy s = {.tp = 2, .dp = 1, .attn = PS_ATTN_FUSED};
    const int64_t even[] = {6, 6, 6, 6};
    ps_plan p;
    plan_of(&m, 4, 1, "1f1b", even, &s, 16, &p);
    assert_int_equal(ps_framework_recompute_block_n(&m, &p), 0); /* none anywhere */
    for (int64_t i = 1; i < 25; i++) p.layer[i].ckpt = PS_RECOMP_FULL;
    assert_int_equal(ps_framework_recompute_block_n(&m, &p), 0); /* every block */
    for (int st = 0; st < 4; st++)
        for (int64_t i = p.cuts[st] + (st == 0) + 2; i < p.cuts[st + 1] - (st == 3); i++)
            p.layer[i].ckpt = PS_RECOMP_NONE;
    assert_int_equal(ps_framework_recompute_block_n(&m, &p), 2); /* the first 2 of every stage */
    expect(PS_FW_MEGATRON, &m, &p, NULL);
    expect(PS_FW_DEEPSPEED, &m, &p, "recomputes every transformer layer alike");
    p.layer[9].ckpt = PS_RECOMP_FULL; /* stage 1's third block */
    assert_int_equal(ps_framework_recompute_block_n(&m, &p), -1);
    expect(PS_FW_MEGATRON, &m, &p, "--recompute-method block");
    p.layer[9].ckpt = PS_RECOMP_NONE;
    p.layer[7].ckpt = PS_RECOMP_NONE;
    p.layer[9].ckpt = PS_RECOMP_FULL; /* full after none */
    assert_int_equal(ps_framework_recompute_block_n(&m, &p), -1);
    ps_plan_free(&p);
    /* a stage of 2 blocks recomputed whole beside stages recomputing their first 2: n = 2 */
    const int64_t uneven[] = {2, 8, 7, 7};
    plan_of(&m, 4, 1, "1f1b", uneven, &s, 16, &p);
    for (int st = 0; st < 4; st++)
        for (int64_t i = p.cuts[st] + (st == 0); i < p.cuts[st] + (st == 0) + 2; i++) p.layer[i].ckpt = PS_RECOMP_FULL;
    assert_int_equal(ps_framework_recompute_block_n(&m, &p), 2);
    /* selective with a fused kernel is none; with an unfused one it is selective, and no partial pattern */
    p.layer[20].ckpt = PS_RECOMP_SELECTIVE;
    assert_int_equal(ps_framework_recompute_block_n(&m, &p), 2);
    assert_int_equal(ps_framework_effective_ckpt(&m.layers[20], &p.layer[20]), PS_RECOMP_NONE);
    p.layer[20].attn = PS_ATTN_UNFUSED;
    assert_int_equal(ps_framework_effective_ckpt(&m.layers[20], &p.layer[20]), PS_RECOMP_SELECTIVE);
    assert_int_equal(ps_framework_recompute_block_n(&m, &p), -1);
    ps_strategy e = {.tp = 2, .dp = 1, .ckpt = PS_RECOMP_SELECTIVE, .attn = PS_ATTN_UNFUSED};
    assert_int_equal(ps_framework_effective_ckpt(&m.layers[0], &e), PS_RECOMP_NONE); /* no attention there */
    ps_plan_free(&p);
    ps_model_free(&m);
}

static void test_rules(void **state)
{
    (void)state;
    ps_model m;
    load("llama3-8b", 0, &m); /* 32 blocks, vocabulary 128256 unpadded: a torchtitan 8B */
    assert_string_equal(ps_framework_torchtitan_flavor(&m), "8B");
    const int64_t even[] = {8, 8, 8, 8}, first_last[] = {7, 9, 9, 7};
    ps_strategy s = {.tp = 2, .dp = 4, .zero = 1, .sp = true, .attn = PS_ATTN_FUSED, .ckpt = PS_RECOMP_FULL};
    ps_plan p;
    plan_of(&m, 4, 1, "1f1b", even, &s, 128, &p);
    expect(PS_FW_MEGATRON, &m, &p, NULL);
    expect(PS_FW_DEEPSPEED, &m, &p, "with its data-parallel collectives overlapped with the backward");
    expect(PS_FW_TORCHTITAN, &m, &p, "does not run ZeRO stage 1");
    p.layer[0].ckpt = PS_RECOMP_FULL;
    expect(PS_FW_MEGATRON, &m, &p, "recomputes transformer layers only; layer 0 (embedding)");
    p.layer[0].ckpt = PS_RECOMP_NONE;
    p.layer[5].tp = 4;
    p.layer[5].dp = 2;
    expect(PS_FW_MEGATRON, &m, &p, "one strategy for the whole model; layer 5");
    ps_plan_free(&p);
    /* Megatron-FSDP only without pipelining; DeepSpeed's pipeline engine: ZeRO <= 1, and stage 0 not in bf16 */
    s.zero = 3;
    plan_of(&m, 4, 1, "1f1b", first_last, &s, 128, &p);
    expect(PS_FW_MEGATRON, &m, &p, "does not run ZeRO stage 3 with pipeline parallelism");
    ps_plan_free(&p);
    s = (ps_strategy){.tp = 2, .dp = 4, .zero = 0, .attn = PS_ATTN_FUSED, .dp_no_overlap = true};
    plan_of(&m, 4, 1, "1f1b", first_last, &s, 128, &p);
    expect(PS_FW_DEEPSPEED, &m, &p, "splits the 34 layers its own way");
    ps_plan_free(&p);
    const int64_t ds_bal[] = {8, 8, 8, 8}; /* [0, 9, 17, 25, 34]: its type: split */
    plan_of(&m, 4, 1, "1f1b", ds_bal, &s, 128, &p);
    expect(PS_FW_DEEPSPEED, &m, &p, "in bf16 its pipeline engine shards the optimizer states");
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].zero = 1;
    expect(PS_FW_DEEPSPEED, &m, &p, NULL);
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].dp_no_overlap = false;
    expect(PS_FW_DEEPSPEED, &m, &p, "cannot run ZeRO stage 1 with pipeline parallelism with its data-parallel "
                                    "collectives overlapped");
    m.dtype = PS_DTYPE_FP16;
    for (int64_t i = 0; i < m.n_layers; i++) {
        p.layer[i].zero = 0;
        p.layer[i].dp_no_overlap = true;
    }
    expect(PS_FW_DEEPSPEED, &m, &p, NULL); /* fp16 stage 0: FP16_Optimizer, unsharded */
    expect(PS_FW_TORCHTITAN, &m, &p, "does not train in fp16");
    m.dtype = PS_DTYPE_BF16;
    ps_plan_free(&p);
    /* torchtitan: TP with SP only, FSDP2 or 1-D DDP, fused attention, no v-zb; interleaved from any split */
    s = (ps_strategy){.tp = 2, .dp = 4, .zero = 3, .sp = true, .attn = PS_ATTN_FUSED};
    const int64_t eight[] = {3, 4, 5, 4, 4, 4, 4, 4};
    plan_of(&m, 4, 2, "interleaved", eight, &s, 128, &p);
    expect(PS_FW_TORCHTITAN, &m, &p, NULL);
    expect(PS_FW_MEGATRON, &m, &p, "does not run ZeRO stage 3 with pipeline");
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].attn = PS_ATTN_UNFUSED;
    expect(PS_FW_TORCHTITAN, &m, &p, "no unfused attention kernel");
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].attn = PS_ATTN_FUSED;
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].sp = false;
    expect(PS_FW_TORCHTITAN, &m, &p, "with sequence parallelism only");
    ps_plan_free(&p);
    const int64_t v[] = {8, 8, 8, 8};
    plan_of(&m, 2, 2, "v-zb", v, &(ps_strategy){.tp = 4, .dp = 4, .zero = 3, .sp = true, .attn = PS_ATTN_FUSED}, 128,
            &p);
    expect(PS_FW_TORCHTITAN, &m, &p, "runs no schedule 'v-zb'");
    ps_plan_free(&p);
    const int64_t one[] = {32};
    plan_of(&m, 1, 1, "1f1b", one,
            &(ps_strategy){.tp = 2, .dp = 16, .zero = 0, .sp = true, .attn = PS_ATTN_FUSED, .dp_no_overlap = true}, 128,
            &p);
    expect(PS_FW_TORCHTITAN, &m, &p, "only without tensor or pipeline parallelism");
    expect(PS_FW_DEEPSPEED, &m, &p, "no Megatron sequence parallelism");
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].zero = 3;
    p.layer[0].zero = 1;
    expect(PS_FW_MEGATRON, &m, &p, "layer 0 (embedding) differs");
    p.layer[0].zero = 3;
    expect(PS_FW_MEGATRON, &m, &p, NULL); /* Megatron-FSDP, collectives after the backward */
    ps_plan_free(&p);
    ps_model_free(&m);
    /* models: Megatron and torchtitan build GPT-style decoders; torchtitan only its llama3 flavors */
    load("llama3-8b", 1024, &m);
    assert_null(ps_framework_torchtitan_flavor(&m)); /* padded vocabulary */
    ps_model_free(&m);
    load("bert-huge-32", 0, &m);
    plan_of(&m, 1, 1, "1f1b", (int64_t[]){32}, &(ps_strategy){.tp = 1, .dp = 8, .attn = PS_ATTN_FUSED}, 64, &p);
    expect(PS_FW_MEGATRON, &m, &p, "builds decoder-only models; layer 1 of bert-huge-32");
    ps_plan_free(&p);
    ps_model_free(&m);
}

/* Mixtures of experts and latent attention (#21): Megatron-LM runs them under one expert grid, with sequence
 * parallelism beside tp and etp 1 beside biases; DeepSpeed's config and the torchtitan export refuse them; an expert
 * grid on a dense model is refused; one MoE block and one dense MLP width per model. */
static void test_experts(void **state)
{
    (void)state;
    ps_model m;
    load("deepseek-v3", 256, &m); /* 3 dense blocks, 58 MoE ones, MLA */
    const int64_t eight[] = {7, 8, 8, 8, 8, 8, 8, 6};
    ps_strategy s = {.tp = 2, .dp = 32, .zero = 1, .sp = true, .attn = PS_ATTN_FUSED, .ckpt = PS_RECOMP_FULL,
                     .ep = 64, .etp = 1};
    ps_plan p;
    plan_of(&m, 8, 1, "1f1b", eight, &s, 1024, &p);
    expect(PS_FW_MEGATRON, &m, &p, NULL);
    expect(PS_FW_DEEPSPEED, &m, &p, "config cannot describe mixture-of-experts layers (layer 4 of deepseek-v3)");
    expect(PS_FW_TORCHTITAN, &m, &p, "writes its llama3 model only; layer 4 of deepseek-v3 is a mixture-of-experts");
    /* a dense layer's expert degrees are ignored (the cost model ignores them) */
    p.layer[1].ep = 4;
    expect(PS_FW_MEGATRON, &m, &p, NULL);
    p.layer[10].ep = 32;
    expect(PS_FW_MEGATRON, &m, &p, "one expert-parallel layout for every MoE layer; layer 10 has ep 32, etp 1, "
                                   "layer 4 ep 64");
    p.layer[10].ep = 64;
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].sp = false;
    expect(PS_FW_MEGATRON, &m, &p, "MoE layers with tensor parallelism only with sequence parallelism (layer 4");
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].sp = true;
    for (int64_t i = 0; i < m.n_layers; i++) m.layers[i].bias = true;
    expect(PS_FW_MEGATRON, &m, &p, NULL); /* etp 1 */
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].etp = 2;
    expect(PS_FW_MEGATRON, &m, &p, "MoE layers with biases only with expert tensor parallelism 1 (layer 4: etp 2)");
    for (int64_t i = 0; i < m.n_layers; i++) m.layers[i].bias = false;
    expect(PS_FW_MEGATRON, &m, &p, NULL);
    /* one MoE block, one dense width */
    m.layers[30].top_k = 6;
    expect(PS_FW_MEGATRON, &m, &p, "one mixture-of-experts block for every expert layer; layer 30");
    m.layers[30].top_k = 8;
    m.layers[2].ffn_hidden = 1024;
    expect(PS_FW_MEGATRON, &m, &p, "one MLP width for the dense layers; layer 2");
    m.layers[2].ffn_hidden = m.layers[1].ffn_hidden;
    m.layers[20].kv_lora_rank = 256;
    expect(PS_FW_MEGATRON, &m, &p, "identical transformer layers; layer 20");
    ps_plan_free(&p);
    ps_model_free(&m);
    /* an expert grid on a model without experts: refused by every framework */
    load("llama3-8b", 0, &m);
    s = (ps_strategy){.tp = 2, .dp = 4, .zero = 1, .sp = true, .attn = PS_ATTN_FUSED, .ep = 2};
    plan_of(&m, 4, 1, "1f1b", (int64_t[]){8, 8, 8, 8}, &s, 128, &p);
    expect(PS_FW_MEGATRON, &m, &p, "llama3-8b has no mixture-of-experts layer: the plan's expert grid (layer 0: ep 2");
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].ep = 0;
    expect(PS_FW_MEGATRON, &m, &p, NULL);
    for (int64_t i = 0; i < m.n_layers; i++) p.layer[i].etp = 2; /* = tp: no grid */
    expect(PS_FW_MEGATRON, &m, &p, NULL);
    p.layer[3].etp = 1;
    expect(PS_FW_TORCHTITAN, &m, &p, "has no mixture-of-experts layer: the plan's expert grid (layer 3: ep 1, etp 1");
    ps_plan_free(&p);
    ps_model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deepspeed_splits),
        cmocka_unit_test(test_recompute_patterns),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_experts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

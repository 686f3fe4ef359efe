/* models/: Hugging Face config.json import. The configs under tests/data/models/hf carry the public architecture
 * hyper-parameters of each model; their parameter counts must match the published counts. */
#include <math.h>

#include "models_test.h"

typedef struct {
    const char *file;
    int64_t exact;    /* the count psearch must compute, 0 = not checked exactly */
    double published; /* the published count it must be within 1% of */
    const char *what; /* what the published number counts */
} hf_case;

static const hf_case g_counts[] = {
    {"hf/gpt2-124m.json", 124439808, 124439808, "GPT2LMHeadModel (tied head)"},
    {"hf/pythia-410m.json", 405334016, 405334016, "Pythia-410M total, Biderman et al. 2023 Table 1"},
    {"hf/Llama-2-7b-hf/config.json", 6738415616, 6738415616, "LlamaForCausalLM"},
    {"hf/mistral-7b.json", 7241732096, 7241732096, "MistralForCausalLM"},
    /* BertForPreTraining without the 2-way NSP classifier: 110,104,890; published "110M" (Devlin et al. 2019) */
    {"hf/bert-base-uncased.json", 110104890, 110e6, "BERT-Base"},
    /* 336,224,058 = BertModel's 335,141,888 (the HF card's 336M / 335M) + MLM transform and vocabulary bias */
    {"hf/bert-large-uncased.json", 336224058, 335e6, "BERT-Large"},
    /* 222,903,552 for T5ForConditionalGeneration; psearch leaves out the encoder's final RMSNorm and the two
     * relative-position tables (768 + 768) */
    {"hf/t5-base.json", 222902016, 222903552, "T5-Base"},
    {"hf/vit-base-patch16-224.json", 86567656, 86567656, "ViTForImageClassification, 1000 classes"},
};

static void test_hf_counts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_counts / sizeof g_counts[0]; i++) {
        const hf_case *c = &g_counts[i];
        ps_model m;
        load_ok(tdata(c->file), NULL, &m);
        int64_t p = ps_model_params(&m);
        print_message("%-32s %13lld  published %13.0f (%s)\n", c->file, (long long)p, c->published, c->what);
        if (c->exact && p != c->exact) fail_msg("%s: %lld parameters, expected %lld", c->file, (long long)p,
                                                (long long)c->exact);
        if (fabs(rel_err((double)p, c->published)) > 0.01)
            fail_msg("%s: %lld parameters, more than 1%% from the published %.0f", c->file, (long long)p, c->published);
        /* the explicit reader gives the same model */
        ps_model h;
        assert_int_equal(ps_model_load_hf_config(tdata(c->file), NULL, &h), PS_OK);
        assert_int_equal(ps_model_params(&h), p);
        ps_model_free(&h);
        ps_model_free(&m);
    }
}

static void test_hf_structure(void **state)
{
    (void)state;
    ps_model m;
    load_ok(tdata("hf/gpt2-124m.json"), NULL, &m);
    assert_string_equal(m.family, "gpt2");
    assert_string_equal(m.name, "gpt2-124m");
    assert_int_equal(m.n_layers, 14);
    assert_int_equal(m.seq, 1024);
    assert_int_equal(m.layers[0].positions, 1024);
    assert_true(m.layers[1].dropout);
    assert_int_equal(m.layers[1].ffn_hidden, 3072); /* n_inner null = 4 n_embd */
    assert_true(m.layers[13].tied);
    assert_int_equal(m.dtype, PS_DTYPE_BF16);
    ps_model_free(&m);

    load_ok(tdata("hf/Llama-2-7b-hf/config.json"), NULL, &m);
    assert_string_equal(m.name, "Llama-2-7b-hf"); /* named after its folder */
    assert_int_equal(m.seq, 4096);
    assert_int_equal(m.layers[1].norm, PS_NORM_RMSNORM);
    assert_int_equal(m.layers[1].act, PS_ACT_SWIGLU);
    assert_false(m.layers[1].bias);
    assert_false(m.layers[1].dropout);
    assert_false(m.layers[33].tied);
    assert_int_equal(m.layers[0].positions, 0); /* rotary */
    ps_model_free(&m);

    load_ok(tdata("hf/mistral-7b.json"), NULL, &m);
    assert_int_equal(m.layers[1].kv_heads, 8);
    assert_int_equal(m.layers[1].attn_window, 4096);
    assert_int_equal(m.seq, 32768);
    ps_model_free(&m);

    load_ok(tdata("hf/pythia-410m.json"), NULL, &m);
    assert_int_equal(m.layers[0].positions, 0);
    assert_true(m.layers[1].bias);
    assert_false(m.layers[25].tied);
    ps_model_free(&m);

    load_ok(tdata("hf/bert-large-uncased.json"), NULL, &m);
    assert_int_equal(m.layers[0].token_types, 2);
    assert_true(m.layers[0].pooler);
    assert_int_equal(m.layers[1].kind, PS_LAYER_ENCODER);
    assert_true(m.layers[25].pooler && m.layers[25].tied);
    ps_model_free(&m);

    load_ok(tdata("hf/t5-base.json"), NULL, &m);
    assert_int_equal(m.n_layers, 26);
    assert_int_equal(m.layers[1].kind, PS_LAYER_ENCODER);
    assert_int_equal(m.layers[13].kind, PS_LAYER_DECODER_XATTN);
    assert_int_equal(m.layers[13].kv_seq, 512);
    assert_int_equal(m.layers[13].act, PS_ACT_RELU);
    assert_int_equal(m.layers[13].head_dim, 64);
    ps_model_free(&m);

    load_ok(tdata("hf/t5-v1_1-gated.json"), NULL, &m);
    assert_int_equal(m.layers[1].act, PS_ACT_GEGLU);
    assert_false(m.layers[25].tied);
    assert_int_equal(m.seq, 512); /* no n_positions: the T5 pre-training length */
    ps_model_free(&m);

    load_ok(tdata("hf/vit-base-patch16-224.json"), NULL, &m);
    assert_int_equal(m.seq, 197); /* 14 x 14 patches + [CLS] */
    assert_int_equal(m.layers[0].kind, PS_LAYER_PATCH_EMBED);
    assert_true(m.layers[0].cls_token);
    assert_int_equal(m.layers[13].n_classes, 1000);
    ps_model_free(&m);

    load_ok(tdata("hf/vit-tiny-3labels.json"), NULL, &m); /* model type from "architectures"; classes from id2label */
    assert_string_equal(m.family, "vit");
    assert_int_equal(m.layers[13].n_classes, 3);
    assert_int_equal(m.layers[0].channels, 3);
    ps_model_free(&m);
}

static void test_hf_opts(void **state)
{
    (void)state;
    ps_model_opts o;
    ps_model_opts_init(&o);
    o.seq = 2048;
    o.vocab_pad = 128;
    ps_model m;
    load_ok(tdata("hf/mistral-7b.json"), &o, &m);
    assert_int_equal(m.seq, 2048);
    for (int64_t i = 0; i < m.n_layers; i++) assert_int_equal(m.layers[i].seq, 2048);
    assert_int_equal(m.layers[0].vocab, 32000); /* already a multiple of 128 */
    ps_model_free(&m);
    load_ok(tdata("hf/gpt2-124m.json"), &o, &m);
    assert_int_equal(m.layers[0].vocab, 50304);
    assert_int_equal(m.layers[13].vocab, 50304);
    ps_model_free(&m);
    o.seq = 512;
    load_ok(tdata("hf/t5-base.json"), &o, &m);
    assert_int_equal(m.layers[13].kv_seq, 512);
    ps_model_free(&m);
}

typedef struct {
    const char *file;
    const char *needles[4];
} hf_bad;

static const hf_bad g_bad[] = {
    {"hf/bad/gpt2-missing-n_embd.json", {"gpt2-missing-n_embd.json: missing field 'n_embd'", NULL}},
    {"hf/bad/llama-missing-intermediate.json", {"missing field 'intermediate_size'", NULL}},
    {"hf/bad/unsupported-type.json",
     {"model_type 'jamba' is not supported", "gpt2, gpt_neox, llama, mistral, bert, t5, vit, mixtral", NULL}},
    {"hf/bad/unsupported-arch.json", {"architecture 'FalconForCausalLM' is not supported", "gpt_neox", NULL}},
    {"hf/bad/null-required.json", {"null-required.json: field 'hidden_size' is null", NULL}},
    {"hf/bad/t5-bad-ffproj.json", {"field 'feed_forward_proj' = 'swish' is not supported", NULL}},
    {"hf/bad/heads-not-dividing.json", {"field 'num_attention_heads' = 16 does not divide 'hidden_size' = 1000", NULL}},
    {"hf/bad/negative-layers.json", {"field 'num_hidden_layers'", "(got -12)", NULL}},
};

static void test_hf_bad(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_bad / sizeof g_bad[0]; i++) {
        ps_model m;
        ps_error_clear();
        ps_status st = ps_model_load(tdata(g_bad[i].file), NULL, &m);
        if (st != PS_ERR_INPUT)
            fail_msg("%s: expected PS_ERR_INPUT, got %d (%s)", g_bad[i].file, (int)st, ps_error_message());
        for (int k = 0; g_bad[i].needles[k]; k++)
            if (!strstr(ps_error_message(), g_bad[i].needles[k]))
                fail_msg("%s: message '%s' lacks '%s'", g_bad[i].file, ps_error_message(), g_bad[i].needles[k]);
        assert_null(m.layers);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_counts),
        cmocka_unit_test(test_hf_structure),
        cmocka_unit_test(test_hf_opts),
        cmocka_unit_test(test_hf_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

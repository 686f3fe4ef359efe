/* models/: bad input in the model JSON and layer-list formats. Each case must fail with PS_ERR_INPUT and one message
 * naming the file, the field path or line(:column), and the offending value; nothing may leak (run under valgrind or
 * ASan to check) and the output model must come back empty. */
#include <stdlib.h>

#include "models_test.h"

typedef struct {
    const char *file;           /* under tests/data/models/bad */
    const char *needles[5];     /* substrings the message must contain */
} bad_case;

static const bad_case g_cases[] = {
    /* ---- model JSON ---- */
    {"syntax.json", {"bad/syntax.json:5:", "invalid JSON", NULL}},
    {"missing-layers.json", {"missing-layers.json: missing field 'layers'", NULL}},
    {"missing-hidden.json", {"missing-hidden.json: layers[1].hidden: missing", NULL}},
    {"negative-hidden.json", {"negative-hidden.json: field 'layers[2].hidden'", "(got -5)", NULL}},
    {"zero-seq.json", {"zero-seq.json: field 'seq'", "(got 0)", NULL}},
    {"wrong-type.json", {"wrong-type.json: field 'hidden' must be an integer (got a string)", NULL}},
    {"wrong-type-bool.json", {"field 'layers[0].bias' must be true or false (got a string)", NULL}},
    {"fractional.json", {"field 'hidden' must be an integer (got 768.5)", NULL}},
    {"unknown-kind.json", {"unknown-kind.json: field 'layers[1].kind'", "'decodr'", "did you mean 'decoder'", NULL}},
    {"unknown-field.json", {"unknown-field.json: unknown field 'hiden'", "did you mean 'hidden'", NULL}},
    {"unknown-group-field.json", {"unknown field 'layers[1].ffn_hiden'", "did you mean 'ffn_hidden'", NULL}},
    {"not-applicable.json",
     {"field 'layers[0].vocab' does not apply to kind 'encoder'", "only to: embedding, lm_head", NULL}},
    {"kv-heads.json", {"kv-heads.json: layers[1].kv_heads = 5: must divide heads = 32", NULL}},
    {"heads-divide.json", {"layers[0].heads = 40: does not divide hidden = 5140", "head_dim", NULL}},
    {"bad-norm.json", {"field 'norm' = 'batchnorm' is not known", "layernorm, rmsnorm", NULL}},
    {"bad-dtype.json", {"bad-dtype.json: field 'dtype' = 'fp12' is not known", NULL}},
    {"tied-mismatch.json", {"layer 2 (lm_head): tied = true", "vocab = 50304", NULL}},
    {"overflow.json", {"overflow.json: layers[0]: the parameter count", "overflows", "3037000500", NULL}},
    {"huge-real.json", {"field 'seq' must be an integer (got 1e+19)", NULL}},
    {"empty-layers.json", {"field 'layers' is empty", NULL}},
    {"layers-not-array.json", {"field 'layers' must be an array", NULL}},
    {"repeat-zero.json", {"field 'layers[0].repeat'", "(got 0)", NULL}},
    {"too-many-layers.json", {"layers[1]: repeat = 60000", "100000 layers", NULL}},
    {"merge-seq.json", {"layers[0].seq = 50: patch merging", "multiple of 4", NULL}},
    {"not-a-model.json", {"not-a-model.json: unknown field 'n_layers'", "did you mean 'layers'", NULL}},
    {"foreign.json", {"foreign.json: neither a psearch model", "'model_type'", NULL}},
    {"source-too-long.json", {"field 'source' is longer than 255 characters", NULL}},
    /* ---- layer lists ---- */
    {"bad-kind.layers", {"bad-kind.layers:3:1:", "unknown layer kind 'decodr'", "did you mean 'decoder'", NULL}},
    {"bad-int.layers", {"bad-int.layers:2:16: heads=twelve: not an integer", NULL}},
    {"unknown-key.layers", {"unknown-key.layers:2:13: ffn_hiden=3072: unknown key", "did you mean 'ffn_hidden'", NULL}},
    {"no-equals.layers", {"no-equals.layers:2:13: 'tied': expected key=value", NULL}},
    {"bad-repeat.layers", {"bad-repeat.layers:2:9: 'x0'", "positive integer", NULL}},
    {"model-key-on-layer.layers", {"model-key-on-layer.layers:2:13: dtype=fp16", "model-wide", NULL}},
    {"unterminated.layers", {"unterminated.layers:1:5: unterminated quote", NULL}},
    {"empty.layers", {"empty.layers: no layers", NULL}},
    {"resolve-error.layers", {"resolve-error.layers:4: kv_heads = 5: must divide heads = 32", NULL}},
    {"not-applicable.layers", {"not-applicable.layers:2:12: vocab=30522", "does not apply to kind 'encoder'", NULL}},
    {"missing-seq.layers", {"missing-seq.layers:2: seq: missing", NULL}},
    {"overflow.layers", {"overflow.layers:2:9: hidden=99999999999999999999: not an integer", NULL}},
    {"bad-bool.layers", {"bad-bool.layers:2:9: bias=maybe: must be true or false", NULL}},
    {"dup-key.layers", {"dup-key.layers:2:22: 'heads' is given twice on this line (first at column 13)", NULL}},
    {"dup-repeat.layers", {"dup-repeat.layers:2:13: 'repeat' is given twice on this line (first at column 9)", NULL}},
    {"dup-set.layers", {"dup-set.layers:1:34: 'heads' is given twice", NULL}},
    {"nul-byte.layers", {"nul-byte.layers:2:11: a NUL byte", NULL}},
};

static void run_case(const bad_case *c)
{
    char rel[256];
    snprintf(rel, sizeof rel, "bad/%s", c->file);
    ps_model m;
    memset(&m, 0x5a, sizeof m); /* garbage in: the loader must clear it */
    ps_error_clear();
    ps_status st = ps_model_load(tdata(rel), NULL, &m);
    if (st != PS_ERR_INPUT) fail_msg("%s: expected PS_ERR_INPUT, got %d (%s)", c->file, (int)st, ps_error_message());
    /* the message is one line */
    if (strchr(ps_error_message(), '\n')) fail_msg("%s: message spans lines: %s", c->file, ps_error_message());
    for (int i = 0; c->needles[i]; i++)
        if (!strstr(ps_error_message(), c->needles[i]))
            fail_msg("%s: message '%s' lacks '%s'", c->file, ps_error_message(), c->needles[i]);
    assert_null(m.layers);
    assert_int_equal(m.n_layers, 0);
    ps_model_free(&m);
}

static void test_bad_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) run_case(&g_cases[i]);
}

static void test_missing_files(void **state)
{
    (void)state;
    ps_model m;
    static const char *const json[] = {"/nonexistent/m.json", "cannot open", NULL};
    expect_input_error(ps_model_load("/nonexistent/m.json", NULL, &m), &m, json);
    static const char *const layers[] = {"/nonexistent/m.layers", NULL};
    expect_input_error(ps_model_load_layer_list("/nonexistent/m.layers", NULL, &m), &m, layers);
    static const char *const hf[] = {"/nonexistent/config.json", NULL};
    expect_input_error(ps_model_load_hf_config("/nonexistent/config.json", NULL, &m), &m, hf);
    /* a directory is a model only when it is a Hugging Face model folder holding config.json */
    static const char *const dir[] = {"is a folder without a config.json", NULL};
    expect_input_error(ps_model_load(tdata("good/"), NULL, &m), &m, dir);
    assert_int_equal(ps_model_load(tdata("hf/Llama-2-7b-hf"), NULL, &m), PS_OK);
    assert_int_equal(ps_model_params(&m), 6738415616LL);
    ps_model_free(&m);
}

/* The explicit readers refuse content of the other formats with the file named. */
static void test_wrong_reader(void **state)
{
    (void)state;
    ps_model m;
    static const char *const not_json[] = {"gpt2-small.layers:", "invalid JSON", NULL};
    expect_input_error(ps_model_load_json(tdata("good/gpt2-small.layers"), NULL, &m), &m, not_json);
    static const char *const hf_on_psearch[] = {"gpt2-small.json", "'architectures'", NULL};
    expect_input_error(ps_model_load_hf_config(tdata("good/gpt2-small.json"), NULL, &m), &m, hf_on_psearch);
    static const char *const list_on_json[] = {"gpt2-small.json:1:1:", "unknown layer kind '{'", NULL};
    expect_input_error(ps_model_load_layer_list(tdata("good/gpt2-small.json"), NULL, &m), &m, list_on_json);
}

/* Options that make a good model invalid are reported against the model. */
static void test_opts_invalidate(void **state)
{
    (void)state;
    ps_model_opts o;
    ps_model_opts_init(&o);
    o.seq = 1001; /* Swin: 1001 tokens cannot be merged 2x2 */
    ps_model m;
    static const char *const needles[] = {"swin-huge-32.json: layer 3 (merge): seq", "multiple of 4", NULL};
    expect_input_error(ps_model_load("swin-huge-32", &o, &m), &m, needles);
    o.seq = INT64_MAX;
    static const char *const big[] = {"overflow", NULL};
    expect_input_error(ps_model_load("gpt3-175b", &o, &m), &m, big);
}

/* ps_model_load's two halves: locating reads no content, parsing opens no file (an MPI rank parses the bytes rank
 * 0 read), and messages name the located path, line and field as a load's do. */
static void test_locate_and_parse(void **state)
{
    (void)state;
    ps_model_source src;
    assert_int_equal(ps_model_locate("gpt3-1.3b", &src), PS_OK);
    assert_int_equal(src.kind, PS_MODEL_FILE_PRESET);
    size_t n = strlen(src.path);
    assert_true(n > 15 && strcmp(src.path + n - 15, "/gpt3-1.3b.json") == 0);
    assert_int_equal(ps_model_locate(tdata("hf/Llama-2-7b-hf"), &src), PS_OK);
    assert_int_equal(src.kind, PS_MODEL_FILE_ANY);
    n = strlen(src.path);
    assert_true(n > 12 && strcmp(src.path + n - 12, "/config.json") == 0);
    assert_int_equal(ps_model_locate("gpt3-66b", &src), PS_ERR_INPUT);
    if (!strstr(ps_error_message(), "unknown model 'gpt3-66b'")) fail_msg("unknown preset: %s", ps_error_message());
    /* A path longer than the source holds is refused whole, not cut to the name of another file; the message shows
     * its start. */
    static char longpath[sizeof src.path + 16];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    memcpy(longpath + sizeof longpath - 6, ".json", 6);
    assert_int_equal(ps_model_locate(longpath, &src), PS_ERR_INPUT);
    char want[160];
    snprintf(want, sizeof want, "%.80s...: cannot open: the path is longer than %zu characters", longpath,
             sizeof src.path - 1);
    if (strcmp(ps_error_message(), want) != 0) fail_msg("long path: '%s', expected '%s'", ps_error_message(), want);
    ps_model m;
    static const char *const long_load[] = {"cannot open: the path is longer than", NULL};
    expect_input_error(ps_model_load(longpath, NULL, &m), &m, long_load);

    /* The content of gpt2-small.layers under a name no process has: the same model as loading the file. */
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ps_read_file(tdata("good/gpt2-small.layers"), &text, &len), PS_OK);
    src.kind = PS_MODEL_FILE_ANY;
    snprintf(src.path, sizeof src.path, "/nonexistent/m.layers");
    ps_model a, b;
    assert_int_equal(ps_model_parse(&src, text, len, NULL, &a), PS_OK);
    load_ok(tdata("good/gpt2-small.layers"), NULL, &b);
    assert_int_equal(a.n_layers, b.n_layers);
    assert_int_equal(ps_model_params(&a), ps_model_params(&b));
    ps_model_free(&a);
    ps_model_free(&b);
    free(text);

    static const char bad_list[] = "set seq=1024\nembedding hidden=768 vocab=x\n";
    static const char *const list_msg[] = {"/nonexistent/m.layers:2:", "vocab=x", NULL};
    expect_input_error(ps_model_parse(&src, bad_list, sizeof bad_list - 1, NULL, &a), &a, list_msg);
    snprintf(src.path, sizeof src.path, "/nonexistent/m.json");
    static const char bad_json[] = "{\n  \"layers\": [\n}";
    static const char *const json_msg[] = {"/nonexistent/m.json:3:", "invalid JSON", NULL};
    expect_input_error(ps_model_parse(&src, bad_json, sizeof bad_json - 1, NULL, &a), &a, json_msg);
    /* A preset is a psearch model JSON whatever it holds. */
    src.kind = PS_MODEL_FILE_PRESET;
    static const char *const preset_msg[] = {"/nonexistent/m.json:1:", "invalid JSON", NULL};
    expect_input_error(ps_model_parse(&src, bad_list, sizeof bad_list - 1, NULL, &a), &a, preset_msg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_cases),
        cmocka_unit_test(test_missing_files),
        cmocka_unit_test(test_wrong_reader),
        cmocka_unit_test(test_opts_invalidate),
        cmocka_unit_test(test_locate_and_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

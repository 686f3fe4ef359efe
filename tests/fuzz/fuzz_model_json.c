/* libFuzzer target: the psearch model JSON reader (presets, user model files), from the text to a validated model,
 * with and without the command-line options, then the arithmetic and renderings that run on every accepted model. */
#include "fuzz_common.h"
#include "models_internal.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *root = NULL;
    if (ps_json_load_buffer((const char *)data, size, "fuzz/model.json", &root) != PS_OK) return 0;
    ps_model m;
    if (ps_model_from_json(root, "fuzz/model.json", NULL, &m) == PS_OK) {
        fuzz_model_check(&m);
        ps_model_free(&m);
        ps_model_opts o = fuzz_model_opts(fuzz_hash(data, size));
        if (ps_model_from_json(root, "fuzz/model.json", &o, &m) == PS_OK) fuzz_model_check(&m);
        ps_model_free(&m);
    } else {
        /* A failed read leaves the model empty (models_internal.h), so the caller has nothing to free. */
        FUZZ_CHECK(m.layers == NULL && m.n_layers == 0);
    }
    json_decref(root);
    return 0;
}

/* libFuzzer target: the Hugging Face config.json import (gpt2, gpt_neox, llama, mistral, bert, t5, vit), with and
 * without the command-line options, then the arithmetic and renderings that run on every accepted model. */
#include "fuzz_common.h"
#include "models_internal.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *root = NULL;
    /* The folder/config.json form names the model after its folder (hf.c: hf_name). */
    const char *path = "fuzz/Some-Model-hf/config.json";
    if (ps_json_load_buffer((const char *)data, size, path, &root) != PS_OK) return 0;
    ps_model m;
    if (ps_model_from_hf(root, path, NULL, &m) == PS_OK) {
        fuzz_model_check(&m);
        ps_model_free(&m);
        ps_model_opts o = fuzz_model_opts(fuzz_hash(data, size));
        if (ps_model_from_hf(root, path, &o, &m) == PS_OK) fuzz_model_check(&m);
        ps_model_free(&m);
    } else {
        FUZZ_CHECK(m.layers == NULL && m.n_layers == 0);
    }
    json_decref(root);
    return 0;
}

/* libFuzzer target: the plain layer-list reader (*.layers), with and without the command-line options, then the
 * arithmetic and renderings that run on every accepted model. */
#include "fuzz_common.h"
#include "models_internal.h"


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A file is read whole and NUL-terminated (ps_read_file); an embedded NUL is refused with its line. */
    char *text = fuzz_cstr(data, size);
    ps_model m;
    if (ps_model_from_layer_list(text, size, "fuzz/model.layers", NULL, &m) == PS_OK) {
        fuzz_model_check(&m);
        ps_model_free(&m);
        ps_model_opts o = fuzz_model_opts(fuzz_hash(data, size));
        if (ps_model_from_layer_list(text, size, "fuzz/model.layers", &o, &m) == PS_OK) fuzz_model_check(&m);
        ps_model_free(&m);
    } else {
        FUZZ_CHECK(m.layers == NULL && m.n_layers == 0);
    }
    free(text);
    return 0;
}

/* libFuzzer target: ps_model_load on a file, as `--model PATH` does: the choice of reader by extension and content
 * (psearch JSON, Hugging Face config.json, layer list, a model folder holding config.json), then every reader, with
 * and without the command-line options. The in-memory targets go deeper per second; this one covers the dispatch. */
#include "fuzz_common.h"

static char g_paths[4][600];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_scratch_dir();
    fuzz_mkdir("models");
    fuzz_mkdir("models/hf");
    fuzz_path(g_paths[0], sizeof g_paths[0], "models/model.json");
    fuzz_path(g_paths[1], sizeof g_paths[1], "models/model.layers");
    fuzz_path(g_paths[2], sizeof g_paths[2], "models/model.txt");
    fuzz_path(g_paths[3], sizeof g_paths[3], "models/hf/config.json");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t h = fuzz_hash(data, size);
    int which = (int)(h % 4);
    fuzz_write_file(g_paths[which], data, size);
    char spec[600];
    ps_strlcpy(spec, g_paths[which], sizeof spec);
    if (which == 3) *strrchr(spec, '/') = '\0'; /* the folder, as `--model Llama-2-7b-hf` */
    ps_model m;
    if (ps_model_load(spec, NULL, &m) == PS_OK) {
        fuzz_model_check(&m);
        ps_model_free(&m);
        ps_model_opts o = fuzz_model_opts(h / 4);
        if (ps_model_load(spec, &o, &m) == PS_OK) fuzz_model_check(&m);
        ps_model_free(&m);
    } else {
        FUZZ_CHECK(m.layers == NULL && m.n_layers == 0);
    }
    return 0;
}

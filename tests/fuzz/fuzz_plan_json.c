/* libFuzzer target: plan.json as `psearch estimate --plan FILE` reads it (batch and pipeline fields, stages with
 * layer ranges and per-layer strategies), then the cost model's prediction and the plan's JSON rendering. Every
 * input is tried on two fixed (model, cluster) pairs: a dense decoder on 32 A100s, and an encoder-decoder in fp16
 * on AMP's heterogeneous 16-GPU cluster (V100s and T4s). Vocabularies are padded to 1024, as --vocab-pad would, so
 * any tp up to 1024 divides them. */
#include "fuzz_common.h"
#include "ps_cost.h"

static ps_model g_model[2];
static ps_cluster g_cluster[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    ps_model_opts o, o16;
    ps_model_opts_init(&o);
    o.vocab_pad = 1024;
    o16 = o;
    o16.dtype = PS_DTYPE_FP16; /* V100 and T4 have no bf16 */
    if (ps_model_load("gpt3-1.3b", &o, &g_model[0]) != PS_OK ||
        ps_model_load("t5-512-4-32", &o16, &g_model[1]) != PS_OK ||
        ps_cluster_load("dgx-a100-80g:4", &g_cluster[0]) != PS_OK ||
        ps_cluster_load(PS_FUZZ_SOURCE_DIR "/examples/clusters/amp-mixed-v100-t4.json", &g_cluster[1]) != PS_OK) {
        fprintf(stderr, "fuzz_plan_json: cannot load the fixed model/cluster: %s\n", ps_error_message());
        abort();
    }
    return 0;
}

static void try_plan(const json_t *root, const ps_model *m, const ps_cluster *c)
{
    ps_plan plan;
    ps_status st = ps_plan_from_json(root, "fuzz/plan.json", m, &plan);
    /* PS_FUZZ_VERBOSE=1: say how far an input got (for writing seeds that reach the cost model). */
    bool verbose = getenv("PS_FUZZ_VERBOSE") != NULL;
    if (verbose) fprintf(stderr, "plan for %s on %s: %s\n", m->name, c->name, st ? ps_error_message() : "read");
    if (st != PS_OK) return;
    FUZZ_CHECK(plan.pp >= 1 && plan.vpp >= 1 && plan.cuts && plan.layer);
    int64_t S = (int64_t)plan.pp * plan.vpp;
    FUZZ_CHECK(plan.cuts[0] == 0 && plan.cuts[S] == m->n_layers);
    for (int64_t s = 0; s < S; s++) FUZZ_CHECK(plan.cuts[s] < plan.cuts[s + 1]);
    json_t *j = ps_plan_to_json(&plan, m);
    FUZZ_CHECK(j != NULL);
    char *txt = json_dumps(j, JSON_COMPACT);
    FUZZ_CHECK(txt != NULL);
    free(txt);
    json_decref(j);
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    ps_prediction r;
    memset(&r, 0, sizeof r);
    st = ps_cost_plan(&cp, m, c, &plan, &r);
    if (verbose) fprintf(stderr, "  cost: %s\n", st ? ps_error_message() : "predicted");
    if (st == PS_OK) {
        FUZZ_CHECK(r.n_stages == S && r.stages != NULL);
        FUZZ_CHECK(isfinite(r.iter_time_s) && r.iter_time_s > 0);
        FUZZ_CHECK(isfinite(r.samples_per_s) && isfinite(r.mfu) && r.mfu >= 0);
        FUZZ_CHECK(r.bubble_frac >= 0 && r.bubble_frac <= 1);
        for (int i = 0; i < r.n_stages; i++)
            FUZZ_CHECK(isfinite(r.stages[i].mem_peak) && r.stages[i].mem_peak >= 0 && isfinite(r.stages[i].fwd) &&
                       r.stages[i].fwd >= 0);
    }
    ps_prediction_free(&r);
    ps_plan_free(&plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *root = NULL;
    if (ps_json_load_buffer((const char *)data, size, "fuzz/plan.json", &root) != PS_OK) return 0;
    for (int k = 0; k < 2; k++) try_plan(root, &g_model[k], &g_cluster[k]);
    json_decref(root);
    return 0;
}

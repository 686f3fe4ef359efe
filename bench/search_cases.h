/* The search cases bench/search and bench/scaling both time, and their inputs loaded as the psearch command loads
 * them (cli/inputs.c), so the two benchmarks cannot drift apart on what they search. Header-only: each benchmark is
 * one source file, and cli/ is the psearch executable, not a library to link. */
#ifndef PS_SEARCH_CASES_H
#define PS_SEARCH_CASES_H

#include "ps_search.h"

typedef struct {
    const char *name, *model, *cluster;
    int64_t gbs_lo, gbs_hi, gbs_step;
    double target_s; /* the target on one rank of a 2-core machine (bench_search); 0 = none */
    int64_t seq;     /* sequence length (--seq); 0 = the model's own */
} ps_search_bench_case;

/* Each case is the search `psearch -m MODEL -c CLUSTER [--seq N] --gbs B` (or --gbs-range L:H:S) runs.
 * (a) a batch sweep: psearch -m gpt3-65b -c dgx-a100-80g:4 --gbs-range 64:512:64
 * (b) one batch: psearch -m gpt3-175b -c dgx-a100-80g:128 --gbs 1536
 * (c) the Llama 3 report's 16M tokens at seq 8192 -> 2048 sequences: psearch -m llama3-405b -c dgx-h100:512 --gbs 2048
 * (d) NeMo's Mixtral 8x22B pre-training recipe (NVIDIA/NeMo nemo/collections/llm/recipes/mixtral_8x22b.py at
 *     00138e21: seq_length 4096, global_batch_size 512) on 256 GPUs:
 *     psearch -m mixtral-8x22b -c dgx-h100:32 --seq 4096 --gbs 512
 * (e) DeepSeek-V3's pre-training (arXiv 2412.19437: 2048 H800 GPUs, 4K sequences, batch 15360 after the first 469B
 *     tokens, Sec. 3.1 and 4.2): psearch -m deepseek-v3 -c hgx-h800:256 --gbs 15360
 * (f) the Llama 3 report's long-context stage (Table 4: 16,384 GPUs at seq 131072, 16M tokens -> 16 sequences with
 *     TP 8, CP 16, PP 16, DP 8): psearch -m llama3-405b -c dgx-h100:2048 --seq 131072 --gbs 16
 * (g) a real partition's node count, whose GPU count (2520 = 2^3 x 3^2 x 5 x 7) has 48 divisors, at GPT-3's batch
 *     rounded to it (the paper's 3.2M tokens = 1536 sequences; 2520 = one sample per GPU):
 *     psearch -m gpt3-175b -c dgx-a100-80g:315 --gbs 2520 */
static const ps_search_bench_case ps_search_bench_cases[] = {
    {"a", "gpt3-65b", "dgx-a100-80g:4", 64, 512, 64, 1.0, 0},
    {"b", "gpt3-175b", "dgx-a100-80g:128", 1536, 1536, 1, 0, 0},
    {"c", "llama3-405b", "dgx-h100:512", 2048, 2048, 1, 60.0, 0},
    {"d", "mixtral-8x22b", "dgx-h100:32", 512, 512, 1, 2.0, 4096},
    {"e", "deepseek-v3", "hgx-h800:256", 15360, 15360, 1, 2.0, 0},
    {"f", "llama3-405b", "dgx-h100:2048", 16, 16, 1, 2.0, 131072},
    {"g", "gpt3-175b", "dgx-a100-80g:315", 2520, 2520, 1, 2.0, 0},
};
#define PS_SEARCH_BENCH_N_CASES (sizeof ps_search_bench_cases / sizeof ps_search_bench_cases[0])

/* The case's cluster and model on this process alone, the vocabulary padded to 128 x GPUs per node as psearch pads
 * it (the search may choose TP up to a node). The command's dtype fallback never applies: these GPUs have bf16. */
static inline ps_status ps_search_bench_load(const ps_search_bench_case *bc, ps_model *m, ps_cluster *c)
{
    PS_TRY(ps_cluster_load(bc->cluster, c));
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.seq = bc->seq;
    mo.vocab_pad = 128 * (c->groups[0].gpus_per_node > 0 ? c->groups[0].gpus_per_node : 1);
    ps_status st = ps_model_load(bc->model, &mo, m);
    if (st != PS_OK) {
        ps_cluster_free(c);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

#endif

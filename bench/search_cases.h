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
} ps_search_bench_case;

/* (a) a batch sweep; (b) one batch; (c) the Llama 3 report's 16M tokens at seq 8192 -> 2048 sequences. */
static const ps_search_bench_case ps_search_bench_cases[] = {
    {"a", "gpt3-65b", "dgx-a100-80g:4", 64, 512, 64, 1.0},
    {"b", "gpt3-175b", "dgx-a100-80g:128", 1536, 1536, 1, 0},
    {"c", "llama3-405b", "dgx-h100:512", 2048, 2048, 1, 60.0},
};
#define PS_SEARCH_BENCH_N_CASES (sizeof ps_search_bench_cases / sizeof ps_search_bench_cases[0])

/* The case's cluster and model on this process alone, the vocabulary padded to 128 x GPUs per node as psearch pads
 * it (the search may choose TP up to a node). The command's dtype fallback never applies: these GPUs have bf16. */
static inline ps_status ps_search_bench_load(const ps_search_bench_case *bc, ps_model *m, ps_cluster *c)
{
    PS_TRY(ps_cluster_load(bc->cluster, c));
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.vocab_pad = 128 * (c->groups[0].gpus_per_node > 0 ? c->groups[0].gpus_per_node : 1);
    ps_status st = ps_model_load(bc->model, &mo, m);
    if (st != PS_OK) {
        ps_cluster_free(c);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

#endif

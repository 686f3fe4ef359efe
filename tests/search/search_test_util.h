/* What the search tests share: a preset model and cluster loaded as the CLI loads them. Include after cmocka.h and
 * ps_search.h. */
#ifndef PS_SEARCH_TEST_UTIL_H
#define PS_SEARCH_TEST_UTIL_H

/* The cluster, and the model with the vocabulary padded to 128 x the GPUs of a node (the CLI's default) in fp16 where
 * the GPUs have no bf16 (the CLI's fallback). */
static inline void load_as_cli(const char *model, const char *cluster, ps_model *m, ps_cluster *c)
{
    assert_int_equal(ps_cluster_load(cluster, c), PS_OK);
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.vocab_pad = 128 * c->groups[0].gpus_per_node;
    if (!ps_cluster_supports_dtype(c, "bf16")) mo.dtype = PS_DTYPE_FP16;
    assert_int_equal(ps_model_load(model, &mo, m), PS_OK);
}

#endif

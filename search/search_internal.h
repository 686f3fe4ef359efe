/* What search.c shares with baselines.c, not part of search/'s public face (ps_search.h). */
#ifndef PS_SEARCH_INTERNAL_H
#define PS_SEARCH_INTERNAL_H

#include "ps_cost.h"
#include "ps_search.h"

/* The per-layer divisibility rules of ps_plan_check (tp against heads, key/value heads, MLP width, vocabulary, and
 * the sequence with SP), as a predicate: the DPs never pick a strategy the plan check refuses, and a caller skips a
 * plan that breaks them instead of making one and clearing the refusal. */
bool ps_search_layer_allows(const ps_layer *l, const ps_strategy *s);

/* ---- o->framework's rules as the enumeration applies them (search.c, baselines.c; docs/search.md "Frameworks") */
/* The dp_no_overlap of a strategy with dp > 1 at ZeRO stage `zero` (pp_on: pp > 1): o->dp_no_overlap where the
 * framework runs that way, else (the user did not choose: dp_overlap_given false) the way it runs; -1 when neither. */
int ps_search_fw_dp_mode(const ps_search_opts *o, bool pp_on, int zero);
/* Layer l's strategy under o's framework: s, without recomputation on a layer that is not a transformer layer where
 * the framework recomputes transformer layers only (recompute_blocks_only). */
ps_strategy ps_search_fw_layer(const ps_search_opts *o, const ps_layer *l, const ps_strategy *s);
/* Whether TP degree tp with context-parallel degree cp suits every layer of m under o's framework: whole key/value
 * heads per rank (kv_heads_div_tp), the sequence a multiple of seq_tp_multiple x tp x cp and, with cp > 1, of
 * cp_seq_multiple x cp. */
bool ps_search_fw_tp_ok(const ps_search_opts *o, const ps_model *m, int tp, int cp);
/* The attention kernels the search tries on c under o (ps_search_attention) that o's framework runs; how many. */
int ps_search_fw_attention(const ps_search_opts *o, const ps_cluster *c, ps_attn out[2]);

/* ---- tests only: switches for the search's exact shortcuts and pruning rules (docs/search.md, "Speed") */
/* Each bit turns one off, so that tests/search/test_search_rules.c can compare the search with and without it on
 * cases where it applies; psearch never sets them (0). Set it between searches, never during one. */
extern unsigned ps_search_rules_off;
#define PS_SEARCH_RULE_TWIN 1u /* layer tables shared by stages placed alike (layer_tables_build) */
#define PS_SEARCH_RULE_RUNS 2u /* stage-table rows copied along runs of equal layers without a uniform placement */
#define PS_SEARCH_RULE_FILL 4u /* chunked plans: the fill and busiest-device bound (chunked_prunable) */
#define PS_SEARCH_RULE_GRID 8u /* layer tables: only MoE rows costed again for another expert grid */
#define PS_SEARCH_RULE_FIT 16u /* bounds: a layer's strategies above its GPUs' memory on their own left out */
#define PS_SEARCH_RULE_REFINED 32u /* refined plans: the busiest-device bound before costing them */

#endif

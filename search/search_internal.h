/* What search.c shares with baselines.c, not part of search/'s public face (ps_search.h). */
#ifndef PS_SEARCH_INTERNAL_H
#define PS_SEARCH_INTERNAL_H

#include "ps_cost.h"

/* The per-layer divisibility rules of ps_plan_check (tp against heads, key/value heads, MLP width, vocabulary, and
 * the sequence with SP), as a predicate: the DPs never pick a strategy the plan check refuses, and a caller skips a
 * plan that breaks them instead of making one and clearing the refusal. */
bool ps_search_layer_allows(const ps_layer *l, const ps_strategy *s);

#endif

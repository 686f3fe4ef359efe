/* plan.json reading and writing (costdb/plan_json.c). */
#ifndef PS_PLAN_JSON_H
#define PS_PLAN_JSON_H

#include <jansson.h>

#include "ps_cost.h"

/* Read a plan for model `m` from a parsed plan.json; errors name `file` and the field path. */
ps_status ps_plan_from_json(const json_t *root, const char *file, const ps_model *m, ps_plan *out);
/* The plan's fields (batch, pipeline, stages with per-layer strategies, uniform summary). */
json_t *ps_plan_to_json(const ps_plan *p, const ps_model *m);

#endif

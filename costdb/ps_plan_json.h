/* plan.json reading and writing (costdb/plan_json.c). */
#ifndef PS_PLAN_JSON_H
#define PS_PLAN_JSON_H

#include <jansson.h>

#include "ps_cost.h"

/* Read a plan for model `m` from a parsed plan.json; errors name `file` and the field path. */
ps_status ps_plan_from_json(const json_t *root, const char *file, const ps_model *m, ps_plan *out);
/* The plan's fields (batch, pipeline, stages with per-layer strategies, uniform summary). */
json_t *ps_plan_to_json(const ps_plan *p, const ps_model *m);
/* A predicted plan as `psearch estimate --format json` and the search print it: the plan's fields, the devices of
 * each stage, `predicted` (times, rates, memory per stage, breakdown) and the cost parameters used. */
json_t *ps_prediction_json(const ps_model *m, const ps_cluster *c, const ps_plan *plan, const ps_prediction *r,
                           const ps_cost_params *cp);

#endif

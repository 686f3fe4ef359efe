/* Internal to models/: the table of layer fields shared by the three readers (model JSON, layer list, HF import),
 * the resolver that turns "model defaults + group overrides" into one concrete ps_layer, and the common finish step
 * (options, validation). Not installed; other folders use ps_models.h only. */
#ifndef PS_MODELS_INTERNAL_H
#define PS_MODELS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ps_common.h"
#include "ps_models.h"

/* Upper bound on expanded layers: a description asking for more is a typo in a repeat count, and the planner's
 * dynamic programs are sized by it. The libFuzzer build (-DPS_FUZZ=ON) runs the same checks at a tenth of it: a
 * model at the full bound is a 30 MB layer array written twice per input, which held fuzz_layer_list to 167
 * executions per second. At 10,000, a pass over the layers that is quadratic (like the tied-head scan that fuzzing
 * found at 50,000) still does 10^8 steps where a linear one does 10^4. The full bound is tested by
 * tests/models (too-many-layers.json) and tests/cli (cli_overflow). */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define PS_MODEL_MAX_LAYERS 10000
#else
#define PS_MODEL_MAX_LAYERS 100000
#endif

/* PS_FT_REAL: a double (capacity_factor), stored through ps_spec_put_real; the others through ps_spec_put. */
typedef enum { PS_FT_INT = 0, PS_FT_BOOL, PS_FT_NORM, PS_FT_ACT, PS_FT_ROUTER, PS_FT_REAL } ps_field_type;

typedef struct {
    const char *name;
    ps_field_type type;
    size_t offset;  /* into ps_layer */
    int64_t lo;     /* smallest accepted value (PS_FT_INT) */
    unsigned kinds; /* bit (1u << ps_layer_kind) for every kind the field applies to */
} ps_field_def;

extern const ps_field_def ps_layer_fields[];
extern const int ps_layer_field_count;

/* Index of a layer field by name, or -1. */
int ps_field_index(const char *name);
/* Nearest field name (for "did you mean"), NULL when nothing is close. */
const char *ps_field_suggest(const char *name);

/* Layer field values of one scope (model defaults or one group); bit i of `set` = ps_layer_fields[i] was given. */
typedef struct {
    ps_layer v;
    uint64_t set;
} ps_layer_spec;

/* Store an integer / boolean / enum value (enums as their ps_norm_kind / ps_mlp_act value) and mark it given. */
void ps_spec_put(ps_layer_spec *s, int field, int64_t value);
void ps_spec_put_real(ps_layer_spec *s, int field, double value);
/* Names of the router kinds, in ps_router order (the readers parse them). */
extern const char *const ps_router_names[2];

/* Where a layer came from, for messages: prefix "m.json: layers[2]" with sep "." gives "m.json: layers[2].heads";
 * prefix "m.layers:7" with sep ": " gives "m.layers:7: heads". */
typedef struct {
    char prefix[320];
    const char *sep;
} ps_where;

/* State carried across the groups of one model while resolving (cross-attention follows the last encoder). */
typedef struct {
    int64_t last_encoder_seq;
} ps_resolve_ctx;

/* Combine defaults and group values into *out, derive the implicit values (kv_heads = heads, head_dim =
 * hidden/heads, ffn_hidden = 4 hidden, out_hidden, kv_seq), and check the layer. */
ps_status ps_layer_resolve(ps_layer_kind kind, const ps_layer_spec *defaults, const ps_layer_spec *group,
                           const ps_where *w, ps_resolve_ctx *ctx, ps_layer *out);
/* Check one concrete layer; messages are "<prefix><sep><field> = <value>: <what is wrong>". */
ps_status ps_layer_check(const ps_layer *l, const ps_where *w);
/* Parameter count with overflow detection (false on overflow). */
bool ps_layer_params_checked(const ps_layer *l, int64_t *out);

/* A growing array of layers. */
typedef struct {
    ps_layer *v;
    int64_t n, cap;
} ps_layer_vec;

/* Append `repeat` copies; refuses more than PS_MODEL_MAX_LAYERS in all (message names `where`). */
ps_status ps_layer_vec_push(ps_layer_vec *vec, const ps_layer *l, int64_t repeat, const char *where);

/* How many layers from m->layers[i] on are byte copies of it (at least 1): a repeated block is pushed as copies, so
 * per-layer work that depends on nothing but the layer (checks, parameter counts) is done once per run. */
int64_t ps_layer_copies(const ps_model *m, int64_t i);

/* Last step of every reader: take ownership of vec's layers, set m->n_layers and m->seq (the first layer's seq when
 * m->seq is 0), apply the options (vocab padding, sequence override, dtype), and validate. On failure the model is
 * freed. */
ps_status ps_model_finish(ps_model *m, ps_layer_vec *vec, const ps_model_opts *opts, const char *where);

/* The readers behind ps_model_load, on content already read (so ps_model_load parses a file once). `path` names
 * the file in messages. They initialise *out first and leave it empty on failure. */
ps_status ps_model_from_json(const json_t *root, const char *path, const ps_model_opts *opts, ps_model *out);
ps_status ps_model_from_hf(const json_t *root, const char *path, const ps_model_opts *opts, ps_model *out);
/* text holds len bytes (a NUL among them is refused, naming its line and column) and a NUL after them. */
ps_status ps_model_from_layer_list(const char *text, size_t len, const char *path, const ps_model_opts *opts,
                                   ps_model *out);

/* Name of the file without directories and extension ("dir/gpt2.json" -> "gpt2"), into out. */
void ps_model_stem(const char *path, char *out, size_t cap);

#endif

/* The psearch model JSON format (presets use it; users pass a path): model-wide values and layer-field defaults at
 * the top level, then "layers": groups {"kind", "repeat", overrides}. See docs/models.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

static const char *const g_model_keys[] = {"name", "family", "source", "published_params", "published_params_rounding",
                                           "published_active_params", "published_active_params_rounding", "dtype",
                                           "seq", "notes", "layers", "rope_theta", NULL};
static const char *const g_group_keys[] = {"kind", "repeat", "notes", NULL};

/* Known keys = the scope's own keys + every layer field; built once per call (the field table is short). */
static ps_status check_keys(const json_t *obj, const ps_jloc *loc, const char *const *own)
{
    const char *known[64];
    int n = 0;
    for (const char *const *k = own; *k; k++) known[n++] = *k;
    for (int i = 0; i < ps_layer_field_count; i++) known[n++] = ps_layer_fields[i].name;
    known[n] = NULL;
    return ps_json_known_keys(obj, loc, known);
}

static ps_status read_notes(const json_t *obj, const ps_jloc *loc)
{
    json_t *v = json_object_get(obj, "notes");
    if (!v || json_is_string(v)) return PS_OK;
    ps_jloc fl = ps_jloc_key(loc, "notes");
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (!json_is_string(e)) {
                ps_jloc el = ps_jloc_idx(&fl, i);
                return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be a string", loc->file, el.path);
            }
        }
        return PS_OK;
    }
    return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be a string or an array of strings", loc->file, fl.path);
}

static ps_status parse_enum(const json_t *obj, const ps_jloc *loc, const char *key, const char *const *names,
                            int count, int64_t *out)
{
    char s[32];
    PS_TRY(ps_json_str(obj, loc, key, true, s, sizeof s));
    for (int i = 0; i < count; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return PS_OK;
        }
    }
    ps_jloc fl = ps_jloc_key(loc, key);
    char list[128] = "";
    for (int i = 0; i < count; i++) {
        strcat(list, i ? ", " : "");
        strcat(list, names[i]);
    }
    return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' = '%s' is not known (known: %s)", loc->file, fl.path, s, list);
}

static const char *const g_norm_names[] = {"layernorm", "rmsnorm"};
static const char *const g_act_names[] = {"gelu", "relu", "swiglu", "geglu"};

static void kinds_of(unsigned mask, char *out, size_t cap)
{
    out[0] = '\0';
    for (int k = 0; k < PS_LAYER_KIND_COUNT; k++) {
        if (!(mask & (1u << k))) continue;
        size_t used = strlen(out);
        snprintf(out + used, cap - used, "%s%s", used ? ", " : "", ps_layer_kind_name((ps_layer_kind)k));
    }
}

/* Read the layer fields present in `obj` into `spec`. `kind` < 0 for the top level (any field may be a default);
 * otherwise a field that does not apply to the kind is refused rather than silently ignored. */
static ps_status read_fields(const json_t *obj, const ps_jloc *loc, int kind, ps_layer_spec *spec)
{
    for (int i = 0; i < ps_layer_field_count; i++) {
        const ps_field_def *f = &ps_layer_fields[i];
        if (!json_object_get(obj, f->name)) continue;
        if (kind >= 0 && !(f->kinds & (1u << kind))) {
            ps_jloc fl = ps_jloc_key(loc, f->name);
            char kinds[160];
            kinds_of(f->kinds, kinds, sizeof kinds);
            return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' does not apply to kind '%s' (only to: %s)",
                           loc->file, fl.path, ps_layer_kind_name((ps_layer_kind)kind), kinds);
        }
        int64_t v = 0;
        switch (f->type) {
        case PS_FT_INT: PS_TRY(ps_json_int(obj, loc, f->name, true, f->lo, INT64_MAX, &v)); break;
        case PS_FT_BOOL: {
            bool b = false;
            PS_TRY(ps_json_bool(obj, loc, f->name, true, &b));
            v = b;
            break;
        }
        case PS_FT_NORM: PS_TRY(parse_enum(obj, loc, f->name, g_norm_names, 2, &v)); break;
        case PS_FT_ACT: PS_TRY(parse_enum(obj, loc, f->name, g_act_names, 4, &v)); break;
        case PS_FT_ROUTER: PS_TRY(parse_enum(obj, loc, f->name, ps_router_names, 2, &v)); break;
        case PS_FT_REAL: {
            double x = 0;
            PS_TRY(ps_json_num(obj, loc, f->name, true, 0.0, 1e6, &x));
            ps_spec_put_real(spec, i, x);
            continue;
        }
        }
        ps_spec_put(spec, i, v);
    }
    return PS_OK;
}

static ps_status read_top(const json_t *root, const ps_jloc *top, const char *path, ps_model *m,
                          ps_layer_spec *defaults, double *rounding)
{
    PS_TRY(check_keys(root, top, g_model_keys));
    PS_TRY(read_notes(root, top));
    ps_model_stem(path, m->name, sizeof m->name);
    PS_TRY(ps_json_str(root, top, "name", false, m->name, sizeof m->name));
    PS_TRY(ps_json_str(root, top, "family", false, m->family, sizeof m->family));
    PS_TRY(ps_json_str(root, top, "source", false, m->source, sizeof m->source));
    PS_TRY(ps_json_num(root, top, "published_params", false, 0.0, 1e16, &m->published_params));
    /* checked here so a typo fails early; only the preset tests use it (ps_model has no field for it) */
    PS_TRY(ps_json_num(root, top, "published_params_rounding", false, 0.0, 1e16, rounding));
    PS_TRY(ps_json_num(root, top, "published_active_params", false, 0.0, 1e16, &m->published_active_params));
    double active_rounding = 0;
    PS_TRY(ps_json_num(root, top, "published_active_params_rounding", false, 0.0, 1e16, &active_rounding));
    PS_TRY(ps_json_num(root, top, "rope_theta", false, 1.0, 1e12, &m->rope_theta));
    m->dtype = PS_DTYPE_BF16;
    if (json_object_get(root, "dtype")) {
        char s[16];
        PS_TRY(ps_json_str(root, top, "dtype", true, s, sizeof s));
        if (ps_dtype_parse(s, &m->dtype) != PS_OK)
            return PS_FAIL(PS_ERR_INPUT, "%s: field 'dtype' = '%s' is not known (known: fp32, fp16, bf16, fp8)", path,
                           s);
    }
    PS_TRY(read_fields(root, top, -1, defaults));
    /* The model's reference length is its top-level seq; without one, the first layer's (set in finish). */
    if (defaults->set & (UINT64_C(1) << ps_field_index("seq"))) m->seq = defaults->v.seq;
    return PS_OK;
}

static ps_status read_groups(const json_t *root, const ps_jloc *top, const ps_layer_spec *defaults,
                             ps_layer_vec *vec)
{
    json_t *layers = json_object_get(root, "layers");
    ps_jloc lloc = ps_jloc_key(top, "layers");
    if (!layers) return PS_FAIL(PS_ERR_INPUT, "%s: missing field 'layers'", top->file);
    if (!json_is_array(layers)) return PS_FAIL(PS_ERR_INPUT, "%s: field 'layers' must be an array", top->file);
    if (json_array_size(layers) == 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: field 'layers' is empty; a model needs at least one layer", top->file);
    ps_resolve_ctx ctx = {0};
    size_t i;
    json_t *g;
    json_array_foreach(layers, i, g)
    {
        ps_jloc gloc = ps_jloc_idx(&lloc, i);
        if (!json_is_object(g))
            return PS_FAIL(PS_ERR_INPUT, "%s: '%s' must be an object {\"kind\": ..., ...}", top->file, gloc.path);
        PS_TRY(check_keys(g, &gloc, g_group_keys));
        PS_TRY(read_notes(g, &gloc));
        char kname[32];
        PS_TRY(ps_json_str(g, &gloc, "kind", true, kname, sizeof kname));
        ps_layer_kind kind;
        if (ps_layer_kind_parse(kname, &kind) != PS_OK) {
            /* the kind parser's message lists the kinds; copy it before the new message overwrites the slot */
            char why[512];
            ps_strlcpy(why, ps_error_message(), sizeof why);
            ps_jloc kl = ps_jloc_key(&gloc, "kind");
            return PS_FAIL(PS_ERR_INPUT, "%s: field '%s': %s", top->file, kl.path, why);
        }
        int64_t repeat = 1;
        PS_TRY(ps_json_int(g, &gloc, "repeat", false, 1, PS_MODEL_MAX_LAYERS, &repeat));
        ps_layer_spec group;
        memset(&group, 0, sizeof group);
        PS_TRY(read_fields(g, &gloc, (int)kind, &group));
        ps_where w;
        w.sep = ".";
        snprintf(w.prefix, sizeof w.prefix, "%s: %s", top->file, gloc.path);
        ps_layer l;
        PS_TRY(ps_layer_resolve(kind, defaults, &group, &w, &ctx, &l));
        PS_TRY(ps_layer_vec_push(vec, &l, repeat, w.prefix));
    }
    return PS_OK;
}

ps_status ps_model_from_json(const json_t *root, const char *path, const ps_model_opts *opts, ps_model *out)
{
    memset(out, 0, sizeof *out);
    ps_jloc top = ps_jloc_root(path);
    ps_layer_spec defaults;
    memset(&defaults, 0, sizeof defaults);
    ps_layer_vec vec = {0};
    double rounding = 0.0;
    ps_status st;
    PS_TRY_GOTO(st, read_top(root, &top, path, out, &defaults, &rounding), fail);
    PS_TRY_GOTO(st, read_groups(root, &top, &defaults, &vec), fail);
    PS_TRY_GOTO(st, ps_model_finish(out, &vec, opts, path), fail);
    return PS_OK;
fail:
    free(vec.v);
    ps_model_free(out);
    return st;
}

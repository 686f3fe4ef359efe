/* JSON input with errors that point at the file, line:column or field path, and atomic JSON output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_common.h"

ps_jloc ps_jloc_root(const char *file)
{
    ps_jloc l;
    l.file = file;
    l.path[0] = '\0';
    return l;
}

/* Paths deeper than the buffer are cut and end in "..." so a message never claims a wrong, shorter field name. */
static void mark_truncated(ps_jloc *l, int n)
{
    if (n < 0 || (size_t)n >= sizeof l->path) memcpy(l->path + sizeof l->path - 4, "...", 4);
}

ps_jloc ps_jloc_key(const ps_jloc *parent, const char *key)
{
    ps_jloc l;
    l.file = parent->file;
    int n = parent->path[0] ? snprintf(l.path, sizeof l.path, "%s.%s", parent->path, key)
                            : snprintf(l.path, sizeof l.path, "%s", key);
    mark_truncated(&l, n);
    return l;
}

ps_jloc ps_jloc_idx(const ps_jloc *parent, size_t i)
{
    ps_jloc l;
    l.file = parent->file;
    int n = snprintf(l.path, sizeof l.path, "%s[%zu]", parent->path, i);
    mark_truncated(&l, n);
    return l;
}

static ps_status check_root(json_t *root, const char *name, json_t **out)
{
    if (!json_is_object(root)) {
        json_decref(root);
        return PS_FAIL(PS_ERR_INPUT, "%s: the top level must be a JSON object", name);
    }
    *out = root;
    return PS_OK;
}

ps_status ps_json_load_file(const char *path, json_t **out)
{
    char *buf = NULL;
    size_t len = 0;
    PS_TRY(ps_read_file(path, &buf, &len));
    ps_status st = ps_json_load_buffer(buf, len, path, out);
    free(buf);
    return st;
}

ps_status ps_json_load_buffer(const char *buf, size_t len, const char *name, json_t **out)
{
    *out = NULL;
    json_error_t err;
    /* REJECT_DUPLICATES: a key given twice is almost always an editing mistake; say so instead of picking one. */
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: invalid JSON: %s", name, err.line, err.column, err.text);
    return check_root(root, name, out);
}

const char *ps_json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* Fetch obj[key]; PS_OK with *v == NULL when absent and optional. */
static ps_status field(const json_t *obj, const ps_jloc *loc, const char *key, bool required, json_t **v,
                       ps_jloc *fl)
{
    *fl = ps_jloc_key(loc, key);
    *v = json_object_get(obj, key);
    if (!*v && required) return PS_FAIL(PS_ERR_INPUT, "%s: missing field '%s'", loc->file, fl->path);
    return PS_OK;
}

ps_status ps_json_int(const json_t *obj, const ps_jloc *loc, const char *key, bool required, int64_t lo, int64_t hi,
                      int64_t *out)
{
    json_t *v;
    ps_jloc fl;
    PS_TRY(field(obj, loc, key, required, &v, &fl));
    if (!v) return PS_OK;
    int64_t x;
    if (json_is_integer(v)) {
        x = (int64_t)json_integer_value(v);
    } else if (json_is_real(v)) {
        double d = json_real_value(v);
        /* 1e9 style is common in hand-written files; accept it only when it is an exact, representable integer. */
        if (!(d == floor(d)) || fabs(d) > 9.0e18)
            return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be an integer (got %g)", loc->file, fl.path, d);
        x = (int64_t)d;
    } else {
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be an integer (got %s)", loc->file, fl.path,
                       ps_json_type_name(v));
    }
    if (x < lo || x > hi)
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be in [%lld, %lld] (got %lld)", loc->file, fl.path,
                       (long long)lo, (long long)hi, (long long)x);
    *out = x;
    return PS_OK;
}

ps_status ps_json_num(const json_t *obj, const ps_jloc *loc, const char *key, bool required, double lo, double hi,
                      double *out)
{
    json_t *v;
    ps_jloc fl;
    PS_TRY(field(obj, loc, key, required, &v, &fl));
    if (!v) return PS_OK;
    if (!json_is_number(v))
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be a number (got %s)", loc->file, fl.path,
                       ps_json_type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be in [%g, %g] (got %g)", loc->file, fl.path, lo, hi, x);
    *out = x;
    return PS_OK;
}

ps_status ps_json_bool(const json_t *obj, const ps_jloc *loc, const char *key, bool required, bool *out)
{
    json_t *v;
    ps_jloc fl;
    PS_TRY(field(obj, loc, key, required, &v, &fl));
    if (!v) return PS_OK;
    if (!json_is_boolean(v))
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be true or false (got %s)", loc->file, fl.path,
                       ps_json_type_name(v));
    *out = json_is_true(v);
    return PS_OK;
}

ps_status ps_json_str(const json_t *obj, const ps_jloc *loc, const char *key, bool required, char *out, size_t cap)
{
    json_t *v;
    ps_jloc fl;
    PS_TRY(field(obj, loc, key, required, &v, &fl));
    if (!v) return PS_OK;
    if (!json_is_string(v))
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be a string (got %s)", loc->file, fl.path,
                       ps_json_type_name(v));
    const char *s = json_string_value(v);
    if (strlen(s) >= cap)
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' is longer than %zu characters", loc->file, fl.path, cap - 1);
    ps_strlcpy(out, s, cap);
    return PS_OK;
}

ps_status ps_json_known_keys(const json_t *obj, const ps_jloc *loc, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        (void)v;
        bool ok = false;
        const char *best = NULL;
        int best_d = 1000;
        for (const char *const *k = known; *k; k++) {
            if (strcmp(*k, key) == 0) {
                ok = true;
                break;
            }
            int d = ps_edit_distance(*k, key);
            if (d < best_d) {
                best_d = d;
                best = *k;
            }
        }
        if (!ok) {
            ps_jloc fl = ps_jloc_key(loc, key);
            if (best && best_d <= 3)
                return PS_FAIL(PS_ERR_INPUT, "%s: unknown field '%s' (did you mean '%s'?)", loc->file, fl.path, best);
            return PS_FAIL(PS_ERR_INPUT, "%s: unknown field '%s'", loc->file, fl.path);
        }
    }
    return PS_OK;
}

char *ps_json_dumps_line(const json_t *root, size_t flags, size_t *len)
{
    char *s = json_dumps(root, flags);
    if (!s) return NULL;
    size_t n = strlen(s);
    /* json_dumps leaves no trailing newline; line-oriented tools (and one-record-per-line files) expect one. */
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return NULL;
    }
    t[n] = '\n';
    t[n + 1] = '\0';
    *len = n + 1;
    return t;
}

ps_status ps_json_write(const json_t *root, const char *path)
{
    size_t n = 0;
    char *t = ps_json_dumps_line(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10), &n);
    if (!t) return PS_FAIL(PS_ERR_SYSTEM, "out of memory serializing JSON");
    ps_status st = ps_write_file_atomic(path, t, n);
    free(t);
    return st;
}

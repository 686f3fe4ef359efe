/* The plain layer-list format (*.layers): one line per layer group, `set` lines for model-wide values and running
 * layer defaults, '#' comments. Meant to be written by hand or by a script; every error names file:line:column and
 * the key=value at fault. See docs/models.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models_internal.h"

#define MAX_TOKENS 128

typedef struct {
    char *text; /* points into the line buffer, NUL-terminated */
    int col;    /* 1-based column of the token's first character */
} token;

typedef struct {
    const char *path;
    int line;
} lpos;

/* Split a line into tokens at blanks; a value may be quoted (key="two words"), '#' outside quotes ends the line. */
static ps_status tokenize(char *line, const lpos *pos, token *tok, int *ntok)
{
    int n = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (*p == '\0' || *p == '#') break;
        if (n == MAX_TOKENS)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d: more than %d words on one line", pos->path, pos->line, MAX_TOKENS);
        tok[n].text = p;
        tok[n].col = (int)(p - line) + 1;
        char *out = p;
        bool quoted = false;
        while (*p && (quoted || (*p != ' ' && *p != '\t' && *p != '\r' && *p != '#'))) {
            if (*p == '"') {
                quoted = !quoted;
                p++;
                continue;
            }
            *out++ = *p++;
        }
        if (quoted)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: unterminated quote", pos->path, pos->line, tok[n].col);
        bool at_end = *p == '\0' || *p == '#';
        char *next = at_end ? p : p + 1;
        *out = '\0';
        n++;
        if (at_end) break;
        p = next;
    }
    *ntok = n;
    return PS_OK;
}

static ps_status parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1")) {
        *out = true;
        return PS_OK;
    }
    if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0")) {
        *out = false;
        return PS_OK;
    }
    return PS_ERR_INPUT;
}

static const char *const g_norm_names[] = {"layernorm", "rmsnorm"};
static const char *const g_act_names[] = {"gelu", "relu", "swiglu", "geglu"};

static int find_name(const char *v, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strcmp(v, names[i]) == 0) return i;
    return -1;
}

/* One key=value for a layer field into spec. `kind` < 0 on a `set` line (defaults may name any field). */
static ps_status put_field(int fi, const char *key, const char *val, int kind, const lpos *pos, int col,
                           ps_layer_spec *spec)
{
    const ps_field_def *f = &ps_layer_fields[fi];
    if (kind >= 0 && !(f->kinds & (1u << kind)))
        return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: '%s' does not apply to kind '%s'", pos->path, pos->line, col,
                       key, val, key, ps_layer_kind_name((ps_layer_kind)kind));
    int64_t v = 0;
    switch (f->type) {
    case PS_FT_INT:
        if (!ps_parse_i64(val, &v))
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: not an integer", pos->path, pos->line, col, key, val);
        if (v < f->lo)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: must be at least %lld", pos->path, pos->line, col, key, val,
                           (long long)f->lo);
        break;
    case PS_FT_BOOL: {
        bool b;
        if (parse_bool(val, &b) != PS_OK)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: must be true or false", pos->path, pos->line, col, key, val);
        v = b;
        break;
    }
    case PS_FT_NORM:
        v = find_name(val, g_norm_names, 2);
        if (v < 0)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: unknown norm (known: layernorm, rmsnorm)", pos->path,
                           pos->line, col, key, val);
        break;
    case PS_FT_ACT:
        v = find_name(val, g_act_names, 4);
        if (v < 0)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: unknown activation (known: gelu, relu, swiglu, geglu)",
                           pos->path, pos->line, col, key, val);
        break;
    case PS_FT_ROUTER:
        v = find_name(val, ps_router_names, 2);
        if (v < 0)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: unknown router (known: softmax, sigmoid)", pos->path,
                           pos->line, col, key, val);
        break;
    case PS_FT_REAL: {
        double x;
        if (!ps_parse_double(val, &x) || !(x >= 0) || !(x <= 1e6))
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: must be a number from 0 to 1e6", pos->path, pos->line, col,
                           key, val);
        ps_spec_put_real(spec, fi, x);
        return PS_OK;
    }
    }
    ps_spec_put(spec, fi, v);
    return PS_OK;
}

static ps_status put_string(char *dst, size_t cap, const char *key, const char *val, const lpos *pos, int col)
{
    if (strlen(val) >= cap)
        return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s: longer than %zu characters", pos->path, pos->line, col, key,
                       cap - 1);
    /* The JSON readers only ever see UTF-8 (jansson checks); here any byte can come in, and `--format json` would
     * silently drop a string that is not UTF-8 (jansson's json_string refuses it, which is also the check). */
    json_t *probe = json_string(val);
    if (!probe)
        return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s: not valid UTF-8 text", pos->path, pos->line, col, key);
    json_decref(probe);
    ps_strlcpy(dst, val, cap);
    return PS_OK;
}

static ps_status unknown_key(const char *key, const char *val, const lpos *pos, int col, bool on_set)
{
    static const char *const model_keys[] = {"name", "family", "source", "published_params", "published_active_params",
                                             "dtype"};
    const char *hint = ps_field_suggest(key);
    for (size_t i = 0; !hint && i < sizeof model_keys / sizeof model_keys[0]; i++)
        if (ps_edit_distance(key, model_keys[i]) <= 2) hint = model_keys[i];
    if (!hint && !on_set && ps_edit_distance(key, "repeat") <= 2) hint = "repeat";
    if (hint)
        return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: unknown key '%s' (did you mean '%s'?)", pos->path, pos->line,
                       col, key, val, key, hint);
    return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: unknown key '%s'", pos->path, pos->line, col, key, val, key);
}

/* A key given twice on one line: which value would win is a guess the reader should not have to make (the JSON
 * readers refuse duplicate keys too). keys[0..n) are the keys before this one on the line, cols their columns. */
static ps_status once_per_line(const char *key, const char *const *keys, const int *cols, int n, const lpos *pos,
                               int col)
{
    for (int j = 0; j < n; j++)
        if (strcmp(keys[j], key) == 0)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: '%s' is given twice on this line (first at column %d)", pos->path,
                           pos->line, col, key, cols[j]);
    return PS_OK;
}

/* Split "key=value" in place; false when there is no '=' or the key is empty. */
static bool split_kv(char *t, char **key, char **val)
{
    char *eq = strchr(t, '=');
    if (!eq || eq == t) return false;
    *eq = '\0';
    *key = t;
    *val = eq + 1;
    return true;
}

static ps_status set_line(token *tok, int n, const lpos *pos, ps_model *m, ps_layer_spec *defaults)
{
    if (n == 1) return PS_FAIL(PS_ERR_INPUT, "%s:%d: 'set' needs key=value pairs", pos->path, pos->line);
    const char *keys[MAX_TOKENS];
    int cols[MAX_TOKENS], nk = 0;
    for (int i = 1; i < n; i++) {
        char *key, *val;
        if (!split_kv(tok[i].text, &key, &val))
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: '%s': expected key=value", pos->path, pos->line, tok[i].col,
                           tok[i].text);
        int col = tok[i].col;
        PS_TRY(once_per_line(key, keys, cols, nk, pos, col));
        keys[nk] = key;
        cols[nk++] = col;
        if (!strcmp(key, "name")) {
            PS_TRY(put_string(m->name, sizeof m->name, key, val, pos, col));
        } else if (!strcmp(key, "family")) {
            PS_TRY(put_string(m->family, sizeof m->family, key, val, pos, col));
        } else if (!strcmp(key, "source")) {
            PS_TRY(put_string(m->source, sizeof m->source, key, val, pos, col));
        } else if (!strcmp(key, "published_params")) {
            if (!ps_parse_double(val, &m->published_params) || m->published_params < 0)
                return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: published_params=%s: not a non-negative number", pos->path,
                               pos->line, col, val);
        } else if (!strcmp(key, "published_active_params")) {
            if (!ps_parse_double(val, &m->published_active_params) || m->published_active_params < 0)
                return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: published_active_params=%s: not a non-negative number",
                               pos->path, pos->line, col, val);
        } else if (!strcmp(key, "dtype")) {
            if (ps_dtype_parse(val, &m->dtype) != PS_OK)
                return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: dtype=%s: unknown dtype (known: fp32, fp16, bf16, fp8)",
                               pos->path, pos->line, col, val);
        } else {
            int fi = ps_field_index(key);
            if (fi < 0) return unknown_key(key, val, pos, col, true);
            PS_TRY(put_field(fi, key, val, -1, pos, col, defaults));
        }
    }
    return PS_OK;
}

static ps_status layer_line(token *tok, int n, const lpos *pos, const ps_layer_spec *defaults, ps_resolve_ctx *ctx,
                            ps_layer_vec *vec)
{
    ps_layer_kind kind;
    if (ps_layer_kind_parse(tok[0].text, &kind) != PS_OK) {
        char why[512];
        ps_strlcpy(why, ps_error_message(), sizeof why);
        return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s", pos->path, pos->line, tok[0].col, why);
    }
    int64_t repeat = 1;
    int first = 1;
    /* "decoder x24": the repeat count right after the kind */
    if (n > 1 && tok[1].text[0] == 'x' && !strchr(tok[1].text, '=')) {
        if (!ps_parse_i64(tok[1].text + 1, &repeat) || repeat < 1)
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: '%s': the repeat count must be x followed by a positive integer",
                           pos->path, pos->line, tok[1].col, tok[1].text);
        first = 2;
    }
    ps_layer_spec group;
    memset(&group, 0, sizeof group);
    /* "x24" counts as the line's repeat key */
    const char *keys[MAX_TOKENS];
    int cols[MAX_TOKENS], nk = 0;
    if (first == 2) {
        keys[nk] = "repeat";
        cols[nk++] = tok[1].col;
    }
    for (int i = first; i < n; i++) {
        char *key, *val;
        if (!split_kv(tok[i].text, &key, &val))
            return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: '%s': expected key=value (a repeat count goes right after the "
                           "kind, as in 'decoder x24')",
                           pos->path, pos->line, tok[i].col, tok[i].text);
        PS_TRY(once_per_line(key, keys, cols, nk, pos, tok[i].col));
        keys[nk] = key;
        cols[nk++] = tok[i].col;
        if (!strcmp(key, "repeat")) {
            if (!ps_parse_i64(val, &repeat) || repeat < 1)
                return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: repeat=%s: must be a positive integer", pos->path, pos->line,
                               tok[i].col, val);
            continue;
        }
        int fi = ps_field_index(key);
        if (fi < 0) {
            if (!strcmp(key, "name") || !strcmp(key, "family") || !strcmp(key, "source") || !strcmp(key, "dtype") ||
                !strcmp(key, "published_params") || !strcmp(key, "published_active_params"))
                return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: %s=%s: '%s' is model-wide; put it on a 'set' line", pos->path,
                               pos->line, tok[i].col, key, val, key);
            return unknown_key(key, val, pos, tok[i].col, false);
        }
        PS_TRY(put_field(fi, key, val, (int)kind, pos, tok[i].col, &group));
    }
    ps_where w;
    w.sep = ": ";
    snprintf(w.prefix, sizeof w.prefix, "%s:%d", pos->path, pos->line);
    ps_layer l;
    PS_TRY(ps_layer_resolve(kind, defaults, &group, &w, ctx, &l));
    PS_TRY(ps_layer_vec_push(vec, &l, repeat, w.prefix));
    return PS_OK;
}

static ps_status parse_text(char *buf, const char *path, ps_model *m, ps_layer_vec *vec)
{
    ps_layer_spec defaults;
    memset(&defaults, 0, sizeof defaults);
    ps_resolve_ctx ctx = {0};
    token tok[MAX_TOKENS];
    lpos pos = {path, 0};
    char *line = buf;
    while (line) {
        pos.line++;
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        int n = 0;
        PS_TRY(tokenize(line, &pos, tok, &n));
        if (n > 0) {
            if (!strcmp(tok[0].text, "set"))
                PS_TRY(set_line(tok, n, &pos, m, &defaults));
            else
                PS_TRY(layer_line(tok, n, &pos, &defaults, &ctx, vec));
        }
        line = nl ? nl + 1 : NULL;
    }
    if (vec->n == 0) return PS_FAIL(PS_ERR_INPUT, "%s: no layers (one line per layer group, e.g. 'decoder x24')", path);
    return PS_OK;
}

ps_status ps_model_from_layer_list(const char *text, size_t len, const char *path, const ps_model_opts *opts,
                                   ps_model *out)
{
    memset(out, 0, sizeof *out);
    /* A NUL byte would end the text early and silently drop every layer after it: say where it is. */
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line = 1, col = 1;
        for (const char *p = text; p < nul; p++, col++)
            if (*p == '\n') {
                line++;
                col = 0;
            }
        return PS_FAIL(PS_ERR_INPUT, "%s:%d:%d: a NUL byte: a layer list is text (is this a binary file?)", path, line,
                       col);
    }
    out->dtype = PS_DTYPE_BF16;
    ps_model_stem(path, out->name, sizeof out->name);
    ps_layer_vec vec = {0};
    char *buf = ps_strdup(text);
    if (!buf) return PS_ERR_SYSTEM;
    ps_status st;
    PS_TRY_GOTO(st, parse_text(buf, path, out, &vec), fail);
    free(buf);
    buf = NULL;
    PS_TRY_GOTO(st, ps_model_finish(out, &vec, opts, path), fail);
    return PS_OK;
fail:
    free(buf);
    free(vec.v);
    ps_model_free(out);
    return st;
}

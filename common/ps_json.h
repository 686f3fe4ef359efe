/* Reading outside JSON input (model files, HF config.json, cluster.json, plans) with errors that name the file,
 * the line:column of a syntax error, or the field path and value of a semantic one. Built on jansson. */
#ifndef PS_JSON_H
#define PS_JSON_H

#include <jansson.h>

#include "ps_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a value sits: the file it came from and its field path ("layers[3].hidden"). Cheap to copy. */
typedef struct {
    const char *file;
    char path[192];
} ps_jloc;

ps_jloc ps_jloc_root(const char *file);
/* Child locations: obj.key and arr[i]. */
ps_jloc ps_jloc_key(const ps_jloc *parent, const char *key);
ps_jloc ps_jloc_idx(const ps_jloc *parent, size_t i);

/* Parse a file (or an in-memory buffer; `name` is used in messages). Syntax errors give PS_ERR_INPUT with
 * "file:line:column: text". The root must be an object. */
ps_status ps_json_load_file(const char *path, json_t **out);
ps_status ps_json_load_buffer(const char *buf, size_t len, const char *name, json_t **out);

/* Typed field readers. `obj` must be an object. When the key is absent: required -> PS_ERR_INPUT "missing field";
 * optional -> *out is left as it was (the caller's default) and PS_OK is returned. Range violations name the bounds
 * and the value. Integers must be JSON integers (or reals with an exact integer value, e.g. 1e9). */
ps_status ps_json_int(const json_t *obj, const ps_jloc *loc, const char *key, bool required, int64_t lo, int64_t hi,
                      int64_t *out);
ps_status ps_json_num(const json_t *obj, const ps_jloc *loc, const char *key, bool required, double lo, double hi,
                      double *out);
ps_status ps_json_bool(const json_t *obj, const ps_jloc *loc, const char *key, bool required, bool *out);
/* The string is copied into out[cap]; too long -> PS_ERR_INPUT. */
ps_status ps_json_str(const json_t *obj, const ps_jloc *loc, const char *key, bool required, char *out, size_t cap);
/* Reject fields not in the NULL-terminated list `known` (a misspelt field would otherwise be silently ignored). */
ps_status ps_json_known_keys(const json_t *obj, const ps_jloc *loc, const char *const *known);

/* "an integer", "a string", ... for messages that say what was found instead of what was expected. */
const char *ps_json_type_name(const json_t *v);

/* Serialize `root` and write it atomically to path ("-" = stdout), with a trailing newline. */
ps_status ps_json_write(const json_t *root, const char *path);
/* `root` serialized with jansson's `flags` plus a trailing newline, as a heap string of *len bytes (newline
 * included); NULL when out of memory. With JSON_COMPACT the text is one line (jansson escapes control characters). */
char *ps_json_dumps_line(const json_t *root, size_t flags, size_t *len);

#ifdef __cplusplus
}
#endif
#endif

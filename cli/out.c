/* The output sink of a command: everything goes to memory first, so a failing run writes nothing and --out is
 * replaced in one rename (common/files.c). */
#include <stdlib.h>

#include <jansson.h>

#include "cli.h"

ps_status ps_out_open(ps_out *o)
{
    o->buf = NULL;
    o->len = 0;
    o->f = open_memstream(&o->buf, &o->len);
    if (!o->f) return PS_FAIL(PS_ERR_SYSTEM, "cannot allocate the output buffer");
    return PS_OK;
}

ps_status ps_out_commit(ps_out *o, const char *path)
{
    if (fclose(o->f) != 0) {
        o->f = NULL;
        free(o->buf);
        o->buf = NULL;
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory while collecting the output");
    }
    o->f = NULL;
    ps_status st = ps_write_file_atomic(path, o->buf, o->len);
    free(o->buf);
    o->buf = NULL;
    return st;
}

void ps_out_discard(ps_out *o)
{
    if (o->f) fclose(o->f);
    o->f = NULL;
    free(o->buf);
    o->buf = NULL;
}

ps_status ps_out_json(ps_out *o, json_t *j)
{
    if (!j) return PS_FAIL(PS_ERR_SYSTEM, "out of memory building JSON output");
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (!s) return PS_FAIL(PS_ERR_SYSTEM, "out of memory serializing JSON output");
    fprintf(o->f, "%s\n", s);
    free(s);
    return PS_OK;
}

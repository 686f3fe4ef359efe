/* The per-thread error slot behind ps_status: one user-facing message and the file:line frames it passed. */
#include <stdarg.h>
#include <string.h>

#include "ps_common.h"

typedef struct {
    ps_status st;
    char msg[1024];
    char trace[1024];
} ps_error_slot;

/* Thread-local so OpenMP kernels can fail independently; the caller reports from its own thread. */
static _Thread_local ps_error_slot g_err;

const char *ps_status_name(ps_status st)
{
    switch (st) {
    case PS_OK: return "ok";
    case PS_ERR_INFEASIBLE: return "infeasible";
    case PS_ERR_INPUT: return "bad input";
    case PS_ERR_SYSTEM: return "system failure";
    }
    return "unknown status";
}

static void append_frame(const char *file, int line)
{
    size_t used = strlen(g_err.trace);
    if (used + 8 >= sizeof g_err.trace) return;
    /* Only the file's base name: full build paths make the trace unreadable. */
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    snprintf(g_err.trace + used, sizeof g_err.trace - used, "%s%s:%d", used ? " <- " : "", base, line);
}

ps_status ps_error_set(ps_status st, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err.msg, sizeof g_err.msg, fmt, ap);
    va_end(ap);
    g_err.st = st;
    g_err.trace[0] = '\0';
    append_frame(file, line);
    return st;
}

ps_status ps_error_trace(ps_status st, const char *file, int line)
{
    if (st != PS_OK) append_frame(file, line);
    return st;
}

const char *ps_error_message(void) { return g_err.msg[0] ? g_err.msg : "(no message)"; }
const char *ps_error_traceback(void) { return g_err.trace; }
ps_status ps_error_status(void) { return g_err.st; }

void ps_error_clear(void)
{
    g_err.st = PS_OK;
    g_err.msg[0] = '\0';
    g_err.trace[0] = '\0';
}

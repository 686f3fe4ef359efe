/* Small shared utilities: checked allocation and arithmetic, number parsing and formatting (sizes, counts, relative
 * errors), edit distance, the UTC date stamp of records. */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ps_common.h"

void *ps_calloc(size_t n, size_t size)
{
    if (n == 0 || size == 0) n = size = 1;
    if (n > SIZE_MAX / size) {
        PS_FAIL(PS_ERR_SYSTEM, "allocation of %zu x %zu bytes overflows", n, size);
        return NULL;
    }
    void *p = calloc(n, size);
    if (!p) PS_FAIL(PS_ERR_SYSTEM, "out of memory allocating %zu bytes", n * size);
    return p;
}

char *ps_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = ps_calloc(n, 1);
    if (p) memcpy(p, s, n);
    return p;
}

ps_status ps_grow(void **buf, size_t *cap, size_t need, size_t elt)
{
    if (need <= *cap) return PS_OK;
    size_t n = *cap ? *cap : 64;
    /* doubling past SIZE_MAX / 2 would wrap to 0 and never reach `need`: take `need` itself there */
    while (n < need) n = n > SIZE_MAX / 2 ? need : n * 2;
    if (elt && n > SIZE_MAX / elt) n = need; /* the doubled size overflows in bytes: no headroom then */
    if (elt && n > SIZE_MAX / elt) return PS_FAIL(PS_ERR_SYSTEM, "allocation of %zu x %zu bytes overflows", n, elt);
    void *p = realloc(*buf, n * elt);
    if (!p) return PS_FAIL(PS_ERR_SYSTEM, "out of memory (%zu bytes of workspace)", n * elt);
    *buf = p;
    *cap = n;
    return PS_OK;
}

bool ps_mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
bool ps_add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

void ps_strlcpy(char *dst, const char *src, size_t cap)
{
    if (cap == 0) return;
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void ps_strcatf(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

bool ps_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = (int64_t)v;
    return true;
}

bool ps_parse_double(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s)) return false;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v)) return false;
    *out = v;
    return true;
}

const char *ps_fmt_bytes(double bytes, char *buf, size_t cap)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    double v = bytes;
    while (fabs(v) >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%.0f B", v);
    else
        snprintf(buf, cap, "%.2f %s", v, unit[u]);
    return buf;
}

const char *ps_fmt_count(double n, char *buf, size_t cap)
{
    static const char *suf[] = {"", "K", "M", "B", "T", "P"};
    int u = 0;
    double v = n;
    while (fabs(v) >= 1000.0 && u < 5) {
        v /= 1000.0;
        u++;
    }
    snprintf(buf, cap, u ? "%.2f%s" : "%.0f%s", v, suf[u]);
    return buf;
}

const char *ps_fmt_num(double v, double scale, char *buf, size_t cap)
{
    if (isfinite(v) && fabs(v) <= 1e-9 * fabs(scale)) v = 0;
    if (v == 0)
        snprintf(buf, cap, "0"); /* also -0.0, which %g would print with its sign */
    else if (isfinite(v) && fabs(v) >= 1e4 && fabs(v) < 1e15)
        snprintf(buf, cap, "%.0f", v);
    else
        snprintf(buf, cap, "%.4g", v);
    return buf;
}

const char *ps_fmt_rel_err(double v, char *buf, size_t cap)
{
    if (!(v >= 0))
        snprintf(buf, cap, "-");
    else if (v >= 10)
        snprintf(buf, cap, ">1000%%");
    else
        snprintf(buf, cap, "%.1f%%", 100 * v);
    return buf;
}

int ps_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 1000; /* suggestions only matter for short names */
    int row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            int best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

void ps_utc_now_iso(char *buf, size_t cap)
{
    if (cap == 0) return;
    time_t now = time(NULL);
    struct tm tm;
    /* strftime leaves the buffer undefined when the text does not fit: a stamp is whole or empty, never cut */
    if (now == (time_t)-1 || !gmtime_r(&now, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        buf[0] = '\0';
}

uint64_t ps_hash64(const void *data, size_t n, uint64_t h)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

double ps_wtime(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

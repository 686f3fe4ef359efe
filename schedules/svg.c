/* SVG drawing of a simulated schedule: one row per device on a shared time axis, passes coloured by kind with
 * their micro-batch numbers, idle time left as the grey row background (the bubble), a legend and a title. Pure:
 * the document goes to a heap buffer the caller frees; nothing is written anywhere. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void PS_PRINTF(2, 3) put(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)k < b->cap - b->len) {
            b->len += (size_t)k;
            return;
        }
        size_t nc = b->cap * 2 + (size_t)k + 1;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}

/* A tick step of 1, 2 or 5 times a power of ten giving about 10 ticks. */
static double tick_step(double span)
{
    double raw = span / 10, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

#define SVG_LEFT 80.0
#define SVG_WIDTH 1200.0
#define SVG_TOP 48.0
#define SVG_ROW 26.0
#define SVG_GAP 4.0

ps_status ps_sched_svg(const ps_sched *s, const ps_sched_result *r, char **out, size_t *len)
{
    PS_CHECK_INPUT(s && r && out, "svg needs a schedule, its simulation result and an output pointer");
    PS_CHECK_INPUT(s->d >= 1 && r->start && r->end, "svg: no simulated schedule in this workspace");
    *out = NULL;
    if (len) *len = 0;
    static const char *const color[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};
    static const char *const label[] = {"F (forward)", "B (input gradient)", "W (weight gradient)",
                                        "BW (B and W fused)"};
    const int d = s->d;
    const double span = r->makespan > 0 ? r->makespan : 1.0, sx = SVG_WIDTH / span;
    const double rows_h = d * (SVG_ROW + SVG_GAP), axis_y = SVG_TOP + rows_h + 4;
    const double height = axis_y + 70, width = SVG_LEFT + SVG_WIDTH + 30;
    sbuf b = {.p = malloc(4096), .cap = 4096};
    if (!b.p) return PS_FAIL(PS_ERR_SYSTEM, "out of memory drawing a schedule");
    b.p[0] = 0;
    put(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\">\n", width, height, width, height);
    put(&b, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", width, height);
    put(&b, "<text x=\"%.0f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s: d=%d n=%d v=%d, makespan %.6g, "
            "bubble %.2f%%</text>\n", SVG_LEFT, s->kind ? s->kind->name : "custom", d, s->n, s->v, r->makespan,
        100 * r->bubble_frac);
    for (int dev = 0; dev < d; dev++) {
        const double y = SVG_TOP + dev * (SVG_ROW + SVG_GAP);
        put(&b, "<g class=\"row\" id=\"device%d\">\n", dev);
        put(&b, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">dev %d</text>\n", SVG_LEFT - 8,
            y + SVG_ROW / 2 + 4, dev);
        /* the row background is what shows through where the device idles: the bubble */
        put(&b, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#e6e6e6\"/>\n", SVG_LEFT, y,
            SVG_WIDTH, SVG_ROW);
        for (int64_t k = s->dev_off[dev]; k < s->dev_off[dev + 1]; k++) {
            const ps_sched_pass *p = &s->pass[k];
            const double x = SVG_LEFT + r->start[k] * sx, w = (r->end[k] - r->start[k]) * sx;
            const int op = p->op <= PS_SCHED_BW ? p->op : 0;
            /* later chunks drawn lighter, so the two legs of a V (or the loops of interleaving) can be told apart */
            put(&b, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" fill-opacity=\"%.2f\" "
                    "stroke=\"white\" stroke-width=\"0.5\"><title>%s mb %d chunk %d: %.6g - %.6g</title></rect>\n",
                x, y, w, SVG_ROW, color[op], p->chunk ? 0.6 : 1.0, label[op], (int)p->mb, (int)p->chunk,
                r->start[k], r->end[k]);
            const double fs = fmin(11.0, w / 2.2);
            if (fs >= 5)
                put(&b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"%.1f\" text-anchor=\"middle\" fill=\"white\">%d"
                        "</text>\n", x + w / 2, y + SVG_ROW / 2 + fs / 3, fs, (int)p->mb);
        }
        put(&b, "</g>\n");
    }
    /* time axis */
    const double step = tick_step(span);
    put(&b, "<g class=\"axis\">\n<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n", SVG_LEFT,
        axis_y, SVG_LEFT + SVG_WIDTH, axis_y);
    for (int i = 0; i * step <= span * (1 + 1e-9); i++) {
        double x = SVG_LEFT + i * step * sx;
        put(&b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"black\"/>\n", x, axis_y, x,
            axis_y + 5);
        put(&b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%.6g</text>\n", x, axis_y + 17,
            i * step);
    }
    put(&b, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\">time</text>\n</g>\n", SVG_LEFT + SVG_WIDTH + 4,
        axis_y + 4);
    /* legend */
    put(&b, "<g class=\"legend\">\n");
    double lx = SVG_LEFT;
    const double ly = axis_y + 34;
    for (int op = 0; op <= PS_SCHED_BW + 1; op++) {
        put(&b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", lx, ly,
            op <= PS_SCHED_BW ? color[op] : "#e6e6e6");
        put(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">%s</text>\n", lx + 19, ly + 12,
            op <= PS_SCHED_BW ? label[op] : "idle (bubble)");
        lx += 190;
    }
    put(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">numbers: micro-batch; lighter: chunk &gt; 0</text>\n", lx,
        ly + 12);
    put(&b, "</g>\n</svg>\n");
    if (b.oom) {
        free(b.p);
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory drawing a schedule");
    }
    *out = b.p;
    if (len) *len = b.len;
    return PS_OK;
}

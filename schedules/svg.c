/* SVG drawing of a simulated schedule: one row per device on a shared time axis, passes coloured by kind with
 * their micro-batch numbers, idle time left as the grey row background (the bubble), a legend and a title. Pure:
 * the document goes to a heap buffer the caller frees; nothing is written anywhere.
 *
 * A plan of many micro-batches has passes narrower than a pixel (gpt3-175b on 128 GPUs, 256 micro-batches of v-zb:
 * 12,302 rectangles, most under a pixel, 2.4 MB, drawn as a white-striped wash by their strokes). Such passes are
 * merged: a run of consecutive passes of one device, each narrower than a pixel and with no gap of a pixel between
 * them, becomes one rectangle (see draw_device). */
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

/* Text into the document with XML's five special characters escaped (row labels come from the caller). */
static void put_text(sbuf *b, const char *s)
{
    for (; *s; s++) switch (*s) {
        case '&': put(b, "&amp;"); break;
        case '<': put(b, "&lt;"); break;
        case '>': put(b, "&gt;"); break;
        case '"': put(b, "&quot;"); break;
        case '\'': put(b, "&apos;"); break;
        default: put(b, "%c", *s);
        }
}

/* The unit seconds are shown in on an axis whose ticks are `step` seconds apart: s from 1 s, ms from 1 ms, else µs
 * (so tick labels read 0, 20, 40 ms, not 0, 0.02, 0.04). */
static void time_unit(double step, const char **unit, double *factor)
{
    if (step >= 1) {
        *unit = "s";
        *factor = 1;
    } else if (step >= 1e-3) {
        *unit = "ms";
        *factor = 1e3;
    } else {
        *unit = "&#181;s";
        *factor = 1e6;
    }
}

#define SVG_MIN_LEFT 80.0
#define SVG_WIDTH 1200.0
#define SVG_TOP 48.0
#define SVG_ROW 26.0
#define SVG_GAP 4.0
/* Below this width [px] a pass is not drawn on its own when its neighbours are as narrow (see draw_device). */
#define SVG_MIN_PX 1.0

static const char *const k_color[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759"};
static const char *const k_label[] = {"F (forward)", "B (input gradient)", "W (weight gradient)",
                                      "BW (B and W fused)"};

typedef struct {
    double left, sx;  /* x of time 0, pixels per time unit */
    const char *unit; /* unit of the times in tooltips ("" when unitless) */
    double factor;    /* times x factor are in that unit */
    int64_t merged;   /* rectangles standing for several passes, so far */
} svg_geom;

static void draw_pass(sbuf *b, const svg_geom *g, const ps_sched_pass *p, double t0, double t1, double y)
{
    const double x = g->left + t0 * g->sx, w = (t1 - t0) * g->sx;
    const int op = p->op <= PS_SCHED_BW ? p->op : 0;
    /* later chunks drawn lighter, so the two legs of a V (or the loops of interleaving) can be told apart; the white
     * edge separates neighbours, and is left off passes of a few pixels, which it would wash out */
    put(b, "<rect class=\"pass\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\" "
           "fill-opacity=\"%.2f\"",
        x, y, w, SVG_ROW, k_color[op], p->chunk ? 0.6 : 1.0);
    if (w >= 3) put(b, " stroke=\"white\" stroke-width=\"0.5\"");
    put(b, "><title>%s mb %d chunk %d: %.6g - %.6g%s%s</title></rect>\n", k_label[op], (int)p->mb, (int)p->chunk,
        t0 * g->factor, t1 * g->factor, g->unit[0] ? " " : "", g->unit);
    const double fs = fmin(11.0, w / 2.2);
    if (fs >= 5)
        put(b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"%.1f\" text-anchor=\"middle\" fill=\"white\">%d</text>\n",
            x + w / 2, y + SVG_ROW / 2 + fs / 3, fs, (int)p->mb);
}

/* One device's passes. A run of consecutive passes each narrower than SVG_MIN_PX, with gaps between them narrower
 * than that too (a gap a pixel wide is idle time the eye should see), is drawn as one rectangle from the first's
 * start to the last's end. It is coloured by majority: the op with the most time in the run (ties: F, B, W, BW in
 * that order), not by a "mixed" colour, so a merged 1F1B steady state still shows which work fills it; its tooltip
 * lists how many passes of each op it holds and their micro-batches. A single narrow pass stays a pass. */
static void draw_device(sbuf *b, svg_geom *g, const ps_sched *s, const ps_sched_result *r, int dev, double y)
{
    const int64_t hi = s->dev_off[dev + 1];
    for (int64_t k = s->dev_off[dev]; k < hi;) {
        const double px = SVG_MIN_PX / g->sx; /* a pixel in time units */
        int64_t j = k + 1;
        if (r->end[k] - r->start[k] < px)
            while (j < hi && r->end[j] - r->start[j] < px && r->start[j] - r->end[j - 1] < px) j++;
        if (j == k + 1) {
            draw_pass(b, g, &s->pass[k], r->start[k], r->end[k], y);
            k = j;
            continue;
        }
        double t[4] = {0, 0, 0, 0};
        int64_t n[4] = {0, 0, 0, 0};
        int mb_lo = INT32_MAX, mb_hi = -1;
        for (int64_t i = k; i < j; i++) {
            const int op = s->pass[i].op <= PS_SCHED_BW ? s->pass[i].op : 0;
            t[op] += r->end[i] - r->start[i];
            n[op]++;
            mb_lo = s->pass[i].mb < mb_lo ? s->pass[i].mb : mb_lo;
            mb_hi = s->pass[i].mb > mb_hi ? s->pass[i].mb : mb_hi;
        }
        int maj = 0;
        for (int op = 1; op < 4; op++)
            if (t[op] > t[maj]) maj = op;
        const double x = g->left + r->start[k] * g->sx, w = (r->end[j - 1] - r->start[k]) * g->sx;
        put(b, "<rect class=\"merged\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>%lld "
               "passes merged (each under a pixel): F %lld, B %lld, W %lld, BW %lld; micro-batches %d-%d; %.6g - "
               "%.6g%s%s</title></rect>\n",
            x, y, w, SVG_ROW, k_color[maj], (long long)(j - k), (long long)n[0], (long long)n[1], (long long)n[2],
            (long long)n[3], mb_lo, mb_hi, r->start[k] * g->factor, r->end[j - 1] * g->factor,
            g->unit[0] ? " " : "", g->unit);
        g->merged++;
        k = j;
    }
}

ps_status ps_sched_svg(const ps_sched *s, const ps_sched_result *r, const ps_sched_svg_opts *opts, char **out,
                       size_t *len)
{
    PS_CHECK_INPUT(s && r && out, "svg needs a schedule, its simulation result and an output pointer");
    PS_CHECK_INPUT(s->d >= 1 && r->start && r->end, "svg: no simulated schedule in this workspace");
    *out = NULL;
    if (len) *len = 0;
    const ps_sched_svg_opts none = {0};
    const ps_sched_svg_opts *o = opts ? opts : &none;
    const int d = s->d;
    /* the label column as wide as the longest row label (about 7 px a character at 12 px) */
    size_t longest = 6; /* "dev 99" */
    for (int dev = 0; o->row_labels && dev < d; dev++)
        if (o->row_labels[dev] && strlen(o->row_labels[dev]) > longest) longest = strlen(o->row_labels[dev]);
    const double left = fmax(SVG_MIN_LEFT, 16.0 + 7.0 * (double)(longest < 64 ? longest : 64));
    const double span = r->makespan > 0 ? r->makespan : 1.0, step = tick_step(span);
    svg_geom g = {.left = left, .sx = SVG_WIDTH / span, .unit = "", .factor = 1};
    if (o->seconds) time_unit(step, &g.unit, &g.factor);
    const double rows_h = d * (SVG_ROW + SVG_GAP), axis_y = SVG_TOP + rows_h + 4;
    const double height = axis_y + 70, width = left + SVG_WIDTH + 70;
    sbuf b = {.p = malloc(4096), .cap = 4096};
    if (!b.p) return PS_FAIL(PS_ERR_SYSTEM, "out of memory drawing a schedule");
    b.p[0] = 0;
    put(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\">\n", width, height, width, height);
    put(&b, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", width, height);
    put(&b, "<text x=\"%.0f\" y=\"24\" font-size=\"16\" font-weight=\"bold\">%s: d=%d n=%d v=%d, makespan %.6g%s%s, "
            "bubble %.2f%%</text>\n", left, s->kind ? s->kind->name : "custom", d, s->n, s->v,
        r->makespan * g.factor, g.unit[0] ? " " : "", g.unit, 100 * r->bubble_frac);
    for (int dev = 0; dev < d; dev++) {
        const double y = SVG_TOP + dev * (SVG_ROW + SVG_GAP);
        put(&b, "<g class=\"row\" id=\"device%d\">\n", dev);
        put(&b, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"end\">", left - 8, y + SVG_ROW / 2 + 4);
        if (o->row_labels && o->row_labels[dev])
            put_text(&b, o->row_labels[dev]);
        else
            put(&b, "dev %d", dev);
        put(&b, "</text>\n");
        /* the row background is what shows through where the device idles: the bubble */
        put(&b, "<rect class=\"idle\" x=\"%.0f\" y=\"%.1f\" width=\"%.0f\" height=\"%.0f\" fill=\"#e6e6e6\"/>\n", left,
            y, SVG_WIDTH, SVG_ROW);
        draw_device(&b, &g, s, r, dev, y);
        put(&b, "</g>\n");
    }
    /* time axis: ticks in the unit that suits their step, the unit named at its end */
    put(&b, "<g class=\"axis\">\n<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"black\"/>\n", left,
        axis_y, left + SVG_WIDTH, axis_y);
    for (int i = 0; i * step <= span * (1 + 1e-9); i++) {
        double x = left + i * step * g.sx;
        put(&b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"black\"/>\n", x, axis_y, x,
            axis_y + 5);
        /* %.6g drops the rounding tail of i x step (3 x 0.1 prints 0.3) */
        put(&b, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%.6g</text>\n", x, axis_y + 17,
            i * step * g.factor);
    }
    put(&b, "<text class=\"unit\" x=\"%.0f\" y=\"%.1f\" font-size=\"11\">", left + SVG_WIDTH + 6, axis_y + 4);
    if (o->seconds)
        put(&b, "time (%s)", g.unit);
    else
        put_text(&b, o->time_label ? o->time_label : "time");
    put(&b, "</text>\n</g>\n");
    /* legend */
    put(&b, "<g class=\"legend\">\n");
    double lx = left;
    const double ly = axis_y + 34;
    for (int op = 0; op <= PS_SCHED_BW + 1; op++) {
        put(&b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", lx, ly,
            op <= PS_SCHED_BW ? k_color[op] : "#e6e6e6");
        put(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">%s</text>\n", lx + 19, ly + 12,
            op <= PS_SCHED_BW ? k_label[op] : "idle (bubble)");
        lx += 190;
    }
    put(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">numbers: micro-batch; lighter: chunk &gt; 0</text>\n", lx,
        ly + 12);
    if (g.merged)
        put(&b, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">%lld blocks of consecutive passes each narrower than a "
                "pixel are drawn merged, in the colour of the pass kind with the most time in them</text>\n", left,
            ly + 30, (long long)g.merged);
    put(&b, "</g>\n</svg>\n");
    if (b.oom) {
        free(b.p);
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory drawing a schedule");
    }
    *out = b.p;
    if (len) *len = b.len;
    return PS_OK;
}

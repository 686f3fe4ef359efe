/* Plan tables of a sweep, rendered from its records (see sweep_tables.h). The HTML page is also well-formed XML
 * (XHTML-style empty elements, no named entities beyond XML's own), so a strict XML parser checks it in tests; it
 * links each plan's schedule timeline, drawn once when the cell finished (DIR/timelines), rather than drawing and
 * inlining every timeline on every render. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sweep_tables.h"

void ps_sweep_cell_key(const char *model, const char *cluster, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s on %s", model, cluster);
}

void ps_sweep_timeline_name(const char *key, char *buf, size_t cap)
{
    /* The key made safe for a file name and a URL (letters, digits, '.', '-'; '_' for the rest) and cut short, then a
     * hash of the whole key so that keys differing only where they were changed or cut get their own files. */
    char safe[97];
    size_t n = 0;
    for (const char *c = key; *c && n < sizeof safe - 1; c++) {
        bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
                  *c == '-';
        safe[n++] = ok ? *c : '_';
    }
    safe[n] = '\0';
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)key; *c; c++) h = (h ^ *c) * 16777619u;
    snprintf(buf, cap, "%s/%s-%08x.svg", PS_SWEEP_TIMELINES, safe, (unsigned)h);
}

const char *ps_sweep_str(const json_t *rec, const char *key)
{
    const char *s = json_string_value(json_object_get(rec, key));
    return s ? s : "";
}

static double jnum(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }
static long long jint(const json_t *o, const char *k) { return (long long)json_integer_value(json_object_get(o, k)); }

/* "tp 2-4" for an integer field whose values over the layers are not all one. */
static void vary_range(char *buf, size_t cap, const char *name, const int *v, int64_t n)
{
    int lo = v[0], hi = v[0];
    for (int64_t i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    if (lo != hi) ps_strcatf(buf, cap, "%s%s %d-%d", buf[0] ? "; " : "", name, lo, hi);
}

/* "ckpt none/full" for a named field: the values taken, in the order of their enumeration. */
static void vary_names(char *buf, size_t cap, const char *name, const int *v, int64_t n, int count,
                       const char *(*value_name)(int))
{
    unsigned seen = 0;
    for (int64_t i = 0; i < n; i++)
        if (v[i] >= 0 && v[i] < count && v[i] < 32) seen |= 1u << v[i];
    if (!seen || (seen & (seen - 1)) == 0) return; /* one value (or none known): it does not vary */
    ps_strcatf(buf, cap, "%s%s ", buf[0] ? "; " : "", name);
    for (int k = 0, first = 1; k < count && k < 32; k++)
        if (seen & (1u << k)) {
            ps_strcatf(buf, cap, "%s%s", first ? "" : "/", value_name(k));
            first = 0;
        }
}

static const char *zero_name(int k)
{
    static const char *const n[] = {"0", "1", "2", "3"};
    return k >= 0 && k < 4 ? n[k] : "?";
}
static const char *ckpt_name(int k) { return ps_recompute_name((ps_recompute)k); }
static const char *onoff_name(int k) { return k ? "on" : "off"; }
static const char *overlap_name(int k) { return ps_overlap_name((ps_overlap)k); }
static const char *attn_name(int k) { return ps_attn_name((ps_attn)k); }
static const char *cp_comm_name(int k) { return ps_cp_comm_name((ps_cp_comm)k); }

ps_status ps_sweep_plan_varies(const ps_plan *p, int64_t n_layers, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (n_layers < 2) return PS_OK;
    int *v = ps_calloc((size_t)n_layers, sizeof *v);
    if (!v) return PS_ERR_SYSTEM;
    /* the fields of ps_strategy one by one, each gathered over the layers into v */
#define GATHER(expr)                                                                                                   \
    for (int64_t i = 0; i < n_layers; i++) {                                                                           \
        const ps_strategy *s = &p->layer[i];                                                                           \
        v[i] = (int)(expr);                                                                                            \
    }
    GATHER(s->tp) vary_range(buf, cap, "tp", v, n_layers);
    GATHER(s->dp) vary_range(buf, cap, "dp", v, n_layers);
    GATHER(s->zero) vary_names(buf, cap, "zero", v, n_layers, 4, zero_name); /* stages, not a scale: 0/3 */
    GATHER(s->ckpt) vary_names(buf, cap, "ckpt", v, n_layers, PS_RECOMP_FULL + 1, ckpt_name);
    GATHER(s->sp) vary_names(buf, cap, "sp", v, n_layers, 2, onoff_name);
    GATHER(s->overlap) vary_names(buf, cap, "tp-overlap", v, n_layers, PS_OVERLAP_COUNT, overlap_name);
    GATHER(s->attn) vary_names(buf, cap, "attention", v, n_layers, PS_ATTN_COUNT, attn_name);
    GATHER(!s->dp_no_overlap) vary_names(buf, cap, "dp-overlap", v, n_layers, 2, onoff_name);
    GATHER(ps_strategy_cp(s) > 1 ? s->cp_comm : PS_CP_RING)
    vary_names(buf, cap, "cp-comm", v, n_layers, PS_CP_COMM_COUNT, cp_comm_name);
#undef GATHER
    free(v);
    return PS_OK;
}

/* The record of grid cell (mi, ci), NULL when it is not done yet. */
static const json_t *cell_rec(const ps_sweep_grid *g, int mi, int ci) { return g->rec[mi * g->n_clusters + ci]; }

/* The record's gain over the Megatron heuristic (the samples/s ratio, or the peak memory ratio under --objective
 * memory: cmd_sweep.c computes it as the plan command does) as a percentage; "n/a" when no heuristic plan fits. */
static void gain_text(const json_t *rec, char *buf, size_t cap)
{
    const json_t *g = json_object_get(rec, "gain_over_megatron");
    if (json_is_number(g))
        snprintf(buf, cap, "%+.1f%%", 100 * (json_number_value(g) - 1));
    else
        snprintf(buf, cap, "n/a");
}

/* The columns of the Markdown and HTML tables (numeric ones are right-aligned). */
static const struct {
    const char *name;
    bool numeric;
} k_cols[] = {{"cluster", false}, {"GPUs", true}, {"pp", false}, {"tp", false}, {"cp", false}, {"dp", false},
              {"zero", false},
              {"ckpt", false}, {"sp", false}, {"schedule", false}, {"mbs", true}, {"micro-batches", true},
              {"gbs", true}, {"samples/s", true}, {"MFU", true}, {"peak memory per GPU", true},
              {"gain over Megatron heuristic", true}};
enum { N_COLS = sizeof k_cols / sizeof k_cols[0], INFEASIBLE_COLS = 3 };

/* One row of the Markdown and HTML tables as text, in k_cols order. An infeasible cell has the cluster, its GPUs and
 * one text after them ("infeasible: " and the binding constraint): n is INFEASIBLE_COLS then, N_COLS otherwise. */
typedef struct {
    char text[N_COLS][400];
    int n;
} row_text;

static void row_of(const ps_sweep_grid *g, int ci, const json_t *rec, row_text *t)
{
    char(*v)[400] = t->text;
    snprintf(v[0], sizeof v[0], "%s", g->clusters[ci]);
    snprintf(v[1], sizeof v[1], "%lld", jint(rec, "gpus"));
    if (strcmp(ps_sweep_str(rec, "status"), "ok") != 0) {
        snprintf(v[2], sizeof v[2], "infeasible: %s", ps_sweep_str(rec, "binding"));
        t->n = INFEASIBLE_COLS;
        return;
    }
    const json_t *p = json_object_get(rec, "plan"), *q = json_object_get(rec, "predicted");
    /* Per-layer plans show their first layer's strategy, starred (the tables' note says so). */
    const char *star = json_is_false(json_object_get(p, "uniform")) ? "*" : "";
    snprintf(v[2], sizeof v[2], "%lld", jint(p, "pp"));
    snprintf(v[3], sizeof v[3], "%lld%s", jint(p, "tp"), star);
    /* context parallelism: one degree per plan; records written before it have none (1) */
    if (jint(p, "cp") > 1)
        snprintf(v[4], sizeof v[4], "%lld %s", jint(p, "cp"), ps_sweep_str(p, "cp_comm"));
    else
        snprintf(v[4], sizeof v[4], "1");
    snprintf(v[5], sizeof v[5], "%lld%s", jint(p, "dp"), star);
    snprintf(v[6], sizeof v[6], "%lld%s", jint(p, "zero"), star);
    snprintf(v[7], sizeof v[7], "%s%s", ps_sweep_str(p, "ckpt"), star);
    snprintf(v[8], sizeof v[8], "%s%s", json_is_true(json_object_get(p, "sp")) ? "yes" : "no", star);
    if (jint(p, "vpp") > 1)
        snprintf(v[9], sizeof v[9], "%s (v=%lld)", ps_sweep_str(p, "schedule"), jint(p, "vpp"));
    else
        snprintf(v[9], sizeof v[9], "%s", ps_sweep_str(p, "schedule"));
    snprintf(v[10], sizeof v[10], "%lld", jint(p, "mbs"));
    snprintf(v[11], sizeof v[11], "%lld", jint(p, "micro_batches"));
    snprintf(v[12], sizeof v[12], "%lld", jint(p, "gbs"));
    ps_fmt_num(jnum(q, "samples_per_s"), 0, v[13], sizeof v[13]); /* plain digits, not 1.234e+04 */
    snprintf(v[14], sizeof v[14], "%.1f%%", 100 * jnum(q, "mfu"));
    snprintf(v[15], sizeof v[15], "%.1f of %.0f GiB", jnum(q, "peak_mem_gib"), jnum(q, "mem_capacity_gib"));
    gain_text(rec, v[16], sizeof v[16]);
    t->n = N_COLS;
}

/* Text goes into a table through its format's escaping: Markdown and CSV take it as is, HTML escapes it. */
typedef void (*put_fn)(FILE *f, const char *s);

static void put_plain(FILE *f, const char *s) { fputs(s, f); }

/* Token i (space-separated) of s, as a pointer and length; false past the last. */
static bool token(const char *s, int i, const char **t, size_t *len)
{
    for (int k = 0;; k++) {
        while (*s == ' ') s++;
        if (!*s) return false;
        size_t n = strcspn(s, " ");
        if (k == i) {
            *t = s;
            *len = n;
            return true;
        }
        s += n;
    }
}

/* The options every cluster's cells ran with, then the names of those that differ between clusters (--gbs defaults
 * to 8 x a cluster's GPUs, --max-tp to a node's GPUs): cells.jsonl has each cell's own line. */
static void options_note(FILE *f, const ps_sweep_grid *g, put_fn put)
{
    char tok[4200], varying[256] = "";
    const char *t;
    size_t len;
    int shown = 0;
    for (int i = 0; token(g->options[0], i, &t, &len); i++) {
        bool same = true;
        for (int k = 1; k < g->n_clusters && same; k++) {
            const char *u;
            size_t ulen;
            same = token(g->options[k], i, &u, &ulen) && ulen == len && memcmp(t, u, len) == 0;
        }
        if (same) {
            snprintf(tok, sizeof tok, "%s%.*s", shown++ ? " " : "", (int)len, t);
            put(f, tok);
        } else {
            size_t key = strcspn(t, "=");
            ps_strcatf(varying, sizeof varying, "%s%.*s", varying[0] ? ", " : "", (int)(key < len ? key : len), t);
        }
    }
    if (varying[0]) {
        snprintf(tok, sizeof tok, "; per cluster (each cell's record has its line): %s", varying);
        put(f, tok);
    }
}

static void header_note(FILE *f, const ps_sweep_grid *g, const char *sep, put_fn put)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%d of %d cells done; psearch %s; search options: ", g->n_done,
             g->n_models * g->n_clusters, PS_VERSION);
    put(f, buf);
    options_note(f, g, put);
    put(f, ".");
    fputs(sep, f);
    put(f, "Predictions of psearch's cost model for the best plan of each cell: samples/s per iteration, MFU as "
           "model FLOPs over the dense peak of the model's dtype, peak memory of the fullest GPU. "
           "* marks per-layer plans (their first layer's strategy is shown). The gain over the Megatron "
           "heuristic compares with the best plan of Megatron-LM's rules on the same cell: psearch's samples/s over "
           "the heuristic's, or under --objective memory the heuristic's peak memory over psearch's (n/a when no "
           "heuristic plan fits).");
    fputs(sep, f);
}

/* "Not searched yet:" and the model's clusters without a record, between open and close; nothing when all have one. */
static void not_searched(FILE *f, const ps_sweep_grid *g, int mi, put_fn put, const char *open, const char *close)
{
    int pending = 0;
    for (int ci = 0; ci < g->n_clusters; ci++)
        if (!cell_rec(g, mi, ci)) {
            if (!pending++) {
                fputs(open, f);
                put(f, "Not searched yet:");
            }
            put(f, " ");
            put(f, g->clusters[ci]);
        }
    if (pending) fputs(close, f);
}

/* ---- Markdown ---- */

static void md_cell(FILE *f, const char *s)
{
    fputs("| ", f);
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc(' ', f);
}

static void render_md(FILE *f, const ps_sweep_grid *g)
{
    fprintf(f, "# psearch plan tables\n\n");
    header_note(f, g, "\n\n", put_plain);
    for (int mi = 0; mi < g->n_models; mi++) {
        fprintf(f, "## %s\n\n", g->models[mi]);
        for (int c = 0; c < N_COLS; c++) md_cell(f, k_cols[c].name);
        fprintf(f, "|\n");
        for (int c = 0; c < N_COLS; c++) fprintf(f, "|%s", k_cols[c].numeric ? "---:" : "---");
        fprintf(f, "|\n");
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) continue;
            row_text t;
            row_of(g, ci, r, &t);
            for (int c = 0; c < N_COLS; c++) md_cell(f, c < t.n ? t.text[c] : "");
            fprintf(f, "|\n");
        }
        not_searched(f, g, mi, put_plain, "\n", "\n");
        fprintf(f, "\n");
    }
}

/* ---- CSV (RFC 4180's quoting: a field with a comma, quote or line break is quoted, quotes doubled; but lines end
 * with LF, not RFC 4180's CRLF, which awk and cut leave on the last field: "binding\r") ---- */

static void csv_field(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\r\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

/* The CSV columns, each named as the field it holds: a field of the record (section NULL), of its "plan" or of its
 * "predicted" object, written as its JSON type says: strings as they are, integers exactly, reals to 6 digits,
 * booleans 1 or 0, null or absent empty. tp, dp, zero, ckpt and sp are the first layer's; "varies" names the fields
 * that other layers set otherwise (ps_sweep_plan_varies: "tp 2-4; ckpt none/full"), empty for a uniform plan. */
static const struct {
    const char *section, *key;
} k_csv[] = {
    {NULL, "model"}, {NULL, "model_name"}, {NULL, "dtype"}, {NULL, "cluster"}, {NULL, "gpus"}, {NULL, "status"},
    {"plan", "pp"}, {"plan", "vpp"}, {"plan", "tp"}, {"plan", "cp"}, {"plan", "cp_comm"}, {"plan", "dp"},
    {"plan", "zero"}, {"plan", "ckpt"},
    {"plan", "sp"}, {"plan", "uniform"}, {"plan", "varies"}, {"plan", "schedule"}, {"plan", "gbs"}, {"plan", "mbs"},
    {"plan", "micro_batches"},
    {"predicted", "iter_time_s"}, {"predicted", "samples_per_s"}, {"predicted", "tokens_per_s"},
    {"predicted", "tflops_per_gpu"}, {"predicted", "mfu"}, {"predicted", "bubble_frac"},
    {"predicted", "peak_mem_gib"}, {"predicted", "mem_capacity_gib"},
    {NULL, "megatron_samples_per_s"}, {NULL, "megatron_peak_mem_gib"}, {NULL, "gain_over_megatron"},
    {NULL, "timeline_svg"}, {NULL, "binding"},
};
enum { N_CSV = sizeof k_csv / sizeof k_csv[0] };

static void csv_value(FILE *f, const json_t *v, int last)
{
    char buf[64] = "";
    if (json_is_string(v)) {
        csv_field(f, json_string_value(v), last);
        return;
    }
    if (json_is_integer(v)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(buf, sizeof buf, "%.6g", json_real_value(v));
    else if (json_is_boolean(v)) snprintf(buf, sizeof buf, "%d", json_is_true(v));
    csv_field(f, buf, last);
}

static void render_csv(FILE *f, const ps_sweep_grid *g)
{
    for (int c = 0; c < N_CSV; c++) csv_field(f, k_csv[c].key, c == N_CSV - 1);
    for (int mi = 0; mi < g->n_models; mi++)
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) continue;
            for (int c = 0; c < N_CSV; c++) {
                const json_t *in = k_csv[c].section ? json_object_get(r, k_csv[c].section) : r;
                csv_value(f, json_object_get(in, k_csv[c].key), c == N_CSV - 1);
            }
        }
}

/* ---- HTML ---- */

static void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static void html_td(FILE *f, const char *s, const char *cls)
{
    fprintf(f, cls ? "<td class=\"%s\">" : "<td>", cls);
    html_text(f, s);
    fputs("</td>", f);
}

/* The plan's timeline (a file under DIR, drawn when the cell finished), linked, or why it is not there. */
static void timeline_td(FILE *f, const char *path, bool missing)
{
    if (missing) {
        fputs("<td class=\"bad\">timeline file missing: ", f);
        html_text(f, path);
        fputs("</td>", f);
        return;
    }
    fputs("<td><details><summary>timeline</summary><a href=\"", f);
    html_text(f, path);
    fputs("\"><img src=\"", f);
    html_text(f, path);
    fputs("\" alt=\"schedule timeline\" loading=\"lazy\"/></a></details></td>", f);
}

static void render_html(FILE *f, const ps_sweep_grid *g)
{
    fputs("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta "
          "charset=\"utf-8\"/>\n<title>psearch plan tables</title>\n<style>\n"
          "body{font-family:sans-serif;margin:1.5em;color:#222}\n"
          "table{border-collapse:collapse;margin-bottom:2em}\n"
          "th,td{border:1px solid #ccc;padding:3px 7px;vertical-align:top}\n"
          "th{background:#f0f0f0}\ntd.n{text-align:right}\ntd.bad{color:#a00}\n"
          "details img{max-width:900px;height:auto}\n"
          "</style>\n</head>\n<body>\n<h1>psearch plan tables</h1>\n<p>",
          f);
    header_note(f, g, " ", html_text);
    fputs("</p>\n", f);
    for (int mi = 0; mi < g->n_models; mi++) {
        fprintf(f, "<h2 id=\"model-%d\">", mi);
        html_text(f, g->models[mi]);
        fputs("</h2>\n<table>\n<thead><tr>", f);
        for (int c = 0; c < N_COLS; c++) {
            fputs("<th>", f);
            html_text(f, k_cols[c].name);
            fputs("</th>", f);
        }
        fputs("<th>schedule timeline</th></tr></thead>\n<tbody>\n", f);
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) continue;
            row_text t;
            row_of(g, ci, r, &t);
            fputs("<tr>", f);
            for (int c = 0; c < t.n; c++)
                if (t.n == INFEASIBLE_COLS && c == t.n - 1) {
                    /* the constraint spans the plan's columns and the timeline's */
                    fprintf(f, "<td class=\"bad\" colspan=\"%d\">", N_COLS - c + 1);
                    html_text(f, t.text[c]);
                    fputs("</td>", f);
                } else {
                    html_td(f, t.text[c], k_cols[c].numeric ? "n" : NULL);
                }
            if (t.n == N_COLS)
                timeline_td(f, ps_sweep_str(r, "timeline_svg"), g->timeline_missing[mi * g->n_clusters + ci]);
            fputs("</tr>\n", f);
        }
        fputs("</tbody>\n</table>\n", f);
        not_searched(f, g, mi, html_text, "<p>", "</p>\n");
    }
    fputs("</body>\n</html>\n", f);
}

static const struct {
    const char *name;
    void (*render)(FILE *f, const ps_sweep_grid *g);
} k_tables[] = {{"plans.md", render_md}, {"plans.csv", render_csv}, {"index.html", render_html}};

ps_status ps_sweep_render(const char *dir, const ps_sweep_grid *g)
{
    for (size_t i = 0; i < sizeof k_tables / sizeof k_tables[0]; i++) {
        /* Render into memory, then replace dir/name in one rename. */
        ps_out o;
        PS_TRY(ps_out_open(&o));
        k_tables[i].render(o.f, g);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, k_tables[i].name);
        PS_TRY(ps_out_commit(&o, path));
    }
    return PS_OK;
}

void ps_sweep_remove_temporaries(const char *dir)
{
    for (size_t i = 0; i < sizeof k_tables / sizeof k_tables[0]; i++)
        ps_remove_stale_temporaries(dir, k_tables[i].name);
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", dir, PS_SWEEP_TIMELINES);
    ps_remove_stale_temporaries(sub, NULL); /* the sweep's own folder: any temporary there is a timeline's */
}

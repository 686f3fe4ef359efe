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

/* The plan columns shared by every table, as text. */
typedef struct {
    char pp[16], tp[16], dp[16], zero[8], ckpt[16], sp[8], schedule[48], mbs[24], micro[24], gbs[24];
    char sps[32], mfu[16], peak[48], gain[24];
} row_text;

static void row_of(const json_t *rec, row_text *t)
{
    const json_t *p = json_object_get(rec, "plan"), *q = json_object_get(rec, "predicted");
    /* Per-layer plans show their first layer's strategy, starred (the tables' note says so). */
    const char *star = json_is_false(json_object_get(p, "uniform")) ? "*" : "";
    snprintf(t->pp, sizeof t->pp, "%lld", jint(p, "pp"));
    snprintf(t->tp, sizeof t->tp, "%lld%s", jint(p, "tp"), star);
    snprintf(t->dp, sizeof t->dp, "%lld%s", jint(p, "dp"), star);
    snprintf(t->zero, sizeof t->zero, "%lld%s", jint(p, "zero"), star);
    snprintf(t->ckpt, sizeof t->ckpt, "%s%s", ps_sweep_str(p, "ckpt"), star);
    snprintf(t->sp, sizeof t->sp, "%s%s", json_is_true(json_object_get(p, "sp")) ? "yes" : "no", star);
    if (jint(p, "vpp") > 1)
        snprintf(t->schedule, sizeof t->schedule, "%s (v=%lld)", ps_sweep_str(p, "schedule"), jint(p, "vpp"));
    else
        snprintf(t->schedule, sizeof t->schedule, "%s", ps_sweep_str(p, "schedule"));
    snprintf(t->mbs, sizeof t->mbs, "%lld", jint(p, "mbs"));
    snprintf(t->micro, sizeof t->micro, "%lld", jint(p, "micro_batches"));
    snprintf(t->gbs, sizeof t->gbs, "%lld", jint(p, "gbs"));
    snprintf(t->sps, sizeof t->sps, "%.4g", jnum(q, "samples_per_s"));
    snprintf(t->mfu, sizeof t->mfu, "%.1f%%", 100 * jnum(q, "mfu"));
    snprintf(t->peak, sizeof t->peak, "%.1f of %.0f GiB", jnum(q, "peak_mem_gib"), jnum(q, "mem_capacity_gib"));
    gain_text(rec, t->gain, sizeof t->gain);
}

static const char *const k_cols[] = {"cluster", "GPUs", "pp", "tp", "dp", "zero", "ckpt", "sp", "schedule", "mbs",
                                     "micro-batches", "gbs", "samples/s", "MFU", "peak memory per GPU",
                                     "gain over Megatron heuristic"};
enum { N_COLS = sizeof k_cols / sizeof k_cols[0] };

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
        for (int c = 0; c < N_COLS; c++) md_cell(f, k_cols[c]);
        fprintf(f, "|\n");
        for (int c = 0; c < N_COLS; c++) fprintf(f, "|%s", c < 2 || c > 8 ? "---:" : "---");
        fprintf(f, "|\n");
        int pending = 0;
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) {
                pending++;
                continue;
            }
            char gpus[24];
            snprintf(gpus, sizeof gpus, "%lld", jint(r, "gpus"));
            md_cell(f, g->clusters[ci]);
            md_cell(f, gpus);
            if (strcmp(ps_sweep_str(r, "status"), "ok") == 0) {
                row_text t;
                row_of(r, &t);
                const char *v[] = {t.pp, t.tp, t.dp, t.zero, t.ckpt, t.sp, t.schedule, t.mbs, t.micro,
                                   t.gbs, t.sps, t.mfu, t.peak, t.gain};
                for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) md_cell(f, v[k]);
            } else {
                char why[400];
                snprintf(why, sizeof why, "infeasible: %s", ps_sweep_str(r, "binding"));
                md_cell(f, why);
                for (int c = 3; c < N_COLS; c++) md_cell(f, "");
            }
            fprintf(f, "|\n");
        }
        if (pending) {
            fprintf(f, "\nNot searched yet:");
            for (int ci = 0; ci < g->n_clusters; ci++)
                if (!cell_rec(g, mi, ci)) fprintf(f, " %s", g->clusters[ci]);
            fprintf(f, "\n");
        }
        fprintf(f, "\n");
    }
}

/* ---- CSV (RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled) ---- */

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
    fputs(last ? "\r\n" : ",", f);
}

static void render_csv(FILE *f, const ps_sweep_grid *g)
{
    static const char *const cols[] = {"model", "model_name", "cluster", "gpus", "status", "pp", "vpp", "tp", "dp",
                                       "zero", "ckpt", "sp", "uniform", "schedule", "gbs", "mbs", "micro_batches",
                                       "iter_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                                       "bubble_frac", "peak_mem_gib", "megatron_samples_per_s",
                                       "gain_over_megatron", "binding"};
    enum { N = sizeof cols / sizeof cols[0] };
    for (int c = 0; c < N; c++) csv_field(f, cols[c], c == N - 1);
    for (int mi = 0; mi < g->n_models; mi++)
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) continue;
            char v[N][400];
            memset(v, 0, sizeof v);
            const json_t *p = json_object_get(r, "plan"), *q = json_object_get(r, "predicted");
            snprintf(v[0], sizeof v[0], "%s", g->models[mi]);
            snprintf(v[1], sizeof v[1], "%s", ps_sweep_str(r, "model_name"));
            snprintf(v[2], sizeof v[2], "%s", g->clusters[ci]);
            snprintf(v[3], sizeof v[3], "%lld", jint(r, "gpus"));
            snprintf(v[4], sizeof v[4], "%s", ps_sweep_str(r, "status"));
            if (p && q) {
                snprintf(v[5], sizeof v[5], "%lld", jint(p, "pp"));
                snprintf(v[6], sizeof v[6], "%lld", jint(p, "vpp"));
                snprintf(v[7], sizeof v[7], "%lld", jint(p, "tp"));
                snprintf(v[8], sizeof v[8], "%lld", jint(p, "dp"));
                snprintf(v[9], sizeof v[9], "%lld", jint(p, "zero"));
                snprintf(v[10], sizeof v[10], "%s", ps_sweep_str(p, "ckpt"));
                snprintf(v[11], sizeof v[11], "%d", json_is_true(json_object_get(p, "sp")));
                snprintf(v[12], sizeof v[12], "%d", json_is_true(json_object_get(p, "uniform")));
                snprintf(v[13], sizeof v[13], "%s", ps_sweep_str(p, "schedule"));
                snprintf(v[14], sizeof v[14], "%lld", jint(p, "gbs"));
                snprintf(v[15], sizeof v[15], "%lld", jint(p, "mbs"));
                snprintf(v[16], sizeof v[16], "%lld", jint(p, "micro_batches"));
                const char *qk[] = {"iter_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu",
                                    "bubble_frac", "peak_mem_gib"};
                for (int k = 0; k < 7; k++) snprintf(v[17 + k], sizeof v[17 + k], "%.6g", jnum(q, qk[k]));
                const json_t *b = json_object_get(r, "megatron_samples_per_s"), *gn = json_object_get(r, "gain_over_megatron");
                if (json_is_number(b)) snprintf(v[24], sizeof v[24], "%.6g", json_number_value(b));
                if (json_is_number(gn)) snprintf(v[25], sizeof v[25], "%.6g", json_number_value(gn));
            } else {
                snprintf(v[26], sizeof v[26], "%s", ps_sweep_str(r, "binding"));
            }
            for (int c = 0; c < N; c++) csv_field(f, v[c], c == N - 1);
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
            html_text(f, k_cols[c]);
            fputs("</th>", f);
        }
        fputs("<th>schedule timeline</th></tr></thead>\n<tbody>\n", f);
        int pending = 0;
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) {
                pending++;
                continue;
            }
            char gpus[24];
            snprintf(gpus, sizeof gpus, "%lld", jint(r, "gpus"));
            fputs("<tr>", f);
            html_td(f, g->clusters[ci], NULL);
            html_td(f, gpus, "n");
            if (strcmp(ps_sweep_str(r, "status"), "ok") == 0) {
                row_text t;
                row_of(r, &t);
                const char *v[] = {t.pp, t.tp, t.dp, t.zero, t.ckpt, t.sp, t.schedule, t.mbs, t.micro,
                                   t.gbs, t.sps, t.mfu, t.peak, t.gain};
                for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) html_td(f, v[k], k >= 7 ? "n" : NULL);
                int cell = mi * g->n_clusters + ci;
                const char *tl = ps_sweep_str(r, "timeline_svg");
                if (g->timeline_missing[cell]) {
                    fputs("<td class=\"bad\">timeline file missing: ", f);
                    html_text(f, tl);
                    fputs("</td>", f);
                } else {
                    fputs("<td><details><summary>timeline</summary><a href=\"", f);
                    html_text(f, tl);
                    fputs("\"><img src=\"", f);
                    html_text(f, tl);
                    fputs("\" alt=\"schedule timeline\" loading=\"lazy\"/></a></details></td>", f);
                }
            } else {
                fprintf(f, "<td class=\"bad\" colspan=\"%d\">infeasible: ", N_COLS - 2 + 1);
                html_text(f, ps_sweep_str(r, "binding"));
                fputs("</td>", f);
            }
            fputs("</tr>\n", f);
        }
        fputs("</tbody>\n</table>\n", f);
        if (pending) {
            fputs("<p>Not searched yet:", f);
            for (int ci = 0; ci < g->n_clusters; ci++)
                if (!cell_rec(g, mi, ci)) {
                    fputc(' ', f);
                    html_text(f, g->clusters[ci]);
                }
            fputs("</p>\n", f);
        }
    }
    fputs("</body>\n</html>\n", f);
}

typedef enum { TABLE_MD, TABLE_CSV, TABLE_HTML } table_kind;
static const struct {
    const char *name;
    table_kind kind;
} k_tables[] = {{"plans.md", TABLE_MD}, {"plans.csv", TABLE_CSV}, {"index.html", TABLE_HTML}};

/* Render into memory, then replace dir/name in one rename. */
static ps_status write_table(const char *dir, const char *name, const ps_sweep_grid *g,
                             table_kind which)
{
    ps_out o;
    PS_TRY(ps_out_open(&o));
    if (which == TABLE_MD) render_md(o.f, g);
    else if (which == TABLE_CSV) render_csv(o.f, g);
    else render_html(o.f, g);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    PS_TRY(ps_out_commit(&o, path));
    return PS_OK;
}

ps_status ps_sweep_render(const char *dir, const ps_sweep_grid *g)
{
    for (size_t i = 0; i < sizeof k_tables / sizeof k_tables[0]; i++)
        PS_TRY(write_table(dir, k_tables[i].name, g, k_tables[i].kind));
    return PS_OK;
}

void ps_sweep_remove_temporaries(const char *dir)
{
    for (size_t i = 0; i < sizeof k_tables / sizeof k_tables[0]; i++) ps_remove_stale_temporaries(dir, k_tables[i].name);
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", dir, PS_SWEEP_TIMELINES);
    ps_remove_stale_temporaries(sub, NULL); /* the sweep's own folder: any temporary there is a timeline's */
}

/* Plan tables of a sweep, rendered from its records (see sweep_tables.h). The HTML page is also well-formed XML
 * (XHTML-style empty elements, no named entities beyond XML's own), so a strict XML parser checks it in tests; it
 * links each plan's schedule timeline, drawn once when the cell finished (DIR/timelines), rather than drawing and
 * inlining every timeline on every render. */
#include <math.h>
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
} k_cols[] = {{"cluster", false}, {"GPUs", true}, {"pp", false}, {"tp", false}, {"cp", false}, {"experts", false},
              {"dp", false},
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
    /* the expert grid of MoE models (ep x etp); records of dense models or written before it have none */
    if (json_is_integer(json_object_get(p, "ep")))
        snprintf(v[5], sizeof v[5], "ep %lld x etp %lld", jint(p, "ep"), jint(p, "etp"));
    else
        snprintf(v[5], sizeof v[5], "-");
    snprintf(v[6], sizeof v[6], "%lld%s", jint(p, "dp"), star);
    snprintf(v[7], sizeof v[7], "%lld%s", jint(p, "zero"), star);
    snprintf(v[8], sizeof v[8], "%s%s", ps_sweep_str(p, "ckpt"), star);
    snprintf(v[9], sizeof v[9], "%s%s", json_is_true(json_object_get(p, "sp")) ? "yes" : "no", star);
    if (jint(p, "vpp") > 1)
        snprintf(v[10], sizeof v[10], "%s (v=%lld)", ps_sweep_str(p, "schedule"), jint(p, "vpp"));
    else
        snprintf(v[10], sizeof v[10], "%s", ps_sweep_str(p, "schedule"));
    snprintf(v[11], sizeof v[11], "%lld", jint(p, "mbs"));
    snprintf(v[12], sizeof v[12], "%lld", jint(p, "micro_batches"));
    snprintf(v[13], sizeof v[13], "%lld", jint(p, "gbs"));
    ps_fmt_num(jnum(q, "samples_per_s"), 0, v[14], sizeof v[14]); /* plain digits, not 1.234e+04 */
    snprintf(v[15], sizeof v[15], "%.1f%%", 100 * jnum(q, "mfu"));
    snprintf(v[16], sizeof v[16], "%.1f of %.0f GiB", jnum(q, "peak_mem_gib"), jnum(q, "mem_capacity_gib"));
    gain_text(rec, v[17], sizeof v[17]);
    t->n = N_COLS;
}

static void html_text(FILE *f, const char *s);

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

/* Changed cells so far (those with a record), and all with a record. */
static int count_changed(const ps_sweep_grid *g, int *compared)
{
    int n = 0;
    *compared = 0;
    for (int cell = 0; cell < g->n_models * g->n_clusters; cell++) {
        ps_sweep_change ch;
        ps_sweep_cell_change(g, cell, &ch);
        *compared += ch.compared;
        n += ch.changed;
    }
    return n;
}

/* With --compare / --history: which sweep the tables are compared with, how many cells changed, and the inputs that
 * differ between the two sweeps. */
static void compare_note(FILE *f, const ps_sweep_grid *g, const char *sep, put_fn put)
{
    if (!g->cmp) return;
    const char *prev = ps_sweep_compare_prev(g->cmp);
    char buf[4096];
    if (!prev[0]) {
        put(f, "No earlier sweep in the history to compare with (the first night).");
        fputs(sep, f);
        return;
    }
    int compared = 0, changed = count_changed(g, &compared);
    snprintf(buf, sizeof buf, "Compared with %s (%s): %d of %d cell(s) changed their best plan, their feasibility, or "
             "their predicted samples/s by more than %g%%", prev, ps_sweep_compare_prev_created(g->cmp), changed,
             compared, 100 * ps_sweep_compare_threshold(g->cmp));
    put(f, buf);
    int only = ps_sweep_compare_prev_only(g->cmp);
    if (only) {
        snprintf(buf, sizeof buf, "; %d cell(s) of that sweep are not in this one", only);
        put(f, buf);
    }
    const char *note = ps_sweep_compare_inputs_note(g->cmp);
    snprintf(buf, sizeof buf, ". Inputs that differ: %s.", note[0] ? note : "none");
    put(f, buf);
    fputs(sep, f);
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
    compare_note(f, g, sep, put);
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

/* Whether the tables have a "since" column: a previous sweep is compared. */
static bool comparing(const ps_sweep_grid *g) { return g->cmp && ps_sweep_compare_prev(g->cmp)[0]; }

/* The changed cells, one line each (Markdown list, or HTML list items): cell, change, samples/s before and now, why.
 * A cell that turned infeasible comes first and in bold: it is the one to act on. */
static void change_list(FILE *f, const ps_sweep_grid *g, bool html)
{
    char line[2048], a[32], b[32];
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int cell = 0; cell < g->n_models * g->n_clusters; cell++) {
            ps_sweep_change ch;
            ps_sweep_cell_change(g, cell, &ch);
            if (!ch.changed || (pass == 0) != ch.turned_infeasible) continue;
            /* an infeasible side says so rather than 0 samples/s */
            if (ch.prev_sps > 0) ps_fmt_num(ch.prev_sps, 0, a, sizeof a);
            else snprintf(a, sizeof a, "infeasible");
            if (ch.sps > 0) ps_fmt_num(ch.sps, 0, b, sizeof b);
            else snprintf(b, sizeof b, "infeasible");
            snprintf(line, sizeof line, "%s on %s: %s (samples/s %s -> %s); why: %s", g->models[cell / g->n_clusters],
                     g->clusters[cell % g->n_clusters], ch.what, ch.was_recorded ? a : "-", b, ch.why);
            n++;
            if (html) {
                fputs(ch.turned_infeasible ? "<li class=\"lost\"><strong>" : "<li>", f);
                html_text(f, line);
                fputs(ch.turned_infeasible ? "</strong></li>\n" : "</li>\n", f);
            } else {
                fprintf(f, ch.turned_infeasible ? "- **%s**\n" : "- %s\n", line);
            }
        }
    if (!n) {
        if (html) fputs("<li>no cell changed</li>\n", f);
        else fputs("- no cell changed\n", f);
    }
}

static void render_md(FILE *f, const ps_sweep_grid *g)
{
    fprintf(f, "# psearch plan tables\n\n");
    header_note(f, g, "\n\n", put_plain);
    if (comparing(g)) {
        fprintf(f, "## Changes since %s\n\n", ps_sweep_compare_prev(g->cmp));
        change_list(f, g, false);
        fprintf(f, "\n");
    }
    for (int mi = 0; mi < g->n_models; mi++) {
        fprintf(f, "## %s\n\n", g->models[mi]);
        for (int c = 0; c < N_COLS; c++) md_cell(f, k_cols[c].name);
        if (comparing(g)) md_cell(f, "since previous");
        fprintf(f, "|\n");
        for (int c = 0; c < N_COLS; c++) fprintf(f, "|%s", k_cols[c].numeric ? "---:" : "---");
        if (comparing(g)) fprintf(f, "|---");
        fprintf(f, "|\n");
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) continue;
            row_text t;
            row_of(g, ci, r, &t);
            for (int c = 0; c < N_COLS; c++) md_cell(f, c < t.n ? t.text[c] : "");
            if (comparing(g)) {
                ps_sweep_change ch;
                ps_sweep_cell_change(g, mi * g->n_clusters + ci, &ch);
                char cell[200];
                snprintf(cell, sizeof cell, ch.turned_infeasible ? "**%s**" : "%s", ch.what);
                md_cell(f, cell);
            }
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
    {"plan", "pp"}, {"plan", "vpp"}, {"plan", "tp"}, {"plan", "cp"}, {"plan", "cp_comm"}, {"plan", "ep"},
    {"plan", "etp"}, {"plan", "dp"},
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

/* With a previous sweep compared, four columns after binding: change (1 when the cell changed), what changed
 * ("plan, +3.1%", "INFEASIBLE now", ...), the previous samples/s (empty when the cell is new) and why. */
static const char *const k_csv_change[] = {"changed", "change", "prev_samples_per_s", "change_why"};
enum { N_CSV_CHANGE = sizeof k_csv_change / sizeof k_csv_change[0] };

static void render_csv(FILE *f, const ps_sweep_grid *g)
{
    bool cmp = comparing(g);
    for (int c = 0; c < N_CSV; c++) csv_field(f, k_csv[c].key, !cmp && c == N_CSV - 1);
    for (int c = 0; cmp && c < N_CSV_CHANGE; c++) csv_field(f, k_csv_change[c], c == N_CSV_CHANGE - 1);
    for (int mi = 0; mi < g->n_models; mi++)
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) continue;
            for (int c = 0; c < N_CSV; c++) {
                const json_t *in = k_csv[c].section ? json_object_get(r, k_csv[c].section) : r;
                csv_value(f, json_object_get(in, k_csv[c].key), !cmp && c == N_CSV - 1);
            }
            if (!cmp) continue;
            ps_sweep_change ch;
            ps_sweep_cell_change(g, mi * g->n_clusters + ci, &ch);
            char prev[64] = "";
            if (ch.was_recorded) snprintf(prev, sizeof prev, "%.6g", ch.prev_sps);
            csv_field(f, ch.changed ? "1" : "0", 0);
            csv_field(f, ch.what, 0);
            csv_field(f, prev, 0);
            csv_field(f, ch.why, 1);
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

/* A cell's samples/s over the kept nights and tonight as an inline SVG sparkline (no script: each point's <title>
 * is its tooltip): a line through the feasible nights scaled to their range, a red cross at the bottom for an
 * infeasible night, nothing for a night the cell was not searched; the last point is tonight's, filled. */
static void sparkline(FILE *f, const ps_sweep_grid *g, int cell)
{
    enum { W = 120, H = 24, PAD = 3 };
    int n = ps_sweep_compare_nights(g->cmp) + 1;
    double v[PS_SWEEP_NIGHTS_MAX + 1];
    if (n > PS_SWEEP_NIGHTS_MAX + 1) n = PS_SWEEP_NIGHTS_MAX + 1;
    int first = ps_sweep_compare_nights(g->cmp) - (n - 1);
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < n; k++) {
        v[k] = k < n - 1 ? ps_sweep_compare_night_sps(g->cmp, first + k, cell)
                         : g->rec[cell] ? (strcmp(ps_sweep_str(g->rec[cell], "status"), "ok") == 0
                                               ? jnum(json_object_get(g->rec[cell], "predicted"), "samples_per_s")
                                               : 0)
                                        : NAN;
        if (v[k] > 0) {
            lo = v[k] < lo ? v[k] : lo;
            hi = v[k] > hi ? v[k] : hi;
        }
    }
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"trend\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" role=\"img\"><title>", W, H, W, H);
    fprintf(f, "%d night(s), oldest first", n);
    fputs("</title>", f);
    double dx = n > 1 ? (double)(W - 2 * PAD) / (n - 1) : 0;
    /* flat when every night predicts the same: mid-height */
    double span = hi > lo ? hi - lo : 0;
#define PX(k) (PAD + dx * (k))
#define PY(x) (span > 0 ? H - PAD - ((x)-lo) / span * (H - 2 * PAD) : H / 2.0)
    fputs("<polyline fill=\"none\" stroke=\"#36c\" stroke-width=\"1.5\" points=\"", f);
    for (int k = 0, any = 0; k < n; k++)
        if (v[k] > 0) fprintf(f, "%s%.1f,%.1f", any++ ? " " : "", PX(k), PY(v[k]));
    fputs("\"/>", f);
    for (int k = 0; k < n; k++) {
        char label[300], num[32];
        const char *night = k < n - 1 ? ps_sweep_compare_night_label(g->cmp, first + k) : "this sweep";
        if (isnan(v[k])) continue;
        if (v[k] > 0) {
            snprintf(label, sizeof label, "%s: %s samples/s", night, ps_fmt_num(v[k], 0, num, sizeof num));
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%s\" fill=\"%s\"><title>", PX(k), PY(v[k]),
                    k == n - 1 ? "2.5" : "1.5", k == n - 1 ? "#36c" : "#9ab");
        } else {
            snprintf(label, sizeof label, "%s: infeasible", night);
            fprintf(f, "<path d=\"M%.1f,%d l4,-4 m-4,0 l4,4\" transform=\"translate(-2,0)\" stroke=\"#c00\" "
                       "stroke-width=\"1.5\"><title>", PX(k), H - 1);
        }
        html_text(f, label);
        fputs(v[k] > 0 ? "</title></circle>" : "</title></path>", f);
    }
#undef PX
#undef PY
    fputs("</svg>", f);
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
          "tr.chg td{background:#fff6d5}\ntr.lost td{background:#fbdada}\ntr.won td{background:#dcf3dc}\n"
          "li.lost{color:#a00}\nsvg.trend{vertical-align:middle}\n"
          "</style>\n</head>\n<body>\n<h1>psearch plan tables</h1>\n<p>",
          f);
    header_note(f, g, " ", html_text);
    fputs("</p>\n", f);
    if (comparing(g)) {
        fputs("<h2 id=\"changes\">Changes since ", f);
        html_text(f, ps_sweep_compare_prev(g->cmp));
        fputs("</h2>\n<ul>\n", f);
        change_list(f, g, true);
        fputs("</ul>\n", f);
    }
    for (int mi = 0; mi < g->n_models; mi++) {
        fprintf(f, "<h2 id=\"model-%d\">", mi);
        html_text(f, g->models[mi]);
        fputs("</h2>\n<table>\n<thead><tr>", f);
        for (int c = 0; c < N_COLS; c++) {
            fputs("<th>", f);
            html_text(f, k_cols[c].name);
            fputs("</th>", f);
        }
        fputs("<th>schedule timeline</th>", f);
        if (comparing(g)) fputs("<th>since previous</th>", f);
        if (g->cmp) fputs("<th>trend (samples/s)</th>", f);
        fputs("</tr></thead>\n<tbody>\n", f);
        for (int ci = 0; ci < g->n_clusters; ci++) {
            const json_t *r = cell_rec(g, mi, ci);
            if (!r) continue;
            row_text t;
            row_of(g, ci, r, &t);
            ps_sweep_change ch;
            ps_sweep_cell_change(g, mi * g->n_clusters + ci, &ch);
            const char *cls = ch.turned_infeasible ? "lost" : ch.became_feasible ? "won" : ch.changed ? "chg" : NULL;
            if (cls) fprintf(f, "<tr class=\"%s\">", cls);
            else fputs("<tr>", f);
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
            if (comparing(g)) {
                fputs("<td title=\"", f);
                html_text(f, ch.why);
                fputs("\">", f);
                if (ch.turned_infeasible) fputs("<strong>", f);
                html_text(f, ch.what);
                if (ch.turned_infeasible) fputs("</strong>", f);
                fputs("</td>", f);
            }
            if (g->cmp) {
                fputs("<td>", f);
                sparkline(f, g, mi * g->n_clusters + ci);
                fputs("</td>", f);
            }
            fputs("</tr>\n", f);
        }
        fputs("</tbody>\n</table>\n", f);
        not_searched(f, g, mi, html_text, "<p>", "</p>\n");
    }
    fputs("</body>\n</html>\n", f);
}

/* ---- changes.json: the comparison as data (written only while a previous sweep is compared) ---- */

static void render_changes(FILE *f, const ps_sweep_grid *g)
{
    json_t *cells = json_array();
    int compared = 0, changed = 0;
    for (int cell = 0; cell < g->n_models * g->n_clusters; cell++) {
        ps_sweep_change ch;
        ps_sweep_cell_change(g, cell, &ch);
        if (!ch.compared) continue;
        compared++;
        changed += ch.changed;
        json_t *j = json_pack("{s:s, s:s, s:b, s:s, s:b, s:b, s:b, s:f, s:s}", "model", g->models[cell / g->n_clusters],
                              "cluster", g->clusters[cell % g->n_clusters], "changed", ch.changed, "change", ch.what,
                              "plan_changed", ch.plan_changed, "turned_infeasible", ch.turned_infeasible,
                              "became_feasible", ch.became_feasible, "samples_per_s", ch.sps, "why", ch.why);
        if (j) {
            json_object_set_new(j, "prev_samples_per_s", ch.was_recorded ? json_real(ch.prev_sps) : json_null());
            json_object_set_new(j, "change_pct",
                                ch.was_recorded && ch.prev_sps > 0 && ch.sps > 0 ? json_real(100 * ch.rel)
                                                                                  : json_null());
        }
        json_array_append_new(cells, j);
    }
    json_t *top = json_pack("{s:s, s:s, s:f, s:s, s:i, s:i, s:i, s:o}", "previous", ps_sweep_compare_prev(g->cmp),
                            "previous_created", ps_sweep_compare_prev_created(g->cmp), "threshold_pct",
                            100 * ps_sweep_compare_threshold(g->cmp), "inputs_differ",
                            ps_sweep_compare_inputs_note(g->cmp), "compared", compared, "changed", changed,
                            "previous_only", ps_sweep_compare_prev_only(g->cmp), "cells", cells);
    if (top) json_dumpf(top, f, JSON_INDENT(2));
    fputc('\n', f);
    json_decref(top);
}

static const struct {
    const char *name;
    void (*render)(FILE *f, const ps_sweep_grid *g);
    bool compare_only;
} k_tables[] = {{"plans.md", render_md, false},
                {"plans.csv", render_csv, false},
                {"index.html", render_html, false},
                {PS_SWEEP_CHANGES, render_changes, true}};

ps_status ps_sweep_render(const char *dir, const ps_sweep_grid *g)
{
    for (size_t i = 0; i < sizeof k_tables / sizeof k_tables[0]; i++) {
        if (k_tables[i].compare_only && !comparing(g)) continue;
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
    ps_remove_stale_temporaries(dir, PS_SWEEP_MANIFEST);
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", dir, PS_SWEEP_TIMELINES);
    ps_remove_stale_temporaries(sub, NULL); /* the sweep's own folder: any temporary there is a timeline's */
}

/* What changed since an earlier sweep (sweep_tables.h, docs/nightly.md): the manifest of a sweep folder (the digests of
 * the inputs its records were searched with), the previous sweep's records and manifest read back, each cell's change
 * and its cause, and the kept nights' throughputs a cell's trend is drawn from. Rank 0 only: no MPI here. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ps_mpi.h"
#include "sweep_tables.h"

typedef struct {
    char label[256];
    double *sps; /* [cells] */
} night;

struct ps_sweep_compare {
    char prev_dir[4096]; /* "" when there is nothing to compare with (a history's first night) */
    char prev_created[64];
    double threshold; /* fraction */
    json_t *prev_manifest;  /* NULL: the previous sweep predates manifests (cause unknown) */
    json_t *prev_records;   /* array, owned */
    const json_t **prev;    /* [cells] */
    int prev_only;          /* previous records of cells this grid does not list */
    const json_t *manifest; /* this sweep's, borrowed */
    char inputs_note[2048];
    night *nights;
    int n_nights;
};

void ps_sweep_digest(const void *data, size_t n, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)ps_hash64(data, n, PS_HASH64_INIT));
}

ps_status ps_sweep_file_digest(const char *path, char out[17])
{
    /* streamed: a cost database may be larger than what psearch reads into memory as an input (64 MiB) */
    FILE *f = fopen(path, "rb");
    if (!f) return PS_FAIL(PS_ERR_INPUT, "%s: cannot read it for its digest: %s", path, strerror(errno));
    uint64_t h = PS_HASH64_INIT;
    static char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = ps_hash64(buf, n, h);
    bool bad = ferror(f);
    fclose(f);
    if (bad) return PS_FAIL(PS_ERR_SYSTEM, "%s: read error while taking its digest", path);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return PS_OK;
}

json_t *ps_sweep_manifest_new(const ps_sweep_grid *g, char (*model_digest)[17], char (*cluster_digest)[17],
                              const char *costdb, const char *costdb_digest)
{
    json_t *m = json_object(), *models = json_object(), *clusters = json_object(), *opts = json_object();
    if (!m || !models || !clusters || !opts) {
        json_decref(m);
        json_decref(models);
        json_decref(clusters);
        json_decref(opts);
        return NULL;
    }
    char when[32];
    ps_utc_now_iso(when, sizeof when);
    json_object_set_new(m, "psearch", json_string(PS_VERSION));
    json_object_set_new(m, "created", json_string(when));
    json_object_set_new(m, "digest", json_string("FNV-1a 64 of the file's bytes (model, cost database) or of the "
                                                 "cluster's description as `cluster show --format json` prints it"));
    json_object_set_new(m, "costdb", costdb ? json_pack("{s:s, s:s}", "path", costdb, "digest", costdb_digest)
                                            : json_null());
    for (int i = 0; i < g->n_models; i++) json_object_set_new(models, g->models[i], json_string(model_digest[i]));
    for (int k = 0; k < g->n_clusters; k++) {
        json_object_set_new(clusters, g->clusters[k], json_string(cluster_digest[k]));
        json_object_set_new(opts, g->clusters[k], json_string(g->options[k]));
    }
    json_object_set_new(m, "models", models);
    json_object_set_new(m, "clusters", clusters);
    json_object_set_new(m, "options", opts);
    return m;
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* The digest of input `name` in section ("models", "clusters") of a manifest, "" when it has none. */
static const char *digest_of(const json_t *manifest, const char *section, const char *name)
{
    return jstr(json_object_get(manifest, section), name);
}

static const char *costdb_digest(const json_t *manifest)
{
    return jstr(json_object_get(manifest, "costdb"), "digest");
}

/* Read a JSON object file; *out NULL when the file does not exist. */
static ps_status read_json(const char *path, json_t **out)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return PS_OK;
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        return PS_FAIL(PS_ERR_INPUT, "%s:%d: not a sweep manifest (%s)", path, err.line,
                       j ? "a JSON object is expected" : err.text);
    }
    *out = j;
    return PS_OK;
}

ps_status ps_sweep_manifest_write(const char *dir, const json_t *manifest, int n_records)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, PS_SWEEP_MANIFEST);
    if (n_records > 0) {
        json_t *old = NULL;
        PS_TRY(read_json(path, &old));
        if (old) {
            /* A resumed folder's records must all come from one set of inputs, as they must from one set of options:
             * a table that mixes two cost databases answers neither. */
            char why[1200] = "";
            if (strcmp(costdb_digest(old), costdb_digest(manifest)) != 0)
                ps_strcatf(why, sizeof why, " the cost database (%s) differs;",
                           jstr(json_object_get(manifest, "costdb"), "path")[0]
                               ? jstr(json_object_get(manifest, "costdb"), "path")
                               : jstr(json_object_get(old, "costdb"), "path"));
            const char *sec[2] = {"models", "clusters"};
            for (int s = 0; s < 2; s++) {
                const char *name;
                json_t *v;
                json_object_foreach(json_object_get(manifest, sec[s]), name, v)
                {
                    const char *was = digest_of(old, sec[s], name);
                    if (was[0] && strcmp(was, json_string_value(v)) != 0)
                        ps_strcatf(why, sizeof why, " %s %s changed;", s ? "cluster" : "model", name);
                }
            }
            json_decref(old);
            if (why[0])
                return PS_FAIL(PS_ERR_INPUT, "--resume: %s's records were searched with other inputs:%s finish the "
                                             "sweep with those inputs, or use another folder", dir, why);
        }
    }
    char *text = json_dumps(manifest, JSON_INDENT(2) | JSON_SORT_KEYS);
    char *line = text ? ps_calloc(strlen(text) + 2, 1) : NULL;
    if (!line) {
        free(text);
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory writing %s", path);
    }
    size_t n = strlen(text);
    memcpy(line, text, n);
    line[n] = '\n';
    ps_status st = ps_write_file_atomic(path, line, n + 1);
    free(line);
    free(text);
    return st;
}

/* ---- reading an earlier sweep ---- */

/* The records of dir/cells.jsonl into a JSON array. A torn last line (a kill during its write) is left out, as
 * --resume drops it; anything else that is not a record fails naming the file and line. */
static ps_status read_records(const char *dir, const char *opt, json_t **out)
{
    *out = NULL;
    char path[4200];
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return PS_FAIL(PS_ERR_INPUT, "%s %s: %s", opt, dir, stat(dir, &sb) != 0 ? "no such folder" : "not a folder");
    snprintf(path, sizeof path, "%s/cells.jsonl", dir);
    if (stat(path, &sb) != 0)
        return PS_FAIL(PS_ERR_INPUT, "%s %s: not a sweep folder (it has no cells.jsonl: give the --out folder of an "
                                     "earlier psearch sweep)", opt, dir);
    char *buf = NULL;
    size_t len = 0;
    PS_TRY(ps_read_file(path, &buf, &len));
    json_t *a = json_array();
    ps_status st = a ? ps_sweep_records_parse(path, buf, len, a, NULL, 0) : PS_ERR_SYSTEM;
    if (st == PS_ERR_INPUT) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", ps_error_message());
        ps_error_clear();
        st = PS_FAIL(PS_ERR_INPUT, "%s %s: %s", opt, dir, msg);
    }
    free(buf);
    if (st != PS_OK) {
        json_decref(a);
        return st;
    }
    *out = a;
    return PS_OK;
}

/* The record of each grid cell in records (NULL where absent); the number of records of other cells. */
static int match_records(const ps_sweep_grid *g, const json_t *records, const json_t **by_cell)
{
    int others = 0;
    size_t i;
    const json_t *r;
    json_array_foreach(records, i, r)
    {
        int mi = -1, ci = -1;
        for (int k = 0; k < g->n_models && mi < 0; k++)
            if (strcmp(g->models[k], jstr(r, "model")) == 0) mi = k;
        for (int k = 0; k < g->n_clusters && ci < 0; k++)
            if (strcmp(g->clusters[k], jstr(r, "cluster")) == 0) ci = k;
        if (mi < 0 || ci < 0)
            others++;
        else
            by_cell[mi * g->n_clusters + ci] = r;
    }
    return others;
}

static double rec_sps(const json_t *r)
{
    if (strcmp(jstr(r, "status"), "ok") != 0) return 0;
    return json_number_value(json_object_get(json_object_get(r, "predicted"), "samples_per_s"));
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sweep folders in the history folder, by name (a date sorts as the nights came), without this sweep's own. */
static ps_status list_history(const ps_sweep_compare_args *a, char ***names, int *n)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(a->history_dir);
    if (!d)
        return PS_FAIL(PS_ERR_INPUT, "--history %s: %s (give the folder that holds earlier nights' sweep folders)",
                       a->history_dir, strerror(errno));
    ps_status st = PS_OK;
    int cap = 0;
    struct dirent *e;
    while (st == PS_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue; /* ., .., and temporaries a publisher renames into place */
        char sub[4200], rec[4300];
        snprintf(sub, sizeof sub, "%s/%s", a->history_dir, e->d_name);
        snprintf(rec, sizeof rec, "%s/cells.jsonl", sub);
        struct stat sb;
        if (stat(rec, &sb) != 0 || (a->out_dir && ps_same_file(sub, a->out_dir))) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nv = realloc(*names, (size_t)cap * sizeof *nv);
            if (!nv) {
                st = PS_ERR_SYSTEM;
                break;
            }
            *names = nv;
        }
        if (!((*names)[*n] = ps_strdup(e->d_name))) st = PS_ERR_SYSTEM;
        else (*n)++;
    }
    closedir(d);
    if (*n > 1) qsort(*names, (size_t)*n, sizeof **names, cmp_name);
    return st;
}

static void options_diff(const char *was, const char *now, char *buf, size_t cap);

/* The inputs that differ between the two sweeps as a whole, for the tables' header. */
static void global_note(ps_sweep_compare *c, const ps_sweep_grid *g)
{
    char *b = c->inputs_note;
    size_t cap = sizeof c->inputs_note;
    b[0] = '\0';
    const char *prev_ver = "";
    for (size_t i = 0; i < json_array_size(c->prev_records) && !prev_ver[0]; i++)
        prev_ver = jstr(json_array_get(c->prev_records, i), "psearch");
    if (prev_ver[0] && strcmp(prev_ver, PS_VERSION) != 0)
        ps_strcatf(b, cap, "%spsearch %s -> %s", b[0] ? "; " : "", prev_ver, PS_VERSION);
    int opts = 0;
    for (int cell = 0; cell < g->n_models * g->n_clusters; cell++) {
        char diff[4096] = "";
        if (!c->prev[cell]) continue;
        options_diff(jstr(c->prev[cell], "options"), g->options[cell % g->n_clusters], diff, sizeof diff);
        opts += diff[0] != '\0';
    }
    if (opts) ps_strcatf(b, cap, "%sthe options of %d cell(s)", b[0] ? "; " : "", opts);
    if (!c->prev_manifest) {
        ps_strcatf(b, cap, "%sthe cost database, models and clusters unknown (%s has no %s: made before psearch "
                           "recorded its inputs)", b[0] ? "; " : "", c->prev_dir, PS_SWEEP_MANIFEST);
        return;
    }
    const char *was = costdb_digest(c->prev_manifest), *now = costdb_digest(c->manifest);
    if (strcmp(was, now) != 0)
        ps_strcatf(b, cap, "%sthe cost database (%s)", b[0] ? "; " : "",
                   !was[0] ? "none before" : !now[0] ? "none now" : "its content");
    const char *sec[2] = {"models", "clusters"};
    for (int s = 0; s < 2; s++) {
        const char *name;
        json_t *v;
        int k = 0;
        json_object_foreach(json_object_get(c->manifest, sec[s]), name, v)
        {
            const char *p = digest_of(c->prev_manifest, sec[s], name);
            /* the costdb cluster is the database's machine: its change is the database's, said once */
            if (!p[0] || strcmp(p, json_string_value(v)) == 0 || (s == 1 && strcmp(name, "costdb") == 0)) continue;
            const char *sep = k ? ", " : b[0] ? "; " : "", *what = k ? "" : s ? "cluster " : "model ";
            ps_strcatf(b, cap, "%s%s%s", sep, what, name);
            k++;
        }
    }
}

ps_status ps_sweep_compare_open(const ps_sweep_compare_args *a, const ps_sweep_grid *g, const json_t *manifest,
                                ps_sweep_compare **out)
{
    *out = NULL;
    int cells = g->n_models * g->n_clusters;
    ps_sweep_compare *c = ps_calloc(1, sizeof *c);
    if (!c) return PS_ERR_SYSTEM;
    c->manifest = manifest;
    c->threshold = a->threshold_pct / 100;
    ps_status st = PS_OK;
    if (!(c->prev = ps_calloc((size_t)cells + 1, sizeof *c->prev))) st = PS_ERR_SYSTEM;
    char **hist = NULL;
    int n_hist = 0;
    if (st == PS_OK && a->history_dir) st = list_history(a, &hist, &n_hist);
    if (st == PS_OK && a->prev_dir) {
        if (a->out_dir && ps_same_file(a->prev_dir, a->out_dir))
            st = PS_FAIL(PS_ERR_INPUT, "--compare %s: that is this sweep's own folder (--out); give the previous "
                                       "night's folder", a->prev_dir);
        else
            ps_strlcpy(c->prev_dir, a->prev_dir, sizeof c->prev_dir);
    } else if (st == PS_OK && n_hist > 0) {
        snprintf(c->prev_dir, sizeof c->prev_dir, "%s/%s", a->history_dir, hist[n_hist - 1]);
    }
    if (st == PS_OK && c->prev_dir[0]) {
        const char *opt = a->prev_dir ? "--compare" : "--history";
        st = read_records(c->prev_dir, opt, &c->prev_records);
        char path[4300];
        snprintf(path, sizeof path, "%s/%s", c->prev_dir, PS_SWEEP_MANIFEST);
        if (st == PS_OK) st = read_json(path, &c->prev_manifest);
        if (st == PS_OK) {
            c->prev_only = match_records(g, c->prev_records, c->prev);
            ps_strlcpy(c->prev_created, jstr(c->prev_manifest, "created"), sizeof c->prev_created);
            /* without a manifest, the date of its first finished cell */
            if (!c->prev_created[0] && json_array_size(c->prev_records))
                ps_strlcpy(c->prev_created, jstr(json_array_get(c->prev_records, 0), "finished"),
                           sizeof c->prev_created);
            global_note(c, g);
        }
    }
    /* The trend: the last nights - 1 folders of the history (tonight is the last point), or the compared one. */
    int first = n_hist - (a->nights - 1);
    if (first < 0) first = 0;
    int want = a->history_dir ? n_hist - first : c->prev_dir[0] ? 1 : 0;
    if (st == PS_OK && want > 0 && !(c->nights = ps_calloc((size_t)want, sizeof *c->nights))) st = PS_ERR_SYSTEM;
    for (int k = 0; st == PS_OK && k < want; k++) {
        night *nt = &c->nights[k];
        json_t *recs = NULL;
        char dir[4200];
        if (a->history_dir) {
            ps_strlcpy(nt->label, hist[first + k], sizeof nt->label);
            snprintf(dir, sizeof dir, "%s/%s", a->history_dir, hist[first + k]);
        } else {
            const char *base = strrchr(c->prev_dir, '/');
            ps_strlcpy(nt->label, base && base[1] ? base + 1 : c->prev_dir, sizeof nt->label);
            ps_strlcpy(dir, c->prev_dir, sizeof dir);
        }
        const json_t **by = ps_calloc((size_t)cells + 1, sizeof *by);
        if (!(nt->sps = ps_calloc((size_t)cells + 1, sizeof *nt->sps)) || !by) st = PS_ERR_SYSTEM;
        if (st == PS_OK) st = read_records(dir, "--history", &recs);
        if (st == PS_OK) {
            match_records(g, recs, by);
            for (int i = 0; i < cells; i++) nt->sps[i] = by[i] ? rec_sps(by[i]) : NAN;
        }
        free(by);
        json_decref(recs);
        c->n_nights = k + 1;
    }
    for (int i = 0; i < n_hist; i++) free(hist[i]);
    free(hist);
    if (st != PS_OK) {
        ps_sweep_compare_free(c);
        return st == PS_ERR_SYSTEM ? PS_FAIL(PS_ERR_SYSTEM, "out of memory reading the earlier sweeps") : st;
    }
    *out = c;
    return PS_OK;
}

void ps_sweep_compare_free(ps_sweep_compare *c)
{
    if (!c) return;
    for (int k = 0; k < c->n_nights; k++) free(c->nights[k].sps);
    free(c->nights);
    free(c->prev);
    json_decref(c->prev_records);
    json_decref(c->prev_manifest);
    free(c);
}

const char *ps_sweep_compare_prev(const ps_sweep_compare *c) { return c->prev_dir; }
const char *ps_sweep_compare_prev_created(const ps_sweep_compare *c) { return c->prev_created; }
double ps_sweep_compare_threshold(const ps_sweep_compare *c) { return c->threshold; }
const char *ps_sweep_compare_inputs_note(const ps_sweep_compare *c) { return c->inputs_note; }
int ps_sweep_compare_prev_only(const ps_sweep_compare *c) { return c->prev_only; }
int ps_sweep_compare_nights(const ps_sweep_compare *c) { return c->n_nights; }
const char *ps_sweep_compare_night_label(const ps_sweep_compare *c, int k) { return c->nights[k].label; }
double ps_sweep_compare_night_sps(const ps_sweep_compare *c, int k, int cell) { return c->nights[k].sps[cell]; }

/* ---- one cell ---- */

/* The options line without its costdb=PATH token: the database is compared by content (a nightly job's database
 * has a new path every night), the rest by the line. */
static void options_sans_costdb(const char *line, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (const char *t = line; *t;) {
        while (*t == ' ') t++;
        size_t n = strcspn(t, " ");
        if (n && strncmp(t, "costdb=", 7) != 0) ps_strcatf(buf, cap, "%s%.*s", buf[0] ? " " : "", (int)n, t);
        t += n;
    }
}

/* Whether the space-separated list has the token t[0, n). */
static bool has_token(const char *list, const char *t, size_t n)
{
    for (const char *p = list; *p;) {
        while (*p == ' ') p++;
        size_t m = strcspn(p, " ");
        if (m == n && memcmp(p, t, n) == 0) return true;
        p += m;
    }
    return false;
}

/* "options gbs=64 -> gbs=128, +dp-overlap=off": the tokens of one line missing from the other. */
static void options_diff(const char *was, const char *now, char *buf, size_t cap)
{
    char a[8192], b[8192], gone[2048] = "", added[2048] = "";
    options_sans_costdb(was, a, sizeof a);
    options_sans_costdb(now, b, sizeof b);
    if (strcmp(a, b) == 0) return;
    for (int pass = 0; pass < 2; pass++) {
        const char *from = pass ? b : a, *other = pass ? a : b;
        char *dst = pass ? added : gone;
        for (const char *t = from; *t;) {
            while (*t == ' ') t++;
            size_t n = strcspn(t, " ");
            if (n && !has_token(other, t, n)) ps_strcatf(dst, 2048, "%s%.*s", dst[0] ? " " : "", (int)n, t);
            t += n;
        }
    }
    ps_strcatf(buf, cap, "%soptions %s -> %s", buf[0] ? "; " : "", gone[0] ? gone : "(none)",
               added[0] ? added : "(none)");
}

/* Whether two records' plans differ in any field the tables show. */
static bool plan_differs(const json_t *a, const json_t *b)
{
    return !json_equal(json_object_get(a, "plan"), json_object_get(b, "plan"));
}

static void cell_why(const ps_sweep_compare *c, const ps_sweep_grid *g, int cell, const json_t *was, const json_t *now,
                     char *buf, size_t cap)
{
    buf[0] = '\0';
    if (strcmp(jstr(was, "psearch"), jstr(now, "psearch")) != 0)
        ps_strcatf(buf, cap, "psearch %s -> %s", jstr(was, "psearch")[0] ? jstr(was, "psearch") : "?",
                   jstr(now, "psearch"));
    options_diff(jstr(was, "options"), jstr(now, "options"), buf, cap);
    if (!c->prev_manifest) {
        ps_strcatf(buf, cap, "%scause unknown: the previous sweep did not record its inputs (no %s)",
                   buf[0] ? "; other " : "", PS_SWEEP_MANIFEST);
        return;
    }
    const char *dw = costdb_digest(c->prev_manifest), *dn = costdb_digest(c->manifest);
    if (strcmp(dw, dn) != 0) {
        const char *path = jstr(json_object_get(c->manifest, "costdb"), "path");
        if (!dw[0]) ps_strcatf(buf, cap, "%scost database added (%s)", buf[0] ? "; " : "", path);
        else if (!dn[0]) ps_strcatf(buf, cap, "%sno cost database now", buf[0] ? "; " : "");
        else ps_strcatf(buf, cap, "%scost database %s -> %s (%s)", buf[0] ? "; " : "", dw, dn, path);
    }
    const char *model = g->models[cell / g->n_clusters], *cluster = g->clusters[cell % g->n_clusters];
    const char *mw = digest_of(c->prev_manifest, "models", model), *mn = digest_of(c->manifest, "models", model);
    if (strcmp(mw, mn) != 0) ps_strcatf(buf, cap, "%smodel file %s -> %s", buf[0] ? "; " : "", mw[0] ? mw : "?", mn);
    const char *cw = digest_of(c->prev_manifest, "clusters", cluster),
               *cn = digest_of(c->manifest, "clusters", cluster);
    /* the costdb cluster is the database's machine: its change is the database's, said above */
    if (strcmp(cw, cn) != 0 && strcmp(cluster, "costdb") != 0)
        ps_strcatf(buf, cap, "%scluster %s -> %s", buf[0] ? "; " : "", cw[0] ? cw : "?", cn);
    if (!buf[0]) ps_strcatf(buf, cap, "no recorded input differs");
}

void ps_sweep_cell_change(const ps_sweep_grid *g, int cell, ps_sweep_change *ch)
{
    memset(ch, 0, sizeof *ch);
    const ps_sweep_compare *c = g->cmp;
    const json_t *now = g->rec[cell];
    if (!c || !c->prev_dir[0] || !now) return;
    ch->compared = true;
    const json_t *was = c->prev[cell];
    ch->sps = rec_sps(now);
    if (!was) {
        ch->changed = true;
        snprintf(ch->what, sizeof ch->what, "new cell");
        snprintf(ch->why, sizeof ch->why, "not in the previous sweep");
        return;
    }
    ch->was_recorded = true;
    ch->prev_sps = rec_sps(was);
    bool ok_was = strcmp(jstr(was, "status"), "ok") == 0, ok_now = strcmp(jstr(now, "status"), "ok") == 0;
    if (ok_was && !ok_now) {
        ch->turned_infeasible = ch->changed = true;
        snprintf(ch->what, sizeof ch->what, "INFEASIBLE now");
    } else if (!ok_was && ok_now) {
        ch->became_feasible = ch->changed = true;
        snprintf(ch->what, sizeof ch->what, "feasible now");
    } else if (ok_was && ok_now) {
        ch->plan_changed = plan_differs(was, now);
        ch->rel = ch->prev_sps > 0 ? ch->sps / ch->prev_sps - 1 : 0;
        /* the record keeps samples/s to its JSON's precision, tonight's is the computed double: the same number */
        if (fabs(ch->rel) < 1e-9) ch->rel = 0;
        bool moved = fabs(ch->rel) > c->threshold;
        ch->changed = ch->plan_changed || moved;
        char pct[32];
        snprintf(pct, sizeof pct, "%+.1f%%", 100 * ch->rel);
        if (ch->plan_changed) snprintf(ch->what, sizeof ch->what, "plan, %s", pct);
        else if (moved) snprintf(ch->what, sizeof ch->what, "%s", pct);
        else if (fabs(ch->rel) < 5e-4) snprintf(ch->what, sizeof ch->what, "same"); /* rounds to +-0.0% */
        else snprintf(ch->what, sizeof ch->what, "same, %s", pct);
    } else {
        snprintf(ch->what, sizeof ch->what, "still infeasible");
    }
    cell_why(c, g, cell, was, now, ch->why, sizeof ch->why);
}

/* Plan tables of a sweep (cli-internal): Markdown, CSV and an HTML page (linking each plan's timeline in
 * DIR/timelines) rendered from the sweep's records, so a table always shows exactly what cells.jsonl holds. */
#ifndef PS_SWEEP_TABLES_H
#define PS_SWEEP_TABLES_H

#include "ps_common.h"
#include "ps_cost.h"
#include <jansson.h>

typedef struct ps_sweep_compare ps_sweep_compare;

/* The grid a sweep covers, in the order its tables list it: models (one table each) x clusters (rows). */
typedef struct {
    char **models;
    int n_models;
    char **clusters;
    int n_clusters;
    char **options;      /* [n_clusters]: the search options the cells of each cluster ran with, as recorded */
    const json_t **rec;  /* [n_models * n_clusters], cell mi * n_clusters + ci: its record (borrowed from the sweep's
                            log, which keeps every record it read or appended), NULL while the cell is not done */
    int n_done;          /* cells with a record */
    unsigned char *timeline_missing; /* [cells]: recorded with a plan whose timeline file is gone (the page says so) */
    const ps_sweep_compare *cmp;     /* --compare / --history (sweep_compare.c): what changed since an earlier sweep,
                                        and each cell's trend over the kept nights; NULL without them */
} ps_sweep_grid;

/* The folder of DIR holding each planned cell's schedule timeline. */
#define PS_SWEEP_TIMELINES "timelines"

/* The record key of a cell: model and cluster as the user named them. */
void ps_sweep_cell_key(const char *model, const char *cluster, char *buf, size_t cap);
/* Where the timeline of the cell with record key `key` goes, relative to DIR: timelines/<key made safe>-<hash>.svg.
 * The record keeps it ("timeline_svg"), so the tables link what was written. */
void ps_sweep_timeline_name(const char *key, char *buf, size_t cap);
/* The string field `key` of a record, "" when absent. */
const char *ps_sweep_str(const json_t *rec, const char *key);

/* Which strategy fields differ between the plan's layers, into buf: degrees as their range ("tp 2-4"), ZeRO stages
 * and names as the values taken, in order ("zero 0/3", "ckpt none/full"), "; " between fields, no comma (a CSV field
 * unquoted); "" for a uniform plan. PS_ERR_SYSTEM when out of memory. */
ps_status ps_sweep_plan_varies(const ps_plan *p, int64_t n_layers, char *buf, size_t cap) PS_NODISCARD;

/* Re-render dir/plans.md, dir/plans.csv and dir/index.html from the records, each written atomically (temporary +
 * rename), so a kill at any moment leaves either the previous or the new version of each table. */
ps_status ps_sweep_render(const char *dir, const ps_sweep_grid *g) PS_NODISCARD;
/* Remove the temporaries a kill during a render or a timeline's write left (the files themselves are whole), so a
 * resumed sweep's folder holds only what it publishes. */
void ps_sweep_remove_temporaries(const char *dir);

/* ---- what changed since an earlier sweep (cli/sweep_compare.c, docs/nightly.md) ---- */

/* The manifest of a sweep folder (DIR/sweep.json): the inputs every record of the folder was searched with, by
 * content digest, so a later sweep's --compare can say why a cell changed. */
#define PS_SWEEP_MANIFEST "sweep.json"
/* The comparison's own table, beside plans.md, plans.csv and index.html. */
#define PS_SWEEP_CHANGES "changes.json"
/* Default of --change-threshold [percent of the predicted samples/s]. */
#define PS_SWEEP_THRESHOLD_PCT 2.0
/* Default of --nights: the nights a trend shows, tonight included. */
#define PS_SWEEP_NIGHTS 14
/* Most nights a trend draws (--nights at most this). */
#define PS_SWEEP_NIGHTS_MAX 366

/* How one cell differs from the compared sweep. */
typedef struct {
    bool compared;      /* a previous sweep is compared (else nothing below is set) */
    bool changed;       /* the best plan changed, the samples/s moved more than the threshold, or feasibility flipped */
    bool was_recorded;  /* the previous sweep has this cell */
    bool plan_changed;  /* both feasible, plans differ */
    bool turned_infeasible, became_feasible;
    double prev_sps, sps; /* predicted samples/s, 0 when infeasible */
    double rel;           /* sps / prev_sps - 1, when both are feasible */
    char what[160];       /* "plan, +3.1%", "INFEASIBLE now", "feasible now", "+5.0%", "same", "new cell" */
    char why[1200];       /* the inputs that differ for this cell, "; "-separated, or why that is unknown */
} ps_sweep_change;

/* The change of grid cell `cell` (mi * n_clusters + ci); c->compared false without a previous sweep, or while the
 * cell has no record yet. */
void ps_sweep_cell_change(const ps_sweep_grid *g, int cell, ps_sweep_change *c);
/* Digest (16 hex digits) of n bytes, as the manifest writes them. */
void ps_sweep_digest(const void *data, size_t n, char out[17]);
/* The same of a file's whole content, read in pieces (any size). PS_ERR_INPUT naming it when it cannot be read. */
ps_status ps_sweep_file_digest(const char *path, char out[17]) PS_NODISCARD;
/* The manifest of this sweep: psearch's version, the cost database's path and digest (costdb NULL: none), each
 * model's and cluster's digest by the name the lists give (model_digest[i], cluster_digest[k]), each cluster's
 * options line. NULL when out of memory. */
json_t *ps_sweep_manifest_new(const ps_sweep_grid *g, char (*model_digest)[17], char (*cluster_digest)[17],
                              const char *costdb, const char *costdb_digest);
/* Write dir/sweep.json atomically. With records already in the folder (a resume), an existing manifest must name
 * the same inputs: PS_ERR_INPUT naming the input that changed, as --resume refuses other options. */
ps_status ps_sweep_manifest_write(const char *dir, const json_t *manifest, int n_records) PS_NODISCARD;

/* What --compare and --history ask for. */
typedef struct {
    const char *prev_dir;    /* --compare PREV_DIR, or NULL */
    const char *history_dir; /* --history DIR, or NULL */
    int nights;              /* --nights N (tonight included) */
    double threshold_pct;    /* --change-threshold PCT */
    const char *out_dir;     /* this sweep's folder: never its own previous night */
} ps_sweep_compare_args;

/* Rank 0, before the sweep's folder is touched: read the previous sweep's records and manifest (PREV_DIR, or the
 * newest folder of the history) and each kept night's records. `manifest` is this sweep's (borrowed: it outlives the
 * comparison). PS_ERR_INPUT naming PREV_DIR or the history folder when it is not a sweep folder. */
ps_status ps_sweep_compare_open(const ps_sweep_compare_args *a, const ps_sweep_grid *g, const json_t *manifest,
                                ps_sweep_compare **out) PS_NODISCARD;
void ps_sweep_compare_free(ps_sweep_compare *c);
/* For the tables: the previous folder ("" when none), its date, the threshold [fraction], the global note on the
 * inputs that differ, the previous cells the grid no longer lists. */
const char *ps_sweep_compare_prev(const ps_sweep_compare *c);
const char *ps_sweep_compare_prev_created(const ps_sweep_compare *c);
double ps_sweep_compare_threshold(const ps_sweep_compare *c);
const char *ps_sweep_compare_inputs_note(const ps_sweep_compare *c);
int ps_sweep_compare_prev_only(const ps_sweep_compare *c);
/* The trend of a cell: the kept nights' samples/s, oldest first (NAN: not searched that night; 0: infeasible),
 * tonight's not included; their labels (folder names). */
int ps_sweep_compare_nights(const ps_sweep_compare *c);
const char *ps_sweep_compare_night_label(const ps_sweep_compare *c, int night);
double ps_sweep_compare_night_sps(const ps_sweep_compare *c, int night, int cell);

#endif

/* Plan tables of a sweep (cli-internal): Markdown, CSV and an HTML page (linking each plan's timeline in
 * DIR/timelines) rendered from the sweep's records, so a table always shows exactly what cells.jsonl holds. */
#ifndef PS_SWEEP_TABLES_H
#define PS_SWEEP_TABLES_H

#include "ps_common.h"
#include "ps_cost.h"
#include <jansson.h>

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

#endif

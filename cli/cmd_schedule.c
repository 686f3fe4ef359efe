/* `psearch schedule`: build a pipeline schedule, simulate it with given pass times, print makespan, bubble and
 * per-device peak activation memory, and draw the timeline as SVG. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_schedules.h"

/* "1,2,1" -> three positive-or-zero numbers. */
static ps_status parse_fbw(const char *s, double fbw[3])
{
    char buf[128];
    ps_strlcpy(buf, s, sizeof buf);
    char *save = NULL, *tok = strtok_r(buf, ",", &save);
    int n = 0;
    for (; tok && n < 3; tok = strtok_r(NULL, ",", &save), n++)
        if (!ps_parse_double(tok, &fbw[n]) || fbw[n] < 0)
            return PS_FAIL(PS_ERR_INPUT, "option --fbw: '%s' is not a time >= 0 (expected F,B,W such as 1,1,1)", tok);
    if (n != 3 || tok)
        return PS_FAIL(PS_ERR_INPUT, "option --fbw needs three times F,B,W (got '%s')", s);
    if (!(fbw[0] > 0) || !(fbw[1] > 0))
        return PS_FAIL(PS_ERR_INPUT, "option --fbw: F and B must be > 0 (got '%s')", s);
    return PS_OK;
}

/* --times FILE: one line per stage (d x v lines, stage order), "F B W [ACT]", '#' comments. */
static ps_status read_times(const char *path, int stages, double *f, double *b, double *w, double *act)
{
    char *text = NULL;
    PS_TRY(ps_read_file(path, &text, NULL));
    int line = 0, got = 0;
    ps_status st = PS_OK;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && st == PS_OK; l = strtok_r(NULL, "\n", &save)) {
        line++;
        char *hash = strchr(l, '#');
        if (hash) *hash = '\0';
        double v[4] = {0, 0, 0, 1};
        int n = 0;
        char *s2 = NULL;
        for (char *tok = strtok_r(l, " \t\r", &s2); tok; tok = strtok_r(NULL, " \t\r", &s2)) {
            if (n == 4 || !ps_parse_double(tok, &v[n]) || v[n] < 0) {
                st = PS_FAIL(PS_ERR_INPUT, "%s:%d: '%s': expected F B W [ACT], times >= 0", path, line, tok);
                break;
            }
            n++;
        }
        if (st != PS_OK || n == 0) continue;
        if (n < 3) st = PS_FAIL(PS_ERR_INPUT, "%s:%d: expected F B W [ACT] (got %d numbers)", path, line, n);
        else if (got == stages)
            st = PS_FAIL(PS_ERR_INPUT, "%s:%d: more than the %d stages (devices x chunks) of this schedule", path,
                         line, stages);
        else if (!(v[0] > 0) || !(v[1] > 0))
            st = PS_FAIL(PS_ERR_INPUT, "%s:%d: F and B must be > 0", path, line);
        else {
            f[got] = v[0];
            b[got] = v[1];
            w[got] = v[2];
            act[got] = v[3];
            got++;
        }
    }
    free(text);
    PS_TRY(st);
    if (got != stages)
        return PS_FAIL(PS_ERR_INPUT, "%s: %d stage lines, the schedule has %d stages (devices x chunks)", path, got,
                       stages);
    return PS_OK;
}

static const char *op_name(int op)
{
    static const char *n[] = {"F", "B", "W", "BW"};
    return op >= 0 && op < 4 ? n[op] : "?";
}

ps_status ps_cmd_schedule(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    (void)comm; /* runs on this process alone */
    if (!o->sched_kind) {
        char known[512] = "";
        for (int i = 0; i < ps_sched_kind_count(); i++)
            ps_strcatf(known, sizeof known, "%s%s", i ? ", " : "", ps_sched_kind_name(i));
        return PS_FAIL(PS_ERR_INPUT, "psearch schedule needs --kind (one of: %s)", known);
    }
    if (o->fbw && o->times) return PS_FAIL(PS_ERR_INPUT, "give --fbw or --times, not both");
    int d = o->stages ? (int)o->stages : 4, n = o->micro ? (int)o->micro : 4 * d;
    if (o->stages > 100000 || o->micro > 10000000)
        return PS_FAIL(PS_ERR_INPUT, "--stages %lld / --micro %lld: too large for a schedule to print",
                       (long long)o->stages, (long long)o->micro);
    ps_sched *s = NULL;
    double *buf = NULL;
    char *svg = NULL;
    ps_status st = PS_OK;
    PS_TRY(ps_sched_create(&s));
    PS_TRY_GOTO(st, ps_sched_build(s, o->sched_kind, d, n, o->vpp ? (int)o->vpp : 0), done);
    int v = ps_sched_chunks(s), S = ps_sched_stages(s);
    buf = ps_calloc((size_t)S * 4 + 1, sizeof *buf);
    if (!buf) {
        st = PS_ERR_SYSTEM;
        goto done;
    }
    double *f = buf, *b = f + S, *w = b + S, *act = w + S;
    if (o->times) {
        PS_TRY_GOTO(st, read_times(o->times, S, f, b, w, act), done);
    } else {
        /* --fbw: one micro-batch's passes over a device's whole share of layers; v chunks split it evenly, so every
         * kind does the same work and peaks count in micro-batches of a whole device share. */
        double fbw[3] = {1, 1, 1};
        if (o->fbw) PS_TRY_GOTO(st, parse_fbw(o->fbw, fbw), done);
        for (int i = 0; i < S; i++) {
            f[i] = fbw[0] / v;
            b[i] = fbw[1] / v;
            w[i] = fbw[2] / v;
            act[i] = 1.0 / v;
        }
    }
    ps_sched_costs costs = {.f = f, .b = b, .w = w, .act = act};
    ps_sched_result r;
    PS_TRY_GOTO(st, ps_sched_simulate(s, &costs, &r), done);

    if (o->svg) {
        size_t len = 0;
        /* the rows are the schedule's devices ("dev i"); the times are in the units the user gave */
        ps_sched_svg_opts so = {.time_label = o->times ? "time (units of --times)" : "time (units of --fbw)"};
        PS_TRY_GOTO(st, ps_sched_svg(s, &r, &so, &svg, &len), done);
        PS_TRY_GOTO(st, ps_write_file_atomic(o->svg, svg, len), done);
    }
    if (o->format == PS_FMT_JSON) {
        json_t *j = json_object(), *devs = json_array();
        json_object_set_new(j, "kind", json_string(o->sched_kind));
        json_object_set_new(j, "devices", json_integer(d));
        json_object_set_new(j, "micro_batches", json_integer(n));
        json_object_set_new(j, "chunks", json_integer(v));
        json_object_set_new(j, "makespan", json_real(r.makespan));
        json_object_set_new(j, "bubble_frac", json_real(r.bubble_frac));
        for (int i = 0; i < d; i++) {
            json_t *dj = json_pack("{s:f, s:f, s:f}", "busy", r.busy[i], "idle", r.idle[i], "peak_act", r.peak_act[i]);
            if (o->passes) {
                int64_t cnt = 0, off = ps_sched_pass_offset(s, i);
                const ps_sched_pass *ps = ps_sched_device_passes(s, i, &cnt);
                json_t *pa = json_array();
                for (int64_t k = 0; k < cnt; k++)
                    json_array_append_new(pa, json_pack("{s:s, s:i, s:i, s:f, s:f}", "op", op_name(ps[k].op), "mb",
                                                        (int)ps[k].mb, "chunk", (int)ps[k].chunk, "start",
                                                        r.start[off + k], "end", r.end[off + k]));
                json_object_set_new(dj, "passes", pa);
            }
            json_array_append_new(devs, dj);
        }
        json_object_set_new(j, "per_device", devs);
        json_object_set_new(j, "units", json_string(o->times ? "times as in --times; peak_act in its ACT units"
                                                             : "times in units of --fbw; peak_act in micro-batches "
                                                               "of one device's whole share of layers"));
        PS_TRY_GOTO(st, ps_out_json(out, j), done);
    } else {
        fprintf(out->f, "# psearch schedule: %s, %d devices, %d micro-batches, %d chunk(s) per device\n",
                o->sched_kind, d, n, v);
        fprintf(out->f, "makespan  %.6g    bubble %.2f%%    (%s)\n", r.makespan, 100 * r.bubble_frac,
                o->times ? "times of --times" : "units of --fbw");
        fprintf(out->f, "\n%6s %12s %12s %14s\n", "device", "busy", "idle", "peak act");
        for (int i = 0; i < d; i++)
            fprintf(out->f, "%6d %12.6g %12.6g %14.4g\n", i, r.busy[i], r.idle[i], r.peak_act[i]);
        fprintf(out->f,
                "(peak act: activations held at once, counted from each micro-batch's F start to its W end;%s)\n",
                o->times ? " in the ACT units of --times" : " in micro-batches of a device's whole share of layers");
    }
done:
    free(svg);
    free(buf);
    ps_sched_destroy(s);
    return st;
}

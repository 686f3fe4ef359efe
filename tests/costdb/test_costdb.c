/* The cost database: write tables, read them back unchanged; the interpolation is exact at table points and stays
 * between neighbours; the cost model uses the tables for the devices they measured and is untouched without them;
 * newer, incomplete and foreign files are refused with a message naming the file; schema-1 files still read;
 * executed plans appended atomically (a write failing midway leaves the file and no temporary), the refit of
 * compute_scale / comm_scale exact on known rows, and its fit applied on attach (--costdb's attach in cli/ rolled
 * back whole when an override fails).
 * `test_costdb --make-bad DIR GOOD.h5` writes the bad files the CLI catalogue (tests/cli/costdb.sh) needs and that no
 * shell tool can make: a newer schema_version and a missing group.
 * `test_costdb --add-measurements DB.h5` appends three executed plans (what `psearch exec --record` would) for the
 * first device of DB.h5 (cpu:test when it does not exist): computation measured 2x, communication 0.5x the
 * prediction (medians), for the CLI test of `calibrate --from-measurements`. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "cli.h"
#include "ps_costdb.h"

static char g_dir[256];

static void path_in(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_dir, name); }

/* A small database: one CPU kind on 1 node x 2 ranks; GEMM rates rising with FLOPs; all-reduce on 2 ranks. */
static void make_db(ps_costdb *db)
{
    memset(db, 0, sizeof *db);
    ps_costdb_prov_init(&db->prov, "cpu", "quick");
    db->prov.n_nodes = 1;
    db->prov.n_ranks = 2;
    ps_strlcpy(db->prov.hosts, "h0", sizeof db->prov.hosts);
    ps_strlcpy(db->prov.devices, "cpu:test", sizeof db->prov.devices);
    db->n_dev = 2;
    db->dev = calloc(2, sizeof *db->dev);
    for (int r = 0; r < 2; r++) {
        ps_bench_device *d = &db->dev[r];
        d->rank = r;
        d->local_rank = r;
        d->threads = 1;
        ps_strlcpy(d->host, "h0", sizeof d->host);
        ps_strlcpy(d->kind, "cpu", sizeof d->kind);
        ps_strlcpy(d->name, "cpu:test", sizeof d->name);
        ps_strlcpy(d->model, "Test CPU", sizeof d->model);
        d->mem_bytes = 8.0 * (1 << 30);
        d->peak_fp32_flops = 1e11;
        d->mem_Bps = 2e10;
    }
    /* rates 1e9, 1e10, 1e11 FLOP/s at 1e6, 1e8, 1e10 FLOPs (rank 0); rank 1 the same: medians are exact */
    db->n_gemm = 6;
    db->gemm = calloc(6, sizeof *db->gemm);
    for (int i = 0; i < 6; i++) {
        ps_bench_gemm *g = &db->gemm[i];
        g->rank = i / 3;
        ps_strlcpy(g->dtype, "fp32", sizeof g->dtype);
        ps_strlcpy(g->op, "grid", sizeof g->op);
        g->m = g->n = g->k = 100 * (int64_t)pow(10, i % 3);
        g->batch = 1;
        g->flops = 1e6 * pow(100, i % 3);
        g->flops_per_s = 1e9 * pow(10, i % 3);
        g->time_s = g->flops / g->flops_per_s;
        g->reps = 5;
    }
    db->n_bw = 2;
    db->bw = calloc(2, sizeof *db->bw);
    for (int r = 0; r < 2; r++) {
        db->bw[r] = (ps_bench_bw){.rank = r, .threads = 1, .bytes = 1e8, .time_s = 1e8 / 2e10, .Bps = 2e10, .reps = 5};
        ps_strlcpy(db->bw[r].method, "triad", sizeof db->bw[r].method);
    }
    /* all-reduce on 2 ranks: busbw 1, 4, 8 GB/s at 1 KiB, 64 KiB, 1 MiB */
    static const double sz[3] = {1024, 65536, 1048576}, bb[3] = {1e9, 4e9, 8e9};
    db->n_coll = 3;
    db->coll = calloc(3, sizeof *db->coll);
    for (int i = 0; i < 3; i++) {
        ps_bench_coll *c = &db->coll[i];
        ps_strlcpy(c->op, "allreduce", sizeof c->op);
        c->group_size = 2;
        c->n_groups = 1;
        c->bytes = sz[i];
        c->busbw_Bps = bb[i];
        c->algbw_Bps = bb[i]; /* factor 2(n-1)/n = 1 for n = 2 */
        c->time_s = sz[i] / bb[i];
        c->reps = 5;
    }
    db->n_ovl = 2;
    db->ovl = calloc(2, sizeof *db->ovl);
    for (int r = 0; r < 2; r++)
        db->ovl[r] = (ps_bench_overlap){.rank = r, .gemm_s = 1, .comm_s = 1, .both_s = 1.2, .gemm_flops = 1e9,
                                        .comm_bytes = 1e6, .slowdown = 1.2, .reps = 5};
}

static void test_round_trip(void **state)
{
    (void)state;
    ps_costdb a, b;
    make_db(&a);
    char p[512];
    path_in(p, sizeof p, "rt.h5");
    assert_int_equal(ps_costdb_write(p, &a), PS_OK);
    assert_int_equal(ps_costdb_read(p, &b), PS_OK);
    assert_int_equal(b.prov.schema_version, PS_COSTDB_SCHEMA_VERSION);
    assert_string_equal(b.prov.devices, "cpu:test");
    assert_int_equal(b.n_dev, 2);
    assert_int_equal(b.n_gemm, 6);
    assert_int_equal(b.n_coll, 3);
    assert_int_equal(b.n_meas, 0);
    assert_int_equal(b.n_bw, 2);
    assert_int_equal(b.n_ovl, 2);
    assert_memory_equal(a.dev, b.dev, 2 * sizeof *a.dev);
    assert_memory_equal(a.gemm, b.gemm, 6 * sizeof *a.gemm);
    assert_memory_equal(a.bw, b.bw, 2 * sizeof *a.bw);
    assert_memory_equal(a.coll, b.coll, 3 * sizeof *a.coll);
    assert_memory_equal(a.ovl, b.ovl, 2 * sizeof *a.ovl);
    /* the provenance, every attribute */
    assert_int_equal(b.prov.n_nodes, a.prov.n_nodes);
    assert_int_equal(b.prov.n_ranks, a.prov.n_ranks);
    const struct {
        const char *a, *b;
    } strs[] = {{a.prov.psearch_version, b.prov.psearch_version}, {a.prov.created, b.prov.created},
                {a.prov.hosts, b.prov.hosts},       {a.prov.devices, b.prov.devices},
                {a.prov.mpi_version, b.prov.mpi_version}, {a.prov.hdf5_version, b.prov.hdf5_version},
                {a.prov.cuda_version, b.prov.cuda_version}, {a.prov.nccl_version, b.prov.nccl_version},
                {a.prov.backend, b.prov.backend},   {a.prov.mode, b.prov.mode},
                {a.prov.merged_from, b.prov.merged_from}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) assert_string_equal(strs[i].a, strs[i].b);
    assert_true(a.prov.created[0] && a.prov.hdf5_version[0] && strcmp(a.prov.backend, "cpu") == 0);
    /* no temporary left beside it */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/.rt.h5.tmp-%ld", g_dir, (long)getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);
    ps_costdb_free(&a);
    ps_costdb_free(&b);
}

/* The database of make_db and its interpolation tables, for the tests that use both. */
typedef struct {
    ps_costdb db;
    ps_costdb_model *m;
} db_fixture;

static int setup_db(void **state)
{
    db_fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    make_db(&f->db);
    if (ps_costdb_model_build(&f->db, &f->m) != PS_OK) {
        ps_costdb_free(&f->db);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown_db(void **state)
{
    db_fixture *f = *state;
    ps_costdb_model_free(f->m);
    ps_costdb_free(&f->db);
    free(f);
    return 0;
}

static void test_interpolation(void **state)
{
    db_fixture *fx = *state;
    const ps_costdb db = fx->db;
    const ps_costdb_model *m = fx->m;
    int k = ps_costdb_model_device(m, "cpu:test");
    assert_int_equal(k, 0);
    assert_int_equal(ps_costdb_model_device(m, "a100-80g"), -1);
    /* exact at table points */
    for (int i = 0; i < 3; i++)
        assert_true(fabs(ps_costdb_model_gemm_rate(m, k, PS_DTYPE_FP32, 1e6 * pow(100, i)) - 1e9 * pow(10, i)) <
                    1e-6 * 1e9 * pow(10, i));
    /* monotone between them (the table rises), log-log: halfway in log FLOPs is halfway in log rate */
    double prev = 0;
    for (double f = 1e6; f <= 1e10; f *= 1.3) {
        double r = ps_costdb_model_gemm_rate(m, k, PS_DTYPE_FP32, f);
        assert_true(r >= prev);
        prev = r;
    }
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, PS_DTYPE_FP32, 1e7) - sqrt(1e9 * 1e10)) < 1e-3 * 3.2e9);
    /* beyond the ends: the end rates; no such dtype: negative */
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, PS_DTYPE_FP32, 1e3) - 1e9) < 1);
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, PS_DTYPE_FP32, 1e13) - 1e11) < 1);
    assert_true(ps_costdb_model_gemm_rate(m, k, PS_DTYPE_BF16, 1e8) < 0);
    /* collectives: exact time at table points, latency floor below, constant busbw above, nearest group size */
    for (int i = 0; i < 3; i++)
        assert_true(fabs(ps_costdb_model_coll_time(m, k, PS_COLL_ALLREDUCE, 2, false, db.coll[i].bytes) -
                         db.coll[i].time_s) < 1e-9 * db.coll[i].time_s);
    assert_true(fabs(ps_costdb_model_coll_time(m, k, PS_COLL_ALLREDUCE, 2, false, 10) - db.coll[0].time_s) < 1e-15);
    assert_true(fabs(ps_costdb_model_coll_time(m, k, PS_COLL_ALLREDUCE, 2, false, 1048576.0 * 4) -
                     4 * db.coll[2].time_s) < 1e-9);
    double prevt = 0;
    for (double b = 1024; b <= 1048576; b *= 1.5) {
        double t = ps_costdb_model_coll_time(m, k, PS_COLL_ALLREDUCE, 2, false, b);
        assert_true(t >= prevt);
        prevt = t;
    }
    /* 4 ranks use the 2-rank busbw with the 4-rank factor 2(n-1)/n = 1.5 */
    assert_true(fabs(ps_costdb_model_coll_time(m, k, PS_COLL_ALLREDUCE, 4, false, 1048576) - 1.5 * 1048576 / 8e9) <
                1e-12);
    assert_true(ps_costdb_model_coll_time(m, k, PS_COLL_ALLREDUCE, 2, true, 1024) < 0); /* no across-node rows */
    assert_true(ps_costdb_model_coll_time(m, k, PS_COLL_ALLTOALL, 2, false, 1024) < 0);
    assert_true(fabs(ps_costdb_model_mem_Bps(m, k) - 2e10) < 1);
    assert_true(fabs(ps_costdb_model_overlap(m, k) - 1.2) < 1e-12);
}

static void test_cost_model(void **state)
{
    db_fixture *fx = *state;
    const ps_costdb db = fx->db;
    ps_costdb_model *m = fx->m;
    ps_cluster cal, dgx;
    assert_int_equal(ps_costdb_cluster(&db, &cal), PS_OK);
    assert_int_equal(cal.n_gpus, 2);
    assert_string_equal(cal.groups[0].gpu.name, "cpu:test");
    assert_true(cal.groups[0].gpu.fp16_flops == 0); /* no fp16 measured: fp16 plans are refused */
    assert_int_equal(ps_cluster_load("dgx-a100-80g:1", &dgx), PS_OK);

    ps_cost_params an, with;
    ps_cost_params_default(&an);
    ps_cost_params_default(&with);
    assert_null(an.db);
    /* another device kind is refused, naming the file and the kinds */
    assert_int_equal(ps_costdb_attach(m, &dgx, NULL, 0, &with), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "another device kind"));
    assert_null(with.db);
    assert_string_equal(ps_costdb_model_note(m), "");
    assert_int_equal(ps_costdb_attach(m, &cal, NULL, 0, &with), PS_OK);
    assert_ptr_equal(with.db, m);
    char want[160];
    snprintf(want, sizeof want, "measured tables for node group(s): %s", cal.groups[0].name);
    assert_string_equal(ps_costdb_model_note(m), want);
    assert_true(fabs(with.overlap_slowdown - 1.2) < 1e-12);

    /* the tables decide: a 2-rank all-reduce of 64 KiB takes the measured time, the analytic one does not */
    ps_group g = {0, 2, 1};
    assert_true(fabs(ps_coll_allreduce(&with, &cal, &g, 65536) - 65536 / 4e9) < 1e-15);
    assert_true(fabs(ps_coll_allreduce(&an, &cal, &g, 65536) - 65536 / 4e9) > 1e-9);
    assert_true(fabs(ps_cost_stream_Bps(&with, &cal.groups[0].gpu) - 2e10) < 1);

    /* a layer in fp32: GEMMs from the measured rates, no kernel launch term */
    ps_model mdl;
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.dtype = PS_DTYPE_FP32;
    assert_int_equal(ps_model_load("gpt3-1.3b", &mo, &mdl), PS_OK);
    ps_strategy s = {.tp = 1, .dp = 2};
    ps_layer_cost ca, cw;
    assert_int_equal(ps_cost_layer(&an, &cal, &mdl.layers[1], PS_DTYPE_FP32, 1, &s, 0, &ca), PS_OK);
    assert_int_equal(ps_cost_layer(&with, &cal, &mdl.layers[1], PS_DTYPE_FP32, 1, &s, 0, &cw), PS_OK);
    assert_true(cw.fwd > 0 && isfinite(cw.fwd));
    assert_true(fabs(cw.fwd - ca.fwd) > 1e-6 * ca.fwd);
    /* one GEMM priced by the table: an LM head cut down so that its (T x V x h) GEMM falls between table points;
     * its weight-gradient time (no ZeRO) is that GEMM alone: F / rate(F) (compute-bound: its operands stream in
     * 4 (Th + hV + TV) / 2e10 = 26 us) */
    ps_layer head = mdl.layers[mdl.n_layers - 1];
    assert_int_equal(head.kind, PS_LAYER_LM_HEAD);
    head.seq = 64;
    head.hidden = 64;
    head.vocab = 1000;
    double F = 2.0 * 64 * 1000 * 64, rate = ps_costdb_model_gemm_rate(m, 0, PS_DTYPE_FP32, F);
    assert_true(rate > 1e9 && rate < 1e10); /* interpolated, not an end of the table */
    ps_layer_cost hw, ha;
    assert_int_equal(ps_cost_layer(&with, &cal, &head, PS_DTYPE_FP32, 1, &s, 0, &hw), PS_OK);
    assert_int_equal(ps_cost_layer(&an, &cal, &head, PS_DTYPE_FP32, 1, &s, 0, &ha), PS_OK);
    assert_true(fabs(hw.bwd_w - F / rate) < 1e-12 * (F / rate));
    assert_true(fabs(ha.bwd_w - F / rate) > 1e-6 * (F / rate));
    /* the analytic path on the dgx cluster is what it was: a db that measured other devices changes nothing */
    ps_cost_params other = an;
    other.db = m;
    ps_layer_cost da, dw;
    assert_int_equal(ps_cost_layer(&an, &dgx, &mdl.layers[1], PS_DTYPE_BF16, 1, &s, 0, &da), PS_OK);
    assert_int_equal(ps_cost_layer(&other, &dgx, &mdl.layers[1], PS_DTYPE_BF16, 1, &s, 0, &dw), PS_OK);
    assert_memory_equal(&da, &dw, sizeof da);
    ps_model_free(&mdl);
    ps_cluster_free(&cal);
    ps_cluster_free(&dgx);
}

/* Fused attention rows (calibrate's attn_fwd / attn_bwd, schema 3) appended to db: on both ranks, forward and
 * backward, at head widths 16 and 64 (and 128 when flat), at 1e7 and 1e9 FLOPs; forward rates 1e9 / 2e9 (hd 16) and
 * 4e9 / 8e9 (hd 64) times `scale`, the backward twice those; flat: one rate `scale` x 1e9 everywhere (the backward
 * twice). */
static void add_attn_rows(ps_costdb *db, double scale, bool flat, bool with_bwd)
{
    static const int64_t hds[3] = {16, 64, 128};
    size_t n0 = db->n_gemm, add = 2 * 3 * 2 * 2;
    db->gemm = realloc(db->gemm, (n0 + add) * sizeof *db->gemm);
    size_t n = n0;
    for (int r = 0; r < 2; r++)
        for (int h = 0; h < 3; h++)
            for (int bwd = 0; bwd < (with_bwd ? 2 : 1); bwd++)
                for (int f = 0; f < 2; f++) {
                    if (!flat && h == 2) continue;
                    ps_bench_gemm *g = &db->gemm[n++];
                    memset(g, 0, sizeof *g);
                    g->rank = r;
                    ps_strlcpy(g->dtype, "fp32", sizeof g->dtype);
                    ps_strlcpy(g->op, bwd ? PS_BENCH_OP_ATTN_BWD : PS_BENCH_OP_ATTN_FWD, sizeof g->op);
                    g->m = g->n = 256;
                    g->k = hds[h];
                    g->batch = 8;
                    g->flops = f ? 1e9 : 1e7;
                    double rate = flat ? 1e9 : (h == 0 ? 1e9 : 4e9) * (f ? 2 : 1);
                    g->flops_per_s = rate * scale * (bwd ? 2 : 1);
                    g->time_s = g->flops / g->flops_per_s;
                    g->reps = 5;
                }
    db->n_gemm = n;
}

/* The fused attention kernel's rows: curves of their own per pass and head width, never in the GEMM curves; a device
 * with them has a fused kernel (--cluster costdb) and its fused layers are priced from them. */
static void test_attention_rows(void **state)
{
    (void)state;
    ps_costdb db;
    make_db(&db);
    add_attn_rows(&db, 1, false, true);
    ps_costdb_model *m;
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    int k = ps_costdb_model_device(m, "cpu:test");
    /* the GEMM curve is the fixture's alone (test_interpolation's table points) */
    for (int i = 0; i < 3; i++)
        assert_true(fabs(ps_costdb_model_gemm_rate(m, k, PS_DTYPE_FP32, 1e6 * pow(100, i)) - 1e9 * pow(10, i)) <
                    1e-6 * 1e9 * pow(10, i));
    /* and between them (attention rows sit at 1e7 and 1e9 FLOPs: mixed in, they would move this) */
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, PS_DTYPE_FP32, 1e7) - sqrt(1e9 * 1e10)) < 1e-3 * 3.2e9);
    assert_true(ps_costdb_model_has_attn(m, k));
    /* along a head width's curve: exact at its points, log-log between (1e8 halfway: sqrt(1e9 x 2e9)) */
    assert_true(fabs(ps_costdb_model_attn_rate(m, k, PS_DTYPE_FP32, false, 16, 1e7) - 1e9) < 1);
    assert_true(fabs(ps_costdb_model_attn_rate(m, k, PS_DTYPE_FP32, false, 64, 1e9) - 8e9) < 8);
    assert_true(fabs(ps_costdb_model_attn_rate(m, k, PS_DTYPE_FP32, false, 16, 1e8) - sqrt(2e18)) < 2);
    assert_true(fabs(ps_costdb_model_attn_rate(m, k, PS_DTYPE_FP32, true, 64, 1e7) - 8e9) < 8);
    /* between head widths log-log in the width (32: halfway from 16 to 64), beyond them the nearest width's */
    assert_true(fabs(ps_costdb_model_attn_rate(m, k, PS_DTYPE_FP32, false, 32, 1e7) - 2e9) < 2);
    assert_true(fabs(ps_costdb_model_attn_rate(m, k, PS_DTYPE_FP32, false, 8, 1e9) - 2e9) < 2);
    assert_true(fabs(ps_costdb_model_attn_rate(m, k, PS_DTYPE_FP32, false, 256, 1e7) - 4e9) < 4);
    /* no such dtype or device: not timed */
    assert_true(ps_costdb_model_attn_rate(m, k, PS_DTYPE_BF16, false, 64, 1e8) < 0);
    assert_true(ps_costdb_model_attn_rate(m, 7, PS_DTYPE_FP32, false, 64, 1e8) < 0);
    ps_cluster cal;
    assert_int_equal(ps_costdb_cluster(&db, &cal), PS_OK);
    assert_true(cal.groups[0].gpu.fused_attn);
    ps_cluster_free(&cal);
    ps_costdb_model_free(m);
    ps_costdb_free(&db);

    /* a forward without its backward is no kernel the cost model can price; the fixture has none */
    make_db(&db);
    assert_int_equal(ps_costdb_cluster(&db, &cal), PS_OK);
    assert_false(cal.groups[0].gpu.fused_attn);
    ps_cluster_free(&cal);
    add_attn_rows(&db, 1, false, false);
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    assert_false(ps_costdb_model_has_attn(m, 0));
    assert_int_equal(ps_costdb_cluster(&db, &cal), PS_OK);
    assert_false(cal.groups[0].gpu.fused_attn);
    ps_cluster_free(&cal);
    ps_costdb_model_free(m);
    ps_costdb_free(&db);

    /* pricing: a fused gpt3-1.3b layer (head width 128) from flat curves at R and at 2R. Only the attention core
     * differs: its forward by X / R - X / 2R with X = 4 s keys hd heads (two products, the executed keys of a causal
     * kernel), its input-gradient backward by 2.5 X / 2R - 2.5 X / 4R (the backward's rate twice the forward's) */
    ps_costdb d1, d2;
    make_db(&d1);
    make_db(&d2);
    add_attn_rows(&d1, 1, true, true);
    add_attn_rows(&d2, 2, true, true);
    ps_costdb_model *m1, *m2;
    assert_int_equal(ps_costdb_model_build(&d1, &m1), PS_OK);
    assert_int_equal(ps_costdb_model_build(&d2, &m2), PS_OK);
    assert_int_equal(ps_costdb_cluster(&d1, &cal), PS_OK);
    ps_cost_params p1, p2;
    ps_cost_params_default(&p1);
    ps_cost_params_default(&p2);
    assert_int_equal(ps_costdb_attach(m1, &cal, NULL, 0, &p1), PS_OK);
    assert_int_equal(ps_costdb_attach(m2, &cal, NULL, 0, &p2), PS_OK);
    ps_model mdl;
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.dtype = PS_DTYPE_FP32;
    assert_int_equal(ps_model_load("gpt3-1.3b", &mo, &mdl), PS_OK);
    const ps_layer *l = &mdl.layers[1];
    assert_int_equal(l->head_dim, 128);
    ps_strategy s = {.tp = 1, .dp = 2, .attn = PS_ATTN_FUSED};
    ps_layer_cost c1, c2;
    assert_int_equal(ps_cost_layer(&p1, &cal, l, PS_DTYPE_FP32, 1, &s, 0, &c1), PS_OK);
    assert_int_equal(ps_cost_layer(&p2, &cal, l, PS_DTYPE_FP32, 1, &s, 0, &c2), PS_OK);
    double X = 4.0 * (double)l->seq * ps_layer_attn_keys(l, PS_ATTN_FUSED) * 128 * (double)l->heads;
    assert_true(fabs((c1.fwd - c2.fwd) - X / 2e9) < 1e-9 * (X / 2e9));
    assert_true(fabs((c1.bwd_b - c2.bwd_b) - 2.5 * X / 4e9) < 1e-9 * (2.5 * X / 4e9));
    assert_true(fabs(c1.bwd_w - c2.bwd_w) < 1e-12);
    ps_model_free(&mdl);
    ps_cluster_free(&cal);
    ps_costdb_model_free(m1);
    ps_costdb_model_free(m2);
    ps_costdb_free(&d1);
    ps_costdb_free(&d2);
}

/* A GPU's device key is the one `--cluster auto` gives it (calib/detect.c), so a database matches the allocation it
 * measured: the catalog key for a known board, the name made lower-case-and-hyphens otherwise. */
static void test_device_key(void **state)
{
    (void)state;
    static const struct {
        const char *device, *key;
    } cases[] = {
        {"NVIDIA A100-SXM4-80GB", "a100-80g"},
        {"NVIDIA RTX 6000 Ada Generation", "nvidia-rtx-6000-ada-generation"},
        {"  Some (Future) GPU, 96GB -- rev.2  ", "some-future-gpu-96gb-rev-2"},
        /* cut to the key size, never ending in '-' */
        {"Abcdefghij Klmnopqrst Uvwxyz0123", "abcdefghij-klmnopqrst-uvwxyz012"},
        {"Abcdefghij Klmnopqrst Uvwxyz01 34", "abcdefghij-klmnopqrst-uvwxyz01"},
        {"---", "cuda-gpu"},
    };
    char k[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ps_gpu_key_from_device_name(cases[i].device, k, sizeof k);
        assert_string_equal(k, cases[i].key);
    }
}

/* One median for the benchmarks, the tables and `costdb show`: the mean of the middle two of an even count. */
static void test_median(void **state)
{
    (void)state;
    double odd[3] = {3, 1, 2}, even[4] = {4, 1, 3, 2};
    assert_true(ps_bench_median(odd, 3) == 2);
    assert_true(ps_bench_median(even, 4) == 2.5);
    assert_true(even[0] == 1 && even[3] == 4); /* sorted in place */
    assert_true(ps_bench_median(even, 0) == 0);
    double huge[2] = {1.5e308, 1.7e308};
    assert_true(ps_bench_median(huge, 2) == 1.6e308);
    ps_bench_stat st = ps_bench_stats(even, 4);
    assert_true(st.median == 2.5);
}

/* Provenance lists: distinct entries, in order of first appearance, whatever was already there. */
static void test_list_add(void **state)
{
    (void)state;
    char l[64] = "";
    ps_costdb_list_add(l, sizeof l, "h0");
    ps_costdb_list_add(l, sizeof l, "h1,h0,,h2");
    ps_costdb_list_add(l, sizeof l, "h2");
    ps_costdb_list_add(l, sizeof l, "h");
    ps_costdb_list_add(l, sizeof l, "h00");
    assert_string_equal(l, "h0,h1,h2,h,h00");
}

/* make_db's rows as an A100 calibration in bf16; nccl: the NCCL version calibrate recorded ("" when it measured the
 * collectives with MPI on host memory). */
static void make_gpu_db(ps_costdb *db, const char *nccl)
{
    make_db(db);
    ps_strlcpy(db->prov.nccl_version, nccl, sizeof db->prov.nccl_version);
    for (size_t i = 0; i < db->n_dev; i++) {
        ps_strlcpy(db->dev[i].kind, "gpu", sizeof db->dev[i].kind);
        ps_strlcpy(db->dev[i].name, "a100-80g", sizeof db->dev[i].name);
    }
    for (size_t i = 0; i < db->n_gemm; i++) ps_strlcpy(db->gemm[i].dtype, "bf16", sizeof db->gemm[i].dtype);
}

/* A GPU kind's collective and overlap rows in a file without nccl_version are host-MPI numbers: the model ignores them,
 * so such a GPU database changes GEMMs and memory bandwidth but keeps the analytic links and the sourced overlap
 * slowdown. */
static void test_gpu_collectives_ignored(void **state)
{
    (void)state;
    ps_costdb db;
    make_gpu_db(&db, "");
    ps_costdb_model *m = NULL;
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    int k = ps_costdb_model_device(m, "a100-80g");
    assert_int_equal(k, 0);
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, PS_DTYPE_BF16, 1e8) - 1e10) < 1e-6 * 1e10);
    assert_true(fabs(ps_costdb_model_mem_Bps(m, k) - 2e10) < 1);
    assert_true(ps_costdb_model_coll_time(m, k, PS_COLL_ALLREDUCE, 2, false, 65536) < 0);
    assert_true(ps_costdb_model_overlap(m, k) < 0);

    ps_cluster dgx;
    assert_int_equal(ps_cluster_load("dgx-a100-80g:1", &dgx), PS_OK);
    ps_cost_params an, with;
    ps_cost_params_default(&an);
    ps_cost_params_default(&with);
    assert_int_equal(ps_costdb_attach(m, &dgx, NULL, 0, &with), PS_OK);
    assert_ptr_equal(with.db, m);
    assert_true(with.overlap_slowdown == an.overlap_slowdown);
    assert_non_null(strstr(ps_costdb_model_note(m), "overlap slowdown not measured"));
    ps_group g = {0, 8, 1};
    assert_true(ps_coll_allreduce(&with, &dgx, &g, 1 << 26) == ps_coll_allreduce(&an, &dgx, &g, 1 << 26));
    assert_true(ps_p2p(&with, &dgx, 0, 1, 1 << 20) == ps_p2p(&an, &dgx, 0, 1, 1 << 20));
    /* --cluster costdb of a GPU file: a catalog GPU with a fused kernel has one there too (no attention rows: calibrate
     * times no GPU kernel); before 2026-11-27 every calibrated kind came without, and auto meant unfused */
    ps_cluster cal;
    assert_int_equal(ps_costdb_cluster(&db, &cal), PS_OK);
    assert_true(cal.groups[0].gpu.fused_attn);
    ps_cluster_free(&cal);
    ps_strlcpy(db.dev[0].name, "v100-16g", sizeof db.dev[0].name); /* Volta: none */
    ps_strlcpy(db.dev[1].name, "v100-16g", sizeof db.dev[1].name);
    assert_int_equal(ps_costdb_cluster(&db, &cal), PS_OK);
    assert_false(cal.groups[0].gpu.fused_attn);
    ps_cluster_free(&cal);
    ps_cluster_free(&dgx);
    ps_costdb_model_free(m);
    ps_costdb_free(&db);
}

/* The same rows measured by NCCL (calibrate sets nccl_version when every rank had a GPU): the GPU kind uses them. */
static void test_gpu_collectives_nccl(void **state)
{
    (void)state;
    ps_costdb db;
    make_gpu_db(&db, "2.28.9");
    ps_costdb_model *m = NULL;
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    int k = ps_costdb_model_device(m, "a100-80g");
    assert_int_equal(k, 0);
    assert_true(ps_costdb_model_coll_time(m, k, PS_COLL_ALLREDUCE, 2, false, 65536) > 0);
    assert_true(fabs(ps_costdb_model_overlap(m, k) - 1.2) < 1e-12);

    ps_cluster dgx;
    assert_int_equal(ps_cluster_load("dgx-a100-80g:1", &dgx), PS_OK);
    ps_cost_params with;
    ps_cost_params_default(&with);
    assert_int_equal(ps_costdb_attach(m, &dgx, NULL, 0, &with), PS_OK);
    assert_true(fabs(with.overlap_slowdown - 1.2) < 1e-12);
    assert_null(strstr(ps_costdb_model_note(m), "overlap slowdown not measured"));
    ps_cluster_free(&dgx);
    ps_costdb_model_free(m);
    ps_costdb_free(&db);
}

/* Rewrite a copy of a good file: a newer schema_version, or one group deleted. */
static int make_bad(const char *dir, const char *good)
{
    char cmd[2048], ver[600], miss[600];
    snprintf(ver, sizeof ver, "%s/newer-version.h5", dir);
    snprintf(miss, sizeof miss, "%s/missing-group.h5", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp '%s' '%s'", good, ver, good, miss);
    if (system(cmd) != 0) return 1;
    hid_t f = H5Fopen(ver, H5F_ACC_RDWR, H5P_DEFAULT);
    int32_t v = PS_COSTDB_SCHEMA_VERSION + 1;
    hid_t a = f >= 0 ? H5Aopen(f, "schema_version", H5P_DEFAULT) : -1;
    int bad = a < 0 || H5Awrite(a, H5T_NATIVE_INT32, &v) < 0;
    if (a >= 0) H5Aclose(a);
    if (f >= 0) H5Fclose(f);
    f = H5Fopen(miss, H5F_ACC_RDWR, H5P_DEFAULT);
    bad |= f < 0 || H5Ldelete(f, "/overlap", H5P_DEFAULT) < 0;
    if (f >= 0) H5Fclose(f);
    return bad;
}

static void test_bad_files(void **state)
{
    (void)state;
    ps_costdb db;
    make_db(&db);
    char good[512];
    path_in(good, sizeof good, "good.h5");
    assert_int_equal(ps_costdb_write(good, &db), PS_OK);
    ps_costdb_free(&db);
    assert_int_equal(make_bad(g_dir, good), 0);
    char p[600];
    ps_costdb r;
    snprintf(p, sizeof p, "%s/newer-version.h5", g_dir);
    assert_int_equal(ps_costdb_read(p, &r), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "newer"));
    assert_non_null(strstr(ps_error_message(), "newer-version.h5"));
    snprintf(p, sizeof p, "%s/missing-group.h5", g_dir);
    assert_int_equal(ps_costdb_read(p, &r), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "group /overlap is missing"));
    snprintf(p, sizeof p, "%s/nope.h5", g_dir);
    assert_int_equal(ps_costdb_read(p, &r), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "nope.h5"));
    /* the good file's bytes read; the first half of them refused, naming the file */
    FILE *f = fopen(good, "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof buf);
    assert_int_equal(ps_costdb_read(good, &r), PS_OK);
    ps_costdb_free(&r);
    snprintf(p, sizeof p, "%s/half.h5", g_dir);
    f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n / 2, f), n / 2);
    fclose(f);
    assert_int_equal(ps_costdb_read(p, &r), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "half.h5"));
}

/* ---- schema 2: executed plans and the fit ---------------------------------------------------------------------- */

/* An executed plan of `device`: computation pc predicted / mc measured, communication pm / mm, run with scales cs and
 * ms; the iteration time predicted as pc + pm, measured ms_iter. */
static ps_bench_measurement meas_row(const char *device, double pc, double mc, double cs, double pm, double mm,
                                     double ms, double ms_iter)
{
    ps_bench_measurement r;
    memset(&r, 0, sizeof r);
    ps_strlcpy(r.plan, "0123456789abcdef tp2 pp1 dp1", sizeof r.plan);
    ps_strlcpy(r.model, "gpt2-small", sizeof r.model);
    ps_strlcpy(r.cluster, "costdb:t.h5", sizeof r.cluster);
    ps_strlcpy(r.device, device, sizeof r.device);
    ps_strlcpy(r.backend, "cpu", sizeof r.backend);
    r.ranks = 2;
    r.iters = 5;
    r.scale = 16;
    r.compute_scale = cs;
    r.comm_scale = ms;
    r.predicted_compute_s = pc;
    r.measured_compute_s = mc;
    r.predicted_comm_s = pm;
    r.measured_comm_s = mm;
    r.predicted_s = pc + pm;
    r.measured_s = ms_iter;
    r.spread = 0.05;
    r.predicted_peak_bytes = 1e9;
    ps_strlcpy(r.date, "2025-01-01T00:00:00Z", sizeof r.date);
    return r;
}

static ps_costdb_fit fit_row(const char *device, const char *coef, double value)
{
    ps_costdb_fit f;
    memset(&f, 0, sizeof f);
    ps_strlcpy(f.device, device, sizeof f.device);
    ps_strlcpy(f.coefficient, coef, sizeof f.coefficient);
    f.value = value;
    f.n = 3;
    f.err_before = 0.5;
    f.err_after = 0.1;
    f.iter_n = 3;
    f.iter_err_before = 0.4;
    f.iter_err_after = 0.2;
    ps_strlcpy(f.date, "2025-01-02T00:00:00Z", sizeof f.date);
    return f;
}

/* The string attribute `name` of dataset `dset` in file `path`, into buf. */
static void read_ds_attr(const char *path, const char *dset, const char *name, char *buf, size_t cap)
{
    buf[0] = '\0';
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t a = H5Aopen(d, name, H5P_DEFAULT);
    assert_true(a >= 0);
    hid_t t = H5Aget_type(a);
    size_t sz = H5Tget_size(t);
    assert_true(sz < cap);
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, sz);
    assert_true(H5Aread(a, mt, buf) >= 0);
    buf[sz] = '\0';
    H5Tclose(mt);
    H5Tclose(t);
    H5Aclose(a);
    H5Dclose(d);
    H5Fclose(f);
}

/* No temporary (".NAME.tmp-*") is left in the test folder. */
static void assert_no_temporaries(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q '\\.tmp-'", g_dir);
    assert_int_not_equal(system(cmd), 0);
}

/* Every column of the measurement row and of /fit goes through the file unchanged, with its unit. */
static void test_schema2_round_trip(void **state)
{
    (void)state;
    ps_costdb a, b;
    make_db(&a);
    a.n_meas = 2;
    a.meas = calloc(2, sizeof *a.meas);
    a.meas[0] = meas_row("cpu:test", 1, 2, 1, 0.5, 0.25, 1, 1.75);
    a.meas[1] = meas_row("cpu:test", 2, 2.5, 0.5, 0, 0, 1, 2.5);
    a.meas[1].measured_peak_bytes = 3e9;
    a.meas[1].iters = 7;
    a.n_fit = 2;
    a.fit = calloc(2, sizeof *a.fit);
    a.fit[0] = fit_row("cpu:test", "compute_scale", 1.5);
    a.fit[1] = fit_row("cpu:test", "comm_scale", 0.75);
    char p[512];
    path_in(p, sizeof p, "rt2.h5");
    assert_int_equal(ps_costdb_write(p, &a), PS_OK);
    assert_int_equal(ps_costdb_read(p, &b), PS_OK);
    assert_int_equal(b.prov.schema_version, PS_COSTDB_SCHEMA_VERSION);
    assert_int_equal(b.n_meas, 2);
    assert_int_equal(b.n_fit, 2);
    assert_memory_equal(a.meas, b.meas, 2 * sizeof *a.meas);
    assert_memory_equal(a.fit, b.fit, 2 * sizeof *a.fit);
    char units[2048];
    read_ds_attr(p, "/measurements/table", "units", units, sizeof units);
    static const char *const want[] = {"device [text]", "ranks [1]", "iters [1]", "scale [1", "compute_scale [1]",
                                       "measured_compute_s [s]", "predicted_comm_s [s]",
                                       "measured_peak_bytes [bytes]", "date [ISO 8601 UTC]"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) assert_non_null(strstr(units, want[i]));
    read_ds_attr(p, "/fit/table", "units", units, sizeof units);
    assert_non_null(strstr(units, "coefficient [text]; value [1]; n [rows]"));
    read_ds_attr(p, "/fit/table", "method", units, sizeof units);
    assert_non_null(strstr(units, "; ranges: compute_scale in [0.05, 20], comm_scale in [0.05, 20]"));
    /* a row breaking a rule is refused when read, naming the table and the row */
    ps_costdb c;
    a.meas[1].iters = 0;
    assert_int_equal(ps_costdb_write(p, &a), PS_OK);
    assert_int_equal(ps_costdb_read(p, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "/measurements/table row 1: iters must be >= 1"));
    a.meas[1].iters = 7;
    a.fit[1].value = 25;
    assert_int_equal(ps_costdb_write(p, &a), PS_OK);
    assert_int_equal(ps_costdb_read(p, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "/fit/table row 1: value must be a finite number in [0.05, 20]"));
    /* a rate the cost model divides by is at least 1 per second: a subnormal bus bandwidth (found by fuzz_costdb)
     * made a megabyte's all-reduce take forever and a layer's time NaN */
    a.fit[1].value = 0.75;
    assert_true(a.n_coll > 0 && a.n_gemm > 0);
    double keep = a.coll[0].busbw_Bps;
    a.coll[0].busbw_Bps = 2.34e-317;
    assert_int_equal(ps_costdb_write(p, &a), PS_OK);
    assert_int_equal(ps_costdb_read(p, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "/collectives/table row 0: bytes and time_s must be finite numbers > 0, "
                                               "algbw_Bps and busbw_Bps finite numbers >= 1"));
    a.coll[0].busbw_Bps = keep;
    keep = a.gemm[0].flops_per_s;
    a.gemm[0].flops_per_s = 0.5;
    assert_int_equal(ps_costdb_write(p, &a), PS_OK);
    assert_int_equal(ps_costdb_read(p, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "flops_per_s a finite number >= 1"));
    a.gemm[0].flops_per_s = keep;
    /* the rate used is flops / time_s: 1e-300 FLOPs in a second (found by fuzz_costdb) is refused too */
    keep = a.gemm[0].flops;
    a.gemm[0].flops = 1e-300;
    assert_int_equal(ps_costdb_write(p, &a), PS_OK);
    assert_int_equal(ps_costdb_read(p, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "/gemm/table row 0: flops / time_s must be at least 1 FLOP/s"));
    a.gemm[0].flops = keep;
    /* a schema-2 file without /fit is incomplete */
    assert_int_equal(ps_costdb_write(p, &a), PS_OK);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0 && H5Ldelete(f, "/fit", H5P_DEFAULT) >= 0);
    H5Fclose(f);
    assert_int_equal(ps_costdb_read(p, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "group /fit is missing"));
    ps_costdb_free(&a);
    ps_costdb_free(&b);
}

/* tests/data/costdb/schema1.h5 was written by the schema-1 writer (README there): it reads, its old /measurements
 * (another row type, always empty) skipped and no /fit; written again, it is schema 2. */
static void test_schema1_file(void **state)
{
    (void)state;
    const char *v1 = PS_TEST_DATA "/costdb/schema1.h5";
    ps_costdb db;
    assert_int_equal(ps_costdb_read(v1, &db), PS_OK);
    assert_int_equal(db.prov.schema_version, 1);
    assert_int_equal(db.n_dev, 1);
    assert_string_equal(db.dev[0].name, "cpu:v1");
    assert_int_equal(db.n_gemm, 2);
    assert_int_equal(db.n_meas, 0);
    assert_int_equal(db.n_fit, 0);
    ps_costdb_model *m = NULL;
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    assert_true(fabs(ps_costdb_model_gemm_rate(m, 0, PS_DTYPE_FP32, 2e9) - 1e11) < 1);
    ps_costdb_model_free(m);
    /* recording a plan into a copy upgrades the copy; the fixture itself is only read */
    char p[512], cmd[1200];
    path_in(p, sizeof p, "v1copy.h5");
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", v1, p);
    assert_int_equal(system(cmd), 0);
    ps_bench_measurement r = meas_row("cpu:v1", 1, 2, 1, 0, 0, 1, 2);
    assert_int_equal(ps_costdb_add_measurements(p, &r, 1), PS_OK);
    ps_costdb up;
    assert_int_equal(ps_costdb_read(p, &up), PS_OK);
    assert_int_equal(up.prov.schema_version, PS_COSTDB_SCHEMA_VERSION);
    assert_int_equal(up.n_dev, 1);
    assert_int_equal(up.n_gemm, 2);
    assert_int_equal(up.n_meas, 1);
    assert_memory_equal(&up.meas[0], &r, sizeof r);
    assert_string_equal(up.prov.created, db.prov.created); /* the calibration's provenance stays */
    /* a schema-1 file merges with a schema-2 one, and the merge is written as the current schema */
    ps_costdb mg, back;
    assert_int_equal(ps_costdb_merge(&db, &up, &mg), PS_OK);
    assert_int_equal(mg.n_dev, 2);
    assert_int_equal(mg.n_meas, 1);
    char mp[512];
    path_in(mp, sizeof mp, "v1merged.h5");
    assert_int_equal(ps_costdb_write(mp, &mg), PS_OK);
    assert_int_equal(ps_costdb_read(mp, &back), PS_OK);
    assert_int_equal(back.prov.schema_version, PS_COSTDB_SCHEMA_VERSION);
    assert_int_equal(back.n_dev, 2);
    assert_int_equal(back.n_meas, 1);
    assert_memory_equal(&back.meas[0], &r, sizeof r);
    ps_costdb_free(&back);
    ps_costdb_free(&mg);
    ps_costdb_free(&up);
    ps_costdb_free(&db);
}

static void test_add_measurements(void **state)
{
    (void)state;
    char p[512];
    path_in(p, sizeof p, "exec.h5");
    unlink(p);
    ps_bench_measurement r[3] = {meas_row("cpu:x", 1, 2, 1, 1, 1, 1, 3), meas_row("cpu:x", 2, 2, 1, 0, 0, 1, 2),
                                 meas_row("cpu:x", 3, 3, 1, 0, 0, 1, 3)};
    /* nothing to add: nothing created */
    assert_int_equal(ps_costdb_add_measurements(p, r, 0), PS_OK);
    assert_int_not_equal(access(p, F_OK), 0);
    /* a missing file: created with the measurements alone */
    assert_int_equal(ps_costdb_add_measurements(p, r, 2), PS_OK);
    ps_costdb db;
    assert_int_equal(ps_costdb_read(p, &db), PS_OK);
    assert_int_equal(db.n_dev, 0);
    assert_int_equal(db.n_meas, 2);
    assert_int_equal(db.n_fit, 0);
    assert_memory_equal(db.meas, r, 2 * sizeof *r);
    assert_string_equal(db.prov.mode, "exec");
    assert_string_equal(db.prov.backend, "cpu");
    /* no allocation was calibrated: a merge with a calibration counts only the calibration's ranks and nodes */
    assert_int_equal(db.prov.n_ranks, 0);
    assert_int_equal(db.prov.n_nodes, 0);
    ps_costdb calib, mg;
    make_db(&calib);
    assert_int_equal(ps_costdb_merge(&calib, &db, &mg), PS_OK);
    assert_int_equal(mg.prov.n_ranks, 2);
    assert_int_equal(mg.prov.n_nodes, 1);
    ps_costdb_free(&mg);
    ps_costdb_free(&calib);
    ps_costdb_free(&db);
    /* appended after the rows there; a row without a date is stamped with the time it was recorded */
    ps_bench_measurement undated = r[2];
    undated.date[0] = '\0';
    char t0[32], t1[32];
    ps_utc_now_iso(t0, sizeof t0);
    assert_int_equal(ps_costdb_add_measurements(p, &undated, 1), PS_OK);
    ps_utc_now_iso(t1, sizeof t1);
    assert_int_equal(ps_costdb_read(p, &db), PS_OK);
    assert_int_equal(db.n_meas, 3);
    assert_memory_equal(db.meas, r, 2 * sizeof *r); /* dated rows keep their date */
    assert_int_equal(strlen(db.meas[2].date), 20);
    /* ISO 8601 of one form compares as text: between the stamps taken before and after */
    assert_true(strcmp(t0, db.meas[2].date) <= 0 && strcmp(db.meas[2].date, t1) <= 0);
    ps_strlcpy(db.meas[2].date, r[2].date, sizeof db.meas[2].date);
    assert_memory_equal(&db.meas[2], &r[2], sizeof r[2]); /* and nothing else changed */
    ps_costdb_free(&db);
    /* such a file is no machine to plan for */
    ps_costdb_read(p, &db);
    ps_cluster c;
    assert_int_equal(ps_costdb_cluster(&db, &c), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "--cluster costdb needs a file written by psearch calibrate"));
    ps_costdb_free(&db);

    /* into a calibration: every table kept, the plans after the earlier ones, no temporary left */
    ps_costdb cal;
    make_db(&cal);
    cal.n_meas = 1;
    cal.meas = calloc(1, sizeof *cal.meas);
    cal.meas[0] = meas_row("cpu:test", 1, 1, 1, 0, 0, 1, 1);
    cal.n_fit = 1;
    cal.fit = calloc(1, sizeof *cal.fit);
    cal.fit[0] = fit_row("cpu:test", "compute_scale", 1.25);
    char q[512];
    path_in(q, sizeof q, "cal.h5");
    assert_int_equal(ps_costdb_write(q, &cal), PS_OK);
    assert_int_equal(ps_costdb_add_measurements(q, r, 3), PS_OK);
    assert_no_temporaries();
    ps_costdb got;
    assert_int_equal(ps_costdb_read(q, &got), PS_OK);
    assert_int_equal(got.n_dev, 2);
    assert_memory_equal(got.dev, cal.dev, 2 * sizeof *cal.dev);
    assert_memory_equal(got.gemm, cal.gemm, cal.n_gemm * sizeof *cal.gemm);
    assert_int_equal(got.n_coll, cal.n_coll);
    assert_int_equal(got.n_ovl, cal.n_ovl);
    assert_int_equal(got.n_meas, 4);
    assert_memory_equal(&got.meas[0], &cal.meas[0], sizeof *cal.meas);
    assert_memory_equal(&got.meas[1], r, 3 * sizeof *r);
    assert_int_equal(got.n_fit, 1);
    assert_memory_equal(got.fit, cal.fit, sizeof *cal.fit);
    assert_string_equal(got.prov.created, cal.prov.created);
    ps_costdb_free(&got);

    /* a bad row: refused naming the file and the row, the file as it was */
    FILE *f = fopen(q, "rb");
    assert_non_null(f);
    static unsigned char before[1 << 20], after[1 << 20];
    size_t nb = fread(before, 1, sizeof before, f);
    fclose(f);
    ps_bench_measurement bad[2] = {r[0], r[1]};
    bad[1].scale = 0.5;
    assert_int_equal(ps_costdb_add_measurements(q, bad, 2), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "cal.h5: measurement 1 to record: scale must be"));
    bad[1] = r[1];
    bad[1].device[0] = '\0';
    assert_int_equal(ps_costdb_add_measurements(q, bad, 2), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "device must not be empty"));
    bad[1] = r[1];
    memset(bad[1].model, 'x', sizeof bad[1].model); /* no NUL inside its field */
    assert_int_equal(ps_costdb_add_measurements(q, bad, 2), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "NUL-terminated"));
    f = fopen(q, "rb");
    assert_non_null(f);
    size_t na = fread(after, 1, sizeof after, f);
    fclose(f);
    assert_int_equal(na, nb);
    assert_memory_equal(before, after, nb);
    /* a file that is no database is not overwritten */
    char junk[512];
    path_in(junk, sizeof junk, "junk.h5");
    f = fopen(junk, "w");
    fputs("not a database\n", f);
    fclose(f);
    assert_int_equal(ps_costdb_add_measurements(junk, r, 1), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "junk.h5: not an HDF5 file"));

    /* The write itself fails once its temporary exists: a file-size limit just above the old file (SIGXFSZ ignored,
     * so a write past it returns EFBIG, for root too) and enough rows to pass it. The temporary is removed and the
     * file keeps its bytes. (The refusals above fail before any temporary is made.) In a child process, which leaves
     * with _exit: after a failed write HDF5 1.10 cannot close the file, and its exit handler, trying again, crashes. */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        enum { many_n = 4096 };
        ps_bench_measurement *many = calloc(many_n, sizeof *many);
        struct rlimit lim;
        if (!many || getrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(10);
        lim.rlim_cur = (rlim_t)nb + 4096;
        if (lim.rlim_max != RLIM_INFINITY && lim.rlim_cur > lim.rlim_max) lim.rlim_cur = lim.rlim_max;
        for (int i = 0; i < many_n; i++) many[i] = r[i % 3];
        if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR || setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(11);
        ps_status st = ps_costdb_add_measurements(q, many, many_n);
        const char *msg = ps_error_message();
        /* 0: refused, naming the file, after the temporary was made */
        int code = st == PS_OK                                      ? 12
                   : !strstr(msg, "cal.h5")                         ? 13
                   : strstr(msg, "cannot create the cost database") ? 14
                                                                    : 0;
        if (code) fprintf(stderr, "test_costdb: failing write: status %d: %s\n", (int)st, msg);
        _exit(code);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
    assert_no_temporaries();
    f = fopen(q, "rb");
    assert_non_null(f);
    na = fread(after, 1, sizeof after, f);
    fclose(f);
    assert_int_equal(na, nb);
    assert_memory_equal(before, after, nb);
    ps_costdb_free(&cal);
}

static const ps_costdb_fit *find_fit(const ps_costdb_fit *f, size_t n, const char *dev, const char *coef)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(f[i].device, dev) == 0 && strcmp(f[i].coefficient, coef) == 0) return &f[i];
    return NULL;
}

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-12 * fmax(1, fabs(b)))

static void test_refit(void **state)
{
    (void)state;
    ps_costdb db;
    memset(&db, 0, sizeof db);
    ps_strlcpy(db.path, "m.h5", sizeof db.path);
    ps_bench_measurement r[6] = {
        /* computation ratios measured / (predicted / used): 2, 0.75, 5 -> median 2; the 4th has no computation
         * predicted and is skipped. Communication: 0.5, (none predicted), 1.5 (3 / (4 / 2)), (0 measured) -> 1 */
        meas_row("cpu:a", 1, 2, 1, 1, 0.5, 1, 3),
        meas_row("cpu:a", 2, 3, 0.5, 0, 0, 1, 3),
        meas_row("cpu:a", 1, 5, 1, 4, 3, 2, 8),
        meas_row("cpu:a", 0, 1, 1, 1, 0, 1, 1),
        /* a second device: one plan, computation 3x, communication as predicted */
        meas_row("a100-80g", 1, 3, 1, 1, 1, 1, 4),
        /* a third: 100x slower than predicted, clamped to 20 */
        meas_row("cpu:slow", 1, 100, 1, 0, 0, 1, 100),
    };
    db.meas = r;
    db.n_meas = 6;
    ps_costdb_fit *fit = NULL;
    size_t n = 0;
    assert_int_equal(ps_costdb_refit(&db, &fit, &n), PS_OK);
    assert_int_equal(n, 5); /* cpu:a 2, a100-80g 2, cpu:slow 1 (no communication anywhere) */
    assert_string_equal(fit[0].device, "cpu:a"); /* in the order the devices appear */
    assert_string_equal(fit[0].coefficient, "compute_scale");
    const ps_costdb_fit *c = find_fit(fit, n, "cpu:a", "compute_scale"), *m = find_fit(fit, n, "cpu:a", "comm_scale");
    assert_non_null(c);
    assert_non_null(m);
    assert_true(c->value == 2);
    assert_int_equal(c->n, 3);
    /* computation errors before: 1/2, 1/3, 4/5 -> 1/2; after (x2, x4, x2): 0, 5/3, 3/5 -> 3/5 */
    assert_true(NEAR(c->err_before, 0.5));
    assert_true(NEAR(c->err_after, 0.6));
    assert_true(m->value == 1);
    assert_int_equal(m->n, 2);
    /* communication errors before: 1, 1/3 -> 2/3; after (x1, x1/2): 1, 1/3 -> 2/3 */
    assert_true(NEAR(m->err_before, 2.0 / 3));
    assert_true(NEAR(m->err_after, 2.0 / 3));
    /* iteration time, 4 plans: before |2-3|/3, |2-3|/3, |5-8|/8, |1-1|/1 -> median 1/3 */
    assert_int_equal(c->iter_n, 4);
    assert_true(NEAR(c->iter_err_before, 1.0 / 3));
    assert_true(NEAR(m->iter_err_before, c->iter_err_before));
    /* after: shares scaled by new / used. plan 1: (1 x 2 + 1 x 1) = 3, exact; plan 2: 2 x 4 = 8 vs 3;
     * plan 3: 1 x 2 + 4 x 1/2 = 4 vs 8; plan 4: 0 + 1 x 1 = 1, exact -> 0, 0, 1/2, 5/3 -> 1/4 */
    assert_true(NEAR(c->iter_err_after, 0.25));
    const ps_costdb_fit *g = find_fit(fit, n, "a100-80g", "compute_scale");
    assert_non_null(g);
    assert_true(g->value == 3 && g->n == 1 && g->err_after == 0);
    /* 1 x 3 + 1 x 1 = 4 = measured: the approximation is exact here */
    assert_true(g->iter_err_before == 0.5 && g->iter_err_after == 0);
    assert_true(find_fit(fit, n, "a100-80g", "comm_scale")->value == 1);
    const ps_costdb_fit *s = find_fit(fit, n, "cpu:slow", "compute_scale");
    assert_non_null(s);
    double lo = 0, hi = 0;
    assert_true(ps_cost_param_range("compute_scale", &lo, &hi));
    assert_true(hi == 20 && s->value == hi);
    assert_null(find_fit(fit, n, "cpu:slow", "comm_scale"));
    for (size_t i = 0; i < n; i++) assert_true(strlen(fit[i].date) == 20);

    /* the fit replaces the earlier fit of its devices, whole, and keeps the others' */
    ps_costdb_fit old[3] = {fit_row("cpu:a", "comm_scale", 7), fit_row("cpu:b", "compute_scale", 3),
                            fit_row("a100-80g", "comm_scale", 9)};
    ps_costdb keep;
    memset(&keep, 0, sizeof keep);
    keep.fit = calloc(3, sizeof *keep.fit);
    memcpy(keep.fit, old, sizeof old);
    keep.n_fit = 3;
    ps_costdb_fit only_a = *c; /* a refit that saw cpu:a's computation only */
    assert_int_equal(ps_costdb_fit_replace(&keep, &only_a, 1), PS_OK);
    assert_int_equal(keep.n_fit, 3);
    assert_null(find_fit(keep.fit, keep.n_fit, "cpu:a", "comm_scale"));
    assert_true(find_fit(keep.fit, keep.n_fit, "cpu:a", "compute_scale")->value == 2);
    assert_true(find_fit(keep.fit, keep.n_fit, "cpu:b", "compute_scale")->value == 3);
    assert_true(find_fit(keep.fit, keep.n_fit, "a100-80g", "comm_scale")->value == 9);
    /* a merge keeps one row per device and coefficient: b's */
    ps_costdb a2, b2, mg;
    memset(&a2, 0, sizeof a2);
    memset(&b2, 0, sizeof b2);
    a2.fit = old;
    a2.n_fit = 3;
    a2.meas = r;
    a2.n_meas = 2;
    b2.fit = &only_a;
    b2.n_fit = 1;
    b2.meas = &r[4];
    b2.n_meas = 1;
    assert_int_equal(ps_costdb_merge(&a2, &b2, &mg), PS_OK);
    assert_int_equal(mg.n_fit, 4);
    assert_true(find_fit(mg.fit, mg.n_fit, "cpu:a", "comm_scale")->value == 7);
    assert_true(find_fit(mg.fit, mg.n_fit, "cpu:a", "compute_scale")->value == 2);
    assert_int_equal(mg.n_meas, 3);
    assert_memory_equal(&mg.meas[2], &r[4], sizeof r[4]);
    ps_costdb_free(&mg);
    ps_costdb_free(&keep);
    free(fit);

    /* nothing to fit: no plan at all, or a device none of whose plans has a part to compare */
    db.n_meas = 0;
    assert_int_equal(ps_costdb_refit(&db, &fit, &n), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "m.h5 holds no executed plans: run psearch exec --record m.h5 first"));
    ps_bench_measurement z[2] = {meas_row("cpu:a", 1, 1, 1, 0, 0, 1, 1), meas_row("cpu:z", 0, 1, 1, 1, 0, 1, 1)};
    db.meas = z;
    db.n_meas = 2;
    assert_int_equal(ps_costdb_refit(&db, &fit, &n), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "device 'cpu:z'"));
    assert_null(fit);
}

/* --costdb with a fit: its device's coefficients go into the cost parameters, the note says so; a file of fits only
 * prices with the analytic model and the fit; a file with nothing for the cluster is refused. */
static void test_fit_attach(void **state)
{
    (void)state;
    ps_costdb db;
    make_db(&db);
    db.n_fit = 2;
    db.fit = calloc(2, sizeof *db.fit);
    db.fit[0] = fit_row("cpu:test", "compute_scale", 1.5);
    db.fit[1] = fit_row("cpu:test", "comm_scale", 0.75);
    ps_cluster cal, dgx;
    assert_int_equal(ps_costdb_cluster(&db, &cal), PS_OK);
    assert_int_equal(ps_cluster_load("dgx-a100-80g:1", &dgx), PS_OK);
    ps_costdb_model *m = NULL;
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    ps_cost_params p;
    ps_cost_params_default(&p);
    assert_int_equal(ps_costdb_attach(m, &cal, NULL, 0, &p), PS_OK);
    assert_true(p.compute_scale == 1.5 && p.comm_scale == 0.75);
    assert_non_null(strstr(ps_costdb_model_note(m), "measured tables for node group(s): "));
    assert_non_null(strstr(ps_costdb_model_note(m), "compute_scale 1.5 (3 plan(s)), comm_scale 0.75"));
    /* a constant set by name (--cost-param) wins over the fit; a bad one leaves the parameters as given */
    const char *const over[] = {"comm_scale=2"}, *const bad[] = {"comm_scale=99"};
    ps_cost_params_default(&p);
    assert_int_equal(ps_costdb_attach(m, &cal, over, 1, &p), PS_OK);
    assert_true(p.compute_scale == 1.5 && p.comm_scale == 2 && p.db == m);
    ps_cost_params_default(&p);
    ps_cost_params given = p;
    assert_int_equal(ps_costdb_attach(m, &cal, bad, 1, &p), PS_ERR_INPUT);
    assert_memory_equal(&p, &given, sizeof p);
    /* the tables are for cpu:test only: the dgx is still refused, naming the fits too */
    ps_cost_params_default(&p);
    assert_int_equal(ps_costdb_attach(m, &dgx, NULL, 0, &p), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "another device kind"));
    ps_costdb_model_free(m);
    ps_costdb_free(&db);

    /* fits only, for the dgx's GPU: the analytic model with the fitted coefficients, bit for bit */
    memset(&db, 0, sizeof db);
    ps_strlcpy(db.path, "fits.h5", sizeof db.path);
    db.n_fit = 1;
    db.fit = calloc(1, sizeof *db.fit);
    db.fit[0] = fit_row("a100-80g", "compute_scale", 2);
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    assert_int_equal(ps_costdb_model_n_devices(m), 0);
    ps_cost_params with, by_hand;
    ps_cost_params_default(&with);
    ps_cost_params_default(&by_hand);
    assert_int_equal(ps_cost_params_set(&by_hand, "compute_scale=2"), PS_OK);
    assert_int_equal(ps_costdb_attach(m, &dgx, NULL, 0, &with), PS_OK);
    assert_ptr_equal(with.db, m);
    assert_true(with.compute_scale == 2 && with.comm_scale == 1);
    assert_non_null(strstr(ps_costdb_model_note(m), "no measured tables"));
    assert_non_null(strstr(ps_costdb_model_note(m), "'a100-80g'"));
    ps_model mdl;
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    assert_int_equal(ps_model_load("gpt3-1.3b", &mo, &mdl), PS_OK);
    ps_strategy s = {.tp = 2, .dp = 4};
    ps_layer_cost lw, lh;
    assert_int_equal(ps_cost_layer(&with, &dgx, &mdl.layers[1], PS_DTYPE_BF16, 1, &s, 0, &lw), PS_OK);
    assert_int_equal(ps_cost_layer(&by_hand, &dgx, &mdl.layers[1], PS_DTYPE_BF16, 1, &s, 0, &lh), PS_OK);
    assert_memory_equal(&lw, &lh, sizeof lw);
    ps_model_free(&mdl);
    /* fits of another kind only: refused */
    ps_cost_params_default(&p);
    assert_int_equal(ps_costdb_attach(m, &cal, NULL, 0, &p), PS_ERR_INPUT);
    assert_non_null(
        strstr(ps_error_message(), "fits.h5: the cost database has fits for 'a100-80g', another device kind"));
    ps_costdb_model_free(m);
    ps_costdb_free(&db);

    /* executed plans only, not refitted yet: refused, saying what to run */
    memset(&db, 0, sizeof db);
    ps_strlcpy(db.path, "plans.h5", sizeof db.path);
    db.n_meas = 1;
    db.meas = calloc(1, sizeof *db.meas);
    db.meas[0] = meas_row("a100-80g", 1, 1, 1, 0, 0, 1, 1);
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    assert_int_equal(ps_costdb_attach(m, &dgx, NULL, 0, &p), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "run psearch calibrate --from-measurements plans.h5 first"));
    ps_costdb_model_free(m);
    ps_costdb_free(&db);
    ps_cluster_free(&cal);
    ps_cluster_free(&dgx);
}

/* --costdb as the commands attach it (ps_cli_costdb_attach): the --cost-param values win over the file's fit and
 * measured slowdown; when anything fails after the file was applied, the parameters are as the caller gave them. */
static void test_cli_attach_rollback(void **state)
{
    (void)state;
    ps_costdb db;
    make_db(&db);
    db.n_fit = 2;
    db.fit = calloc(2, sizeof *db.fit);
    db.fit[0] = fit_row("cpu:test", "compute_scale", 1.5);
    db.fit[1] = fit_row("cpu:test", "comm_scale", 0.75);
    char p[512];
    path_in(p, sizeof p, "attach.h5");
    assert_int_equal(ps_costdb_write(p, &db), PS_OK);
    ps_cluster cal, dgx;
    assert_int_equal(ps_costdb_cluster(&db, &cal), PS_OK);
    assert_int_equal(ps_cluster_load("dgx-a100-80g:1", &dgx), PS_OK);
    ps_costdb_free(&db);

    ps_cli_opts o;
    memset(&o, 0, sizeof o);
    o.costdb = p;
    o.cost_params[0] = "compute_scale=3";
    o.n_cost_params = 1;
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    assert_int_equal(ps_cost_params_set(&cp, o.cost_params[0]), PS_OK); /* as the callers set them first */
    ps_costdb_model *m = NULL;
    assert_int_equal(ps_cli_costdb_attach(&o, &cal, &cp, &m), PS_OK);
    assert_non_null(m);
    assert_ptr_equal(cp.db, m);
    assert_true(cp.compute_scale == 3 && cp.comm_scale == 0.75 && fabs(cp.overlap_slowdown - 1.2) < 1e-12);
    ps_costdb_model_free(m);

    /* the file applied (fit, slowdown, tables), then a --cost-param fails: everything rolled back */
    o.cost_params[1] = "overlap_slowdown=1.25";
    o.cost_params[2] = "compute_scale=99"; /* outside [0.05, 20] */
    o.n_cost_params = 3;
    ps_cost_params_default(&cp);
    cp.compute_scale = 3;
    ps_cost_params given = cp;
    static char not_a_model;
    m = (ps_costdb_model *)(void *)&not_a_model; /* must come back NULL */
    assert_int_equal(ps_cli_costdb_attach(&o, &cal, &cp, &m), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "compute_scale must be a number in [0.05, 20]"));
    assert_null(m);
    assert_memory_equal(&cp, &given, sizeof cp);
    /* a cluster the file does not describe: refused, the parameters as given */
    o.n_cost_params = 1;
    assert_int_equal(ps_cli_costdb_attach(&o, &dgx, &cp, &m), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "another device kind"));
    assert_null(m);
    assert_memory_equal(&cp, &given, sizeof cp);
    /* no --costdb: nothing to attach */
    o.costdb = NULL;
    assert_int_equal(ps_cli_costdb_attach(&o, &cal, &cp, &m), PS_OK);
    assert_null(m);
    assert_memory_equal(&cp, &given, sizeof cp);
    ps_cluster_free(&cal);
    ps_cluster_free(&dgx);
}

/* The text `costdb show` prints for db (its table format), into a heap string. */
static char *show_text(const ps_costdb *db, ps_format fmt)
{
    ps_out out;
    assert_int_equal(ps_out_open(&out), PS_OK);
    assert_int_equal(ps_cli_costdb_show(db, fmt, &out), PS_OK);
    assert_int_equal(fflush(out.f), 0);
    char *text = strdup(out.buf);
    ps_out_discard(&out);
    assert_non_null(text);
    return text;
}

/* Errors as `costdb show` and `calibrate --from-measurements` print them: percentages, ">1000%" for a broken run,
 * and "-" / null where nothing was measured (a device with no measured iteration time), never a made-up 0%. */
static void test_fit_rendering(void **state)
{
    (void)state;
    ps_costdb_fit f = fit_row("cpu:test", "compute_scale", 1.5);
    json_t *j = ps_cli_fit_json(&f);
    assert_non_null(j);
    assert_true(json_real_value(json_object_get(j, "iter_err_before")) == 0.4);
    assert_true(json_real_value(json_object_get(j, "iter_err_after")) == 0.2);
    assert_int_equal(json_integer_value(json_object_get(j, "iter_n")), 3);
    assert_string_equal(json_string_value(json_object_get(j, "date")), f.date);
    assert_int_equal(json_object_size(j), 10);
    json_decref(j);
    f.iter_n = 0;
    f.iter_err_before = f.iter_err_after = 0;
    j = ps_cli_fit_json(&f);
    assert_non_null(j);
    assert_true(json_is_null(json_object_get(j, "iter_err_before")));
    assert_true(json_is_null(json_object_get(j, "iter_err_after")));
    assert_true(json_real_value(json_object_get(j, "err_before")) == 0.5);
    json_decref(j);

    /* plans none of which measured an iteration time: no median error to state */
    ps_costdb db;
    memset(&db, 0, sizeof db);
    ps_strlcpy(db.path, "r.h5", sizeof db.path);
    ps_bench_measurement r[2] = {meas_row("cpu:t", 1, 2, 1, 0, 0, 1, 0), meas_row("cpu:t", 1, 3, 1, 0, 0, 1, 0)};
    db.meas = r;
    db.n_meas = 2;
    ps_costdb_fit fits[2] = {f, fit_row("cpu:u", "comm_scale", 2)};
    fits[1].err_before = 12; /* 1200%: a broken run */
    fits[1].err_after = 0.1234;
    db.fit = fits;
    db.n_fit = 2;
    char *t = show_text(&db, PS_FMT_TABLE);
    assert_non_null(strstr(t, "executed     2 plan(s) on cpu:t: iteration time predicted within - of measured"));
    assert_non_null(strstr(t, "compute_scale 1.5 from 3 plan(s) (error of its part 50.0% -> 10.0%;"));
    assert_non_null(strstr(t, "comm_scale 2 from 3 plan(s) (error of its part >1000% -> 12.3%;"));
    free(t);
    t = show_text(&db, PS_FMT_JSON);
    json_error_t err;
    j = json_loads(t, 0, &err);
    free(t);
    assert_non_null(j);
    assert_true(json_is_null(json_object_get(j, "measurements_iter_err_median")));
    json_t *fa = json_object_get(j, "fit");
    assert_int_equal(json_array_size(fa), 2);
    assert_true(json_is_null(json_object_get(json_array_get(fa, 0), "iter_err_after")));
    assert_true(json_real_value(json_object_get(json_array_get(fa, 1), "iter_err_after")) == 0.2);
    json_decref(j);
    /* one measured iteration: its error, |1 - 4| / 4 (predicted_s = 1 + 0) */
    r[1].measured_s = 4;
    t = show_text(&db, PS_FMT_TABLE);
    assert_non_null(strstr(t, "iteration time predicted within 75.0% of measured"));
    free(t);
}

/* Device keys are matched whole, never as substrings: "a100" is another kind than "a100-80g", in the note's list of
 * fits not used and in the refusal's list of fits. */
static void test_fit_names_exact(void **state)
{
    (void)state;
    ps_costdb db;
    memset(&db, 0, sizeof db);
    ps_strlcpy(db.path, "names.h5", sizeof db.path);
    db.n_fit = 3;
    db.fit = calloc(3, sizeof *db.fit);
    db.fit[0] = fit_row("cpu:test", "compute_scale", 1.5);
    db.fit[1] = fit_row("a100-80g", "compute_scale", 2);
    db.fit[2] = fit_row("a100", "compute_scale", 3);
    ps_costdb_model *m = NULL;
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    /* attach reads only the names: a cluster of three groups, the first one's fit applied, the others' named */
    ps_node_group g[3];
    memset(g, 0, sizeof g);
    static const char *const gpus[3] = {"cpu:test", "a100-80g", "a100"};
    for (int i = 0; i < 3; i++) {
        snprintf(g[i].name, sizeof g[i].name, "g%d", i);
        ps_strlcpy(g[i].gpu.name, gpus[i], sizeof g[i].gpu.name);
    }
    ps_cluster c;
    memset(&c, 0, sizeof c);
    ps_strlcpy(c.name, "mixed", sizeof c.name);
    c.groups = g;
    c.n_groups = 3;
    ps_cost_params p;
    ps_cost_params_default(&p);
    assert_int_equal(ps_costdb_attach(m, &c, NULL, 0, &p), PS_OK);
    assert_true(p.compute_scale == 1.5);
    assert_non_null(strstr(ps_costdb_model_note(m), "; the fits of 'a100-80g', 'a100' are not used"));
    /* a cluster of none of them: the refusal names both fitted kinds */
    ps_strlcpy(g[0].gpu.name, "h100", sizeof g[0].gpu.name);
    c.n_groups = 1;
    ps_cost_params_default(&p);
    assert_int_equal(ps_costdb_attach(m, &c, NULL, 0, &p), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "has fits for 'cpu:test', 'a100-80g', 'a100', another device kind"));
    ps_costdb_model_free(m);
    ps_costdb_free(&db);
}

/* --add-measurements DB.h5: three executed plans of DB's first device, computation 2x and communication 0.5x the
 * prediction (medians of 1.8/2/2.2 and 0.45/0.5/0.55), run with both scales 1, the iteration their sum. */
static int add_measurements(const char *path)
{
    char dev[32] = "cpu:test";
    ps_costdb db;
    if (access(path, F_OK) == 0) {
        if (ps_costdb_read(path, &db) != PS_OK) return 1;
        if (db.n_dev) ps_strlcpy(dev, db.dev[0].name, sizeof dev);
        ps_costdb_free(&db);
    }
    ps_bench_measurement r[3] = {meas_row(dev, 0.01, 0.018, 1, 0.01, 0.0045, 1, 0.0225),
                                 meas_row(dev, 0.01, 0.02, 1, 0.01, 0.005, 1, 0.025),
                                 meas_row(dev, 0.01, 0.022, 1, 0.01, 0.0055, 1, 0.0275)};
    if (ps_costdb_add_measurements(path, r, 3) != PS_OK) {
        fprintf(stderr, "test_costdb: %s\n", ps_error_message());
        return 1;
    }
    return 0;
}

/* make_db with its device key and host changed and every GEMM rate multiplied: another node kind, or another night */
static void make_kind(ps_costdb *db, const char *key, const char *host, double rate_x)
{
    make_db(db);
    ps_strlcpy(db->prov.devices, key, sizeof db->prov.devices);
    ps_strlcpy(db->prov.hosts, host, sizeof db->prov.hosts);
    for (size_t i = 0; i < db->n_dev; i++) {
        ps_strlcpy(db->dev[i].name, key, sizeof db->dev[i].name);
        ps_strlcpy(db->dev[i].host, host, sizeof db->dev[i].host);
    }
    for (size_t i = 0; i < db->n_gemm; i++) db->gemm[i].flops_per_s *= rate_x;
}

/* costdb merge --replace: a site database of two node kinds; tonight's calibration of one of them replaces that kind's
 * rows (not added as two more ranks), the other kind's rows stay, renumbered first, and the counts follow. */
static void test_merge_replace(void **state)
{
    (void)state;
    ps_costdb old_kind, other, site, tonight, kept, mg;
    make_kind(&old_kind, "cpu:a", "ha", 1);
    make_kind(&other, "cpu:b", "hb", 3);
    ps_strlcpy(old_kind.path, "a.h5", sizeof old_kind.path);
    ps_strlcpy(other.path, "b.h5", sizeof other.path);
    assert_int_equal(ps_costdb_merge(&old_kind, &other, &site), PS_OK); /* ranks 0-1 cpu:a, 2-3 cpu:b */
    ps_strlcpy(site.path, "site.h5", sizeof site.path);
    assert_int_equal(site.n_dev, 4);
    make_kind(&tonight, "cpu:a", "ha2", 2);
    ps_strlcpy(tonight.path, "tonight.h5", sizeof tonight.path);
    size_t dropped = 99;
    assert_int_equal(ps_costdb_without_kinds(&site, &tonight, &kept, &dropped), PS_OK);
    assert_int_equal(dropped, 2);
    assert_int_equal(kept.n_dev, 2);
    assert_int_equal(kept.prov.n_ranks, 2);
    assert_int_equal(kept.prov.n_nodes, 1);
    assert_string_equal(kept.prov.devices, "cpu:b");
    assert_string_equal(kept.prov.hosts, "hb");
    for (int r = 0; r < 2; r++) {
        assert_string_equal(kept.dev[r].name, "cpu:b");
        assert_int_equal(kept.dev[r].rank, r); /* was 2 + r */
        assert_int_equal(kept.dev[r].node, 0); /* was 1 */
    }
    assert_int_equal(kept.n_gemm, 6);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(kept.gemm[i].rank, i / 3);
        assert_true(kept.gemm[i].flops_per_s == 3e9 * pow(10, i % 3)); /* cpu:b's rates, x3 */
    }
    assert_int_equal(kept.n_bw, 2);
    assert_int_equal(kept.n_ovl, 2);
    assert_int_equal(kept.n_coll, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(kept.coll[i].root_rank, 0); /* cpu:b's group, was rooted at 2 */
    assert_int_equal(ps_costdb_merge(&kept, &tonight, &mg), PS_OK);
    assert_int_equal(mg.n_dev, 4);
    assert_int_equal(mg.prov.n_ranks, 4);
    assert_int_equal(mg.prov.n_nodes, 2);
    assert_int_equal(mg.n_gemm, 12);
    assert_int_equal(mg.n_coll, 6);
    assert_string_equal(mg.prov.devices, "cpu:b,cpu:a");
    for (int i = 6; i < 12; i++) {
        assert_int_equal(mg.gemm[i].rank, 2 + (i - 6) / 3);
        assert_true(mg.gemm[i].flops_per_s == 2e9 * pow(10, i % 3)); /* tonight's cpu:a, not the site's */
    }
    for (int r = 2; r < 4; r++) assert_string_equal(mg.dev[r].host, "ha2");
    /* a kind the site does not hold: nothing dropped, the merge adds it as before */
    ps_costdb none;
    make_kind(&none, "cpu:c", "hc", 1);
    ps_costdb_free(&kept);
    assert_int_equal(ps_costdb_without_kinds(&site, &none, &kept, &dropped), PS_OK);
    assert_int_equal(dropped, 0);
    assert_int_equal(kept.n_dev, 4);
    assert_int_equal(kept.prov.n_nodes, 2);
    assert_memory_equal(kept.gemm, site.gemm, site.n_gemm * sizeof *site.gemm);
    ps_costdb_free(&none);
    ps_costdb_free(&kept);
    ps_costdb_free(&mg);
    ps_costdb_free(&tonight);
    ps_costdb_free(&site);
    ps_costdb_free(&other);
    ps_costdb_free(&old_kind);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--make-bad") == 0) return make_bad(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "--add-measurements") == 0) return add_measurements(argv[2]);
    snprintf(g_dir, sizeof g_dir, "%s/psearch-costdb-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_merge_replace),
        cmocka_unit_test_setup_teardown(test_interpolation, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_cost_model, setup_db, teardown_db),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_device_key),
        cmocka_unit_test(test_attention_rows),
        cmocka_unit_test(test_list_add),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_gpu_collectives_ignored),
        cmocka_unit_test(test_gpu_collectives_nccl),
        cmocka_unit_test(test_schema2_round_trip),
        cmocka_unit_test(test_schema1_file),
        cmocka_unit_test(test_add_measurements),
        cmocka_unit_test(test_refit),
        cmocka_unit_test(test_fit_attach),
        cmocka_unit_test(test_fit_names_exact),
        cmocka_unit_test(test_cli_attach_rollback),
        cmocka_unit_test(test_fit_rendering),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}

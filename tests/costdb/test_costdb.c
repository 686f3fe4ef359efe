/* The cost database: write tables, read them back unchanged; the interpolation is exact at table points and stays
 * between neighbours; the cost model uses the tables for the devices they measured and is untouched without them;
 * newer, incomplete and foreign files are refused with a message naming the file.
 * `test_costdb --make-bad DIR GOOD.h5` writes the bad files the CLI catalogue (tests/cli/costdb.sh) needs and that no
 * shell tool can make: a newer schema_version and a missing group. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

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
        assert_true(fabs(ps_costdb_model_gemm_rate(m, k, "fp32", 1e6 * pow(100, i)) - 1e9 * pow(10, i)) <
                    1e-6 * 1e9 * pow(10, i));
    /* monotone between them (the table rises), log-log: halfway in log FLOPs is halfway in log rate */
    double prev = 0;
    for (double f = 1e6; f <= 1e10; f *= 1.3) {
        double r = ps_costdb_model_gemm_rate(m, k, "fp32", f);
        assert_true(r >= prev);
        prev = r;
    }
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, "fp32", 1e7) - sqrt(1e9 * 1e10)) < 1e-3 * 3.2e9);
    /* beyond the ends: the end rates; no such dtype: negative */
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, "fp32", 1e3) - 1e9) < 1);
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, "fp32", 1e13) - 1e11) < 1);
    assert_true(ps_costdb_model_gemm_rate(m, k, "bf16", 1e8) < 0);
    /* collectives: exact time at table points, latency floor below, constant busbw above, nearest group size */
    for (int i = 0; i < 3; i++)
        assert_true(fabs(ps_costdb_model_coll_time(m, k, "allreduce", 2, false, db.coll[i].bytes) - db.coll[i].time_s) <
                    1e-9 * db.coll[i].time_s);
    assert_true(fabs(ps_costdb_model_coll_time(m, k, "allreduce", 2, false, 10) - db.coll[0].time_s) < 1e-15);
    assert_true(fabs(ps_costdb_model_coll_time(m, k, "allreduce", 2, false, 1048576.0 * 4) - 4 * db.coll[2].time_s) <
                1e-9);
    double prevt = 0;
    for (double b = 1024; b <= 1048576; b *= 1.5) {
        double t = ps_costdb_model_coll_time(m, k, "allreduce", 2, false, b);
        assert_true(t >= prevt);
        prevt = t;
    }
    /* 4 ranks use the 2-rank busbw with the 4-rank factor 2(n-1)/n = 1.5 */
    assert_true(fabs(ps_costdb_model_coll_time(m, k, "allreduce", 4, false, 1048576) - 1.5 * 1048576 / 8e9) < 1e-12);
    assert_true(ps_costdb_model_coll_time(m, k, "allreduce", 2, true, 1024) < 0); /* no across-node rows */
    assert_true(ps_costdb_model_coll_time(m, k, "alltoall", 2, false, 1024) < 0);
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
    assert_int_equal(ps_cluster_load("dgx-a100-80g:1", MPI_COMM_NULL, &dgx), PS_OK);

    ps_cost_params an, with;
    ps_cost_params_default(&an);
    ps_cost_params_default(&with);
    assert_null(an.db);
    /* another device kind is refused, naming the file and the kinds */
    assert_int_equal(ps_costdb_attach(m, &dgx, &with), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "another device kind"));
    assert_null(with.db);
    assert_string_equal(ps_costdb_model_note(m), "");
    assert_int_equal(ps_costdb_attach(m, &cal, &with), PS_OK);
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
    double F = 2.0 * 64 * 1000 * 64, rate = ps_costdb_model_gemm_rate(m, 0, "fp32", F);
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

/* A GPU's device key is the one `--cluster auto` gives it (hw/detect.c), so a database matches the allocation it
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

/* A GPU kind's collective and overlap rows are host-MPI numbers (no NCCL backend yet): the model ignores them, so a
 * GPU database changes GEMMs and memory bandwidth but keeps the analytic links and the sourced overlap slowdown. */
static void test_gpu_collectives_ignored(void **state)
{
    (void)state;
    ps_costdb db;
    make_db(&db);
    for (size_t i = 0; i < db.n_dev; i++) {
        ps_strlcpy(db.dev[i].kind, "gpu", sizeof db.dev[i].kind);
        ps_strlcpy(db.dev[i].name, "a100-80g", sizeof db.dev[i].name);
    }
    for (size_t i = 0; i < db.n_gemm; i++) ps_strlcpy(db.gemm[i].dtype, "bf16", sizeof db.gemm[i].dtype);
    ps_costdb_model *m = NULL;
    assert_int_equal(ps_costdb_model_build(&db, &m), PS_OK);
    int k = ps_costdb_model_device(m, "a100-80g");
    assert_int_equal(k, 0);
    assert_true(fabs(ps_costdb_model_gemm_rate(m, k, "bf16", 1e8) - 1e10) < 1e-6 * 1e10);
    assert_true(fabs(ps_costdb_model_mem_Bps(m, k) - 2e10) < 1);
    assert_true(ps_costdb_model_coll_time(m, k, "allreduce", 2, false, 65536) < 0);
    assert_true(ps_costdb_model_overlap(m, k) < 0);

    ps_cluster dgx;
    assert_int_equal(ps_cluster_load("dgx-a100-80g:1", MPI_COMM_NULL, &dgx), PS_OK);
    ps_cost_params an, with;
    ps_cost_params_default(&an);
    ps_cost_params_default(&with);
    assert_int_equal(ps_costdb_attach(m, &dgx, &with), PS_OK);
    assert_ptr_equal(with.db, m);
    assert_true(with.overlap_slowdown == an.overlap_slowdown);
    assert_non_null(strstr(ps_costdb_model_note(m), "overlap slowdown not measured"));
    ps_group g = {0, 8, 1};
    assert_true(ps_coll_allreduce(&with, &dgx, &g, 1 << 26) == ps_coll_allreduce(&an, &dgx, &g, 1 << 26));
    assert_true(ps_p2p(&with, &dgx, 0, 1, 1 << 20) == ps_p2p(&an, &dgx, 0, 1, 1 << 20));
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

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--make-bad") == 0) return make_bad(argv[2], argv[3]);
    snprintf(g_dir, sizeof g_dir, "%s/psearch-costdb-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test_setup_teardown(test_interpolation, setup_db, teardown_db),
        cmocka_unit_test_setup_teardown(test_cost_model, setup_db, teardown_db),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_device_key),
        cmocka_unit_test(test_list_add),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_gpu_collectives_ignored),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) rc = rc ? rc : 1;
    return rc;
}

/* libFuzzer target: cost database files (HDF5) as `--costdb FILE` reads them (written to a scratch file and read
 * through the same path as the command: HDF5's in-memory core driver overflows on damaged images where the file driver
 * does not, and the command never uses it), then everything a search does with an accepted file: the interpolation
 * tables, the calibrated machine as a cluster, attaching the tables to the cost model, and a layer costed with them. A
 * file the reader accepted must never make the later stages produce non-finite or negative times. Seeds: a --quick
 * calibration on 2 ranks (seeds/fuzz_costdb). HDF5 itself parses the bytes: a crash inside libhdf5 is a finding to
 * report upstream and to guard against here when it can be (docs/costdb.md). */
#include "fuzz_common.h"
#include "ps_costdb.h"

#include <hdf5.h>

static ps_model g_model;
static char g_path[600]; /* the scratch file each input is written to */

/* HDF5 1.10 leaks its own bookkeeping when it fails to open an object of a corrupt file (H5Dopen2 on a damaged
 * object header, found by this target): every such stack runs through libhdf5, ours never allocate there. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5\n"; }

/* A 64 MiB quarantine instead of ASan's 256: a use after free is still caught across ~2,200 executions' frees (an
 * execution frees ~30 KB, 163 blocks, on average; before the metadata cache stayed on HDF5's free list, its 516 KiB
 * free each execution cut the 256 MiB to ~470 executions), and each of libFuzzer's leak checks, which walk every block
 * in the quarantine, no longer takes twice as long as before (60 s from the seeds: 20,448 -> 88,572 executions).
 * ASAN_OPTIONS in the environment still overrides it. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "quarantine_size_mb=64"; }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    ps_model_opts o;
    ps_model_opts_init(&o);
    o.dtype = PS_DTYPE_FP32;
    o.vocab_pad = 1024;
    if (ps_model_load(PS_FUZZ_SOURCE_DIR "/tests/data/models/good/gpt2-small.json", &o, &g_model) != PS_OK) {
        fprintf(stderr, "fuzz_costdb: cannot load the fixed model: %s\n", ps_error_message());
        abort();
    }
    /* Every H5Fopen callocs HDF5's metadata cache (H5C_t, ~516 KiB, the fixed 64Ki-slot hash table) and H5Fclose
     * frees it; over the 64 KiB that a regular free list keeps by default, so each execution mmapped, zeroed and
     * (through ASan's quarantine) unmapped it again: half of an execution's time. A 1 MiB limit per regular list
     * keeps one for the next open; the other limits stay HDF5's defaults. Nothing of ours lives in those blocks, and
     * the bytes HDF5 reads or parses still come from the file each time. The cost: each of libFuzzer's leak checks
     * (after an input HDF5 leaks on, until it gives them up after 1,000) walks ASan's quarantine, now full of small
     * blocks rather than these big ones, and takes about twice as long (tests/fuzz/README.md). */
    if (H5set_free_list_limits(4 << 20, 1 << 20, 4 << 20, 256 << 10, 16 << 20, 1 << 20) < 0) {
        fprintf(stderr, "fuzz_costdb: H5set_free_list_limits failed\n");
        abort();
    }
    fuzz_scratch_dir();
    fuzz_path(g_path, sizeof g_path, "costdb.h5");
    return 0;
}

static void use(const ps_costdb *db)
{
    ps_costdb_model *m = NULL;
    if (ps_costdb_model_build(db, &m) != PS_OK) return;
    /* a file of executed plans or fits alone has no devices (ps_costdb_add_measurements makes such files) */
    FUZZ_CHECK(ps_costdb_model_n_devices(m) >= (db->n_dev > 0 ? 1 : 0));
    /* every lookup is -1 (not measured) or a finite number in range */
    for (int k = 0; k < ps_costdb_model_n_devices(m); k++) {
        double r = ps_costdb_model_gemm_rate(m, k, PS_DTYPE_FP32, 1e9);
        FUZZ_CHECK(r == -1 || (isfinite(r) && r > 0));
        /* the fused attention curves (schema 3): along FLOPs and between head widths, below, at and above them */
        static const int64_t hds[] = {1, 48, 64, 1000};
        for (int h = 0; h < 4; h++)
            for (int bwd = 0; bwd <= 1; bwd++) {
                double a = ps_costdb_model_attn_rate(m, k, PS_DTYPE_FP32, bwd, hds[h], 1e9);
                FUZZ_CHECK(a == -1 || (isfinite(a) && a > 0));
            }
        for (int i = 0; i < PS_COLL_N_OPS; i++)
            for (int inter = 0; inter <= 1; inter++) {
                double t = ps_costdb_model_coll_time(m, k, (ps_coll_op)i, 3, inter, 1e6);
                FUZZ_CHECK(t == -1 || (isfinite(t) && t >= 0));
            }
        double b = ps_costdb_model_mem_Bps(m, k), o = ps_costdb_model_overlap(m, k);
        FUZZ_CHECK(b == -1 || (isfinite(b) && b > 0));
        FUZZ_CHECK(o == -1 || isfinite(o));
    }
    ps_cluster c;
    if (ps_costdb_cluster(db, &c) == PS_OK) {
        fuzz_cluster_check(&c);
        ps_cost_params p;
        ps_cost_params_default(&p);
        double dflt = p.overlap_slowdown;
        FUZZ_CHECK(ps_costdb_attach(m, &c, NULL, 0, &p) == PS_OK);
        FUZZ_CHECK(strncmp(ps_costdb_model_note(m), "measured tables for node group(s): ", 35) == 0);
        /* the plan's slowdown is the worst measured over the cluster's kinds, clamped to [1, 3], else the default */
        double worst = -1;
        for (int g = 0; g < c.n_groups; g++) {
            int k = ps_costdb_model_device(m, c.groups[g].gpu.name);
            FUZZ_CHECK(k >= 0); /* --cluster costdb describes only measured kinds */
            worst = fmax(worst, ps_costdb_model_overlap(m, k));
        }
        FUZZ_CHECK(p.overlap_slowdown == (worst > 0 ? fmin(fmax(worst, 1), 3) : dflt));
        int64_t tp = c.groups[0].gpus_per_node >= 2 ? 2 : 1;
        if (c.n_gpus >= tp) {
            ps_strategy s = {.tp = (int)tp, .dp = 1};
            ps_layer_cost lc;
            if (ps_cost_layer(&p, &c, &g_model.layers[1], PS_DTYPE_FP32, 1, &s, 0, &lc) == PS_OK)
                FUZZ_CHECK(isfinite(lc.fwd) && lc.fwd >= 0 && isfinite(lc.bwd_b) && lc.bwd_b >= 0);
        }
        ps_cluster_free(&c);
    }
    ps_costdb_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write_file(g_path, data, size);
    ps_costdb db;
    ps_status st = ps_costdb_read(g_path, &db);
    unlink(g_path);
    if (st == PS_OK) {
        use(&db);
        ps_costdb_free(&db);
    }
    ps_error_clear();
    return 0;
}

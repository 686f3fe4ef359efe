/* libFuzzer target: cost database files (HDF5) as `--costdb FILE` reads them (written to a scratch file and read
 * through the same path as the command: HDF5's in-memory core driver overflows on damaged images where the file driver
 * does not, and the command never uses it), then everything a search does with an accepted file: the interpolation tables, the calibrated
 * machine as a cluster, attaching the tables to the cost model, and a layer costed with them. A file the reader
 * accepted must never make the later stages produce non-finite or negative times. Seeds: a --quick calibration on
 * 2 ranks (seeds/fuzz_costdb). HDF5 itself parses the bytes: a crash inside libhdf5 is a finding to report upstream
 * and to guard against here when it can be (docs/costdb.md). */
#include "fuzz_common.h"
#include "ps_costdb.h"

static ps_model g_model;

/* HDF5 1.10 leaks its own bookkeeping when it fails to open an object of a corrupt file (H5Dopen2 on a damaged
 * object header, found by this target): every such stack runs through libhdf5, ours never allocate there. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libhdf5\n"; }

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
    return 0;
}

static void use(const ps_costdb *db)
{
    ps_costdb_model *m = NULL;
    if (ps_costdb_model_build(db, &m) != PS_OK) return;
    FUZZ_CHECK(ps_costdb_model_n_devices(m) >= 1);
    for (int k = 0; k < ps_costdb_model_n_devices(m); k++) {
        double r = ps_costdb_model_gemm_rate(m, k, "fp32", 1e9);
        FUZZ_CHECK(!isnan(r) && (r < 0 || (isfinite(r) && r > 0)));
        static const char *const ops[] = {"allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"};
        for (int i = 0; i < 5; i++)
            for (int inter = 0; inter <= 1; inter++) {
                double t = ps_costdb_model_coll_time(m, k, ops[i], 3, inter, 1e6);
                FUZZ_CHECK(!isnan(t) && (t < 0 || (isfinite(t) && t >= 0)));
            }
    }
    ps_cluster c;
    if (ps_costdb_cluster(db, &c) == PS_OK) {
        fuzz_cluster_check(&c);
        ps_cost_params p;
        ps_cost_params_default(&p);
        FUZZ_CHECK(ps_costdb_attach(m, &c, &p) == PS_OK);
        FUZZ_CHECK(strncmp(ps_costdb_model_note(m), "measured tables for node group(s): ", 35) == 0);
        FUZZ_CHECK(p.overlap_slowdown >= 1 && p.overlap_slowdown <= 3);
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
    static char path[600];
    if (!path[0]) {
        fuzz_scratch_dir();
        fuzz_path(path, sizeof path, "costdb.h5");
    }
    fuzz_write_file(path, data, size);
    ps_costdb db;
    ps_status st = ps_costdb_read(path, &db);
    unlink(path);
    if (st == PS_OK) {
        use(&db);
        ps_costdb_free(&db);
    }
    ps_error_clear();
    return 0;
}

/* Shared by the libFuzzer targets: the entry-point prototypes, a scratch folder for readers that only take paths,
 * and the invariants a model or cluster that a reader accepted must keep (an accepted input that later breaks the
 * arithmetic or the renderings is as much a reader bug as a crash). One target per translation unit: static inline. */
#ifndef PS_FUZZ_COMMON_H
#define PS_FUZZ_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models_internal.h"
#include "ps_cli.h"
#include "ps_common.h"
#include "ps_hw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Report a broken invariant the way libFuzzer reports a crash: abort() saves the input as crash-<sha1>. */
#define FUZZ_CHECK(cond)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: invariant broken: %s (last psearch error: %s)\n", __FILE__, __LINE__, #cond,       \
                    ps_error_message());                                                                               \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* FNV-1a of the input: picks options deterministically, so a saved crash input replays with the same options. */
static inline uint64_t fuzz_hash(const uint8_t *data, size_t size)
{
    return ps_hash64(data, size, PS_HASH64_INIT);
}

/* Renderings go to /dev/null: the formatting code runs, nothing is kept. */
static inline FILE *fuzz_sink(void)
{
    static FILE *f;
    if (!f) f = fopen("/dev/null", "w");
    if (!f) {
        perror("fuzz: /dev/null");
        abort();
    }
    return f;
}

/* ---- a scratch folder for the readers that take a path --------------------------------------------------------- */

static char g_fuzz_dir[512];

/* Everything the targets create, deepest first: a fixed, shallow layout under a mkdtemp folder of our own. */
static const char *const k_fuzz_paths[] = {"models/model.json", "models/model.layers", "models/model.txt",
                                           "models/hf/config.json", "models/hf", "models", "clusters/cluster.json",
                                           "clusters", "costdb.h5", NULL};

static inline void fuzz_cleanup_dir(void)
{
    char p[600];
    for (const char *const *f = k_fuzz_paths; *f; f++) {
        snprintf(p, sizeof p, "%s/%s", g_fuzz_dir, *f);
        if (unlink(p) != 0) rmdir(p);
    }
    rmdir(g_fuzz_dir);
}

/* A path inside the scratch folder (created by fuzz_scratch_dir), into a static buffer per call site. */
static inline void fuzz_path(char *out, size_t cap, const char *rel)
{
    int n = snprintf(out, cap, "%s/%s", g_fuzz_dir, rel);
    if (n < 0 || (size_t)n >= cap) abort();
}

static inline void fuzz_mkdir(const char *rel)
{
    char p[600];
    fuzz_path(p, sizeof p, rel);
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "fuzz: mkdir %s: %s\n", p, strerror(errno));
        abort();
    }
}

/* mkdtemp under $TMPDIR (scripts/fuzz.sh points it at its scratch folder), removed again at a normal exit. */
static inline const char *fuzz_scratch_dir(void)
{
    if (g_fuzz_dir[0]) return g_fuzz_dir;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    snprintf(g_fuzz_dir, sizeof g_fuzz_dir, "%s/psearch-fuzz-XXXXXX", tmp);
    if (!mkdtemp(g_fuzz_dir)) {
        fprintf(stderr, "fuzz: mkdtemp %s: %s\n", g_fuzz_dir, strerror(errno));
        abort();
    }
    atexit(fuzz_cleanup_dir);
    return g_fuzz_dir;
}

static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        fprintf(stderr, "fuzz: open %s: %s\n", path, strerror(errno));
        abort();
    }
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            fprintf(stderr, "fuzz: write %s: %s\n", path, strerror(errno));
            abort();
        }
        data += n;
        size -= (size_t)n;
    }
    close(fd);
}

/* The input as a NUL-terminated string (the readers see file contents the same way: ps_read_file adds the NUL). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* ---- models ------------------------------------------------------------------------------------------------------ */

/* Option sets the command line can produce (--seq, --vocab-pad, --dtype take any positive int64 / known dtype). */
static inline ps_model_opts fuzz_model_opts(uint64_t h)
{
    ps_model_opts o;
    ps_model_opts_init(&o);
    switch (h % 6) {
    case 0: break;
    case 1: o.seq = 1; break;
    case 2: o.seq = 4096, o.vocab_pad = 128, o.dtype = PS_DTYPE_FP8; break;
    case 3: o.seq = INT64_MAX, o.dtype = PS_DTYPE_FP32; break;
    case 4: o.vocab_pad = INT64_MAX; break;
    case 5: o.seq = 3, o.vocab_pad = 7, o.dtype = PS_DTYPE_FP16; break;
    }
    return o;
}

/* What every later stage relies on once a reader said PS_OK. */
static inline void fuzz_model_check(const ps_model *m)
{
    FUZZ_CHECK(m->n_layers >= 1 && m->n_layers <= PS_MODEL_MAX_LAYERS && m->layers != NULL);
    FUZZ_CHECK(m->seq >= 1);
    FUZZ_CHECK(memchr(m->name, '\0', sizeof m->name) && memchr(m->family, '\0', sizeof m->family) &&
               memchr(m->source, '\0', sizeof m->source));
    FUZZ_CHECK(ps_model_params(m) >= 0);
    for (int64_t i = 0; i < m->n_layers; i++) {
        const ps_layer *l = &m->layers[i];
        /* A repeated layer is a byte copy of the one before; its numbers are the same (and the coverage-traced
         * arithmetic is slow enough that a run at the layer limit would read as a hang). */
        if (i > 0 && memcmp(l, l - 1, sizeof *l) == 0) continue;
        FUZZ_CHECK(l->hidden >= 1 && l->out_hidden >= 1 && l->seq >= 1);
        FUZZ_CHECK(ps_layer_params(l) >= 0);
        double f = ps_layer_fwd_flops(l);
        FUZZ_CHECK(isfinite(f) && f >= 0);
        static const int tps[] = {1, 8};
        for (int t = 0; t < 2; t++)
            for (int sp = 0; sp < 2; sp++)
                for (int rc = PS_RECOMP_NONE; rc <= PS_RECOMP_FULL; rc++) {
                    double a = ps_layer_act_bytes(l, m->dtype, tps[t], sp, (ps_recompute)rc);
                    FUZZ_CHECK(isfinite(a) && a >= 0);
                }
        double b = ps_layer_boundary_bytes(l, m->dtype);
        FUZZ_CHECK(isfinite(b) && b >= 0);
    }
    /* `model show` in both formats; every field the JSON promises must be there (jansson drops a string that is
     * not UTF-8 without a word, which would make `--format json` silently lose the name). */
    json_t *j = ps_model_to_json(m);
    FUZZ_CHECK(j != NULL);
    FUZZ_CHECK(json_object_get(j, "name") && json_object_get(j, "family") && json_object_get(j, "source"));
    char *s = json_dumps(j, JSON_COMPACT);
    FUZZ_CHECK(s != NULL);
    free(s);
    json_decref(j);
    ps_model_print(fuzz_sink(), m);
}

/* ---- clusters ---------------------------------------------------------------------------------------------------- */

static inline void fuzz_cluster_check(const ps_cluster *c)
{
    FUZZ_CHECK(c->n_groups >= 1 && c->groups != NULL);
    FUZZ_CHECK(c->n_nodes >= 1 && c->n_gpus >= 0);
    FUZZ_CHECK(memchr(c->name, '\0', sizeof c->name) && memchr(c->source, '\0', sizeof c->source));
    /* The placement queries the cost model asks, at the edges of the GPU range and outside it. */
    const int64_t probes[] = {0, 1, c->n_gpus / 2, c->n_gpus - 2, c->n_gpus - 1};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        int64_t g = probes[i];
        if (g < 0 || g >= c->n_gpus) continue;
        int64_t node = ps_cluster_node_of(c, g);
        FUZZ_CHECK(node >= 0 && node < c->n_nodes);
        FUZZ_CHECK(ps_cluster_group_of(c, g) != NULL);
        for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
            if (probes[k] < 0 || probes[k] >= c->n_gpus) continue;
            ps_link l = ps_cluster_link(c, g, probes[k]);
            FUZZ_CHECK(l.bw_Bps > 0 && !isnan(l.bw_Bps) && l.latency_s >= 0 && isfinite(l.latency_s));
        }
    }
    FUZZ_CHECK(ps_cluster_node_of(c, -1) == -1 && ps_cluster_node_of(c, c->n_gpus) == -1);
    json_t *j = ps_cluster_to_json(c);
    FUZZ_CHECK(j != NULL);
    FUZZ_CHECK(json_object_get(j, "name") && json_object_get(j, "source"));
    char *s = json_dumps(j, JSON_COMPACT);
    FUZZ_CHECK(s != NULL);
    free(s);
    json_decref(j);
    ps_cluster_print(fuzz_sink(), c);
}

#endif

/* libFuzzer target: cluster descriptions, both ways a file reaches the parser: a cluster.json path (`--cluster
 * FILE`) and a preset of the data folder (`--cluster NAME:NODES`, where the file describes one node and the node
 * count comes from the spec). The readers take paths, so the input is written to a scratch folder each time; no
 * MPI_Init is needed (only "auto" uses MPI). Then the placement queries and renderings of an accepted cluster. */
#include "fuzz_common.h"

static char g_cluster_json[600];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_scratch_dir();
    fuzz_mkdir("clusters");
    fuzz_path(g_cluster_json, sizeof g_cluster_json, "clusters/cluster.json");
    /* Presets are looked up in <data dir>/clusters: ours is the scratch folder, nothing is read from the tree. */
    ps_data_dir_override(g_fuzz_dir);
    return 0;
}

/* The names a preset file can have (a superset of what hw/cluster.c accepts, so its own check is exercised) and
 * that ps_cluster_load would not read as a path in the working directory. */
static bool usable_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 100 || s[0] == '.' || strchr(s, '/')) return false;
    if (n >= 5 && strcmp(s + n - 5, ".json") == 0) return false;
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ps_cluster c;
    fuzz_write_file(g_cluster_json, data, size);
    if (ps_cluster_load_json(g_cluster_json, &c) == PS_OK) {
        fuzz_cluster_check(&c);
    } else {
        FUZZ_CHECK(c.groups == NULL && c.n_groups == 0);
    }
    ps_cluster_free(&c);

    /* The same text as a preset named by its own "name" field. */
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    const char *name = json_string_value(json_object_get(root, "name"));
    if (name && usable_name(name)) {
        static const int64_t nodes[] = {1, 2, 3, 64, INT64_MAX};
        char spec[160], file[800];
        snprintf(spec, sizeof spec, "%s:%lld", name, (long long)nodes[fuzz_hash(data, size) % 5]);
        snprintf(file, sizeof file, "%s/clusters/%s.json", g_fuzz_dir, name);
        fuzz_write_file(file, data, size);
        if (ps_cluster_load(spec, &c) == PS_OK) {
            fuzz_cluster_check(&c);
        } else {
            FUZZ_CHECK(c.groups == NULL && c.n_groups == 0);
        }
        ps_cluster_free(&c);
        unlink(file);
    }
    json_decref(root);
    return 0;
}

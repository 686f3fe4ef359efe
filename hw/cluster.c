/* Cluster descriptions from presets ("name:nodes") and cluster.json files, their invariants and derived counts, and
 * the placement queries the cost model asks (which node a GPU sits on, which link two GPUs talk over).
 * Nothing here needs MPI: only "auto" (calib/detect.c) does, so tools and tests can load clusters without MPI_Init. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ps_hw.h"

/* ---- link kinds -------------------------------------------------------------------------------------------------- */

/* Default latencies are the alpha of an alpha-beta transfer model for one small GPU-to-GPU message through NCCL, not
 * the raw hardware figure: NCCL's own tuning model adds a few microseconds of base latency to sub-microsecond
 * NVLink/PCIe hops and ~5 us network hops. docs/clusters.md gives the reasoning. `psearch calibrate` measures
 * collectives with MPI on CPU ranks and with NCCL on GPU ranks (calib/bench_coll.c); a cost database from such a run
 * answers collectives for its device kinds, and GPUs without one keep these defaults (docs/costdb.md). */
static const struct {
    const char *prefix;
    ps_link_class cls;
    double latency_s;
} k_link_kinds[] = {
    {"nvlink", PS_LINK_NVLINK, 3e-6},      /* NVLink 2/3/4, NVSwitch or bridge: ~1 us hop + NCCL base latency */
    {"nvswitch", PS_LINK_NVLINK, 3e-6},
    {"pcie", PS_LINK_PCIE, 10e-6},         /* PCIe P2P through switches / root complex, or staged through host memory */
    {"ib", PS_LINK_IB, 5e-6},              /* InfiniBand EDR/HDR/NDR with GPUDirect RDMA */
    {"roce", PS_LINK_IB, 5e-6},            /* RDMA over Converged Ethernet: IB verbs, similar latency */
    {"ethernet", PS_LINK_ETHERNET, 30e-6}, /* kernel TCP sockets (e.g. AWS ENA): 25-50 us round trips are typical */
    {"tcp", PS_LINK_ETHERNET, 30e-6},
};

/* "pcie4" and "ib-hdr" take the default of "pcie" and "ib"; "ibm" does not take that of "ib". */
static bool kind_matches(const char *kind, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(kind, prefix, n) != 0) return false;
    char c = kind[n];
    return c == '\0' || c == '-' || c == '_' || (c >= '0' && c <= '9');
}

bool ps_link_class_of(const char *kind, ps_link_class *out)
{
    if (!kind) return false;
    /* a measured link has no default latency: whoever measured it gives one */
    if (strcmp(kind, "measured") == 0) {
        *out = PS_LINK_MEASURED;
        return true;
    }
    for (size_t i = 0; i < sizeof k_link_kinds / sizeof k_link_kinds[0]; i++)
        if (kind_matches(kind, k_link_kinds[i].prefix)) {
            *out = k_link_kinds[i].cls;
            return true;
        }
    return false;
}

double ps_link_default_latency(const char *kind)
{
    if (!kind) return -1;
    for (size_t i = 0; i < sizeof k_link_kinds / sizeof k_link_kinds[0]; i++)
        if (kind_matches(kind, k_link_kinds[i].prefix)) return k_link_kinds[i].latency_s;
    return -1;
}

/* ---- JSON helpers ------------------------------------------------------------------------------------------------ */

/* A number that must be strictly positive: ps_json_num checks the type and the upper bound, this the "> 0" that a
 * closed range cannot state. */
static ps_status json_pos(const json_t *obj, const ps_jloc *loc, const char *key, bool required, double hi,
                          double *out)
{
    double v = 0;
    bool present = json_object_get(obj, key) != NULL;
    PS_TRY(ps_json_num(obj, loc, key, required, 0, hi, &v));
    if (!present) return PS_OK;
    if (!(v > 0)) {
        ps_jloc fl = ps_jloc_key(loc, key);
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be > 0 (got %g)", loc->file, fl.path, v);
    }
    *out = v;
    return PS_OK;
}

/* "comment" is accepted everywhere and ignored: presets explain their figures next to them. */
static ps_status check_comment(const json_t *obj, const ps_jloc *loc)
{
    const json_t *v = json_object_get(obj, "comment");
    if (v && !json_is_string(v)) {
        ps_jloc fl = ps_jloc_key(loc, "comment");
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be a string (got %s)", loc->file, fl.path,
                       ps_json_type_name(v));
    }
    return PS_OK;
}

static ps_status expect_object(const json_t *v, const ps_jloc *loc)
{
    if (!json_is_object(v))
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be an object (got %s)", loc->file, loc->path,
                       ps_json_type_name(v));
    return PS_OK;
}

/* Re-issue the catalog's "unknown GPU" message with the file and field in front. The message is copied first
 * because PS_FAIL formats into the same slot it would read from. */
static ps_status rewrap(ps_status st, const ps_jloc *loc)
{
    char msg[768];
    ps_strlcpy(msg, ps_error_message(), sizeof msg);
    return PS_FAIL(st, "%s: field '%s': %s", loc->file, loc->path, msg);
}

/* ---- parsing ----------------------------------------------------------------------------------------------------- */

typedef enum { LINK_GPU, LINK_ISLAND, LINK_DOMAIN, LINK_NET } link_role;

static ps_status parse_link(const json_t *obj, const ps_jloc *loc, link_role role, ps_link *out, int64_t *size)
{
    static const char *const gpu_keys[] = {"kind", "bw_GBps", "bw_Gbps", "latency_us", "comment", NULL};
    static const char *const island_keys[] = {"size", "kind", "bw_GBps", "bw_Gbps", "latency_us", "comment", NULL};
    static const char *const net_keys[] = {"kind", "bw_GBps", "bw_Gbps", "nics", "latency_us", "comment", NULL};
    static const char *const domain_keys[] = {"nodes", "kind", "bw_GBps", "bw_Gbps", "latency_us", "comment", NULL};
    static const char *const *const role_keys[] = {gpu_keys, island_keys, domain_keys, net_keys};
    PS_TRY(expect_object(obj, loc));
    PS_TRY(ps_json_known_keys(obj, loc, role_keys[role]));
    PS_TRY(check_comment(obj, loc));
    memset(out, 0, sizeof *out);
    if (role == LINK_ISLAND) PS_TRY(ps_json_int(obj, loc, "size", true, 2, INT64_MAX, size));
    /* A domain of one node is the node itself; the upper bound is the most nodes a cluster may have. */
    if (role == LINK_DOMAIN) PS_TRY(ps_json_int(obj, loc, "nodes", true, 2, PS_CLUSTER_MAX_NODES, size));
    PS_TRY(ps_json_str(obj, loc, "kind", true, out->kind, sizeof out->kind));
    /* Refused here, not priced as some other link later: the cost model's efficiency depends on the class. */
    if (!ps_link_class_of(out->kind, &out->cls)) {
        ps_jloc fl = ps_jloc_key(loc, "kind");
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s': unknown link kind '%s' (known: nvlink*, nvswitch*, pcie*, ib*, "
                                     "roce*, ethernet*, tcp*, measured)", loc->file, fl.path, out->kind);
    }
    /* Only NVLink joins GPUs of several nodes without their NICs (NVLink switch trays); a domain of another class
     * would be a network, which `inter` describes with its per-node sharing. */
    if (role == LINK_DOMAIN && out->cls != PS_LINK_NVLINK) {
        ps_jloc fl = ps_jloc_key(loc, "kind");
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be an NVLink kind (nvlink*, nvswitch*; got '%s')",
                       loc->file, fl.path, out->kind);
    }

    /* Both units are in use (NVLink is quoted in GB/s, NICs in Gb/s); the key says which, and one must be chosen. */
    bool has_B = json_object_get(obj, "bw_GBps") != NULL, has_b = json_object_get(obj, "bw_Gbps") != NULL;
    if (has_B && has_b)
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' gives both bw_GBps and bw_Gbps; give one", loc->file,
                       loc->path);
    if (!has_B && !has_b) {
        ps_jloc fl = ps_jloc_key(loc, "bw_GBps");
        return PS_FAIL(PS_ERR_INPUT, "%s: missing field '%s' (or bw_Gbps for gigabits per second)", loc->file,
                       fl.path);
    }
    double bw = 0;
    if (has_B) {
        PS_TRY(json_pos(obj, loc, "bw_GBps", true, 1e6, &bw));
        bw *= 1e9;
    } else {
        PS_TRY(json_pos(obj, loc, "bw_Gbps", true, 8e6, &bw));
        bw *= 1e9 / 8;
    }
    if (role == LINK_NET) {
        int64_t nics = 1;
        PS_TRY(ps_json_int(obj, loc, "nics", false, 1, 1024, &nics));
        bw *= (double)nics;
    }
    out->bw_Bps = bw;

    double lat_us = -1;
    PS_TRY(ps_json_num(obj, loc, "latency_us", false, 0, 1e6, &lat_us));
    if (lat_us >= 0) {
        out->latency_s = lat_us * 1e-6;
    } else {
        out->latency_s = ps_link_default_latency(out->kind);
        if (out->latency_s < 0) {
            ps_jloc fl = ps_jloc_key(loc, "latency_us");
            return PS_FAIL(PS_ERR_INPUT,
                           "%s: missing field '%s': link kind '%s' has no default latency (kinds with defaults: "
                           "nvlink*, nvswitch*, pcie*, ib*, roce*, ethernet*, tcp*)",
                           loc->file, fl.path, out->kind);
        }
    }
    return PS_OK;
}

static ps_status parse_gpu_object(const json_t *obj, const ps_jloc *loc, ps_gpu *out)
{
    static const char *const keys[] = {"name",        "base",        "marketing",       "mem_GiB",  "hbm_GBps",
                                       "fp32_TFLOPs", "tf32_TFLOPs", "fp16_TFLOPs",     "bf16_TFLOPs", "fp8_TFLOPs",
                                       "fp4_TFLOPs",  "sm_count",    "fused_attention", "gemm_eff", "source",
                                       "comment",     NULL};
    PS_TRY(ps_json_known_keys(obj, loc, keys));
    PS_TRY(check_comment(obj, loc));
    memset(out, 0, sizeof *out);
    char base[32] = "";
    PS_TRY(ps_json_str(obj, loc, "base", false, base, sizeof base));
    bool from_base = base[0] != '\0';
    if (from_base) {
        ps_jloc fl = ps_jloc_key(loc, "base");
        if (ps_gpu_lookup(base, out) != PS_OK) return rewrap(PS_ERR_INPUT, &fl);
    }
    /* A custom GPU needs the figures the cost model cannot do without; one derived from a catalog entry ("base")
     * overrides only what it names. */
    bool req = !from_base;
    PS_TRY(ps_json_str(obj, loc, "name", req, out->name, sizeof out->name));
    double mem_gib = 0, hbm = 0, fp32 = 0, fp16 = 0;
    PS_TRY(json_pos(obj, loc, "mem_GiB", req, 1e6, &mem_gib));
    PS_TRY(json_pos(obj, loc, "hbm_GBps", req, 1e6, &hbm));
    PS_TRY(json_pos(obj, loc, "fp32_TFLOPs", req, 1e6, &fp32));
    PS_TRY(json_pos(obj, loc, "fp16_TFLOPs", req, 1e6, &fp16));
    if (mem_gib > 0) out->mem_bytes = mem_gib * 1024.0 * 1024.0 * 1024.0;
    if (hbm > 0) out->hbm_Bps = hbm * 1e9;
    if (fp32 > 0) out->fp32_flops = fp32 * 1e12;
    if (fp16 > 0) out->fp16_flops = fp16 * 1e12;
    /* Optional precisions: 0 means the GPU lacks them (V100 has no BF16). */
    double tf32 = out->tf32_flops / 1e12, bf16 = out->bf16_flops / 1e12, fp8 = out->fp8_flops / 1e12;
    double fp4 = out->fp4_flops / 1e12;
    PS_TRY(ps_json_num(obj, loc, "tf32_TFLOPs", false, 0, 1e6, &tf32));
    PS_TRY(ps_json_num(obj, loc, "bf16_TFLOPs", false, 0, 1e6, &bf16));
    PS_TRY(ps_json_num(obj, loc, "fp8_TFLOPs", false, 0, 1e6, &fp8));
    PS_TRY(ps_json_num(obj, loc, "fp4_TFLOPs", false, 0, 1e6, &fp4));
    out->tf32_flops = tf32 * 1e12;
    out->bf16_flops = bf16 * 1e12;
    out->fp8_flops = fp8 * 1e12;
    out->fp4_flops = fp4 * 1e12;
    /* A custom GPU without the field: fused attention kernels need compute capability 8.0, the first with BF16
     * tensor cores, so BF16 support stands for it. */
    if (!from_base) out->fused_attn = out->bf16_flops > 0;
    PS_TRY(ps_json_bool(obj, loc, "fused_attention", false, &out->fused_attn));
    /* SMs: optional, 0 = unknown (the cost model then leaves out wave quantization); a "base" GPU keeps its own. */
    double sms = out->sm_count;
    PS_TRY(ps_json_num(obj, loc, "sm_count", false, 0, 100000, &sms));
    if (sms != floor(sms)) {
        ps_jloc fl = ps_jloc_key(loc, "sm_count");
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s': a whole number of SMs expected (got %g)", loc->file, fl.path,
                       sms);
    }
    out->sm_count = (int)sms;
    /* Measured GEMM efficiency: optional, 0 = not measured (the cost model's generic default); a "base" GPU keeps the
     * catalog's. */
    PS_TRY(ps_json_num(obj, loc, "gemm_eff", false, 0, 1, &out->gemm_eff));
    if (!from_base) ps_strlcpy(out->marketing, out->name, sizeof out->marketing);
    PS_TRY(ps_json_str(obj, loc, "marketing", false, out->marketing, sizeof out->marketing));
    if (!from_base) snprintf(out->source, sizeof out->source, "custom GPU in %s", loc->file);
    PS_TRY(ps_json_str(obj, loc, "source", false, out->source, sizeof out->source));
    if (strcmp(out->name, "none") == 0) {
        ps_jloc fl = ps_jloc_key(loc, "name");
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s': 'none' is reserved for CPU-only nodes", loc->file, fl.path);
    }
    return PS_OK;
}

static void gpu_none(ps_gpu *g)
{
    memset(g, 0, sizeof *g);
    ps_strlcpy(g->name, "none", sizeof g->name);
    ps_strlcpy(g->marketing, "no GPU (CPU-only node)", sizeof g->marketing);
}

static ps_status parse_group(const json_t *obj, const ps_jloc *loc, bool preset, const char *preset_name,
                             ps_node_group *out)
{
    static const char *const keys[] = {"name",   "nodes",   "gpus_per_node",  "gpu",           "intra",
                                       "island", "nvlink_domain", "inter", "comment", "cores_per_node",
                                       "numa_per_node", NULL};
    PS_TRY(expect_object(obj, loc));
    PS_TRY(ps_json_known_keys(obj, loc, keys));
    PS_TRY(check_comment(obj, loc));

    if (preset) {
        ps_strlcpy(out->name, preset_name, sizeof out->name);
        if (json_object_get(obj, "nodes")) {
            ps_jloc fl = ps_jloc_key(loc, "nodes");
            return PS_FAIL(PS_ERR_INPUT,
                           "%s: field '%s' is not allowed in a cluster preset: the node count comes from "
                           "'%s:N'",
                           loc->file, fl.path, preset_name);
        }
    } else {
        PS_TRY(ps_json_int(obj, loc, "nodes", true, 1, INT64_MAX, &out->nodes));
    }
    PS_TRY(ps_json_str(obj, loc, "name", false, out->name, sizeof out->name));
    PS_TRY(ps_json_int(obj, loc, "gpus_per_node", true, 0, INT64_MAX, &out->gpus_per_node));

    ps_jloc gl = ps_jloc_key(loc, "gpu");
    const json_t *gpu = json_object_get(obj, "gpu");
    if (!gpu) {
        if (out->gpus_per_node > 0)
            return PS_FAIL(PS_ERR_INPUT, "%s: missing field '%s' (a catalog key such as \"a100-80g\" or an object)",
                           loc->file, gl.path);
        gpu_none(&out->gpu);
    } else if (json_is_string(gpu)) {
        const char *kind = json_string_value(gpu);
        if (strcmp(kind, "none") == 0) {
            if (out->gpus_per_node > 0)
                return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' is \"none\" but gpus_per_node is %lld", loc->file,
                               gl.path, (long long)out->gpus_per_node);
            gpu_none(&out->gpu);
        } else if (ps_gpu_lookup(kind, &out->gpu) != PS_OK) {
            return rewrap(PS_ERR_INPUT, &gl);
        }
    } else if (json_is_object(gpu)) {
        PS_TRY(parse_gpu_object(gpu, &gl, &out->gpu));
    } else {
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must be a GPU kind or an object (got %s)", loc->file, gl.path,
                       ps_json_type_name(gpu));
    }
    if (out->gpus_per_node == 0 && strcmp(out->gpu.name, "none") != 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' is '%s' but gpus_per_node is 0 (use \"none\" for CPU-only nodes)",
                       loc->file, gl.path, out->gpu.name);

    const json_t *v = json_object_get(obj, "intra");
    ps_jloc il = ps_jloc_key(loc, "intra");
    if (v) {
        PS_TRY(parse_link(v, &il, LINK_GPU, &out->intra, NULL));
    } else if (out->gpus_per_node > 1) {
        return PS_FAIL(PS_ERR_INPUT, "%s: missing field '%s' (needed when gpus_per_node > 1)", loc->file, il.path);
    } else {
        ps_strlcpy(out->intra.kind, "none", sizeof out->intra.kind);
        out->intra.cls = PS_LINK_NONE;
    }

    v = json_object_get(obj, "island");
    if (v) {
        ps_jloc sl = ps_jloc_key(loc, "island");
        PS_TRY(parse_link(v, &sl, LINK_ISLAND, &out->island, &out->island_size));
        if (out->island_size > out->gpus_per_node || out->gpus_per_node % out->island_size != 0) {
            ps_jloc zl = ps_jloc_key(&sl, "size");
            return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' must divide gpus_per_node %lld (got %lld)", loc->file,
                           zl.path, (long long)out->gpus_per_node, (long long)out->island_size);
        }
    }

    v = json_object_get(obj, "nvlink_domain");
    if (v) {
        ps_jloc dl = ps_jloc_key(loc, "nvlink_domain");
        PS_TRY(parse_link(v, &dl, LINK_DOMAIN, &out->domain, &out->domain_nodes));
        if (out->gpus_per_node == 0)
            return PS_FAIL(PS_ERR_INPUT, "%s: field '%s' is given but the group's nodes have no GPUs", loc->file,
                           dl.path);
        /* A remainder would be a partial domain whose size nothing states: refused. A partial rack is a domain of
         * as many nodes as it holds (a group of its own). A preset's node count is N domains, so always divides. */
        if (!preset && out->nodes % out->domain_nodes != 0) {
            ps_jloc zl = ps_jloc_key(&dl, "nodes");
            return PS_FAIL(PS_ERR_INPUT,
                           "%s: field '%s' must divide the group's nodes %lld (got %lld); give a partial domain a "
                           "node group of its own",
                           loc->file, zl.path, (long long)out->nodes, (long long)out->domain_nodes);
        }
    }

    v = json_object_get(obj, "inter");
    if (v) {
        ps_jloc nl = ps_jloc_key(loc, "inter");
        PS_TRY(parse_link(v, &nl, LINK_NET, &out->inter, NULL));
    } else {
        /* Only a one-node cluster may omit the network; ps_cluster_finish checks that once the node count is known. */
        ps_strlcpy(out->inter.kind, "none", sizeof out->inter.kind);
        out->inter.cls = PS_LINK_NONE;
    }
    PS_TRY(ps_json_int(obj, loc, "cores_per_node", false, 1, INT64_MAX, &out->cores_per_node));
    PS_TRY(ps_json_int(obj, loc, "numa_per_node", false, 1, INT64_MAX, &out->numa_per_node));
    return PS_OK;
}

/* Parse a cluster.json document (preset == NULL) or a preset file for `nodes` nodes into out (zeroed by the caller).
 * The caller frees out on failure. */
static ps_status parse_cluster(const json_t *root, const char *file, const char *preset, int64_t nodes,
                               ps_cluster *out)
{
    static const char *const keys[] = {"name", "source", "node_groups", "comment", NULL};
    ps_jloc loc = ps_jloc_root(file);
    PS_TRY(ps_json_known_keys(root, &loc, keys));
    PS_TRY(check_comment(root, &loc));
    PS_TRY(ps_json_str(root, &loc, "name", true, out->name, sizeof out->name));
    PS_TRY(ps_json_str(root, &loc, "source", preset != NULL, out->source, sizeof out->source));
    if (preset && strcmp(out->name, preset) != 0)
        return PS_FAIL(PS_ERR_INPUT, "%s: field 'name' is '%s' but the preset file is named '%s'", file, out->name,
                       preset);

    ps_jloc gl = ps_jloc_key(&loc, "node_groups");
    const json_t *groups = json_object_get(root, "node_groups");
    if (!groups) return PS_FAIL(PS_ERR_INPUT, "%s: missing field 'node_groups'", file);
    if (!json_is_array(groups))
        return PS_FAIL(PS_ERR_INPUT, "%s: field 'node_groups' must be an array (got %s)", file,
                       ps_json_type_name(groups));
    size_t n = json_array_size(groups);
    if (n == 0) return PS_FAIL(PS_ERR_INPUT, "%s: field 'node_groups' is empty; give at least one node group", file);
    if (preset && n != 1)
        return PS_FAIL(PS_ERR_INPUT, "%s: a cluster preset describes one node: 'node_groups' must hold exactly one "
                       "group (got %zu)", file, n);
    /* A cluster of more distinct node shapes than this is a generated file gone wrong, not a machine. */
    if (n > 65536) return PS_FAIL(PS_ERR_INPUT, "%s: field 'node_groups' has %zu groups (at most 65536)", file, n);
    out->groups = ps_calloc(n, sizeof *out->groups);
    if (!out->groups) return PS_ERR_SYSTEM;
    out->n_groups = (int)n;
    for (size_t i = 0; i < n; i++) {
        ps_jloc il = ps_jloc_idx(&gl, i);
        ps_node_group *g = &out->groups[i];
        snprintf(g->name, sizeof g->name, "group%zu", i);
        PS_TRY(parse_group(json_array_get(groups, i), &il, preset != NULL, preset, g));
        /* A preset with an NVLink domain counts domains (racks), not nodes: see ps_cluster_load. */
        if (preset && !ps_mul_i64(nodes, g->domain_nodes > 1 ? g->domain_nodes : 1, &g->nodes))
            return PS_FAIL(PS_ERR_INPUT, "%s: %lld domains of %lld nodes overflow a 64-bit count", file,
                           (long long)nodes, (long long)g->domain_nodes);
    }
    if (preset) {
        /* The cluster is named by its spec so plans and tables say how many nodes they were made for. */
        snprintf(out->name, sizeof out->name, "%s:%lld", preset, (long long)nodes);
    }
    return ps_cluster_finish(out, file);
}

/* ---- invariants and derived fields ------------------------------------------------------------------------------- */

static bool link_valid(const ps_link *l)
{
    return isfinite(l->bw_Bps) && l->bw_Bps > 0 && isfinite(l->latency_s) && l->latency_s >= 0;
}

static bool link_equal(const ps_link *a, const ps_link *b)
{
    return strcmp(a->kind, b->kind) == 0 && a->bw_Bps == b->bw_Bps && a->latency_s == b->latency_s;
}

static bool gpu_equal(const ps_gpu *a, const ps_gpu *b)
{
    return strcmp(a->name, b->name) == 0 && a->mem_bytes == b->mem_bytes && a->hbm_Bps == b->hbm_Bps &&
           a->fp32_flops == b->fp32_flops && a->tf32_flops == b->tf32_flops && a->fp16_flops == b->fp16_flops &&
           a->bf16_flops == b->bf16_flops && a->fp8_flops == b->fp8_flops && a->fp4_flops == b->fp4_flops &&
           a->fused_attn == b->fused_attn && a->sm_count == b->sm_count && a->gemm_eff == b->gemm_eff;
}

/* Same GPU and same links: CPU cores and NUMA domains do not change a plan, so they do not make a cluster
 * heterogeneous. */
static bool same_shape(const ps_node_group *a, const ps_node_group *b)
{
    if (a->gpus_per_node != b->gpus_per_node || !gpu_equal(&a->gpu, &b->gpu)) return false;
    if (a->gpus_per_node > 1 && !link_equal(&a->intra, &b->intra)) return false;
    if (a->island_size != b->island_size || (a->island_size > 1 && !link_equal(&a->island, &b->island)))
        return false;
    if (a->domain_nodes != b->domain_nodes || (a->domain_nodes > 1 && !link_equal(&a->domain, &b->domain)))
        return false;
    return link_equal(&a->inter, &b->inter);
}

ps_status ps_cluster_finish(ps_cluster *c, const char *where)
{
    if (!c) return PS_FAIL(PS_ERR_INPUT, "no cluster given");
    if (!where || !*where) where = c->name[0] ? c->name : "cluster";
    if (c->n_groups <= 0 || !c->groups)
        return PS_FAIL(PS_ERR_INPUT, "%s: the cluster has no node groups", where);
    int64_t n_nodes = 0, n_gpus = 0;
    for (int i = 0; i < c->n_groups; i++) {
        ps_node_group *g = &c->groups[i];
        g->first_gpu = n_gpus;
        g->first_node = n_nodes;
        if (g->nodes < 1)
            return PS_FAIL(PS_ERR_INPUT, "%s: node_groups[%d].nodes must be >= 1 (got %lld)", where, i,
                           (long long)g->nodes);
        if (g->gpus_per_node < 0)
            return PS_FAIL(PS_ERR_INPUT, "%s: node_groups[%d].gpus_per_node must be >= 0 (got %lld)", where, i,
                           (long long)g->gpus_per_node);
        int64_t gpus;
        if (!ps_mul_i64(g->nodes, g->gpus_per_node, &gpus))
            return PS_FAIL(PS_ERR_INPUT,
                           "%s: node_groups[%d]: nodes x gpus_per_node = %lld x %lld overflows a 64-bit count", where,
                           i, (long long)g->nodes, (long long)g->gpus_per_node);
        if (!ps_add_i64(n_nodes, g->nodes, &n_nodes))
            return PS_FAIL(PS_ERR_INPUT, "%s: node_groups[%d].nodes = %lld: the total node count overflows", where, i,
                           (long long)g->nodes);
        if (!ps_add_i64(n_gpus, gpus, &n_gpus))
            return PS_FAIL(PS_ERR_INPUT, "%s: node_groups[%d]: %lld GPUs: the total GPU count overflows", where, i,
                           (long long)gpus);
        if (n_nodes > PS_CLUSTER_MAX_NODES || n_gpus > PS_CLUSTER_MAX_GPUS)
            return PS_FAIL(PS_ERR_INPUT,
                           "%s: node_groups[%d]: nodes = %lld x gpus_per_node = %lld makes %lld nodes and "
                           "%lld GPUs in all; psearch plans for at most %d nodes and %d GPUs",
                           where, i, (long long)g->nodes, (long long)g->gpus_per_node, (long long)n_nodes,
                           (long long)n_gpus, PS_CLUSTER_MAX_NODES, PS_CLUSTER_MAX_GPUS);
        if (g->gpus_per_node > 0) {
            const ps_gpu *p = &g->gpu;
            if (!(p->mem_bytes > 0) || !(p->fp16_flops > 0) || !(p->fp32_flops > 0) || !(p->hbm_Bps > 0))
                return PS_FAIL(PS_ERR_INPUT,
                               "%s: node_groups[%d].gpu '%s' needs memory, memory bandwidth, fp32 and fp16 peaks > 0",
                               where, i, p->name);
        }
        if (g->gpus_per_node > 1 && !link_valid(&g->intra))
            return PS_FAIL(PS_ERR_INPUT,
                           "%s: node_groups[%d].intra needs a bandwidth > 0 and a latency >= 0 (got %g GB/s, %g us)",
                           where, i, g->intra.bw_Bps / 1e9, g->intra.latency_s * 1e6);
        if (g->island_size != 0) {
            if (g->island_size < 2 || g->gpus_per_node % g->island_size != 0)
                return PS_FAIL(PS_ERR_INPUT,
                               "%s: node_groups[%d].island.size must divide gpus_per_node %lld (got %lld)", where, i,
                               (long long)g->gpus_per_node, (long long)g->island_size);
            if (!link_valid(&g->island))
                return PS_FAIL(PS_ERR_INPUT, "%s: node_groups[%d].island needs a bandwidth > 0 and a latency >= 0",
                               where, i);
        }
        if (g->domain_nodes != 0) {
            if (g->domain_nodes < 2 || g->nodes % g->domain_nodes != 0 || g->gpus_per_node == 0)
                return PS_FAIL(PS_ERR_INPUT,
                               "%s: node_groups[%d].nvlink_domain.nodes must be >= 2 and divide the group's nodes "
                               "%lld, on nodes with GPUs (got %lld, %lld GPUs per node)",
                               where, i, (long long)g->nodes, (long long)g->domain_nodes,
                               (long long)g->gpus_per_node);
            if (!link_valid(&g->domain))
                return PS_FAIL(PS_ERR_INPUT,
                               "%s: node_groups[%d].nvlink_domain needs a bandwidth > 0 and a latency >= 0", where,
                               i);
        }
    }
    /* Checked after the loop: whether a group needs a network depends on the nodes of all groups. Nodes of one
     * NVLink domain reach each other without it, so a single GB200 NVL72 rack needs none. */
    int64_t n_domains = 0;
    for (int i = 0; i < c->n_groups; i++)
        n_domains += c->groups[i].domain_nodes > 1 ? c->groups[i].nodes / c->groups[i].domain_nodes
                                                   : c->groups[i].nodes;
    if (n_domains > 1) {
        for (int i = 0; i < c->n_groups; i++)
            if (!link_valid(&c->groups[i].inter)) {
                if (n_domains == n_nodes)
                    return PS_FAIL(PS_ERR_INPUT,
                                   "%s: node_groups[%d].inter: a cluster of %lld nodes needs each node's network "
                                   "(bandwidth > 0, latency >= 0)",
                                   where, i, (long long)n_nodes);
                return PS_FAIL(PS_ERR_INPUT,
                               "%s: node_groups[%d].inter: a cluster of %lld NVLink domains needs each node's "
                               "network (bandwidth > 0, latency >= 0)",
                               where, i, (long long)n_domains);
            }
    }
    c->n_nodes = n_nodes;
    c->n_gpus = n_gpus;
    c->heterogeneous = false;
    for (int i = 1; i < c->n_groups; i++)
        if (!same_shape(&c->groups[0], &c->groups[i])) c->heterogeneous = true;
    return PS_OK;
}

void ps_cluster_free(ps_cluster *c)
{
    if (!c) return;
    free(c->groups);
    memset(c, 0, sizeof *c);
}

/* ---- loading ----------------------------------------------------------------------------------------------------- */

ps_status ps_cluster_parse(const ps_cluster_source *src, const char *text, size_t len, ps_cluster *out)
{
    memset(out, 0, sizeof *out);
    if (src->detect) return PS_FAIL(PS_ERR_INPUT, "cluster 'auto' is detected on the allocation, not read from a file");
    json_t *root = NULL;
    PS_TRY(ps_json_load_buffer(text, len, src->path, &root));
    ps_status st = parse_cluster(root, src->path, src->preset[0] ? src->preset : NULL, src->nodes, out);
    json_decref(root);
    if (st != PS_OK) {
        ps_cluster_free(out);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

/* ps_cluster_parse of the file src names. */
static ps_status load_source(const ps_cluster_source *src, ps_cluster *out)
{
    char *text = NULL;
    size_t len = 0;
    PS_TRY(ps_read_file(src->path, &text, &len));
    ps_status st = ps_cluster_parse(src, text, len, out);
    free(text);
    return st == PS_OK ? PS_OK : ps_error_trace(st, __FILE__, __LINE__);
}

ps_status ps_cluster_load_json(const char *path, ps_cluster *out)
{
    memset(out, 0, sizeof *out);
    if (!path || !*path) return PS_FAIL(PS_ERR_INPUT, "no cluster.json path given");
    ps_cluster_source src;
    memset(&src, 0, sizeof src);
    PS_TRY(ps_path_copy(src.path, sizeof src.path, path));
    PS_TRY(load_source(&src, out));
    return PS_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void ps_cluster_list_free(char **names, int count)
{
    if (!names) return;
    for (int i = 0; i < count; i++) free(names[i]);
    free(names);
}

ps_status ps_cluster_list(char ***names, int *count)
{
    *names = NULL;
    *count = 0;
    char dir[PATH_MAX];
    PS_TRY(ps_data_dir("clusters", dir, sizeof dir));
    DIR *d = opendir(dir);
    if (!d) return PS_FAIL(PS_ERR_SYSTEM, "%s: cannot list cluster presets: %s", dir, strerror(errno));
    char **v = NULL;
    int n = 0, cap = 0;
    ps_status st = PS_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 5 || strcmp(e->d_name + len - 5, ".json") != 0) continue;
        if (n == cap) {
            int ncap = cap ? 2 * cap : 16;
            char **nv = realloc(v, (size_t)ncap * sizeof *nv);
            if (!nv) {
                st = PS_FAIL(PS_ERR_SYSTEM, "out of memory listing cluster presets");
                break;
            }
            v = nv;
            cap = ncap;
        }
        char *s = ps_calloc(len - 4, 1);
        if (!s) {
            st = PS_ERR_SYSTEM;
            break;
        }
        memcpy(s, e->d_name, len - 5);
        v[n++] = s;
    }
    closedir(d);
    if (st != PS_OK) {
        ps_cluster_list_free(v, n);
        return st;
    }
    if (n > 0) qsort(v, (size_t)n, sizeof *v, cmp_str);
    *names = v;
    *count = n;
    return PS_OK;
}

static ps_status unknown_preset(const char *name)
{
    char **names = NULL;
    int n = 0;
    if (ps_cluster_list(&names, &n) != PS_OK) {
        char why[512];
        ps_strlcpy(why, ps_error_message(), sizeof why);
        return PS_FAIL(PS_ERR_INPUT, "unknown cluster preset '%s' (and the presets cannot be listed: %s)", name, why);
    }
    char known[640] = "";
    const char *best = NULL;
    int best_d = 1000;
    for (int i = 0; i < n; i++) {
        ps_strcatf(known, sizeof known, "%s%s", i ? ", " : "", names[i]);
        /* A name the user cut short ("dgx-a100") is better answered by what it starts than by the nearest
         * spelling ("dgx-h100"). */
        int dist = strncmp(names[i], name, strlen(name)) == 0 ? 0 : ps_edit_distance(name, names[i]);
        if (dist < best_d) {
            best_d = dist;
            best = names[i];
        }
    }
    char hint[96] = "";
    if (best && best_d <= 4) snprintf(hint, sizeof hint, " (did you mean '%s'?)", best);
    ps_status st = PS_FAIL(PS_ERR_INPUT,
                           "unknown cluster preset '%s'%s; known presets: %s; or give a cluster.json path or 'auto'",
                           name, hint, n ? known : "(none installed)");
    ps_cluster_list_free(names, n);
    return st;
}

/* Preset names are file names in the presets folder; anything else ("..", spaces) cannot name one. */
static bool preset_name_ok(const char *name)
{
    if (!name[0] || name[0] == '.') return false;
    for (const char *p = name; *p; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                  ch == '_' || ch == '.';
        if (!ok) return false;
    }
    /* Short enough that "name:<any int64>" fits the cluster's 64-character name. */
    return strlen(name) <= 40;
}

static ps_status locate_preset(const char *name, int64_t nodes, ps_cluster_source *src)
{
    if (!preset_name_ok(name)) return unknown_preset(name);
    if (nodes < 1)
        return PS_FAIL(PS_ERR_INPUT, "cluster '%s': the node count must be >= 1 (got %lld)", name, (long long)nodes);
    char dir[PATH_MAX], path[PATH_MAX + 64];
    PS_TRY(ps_data_dir("clusters", dir, sizeof dir));
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0) return unknown_preset(name);
    PS_TRY(ps_path_copy(src->path, sizeof src->path, path));
    ps_strlcpy(src->preset, name, sizeof src->preset); /* preset_name_ok: at most 40 characters */
    src->nodes = nodes;
    return PS_OK;
}

ps_status ps_cluster_preset(const char *name, int64_t nodes, ps_cluster *out)
{
    memset(out, 0, sizeof *out);
    if (!name) return PS_FAIL(PS_ERR_INPUT, "no cluster preset given");
    ps_cluster_source src;
    memset(&src, 0, sizeof src);
    PS_TRY(locate_preset(name, nodes, &src));
    PS_TRY(load_source(&src, out));
    return PS_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

ps_status ps_cluster_locate(const char *spec, ps_cluster_source *src)
{
    memset(src, 0, sizeof *src);
    if (!spec || !*spec)
        return PS_FAIL(PS_ERR_INPUT, "no cluster given: use a preset such as 'dgx-a100-80g:4', a cluster.json path, "
                                     "or 'auto'");
    if (strcmp(spec, "auto") == 0) {
        src->detect = true;
        return PS_OK;
    }
    if (strchr(spec, '/') || ends_with(spec, ".json")) {
        PS_TRY(ps_path_copy(src->path, sizeof src->path, spec));
        return PS_OK;
    }
    char name[128];
    if (strlen(spec) >= sizeof name) return PS_FAIL(PS_ERR_INPUT, "cluster '%.64s...' is too long a name", spec);
    ps_strlcpy(name, spec, sizeof name);
    int64_t nodes = 1;
    char *colon = strrchr(name, ':');
    if (colon) {
        *colon = '\0';
        const char *count = colon + 1;
        if (!ps_parse_i64(count, &nodes))
            return PS_FAIL(PS_ERR_INPUT, "cluster '%s': the node count '%s' is not a whole number (use e.g. '%s:4')",
                           spec, count, name);
        if (nodes < 1 || nodes > PS_CLUSTER_MAX_NODES)
            return PS_FAIL(PS_ERR_INPUT, "cluster '%s': the node count must be in 1..%d (got %lld)", spec,
                           PS_CLUSTER_MAX_NODES, (long long)nodes);
        if (!name[0])
            return PS_FAIL(PS_ERR_INPUT, "cluster '%s': no preset name before ':%s' (e.g. dgx-a100-80g:%s; "
                           "psearch cluster list shows them)", spec, count, count);
    }
    PS_TRY(locate_preset(name, nodes, src));
    return PS_OK;
}

ps_status ps_cluster_load(const char *spec, ps_cluster *out)
{
    memset(out, 0, sizeof *out);
    ps_cluster_source src;
    PS_TRY(ps_cluster_locate(spec, &src));
    if (src.detect)
        return PS_FAIL(PS_ERR_INPUT, "cluster 'auto' describes the MPI job psearch runs in: ps_cluster_detect "
                                     "(calib/) reads it, not the preset and cluster.json loader");
    PS_TRY(load_source(&src, out));
    return PS_OK;
}

/* ---- placement --------------------------------------------------------------------------------------------------- */

/* The group, node and GPU within the node of a global GPU, from the groups' first GPU and node (derived by
 * ps_cluster_finish; an unfinished cluster has n_gpus 0 and places nothing). Costing a ring asks this for every
 * edge, so one group, the common case, takes no search, and several take a binary search for the last group
 * starting at or before `gpu` (a group without GPUs starts where the next one does, so it is never that one). */
bool ps_cluster_place(const ps_cluster *c, int64_t gpu, ps_gpu_place *out)
{
    if (!c || !c->groups || gpu < 0 || gpu >= c->n_gpus) return false;
    int lo = 0, hi = c->n_groups - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (c->groups[mid].first_gpu <= gpu)
            lo = mid;
        else
            hi = mid - 1;
    }
    const ps_node_group *g = &c->groups[lo];
    int64_t rest = gpu - g->first_gpu;
    out->group = lo;
    out->node = g->first_node + rest / g->gpus_per_node;
    out->local = rest % g->gpus_per_node;
    out->domain = out->node;
    if (g->domain_nodes > 1) {
        int64_t k = out->node - g->first_node;
        out->domain = g->first_node + k - k % g->domain_nodes;
    }
    return true;
}

int64_t ps_cluster_domain_of(const ps_cluster *c, int64_t gpu)
{
    ps_gpu_place pl;
    return ps_cluster_place(c, gpu, &pl) ? pl.domain : -1;
}

int64_t ps_node_group_domain_gpus(const ps_node_group *g)
{
    if (!g) return 0;
    return g->gpus_per_node * (g->domain_nodes > 1 ? g->domain_nodes : 1);
}

int64_t ps_cluster_node_of(const ps_cluster *c, int64_t gpu)
{
    ps_gpu_place pl;
    return ps_cluster_place(c, gpu, &pl) ? pl.node : -1;
}

const ps_node_group *ps_cluster_group_of(const ps_cluster *c, int64_t gpu)
{
    ps_gpu_place pl;
    return ps_cluster_place(c, gpu, &pl) ? &c->groups[pl.group] : NULL;
}

int ps_cluster_group_index(const ps_cluster *c, int64_t gpu)
{
    ps_gpu_place pl;
    return ps_cluster_place(c, gpu, &pl) ? pl.group : -1;
}

ps_link ps_cluster_link_placed(const ps_cluster *c, const ps_gpu_place *a, const ps_gpu_place *b)
{
    ps_link l;
    if (a->node == b->node) {
        if (a->local == b->local) {
            memset(&l, 0, sizeof l);
            ps_strlcpy(l.kind, "self", sizeof l.kind);
            l.bw_Bps = INFINITY;
            return l;
        }
        const ps_node_group *g = &c->groups[a->group];
        if (g->island_size > 1 && a->local / g->island_size == b->local / g->island_size) return g->island;
        return g->intra;
    }
    /* Different nodes of one NVLink domain (hence one group): NVLink through the switch trays, not the NICs. */
    if (a->domain == b->domain) return c->groups[a->group].domain;
    /* Across nodes the transfer is limited by the slower NIC and waits for the slower stack. */
    const ps_link *ia = &c->groups[a->group].inter, *ib = &c->groups[b->group].inter;
    l = ia->bw_Bps <= ib->bw_Bps ? *ia : *ib;
    l.latency_s = fmax(ia->latency_s, ib->latency_s);
    return l;
}

ps_link ps_cluster_link(const ps_cluster *c, int64_t a, int64_t b)
{
    ps_gpu_place pa, pb;
    if (!ps_cluster_place(c, a, &pa) || !ps_cluster_place(c, b, &pb)) {
        /* No such GPU: a link nothing can cross, so a caller's bug shows up as an infinite time, not a fast one. */
        ps_link l;
        memset(&l, 0, sizeof l);
        ps_strlcpy(l.kind, "invalid", sizeof l.kind);
        l.latency_s = INFINITY;
        return l;
    }
    return ps_cluster_link_placed(c, &pa, &pb);
}

bool ps_cluster_supports_dtype(const ps_cluster *c, const char *dtype)
{
    /* CPU-only groups (gpus_per_node 0) hold no stage: only the GPUs decide, or a login node's missing tensor cores
     * would block the fp16 fallback of a V100 cluster */
    int gpu_groups = 0;
    for (int g = 0; g < c->n_groups; g++) {
        if (c->groups[g].gpus_per_node == 0) continue;
        if (!(ps_gpu_peak_flops(&c->groups[g].gpu, dtype) > 0)) return false;
        gpu_groups++;
    }
    return gpu_groups > 0;
}

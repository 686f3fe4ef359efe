/* Cluster descriptions: the GPU catalog, cluster presets, cluster.json for heterogeneous clusters, and the placement
 * queries the cost model asks. Pure: no MPI, no hwloc, no CUDA (describing the allocation psearch runs on, `--cluster
 * auto`, is calib/'s ps_cluster_detect). Describes hardware; never decides plans. */
#ifndef PS_HW_H
#define PS_HW_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A GPU model. Peaks are dense (no structured sparsity), from the vendor datasheets cited in hw/gpu_catalog.c. */
typedef struct {
    char name[32];        /* catalog key, e.g. "a100-80g" */
    char marketing[64];   /* "NVIDIA A100-SXM4-80GB" */
    double mem_bytes;     /* device memory in bytes (GiB-based: 80 GB card = 80 * 2^30) */
    double hbm_Bps;       /* memory bandwidth, bytes/s */
    double fp32_flops;    /* peak FP32 (non-tensor) FLOP/s */
    double tf32_flops;    /* peak TF32 tensor FLOP/s, 0 if none */
    double fp16_flops;    /* peak FP16 tensor FLOP/s with FP32 accumulate */
    double bf16_flops;    /* peak BF16 tensor FLOP/s, 0 if unsupported */
    double fp8_flops;     /* peak FP8 tensor FLOP/s, 0 if unsupported */
    double fp4_flops;     /* peak FP4 tensor FLOP/s, 0 if unsupported (catalog data: no plan trains in FP4, so it
                             has no ps_gpu_precision and ps_gpu_peak_flops(g, "fp4") is 0) */
    bool fused_attn;      /* a fused attention kernel (FlashAttention-2/3, cuDNN) trains on it: compute capability
                             8.0 or later (sources in hw/gpu_catalog.c); psearch's default attention there */
    int sm_count;         /* streaming multiprocessors (whitepapers cited in hw/gpu_catalog.c; the CUDA runtime's
                             multiProcessorCount for detected GPUs); 0 = unknown: the cost model then skips GEMM wave
                             quantization for it (docs/costmodel.md, "GEMM efficiency by shape") */
    double gemm_eff;      /* fraction of the dense peak large training GEMMs reach on it, measured (sources in
                             hw/gpu_catalog.c); 0 = not measured: the cost model's generic gemm_eff default */
    char source[128];     /* datasheet the numbers come from */
} ps_gpu;

/* What a link is, as the cost model prices it (its achievable fraction of the nominal bandwidth). Parsed from the
 * link's kind name once, when a cluster is loaded; the name stays for messages and output. */
typedef enum {
    PS_LINK_NONE = 0,     /* no link to cross: "none" (one GPU per node, no network), "self", "invalid" */
    PS_LINK_NVLINK,       /* nvlink*, nvswitch* */
    PS_LINK_PCIE,         /* pcie* */
    PS_LINK_IB,           /* ib*, roce* (InfiniBand verbs) */
    PS_LINK_ETHERNET,     /* ethernet*, tcp* */
    PS_LINK_MEASURED      /* "measured": the bandwidth a send/recv reached (--cluster costdb), already achieved */
} ps_link_class;

/* A link class: bandwidth per direction per GPU (or per node for networks) and latency. */
typedef struct {
    char kind[32];        /* "nvlink3", "pcie3", "ib-hdr", "ethernet", ... */
    ps_link_class cls;    /* parsed from kind (ps_link_class_of) */
    double bw_Bps;        /* bytes/s per direction */
    double latency_s;     /* one-way latency, seconds */
} ps_link;

/* A group of identical nodes. A cluster is one or more groups; nodes are numbered group by group. */
typedef struct {
    char name[48];
    int64_t nodes;
    int64_t gpus_per_node;   /* 0 = CPU-only node (--cluster auto without GPUs) */
    ps_gpu gpu;              /* resolved catalog entry (custom GPUs may be given in cluster.json) */
    ps_link intra;           /* GPU <-> GPU inside a node (default path) */
    int64_t island_size;     /* >1: consecutive GPUs [k*size, (k+1)*size) share a faster link (e.g. NVLink pairs
                                of RTX 3090 nodes); 0 = none */
    ps_link island;          /* the link inside an island */
    ps_link inter;           /* the node's network: bandwidth per node per direction (all NICs together) */
    int64_t cores_per_node;  /* CPU cores, 0 = unknown */
    int64_t numa_per_node;   /* NUMA domains, 0 = unknown */
    /* derived by ps_cluster_finish: global index of the group's first GPU and first node */
    int64_t first_gpu, first_node;
    /* An NVLink domain larger than a node (GB200 NVL72: 18 trays of 4 GPUs behind NVLink switch trays): >1 means
     * consecutive nodes [k*domain_nodes, (k+1)*domain_nodes) of the group (counted from its first node) form one
     * domain, and dividing the group's nodes; 0 = none (every node is its own domain). Domains never span groups. */
    int64_t domain_nodes;
    ps_link domain;          /* between GPUs of different nodes of one domain: per GPU per direction, like intra */
} ps_node_group;

typedef struct {
    char name[64];           /* "dgx-a100-80g:4", file name, or "auto" */
    char source[256];        /* where the description comes from */
    int n_groups;
    ps_node_group *groups;
    /* derived */
    int64_t n_nodes;
    int64_t n_gpus;
    bool heterogeneous;      /* more than one GPU kind or node shape */
} ps_cluster;

/* ---- GPU catalog ---- */
/* Look up by catalog key; unknown -> PS_ERR_INPUT listing the known keys. */
ps_status ps_gpu_lookup(const char *name, ps_gpu *out);
int ps_gpu_catalog_count(void);
const ps_gpu *ps_gpu_catalog_at(int i);
/* The precisions the catalog gives a peak for (hw/ has no model dtypes: costdb/ maps a ps_dtype to one). */
typedef enum { PS_GPU_FP32 = 0, PS_GPU_TF32, PS_GPU_FP16, PS_GPU_BF16, PS_GPU_FP8 } ps_gpu_precision;
/* Peak dense tensor FLOP/s for a precision; 0 if unsupported (or g NULL, or no such precision). A switch: for the
 * cost model's loops. */
double ps_gpu_peak(const ps_gpu *g, ps_gpu_precision prec);
/* The same by dtype name ("fp32", "tf32", "fp16", "bf16", "fp8", any case; "float32", "float16", "half",
 * "bfloat16"); 0 if unsupported or unknown. */
double ps_gpu_peak_flops(const ps_gpu *g, const char *dtype);
/* The catalog key of a device name as the CUDA runtime reports it ("NVIDIA A100-SXM4-80GB" -> "a100-80g"); NULL when
 * the exact board variant is not in the catalog (PCIe variants are not mapped to SXM entries). */
const char *ps_gpu_match_device(const char *device_name);
/* The device key of a GPU the CUDA runtime names `device_name`: its catalog key when ps_gpu_match_device knows the
 * board, else the name in lower case with every run of other characters as one '-' ("NVIDIA RTX 6000 Ada Generation"
 * -> "nvidia-rtx-6000-ada-generation"), cut to cap - 1 characters; "cuda-gpu" when nothing is left. `--cluster auto`
 * and `psearch calibrate` both name GPUs this way, so a cost database matches the allocation it measured. */
void ps_gpu_key_from_device_name(const char *device_name, char *out, size_t cap);

/* ---- links ---- */
/* The class of a link kind a cluster description may name: nvlink*, nvswitch*, pcie*, ib*, roce*, ethernet*, tcp*
 * (a prefix followed by nothing, a digit, '-' or '_': "pcie4", "ib-hdr", "nvlink3-bridge"), or "measured"; false (and
 * *out untouched) for any other name. */
bool ps_link_class_of(const char *kind, ps_link_class *out);
/* Default one-way latency in seconds of a link kind ("nvlink3", "pcie4", "ib-hdr", "ethernet", ...), used when a
 * cluster.json gives no latency_us; negative when the kind has no default (docs/clusters.md explains the values). */
double ps_link_default_latency(const char *kind);

/* ---- clusters ---- */
/* `spec`: "preset:N" (e.g. "dgx-a100-80g:4"; ":N" defaults to 1) or a path to a cluster.json. N counts the preset's
 * nodes, or its NVLink domains (racks) when the preset has an nvlink_domain ("gb200-nvl72:2" is 2 racks, 36 trays,
 * 144 GPUs): what such a system is bought and scheduled in. Unknown
 * preset -> PS_ERR_INPUT listing the known presets; "auto" -> PS_ERR_INPUT (the allocation is described by
 * ps_cluster_detect, calib/, which needs MPI). */
ps_status ps_cluster_load(const char *spec, ps_cluster *out);
/* ps_cluster_load in two halves, so that an MPI program can find and read the file on one rank and have every rank
 * parse the same bytes (cli/inputs.c): ranks then never describe different clusters from a file edited during the
 * launch or seen on one node only. */
typedef struct {
    char path[PATH_MAX + 96]; /* cluster.json or preset file to read (every message names it); "" for auto */
    char preset[48];          /* the preset's name ("dgx-a100-80g"), "" for a cluster.json */
    int64_t nodes;            /* the preset's count N: nodes, or NVLink domains for a preset with nvlink_domain */
    bool detect;              /* "auto": nothing to read, ps_cluster_detect (calib/) describes the allocation */
} ps_cluster_source;
/* What `spec` names, as ps_cluster_load resolves it (the node count checked, the preset file found), without
 * reading any file; the same errors for a spec that names nothing. */
ps_status ps_cluster_locate(const char *spec, ps_cluster_source *src);
/* The cluster in src's file (not for detect), from its content: `len` bytes at `text` (NUL-terminated, as
 * ps_read_file gives them). Messages name src->path and the field, exactly as ps_cluster_load's. */
ps_status ps_cluster_parse(const ps_cluster_source *src, const char *text, size_t len, ps_cluster *out);
ps_status ps_cluster_load_json(const char *path, ps_cluster *out);
ps_status ps_cluster_preset(const char *name, int64_t nodes, ps_cluster *out);
void ps_cluster_free(ps_cluster *c);
/* The largest cluster psearch plans for: 2^20 GPUs and 2^20 nodes, ten times the largest training clusters
 * announced (about 10^5 GPUs, 2024-2025). The search counts strategy degrees in int and enumerates divisors of the
 * GPU count, so a cluster.json with 10^9 nodes once overflowed them ("dp -294967292") or ran for minutes; it is now
 * refused at load, naming the group. */
#define PS_CLUSTER_MAX_GPUS (1 << 20)
#define PS_CLUSTER_MAX_NODES (1 << 20)
/* True when every GPU of the cluster has a tensor peak for `dtype` ("bf16", "fp16", ...). */
bool ps_cluster_supports_dtype(const ps_cluster *c, const char *dtype);
/* Compute the derived fields and check invariants (sizes > 0, bandwidths > 0, ...); `where` names the source. */
ps_status ps_cluster_finish(ps_cluster *c, const char *where);

ps_status ps_cluster_list(char ***names, int *count);
void ps_cluster_list_free(char **names, int count);
/* hw/cluster_print.c: the cluster as `psearch cluster show` prints it, in JSON (NULL when out of memory) and as a
 * table. (struct json_t is jansson's json_t, named so that this header needs no jansson.h.) */
struct json_t *ps_cluster_to_json(const ps_cluster *c);
void ps_cluster_print(FILE *f, const ps_cluster *c);

/* Placement queries over global GPU indices 0..n_gpus-1 (node-major: group by group, node by node, GPU by GPU), on
 * a cluster ps_cluster_finish has derived; O(1) on one node group, O(log groups) otherwise. */
int64_t ps_cluster_node_of(const ps_cluster *c, int64_t gpu);
const ps_node_group *ps_cluster_group_of(const ps_cluster *c, int64_t gpu);
/* Index into c->groups of the group holding GPU `gpu`, -1 when none does: the groups of GPUs [a, b) are those from
 * ps_cluster_group_index(c, a) on whose first_gpu is below b (CPU-only groups among them hold none of the GPUs). */
int ps_cluster_group_index(const ps_cluster *c, int64_t gpu);
/* The link data moving between two GPUs crosses: island, intra-node, the NVLink domain (different nodes of one
 * domain), or the network (the slower of the two nodes' NICs). a == b returns a link of infinite bandwidth and zero
 * latency. */
ps_link ps_cluster_link(const ps_cluster *c, int64_t a, int64_t b);
/* The NVLink domain of a GPU (ps_gpu_place.domain), -1 when `gpu` is outside the cluster: two GPUs of different
 * domains talk over the network. */
int64_t ps_cluster_domain_of(const ps_cluster *c, int64_t gpu);
/* GPUs that reach each other without the network: a node's GPUs, times domain_nodes when the group has an NVLink
 * domain (72 on GB200 NVL72). 0 for a CPU-only group. */
int64_t ps_node_group_domain_gpus(const ps_node_group *g);
/* Where a GPU sits: its node group (index into c->groups), its node, its GPU within the node. One lookup that
 * feeds the link, node and group of a GPU (costing a ring asks for all three on every edge). */
typedef struct {
    int group;
    int64_t node, local;
    int64_t domain;   /* global index of the first node of the GPU's NVLink domain; its own node when the group has
                         no nvlink_domain. Two GPUs with different `domain` talk over the network. */
} ps_gpu_place;
/* False (and *out untouched) when `gpu` is outside the cluster. */
bool ps_cluster_place(const ps_cluster *c, int64_t gpu, ps_gpu_place *out);
/* ps_cluster_link between two placed GPUs. */
ps_link ps_cluster_link_placed(const ps_cluster *c, const ps_gpu_place *a, const ps_gpu_place *b);

#ifdef __cplusplus
}
#endif
#endif

/* `--cluster auto`: describe the allocation psearch runs on. Nodes and ranks come from MPI (or from Slurm's node ids
 * where MPI cannot tell emulated nodes apart), cores and NUMA domains from hwloc, GPUs from the CUDA runtime, links
 * from the GPU model and sysfs. Each node leader gathers its node's facts; the facts of all nodes are then given to
 * every rank, which builds the description from them alone, so every rank ends with the same cluster. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <hwloc.h>

#include "ps_calib.h"
#include "ps_comm.h"

#if PS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* One rank sees at most this many devices; beyond it the node is counted as having this many (no such node is
 * built today: the largest boards carry 8-16 GPUs). */
#define MAX_RANK_GPUS 64

/* What one rank sees of the GPUs: under Slurm's --gpus-per-task every rank sees only its own device, so a node's
 * GPUs are the union of what its ranks see, counted by PCI bus id. */
typedef struct {
    int n;
    char bus[MAX_RANK_GPUS][20];
    ps_gpu gpu;      /* this rank's device 0 when n > 0 */
    ps_link pcie;    /* device 0's PCIe link from sysfs; bw 0 when unknown */
    char note[96];   /* how the GPUs were found, or why none were */
} rank_gpus;

/* One node, as its leader saw it. Sent as bytes: all ranks of one job run the same binary on the same ABI. */
typedef struct {
    int64_t cores;
    int64_t numa;
    int64_t gpus;
    ps_gpu gpu;
    ps_link intra;
    ps_link inter;
    char host[64];
    char gpu_note[96];
    char intra_note[64];
    char net_note[64];
    char slurm_job[32];
    char slurm_cluster[32];
    int64_t slurm_nodes;
    int failed;
    char error[192];
} node_facts;


/* ---- local facts ------------------------------------------------------------------------------------------------- */

static int64_t env_i64(const char *name, int64_t fallback)
{
    const char *s = getenv(name);
    int64_t v;
    return (s && ps_parse_i64(s, &v)) ? v : fallback;
}

static void env_str(const char *name, char *out, size_t cap)
{
    const char *s = getenv(name);
    ps_strlcpy(out, s ? s : "", cap);
}

static void cpu_facts(node_facts *f)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0) {
        f->failed = 1;
        snprintf(f->error, sizeof f->error, "hwloc_topology_init failed on %s: %s", f->host, strerror(errno));
        return;
    }
    if (hwloc_topology_load(topo) != 0) {
        f->failed = 1;
        snprintf(f->error, sizeof f->error, "hwloc_topology_load failed on %s: %s", f->host, strerror(errno));
        hwloc_topology_destroy(topo);
        return;
    }
    /* hwloc drops the cores a cgroup (Slurm's task/cgroup) withholds, so this is what the allocation grants. Some
     * virtual machines expose no core level: count hardware threads there. */
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (cores <= 0) cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    f->cores = cores > 0 ? cores : 0;
    f->numa = numa > 0 ? numa : 1;
    hwloc_topology_destroy(topo);
}

static bool read_line(const char *path, char *buf, size_t cap)
{
    FILE *fp = fopen(path, "r");
    if (!fp) return false;
    bool ok = fgets(buf, (int)cap, fp) != NULL;
    fclose(fp);
    if (ok) buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

/* "100 Gb/sec (4X EDR)" -> 100 and "ib-edr". */
static bool parse_ib_rate(const char *rate, double *gbps, char *kind, size_t cap)
{
    char *end = NULL;
    double v = strtod(rate, &end);
    if (end == rate || !(v > 0)) return false;
    *gbps = v;
    const char *open = strchr(rate, '('), *close = strchr(rate, ')');
    const char *sp = open ? strrchr(open, ' ') : NULL;
    if (open && close && sp && sp < close) {
        char gen[16] = "";
        size_t n = (size_t)(close - sp - 1);
        if (n >= sizeof gen) n = sizeof gen - 1;
        for (size_t i = 0; i < n; i++) {
            char ch = sp[1 + i];
            gen[i] = (char)((ch >= 'A' && ch <= 'Z') ? ch + 32 : ch);
        }
        gen[n] = '\0';
        snprintf(kind, cap, "ib-%s", gen);
    } else {
        ps_strlcpy(kind, "ib", cap);
    }
    return true;
}

/* The node's network from sysfs: active InfiniBand / RoCE ports first (what NCCL uses between nodes), else the
 * fastest physical Ethernet interface. Bandwidth is per node: all active RDMA ports together. */
static void net_facts(node_facts *f)
{
    memset(&f->inter, 0, sizeof f->inter);
    double rdma_gbps = 0;
    int ports = 0;
    bool roce = false;
    char kind[32] = "";
    DIR *d = opendir("/sys/class/infiniband");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            /* HCAs have one or two ports; port numbers start at 1. */
            for (int port = 1; port <= 2; port++) {
                char path[512], buf[128], pkind[32];
                double gbps;
                snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/state", e->d_name, port);
                if (!read_line(path, buf, sizeof buf) || !strstr(buf, "ACTIVE")) continue;
                snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/rate", e->d_name, port);
                if (!read_line(path, buf, sizeof buf) || !parse_ib_rate(buf, &gbps, pkind, sizeof pkind)) continue;
                snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/link_layer", e->d_name, port);
                if (read_line(path, buf, sizeof buf) && strcmp(buf, "Ethernet") == 0) {
                    roce = true;
                    ps_strlcpy(pkind, "roce", sizeof pkind);
                }
                if (!kind[0]) ps_strlcpy(kind, pkind, sizeof kind);
                rdma_gbps += gbps;
                ports++;
            }
        }
        closedir(d);
    }
    if (ports > 0) {
        ps_strlcpy(f->inter.kind, kind, sizeof f->inter.kind);
        f->inter.bw_Bps = rdma_gbps * 1e9 / 8;
        f->inter.latency_s = ps_link_default_latency(kind);
        if (f->inter.latency_s < 0) f->inter.latency_s = 5e-6;
        snprintf(f->net_note, sizeof f->net_note, "%d active %s port(s) in sysfs", ports, roce ? "RoCE" : "IB");
        return;
    }
    /* No RDMA: the fastest physical interface that is up (virtual ones have no 'device' link and no real speed). */
    double best_mbps = 0;
    d = opendir("/sys/class/net");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.' || strcmp(e->d_name, "lo") == 0) continue;
            char path[512], buf[64];
            snprintf(path, sizeof path, "/sys/class/net/%s/device", e->d_name);
            struct stat sb;
            if (stat(path, &sb) != 0) continue;
            snprintf(path, sizeof path, "/sys/class/net/%s/operstate", e->d_name);
            if (!read_line(path, buf, sizeof buf) || strcmp(buf, "up") != 0) continue;
            snprintf(path, sizeof path, "/sys/class/net/%s/speed", e->d_name);
            double mbps;
            if (read_line(path, buf, sizeof buf) && ps_parse_double(buf, &mbps) && mbps > best_mbps) best_mbps = mbps;
        }
        closedir(d);
    }
    ps_strlcpy(f->inter.kind, "ethernet", sizeof f->inter.kind);
    f->inter.latency_s = ps_link_default_latency("ethernet");
    if (best_mbps > 0) {
        f->inter.bw_Bps = best_mbps * 1e6 / 8;
        snprintf(f->net_note, sizeof f->net_note, "Ethernet %.0f Mb/s in sysfs", best_mbps);
    } else {
        /* Nothing readable (containers, emulated nodes): assume a modest 10 Gb/s so a plan never counts on a
         * network it was not shown; `psearch calibrate` replaces the guess with a measurement. */
        f->inter.bw_Bps = 10e9 / 8;
        snprintf(f->net_note, sizeof f->net_note, "no NIC speed in sysfs: assumed 10 Gb/s Ethernet");
    }
}

/* GPUs of the SXM catalog entries sit on NVLink baseboards; their per-GPU NVLink bandwidth per direction. */
static const struct {
    const char *gpu;
    const char *kind;
    double GBps;
} k_nvlink[] = {
    {"a100-40g", "nvlink3", 300}, {"a100-80g", "nvlink3", 300}, {"a800-80g", "nvlink3", 200},
    {"h100", "nvlink4", 450},     {"h200", "nvlink4", 450},     {"b200", "nvlink5", 900},
    {"gb200", "nvlink5", 900},    {"v100-16g", "nvlink2", 150}, {"v100-32g", "nvlink2", 150},
};

#if PS_HAVE_CUDA
/* PCIe link of a GPU from sysfs, by its bus id ("0000:3B:00.0"). The maximum rather than the current speed: an idle
 * GPU trains its link down to 2.5 GT/s to save power. */
static bool pcie_link(const char *bus_id, ps_link *out)
{
    char id[32], path[128], buf[64];
    size_t n = strlen(bus_id);
    if (n >= sizeof id) return false;
    for (size_t i = 0; i <= n; i++) id[i] = (char)((bus_id[i] >= 'A' && bus_id[i] <= 'Z') ? bus_id[i] + 32 : bus_id[i]);
    double gts = 0, width = 0;
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/max_link_speed", id);
    if (!read_line(path, buf, sizeof buf)) return false;
    gts = strtod(buf, NULL);
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/max_link_width", id);
    if (!read_line(path, buf, sizeof buf) || !ps_parse_double(buf, &width) || !(gts > 0) || !(width > 0)) return false;
    /* 8b/10b encoding up to 5 GT/s (gen 1-2), 128b/130b from 8 GT/s (gen 3-5). */
    double lane_Bps = gts <= 5.0 ? gts * 1e9 * 0.8 / 8 : gts * 1e9 * 128.0 / 130.0 / 8;
    int gen = gts <= 2.5 ? 1 : gts <= 5 ? 2 : gts <= 8 ? 3 : gts <= 16 ? 4 : gts <= 32 ? 5 : 6;
    memset(out, 0, sizeof *out);
    snprintf(out->kind, sizeof out->kind, "pcie%d", gen);
    out->bw_Bps = lane_Bps * width;
    out->latency_s = ps_link_default_latency("pcie");
    return true;
}

/* FP32 lanes and dense FP16 tensor FLOP per clock per SM (FP32 accumulate), by compute capability, for GPUs the
 * catalog does not know. From NVIDIA's architecture whitepapers: V100 125 TF = 80 SMs x 1530 MHz x 1024. GeForce
 * Ampere/Ada/Blackwell parts run FP32-accumulate MMA at half rate, so their 512 is used as the safe figure. */
static void sm_rates(int major, int minor, double *fp32_lanes, double *tensor)
{
    int cc = major * 10 + minor;
    *fp32_lanes = (cc == 86 || cc == 87 || cc == 89 || cc >= 90 || cc == 61) ? 128 : 64;
    if (cc < 70) *tensor = 0;
    else if (cc < 80) *tensor = 1024;
    else if (cc == 80) *tensor = 2048;
    else if (cc < 90) *tensor = 512;
    else if (cc < 100) *tensor = 4096;
    else if (cc < 110) *tensor = 8192;
    else *tensor = 512;
}

static void gpu_from_props(int dev, ps_gpu *g)
{
    memset(g, 0, sizeof *g);
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
        ps_strlcpy(g->name, "cuda-unknown", sizeof g->name);
        return;
    }
    p.name[sizeof p.name - 1] = '\0';
    const char *key = ps_gpu_match_device(p.name);
    if (key && ps_gpu_lookup(key, g) == PS_OK) {
        /* The device's own count over the catalog's (which is 0 where no vendor figure is cited, as for B200). */
        if (p.multiProcessorCount > 0) g->sm_count = p.multiProcessorCount;
        return;
    }
    ps_error_clear();
    /* Not in the catalog: a name from the device name, and peaks estimated from the SM count and clocks. */
    ps_gpu_key_from_device_name(p.name, g->name, sizeof g->name);
    ps_strlcpy(g->marketing, p.name, sizeof g->marketing);
    int clk_khz = 0, mem_khz = 0;
    if (cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, dev) != cudaSuccess) clk_khz = 0;
    if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess) mem_khz = 0;
    double lanes, tensor;
    sm_rates(p.major, p.minor, &lanes, &tensor);
    double sm_clk = (double)p.multiProcessorCount * clk_khz * 1e3;
    g->mem_bytes = (double)p.totalGlobalMem;
    /* Double data rate: two transfers per memory clock over the whole bus. */
    g->hbm_Bps = 2.0 * mem_khz * 1e3 * p.memoryBusWidth / 8.0;
    g->fp32_flops = 2.0 * lanes * sm_clk;
    g->fp16_flops = tensor > 0 ? tensor * sm_clk : g->fp32_flops;
    bool ampere = p.major >= 8;
    g->bf16_flops = ampere ? g->fp16_flops : 0;
    g->tf32_flops = ampere ? g->fp16_flops / 2 : 0;
    g->sm_count = p.multiProcessorCount;
    g->fused_attn = ampere; /* FlashAttention-2 and cuDNN fused attention need cc 8.0 (hw/gpu_catalog.c) */
    g->fp8_flops = (p.major * 10 + p.minor == 89 || p.major >= 9) ? 2 * g->fp16_flops : 0;
    /* Blackwell (cc 10 and later) added FP4 tensor cores at twice the FP8 rate (B200: 9 vs 4.5 PF dense). */
    g->fp4_flops = p.major >= 10 ? 2 * g->fp8_flops : 0;
    /* Never zero: ps_cluster_finish refuses a GPU without figures, and a guess beats refusing to plan. */
    if (!(g->hbm_Bps > 0)) g->hbm_Bps = 100e9;
    if (!(g->fp32_flops > 0)) g->fp32_flops = 1e12;
    if (!(g->fp16_flops > 0)) g->fp16_flops = g->fp32_flops;
    snprintf(g->source, sizeof g->source, "estimated from CUDA properties (cc %d.%d, %d SMs, %d MHz)", p.major,
             p.minor, p.multiProcessorCount, clk_khz / 1000);
}
#endif

void ps_gpu_key_from_device_name(const char *device_name, char *out, size_t cap)
{
    if (cap == 0) return;
    const char *key = ps_gpu_match_device(device_name);
    if (key) {
        ps_strlcpy(out, key, cap);
        return;
    }
    size_t k = 0;
    for (const char *s = device_name ? device_name : ""; *s && k + 1 < cap; s++) {
        char ch = *s;
        if (ch >= 'A' && ch <= 'Z') ch = (char)(ch + 32);
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (alnum) out[k++] = ch;
        else if (k > 0 && out[k - 1] != '-') out[k++] = '-';
    }
    while (k > 0 && out[k - 1] == '-') k--;
    out[k] = '\0';
    if (k == 0) ps_strlcpy(out, "cuda-gpu", cap);
}

static void probe_gpus(rank_gpus *r)
{
    memset(r, 0, sizeof *r);
#if PS_HAVE_CUDA
    /* Without the NVIDIA kernel driver there is nothing to find: do not start the CUDA runtime (it would only fail to
     * load libcuda, after loading its own libraries on every rank). */
    if (access("/proc/driver/nvidia/version", F_OK) != 0 && access("/dev/nvidiactl", F_OK) != 0) {
        snprintf(r->note, sizeof r->note, "no NVIDIA driver (/proc/driver/nvidia/version absent)");
        return;
    }
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        /* No driver or no device: a CPU-only node, not an error (DESIGN: psearch plans from anywhere). */
        snprintf(r->note, sizeof r->note, "CUDA: %s", cudaGetErrorName(err));
        (void)cudaGetLastError();
        return;
    }
    if (n > MAX_RANK_GPUS) n = MAX_RANK_GPUS;
    for (int i = 0; i < n; i++) {
        if (cudaDeviceGetPCIBusId(r->bus[r->n], (int)sizeof r->bus[0], i) != cudaSuccess)
            snprintf(r->bus[r->n], sizeof r->bus[0], "dev%d", i);
        r->n++;
    }
    if (r->n > 0) {
        gpu_from_props(0, &r->gpu);
        if (!pcie_link(r->bus[0], &r->pcie)) memset(&r->pcie, 0, sizeof r->pcie);
        int rt = 0;
        if (cudaRuntimeGetVersion(&rt) != cudaSuccess) rt = 0;
        snprintf(r->note, sizeof r->note, "CUDA runtime %d.%d", rt / 1000, (rt % 1000) / 10);
    } else {
        snprintf(r->note, sizeof r->note, "CUDA: no devices");
    }
#else
    snprintf(r->note, sizeof r->note, "built without CUDA");
#endif
}

/* The leader's view of its node, from its own probes and what its ranks saw of the GPUs. */
static void node_facts_fill(node_facts *f, const rank_gpus *rg, int nranks)
{
    cpu_facts(f);
    net_facts(f);
    env_str("SLURM_JOB_ID", f->slurm_job, sizeof f->slurm_job);
    env_str("SLURM_CLUSTER_NAME", f->slurm_cluster, sizeof f->slurm_cluster);
    f->slurm_nodes = env_i64("SLURM_JOB_NUM_NODES", env_i64("SLURM_NNODES", 0));

    /* Distinct PCI bus ids over all ranks of the node. */
    const char *seen[MAX_RANK_GPUS];
    int n = 0;
    const rank_gpus *first = NULL;
    bool mixed = false;
    for (int r = 0; r < nranks; r++) {
        const rank_gpus *x = &rg[r];
        if (x->n > 0) {
            if (!first) first = x;
            else if (strcmp(first->gpu.name, x->gpu.name) != 0) mixed = true;
        }
        for (int i = 0; i < x->n; i++) {
            bool dup = false;
            for (int j = 0; j < n && !dup; j++) dup = strcmp(seen[j], x->bus[i]) == 0;
            if (!dup && n < MAX_RANK_GPUS) seen[n++] = x->bus[i];
        }
    }
    f->gpus = n;
    ps_strlcpy(f->gpu_note, (first ? first : &rg[0])->note, sizeof f->gpu_note);
    if (mixed) ps_strcatf(f->gpu_note, sizeof f->gpu_note, "; mixed GPU kinds, described as the first");
    memset(&f->intra, 0, sizeof f->intra);
    if (n == 0) {
        memset(&f->gpu, 0, sizeof f->gpu);
        ps_strlcpy(f->gpu.name, "none", sizeof f->gpu.name);
        ps_strlcpy(f->gpu.marketing, "no GPU (CPU-only node)", sizeof f->gpu.marketing);
        ps_strlcpy(f->intra.kind, "none", sizeof f->intra.kind);
        return;
    }
    f->gpu = first->gpu;
    if (n == 1) {
        ps_strlcpy(f->intra.kind, "none", sizeof f->intra.kind);
        return;
    }
    for (size_t i = 0; i < sizeof k_nvlink / sizeof k_nvlink[0]; i++) {
        if (strcmp(f->gpu.name, k_nvlink[i].gpu) == 0) {
            ps_strlcpy(f->intra.kind, k_nvlink[i].kind, sizeof f->intra.kind);
            f->intra.bw_Bps = k_nvlink[i].GBps * 1e9;
            f->intra.latency_s = ps_link_default_latency("nvlink");
            snprintf(f->intra_note, sizeof f->intra_note, "%s assumed from the SXM GPU model", k_nvlink[i].kind);
            return;
        }
    }
    if (first->pcie.bw_Bps > 0) {
        f->intra = first->pcie;
        snprintf(f->intra_note, sizeof f->intra_note, "%s %.1f GB/s from sysfs", f->intra.kind,
                 f->intra.bw_Bps / 1e9);
    } else {
        ps_strlcpy(f->intra.kind, "pcie3", sizeof f->intra.kind);
        f->intra.bw_Bps = 15.75e9;
        f->intra.latency_s = ps_link_default_latency("pcie");
        snprintf(f->intra_note, sizeof f->intra_note, "PCIe unknown: assumed gen3 x16");
    }
}

/* The link with its class: detection names only known kinds ("ib-hdr", "roce", "ethernet", "pcie4", "nvlink3"), and
 * "none" where there is no link to cross (one GPU, or none, on the node). */
static ps_link classified(ps_link l)
{
    if (!ps_link_class_of(l.kind, &l.cls)) l.cls = PS_LINK_NONE;
    return l;
}

/* ---- gathering and building -------------------------------------------------------------------------------------- */

/* Ranks that share memory share a node, except where MPI cannot tell nodes apart: Slurm's emulated nodes all run on
 * one host, so the shared-memory split sees one node. When Slurm reports more nodes than that split found and the
 * ranks' SLURM_NODEID values differ, Slurm's node ids split the ranks instead. The decision is collective, so every
 * rank takes the same branch. */
static ps_status split_nodes(MPI_Comm comm, int rank, MPI_Comm *node, bool *by_slurm)
{
    ps_status st = PS_OK;
    MPI_Comm shared = MPI_COMM_NULL;
    *node = MPI_COMM_NULL;
    *by_slurm = false;
    PS_MPI_GOTO(st, MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared), done);
    int lrank = 0;
    PS_MPI_GOTO(st, MPI_Comm_rank(shared, &lrank), done);
    long long leader = lrank == 0, shared_nodes = 0;
    PS_MPI_GOTO(st, MPI_Allreduce(&leader, &shared_nodes, 1, MPI_LONG_LONG, MPI_SUM, comm), done);

    int64_t nodeid = env_i64("SLURM_NODEID", -1);
    int64_t job_nodes = env_i64("SLURM_JOB_NUM_NODES", env_i64("SLURM_NNODES", 0));
    bool bad_id = nodeid < 0 || nodeid > INT_MAX;
    /* One MAX reduction gives: any rank without an id, the smallest id (negated), the largest id, the node count. */
    long long v[4] = {bad_id, bad_id ? 0 : -nodeid, bad_id ? 0 : nodeid, job_nodes}, m[4] = {0, 0, 0, 0};
    PS_MPI_GOTO(st, MPI_Allreduce(v, m, 4, MPI_LONG_LONG, MPI_MAX, comm), done);
    if (m[0] == 0 && -m[1] != m[2] && m[3] > shared_nodes) {
        PS_MPI_GOTO(st, MPI_Comm_split(comm, (int)nodeid, rank, node), done);
        *by_slurm = true;
    } else {
        *node = shared;
        shared = MPI_COMM_NULL;
    }
done:
    if (shared != MPI_COMM_NULL) MPI_Comm_free(&shared);
    return st;
}

static bool link_same(const ps_link *a, const ps_link *b)
{
    return strcmp(a->kind, b->kind) == 0 && a->bw_Bps == b->bw_Bps && a->latency_s == b->latency_s;
}

static bool facts_same(const node_facts *a, const node_facts *b)
{
    const ps_gpu *x = &a->gpu, *y = &b->gpu;
    return a->cores == b->cores && a->numa == b->numa && a->gpus == b->gpus && strcmp(x->name, y->name) == 0 &&
           x->mem_bytes == y->mem_bytes && x->hbm_Bps == y->hbm_Bps && x->fp16_flops == y->fp16_flops &&
           x->fp32_flops == y->fp32_flops && link_same(&a->intra, &b->intra) && link_same(&a->inter, &b->inter);
}

/* Identical nodes become one group, in order of first appearance; the description is built from the gathered facts
 * only, so it is the same on every rank. */
static ps_status build(const node_facts *all, int n, int ranks, bool by_slurm, ps_cluster *out)
{
    int *rep = ps_calloc((size_t)n, sizeof *rep);
    int64_t *count = ps_calloc((size_t)n, sizeof *count);
    if (!rep || !count) {
        free(rep);
        free(count);
        return PS_ERR_SYSTEM;
    }
    int ng = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < ng && !facts_same(&all[rep[j]], &all[i])) j++;
        if (j == ng) rep[ng++] = i;
        count[j]++;
    }
    out->groups = ps_calloc((size_t)ng, sizeof *out->groups);
    if (!out->groups) {
        free(rep);
        free(count);
        return PS_ERR_SYSTEM;
    }
    out->n_groups = ng;
    for (int j = 0; j < ng; j++) {
        const node_facts *f = &all[rep[j]];
        ps_node_group *g = &out->groups[j];
        ps_strlcpy(g->name, f->host[0] ? f->host : "node", sizeof g->name);
        g->nodes = count[j];
        g->gpus_per_node = f->gpus;
        g->gpu = f->gpu;
        g->intra = classified(f->intra);
        g->inter = classified(f->inter);
        g->cores_per_node = f->cores;
        g->numa_per_node = f->numa;
    }
    free(rep);
    free(count);

    const node_facts *f0 = &all[0];
    out->name[0] = '\0';
    if (f0->slurm_job[0])
        ps_strcatf(out->name, sizeof out->name, "auto-%s-job%s", f0->slurm_cluster[0] ? f0->slurm_cluster : "slurm",
             f0->slurm_job);
    else
        ps_strcatf(out->name, sizeof out->name, "auto");
    out->source[0] = '\0';
    ps_strcatf(out->source, sizeof out->source, "detected: %d rank(s) on %d node(s) split by %s", ranks, n,
         by_slurm ? "SLURM_NODEID" : "shared memory");
    if (f0->slurm_job[0])
        ps_strcatf(out->source, sizeof out->source, "; Slurm job %s on %s, %lld job node(s)", f0->slurm_job,
             f0->slurm_cluster[0] ? f0->slurm_cluster : "?", (long long)f0->slurm_nodes);
    ps_strcatf(out->source, sizeof out->source, "; %s; intra: %s; net: %s", f0->gpu_note,
         f0->intra_note[0] ? f0->intra_note : "-", f0->net_note);
    return ps_cluster_finish(out, "cluster auto");
}

ps_status ps_cluster_detect(MPI_Comm comm, ps_cluster *out)
{
    static const char k_gathering[] = "cluster auto: gathering the node facts";
    memset(out, 0, sizeof *out);
    int inited = 0, finalized = 0;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || MPI_Finalized(&finalized) != MPI_SUCCESS || !inited || finalized)
        return PS_FAIL(PS_ERR_SYSTEM, "cluster auto describes the MPI job psearch runs in, but MPI is not "
                                      "initialized (or already finalized)");
    if (comm == MPI_COMM_NULL) return PS_FAIL(PS_ERR_INPUT, "cluster auto: no communicator to describe");

    ps_status st = PS_OK;
    MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
    rank_gpus mine;
    rank_gpus *rg = NULL;
    node_facts mynode, *all = NULL;
    memset(&mynode, 0, sizeof mynode);
    int size = 0, rank = 0, lrank = 0, lsize = 0, n_nodes = 0;
    bool by_slurm = false;

    PS_MPI_GOTO(st, MPI_Comm_size(comm, &size), done);
    PS_MPI_GOTO(st, MPI_Comm_rank(comm, &rank), done);
    PS_TRY_GOTO(st, split_nodes(comm, rank, &node, &by_slurm), done);
    PS_MPI_GOTO(st, MPI_Comm_rank(node, &lrank), done);
    PS_MPI_GOTO(st, MPI_Comm_size(node, &lsize), done);
    PS_MPI_GOTO(st, MPI_Comm_split(comm, lrank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders), done);

    /* Every rank probes its own GPUs (it may see only its own under --gpus-per-task); its leader merges them. */
    probe_gpus(&mine);
    if (lrank == 0) rg = ps_calloc((size_t)lsize, sizeof *rg);
    /* A local failure (out of memory) must not leave the other ranks waiting in the next collective: every rank
     * learns whether any rank failed, and all stop together. */
    PS_TRY_GOTO(st, ps_mpi_agree_status(comm, (lrank == 0 && !rg) ? PS_ERR_SYSTEM : PS_OK, k_gathering), done);
    PS_MPI_GOTO(st, MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, rg, (int)sizeof mine, MPI_BYTE, 0, node), done);

    if (lrank == 0) {
        char host[MPI_MAX_PROCESSOR_NAME];
        int len = 0;
        PS_MPI_GOTO(st, MPI_Get_processor_name(host, &len), done);
        ps_strlcpy(mynode.host, host, sizeof mynode.host);
        node_facts_fill(&mynode, rg, lsize);
        PS_MPI_GOTO(st, MPI_Comm_size(leaders, &n_nodes), done);
    }
    PS_MPI_GOTO(st, MPI_Bcast(&n_nodes, 1, MPI_INT, 0, node), done);
    /* Every rank holds the same n_nodes, so they all take this exit together. */
    if (n_nodes < 1 || (size_t)n_nodes > (size_t)INT_MAX / sizeof *all) {
        st = PS_FAIL(PS_ERR_SYSTEM, "cluster auto: %d nodes is more than one message can describe", n_nodes);
        goto done;
    }
    all = ps_calloc((size_t)n_nodes, sizeof *all);
    PS_TRY_GOTO(st, ps_mpi_agree_status(comm, all ? PS_OK : PS_ERR_SYSTEM, k_gathering), done);
    if (lrank == 0)
        PS_MPI_GOTO(st,
                    MPI_Allgather(&mynode, (int)sizeof mynode, MPI_BYTE, all, (int)sizeof mynode, MPI_BYTE, leaders),
                    done);
    PS_MPI_GOTO(st, MPI_Bcast(all, n_nodes * (int)sizeof *all, MPI_BYTE, 0, node), done);
    for (int i = 0; i < n_nodes; i++) {
        if (all[i].failed) {
            st = PS_FAIL(PS_ERR_SYSTEM, "cluster auto: %s", all[i].error);
            goto done;
        }
    }
    PS_TRY_GOTO(st, build(all, n_nodes, size, by_slurm, out), done);

done:
    free(rg);
    free(all);
    if (leaders != MPI_COMM_NULL) {
        int rc = MPI_Comm_free(&leaders);
        if (rc != MPI_SUCCESS && st == PS_OK) st = ps_mpi_status(rc, "MPI_Comm_free", __FILE__, __LINE__);
    }
    if (node != MPI_COMM_NULL) {
        int rc = MPI_Comm_free(&node);
        if (rc != MPI_SUCCESS && st == PS_OK) st = ps_mpi_status(rc, "MPI_Comm_free", __FILE__, __LINE__);
    }
    if (st != PS_OK) ps_cluster_free(out);
    return st;
}

/* Table and JSON renderings of a cluster, as `psearch cluster show` prints them. */
#include <jansson.h>
#include <math.h>

#include "ps_hw.h"

static json_t *link_json(const ps_link *l)
{
    json_t *j = json_object();
    json_object_set_new(j, "kind", json_string(l->kind));
    json_object_set_new(j, "bw_GBps", json_real(l->bw_Bps / 1e9));
    json_object_set_new(j, "latency_us", json_real(l->latency_s * 1e6));
    return j;
}

json_t *ps_cluster_to_json(const ps_cluster *c)
{
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(c->name));
    json_object_set_new(j, "source", json_string(c->source));
    json_object_set_new(j, "nodes", json_integer(c->n_nodes));
    json_object_set_new(j, "gpus", json_integer(c->n_gpus));
    json_object_set_new(j, "heterogeneous", json_boolean(c->heterogeneous));
    json_t *gs = json_array();
    for (int i = 0; i < c->n_groups; i++) {
        const ps_node_group *g = &c->groups[i];
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(g->name));
        json_object_set_new(o, "nodes", json_integer(g->nodes));
        json_object_set_new(o, "gpus_per_node", json_integer(g->gpus_per_node));
        json_t *gpu = json_object();
        json_object_set_new(gpu, "name", json_string(g->gpu.name));
        json_object_set_new(gpu, "marketing", json_string(g->gpu.marketing));
        json_object_set_new(gpu, "mem_GiB", json_real(g->gpu.mem_bytes / (1024.0 * 1024 * 1024)));
        json_object_set_new(gpu, "hbm_GBps", json_real(g->gpu.hbm_Bps / 1e9));
        json_object_set_new(gpu, "fp32_TFLOPs", json_real(g->gpu.fp32_flops / 1e12));
        json_object_set_new(gpu, "tf32_TFLOPs", json_real(g->gpu.tf32_flops / 1e12));
        json_object_set_new(gpu, "fp16_TFLOPs", json_real(g->gpu.fp16_flops / 1e12));
        json_object_set_new(gpu, "bf16_TFLOPs", json_real(g->gpu.bf16_flops / 1e12));
        json_object_set_new(gpu, "fp8_TFLOPs", json_real(g->gpu.fp8_flops / 1e12));
        json_object_set_new(gpu, "fp4_TFLOPs", json_real(g->gpu.fp4_flops / 1e12));
        json_object_set_new(gpu, "fused_attention", json_boolean(g->gpu.fused_attn));
        json_object_set_new(gpu, "sm_count", json_integer(g->gpu.sm_count));
        if (g->gpu.gemm_eff > 0) json_object_set_new(gpu, "gemm_eff", json_real(g->gpu.gemm_eff));
        json_object_set_new(gpu, "source", json_string(g->gpu.source));
        json_object_set_new(o, "gpu", gpu);
        json_object_set_new(o, "intra", link_json(&g->intra));
        if (g->island_size > 1) {
            json_t *is = link_json(&g->island);
            json_object_set_new(is, "size", json_integer(g->island_size));
            json_object_set_new(o, "island", is);
        }
        /* the cluster.json shape: "nodes" per domain next to the link, as "size" next to the island's */
        if (g->domain_nodes > 1) {
            json_t *d = link_json(&g->domain);
            json_object_set_new(d, "nodes", json_integer(g->domain_nodes));
            json_object_set_new(o, "nvlink_domain", d);
        }
        json_object_set_new(o, "inter", link_json(&g->inter));
        if (g->cores_per_node) json_object_set_new(o, "cores_per_node", json_integer(g->cores_per_node));
        if (g->numa_per_node) json_object_set_new(o, "numa_per_node", json_integer(g->numa_per_node));
        json_array_append_new(gs, o);
    }
    json_object_set_new(j, "node_groups", gs);
    json_object_set_new(j, "units",
                        json_string("bandwidths per direction: intra/island/nvlink_domain per GPU, inter per node"));
    return j;
}

void ps_cluster_print(FILE *f, const ps_cluster *c)
{
    char b1[32];
    fprintf(f, "cluster   %s%s\n", c->name, c->heterogeneous ? " (heterogeneous)" : "");
    if (c->source[0]) fprintf(f, "source    %s\n", c->source);
    fprintf(f, "nodes     %lld    GPUs %lld\n", (long long)c->n_nodes, (long long)c->n_gpus);
    for (int i = 0; i < c->n_groups; i++) {
        const ps_node_group *g = &c->groups[i];
        fprintf(f, "\ngroup     %s: %lld node(s) x %lld GPU(s)\n", g->name, (long long)g->nodes,
                (long long)g->gpus_per_node);
        if (g->gpus_per_node > 0) {
            fprintf(f, "  gpu     %s (%s): %s, %.0f GB/s memory, peak TFLOP/s:", g->gpu.name, g->gpu.marketing,
                    ps_fmt_bytes(g->gpu.mem_bytes, b1, sizeof b1), g->gpu.hbm_Bps / 1e9);
            /* Dtypes a GPU lacks (bf16 before Ampere, fp8 before Ada/Hopper, fp4 before Blackwell) are left out,
             * not shown as 0. */
            const struct {
                const char *name;
                double v;
            } peaks[] = {{"fp4", g->gpu.fp4_flops},   {"fp8", g->gpu.fp8_flops},   {"bf16", g->gpu.bf16_flops},
                         {"fp16", g->gpu.fp16_flops}, {"tf32", g->gpu.tf32_flops}, {"fp32", g->gpu.fp32_flops}};
            for (size_t k = 0; k < sizeof peaks / sizeof peaks[0]; k++)
                if (peaks[k].v > 0) fprintf(f, " %s %.1f", peaks[k].name, peaks[k].v / 1e12);
            fprintf(f, "%s", g->gpu.fused_attn ? ", fused attention" : "");
            if (g->gpu.sm_count > 0)
                fprintf(f, ", %d SMs", g->gpu.sm_count);
            else
                fprintf(f, ", SMs unknown");
            if (g->gpu.gemm_eff > 0) fprintf(f, ", GEMMs at %.2f of peak (measured)", g->gpu.gemm_eff);
            fprintf(f, "\n");
            fprintf(f, "  intra   %s, %.1f GB/s per direction per GPU, %.1f us\n", g->intra.kind,
                    g->intra.bw_Bps / 1e9, g->intra.latency_s * 1e6);
            if (g->island_size > 1)
                fprintf(f, "  island  %lld GPUs on %s, %.1f GB/s per direction, %.1f us\n", (long long)g->island_size,
                        g->island.kind, g->island.bw_Bps / 1e9, g->island.latency_s * 1e6);
            if (g->domain_nodes > 1)
                fprintf(f, "  domain  %lld NVLink domain(s) of %lld nodes = %lld GPUs on %s, %.1f GB/s per direction "
                           "per GPU, %.1f us\n",
                        (long long)(g->nodes / g->domain_nodes), (long long)g->domain_nodes,
                        (long long)ps_node_group_domain_gpus(g), g->domain.kind, g->domain.bw_Bps / 1e9,
                        g->domain.latency_s * 1e6);
        } else {
            fprintf(f, "  gpu     none (CPU-only node)\n");
        }
        if (isfinite(g->inter.bw_Bps) && g->inter.bw_Bps > 0)
            fprintf(f, "  inter   %s, %.1f Gb/s per node per direction, %.1f us\n", g->inter.kind,
                    g->inter.bw_Bps * 8 / 1e9, g->inter.latency_s * 1e6);
        if (g->cores_per_node) {
            fprintf(f, "  cpu     %lld cores per node", (long long)g->cores_per_node);
            if (g->numa_per_node) fprintf(f, ", %lld NUMA domain(s)", (long long)g->numa_per_node);
            fprintf(f, "\n");
        }
    }
}

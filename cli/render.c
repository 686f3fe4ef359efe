/* Table and JSON renderings of models and clusters, shared by `model show`, `cluster show` and the plan output.
 * Consecutive identical layers are shown as one row with a count: 80 decoder blocks are one line, not 80. */
#include <math.h>
#include <string.h>

#include "cli.h"

/* Length of the run of identical layers starting at i. */
static int64_t run_length(const ps_model *m, int64_t i)
{
    int64_t j = i + 1;
    while (j < m->n_layers && ps_layer_equal(&m->layers[i], &m->layers[j])) j++;
    return j - i;
}

json_t *ps_model_to_json(const ps_model *m)
{
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(m->name));
    json_object_set_new(j, "family", json_string(m->family));
    json_object_set_new(j, "source", json_string(m->source));
    json_object_set_new(j, "dtype", json_string(ps_dtype_name(m->dtype)));
    json_object_set_new(j, "seq", json_integer(m->seq));
    json_object_set_new(j, "n_layers", json_integer(m->n_layers));
    json_object_set_new(j, "params", json_integer(ps_model_params(m)));
    if (m->published_params > 0) json_object_set_new(j, "published_params", json_real(m->published_params));
    json_object_set_new(j, "fwd_flops_per_sample", json_real(ps_model_fwd_flops(m)));
    json_object_set_new(j, "train_flops_per_sample", json_real(ps_model_train_flops(m)));
    json_object_set_new(j, "flops_convention",
                        json_string("model FLOPs: 2 per multiply-add, forward + backward = 3x forward, "
                                    "attention score terms included, causal masking not discounted, no recompute"));
    json_t *groups = json_array();
    for (int64_t i = 0; i < m->n_layers;) {
        const ps_layer *l = &m->layers[i];
        int64_t n = run_length(m, i);
        json_t *g = json_object();
        json_object_set_new(g, "kind", json_string(ps_layer_kind_name(l->kind)));
        json_object_set_new(g, "first", json_integer(i));
        json_object_set_new(g, "count", json_integer(n));
        json_object_set_new(g, "hidden", json_integer(l->hidden));
        if (l->out_hidden != l->hidden) json_object_set_new(g, "out_hidden", json_integer(l->out_hidden));
        if (l->heads) {
            json_object_set_new(g, "heads", json_integer(l->heads));
            json_object_set_new(g, "kv_heads", json_integer(l->kv_heads));
            json_object_set_new(g, "head_dim", json_integer(l->head_dim));
        }
        if (l->ffn_hidden) json_object_set_new(g, "ffn_hidden", json_integer(l->ffn_hidden));
        json_object_set_new(g, "seq", json_integer(l->seq));
        if (l->kv_seq) json_object_set_new(g, "kv_seq", json_integer(l->kv_seq));
        if (l->attn_window) json_object_set_new(g, "attn_window", json_integer(l->attn_window));
        if (l->vocab) json_object_set_new(g, "vocab", json_integer(l->vocab));
        if (l->n_classes) json_object_set_new(g, "n_classes", json_integer(l->n_classes));
        json_object_set_new(g, "params_each", json_integer(ps_layer_params(l)));
        json_object_set_new(g, "fwd_flops_each", json_real(ps_layer_fwd_flops(l)));
        json_t *act = json_object();
        json_object_set_new(act, "none", json_real(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_NONE)));
        json_object_set_new(act, "selective",
                            json_real(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_SELECTIVE)));
        json_object_set_new(act, "full", json_real(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_FULL)));
        json_object_set_new(g, "act_bytes_each_tp1", act);
        json_object_set_new(g, "boundary_bytes", json_real(ps_layer_boundary_bytes(l, m->dtype)));
        json_array_append_new(groups, g);
        i += n;
    }
    json_object_set_new(j, "layer_groups", groups);
    json_object_set_new(j, "units", json_string("per sample (micro-batch 1); bytes; FLOPs"));
    return j;
}

void ps_model_print(FILE *f, const ps_model *m)
{
    char b1[32], b2[32], b3[32];
    fprintf(f, "model     %s (%s)\n", m->name, m->family[0] ? m->family : "custom");
    if (m->source[0]) fprintf(f, "source    %s\n", m->source);
    fprintf(f, "params    %s (%lld)", ps_fmt_count((double)ps_model_params(m), b1, sizeof b1),
            (long long)ps_model_params(m));
    if (m->published_params > 0)
        fprintf(f, "   published %s, %+.2f%%", ps_fmt_count(m->published_params, b2, sizeof b2),
                100.0 * ((double)ps_model_params(m) - m->published_params) / m->published_params);
    fprintf(f, "\n");
    fprintf(f, "layers    %lld    seq %lld tokens    dtype %s\n", (long long)m->n_layers, (long long)m->seq,
            ps_dtype_name(m->dtype));
    double fl = ps_model_train_flops(m);
    fprintf(f, "FLOPs     %.4g per sample per iteration (fwd+bwd, model FLOPs), %.4g per token\n", fl,
            m->seq > 0 ? fl / (double)m->seq : 0.0);
    fprintf(f, "\n%5s %6s  %-14s %7s %5s %4s %6s %6s %6s %11s %10s %10s %10s\n", "first", "count", "kind", "hidden",
            "heads", "kv", "ffn", "seq", "kv_seq", "params/lay", "GFLOP/lay", "act/lay", "act(sel)");
    for (int64_t i = 0; i < m->n_layers;) {
        const ps_layer *l = &m->layers[i];
        int64_t n = run_length(m, i);
        fprintf(f, "%5lld %6lld  %-14s %7lld %5lld %4lld %6lld %6lld %6lld %11s %10.2f %10s %10s\n", (long long)i,
                (long long)n, ps_layer_kind_name(l->kind), (long long)l->hidden, (long long)l->heads,
                (long long)l->kv_heads, (long long)l->ffn_hidden, (long long)l->seq, (long long)l->kv_seq,
                ps_fmt_count((double)ps_layer_params(l), b1, sizeof b1), ps_layer_fwd_flops(l) / 1e9,
                ps_fmt_bytes(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_NONE), b2, sizeof b2),
                ps_fmt_bytes(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_SELECTIVE), b3, sizeof b3));
        i += n;
    }
    fprintf(f, "(per layer, per sample: forward GFLOP; activation bytes kept for backward at TP 1, no recompute / "
               "selective recompute)\n");
}

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
        json_object_set_new(gpu, "source", json_string(g->gpu.source));
        json_object_set_new(o, "gpu", gpu);
        json_object_set_new(o, "intra", link_json(&g->intra));
        if (g->island_size > 1) {
            json_t *is = link_json(&g->island);
            json_object_set_new(is, "size", json_integer(g->island_size));
            json_object_set_new(o, "island", is);
        }
        json_object_set_new(o, "inter", link_json(&g->inter));
        if (g->cores_per_node) json_object_set_new(o, "cores_per_node", json_integer(g->cores_per_node));
        if (g->numa_per_node) json_object_set_new(o, "numa_per_node", json_integer(g->numa_per_node));
        json_array_append_new(gs, o);
    }
    json_object_set_new(j, "node_groups", gs);
    json_object_set_new(j, "units", json_string("bandwidths per direction: intra/island per GPU, inter per node"));
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
            /* Dtypes a GPU lacks (bf16 before Ampere, fp8 before Ada/Hopper) are left out, not shown as 0. */
            const struct {
                const char *name;
                double v;
            } peaks[] = {{"fp8", g->gpu.fp8_flops},   {"bf16", g->gpu.bf16_flops}, {"fp16", g->gpu.fp16_flops},
                         {"tf32", g->gpu.tf32_flops}, {"fp32", g->gpu.fp32_flops}};
            for (size_t k = 0; k < sizeof peaks / sizeof peaks[0]; k++)
                if (peaks[k].v > 0) fprintf(f, " %s %.1f", peaks[k].name, peaks[k].v / 1e12);
            fprintf(f, "\n");
            fprintf(f, "  intra   %s, %.1f GB/s per direction per GPU, %.1f us\n", g->intra.kind,
                    g->intra.bw_Bps / 1e9, g->intra.latency_s * 1e6);
            if (g->island_size > 1)
                fprintf(f, "  island  %lld GPUs on %s, %.1f GB/s per direction, %.1f us\n", (long long)g->island_size,
                        g->island.kind, g->island.bw_Bps / 1e9, g->island.latency_s * 1e6);
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

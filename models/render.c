/* Table and JSON renderings of a model, as `psearch model show` prints them. Consecutive identical layers are shown
 * as one row with a count: 80 decoder blocks are one line, not 80. */
#include <string.h>

#include <jansson.h>

#include "models_internal.h"

/* Length of the run of identical layers starting at i. */
static int64_t run_length(const ps_model *m, int64_t i)
{
    /* byte copies first (how repeats are stored), then layers equal field by field */
    int64_t j = i + ps_layer_copies(m, i);
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
    json_object_set_new(j, "active_params", json_integer(ps_model_active_params(m)));
    if (m->published_params > 0) json_object_set_new(j, "published_params", json_real(m->published_params));
    if (m->published_active_params > 0)
        json_object_set_new(j, "published_active_params", json_real(m->published_active_params));
    if (m->rope_theta > 0) json_object_set_new(j, "rope_theta", json_real(m->rope_theta));
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
        if (ps_layer_is_moe(l)) {
            json_object_set_new(g, "n_experts", json_integer(l->n_experts));
            json_object_set_new(g, "top_k", json_integer(l->top_k));
            json_object_set_new(g, "expert_ffn", json_integer(l->expert_ffn));
            if (l->n_shared_experts) {
                json_object_set_new(g, "n_shared_experts", json_integer(l->n_shared_experts));
                json_object_set_new(g, "shared_ffn", json_integer(l->shared_ffn));
            }
            json_object_set_new(g, "capacity_factor", json_real(l->capacity_factor));
            json_object_set_new(g, "router", json_string(l->router == PS_ROUTER_SIGMOID ? "sigmoid" : "softmax"));
            if (l->router_groups) {
                json_object_set_new(g, "router_groups", json_integer(l->router_groups));
                json_object_set_new(g, "router_group_topk", json_integer(l->router_group_topk));
            }
        }
        if (ps_layer_is_mla(l)) {
            json_object_set_new(g, "q_lora_rank", json_integer(l->q_lora_rank));
            json_object_set_new(g, "kv_lora_rank", json_integer(l->kv_lora_rank));
            json_object_set_new(g, "qk_nope_head_dim", json_integer(l->qk_nope_head_dim));
            json_object_set_new(g, "qk_rope_head_dim", json_integer(l->qk_rope_head_dim));
            json_object_set_new(g, "v_head_dim", json_integer(l->v_head_dim));
        }
        json_object_set_new(g, "params_each", json_integer(ps_layer_params(l)));
        json_object_set_new(g, "active_params_each", json_integer(ps_layer_active_params(l)));
        json_object_set_new(g, "fwd_flops_each", json_real(ps_layer_fwd_flops(l)));
        json_t *act = json_object();
        json_object_set_new(act, "none", json_real(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_NONE)));
        json_object_set_new(act, "selective",
                            json_real(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_SELECTIVE)));
        json_object_set_new(act, "full", json_real(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_FULL)));
        json_object_set_new(act, "fused_attention",
                            json_real(ps_layer_act_bytes_attn(l, m->dtype, 1, false, PS_RECOMP_NONE, PS_ATTN_FUSED)));
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
    char b1[32], b2[32], b3[32], b4[32];
    fprintf(f, "model     %s (%s)\n", m->name, m->family[0] ? m->family : "custom");
    if (m->source[0]) fprintf(f, "source    %s\n", m->source);
    fprintf(f, "params    %s (%lld)", ps_fmt_count((double)ps_model_params(m), b1, sizeof b1),
            (long long)ps_model_params(m));
    if (m->published_params > 0)
        fprintf(f, "   published %s, %+.2f%%", ps_fmt_count(m->published_params, b2, sizeof b2),
                100.0 * ((double)ps_model_params(m) - m->published_params) / m->published_params);
    fprintf(f, "\n");
    int64_t act = ps_model_active_params(m);
    if (act != ps_model_params(m) || m->published_active_params > 0) {
        fprintf(f, "active    %s (%lld) per token", ps_fmt_count((double)act, b1, sizeof b1), (long long)act);
        if (m->published_active_params > 0)
            fprintf(f, "   published %s, %+.2f%%", ps_fmt_count(m->published_active_params, b2, sizeof b2),
                    100.0 * ((double)act - m->published_active_params) / m->published_active_params);
        fprintf(f, "\n");
    }
    fprintf(f, "layers    %lld    seq %lld tokens    dtype %s\n", (long long)m->n_layers, (long long)m->seq,
            ps_dtype_name(m->dtype));
    double fl = ps_model_train_flops(m);
    fprintf(f, "FLOPs     %.4g per sample per iteration (fwd+bwd, model FLOPs), %.4g per token\n", fl,
            m->seq > 0 ? fl / (double)m->seq : 0.0);
    fprintf(f, "\n%5s %6s  %-14s %7s %5s %4s %6s %6s %6s %11s %10s %10s %10s %10s\n", "first", "count", "kind",
            "hidden", "heads", "kv", "ffn", "seq", "kv_seq", "params/lay", "GFLOP/lay", "act/lay", "act(sel)",
            "act(fused)");
    for (int64_t i = 0; i < m->n_layers;) {
        const ps_layer *l = &m->layers[i];
        int64_t n = run_length(m, i);
        fprintf(f, "%5lld %6lld  %-14s %7lld %5lld %4lld %6lld %6lld %6lld %11s %10.2f %10s %10s %10s\n", (long long)i,
                (long long)n, ps_layer_kind_name(l->kind), (long long)l->hidden, (long long)l->heads,
                (long long)l->kv_heads, (long long)(ps_layer_is_moe(l) ? l->expert_ffn : l->ffn_hidden),
                (long long)l->seq, (long long)l->kv_seq,
                ps_fmt_count((double)ps_layer_params(l), b1, sizeof b1), ps_layer_fwd_flops(l) / 1e9,
                ps_fmt_bytes(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_NONE), b2, sizeof b2),
                ps_fmt_bytes(ps_layer_act_bytes(l, m->dtype, 1, false, PS_RECOMP_SELECTIVE), b3, sizeof b3),
                ps_fmt_bytes(ps_layer_act_bytes_attn(l, m->dtype, 1, false, PS_RECOMP_NONE, PS_ATTN_FUSED), b4,
                             sizeof b4));
        if (ps_layer_is_moe(l)) {
            char cap[96] = "dropless";
            if (l->capacity_factor > 0) snprintf(cap, sizeof cap, "capacity factor %g", l->capacity_factor);
            if (l->router_groups > 0) {
                size_t used = strlen(cap);
                snprintf(cap + used, sizeof cap - used, ", top %lld of %lld groups", (long long)l->router_group_topk,
                         (long long)l->router_groups);
            }
            fprintf(f, "%13s moe: %lld experts (ffn column: one expert's), top %lld, %lld shared of ffn %lld, %s "
                    "router, %s; active %s/layer\n", "", (long long)l->n_experts, (long long)l->top_k,
                    (long long)l->n_shared_experts, (long long)l->shared_ffn,
                    l->router == PS_ROUTER_SIGMOID ? "sigmoid" : "softmax", cap,
                    ps_fmt_count((double)ps_layer_active_params(l), b1, sizeof b1));
        }
        if (ps_layer_is_mla(l))
            fprintf(f, "%13s mla: q_lora %lld, kv_lora %lld, qk head %lld nope + %lld rope, v head %lld\n", "",
                    (long long)l->q_lora_rank, (long long)l->kv_lora_rank, (long long)l->qk_nope_head_dim,
                    (long long)l->qk_rope_head_dim, (long long)l->v_head_dim);
        i += n;
    }
    fprintf(f, "(per layer, per sample: forward GFLOP; activation bytes kept for backward at TP 1, no recompute / "
               "selective recompute (unfused attention) / fused attention, no recompute)\n");
}

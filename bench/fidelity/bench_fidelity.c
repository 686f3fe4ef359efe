/* Fidelity of the cost model: predict every plan whose measured result the seed papers publish
 * (bench/fidelity/cases.json, docs/fidelity.md) and print predicted vs published with the error, per case and as
 * median / maximum absolute error overall, per paper and per confidence level. One JSON document on stdout.
 * Nothing here feeds back into the constants: they stay as documented in cost/params.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_cost.h"

#ifndef PS_SOURCE_DIR
#define PS_SOURCE_DIR "."
#endif

/* Paths in cases.json are relative to the repository root; preset names are not paths. */
static void resolve(const char *spec, char *out, size_t cap)
{
    if (strchr(spec, '/') && spec[0] != '/')
        snprintf(out, cap, "%s/%s", PS_SOURCE_DIR, spec);
    else
        snprintf(out, cap, "%s", spec);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    char name[32];
    double *err;
    size_t n, cap;
} group;

static ps_status add_err(group *g, double e)
{
    PS_TRY(ps_grow((void **)&g->err, &g->cap, g->n + 1, sizeof *g->err));
    g->err[g->n++] = e;
    return PS_OK;
}

static json_t *summary(group *g)
{
    json_t *j = json_object();
    json_object_set_new(j, "cases", json_integer((json_int_t)g->n));
    if (g->n) {
        qsort(g->err, g->n, sizeof *g->err, cmp_double);
        double med = g->n % 2 ? g->err[g->n / 2] : 0.5 * (g->err[g->n / 2 - 1] + g->err[g->n / 2]);
        json_object_set_new(j, "median_abs_err_pct", json_real(med));
        json_object_set_new(j, "max_abs_err_pct", json_real(g->err[g->n - 1]));
        int within10 = 0;
        for (size_t i = 0; i < g->n; i++) within10 += g->err[i] <= 10;
        json_object_set_new(j, "within_10pct", json_integer(within10));
    }
    return j;
}

/* The groups so far (papers, confidence levels, metrics), growing as cases name new ones. */
typedef struct {
    group *g;
    size_t n, cap;
} group_list;

/* Add e to the group called `name`, making the group on first use. */
static ps_status add_to(group_list *gl, const char *name, double e)
{
    for (size_t i = 0; i < gl->n; i++)
        if (strcmp(gl->g[i].name, name) == 0) return add_err(&gl->g[i], e);
    PS_TRY(ps_grow((void **)&gl->g, &gl->cap, gl->n + 1, sizeof *gl->g));
    group *g = &gl->g[gl->n++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    return add_err(g, e);
}

/* The schedule names of the papers that psearch knows under another name. */
static const char *schedule_name(const char *s)
{
    /* ZB-1p (Qi et al.'s zero-bubble schedule at 1F1B's memory) is the handcrafted ZB-H1 order. */
    if (strcmp(s, "zb-1p") == 0) return "zb-h1";
    return s;
}

/* How a case's attention kernel is chosen (--attention): as the case says (plan.attention, or the seed papers'
 * flash_attention flag; unfused otherwise: the runs before FlashAttention), all unfused (the model before the fused
 * kernel existed in psearch: the "before" of docs/fidelity.md), or psearch's default for the cluster (auto). */
enum { ATTN_CASE = 0, ATTN_UNFUSED, ATTN_AUTO };
static int g_attn_mode = ATTN_CASE;

/* Features a case needs ("needs") that psearch does not model yet: such a case is listed under `pending`, not
 * predicted, so that no error is reported for a configuration the cost model cannot describe (recompute_modules:
 * Megatron's per-module selective recomputation, e.g. DeepSeek-V3's mla_up_proj and mlp, which ps_recompute cannot
 * name). Context and expert parallelism are predicted: the plan's cp, cp_comm, ep and etp go into the strategy. */
static const char *const k_pending_needs[] = {"activation_offload", "recompute_modules", NULL};

static const char *pending_need(const json_t *c)
{
    size_t k;
    const json_t *n;
    json_array_foreach(json_object_get(c, "needs"), k, n)
    {
        const char *v = json_string_value(n);
        for (int i = 0; v && k_pending_needs[i]; i++)
            if (strcmp(v, k_pending_needs[i]) == 0) return k_pending_needs[i];
    }
    return NULL;
}

static ps_status predict_case(const json_t *c, const ps_cost_params *cp, double *pred, const char **metric,
                              char *why, size_t whycap, bool *fits)
{
    const json_t *plan = json_object_get(c, "plan");
    const char *mspec = json_string_value(json_object_get(c, "model"));
    const char *cspec = json_string_value(json_object_get(c, "cluster"));
    *metric = json_string_value(json_object_get(json_object_get(c, "published"), "metric"));
    if (!plan || !mspec || !cspec || !*metric) return PS_FAIL(PS_ERR_INPUT, "case lacks model, cluster or plan");
    char mpath[1024], cpath[1024];
    resolve(mspec, mpath, sizeof mpath);
    resolve(cspec, cpath, sizeof cpath);
    int tp_max = (int)json_integer_value(json_object_get(plan, "tp"));
    const json_t *ltp = json_object_get(plan, "layer_tp");
    size_t k;
    const json_t *row;
    json_array_foreach(ltp, k, row)
    {
        int t = (int)json_integer_value(json_array_get(row, 2));
        if (t > tp_max) tp_max = t;
    }
    /* Megatron pads the vocabulary to a multiple of 128 x tp (--make-vocab-size-divisible-by). */
    ps_model_opts mo;
    ps_model_opts_init(&mo);
    mo.vocab_pad = 128 * (tp_max > 0 ? tp_max : 1);
    /* the modern cases state their sequence length and training dtype beside the plan */
    if (json_integer_value(json_object_get(plan, "seq")) > 0) mo.seq = json_integer_value(json_object_get(plan, "seq"));
    const char *dt = json_string_value(json_object_get(plan, "dtype"));
    ps_dtype dtype;
    if (dt) {
        PS_TRY(ps_dtype_parse(dt, &dtype));
        mo.dtype = (int)dtype;
    }
    ps_model m;
    ps_cluster cl;
    ps_plan p;
    ps_prediction r;
    memset(&p, 0, sizeof p);
    memset(&r, 0, sizeof r);
    PS_TRY(ps_model_load(mpath, &mo, &m));
    ps_status st = ps_cluster_load(cpath, &cl);
    if (st != PS_OK) {
        ps_model_free(&m);
        return st;
    }
    /* plan.moe restates the model's experts as the source prints them: a case whose model file disagrees names the
     * wrong model, which is an input error, not an error of the cost model */
    const json_t *moe = json_object_get(plan, "moe");
    if (moe) {
        int64_t e = json_integer_value(json_object_get(moe, "experts"));
        int64_t tk = json_integer_value(json_object_get(moe, "top_k"));
        int64_t moe_blocks = 0;
        for (int64_t i = 0; i < m.n_layers; i++) {
            if (m.layers[i].n_experts == 0) continue;
            moe_blocks++;
            if (m.layers[i].n_experts != e || m.layers[i].top_k != tk) {
                const ps_layer *L = &m.layers[i];
                st = PS_FAIL(PS_ERR_INPUT, "plan.moe: %lld experts, top-%lld; layer %lld of the model: %lld, top-%lld",
                             (long long)e, (long long)tk, (long long)i, (long long)L->n_experts, (long long)L->top_k);
                goto done;
            }
        }
        if (moe_blocks == 0) {
            st = PS_FAIL(PS_ERR_INPUT, "plan.moe is given but the model has no MoE block");
            goto done;
        }
    }
    /* tp_max only pads the vocabulary: layer 0's tp is the plan's, per-layer tp follows below */
    ps_strategy s = {.tp = (int)json_integer_value(json_object_get(plan, "tp")),
                     .dp = (int)json_integer_value(json_object_get(plan, "dp")),
                     .zero = (int)json_integer_value(json_object_get(plan, "zero")),
                     .sp = json_is_true(json_object_get(plan, "seq_parallel"))};
    /* Context parallelism: the case's dp excludes cp (GPUs = tp x pp x dp x cp), as ps_strategy's width tp x cp x dp
     * does. cp_comm as the source states it; absent, ring: Megatron-LM's --cp-comm-type default p2p (arguments.py at
     * d98e8a64). */
    const json_t *cpj = json_object_get(plan, "cp");
    if (cpj) {
        if (!json_is_integer(cpj) || json_integer_value(cpj) < 1) {
            st = PS_FAIL(PS_ERR_INPUT, "plan.cp must be an integer >= 1");
            goto done;
        }
        s.cp = (int)json_integer_value(cpj);
    }
    /* Expert parallelism (Megatron-core's expert grid etp x ep x edp over the stage's tp x cp x dp GPUs): ep and etp
     * as the source states them; etp absent = tp (Megatron-core's expert_tensor_parallel_size default). A dense model
     * ignores both. */
    const char *const ep_keys[2] = {"ep", "etp"};
    int *ep_fields[2] = {&s.ep, &s.etp};
    for (int k2 = 0; k2 < 2; k2++) {
        const json_t *v = json_object_get(plan, ep_keys[k2]);
        if (!v) continue;
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            st = PS_FAIL(PS_ERR_INPUT, "plan.%s must be an integer >= 1", ep_keys[k2]);
            goto done;
        }
        *ep_fields[k2] = (int)json_integer_value(v);
    }
    const char *cc = json_string_value(json_object_get(plan, "cp_comm"));
    s.cp_comm = PS_CP_RING;
    if (cc) PS_TRY_GOTO(st, ps_cp_comm_parse(cc, &s.cp_comm), done);
    const char *at = json_string_value(json_object_get(plan, "attention"));
    if (g_attn_mode == ATTN_UNFUSED)
        s.attn = PS_ATTN_UNFUSED;
    else if (g_attn_mode == ATTN_AUTO)
        s.attn = PS_ATTN_AUTO;
    else if (at)
        PS_TRY_GOTO(st, ps_attn_parse(at, &s.attn), done);
    else
        s.attn = json_is_true(json_object_get(plan, "flash_attention")) ? PS_ATTN_FUSED : PS_ATTN_UNFUSED;
    const char *rc = json_string_value(json_object_get(plan, "recompute"));
    if (rc) PS_TRY_GOTO(st, ps_recompute_parse(rc, &s.ckpt), done);
    /* Data-parallel overlap: a case states it (plan.overlap_grad_reduce, Megatron's flag: the modern cases; or
     * plan.dp_overlap) or gets what its source's framework did by default: FSDP and DeepSpeed ZeRO-3 prefetch and
     * overlap (DeepSpeed's overlap_comm defaults to true for stage 3 only), while Megatron-LM before
     * --overlap-grad-reduce (2021-2023, the runs of cases.json) and DeepSpeed ZeRO 0-2 (overlap_comm false) reduce
     * gradients after the backward. overlap_param_gather is not a separate choice: the cost model overlaps the
     * parameter gather with the gradient reduction (the modern cases set both alike, but for
     * mb2511-b200-qwen3-235b-a22b-fp8mx, whose config turns only the parameter-gather overlap off: priced
     * overlapping). */
    const json_t *dpo = json_object_get(plan, "dp_overlap");
    if (!dpo) dpo = json_object_get(plan, "overlap_grad_reduce");
    s.dp_no_overlap = dpo ? !json_is_true(dpo) : s.zero < 3;
    /* Oases' ablation steps (Table 3): its cross-pass schedule alone, then with fine-grained recomputation */
    const char *ov = json_string_value(json_object_get(plan, "tp_overlap"));
    if (ov && strcmp(ov, "oases-cross-pass") == 0)
        s.overlap = PS_OVERLAP_CROSS;
    else if (ov && strcmp(ov, "oases-cross-pass+fine-recompute") == 0)
        s.overlap = PS_OVERLAP_OASES;
    else if (ov && strcmp(ov, "none") != 0)
        PS_TRY_GOTO(st, PS_FAIL(PS_ERR_INPUT, "unknown tp_overlap '%s' (known: none, oases-cross-pass, "
                                              "oases-cross-pass+fine-recompute)", ov), done);
    /* the modern cases: Megatron-core's --tp-comm-overlap (Transformer Engine's userbuffers) is the te overlap */
    if (json_is_true(json_object_get(plan, "tp_comm_overlap")) && s.sp && s.tp > 1) s.overlap = PS_OVERLAP_TE;
    int pp = (int)json_integer_value(json_object_get(plan, "pp"));
    int vpp = (int)json_integer_value(json_object_get(plan, "vpp"));
    const json_t *part = json_object_get(plan, "partition");
    ps_status (*make)(const ps_model *, int64_t, int64_t, int, int, const char *, const ps_strategy *, ps_plan *) =
        json_is_array(part) ? ps_plan_alloc : ps_plan_uniform;
    PS_TRY_GOTO(st,
                make(&m, json_integer_value(json_object_get(plan, "gbs")),
                                json_integer_value(json_object_get(plan, "mbs")), pp, vpp > 0 ? vpp : 1,
                                schedule_name(json_string_value(json_object_get(plan, "schedule"))), &s, &p),
                done);
    if (json_is_array(part)) {
        if ((int64_t)json_array_size(part) != (int64_t)p.pp * p.vpp) {
            st = PS_FAIL(PS_ERR_INPUT, "partition has %zu stages, plan %d", json_array_size(part), p.pp * p.vpp);
            goto done;
        }
        json_array_foreach(part, k, row) p.cuts[k + 1] = json_integer_value(json_array_get(row, 1));
    }
    /* Per-layer TP (Oases' planner): the stage width stays, so dp = width / tp. */
    int width = s.tp * s.dp;
    json_array_foreach(ltp, k, row)
    {
        int64_t a = json_integer_value(json_array_get(row, 0)), b = json_integer_value(json_array_get(row, 1));
        int t = (int)json_integer_value(json_array_get(row, 2));
        if (t < 1 || width % t != 0) {
            st = PS_FAIL(PS_ERR_INPUT, "layer_tp[%zu]: tp %d does not divide the stage width %d", k, t, width);
            goto done;
        }
        for (int64_t i = a; i < b && i < m.n_layers; i++) {
            p.layer[i].tp = t;
            p.layer[i].dp = width / t;
        }
    }
    /* The micro-batch is per replica of layer 0; with per-layer dp the plan's mbs follows layer 0. */
    if (json_array_size(ltp) > 0) {
        int64_t micro = json_integer_value(json_object_get(plan, "micro_batches"));
        if (micro < 1 || p.layer[0].dp < 1) {
            st = PS_FAIL(PS_ERR_INPUT, "a plan with layer_tp needs micro_batches >= 1 (got %lld) and a layer 0 dp "
                                       ">= 1 (got %d)", (long long)micro, p.layer[0].dp);
            goto done;
        }
        p.mbs = json_integer_value(json_object_get(plan, "gbs")) / micro / p.layer[0].dp;
        /* A layer whose data-parallel replica gets one sample has no second sub-batch to overlap with (App. D's
         * h8192 plan: TP 4 x DP 8 layers at 8 samples per micro-batch): it runs plain TP, and the row says so. */
        int64_t global_mb = json_integer_value(json_object_get(plan, "gbs")) / micro;
        int64_t plain = 0;
        for (int64_t i = 0; i < m.n_layers; i++)
            if (ps_overlap_is_oases(p.layer[i].overlap) && global_mb / p.layer[i].dp < 2) {
                p.layer[i].overlap = PS_OVERLAP_NONE;
                plain++;
            }
        if (plain)
            snprintf(why, whycap, "%lld layer(s) with one sample per replica costed without overlap", (long long)plain);
    }
    /* Megatron-LM's --recompute-method block --recompute-num-layers n (recompute.py: the first n transformer layers
     * of every model chunk fully recomputed, the rest not), as a case's source recipe states it */
    const json_t *rnl = json_object_get(plan, "recompute_num_layers");
    if (rnl) {
        int64_t n = json_integer_value(rnl);
        if (!json_is_integer(rnl) || n < 1 || s.ckpt != PS_RECOMP_FULL) {
            st = PS_FAIL(PS_ERR_INPUT, "plan.recompute_num_layers needs recompute full and a count >= 1");
            goto done;
        }
        for (int chunk = 0; chunk < p.pp * p.vpp; chunk++) {
            int64_t done_n = 0;
            for (int64_t i = p.cuts[chunk]; i < p.cuts[chunk + 1]; i++)
                if (ps_layer_is_block(m.layers[i].kind))
                    p.layer[i].ckpt = done_n++ < n ? PS_RECOMP_FULL : PS_RECOMP_NONE;
        }
    }
    /* The attention kernel the case's framework ran, where its source pins it (plan.attention_kernel): "fa2" =
     * FlashAttention-2 (PyTorch's scaled_dot_product_attention flash backend, the flash-attn 2 package), which on
     * Hopper reaches well below the default fused kernel (ps_cost_fa2_eff); absent = the default. The figures of the
     * stage's first GPU kind (every case runs on one kind). */
    ps_cost_params pk = *cp;
    const char *ak = json_string_value(json_object_get(plan, "attention_kernel"));
    if (ak && strcmp(ak, "fa2") != 0) {
        st = PS_FAIL(PS_ERR_INPUT, "plan.attention_kernel must be fa2 (got '%s')", ak);
        goto done;
    }
    if (ak && s.attn != PS_ATTN_UNFUSED)
        for (int gi = 0; gi < cl.n_groups; gi++)
            if (cl.groups[gi].gpus_per_node > 0) {
                ps_cost_fa2_eff(&cl.groups[gi].gpu, &pk.attn_fwd_eff, &pk.attn_bwd_eff);
                break;
            }
    /* The data-parallel gradient reduction's element size, where the case states it (plan.grad_reduce_in_fp32,
     * Megatron-core's flag): true = fp32, 4 bytes; false = the gradients' own BF16, 2 bytes (FP8 recipes keep BF16
     * gradients too). Absent: the cost model's grad_reduce_bytes (4, Megatron-LM's fp32 reduction). */
    const json_t *g32 = json_object_get(plan, "grad_reduce_in_fp32");
    if (g32 && !json_is_boolean(g32)) {
        st = PS_FAIL(PS_ERR_INPUT, "plan.grad_reduce_in_fp32 must be true or false");
        goto done;
    }
    if (g32) pk.grad_reduce_bytes = json_is_true(g32) ? 4 : 2;
    /* Megatron-core's ddp.bucket_size where the case states it (plan.dp_bucket_size, in parameters): a set size
     * replaces the default rule max(4e7, 1e6 x dp) (distributed_data_parallel_config.py), so the per-rank term goes. */
    const json_t *bkt = json_object_get(plan, "dp_bucket_size");
    if (bkt) {
        if (!json_is_integer(bkt) || json_integer_value(bkt) < 1000 || json_integer_value(bkt) > (json_int_t)1e11) {
            st = PS_FAIL(PS_ERR_INPUT, "plan.dp_bucket_size must be an integer number of parameters in [1000, 1e11]");
            goto done;
        }
        pk.dp_bucket_elems = (double)json_integer_value(bkt);
        pk.dp_bucket_elems_per_rank = 0;
    }
    PS_TRY_GOTO(st, ps_cost_plan(&pk, &m, &cl, &p, &r), done);
    if (strcmp(*metric, "iter_time_s") == 0)
        *pred = r.iter_time_s;
    else if (strcmp(*metric, "samples_per_s") == 0)
        *pred = r.samples_per_s;
    else if (strcmp(*metric, "tokens_per_s") == 0)
        *pred = r.tokens_per_s;
    else if (strcmp(*metric, "mfu") == 0)
        *pred = r.mfu;
    else if (strcmp(*metric, "tflops_per_gpu") == 0)
        *pred = r.tflops_per_gpu;
    else
        st = PS_FAIL(PS_ERR_INPUT, "unknown metric '%s'", *metric);
    *fits = r.fits;
    if (st == PS_OK && !r.fits)
        snprintf(why + strlen(why), whycap - strlen(why), "%spredicted not to fit in memory", why[0] ? "; " : "");
done:
    ps_prediction_free(&r);
    ps_plan_free(&p);
    ps_cluster_free(&cl);
    ps_model_free(&m);
    return st;
}

int main(int argc, char **argv)
{
    char def[1024];
    snprintf(def, sizeof def, "%s/bench/fidelity/cases.json", PS_SOURCE_DIR);
    const char *path = def;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--attention") == 0 && a + 1 < argc) {
            const char *v = argv[++a];
            g_attn_mode = strcmp(v, "unfused") == 0 ? ATTN_UNFUSED : strcmp(v, "auto") == 0 ? ATTN_AUTO
                          : strcmp(v, "case") == 0  ? ATTN_CASE
                                                    : -1;
            if (g_attn_mode < 0) {
                fprintf(stderr, "bench_fidelity: --attention takes case, unfused or auto (got '%s')\n", v);
                return 2;
            }
        } else if (argv[a][0] == '-') {
            fprintf(stderr, "usage: bench_fidelity [--attention case|unfused|auto] [cases.json]\n");
            return 2;
        } else {
            path = argv[a];
        }
    }
    json_t *root = NULL;
    if (ps_json_load_file(path, &root) != PS_OK) {
        fprintf(stderr, "bench_fidelity: %s\n", ps_error_message());
        return 2;
    }
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    json_t *out = json_object(), *rows = json_array(), *skipped = json_array(), *pending = json_array();
    int64_t not_fitting = 0;
    group_list groups = {0};
    group all;
    memset(&all, 0, sizeof all);
    int rc = 0;
    size_t i;
    json_t *c;
    /* id -> [published, predicted] of every case predicted, for the gains over a baseline case */
    json_t *seen = json_object();
    json_array_foreach(json_object_get(root, "cases"), i, c)
    {
        const char *id = json_string_value(json_object_get(c, "id"));
        double pub = json_number_value(json_object_get(json_object_get(c, "published"), "value"));
        double pred = 0;
        const char *metric = "";
        char why[128] = "";
        ps_error_clear();
        const char *need = pending_need(c);
        if (need) {
            json_array_append_new(pending, json_pack("{s:s, s:s}", "id", id ? id : "?", "needs", need));
            continue;
        }
        bool fits = true;
        ps_status st = predict_case(c, &cp, &pred, &metric, why, sizeof why, &fits);
        if (st == PS_OK && !id) st = PS_FAIL(PS_ERR_INPUT, "case lacks an id");
        if (st == PS_OK && !(pub > 0))
            st = PS_FAIL(PS_ERR_INPUT, "published value must be a number > 0 (got %g)", pub);
        if (st != PS_OK) {
            json_array_append_new(skipped, json_pack("{s:s, s:s}", "id", id ? id : "?", "reason", ps_error_message()));
            continue;
        }
        double err = 100 * (pred - pub) / pub;
        json_t *row = json_pack("{s:s, s:s, s:f, s:f, s:f, s:s}", "id", id, "metric", metric, "published", pub,
                                "predicted", pred, "error_pct", err, "confidence",
                                json_string_value(json_object_get(c, "confidence")) ?: "");
        if (why[0]) json_object_set_new(row, "note", json_string(why));
        json_array_append_new(rows, row);
        json_object_set_new(seen, id, json_pack("[ff]", pub, pred));
        not_fitting += !fits;
        /* the modern cases' train / validation split (docs/fidelity.md): reported apart, never pooled */
        const char *set = json_string_value(json_object_get(c, "set"));
        if (set) {
            char sname[32];
            snprintf(sname, sizeof sname, "set-%s", set);
            json_object_set_new(row, "set", json_string(set));
            if (add_to(&groups, sname, fabs(err)) != PS_OK) rc = 3;
        }
        char gname[32], cname[32], mname[32];
        snprintf(gname, sizeof gname, "%.*s", (int)strcspn(id, "-"), id);
        snprintf(cname, sizeof cname, "confidence-%s", json_string_value(json_object_get(c, "confidence")) ?: "?");
        snprintf(mname, sizeof mname, "metric-%s", metric);
        if (add_to(&groups, gname, fabs(err)) != PS_OK || add_to(&groups, cname, fabs(err)) != PS_OK ||
            add_to(&groups, mname, fabs(err)) != PS_OK || add_err(&all, fabs(err)) != PS_OK) {
            fprintf(stderr, "bench_fidelity: %s\n", ps_error_message());
            rc = 3;
            break;
        }
    }
    json_object_set_new(out, "bench", json_string("fidelity"));
    json_object_set_new(out, "cases_file", json_string(path));
    json_object_set_new(out, "attention", json_string(g_attn_mode == ATTN_UNFUSED ? "unfused (all cases)"
                                                      : g_attn_mode == ATTN_AUTO ? "auto (psearch's default per GPU)"
                                                                                 : "as each case states"));
    json_object_set_new(out, "overall", summary(&all));
    json_object_set_new(out, "predicted_not_to_fit", json_integer(not_fitting));
    json_t *by = json_object();
    for (size_t g = 0; g < groups.n; g++) {
        json_object_set_new(by, groups.g[g].name, summary(&groups.g[g]));
        free(groups.g[g].err);
    }
    free(groups.g);
    json_object_set_new(out, "by_group", by);
    /* Gains: a case that names a "baseline" case (Oases: overlapped against plain TP on the same model and cluster)
     * gets predicted gain = its prediction / the baseline's against the published ratio, for throughput metrics
     * (iteration times: the inverse). What the cost model must get right to choose overlap where it pays. */
    json_t *gains = json_array();
    group gerr;
    memset(&gerr, 0, sizeof gerr);
    json_array_foreach(json_object_get(root, "cases"), i, c)
    {
        const char *id = json_string_value(json_object_get(c, "id"));
        const char *base = json_string_value(json_object_get(c, "baseline"));
        if (!id || !base) continue;
        json_t *a = json_object_get(seen, id), *b = json_object_get(seen, base);
        if (!a || !b) {
            json_array_append_new(skipped, json_pack("{s:s, s:s}", "id", id, "reason",
                                                     "gain: the case or its baseline was not predicted"));
            continue;
        }
        const char *metric = json_string_value(json_object_get(json_object_get(c, "published"), "metric"));
        bool inverse = metric && strcmp(metric, "iter_time_s") == 0;
        double pa = json_real_value(json_array_get(a, 0)), qa = json_real_value(json_array_get(a, 1));
        double pb = json_real_value(json_array_get(b, 0)), qb = json_real_value(json_array_get(b, 1));
        double pub_gain = inverse ? pb / pa : pa / pb, pred_gain = inverse ? qb / qa : qa / qb;
        double err = 100 * (pred_gain - pub_gain) / pub_gain;
        json_array_append_new(gains, json_pack("{s:s, s:s, s:f, s:f, s:f}", "id", id, "baseline", base,
                                               "published_gain", pub_gain, "predicted_gain", pred_gain, "error_pct",
                                               err));
        if (add_err(&gerr, fabs(err)) != PS_OK) rc = 3;
    }
    json_object_set_new(out, "gains_summary", summary(&gerr));
    json_object_set_new(out, "gains", gains);
    free(gerr.err);
    json_decref(seen);
    json_object_set_new(out, "skipped", skipped);
    json_object_set_new(out, "pending", pending);
    json_object_set_new(out, "cases", rows);
    free(all.err);
    char *s = json_dumps(out, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    puts(s ? s : "{}");
    free(s);
    json_decref(out);
    json_decref(root);
    return rc;
}

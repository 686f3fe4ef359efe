/* Cost model against hand-computed values: ring all-reduce, ZeRO memory split of mixed-precision Adam, plan rules,
 * and monotonicity properties (more TP never raises per-GPU parameter memory, more recomputation never raises
 * activation memory). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ps_cost.h"
#include "ps_schedules.h"

static ps_cluster load_cluster(const char *spec)
{
    ps_cluster c;
    assert_int_equal(ps_cluster_load(spec, &c), PS_OK);
    return c;
}

static ps_model load_model(const char *name)
{
    ps_model m;
    assert_int_equal(ps_model_load(name, NULL, &m), PS_OK);
    return m;
}

static void assert_rel(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * fabs(want))) fail_msg("got %.12g, want %.12g (rel tol %g)", got, want, tol);
}

static void test_ring_allreduce(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-a100-80g:2");
    const ps_node_group *g = &c.groups[0];
    /* 8 GPUs of one node: NVLink, ring 2(n-1)/n M/B + 2(n-1) alpha */
    ps_group in = {0, 8, 1};
    double M = 1024.0 * 1024 * 1024, B = g->intra.bw_Bps * p.link_eff_nvlink, a = g->intra.latency_s;
    assert_rel(ps_coll_allreduce(&p, &c, &in, M), 2.0 * 7 / 8 * M / B + 14 * a, 1e-12);
    /* all-gather and reduce-scatter: (n-1)/n M/B */
    assert_rel(ps_coll_allgather(&p, &c, &in, M), 7.0 / 8 * M / B + 7 * a, 1e-12);
    assert_rel(ps_coll_reducescatter(&p, &c, &in, M), 7.0 / 8 * M / B + 7 * a, 1e-12);
    /* one GPU per node across 2 nodes: the node's network is shared by its 8 GPUs (8 such groups at once) */
    ps_group across = {0, 2, 8};
    double Bn = g->inter.bw_Bps * p.link_eff_ib / 8, an = g->inter.latency_s;
    double ring = 2.0 * 1 / 2 * M / Bn + 2 * an, tree = 2 * M / Bn + 2 * an;
    assert_rel(ps_coll_allreduce(&p, &c, &across, M), fmin(ring, tree), 1e-12);
    /* a small message on many GPUs takes the tree: fewer latency steps */
    ps_cluster big = load_cluster("dgx-a100-80g:64");
    ps_group all = {0, 512, 1};
    double small = 1024, bw, lat;
    ps_coll_ring_link(&p, &big, &all, &bw, &lat);
    assert_rel(ps_coll_allreduce(&p, &big, &all, small), 2 * small / bw + 2 * 9 * lat, 1e-12);
    /* a ring reaching past the cluster's GPUs has a link nothing crosses */
    ps_group past = {12, 8, 1};
    ps_coll_ring_link(&p, &c, &past, &bw, &lat);
    assert_true(bw == 0 && isinf(lat));
    /* a single GPU communicates nothing; p2p inside a node is alpha + bytes/B */
    ps_group one = {3, 1, 1};
    assert_true(ps_coll_allreduce(&p, &c, &one, M) == 0);
    assert_rel(ps_p2p(&p, &c, 0, 1, M), a + M / B, 1e-12);
    ps_cluster_free(&c);
    ps_cluster_free(&big);
}

/* GB200 NVL72 (gb200-nvl72:2, two racks of 18 trays x 4 GPUs): a ring over trays of one rack runs on NVLink at each
 * GPU's own 900 GB/s, never on the trays' shared NICs; the same ring across two racks crosses the network. */
static void test_nvlink_domain_allreduce(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("gb200-nvl72:2");
    const ps_node_group *g = &c.groups[0];
    double M = 1024.0 * 1024 * 1024;
    /* hand-computed from the preset's figures: NVLink5 900 GB/s per direction per GPU, 3 us; the tray's network
     * 4 x 400 Gb/s = 200 GB/s, 5 us */
    double Bnv = 900e9 * p.link_eff_nvlink, anv = 3e-6;
    /* 16 GPUs on trays 0-3 of rack 0: every edge NVLink, ring 2(n-1)/n M/B + 2(n-1) alpha */
    ps_group in = {0, 16, 1};
    double want_in = 2.0 * 15 / 16 * M / Bnv + 30 * anv;
    double t_in = ps_coll_allreduce(&p, &c, &in, M);
    assert_rel(t_in, want_in, 1e-3);
    /* a whole rack (TP 72): still NVLink */
    ps_group rack = {0, 72, 1};
    double bw, lat;
    ps_coll_ring_link(&p, &c, &rack, &bw, &lat);
    assert_rel(bw, Bnv, 1e-12);
    assert_rel(lat, anv, 1e-12);
    /* 16 GPUs on trays 16-19, two in each rack (GPUs 64-79): two ring edges cross the network, each with its whole
     * tray's 4 GPUs in the group, so the tray's NICs at full share: 200 GB/s, slower than NVLink */
    ps_group across = {64, 16, 1};
    double Bib = 4 * 400e9 / 8 * p.link_eff_ib, aib = 5e-6;
    double B = fmin(Bnv, Bib);
    double ring = 2.0 * 15 / 16 * M / B + 30 * aib, tree = 2 * M / B + 2 * 4 * aib;
    double t_across = ps_coll_allreduce(&p, &c, &across, M);
    assert_rel(t_across, fmin(ring, tree), 1e-3);
    assert_true(t_across > 1.5 * t_in);
    /* one GPU per rack (a DP group of stride 72): the tray's NICs are shared by its 4 GPUs */
    ps_group dp = {0, 2, 72};
    ps_coll_ring_link(&p, &c, &dp, &bw, &lat);
    assert_rel(bw, g->inter.bw_Bps * p.link_eff_ib / 4, 1e-12);
    /* p2p between trays of one rack: NVLink, between racks: the network */
    assert_rel(ps_p2p(&p, &c, 0, 68, M), anv + M / Bnv, 1e-12);
    assert_rel(ps_p2p(&p, &c, 0, 72, M), aib + M / (g->inter.bw_Bps * p.link_eff_ib), 1e-12);
    ps_cluster_free(&c);
}

/* Placement on a cluster built in code, a CPU-only group between GPU groups included (no GPU may land in it): every
 * GPU's group and node against a walk over the groups, and the links between groups. */
static void test_placement(void **state)
{
    (void)state;
    ps_node_group g[4];
    memset(g, 0, sizeof g);
    const char *gpus[4] = {"a100-80g", "a100-80g", "v100-16g", "t4"};
    const int64_t nodes[4] = {2, 3, 1, 2}, per[4] = {8, 0, 4, 2};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ps_gpu_lookup(gpus[i], &g[i].gpu), PS_OK);
        g[i].nodes = nodes[i];
        g[i].gpus_per_node = per[i];
        g[i].intra = (ps_link){.kind = "nvlink3", .cls = PS_LINK_NVLINK, .bw_Bps = 300e9, .latency_s = 2e-6};
        g[i].inter = (ps_link){.kind = "ib-hdr", .cls = PS_LINK_IB, .bw_Bps = (double)(i + 1) * 25e9,
                               .latency_s = (double)(i + 1) * 1e-6};
    }
    ps_cluster c;
    memset(&c, 0, sizeof c);
    c.groups = g;
    c.n_groups = 4;
    assert_int_equal(ps_cluster_node_of(&c, 0), -1); /* not finished: nothing is placed */
    assert_int_equal(ps_cluster_finish(&c, "test"), PS_OK);
    assert_int_equal(c.n_gpus, 24);
    assert_int_equal(c.n_nodes, 8);
    ps_gpu_place want[24]; /* every GPU's place, from a walk over the groups */
    int64_t gpu = 0, node = 0;
    for (int i = 0; i < 4; i++)
        for (int64_t k = 0; k < nodes[i]; k++, node++)
            for (int64_t l = 0; l < per[i]; l++, gpu++) {
                assert_ptr_equal(ps_cluster_group_of(&c, gpu), &g[i]);
                assert_int_equal(ps_cluster_node_of(&c, gpu), node);
                want[gpu] = (ps_gpu_place){.group = i, .node = node, .local = l};
            }
    assert_int_equal(gpu, 24);
    /* one placement feeds node, group and link: every GPU's against the walk, and every pair's link against the rule
     * (itself; the node's link inside a node, none of these groups has islands; else the slower NIC and the slower
     * stack), through ps_cluster_link and ps_cluster_link_placed alike */
    for (int64_t a = 0; a < 24; a++) {
        ps_gpu_place pa, pb;
        assert_true(ps_cluster_place(&c, a, &pa));
        assert_int_equal(pa.group, want[a].group);
        assert_int_equal(pa.node, want[a].node);
        assert_int_equal(pa.local, want[a].local);
        assert_int_equal(ps_cluster_group_index(&c, a), want[a].group);
        for (int64_t b = 0; b < 24; b++) {
            assert_true(ps_cluster_place(&c, b, &pb));
            const ps_link *ia = &g[want[a].group].inter, *ib = &g[want[b].group].inter;
            ps_link r = a == b                          ? (ps_link){.kind = "self", .bw_Bps = INFINITY}
                        : want[a].node == want[b].node ? g[want[a].group].intra
                                                       : (ps_link){.kind = "ib-hdr",
                                                                   .bw_Bps = fmin(ia->bw_Bps, ib->bw_Bps),
                                                                   .latency_s = fmax(ia->latency_s, ib->latency_s)};
            ps_link x = ps_cluster_link(&c, a, b), y = ps_cluster_link_placed(&c, &pa, &pb);
            assert_string_equal(x.kind, r.kind);
            assert_true(x.bw_Bps == r.bw_Bps && x.latency_s == r.latency_s);
            assert_string_equal(y.kind, r.kind);
            assert_true(y.bw_Bps == r.bw_Bps && y.latency_s == r.latency_s);
        }
    }
    ps_gpu_place out = {.group = 7, .node = 7, .local = 7};
    assert_false(ps_cluster_place(&c, 24, &out));
    assert_false(ps_cluster_place(&c, -1, &out));
    assert_true(out.group == 7 && out.node == 7 && out.local == 7);
    assert_int_equal(ps_cluster_node_of(&c, 24), -1);
    assert_int_equal(ps_cluster_node_of(&c, -1), -1);
    assert_null(ps_cluster_group_of(&c, 24));
    /* GPU 16 is the V100 node (node 5, after the three CPU-only nodes); 20 and 22 the two T4 nodes (6, 7) */
    assert_int_equal(ps_cluster_node_of(&c, 16), 5);
    assert_int_equal(ps_cluster_node_of(&c, 22), 7);
    ps_link l = ps_cluster_link(&c, 0, 16); /* across nodes: the slower NIC (group 0's), the slower stack (2's) */
    assert_true(l.bw_Bps == 25e9 && l.latency_s == 3e-6);
    l = ps_cluster_link(&c, 20, 21); /* inside a T4 node */
    assert_true(l.bw_Bps == 300e9);
    l = ps_cluster_link(&c, 21, 22);
    assert_true(l.bw_Bps == 100e9 && l.latency_s == 4e-6);
}

/* Peaks by precision agree with the lookup by name for every catalog GPU and training dtype; a layer on GPUs
 * without a peak for the dtype, or partly outside the cluster, is refused naming why. */
static void test_peaks(void **state)
{
    (void)state;
    const ps_dtype dts[] = {PS_DTYPE_FP32, PS_DTYPE_FP16, PS_DTYPE_BF16, PS_DTYPE_FP8};
    for (int i = 0; i < ps_gpu_catalog_count(); i++) {
        const ps_gpu *g = ps_gpu_catalog_at(i);
        for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
            assert_true(ps_cost_peak_flops(g, dts[k]) == ps_gpu_peak_flops(g, ps_dtype_name(dts[k])));
        assert_true(ps_gpu_peak(g, PS_GPU_TF32) == g->tf32_flops);
        assert_true(ps_gpu_peak(g, PS_GPU_TF32) == ps_gpu_peak_flops(g, "TF32"));
        assert_true(ps_gpu_peak(g, (ps_gpu_precision)99) == 0);
    }
    assert_true(ps_gpu_peak(NULL, PS_GPU_FP16) == 0);
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("p3-8xlarge:1"); /* 4 V100: no bf16 */
    ps_model m = load_model("gpt3-1.3b");
    ps_layer_cost lc;
    ps_strategy s = {.tp = 2, .dp = 2};
    assert_int_equal(ps_cost_layer(&p, &c, &m.layers[1], PS_DTYPE_FP16, 1, &s, 0, &lc), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, &m.layers[1], PS_DTYPE_BF16, 1, &s, 0, &lc), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "has no bf16 tensor peak"));
    assert_int_equal(ps_cost_layer(&p, &c, &m.layers[1], PS_DTYPE_FP16, 1, &s, 2, &lc), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "GPU 4 is outside cluster p3-8xlarge:1 (4 GPUs)"));
    assert_int_equal(ps_cost_layer(&p, &c, &m.layers[1], PS_DTYPE_FP16, 1, &s, -1, &lc), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "GPU -1 is outside cluster"));
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* Fused attention in a layer's cost: executed FLOPs counted by hand, the kernel's efficiency as the time it takes,
 * no selective recomputation, memory without scores, and the rule that a GPU without a fused kernel refuses it. */
/* A GPT-style decoder layer (GeLU MLP of 4h, heads of 128) built by hand, for the attention and FP8 tests. */
static ps_layer gelu_decoder(int64_t h, int64_t seq)
{
    ps_layer l;
    memset(&l, 0, sizeof l);
    l.kind = PS_LAYER_DECODER;
    l.hidden = l.out_hidden = h;
    l.head_dim = 128;
    l.heads = l.kv_heads = h / l.head_dim;
    l.ffn_hidden = 4 * h;
    l.seq = seq;
    l.act = PS_ACT_GELU;
    return l;
}

static void test_fused_attention_cost(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-a100-80g:1");
    ps_layer l = gelu_decoder(2048, 4096); /* 16 heads */
    const double s = 4096, q = 2048, mbs = 2;
    /* forward attention FLOPs per sample, model convention: 2 GEMMs x 2 s^2 q */
    const double fa = 4 * s * s * q, f = ps_layer_fwd_flops(&l);
    ps_strategy su = {.tp = 1, .dp = 1, .attn = PS_ATTN_UNFUSED}, sf = su;
    sf.attn = PS_ATTN_FUSED;
    ps_layer_cost u, fu;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &su, 0, &u), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &sf, 0, &fu), PS_OK);
    /* unfused: 3x the forward; fused: weights 3x, attention (s + 1) / (2 s) of it executed, forward + 2.5x backward */
    assert_rel(u.hw_flops, 3 * f * mbs, 1e-12);
    double exec_fa = fa * (s + 1) / (2 * s);
    assert_rel(fu.hw_flops, mbs * (3 * (f - fa) + 3.5 * exec_fa), 1e-12);
    /* memory: the score terms (no dropout here: 2as^2 of softmax output at 2 bytes) become 4as of statistics */
    assert_true(fabs(u.mem_act - fu.mem_act - mbs * (2.0 * 16 * s * s - 4.0 * 16 * s)) < 1e-3);
    /* auto on A100 (compute capability 8.0) is fused */
    ps_strategy sa = su;
    sa.attn = PS_ATTN_AUTO;
    ps_layer_cost au;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &sa, 0, &au), PS_OK);
    assert_true(au.fwd == fu.fwd && au.mem_act == fu.mem_act);
    /* the kernel's efficiency sets its time: the forward is compute-bound here, so halving the efficiency adds the
     * executed FLOPs at the peak once more */
    ps_cost_params p2 = p;
    p.attn_fwd_eff = 0.5;
    p2.attn_fwd_eff = 0.25;
    ps_layer_cost f1, f2;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &sf, 0, &f1), PS_OK);
    assert_int_equal(ps_cost_layer(&p2, &c, &l, PS_DTYPE_BF16, 2, &sf, 0, &f2), PS_OK);
    double peak = c.groups[0].gpu.bf16_flops;
    assert_rel(f2.comp_fwd - f1.comp_fwd, mbs * exec_fa / peak * (4 - 2), 1e-9);
    assert_true(f2.comp_bwd_b == f1.comp_bwd_b); /* the backward has its own efficiency */
    /* selective recomputation of a fused layer recomputes nothing and keeps what none keeps */
    ps_strategy ss = sf;
    ss.ckpt = PS_RECOMP_SELECTIVE;
    ps_layer_cost fs;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &ss, 0, &fs), PS_OK);
    assert_true(fs.recompute == 0 && fs.mem_act == f1.mem_act && fs.bwd_b == f1.bwd_b && fs.mem_temp == 0);
    ps_cluster_free(&c);
    /* V100 has no fused kernel: auto is unfused there, fused is refused */
    ps_cluster v = load_cluster("p3-8xlarge:1");
    assert_int_equal(ps_cost_attn(&v, 0, 4, PS_ATTN_AUTO), PS_ATTN_UNFUSED);
    assert_int_equal(ps_cost_layer(&p, &v, &l, PS_DTYPE_FP16, 2, &sf, 0, &fu), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "fused attention needs compute capability 8.0"));
    ps_error_clear();
    ps_cluster_free(&v);
}

/* torchtitan's per-op checkpointing (recompute op) on a GELU layer (linears q k v o fc1 fc2, multi-head: K = h):
 * the backward recomputes k, o and fc2, 2 s h (h + h + 4h) = 12 s h^2 FLOPs per sample, every elementwise operation
 * and nothing of the fused kernel; with TP 2 and SP it re-runs the two all-gathers. */
static void test_op_checkpointing_cost(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-a100-80g:1");
    ps_layer l = gelu_decoder(2048, 4096);
    const double s = 4096, h = 2048, mbs = 2;
    ps_strategy sn = {.tp = 1, .dp = 1, .attn = PS_ATTN_FUSED}, so = sn;
    so.ckpt = PS_RECOMP_OP;
    ps_layer_cost n, o;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &sn, 0, &n), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &so, 0, &o), PS_OK);
    assert_rel(o.hw_flops - n.hw_flops, mbs * 12 * s * h * h, 1e-12);
    assert_true(o.fwd == n.fwd && o.recompute > 0 && o.bwd_b == n.bwd_b + o.recompute);
    assert_rel(o.mem_act, mbs * ps_layer_act_bytes_attn(&l, PS_DTYPE_BF16, 1, false, PS_RECOMP_OP, PS_ATTN_FUSED),
               1e-12);
    assert_rel(o.mem_temp, n.mem_act - o.mem_act, 1e-12);
    /* cheaper than full recomputation, which repeats the whole forward */
    ps_strategy sf = sn;
    sf.ckpt = PS_RECOMP_FULL;
    ps_layer_cost f;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &sf, 0, &f), PS_OK);
    assert_true(o.recompute < f.recompute);
    /* TP 2 with SP: the two all-gathers of the forward again, priced as the collective model prices them */
    ps_strategy st = so;
    st.tp = 2;
    st.sp = true;
    ps_layer_cost t;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &st, 0, &t), PS_OK);
    ps_group g = {0, 2, 1};
    double ag = ps_coll_allgather(&p, &c, &g, t.tp_bytes);
    assert_rel(t.comm_bwd_b - t.tp_comm / 2, 2 * ag, 1e-9); /* the backward's own TP collectives are half of tp_comm */
    assert_true(t.recompute > 2 * ag);
    /* Oases' overlap schedules Megatron's recomputation: refused with op */
    ps_strategy sx = so;
    sx.tp = 2;
    sx.overlap = PS_OVERLAP_CROSS;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 2, &sx, 0, &t), PS_ERR_INPUT);
    ps_error_clear();
    ps_cluster_free(&c);
}

/* FP8 as Transformer Engine trains it: the blocks' linear GEMMs at the FP8 peak, everything else in BF16; memory:
 * BF16 weights + FP8 copies and transposes (2 bytes) + scaling state, linear inputs kept in FP8. By hand. */
static void test_fp8_recipe(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    p.gemm_tile_m = 0; /* flat GEMM model: the peak ratio shows exactly */
    ps_cluster c = load_cluster("dgx-h100:1");
    ps_layer l = gelu_decoder(4096, 2048); /* 32 heads */
    const double s = 2048, h = 4096, f = 16384, P = (double)ps_layer_params(&l);
    ps_strategy st = {.tp = 1, .dp = 1, .attn = PS_ATTN_FUSED};
    ps_layer_cost b, e;
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_BF16, 1, &st, 0, &b), PS_OK);
    assert_int_equal(ps_cost_layer(&p, &c, &l, PS_DTYPE_FP8, 1, &st, 0, &e), PS_OK);
    /* weights, gradients, optimizer: 2 + 2 + 12 bytes either way, plus 2 bytes of FP8 copies and the amax history
     * (4 GEMMs x 3 tensors x 1024 fp32) */
    assert_rel(e.mem_params - b.mem_params, 2 * P + 4 * 3 * 1024 * 4.0, 1e-12);
    assert_true(e.mem_grads == b.mem_grads && e.mem_optim == b.mem_optim);
    /* activations: the four linear inputs (QKV and FC1 inputs s x h, projection input s x q, FC2 input s x f) at 1
     * byte instead of 2 */
    assert_rel(b.mem_act - e.mem_act, s * h + s * h + s * h + s * f, 1e-12);
    /* the weight gradient GEMMs are all linear layers: FP8's peak, the launches apart (4 GEMMs) */
    double L = 4 * p.kernel_launch_s, r = c.groups[0].gpu.bf16_flops / c.groups[0].gpu.fp8_flops;
    assert_rel(e.comp_bwd_w - L, (b.comp_bwd_w - L) * r, 1e-9);
    /* attention stays BF16: its backward kernel time is in both bwd_b; FP8 is faster overall, not twice */
    assert_true(e.fwd < b.fwd && e.fwd > 0.5 * b.fwd);
    assert_true(e.hw_flops == b.hw_flops);
    ps_cluster_free(&c);
    /* a GPU without FP8 (A100) refuses it */
    ps_cluster a = load_cluster("dgx-a100-80g:1");
    assert_int_equal(ps_cost_layer(&p, &a, &l, PS_DTYPE_FP8, 1, &st, 0, &e), PS_ERR_INPUT);
    ps_error_clear();
    ps_cluster_free(&a);
}

/* Links of kind "measured" (--cluster costdb) carry the bandwidth a transfer reached: not derated again. */
static void test_measured_links(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_node_group g;
    memset(&g, 0, sizeof g);
    assert_int_equal(ps_gpu_lookup("a100-80g", &g.gpu), PS_OK);
    g.nodes = 2;
    g.gpus_per_node = 4;
    g.intra = (ps_link){.kind = "measured", .cls = PS_LINK_MEASURED, .bw_Bps = 100e9, .latency_s = 1e-6};
    g.inter = (ps_link){.kind = "measured", .cls = PS_LINK_MEASURED, .bw_Bps = 40e9, .latency_s = 5e-6};
    ps_cluster c;
    memset(&c, 0, sizeof c);
    c.groups = &g;
    c.n_groups = 1;
    assert_int_equal(ps_cluster_finish(&c, "measured"), PS_OK);
    double M = 1e9;
    ps_group in = {0, 4, 1};
    assert_rel(ps_coll_allgather(&p, &c, &in, M), 3.0 / 4 * M / 100e9 + 3 * 1e-6, 1e-12);
    assert_rel(ps_p2p(&p, &c, 0, 1, M), 1e-6 + M / 100e9, 1e-12);
    /* across the two nodes, one GPU of each: a quarter of the node's measured network */
    assert_rel(ps_p2p(&p, &c, 0, 4, M), 5e-6 + M / 40e9, 1e-12);
    ps_group across = {0, 2, 4};
    assert_rel(ps_coll_allgather(&p, &c, &across, M), 0.5 * M / (40e9 / 4) + 5e-6, 1e-12);
}

/* Collective names are parsed once (a database's rows) and the factor is a switch on the op. */
static void test_coll_ops(void **state)
{
    (void)state;
    for (int i = 0; i < PS_COLL_N_OPS; i++) {
        ps_coll_op op = PS_COLL_N_OPS;
        assert_true(ps_coll_op_parse(ps_coll_op_name((ps_coll_op)i), &op));
        assert_int_equal(op, i);
    }
    ps_coll_op op = PS_COLL_SENDRECV;
    assert_false(ps_coll_op_parse("broadcast", &op));
    assert_false(ps_coll_op_parse("AllReduce", &op));
    assert_int_equal(op, PS_COLL_SENDRECV);
    assert_true(ps_coll_busbw_factor(PS_COLL_ALLREDUCE, 4) == 1.5);
    assert_true(ps_coll_busbw_factor(PS_COLL_ALLGATHER, 4) == 0.75);
    assert_true(ps_coll_busbw_factor(PS_COLL_REDUCESCATTER, 4) == 0.75);
    assert_true(ps_coll_busbw_factor(PS_COLL_ALLTOALL, 4) == 0.75);
    assert_true(ps_coll_busbw_factor(PS_COLL_SENDRECV, 2) == 1);
    assert_true(ps_coll_busbw_factor(PS_COLL_ALLREDUCE, 0) == 0);
    assert_true(ps_coll_busbw_factor(PS_COLL_N_OPS, 4) == 0);
}

static void test_zero_memory(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-a100-80g:1");
    ps_model m = load_model("gpt3-1.3b");
    const ps_layer *l = &m.layers[1];
    double P = (double)ps_layer_params(l);
    ps_layer_cost lc;
    /* bf16 mixed-precision Adam: 2 + 2 + 12 = 16 bytes per parameter without ZeRO */
    ps_strategy s = {.tp = 1, .dp = 8, .zero = 0};
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_rel(lc.mem_params + lc.mem_grads + lc.mem_optim, 16 * P, 1e-12);
    s.zero = 1;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_rel(lc.mem_params + lc.mem_grads + lc.mem_optim, 2 * P + 2 * P + 12 * P / 8, 1e-12);
    s.zero = 2;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_rel(lc.mem_params + lc.mem_grads + lc.mem_optim, 2 * P + (2 * P + 12 * P) / 8, 1e-12);
    s.zero = 3;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 1, &s, 0, &lc), PS_OK);
    assert_rel(lc.mem_params + lc.mem_grads + lc.mem_optim, 16 * P / 8, 1e-12);
    /* weights gathered for the forward and again for the backward, gradients reduce-scattered, every micro-batch */
    ps_group g8 = {0, 8, 1};
    assert_rel(lc.zero_comm,
               2 * ps_coll_allgather(&p, &c, &g8, 2 * P) + ps_coll_reducescatter(&p, &c, &g8, P * p.grad_reduce_bytes),
               1e-12);
    assert_true(lc.dp_sync == 0); /* ZeRO-3 reduces every micro-batch instead */
    /* fp32 training: 4 + 4 + 8 */
    s.zero = 0;
    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_FP32, 1, &s, 0, &lc), PS_OK);
    assert_rel(lc.mem_params + lc.mem_grads + lc.mem_optim, 16 * P, 1e-12);
    /* DP gradient all-reduce of fp32 gradients over the 8 GPUs */
    ps_group g = {0, 8, 1};
    assert_rel(lc.dp_sync, ps_coll_allreduce(&p, &c, &g, P * p.grad_reduce_bytes), 1e-12);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

static void test_monotone(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-h100:1");
    const char *models[] = {"gpt3-13b", "llama3-8b", "t5-512-4-32", "bert-huge-32"};
    for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
        ps_model m = load_model(models[mi]);
        for (int64_t i = 0; i < m.n_layers; i++) {
            const ps_layer *l = &m.layers[i];
            double prev_params = INFINITY;
            for (int tp = 1; tp <= 8; tp *= 2) {
                if (l->heads && l->heads % tp) break;
                ps_strategy s = {.tp = tp, .dp = 8 / tp};
                ps_layer_cost lc;
                assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 2, &s, 0, &lc), PS_OK);
                assert_true(lc.mem_params <= prev_params * (1 + 1e-12));
                prev_params = lc.mem_params;
                double prev_act = INFINITY, prev_time = 0;
                for (int rc = PS_RECOMP_NONE; rc <= PS_RECOMP_FULL; rc++) {
                    s.ckpt = (ps_recompute)rc;
                    assert_int_equal(ps_cost_layer(&p, &c, l, PS_DTYPE_BF16, 2, &s, 0, &lc), PS_OK);
                    assert_true(lc.mem_act <= prev_act * (1 + 1e-12));
                    /* recomputation costs time, never saves it */
                    double t = lc.fwd + lc.bwd_b + lc.bwd_w;
                    assert_true(t >= prev_time * (1 - 1e-12));
                    prev_act = lc.mem_act;
                    prev_time = t;
                }
            }
        }
        ps_model_free(&m);
    }
    ps_cluster_free(&c);
}

static void expect_plan_error(const ps_plan *plan, const ps_model *m, const ps_cluster *c, const char *needle)
{
    assert_int_equal(ps_plan_check(plan, m, c), PS_ERR_INPUT);
    if (!strstr(ps_error_message(), needle)) fail_msg("message '%s' lacks '%s'", ps_error_message(), needle);
}

static void test_plan_rules(void **state)
{
    (void)state;
    ps_cluster c = load_cluster("dgx-a100-80g:4");
    ps_model m = load_model("gpt3-65b");
    ps_plan plan;
    ps_strategy s = {.tp = 8, .dp = 2};
    assert_int_equal(ps_plan_uniform(&m, 64, 1, 2, 1, "1f1b", &s, &plan), PS_OK);
    /* gpt3 vocabulary 50257 does not split over 8 */
    expect_plan_error(&plan, &m, &c, "vocabulary 50257 is not divisible by tp 8");
    ps_plan_free(&plan);
    ps_model_opts o;
    ps_model_opts_init(&o);
    o.vocab_pad = 1024;
    ps_model_free(&m);
    assert_int_equal(ps_model_load("gpt3-65b", &o, &m), PS_OK);
    assert_int_equal(ps_plan_uniform(&m, 64, 1, 2, 1, "1f1b", &s, &plan), PS_OK);
    assert_int_equal(ps_plan_check(&plan, &m, &c), PS_OK);
    plan.gbs = 63;
    expect_plan_error(&plan, &m, &c, "global batch 63 is not a multiple of micro-batch 1 x dp 2");
    plan.gbs = 64;
    plan.pp = 4; /* cuts no longer match, but the GPU count is checked on the degrees */
    ps_plan_free(&plan);
    s.tp = 3;
    s.dp = 1;
    assert_int_equal(ps_plan_uniform(&m, 64, 1, 2, 1, "1f1b", &s, &plan), PS_OK);
    expect_plan_error(&plan, &m, &c, "tp 3 x dp 1 x pp 2 = 6 GPUs, but cluster dgx-a100-80g:4 has 32");
    ps_plan_free(&plan);
    s.tp = 16; /* 64 heads / 16 fine, but vocab padded to 1024 also; make heads fail with 48 GPUs later */
    s.dp = 1;
    assert_int_equal(ps_plan_uniform(&m, 64, 1, 2, 1, "nosuch", &s, &plan), PS_OK);
    expect_plan_error(&plan, &m, &c, "unknown pipeline schedule 'nosuch'");
    ps_plan_free(&plan);
    ps_model_free(&m);
    /* heads not divisible: gpt3-13b has 40 heads */
    m = load_model("gpt3-13b");
    s.tp = 16;
    s.dp = 1;
    ps_model_free(&m);
    assert_int_equal(ps_model_load("gpt3-13b", &o, &m), PS_OK);
    assert_int_equal(ps_plan_uniform(&m, 64, 1, 2, 1, "1f1b", &s, &plan), PS_OK);
    expect_plan_error(&plan, &m, &c, "40 attention heads are not divisible by tp 16");
    ps_plan_free(&plan);
    /* more stages than transformer layers */
    assert_int_equal(ps_plan_uniform(&m, 64, 1, 64, 1, "1f1b", &s, &plan), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "fewer than the 64 pipeline stages"));
    ps_model_free(&m);
    ps_cluster_free(&c);
}

static void test_plan_prediction(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-a100-80g:1");
    ps_model m = load_model("gpt3-1.3b");
    ps_plan plan;
    ps_prediction r;
    /* pure data parallelism: no pipeline, no bubble */
    ps_strategy s = {.tp = 1, .dp = 8};
    assert_int_equal(ps_plan_uniform(&m, 64, 2, 1, 1, "1f1b", &s, &plan), PS_OK);
    assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &r), PS_OK);
    assert_true(r.iter_time_s > 0 && r.mfu > 0.05 && r.mfu < 1);
    assert_true(r.bubble_frac < 1e-12);
    assert_true(r.fits);
    assert_rel(r.samples_per_s, 64 / r.iter_time_s, 1e-12);
    assert_rel(r.tokens_per_s, r.samples_per_s * 2048, 1e-12);
    double t_dp = r.iter_time_s;
    ps_prediction_free(&r);
    ps_plan_free(&plan);
    /* 4 stages, 16 micro-batches, 1F1B: the bubble is close to the closed form (d-1)/(n+d-1) (stages are not
     * exactly equal: the embedding and head sit on the end stages) */
    s.dp = 2;
    assert_int_equal(ps_plan_uniform(&m, 64, 2, 4, 1, "1f1b", &s, &plan), PS_OK);
    assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &r), PS_OK);
    assert_int_equal(r.n_stages, 4);
    assert_true(r.bubble_frac > 0.5 * 3.0 / 19 && r.bubble_frac < 2.0 * 3.0 / 19);
    /* 1F1B holds d - i micro-batches on stage i */
    for (int i = 0; i < 4; i++) assert_int_equal(r.stages[i].in_flight, 4 - i);
    assert_true(r.iter_time_s > t_dp * 0.5);
    ps_prediction_free(&r);
    /* with full recomputation the activation peak drops and the time grows */
    ps_plan_free(&plan);
    s.ckpt = PS_RECOMP_FULL;
    assert_int_equal(ps_plan_uniform(&m, 64, 2, 4, 1, "1f1b", &s, &plan), PS_OK);
    ps_prediction r2;
    assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &r2), PS_OK);
    assert_true(r2.recompute_s > 0);
    ps_prediction_free(&r2);
    ps_plan_free(&plan);
    /* a model that cannot fit: gpt3-175b on one node with pure DP */
    ps_model big = load_model("gpt3-175b");
    s.ckpt = PS_RECOMP_NONE;
    s.dp = 8;
    assert_int_equal(ps_plan_uniform(&big, 8, 1, 1, 1, "1f1b", &s, &plan), PS_OK);
    assert_int_equal(ps_cost_plan(&p, &big, &c, &plan, &r), PS_OK);
    assert_false(r.fits);
    assert_true(r.stages[0].mem_peak > r.stages[0].mem_capacity);
    ps_prediction_free(&r);
    ps_plan_free(&plan);
    ps_model_free(&big);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

/* Field by field (struct padding is not part of a prediction), exactly. */
static void assert_same_prediction(const ps_prediction *a, const ps_prediction *b)
{
#define SAME(f) assert_true(a->f == b->f)
    SAME(iter_time_s), SAME(samples_per_s), SAME(tokens_per_s), SAME(tflops_per_gpu), SAME(hw_tflops_per_gpu);
    SAME(mfu), SAME(bubble_frac), SAME(compute_s), SAME(comm_exposed_s), SAME(bubble_s), SAME(recompute_s);
    SAME(fits), SAME(n_stages);
    for (int i = 0; i < a->n_stages; i++) {
        SAME(stages[i].fwd), SAME(stages[i].bwd_b), SAME(stages[i].bwd_w), SAME(stages[i].p2p);
        SAME(stages[i].dp_sync_exposed), SAME(stages[i].mem_static), SAME(stages[i].mem_act_per_mb);
        SAME(stages[i].mem_temp), SAME(stages[i].mem_peak), SAME(stages[i].mem_capacity), SAME(stages[i].in_flight);
        SAME(stages[i].first_gpu), SAME(stages[i].n_gpus);
    }
#undef SAME
}

/* A caller's schedule workspace gives the prediction of a private one, whether it already holds the plan's
 * schedule (the search's case: the build is skipped), another one, or nothing. */
static void test_plan_workspace(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_cluster c = load_cluster("dgx-a100-80g:1");
    ps_model m = load_model("gpt3-1.3b");
    ps_sched *ws;
    assert_int_equal(ps_sched_create(&ws), PS_OK);
    const struct { const char *kind; int pp, vpp; } cases[] = {
        {"1f1b", 4, 1}, {"zb-h2", 4, 1}, {"interleaved", 2, 2}, {"v-zb", 4, 2}, {"v-min", 2, 2}, {"1f1b", 1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ps_strategy s = {.tp = 1, .dp = 8 / cases[i].pp};
        ps_plan plan;
        assert_int_equal(ps_plan_uniform(&m, 64, 2, cases[i].pp, cases[i].vpp, cases[i].kind, &s, &plan), PS_OK);
        ps_prediction ref, got;
        assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &ref), PS_OK);
        /* ws holds the previous case's schedule (or nothing): built here */
        assert_int_equal(ps_cost_plan_ws(&p, &m, &c, &plan, ws, &got), PS_OK);
        assert_same_prediction(&ref, &got);
        ps_prediction_free(&got);
        assert_string_equal(ps_sched_kind(ws), cases[i].kind);
        assert_int_equal(ps_sched_micro_batches(ws), (int)ps_plan_micro_batches(&plan));
        /* ws now holds this schedule: reused */
        assert_int_equal(ps_cost_plan_ws(&p, &m, &c, &plan, ws, &got), PS_OK);
        assert_same_prediction(&ref, &got);
        ps_prediction_free(&got);
        /* the same kind and devices with other micro-batches: rebuilt */
        ps_plan_free(&plan);
        assert_int_equal(ps_plan_uniform(&m, 128, 2, cases[i].pp, cases[i].vpp, cases[i].kind, &s, &plan), PS_OK);
        ps_prediction_free(&ref);
        assert_int_equal(ps_cost_plan(&p, &m, &c, &plan, &ref), PS_OK);
        assert_int_equal(ps_cost_plan_ws(&p, &m, &c, &plan, ws, &got), PS_OK);
        assert_same_prediction(&ref, &got);
        ps_prediction_free(&got);
        ps_prediction_free(&ref);
        ps_plan_free(&plan);
    }
    /* a plan the schedule refuses (interleaved: micro-batches not a multiple of pp) fails with ws as without */
    ps_strategy s = {.tp = 1, .dp = 2};
    ps_plan plan;
    assert_int_equal(ps_plan_uniform(&m, 12, 2, 4, 2, "interleaved", &s, &plan), PS_OK);
    ps_prediction r;
    assert_int_equal(ps_cost_plan_ws(&p, &m, &c, &plan, ws, &r), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "multiple of the devices d (n=3, d=4)"));
    ps_plan_free(&plan);
    ps_sched_destroy(ws);
    ps_model_free(&m);
    ps_cluster_free(&c);
}

static void test_params(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    assert_int_equal(ps_cost_params_set(&p, "overlap_slowdown=1.5"), PS_OK);
    assert_true(p.overlap_slowdown == 1.5);
    assert_int_equal(ps_cost_params_set(&p, "overlap_slowdown=0.5"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "overlap_slowdown must be a number in [1, 3]"));
    assert_int_equal(ps_cost_params_set(&p, "nonsense=1"), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "unknown cost parameter 'nonsense' (known: gemm_eff,"));
    assert_int_equal(ps_cost_params_set(&p, "gemm_eff"), PS_ERR_INPUT);
    /* every constant has a unit and a source, and a range that is exactly what ps_cost_params_set accepts */
    double v;
    const char *unit, *src;
    int n = 0;
    for (const char *name; (name = ps_cost_param_name(n, &v, &unit, &src, &p)) != NULL; n++) {
        assert_true(strlen(unit) > 0);
        assert_true(strlen(src) > 20);
        double lo = -1, hi = -1;
        assert_true(ps_cost_param_range(name, &lo, &hi));
        assert_true(lo <= v && v <= hi); /* the default too */
        char a[96];
        ps_cost_params q;
        ps_cost_params_default(&q);
        snprintf(a, sizeof a, "%s=%.17g", name, lo);
        assert_int_equal(ps_cost_params_set(&q, a), PS_OK);
        snprintf(a, sizeof a, "%s=%.17g", name, hi);
        assert_int_equal(ps_cost_params_set(&q, a), PS_OK);
        snprintf(a, sizeof a, "%s=%.17g", name, hi + fmax(1e-9, 1e-9 * hi));
        assert_int_equal(ps_cost_params_set(&q, a), PS_ERR_INPUT);
        snprintf(a, sizeof a, "%s=%.17g", name, lo - fmax(1e-9, 1e-9 * lo));
        assert_int_equal(ps_cost_params_set(&q, a), PS_ERR_INPUT);
    }
    assert_true(n >= 10);
    /* the bounds the cost database clamps to: the fitted coefficients and the measured overlap slowdown */
    double lo = -1, hi = -1;
    assert_true(ps_cost_param_range("comm_scale", &lo, &hi) && lo == 0.05 && hi == 20);
    assert_true(ps_cost_param_range("overlap_slowdown", &lo, &hi) && lo == 1 && hi == 3);
    lo = hi = -1;
    assert_false(ps_cost_param_range("nonsense", &lo, &hi));
    assert_true(lo == -1 && hi == -1);
}

/* GEMM efficiency by shape (ps_cost_gemm_time): tile and wave quantization over an H100's 132 SMs, hand-computed. */
static double roofline(const ps_cost_params *p, const ps_gpu *g, double W, double m, double n, double k, double count)
{
    double peak = g->bf16_flops * ps_cost_gemm_eff(p, g), bytes = 2 * (m * k + k * n + m * n);
    return fmax(W / peak, count * bytes / (g->hbm_Bps * p->hbm_eff)) + count * p->kernel_launch_s;
}

/* The GEMM efficiency a GPU runs at: the measured catalog value (H100 0.69, H200 0.68: bench_gemm_shapes), 0.80
 * for a GPU without one, and --cost-param gemm_eff over both; a GEMM's time scales with its inverse. */
static void test_gemm_eff_by_gpu(void **state)
{
    (void)state;
    ps_cost_params p;
    ps_cost_params_default(&p);
    ps_gpu h100, h200, a100;
    assert_int_equal(ps_gpu_lookup("h100", &h100), PS_OK);
    assert_int_equal(ps_gpu_lookup("h200", &h200), PS_OK);
    assert_int_equal(ps_gpu_lookup("a100-80g", &a100), PS_OK);
    assert_true(p.gemm_eff == 0);
    assert_true(ps_cost_gemm_eff(&p, &h100) == 0.69);
    assert_true(ps_cost_gemm_eff(&p, &h200) == 0.68);
    assert_true(ps_cost_gemm_eff(&p, &a100) == 0.80);
    double t_cat = ps_cost_gemm_time(&p, &h100, PS_DTYPE_BF16, 8192, 8192, 8192, 1);
    assert_int_equal(ps_cost_params_set(&p, "gemm_eff=0.5"), PS_OK);
    assert_true(ps_cost_gemm_eff(&p, &h100) == 0.5 && ps_cost_gemm_eff(&p, &a100) == 0.5);
    double t_half = ps_cost_gemm_time(&p, &h100, PS_DTYPE_BF16, 8192, 8192, 8192, 1);
    /* 8192^3 is math-bound on 132 SMs in whole waves: time minus the launch goes as 1 / efficiency */
    assert_rel(t_half - p.kernel_launch_s, (t_cat - p.kernel_launch_s) * 0.69 / 0.5, 1e-12);
}

static void test_gemm_shape(void **state)
{
    (void)state;
    ps_cost_params p, off;
    ps_cost_params_default(&p);
    assert_true(p.gemm_tile_m == 128 && p.gemm_tile_n == 128);
    off = p;
    off.gemm_tile_m = 0;
    ps_gpu g, g0;
    assert_int_equal(ps_gpu_lookup("h100", &g), PS_OK);
    assert_int_equal(g.sm_count, 132);
    g0 = g;
    g0.sm_count = 0;
    const double k = 8192, T = 128.0 * 128.0;

    /* exactly one full wave: 12 x 11 = 132 tiles of 128 x 128, nothing padded: the old formula */
    double m = 12 * 128, n = 11 * 128;
    assert_rel(ps_cost_gemm_time(&p, &g, PS_DTYPE_BF16, m, n, k, 1), roofline(&p, &g, 2 * m * n * k, m, n, k, 1),
               1e-12);
    assert_rel(ps_cost_gemm_time(&p, &g, PS_DTYPE_BF16, m, n, k, 1),
               ps_cost_gemm_time(&off, &g, PS_DTYPE_BF16, m, n, k, 1), 1e-12);

    /* sms + 1 = 133 tiles (7 x 19): two waves of 132 tiles, nearly twice the compute of one */
    m = 7 * 128;
    n = 19 * 128;
    double two = ps_cost_gemm_time(&p, &g, PS_DTYPE_BF16, m, n, k, 1);
    double flat = ps_cost_gemm_time(&off, &g, PS_DTYPE_BF16, m, n, k, 1);
    assert_rel(two, roofline(&p, &g, 2 * 132 * 2 * T * k, m, n, k, 1), 1e-12);
    assert_rel(two - p.kernel_launch_s, (flat - p.kernel_launch_s) * 264.0 / 133.0, 1e-12); /* compute-bound here */
    assert_rel(ps_cost_gemm_work(&p, 132, m, n, k, 1), 2 * 132 * 2 * T * k, 1e-15);

    /* tile quantization: one more column pads a whole column of tiles (7 x 12 = 84 tiles, still one wave) */
    assert_rel(ps_cost_gemm_work(&p, 132, 7 * 128, 11 * 128 + 1, k, 1), 132 * 2 * T * k, 1e-15);

    /* no SM count (B200 in the catalog), or the model switched off: the old formula exactly, bit for bit */
    double old = 2 * (7 * 128.0 + 1) * (19 * 128.0 + 1) * k;
    ps_gpu b200;
    assert_int_equal(ps_gpu_lookup("b200", &b200), PS_OK);
    assert_int_equal(b200.sm_count, 0);
    for (int i = 0; i < 2; i++) {
        const ps_cost_params *pp = i ? &off : &p;
        const ps_gpu *gg = i ? &g : &g0;
        double mm = 7 * 128.0 + 1, nn = 19 * 128.0 + 1, cc = 3;
        double per = fmax(old / (gg->bf16_flops * ps_cost_gemm_eff(pp, gg)),
                          2 * (mm * k + k * nn + mm * nn) / (gg->hbm_Bps * pp->hbm_eff));
        assert_true(ps_cost_gemm_time(pp, gg, PS_DTYPE_BF16, mm, nn, k, cc) == cc * (per + pp->kernel_launch_s));
    }
    ps_cost_params offn = p;
    offn.gemm_tile_n = 0;
    assert_true(ps_cost_gemm_time(&offn, &g, PS_DTYPE_BF16, 1000, 3000, k, 2) ==
                ps_cost_gemm_time(&p, &g0, PS_DTYPE_BF16, 1000, 3000, k, 2));

    /* batched: a call's GEMMs share the waves; 132 one-tile GEMMs fill one wave, the 133rd starts a second */
    assert_rel(ps_cost_gemm_work(&p, 132, 128, 128, k, 132), 2 * 128.0 * 128 * k * 132, 1e-15);
    assert_rel(ps_cost_gemm_work(&p, 132, 128, 128, k, 133), 2 * 132 * 2 * T * k, 1e-15);

    /* sanity: never faster than without the model; never faster for a bigger GEMM in any dimension */
    double prev = 0;
    for (double nn = 1; nn <= 4096; nn += 7) {
        double t = ps_cost_gemm_time(&p, &g, PS_DTYPE_BF16, 4096, nn, 4096, 1);
        assert_true(t >= prev);
        assert_true(t >= ps_cost_gemm_time(&off, &g, PS_DTYPE_BF16, 4096, nn, 4096, 1) * (1 - 1e-12));
        prev = t;
    }
    prev = 0;
    for (double c = 1; c <= 300; c++) {
        double t = ps_cost_gemm_time(&p, &g, PS_DTYPE_BF16, 2048, 2048, 128, c);
        assert_true(t >= prev);
        prev = t;
    }
    /* large GEMMs lose little: 8192^2 has 4096 tiles, 32 waves of 132 (4224 slots), 3% over the useful work */
    assert_rel(ps_cost_gemm_work(&p, 132, 8192, 8192, k, 1) / (2 * 8192.0 * 8192 * k), 4224.0 / 4096.0, 1e-12);

    /* named constants: listed, settable, 0 allowed (off), negative refused */
    bool seen = false;
    double v;
    for (int i = 0; ps_cost_param_name(i, &v, NULL, NULL, &p); i++)
        if (strcmp(ps_cost_param_name(i, &v, NULL, NULL, &p), "gemm_tile_n") == 0) seen = v == 128;
    assert_true(seen);
    assert_int_equal(ps_cost_params_set(&p, "gemm_tile_m=256"), PS_OK);
    assert_true(p.gemm_tile_m == 256);
    assert_int_equal(ps_cost_params_set(&p, "gemm_tile_m=0"), PS_OK);
    assert_int_equal(ps_cost_params_set(&p, "gemm_tile_n=-1"), PS_ERR_INPUT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_allreduce), cmocka_unit_test(test_placement),
        cmocka_unit_test(test_peaks),          cmocka_unit_test(test_measured_links),
        cmocka_unit_test(test_coll_ops),        cmocka_unit_test(test_nvlink_domain_allreduce),
        cmocka_unit_test(test_zero_memory),
        cmocka_unit_test(test_monotone),       cmocka_unit_test(test_plan_rules),
        cmocka_unit_test(test_plan_prediction), cmocka_unit_test(test_plan_workspace),
        cmocka_unit_test(test_params),          cmocka_unit_test(test_fused_attention_cost),
        cmocka_unit_test(test_op_checkpointing_cost),
        cmocka_unit_test(test_gemm_eff_by_gpu),
        cmocka_unit_test(test_gemm_shape),       cmocka_unit_test(test_fp8_recipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of hw/: the GPU catalog, every cluster preset, cluster.json (good files and one bad file per rule, each
 * error naming the file and the field), placement and link queries, and spec parsing. No MPI_Init: loading anything
 * but "auto" must work without MPI. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "ps_hw.h"

#define GiB (1024.0 * 1024.0 * 1024.0)

static void assert_near(double got, double want, double rel)
{
    if (!(fabs(got - want) <= rel * fabs(want))) fail_msg("got %.6g, want %.6g (+-%.2g%%)", got, want, rel * 100);
}

static void assert_msg_has(const char *needle)
{
    if (!strstr(ps_error_message(), needle)) fail_msg("message lacks '%s': %s", needle, ps_error_message());
}

/* ---- catalog ----------------------------------------------------------------------------------------------------- */

static void test_catalog_figures(void **state)
{
    (void)state;
    ps_gpu g;
    assert_int_equal(ps_gpu_lookup("a100-40g", &g), PS_OK);
    assert_near(g.fp16_flops, 312e12, 1e-9);
    assert_near(g.bf16_flops, 312e12, 1e-9);
    assert_near(g.tf32_flops, 156e12, 1e-9);
    assert_near(g.fp32_flops, 19.5e12, 1e-9);
    assert_near(g.hbm_Bps, 1555e9, 1e-9);
    assert_true(g.mem_bytes == 40 * GiB);
    assert_true(g.fp8_flops == 0);

    assert_int_equal(ps_gpu_lookup("a100-80g", &g), PS_OK);
    assert_near(g.hbm_Bps, 2039e9, 1e-9);
    assert_true(g.mem_bytes == 80 * GiB);
    assert_int_equal(ps_gpu_lookup("a800-80g", &g), PS_OK);
    assert_near(g.bf16_flops, 312e12, 1e-9);
    assert_near(g.hbm_Bps, 2039e9, 1e-9);

    assert_int_equal(ps_gpu_lookup("h100", &g), PS_OK);
    assert_near(g.bf16_flops, 989e12, 0.01);
    assert_near(g.fp16_flops, 989e12, 0.01);
    assert_near(g.fp8_flops, 1979e12, 0.01);
    assert_near(g.tf32_flops, 494e12, 0.01);
    assert_near(g.fp32_flops, 67e12, 0.01);
    assert_near(g.hbm_Bps, 3.35e12, 1e-9);
    assert_true(g.mem_bytes == 80 * GiB);

    assert_int_equal(ps_gpu_lookup("h200", &g), PS_OK);
    assert_near(g.bf16_flops, 989e12, 0.01);
    assert_near(g.fp8_flops, 1979e12, 0.01);
    assert_near(g.hbm_Bps, 4.8e12, 1e-9);
    assert_true(g.mem_bytes == 141 * GiB);
    assert_true(g.fp4_flops == 0); /* FP4 tensor cores came with Blackwell */

    /* Blackwell, dense (sparse halved): HGX B200's 8-GPU totals (FP4 144, FP8 72, FP16/BF16 36, TF32 18 PF sparse;
     * FP32 600 TF) / 8; GB200 NVL72's rack totals / 72 (FP4 1440, FP8 720 PF sparse) and its per-GPU column */
    static const struct {
        const char *key, *marketing, *per;
        double fp4, fp8, bf16, tf32, fp32, hbm, mem_gib;
    } bw[] = {
        {"b200", "NVIDIA B200", "/ 8", 9000e12, 4500e12, 2250e12, 1125e12, 75e12, 7.7e12, 180},
        {"gb200", "NVIDIA GB200", "/ 72", 10000e12, 5000e12, 2500e12, 1250e12, 80e12, 8e12, 186},
    };
    for (size_t i = 0; i < sizeof bw / sizeof bw[0]; i++) {
        assert_int_equal(ps_gpu_lookup(bw[i].key, &g), PS_OK);
        assert_string_equal(g.marketing, bw[i].marketing);
        assert_near(g.fp4_flops, bw[i].fp4, 1e-9);
        assert_near(g.fp8_flops, bw[i].fp8, 1e-9);
        assert_near(g.bf16_flops, bw[i].bf16, 1e-9);
        assert_near(g.fp16_flops, bw[i].bf16, 1e-9);
        assert_near(g.tf32_flops, bw[i].tf32, 1e-9);
        assert_near(g.fp32_flops, bw[i].fp32, 1e-9);
        assert_near(g.hbm_Bps, bw[i].hbm, 1e-9);
        assert_true(g.mem_bytes == bw[i].mem_gib * GiB);
        assert_non_null(strstr(g.source, bw[i].per));
    }

    for (int i = 0; i < 2; i++) {
        assert_int_equal(ps_gpu_lookup(i ? "v100-32g" : "v100-16g", &g), PS_OK);
        assert_near(g.fp16_flops, 125e12, 1e-9);
        assert_near(g.fp32_flops, 15.7e12, 1e-9);
        assert_near(g.hbm_Bps, 900e9, 1e-9);
        assert_true(g.bf16_flops == 0 && g.tf32_flops == 0);
        assert_true(g.mem_bytes == (i ? 32 : 16) * GiB);
    }
    assert_int_equal(ps_gpu_lookup("t4", &g), PS_OK);
    assert_near(g.fp16_flops, 65e12, 1e-9);
    assert_near(g.fp32_flops, 8.1e12, 1e-9);
    assert_near(g.hbm_Bps, 320e9, 1e-9);
    assert_true(g.mem_bytes == 16 * GiB);
    assert_int_equal(ps_gpu_lookup("rtx3090", &g), PS_OK);
    assert_near(g.fp16_flops, 71e12, 1e-9);
    assert_near(g.bf16_flops, 71e12, 1e-9);
    assert_near(g.fp32_flops, 35.6e12, 1e-9);
    assert_near(g.hbm_Bps, 936e9, 1e-9);
    assert_true(g.mem_bytes == 24 * GiB);
    assert_int_equal(ps_gpu_lookup("rtx-titan", &g), PS_OK);
    assert_near(g.fp16_flops, 130e12, 1e-9);
    assert_near(g.fp32_flops, 16.3e12, 1e-9);
    assert_near(g.hbm_Bps, 672e9, 1e-9);
    assert_true(g.mem_bytes == 24 * GiB);
    assert_int_equal(ps_gpu_lookup("l4", &g), PS_OK);
    assert_near(g.fp16_flops, 121e12, 0.01);
    assert_near(g.fp8_flops, 242e12, 0.01);
    assert_near(g.fp32_flops, 30.3e12, 1e-9);
    assert_near(g.hbm_Bps, 300e9, 1e-9);
}

static void test_catalog_invariants(void **state)
{
    (void)state;
    int n = ps_gpu_catalog_count();
    assert_true(n >= 13);
    assert_null(ps_gpu_catalog_at(-1));
    assert_null(ps_gpu_catalog_at(n));
    for (int i = 0; i < n; i++) {
        const ps_gpu *g = ps_gpu_catalog_at(i);
        assert_non_null(g);
        assert_true(strlen(g->name) > 0 && strlen(g->source) > 10 && strlen(g->marketing) > 0);
        assert_true(g->mem_bytes > 0 && g->hbm_Bps > 0 && g->fp32_flops > 0);
        /* tensor cores beat the FP32 units on every catalog GPU */
        assert_true(g->fp16_flops > g->fp32_flops);
        assert_true(g->bf16_flops == 0 || g->bf16_flops == g->fp16_flops);
        /* FP4 only where FP8 is, at twice its rate on every part so far (Blackwell) */
        assert_true(g->fp4_flops == 0 || (g->fp8_flops > 0 && g->fp4_flops == 2 * g->fp8_flops));
        assert_true(strlen(g->source) < sizeof g->source - 1); /* not cut by the char[128] */
        ps_gpu copy;
        assert_int_equal(ps_gpu_lookup(g->name, &copy), PS_OK);
        assert_string_equal(copy.name, g->name);
        for (int j = 0; j < i; j++) assert_string_not_equal(ps_gpu_catalog_at(j)->name, g->name);
    }
}

static void test_catalog_unknown(void **state)
{
    (void)state;
    ps_gpu g;
    ps_error_clear();
    assert_int_equal(ps_gpu_lookup("a100-80gb", &g), PS_ERR_INPUT);
    assert_msg_has("'a100-80gb'");
    assert_msg_has("did you mean 'a100-80g'?");
    assert_msg_has("h100");
    assert_msg_has("rtx-titan");
    assert_int_equal(ps_gpu_lookup("tpu-v5", &g), PS_ERR_INPUT);
    assert_msg_has("known GPUs");
    assert_int_equal(ps_gpu_lookup(NULL, &g), PS_ERR_INPUT);
}

static void test_peak_flops(void **state)
{
    (void)state;
    ps_gpu g;
    assert_int_equal(ps_gpu_lookup("v100-16g", &g), PS_OK);
    assert_near(ps_gpu_peak_flops(&g, "fp16"), 125e12, 1e-9);
    assert_true(ps_gpu_peak_flops(&g, "bf16") == 0);
    assert_true(ps_gpu_peak_flops(&g, "fp8") == 0);
    assert_near(ps_gpu_peak_flops(&g, "fp32"), 15.7e12, 1e-9);
    assert_int_equal(ps_gpu_lookup("h100", &g), PS_OK);
    assert_near(ps_gpu_peak_flops(&g, "bf16"), 989.4e12, 1e-9);
    assert_near(ps_gpu_peak_flops(&g, "BF16"), 989.4e12, 1e-9);
    assert_near(ps_gpu_peak_flops(&g, "fp8"), 1978.9e12, 1e-9);
    assert_near(ps_gpu_peak_flops(&g, "tf32"), 494.7e12, 1e-9);
    assert_true(ps_gpu_peak_flops(&g, "int4") == 0);
    /* FP4 is catalog data, not a dtype a plan trains in: no peak by that name even where the GPU has one */
    assert_int_equal(ps_gpu_lookup("b200", &g), PS_OK);
    assert_true(g.fp4_flops > 0);
    assert_true(ps_gpu_peak_flops(&g, "fp4") == 0);
    assert_near(ps_gpu_peak_flops(&g, "fp8"), 4500e12, 1e-9);
    assert_near(ps_gpu_peak(&g, PS_GPU_BF16), 2250e12, 1e-9);
    assert_true(ps_gpu_peak_flops(NULL, "fp16") == 0);
    assert_true(ps_gpu_peak_flops(&g, NULL) == 0);
}

static void test_match_device(void **state)
{
    (void)state;
    static const struct {
        const char *dev, *key;
    } cases[] = {
        {"NVIDIA A100-SXM4-80GB", "a100-80g"},
        {"NVIDIA A100-SXM4-40GB", "a100-40g"},
        {"NVIDIA A800-SXM4-80GB", "a800-80g"},
        {"NVIDIA H100 80GB HBM3", "h100"},
        {"NVIDIA H200", "h200"},
        {"Tesla V100-SXM2-16GB", "v100-16g"},
        {"Tesla V100-SXM2-32GB", "v100-32g"},
        {"Tesla T4", "t4"},
        {"NVIDIA GeForce RTX 3090", "rtx3090"},
        {"NVIDIA TITAN RTX", "rtx-titan"},
        {"NVIDIA L4", "l4"},
        {"NVIDIA A100 80GB PCIe", NULL},
        {"NVIDIA H100 PCIe", NULL},
        {"NVIDIA H200 NVL", NULL},
        {"NVIDIA GeForce RTX 3090 Ti", NULL},
        {"NVIDIA L40", NULL},
        {"NVIDIA L40S", NULL},
        {"Tesla V100-PCIE-16GB", NULL},
        {"NVIDIA B200", "b200"},
        {"NVIDIA GB200", "gb200"},
        {"NVIDIA B300", NULL},
        {"NVIDIA GB300", NULL},
        {"NVIDIA H800", NULL},
        {"NVIDIA GH200 480GB", NULL},
        {"NVIDIA GH200 144G HBM3e", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = ps_gpu_match_device(cases[i].dev);
        if (cases[i].key == NULL) {
            if (got) fail_msg("'%s' should not map to a catalog entry (got %s)", cases[i].dev, got);
        } else {
            if (!got || strcmp(got, cases[i].key) != 0)
                fail_msg("'%s' should map to %s (got %s)", cases[i].dev, cases[i].key, got ? got : "NULL");
        }
    }
    assert_null(ps_gpu_match_device(NULL));
}

static void test_link_latency_defaults(void **state)
{
    (void)state;
    assert_near(ps_link_default_latency("nvlink3"), 3e-6, 1e-9);
    assert_near(ps_link_default_latency("nvlink3-bridge"), 3e-6, 1e-9);
    assert_near(ps_link_default_latency("pcie4"), 10e-6, 1e-9);
    assert_near(ps_link_default_latency("ib-ndr"), 5e-6, 1e-9);
    assert_near(ps_link_default_latency("ib"), 5e-6, 1e-9);
    assert_near(ps_link_default_latency("ethernet"), 30e-6, 1e-9);
    assert_true(ps_link_default_latency("ibm") < 0);
    assert_true(ps_link_default_latency("myfabric") < 0);
    assert_true(ps_link_default_latency(NULL) < 0);
}

/* A link's class comes from the same prefixes as its default latency, and nothing else has one: a name the cost
 * model cannot class is refused at load, not priced by its first letters ("tofu" was Ethernet, "nvidia" NVLink). */
static void test_link_classes(void **state)
{
    (void)state;
    static const struct {
        const char *kind;
        ps_link_class cls;
    } known[] = {{"nvlink3", PS_LINK_NVLINK},  {"nvlink3-bridge", PS_LINK_NVLINK}, {"nvswitch", PS_LINK_NVLINK},
                 {"pcie4", PS_LINK_PCIE},      {"ib-hdr", PS_LINK_IB},             {"ib", PS_LINK_IB},
                 {"roce", PS_LINK_IB},         {"ethernet", PS_LINK_ETHERNET},     {"tcp", PS_LINK_ETHERNET},
                 {"measured", PS_LINK_MEASURED}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        ps_link_class c = PS_LINK_NONE;
        assert_true(ps_link_class_of(known[i].kind, &c));
        assert_int_equal(c, known[i].cls);
    }
    static const char *const unknown[] = {"tofu", "tofu-d", "nvidia", "ibm",      "pci",
                                          "myfabric", "none", "",       "measuredx"};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        ps_link_class c = PS_LINK_PCIE;
        assert_false(ps_link_class_of(unknown[i], &c));
        assert_int_equal(c, PS_LINK_PCIE); /* untouched */
    }
    assert_false(ps_link_class_of(NULL, NULL));
    /* a preset's links carry their class */
    ps_cluster c;
    assert_int_equal(ps_cluster_load("dgx-a100-80g:2", &c), PS_OK);
    assert_int_equal(c.groups[0].intra.cls, PS_LINK_NVLINK);
    assert_int_equal(c.groups[0].inter.cls, PS_LINK_IB);
    ps_cluster_free(&c);
}

/* ---- presets ----------------------------------------------------------------------------------------------------- */

static const char *const k_presets[] = {"dgx-a100-80g",  "dgx-a100-40g", "dgx-h100",       "hgx-h200",
                                        "dgx-b200",      "titan-pcie3",  "a100-ib100",     "a100-80g-ib400",
                                        "g4dn-12xlarge", "p3-8xlarge",   "rtx3090-nvlink", "rtx3090-pcie"};

static void test_preset_list(void **state)
{
    (void)state;
    char **names = NULL;
    int n = 0;
    assert_int_equal(ps_cluster_list(&names, &n), PS_OK);
    assert_true(n >= (int)(sizeof k_presets / sizeof k_presets[0]));
    for (size_t p = 0; p < sizeof k_presets / sizeof k_presets[0]; p++) {
        bool found = false;
        for (int i = 0; i < n; i++) found = found || strcmp(names[i], k_presets[p]) == 0;
        if (!found) fail_msg("preset %s is not listed", k_presets[p]);
    }
    for (int i = 1; i < n; i++) assert_true(strcmp(names[i - 1], names[i]) < 0);
    ps_cluster_list_free(names, n);
    ps_cluster_list_free(NULL, 0);
}

/* Every listed preset loads for 1..4 nodes with consistent derived counts and valid links. */
static void test_every_preset_loads(void **state)
{
    (void)state;
    char **names = NULL;
    int n = 0;
    assert_int_equal(ps_cluster_list(&names, &n), PS_OK);
    for (int i = 0; i < n; i++) {
        for (int64_t nodes = 1; nodes <= 4; nodes++) {
            ps_cluster c;
            ps_status st = ps_cluster_preset(names[i], nodes, &c);
            if (st != PS_OK) fail_msg("preset %s:%lld: %s", names[i], (long long)nodes, ps_error_message());
            char want[96];
            snprintf(want, sizeof want, "%s:%lld", names[i], (long long)nodes);
            assert_string_equal(c.name, want);
            assert_int_equal(c.n_groups, 1);
            const ps_node_group *g = &c.groups[0];
            /* ':N' counts NVLink domains (racks) where the preset has one, nodes otherwise */
            int64_t per = g->domain_nodes > 1 ? g->domain_nodes : 1;
            assert_int_equal(c.n_nodes, nodes * per);
            assert_int_equal(g->nodes, nodes * per);
            if (g->domain_nodes) {
                assert_true(g->domain_nodes >= 2);
                assert_int_equal(g->domain.cls, PS_LINK_NVLINK);
                assert_true(g->domain.bw_Bps >= g->inter.bw_Bps / (double)g->gpus_per_node);
            }
            assert_true(g->gpus_per_node >= 1 && g->gpus_per_node <= 16);
            assert_int_equal(c.n_gpus, nodes * per * g->gpus_per_node);
            assert_false(c.heterogeneous);
            assert_true(strlen(c.source) > 20);
            assert_true(g->gpu.fp16_flops > 0 && g->gpu.mem_bytes > 0);
            assert_true(g->intra.bw_Bps > 1e9 && g->intra.latency_s > 0 && g->intra.latency_s < 1e-4);
            assert_true(g->inter.bw_Bps > 1e8 && g->inter.latency_s > 0 && g->inter.latency_s < 1e-4);
            /* inside a node is never slower than the network */
            assert_true(g->intra.bw_Bps >= g->inter.bw_Bps / (double)g->gpus_per_node);
            if (g->island_size) assert_int_equal(g->gpus_per_node % g->island_size, 0);
            assert_int_equal(ps_cluster_node_of(&c, c.n_gpus - 1), nodes * per - 1);
            assert_int_equal(ps_cluster_node_of(&c, c.n_gpus), -1);

            /* the spec form gives the same cluster */
            ps_cluster d;
            assert_int_equal(ps_cluster_load(want, &d), PS_OK);
            assert_string_equal(d.name, c.name);
            assert_int_equal(d.n_gpus, c.n_gpus);
            ps_cluster_free(&d);
            ps_cluster_free(&c);
        }
    }
    ps_cluster_list_free(names, n);
}

static void test_preset_figures(void **state)
{
    (void)state;
    ps_cluster c;
    assert_int_equal(ps_cluster_load("dgx-a100-80g", &c), PS_OK); /* ":1" by default */
    assert_string_equal(c.name, "dgx-a100-80g:1");
    assert_int_equal(c.n_gpus, 8);
    assert_string_equal(c.groups[0].gpu.name, "a100-80g");
    assert_near(c.groups[0].intra.bw_Bps, 300e9, 1e-9);
    assert_near(c.groups[0].inter.bw_Bps, 8 * 200e9 / 8, 1e-9);
    assert_int_equal(c.groups[0].cores_per_node, 128);
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("dgx-a100-40g:2", &c), PS_OK);
    assert_string_equal(c.groups[0].gpu.name, "a100-40g");
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("dgx-h100:16", &c), PS_OK);
    assert_int_equal(c.n_gpus, 128);
    assert_near(c.groups[0].intra.bw_Bps, 450e9, 1e-9);
    assert_near(c.groups[0].inter.bw_Bps, 8 * 400e9 / 8, 1e-9);
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("hgx-h200:2", &c), PS_OK);
    assert_string_equal(c.groups[0].gpu.name, "h200");
    assert_near(c.groups[0].intra.bw_Bps, 450e9, 1e-9);
    ps_cluster_free(&c);

    /* DGX B200 user guide: NVLink5 14.4 TB/s over 8 GPUs, both directions; 8x 400 Gb/s InfiniBand; 2x 56 cores */
    assert_int_equal(ps_cluster_load("dgx-b200:4", &c), PS_OK);
    assert_int_equal(c.n_gpus, 32);
    assert_string_equal(c.groups[0].gpu.name, "b200");
    assert_near(c.groups[0].gpu.fp4_flops, 9000e12, 1e-9);
    assert_string_equal(c.groups[0].intra.kind, "nvlink5");
    assert_int_equal(c.groups[0].intra.cls, PS_LINK_NVLINK);
    assert_near(c.groups[0].intra.bw_Bps, 900e9, 1e-9);
    assert_near(c.groups[0].inter.bw_Bps, 8 * 400e9 / 8, 1e-9);
    assert_int_equal(c.groups[0].inter.cls, PS_LINK_IB);
    assert_int_equal(c.groups[0].cores_per_node, 112);
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("titan-pcie3:2", &c), PS_OK);
    assert_string_equal(c.groups[0].gpu.name, "rtx-titan");
    assert_int_equal(c.groups[0].gpus_per_node, 8);
    assert_string_equal(c.groups[0].intra.kind, "pcie3");
    assert_near(c.groups[0].intra.bw_Bps, 15.75e9, 1e-9);
    assert_near(c.groups[0].inter.bw_Bps, 100e9 / 8, 1e-9);
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("a100-ib100:8", &c), PS_OK);
    assert_int_equal(c.n_gpus, 64);
    assert_string_equal(c.groups[0].gpu.name, "a100-40g");
    assert_near(c.groups[0].inter.bw_Bps, 100e9 / 8, 1e-9);
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("g4dn-12xlarge:4", &c), PS_OK);
    assert_string_equal(c.groups[0].gpu.name, "t4");
    assert_int_equal(c.groups[0].gpus_per_node, 4);
    assert_near(c.groups[0].intra.bw_Bps, 50e9 / 8, 1e-9);
    assert_near(c.groups[0].inter.bw_Bps, 50e9 / 8, 1e-9);
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("p3-8xlarge:4", &c), PS_OK);
    assert_string_equal(c.groups[0].gpu.name, "v100-16g");
    assert_near(c.groups[0].intra.bw_Bps, 170e9 / 8, 1e-9);
    assert_near(c.groups[0].inter.bw_Bps, 10e9 / 8, 1e-9);
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("rtx3090-nvlink:8", &c), PS_OK);
    assert_int_equal(c.groups[0].island_size, 2);
    assert_near(c.groups[0].island.bw_Bps, 56.25e9, 1e-9);
    assert_near(c.groups[0].intra.bw_Bps, 31.5e9, 1e-9);
    assert_int_equal(c.groups[0].numa_per_node, 2);
    ps_cluster_free(&c);

    assert_int_equal(ps_cluster_load("rtx3090-pcie:8", &c), PS_OK);
    assert_int_equal(c.groups[0].island_size, 0);
    ps_cluster_free(&c);
}

static void test_spec_errors(void **state)
{
    (void)state;
    ps_cluster c;
    ps_error_clear();
    assert_int_equal(ps_cluster_load("dgx-a100-80g:abc", &c), PS_ERR_INPUT);
    assert_msg_has("'abc'");
    assert_int_equal(ps_cluster_load("dgx-a100-80g:0", &c), PS_ERR_INPUT);
    assert_msg_has("got 0");
    assert_int_equal(ps_cluster_load("dgx-a100-80g:-2", &c), PS_ERR_INPUT);
    assert_msg_has("got -2");
    assert_int_equal(ps_cluster_load("dgx-a100-80g:", &c), PS_ERR_INPUT);
    assert_msg_has("''");
    assert_int_equal(ps_cluster_load("dgx-a100-80g:1.5", &c), PS_ERR_INPUT);
    assert_msg_has("'1.5'");
    assert_int_equal(ps_cluster_load("dgx-a100-80g:99999999999999999999", &c), PS_ERR_INPUT);
    assert_int_equal(ps_cluster_load("", &c), PS_ERR_INPUT);
    assert_int_equal(ps_cluster_load(NULL, &c), PS_ERR_INPUT);

    /* nodes x 8 GPUs would overflow int64: refused as beyond the largest cluster planned for (PS_CLUSTER_MAX_*),
     * by the spec and by the preset loader alike */
    assert_int_equal(ps_cluster_load("dgx-h100:9223372036854775807", &c), PS_ERR_INPUT);
    assert_msg_has("the node count must be in 1..1048576");
    assert_int_equal(ps_cluster_preset("dgx-h100", 131073, &c), PS_ERR_INPUT);
    assert_msg_has("dgx-h100.json");
    assert_msg_has("1048584 GPUs in all; psearch plans for at most 1048576 nodes and 1048576 GPUs");
    assert_int_equal(ps_cluster_preset("dgx-h100", 131072, &c), PS_OK); /* exactly 2^20 GPUs */
    assert_int_equal(c.n_gpus, 1 << 20);
    ps_cluster_free(&c);
    assert_int_equal(ps_cluster_load(":4", &c), PS_ERR_INPUT);
    assert_msg_has("no preset name before ':4'");
    assert_int_equal(ps_cluster_preset("dgx-h100", 0, &c), PS_ERR_INPUT);
    assert_int_equal(ps_cluster_preset(NULL, 1, &c), PS_ERR_INPUT);

    assert_int_equal(ps_cluster_load("dgx-a100", &c), PS_ERR_INPUT);
    assert_msg_has("unknown cluster preset 'dgx-a100'");
    assert_msg_has("did you mean 'dgx-a100-");
    assert_msg_has("dgx-h100");
    assert_msg_has("rtx3090-pcie");
    assert_int_equal(ps_cluster_load("dgx h100:2", &c), PS_ERR_INPUT);
    assert_msg_has("known presets");
    assert_int_equal(ps_cluster_load("..:2", &c), PS_ERR_INPUT);
    assert_msg_has("unknown cluster preset");

    /* a path: the file is named */
    assert_int_equal(ps_cluster_load("/nonexistent/cluster.json", &c), PS_ERR_INPUT);
    assert_msg_has("/nonexistent/cluster.json");
    assert_int_equal(ps_cluster_load("missing.json", &c), PS_ERR_INPUT);
    assert_msg_has("missing.json");

    /* "auto" is calib/'s (ps_cluster_detect, which needs MPI): the pure loader refuses it, it does not crash */
    assert_int_equal(ps_cluster_load("auto", &c), PS_ERR_INPUT);
    assert_msg_has("ps_cluster_detect");
    /* a failed load leaves nothing to free, and freeing it is harmless */
    ps_cluster_free(&c);
    ps_cluster_free(NULL);
}

/* ---- placement and links ----------------------------------------------------------------------------------------- */

static void test_links(void **state)
{
    (void)state;
    ps_cluster c;
    assert_int_equal(ps_cluster_load("dgx-a100-80g:2", &c), PS_OK);
    ps_link l = ps_cluster_link(&c, 3, 3);
    assert_true(isinf(l.bw_Bps) && l.latency_s == 0);
    l = ps_cluster_link(&c, 0, 7);
    assert_string_equal(l.kind, "nvlink3");
    assert_near(l.bw_Bps, 300e9, 1e-9);
    l = ps_cluster_link(&c, 7, 8);
    assert_string_equal(l.kind, "ib-hdr");
    assert_near(l.bw_Bps, 200e9, 1e-9);
    assert_near(l.latency_s, 5e-6, 1e-9);
    assert_int_equal(ps_cluster_node_of(&c, 7), 0);
    assert_int_equal(ps_cluster_node_of(&c, 8), 1);
    assert_int_equal(ps_cluster_node_of(&c, -1), -1);
    assert_int_equal(ps_cluster_node_of(&c, 16), -1);
    assert_ptr_equal(ps_cluster_group_of(&c, 15), &c.groups[0]);
    assert_null(ps_cluster_group_of(&c, 16));
    l = ps_cluster_link(&c, 0, 16);
    assert_string_equal(l.kind, "invalid");
    assert_true(l.bw_Bps == 0);
    l = ps_cluster_link(&c, -1, -1);
    assert_true(l.bw_Bps == 0);
    ps_cluster_free(&c);

    /* NVLink pairs of the Oases 3090 nodes: 0-1 and 2-3 are islands, 1-2 crosses PCIe */
    assert_int_equal(ps_cluster_load("rtx3090-nvlink:2", &c), PS_OK);
    l = ps_cluster_link(&c, 0, 1);
    assert_string_equal(l.kind, "nvlink3-bridge");
    assert_near(l.bw_Bps, 56.25e9, 1e-9);
    l = ps_cluster_link(&c, 2, 3);
    assert_string_equal(l.kind, "nvlink3-bridge");
    l = ps_cluster_link(&c, 1, 2);
    assert_string_equal(l.kind, "pcie4");
    l = ps_cluster_link(&c, 0, 3);
    assert_string_equal(l.kind, "pcie4");
    /* GPU 4 and 5 are node 1's first pair: same island index, different node */
    l = ps_cluster_link(&c, 1, 5);
    assert_string_equal(l.kind, "ib-edr");
    l = ps_cluster_link(&c, 4, 5);
    assert_string_equal(l.kind, "nvlink3-bridge");
    ps_cluster_free(&c);

    /* NULL cluster: no crash */
    assert_int_equal(ps_cluster_node_of(NULL, 0), -1);
    assert_null(ps_cluster_group_of(NULL, 0));
    l = ps_cluster_link(NULL, 0, 1);
    assert_true(l.bw_Bps == 0);
}

/* NVLink domains larger than a node: GPUs of different nodes of one domain talk over NVLink, of different domains
 * (or groups) over the network; the preset counts racks. */
static void test_nvlink_domain(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/clusters/good-nvl-domain.json", PS_TEST_DATA);
    ps_cluster c;
    ps_status st = ps_cluster_load(path, &c);
    if (st != PS_OK) fail_msg("%s", ps_error_message());
    /* group g: 8 nodes x 4 GPUs in 2 domains of 4 nodes (GPUs 0-15, 16-31); group h: 2 nodes, no domain */
    assert_int_equal(c.n_gpus, 40);
    assert_int_equal(c.groups[0].domain_nodes, 4);
    assert_near(c.groups[0].domain.bw_Bps, 900e9, 1e-12);
    assert_near(c.groups[0].domain.latency_s, 2e-6, 1e-12);
    assert_int_equal(c.groups[1].domain_nodes, 0);
    assert_int_equal(ps_node_group_domain_gpus(&c.groups[0]), 16);
    assert_int_equal(ps_node_group_domain_gpus(&c.groups[1]), 4);
    assert_true(c.heterogeneous);
    ps_link l = ps_cluster_link(&c, 0, 1); /* one tray */
    assert_near(l.latency_s, 3e-6, 1e-12);
    assert_string_equal(l.kind, "nvlink5");
    l = ps_cluster_link(&c, 0, 4); /* trays 0 and 1 of domain 0: the domain's NVLink */
    assert_int_equal(l.cls, PS_LINK_NVLINK);
    assert_near(l.latency_s, 2e-6, 1e-12);
    l = ps_cluster_link(&c, 3, 15); /* first and last tray of domain 0 */
    assert_near(l.latency_s, 2e-6, 1e-12);
    l = ps_cluster_link(&c, 15, 16); /* domain 0 to domain 1: the network */
    assert_string_equal(l.kind, "ib-ndr");
    assert_near(l.bw_Bps, 4 * 400e9 / 8, 1e-12);
    l = ps_cluster_link(&c, 16, 31); /* inside domain 1 */
    assert_int_equal(l.cls, PS_LINK_NVLINK);
    l = ps_cluster_link(&c, 31, 32); /* into group h: domains never span groups */
    assert_int_equal(l.cls, PS_LINK_IB);
    l = ps_cluster_link(&c, 32, 36); /* group h's two nodes: no domain */
    assert_int_equal(l.cls, PS_LINK_IB);
    assert_int_equal(ps_cluster_domain_of(&c, 0), 0);
    assert_int_equal(ps_cluster_domain_of(&c, 15), 0);
    assert_int_equal(ps_cluster_domain_of(&c, 16), 4);
    assert_int_equal(ps_cluster_domain_of(&c, 36), 9);
    assert_int_equal(ps_cluster_domain_of(&c, 40), -1);
    /* the JSON rendering carries the domain in the cluster.json shape */
    json_t *j = ps_cluster_to_json(&c);
    json_t *d = json_object_get(json_array_get(json_object_get(j, "node_groups"), 0), "nvlink_domain");
    assert_non_null(d);
    assert_int_equal(json_integer_value(json_object_get(d, "nodes")), 4);
    assert_string_equal(json_string_value(json_object_get(d, "kind")), "nvlink5");
    assert_null(json_object_get(json_array_get(json_object_get(j, "node_groups"), 1), "nvlink_domain"));
    json_decref(j);
    ps_cluster_free(&c);

    /* GB200 NVL72: ':2' is two racks of 18 trays of 4 GPUs; 130 TB/s / 72 GPUs = 1.8 TB/s, 900 GB/s a direction */
    assert_int_equal(ps_cluster_load("gb200-nvl72:2", &c), PS_OK);
    assert_string_equal(c.name, "gb200-nvl72:2");
    assert_int_equal(c.n_nodes, 36);
    assert_int_equal(c.n_gpus, 144);
    assert_string_equal(c.groups[0].gpu.name, "gb200");
    assert_int_equal(c.groups[0].gpus_per_node, 4);
    assert_int_equal(c.groups[0].domain_nodes, 18);
    assert_int_equal(ps_node_group_domain_gpus(&c.groups[0]), 72);
    assert_near(c.groups[0].domain.bw_Bps, 900e9, 1e-12);
    assert_near(c.groups[0].inter.bw_Bps, 4 * 400e9 / 8, 1e-12);
    assert_int_equal(c.groups[0].cores_per_node, 144);
    assert_int_equal(ps_cluster_link(&c, 0, 71).cls, PS_LINK_NVLINK);
    assert_int_equal(ps_cluster_link(&c, 71, 72).cls, PS_LINK_IB);
    assert_int_equal(ps_cluster_link(&c, 72, 143).cls, PS_LINK_NVLINK);
    ps_cluster_free(&c);

    /* ps_cluster_finish on a cluster built in code: a domain must divide the nodes */
    ps_node_group g;
    memset(&g, 0, sizeof g);
    g.nodes = 6;
    g.gpus_per_node = 4;
    assert_int_equal(ps_gpu_lookup("gb200", &g.gpu), PS_OK);
    g.intra = (ps_link){.kind = "nvlink5", .cls = PS_LINK_NVLINK, .bw_Bps = 900e9, .latency_s = 3e-6};
    g.inter = (ps_link){.kind = "ib", .cls = PS_LINK_IB, .bw_Bps = 200e9, .latency_s = 5e-6};
    g.domain = g.intra;
    g.domain_nodes = 4;
    ps_cluster b = {.name = "built", .n_groups = 1, .groups = &g};
    assert_int_equal(ps_cluster_finish(&b, "built"), PS_ERR_INPUT);
    assert_msg_has("node_groups[0].nvlink_domain.nodes");
    g.domain_nodes = 3;
    assert_int_equal(ps_cluster_finish(&b, "built"), PS_OK);
    assert_int_equal(ps_cluster_link(&b, 0, 11).cls, PS_LINK_NVLINK);
    assert_int_equal(ps_cluster_link(&b, 11, 12).cls, PS_LINK_IB);
    g.domain.bw_Bps = 0;
    assert_int_equal(ps_cluster_finish(&b, "built"), PS_ERR_INPUT);
    assert_msg_has("node_groups[0].nvlink_domain needs a bandwidth");
    /* one domain needs no network (a lone rack); two do */
    g.domain.bw_Bps = 900e9;
    memset(&g.inter, 0, sizeof g.inter);
    g.domain_nodes = 6;
    assert_int_equal(ps_cluster_finish(&b, "built"), PS_OK);
    assert_int_equal(ps_cluster_link(&b, 0, 23).cls, PS_LINK_NVLINK);
    g.domain_nodes = 3;
    assert_int_equal(ps_cluster_finish(&b, "built"), PS_ERR_INPUT);
    assert_msg_has("node_groups[0].inter: a cluster of 2 NVLink domains needs each node's network");
}

/* ---- cluster.json ------------------------------------------------------------------------------------------------ */

static void data_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/clusters/%s", PS_TEST_DATA, name);
}

static void test_amp_mixed_example(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/clusters/amp-mixed-v100-t4.json", PS_EXAMPLES_DIR);
    ps_cluster c;
    ps_status st = ps_cluster_load(path, &c);
    if (st != PS_OK) fail_msg("%s", ps_error_message());
    assert_string_equal(c.name, "amp-mixed-v100-t4");
    assert_int_equal(c.n_groups, 2);
    assert_int_equal(c.n_nodes, 4);
    assert_int_equal(c.n_gpus, 16);
    assert_true(c.heterogeneous);
    assert_string_equal(c.groups[0].gpu.name, "v100-16g");
    assert_int_equal(c.groups[0].nodes, 3);
    assert_string_equal(c.groups[1].gpu.name, "t4");
    assert_int_equal(c.groups[1].nodes, 1);
    assert_string_equal(ps_cluster_group_of(&c, 11)->gpu.name, "v100-16g");
    assert_string_equal(ps_cluster_group_of(&c, 12)->gpu.name, "t4");
    assert_int_equal(ps_cluster_node_of(&c, 12), 3);
    /* V100 node <-> T4 node: the V100 node's 10 Gbps NIC limits it */
    ps_link l = ps_cluster_link(&c, 0, 12);
    assert_near(l.bw_Bps, 10e9 / 8, 1e-9);
    assert_near(l.latency_s, 30e-6, 1e-9);
    l = ps_cluster_link(&c, 12, 15);
    assert_near(l.bw_Bps, 50e9 / 8, 1e-9);
    l = ps_cluster_link(&c, 0, 1);
    assert_near(l.bw_Bps, 170e9 / 8, 1e-9);
    ps_cluster_free(&c);
}

static void test_json_good(void **state)
{
    (void)state;
    char path[512];
    ps_cluster c;
    data_path(path, sizeof path, "good-custom.json");
    ps_status st = ps_cluster_load(path, &c);
    if (st != PS_OK) fail_msg("%s", ps_error_message());
    assert_int_equal(c.n_groups, 3);
    assert_int_equal(c.n_nodes, 6);
    assert_int_equal(c.n_gpus, 24);
    assert_true(c.heterogeneous);

    const ps_node_group *g = &c.groups[0];
    assert_string_equal(g->name, "custom");
    assert_string_equal(g->gpu.name, "my-accel");
    assert_string_equal(g->gpu.marketing, "Example accelerator");
    assert_true(g->gpu.mem_bytes == 64 * GiB);
    assert_near(g->gpu.fp16_flops, 400e12, 1e-9);
    assert_true(g->gpu.tf32_flops == 0 && g->gpu.fp8_flops == 0 && g->gpu.fp4_flops == 0); /* absent: none */
    assert_non_null(strstr(g->gpu.source, "good-custom.json"));
    assert_near(g->intra.latency_s, 10e-6, 1e-9); /* pcie default */
    assert_int_equal(g->island_size, 4);
    assert_near(g->island.latency_s, 3e-6, 1e-9); /* nvlink default */
    assert_near(g->inter.bw_Bps, 4 * 200e9 / 8, 1e-9);
    assert_near(g->inter.latency_s, 5e-6, 1e-9);

    g = &c.groups[1];
    assert_string_equal(g->gpu.name, "h100-capped");
    assert_near(g->gpu.fp16_flops, 700e12, 1e-9);
    assert_near(g->gpu.fp8_flops, 1978.9e12, 1e-9); /* kept from the base */
    assert_true(g->gpu.mem_bytes == 80 * GiB);
    assert_near(g->intra.latency_s, 2.5e-6, 1e-9);
    assert_near(g->inter.bw_Bps, 400e9, 1e-9);

    g = &c.groups[2];
    assert_int_equal(g->gpus_per_node, 0);
    assert_string_equal(g->gpu.name, "none");
    assert_int_equal(g->cores_per_node, 64);
    assert_int_equal(g->numa_per_node, 4);
    assert_near(g->inter.bw_Bps, 3.125e9, 1e-9);

    /* first GPU of group 1 (global 16) to GPU 0: group 0's 4x200 Gb/s is the slower NIC */
    ps_link l = ps_cluster_link(&c, 0, 16);
    assert_string_equal(l.kind, "ib-hdr");
    assert_near(l.bw_Bps, 100e9, 1e-9);
    l = ps_cluster_link(&c, 0, 3);
    assert_string_equal(l.kind, "nvlink4"); /* island of 4 */
    l = ps_cluster_link(&c, 0, 4);
    assert_string_equal(l.kind, "pcie5");
    assert_int_equal(ps_cluster_node_of(&c, 23), 2);
    assert_int_equal(ps_cluster_node_of(&c, 24), -1);
    ps_cluster_free(&c);

    data_path(path, sizeof path, "good-one-node.json");
    st = ps_cluster_load(path, &c);
    if (st != PS_OK) fail_msg("%s", ps_error_message());
    assert_int_equal(c.n_nodes, 1);
    assert_int_equal(c.n_gpus, 4);
    assert_string_equal(c.groups[0].inter.kind, "none");
    ps_cluster_free(&c);

    data_path(path, sizeof path, "good-same-shape.json");
    assert_int_equal(ps_cluster_load_json(path, &c), PS_OK);
    assert_int_equal(c.n_nodes, 5);
    assert_false(c.heterogeneous); /* CPU cores differ, the GPUs and links do not */
    ps_cluster_free(&c);
}

static void test_json_bad(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        const char *want[3];
    } cases[] = {
        {"bad-syntax.json", {"bad-syntax.json:4:", "invalid JSON", NULL}},
        {"bad-root-array.json", {"top level must be a JSON object", NULL, NULL}},
        {"bad-unknown-field.json", {"node_groups[1].gpus_per_nod", "did you mean 'gpus_per_node'", NULL}},
        {"bad-zero-nodes.json", {"node_groups[0].nodes", "got 0", NULL}},
        {"bad-negative-gpus.json", {"node_groups[1].gpus_per_node", "got -4", NULL}},
        {"bad-missing-gpus.json", {"missing field 'node_groups[0].gpus_per_node'", NULL, NULL}},
        {"bad-unknown-gpu.json", {"node_groups[0].gpu", "'a100-80gb'", "did you mean 'a100-80g'"}},
        {"bad-overflow.json", {"node_groups[0]", "1099511627776 x 1073741824", "overflow"}},
        {"bad-overflow-sum.json", {"node_groups[0]", "psearch plans for at most 1048576 nodes", NULL}},
        {"bad-island.json", {"node_groups[0].island.size", "got 3", NULL}},
        {"bad-both-bw.json", {"node_groups[0].intra", "both bw_GBps and bw_Gbps", NULL}},
        {"bad-no-inter.json", {"node_groups[0].inter", "2 nodes", NULL}},
        {"bad-no-latency.json", {"node_groups[0].inter.kind", "unknown link kind 'myfabric'", NULL}},
        {"bad-link-kind.json", {"node_groups[0].inter.kind", "unknown link kind 'tofu-d'", NULL}},
        {"bad-gpu-object.json", {"node_groups[0].gpu.fp16_TFLOPs", "missing", NULL}},
        {"bad-zero-bw.json", {"node_groups[0].intra.bw_GBps", "got 0", NULL}},
        {"bad-empty-groups.json", {"node_groups", "empty", NULL}},
        {"bad-type.json", {"node_groups[0].nodes", "must be an integer", NULL}},
        {"bad-none-gpu.json", {"node_groups[0].gpu", "gpus_per_node is 4", NULL}},
        {"bad-unknown-base.json", {"node_groups[0].gpu.base", "'h1000'", "did you mean 'h100'"}},
        {"bad-negative-fp4.json", {"node_groups[0].gpu.fp4_TFLOPs", "got -1", NULL}},
        {"bad-domain-divide.json", {"node_groups[0].nvlink_domain.nodes", "must divide the group's nodes 6", "got 4"}},
        {"bad-domain-kind.json", {"node_groups[0].nvlink_domain.kind", "NVLink kind", "'ib-ndr'"}},
        {"bad-domain-one.json", {"node_groups[0].nvlink_domain.nodes", "got 1", NULL}},
        {"bad-domain-field.json", {"unknown field 'node_groups[0].nvlink_domain.size'", NULL, NULL}},
        {"bad-domain-bw.json", {"node_groups[0].nvlink_domain.bw_GBps", "got 0", NULL}},
        {"bad-domain-cpu.json", {"node_groups[0].nvlink_domain", "no GPUs", NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        data_path(path, sizeof path, cases[i].file);
        ps_cluster c;
        ps_error_clear();
        ps_status st = ps_cluster_load(path, &c);
        if (st != PS_ERR_INPUT)
            fail_msg("%s: want PS_ERR_INPUT, got %d (%s)", cases[i].file, (int)st, ps_error_message());
        /* every message names the file */
        if (!strstr(ps_error_message(), cases[i].file))
            fail_msg("%s: message does not name the file: %s", cases[i].file, ps_error_message());
        for (int k = 0; k < 3 && cases[i].want[k]; k++)
            if (!strstr(ps_error_message(), cases[i].want[k]))
                fail_msg("%s: message lacks '%s': %s", cases[i].file, cases[i].want[k], ps_error_message());
        assert_null(c.groups);
        assert_int_equal(c.n_groups, 0);
    }
}

/* ps_cluster_finish on clusters built in code (detection, tests, other tools). */
static void test_finish_checks(void **state)
{
    (void)state;
    ps_node_group groups[2];
    memset(groups, 0, sizeof groups);
    ps_cluster c;
    memset(&c, 0, sizeof c);
    c.groups = groups;
    c.n_groups = 1;
    assert_int_equal(ps_gpu_lookup("h100", &groups[0].gpu), PS_OK);
    groups[0].nodes = (int64_t)1 << 40;
    groups[0].gpus_per_node = (int64_t)1 << 30;
    groups[0].intra = (ps_link){.kind = "nvlink4", .bw_Bps = 450e9, .latency_s = 3e-6};
    groups[0].inter = (ps_link){.kind = "ib-ndr", .bw_Bps = 400e9, .latency_s = 5e-6};
    ps_error_clear();
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_ERR_INPUT);
    assert_msg_has("mycluster");
    assert_msg_has("node_groups[0]");
    assert_msg_has("overflow");

    groups[0].nodes = 2;
    groups[0].gpus_per_node = 8;
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_OK);
    assert_int_equal(c.n_gpus, 16);
    assert_false(c.heterogeneous);

    groups[1] = groups[0];
    c.n_groups = 2;
    assert_int_equal(ps_cluster_finish(&c, NULL), PS_OK);
    assert_false(c.heterogeneous);
    groups[1].gpus_per_node = 4;
    assert_int_equal(ps_cluster_finish(&c, NULL), PS_OK);
    assert_true(c.heterogeneous);
    assert_int_equal(c.n_gpus, 24);

    groups[1].nodes = 0;
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_ERR_INPUT);
    assert_msg_has("node_groups[1].nodes");
    groups[1].nodes = 1;
    groups[1].gpus_per_node = -1;
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_ERR_INPUT);
    assert_msg_has("node_groups[1].gpus_per_node");
    groups[1].gpus_per_node = 4;
    groups[1].inter.bw_Bps = 0;
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_ERR_INPUT);
    assert_msg_has("node_groups[1].inter");
    groups[1].inter.bw_Bps = 400e9;
    groups[1].island_size = 3;
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_ERR_INPUT);
    assert_msg_has("island");
    groups[1].island_size = 0;
    groups[1].intra.latency_s = NAN;
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_ERR_INPUT);
    assert_msg_has("node_groups[1].intra");
    groups[1].intra.latency_s = 3e-6;
    groups[1].gpu.fp16_flops = 0;
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_ERR_INPUT);
    assert_msg_has("node_groups[1].gpu");

    c.n_groups = 0;
    assert_int_equal(ps_cluster_finish(&c, "mycluster"), PS_ERR_INPUT);
    assert_int_equal(ps_cluster_finish(NULL, "x"), PS_ERR_INPUT);
}

/* Presets from a private data folder: the rules that apply only to presets, and a missing folder. */
static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/clusters/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_preset_rules(void **state)
{
    (void)state;
    char dir[] = "/tmp/ps_test_hw_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[512];
    snprintf(sub, sizeof sub, "%s/clusters", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    const char *group = "{\"gpus_per_node\": 2, \"gpu\": \"l4\", \"intra\": {\"kind\": \"pcie4\", \"bw_GBps\": 31.5},"
                        " \"inter\": {\"kind\": \"ethernet\", \"bw_Gbps\": 25}}";
    char text[1024];
    snprintf(text, sizeof text, "{\"name\": \"ok\", \"source\": \"test\", \"node_groups\": [%s]}", group);
    write_file(dir, "ok.json", text);
    snprintf(text, sizeof text, "{\"name\": \"other\", \"source\": \"test\", \"node_groups\": [%s]}", group);
    write_file(dir, "misnamed.json", text);
    snprintf(text, sizeof text, "{\"name\": \"two\", \"source\": \"test\", \"node_groups\": [%s, %s]}", group, group);
    write_file(dir, "two.json", text);
    write_file(dir, "nodes.json",
               "{\"name\": \"nodes\", \"source\": \"test\", \"node_groups\": [{\"nodes\": 4, \"gpus_per_node\": 1, "
               "\"gpu\": \"t4\", \"inter\": {\"kind\": \"ethernet\", \"bw_Gbps\": 25}}]}");
    snprintf(text, sizeof text, "{\"name\": \"nosource\", \"node_groups\": [%s]}", group);
    write_file(dir, "nosource.json", text);
    write_file(dir, "broken.json", "{\"name\": \"broken\",\n\"source\": }");

    ps_data_dir_override(dir);
    ps_cluster c;
    assert_int_equal(ps_cluster_load("ok:3", &c), PS_OK);
    assert_int_equal(c.n_gpus, 6);
    assert_near(c.groups[0].inter.latency_s, 30e-6, 1e-9);
    ps_cluster_free(&c);
    ps_error_clear();
    assert_int_equal(ps_cluster_load("misnamed", &c), PS_ERR_INPUT);
    assert_msg_has("misnamed.json");
    assert_msg_has("'other'");
    assert_int_equal(ps_cluster_load("two:2", &c), PS_ERR_INPUT);
    assert_msg_has("exactly one");
    assert_int_equal(ps_cluster_load("nodes:2", &c), PS_ERR_INPUT);
    assert_msg_has("node_groups[0].nodes");
    assert_msg_has("nodes:N");
    assert_int_equal(ps_cluster_load("nosource", &c), PS_ERR_INPUT);
    assert_msg_has("'source'");
    assert_int_equal(ps_cluster_load("broken", &c), PS_ERR_INPUT);
    assert_msg_has("broken.json:2:");
    assert_int_equal(ps_cluster_load("okay", &c), PS_ERR_INPUT);
    assert_msg_has("did you mean 'ok'");

    char **names = NULL;
    int n = 0;
    assert_int_equal(ps_cluster_list(&names, &n), PS_OK);
    assert_int_equal(n, 6);
    assert_string_equal(names[0], "broken");
    ps_cluster_list_free(names, n);

    /* a data folder without presets: an error, not a crash */
    ps_data_dir_override("/nonexistent-psearch-data");
    assert_int_not_equal(ps_cluster_list(&names, &n), PS_OK);
    assert_null(names);
    assert_int_equal(ps_cluster_load("dgx-h100", &c), PS_ERR_INPUT);
    ps_data_dir_override(NULL);

    static const char *const files[] = {"ok", "misnamed", "two", "nodes", "nosource", "broken"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s.json", sub, files[i]);
        unlink(path);
    }
    rmdir(sub);
    rmdir(dir);
}

/* ps_cluster_load's two halves: locating touches no file content, parsing touches no file at all (an MPI rank parses
 * the bytes rank 0 read), and messages name the located path as a load's do. */
static void test_locate_and_parse(void **state)
{
    (void)state;
    ps_cluster_source src;
    assert_int_equal(ps_cluster_locate("dgx-a100-80g:4", &src), PS_OK);
    assert_string_equal(src.preset, "dgx-a100-80g");
    assert_int_equal(src.nodes, 4);
    assert_false(src.detect);
    size_t n = strlen(src.path);
    assert_true(n > 18 && strcmp(src.path + n - 18, "/dgx-a100-80g.json") == 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(ps_read_file(src.path, &text, &len), PS_OK);
    ps_cluster a, b;
    assert_int_equal(ps_cluster_parse(&src, text, len, &a), PS_OK);
    assert_int_equal(ps_cluster_load("dgx-a100-80g:4", &b), PS_OK);
    assert_string_equal(a.name, b.name);
    assert_int_equal(a.n_gpus, 32);
    assert_int_equal(a.n_gpus, b.n_gpus);
    assert_memory_equal(&a.groups[0].gpu, &b.groups[0].gpu, sizeof a.groups[0].gpu);
    ps_cluster_free(&a);
    ps_cluster_free(&b);
    free(text);

    assert_int_equal(ps_cluster_locate("auto", &src), PS_OK);
    assert_true(src.detect);
    assert_int_equal(ps_cluster_locate("dgx-a100-80g:0", &src), PS_ERR_INPUT);
    assert_msg_has("node count must be in 1..");
    assert_int_equal(ps_cluster_locate("dgx-a10:2", &src), PS_ERR_INPUT);
    assert_msg_has("unknown cluster preset 'dgx-a10'");
    /* A path is taken as given: whether it can be read is the reader's business (rank 0's, under MPI). */
    assert_int_equal(ps_cluster_locate("/nonexistent/c.json", &src), PS_OK);
    assert_string_equal(src.path, "/nonexistent/c.json");
    assert_string_equal(src.preset, "");

    /* Content for a path that does not exist on this process: parsed, and errors name that path and the field. */
    static const char bad[] = "{\"name\": \"x\", \"node_groups\": []}";
    memset(&a, 0x5a, sizeof a);
    assert_int_equal(ps_cluster_parse(&src, bad, sizeof bad - 1, &a), PS_ERR_INPUT);
    assert_msg_has("/nonexistent/c.json: field 'node_groups' is empty");
    assert_null(a.groups);
    static const char broken[] = "{\n  \"name\": \n}";
    assert_int_equal(ps_cluster_parse(&src, broken, sizeof broken - 1, &a), PS_ERR_INPUT);
    assert_msg_has("/nonexistent/c.json:3:");
}

/* fp4_TFLOPs in a cluster.json GPU object: optional like the other optional peaks, kept from a base unless given,
 * refused when negative (naming the field), and part of what makes two groups differ. */
static void test_json_fp4(void **state)
{
    (void)state;
    ps_cluster_source src;
    memset(&src, 0, sizeof src);
    ps_strlcpy(src.path, "fp4.json", sizeof src.path);
    ps_cluster c;
    static const char custom[] =
        "{\"name\": \"fp4\", \"node_groups\": [{\"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"name\": \"acc\", "
        "\"mem_GiB\": 96, \"hbm_GBps\": 4000, \"fp32_TFLOPs\": 50, \"fp16_TFLOPs\": 1000, \"fp8_TFLOPs\": 2000, "
        "\"fp4_TFLOPs\": 4000}}]}";
    ps_status st = ps_cluster_parse(&src, custom, sizeof custom - 1, &c);
    if (st != PS_OK) fail_msg("%s", ps_error_message());
    assert_near(c.groups[0].gpu.fp4_flops, 4000e12, 1e-9);
    assert_near(c.groups[0].gpu.fp8_flops, 2000e12, 1e-9);
    json_t *j = ps_cluster_to_json(&c);
    assert_non_null(j);
    json_t *gpu = json_object_get(json_array_get(json_object_get(j, "node_groups"), 0), "gpu");
    assert_near(json_real_value(json_object_get(gpu, "fp4_TFLOPs")), 4000, 1e-12);
    json_decref(j);
    ps_cluster_free(&c);

    /* from a base: kept unless overridden; 0 turns it off; two groups differing only in fp4 are heterogeneous */
    static const char based[] =
        "{\"name\": \"fp4\", \"node_groups\": ["
        "{\"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"base\": \"gb200\"}, "
        "\"inter\": {\"kind\": \"ib-ndr\", \"bw_Gbps\": 400}},"
        "{\"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"base\": \"gb200\", \"fp4_TFLOPs\": 0}, "
        "\"inter\": {\"kind\": \"ib-ndr\", \"bw_Gbps\": 400}}]}";
    st = ps_cluster_parse(&src, based, sizeof based - 1, &c);
    if (st != PS_OK) fail_msg("%s", ps_error_message());
    assert_near(c.groups[0].gpu.fp4_flops, 10000e12, 1e-9);
    assert_true(c.groups[1].gpu.fp4_flops == 0);
    assert_near(c.groups[1].gpu.fp8_flops, 5000e12, 1e-9);
    assert_true(c.heterogeneous);
    ps_cluster_free(&c);

    /* negative or not a number: bad input naming the file and the field */
    static const char neg[] = "{\"name\": \"fp4\", \"node_groups\": [{\"nodes\": 1, \"gpus_per_node\": 1, "
                              "\"gpu\": {\"base\": \"b200\", \"fp4_TFLOPs\": -5}}]}";
    ps_error_clear();
    assert_int_equal(ps_cluster_parse(&src, neg, sizeof neg - 1, &c), PS_ERR_INPUT);
    assert_msg_has("fp4.json");
    assert_msg_has("'node_groups[0].gpu.fp4_TFLOPs'");
    assert_msg_has("got -5");
    assert_null(c.groups);
    static const char text[] = "{\"name\": \"fp4\", \"node_groups\": [{\"nodes\": 1, \"gpus_per_node\": 1, "
                               "\"gpu\": {\"base\": \"b200\", \"fp4_TFLOPs\": \"9000\"}}]}";
    assert_int_equal(ps_cluster_parse(&src, text, sizeof text - 1, &c), PS_ERR_INPUT);
    assert_msg_has("'node_groups[0].gpu.fp4_TFLOPs' must be a number");
}

/* sm_count: catalog figures, an optional cluster.json field (whole, >= 0, 0 = unknown), kept from a base, shown. */
static void test_sm_count(void **state)
{
    (void)state;
    static const struct {
        const char *key;
        int sms;
    } want[] = {{"a100-80g", 108}, {"a800-80g", 108}, {"h100", 132}, {"h200", 132}, {"v100-32g", 80},
                {"t4", 40},        {"rtx3090", 82},   {"rtx-titan", 72}, {"l4", 58}, {"b200", 0}, {"gb200", 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ps_gpu g;
        assert_int_equal(ps_gpu_lookup(want[i].key, &g), PS_OK);
        if (g.sm_count != want[i].sms) fail_msg("%s: sm_count %d, want %d", want[i].key, g.sm_count, want[i].sms);
    }
    ps_cluster_source src;
    memset(&src, 0, sizeof src);
    ps_strlcpy(src.path, "sms.json", sizeof src.path);
    ps_cluster c;
    static const char based[] =
        "{\"name\": \"sms\", \"node_groups\": ["
        "{\"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"base\": \"h100\"}, "
        "\"inter\": {\"kind\": \"ib-ndr\", \"bw_Gbps\": 400}},"
        "{\"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"base\": \"b200\", \"sm_count\": 148}, "
        "\"inter\": {\"kind\": \"ib-ndr\", \"bw_Gbps\": 400}},"
        "{\"nodes\": 1, \"gpus_per_node\": 1, \"gpu\": {\"name\": \"acc\", \"mem_GiB\": 96, \"hbm_GBps\": 4000, "
        "\"fp32_TFLOPs\": 50, \"fp16_TFLOPs\": 1000}, \"inter\": {\"kind\": \"ib-ndr\", \"bw_Gbps\": 400}}]}";
    ps_status st = ps_cluster_parse(&src, based, sizeof based - 1, &c);
    if (st != PS_OK) fail_msg("%s", ps_error_message());
    assert_int_equal(c.groups[0].gpu.sm_count, 132);
    assert_int_equal(c.groups[1].gpu.sm_count, 148);
    assert_int_equal(c.groups[2].gpu.sm_count, 0);
    json_t *j = ps_cluster_to_json(&c);
    assert_non_null(j);
    json_t *gpu = json_object_get(json_array_get(json_object_get(j, "node_groups"), 1), "gpu");
    assert_int_equal(json_integer_value(json_object_get(gpu, "sm_count")), 148);
    json_decref(j);
    ps_cluster_free(&c);
    static const char frac[] = "{\"name\": \"sms\", \"node_groups\": [{\"nodes\": 1, \"gpus_per_node\": 1, "
                               "\"gpu\": {\"base\": \"h100\", \"sm_count\": 131.5}}]}";
    ps_error_clear();
    assert_int_equal(ps_cluster_parse(&src, frac, sizeof frac - 1, &c), PS_ERR_INPUT);
    assert_msg_has("'node_groups[0].gpu.sm_count'");
    assert_msg_has("whole number");
    static const char neg[] = "{\"name\": \"sms\", \"node_groups\": [{\"nodes\": 1, \"gpus_per_node\": 1, "
                              "\"gpu\": {\"base\": \"h100\", \"sm_count\": -1}}]}";
    assert_int_equal(ps_cluster_parse(&src, neg, sizeof neg - 1, &c), PS_ERR_INPUT);
    assert_msg_has("'node_groups[0].gpu.sm_count'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalog_figures),    cmocka_unit_test(test_catalog_invariants),
        cmocka_unit_test(test_catalog_unknown),    cmocka_unit_test(test_peak_flops),
        cmocka_unit_test(test_match_device),       cmocka_unit_test(test_link_latency_defaults),
        cmocka_unit_test(test_link_classes),       cmocka_unit_test(test_preset_list),
        cmocka_unit_test(test_every_preset_loads), cmocka_unit_test(test_preset_figures),
        cmocka_unit_test(test_spec_errors),        cmocka_unit_test(test_links),
        cmocka_unit_test(test_amp_mixed_example),  cmocka_unit_test(test_json_good),
        cmocka_unit_test(test_json_bad),           cmocka_unit_test(test_json_fp4),
        cmocka_unit_test(test_finish_checks),      cmocka_unit_test(test_preset_rules),
        cmocka_unit_test(test_locate_and_parse),   cmocka_unit_test(test_nvlink_domain),
        cmocka_unit_test(test_sm_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* What each training framework can run as exported, at the release named in its rules: the search restricted with
 * --framework keeps to these rules, and the exports (cli/export.c) refuse a plan that breaks them, so the exported
 * launch is the plan that was priced. Each rule names the framework's own check or flag it comes from. Pure data and
 * checks: no I/O. */
#include <stdio.h>
#include <string.h>

#include "ps_search.h"

static const char *const k_megatron_sched[] = {"1f1b", "interleaved", NULL};
static const char *const k_deepspeed_sched[] = {"1f1b", NULL};
static const char *const k_torchtitan_sched[] = {"gpipe", "1f1b", "interleaved", "v-zb", NULL};

static const ps_framework_rules k_rules[PS_FW_COUNT] = {
    [PS_FW_MEGATRON] =
        {
            .name = "megatron",
            .title = "Megatron-LM",
            .version = "Megatron-LM core_r0.14 (megatron/training/arguments.py)",
            .uniform = true, /* one TransformerConfig for every layer */
            .schedules = k_megatron_sched,
            .partition = PS_FW_PART_ANY, /* --pipeline-model-parallel-layout places every layer */
            .max_vpp = 64,
            /* 0: DDP; 1: --use-distributed-optimizer; 2/3: Megatron-FSDP --data-parallel-sharding-strategy
             * optim_grads / optim_grads_params */
            .zero = {true, true, true, true},
            .zero_pp = {true, true, false, false},
            .overlap = {[PS_OVERLAP_NONE] = true, [PS_OVERLAP_TE] = true},
            .recompute = {true, true, true},
        },
    [PS_FW_DEEPSPEED] =
        {
            .name = "deepspeed",
            .title = "DeepSpeed",
            .version = "DeepSpeed 0.16 (deepspeed/runtime/pipe/engine.py, runtime/utils.py partition_uniform)",
            .uniform = true,
            .schedules = k_deepspeed_sched, /* PipelineEngine's TrainSchedule is 1F1B */
            .partition = PS_FW_PART_UNIFORM,
            .max_vpp = 1,
            .zero = {true, true, true, true},
            .zero_pp = {true, true, false, false}, /* PipelineEngine asserts ZeRO stage < 2 */
            .overlap = {[PS_OVERLAP_NONE] = true},
            .recompute = {true, false, true},
        },
    [PS_FW_TORCHTITAN] =
        {
            .name = "torchtitan",
            .title = "torchtitan",
            .version = "torchtitan 0.1 (torchtitan/config/job_config.py)",
            .uniform = true,
            .schedules = k_torchtitan_sched,
            .partition = PS_FW_PART_ANY,
            .max_vpp = 64,
            .zero = {true, false, false, true}, /* DDP replicate or FSDP2 shard */
            .zero_pp = {true, false, false, true},
            .overlap = {[PS_OVERLAP_NONE] = true},
            .recompute = {true, true, true},
        },
};

const ps_framework_rules *ps_framework_get(ps_framework f)
{
    return f > PS_FW_ANY && f < PS_FW_COUNT ? &k_rules[f] : NULL;
}

const char *ps_framework_name(ps_framework f)
{
    return f == PS_FW_ANY ? "any" : f > PS_FW_ANY && f < PS_FW_COUNT ? k_rules[f].name : "?";
}

int ps_framework_find(const char *name)
{
    if (!name) return -1;
    if (strcmp(name, "any") == 0) return PS_FW_ANY;
    for (int f = PS_FW_ANY + 1; f < PS_FW_COUNT; f++)
        if (strcmp(name, k_rules[f].name) == 0) return f;
    return -1;
}

/* DeepSpeed's partition_uniform (deepspeed/runtime/utils.py): chunk = n / parts, the first n % parts parts one more. */
static int64_t uniform_cut(int64_t n, int parts, int s)
{
    if (n <= parts) return s < n ? s : n;
    int64_t chunk = n / parts, residual = n % parts;
    return s * chunk + (s < residual ? s : residual);
}

bool ps_framework_runs(ps_framework f, const ps_model *m, const ps_plan *p, char *why, size_t cap)
{
    const ps_framework_rules *r = ps_framework_get(f);
    if (why && cap) why[0] = '\0';
    if (!r) return true;
#define NO(...)                                                                                                        \
    do {                                                                                                               \
        if (why && cap) snprintf(why, cap, __VA_ARGS__);                                                               \
        return false;                                                                                                  \
    } while (0)
    bool sched_ok = false;
    for (const char *const *k = r->schedules; *k; k++) sched_ok = sched_ok || strcmp(*k, p->schedule) == 0;
    if (!sched_ok) NO("%s runs no schedule '%s'", r->title, p->schedule);
    if (p->vpp > r->max_vpp) NO("%s takes at most %d model chunks per device (plan: vpp %d)", r->title, r->max_vpp,
                                p->vpp);
    int S = p->pp * p->vpp;
    if (r->partition == PS_FW_PART_UNIFORM)
        for (int s = 0; s <= S; s++)
            if (p->cuts[s] != uniform_cut(m->n_layers, S, s))
                NO("%s splits the %lld layers evenly (its partition_method \"uniform\"); the plan's stage %d starts "
                   "at layer %lld, not %lld", r->title, (long long)m->n_layers, s, (long long)p->cuts[s],
                   (long long)uniform_cut(m->n_layers, S, s));
    const ps_strategy *ref = NULL;
    for (int64_t i = 0; i < m->n_layers; i++) {
        const ps_strategy *st = &p->layer[i];
        if (st->zero < 0 || st->zero > 3 || !(p->pp > 1 ? r->zero_pp : r->zero)[st->zero])
            NO("%s does not run ZeRO stage %d%s (layer %lld)", r->title, st->zero,
               p->pp > 1 ? " with pipeline parallelism" : "", (long long)i);
        if ((unsigned)st->overlap >= PS_OVERLAP_COUNT || !r->overlap[st->overlap])
            NO("%s has no TP overlap '%s' (layer %lld)", r->title, ps_overlap_name(st->overlap), (long long)i);
        if ((unsigned)st->ckpt > PS_RECOMP_FULL || !r->recompute[st->ckpt])
            NO("%s has no %s recomputation (layer %lld)", r->title, ps_recompute_name(st->ckpt), (long long)i);
        if (!r->uniform || !ps_layer_is_block(m->layers[i].kind)) continue;
        if (!ref) {
            ref = st;
            continue;
        }
        if (st->tp != ref->tp || st->sp != ref->sp || st->zero != ref->zero || st->ckpt != ref->ckpt ||
            st->overlap != ref->overlap || st->attn != ref->attn || st->dp_no_overlap != ref->dp_no_overlap)
            NO("%s takes one strategy for every transformer layer; layer %lld differs from the first block (tp %d "
               "vs %d, zero %d vs %d, recompute %s vs %s)", r->title, (long long)i, st->tp, ref->tp, st->zero,
               ref->zero, ps_recompute_name(st->ckpt), ps_recompute_name(ref->ckpt));
    }
#undef NO
    return true;
}

int64_t ps_framework_uniform_cut(int64_t n, int parts, int s) { return uniform_cut(n, parts, s); }

/* The schedule workspace: buffers kept between calls, building an order from the kind table, verifying an order
 * (every pass exactly once, no deadlock), the event simulation, and the closed forms it is tested against. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"

/* Beyond these the planner has no use and the (stage, micro-batch) tables would not fit in memory anyway. */
#define PS_SCHED_MAX_DEVICES (1 << 20)
#define PS_SCHED_MAX_MB (1 << 30)
/* Passes (F, B, W of every micro-batch on every stage) in one schedule: 3 x 2^24, about 50 M. The workspace takes
 * about 42 bytes per pass (V-ZB, 4096 stages x 65536 micro-batches asked for 34 GB and failed with "out of memory"),
 * so this cap keeps it near 2 GB and a simulation within seconds, and refuses larger sizes at once with their
 * numbers. Real pipelines are far below: the search itself caps a plan at 2^18 micro-batch stages (ps_plan_size_ok).
 * It also stays below the int32 flat index of a padded step (2^31 less PS_SCHED_PAD per device). */
#define PS_SCHED_MAX_PASSES ((int64_t)3 << 24)

ps_status ps_sched_create(ps_sched **out)
{
    *out = ps_calloc(1, sizeof(ps_sched));
    if (!*out) return PS_FAIL(PS_ERR_SYSTEM, "out of memory allocating a schedule workspace");
    return PS_OK;
}

void ps_sched_destroy(ps_sched *s)
{
    if (!s) return;
    void *bufs[] = {s->dev_off, s->cursor, s->queue, s->queued, s->busy, s->idle, s->peak, s->scratch,
                    s->dev_stage, s->stage_dev, s->stc, s->end_f, s->end_b, s->end_w, s->pass, s->prog, s->tmp,
                    s->start, s->end, s->endp};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(s);
}

/* End times are first written device region by device region into endp, each region shifted by PS_SCHED_PAD
 * doubles more than the one before: a 1F1B device region holds 2n passes, so for n a power of two the regions
 * of end[] start a power-of-two apart and the simulation's interleaved stores into d of them fall into the same
 * few L1 sets and evict each other. The padding spreads them over the sets; a sequential pass copies them out. */
#define PS_SCHED_PAD 8

/* A buffer of the workspace and the bytes one of its elements takes. */
typedef struct {
    void **buf;
    size_t elt;
} sized_buf;

/* Grow buffers that share one capacity `*cap` (elements) to hold `need` each. ps_grow grows geometrically, so a
 * search sweeping n upwards reallocates O(log n) times, not every call; every buffer gets the same new capacity.
 * On failure *cap stays: every buffer still holds at least that much. */
static ps_status grow_all(const sized_buf *b, size_t nb, size_t *cap, size_t need)
{
    if (need <= *cap) return PS_OK;
    size_t c = *cap;
    for (size_t i = 0; i < nb; i++) {
        c = *cap;
        PS_TRY(ps_grow(b[i].buf, &c, need, b[i].elt));
    }
    *cap = c;
    return PS_OK;
}

/* Contents are not kept meaningful across a growth: every user writes what it reads (generators, verification,
 * simulation). */
static ps_status reserve(ps_sched *s, int d, int stages, int64_t sm, int64_t passes)
{
#define SIZED(field, n) {(void **)&s->field, (n) * sizeof *s->field}
#define COUNT(a) (sizeof(a) / sizeof(a)[0])
    const sized_buf dev[] = {SIZED(dev_off, 1), SIZED(cursor, 1), SIZED(queue, 1), SIZED(queued, 1),
                             SIZED(busy, 1),    SIZED(idle, 1),   SIZED(peak, 1),  SIZED(scratch, 8)};
    const sized_buf stage[] = {SIZED(dev_stage, 1), SIZED(stage_dev, 1), SIZED(stc, 11)};
    const sized_buf smb[] = {SIZED(end_f, 1), SIZED(end_b, 1), SIZED(end_w, 1)};
    const sized_buf pass[] = {SIZED(pass, 1), SIZED(prog, 1), SIZED(tmp, 1)};
    const sized_buf res[] = {SIZED(start, 1), SIZED(end, 1), SIZED(endp, 1)};
    PS_TRY(grow_all(dev, COUNT(dev), &s->dev_cap, (size_t)d + 1));
    PS_TRY(grow_all(stage, COUNT(stage), &s->stage_cap, (size_t)stages));
    PS_TRY(grow_all(smb, COUNT(smb), &s->sm_cap, (size_t)sm));
    PS_TRY(grow_all(pass, COUNT(pass), &s->pass_cap, (size_t)passes));
    PS_TRY(grow_all(res, COUNT(res), &s->res_pass_cap, (size_t)passes + PS_SCHED_PAD * ((size_t)d + 1)));
    return PS_OK;
#undef COUNT
#undef SIZED
}

/* The rules are written once, as predicates that say why into `why` (cap bytes; NULL: only whether): the search asks
 * whether a candidate is a schedule at all without touching the error slot, and ps_sched_check / the builders turn
 * the same reason into a PS_ERR_INPUT. */
#define REFUSE_UNLESS(cond, ...)                                                                                       \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            if (why) snprintf(why, cap, __VA_ARGS__);                                                                  \
            return false;                                                                                              \
        }                                                                                                              \
    } while (0)

/* The sizes any order must respect. */
static bool sizes_ok(int d, int n, int v, ps_sched_placement place, char *why, size_t cap)
{
    REFUSE_UNLESS(d >= 1 && d <= PS_SCHED_MAX_DEVICES, "pipeline devices d must be in 1..%d (got %d)",
                  PS_SCHED_MAX_DEVICES, d);
    REFUSE_UNLESS(n >= 1 && n <= PS_SCHED_MAX_MB, "micro-batches n must be in 1..%d (got %d)", PS_SCHED_MAX_MB, n);
    REFUSE_UNLESS(v >= 1 && v <= UINT16_MAX, "chunks per device v must be in 1..%d (got %d)", UINT16_MAX, v);
    REFUSE_UNLESS(place == PS_SCHED_PLACE_LOOP || place == PS_SCHED_PLACE_V, "unknown stage placement %d",
                  (int)place);
    REFUSE_UNLESS(place != PS_SCHED_PLACE_V || v == 2, "the V placement needs v = 2 chunks per device (got %d)", v);
    int64_t stages, sm, passes;
    REFUSE_UNLESS(ps_mul_i64(d, v, &stages) && stages <= INT32_MAX, "d*v = %d*%d stages is too many", d, v);
    REFUSE_UNLESS(ps_mul_i64(stages, n, &sm) && ps_mul_i64(sm, 3, &passes) && passes <= PS_SCHED_MAX_PASSES,
                  "d*v*n = %d*%d*%d micro-batch stages is too many to schedule (at most %lld passes, 3 per "
                  "micro-batch stage: about 2 GB of workspace)", d, v, n, (long long)PS_SCHED_MAX_PASSES);
    return true;
}

static ps_status check_sizes(int d, int n, int v, ps_sched_placement place)
{
    char why[256];
    if (!sizes_ok(d, n, v, place, why, sizeof why)) return PS_FAIL(PS_ERR_INPUT, "%s", why);
    return PS_OK;
}

/* Check the sizes, make room, and lay the stages out on the devices. Leaves the workspace empty on failure. */
static ps_status setup(ps_sched *s, int d, int n, int v, ps_sched_placement place, int64_t max_passes)
{
    s->kind = NULL;
    s->d = s->n = s->v = s->stages = 0;
    s->verified = false;
    s->npass = 0;
    PS_TRY(check_sizes(d, n, v, place));
    int64_t stages = (int64_t)d * v, sm = stages * n, passes = 3 * sm;
    if (max_passes > passes) passes = max_passes;
    PS_TRY(reserve(s, d, (int)stages, sm, passes));
    s->d = d;
    s->n = n;
    s->v = v;
    s->stages = (int)stages;
    for (int i = 0; i < d; i++)
        for (int c = 0; c < v; c++) {
            int st = place == PS_SCHED_PLACE_V ? (c == 0 ? i : 2 * d - 1 - i) : c * d + i;
            s->dev_stage[(size_t)i * v + c] = st;
            s->stage_dev[st] = i;
        }
    return PS_OK;
}

static ps_status order_run(ps_sched *s);

/* Every (stage, micro-batch) has one F and one backward (a BW, or a B and a W), each on the device its chunk
 * names, and the order can run to the end (a pass that waits on one placed after it on its own device, or on a
 * cycle across devices, leaves the simulation stuck). */
static ps_status verify(ps_sched *s)
{
    size_t sm = (size_t)s->stages * (size_t)s->n;
    memset(s->end_f, 0, sm * sizeof(double));
    memset(s->end_b, 0, sm * sizeof(double));
    memset(s->end_w, 0, sm * sizeof(double));
    for (int dev = 0; dev < s->d; dev++) {
        for (int64_t k = s->dev_off[dev]; k < s->dev_off[dev + 1]; k++) {
            const ps_sched_pass *p = &s->pass[k];
            int64_t pos = k - s->dev_off[dev];
            PS_CHECK_INPUT(p->op <= PS_SCHED_BW, "device %d pass %lld: op %d does not exist (F=0 B=1 W=2 BW=3)", dev,
                           (long long)pos, (int)p->op);
            PS_CHECK_INPUT(p->mb >= 0 && p->mb < s->n, "device %d pass %lld: micro-batch %d is outside 0..%d", dev,
                           (long long)pos, (int)p->mb, s->n - 1);
            PS_CHECK_INPUT(p->chunk < s->v, "device %d pass %lld: chunk %d is outside 0..%d", dev, (long long)pos,
                           (int)p->chunk, s->v - 1);
            size_t idx = (size_t)p->mb * s->stages + (size_t)s->dev_stage[(size_t)dev * s->v + p->chunk];
            bool dup = false;
            switch (p->op) {
            case PS_SCHED_F: dup = s->end_f[idx] != 0; s->end_f[idx] = 1; break;
            case PS_SCHED_B: dup = s->end_b[idx] != 0; s->end_b[idx] = 1; break;
            case PS_SCHED_W: dup = s->end_w[idx] != 0; s->end_w[idx] = 1; break;
            default:
                dup = s->end_b[idx] != 0 || s->end_w[idx] != 0;
                s->end_b[idx] = s->end_w[idx] = 1;
                break;
            }
            PS_CHECK_INPUT(!dup, "device %d pass %lld: %s of micro-batch %d, chunk %d is scheduled twice "
                           "(a BW counts as both its B and its W)",
                           dev, (long long)pos, ps_sched_op_name(p->op), (int)p->mb, (int)p->chunk);
        }
    }
    for (size_t idx = 0; idx < sm; idx++) {
        int st = (int)(idx % (size_t)s->stages), mb = (int)(idx / (size_t)s->stages);
        const char *miss = s->end_f[idx] == 0 ? "F" : s->end_b[idx] == 0 ? "B" : s->end_w[idx] == 0 ? "W" : NULL;
        PS_CHECK_INPUT(!miss, "the %s of micro-batch %d on stage %d (device %d) is never scheduled", miss, mb, st,
                       s->stage_dev[st]);
    }
    PS_TRY(order_run(s));
    return PS_OK;
}

/* The kind's rules and the sizes: everything ps_sched_build can refuse before generating. */
static bool kind_ok(const char *kind, int d, int n, int *v, const ps_sched_kind_def **out, char *why, size_t cap)
{
    int k = kind ? ps_sched_kind_find(kind) : -1;
    char names[256];
    REFUSE_UNLESS(k >= 0, "unknown schedule kind '%s' (kinds: %s)", kind ? kind : "(null)",
                  ps_sched_kind_list(names, sizeof names));
    const ps_sched_kind_def *K = &ps_sched_kinds_[k];
    if (*v == 0) *v = K->default_chunks;
    REFUSE_UNLESS(*v >= K->min_chunks && *v <= K->max_chunks, "schedule '%s' takes v in %d..%d chunks per device "
                  "(got %d)", K->name, K->min_chunks, K->max_chunks, *v);
    REFUSE_UNLESS(d >= 1, "schedule '%s': pipeline devices d must be >= 1 (got %d)", K->name, d);
    REFUSE_UNLESS(n >= 1, "schedule '%s': micro-batches n must be >= 1 (got %d)", K->name, n);
    REFUSE_UNLESS(K->n_rule != PS_SCHED_N_MULTIPLE_OF_D || n % d == 0,
                  "schedule '%s' needs the micro-batches n to be a multiple of the devices d (n=%d, d=%d)", K->name,
                  n, d);
    if (!sizes_ok(d, n, *v, K->place, why, cap)) return false;
    REFUSE_UNLESS(!K->gen_work || K->gen_work(d, n) <= K->max_gen_work,
                  "schedule '%s' with d = %d devices and n = %d micro-batches is too large to generate (its "
                  "reordering takes about d^2 n = %.3g steps, at most %.3g: fewer devices or micro-batches)", K->name,
                  d, n, K->gen_work(d, n), K->max_gen_work);
    *out = K;
    return true;
}

static ps_status check_kind(const char *kind, int d, int n, int *v, const ps_sched_kind_def **out)
{
    char why[512];
    if (!kind_ok(kind, d, n, v, out, why, sizeof why)) return PS_FAIL(PS_ERR_INPUT, "%s", why);
    return PS_OK;
}

ps_status ps_sched_check(const char *kind, int d, int n, int v)
{
    const ps_sched_kind_def *K;
    return check_kind(kind, d, n, &v, &K);
}

bool ps_sched_valid(const char *kind, int d, int n, int v)
{
    const ps_sched_kind_def *K;
    return kind_ok(kind, d, n, &v, &K, NULL, 0);
}

/* The kind's order, unverified: enough for the accessors and ps_sched_peak_points. */
static ps_status generate(ps_sched *s, const ps_sched_kind_def *K, int d, int n, int v)
{
    PS_TRY(setup(s, d, n, v, K->place, 0));
    s->kind = K; /* generators read their kind (the V kinds share one) */
    if (K->gen_all) {
        K->gen_all(s);
    } else {
        for (int dev = 0; dev < d; dev++) {
            s->dev_off[dev] = s->npass;
            K->gen_device(s, dev);
        }
        s->dev_off[d] = s->npass;
    }
    return PS_OK;
}

/* Verify a generated order and record its dependency order, so that it may be simulated. */
static ps_status complete(ps_sched *s)
{
    ps_status st = verify(s);
    if (st != PS_OK) {
        /* a generator bug: nothing half-built may be simulated */
        s->kind = NULL;
        s->d = 0;
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    s->verified = true;
    return PS_OK;
}

static bool holds(const ps_sched *s, const ps_sched_kind_def *K, int d, int n, int v)
{
    return s->kind == K && s->d == d && s->n == n && s->v == v;
}

ps_status ps_sched_build(ps_sched *s, const char *kind, int d, int n, int v)
{
    const ps_sched_kind_def *K;
    PS_TRY(check_kind(kind, d, n, &v, &K));
    PS_TRY(generate(s, K, d, n, v));
    return complete(s);
}

ps_status ps_sched_ensure(ps_sched *s, const char *kind, int d, int n, int v)
{
    const ps_sched_kind_def *K;
    PS_TRY(check_kind(kind, d, n, &v, &K));
    if (!holds(s, K, d, n, v)) PS_TRY(generate(s, K, d, n, v));
    return s->verified ? PS_OK : complete(s);
}

ps_status ps_sched_generate(ps_sched *s, const char *kind, int d, int n, int v)
{
    const ps_sched_kind_def *K;
    PS_TRY(check_kind(kind, d, n, &v, &K));
    return holds(s, K, d, n, v) ? PS_OK : generate(s, K, d, n, v);
}

ps_status ps_sched_set_order(ps_sched *s, int d, int n, int v, ps_sched_placement place, const ps_sched_pass *passes,
                             const int64_t *counts)
{
    PS_CHECK_INPUT(passes && counts, "set_order needs the passes and the per-device counts");
    PS_CHECK_INPUT(d >= 1 && d <= PS_SCHED_MAX_DEVICES, "pipeline devices d must be in 1..%d (got %d)",
                   PS_SCHED_MAX_DEVICES, d);
    int64_t total = 0;
    for (int i = 0; i < d; i++) {
        PS_CHECK_INPUT(counts[i] >= 0 && counts[i] <= PS_SCHED_MAX_PASSES, "device %d: pass count %lld is invalid", i,
                       (long long)counts[i]);
        total += counts[i];
    }
    PS_CHECK_INPUT(total <= PS_SCHED_MAX_PASSES, "%lld passes is too many", (long long)total);
    PS_TRY(setup(s, d, n, v, place, total));
    memcpy(s->pass, passes, (size_t)total * sizeof *passes);
    s->npass = total;
    s->dev_off[0] = 0;
    for (int i = 0; i < d; i++) s->dev_off[i + 1] = s->dev_off[i] + counts[i];
    ps_status st = verify(s);
    if (st != PS_OK) {
        s->d = 0; /* an order that failed verification must not be simulated */
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    s->verified = true;
    return PS_OK;
}

/* ---- simulation ---- */

static ps_status check_costs(const ps_sched *s, const ps_sched_costs *c)
{
    PS_CHECK_INPUT(s->d >= 1, "no schedule built in this workspace (or the last build failed)");
    PS_CHECK_INPUT(s->verified, "the order is generated but not verified yet (ps_sched_ensure completes it)");
    PS_CHECK_INPUT(c && c->f && c->b, "costs need the per-stage F and B times");
    const double *arr[] = {c->f, c->b, c->w, c->act};
    const char *name[] = {"F time", "B time", "W time", "activation size"};
    for (int a = 0; a < 4; a++) {
        if (!arr[a]) continue;
        for (int st = 0; st < s->stages; st++)
            PS_CHECK_INPUT(isfinite(arr[a][st]) && arr[a][st] >= 0, "stage %d: %s must be finite and >= 0 (got %g)",
                           st, name[a], arr[a][st]);
    }
    if (c->p2p)
        for (int st = 0; st + 1 < s->stages; st++)
            PS_CHECK_INPUT(isfinite(c->p2p[st]) && c->p2p[st] >= 0,
                           "p2p latency between stages %d and %d must be finite and >= 0 (got %g)", st, st + 1,
                           c->p2p[st]);
    /* Each value finite is not enough: the makespan is at most the sum of every pass and every hand-over, and that
     * sum must be finite too, or the result reads "makespan inf, bubble nan%". Likewise the activation peak. */
    double work = 0, held = 0;
    for (int st = 0; st < s->stages; st++) {
        work += (c->f[st] + c->b[st] + (c->w ? c->w[st] : 0) + (c->p2p && st + 1 < s->stages ? 2 * c->p2p[st] : 0)) *
                (double)s->n;
        if (c->act) held += c->act[st] * (double)s->n;
    }
    PS_CHECK_INPUT(isfinite(work), "the pass times of %d stages x %d micro-batches add up beyond the largest double: "
                   "give them in a larger unit", s->stages, s->n);
    PS_CHECK_INPUT(isfinite(held), "the activation sizes of %d stages x %d micro-batches add up beyond the largest "
                   "double: give them in a larger unit", s->stages, s->n);
    return PS_OK;
}

static inline double lat(const ps_sched *s, const ps_sched_costs *c, int st)
{
    /* a send between two stages of one device is a local hand-over */
    return c && c->p2p && s->stage_dev[st] != s->stage_dev[st + 1] ? c->p2p[st] : 0.0;
}

/* Dependency-order discovery over the fixed per-device orders. A device advances while the inputs of its next
 * pass are done; when it blocks it leaves the queue and is re-queued by the completion that can unblock it (the F
 * of the stage before or the B of the stage after, which live on other devices), so every pass is examined O(1)
 * times. The passes are recorded in the order they ran: every simulation afterwards is a linear scan of that
 * record, whatever the costs (an order fixes which pass waits on which; costs only fix how long). Passes left over
 * mean a deadlock. end_f / end_b serve as done flags here (>= 0: done). */
static ps_status order_run(ps_sched *s)
{
    const int d = s->d, n = s->n, v = s->v, S = s->stages;
    const size_t sm = (size_t)S * (size_t)n;
    double *const end_f = s->end_f, *const end_b = s->end_b;
    for (size_t i = 0; i < sm; i++) end_f[i] = end_b[i] = -1.0;
    for (int i = 0; i < d; i++) {
        s->cursor[i] = 0;
        s->queue[i] = i;
        s->queued[i] = 1;
    }
    int head = 0, queued = d;
    int64_t nprog = 0;
    while (queued > 0) {
        const int dev = s->queue[head];
        head = head + 1 == d ? 0 : head + 1;
        queued--;
        s->queued[dev] = 0;
        const int64_t base = s->dev_off[dev], cnt = s->dev_off[dev + 1] - base;
        int64_t k = s->cursor[dev];
        for (; k < cnt; k++) {
            const ps_sched_pass *p = &s->pass[base + k];
            const int st = s->dev_stage[(size_t)dev * v + p->chunk];
            const size_t idx = (size_t)p->mb * S + (size_t)st;
            int wake = -1;
            if (p->op == PS_SCHED_F) {
                if (st > 0 && end_f[idx - 1] < 0) break;
                end_f[idx] = 0;
                if (st + 1 < S) wake = s->stage_dev[st + 1];
            } else if (p->op == PS_SCHED_W) {
                if (end_b[idx] < 0) break;
            } else {
                if (end_f[idx] < 0 || (st + 1 < S && end_b[idx + 1] < 0)) break;
                end_b[idx] = 0;
                if (st > 0) wake = s->stage_dev[st - 1];
            }
            s->prog[nprog++] = (ps_sched_step_){.k = (int32_t)(base + k + (int64_t)PS_SCHED_PAD * dev),
                                                .dev = dev,
                                                .idx = (int32_t)idx,
                                                .st_op = (uint32_t)st << 2 | p->op};
            if (wake >= 0 && wake != dev && !s->queued[wake]) {
                int tail = head + queued >= d ? head + queued - d : head + queued;
                s->queue[tail] = wake;
                s->queued[wake] = 1;
                queued++;
            }
        }
        s->cursor[dev] = (int)k;
    }
    for (int dev = 0; dev < d; dev++) {
        int64_t cnt = s->dev_off[dev + 1] - s->dev_off[dev];
        if (s->cursor[dev] < cnt) {
            const ps_sched_pass *p = &s->pass[s->dev_off[dev] + s->cursor[dev]];
            return PS_FAIL(PS_ERR_INPUT, "the order deadlocks: device %d waits forever at pass %d (%s of "
                           "micro-batch %d, chunk %d): an input it needs is ordered after a pass that waits on it",
                           dev, s->cursor[dev], ps_sched_op_name(p->op), (int)p->mb, (int)p->chunk);
        }
    }
    return PS_OK;
}

/* The simulation proper, in two passes. The first scans the recorded dependency order, so every input of a pass
 * has its end time when the pass is reached (no readiness checks, no queue, no reset of the end-time tables); it
 * only computes end times, the one thing that needs that order. The second walks the flat pass list device by
 * device (a sequential stream) and derives from the end times what depends on a device's own order alone: start =
 * end - duration, busy time, and the activation peak (F adds its stage's activation, W or BW releases it). Keeping
 * the scattered stores to one (padded, see PS_SCHED_PAD) array in the first pass and the per-device sums out of
 * it is what makes it fast: the simulation is bound by cache misses on the scattered stores (bench_schedules
 * `speed` measures it; docs/schedules.md quotes the figures). */
static void run(ps_sched *s, const ps_sched_costs *c)
{
    const int d = s->d, S = s->stages, v = s->v;
    double *const tf = s->stc, *const tb = tf + S, *const tw = tb + S, *const tbw = tw + S;
    double *const lf = tbw + S, *const lb = lf + S, *const act = lb + S;
    for (int st = 0; st < S; st++) {
        tf[st] = c->f[st];
        tb[st] = c->b[st];
        tw[st] = c->w ? c->w[st] : 0.0;
        tbw[st] = tb[st] + tw[st];
        lf[st] = st > 0 ? lat(s, c, st - 1) : 0.0; /* the F arriving from stage st-1 */
        lb[st] = st + 1 < S ? lat(s, c, st) : 0.0; /* the B arriving from stage st+1 */
        act[st] = c->act ? c->act[st] : 1.0;
    }
    double *const freet = s->idle; /* device free time while running; turned into idle by the caller */
    for (int i = 0; i < d; i++) freet[i] = 0;
    double *const end_f = s->end_f, *const end_b = s->end_b, *const endp = s->endp;
    const ps_sched_step_ *const prog = s->prog;
    const int64_t np = s->npass;
    for (int64_t j = 0; j < np; j++) {
        const ps_sched_step_ q = prog[j];
        const int st = (int)(q.st_op >> 2), op = (int)(q.st_op & 3);
        double ready = freet[q.dev], e;
        if (op == PS_SCHED_F) {
            if (st > 0 && (e = end_f[q.idx - 1] + lf[st]) > ready) ready = e;
            end_f[q.idx] = e = ready + tf[st];
        } else if (op == PS_SCHED_W) {
            if ((e = end_b[q.idx]) > ready) ready = e;
            e = ready + tw[st];
        } else {
            if ((e = end_f[q.idx]) > ready) ready = e;
            if (st + 1 < S && (e = end_b[q.idx + 1] + lb[st]) > ready) ready = e;
            end_b[q.idx] = e = ready + (op == PS_SCHED_BW ? tbw[st] : tb[st]);
        }
        endp[q.k] = freet[q.dev] = e;
    }
    /* durations by (stage, op) in one table so the second pass has no branches on the op */
    double *const dur = act + S; /* [4 * S]: F, B, W, BW */
    for (int st = 0; st < S; st++) {
        dur[4 * st + PS_SCHED_F] = tf[st];
        dur[4 * st + PS_SCHED_B] = tb[st];
        dur[4 * st + PS_SCHED_W] = tw[st];
        dur[4 * st + PS_SCHED_BW] = tbw[st];
    }
    double *const start = s->start, *const end = s->end, *const busy = s->busy, *const peak = s->peak;
    const ps_sched_pass *const pass = s->pass;
    for (int dev = 0; dev < d; dev++) {
        const int *const dst = s->dev_stage + (size_t)dev * v;
        const double *const ep = endp + (size_t)PS_SCHED_PAD * dev;
        double bsy = 0, held = 0, pk = 0;
        for (int64_t k = s->dev_off[dev]; k < s->dev_off[dev + 1]; k++) {
            const ps_sched_pass p = pass[k];
            const int st = dst[p.chunk];
            const double du = dur[4 * st + p.op];
            start[k] = (end[k] = ep[k]) - du;
            bsy += du;
            if (p.op == PS_SCHED_F) {
                held += act[st];
                if (held > pk) pk = held;
            } else if (p.op != PS_SCHED_B) {
                held -= act[st];
            }
        }
        busy[dev] = bsy;
        peak[dev] = pk;
    }
}

ps_status ps_sched_simulate(ps_sched *s, const ps_sched_costs *costs, ps_sched_result *out)
{
    PS_CHECK_INPUT(out, "simulate needs a result to fill");
    PS_TRY(check_costs(s, costs));
    run(s, costs);
    const int d = s->d;
    double makespan = 0;
    for (int i = 0; i < d; i++)
        if (s->idle[i] > makespan) makespan = s->idle[i];
    double idle = 0;
    for (int dev = 0; dev < d; dev++) {
        s->idle[dev] = makespan - s->busy[dev];
        idle += s->idle[dev];
    }
    out->makespan = makespan;
    out->bubble_frac = makespan > 0 ? idle / ((double)d * makespan) : 0.0;
    out->busy = s->busy;
    out->idle = s->idle;
    out->peak_act = s->peak;
    out->start = s->start;
    out->end = s->end;
    return PS_OK;
}

/* ---- table and accessors ---- */

int ps_sched_kind_count(void) { return ps_sched_nkinds_; }
const char *ps_sched_kind_name(int i) { return i >= 0 && i < ps_sched_nkinds_ ? ps_sched_kinds_[i].name : NULL; }
const char *ps_sched_kind_description(int i)
{
    return i >= 0 && i < ps_sched_nkinds_ ? ps_sched_kinds_[i].description : NULL;
}
int ps_sched_kind_find(const char *name)
{
    for (int i = 0; name && i < ps_sched_nkinds_; i++)
        if (strcmp(ps_sched_kinds_[i].name, name) == 0) return i;
    return -1;
}
int ps_sched_kind_default_chunks(int i)
{
    return i >= 0 && i < ps_sched_nkinds_ ? ps_sched_kinds_[i].default_chunks : 0;
}
const char *ps_sched_kind_list(char *buf, size_t cap)
{
    if (cap == 0) return buf;
    buf[0] = '\0';
    for (int i = 0; i < ps_sched_nkinds_; i++) ps_strcatf(buf, cap, "%s%s", i ? ", " : "", ps_sched_kinds_[i].name);
    return buf;
}

const char *ps_sched_op_name(int op)
{
    static const char *const names[] = {"F", "B", "W", "BW"};
    return op >= 0 && op <= PS_SCHED_BW ? names[op] : "?";
}

const char *ps_sched_kind(const ps_sched *s) { return s->kind ? s->kind->name : "custom"; }
int ps_sched_devices(const ps_sched *s) { return s->d; }
int ps_sched_micro_batches(const ps_sched *s) { return s->n; }
int ps_sched_chunks(const ps_sched *s) { return s->v; }
int ps_sched_stages(const ps_sched *s) { return s->stages; }
int64_t ps_sched_total_passes(const ps_sched *s) { return s->d ? s->npass : 0; }
const ps_sched_pass *ps_sched_device_passes(const ps_sched *s, int dev, int64_t *count)
{
    if (dev < 0 || dev >= s->d) {
        *count = 0;
        return NULL;
    }
    *count = s->dev_off[dev + 1] - s->dev_off[dev];
    return s->pass + s->dev_off[dev];
}
int64_t ps_sched_pass_offset(const ps_sched *s, int dev) { return dev >= 0 && dev <= s->d ? s->dev_off[dev] : -1; }
int ps_sched_stage_of(const ps_sched *s, int dev, int chunk)
{
    return dev >= 0 && dev < s->d && chunk >= 0 && chunk < s->v ? s->dev_stage[(size_t)dev * s->v + chunk] : -1;
}
int ps_sched_device_of(const ps_sched *s, int stage)
{
    return stage >= 0 && stage < s->stages ? s->stage_dev[stage] : -1;
}

/* a <= b in every chunk */
static bool covered(const int *a, const int *b, int v)
{
    for (int c = 0; c < v; c++)
        if (a[c] > b[c]) return false;
    return true;
}

ps_status ps_sched_peak_points(const ps_sched *s, int dev, int *pts, int cap, int *n_pts)
{
    *n_pts = 0;
    PS_CHECK_INPUT(s->d >= 1, "no schedule built in this workspace (or the last build failed)");
    PS_CHECK_INPUT(dev >= 0 && dev < s->d, "device %d is outside 0..%d", dev, s->d - 1);
    const int v = s->v;
    int n = 0; /* vectors kept in pts[0 .. n-1]; the held counts run in pts[n] */
    PS_CHECK_INPUT(cap >= 1, "peak points need room for at least one vector");
    int *cur = pts;
    for (int c = 0; c < v; c++) cur[c] = 0;
    const int64_t lo = s->dev_off[dev], hi = s->dev_off[dev + 1];
    for (int64_t k = lo; k < hi; k++) {
        const ps_sched_pass *p = &s->pass[k];
        /* a generated order may not be verified yet: nothing outside the counts is touched */
        PS_CHECK_INPUT(p->chunk < v, "device %d pass %lld: chunk %d is outside 0..%d", dev, (long long)(k - lo),
                       (int)p->chunk, v - 1);
        if (p->op == PS_SCHED_F) {
            cur[p->chunk]++;
            if (k + 1 < hi && s->pass[k + 1].op == PS_SCHED_F) continue; /* the held set still grows */
            bool dominated = false;
            for (int i = 0; i < n && !dominated; i++) dominated = covered(cur, pts + (size_t)i * v, v);
            if (dominated) continue;
            /* drop the kept vectors this one covers, keep it, and go on counting in the next slot */
            int kept = 0;
            for (int i = 0; i < n; i++)
                if (!covered(pts + (size_t)i * v, cur, v)) {
                    if (kept != i) memcpy(pts + (size_t)kept * v, pts + (size_t)i * v, (size_t)v * sizeof *pts);
                    kept++;
                }
            if (kept != n) memmove(pts + (size_t)kept * v, cur, (size_t)v * sizeof *pts);
            n = kept + 1;
            PS_CHECK_INPUT(n < cap, "device %d has more than %d in-flight vectors that may set its peak", dev,
                           cap - 1);
            cur = pts + (size_t)n * v;
            memcpy(cur, pts + (size_t)(n - 1) * v, (size_t)v * sizeof *pts);
        } else if (p->op != PS_SCHED_B) {
            cur[p->chunk]--;
        }
    }
    *n_pts = n;
    return PS_OK;
}

/* ---- closed forms ---- */

double ps_sched_bubble_1f1b(int d, int n) { return (double)(d - 1) / (double)(n + d - 1); }
double ps_sched_bubble_interleaved(int d, int n, int v) { return (double)(d - 1) / ((double)v * n + d - 1); }
double ps_sched_bubble_zbh1_equal(int d, int n) { return (double)(d - 1) / (3.0 * n + d - 1); }
int ps_sched_peak_mb_1f1b(int d, int n, int dev) { return d - dev < n ? d - dev : n; }
double ps_sched_makespan_zbh2(int d, int n, double f, double b, double w) { return (d - 1) * f + n * (f + b + w); }
int ps_sched_peak_v(const char *kind, int d)
{
    if (!kind) return -1;
    if (strcmp(kind, "v-min") == 0) return 2 * ((d + 4) / 3);
    if (strcmp(kind, "v-half") == 0) return 2 * (d / 2) + 2;
    if (strcmp(kind, "v-zb") == 0) return 2 * d;
    return -1;
}

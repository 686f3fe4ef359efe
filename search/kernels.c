/* The layer DP and the partition DP (see kernels_internal.h). Workspaces grow geometrically and are reused, so a search
 * loop stops allocating after its first few calls. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"

/* ---- layer DP ------------------------------------------------------------------------------------------------- */

#define LDP_MEMO_SLOTS 64

struct ps_ldp_ws {
    double *cost;  /* [2][S][B+1]: best time of layers 0..l using exactly m quanta, ending in strategy s; two rows
                      (l - 1 and l) are enough, the path is rebuilt from `back` */
    size_t cost_cap;
    int *back;     /* [L][Lay][B+1]: for l >= 1, the strategy of layer l-1 on the best arrival into layout b with m
                      quanta used by layers 0..l-1 (-1: none). A layer's strategy s of memory w reached level m from
                      back[l][layout(s)][m - w]: Lay back-pointers per level instead of S, the table's bulk. */
    size_t back_cap;
    double *lay;   /* [Lay][B+1]: best over the strategies of one layout at the previous layer */
    int *lay_arg;
    size_t lay_cap, lay_arg_cap;
    double *into;  /* [Lay][B+1]: best arrival into a layout (resharding included) */
    size_t into_cap;
    int64_t *rest; /* [L+1]: the least memory layers l.. can use */
    size_t rest_cap;
    /* Answers to recent problems, direct-mapped by a hash of the whole input. A search solves the same stage again
     * and again: partitions of one candidate share stages, and runs of identical layers give identical problems at
     * other offsets. A hit is checked byte for byte, so it returns exactly what solving would. */
    struct ldp_memo {
        uint64_t hash;
        int L, S, Lay;      /* L == 0: empty slot */
        int64_t budget;
        unsigned char *key; /* time, mem, layout, reshard as passed */
        size_t key_len, key_cap;
        double best;
        int *choice;
        size_t choice_cap;
    } memo[LDP_MEMO_SLOTS];
    int64_t calls, hits;
};

ps_status ps_ldp_create(ps_ldp_ws **out)
{
    *out = ps_calloc(1, sizeof **out);
    return *out ? PS_OK : PS_ERR_SYSTEM;
}

void ps_ldp_destroy(ps_ldp_ws *ws)
{
    if (!ws) return;
    free(ws->cost);
    free(ws->back);
    free(ws->lay);
    free(ws->lay_arg);
    free(ws->into);
    free(ws->rest);
    for (int i = 0; i < LDP_MEMO_SLOTS; i++) {
        free(ws->memo[i].key);
        free(ws->memo[i].choice);
    }
    free(ws);
}

void ps_ldp_stats(const ps_ldp_ws *ws, int64_t *calls, int64_t *hits)
{
    *calls = ws->calls;
    *hits = ws->hits;
}

/* The problem's input as bytes, in the order the memo stores it. */
typedef struct {
    const void *p;
    size_t n;
} ldp_part;

enum { LDP_PARTS = 4 };

static void ldp_parts(const ps_ldp_problem *p, ldp_part part[LDP_PARTS])
{
    size_t LS = (size_t)p->n_layers * (size_t)p->n_strat;
    part[0] = (ldp_part){p->time, LS * sizeof *p->time};
    part[1] = (ldp_part){p->mem, LS * sizeof *p->mem};
    part[2] = (ldp_part){p->layout, (size_t)p->n_strat * sizeof *p->layout};
    part[3] = (ldp_part){p->reshard, p->reshard ? (size_t)p->n_layouts * (size_t)p->n_layouts * sizeof *p->reshard : 0};
}

/* FNV-1a's step over 8-byte words (with the tail byte-wise): eight times fewer multiplies than ps_hash64 for the
 * memo's kilobytes of input, and only ever compared with itself. */
static uint64_t hash_words(const void *data, size_t n, uint64_t h)
{
    const unsigned char *b = data;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, b + i, 8);
        h = (h ^ x) * 1099511628211ULL;
        h ^= h >> 29;
    }
    return ps_hash64(b + i, n - i, h);
}

static struct ldp_memo *memo_find(ps_ldp_ws *ws, const ps_ldp_problem *p, int64_t budget, uint64_t *hash)
{
    ldp_part part[LDP_PARTS];
    ldp_parts(p, part);
    uint64_t h = hash_words(&budget, sizeof budget, PS_HASH64_INIT);
    int dims[4] = {p->n_layers, p->n_strat, p->n_layouts, p->reshard != NULL};
    h = hash_words(dims, sizeof dims, h);
    for (int i = 0; i < LDP_PARTS; i++) h = hash_words(part[i].p, part[i].n, h);
    *hash = h;
    struct ldp_memo *e = &ws->memo[h % LDP_MEMO_SLOTS];
    /* same sizes (and reshard given or not, through the key's length): the parts line up, compare them */
    if (e->L == 0 || e->hash != h || e->L != p->n_layers || e->S != p->n_strat || e->Lay != p->n_layouts ||
        e->budget != budget)
        return NULL;
    size_t off = 0;
    for (int i = 0; i < LDP_PARTS; off += part[i].n, i++)
        if (off + part[i].n > e->key_len || memcmp(e->key + off, part[i].p, part[i].n) != 0) return NULL;
    return off == e->key_len ? e : NULL;
}

static ps_status memo_store(ps_ldp_ws *ws, const ps_ldp_problem *p, int64_t budget, uint64_t h, double best,
                            const int *choice)
{
    ldp_part part[LDP_PARTS];
    ldp_parts(p, part);
    struct ldp_memo *e = &ws->memo[h % LDP_MEMO_SLOTS];
    size_t len = 0;
    for (int i = 0; i < LDP_PARTS; i++) len += part[i].n;
    e->L = 0; /* empty until whole */
    PS_TRY(ps_grow((void **)&e->key, &e->key_cap, len, 1));
    PS_TRY(ps_grow((void **)&e->choice, &e->choice_cap, (size_t)p->n_layers, sizeof(int)));
    size_t off = 0;
    for (int i = 0; i < LDP_PARTS; off += part[i].n, i++)
        if (part[i].n) memcpy(e->key + off, part[i].p, part[i].n);
    if (isfinite(best)) memcpy(e->choice, choice, (size_t)p->n_layers * sizeof(int));
    e->hash = h;
    e->S = p->n_strat;
    e->Lay = p->n_layouts;
    e->budget = budget;
    e->key_len = len;
    e->best = best;
    e->L = p->n_layers; /* whole now */
    return PS_OK;
}

/* x86-64 with GCC: an AVX2 clone of the layer DP as well, picked at load time where the CPU has AVX2. The argmin
 * loops over memory levels blend doubles with integers, which GCC vectorises with AVX2 but leaves scalar with the
 * baseline SSE2. Both clones compute the same thing in the same order: results do not depend on the CPU. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LDP_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LDP_CLONES
#endif

LDP_CLONES static ps_status ldp_solve_dp(ps_ldp_ws *ws, const ps_ldp_problem *p, int64_t budget, double *best,
                                         int *choice);

ps_status ps_ldp_solve(ps_ldp_ws *ws, const ps_ldp_problem *p, int64_t budget, double *best, int *choice)
{
    *best = INFINITY;
    PS_CHECK_INPUT(p->n_layers >= 1 && p->n_strat >= 1 && p->n_layouts >= 1,
                   "layer DP: empty problem (%d layers, %d strategies, %d layouts)", p->n_layers, p->n_strat,
                   p->n_layouts);
    if (budget < 0) return PS_OK;
    ws->calls++;
    uint64_t h;
    const struct ldp_memo *e = memo_find(ws, p, budget, &h);
    if (e) {
        ws->hits++;
        *best = e->best;
        if (isfinite(e->best)) memcpy(choice, e->choice, (size_t)p->n_layers * sizeof(int));
        return PS_OK;
    }
    PS_TRY(ldp_solve_dp(ws, p, budget, best, choice));
    return memo_store(ws, p, budget, h, *best, choice);
}

/* The first level strategy s of a layer (time t, memory w quanta) can reach from arrivals that start at level mlo;
 * B when it cannot fit at all. */
static inline size_t reach_from(double t, int64_t w, int64_t budget, size_t mlo, size_t B)
{
    if (!isfinite(t) || w < 0 || w > budget) return B;
    return (size_t)w + mlo < B ? (size_t)w + mlo : B;
}

LDP_CLONES static ps_status ldp_solve_dp(ps_ldp_ws *ws, const ps_ldp_problem *p, int64_t budget, double *best,
                                         int *choice)
{
    int L = p->n_layers, S = p->n_strat, Lay = p->n_layouts;
    /* The table is L x (B+1) x S; a budget of millions of quanta would be a unit mistake, not a finer answer. */
    PS_CHECK_INPUT(budget <= (1 << 20), "layer DP: memory budget of %lld quanta is too fine (at most 2^20)",
                   (long long)budget);
    /* Every table is strategy- or layout-major ([s][m]): the loops over memory levels are contiguous, branch-free
     * and vectorise. */
    size_t B = (size_t)budget + 1, row = B * (size_t)S, BL = B * (size_t)Lay;
    PS_TRY(ps_grow((void **)&ws->cost, &ws->cost_cap, 2 * row, sizeof(double)));
    PS_TRY(ps_grow((void **)&ws->back, &ws->back_cap, (size_t)L * BL, sizeof(int)));
    PS_TRY(ps_grow((void **)&ws->lay, &ws->lay_cap, BL, sizeof(double)));
    PS_TRY(ps_grow((void **)&ws->lay_arg, &ws->lay_arg_cap, BL, sizeof(int)));
    PS_TRY(ps_grow((void **)&ws->into, &ws->into_cap, BL, sizeof(double)));
    /* Levels above end(l) are of no use at layer l: the layers after it need at least rest[l + 1] quanta. No loop
     * reads or writes them, and no complete choice passes through them, so the optimum and its ties are those of
     * the whole table. */
    PS_TRY(ps_grow((void **)&ws->rest, &ws->rest_cap, (size_t)L + 1, sizeof(int64_t)));
    int64_t *rest = ws->rest;
    rest[L] = 0;
    for (int l = L - 1; l >= 0; l--) {
        int64_t wmin = budget + 1;
        for (int s = 0; s < S; s++) {
            int64_t w = p->mem[(size_t)l * (size_t)S + (size_t)s];
            if (isfinite(p->time[(size_t)l * (size_t)S + (size_t)s]) && w >= 0 && w < wmin) wmin = w;
        }
        rest[l] = rest[l + 1] + wmin;
        if (rest[l] > budget) return PS_OK; /* nothing fits: *best stays INFINITY */
    }
#define LDP_END(l) (B - (size_t)rest[(l) + 1])
    double *prev = ws->cost, *cur = ws->cost + row;
    for (size_t i = 0; i < row; i++) cur[i] = INFINITY;
    /* Levels below lo are unreachable at the current layer (a lower bound of the least memory layers 0..l can use):
     * no loop reads or writes them. lo = B: nothing reachable. */
    size_t lo = B, end = LDP_END(0);
    for (int s = 0; s < S; s++) {
        size_t m = reach_from(p->time[s], p->mem[s], budget, 0, end);
        if (m == end) continue;
        cur[(size_t)s * B + m] = p->time[s];
        lo = m < lo ? m : lo;
    }
    for (int l = 1; l < L && lo < B; l++) {
        size_t pend = end; /* levels [lo, pend) of layer l - 1 hold its values */
        end = LDP_END(l);
        double *t0 = prev;
        prev = cur;
        cur = t0;
        size_t mlo = lo;
        /* Best per layout at layer l-1 and each memory level: resharding depends only on the two layouts, so the
         * transition is O(S x layouts), not O(S^2). Strict < in strategy order keeps the smallest index on ties. */
        for (int a = 0; a < Lay; a++)
            for (size_t m = mlo; m < pend; m++) {
                ws->lay[(size_t)a * B + m] = INFINITY;
                ws->lay_arg[(size_t)a * B + m] = -1;
            }
        for (int s = 0; s < S; s++) {
            const double *ps = prev + (size_t)s * B;
            double *la = ws->lay + (size_t)p->layout[s] * B;
            int *aa = ws->lay_arg + (size_t)p->layout[s] * B;
            for (size_t m = mlo; m < pend; m++) {
                bool lt = ps[m] < la[m];
                la[m] = lt ? ps[m] : la[m];
                aa[m] = lt ? s : aa[m];
            }
        }
        /* Into each target layout b: min over source layouts a of lay + reshard(a, b), once per memory level, so
         * the strategy loop below is O(S x B) instead of O(S x B x layouts). Ties keep the lowest a. An unreachable
         * level stays INFINITY with back-pointer -1. */
        int *back = ws->back + (size_t)l * BL;
        for (int b = 0; b < Lay; b++) {
            double *in = ws->into + (size_t)b * B;
            int *bk = back + (size_t)b * B;
            for (size_t m = mlo; m < pend; m++) {
                in[m] = INFINITY;
                bk[m] = -1;
            }
            for (int a = 0; a < Lay; a++) {
                const double *la = ws->lay + (size_t)a * B;
                const int *aa = ws->lay_arg + (size_t)a * B;
                double r = p->reshard ? p->reshard[a * Lay + b] : 0.0;
                for (size_t m = mlo; m < pend; m++) {
                    double c = la[m] + r;
                    bool lt = c < in[m];
                    in[m] = lt ? c : in[m];
                    bk[m] = lt ? aa[m] : bk[m];
                }
            }
        }
        /* Layer l under strategy s with memory w reaches level m from level m - w of its layout's arrivals (an
         * unreachable one is INFINITY, and stays so after adding a finite time); m < end reads below pend, as
         * end = pend + the layer's least memory. */
        const double *t = p->time + (size_t)l * (size_t)S;
        const int64_t *mm = p->mem + (size_t)l * (size_t)S;
        lo = end;
        for (int s = 0; s < S; s++) {
            size_t from = reach_from(t[s], mm[s], budget, mlo, end);
            lo = from < lo ? from : lo;
        }
        for (int s = 0; s < S; s++) {
            double *cs = cur + (size_t)s * B;
            size_t from = reach_from(t[s], mm[s], budget, mlo, end);
            for (size_t m = lo; m < from; m++) cs[m] = INFINITY;
            if (from == end) continue;
            const double *in = ws->into + (size_t)p->layout[s] * B;
            size_t w = (size_t)mm[s];
            double ts = t[s];
            for (size_t m = from; m < end; m++) cs[m] = in[m - w] + ts;
        }
        if (lo == end) lo = B;
    }
#undef LDP_END
    /* Smallest cost; ties: least memory, then smallest strategy index. */
    size_t bm = 0;
    int bs = -1;
    for (size_t m = lo; m < B; m++)
        for (int s = 0; s < S; s++)
            if (cur[(size_t)s * B + m] < *best) {
                *best = cur[(size_t)s * B + m];
                bm = m;
                bs = s;
            }
    if (bs < 0) return PS_OK;
    for (int l = L - 1; l >= 0; l--) {
        choice[l] = bs;
        if (l > 0) {
            bm -= (size_t)p->mem[(size_t)l * (size_t)S + (size_t)bs];
            bs = ws->back[(size_t)l * BL + (size_t)p->layout[bs] * B + bm];
        }
    }
    return PS_OK;
}

/* ---- partition DP --------------------------------------------------------------------------------------------- */

typedef struct {
    double max, sum;
    int prev_i;    /* end layer of the previous stage (the start of this one) */
    int prev_idx;  /* index in the previous stage's front at prev_i */
} front_entry;

struct ps_pdp_ws {
    front_entry *ent;   /* all fronts, concatenated */
    size_t ent_cap;
    int64_t *start;     /* [K][L+1]: offset of the front of (k, j) in ent */
    int64_t *len;
    size_t start_cap, len_cap;
    front_entry *tmp;   /* candidates of one (k, j) before pruning: one sorted run per start layer */
    size_t tmp_cap;
    size_t *run_pos, *run_end; /* the runs in tmp, and a heap of run indices by their next entry */
    int *heap;
    size_t run_pos_cap, run_end_cap, heap_cap;
    double *suffix;     /* min-max DP: [K][L+1] best max over stages k..K-1 covering [i, L) */
    size_t suffix_cap;
    double *rest;       /* ps_pdp_solve with a bound: [2][K+1][L+1] the least sum and the least max of stages
                           k..K-1 covering [i, L) */
    size_t rest_cap;
};

ps_status ps_pdp_create(ps_pdp_ws **out)
{
    *out = ps_calloc(1, sizeof **out);
    return *out ? PS_OK : PS_ERR_SYSTEM;
}

void ps_pdp_destroy(ps_pdp_ws *ws)
{
    if (!ws) return;
    free(ws->ent);
    free(ws->start);
    free(ws->len);
    free(ws->tmp);
    free(ws->run_pos);
    free(ws->run_end);
    free(ws->heap);
    free(ws->suffix);
    free(ws->rest);
    free(ws);
}

/* Order: max ascending, then sum, then where it came from (deterministic fronts and ties). */
static int cmp_entry(const void *a, const void *b)
{
    const front_entry *x = a, *y = b;
    if (x->max != y->max) return x->max < y->max ? -1 : 1;
    if (x->sum != y->sum) return x->sum < y->sum ? -1 : 1;
    if (x->prev_i != y->prev_i) return x->prev_i < y->prev_i ? -1 : 1;
    return (x->prev_idx > y->prev_idx) - (x->prev_idx < y->prev_idx);
}

/* Is run a's next entry before run b's (cmp_entry order)? */
static bool run_before(const ps_pdp_ws *ws, int a, int b)
{
    return cmp_entry(&ws->tmp[ws->run_pos[a]], &ws->tmp[ws->run_pos[b]]) < 0;
}

static void heap_down(ps_pdp_ws *ws, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && run_before(ws, ws->heap[l], ws->heap[m])) m = l;
        if (r < n && run_before(ws, ws->heap[r], ws->heap[m])) m = r;
        if (m == i) return;
        int t = ws->heap[i];
        ws->heap[i] = ws->heap[m];
        ws->heap[m] = t;
        i = m;
    }
}

/* Is every completion of a partial partition with this (max, sum) above the bound thr (ps_pdp_solve)? The stages
 * still to come add a sum of at least rsum and have a max of at least rmax (0, 0 when none are left). */
static inline bool above(const ps_pdp_problem *p, double max, double sum, double rmax, double rsum, double thr)
{
    double m = max > rmax ? max : rmax;
    return (p->weight_max > 0 ? p->weight_max * m : 0) + sum + rsum > thr; /* 0 x INFINITY would be NaN */
}

ps_status ps_pdp_solve(ps_pdp_ws *ws, const ps_pdp_problem *p, double *best, int64_t *cuts)
{
    *best = INFINITY;
    int K = p->n_stages, L = p->n_layers;
    PS_CHECK_INPUT(K >= 1 && L >= 1, "partition DP: %d stages, %d layers", K, L);
    if (K > L) return PS_OK; /* every stage needs a layer */
    size_t N = (size_t)L + 1;
    PS_TRY(ps_grow((void **)&ws->start, &ws->start_cap, (size_t)K * N, sizeof(int64_t)));
    PS_TRY(ps_grow((void **)&ws->len, &ws->len_cap, (size_t)K * N, sizeof(int64_t)));
    size_t used = 0;
    /* A partial partition's w x max + sum only grows as stages are added (costs are >= 0): one above the known
     * objective never ends at the optimum, nor at a tie with it. The slack covers a caller that summed the known
     * partition in another order. */
    double thr = p->upper > 0 && isfinite(p->upper) ? p->upper * (1 + 1e-9) : INFINITY;
#define COST(k, i, j) p->cost[((size_t)(k) * N + (size_t)(i)) * N + (size_t)(j)]
    /* With a bound, what the stages after k must add at least: the least sum and the least max over the
     * partitions of [j, L) into stages k+1..K-1, taken apart (each a lower bound on its part of any one
     * completion). O(K L^2), against fronts merged at every (k, j). */
    PS_TRY(ps_grow((void **)&ws->rest, &ws->rest_cap, 2 * ((size_t)K + 1) * N, sizeof(double)));
    double *rsum = ws->rest, *rmax = ws->rest + ((size_t)K + 1) * N;
    for (size_t i = 0; i < N; i++) rsum[(size_t)K * N + i] = rmax[(size_t)K * N + i] = i == (size_t)L ? 0 : INFINITY;
    for (int k = K - 1; k >= 0 && isfinite(thr); k--)
        for (int i = 0; i <= L; i++) {
            double bs = INFINITY, bm = INFINITY;
            /* a start no partition uses: never read (stage k >= 1 starts at k at least, stage 0 at 0) */
            if (!ps_pdp_entry_used(K, L, k, i, L - (K - 1 - k))) {
                rsum[(size_t)k * N + (size_t)i] = rmax[(size_t)k * N + (size_t)i] = INFINITY;
                continue;
            }
            for (int j = i + 1; j <= L - (K - 1 - k); j++) {
                double c = COST(k, i, j), ns = rsum[(size_t)(k + 1) * N + (size_t)j],
                       nm = rmax[(size_t)(k + 1) * N + (size_t)j];
                if (c + ns < bs) bs = c + ns;
                if ((c > nm ? c : nm) < bm) bm = c > nm ? c : nm;
            }
            rsum[(size_t)k * N + (size_t)i] = bs;
            rmax[(size_t)k * N + (size_t)i] = bm;
        }
    if (!isfinite(thr)) /* no bound: nothing to add */
        for (size_t x = 0; x < ((size_t)K + 1) * N; x++) rsum[x] = rmax[x] = 0;
    for (int k = 0; k < K; k++) {
        for (int j = 0; j <= L; j++) {
            size_t kj = (size_t)k * N + (size_t)j;
            ws->start[kj] = (int64_t)used;
            ws->len[kj] = 0;
            /* stage k ends at j: needs k earlier stages of >= 1 layer and L - j layers for the K-1-k later ones */
            if (j < k + 1 || L - j < K - 1 - k) continue;
            const double rm = rmax[(size_t)(k + 1) * N + (size_t)j], rs = rsum[(size_t)(k + 1) * N + (size_t)j];
            /* The candidates, one run per start layer i of stage k: the front of (k-1, i), max ascending and sum
             * strictly descending, extended by c = cost(k, i, j). Entries whose max is at most c all become max c;
             * of those only the least sum (ties: the first) can reach the new front, so the run starts there and
             * stays in cmp_entry order. The runs are then merged in that order, as one sort of every candidate
             * would have ordered them. */
            size_t nt = 0, nr = 0;
            PS_TRY(ps_grow((void **)&ws->run_pos, &ws->run_pos_cap, (size_t)j + 1, sizeof(size_t)));
            PS_TRY(ps_grow((void **)&ws->run_end, &ws->run_end_cap, (size_t)j + 1, sizeof(size_t)));
            PS_TRY(ps_grow((void **)&ws->heap, &ws->heap_cap, (size_t)j + 1, sizeof(int)));
            if (k == 0) {
                double c = COST(0, 0, j);
                if (isfinite(c) && !above(p, c, c, rm, rs, thr)) {
                    PS_TRY(ps_grow((void **)&ws->tmp, &ws->tmp_cap, 1, sizeof(front_entry)));
                    ws->tmp[nt++] = (front_entry){c, c, 0, -1};
                    ws->run_pos[nr] = 0;
                    ws->run_end[nr++] = 1;
                }
            } else {
                for (int i = k; i < j; i++) {
                    double c = COST(k, i, j);
                    if (!isfinite(c) || above(p, c, c, rm, rs, thr)) continue;
                    size_t pk = (size_t)(k - 1) * N + (size_t)i;
                    int64_t n = ws->len[pk];
                    if (n == 0) continue;
                    PS_TRY(ps_grow((void **)&ws->tmp, &ws->tmp_cap, nt + (size_t)n, sizeof(front_entry)));
                    const front_entry *f = ws->ent + ws->start[pk];
                    size_t r0 = nt;
                    int64_t e = 0;
                    if (f[0].max <= c) {
                        int64_t lo = 0;
                        for (e = 1; e < n && f[e].max <= c; e++)
                            if (f[e].sum + c < f[lo].sum + c) lo = e;
                        if (!above(p, c, f[lo].sum + c, rm, rs, thr))
                            ws->tmp[nt++] = (front_entry){c, f[lo].sum + c, i, (int)lo};
                    }
                    for (; e < n; e++)
                        if (!above(p, f[e].max, f[e].sum + c, rm, rs, thr))
                            ws->tmp[nt++] = (front_entry){f[e].max, f[e].sum + c, i, (int)e};
                    if (nt == r0) continue;
                    ws->run_pos[nr] = r0;
                    ws->run_end[nr++] = nt;
                }
            }
            if (nt == 0) continue;
            /* Pareto front: with max ascending, keep an entry only when its sum is strictly below every kept one. */
            PS_TRY(ps_grow((void **)&ws->ent, &ws->ent_cap, used + nt, sizeof(front_entry)));
            for (size_t r = 0; r < nr; r++) ws->heap[r] = (int)r;
            for (size_t r = nr / 2; r-- > 0;) heap_down(ws, nr, r);
            double lowest = INFINITY;
            size_t nh = nr;
            while (nh > 0) {
                int r = ws->heap[0];
                const front_entry *x = &ws->tmp[ws->run_pos[r]];
                size_t pos = ws->run_pos[r] + 1, end = ws->run_end[r];
                if (x->sum < lowest) {
                    lowest = x->sum;
                    ws->ent[used++] = *x;
                    ws->len[kj]++;
                } else {
                    /* A run's sums never increase, and lowest only falls: the run's entries up to the first one
                     * below lowest would all be dropped when their turn came. Skip them. */
                    size_t hi = end;
                    while (pos < hi) {
                        size_t mid = pos + (hi - pos) / 2;
                        if (ws->tmp[mid].sum < lowest) hi = mid;
                        else pos = mid + 1;
                    }
                }
                ws->run_pos[r] = pos;
                if (pos == end) ws->heap[0] = ws->heap[--nh];
                heap_down(ws, nh, 0);
            }
        }
    }
    size_t last = (size_t)(K - 1) * N + (size_t)L;
    const front_entry *f = ws->ent + ws->start[last];
    int be = -1;
    for (int64_t e = 0; e < ws->len[last]; e++) {
        double obj = p->weight_max * f[e].max + f[e].sum;
        if (obj < *best) {
            *best = obj;
            be = (int)e;
        }
    }
    if (be < 0) return PS_OK;
    cuts[K] = L;
    int j = L, e = be;
    for (int k = K - 1; k >= 0; k--) {
        const front_entry *x = ws->ent + ws->start[(size_t)k * N + (size_t)j] + e;
        cuts[k] = x->prev_i;
        j = x->prev_i;
        e = x->prev_idx;
    }
    cuts[0] = 0;
#undef COST
    return PS_OK;
}

double ps_pdp_pipeline_objective(const ps_pdp_problem *p, const int64_t *cuts)
{
    size_t N = (size_t)p->n_layers + 1;
    double worst = 0, prefix = 0, m = p->weight_max + 1;
    for (int k = 0; k < p->n_stages; k++) {
        double c = p->cost[((size_t)k * N + (size_t)cuts[k]) * N + (size_t)cuts[k + 1]];
        if (!isfinite(c)) return INFINITY;
        worst = fmax(worst, prefix + m * c);
        prefix += c;
    }
    return worst;
}

bool ps_pdp_pipeline_walk(const ps_pdp_problem *p, int64_t *cuts)
{
    int K = p->n_stages;
    double cur = ps_pdp_pipeline_objective(p, cuts);
    bool moved = false;
    for (size_t it = 0; it < (size_t)K * ((size_t)p->n_layers + 1) && isfinite(cur); it++) {
        int bb = 0, bd = 0;
        double best = cur;
        for (int b = 1; b < K; b++)
            for (int d = -1; d <= 1; d += 2) {
                int64_t at = cuts[b] + d;
                if (at <= cuts[b - 1] || at >= cuts[b + 1]) continue; /* both stages keep a layer */
                int64_t keep = cuts[b];
                cuts[b] = at;
                double v = ps_pdp_pipeline_objective(p, cuts);
                cuts[b] = keep;
                if (v < best) {
                    best = v;
                    bb = b;
                    bd = d;
                }
            }
        if (bb == 0) break;
        cuts[bb] += bd;
        cur = best;
        moved = true;
    }
    return moved;
}

double ps_pdp_objective(const ps_pdp_problem *p, const int64_t *cuts)
{
    size_t N = (size_t)p->n_layers + 1;
    double mx = 0, sum = 0;
    for (int k = 0; k < p->n_stages; k++) {
        double c = p->cost[((size_t)k * N + (size_t)cuts[k]) * N + (size_t)cuts[k + 1]];
        if (!isfinite(c)) return INFINITY;
        mx = c > mx ? c : mx;
        sum = k == 0 ? c : sum + c;
    }
    return p->weight_max * mx + sum;
}

ps_status ps_pdp_minmax(ps_pdp_ws *ws, const ps_pdp_problem *p, double *best, int64_t *cuts)
{
    *best = INFINITY;
    int K = p->n_stages, L = p->n_layers;
    PS_CHECK_INPUT(K >= 1 && L >= 1, "min-max partition DP: %d stages, %d layers", K, L);
    if (K > L) return PS_OK;
    size_t N = (size_t)L + 1;
    PS_TRY(ps_grow((void **)&ws->suffix, &ws->suffix_cap, ((size_t)K + 1) * N, sizeof(double)));
#define COST(k, i, j) p->cost[((size_t)(k) * N + (size_t)(i)) * N + (size_t)(j)]
#define SUF(k, i) ws->suffix[(size_t)(k) * N + (size_t)(i)]
    /* Suffix form (stages k..K-1 hold [i, L)), so that the forward walk below can take the smallest cut at every
     * stage that still reaches the optimum: the lexicographically smallest optimal cuts (ps_pdp_solve's ties follow
     * its fronts' order instead). */
    for (size_t i = 0; i < N; i++) SUF(K, i) = i == (size_t)L ? -INFINITY : INFINITY;
    for (int k = K - 1; k >= 0; k--)
        for (int i = 0; i <= L; i++) {
            double b = INFINITY;
            /* stage k needs a layer, and the K-1-k later stages one each; the k earlier ones a layer each too, so a
             * start below k (or a start of stage 0 past 0) is no partition's: never read */
            for (int j = i + 1; j <= L - (K - 1 - k) && ps_pdp_entry_used(K, L, k, i, j); j++) {
                double c = COST(k, i, j), rest = SUF(k + 1, j);
                double v = c > rest ? c : rest;
                if (v < b) b = v;
            }
            SUF(k, i) = b;
        }
    *best = SUF(0, 0);
    if (!isfinite(*best)) {
        *best = INFINITY;
        return PS_OK;
    }
    cuts[0] = 0;
    int i = 0;
    for (int k = 0; k < K; k++) {
        int pick = -1;
        for (int j = i + 1; j <= L - (K - 1 - k) && pick < 0; j++) {
            double c = COST(k, i, j), rest = SUF(k + 1, j);
            if (c <= *best && rest <= *best) pick = j;
        }
        if (pick < 0) return PS_FAIL(PS_ERR_SYSTEM, "min-max partition DP lost its optimum at stage %d", k);
        cuts[k + 1] = pick;
        i = pick;
    }
#undef SUF
#undef COST
    return PS_OK;
}

/* Galvatron-BMW Sec. IV-B / App. B: start from the memory-balanced partition and move one boundary layer at a time
 * out of the slowest stage into a neighbour, as long as the pair's slower stage gets faster and both still fit in
 * memory (C is finite only where some strategy fits: the paper's Validate). Every accepted move lowers the sorted
 * vector of stage times, so the walk ends; it stops at the first partition no single move improves. */
void ps_pdp_balance_walk(const ps_pdp_problem *p, int64_t *cuts)
{
    const double *C = p->cost;
    int K = p->n_stages;
    size_t N = (size_t)p->n_layers + 1;
#define T(k, i, j) C[((size_t)(k) * N + (size_t)(i)) * N + (size_t)(j)]
    for (size_t it = 0; it < (size_t)K * N; it++) {
        int ks = 0;
        double tmax = -1;
        for (int k = 0; k < K; k++) {
            double t = T(k, cuts[k], cuts[k + 1]);
            if (t > tmax) {
                tmax = t;
                ks = k;
            }
        }
        double best = tmax;
        int move = 0; /* -1: first layer of ks to ks-1; +1: last layer of ks to ks+1 */
        if (ks > 0 && cuts[ks + 1] - cuts[ks] > 1) {
            double v = fmax(T(ks - 1, cuts[ks - 1], cuts[ks] + 1), T(ks, cuts[ks] + 1, cuts[ks + 1]));
            if (v < best) {
                best = v;
                move = -1;
            }
        }
        if (ks < K - 1 && cuts[ks + 1] - cuts[ks] > 1) {
            double v = fmax(T(ks, cuts[ks], cuts[ks + 1] - 1), T(ks + 1, cuts[ks + 1] - 1, cuts[ks + 2]));
            if (v < best) {
                best = v;
                move = 1;
            }
        }
        if (move == 0) break;
        if (move < 0)
            cuts[ks]++;
        else
            cuts[ks + 1]--;
    }
#undef T
}


/* The layer DP and the partition DP (see ps_kernels.h). Workspaces grow geometrically and are reused, so a search
 * loop stops allocating after its first few calls. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ps_kernels.h"

/* ---- layer DP ------------------------------------------------------------------------------------------------- */

struct ps_ldp_ws {
    double *cost;  /* [2][B+1][S]: best time of layers 0..l using exactly m quanta, ending in strategy s; two rows
                      (l - 1 and l) are enough, the path is rebuilt from `back` */
    size_t cost_cap;
    int *back;     /* [L][B+1][Lay]: for l >= 1, the strategy of layer l-1 on the best arrival into layout b with m
                      quanta used by layers 0..l-1 (-1: none). A layer's strategy s of memory w reached level m from
                      back[l][m - w][layout(s)]: Lay back-pointers per level instead of S, the table's bulk. */
    size_t back_cap;
    double *lay;   /* [B+1][Lay]: best over the strategies of one layout at the previous layer */
    int *lay_arg;
    size_t lay_cap, lay_arg_cap;
    double *into;  /* [B+1][Lay]: best arrival into a layout (resharding included) */
    size_t into_cap;
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
    free(ws);
}

ps_status ps_ldp_solve(ps_ldp_ws *ws, const ps_ldp_problem *p, int64_t budget, double *best, int *choice)
{
    *best = INFINITY;
    int L = p->n_layers, S = p->n_strat, Lay = p->n_layouts;
    PS_CHECK_INPUT(L >= 1 && S >= 1 && Lay >= 1, "layer DP: empty problem (%d layers, %d strategies, %d layouts)", L,
                   S, Lay);
    if (budget < 0) return PS_OK;
    /* The table is L x (B+1) x S; a budget of millions of quanta would be a unit mistake, not a finer answer. */
    PS_CHECK_INPUT(budget <= (1 << 20), "layer DP: memory budget of %lld quanta is too fine (at most 2^20)",
                   (long long)budget);
    size_t B = (size_t)budget + 1, row = B * (size_t)S, BL = B * (size_t)Lay;
    PS_TRY(ps_grow((void **)&ws->cost, &ws->cost_cap, 2 * row, sizeof(double)));
    PS_TRY(ps_grow((void **)&ws->back, &ws->back_cap, (size_t)L * BL, sizeof(int)));
    PS_TRY(ps_grow((void **)&ws->lay, &ws->lay_cap, BL, sizeof(double)));
    PS_TRY(ps_grow((void **)&ws->lay_arg, &ws->lay_arg_cap, BL, sizeof(int)));
    PS_TRY(ps_grow((void **)&ws->into, &ws->into_cap, BL, sizeof(double)));
    double *prev = ws->cost, *cur = ws->cost + row;
    for (size_t i = 0; i < row; i++) cur[i] = INFINITY;
    for (int s = 0; s < S; s++) {
        int64_t m = p->mem[s];
        if (m >= 0 && m <= budget && isfinite(p->time[s])) cur[(size_t)m * (size_t)S + (size_t)s] = p->time[s];
    }
    for (int l = 1; l < L; l++) {
        double *t0 = prev;
        prev = cur;
        cur = t0;
        /* Best per layout at layer l-1 and each memory level: resharding depends only on the two layouts, so the
         * transition is O(S x layouts), not O(S^2). Strict < keeps the smallest strategy index on ties. */
        for (size_t k = 0; k < BL; k++) {
            ws->lay[k] = INFINITY;
            ws->lay_arg[k] = -1;
        }
        /* levels below the least memory layers 0..l-1 can use are unreachable: start at the first finite one */
        size_t mlo = B;
        for (size_t m = 0; m < B && mlo == B; m++)
            for (int s = 0; s < S; s++)
                if (prev[m * (size_t)S + (size_t)s] < INFINITY) {
                    mlo = m;
                    break;
                }
        for (size_t m = mlo; m < B; m++) {
            const double *cm = prev + m * (size_t)S;
            double *lm = ws->lay + m * (size_t)Lay;
            int *am = ws->lay_arg + m * (size_t)Lay;
            for (int s = 0; s < S; s++) {
                int a = p->layout[s];
                if (cm[s] < lm[a]) {
                    lm[a] = cm[s];
                    am[a] = s;
                }
            }
        }
        /* Into each target layout b: min over source layouts a of lay + reshard(a, b), once per memory level, so
         * the strategy loop below is O(S x B) instead of O(S x B x layouts). Ties keep the lowest a. */
        int *back = ws->back + (size_t)l * BL;
        for (size_t k = 0; k < mlo * (size_t)Lay && k < BL; k++) {
            ws->into[k] = INFINITY;
            back[k] = -1;
        }
        for (size_t m = mlo; m < B; m++)
            for (int b = 0; b < Lay; b++) {
                double bestc = INFINITY;
                int arg = -1;
                for (int a = 0; a < Lay; a++) {
                    double c = ws->lay[m * (size_t)Lay + (size_t)a];
                    if (!isfinite(c)) continue;
                    c = c + (p->reshard ? p->reshard[a * Lay + b] : 0.0);
                    if (c < bestc) {
                        bestc = c;
                        arg = ws->lay_arg[m * (size_t)Lay + (size_t)a];
                    }
                }
                ws->into[m * (size_t)Lay + (size_t)b] = bestc;
                back[m * (size_t)Lay + (size_t)b] = arg;
            }
        for (size_t i = 0; i < row; i++) cur[i] = INFINITY;
        const double *t = p->time + (size_t)l * (size_t)S;
        const int64_t *mm = p->mem + (size_t)l * (size_t)S;
        for (int s = 0; s < S; s++) {
            if (!isfinite(t[s]) || mm[s] < 0 || mm[s] > budget) continue;
            size_t b = (size_t)p->layout[s];
            for (size_t m = (size_t)mm[s] + mlo; m < B; m++) {
                size_t pm = m - (size_t)mm[s];
                if (back[pm * (size_t)Lay + b] < 0) continue;
                cur[m * (size_t)S + (size_t)s] = ws->into[pm * (size_t)Lay + b] + t[s];
            }
        }
    }
    /* Smallest cost; ties: least memory, then smallest strategy index. */
    size_t bm = 0;
    int bs = -1;
    for (size_t m = 0; m < B; m++)
        for (int s = 0; s < S; s++)
            if (cur[m * (size_t)S + (size_t)s] < *best) {
                *best = cur[m * (size_t)S + (size_t)s];
                bm = m;
                bs = s;
            }
    if (bs < 0) return PS_OK;
    for (int l = L - 1; l >= 0; l--) {
        choice[l] = bs;
        if (l > 0) {
            bm -= (size_t)p->mem[(size_t)l * (size_t)S + (size_t)bs];
            bs = ws->back[(size_t)l * BL + bm * (size_t)Lay + (size_t)p->layout[bs]];
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
    front_entry *tmp;   /* candidates of one (k, j) before pruning */
    size_t tmp_cap;
    double *suffix;     /* min-max DP: [K][L+1] best max over stages k..K-1 covering [i, L) */
    size_t suffix_cap;
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
    free(ws->suffix);
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
#define COST(k, i, j) p->cost[((size_t)(k) * N + (size_t)(i)) * N + (size_t)(j)]
    for (int k = 0; k < K; k++) {
        for (int j = 0; j <= L; j++) {
            size_t kj = (size_t)k * N + (size_t)j;
            ws->start[kj] = (int64_t)used;
            ws->len[kj] = 0;
            /* stage k ends at j: needs k earlier stages of >= 1 layer and L - j layers for the K-1-k later ones */
            if (j < k + 1 || L - j < K - 1 - k) continue;
            size_t nt = 0;
            if (k == 0) {
                double c = COST(0, 0, j);
                if (isfinite(c)) {
                    PS_TRY(ps_grow((void **)&ws->tmp, &ws->tmp_cap, 1, sizeof(front_entry)));
                    ws->tmp[nt++] = (front_entry){c, c, 0, -1};
                }
            } else {
                for (int i = k; i < j; i++) {
                    double c = COST(k, i, j);
                    if (!isfinite(c)) continue;
                    size_t pk = (size_t)(k - 1) * N + (size_t)i;
                    int64_t n = ws->len[pk];
                    PS_TRY(ps_grow((void **)&ws->tmp, &ws->tmp_cap, nt + (size_t)n, sizeof(front_entry)));
                    const front_entry *f = ws->ent + ws->start[pk];
                    for (int64_t e = 0; e < n; e++)
                        ws->tmp[nt++] = (front_entry){f[e].max > c ? f[e].max : c, f[e].sum + c, i, (int)e};
                }
            }
            if (nt == 0) continue;
            qsort(ws->tmp, nt, sizeof *ws->tmp, cmp_entry);
            /* Pareto front: with max ascending, keep an entry only when its sum is strictly below every kept one. */
            PS_TRY(ps_grow((void **)&ws->ent, &ws->ent_cap, used + nt, sizeof(front_entry)));
            double lowest = INFINITY;
            for (size_t e = 0; e < nt; e++)
                if (ws->tmp[e].sum < lowest) {
                    lowest = ws->tmp[e].sum;
                    ws->ent[used++] = ws->tmp[e];
                    ws->len[kj]++;
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
            /* stage k needs a layer, and the K-1-k later stages one each */
            for (int j = i + 1; j <= L - (K - 1 - k); j++) {
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


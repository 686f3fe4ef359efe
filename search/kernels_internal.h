/* The search's dynamic programs on plain arrays: pure C, no MPI, no I/O, allocation only in the workspace.
 *  - layer DP (Galvatron-BMW Sec. IV-A): one strategy per layer of a stage, minimising time plus resharding under a
 *    memory budget;
 *  - partition DP (AMP Sec. 3.5, with memory enforced through infeasible stage costs): cut points minimising the
 *    pipeline objective (m-1) * max_k c_k + sum_k c_k (AMP Eq. 5, Galvatron-BMW Eq. 5).
 * Both are exact for their objective: tests/search compares them with brute-force enumeration. */
#ifndef PS_SEARCH_KERNELS_INTERNAL_H
#define PS_SEARCH_KERNELS_INTERNAL_H

#include <stdint.h>

#include "ps_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- layer DP ---- */
typedef struct {
    int n_layers;
    int n_strat;
    const double *time;     /* [n_layers * n_strat] seconds per iteration of the layer under strategy s; INFINITY =
                               not allowed */
    const int64_t *mem;     /* [n_layers * n_strat] memory in quanta (already rounded up: never under-counts) */
    int n_layouts;          /* activation layouts (tp, sp): resharding is free between strategies of one layout */
    const int *layout;      /* [n_strat] layout of each strategy */
    const double *reshard;  /* [n_layouts * n_layouts] seconds to move the boundary activation from layout a to b
                               (0 on the diagonal); NULL = free */
} ps_ldp_problem;

typedef struct ps_ldp_ws ps_ldp_ws;
ps_status ps_ldp_create(ps_ldp_ws **out) PS_NODISCARD;
void ps_ldp_destroy(ps_ldp_ws *ws);

/* Minimise sum time + sum reshard over strategy choices with sum mem <= budget (quanta). On success *best is the
 * optimum and choice[l] the strategy of layer l; when nothing fits, *best = INFINITY and PS_OK (not an error: the
 * caller tries other plans). Ties (deterministic, not lexicographic): the least total memory, then the smallest
 * strategy index at the last layer; earlier layers take the first optimum met in strategy-index order. */
ps_status ps_ldp_solve(ps_ldp_ws *ws, const ps_ldp_problem *p, int64_t budget, double *best, int *choice)
    PS_NODISCARD;

/* Problems solved and answered from the workspace's memo of recent identical problems, since it was created. */
void ps_ldp_stats(const ps_ldp_ws *ws, int64_t *calls, int64_t *hits);

/* ---- partition DP ---- */
/* cost(k, i, j): time of stage k holding layers [i, j) (INFINITY when it does not fit). Dense table, index
 * (k * (L + 1) + i) * (L + 1) + j, of which only the entries some partition uses are read: i = 0 for stage 0, k <= i
 * for the others, and j <= L - (K - 1 - k) (every stage holds a layer); the others may hold anything. */
typedef struct {
    int n_stages;        /* K */
    int n_layers;        /* L */
    const double *cost;  /* [K * (L+1) * (L+1)] */
    double weight_max;   /* m - 1: how often the slowest stage repeats (micro-batches - 1) */
    double upper;        /* ps_pdp_solve: the objective some partition is known to reach (an even split, say), so
                            that partial partitions already above it are dropped; <= 0 or INFINITY: none known. The
                            result does not depend on it as long as it is not below the optimum. */
} ps_pdp_problem;

/* Whether cost(k, i, j) is an entry some partition of L layers into K stages uses (every stage holds a layer): the
 * only entries the partition DPs read, and the only ones the search's stage tables fill. */
static inline bool ps_pdp_entry_used(int K, int64_t L, int k, int64_t i, int64_t j)
{
    return (k == 0 ? i == 0 : i >= k) && i < j && j <= L - (K - 1 - k);
}

typedef struct ps_pdp_ws ps_pdp_ws;
ps_status ps_pdp_create(ps_pdp_ws **out) PS_NODISCARD;
void ps_pdp_destroy(ps_pdp_ws *ws);

/* Minimise weight_max * max_k c_k + sum_k c_k over cuts 0 = cuts[0] < cuts[1] < ... < cuts[K] = L (every stage
 * non-empty). *best = INFINITY when no partition fits. Exact: keeps, for every (stage, end layer), the Pareto
 * front of (max, sum) pairs. Ties (deterministic, not lexicographic): the first optimum in the front's order (max, then
 * sum, then where the last stage starts). */
ps_status ps_pdp_solve(ps_pdp_ws *ws, const ps_pdp_problem *p, double *best, int64_t *cuts) PS_NODISCARD;

/* weight_max x max_k c_k + sum_k c_k of given cuts, summed in stage order as ps_pdp_solve does (INFINITY when a
 * stage does not fit): what to pass as `upper`. */
double ps_pdp_objective(const ps_pdp_problem *p, const int64_t *cuts);

/* Minimise max_k c_k over the cuts (weight_max ignored): CAPTURE's objective when c is a stage's peak memory, and the
 * memory-balanced start of Galvatron-BMW's bi-objective walk (Sec. IV-B). *best = INFINITY when nothing fits, as in
 * ps_pdp_solve; ties, unlike there: the lexicographically smallest cuts. O(K L^2). */
ps_status ps_pdp_minmax(ps_pdp_ws *ws, const ps_pdp_problem *p, double *best, int64_t *cuts) PS_NODISCARD;

/* Galvatron-BMW's bi-objective walk (Sec. IV-B, App. B) from a partition where every stage is finite (typically the
 * memory-balanced one from ps_pdp_minmax over memory): repeatedly move one boundary layer out of the slowest stage
 * (cost = time) into a neighbour while that lowers the pair's larger time and both stay finite (fit). Ends at a
 * partition no such single move improves; never makes the largest stage time worse. weight_max is ignored. */
void ps_pdp_balance_walk(const ps_pdp_problem *p, int64_t *cuts);

/* max_d (sum_{k<d} c_k + (weight_max + 1) c_d) of given cuts (INFINITY when a stage does not fit): with c a stage's
 * F + B + W time and weight_max + 1 the micro-batches, about the makespan of 1F1B and its kin (the stages before the
 * busiest one fill the pipeline, the busiest then runs every micro-batch; ps_search_pipeline_lb), where the DP's
 * objective charges every stage's fill. */
double ps_pdp_pipeline_objective(const ps_pdp_problem *p, const int64_t *cuts);
/* From a partition where every stage is finite (typically ps_pdp_solve's), repeatedly take the single move of one
 * boundary by one layer that lowers ps_pdp_pipeline_objective most (ties: the first boundary, moved down before up),
 * while the stages stay non-empty and finite. Ends at a partition no such move improves; never raises the objective.
 * Returns whether it moved. At most K x (L + 1) moves. */
bool ps_pdp_pipeline_walk(const ps_pdp_problem *p, int64_t *cuts);

#ifdef __cplusplus
}
#endif
#endif

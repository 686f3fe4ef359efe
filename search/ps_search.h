/* The plan search: global batch x pipeline degree x schedule x micro-batch count x partition x strategies, each
 * candidate costed with the cost model (costdb/) and the best ones kept. Pure: no MPI and no I/O here; mpi/ and cli/
 * split the candidate list across ranks (opts.rank / opts.nranks) and reduce the results. */
#ifndef PS_SEARCH_H
#define PS_SEARCH_H

#include <stdint.h>

#include "ps_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t gbs_lo, gbs_hi, gbs_step; /* global batch sizes tried: lo, lo+step, ..., hi (lo == hi: fixed) */
    int64_t mbs_max;                  /* largest micro-batch per data-parallel replica tried [16] */
    int max_tp;                       /* largest tensor-parallel degree; 0 = the GPUs of a node (TP stays inside a
                                         node: Galvatron-BMW Takeaway #1, Megatron practice) */
    const char *const *schedules;     /* schedule kinds tried; NULL = every kind of schedules/ */
    int n_schedules;
    int top_k;                        /* plans kept [5] */
    int per_layer;                    /* refine each candidate's stages with the per-layer strategy DP [1] */
    int quanta;                       /* memory levels of the per-layer DP [256] */
    int rank, nranks;                 /* this rank's share of the candidates: index % nranks == rank [0, 1] */
} ps_search_opts;

void ps_search_opts_default(ps_search_opts *o);

typedef struct {
    ps_plan plan;
    ps_prediction pred;
    int64_t index;        /* position in the enumeration: the last tie-breaker, so results do not depend on ranks or
                             threads */
} ps_search_cand;

typedef struct {
    ps_search_cand *top;  /* best first: highest samples/s; ties by lower peak memory, then by index */
    int n_top;
    int64_t candidates;   /* (batch, pp, schedule, micro-batches) combinations on this rank */
    int64_t evaluated;    /* plans costed with the full model (schedule simulation) */
    int64_t feasible;     /* of those, plans that fit in memory */
    double dp_cells;      /* dynamic-programming cells visited (stage tables, partition fronts, layer DPs) */
    char binding[320];    /* when nothing fits: the constraint that bound (memory, divisibility, batch) */
} ps_search_result;

/* Search. PS_OK with n_top == 0 when nothing is feasible (binding says why): the caller turns that into exit 1. */
ps_status ps_search_run(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, const ps_search_opts *o,
                        ps_search_result *out) PS_NODISCARD;
void ps_search_result_free(ps_search_result *r);

/* The total order of results: a before b when it is faster, then lighter, then earlier in the enumeration. */
int ps_search_cand_cmp(const ps_search_cand *a, const ps_search_cand *b);

#ifdef __cplusplus
}
#endif
#endif

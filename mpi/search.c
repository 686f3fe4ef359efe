/* The search across ranks (see ps_mpi.h).
 *
 * Work units are the search's (global batch, pipeline degree, schedule, micro-batch count) combinations: thousands
 * per search, each a few microseconds (pruned) to a few hundred milliseconds (pp 64 with hundreds of micro-batches),
 * so they are small enough to balance and each is a whole set of DP tables, large enough for the kernels.
 *
 * One window on rank 0 holds a unit counter (int64, MPI_SUM through MPI_Rget_accumulate) and the two pruning floors
 * (doubles, MPI_MAX through MPI_Rget_accumulate), in one passive-target epoch (MPI_Win_lock_all) for the whole search.
 *
 * The reduction: each rank contributes its top k and its best even-split plan as fixed-size keys (the fields of the
 * total order, and where the plan lives); a user-defined, commutative MPI_Op merges two key lists in that order.
 * Every rank learns which of its plans won and sends just those (as plan JSON) to rank 0, which re-costs them with
 * its own cost model and checks it gets the same numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "ps_comm.h"
#include "ps_mpi.h"

const char *ps_dist_name(ps_dist d) { return d == PS_DIST_STATIC ? "static" : "dynamic"; }

int ps_dist_find(const char *name)
{
    if (strcmp(name, "dynamic") == 0) return PS_DIST_DYNAMIC;
    if (strcmp(name, "static") == 0) return PS_DIST_STATIC;
    return -1;
}

/* ---- the reduction ---- */
/* One plan as the total order sees it (ps_search_key), and where it lives. k.index < 0: an empty slot, after every
 * plan. */
typedef struct {
    ps_search_key k;
    int32_t rank, slot;      /* slot: position in that rank's top k, or -1 for its even-split plan */
    int32_t objective, pad;  /* the op has no other way to learn the objective */
} key;

/* The search's own order (ps_search_key_order), with empty slots last. */
static int key_order(const key *a, const key *b)
{
    if (a->k.index < 0 || b->k.index < 0) return (a->k.index < 0) - (b->k.index < 0);
    return ps_search_key_order(&a->k, &b->k, a->objective);
}

/* inout = merge(in, inout): each element is k top keys in order, then one even-split key. Commutative and
 * associative, because key_order is a total order (indices are unique), so any reduction tree gives the same list. */
static void merge_op(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int bytes = 0;
    MPI_Type_size(*dt, &bytes);
    int k = bytes / (int)sizeof(key) - 1;
    key tmp[1001];
    for (int e = 0; e < *len; e++) {
        key *a = (key *)in + (size_t)e * (size_t)(k + 1), *b = (key *)inout + (size_t)e * (size_t)(k + 1);
        int i = 0, j = 0;
        for (int x = 0; x < k; x++) tmp[x] = key_order(&a[i], &b[j]) <= 0 ? a[i++] : b[j++];
        memcpy(b, tmp, (size_t)k * sizeof *b);
        if (key_order(&a[k], &b[k]) < 0) b[k] = a[k];
    }
}

static key key_of(const ps_search_cand *c, int rank, int slot, int objective)
{
    return (key){ps_search_cand_key(c), rank, slot, objective, 0};
}

/* ---- unit sources ---- */
/* The dynamic source takes guided chunks (Polychronopoulos & Kuck 1987: a share of the units left, shrinking to one
 * unit at the end) and asks for the next chunk as soon as it starts the current one, with request-based RMA
 * (MPI_Rget_accumulate, MPI_SUM on the counter), so a rank rarely waits for rank 0: with networks or shared-memory
 * windows that do the atomics without the target (InfiniBand, osc/sm) the answer is there at once, and where the
 * target must take part (osc/rdma over TCP, or over shared memory without hardware atomics) it arrives whenever
 * rank 0 next calls MPI, while this rank computes. Floors go the same way (MPI_MAX on two doubles), completed by
 * MPI_Test at a later exchange. Measured with bench/scaling: blocking MPI_Fetch_and_op per unit spent about half
 * of every rank's time in MPI on this 2-core host (rank 0 answers only between its own units). */
typedef struct {
    MPI_Win win;          /* MPI_WIN_NULL where MPI's thread level forbids one: static units, no floor sharing */
    ps_dist dist;
    int64_t n;            /* units in the job */
    int workers;          /* threads over all ranks: the guided chunk divides the units left by 2 x this */
    int64_t *mine;        /* the units this rank took (static: assigned), in order */
    int64_t n_mine, next_mine;
    int64_t q_next, q_end;        /* dynamic: the chunk being handed out */
    MPI_Request pre;              /* dynamic: the next chunk, asked for ahead */
    int64_t pre_size, pre_got;
    int done;                     /* the counter passed the last unit */
    MPI_Request share_req;        /* a floor exchange in flight */
    double share_out[2], share_in[2];
    double mpi_s, last_share;
    ps_status err;        /* the first MPI failure: the source then stops handing out units */
    const ps_mpi_poll *poll; /* the caller's, before each unit (NULL: none) */
} source;

enum { OFF_COUNTER = 0, OFF_TOP = 8, OFF_EVEN = 16, WIN_BYTES = 24 };
/* Floors are sent at most this often per rank (seconds): they matter while the first good plans are found; a message
 * per unit would cost more than the pruning it buys on small units. */
#define SHARE_INTERVAL_S 0.02

static void mpi_fail(source *s, int rc, const char *what)
{
    if (s->err == PS_OK) s->err = ps_mpi_status(rc, what, __FILE__, __LINE__);
}

/* Ask rank 0 for the next chunk, sized from the units left after the one just received. */
static void ask_chunk(source *s, int64_t seen)
{
    int64_t left = s->n - seen;
    s->pre_size = left / (2 * (int64_t)s->workers);
    if (s->pre_size < 1) s->pre_size = 1;
    int rc = MPI_Rget_accumulate(&s->pre_size, 1, MPI_INT64_T, &s->pre_got, 1, MPI_INT64_T, 0, OFF_COUNTER, 1,
                                 MPI_INT64_T, MPI_SUM, s->win, &s->pre);
    if (rc != MPI_SUCCESS) mpi_fail(s, rc, "MPI_Rget_accumulate");
}

static int64_t next_unit(void *arg)
{
    source *s = arg;
    if (s->err != PS_OK) return -1;
    if (s->poll) s->poll->fn(s->poll->arg);
    if (s->dist == PS_DIST_STATIC) return s->next_mine < s->n_mine ? s->mine[s->next_mine++] : -1;
    if (s->q_next >= s->q_end) {
        if (s->done) return -1;
        double t0 = MPI_Wtime();
        if (s->pre == MPI_REQUEST_NULL) ask_chunk(s, 0); /* the first call */
        int rc = s->err == PS_OK ? MPI_Wait(&s->pre, MPI_STATUS_IGNORE) : MPI_SUCCESS;
        if (rc != MPI_SUCCESS) mpi_fail(s, rc, "MPI_Wait");
        if (s->err == PS_OK && s->pre_got < s->n) {
            s->q_next = s->pre_got;
            s->q_end = s->pre_got + s->pre_size < s->n ? s->pre_got + s->pre_size : s->n;
            ask_chunk(s, s->q_end);
        } else {
            s->done = 1;
        }
        s->mpi_s += MPI_Wtime() - t0;
        if (s->done || s->err != PS_OK) return -1;
    }
    s->mine[s->n_mine++] = s->q_next; /* for the statistics: the estimated work this rank took */
    return s->q_next++;
}

/* What next_unit would return without a call to MPI: the rest of the chunk (or of the static share); -1 past it. */
static int64_t peek_unit(void *arg)
{
    const source *s = arg;
    if (s->err != PS_OK) return -1;
    if (s->dist == PS_DIST_STATIC) return s->next_mine < s->n_mine ? s->mine[s->next_mine] : -1;
    return s->q_next < s->q_end ? s->q_next : -1;
}

static void share(void *arg, double *top, double *even)
{
    source *s = arg;
    if (s->win == MPI_WIN_NULL || s->err != PS_OK) return;
    double t0 = MPI_Wtime();
    if (s->share_req != MPI_REQUEST_NULL) {
        int flag = 0;
        int rc = MPI_Test(&s->share_req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) mpi_fail(s, rc, "MPI_Test");
        if (flag) { /* the maxima rank 0 held before our last values joined them */
            *top = fmax(*top, s->share_in[0]);
            *even = fmax(*even, s->share_in[1]);
        }
    }
    if (s->share_req == MPI_REQUEST_NULL && s->err == PS_OK && t0 - s->last_share >= SHARE_INTERVAL_S) {
        s->last_share = t0;
        s->share_out[0] = *top;
        s->share_out[1] = *even;
        /* the two floors are adjacent: one accumulate raises both and returns the old maxima */
        int rc = MPI_Rget_accumulate(s->share_out, 2, MPI_DOUBLE, s->share_in, 2, MPI_DOUBLE, 0, OFF_TOP, 2,
                                     MPI_DOUBLE, MPI_MAX, s->win, &s->share_req);
        if (rc != MPI_SUCCESS) mpi_fail(s, rc, "MPI_Rget_accumulate");
    }
    s->mpi_s += MPI_Wtime() - t0;
}

/* Complete what is in flight before the epoch ends (an error or the end left a request). */
static void source_drain(source *s)
{
    if (s->pre != MPI_REQUEST_NULL) MPI_Wait(&s->pre, MPI_STATUS_IGNORE);
    if (s->share_req != MPI_REQUEST_NULL) MPI_Wait(&s->share_req, MPI_STATUS_IGNORE);
}

typedef struct {
    double w;
    int64_t i;
} unit_work;

static int by_work_desc(const void *pa, const void *pb)
{
    const unit_work *a = pa, *b = pb;
    if (a->w != b->w) return a->w > b->w ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int by_index(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* Longest processing time first (Graham 1969: within 4/3 of the optimal makespan): the heaviest unit goes to the
 * least loaded rank (lowest rank on ties). Every rank computes the same assignment from the same estimates. */
static ps_status assign_static(const ps_search_job *j, int rank, int nranks, source *s)
{
    int64_t n = ps_search_job_units(j);
    unit_work *u = ps_calloc((size_t)n + 1, sizeof *u);
    double *load = ps_calloc((size_t)nranks, sizeof *load);
    s->mine = ps_calloc((size_t)n + 1, sizeof *s->mine);
    if (!u || !load || !s->mine) {
        free(u);
        free(load);
        return PS_FAIL(PS_ERR_SYSTEM, "out of memory assigning %lld work units", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) u[i] = (unit_work){ps_search_job_unit_work(j, i), i};
    qsort(u, (size_t)n, sizeof *u, by_work_desc);
    for (int64_t x = 0; x < n; x++) {
        int best = 0;
        for (int r = 1; r < nranks; r++)
            if (load[r] < load[best]) best = r;
        load[best] += u[x].w;
        if (best == rank) s->mine[s->n_mine++] = u[x].i;
    }
    /* in enumeration order: the largest batches first, whose plans raise the pruning floors early */
    qsort(s->mine, (size_t)s->n_mine, sizeof *s->mine, by_index);
    free(u);
    free(load);
    return PS_OK;
}

/* ---- results to rank 0 ---- */
static json_t *plan_entry(const ps_search_cand *c, const ps_model *m)
{
    return json_pack("{s:I, s:o}", "index", (json_int_t)c->index, "plan", ps_plan_to_json(&c->plan, m));
}

/* This rank's counters, binding, and the plans of its that won (keys), as one JSON text. */
static char *rank_json(const ps_search_result *r, const ps_model *m, const key *keys, int k, int rank)
{
    json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:f, s:s}", "candidates", (json_int_t)r->candidates, "evaluated",
                          (json_int_t)r->evaluated, "feasible", (json_int_t)r->feasible, "pruned",
                          (json_int_t)r->pruned, "dp_cells", r->dp_cells, "binding", r->binding);
    if (!j) return NULL;
    /* JSON has no infinity: no shortfall seen is no field */
    if (isfinite(r->min_over)) {
        json_object_set_new(j, "min_over", json_real(r->min_over));
        json_object_set_new(j, "min_over_bound", json_boolean(r->min_over_bound));
        json_object_set_new(j, "min_over_unit", json_integer(r->min_over_unit));
    }
    json_t *a = json_array();
    for (int x = 0; x < k; x++)
        if (keys[x].k.index >= 0 && keys[x].rank == rank)
            json_array_append_new(a, plan_entry(&r->top[keys[x].slot], m));
    json_object_set_new(j, "plans", a);
    if (keys[k].k.index >= 0 && keys[k].rank == rank)
        json_object_set_new(j, "even", plan_entry(&r->base[PS_BASE_EVEN], m));
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    return s;
}

/* Re-cost a plan a rank sent and check rank 0 gets the numbers the reduction ordered by. */
static ps_status recost(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, json_t *e, const key *want,
                        ps_search_cand *cd)
{
    memset(cd, 0, sizeof *cd);
    cd->index = json_integer_value(json_object_get(e, "index"));
    PS_TRY(ps_plan_from_json(json_object_get(e, "plan"), "search results", m, &cd->plan));
    ps_status st = ps_cost_plan(cp, m, c, &cd->plan, &cd->pred);
    if (st != PS_OK) {
        ps_plan_free(&cd->plan);
        return st;
    }
    ps_search_key got = ps_search_cand_key(cd);
    if (got.index != want->k.index || got.samples_per_s != want->k.samples_per_s || got.peak != want->k.peak) {
        ps_plan_free(&cd->plan);
        ps_prediction_free(&cd->pred);
        return PS_FAIL(PS_ERR_SYSTEM, "plan %lld from rank %d costs %.17g samples/s on rank 0, %.17g on rank %d: the "
                                      "ranks do not plan with the same inputs", (long long)want->k.index, want->rank,
                       got.samples_per_s, want->k.samples_per_s, want->rank);
    }
    return PS_OK;
}

/* Rank 0: the ranks' texts (an error from any rank wins, the lowest rank's), summed counters, and the winners put in
 * the reduced order. */
static ps_status assemble(const ps_cost_params *cp, const ps_model *m, const ps_cluster *c, const ps_search_opts *o,
                          char **texts, int n, const key *keys, ps_search_result *all)
{
    int k = o->top_k;
    memset(all, 0, sizeof *all);
    all->min_over = INFINITY;
    all->min_over_bound = 1;
    all->min_over_unit = INT64_MAX;
    json_t **js = ps_calloc((size_t)n, sizeof *js);
    if (!js) return PS_ERR_SYSTEM;
    ps_status st = PS_OK;
    for (int r = 0; r < n && st == PS_OK; r++)
        st = ps_json_load_buffer(texts[r], strlen(texts[r]), "search results", &js[r]);
    for (int r = 0; r < n && st == PS_OK; r++) {
        json_t *err = json_object_get(js[r], "error");
        if (!err) continue;
        ps_status est = (ps_status)json_integer_value(err);
        st = PS_FAIL(est > PS_OK && est <= PS_ERR_SYSTEM ? est : PS_ERR_SYSTEM, "rank %d: %s", r,
                     json_string_value(json_object_get(js[r], "message")));
    }
    if (st == PS_OK && !(all->top = ps_calloc((size_t)k + 1, sizeof *all->top))) st = PS_ERR_SYSTEM;
    for (int r = 0; r < n && st == PS_OK; r++) {
        json_t *j = js[r];
        all->candidates += json_integer_value(json_object_get(j, "candidates"));
        all->evaluated += json_integer_value(json_object_get(j, "evaluated"));
        all->feasible += json_integer_value(json_object_get(j, "feasible"));
        all->pruned += json_integer_value(json_object_get(j, "pruned"));
        all->dp_cells += json_number_value(json_object_get(j, "dp_cells"));
        /* the binding of the plan closest to fitting, whichever rank tried it (lowest rank on ties) */
        json_t *mo = json_object_get(j, "min_over");
        int mb = json_is_true(json_object_get(j, "min_over_bound"));
        int64_t mu = json_integer_value(json_object_get(j, "min_over_unit"));
        if (mo && ps_search_over_less(json_number_value(mo), mb, mu, all->min_over, all->min_over_bound,
                                      all->min_over_unit)) {
            all->min_over = json_number_value(mo);
            all->min_over_bound = mb;
            all->min_over_unit = mu;
            ps_strlcpy(all->binding, json_string_value(json_object_get(j, "binding")), sizeof all->binding);
        }
    }
    /* the winners, in the reduced order; each rank sent its own in that order */
    size_t *next = ps_calloc((size_t)n, sizeof *next);
    if (st == PS_OK && !next) st = PS_ERR_SYSTEM;
    for (int x = 0; x < k && st == PS_OK && keys[x].k.index >= 0; x++) {
        int from = keys[x].rank;
        json_t *e = from >= 0 && from < n ? json_array_get(json_object_get(js[from], "plans"), next[from]++) : NULL;
        if (!e) {
            st = PS_FAIL(PS_ERR_SYSTEM, "rank %d did not send plan %lld it holds", from, (long long)keys[x].k.index);
            break;
        }
        st = recost(cp, m, c, e, &keys[x], &all->top[x]);
        if (st == PS_OK) all->n_top++;
    }
    free(next);
    if (st == PS_OK && keys[k].k.index >= 0) {
        json_t *e = keys[k].rank >= 0 && keys[k].rank < n ? json_object_get(js[keys[k].rank], "even") : NULL;
        if (!e) st = PS_FAIL(PS_ERR_SYSTEM, "rank %d did not send its even-split plan", keys[k].rank);
        else st = recost(cp, m, c, e, &keys[k], &all->base[PS_BASE_EVEN]);
        if (st == PS_OK) all->have_base[PS_BASE_EVEN] = 1;
    }
    for (int r = 0; r < n; r++) json_decref(js[r]);
    free(js);
    if (st != PS_OK) {
        ps_search_result_free(all);
        return st;
    }
    ps_search_explain(all, o, m, c); /* nothing fits and no shortfall was seen: say why, from the summed counts */
    return PS_OK;
}

ps_status ps_mpi_search(MPI_Comm comm, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                        const ps_search_opts *o, ps_dist dist, ps_search_result *all, ps_mpi_search_stats *stats)
{
    return ps_mpi_search_polled(comm, cp, m, c, o, dist, NULL, all, stats);
}

ps_status ps_mpi_search_polled(MPI_Comm comm, const ps_cost_params *cp, const ps_model *m, const ps_cluster *c,
                               const ps_search_opts *o, ps_dist dist, const ps_mpi_poll *poll,
                               ps_search_result *all, ps_mpi_search_stats *stats)
{
    memset(all, 0, sizeof *all);
    memset(stats, 0, sizeof *stats);
    double t_start = MPI_Wtime(), t_red = 0;
    int rank = 0, nranks = 1, level = MPI_THREAD_SINGLE, nthreads = 1;
    PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_MPI(MPI_Comm_size(comm, &nranks));
    PS_MPI(MPI_Query_thread(&level));
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    /* The job's threads call the source one at a time: MPI must allow calls from any thread (SERIALIZED), unless
     * there is one thread, which is the main thread (FUNNELED). Otherwise: the static split, no messages. */
    int use_win = level >= MPI_THREAD_SERIALIZED || (nthreads == 1 && level >= MPI_THREAD_FUNNELED);
    if (!use_win) dist = PS_DIST_STATIC; /* and no floor sharing: each rank prunes with its own */

    ps_search_job *job = NULL;
    ps_status st = ps_search_job_create(cp, m, c, o, &job);
    /* Same inputs on every rank, so the same check fails everywhere; only an allocation can fail alone. */
    st = ps_mpi_agree_status(comm, st, "search set-up");
    if (st != PS_OK) {
        ps_search_job_free(job);
        return st;
    }
    int k = o->top_k;
    source src = {.win = MPI_WIN_NULL, .dist = dist, .n = ps_search_job_units(job),
                  .workers = nranks * nthreads, .pre = MPI_REQUEST_NULL, .share_req = MPI_REQUEST_NULL,
                  .last_share = -1, .poll = poll};
    ps_search_result mine;
    memset(&mine, 0, sizeof mine);
    key *keys = NULL;
    char *txt = NULL, **texts = NULL;
    int nt = 0;
    MPI_Datatype kt = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;
    if (dist == PS_DIST_STATIC) {
        st = assign_static(job, rank, nranks, &src);
    } else if (!(src.mine = ps_calloc((size_t)src.n + 1, sizeof *src.mine))) {
        st = PS_FAIL(PS_ERR_SYSTEM, "out of memory for %lld work units", (long long)src.n);
    }
    st = ps_mpi_agree_status(comm, st, "sharing out the work units");
    if (st != PS_OK) goto done;

    if (use_win) {
        void *base = NULL;
        PS_MPI_GOTO(st, MPI_Win_allocate(rank == 0 ? WIN_BYTES : 0, 1, MPI_INFO_NULL, comm, &base, &src.win), done);
        PS_MPI_GOTO(st, MPI_Win_set_errhandler(src.win, MPI_ERRORS_RETURN), done); /* errors as codes, as on comm */
        PS_MPI_GOTO(st, MPI_Win_lock_all(MPI_MODE_NOCHECK, src.win), done);
        if (rank == 0) {
            memset(base, 0, WIN_BYTES); /* counter 0, floors 0.0 (all-zero bits) */
            PS_MPI_GOTO(st, MPI_Win_sync(src.win), done);
        }
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
    }
    double t_job = MPI_Wtime();
    ps_search_source ss = {.next = next_unit, .peek = peek_unit, .share = share, .arg = &src};
    ps_status local = ps_search_job_run(job, &ss, &mine);
    if (local == PS_OK && src.err != PS_OK) {
        ps_search_result_free(&mine);
        local = src.err;
    }
    stats->busy_s = MPI_Wtime() - t_job;
    stats->units = local == PS_OK ? mine.candidates : 0;
    for (int64_t i = 0; i < src.n_mine; i++) stats->work += ps_search_job_unit_work(job, src.mine[i]);
    t_red = MPI_Wtime();
    if (src.win != MPI_WIN_NULL) {
        source_drain(&src);
        PS_MPI_GOTO(st, MPI_Win_unlock_all(src.win), done);
        PS_MPI_GOTO(st, MPI_Win_free(&src.win), done);
    }

    /* keys: this rank's top k then its even-split plan; a rank that failed (or holds none) sends empty slots */
    keys = ps_calloc((size_t)k + 1, sizeof *keys);
    st = ps_mpi_agree_status(comm, keys ? PS_OK : PS_FAIL(PS_ERR_SYSTEM, "out of memory for the search reduction"),
                             "the search reduction");
    if (st != PS_OK) goto done;
    for (int x = 0; x <= k; x++) keys[x] = (key){.k.index = -1, .rank = rank, .slot = x, .objective = o->objective};
    if (local == PS_OK) {
        for (int x = 0; x < mine.n_top; x++) keys[x] = key_of(&mine.top[x], rank, x, o->objective);
        if (mine.have_base[PS_BASE_EVEN]) keys[k] = key_of(&mine.base[PS_BASE_EVEN], rank, -1, o->objective);
    }
    PS_MPI_GOTO(st, MPI_Type_contiguous((int)(((size_t)k + 1) * sizeof(key)), MPI_BYTE, &kt), done);
    PS_MPI_GOTO(st, MPI_Type_commit(&kt), done);
    PS_MPI_GOTO(st, MPI_Op_create(merge_op, 1, &op), done);
    PS_MPI_GOTO(st, MPI_Allreduce(MPI_IN_PLACE, keys, 1, kt, op, comm), done);

    /* results (or this rank's error) to rank 0 */
    if (local == PS_OK) {
        txt = rank_json(&mine, m, keys, k, rank);
        if (!txt) local = PS_FAIL(PS_ERR_SYSTEM, "out of memory serializing search results");
    }
    if (local != PS_OK) {
        json_t *e = json_pack("{s:i, s:s}", "error", (int)local, "message", ps_error_message());
        txt = e ? json_dumps(e, JSON_COMPACT) : NULL;
        json_decref(e);
        ps_error_clear();
    }
    static const char oom[] = "{\"error\": 3, \"message\": \"out of memory reporting an error\"}";
    st = ps_mpi_gather_strings(comm, 0, txt ? txt : oom, &texts, &nt);
    if (st != PS_OK) goto done;
    if (rank == 0) st = assemble(cp, m, c, o, texts, nt, keys, all);
    /* every rank leaves with rank 0's outcome (it saw every rank's error); only rank 0's message is printed */
    {
        int outcome = (int)st;
        PS_MPI_GOTO(st, MPI_Bcast(&outcome, 1, MPI_INT, 0, comm), done);
        if (outcome != PS_OK && rank != 0) st = PS_FAIL((ps_status)outcome, "the search failed (rank 0 reports why)");
    }
done:
    stats->source_s = src.mpi_s;
    stats->mpi_s = src.mpi_s + (t_red > 0 ? MPI_Wtime() - t_red : 0);
    stats->shared = use_win;
    if (src.win != MPI_WIN_NULL) {
        source_drain(&src);
        MPI_Win_unlock_all(src.win);
        MPI_Win_free(&src.win);
    }
    if (op != MPI_OP_NULL) MPI_Op_free(&op);
    if (kt != MPI_DATATYPE_NULL) MPI_Type_free(&kt);
    ps_mpi_strings_free(texts, nt);
    free(txt);
    free(keys);
    free(src.mine);
    ps_search_result_free(&mine);
    ps_search_job_free(job);
    stats->wall_s = MPI_Wtime() - t_start;
    return st;
}

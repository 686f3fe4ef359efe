/* The inputs every planning command reads the same way: the cluster (preset, cluster.json, auto, or the machine a
 * cost database measured), the model (padded and with its dtype chosen for that cluster), and the search options.
 * One place, so the search, the sweep and estimate cannot drift apart. Under MPI, rank 0 finds and reads the model
 * and cluster files and every rank parses its bytes, so all ranks plan for what rank 0 read. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ps_comm.h"
#include "ps_schedules.h"

/* Rank 0 resolves the spec (which preset folder, which file: that depends on its file system) and reads the file
 * `path` (inside *src) names; every rank gets its answer and those bytes in *text (free it; NULL when path is "", as
 * for the auto cluster), or fails with rank 0's status. The source is plain data and every rank runs this
 * executable, so it travels as bytes. MPI_COMM_NULL: this process alone, which locates and reads. */
static ps_status share_input(MPI_Comm comm, ps_status located, void *src, int size, const char *path, const char *what,
                             char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    PS_TRY(ps_mpi_agree_status(comm, located, what));
    if (comm != MPI_COMM_NULL) PS_MPI(MPI_Bcast(src, size, MPI_BYTE, 0, comm));
    if (path[0]) PS_TRY(ps_mpi_bcast_file(comm, 0, path, text, len));
    return PS_OK;
}

/* ps_cluster_load with one reading for all ranks of comm. Collective up to the parse, whose status is this rank's
 * own: the caller agrees on it. */
static ps_status load_cluster_shared(const char *spec, MPI_Comm comm, ps_cluster *c)
{
    memset(c, 0, sizeof *c);
    int rank = 0; /* alone (MPI_COMM_NULL), the process is rank 0 */
    if (comm != MPI_COMM_NULL) PS_MPI(MPI_Comm_rank(comm, &rank));
    ps_cluster_source src;
    memset(&src, 0, sizeof src);
    char *text = NULL;
    size_t len = 0;
    PS_TRY(share_input(comm, rank == 0 ? ps_cluster_locate(spec, &src) : PS_OK, &src, (int)sizeof src, src.path,
                       "finding the cluster description", &text, &len));
    /* auto describes the allocation, collectively, as it always did: there is no file to share. */
    ps_status st = src.detect ? ps_cluster_detect(comm, c) : ps_cluster_parse(&src, text, len, c);
    free(text);
    return st == PS_OK ? PS_OK : ps_error_trace(st, __FILE__, __LINE__);
}

ps_status ps_cli_model_file_read(const char *spec, MPI_Comm comm, ps_cli_model_file *f)
{
    memset(f, 0, sizeof *f);
    int rank = 0; /* alone (MPI_COMM_NULL), the process is rank 0 */
    if (comm != MPI_COMM_NULL) PS_MPI(MPI_Comm_rank(comm, &rank));
    PS_TRY(share_input(comm, rank == 0 ? ps_model_locate(spec, &f->src) : PS_OK, &f->src, (int)sizeof f->src,
                       f->src.path, "finding the model description", &f->text, &f->len));
    return PS_OK;
}

void ps_cli_model_file_free(ps_cli_model_file *f)
{
    free(f->text);
    memset(f, 0, sizeof *f);
}

ps_status ps_cli_load_cluster(const ps_cli_opts *o, const char *spec, MPI_Comm comm, bool need_gpus, ps_cluster *c)
{
    /* Every rank parses the same bytes, or reads the HDF5 database itself (still to be shared like the files); the
     * outcome is agreed all the same: the same bytes fail alike everywhere, but a rank short of memory, or whose own
     * database differs, must not leave alone while the others go on to the next collective. */
    bool db = strcmp(spec, "costdb") == 0;
    ps_status st = db ? ps_cli_costdb_cluster(o, c) : load_cluster_shared(spec, comm, c);
    if (st == PS_OK && need_gpus && c->n_gpus < 1) {
        ps_cluster_free(c);
        st = PS_FAIL(PS_ERR_INPUT, "cluster %s has no GPUs to plan for (describe one with --cluster PRESET:NODES "
                                   "or a cluster.json)", spec);
    }
    ps_status ast = ps_mpi_agree_status(comm, st, db ? "reading the cost database's cluster"
                                                     : "reading the cluster description");
    if (ast != PS_OK && st == PS_OK) ps_cluster_free(c);
    return ast == PS_OK ? PS_OK : ps_error_trace(ast, __FILE__, __LINE__);
}

ps_status ps_cli_load_model(const ps_cli_opts *o, const char *spec, const ps_cluster *c, bool pad_for_node,
                            MPI_Comm comm, ps_model *m)
{
    memset(m, 0, sizeof *m);
    ps_cli_model_file f;
    PS_TRY(ps_cli_model_file_read(spec, comm, &f));
    ps_status st = ps_cli_model_from_file(o, &f, c, pad_for_node, comm, m);
    ps_cli_model_file_free(&f);
    return st == PS_OK ? PS_OK : ps_error_trace(st, __FILE__, __LINE__);
}

int64_t ps_cli_vocab_pad(const ps_cli_opts *o, const ps_cluster *c, bool pad_for_node)
{
    /* Megatron pads the vocabulary to 128 x TP; the search may choose TP up to a node, so pad for that unless the
     * user said otherwise. */
    if (pad_for_node && !o->mopts.vocab_pad)
        return 128 * (c->groups[0].gpus_per_node > 0 ? c->groups[0].gpus_per_node : 1);
    return o->mopts.vocab_pad;
}

ps_status ps_cli_model_from_file(const ps_cli_opts *o, const ps_cli_model_file *f, const ps_cluster *c,
                                 bool pad_for_node, MPI_Comm comm, ps_model *m)
{
    ps_model_opts mo = o->mopts;
    mo.vocab_pad = ps_cli_vocab_pad(o, c, pad_for_node);
    /* The same bytes fail alike everywhere; agreeing still keeps a rank short of memory from leaving alone. */
    ps_status st = ps_model_parse(&f->src, f->text, f->len, &mo, m);
    ps_status ast = ps_mpi_agree_status(comm, st, "reading the model description");
    if (ast != PS_OK && st == PS_OK) ps_model_free(m);
    PS_TRY(ast);
    /* Presets train in bf16; GPUs before Ampere (V100, T4, TITAN RTX) have no bf16 tensor cores and train in fp16 with
     * loss scaling instead (as AMP and Galvatron-BMW ran on them); a CPU cost database has fp32 only. Only when the
     * user did not choose a dtype. */
    const char *fallback = ps_cluster_supports_dtype(c, "fp16") ? "fp16" : "fp32";
    if (mo.dtype >= 0 || ps_cluster_supports_dtype(c, ps_dtype_name(m->dtype)) ||
        !ps_cluster_supports_dtype(c, fallback))
        return PS_OK;
    int rank = 0;
    if (comm != MPI_COMM_NULL) MPI_Comm_rank(comm, &rank);
    if (rank == 0)
        fprintf(stderr, "psearch: note: %s has devices without %s tensor cores; planning %s in %s (--dtype chooses)\n",
                c->name, ps_dtype_name(m->dtype), m->name, fallback);
    /* the dtype is the model's one field that depends on it (per-layer bytes take the dtype as an argument) */
    m->dtype = strcmp(fallback, "fp16") == 0 ? PS_DTYPE_FP16 : PS_DTYPE_FP32;
    return PS_OK;
}

ps_status ps_cli_load_inputs(const ps_cli_opts *o, MPI_Comm comm, ps_model *m, ps_cluster *c)
{
    PS_TRY(ps_cli_load_cluster(o, o->cluster, comm, true, c));
    ps_status st = ps_cli_load_model(o, o->model, c, true, comm, m);
    if (st != PS_OK) {
        ps_cluster_free(c);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    return PS_OK;
}

static ps_status parse_range(const char *s, int64_t *lo, int64_t *hi, int64_t *step)
{
    char buf[96];
    ps_strlcpy(buf, s, sizeof buf);
    char *a = buf, *b = strchr(a, ':'), *c = b ? strchr(b + 1, ':') : NULL;
    if (!b || !c) return PS_FAIL(PS_ERR_INPUT, "option --gbs-range needs LO:HI:STEP (got '%s')", s);
    *b++ = '\0';
    *c++ = '\0';
    if (!ps_parse_i64(a, lo) || !ps_parse_i64(b, hi) || !ps_parse_i64(c, step) || *lo < 1 || *hi < *lo || *step < 1)
        return PS_FAIL(PS_ERR_INPUT, "option --gbs-range: LO:HI:STEP must be positive integers with LO <= HI (got "
                                     "'%s')", s);
    if ((*hi - *lo) / *step > 4096)
        return PS_FAIL(PS_ERR_INPUT, "option --gbs-range '%s' lists more than 4096 batch sizes", s);
    return PS_OK;
}

ps_status ps_cli_search_setup(const ps_cli_opts *o, const ps_cluster *c, ps_cli_search_opts *s)
{
    ps_search_opts *so = &s->so;
    ps_search_opts_default(so);
    so->gbs_lo = so->gbs_hi = o->gbs ? o->gbs : 8 * c->n_gpus;
    so->gbs_step = 1;
    if (o->gbs_range) PS_TRY(parse_range(o->gbs_range, &so->gbs_lo, &so->gbs_hi, &so->gbs_step));
    if (o->top) so->top_k = o->top;
    if (o->mbs_max) so->mbs_max = o->mbs_max;
    if (o->max_tp) so->max_tp = (int)o->max_tp;
    so->objective = o->objective;
    if (o->tp_overlap) {
        if (strcmp(o->tp_overlap, "auto") != 0 && strcmp(o->tp_overlap, "none") != 0)
            return PS_FAIL(PS_ERR_INPUT, "option --tp-overlap: a search takes auto or none (got '%s'; a plan with one "
                                         "overlap mode is `psearch estimate --tp-overlap %s`)", o->tp_overlap,
                           o->tp_overlap);
        so->overlap = strcmp(o->tp_overlap, "auto") == 0;
    }
    so->dp_no_overlap = o->dp_overlap == 0;
    if (o->attention) {
        ps_attn a = PS_ATTN_AUTO;
        if (strcmp(o->attention, "search") == 0)
            so->attention = PS_SEARCH_ATTN_BOTH;
        else {
            PS_TRY(ps_attn_parse(o->attention, &a)); /* the option's parser has accepted it already */
            so->attention = (int)a;
        }
        if (a == PS_ATTN_FUSED && ps_cost_attn(c, 0, c->n_gpus, PS_ATTN_AUTO) != PS_ATTN_FUSED)
            return PS_FAIL(PS_ERR_INPUT, "option --attention fused: some GPUs of cluster %s have no fused attention "
                                         "kernel (compute capability below 8.0); use auto or unfused", c->name);
    }
    if (!o->schedules) return PS_OK;
    if (strlen(o->schedules) >= sizeof s->kbuf)
        return PS_FAIL(PS_ERR_INPUT, "option --schedules '%.40s...' is too long", o->schedules);
    ps_strlcpy(s->kbuf, o->schedules, sizeof s->kbuf);
    char *save = NULL;
    int nk = 0;
    for (char *t = strtok_r(s->kbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (ps_sched_kind_find(t) < 0) {
            char known[256];
            return PS_FAIL(PS_ERR_INPUT, "option --schedules: unknown pipeline schedule '%s' (known: %s)", t,
                           ps_sched_kind_list(known, sizeof known));
        }
        if (nk == (int)(sizeof s->kinds / sizeof s->kinds[0]))
            return PS_FAIL(PS_ERR_INPUT, "option --schedules lists more than %d schedules", nk);
        s->kinds[nk++] = t;
    }
    if (nk == 0) return PS_FAIL(PS_ERR_INPUT, "option --schedules '%s' names no schedule", o->schedules);
    so->schedules = s->kinds;
    so->n_schedules = nk;
    return PS_OK;
}

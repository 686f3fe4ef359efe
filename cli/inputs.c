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

int64_t ps_cli_vocab_pad(const ps_cli_opts *o, int64_t tp)
{
    if (o->mopts.vocab_pad) return o->mopts.vocab_pad;
    /* torchtitan builds the vocabulary as the model gives it (its llama3 flavors: 128256 tokens, model/args.py at
     * v0.2.2), so a search for it or an export to it plans the vocabulary unpadded */
    if (o->framework == PS_FW_TORCHTITAN || (o->export_kind && strcmp(o->export_kind, "torchtitan") == 0)) return 1;
    /* Megatron-LM pads the vocabulary up to a multiple of --make-vocab-size-divisible-by (default 128) x TP:
     * vocab_size_with_padding in megatron/core/tokenizers/utils/build_tokenizer.py (Megatron-LM d98e8a64, 2026-08). */
    return PS_VOCAB_DIVISIBLE_BY * (tp > 0 ? tp : 1);
}

ps_status ps_cli_model_from_file(const ps_cli_opts *o, const ps_cli_model_file *f, const ps_cluster *c,
                                 bool pad_for_node, MPI_Comm comm, ps_model *m)
{
    ps_model_opts mo = o->mopts;
    /* The search may choose TP up to a node, so it pads for that TP unless the user said otherwise: every TP it
     * tries then sees one model. */
    if (pad_for_node) mo.vocab_pad = ps_cli_vocab_pad(o, c->groups[0].gpus_per_node);
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

static ps_status parse_schedules(const ps_cli_opts *o, ps_cli_search_opts *s);

/* "option --framework F: " or "option --export K (the search keeps to what it runs): ": what a refusal of the
 * search's restriction starts with, naming the option that asked for it. */
static void restriction_option(const ps_cli_opts *o, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (o->framework > PS_FW_ANY)
        snprintf(buf, cap, "option --framework %s: ", ps_framework_name((ps_framework)o->framework));
    else if (o->framework < 0 && o->export_kind)
        snprintf(buf, cap, "option --export %s (the search keeps to what it runs): ", o->export_kind);
}

/* --framework (or --export's framework) and the plan fields the search fixes (--tp, --pp, --zero, --recompute, --mbs,
 * --micro), checked by the search (ps_search_fixed_check, then ps_search_opts_check for what the framework runs, its
 * refusal prefixed with the option that asked for the framework). */
static ps_status search_restriction(const ps_cli_opts *o, const ps_cluster *c, ps_cli_search_opts *s)
{
    ps_search_opts *so = &s->so;
    /* The export writes the searched plan as it is, so the search keeps to what the exported framework runs; an
     * explicit --framework any searches everything (and the export says what it cannot express). */
    int ex = o->export_kind ? ps_framework_find(o->export_kind) : -1;
    if (o->framework > PS_FW_ANY && ex > PS_FW_ANY && o->framework != ex)
        return PS_FAIL(PS_ERR_INPUT, "--framework %s and --export %s disagree: the export writes the searched plan "
                                     "exactly, so search for the framework it exports (drop --framework, or give "
                                     "--framework %s)", ps_framework_name((ps_framework)o->framework), o->export_kind,
                       o->export_kind);
    so->framework = o->framework >= 0 ? o->framework : ex > PS_FW_ANY ? ex : PS_FW_ANY;
    so->fixed.tp = (int)o->tp;
    so->fixed.pp = (int)o->pp;
    int64_t g = c->n_gpus;
    if (o->exec_top && o->cp > 1)
        return PS_FAIL(PS_ERR_INPUT, "option --cp %lld with --exec-top: exec does not run context parallelism yet",
                       (long long)o->cp);
    /* --exec-top runs the plans it finds, and exec does not run context parallelism yet: those plans only */
    if (o->exec_top) so->fixed.cp = 1;
    if (o->cp) {
        if (g % o->cp || (o->tp && g % (o->tp * o->cp)) || (o->tp && o->pp && g % (o->tp * o->cp * o->pp)))
            return PS_FAIL(PS_ERR_INPUT, "option --cp %lld (x --tp, --pp where given) does not divide the %lld GPUs of "
                                         "%s", (long long)o->cp, (long long)g, c->name);
        so->fixed.cp = (int)o->cp;
    }
    if (o->ep > INT32_MAX || o->etp > INT32_MAX)
        return PS_FAIL(PS_ERR_INPUT, "options --ep / --etp: degrees are too large (ep %lld, etp %lld)",
                       (long long)o->ep, (long long)o->etp);
    so->fixed.ep = (int)o->ep;
    so->fixed.etp = (int)o->etp;
    if (o->cp_comm) {
        if (o->cp == 1)
            return PS_FAIL(PS_ERR_INPUT, "option --cp-comm %s with --cp 1: there is no context parallelism to run it",
                           o->cp_comm);
        ps_cp_comm k;
        PS_TRY(ps_cp_comm_parse(o->cp_comm, &k)); /* the option's parser has accepted it already */
        so->fixed.cp_comm = (int)k + 1;
    }
    if (o->zero >= 0) so->fixed.zero = o->zero;
    if (o->recompute) {
        ps_recompute rc;
        PS_TRY(ps_recompute_parse(o->recompute, &rc)); /* the option's parser has accepted it already */
        so->fixed.recompute = (int)rc;
    }
    if (o->mbs) {
        if (o->mbs_max)
            return PS_FAIL(PS_ERR_INPUT, "--mbs fixes the micro-batch size and --mbs-max bounds the searched one: give "
                                         "one of them");
        so->fixed.mbs = o->mbs;
    }
    so->fixed.micro = o->micro;
    /* the fixed fields against the cluster and each other: the search's own check, whose messages name the options */
    PS_TRY(ps_search_fixed_check(so, c));
    ps_status st = ps_search_opts_check(so, c);
    if (st == PS_OK) return st;
    /* what is left to fail is the framework's rules against the fixed fields or schedules */
    char msg[512], pre[160];
    ps_strlcpy(msg, ps_error_message(), sizeof msg);
    ps_error_clear();
    restriction_option(o, pre, sizeof pre);
    return PS_FAIL(st, "%s%s", pre, msg);
}

ps_status ps_cli_search_model_check(const ps_cli_opts *o, const ps_search_opts *so, const ps_model *m,
                                    const ps_cluster *c)
{
    ps_status st = ps_search_model_check(so, m, c);
    if (st == PS_OK) return st;
    char msg[512], pre[160];
    ps_strlcpy(msg, ps_error_message(), sizeof msg);
    ps_error_clear();
    restriction_option(o, pre, sizeof pre);
    return PS_FAIL(st, "%s%s", pre, msg);
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
    so->dp_overlap_given = o->dp_overlap >= 0;
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
    PS_TRY(parse_schedules(o, s));
    return search_restriction(o, c, s);
}

/* --schedules A,B (or --schedule K: a list of one), checked against the schedule kinds. */
static ps_status parse_schedules(const ps_cli_opts *o, ps_cli_search_opts *s)
{
    ps_search_opts *so = &s->so;
    if (o->schedule && o->schedules)
        return PS_FAIL(PS_ERR_INPUT,
                       "--schedule fixes the schedule and --schedules lists those tried: give one of them");
    if (o->schedule) {
        if (ps_sched_kind_find(o->schedule) < 0) {
            char known[256];
            return PS_FAIL(PS_ERR_INPUT, "option --schedule: unknown pipeline schedule '%s' (known: %s)", o->schedule,
                           ps_sched_kind_list(known, sizeof known));
        }
        s->kinds[0] = o->schedule;
        so->schedules = s->kinds;
        so->n_schedules = 1;
        return PS_OK;
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

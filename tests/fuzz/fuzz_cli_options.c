/* libFuzzer target: psearch's command-line parsing (subcommand words, getopt_long options and their values). The
 * input is the argument list, one word per line (or per NUL); argv[0] is "psearch\n", which no input word can be,
 * so a message that names it (instead of the option at fault) is caught. Only parses: nothing runs.
 * Each input is parsed twice, from two separate copies of the words, and must give the same result: getopt keeps
 * global state, and a parse that depends on the previous one (or reads its freed words) is a bug. */
#include "fuzz_common.h"

#define MAX_WORDS 64

typedef struct {
    int argc;
    char *argv[MAX_WORDS + 2];
    char *words[MAX_WORDS + 2]; /* getopt_long permutes argv; these are the allocations to free */
} args;

/* Every word is its own allocation, as the kernel's argv strings are distinct, so ASan sees any read past one word
 * or any pointer kept into a previous parse's words. */
static void split(const uint8_t *data, size_t size, args *a)
{
    a->argc = 0;
    a->argv[a->argc++] = fuzz_cstr((const uint8_t *)"psearch\n", 8);
    size_t start = 0;
    for (size_t i = 0; i <= size && a->argc < MAX_WORDS + 1; i++) {
        if (i == size || data[i] == '\n' || data[i] == '\0') {
            if (i == size && i == start) break; /* a trailing newline ends the list, adds no word */
            a->argv[a->argc++] = fuzz_cstr(data + start, i - start);
            start = i + 1;
        }
    }
    a->argv[a->argc] = NULL;
    memcpy(a->words, a->argv, sizeof a->words);
}

static void release(args *a)
{
    for (int i = 0; i < a->argc; i++) free(a->words[i]);
}

/* Everything a parse decides, as one string, so the second parse is compared field by field; the strings point
 * into the words, so this is taken before they are freed. */
static void fingerprint(const ps_cli_opts *o, char *buf, size_t cap)
{
#define S(x) ((x) ? (x) : "(null)")
    snprintf(buf, cap,
             "%s|%s|%s|%s|%lld,%lld,%d|%d|%s|%s|%d%d%d|%s|%lld,%lld,%lld,%lld,%lld,%lld|%d|%s|%d|%s|%d|%s|%d|%lld,%lld|"
             "%s|%d|%d|%s|%s|%lld,%lld|%s|%s|%s|%d|%s|%d,%d|%s|%d|%s|%s|%s|%s|%s|%d",
             S(o->cmd), S(o->sub), S(o->model), S(o->cluster), (long long)o->mopts.seq,
             (long long)o->mopts.vocab_pad, o->mopts.dtype, (int)o->format, S(o->out), S(o->data_dir), o->verbose,
             o->help, o->version, S(o->plan), (long long)o->tp, (long long)o->pp, (long long)o->dp,
             (long long)o->mbs, (long long)o->gbs, (long long)o->vpp, o->zero, S(o->recompute), o->seq_parallel,
             S(o->schedule), o->n_cost_params, S(o->gbs_range), o->top, (long long)o->mbs_max,
             (long long)o->max_tp, S(o->schedules), o->objective, o->distribute, S(o->export_kind), S(o->sched_kind),
             (long long)o->stages, (long long)o->micro, S(o->fbw), S(o->times), S(o->svg), o->passes, S(o->costdb),
             o->quick, o->reps, S(o->db_out), o->n_db_args, o->n_db_args > 0 ? S(o->db_args[0]) : "",
             o->n_db_args > 1 ? S(o->db_args[1]) : "", S(o->models), S(o->clusters), S(o->sweep_dir), o->resume);
    ps_strcatf(buf, cap, "|%s|%d|%d,%d|%lld|%s|%s|%g|%s", S(o->exec_plan), o->exec_top, o->iters, o->warmup,
               (long long)o->scale,
               S(o->backend), S(o->record), o->watchdog, S(o->from_meas));
    for (int i = 0; i < o->n_cost_params; i++) ps_strcatf(buf, cap, "|%s", S(o->cost_params[i]));
#undef S
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    args a1, a2;
    ps_cli_opts o1, o2;

    split(data, size, &a1);
    ps_status st1 = ps_cli_parse(a1.argc, a1.argv, &o1);
    char msg1[1024];
    ps_strlcpy(msg1, st1 == PS_OK ? "" : ps_error_message(), sizeof msg1);
    if (st1 == PS_OK) {
        /* the default command, or the first word as given */
        FUZZ_CHECK(o1.cmd && (!strcmp(o1.cmd, "plan") || (a1.argc > 1 && !strcmp(o1.cmd, a1.words[1]))));
        /* subcommands: list|show of model and cluster, show|merge of costdb, none elsewhere */
        if (!strcmp(o1.cmd, "model") || !strcmp(o1.cmd, "cluster"))
            FUZZ_CHECK(!o1.sub || !strcmp(o1.sub, "list") || !strcmp(o1.sub, "show"));
        else if (!strcmp(o1.cmd, "costdb"))
            FUZZ_CHECK(!o1.sub || !strcmp(o1.sub, "show") || !strcmp(o1.sub, "merge"));
        else
            FUZZ_CHECK(!o1.sub);
        /* exec takes its model and cluster from the plan file unless given; estimate too (from --plan's, else the
         * defaults, when it runs); everything else has both after parsing */
        FUZZ_CHECK((o1.model && o1.cluster) || (!strcmp(o1.cmd, "exec") && (o1.exec_plan || o1.help)) ||
                   !strcmp(o1.cmd, "estimate"));
        FUZZ_CHECK(o1.format == PS_FMT_TABLE || o1.format == PS_FMT_JSON);
        FUZZ_CHECK(o1.mopts.seq >= 0 && o1.mopts.vocab_pad >= 0 && o1.mopts.dtype >= -1 &&
                   o1.mopts.dtype <= PS_DTYPE_FP8);
        FUZZ_CHECK(!o1.out || o1.out[0] != '\0');
        (void)ps_cli_needs_mpi(&o1);
    } else {
        FUZZ_CHECK(st1 == PS_ERR_INPUT);
        FUZZ_CHECK(msg1[0] != '\0');
        FUZZ_CHECK(!strstr(msg1, "psearch\n"));
    }
    ps_cli_usage(fuzz_sink(), o1.cmd);
    char fp1[4096], fp2[4096];
    fingerprint(&o1, fp1, sizeof fp1);
    release(&a1);

    split(data, size, &a2);
    ps_status st2 = ps_cli_parse(a2.argc, a2.argv, &o2);
    FUZZ_CHECK(st2 == st1);
    if (st2 == PS_OK) {
        fingerprint(&o2, fp2, sizeof fp2);
        FUZZ_CHECK(strcmp(fp1, fp2) == 0);
    } else {
        FUZZ_CHECK(strcmp(msg1, ps_error_message()) == 0);
    }
    release(&a2);
    return 0;
}

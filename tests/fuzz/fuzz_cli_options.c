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

static bool same_str(const char *x, const char *y) { return (!x && !y) || (x && y && strcmp(x, y) == 0); }

int LLVMFuzzerInitialize(int *argc, char ***argv) { return 0; }

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
        FUZZ_CHECK(!o1.sub || !strcmp(o1.sub, "list") || !strcmp(o1.sub, "show"));
        FUZZ_CHECK(o1.model && o1.cluster);
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
    /* The results point into the words; keep them as strings before the words go. */
    char cmd1[64], sub1[64], model1[256], cluster1[256];
    ps_strlcpy(cmd1, o1.cmd ? o1.cmd : "", sizeof cmd1);
    ps_strlcpy(sub1, o1.sub ? o1.sub : "", sizeof sub1);
    ps_strlcpy(model1, o1.model ? o1.model : "", sizeof model1);
    ps_strlcpy(cluster1, o1.cluster ? o1.cluster : "", sizeof cluster1);
    release(&a1);

    split(data, size, &a2);
    ps_status st2 = ps_cli_parse(a2.argc, a2.argv, &o2);
    FUZZ_CHECK(st2 == st1);
    if (st2 == PS_OK) {
        char buf[256];
        FUZZ_CHECK(same_str(cmd1, o2.cmd));
        ps_strlcpy(buf, o2.sub ? o2.sub : "", sizeof buf);
        FUZZ_CHECK(same_str(sub1, buf));
        ps_strlcpy(buf, o2.model, sizeof buf);
        FUZZ_CHECK(same_str(model1, buf));
        ps_strlcpy(buf, o2.cluster, sizeof buf);
        FUZZ_CHECK(same_str(cluster1, buf));
        FUZZ_CHECK(o2.mopts.seq == o1.mopts.seq && o2.mopts.vocab_pad == o1.mopts.vocab_pad &&
                   o2.mopts.dtype == o1.mopts.dtype && o2.format == o1.format && o2.verbose == o1.verbose &&
                   o2.help == o1.help && o2.version == o1.version);
    } else {
        FUZZ_CHECK(strcmp(msg1, ps_error_message()) == 0);
    }
    release(&a2);
    return 0;
}

/* The command and option tables of the ps_cli library: the table's own rules, options landing in their fields, the
 * scope check's wording, which commands start MPI, and every command's --help listing the options it applies to.
 * The end-to-end behaviour of the command is tests/cli/cases.txt's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"
#include "sweep_tables.h"

/* Parse the words of line (space-separated, at most 31) after argv[0]. */
static ps_status parse(const char *line, ps_cli_opts *o)
{
    static char buf[512];
    char *argv[32] = {"psearch"};
    int argc = 1;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *w = strtok(buf, " "); w && argc < 31; w = strtok(NULL, " ")) argv[argc++] = w;
    return ps_cli_parse(argc, argv, o);
}

static void test_table_rules(void **state)
{
    (void)state;
    ps_status st = ps_cli_options_check();
    if (st != PS_OK) fprintf(stderr, "%s\n", ps_error_message());
    assert_int_equal(st, PS_OK);
}

static void test_fields(void **state)
{
    (void)state;
    ps_cli_opts o;
    assert_int_equal(parse("estimate --tp 4 --gbs 64 --zero 2 --seq-parallel --seq 1024 --dtype fp16 --format json "
                           "--cost-param a=1 --cost-param b=2 -v",
                           &o),
                     PS_OK);
    assert_string_equal(o.cmd, "estimate");
    assert_int_equal(o.tp, 4);
    assert_int_equal(o.gbs, 64);
    assert_int_equal(o.zero, 2);
    assert_int_equal(o.seq_parallel, 1);
    assert_int_equal(o.mopts.seq, 1024);
    assert_int_equal(o.mopts.dtype, PS_DTYPE_FP16);
    assert_int_equal(o.format, PS_FMT_JSON);
    assert_int_equal(o.n_cost_params, 2);
    assert_string_equal(o.cost_params[1], "b=2");
    assert_int_equal(o.verbose, 1);
    /* estimate takes --plan's model and cluster, else the defaults, when it runs (ps_cmd_estimate) */
    assert_null(o.model);
    assert_null(o.cluster);
    assert_int_equal(parse("--top 3", &o), PS_OK); /* the search: the presets at parse time */
    assert_string_equal(o.model, PS_DEFAULT_MODEL);
    assert_string_equal(o.cluster, PS_DEFAULT_CLUSTER);

    assert_int_equal(parse("--top 7 --exec-top 2 --iters 3 --warmup 0 --watchdog 1.5 --backend cpu -c x:1", &o), PS_OK);
    assert_string_equal(o.cmd, "plan");
    assert_int_equal(o.top, 7);
    assert_int_equal(o.exec_top, 2);
    assert_int_equal(o.iters, 3);
    assert_int_equal(o.warmup, 0);
    assert_true(o.watchdog == 1.5);
    assert_string_equal(o.backend, "cpu");
    assert_string_equal(o.cluster, "x:1");

    /* the command's words, and --out redirected where the command writes a database or a folder */
    assert_int_equal(parse("costdb merge a.h5 b.h5 --out c.h5", &o), PS_OK);
    assert_string_equal(o.sub, "merge");
    assert_int_equal(o.n_db_args, 2);
    assert_string_equal(o.db_out, "c.h5");
    assert_null(o.out);
    assert_int_equal(parse("sweep --models a --clusters b --out d", &o), PS_OK);
    assert_string_equal(o.sweep_dir, "d");
    assert_null(o.out);
    assert_int_equal(parse("exec p.json", &o), PS_OK);
    assert_string_equal(o.exec_plan, "p.json");
    assert_null(o.model);
}

static void expect_error(const char *line, const char *msg)
{
    ps_cli_opts o;
    assert_int_equal(parse(line, &o), PS_ERR_INPUT);
    assert_string_equal(ps_error_message(), msg);
}

static void test_messages(void **state)
{
    (void)state;
    expect_error("--plan x", "option --plan does not apply to 'psearch' (it is an option of: estimate)");
    expect_error("schedule --gbs 8",
                 "option --gbs does not apply to 'psearch schedule' (it is an option of: plan estimate sweep)");
    expect_error("--top 1001", "option --top must be at most 1000 (got 1001)");
    expect_error("estimate --tp 0", "option --tp needs a positive integer (got '0')");
    expect_error("--export x", "unknown --export 'x' (known: megatron, deepspeed, torchtitan)");
    expect_error("--model", "option '--model' needs a value");
    expect_error("plan", "unknown command 'plan' (commands: model, cluster, estimate, schedule, calibrate, costdb, "
                         "sweep, exec; see psearch --help)");
    expect_error("model", "'psearch model' needs a subcommand: list or show");
    /* options that would silently drop one another (issue #22) */
    expect_error("--gbs 64 --gbs-range 32:64:32", "--gbs 64 and --gbs-range 32:64:32 both set the global batch: drop "
                                                  "one (--gbs for one batch, --gbs-range to search several)");
    expect_error("sweep --models a --clusters b --out d --gbs-range 8:8:8 --gbs 8",
                 "--gbs 8 and --gbs-range 8:8:8 both set the global batch: drop one (--gbs for one batch, --gbs-range "
                 "to search several)");
    expect_error("--export megatron --format json",
                 "--export megatron prints the best plan as Megatron-LM arguments instead of the search's table or "
                 "JSON: drop --format json (or --export, for the JSON)");
    expect_error("estimate --export torchtitan --format json",
                 "--export torchtitan prints the plan as a torchtitan job config instead of the estimate's table or "
                 "JSON: drop --format json (or --export, for the JSON)");
    ps_cli_opts o;
    assert_int_equal(parse("--export deepspeed --format table", &o), PS_OK); /* the default format, said again */
    assert_int_equal(parse("--gbs-range 8:16:8", &o), PS_OK);
}

/* plans.csv's "varies": which fields of a per-layer plan differ from layer to layer, worked out by hand. */
static void test_plan_varies(void **state)
{
    (void)state;
    ps_strategy l[5];
    for (int i = 0; i < 5; i++) l[i] = (ps_strategy){.tp = 2, .dp = 4, .zero = 1, .attn = PS_ATTN_FUSED};
    ps_plan p = {.pp = 1, .vpp = 1, .layer = l};
    char buf[256];
    assert_int_equal(ps_sweep_plan_varies(&p, 5, buf, sizeof buf), PS_OK);
    assert_string_equal(buf, ""); /* uniform */
    l[3].tp = 8, l[3].dp = 1;
    l[4].tp = 4, l[4].dp = 2;
    assert_int_equal(ps_sweep_plan_varies(&p, 5, buf, sizeof buf), PS_OK);
    assert_string_equal(buf, "tp 2-8; dp 1-4");
    l[0].zero = 3;
    l[1].ckpt = PS_RECOMP_FULL;
    l[2].ckpt = PS_RECOMP_NONE;
    l[3].sp = true, l[3].overlap = PS_OVERLAP_TE;
    l[4].attn = PS_ATTN_UNFUSED;
    l[4].dp_no_overlap = true;
    assert_int_equal(ps_sweep_plan_varies(&p, 5, buf, sizeof buf), PS_OK);
    assert_string_equal(buf, "tp 2-8; dp 1-4; zero 1/3; ckpt none/full; sp off/on; tp-overlap none/te; attention "
                             "unfused/fused; dp-overlap off/on");
    assert_null(strchr(buf, ',')); /* one unquoted CSV field */
    /* one layer never varies */
    assert_int_equal(ps_sweep_plan_varies(&p, 1, buf, sizeof buf), PS_OK);
    assert_string_equal(buf, "");
}

static void test_needs_mpi(void **state)
{
    (void)state;
    static const struct {
        const char *line;
        int mpi;
    } cases[] = {
        {"--gbs 8", 0},       {"--gbs 8 --exec-top 2", 1},
        {"--cluster auto", 1}, {"--help", 0},
        {"--version", 0},     {"sweep --models a --clusters b --out d", 1},
        {"exec p.json", 1},   {"calibrate --out x.h5", 1},
        {"calibrate --from-measurements x.h5", 0}, {"cluster show auto", 1},
        {"cluster show dgx-a100-80g:1", 0},        {"model list", 0},
        {"estimate", 0},      {"schedule --kind 1f1b", 0},
        {"costdb show x.h5", 0},
    };
    /* as a process started without a launcher (a search then runs without MPI) */
    static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_NAMESPACE", "PMI_RANK",
                                                "PMI_FD", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof launcher_vars / sizeof launcher_vars[0]; i++) unsetenv(launcher_vars[i]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ps_cli_opts o;
        assert_int_equal(parse(cases[i].line, &o), PS_OK);
        if (ps_cli_needs_mpi(&o) != cases[i].mpi) fail_msg("%s: needs MPI %d", cases[i].line, cases[i].mpi);
    }
    /* under a launcher every search is an MPI job (its ranks share the work) */
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    ps_cli_opts o;
    assert_int_equal(parse("--gbs 8", &o), PS_OK);
    assert_int_equal(ps_cli_needs_mpi(&o), 1);
    unsetenv("OMPI_COMM_WORLD_SIZE");
}

/* The help of each command lists what its option rows give it: a row added with a help line shows up. */
static void test_help(void **state)
{
    (void)state;
    static const struct {
        const char *cmd, *line;
    } cases[] = {
        {"plan", "  -m, --model M        model: preset name"},
        {"plan", "      --top K          plans to show [5]\n"},
        {"plan", "       psearch exec PLAN.json             run a plan on this allocation, measured vs predicted\n"
                 "                                          (under mpirun"},
        {"estimate", "  --tp N           tensor-parallel degree [1]\n"},
        {"schedule", "  --vpp V         chunks per device for interleaved [the kind's default: 2 for interleaved "
                     "and V]\n"},
        {"calibrate", "  --reps N     timed repetitions per point [10; 5 with --quick]\n"},
        {"exec", "  --scale F       divide every width and token count by F and predict that scaled model too\n"
                 "                  [16 for a GPU plan on the cpu backend, else 1]\n"},
        {"sweep", "  --out DIR        where the tables and records go (created if missing)\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        assert_non_null(f);
        ps_cli_usage(f, cases[i].cmd);
        fclose(f);
        if (!strstr(text, cases[i].line)) fail_msg("%s --help lacks:\n%s\ngot:\n%s", cases[i].cmd, cases[i].line, text);
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_rules), cmocka_unit_test(test_fields),   cmocka_unit_test(test_messages),
        cmocka_unit_test(test_needs_mpi),   cmocka_unit_test(test_help),     cmocka_unit_test(test_plan_varies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of the common layer: error slot, checked arithmetic, parsing, atomic files, JSON field readers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ps_common.h"

static ps_status fails_deep(void) { return PS_FAIL(PS_ERR_INPUT, "field 'x' must be > 0 (got %d)", -3); }
static ps_status passes_through(void)
{
    PS_TRY(fails_deep());
    return PS_OK;
}

static void test_error_trace(void **state)
{
    (void)state;
    ps_error_clear();
    assert_int_equal(passes_through(), PS_ERR_INPUT);
    assert_string_equal(ps_error_message(), "field 'x' must be > 0 (got -3)");
    /* the origin and the frame it passed through */
    assert_non_null(strstr(ps_error_traceback(), "test_common.c:"));
    assert_non_null(strstr(ps_error_traceback(), " <- "));
    assert_int_equal(ps_error_status(), PS_ERR_INPUT);
}

static void test_checked_arith(void **state)
{
    (void)state;
    int64_t r;
    assert_true(ps_mul_i64(1 << 20, 1 << 20, &r));
    assert_int_equal(r, (int64_t)1 << 40);
    assert_false(ps_mul_i64((int64_t)1 << 40, (int64_t)1 << 30, &r));
    assert_false(ps_add_i64(INT64_MAX, 1, &r));
    assert_true(ps_add_i64(-5, 7, &r));
    assert_int_equal(r, 2);
}

static void test_parse(void **state)
{
    (void)state;
    int64_t v;
    assert_true(ps_parse_i64("2048", &v));
    assert_int_equal(v, 2048);
    assert_false(ps_parse_i64("20x", &v));
    assert_false(ps_parse_i64("", &v));
    assert_false(ps_parse_i64(" 5", &v));
    assert_false(ps_parse_i64("99999999999999999999999", &v));
    double d;
    assert_true(ps_parse_double("1.5e3", &d));
    assert_true(d == 1500.0);
    assert_false(ps_parse_double("nan", &d));
    assert_false(ps_parse_double("1.0abc", &d));
    assert_int_equal(ps_edit_distance("gpt3-65b", "gpt3-65B"), 0);
    assert_int_equal(ps_edit_distance("gpt3-65b", "gpt3-6b"), 1);
    char buf[32];
    assert_string_equal(ps_fmt_bytes(1.5 * 1024 * 1024 * 1024, buf, sizeof buf), "1.50 GiB");
}

static char g_dir[] = "/tmp/ps_test_common_XXXXXX";

static void test_atomic_write(void **state)
{
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/out.json", g_dir);
    assert_int_equal(ps_write_file_atomic(path, "first\n", 6), PS_OK);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(ps_read_file(path, &buf, &len), PS_OK);
    assert_string_equal(buf, "first\n");
    free(buf);

    /* A directory that does not exist: the write fails, names the path, leaves nothing behind. */
    char bad[300];
    snprintf(bad, sizeof bad, "%s/missing/out.json", g_dir);
    assert_int_equal(ps_write_file_atomic(bad, "x", 1), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), bad));

    /* Replacing keeps no temporary files around. */
    assert_int_equal(ps_write_file_atomic(path, "second\n", 7), PS_OK);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 1", g_dir);
    assert_int_equal(system(cmd), 0);
}

/* What a path names (common/paths.c): links are written through, a FIFO is never opened for reading, a BOM is
 * dropped, two names of one file are told apart from two files. */
static void test_paths(void **state)
{
    (void)state;
    char target[300], link[300], fifo[300], bom[300];
    snprintf(target, sizeof target, "%s/target.txt", g_dir);
    snprintf(link, sizeof link, "%s/link.txt", g_dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", g_dir);
    snprintf(bom, sizeof bom, "%s/bom.txt", g_dir);
    assert_int_equal(ps_write_file_atomic(target, "old\n", 4), PS_OK);
    assert_int_equal(symlink("target.txt", link), 0);
    assert_int_equal(ps_write_file_atomic(link, "new\n", 4), PS_OK);
    struct stat sb;
    assert_int_equal(lstat(link, &sb), 0);
    assert_true(S_ISLNK(sb.st_mode)); /* the link stays a link */
    char *buf = NULL;
    assert_int_equal(ps_read_file(target, &buf, NULL), PS_OK);
    assert_string_equal(buf, "new\n"); /* and its target got the bytes */
    free(buf);
    ps_output o;
    assert_int_equal(ps_output_resolve(link, &o), PS_OK);
    assert_int_equal(o.kind, PS_OUTPUT_FILE);
    assert_non_null(strstr(o.path, "/target.txt"));
    assert_int_equal(ps_output_resolve("/dev/stdout", &o), PS_OK);
    assert_int_equal(o.kind, PS_OUTPUT_STREAM);
    assert_int_equal(o.fd, 1);
    assert_int_equal(ps_output_resolve(g_dir, &o), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "is a directory"));
    const char *same[] = {target, link}, *names[] = {"--out", "--svg"};
    assert_int_equal(ps_outputs_distinct(same, names, 2), PS_ERR_INPUT);
    const char *apart[] = {target, bom};
    assert_int_equal(ps_outputs_distinct(apart, names, 2), PS_OK);

    assert_int_equal(mkfifo(fifo, 0600), 0);
    buf = NULL;
    assert_int_equal(ps_read_file(fifo, &buf, NULL), PS_ERR_INPUT); /* at once: no writer is waited for */
    assert_non_null(strstr(ps_error_message(), "FIFO"));
    assert_null(buf);
    assert_int_equal(ps_open_input(g_dir, "the model"), -1);
    assert_int_equal(ps_error_status(), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "the model must be a regular file; this is a directory"));

    assert_int_equal(ps_write_file_atomic(bom, "\xEF\xBB\xBF{}", 5), PS_OK);
    size_t len = 0;
    assert_int_equal(ps_read_file(bom, &buf, &len), PS_OK);
    assert_string_equal(buf, "{}");
    assert_int_equal(len, 2);
    free(buf);

    /* one writer: a second lock on the same output, from another process, is refused naming the holder */
    ps_lock lk;
    assert_int_equal(ps_output_lock(target, &lk), PS_OK);
    char cmd[700];
    pid_t pid = fork();
    if (pid == 0) {
        ps_lock other;
        ps_status st = ps_output_lock(target, &other);
        _exit(st == PS_ERR_INPUT && strstr(ps_error_message(), "being written by another psearch") ? 0 : 1);
    }
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    ps_output_unlock(&lk);
    snprintf(cmd, sizeof cmd, "test ! -e %s/.target.txt.lock", g_dir);
    assert_int_equal(system(cmd), 0);
    unlink(link);
    unlink(target);
    unlink(fifo);
    unlink(bom);
}

static void test_read_missing(void **state)
{
    (void)state;
    char *buf = NULL;
    assert_int_equal(ps_read_file("/nonexistent/file.json", &buf, NULL), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "/nonexistent/file.json"));
    assert_null(buf);
}

static void test_json_syntax_error(void **state)
{
    (void)state;
    const char *txt = "{\n  \"a\": 1,\n  \"b\": [1, 2\n}\n";
    json_t *j = NULL;
    assert_int_equal(ps_json_load_buffer(txt, strlen(txt), "x.json", &j), PS_ERR_INPUT);
    assert_null(j);
    /* file:line:column of the error */
    assert_non_null(strstr(ps_error_message(), "x.json:4:"));
    const char *dup = "{\"a\": 1, \"a\": 2}";
    assert_int_equal(ps_json_load_buffer(dup, strlen(dup), "d.json", &j), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "duplicate"));
    const char *arr = "[1, 2]";
    assert_int_equal(ps_json_load_buffer(arr, strlen(arr), "a.json", &j), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "must be a JSON object"));
}

static void test_json_fields(void **state)
{
    (void)state;
    const char *txt = "{\"n\": 8, \"big\": 1e9, \"frac\": 1.5, \"s\": \"abc\", \"neg\": -1, \"obj\": {\"hiden\": 3}}";
    json_t *j = NULL;
    assert_int_equal(ps_json_load_buffer(txt, strlen(txt), "f.json", &j), PS_OK);
    ps_jloc root = ps_jloc_root("f.json");
    int64_t v = 7;
    assert_int_equal(ps_json_int(j, &root, "n", true, 1, 100, &v), PS_OK);
    assert_int_equal(v, 8);
    assert_int_equal(ps_json_int(j, &root, "big", true, 1, INT64_MAX, &v), PS_OK);
    assert_int_equal(v, 1000000000);
    assert_int_equal(ps_json_int(j, &root, "frac", true, 1, 100, &v), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "'frac' must be an integer"));
    assert_int_equal(ps_json_int(j, &root, "neg", true, 1, 100, &v), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "(got -1)"));
    assert_int_equal(ps_json_int(j, &root, "s", true, 1, 100, &v), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "got a string"));
    v = 42;
    assert_int_equal(ps_json_int(j, &root, "absent", false, 1, 100, &v), PS_OK);
    assert_int_equal(v, 42);
    assert_int_equal(ps_json_int(j, &root, "absent", true, 1, 100, &v), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "f.json: missing field 'absent'"));
    char s[3];
    assert_int_equal(ps_json_str(j, &root, "s", true, s, sizeof s), PS_ERR_INPUT);
    ps_jloc ol = ps_jloc_key(&root, "obj");
    static const char *const known[] = {"hidden", "heads", NULL};
    assert_int_equal(ps_json_known_keys(json_object_get(j, "obj"), &ol, known), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "unknown field 'obj.hiden' (did you mean 'hidden'?)"));
    ps_jloc il = ps_jloc_idx(&ol, 3);
    assert_string_equal(il.path, "obj[3]");
    json_decref(j);
}

/* Relative errors as `costdb show` and `calibrate --from-measurements` print them. */
static void test_fmt_rel_err(void **state)
{
    (void)state;
    char b[16];
    assert_string_equal(ps_fmt_rel_err(0, b, sizeof b), "0.0%");
    assert_string_equal(ps_fmt_rel_err(0.1234, b, sizeof b), "12.3%");
    assert_string_equal(ps_fmt_rel_err(9.99, b, sizeof b), "999.0%");
    assert_string_equal(ps_fmt_rel_err(10, b, sizeof b), ">1000%");
    assert_string_equal(ps_fmt_rel_err(1e300, b, sizeof b), ">1000%");
    assert_string_equal(ps_fmt_rel_err(-1, b, sizeof b), "-");
    assert_string_equal(ps_fmt_rel_err(NAN, b, sizeof b), "-");
}

/* Numbers of the human tables (issue #22): float noise beside its scale prints as 0, large numbers in plain digits. */
static void test_fmt_num(void **state)
{
    (void)state;
    char b[32];
    /* the bubble estimate printed for a plan with no bubble: a difference of equal sums */
    assert_string_equal(ps_fmt_num(8.327e-17, 10.0, b, sizeof b), "0");
    assert_string_equal(ps_fmt_num(-8.327e-17, 10.0, b, sizeof b), "0");
    assert_string_equal(ps_fmt_num(-0.0, 0, b, sizeof b), "0");
    /* 1e-9 of the scale is the edge: just above it is a number */
    assert_string_equal(ps_fmt_num(1e-8, 10.0, b, sizeof b), "0");
    assert_string_equal(ps_fmt_num(2e-8, 10.0, b, sizeof b), "2e-08");
    /* without a scale only zero is zero */
    assert_string_equal(ps_fmt_num(8.327e-17, 0, b, sizeof b), "8.327e-17");
    /* tokens/s as the estimate printed it (6.697e+05) and as it must */
    assert_string_equal(ps_fmt_num(669712.4, 0, b, sizeof b), "669712");
    assert_string_equal(ps_fmt_num(10000, 0, b, sizeof b), "10000");
    assert_string_equal(ps_fmt_num(9999.4, 0, b, sizeof b), "9999");
    assert_string_equal(ps_fmt_num(-26280.7, 0, b, sizeof b), "-26281");
    assert_string_equal(ps_fmt_num(79.7912, 0, b, sizeof b), "79.79");
    assert_string_equal(ps_fmt_num(12.83, 0, b, sizeof b), "12.83");
    assert_string_equal(ps_fmt_num(0.0012345, 0, b, sizeof b), "0.001234");
    /* past 10^15 digits stop meaning anything: the exponent again */
    assert_string_equal(ps_fmt_num(2e15, 0, b, sizeof b), "2e+15");
    assert_string_equal(ps_fmt_num(INFINITY, 1, b, sizeof b), "inf");
}

/* The date stamp: 20 characters of ISO 8601 UTC, the time of the call (within the second before or after it); a
 * buffer too small gets "", never a cut date. */
static void test_utc_now_iso(void **state)
{
    (void)state;
    char d[32];
    memset(d, 'x', sizeof d);
    time_t t0 = time(NULL);
    ps_utc_now_iso(d, sizeof d);
    time_t t1 = time(NULL);
    assert_int_equal(strlen(d), 20);
    int y, mo, da, h, mi, se;
    char z = 0;
    assert_int_equal(sscanf(d, "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &da, &h, &mi, &se, &z), 7);
    assert_int_equal(z, 'Z');
    assert_true(d[4] == '-' && d[7] == '-' && d[10] == 'T' && d[13] == ':' && d[16] == ':');
    bool matched = false;
    for (time_t t = t0; t <= t1 && !matched; t++) {
        struct tm tm;
        assert_non_null(gmtime_r(&t, &tm));
        matched = tm.tm_year + 1900 == y && tm.tm_mon + 1 == mo && tm.tm_mday == da && tm.tm_hour == h &&
                  tm.tm_min == mi && tm.tm_sec == se;
    }
    assert_true(matched);
    char small[20];
    memset(small, 'x', sizeof small);
    ps_utc_now_iso(small, sizeof small); /* one short of the terminating NUL */
    assert_string_equal(small, "");
    ps_utc_now_iso(small, 0); /* nothing written, nothing read */
    assert_string_equal(small, "");
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_trace),      cmocka_unit_test(test_checked_arith),
        cmocka_unit_test(test_parse),            cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_read_missing),     cmocka_unit_test(test_json_syntax_error),
        cmocka_unit_test(test_json_fields),      cmocka_unit_test(test_utc_now_iso),
        cmocka_unit_test(test_fmt_rel_err),      cmocka_unit_test(test_fmt_num),
        cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

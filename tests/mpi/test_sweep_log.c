/* Unit tests of the sweep records (mpi/sweep.c): what a resumed sweep finds after appends, a torn last line, a
 * corrupt line and records past 64 MiB; and the stale temporaries a resume removes. No MPI_Init: the record file
 * needs none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ps_mpi.h"

static char g_dir[64];
static char g_path[128];

static int setup(void **state)
{
    (void)state;
    ps_strlcpy(g_dir, "/tmp/ps-sweep-log.XXXXXX", sizeof g_dir);
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_path, sizeof g_path, "%s/cells.jsonl", g_dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(g_path);
    rmdir(g_dir);
    return 0;
}

/* Index of the first record of cell `key`, -1 when there is none. */
static int find_cell(const ps_sweep_log *lg, const char *key)
{
    for (int i = 0; i < ps_sweep_log_count(lg); i++)
        if (strcmp(json_string_value(json_object_get(ps_sweep_log_at(lg, i), "cell")), key) == 0) return i;
    return -1;
}

static void append_cell(ps_sweep_log *lg, const char *cell, int value)
{
    json_t *r = json_pack("{s:s, s:i}", "cell", cell, "value", value);
    assert_int_equal(ps_sweep_log_append(lg, r), PS_OK);
    json_decref(r);
}

static off_t file_size(void)
{
    struct stat sb;
    assert_int_equal(stat(g_path, &sb), 0);
    return sb.st_size;
}

static void append_raw(const char *text)
{
    FILE *f = fopen(g_path, "a");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_append_and_reopen(void **state)
{
    (void)state;
    ps_sweep_log *lg = NULL;
    size_t torn = 99;
    assert_int_equal(ps_sweep_log_open(g_path, &lg, &torn), PS_OK);
    assert_int_equal(torn, 0);
    assert_int_equal(ps_sweep_log_count(lg), 0);
    append_cell(lg, "a on x", 1);
    append_cell(lg, "b on x", 2);
    assert_int_equal(find_cell(lg, "b on x"), 1);
    ps_sweep_log_close(lg);

    assert_int_equal(ps_sweep_log_open(g_path, &lg, &torn), PS_OK);
    assert_int_equal(ps_sweep_log_count(lg), 2);
    assert_int_equal(find_cell(lg, "a on x"), 0);
    assert_int_equal(find_cell(lg, "c on x"), -1);
    assert_int_equal(json_integer_value(json_object_get(ps_sweep_log_at(lg, 1), "value")), 2);
    /* a record without a cell is refused, and nothing is written */
    off_t before = file_size();
    json_t *r = json_pack("{s:i}", "value", 3);
    assert_int_equal(ps_sweep_log_append(lg, r), PS_ERR_INPUT);
    json_decref(r);
    assert_int_equal(file_size(), before);
    ps_sweep_log_close(lg);
}

static void test_torn_last_line(void **state)
{
    (void)state;
    ps_sweep_log *lg = NULL;
    size_t torn = 0;
    assert_int_equal(ps_sweep_log_open(g_path, &lg, &torn), PS_OK);
    append_cell(lg, "a on x", 1);
    ps_sweep_log_close(lg);
    off_t whole = file_size();
    append_raw("{\"cell\":\"b on x\",\"val"); /* a kill inside the write of the second record */

    assert_int_equal(ps_sweep_log_open(g_path, &lg, &torn), PS_OK);
    assert_int_equal(torn, strlen("{\"cell\":\"b on x\",\"val"));
    assert_int_equal(ps_sweep_log_count(lg), 1);
    assert_int_equal(file_size(), whole); /* dropped from the file too */
    /* the next record starts on a line of its own */
    append_cell(lg, "b on x", 2);
    ps_sweep_log_close(lg);
    assert_int_equal(ps_sweep_log_open(g_path, &lg, &torn), PS_OK);
    assert_int_equal(torn, 0);
    assert_int_equal(ps_sweep_log_count(lg), 2);
    assert_int_equal(find_cell(lg, "b on x"), 1);
    ps_sweep_log_close(lg);
}

static void test_corrupt_line(void **state)
{
    (void)state;
    ps_sweep_log *lg = NULL;
    assert_int_equal(ps_sweep_log_open(g_path, &lg, NULL), PS_OK);
    append_cell(lg, "a on x", 1);
    ps_sweep_log_close(lg);
    append_raw("not json\n");
    assert_int_equal(ps_sweep_log_open(g_path, &lg, NULL), PS_ERR_INPUT);
    assert_null(lg);
    assert_non_null(strstr(ps_error_message(), "cells.jsonl:2"));
    unlink(g_path);
    append_raw("{\"value\":1}\n"); /* JSON, but not a record */
    assert_int_equal(ps_sweep_log_open(g_path, &lg, NULL), PS_ERR_INPUT);
    assert_non_null(strstr(ps_error_message(), "cells.jsonl:1"));
}

/* A long sweep's records may pass 64 MiB (the cap on input descriptions): they are read all the same. One record
 * padded with whitespace past the cap keeps the test light on parsing. */
static void test_records_past_64_mib(void **state)
{
    (void)state;
    FILE *f = fopen(g_path, "w");
    assert_non_null(f);
    fputs("{\"cell\":\"a on x\",", f);
    static char pad[1 << 20];
    memset(pad, ' ', sizeof pad);
    for (int i = 0; i < 65; i++) assert_int_equal(fwrite(pad, 1, sizeof pad, f), sizeof pad);
    fputs("\"value\":1}\n", f);
    assert_int_equal(fclose(f), 0);
    assert_true(file_size() > (off_t)64 * 1024 * 1024);

    ps_sweep_log *lg = NULL;
    size_t torn = 99;
    assert_int_equal(ps_sweep_log_open(g_path, &lg, &torn), PS_OK);
    assert_int_equal(torn, 0);
    assert_int_equal(ps_sweep_log_count(lg), 1);
    assert_int_equal(json_integer_value(json_object_get(ps_sweep_log_at(lg, 0), "value")), 1);
    append_cell(lg, "b on x", 2);
    ps_sweep_log_close(lg);
    assert_int_equal(ps_sweep_log_open(g_path, &lg, &torn), PS_OK);
    assert_int_equal(ps_sweep_log_count(lg), 2);
    ps_sweep_log_close(lg);
}

static void touch(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
}

static bool exists(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return access(p, F_OK) == 0;
}

/* What a kill during a table's atomic write leaves behind goes on resume; nothing else does. */
static void test_stale_temporaries(void **state)
{
    (void)state;
    const char *names[] = {"plans.md", "plans.md.tmp.Ab12Z9", "plans.md.tmp.short", "plans.mdx.tmp.Ab12Z9",
                           "other.tmp.Qq0000", "cells.jsonl"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) touch(names[i]);
    assert_int_equal(ps_remove_stale_temporaries(g_dir, "plans.md"), 1);
    assert_false(exists("plans.md.tmp.Ab12Z9"));
    assert_true(exists("plans.md") && exists("plans.mdx.tmp.Ab12Z9") && exists("other.tmp.Qq0000"));
    assert_int_equal(ps_remove_stale_temporaries(g_dir, NULL), 2); /* any temporary, never a finished file */
    assert_true(exists("plans.md") && exists("plans.md.tmp.short") && exists("cells.jsonl"));
    assert_int_equal(ps_remove_stale_temporaries("/nonexistent-ps-dir", NULL), 0);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        unlink(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_and_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_last_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_past_64_mib, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_temporaries, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Helpers shared by the models/ test programs (header-only: each test is one executable). */
#ifndef PS_MODELS_TEST_H
#define PS_MODELS_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ps_models.h"

/* Path of a file under tests/data/models. */
static inline const char *tdata(const char *rel)
{
    static char buf[4][1024];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", PS_TEST_DATA, rel);
    return b;
}

/* Load and fail the test with the library's message when loading fails. */
static inline void load_ok(const char *spec, const ps_model_opts *opts, ps_model *m)
{
    ps_error_clear();
    ps_status st = ps_model_load(spec, opts, m);
    if (st != PS_OK) fail_msg("loading %s failed: %s", spec, ps_error_message());
}

/* Expect PS_ERR_INPUT and every needle in the message; the model must come back empty. */
static inline void expect_input_error(ps_status st, const ps_model *m, const char *const *needles)
{
    if (st != PS_ERR_INPUT) fail_msg("expected PS_ERR_INPUT, got %d (%s)", (int)st, ps_error_message());
    for (const char *const *n = needles; *n; n++)
        if (!strstr(ps_error_message(), *n)) fail_msg("message '%s' lacks '%s'", ps_error_message(), *n);
    assert_null(m->layers);
    assert_int_equal(m->n_layers, 0);
}

static inline double rel_err(double a, double b) { return b == 0.0 ? a : (a - b) / b; }

#endif

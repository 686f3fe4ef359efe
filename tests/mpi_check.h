/* CHECK for test programs that run on several MPI ranks without cmocka (which would stop at the first failure on one
 * rank and leave the others waiting in a collective): a failed check is counted and printed with the rank, and the
 * program carries on to the collectives every rank must reach. The program defines g_rank and g_failures. */
#ifndef PS_TESTS_MPI_CHECK_H
#define PS_TESTS_MPI_CHECK_H

#include <stdio.h>

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            g_failures++;                                                                                              \
            fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", g_rank, __FILE__, __LINE__, #cond);                 \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, "\n");                                                                                     \
        }                                                                                                              \
    } while (0)

#endif

/* CPU memory bandwidth: the STREAM triad a[i] = b[i] + s c[i] with OpenMP, every rank of the node at once (the
 * bandwidth a rank gets while its neighbours stream too, which is what training sees). Arrays of 2^23 doubles
 * (64 MiB each; quick: 2^21, 16 MiB), far beyond the caches of the machines we met; STREAM counts 3 x 8 bytes per
 * element (no write-allocate traffic). */
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "bench_internal.h"
#include "ps_comm.h"

ps_status ps_bench_cpu_mem(MPI_Comm comm, const ps_bench_opts *o, ps_bench_results *r)
{
    size_t n = o->quick ? (size_t)1 << 21 : (size_t)1 << 23;
    double *a = ps_calloc(n, sizeof *a), *b = ps_calloc(n, sizeof *b), *c = ps_calloc(n, sizeof *c);
    double *t = ps_calloc((size_t)o->reps, sizeof *t);
    ps_status st = PS_OK;
    /* Every rank must reach the barriers below: agree on the allocations first (a rank short of memory keeps
     * ps_calloc's message, the others name it). */
    PS_TRY_GOTO(st, ps_mpi_agree_status(comm, a && b && c && t ? PS_OK : PS_ERR_SYSTEM, "memory benchmark: allocation"),
                done);
    /* First touch by the threads that stream: pages land on their NUMA node. */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = 1;
        c[i] = 2;
    }
    const double s = 3.0;
    for (int i = -o->warmup; i < o->reps; i++) {
        PS_MPI_GOTO(st, MPI_Barrier(comm), done);
        double t0 = MPI_Wtime();
        /* the loop that matters: static schedule, one contiguous slice per thread, as STREAM does */
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < n; j++) a[j] = b[j] + s * c[j];
        double dt = MPI_Wtime() - t0;
        if (i >= 0) t[i] = dt;
    }
    /* Read a result so the compiler keeps the stores. */
    if (a[n / 2] != 1 + s * 2) {
        st = PS_FAIL(PS_ERR_SYSTEM, "memory benchmark: triad computed %g, expected %g", a[n / 2], 1 + s * 2);
        goto done;
    }
    ps_bench_stat sa = ps_bench_stats(t, o->reps);
    st = ps_bench_add_bw(o, r, "triad", omp_get_max_threads(), 3.0 * 8.0 * (double)n, &sa);
done:
    free(a);
    free(b);
    free(c);
    free(t);
    return st;
}

/* How the search scales across ranks (issue #7, "Speed, measured (bench/scaling)"), printing one JSON document from
 * rank 0: for each way of sharing the work (--distribute dynamic, static), the units each rank searched, their
 * estimated work (ps_search_job_unit_work, DP cells) and the max/mean of it (target <= 1.10), the seconds each rank
 * was busy in the search and the max/mean of that, the wall time, and the fraction of the ranks' time spent in MPI
 * (unit hand-out and floor sharing during the search, then the reduction, which includes waiting for the slowest
 * rank). Run it under mpirun with 1, 2, 4, 8 ranks (bench/scaling/run.sh).
 *   mpirun -n N bench_scaling [--case a|b|c] [--quick]
 * Cases as bench_search (bench/search_cases.h): (a) gpt3-65b on dgx-a100-80g:4, batch 64..512 step 64 [default];
 * (b) gpt3-175b on dgx-a100-80g:128 at gbs 1536; (c) llama3-405b on dgx-h100:512 at gbs 2048. --quick: batch 64..256
 * for (a).
 * Exit 1 when the two distributions chose different plans (the result must not depend on how work is shared). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../search_cases.h"
#include "ps_comm.h"
#include "ps_mpi.h"

static double max_over_mean(const double *v, int n)
{
    double mx = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        mx = fmax(mx, v[i]);
        sum += v[i];
    }
    return sum > 0 ? mx / (sum / n) : 0;
}

static void print_array(const char *name, const double *v, int n, const char *fmt)
{
    printf(", \"%s\": [", name);
    for (int i = 0; i < n; i++) {
        printf(i ? ", " : "");
        printf(fmt, v[i]);
    }
    printf("]");
}

int main(int argc, char **argv)
{
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) return 3;
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank = 0, nranks = 1, threads = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    const ps_search_bench_case *bc = &ps_search_bench_cases[0];
    int quick = 0, rc = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
            i++;
            bc = NULL;
            for (size_t k = 0; k < PS_SEARCH_BENCH_N_CASES; k++)
                if (strcmp(argv[i], ps_search_bench_cases[k].name) == 0) bc = &ps_search_bench_cases[k];
        } else {
            bc = NULL;
        }
        if (!bc) {
            if (rank == 0) fprintf(stderr, "usage: bench_scaling [--case a|b|c|d|e|f|g] [--quick]\n");
            MPI_Finalize();
            return 2;
        }
    }
    ps_cost_params cp;
    ps_cost_params_default(&cp);
    ps_cluster c;
    ps_model m;
    if (ps_search_bench_load(bc, &m, &c) != PS_OK) {
        fprintf(stderr, "# %s\n", ps_error_message());
        MPI_Finalize();
        return 2;
    }
    ps_search_opts o;
    ps_search_opts_default(&o);
    o.gbs_lo = bc->gbs_lo;
    o.gbs_hi = quick && bc->gbs_hi > 256 ? 256 : bc->gbs_hi;
    o.gbs_step = bc->gbs_step;
    if (rank == 0)
        printf("{\"benchmark\": \"scaling\", \"case\": \"%s\", \"model\": \"%s\", \"cluster\": \"%s\", \"gbs\": [%lld, "
               "%lld, %lld], \"ranks\": %d, \"threads_per_rank\": %d, \"mpi_thread_level\": %d, \"runs\": [",
               bc->name, bc->model, bc->cluster, (long long)o.gbs_lo, (long long)o.gbs_hi, (long long)o.gbs_step,
               nranks, threads, provided);
    double best[2] = {0, 0};
    int64_t best_index[2] = {-1, -1}; /* the winner's place in the enumeration: another plan has another one */
    double *all = rank == 0 ? calloc((size_t)nranks * 6, sizeof *all) : NULL;
    for (int d = 0; d < 2; d++) {
        ps_search_result r;
        ps_mpi_search_stats s;
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        ps_status st = ps_mpi_search(comm, &cp, &m, &c, &o, (ps_dist)d, &r, &s);
        double wall = MPI_Wtime() - t0;
        if (st != PS_OK) {
            fprintf(stderr, "# rank %d: %s\n", rank, ps_error_message());
            rc = 3;
            break;
        }
        double mine[6] = {(double)s.units, s.work, s.busy_s, s.mpi_s, s.wall_s, s.source_s}, wall_max = 0;
        MPI_Gather(mine, 6, MPI_DOUBLE, all, 6, MPI_DOUBLE, 0, comm);
        MPI_Reduce(&wall, &wall_max, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
        if (rank == 0) {
            double col[6][nranks];
            double sum_mpi = 0, sum_wall = 0;
            for (int i = 0; i < nranks; i++) {
                for (int f = 0; f < 6; f++) col[f][i] = all[i * 6 + f];
                sum_mpi += col[3][i];
                sum_wall += col[4][i];
            }
            best[d] = r.n_top ? r.top[0].pred.samples_per_s : 0;
            best_index[d] = r.n_top ? r.top[0].index : -1;
            printf("%s\n  {\"distribute\": \"%s\", \"wall_s\": %.4f, \"units_total\": %lld, \"pruned\": %lld, "
                   "\"plans_costed\": %lld, \"best_samples_per_s\": %.9g, \"floors_shared\": %s",
                   d ? "," : "", ps_dist_name((ps_dist)d), wall_max, (long long)r.candidates, (long long)r.pruned,
                   (long long)r.evaluated, best[d], s.shared ? "true" : "false");
            print_array("units_per_rank", col[0], nranks, "%.0f");
            print_array("work_per_rank", col[1], nranks, "%.6g");
            printf(", \"work_max_over_mean\": %.4f, \"work_target\": 1.10", max_over_mean(col[1], nranks));
            print_array("busy_s_per_rank", col[2], nranks, "%.4f");
            printf(", \"busy_max_over_mean\": %.4f", max_over_mean(col[2], nranks));
            print_array("mpi_s_per_rank", col[3], nranks, "%.4f");
            print_array("handout_and_sharing_s_per_rank", col[5], nranks, "%.4f");
            printf(", \"mpi_fraction\": %.4f}", sum_wall > 0 ? sum_mpi / sum_wall : 0);
            fflush(stdout);
        }
        ps_search_result_free(&r);
    }
    if (rank == 0) {
        bool same = best[0] == best[1] && best_index[0] == best_index[1];
        printf("\n], \"same_best\": %s}\n", same ? "true" : "false");
        if (rc == 0 && !same) rc = 1;
    }
    free(all);
    ps_model_free(&m);
    ps_cluster_free(&c);
    MPI_Bcast(&rc, 1, MPI_INT, 0, comm);
    MPI_Finalize();
    return rc;
}

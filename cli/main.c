/* psearch entry point: parse, start MPI when the command needs it, run (the command table of the ps_cli library),
 * agree on the outcome across ranks, print one error message, and turn the status into the exit code. The only place
 * that starts, finalizes or aborts MPI. */
#include <stdlib.h>
#include <string.h>

#include "ps_cli.h"
#include "ps_comm.h"

static void print_error(const ps_cli_opts *o, int rank, int nranks)
{
    if (nranks > 1)
        fprintf(stderr, "psearch: error (rank %d): %s\n", rank, ps_error_message());
    else
        fprintf(stderr, "psearch: error: %s\n", ps_error_message());
    if (o && o->verbose) fprintf(stderr, "psearch: raised at %s\n", ps_error_traceback());
}

/* MPI for a command that needs it: comm becomes MPI_COMM_WORLD, with this process's rank and the number of ranks. */
static ps_status start_mpi(int *argc, char ***argv, MPI_Comm *comm, int *rank, int *nranks)
{
    int provided = 0;
    /* ps_mpi_init: the cheapest start-up for a process run without a launcher (comm/ps_comm.h).
     * SERIALIZED: the search's OpenMP threads take work units from rank 0 and share pruning floors one at a time
     * (a critical section), from whichever thread is free. With less, mpi/search.c falls back to a static split
     * without shared floors. */
    if (ps_mpi_init(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "psearch: error: MPI_Init_thread failed\n");
        return PS_ERR_SYSTEM;
    }
    /* Errors come back as codes we turn into messages, instead of MPI aborting the job from inside a library. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    *comm = MPI_COMM_WORLD;
    MPI_Comm_rank(*comm, rank);
    MPI_Comm_size(*comm, nranks);
    return PS_OK;
}

int main(int argc, char **argv)
{
    ps_cli_opts o;
    ps_status st = ps_cli_parse(argc, argv, &o);
    if (st != PS_OK) {
        print_error(NULL, 0, 1);
        return st;
    }
    if (o.help) {
        ps_cli_usage(stdout, o.cmd);
        return 0;
    }
    if (o.version) {
        ps_cmd_version(stdout);
        return 0;
    }

    /* Two outputs on one file: the second write would silently replace the first (--out F --svg F). */
    const char *outs[] = {o.out, o.svg, o.db_out, o.record};
    const char *names[] = {"--out", "--svg", "--out", "--record"};
    if ((st = ps_outputs_distinct(outs, names, 4)) != PS_OK) {
        print_error(&o, 0, 1);
        return st;
    }
    /* before any output or database temporary exists: a SIGTERM from the user or the launcher removes them */
    ps_cleanup_install();
    int use_mpi = ps_cli_needs_mpi(&o);
    int rank = 0, nranks = 1;
    MPI_Comm comm = MPI_COMM_NULL;
    if (use_mpi && start_mpi(&argc, &argv, &comm, &rank, &nranks) != PS_OK) return PS_ERR_SYSTEM;

    ps_out out;
    st = ps_out_open(&out);
    if (st == PS_OK) st = ps_cli_run(&o, comm, &out);

    if (use_mpi) {
        /* A rank may fail alone (a cost database missing on its node, memory, a failed step of a collective
         * command): agree on the worst status and let the lowest failing rank tell why, so the user sees one
         * message. (Model and cluster files are read by rank 0 alone and broadcast: cli/inputs.c.) */
        ps_status worst = PS_OK;
        int first = nranks;
        if (ps_mpi_agree(comm, st, &worst, &first) != PS_OK) {
            fprintf(stderr, "psearch: error (rank %d): %s\n", rank, ps_error_message());
            ps_out_discard(&out);
            MPI_Abort(MPI_COMM_WORLD, PS_ERR_SYSTEM);
            return PS_ERR_SYSTEM;
        }
        if (rank == first) print_error(&o, rank, nranks);
        st = worst;
        if ((st == PS_OK || st == PS_ERR_INFEASIBLE) && rank == 0) {
            ps_status wst = ps_out_commit(&out, o.out ? o.out : "-");
            if (wst != PS_OK) {
                st = wst;
                print_error(&o, rank, 1);
            }
        } else {
            ps_out_discard(&out);
        }
        MPI_Finalize();
        return st;
    }

    /* "No feasible plan" still has a whole answer to show (what does not fit, by how much); bad input has none. */
    if (st == PS_OK || st == PS_ERR_INFEASIBLE) {
        ps_status wst = ps_out_commit(&out, o.out ? o.out : "-");
        if (wst != PS_OK) st = wst;
    } else {
        ps_out_discard(&out);
    }
    if (st != PS_OK) print_error(&o, 0, 1);
    return st;
}

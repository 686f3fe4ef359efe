/* cli/inputs.c for a command that plans one model for several clusters (the sweep): the model file read once, by
 * rank 0 for every rank, and those bytes parsed for each cluster (the vocabulary padding and the dtype depend on
 * it), so that no edit of the file between two clusters gives them two different models. ps_cli_load_model (cli.h)
 * is the three in one call. */
#ifndef PS_CLI_INPUTS_H
#define PS_CLI_INPUTS_H

#include "cli.h"

/* A model file as rank 0 of the communicator found and read it. */
typedef struct {
    ps_model_source src;
    char *text; /* its bytes, NUL-terminated */
    size_t len;
} ps_cli_model_file;

/* Find the model SPEC names and read its file on rank 0; every rank of comm gets rank 0's answer and bytes, or fails
 * with rank 0's status (collective; MPI_COMM_NULL: this process finds and reads). On failure f holds nothing. */
ps_status ps_cli_model_file_read(const char *spec, MPI_Comm comm, ps_cli_model_file *f);
/* ps_cli_load_model from f instead of SPEC: the model for cluster c, from the bytes every rank holds. Collective. */
ps_status ps_cli_model_from_file(const ps_cli_opts *o, const ps_cli_model_file *f, const ps_cluster *c,
                                 bool pad_for_node, MPI_Comm comm, ps_model *m);
void ps_cli_model_file_free(ps_cli_model_file *f);

#endif

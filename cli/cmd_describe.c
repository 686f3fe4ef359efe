/* `psearch model list|show` and `psearch cluster list|show`. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static ps_status print_list(const ps_cli_opts *o, ps_out *out, const char *what, char **names, int n)
{
    if (o->format == PS_FMT_JSON) {
        json_t *j = json_object(), *a = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(a, json_string(names[i]));
        json_object_set_new(j, what, a);
        return ps_out_json(out, j);
    }
    for (int i = 0; i < n; i++) fprintf(out->f, "%s\n", names[i]);
    return PS_OK;
}

ps_status ps_cmd_model(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    (void)comm; /* runs on this process alone */
    if (strcmp(o->sub, "list") == 0) {
        char **names = NULL;
        int n = 0;
        PS_TRY(ps_model_list(&names, &n));
        ps_status st = print_list(o, out, "models", names, n);
        ps_model_list_free(names, n);
        return st;
    }
    ps_model m;
    PS_TRY(ps_model_load(o->model, &o->mopts, &m));
    ps_status st = PS_OK;
    if (o->format == PS_FMT_JSON)
        st = ps_out_json(out, ps_model_to_json(&m));
    else
        ps_model_print(out->f, &m);
    ps_model_free(&m);
    return st;
}

ps_status ps_cmd_cluster(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    if (strcmp(o->sub, "list") == 0) {
        char **names = NULL;
        int n = 0;
        PS_TRY(ps_cluster_list(&names, &n));
        ps_status st = print_list(o, out, "clusters", names, n);
        ps_cluster_list_free(names, n);
        return st;
    }
    ps_cluster c;
    PS_TRY(ps_cli_load_cluster(o, o->cluster, comm, false, &c));
    ps_status st = PS_OK;
    if (o->format == PS_FMT_JSON)
        st = ps_out_json(out, ps_cluster_to_json(&c));
    else
        ps_cluster_print(out->f, &c);
    ps_cluster_free(&c);
    return st;
}

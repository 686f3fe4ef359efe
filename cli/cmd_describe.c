/* `psearch model list|show` and `psearch cluster list|show`. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void print_list(const ps_cli_opts *o, ps_out *out, const char *what, char **names, int n)
{
    if (o->format == PS_FMT_JSON) {
        json_t *j = json_object(), *a = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(a, json_string(names[i]));
        json_object_set_new(j, what, a);
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (s) fprintf(out->f, "%s\n", s);
        free(s);
        json_decref(j);
    } else {
        for (int i = 0; i < n; i++) fprintf(out->f, "%s\n", names[i]);
    }
}

static ps_status emit_json(ps_out *out, json_t *j)
{
    if (!j) return PS_FAIL(PS_ERR_SYSTEM, "out of memory building JSON output");
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(j);
    if (!s) return PS_FAIL(PS_ERR_SYSTEM, "out of memory serializing JSON output");
    fprintf(out->f, "%s\n", s);
    free(s);
    return PS_OK;
}

ps_status ps_cmd_model(const ps_cli_opts *o, ps_out *out)
{
    if (strcmp(o->sub, "list") == 0) {
        char **names = NULL;
        int n = 0;
        PS_TRY(ps_model_list(&names, &n));
        print_list(o, out, "models", names, n);
        ps_model_list_free(names, n);
        return PS_OK;
    }
    ps_model m;
    PS_TRY(ps_model_load(o->model, &o->mopts, &m));
    ps_status st = PS_OK;
    if (o->format == PS_FMT_JSON)
        st = emit_json(out, ps_model_to_json(&m));
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
        print_list(o, out, "clusters", names, n);
        ps_cluster_list_free(names, n);
        return PS_OK;
    }
    ps_cluster c;
    PS_TRY(ps_cluster_load(o->cluster, comm, &c));
    ps_status st = PS_OK;
    if (o->format == PS_FMT_JSON)
        st = emit_json(out, ps_cluster_to_json(&c));
    else
        ps_cluster_print(out->f, &c);
    ps_cluster_free(&c);
    return st;
}

ps_status ps_cmd_plan(const ps_cli_opts *o, MPI_Comm comm, ps_out *out)
{
    ps_model m;
    ps_cluster c;
    PS_TRY(ps_model_load(o->model, &o->mopts, &m));
    ps_status st = ps_cluster_load(o->cluster, comm, &c);
    if (st != PS_OK) {
        ps_model_free(&m);
        return ps_error_trace(st, __FILE__, __LINE__);
    }
    int nranks = 1;
    if (comm != MPI_COMM_NULL) MPI_Comm_size(comm, &nranks);
    /* The search lands with its own issue; until then the default command states what it would plan for. */
    if (o->format == PS_FMT_JSON) {
        json_t *j = json_object();
        json_object_set_new(j, "psearch_version", json_string(PS_VERSION));
        json_object_set_new(j, "status", json_string("inputs only: the plan search is not built yet"));
        json_object_set_new(j, "search_ranks", json_integer(nranks));
        json_object_set_new(j, "model", ps_model_to_json(&m));
        json_object_set_new(j, "cluster", ps_cluster_to_json(&c));
        st = emit_json(out, j);
    } else {
        fprintf(out->f, "# psearch %s: would plan training of %s on %s (%lld GPUs), searching on %d rank(s)\n",
                PS_VERSION, m.name, c.name, (long long)c.n_gpus, nranks);
        fprintf(out->f, "# the plan search is not built yet; these are the inputs it will use\n\n");
        ps_model_print(out->f, &m);
        fprintf(out->f, "\n");
        ps_cluster_print(out->f, &c);
    }
    ps_model_free(&m);
    ps_cluster_free(&c);
    return st;
}

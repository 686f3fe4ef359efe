/* MPI test of `--cluster auto`: every rank runs every check, and the exit code reports a failure on any rank.
 * Checks that all ranks get the same description, that its counts agree with what MPI says about the job, and that
 * Slurm's node ids split emulated nodes that share one host (set here through the environment). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "ps_calib.h"
#include "mpi_check.h"

static int g_rank;
static int g_failures;

/* Everything a rank's description holds, as text, so ranks can compare theirs with rank 0's byte for byte. */
static void describe(const ps_cluster *c, char *buf, size_t cap)
{
    size_t used = 0;
    int n = snprintf(buf, cap, "%s|%s|%d|%lld|%lld|%d", c->name, c->source, c->n_groups, (long long)c->n_nodes,
                     (long long)c->n_gpus, (int)c->heterogeneous);
    used = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < c->n_groups && used < cap; i++) {
        const ps_node_group *g = &c->groups[i];
        n = snprintf(buf + used, cap - used,
                     "\n%s|%lld|%lld|%s|%.17g|%.17g|%.17g|%s|%.17g|%.17g|%lld|%s|%.17g|%.17g|%lld|%lld", g->name,
                     (long long)g->nodes, (long long)g->gpus_per_node, g->gpu.name, g->gpu.mem_bytes,
                     g->gpu.fp16_flops, g->gpu.hbm_Bps, g->intra.kind, g->intra.bw_Bps, g->intra.latency_s,
                     (long long)g->island_size, g->inter.kind, g->inter.bw_Bps, g->inter.latency_s,
                     (long long)g->cores_per_node, (long long)g->numa_per_node);
        if (n > 0) used += (size_t)n;
    }
}

static void check_same_everywhere(const ps_cluster *c, const char *what)
{
    static char mine[65536], root[65536];
    describe(c, mine, sizeof mine);
    memcpy(root, mine, sizeof root);
    MPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
    CHECK(strcmp(mine, root) == 0, "%s: this rank's description differs from rank 0's:\n%s\nvs\n%s", what, mine, root);
}

static void check_counts(const ps_cluster *c, int64_t want_nodes, int size, const char *what)
{
    CHECK(c->n_groups >= 1, "%s: %d groups", what, c->n_groups);
    CHECK(c->n_nodes == want_nodes, "%s: %lld nodes, MPI says %lld", what, (long long)c->n_nodes,
          (long long)want_nodes);
    CHECK(c->n_nodes >= 1 && c->n_nodes <= size, "%s: %lld nodes for %d ranks", what, (long long)c->n_nodes, size);
    int64_t nodes = 0, gpus = 0;
    for (int i = 0; i < c->n_groups; i++) {
        const ps_node_group *g = &c->groups[i];
        nodes += g->nodes;
        gpus += g->nodes * g->gpus_per_node;
        CHECK(g->cores_per_node > 0, "%s: group %d has %lld cores per node", what, i, (long long)g->cores_per_node);
        CHECK(g->numa_per_node >= 1, "%s: group %d has %lld NUMA domains", what, i, (long long)g->numa_per_node);
        CHECK(g->inter.bw_Bps > 0 && g->inter.latency_s > 0, "%s: group %d network %s %g B/s", what, i, g->inter.kind,
              g->inter.bw_Bps);
        if (g->gpus_per_node == 0) {
            CHECK(strcmp(g->gpu.name, "none") == 0, "%s: CPU-only group %d has gpu '%s'", what, i, g->gpu.name);
        } else {
            CHECK(g->gpu.fp16_flops > 0 && g->gpu.mem_bytes > 0, "%s: group %d GPU '%s' has no figures", what, i,
                  g->gpu.name);
        }
    }
    CHECK(nodes == c->n_nodes, "%s: groups hold %lld nodes, cluster says %lld", what, (long long)nodes,
          (long long)c->n_nodes);
    CHECK(gpus == c->n_gpus, "%s: groups hold %lld GPUs, cluster says %lld", what, (long long)gpus,
          (long long)c->n_gpus);
    CHECK(strlen(c->source) > 0, "%s: empty source", what);
    char ranks[32];
    snprintf(ranks, sizeof ranks, "%d rank(s)", size);
    CHECK(strstr(c->source, ranks) != NULL, "%s: source does not give the %d ranks: %s", what, size, c->source);
}

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 3;
    int size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* Under srun (tests/hw/slurm_detect.sh) the real Slurm environment is checked first: as many nodes as srun -N
     * gave, and the job in the name. */
    if (argc == 3 && strcmp(argv[1], "--slurm-nodes") == 0) {
        int64_t want = atoll(argv[2]);
        ps_cluster c;
        ps_status st = ps_cluster_detect(MPI_COMM_WORLD, &c);
        CHECK(st == PS_OK, "detect under Slurm: %s", ps_error_message());
        if (st == PS_OK) {
            check_counts(&c, want, size, "srun");
            check_same_everywhere(&c, "srun");
            const char *job = getenv("SLURM_JOB_ID");
            CHECK(job && strstr(c.name, job) && strncmp(c.name, "auto-", 5) == 0, "name '%s' lacks the job id",
                  c.name);
            if (g_rank == 0) printf("# srun: %s: %s\n", c.name, c.source);
            ps_cluster_free(&c);
        }
    }

    /* The test may itself run under Slurm (srun or an salloc shell); its node split is then checked separately
     * below, so the plain case starts from a clean environment. */
    static const char *const slurm_vars[] = {"SLURM_NODEID", "SLURM_JOB_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_ID",
                                             "SLURM_CLUSTER_NAME"};
    char *saved[5] = {NULL};
    for (int i = 0; i < 5; i++) {
        const char *v = getenv(slurm_vars[i]);
        saved[i] = v ? strdup(v) : NULL;
        unsetenv(slurm_vars[i]);
    }

    /* What MPI says: the nodes are the shared-memory domains. */
    MPI_Comm shared;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &shared);
    int lrank = 0;
    MPI_Comm_rank(shared, &lrank);
    int leader = lrank == 0, mpi_nodes = 0;
    MPI_Allreduce(&leader, &mpi_nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_free(&shared);

    ps_cluster c;
    ps_status st = ps_cluster_detect(MPI_COMM_WORLD, &c);
    CHECK(st == PS_OK, "detect: %s", ps_error_message());
    if (st == PS_OK) {
        CHECK(strcmp(c.name, "auto") == 0, "name '%s'", c.name);
        check_counts(&c, mpi_nodes, size, "detect");
        check_same_everywhere(&c, "detect");
        if (g_rank == 0) {
            printf("# %s: %lld node(s), %lld GPU(s), %d group(s)\n# source: %s\n", c.name, (long long)c.n_nodes,
                   (long long)c.n_gpus, c.n_groups, c.source);
            for (int i = 0; i < c.n_groups; i++)
                printf("#   group %s: %lld x (%lld GPU %s, %lld cores, %lld NUMA, inter %s %.3g GB/s)\n",
                       c.groups[i].name, (long long)c.groups[i].nodes, (long long)c.groups[i].gpus_per_node,
                       c.groups[i].gpu.name, (long long)c.groups[i].cores_per_node,
                       (long long)c.groups[i].numa_per_node, c.groups[i].inter.kind, c.groups[i].inter.bw_Bps / 1e9);
        }
        ps_cluster_free(&c);
    }

    /* The spec form: "auto" locates as detection (cli/inputs.c then calls ps_cluster_detect); hw/'s loader, which
     * has no MPI, refuses it. */
    ps_cluster_source src;
    st = ps_cluster_locate("auto", &src);
    CHECK(st == PS_OK && src.detect, "locate auto: %s", ps_error_message());
    CHECK(ps_cluster_load("auto", &c) == PS_ERR_INPUT, "ps_cluster_load(\"auto\") is not refused");

    /* Each rank alone is one node. */
    st = ps_cluster_detect(MPI_COMM_SELF, &c);
    CHECK(st == PS_OK, "detect on MPI_COMM_SELF: %s", ps_error_message());
    if (st == PS_OK) {
        check_counts(&c, 1, 1, "self");
        ps_cluster_free(&c);
    }

    /* Emulated Slurm nodes: one host, so shared memory sees one node, but Slurm numbers the ranks' nodes apart.
     * Here every rank claims its own node. */
    char id[32];
    snprintf(id, sizeof id, "%d", g_rank);
    setenv("SLURM_NODEID", id, 1);
    snprintf(id, sizeof id, "%d", size);
    setenv("SLURM_JOB_NUM_NODES", id, 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("SLURM_CLUSTER_NAME", "testcluster", 1);
    st = ps_cluster_detect(MPI_COMM_WORLD, &c);
    CHECK(st == PS_OK, "detect with Slurm ids: %s", ps_error_message());
    if (st == PS_OK) {
        int64_t want = size > mpi_nodes ? size : mpi_nodes;
        check_counts(&c, want, size, "slurm");
        check_same_everywhere(&c, "slurm");
        CHECK(strcmp(c.name, "auto-testcluster-job4242") == 0, "slurm name '%s'", c.name);
        CHECK(strstr(c.source, "4242") && strstr(c.source, "testcluster"), "slurm source '%s'", c.source);
        if (size > mpi_nodes) CHECK(strstr(c.source, "SLURM_NODEID") != NULL, "split not by Slurm: %s", c.source);
        ps_cluster_free(&c);
    }

    /* Slurm ids that all agree (one real node) leave the shared-memory split alone. */
    setenv("SLURM_NODEID", "0", 1);
    st = ps_cluster_detect(MPI_COMM_WORLD, &c);
    CHECK(st == PS_OK, "detect with one Slurm id: %s", ps_error_message());
    if (st == PS_OK) {
        check_counts(&c, mpi_nodes, size, "one slurm node");
        ps_cluster_free(&c);
    }

    /* A communicator that does not exist is bad input, on every rank alike. */
    st = ps_cluster_detect(MPI_COMM_NULL, &c);
    CHECK(st == PS_ERR_INPUT, "detect(MPI_COMM_NULL) returned %d", (int)st);

    for (int i = 0; i < 5; i++) {
        if (saved[i]) setenv(slurm_vars[i], saved[i], 1);
        else unsetenv(slurm_vars[i]);
        free(saved[i]);
    }

    int total = 0;
    MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("%s: %d failed check(s) over %d rank(s)\n", total ? "FAIL" : "PASS", total, size);
    MPI_Finalize();
    return total ? 1 : 0;
}

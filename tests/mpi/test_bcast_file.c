/* MPI test of ps_mpi_bcast_file: every rank gets the root's bytes whatever its own path shows (a file missing on
 * that rank, or another content), and a file the root cannot read fails every rank alike without a hang; and
 * ps_mpi_agree_status on a process alone, as the loaders call both without MPI. Every rank runs every check; the exit
 * code reports a failure on any rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "ps_comm.h"
#include "mpi_check.h"

static int g_rank, g_size;
static int g_failures;

#define MISSING "/nonexistent-psearch-test/input.json"

/* The root's content: every byte value, NULs included, over more than MPI's eager limit (the broadcast is a real
 * transfer, not one small message); `salt` makes another rank's file differ. */
static unsigned char content_byte(size_t i, int salt)
{
    return (unsigned char)((i * 131u + 7u + (unsigned)salt) & 0xffu);
}

/* A file of n bytes of content_byte(., salt) in the temporary folder; its path in path. */
static int write_temp(char *path, size_t cap, size_t n, int salt)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, cap, "%s/psearch-bcast-%d-XXXXXX", dir && *dir ? dir : "/tmp", g_rank);
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    unsigned char *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        return -1;
    }
    for (size_t i = 0; i < n; i++) b[i] = content_byte(i, salt);
    ps_status st = ps_write_all(fd, b, n, path);
    free(b);
    close(fd);
    return st == PS_OK ? 0 : -1;
}

static void check_root_bytes(const char *buf, size_t len, size_t want, const char *what)
{
    CHECK(len == want, "%s: %zu bytes, the root's file has %zu", what, len, want);
    CHECK(buf != NULL, "%s: no buffer", what);
    if (!buf || len != want) return;
    size_t bad = want;
    for (size_t i = 0; i < want && bad == want; i++)
        if ((unsigned char)buf[i] != content_byte(i, 0)) bad = i;
    CHECK(bad == want, "%s: byte %zu differs from the root's", what, bad);
    CHECK(buf[len] == '\0', "%s: not NUL-terminated", what);
}

/* The root reads its file; the others name a path that does not exist for them, or (other_file) a file of their own
 * with another content: both must end up with the root's bytes. */
static void test_shares_root_bytes(int root, size_t n, bool other_file)
{
    char what[96];
    snprintf(what, sizeof what, "root %d, %zu bytes, %s", root, n, other_file ? "others see another file" :
                                                                                 "others see no file");
    char path[512] = MISSING;
    int made = 0;
    if (g_rank == root || other_file) {
        made = write_temp(path, sizeof path, g_rank == root ? n : n / 2 + 3, g_rank == root ? 0 : 1 + g_rank) == 0;
        CHECK(made, "%s: cannot write %s", what, path);
    }
    char *buf = NULL;
    size_t len = 0;
    ps_status st = ps_mpi_bcast_file(MPI_COMM_WORLD, root, path, &buf, &len);
    CHECK(st == PS_OK, "%s: status %d: %s", what, (int)st, ps_error_message());
    if (st == PS_OK) check_root_bytes(buf, len, n, what);
    free(buf);
    if (made) unlink(path);
}

/* The root's path is missing while the others' files exist: every rank fails with the root's status, the root's
 * message names its file, the others name the root and carry its message; nobody waits for bytes that never come. */
static void test_root_cannot_read(int root)
{
    char path[512] = MISSING;
    int made = 0;
    if (g_rank != root) made = write_temp(path, sizeof path, 100, g_rank) == 0;
    char *buf = (char *)&made; /* must come back NULL */
    size_t len = 42;
    ps_status st = ps_mpi_bcast_file(MPI_COMM_WORLD, root, path, &buf, &len);
    CHECK(st == PS_ERR_INPUT, "root %d cannot read: status %d, expected %d (%s)", root, (int)st, (int)PS_ERR_INPUT,
          ps_error_message());
    CHECK(buf == NULL && len == 0, "root %d cannot read: buffer %p of %zu bytes left", root, (void *)buf, len);
    char want[96];
    if (g_rank == root)
        snprintf(want, sizeof want, "%s: cannot open", MISSING);
    else
        snprintf(want, sizeof want, "failed on rank %d: %s: cannot open", root, MISSING);
    CHECK(strstr(ps_error_message(), want) != NULL, "root %d cannot read: message '%s' lacks '%s'", root,
          ps_error_message(), want);
    if (st == PS_OK) free(buf);
    if (made) unlink(path);
    /* The communicator is still usable by all: the failure was agreed, not left half-way through a broadcast. */
    int one = 1, sum = 0;
    CHECK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS && sum == g_size,
          "Allreduce after the failure: %d", sum);
}

/* Without MPI (MPI_COMM_NULL) and on one process (MPI_COMM_SELF) each rank reads its own file. */
static void test_local(void)
{
    char path[512];
    CHECK(write_temp(path, sizeof path, 5000, 0) == 0, "cannot write %s", path);
    MPI_Comm comms[2] = {MPI_COMM_NULL, MPI_COMM_SELF};
    for (int k = 0; k < 2; k++) {
        char *buf = NULL;
        size_t len = 0;
        ps_status st = ps_mpi_bcast_file(comms[k], 0, path, &buf, &len);
        CHECK(st == PS_OK, "%s: status %d: %s", k ? "MPI_COMM_SELF" : "MPI_COMM_NULL", (int)st, ps_error_message());
        if (st == PS_OK) check_root_bytes(buf, len, 5000, k ? "MPI_COMM_SELF" : "MPI_COMM_NULL");
        free(buf);
        buf = NULL;
        st = ps_mpi_bcast_file(comms[k], 0, MISSING, &buf, &len);
        CHECK(st == PS_ERR_INPUT && buf == NULL, "%s, missing file: status %d", k ? "MPI_COMM_SELF" : "MPI_COMM_NULL",
              (int)st);
    }
    unlink(path);
}

/* ps_mpi_agree_status on a process alone, without MPI (MPI_COMM_NULL, as the loaders pass it then) and on
 * MPI_COMM_SELF: the local status comes back with its own message, nothing relayed. */
static void test_agree_alone(void)
{
    MPI_Comm comms[2] = {MPI_COMM_NULL, MPI_COMM_SELF};
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "MPI_COMM_SELF" : "MPI_COMM_NULL";
        ps_error_clear();
        CHECK(ps_mpi_agree_status(comms[k], PS_OK, "agreeing alone") == PS_OK, "%s, PS_OK: %s", name,
              ps_error_message());
        ps_status st = ps_mpi_agree_status(comms[k], PS_FAIL(PS_ERR_INPUT, "the cause"), "agreeing alone");
        CHECK(st == PS_ERR_INPUT, "%s, a failure: status %d", name, (int)st);
        CHECK(strcmp(ps_error_message(), "the cause") == 0, "%s, a failure: message '%s'", name, ps_error_message());
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    /* As psearch runs: MPI errors come back as codes (ps_mpi_status). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);

    test_shares_root_bytes(0, 300000, false);
    test_shares_root_bytes(0, 300000, true);
    test_shares_root_bytes(g_size - 1, 1000, true);
    test_shares_root_bytes(0, 0, true); /* an empty file is content too */
    test_root_cannot_read(0);
    test_root_cannot_read(g_size - 1);
    test_local();
    test_agree_alone();

    int total = 0;
    MPI_Allreduce(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("test_bcast_file: %d ranks, %d failed checks\n", g_size, total);
    MPI_Finalize();
    return total == 0 ? 0 : 1;
}

/* `psearch --version`: psearch and every library it was built with, as nccl-tests echo theirs in a header. */
#include <hdf5.h>
#include <hwloc.h>
#include <jansson.h>
#include <mpi.h>
#include <string.h>

#include "cli.h"

/* OpenBLAS's own introspection; declared here because cblas.h does not declare it on every version. */
char *openblas_get_config(void);

void ps_cmd_version(FILE *f)
{
    fprintf(f, "psearch %s (%s build, %s)\n", PS_VERSION, PS_BUILD_TYPE, PS_C_COMPILER);

    /* The versions a cost database records as its provenance (costdb/db.c), so the two never disagree. Allowed
     * before MPI_Init (MPI-3.0 sec. 8.1.1). */
    ps_costdb_versions v;
    ps_costdb_versions_get(&v);
    if (v.mpi[0]) {
        v.mpi[strcspn(v.mpi, ",")] = '\0'; /* the name and version; the build details follow the comma */
        fprintf(f, "  MPI       %s (MPI %d.%d)\n", v.mpi, MPI_VERSION, MPI_SUBVERSION);
    }
#ifdef H5_HAVE_PARALLEL
    const char *par = "parallel";
#else
    const char *par = "serial";
#endif
    fprintf(f, "  HDF5      %s (%s)\n", v.hdf5, par);
    unsigned hv = hwloc_get_api_version();
    /* hwloc reports its API version at run time; the package version comes from pkg-config at configure time. */
    fprintf(f, "  hwloc     %s (API %u.%u.%u)\n", PS_HWLOC_VERSION, hv >> 16, (hv >> 8) & 0xff, hv & 0xff);
    fprintf(f, "  jansson   %s\n", jansson_version_str());
    fprintf(f, "  OpenBLAS  %s\n", openblas_get_config());
    if (v.cuda[0])
        fprintf(f, "  CUDA      %s, cuBLAS %s\n", v.cuda, PS_HAVE_CUBLAS ? "yes" : "no");
    else
        fprintf(f, "  CUDA      not built (no CUDA toolkit found at configure time)\n");
    fprintf(f, "  NCCL      %s\n", v.nccl[0] ? v.nccl : "not built");
    char dir[4096];
    if (ps_data_dir("models", dir, sizeof dir) == PS_OK) {
        char *slash = strrchr(dir, '/'); /* show the data folder, not its models/ child */
        if (slash) *slash = '\0';
        fprintf(f, "  data      %s\n", dir);
    } else {
        fprintf(f, "  data      not found: %s\n", ps_error_message());
    }
}

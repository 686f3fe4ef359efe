/* `psearch --version`: psearch and every library it was built with, as nccl-tests echo theirs in a header. */
#include <hdf5.h>
#include <hwloc.h>
#include <jansson.h>
#include <mpi.h>
#include <string.h>

#include "cli.h"
#if PS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#if PS_HAVE_NCCL
#include <nccl.h>
#endif

/* OpenBLAS's own introspection; declared here because cblas.h does not declare it on every version. */
char *openblas_get_config(void);

void ps_cmd_version(FILE *f)
{
    fprintf(f, "psearch %s (%s build, %s)\n", PS_VERSION, PS_BUILD_TYPE, PS_C_COMPILER);

    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    /* Allowed before MPI_Init (MPI-3.0 sec. 8.1.1). */
    if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) {
        for (int i = 0; i < len; i++)
            if (mpi[i] == '\n' || mpi[i] == ',') {
                mpi[i] = '\0';
                break;
            }
        fprintf(f, "  MPI       %s (MPI %d.%d)\n", mpi, MPI_VERSION, MPI_SUBVERSION);
    }
    unsigned maj = 0, min = 0, rel = 0;
    H5get_libversion(&maj, &min, &rel);
#ifdef H5_HAVE_PARALLEL
    const char *par = "parallel";
#else
    const char *par = "serial";
#endif
    fprintf(f, "  HDF5      %u.%u.%u (%s)\n", maj, min, rel, par);
    unsigned hv = hwloc_get_api_version();
    /* hwloc reports its API version at run time; the package version comes from pkg-config at configure time. */
    fprintf(f, "  hwloc     %s (API %u.%u.%u)\n", PS_HWLOC_VERSION, hv >> 16, (hv >> 8) & 0xff, hv & 0xff);
    fprintf(f, "  jansson   %s\n", jansson_version_str());
    fprintf(f, "  OpenBLAS  %s\n", openblas_get_config());
#if PS_HAVE_CUDA
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    fprintf(f, "  CUDA      runtime %d.%d, driver %s", rt / 1000, (rt % 1000) / 10, drv ? "" : "none");
    if (drv) fprintf(f, "%d.%d", drv / 1000, (drv % 1000) / 10);
    fprintf(f, ", cuBLAS %s\n", PS_HAVE_CUBLAS ? "yes" : "no");
#else
    fprintf(f, "  CUDA      not built (no CUDA toolkit found at configure time)\n");
#endif
#if PS_HAVE_NCCL
    int nv = 0;
    ncclGetVersion(&nv);
    fprintf(f, "  NCCL      %d.%d.%d\n", nv / 10000, (nv / 100) % 100, nv % 100);
#else
    fprintf(f, "  NCCL      not built\n");
#endif
    char dir[4096];
    if (ps_data_dir("models", dir, sizeof dir) == PS_OK) {
        char *slash = strrchr(dir, '/'); /* show the data folder, not its models/ child */
        if (slash) *slash = '\0';
        fprintf(f, "  data      %s\n", dir);
    } else {
        fprintf(f, "  data      not found: %s\n", ps_error_message());
    }
}

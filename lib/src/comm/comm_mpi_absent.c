/* comm_mpi_absent.c: the mpi backend's entry points in a build without MPI
 * (they say how to get the backend instead of failing to link), plus
 * vqc_mpi_launched, which only reads the environment and so is the same in
 * every build: under mpiexec a build without MPI should say "install OpenMPI"
 * rather than quietly run N unrelated single-rank jobs. */
#include <stdlib.h>

#include "vqc/comm.h"
#include "vqc/version.h"

bool vqc_mpi_launched(void) {
  /* OpenMPI's mpiexec, MPICH/Hydra (PMI), PMIx launchers, and srun. */
  if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") ||
      getenv("PMIX_RANK"))
    return true;
  return getenv("SLURM_PROCID") && getenv("SLURM_NTASKS");
}

#if !VQC_WITH_MPI
vqc_status vqc_mpi_comm_create(int *argc, char ***argv, vqc_comm **out) {
  (void)argc;
  (void)argv;
  if (out) *out = NULL;
  return vqc_error(VQC_EUNSUPPORTED,
                   "this build has no mpi backend: install OpenMPI "
                   "(scripts/install-deps.sh) and reconfigure with "
                   "-DVQC_WITH_MPI=ON, or use the threads backend");
}

void vqc_mpi_comm_destroy(vqc_comm *c) { (void)c; }
#endif

/* comm_nccl_absent.c: the nccl backend's entry points in a build without
 * NCCL (they say how to get the backend instead of failing to link). With
 * VQC_WITH_NCCL the real ones live in nccl/comm_nccl.c and this file is
 * empty. */
#include "vqc/comm.h"
#include "vqc/version.h"

#if !VQC_WITH_NCCL
vqc_status vqc_nccl_comm_create(int *argc, char ***argv, vqc_comm **out) {
  (void)argc;
  (void)argv;
  if (out) *out = NULL;
  return vqc_error(VQC_EUNSUPPORTED,
                   "this build has no nccl backend: it needs CUDA, MPI and "
                   "NCCL (nccl.h, libnccl); install them and reconfigure "
                   "with -DVQC_WITH_NCCL=ON, or use the mpi backend");
}

void vqc_nccl_comm_destroy(vqc_comm *c) { (void)c; }

void vqc_nccl_interrupt(void) {}
void vqc_nccl_interrupt_clear(void) {}
#endif

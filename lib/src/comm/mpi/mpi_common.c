/* mpi_common.c: the poll pacing shared by the mpi and nccl comm backends
 * (see mpi_common.h; the overlap test is inline there). */
#include "comm/mpi/mpi_common.h"

#include <sched.h>
#include <time.h>

void vqc_poll_pause(uint64_t waited_ns) {
  if (waited_ns < VQC_POLL_SPIN_NS) return;
  if (waited_ns < VQC_POLL_YIELD_NS) {
    sched_yield();
    return;
  }
  vqc_poll_nap();
}

void vqc_poll_nap(void) {
  struct timespec nap = {0, VQC_POLL_NAP_NS};
  nanosleep(&nap, NULL);
}

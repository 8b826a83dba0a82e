/* mpi_common.h: what the MPI-launched comm backends share (internal, not a
 * public header): the mpi backend (mpi/comm_mpi.c) and the nccl backend
 * (nccl/comm_nccl.c, which runs on top of an mpi comm). Compiled whenever
 * MPI is (lib/CMakeLists.txt globs lib/src/mpi/), and every nccl build has
 * MPI (NCCL requires it), so both backends can always link against it.
 *
 * Neither MPI nor NCCL has a collective with a timeout, so both backends
 * start a collective without blocking and poll for its completion until the
 * comm's deadline; the pacing of that poll loop lives here, as does the
 * buffer-overlap test both use to recognise in-place calls. */
#ifndef VQC_MPI_COMMON_H
#define VQC_MPI_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Waits in three phases, by the time since the wait began:
 * Phase 1, spin: a small collective between ranks of one node finishes in a
 * few microseconds, and MPI_Wait busy-polls the same way, so polling without
 * pause for the first 50 us adds no latency. (With more ranks than cores,
 * OpenMPI's own MPI_Test already yields when it finds nothing to do.) */
#define VQC_POLL_SPIN_NS 50000u
/* Phase 2, yield on every test up to 10 ms: long collectives (1 MiB takes a
 * few hundred us, more when ranks share cores) keep polling at full rate,
 * yet a rank we wait for that needs our core gets it. */
#define VQC_POLL_YIELD_NS 10000000u
/* Phase 3, nap between tests: after 10 ms the wait is a late or hung peer,
 * not data movement; a 50 us nap adds under 1% to such a wait and stops it
 * burning a core until the deadline. */
#define VQC_POLL_NAP_NS 50000L

/* Called after each poll that found the operation unfinished, `waited_ns`
 * after the wait began: returns at once (spin), yields the CPU or naps, by
 * the phases above. */
void vqc_poll_pause(uint64_t waited_ns);

/* One nap of VQC_POLL_NAP_NS (for waits that are never short, such as
 * waiting for every rank to join a communicator). */
void vqc_poll_nap(void);

/* Whether byte ranges [a, a+na) and [b, b+nb) overlap (addresses compared as
 * integers: the buffers may be unrelated objects). Empty ranges never
 * overlap. Inline: every collective asks. */
static inline bool vqc_ranges_overlap(const void *a, size_t na, const void *b,
                                      size_t nb) {
  uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
  return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

#endif /* VQC_MPI_COMMON_H */

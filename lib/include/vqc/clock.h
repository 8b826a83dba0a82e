/* clock.h: the monotonic clock every deadline, ledger time, poll and
 * duration of vqcheck reads: libvqcheck's comm and ledger, the checkers,
 * the harness and the benches (not the MPI interposer, which stands alone).
 * CLOCK_MONOTONIC: a wall-clock jump neither stretches nor cuts a wait.
 * Inline: the ledger reads it twice per collective. */
#ifndef VQC_CLOCK_H
#define VQC_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t vqc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in seconds. */
static inline double vqc_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* VQC_CLOCK_H */

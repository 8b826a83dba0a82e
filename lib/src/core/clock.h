/* clock.h: the monotonic clock every deadline, ledger time and poll of
 * libvqcheck reads (not a public header). CLOCK_MONOTONIC: a wall-clock
 * jump neither stretches nor cuts a wait. */
#ifndef VQC_CORE_CLOCK_H
#define VQC_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t vqc_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* VQC_CORE_CLOCK_H */

/* clock.h: the monotonic clock every deadline, ledger time, poll and
 * duration of vqcheck reads: libvqcheck's comm and ledger, the checkers,
 * the harness and the benches (not the MPI interposer, which stands alone);
 * and the CPU-time clocks the benches time CPU work with.
 * CLOCK_MONOTONIC: a wall-clock jump neither stretches nor cuts a wait.
 * Inline: the ledger reads the coarse one twice per collective. */
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

/* vqc_now_ns's clock as of its last tick (CLOCK_MONOTONIC_COARSE: 1 to 4
 * ms behind it, never ahead): the ledger's record times, read twice per
 * collective. They order a rank's calls and tell a hang's seconds, which
 * a tick does not change, and this read costs 10 ns on the project's VM
 * where vqc_now_ns costs 48 (bench_comm's "clock reads"). Deadlines and
 * durations read vqc_now_ns. */
static inline uint64_t vqc_now_coarse_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC in seconds. */
static inline double vqc_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread, in seconds (CLOCK_THREAD_CPUTIME_ID). */
static inline double vqc_thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the whole process, in seconds (CLOCK_PROCESS_CPUTIME_ID). */
static inline double vqc_process_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif /* VQC_CLOCK_H */

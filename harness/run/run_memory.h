/* run_memory.h: how much memory a scenario will take, and whether this
 * process can have it, decided before any training starts.
 *
 * A scenario's sizes multiply (ranks x batch x dim, codebook x dim, the
 * global batch squared for CLIP's similarity matrix), and a typo such as
 * `ranks: 64, batch: 1048576` used to grow silently to 9 GB of threads and
 * then die (or take the machine with it) minutes later. The runner calls
 * vqc_run_check_memory first: a scenario whose estimate exceeds what this
 * process can get is refused in milliseconds with VQC_EINVAL (exit 2),
 * saying how much it needs, per rank, and what the machine has.
 *
 * The estimate's formula and its measured accuracy are in run_memory.c. */
#ifndef VQC_RUN_MEMORY_H
#define VQC_RUN_MEMORY_H

#include <stdint.h>

#include "scenario.h"
#include "vqc/comm.h"
#include "vqc/status.h"

/* "No limit" in vqc_run_memory_limits. */
#define VQC_MEMORY_UNLIMITED UINT64_MAX

/* The stack each rank thread of the threads backend reserves: the same
 * figure as lib/src/comm/comm_threads.c's VQC_THREADS_RANK_STACK, which has no
 * public name (tests/unit/test_threads_scale.c checks the two agree). */
#define VQC_RUN_RANK_STACK ((uint64_t)256 * 1024)
/* File descriptors a rank holds (its live record and trace open for the
 * whole run, a dump written at the end) and the process besides them. */
#define VQC_RUN_FILES_PER_RANK 3
#define VQC_RUN_FILES_BASE 64

/* A scenario's estimated peak, in bytes, for the ranks one process runs
 * (threads: every rank; mpi/nccl: one). */
typedef struct vqc_run_memory {
  int ranks_here;        /* ranks in this process */
  uint64_t per_rank;     /* the largest single rank's peak */
  uint64_t resident;     /* the process's peak resident memory: the ranks'
                            peaks (summed: they run at once) + a base */
  uint64_t address;      /* resident + what is reserved but not touched
                            (thread stacks, collective ledgers): what
                            RLIMIT_AS (ulimit -v) counts */
  uint64_t files;        /* file descriptors the ranks hold at once */
} vqc_run_memory;

/* What this process may use; VQC_MEMORY_UNLIMITED where no such limit is
 * known. */
typedef struct vqc_run_memory_limits {
  uint64_t mem_total;      /* /proc/meminfo MemTotal */
  uint64_t mem_available;  /* /proc/meminfo MemAvailable */
  uint64_t cgroup_left;    /* the memory cgroup's limit minus its usage */
  uint64_t rlimit_as;      /* RLIMIT_AS soft limit (ulimit -v) */
  uint64_t rlimit_data;    /* RLIMIT_DATA soft limit (ulimit -d) */
  /* What this process already counts against those two (/proc/self/status
   * VmSize, VmData; 0 when unknown): the shared libraries (CUDA, NCCL,
   * MPI) alone map a few hundred MiB of address space. */
  uint64_t vm_size;
  uint64_t vm_data;
} vqc_run_memory_limits;

/* The estimate for sc with `ranks_here` of its ranks in this process
 * (ranks 0..ranks_here-1 for threads; 1 for a launched backend, sized by
 * the largest rank's batch). */
void vqc_run_memory_estimate(const vqc_scenario *sc, int ranks_here,
                             vqc_run_memory *out);

/* Reads this process's limits (never fails: an unreadable source is
 * VQC_MEMORY_UNLIMITED). */
void vqc_run_memory_limits_read(vqc_run_memory_limits *out);

/* VQC_OK when est fits lim; otherwise VQC_EINVAL with a message naming the
 * scenario, the estimate (total and per rank), the limit it exceeds and
 * what to lower: with every rank in this process (threads), the most ranks
 * that would fit. Pure: tests pass made-up limits. */
vqc_status vqc_run_memory_fits(const vqc_scenario *sc,
                               const vqc_run_memory *est,
                               const vqc_run_memory_limits *lim);

/* VQC_OK when est->files fit an open-file limit of `nofile` descriptors
 * (0 or VQC_MEMORY_UNLIMITED: no limit); otherwise VQC_EINVAL naming both
 * and the ulimit to raise. Pure. */
vqc_status vqc_run_files_fit(const vqc_scenario *sc, const vqc_run_memory *est,
                             uint64_t nofile);

/* The runner's check (estimate, read limits, fits) for sc->ranks threads
 * in this process. When the open-file soft limit is too low for the ranks
 * and the hard limit is not, it first raises the soft limit (as `ulimit
 * -n` would; the only change it makes to the process). */
vqc_status vqc_run_check_memory(const vqc_scenario *sc);

/* The same for one rank per process of c's world; every rank returns the
 * same answer (they agree over c's side channel, so one rank refusing
 * alone cannot leave the others waiting in the run's first exchange). */
vqc_status vqc_run_check_memory_comm(const vqc_scenario *sc, vqc_comm *c);

#endif /* VQC_RUN_MEMORY_H */

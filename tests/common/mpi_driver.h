/* mpi_driver.h: what every tests/mpi/mpi_*.c driver shares: starting the
 * mpi comm, the CHECK macros its cases count failed checks with, and the
 * last line "N passed, M failed" with the exit code. Running a table of
 * cases and printing "name: ok" / "name: FAILED" is coll_cases.h's
 * vqc_run_case_list (the threads tests use it too).
 *
 * Only for the drivers (it defines the short macro names CHECK and
 * CHECK_OK). It uses the public API alone, so it compiles in every build:
 * without MPI, vqc_driver_start says why it cannot start (the drivers are
 * then not built at all, tests/CMakeLists.txt). */
#ifndef VQC_MPI_DRIVER_H
#define VQC_MPI_DRIVER_H

#include "vqc/comm.h"

/* This rank's failed checks in the running case: CHECK adds one per failed
 * check; a case sets it to 0 when it starts and returns it at the end. */
extern int vqc_driver_failures;
/* This process's rank in the world, for messages; set by
 * vqc_driver_start. */
extern int vqc_driver_rank;

/* Counts one failed check and prints it to stderr as
 * "[rank R] file:line: cond: message", in a single write so lines from
 * several ranks sharing stderr do not interleave mid-line. */
void vqc_driver_check_failed(const char *file, int line, const char *cond,
                             const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond))                                                        \
      vqc_driver_check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)
#define CHECK_OK(st, what)                                               \
  CHECK((st) == VQC_OK, "%s returned %s: %s", (what), vqc_status_name(st), \
        vqc_last_error())

/* CLOCK_MONOTONIC in seconds. */
double vqc_driver_now_s(void);

/* Creates the world's mpi comm (vqc_mpi_comm_create, which starts MPI),
 * sets vqc_driver_rank and, when timeout_s > 0, the comm's per-collective
 * timeout. On failure prints "<prog>: cannot create the mpi comm: <why>" to
 * stderr and returns NULL. The caller destroys the comm with
 * vqc_mpi_comm_destroy. */
vqc_comm *vqc_driver_start(const char *prog, int *argc, char ***argv,
                           double timeout_s);

/* Rank 0 prints the last line, "<passed> passed, <failed> failed". Returns
 * the driver's exit code: 0 when no case failed, else 1. */
int vqc_driver_summary(int passed, int failed);

#endif /* VQC_MPI_DRIVER_H */

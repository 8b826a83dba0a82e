/* mpi_driver.c: the boilerplate shared by the tests/mpi drivers (see
 * mpi_driver.h). */
#include "mpi_driver.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int vqc_driver_failures;
int vqc_driver_rank;

void vqc_driver_check_failed(const char *file, int line, const char *cond,
                             const char *fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  fprintf(stderr, "[rank %d] %s:%d: %s: %s\n", vqc_driver_rank, file, line,
          cond, detail);
  vqc_driver_failures++;
}

double vqc_driver_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

vqc_comm *vqc_driver_start(const char *prog, int *argc, char ***argv,
                           double timeout_s) {
  vqc_comm *c = NULL;
  if (vqc_mpi_comm_create(argc, argv, &c) != VQC_OK) {
    fprintf(stderr, "%s: cannot create the mpi comm: %s\n", prog,
            vqc_last_error());
    return NULL;
  }
  vqc_driver_rank = vqc_comm_rank(c);
  if (timeout_s > 0) vqc_comm_set_timeout(c, timeout_s);
  return c;
}

int vqc_driver_summary(int passed, int failed) {
  if (vqc_driver_rank == 0) printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

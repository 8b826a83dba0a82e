/* init_wait.c: one rank waits, before MPI_Init, for an input file that
 * the job's setup never wrote (its path from the launcher's rank
 * variable: rank 1 waits, rank 0 goes on into MPI_Init and waits there for
 * rank 1). The job hangs with no MPI call made. `vqcheck watch --timeout
 * T` must report it within T + 5 s (a deadlock naming rank 1's stack at
 * line 24) and stop the job, where before nothing was watched until
 * MPI_Init returned and vqcheck watch hung with the job. 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void wait_for_input(const char *path) {
  while (access(path, R_OK) != 0) sleep(1);
}

int main(int argc, char **argv) {
  const char *r = getenv("OMPI_COMM_WORLD_RANK");
  char path[64];
  snprintf(path, sizeof path, "/nonexistent/input-%s.dat", r ? r : "0");
  /* the bug: rank 1's input was never written (and rank 0's is not
   * needed) */
  if (r && atoi(r) == 1) wait_for_input(path);
  MPI_Init(&argc, &argv);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}

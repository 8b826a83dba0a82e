/* finalize_stuck.c: every rank reaches MPI_Finalize, then rank 1 waits,
 * on its way out, for a marker file that its job's post-processing never
 * writes. Its process never exits, so mpiexec (and vqcheck watch) would
 * wait for it for good. `vqcheck watch --timeout T` must report it within
 * T + 5 s (a deadlock naming rank 1: finished, its process did not exit)
 * and stop the job. 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

static void wait_for_marker(const char *path) {
  while (access(path, R_OK) != 0) sleep(1);
}

int main(int argc, char **argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x = rank, sum = 0.0;
  MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  /* the bug: rank 1 waits for a marker nobody writes */
  if (rank == 1) wait_for_marker("/nonexistent/postprocess.done");
  return 0;
}

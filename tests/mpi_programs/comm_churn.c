/* comm_churn.c: a communicator made and freed every step (a library that
 * duplicates the caller's communicator per call, as many do): 50 steps of
 * MPI_Comm_dup, one all-reduce on the copy, MPI_Comm_free. The copies
 * are world/dup1 ... world/dup50, and a freed one's memory is reused for
 * the next, so the interposer must not write a call on the new one as a
 * short line of the old one's (docs/mpi.md "What it costs"): correct, and
 * each all-reduce recorded on its own communicator. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  double x = 1.0, y = 0.0, total = 0.0;
  for (int step = 0; step < 50; step++) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, c);
    total += y;
    MPI_Comm_free(&c);
  }
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) printf("total %g\n", total);
  MPI_Finalize();
  return 0;
}

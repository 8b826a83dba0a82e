/* inter_skip.c: two groups (even and odd world ranks) joined by an
 * intercommunicator exchange a checksum each step with MPI_Allreduce;
 * world rank 3 stops after step 2 when its own input runs out (the bug on
 * line 28: the others wait in the third all-reduce forever). 4 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int color = rank % 2;
  MPI_Comm half, inter;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 7, &inter);
  double sum = 0;
  const int steps = rank == 3 ? 2 : 5;
  for (int step = 0; step < steps; step++) {
    double mine = rank + step, theirs = 0;
    MPI_Allreduce(&mine, &theirs, 1, MPI_DOUBLE, MPI_SUM, inter);
    sum += theirs;
  }
  printf("rank %d: %g\n", rank, sum);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}

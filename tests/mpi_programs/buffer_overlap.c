/* buffer_overlap.c: a running sum over a window, written as users do: the
 * all-reduce's receive buffer is the send buffer shifted by one element,
 * not MPI_IN_PLACE. MPI forbids the aliasing (the result can overwrite
 * input not yet read); `vqcheck watch` must name it at the MPI_Allreduce
 * line on every rank. The correct twin's reduce into a separate buffer
 * is clean. Run on 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double window[9], out[8];
  for (int i = 0; i < 9; i++) window[i] = rank + i;
  MPI_Allreduce(window, out, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(window, window + 1, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}

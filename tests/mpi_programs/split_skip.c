/* split_skip.c: the odd ranks' communicator (from MPI_Comm_split) runs an
 * all-reduce that rank 3 skips: rank 1 waits in it forever. `vqcheck
 * watch --timeout T` must report a deadlock in that communicator naming
 * rank 3, within T + 5 s, and leave nothing running. Run on 4 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int x = rank, y = 0;
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, half);
  if (rank != 3) /* the bug: rank 3 takes another path */
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, half);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}

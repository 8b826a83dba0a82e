/* op_swap.c: rank 0 calls MPI_Barrier where the other ranks call
 * MPI_Bcast, and the other way round next: the collectives are swapped on
 * one rank. Without strict mode the job hangs (rank 0 waits in the barrier,
 * the others in the broadcast); in strict mode the calls are refused before
 * any data moves. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x[4] = {1, 2, 3, 4};
  if (rank == 0) {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(x, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  } else {
    MPI_Bcast(x, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  printf("rank %d: %g\n", rank, x[3]);
  MPI_Finalize();
  return 0;
}

/* abort_call.c: rank 1 gives up with MPI_Abort(MPI_COMM_WORLD, 3) while
 * rank 0 waits in a barrier. `vqcheck watch` must report a rank_failure
 * naming rank 1, "it called MPI_Abort (error code 3) at abort_call.c:13".
 * 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int bad = rank == 1; /* a check the program makes of its own input */
  if (bad)
    MPI_Abort(MPI_COMM_WORLD, 3);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}

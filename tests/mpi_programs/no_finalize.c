/* no_finalize.c: rank 1 returns from main without MPI_Finalize (rank 0
 * calls it). MPI calls that an abnormal end; `vqcheck watch` must report
 * a rank_failure saying rank 1 exited without calling MPI_Finalize, never
 * a guess at a kill. 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) return 0; /* the bug */
  MPI_Finalize();
  return 0;
}

/* pingpong.c: ranks 0 and 1 exchange messages for SECONDS (argument,
 * default 6) with no collective at all, the others only start and end.
 * Correct: under `vqcheck watch --timeout 3` every message that moves is
 * progress, so it is no hang, and a run whose every rank finished is
 * checked (crashes, hangs, buffers) with no collective to compare: exit
 * 0. Run on 2 or more ranks. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const double seconds = argc > 1 ? atof(argv[1]) : 6.0;
  double ball = 0;
  int go = 1;
  const double t0 = MPI_Wtime();
  while (go && rank < 2) {
    if (rank == 0) {
      go = MPI_Wtime() - t0 < seconds;
      MPI_Send(&go, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
      if (!go) break;
      MPI_Send(&ball, 1, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD);
      MPI_Recv(&ball, 1, MPI_DOUBLE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&go, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (!go) break;
      MPI_Recv(&ball, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      ball += 1;
      MPI_Send(&ball, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD);
    }
  }
  MPI_Finalize();
  return ball < 0;
}

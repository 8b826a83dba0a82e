/* bcast_recv.c: a coordinator broadcasts the settings, then collects each
 * worker's first result; a worker sends that result as soon as it has it,
 * before it takes part in the broadcast. It runs with Open MPI, whose
 * broadcast of a few bytes returns at the root before the workers enter
 * it; MPI does not promise that (a broadcast may wait for every member),
 * and where it waits, the coordinator waits in MPI_Bcast for the workers
 * and the workers in MPI_Send for the coordinator's MPI_Recv. `vqcheck
 * watch` makes rooted collectives wait for every member by default: a
 * deadlock naming rank 0's MPI_Bcast (line 25) and the workers' MPI_Send
 * (line 35). 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double settings[4] = {0};
  if (rank == 0) {
    settings[0] = 0.5;
    settings[1] = 100;
    double total = 0;
    /* the bug: the workers send before they join this broadcast */
    MPI_Bcast(settings, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    for (int r = 1; r < size; r++) {
      double first = 0;
      MPI_Recv(&first, 1, MPI_DOUBLE, r, 3, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      total += first;
    }
    printf("total %g\n", total);
  } else {
    const double first = rank * 1.5; /* a result before the settings */
    MPI_Send(&first, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD);
    MPI_Bcast(settings, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}

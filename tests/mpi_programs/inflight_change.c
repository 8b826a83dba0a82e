/* inflight_change.c: buffers changed while MPI still owns them. A
 * coordinator broadcasts its settings with MPI_Ibcast and, overlapping,
 * already adjusts them before the wait (the bug on line 22); the worker
 * streams 3 results to it through a persistent send whose buffer the
 * second round changes before its wait (line 39). The MPI_Iallreduce in
 * between, and the refills after a wait, are correct. Each finding is
 * told at the call whose request owned the buffer: the MPI_Ibcast (line
 * 20) on rank 0, the MPI_Send_init (line 34) on rank 1. 2 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  double settings[4] = {0};
  if (rank == 0) settings[0] = 0.5;
  MPI_Request req;
  MPI_Ibcast(settings, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req);
  if (rank == 0)
    settings[1] = 2 * settings[0]; /* the bug: the broadcast may not have
                                      read it yet */
  MPI_Wait(&req, MPI_STATUS_IGNORE);

  double local = rank + 1.0, total = 0;
  MPI_Iallreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                 &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);

  double result = 0;
  MPI_Request stream;
  if (rank == 1) {
    MPI_Send_init(&result, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, &stream);
    for (int round = 0; round < 3; round++) {
      result = round * total;
      MPI_Start(&stream);
      if (round == 1)
        result += 1; /* the bug: the started send still owns it */
      MPI_Wait(&stream, MPI_STATUS_IGNORE);
    }
  } else {
    MPI_Recv_init(&result, 1, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD, &stream);
    for (int round = 0; round < 3; round++) {
      MPI_Start(&stream);
      MPI_Wait(&stream, MPI_STATUS_IGNORE);
      printf("round %d: %g\n", round, result);
    }
  }
  MPI_Request_free(&stream);
  MPI_Finalize();
  return 0;
}

/* rma_origin.c: a rank fetches a neighbour's value and sends a reply
 * from the same buffer in one fence epoch (the bug on line 24: the put reads
 * `cell`, which the get on line 23 writes at a moment the program does not
 * know), then puts a total and changes it before the closing fence (the bug
 * on line 31: MPI may send the old value, the new one or a mix). 2 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long slots[4] = {rank, 0, 0, 0};
  MPI_Win win;
  MPI_Win_create(slots, sizeof slots, sizeof(long), MPI_INFO_NULL,
                 MPI_COMM_WORLD, &win);
  const int peer = (rank + 1) % size;
  long cell = 0, total = 0;

  MPI_Win_fence(0, win);
  if (rank == 0) {
    MPI_Get(&cell, 1, MPI_LONG, peer, 0, 1, MPI_LONG, win);
    MPI_Put(&cell, 1, MPI_LONG, peer, 1, 1, MPI_LONG, win);
  }
  MPI_Win_fence(0, win);

  MPI_Win_fence(0, win);
  if (rank == 0) {
    total = 42;
    MPI_Put(&total, 1, MPI_LONG, peer, 2, 1, MPI_LONG, win);
    total = 0; /* reused too early */
  }
  MPI_Win_fence(0, win);
  printf("rank %d: %ld %ld %ld\n", rank, slots[0], slots[1], slots[2]);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}

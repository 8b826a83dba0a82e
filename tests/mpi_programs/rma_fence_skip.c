/* rma_fence_skip.c: a fence that one rank skips. Ranks exchange values
 * through a window between fences; rank 2 has nothing to send in the last
 * round and leaves the loop before its closing fence (the bug on line
 * 26), so ranks 0 and 1 wait in MPI_Win_fence (line 28) for rank 2,
 * which went on to MPI_Win_free (line 31). 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int *slot;
  MPI_Win win;
  MPI_Win_allocate(sizeof *slot, sizeof *slot, MPI_INFO_NULL,
                   MPI_COMM_WORLD, &slot, &win);
  *slot = 0;
  int sent = 0;
  for (int round = 0; round < 3; round++) {
    MPI_Win_fence(0, win);
    const int value = rank * 10 + round;
    if (!(rank == 2 && round == 2))
      MPI_Put(&value, 1, MPI_INT, (rank + 1) % size, 0, 1, MPI_INT, win);
    else
      break; /* the bug: its closing fence is skipped */
    sent++;
    MPI_Win_fence(0, win);
  }
  printf("rank %d: sent %d, got %d\n", rank, sent, *slot);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}

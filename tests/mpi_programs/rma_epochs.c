/* rma_epochs.c: a fence phase, then a passive-target update, then a fence
 * phase again. The fence that ends the first phase (line 28) does not say
 * that no fence epoch follows, so the lock epoch on line 32 opens inside
 * the fence epoch that line 28 opened and line 39 closes: two kinds of
 * epoch at once on one window (the bug). With "nosucceed" as argument the
 * fences say so (MPI_MODE_NOSUCCEED, then MPI_MODE_NOPRECEDE): correct.
 * 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int asserted = argc > 1 && strcmp(argv[1], "nosucceed") == 0;
  int cells[4] = {0};
  MPI_Win win;
  MPI_Win_create(cells, sizeof cells, sizeof(int), MPI_INFO_NULL,
                 MPI_COMM_WORLD, &win);
  const int right = (rank + 1) % size;
  int mine = rank + 1;

  /* phase 1: fences */
  MPI_Win_fence(0, win);
  MPI_Put(&mine, 1, MPI_INT, right, 0, 1, MPI_INT, win);
  MPI_Win_fence(asserted ? MPI_MODE_NOSUCCEED : 0, win);

  /* phase 2: rank 0 updates rank 1 under a lock */
  if (rank == 0) {
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
    MPI_Put(&mine, 1, MPI_INT, 1, 1, 1, MPI_INT, win);
    MPI_Win_unlock(1, win);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* phase 3: fences again */
  MPI_Win_fence(asserted ? MPI_MODE_NOPRECEDE : 0, win);
  MPI_Put(&mine, 1, MPI_INT, right, 2, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  printf("rank %d: %d %d %d\n", rank, cells[0], cells[1], cells[2]);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}

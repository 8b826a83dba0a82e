/* rma_unlock.c: one-sided communication on a window. Each round, every
 * rank puts its value into its right neighbour's window between two
 * fences (correct); then rank 0 also deposits a final total into rank 1's
 * window in a passive-target epoch and forgets MPI_Win_unlock before
 * MPI_Win_free (the bug on line 30: the put may never reach rank 1, and
 * MPI requires every epoch closed before the window is freed). 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double slot[2] = {0, 0};
  MPI_Win win;
  MPI_Win_create(slot, sizeof slot, sizeof(double), MPI_INFO_NULL,
                 MPI_COMM_WORLD, &win);
  double mine = rank + 1.0;
  for (int round = 0; round < 3; round++) {
    MPI_Win_fence(0, win);
    MPI_Put(&mine, 1, MPI_DOUBLE, (rank + 1) % size, 0, 1, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    mine += slot[0];
  }
  printf("rank %d: %g\n", rank, mine);
  if (rank == 0) {
    double total = mine;
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
    MPI_Put(&total, 1, MPI_DOUBLE, 1, 1, 1, MPI_DOUBLE, win);
    /* the bug: no MPI_Win_unlock(1, win) */
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}

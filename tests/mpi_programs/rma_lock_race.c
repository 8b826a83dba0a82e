/* rma_lock_race.c: passive-target updates of a shared board. Every rank
 * holds a shared lock on all windows for the whole run. Rank 0 posts its
 * result into rank 1's board and then waits at a barrier, believing the
 * barrier makes the put visible; rank 2 writes the same cell after that
 * barrier. A barrier does not complete an RMA operation: rank 0's put is
 * still in flight until its MPI_Win_flush or MPI_Win_unlock_all, so the
 * two puts (lines 28 and 33) race. With "flush" as argument rank 0
 * flushes before the barrier: correct. 3 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int flush = argc > 1 && strcmp(argv[1], "flush") == 0;
  double *board;
  MPI_Win win;
  MPI_Win_allocate(4 * sizeof(double), sizeof(double), MPI_INFO_NULL,
                   MPI_COMM_WORLD, &board, &win);
  for (int i = 0; i < 4; i++) board[i] = 0;
  MPI_Barrier(MPI_COMM_WORLD);

  MPI_Win_lock_all(0, win);
  double mine = 1.5 * (rank + 1);
  if (rank == 0) {
    MPI_Put(&mine, 1, MPI_DOUBLE, 1, 2, 1, MPI_DOUBLE, win);
    if (flush) MPI_Win_flush(1, win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 2)
    MPI_Put(&mine, 1, MPI_DOUBLE, 1, 2, 1, MPI_DOUBLE, win);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_unlock_all(win);

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1) printf("cell 2: %g\n", board[2]);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}

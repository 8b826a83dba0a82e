/* rma_put_race.c: a histogram gathered with one-sided puts. Every rank
 * owns a slot of rank 0's window and puts its count there between two
 * fences (correct); then ranks 1 and 2 both report their maximum into the
 * same "max" slot of rank 0 in one fence epoch (the bug on lines 33 and
 * 35: two puts to one location with nothing ordering them, so the window
 * ends with either value). 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int table[8] = {0}; /* slots 0..size-1: counts; slot 7: the maximum */
  MPI_Win win;
  MPI_Win_create(table, sizeof table, sizeof(int), MPI_INFO_NULL,
                 MPI_COMM_WORLD, &win);
  int count = 10 * (rank + 1), biggest = 100 + rank;
  int pair[2] = {count, biggest};

  MPI_Win_fence(0, win);
  MPI_Put(&count, 1, MPI_INT, 0, rank, 1, MPI_INT, win);
  MPI_Win_fence(0, win);
  if (rank == 0) {
    int sum = 0;
    for (int r = 0; r < size; r++) sum += table[r];
    printf("total count %d\n", sum);
  }

  MPI_Win_fence(0, win);
  if (rank == 1)
    MPI_Put(&biggest, 1, MPI_INT, 0, 7, 1, MPI_INT, win);
  else if (rank == 2) /* its count beside it, in slot 6 */
    MPI_Put(pair, 2, MPI_INT, 0, 6, 2, MPI_INT, win);
  MPI_Win_fence(0, win);
  if (rank == 0) printf("max %d\n", table[7]);

  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}

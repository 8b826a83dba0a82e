/* rma_memory.c: a window whose memory does not live as long as the
 * window. make_window() exposes an array local to itself (the bug on
 * line 16: its frame is gone once it returns, and the fences in main use
 * the window over other calls' locals). With "null" as argument, main
 * makes the window itself and rank 1 exposes memory it never allocated
 * (line 30: a NULL pointer with 64 bytes). 2 ranks. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static double *table; /* set when the memory is allocated: never */

/* (noinline: a function of its own, as in a library, at any -O) */
__attribute__((noinline)) static void make_window(MPI_Win *win) {
  double local[8] = {0};
  MPI_Win_create(local, sizeof local, sizeof(double), MPI_INFO_NULL,
                 MPI_COMM_WORLD, win);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int null = argc > 1 && strcmp(argv[1], "null") == 0;
  double cells[8] = {0};
  MPI_Win win;
  if (!null)
    make_window(&win);
  else
    MPI_Win_create(rank == 1 ? table : cells, 8 * sizeof(double),
                   sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  /* (no put: into rank 1's returned frame it crashes rank 1) */
  MPI_Win_fence(0, win);
  MPI_Win_fence(0, win);
  MPI_Win_free(&win);
  printf("rank %d done: %g\n", rank, cells[3]);
  MPI_Finalize();
  return 0;
}

/* rma_loop.c: N one-double puts into the right neighbour's window, in
 * fence epochs of 100 puts (each to a cell of its own), timed with
 * MPI_Wtime, for what the interposer's RMA checks cost per operation
 * (bench/bench_mpi_interposer.py --program rma_loop; docs/mpi.md
 * "What it costs"): rank 0 prints "ns_per_call <value>", the time per
 * put with its share of the fences. Not a test: it times, it does not
 * check. usage: rma_loop [N] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define EPOCH 100

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long n = argc > 1 ? atol(argv[1]) : 100000;
  double cells[EPOCH] = {0}, x[EPOCH];
  for (int i = 0; i < EPOCH; i++) x[i] = rank + i;
  MPI_Win win;
  MPI_Win_create(cells, sizeof cells, sizeof(double), MPI_INFO_NULL,
                 MPI_COMM_WORLD, &win);
  const int right = (rank + 1) % size;
  for (int i = 0; i < 1000; i++) { /* warm up: 10 epochs */
    if (i % EPOCH == 0) MPI_Win_fence(0, win);
    MPI_Put(&x[i % EPOCH], 1, MPI_DOUBLE, right, i % EPOCH, 1, MPI_DOUBLE,
            win);
  }
  MPI_Win_fence(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; i++) {
    MPI_Put(&x[i % EPOCH], 1, MPI_DOUBLE, right, (int)(i % EPOCH), 1,
            MPI_DOUBLE, win);
    if (i % EPOCH == EPOCH - 1) MPI_Win_fence(0, win);
  }
  MPI_Win_fence(0, win);
  const double t = MPI_Wtime() - t0;
  if (rank == 0) printf("ns_per_call %.1f\n", t / (double)n * 1e9);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}

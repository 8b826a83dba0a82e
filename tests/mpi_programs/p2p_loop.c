/* p2p_loop.c: N rounds of one-double messages around a ring (each rank
 * posts an MPI_Irecv from its left, MPI_Sends to its right and waits; on
 * one rank it sends to itself), timed with MPI_Wtime, for the interposer's
 * per-message cost (bench/bench_mpi_interposer.py --program p2p_loop):
 * rank 0 prints "ns_per_call <value>" per round. Not a test: it times, it
 * does not check. usage: p2p_loop [N] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void round_trip(int left, int right) {
  double x = 1.0, y = 0.0;
  MPI_Request r;
  MPI_Irecv(&y, 1, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, &r);
  MPI_Send(&x, 1, MPI_DOUBLE, right, 5, MPI_COMM_WORLD);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  const long n = argc > 1 ? atol(argv[1]) : 100000;
  for (int i = 0; i < 1000; i++) round_trip(left, right); /* warm up */
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; i++) round_trip(left, right);
  const double t = MPI_Wtime() - t0;
  if (rank == 0) printf("ns_per_call %.1f\n", t / (double)n * 1e9);
  MPI_Finalize();
  return 0;
}

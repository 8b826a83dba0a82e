/* bcast_loop.c: N small broadcasts (one double from rank 0) timed with
 * MPI_Wtime, for what the interposer's synchronous rooted collectives cost
 * (bench/bench_mpi_interposer.py --program bcast_loop; docs/mpi.md
 * "Cost"): rank 0 prints "ns_per_call <value>". Not a test: it times, it
 * does not check. usage: bcast_loop [N] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long n = argc > 1 ? atol(argv[1]) : 100000;
  double x = 1.0;
  for (int i = 0; i < 1000; i++) /* warm up */
    MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; i++) MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  const double t = MPI_Wtime() - t0;
  if (rank == 0) printf("ns_per_call %.1f\n", t / (double)n * 1e9);
  MPI_Finalize();
  return 0;
}

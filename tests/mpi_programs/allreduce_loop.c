/* allreduce_loop.c: N small all-reduces (one double) timed with
 * MPI_Wtime, for the interposer's per-call cost (docs/mpi.md "Cost"):
 * rank 0 prints "ns_per_call <value>". Not a test: it times, it does not
 * check. usage: allreduce_loop [N] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long n = argc > 1 ? atol(argv[1]) : 100000;
  double x = 1.0, y = 0.0;
  for (int i = 0; i < 1000; i++) /* warm up */
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; i++)
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double t = MPI_Wtime() - t0;
  if (rank == 0) printf("ns_per_call %.1f\n", t / (double)n * 1e9);
  MPI_Finalize();
  return 0;
}

/* nb_blocking.c: a non-blocking collective on some ranks, the blocking
 * one on the others. MPI never matches MPI_Iallreduce with MPI_Allreduce
 * (MPI 4.1, 6.12): the program is wrong even where an MPI happens to pair
 * them. 3 ranks; rank 2 has no local work and takes the blocking branch. */
#include <mpi.h>
#include <stdio.h>

/* The world's sum of x; a rank with local work overlaps it with the
 * reduction. */
static double global_sum(double x, int has_work) {
  double sum = 0;
  if (has_work) {
    MPI_Request req;
    MPI_Iallreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  return sum;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* Correct: a non-blocking broadcast on every rank. */
  int seed = rank == 0 ? 42 : 0;
  MPI_Request req;
  MPI_Ibcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  const double total = global_sum(1.0, rank != 2);
  printf("rank %d: seed %d, total %g\n", rank, seed, total);
  MPI_Finalize();
  return 0;
}

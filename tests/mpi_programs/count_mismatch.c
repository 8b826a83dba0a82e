/* count_mismatch.c: rank 1 broadcasts a different count than the others
 * at one call site (its buffer size computed from its rank: a real bug
 * class). OpenMPI pairs the calls anyway (rank 1 receives fewer elements
 * than it asked for), so the program runs to its end; `vqcheck watch`
 * must report a collective_mismatch naming rank 1 at the MPI_Bcast line. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double params[8] = {0};
  int n = rank == 1 ? 8 : 4; /* the bug: rank 1's count */
  MPI_Bcast(params, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}

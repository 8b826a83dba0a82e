/* negative_count.c: rank 1 passes a count of -1 to MPI_Bcast (a length
 * computed from an empty range). MPI fails the call with MPI_ERR_COUNT
 * and, with the default error handler, aborts the job. `vqcheck watch`
 * must still write its report (its own record keeps a valid count) and
 * name rank 1's failure with MPI's error. Run on 2 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int first = 4, last = rank == 1 ? 3 : 8, data[8] = {0};
  MPI_Bcast(data, last - first, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}

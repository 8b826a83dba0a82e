/* crash.c: rank 1 dereferences a null pointer after the first all-reduce;
 * the others wait in the second. `vqcheck watch` must report a
 * rank_failure naming rank 1 (its signal), never a clean run. */
#include <mpi.h>
#include <stddef.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, x = 1, y = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 1) {
    volatile int *p = NULL;
    *p = 42; /* the bug */
  }
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}

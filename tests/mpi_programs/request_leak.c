/* request_leak.c: a non-blocking all-reduce whose request is never waited
 * on or tested before MPI_Finalize (its result is read from a buffer MPI
 * may not have filled). `vqcheck watch` must report it: a deadlock finding
 * at the MPI_Iallreduce line, "never completed". */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Request req;
  int x = 1, y = 0;
  MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
  MPI_Barrier(MPI_COMM_WORLD);
  printf("sum %d\n", y); /* the bug: no MPI_Wait(&req) before this */
  MPI_Finalize();
  return 0;
}

/* recv_cycle.c: a ring exchange written receive-first on every rank: each
 * rank waits in MPI_Recv for its left neighbour, which waits for its own,
 * and no one sends. `vqcheck watch --timeout T` must report a deadlock
 * naming each rank's MPI_Recv, peer and line ("rank 0 waits in MPI_Recv
 * from rank 2 (tag 7) at recv_cycle.c:15"), within T + 5 s. 3 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double mine = rank, left = 0;
  const int right = (rank + 1) % size, from = (rank + size - 1) % size;
  MPI_Recv(&left, 1, MPI_DOUBLE, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Send(&mine, 1, MPI_DOUBLE, right, 7, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}

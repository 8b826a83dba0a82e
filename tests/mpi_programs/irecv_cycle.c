/* irecv_cycle.c: recv_cycle.c written with non-blocking calls: every rank
 * posts an MPI_Irecv from its left neighbour and waits on it with MPI_Wait
 * before anyone sends. `vqcheck watch --timeout T` must report a deadlock
 * naming each rank's wait and the request it waits for ("rank 0 waits in
 * MPI_Wait for MPI_Irecv from rank 2 (tag 7) at irecv_cycle.c:18"), the
 * request's own line (17) in the detail, within T + 5 s. 3 ranks. */
#include <mpi.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double mine = rank, left = 0;
  const int right = (rank + 1) % size, from = (rank + size - 1) % size;
  MPI_Request req;
  MPI_Irecv(&left, 1, MPI_DOUBLE, from, 7, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE); /* the bug: send first, or Isend */
  MPI_Send(&mine, 1, MPI_DOUBLE, right, 7, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}

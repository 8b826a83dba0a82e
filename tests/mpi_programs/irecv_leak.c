/* irecv_leak.c: every rank posts an MPI_Irecv for a message no one sends,
 * never waits on it, tests it or frees it, and reaches MPI_Finalize. Its
 * correct neighbours (an MPI_Isend freed with MPI_Request_free and
 * received, an MPI_Irecv cancelled) are not findings. `vqcheck watch`
 * must report one deadlock finding at the MPI_Irecv of line 27, naming
 * every rank, "never completed". 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int right = (rank + 1) % size, from = (rank + size - 1) % size;
  int mine = rank, got = -1, never = -1, cancelled = -1;
  MPI_Request sent, gone, leaked;
  /* correct: a send let go, its message received */
  MPI_Isend(&mine, 1, MPI_INT, right, 1, MPI_COMM_WORLD, &sent);
  MPI_Request_free(&sent);
  MPI_Recv(&got, 1, MPI_INT, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  /* correct: a receive cancelled, then let go */
  MPI_Irecv(&cancelled, 1, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &gone);
  MPI_Cancel(&gone);
  MPI_Request_free(&gone);
  /* the bug: never waited on */
  MPI_Irecv(&never, 1, MPI_INT, from, 9, MPI_COMM_WORLD, &leaked);
  MPI_Barrier(MPI_COMM_WORLD);
  printf("rank %d got %d\n", rank, got);
  MPI_Finalize();
  return got == from ? 0 : 1;
}

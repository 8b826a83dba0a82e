/* lost_message.c: rank 0 sends two messages of tag 4 to rank 1, which
 * receives only the first; both reach MPI_Finalize (the second was small
 * enough to be sent eagerly, so no one hangs and MPI says nothing). Around
 * it, correct exchanges that must not be findings: a ring of
 * MPI_Sendrecv with MPI_STATUS_IGNORE, wildcard receives completed by
 * MPI_Waitall with MPI_STATUSES_IGNORE and by MPI_Waitany, MPI_BYTE
 * messages, and a message on a split communicator. `vqcheck watch` must
 * report one deadlock finding: rank 0 sent 2 messages to rank 1 (tag 4)
 * at line 48, rank 1 received only 1. 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, errs = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  /* correct: a ring of MPI_Sendrecv */
  double out = rank, in = -1;
  MPI_Sendrecv(&out, 1, MPI_DOUBLE, right, 1, &in, 1, MPI_DOUBLE, left, 1,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  errs += in != left;
  /* correct: everyone sends rank 0 two ints; it takes them from anyone */
  if (rank == 0) {
    int got[4] = {0};
    MPI_Request r[4];
    for (int i = 0; i < 2 * (size - 1); i++)
      MPI_Irecv(&got[i], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                MPI_COMM_WORLD, &r[i]);
    int idx;
    MPI_Waitany(2 * (size - 1), r, &idx, MPI_STATUS_IGNORE);
    MPI_Waitall(2 * (size - 1), r, MPI_STATUSES_IGNORE);
  } else {
    int v[2] = {rank, rank};
    MPI_Send(&v[0], 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
    MPI_Send(&v[1], 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
  }
  /* correct: bytes, on a communicator of the even and the odd ranks */
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  char bytes[8] = "vqcheck";
  if (rank == 0) MPI_Send(bytes, 8, MPI_BYTE, 1, 9, half);
  if (rank == 2) MPI_Recv(bytes, 8, MPI_BYTE, 0, 9, half, MPI_STATUS_IGNORE);
  /* the bug: two messages sent, one received */
  int a[2] = {7, 8}, b = 0;
  if (rank == 0)
    for (int i = 0; i < 2; i++) MPI_Send(&a[i], 1, MPI_INT, 1, 4, MPI_COMM_WORLD);
  if (rank == 1) MPI_Recv(&b, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return errs ? 1 : 0;
}

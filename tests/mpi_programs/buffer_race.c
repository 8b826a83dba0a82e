/* buffer_race.c: two uses of a buffer MPI still owns. Rank 0 changes the
 * buffer of an MPI_Isend (line 26) before its MPI_Wait; rank 1 receives
 * with MPI_Recv into the buffer of an MPI_Irecv still in flight (line
 * 37). Their correct twins are not findings: two MPI_Isend from one
 * buffer (both only read it), a buffer changed after its MPI_Wait, and
 * MPI_Irecv into separate halves of one array (all safe without MPI
 * buffering: each send is received in order). `vqcheck watch` must report
 * two lost_inplace findings: "changed the buffer of its MPI_Isend" at
 * buffer_race.c:26 (rank 0) and "MPI_Recv at buffer_race.c:37 ... of its
 * MPI_Irecv at buffer_race.c:36" (rank 1). 2 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, a[64] = {0}, b[64] = {0};
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Request r[2];
  if (rank == 0) {
    /* correct: one buffer sent twice at once, changed only after */
    MPI_Isend(a, 32, MPI_INT, 1, 1, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(a, 32, MPI_INT, 1, 2, MPI_COMM_WORLD, &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    a[0] = 1;
    /* the bug: changed while in flight */
    MPI_Isend(a, 64, MPI_INT, 1, 3, MPI_COMM_WORLD, &r[0]);
    a[1] = 2;
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    MPI_Send(b, 64, MPI_INT, 1, 4, MPI_COMM_WORLD);
    MPI_Send(b, 64, MPI_INT, 1, 5, MPI_COMM_WORLD);
  } else {
    MPI_Irecv(a, 32, MPI_INT, 0, 1, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(a + 32, 32, MPI_INT, 0, 2, MPI_COMM_WORLD, &r[1]);
    MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    MPI_Recv(a, 64, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Irecv(b, 64, MPI_INT, 0, 4, MPI_COMM_WORLD, &r[0]);
    MPI_Recv(b, 64, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
